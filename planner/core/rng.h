/* rng: a small deterministic generator (xoshiro256**, seeded by splitmix64) so that the same
 * --seed gives the same file on every machine and libc. Not for cryptography. */
#ifndef PF_RNG_H
#define PF_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} pf_rng_t;

void pf_rng_seed(pf_rng_t *rng, uint64_t seed);
uint64_t pf_rng_next(pf_rng_t *rng);
double pf_rng_uniform(pf_rng_t *rng);                 /* [0, 1) with 53 random bits */
double pf_rng_range(pf_rng_t *rng, double lo, double hi);
uint64_t pf_rng_below(pf_rng_t *rng, uint64_t n);     /* uniform in [0, n), n > 0 */

#endif
