#include "planner/core/rng.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void pf_rng_seed(pf_rng_t *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&seed);
}

uint64_t pf_rng_next(pf_rng_t *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double pf_rng_uniform(pf_rng_t *rng)
{
    return (double)(pf_rng_next(rng) >> 11) * 0x1.0p-53;
}

double pf_rng_range(pf_rng_t *rng, double lo, double hi)
{
    return lo + (hi - lo) * pf_rng_uniform(rng);
}

uint64_t pf_rng_below(pf_rng_t *rng, uint64_t n)
{
    /* Rejection keeps the draw unbiased for any n. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = pf_rng_next(rng);
    while (x >= limit);
    return x % n;
}
