/* interleave: Megatron-LM's interleaved 1F1B order, and pipelines of chunks simulated by hand
 * ([Narayanan21] Sec. 2.2). */
#include "planner/sim/interleave.h"
#include "planner/sim/simulate.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <string.h>

/* D devices, every link 100 Gb/s, `lat_us` latency, two devices per host. */
static pf_cluster_t *flat_cluster(int D, double lat_us)
{
    pf_cluster_t *c = pf_cluster_new("flat", D);
    for (int i = 0; i < D; i++) {
        pf_device_t d = {.id = i, .host = i / 2, .mem_bytes = 80e9};
        pf_cluster_set_device(c, i, &d);
        for (int j = 0; j < i; j++)
            pf_cluster_set_link(c, i, j, 100, lat_us);
    }
    return c;
}

typedef struct {
    pf_simulate_input_t in;
    pf_simulate_stage_t stage[8];
    int dev[8];
} pipe_t;

/* P ranks x V chunks (R = T = 1): chunk c of rank i is stage c P + i on device i; every chunk
 * f, b, 100 static bytes and 10 activation bytes per micro-batch. */
static void pipe_init(pipe_t *p, const pf_cluster_t *c, int P, int V, int MB, double f, double b)
{
    memset(p, 0, sizeof *p);
    p->in = (pf_simulate_input_t){.stages = P * V, .replicas = 1, .tp = 1, .microbatches = MB,
                                  .buckets = 1, .virtual_stages = V,
                                  .schedule = PF_SCHEDULE_1F1B, .stage = p->stage, .cluster = c};
    for (int s = 0; s < P * V; s++) {
        p->dev[s] = s % P;
        p->stage[s] = (pf_simulate_stage_t){.fwd_ms = f, .bwd_ms = b, .static_bytes = 100,
                                            .act_bytes = 10, .devices = &p->dev[s]};
    }
}

/* p = 2, v = 2, m = 4 (F: forward, B: backward, c: chunk). Rank 0 warms up with (2 - 0 - 1) 2 +
 * (2 - 1) 2 = 4 forwards, rank 1 with 2; the k-th forward is chunk (k mod 4) / 2, micro-batch
 * k / 4 x 2 + k mod 2, backwards run the chunks from the last:
 *   rank 0: F0c0 F1c0 F0c1 F1c1 | F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 B1c0 | B2c1 B3c1 B2c0 B3c0
 *   rank 1: F0c0 F1c0 | F0c1 B0c1 F1c1 B1c1 F2c0 B0c0 F3c0 B1c0 F2c1 B2c1 F3c1 B3c1 | B2c0 B3c0
 * Entries: chunk c micro-batch m is c 4 + m, a backward -1 - that. V = 1 is 1F1B: S = 3, MB = 4,
 * stage 0: two warm-up forwards, F2 B0 F3 B1, then B2 B3. */
static void test_order(void)
{
    int want0[] = {0, 1, 4, 5, 2, -5, 3, -6, 6, -1, 7, -2, -7, -8, -3, -4};
    int want1[] = {0, 1, 4, -5, 5, -6, 2, -1, 3, -2, 6, -7, 7, -8, -3, -4};
    int got[16];
    pf_interleave_order(PF_SCHEDULE_1F1B, 2, 2, 4, 0, got);
    CU_ASSERT_EQUAL(memcmp(got, want0, sizeof want0), 0);
    pf_interleave_order(PF_SCHEDULE_GPIPE, 2, 2, 4, 1, got); /* V > 1: the schedule is ignored */
    CU_ASSERT_EQUAL(memcmp(got, want1, sizeof want1), 0);
    CU_ASSERT_EQUAL(pf_interleave_warmup(2, 2, 4, 0), 4);
    CU_ASSERT_EQUAL(pf_interleave_warmup(2, 2, 4, 1), 2);
    CU_ASSERT_EQUAL(pf_interleave_warmup(2, 2, 2, 1), 4); /* m == p: every forward first */
    CU_ASSERT_EQUAL(pf_interleave_warmup(4, 3, 8, 0), 14); /* 3 x 2 + 2 x 4 */
    int want_1f1b[] = {0, 1, 2, -1, 3, -2, -3, -4};
    pf_interleave_order(PF_SCHEDULE_1F1B, 3, 1, 4, 0, got);
    CU_ASSERT_EQUAL(memcmp(got, want_1f1b, sizeof want_1f1b), 0);
}

static pf_simulate_result_t *sim(pipe_t *p)
{
    char err[256];
    pf_simulate_result_t *r = NULL;
    int rc = pf_simulate(&p->in, &r, err, sizeof err);
    CU_ASSERT_EQUAL_FATAL(rc, PF_OK);
    return r;
}

/* The orders above with unit times (f = b = 1 per chunk) and free communication, worked by
 * hand: rank 0 runs F0c0 0-1, F1c0 1-2, F0c1 2-3, F1c1 3-4, F2c0 4-5, B0c1 5-6 (after rank 1's
 * B0c1 4-5), F3c0 6-7, B1c1 7-8, F2c1 8-9, B0c0 9-10, F3c1 10-11, B1c0 11-12, idles for rank 1's
 * B2c1 (12-13), B2c1 13-14, B3c1 15-16, B2c0 16-17, B3c0 17-18. Step 18 = (m + (p - 1) / v) x
 * v (f + b) = 4.5 x 4; the bubble (p - 1)(f + b) = 2 per device, 1 - 32 / 36 = 1/9 ([Narayanan21]
 * eq. of Sec. 2.2: (p - 1) / (v m) = 1/8 of the ideal 16). Without interleaving (v = 1, stages of
 * f = b = 2): (m + p - 1)(2 + 2) = 20. In flight: rank 0 warm-up 4 + 1 = 5 chunks (static 2 x 100
 * + 5 x 10 bytes), rank 1 2 + 1 = 3. m = p = 2 (all forwards first): (2 + 1/2) x 4 = 10. */
static void test_step_by_hand(void)
{
    pf_cluster_t *c = flat_cluster(2, 0);
    pipe_t p;
    pipe_init(&p, c, 2, 2, 4, 1, 1);
    pf_simulate_result_t *r = sim(&p);
    PF_ASSERT_CLOSE(r->step_ms, 18, 1e-12);
    PF_ASSERT_CLOSE(r->bubble_fraction, 1.0 / 9, 1e-12);
    CU_ASSERT_EQUAL(r->ndevices, 2);
    PF_ASSERT_CLOSE(r->busy_ms[0], 16, 1e-12);
    PF_ASSERT_CLOSE(r->busy_ms[1], 16, 1e-12);
    CU_ASSERT_EQUAL(r->peak_inflight[0], 5);
    CU_ASSERT_EQUAL(r->peak_inflight[1], 3);
    PF_ASSERT_CLOSE(r->peak_mem_bytes[0], 250, 1e-12);
    PF_ASSERT_CLOSE(r->peak_mem_bytes[1], 230, 1e-12);
    pf_simulate_result_destroy(&r);
    pipe_init(&p, c, 2, 1, 4, 2, 2);
    r = sim(&p);
    PF_ASSERT_CLOSE(r->step_ms, 20, 1e-12);
    pf_simulate_result_destroy(&r);
    pipe_init(&p, c, 2, 2, 2, 1, 1);
    r = sim(&p);
    PF_ASSERT_CLOSE(r->step_ms, 10, 1e-12);
    pf_simulate_result_destroy(&r);
    pf_cluster_destroy(&c);
}

/* With transfers (1 ms latency each way, no bytes' time to speak of) every chunk boundary is a
 * hop, the wrap from rank 1's chunk 0 to rank 0's chunk 1 included: m = 4 micro-batches cross 3
 * boundaries forward and back, 24 transfers; v = 0 and v = 1 simulate the same. */
static void test_transfers(void)
{
    pf_cluster_t *c = flat_cluster(2, 1000);
    pipe_t p;
    pipe_init(&p, c, 2, 2, 4, 1, 1);
    for (int s = 0; s < 3; s++)
        p.stage[s].send_bytes = 8;
    p.in.timeline = 1;
    pf_simulate_result_t *r = sim(&p);
    int sends = 0;
    for (int e = 0; e < r->nevents; e++)
        sends += r->events[e].kind == PF_EV_SEND;
    CU_ASSERT_EQUAL(sends, 24);
    CU_ASSERT(r->step_ms > 18);
    pf_simulate_result_destroy(&r);
    pipe_init(&p, c, 2, 1, 4, 1, 2);
    p.stage[0].send_bytes = 8;
    r = sim(&p);
    double one = r->step_ms;
    pf_simulate_result_destroy(&r);
    p.in.virtual_stages = 0;
    r = sim(&p);
    CU_ASSERT_EQUAL(r->step_ms, one);
    pf_simulate_result_destroy(&r);
    pf_cluster_destroy(&c);
}

/* m not a multiple of p, chunks on other devices, stages not p v: refused. */
static void test_bad_input(void)
{
    pf_cluster_t *c = flat_cluster(4, 0);
    pipe_t p;
    char err[256];
    pf_simulate_result_t *r = NULL;
    pipe_init(&p, c, 2, 2, 3, 1, 1);
    CU_ASSERT_EQUAL(pf_simulate(&p.in, &r, err, sizeof err), PF_EINPUT);
    pipe_init(&p, c, 2, 2, 4, 1, 1);
    p.dev[3] = 3;
    CU_ASSERT_EQUAL(pf_simulate(&p.in, &r, err, sizeof err), PF_EINPUT);
    pipe_init(&p, c, 2, 2, 4, 1, 1);
    p.in.stages = 3;
    CU_ASSERT_EQUAL(pf_simulate(&p.in, &r, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NULL(r);
    pf_cluster_destroy(&c);
}

void pf_suite_interleave(void)
{
    CU_pSuite s = CU_add_suite("interleave", NULL, NULL);
    CU_add_test(s, "Megatron-LM's interleaved order, p = 2, v = 2, m = 4", test_order);
    CU_add_test(s, "interleaved step worked by hand: (m + (p - 1)/v) v (f + b)",
                test_step_by_hand);
    CU_add_test(s, "chunk boundaries are transfers; v = 0 and 1 agree", test_transfers);
    CU_add_test(s, "bad chunk layouts refused", test_bad_input);
}
