/* simbound: a pipeline worked by hand, the bound equal to the simulated step where the
 * communication is free, and below it on random pipelines with transfers, tensor parallelism,
 * replicas, buckets, ZeRO-3, interleaving and every schedule. */
#include "planner/sim/simbound.h"
#include "planner/sim/simulate.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdlib.h>
#include <string.h>

#define MAX_S 16
#define MAX_DEV 64

typedef struct {
    pf_simulate_input_t in;
    pf_simulate_stage_t stage[MAX_S];
    int dev[MAX_S][MAX_DEV];
    double xfer[MAX_S][8], repf[MAX_S][8], repb[MAX_S][8];
} pipe_t;

/* D devices, links of random bandwidth and latency (seed), two devices per host. */
static pf_cluster_t *cluster(int D, unsigned *seed)
{
    pf_cluster_t *c = pf_cluster_new("rnd", D);
    for (int i = 0; i < D; i++) {
        pf_device_t d = {.id = i, .host = i / 2, .mem_bytes = 80e9};
        pf_cluster_set_device(c, i, &d);
        for (int j = 0; j < i; j++)
            pf_cluster_set_link(c, i, j, 50 + rand_r(seed) % 950, rand_r(seed) % 20);
    }
    return c;
}

/* S = P V stages of R replicas x T ranks; rank i's chunks on devices (i R + r) T + k. */
static void pipe_init(pipe_t *p, const pf_cluster_t *c, int P, int V, int R, int T, int MB)
{
    memset(p, 0, sizeof *p);
    p->in = (pf_simulate_input_t){.stages = P * V, .replicas = R, .tp = T, .microbatches = MB,
                                  .buckets = 1, .virtual_stages = V,
                                  .schedule = PF_SCHEDULE_1F1B, .stage = p->stage, .cluster = c};
    for (int s = 0; s < P * V; s++) {
        p->stage[s] = (pf_simulate_stage_t){.fwd_ms = 1, .bwd_ms = 2, .devices = p->dev[s]};
        for (int i = 0; i < R * T; i++)
            p->dev[s][i] = (s % P) * R * T + i;
    }
}

static double simulated(const pf_simulate_input_t *in)
{
    char err[256];
    pf_simulate_result_t *r = NULL;
    int rc = pf_simulate(in, &r, err, sizeof err);
    CU_ASSERT_EQUAL_FATAL(rc, PF_OK);
    double ms = r->step_ms;
    pf_simulate_result_destroy(&r);
    return ms;
}

/* S = 2, MB = 2, 1F1B, f = 1, b = 2, optimizer 0.5, free links. Stage 0 runs F0 F1 B0 B1, stage
 * 1 F0 B0 F1 B1: s0 F0 0-1, s1 F0 1-2, s0 F1 1-2, s1 B0 2-4, s0 B0 4-6, s1 F1 4-5, s1 B1 5-7,
 * s0 B1 7-9, then its optimizer 9-9.5: (MB + S - 1)(f + b) + 0.5 = 9.5. A slower link (1 ms
 * each way) cannot make the simulation shorter: the bound stays 9.5, the step grows. The signal
 * schedule gives no bound. */
static void test_by_hand(void)
{
    unsigned seed = 1;
    pf_cluster_t *c = cluster(2, &seed);
    pipe_t p;
    pipe_init(&p, c, 2, 1, 1, 1, 2);
    for (int s = 0; s < 2; s++)
        p.stage[s].optimizer_ms = 0.5;
    PF_ASSERT_CLOSE(pf_simbound_step_ms(&p.in), 9.5, 1e-12);
    PF_ASSERT_CLOSE(simulated(&p.in), 9.5, 1e-12);
    p.stage[0].xfer_ms = p.xfer[0];
    p.stage[0].send_bytes = 1;
    p.xfer[0][0] = 1;
    PF_ASSERT_CLOSE(pf_simbound_step_ms(&p.in), 9.5, 1e-12);
    CU_ASSERT(simulated(&p.in) > 9.5 + 1);
    p.in.schedule = PF_SCHEDULE_SIGNAL;
    CU_ASSERT_EQUAL(pf_simbound_step_ms(&p.in), 0);
    pf_cluster_destroy(&c);
}

/* Random durations of every stage (and, mixed, of every replica). */
static void random_times(pipe_t *p, unsigned *seed, int mixed)
{
    for (int s = 0; s < p->in.stages; s++) {
        pf_simulate_stage_t *st = &p->stage[s];
        st->fwd_ms = 0.5 + rand_r(seed) % 100 / 20.0;
        st->bwd_ms = 0.5 + rand_r(seed) % 100 / 10.0;
        st->recompute_ms = rand_r(seed) % 2 ? st->fwd_ms : 0;
        st->tp_fwd_ms = p->in.tp > 1 ? rand_r(seed) % 10 / 10.0 : 0;
        st->tp_bwd_ms = p->in.tp > 1 ? rand_r(seed) % 10 / 10.0 : 0;
        st->optimizer_ms = rand_r(seed) % 3 * 0.1;
        for (int r = 0; mixed && r < p->in.replicas; r++) {
            p->repf[s][r] = st->fwd_ms * (1 + r * 0.25);
            p->repb[s][r] = st->bwd_ms * (1 + r * 0.25);
        }
        st->rep_fwd_ms = mixed ? p->repf[s] : NULL;
        st->rep_bwd_ms = mixed ? p->repb[s] : NULL;
    }
}

static const pf_training_schedule_t orders[] = {PF_SCHEDULE_GPIPE, PF_SCHEDULE_1F1B,
                                                PF_SCHEDULE_EAGER_1F1B};

/* One replica, nothing sent: every transfer takes no time and there is no all-reduce, so the
 * simulation is the compute tasks' longest path, the bound itself (to rounding). */
static void test_equal_without_comm(void)
{
    unsigned seed = 11;
    for (int trial = 0; trial < 150; trial++) {
        int P = 1 + (int)(rand_r(&seed) % 4), V = 1 + (int)(rand_r(&seed) % 3);
        int T = 1 + (int)(rand_r(&seed) % 2), MB = P * (1 + (int)(rand_r(&seed) % 4));
        if (P < 2)
            V = 1; /* interleaving needs two ranks */
        pf_cluster_t *c = cluster(P * T, &seed);
        pipe_t p;
        pipe_init(&p, c, P, V, 1, T, MB);
        random_times(&p, &seed, trial % 5 == 0);
        p.in.schedule = orders[trial % 3];
        double b = pf_simbound_step_ms(&p.in), sim = simulated(&p.in);
        CU_ASSERT(b > 0);
        PF_ASSERT_CLOSE(b, sim, 1e-12);
        pf_cluster_destroy(&c);
    }
}

/* Transfers (postal or resharding times), replicas with their all-reduce in buckets, ZeRO-3:
 * the bound never exceeds the simulated step, and is positive. */
static void test_below_with_comm(void)
{
    unsigned seed = 23;
    int strict = 0;
    for (int trial = 0; trial < 200; trial++) {
        int P = 1 + (int)(rand_r(&seed) % 4), V = 1 + (int)(rand_r(&seed) % 3);
        int R = 1 + (int)(rand_r(&seed) % 3), T = 1 + (int)(rand_r(&seed) % 2);
        int MB = P * (1 + (int)(rand_r(&seed) % 3));
        if (P < 2)
            V = 1;
        pf_cluster_t *c = cluster(P * R * T, &seed);
        pipe_t p;
        pipe_init(&p, c, P, V, R, T, MB);
        random_times(&p, &seed, trial % 4 == 0);
        p.in.buckets = 1 + (int)(rand_r(&seed) % 3);
        p.in.zero = trial % 7 == 0 ? 3 : 0;
        for (int s = 0; s < p.in.stages; s++) {
            p.stage[s].send_bytes = rand_r(&seed) % 100 * 1e7;
            p.stage[s].param_bytes = rand_r(&seed) % 100 * 1e8;
            for (int r = 0; trial % 3 == 0 && r < R; r++)
                p.xfer[s][r] = rand_r(&seed) % 30 / 10.0;
            p.stage[s].xfer_ms = trial % 3 == 0 ? p.xfer[s] : NULL;
        }
        p.in.schedule = orders[trial % 3];
        double b = pf_simbound_step_ms(&p.in), sim = simulated(&p.in);
        CU_ASSERT(b > 0);
        CU_ASSERT(b <= sim);
        strict += b < sim * (1 - 1e-6);
        pf_cluster_destroy(&c);
    }
    CU_ASSERT(strict > 100); /* the communication shows: the bound is not the step itself */
}

void pf_suite_simbound(void)
{
    CU_pSuite s = CU_add_suite("simbound", NULL, NULL);
    CU_add_test(s, "two stages by hand; links cannot lower it; signal gives none", test_by_hand);
    CU_add_test(s, "equal to the simulated step without communication", test_equal_without_comm);
    CU_add_test(s, "at most the simulated step with communication", test_below_with_comm);
}
