#include "proto/clock.h"
#include "planner/core/util.h"

#include <math.h>

double pf_clock_now(const pf_clock_t *c)
{
    return c && c->now_s ? c->now_s(c->ctx) : pf_now_s();
}

static double manual_now_s(void *ctx)
{
    pf_clock_manual_t *m = ctx;
    return (double)atomic_load(&m->now_us) / 1e6;
}

pf_clock_t pf_clock_manual_init(pf_clock_manual_t *m, double t_s)
{
    atomic_init(&m->now_us, llround(t_s * 1e6));
    return (pf_clock_t){manual_now_s, m};
}

pf_clock_t pf_clock_manual(pf_clock_manual_t *m)
{
    return (pf_clock_t){manual_now_s, m};
}

void pf_clock_manual_advance(pf_clock_manual_t *m, double dt_s)
{
    atomic_fetch_add(&m->now_us, llround(dt_s * 1e6));
}
