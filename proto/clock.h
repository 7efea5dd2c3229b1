/* clock: where the broker and the worker read the time. Their heartbeats, liveness and job
 * deadlines are decisions about time; taking the clock from options lets a test move time by
 * hand, so those decisions do not depend on how loaded the machine running the test is. */
#ifndef PF_CLOCK_H
#define PF_CLOCK_H

#include <stdatomic.h>

typedef struct {
    double (*now_s)(void *ctx); /* NULL: the monotonic clock (pf_now_s) */
    void *ctx;
} pf_clock_t;

double pf_clock_now(const pf_clock_t *c);

/* A clock that moves only when told (tests): microseconds, shared between threads. */
typedef struct {
    atomic_llong now_us;
} pf_clock_manual_t;

/* Sets m to t_s and returns a pf_clock_t reading it. */
pf_clock_t pf_clock_manual_init(pf_clock_manual_t *m, double t_s);
/* A pf_clock_t reading m as it is (a second reader of the same clock). */
pf_clock_t pf_clock_manual(pf_clock_manual_t *m);
void pf_clock_manual_advance(pf_clock_manual_t *m, double dt_s);

#endif
