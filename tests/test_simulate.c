/* simulate: hand-worked pipeline timelines, bounds checked on random pipelines, the builder from
 * a plan, one GPT layer against its H100 measurement, and the two commands. */
#include "planner/core/json.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/sim/draw.h"
#include "planner/sim/simulate.h"
#include "planner/sim/simulate_check.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    pf_simulate_input_t in;
    pf_simulate_stage_t stage[8];
    int dev[8][16];
} pipe_t;

/* S stages x R replicas (T = 1), every stage f, b; replica r of stage s on device s R + r. */
static void pipe_init(pipe_t *p, const pf_cluster_t *c, int S, int R, int MB, double f, double b,
                      pf_training_schedule_t sched)
{
    memset(p, 0, sizeof *p);
    p->in = (pf_simulate_input_t){.stages = S, .replicas = R, .tp = 1, .microbatches = MB,
                             .buckets = 1, .schedule = sched, .timeline = 1,
                             .stage = p->stage, .cluster = c};
    for (int s = 0; s < S; s++) {
        p->stage[s] = (pf_simulate_stage_t){.fwd_ms = f, .bwd_ms = b, .devices = p->dev[s]};
        for (int r = 0; r < R; r++)
            p->dev[s][r] = s * R + r;
    }
}

static double step_of(pipe_t *p, pf_training_schedule_t sched)
{
    char err[256];
    pf_simulate_result_t *r = NULL;
    p->in.schedule = sched;
    int rc = pf_simulate(&p->in, &r, err, sizeof err);
    CU_ASSERT_EQUAL_FATAL(rc, PF_OK);
    double ms = r->step_ms;
    pf_simulate_result_destroy(&r);
    return ms;
}

/* Zero communication, equal stages: every schedule fills and drains the pipeline once,
 * step = (MB + S - 1) x (f + b), e.g. S = 4, MB = 8, f = 1, b = 2: 11 x 3 = 33 ms; the bubble is
 * (S - 1) / (MB + S - 1) = 3 / 11. Zhuang et al.: without communication eager-1F1B equals 1F1B. */
static void test_equal_stages_no_comm(void)
{
    pf_cluster_t *c = pf_test_flat_cluster(4, 100, 0);
    int stages[] = {2, 4}, mbs[] = {4, 8};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            int S = stages[i], MB = mbs[j];
            pipe_t p;
            pipe_init(&p, c, S, 1, MB, 1.0, 2.0, PF_SCHEDULE_1F1B);
            double want = (MB + S - 1) * 3.0;
            PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_GPIPE), want, 1e-12);
            PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_1F1B), want, 1e-12);
            PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_EAGER_1F1B), want, 1e-12);
            PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_SIGNAL), want, 1e-12);
            char err[256];
            pf_simulate_result_t *r = NULL;
            p.in.schedule = PF_SCHEDULE_1F1B;
            CU_ASSERT_EQUAL_FATAL(pf_simulate(&p.in, &r, err, sizeof err), PF_OK);
            PF_ASSERT_CLOSE(r->bubble_fraction, (S - 1.0) / (MB + S - 1.0), 1e-12);
            CU_ASSERT_EQUAL(r->ndevices, S);
            for (int d = 0; d < S; d++)
                PF_ASSERT_CLOSE(r->busy_ms[d], MB * 3.0, 1e-12);
            pf_simulate_result_destroy(&r);
        }
    pf_cluster_destroy(&c);
}

/* Peak memory: 1F1B stashes min(MB, S - s) micro-batches on stage s, GPipe all MB, eager-1F1B
 * min(MB, 2 (S - s) - 1). With static 1000 and act 10 bytes, stage 0 of S = 4, MB = 8 under
 * 1F1B: 1000 + 4 x 10. */
static void test_peak_memory(void)
{
    pf_cluster_t *c = pf_test_flat_cluster(4, 100, 0);
    char err[256];
    int mbs[] = {2, 8};
    for (int j = 0; j < 2; j++) {
        int S = 4, MB = mbs[j];
        pipe_t p;
        pipe_init(&p, c, S, 1, MB, 1.0, 2.0, PF_SCHEDULE_1F1B);
        for (int s = 0; s < S; s++) {
            p.stage[s].static_bytes = 1000;
            p.stage[s].act_bytes = 10;
        }
        pf_training_schedule_t sch[] = {PF_SCHEDULE_GPIPE, PF_SCHEDULE_1F1B,
                                        PF_SCHEDULE_EAGER_1F1B};
        for (int k = 0; k < 3; k++) {
            pf_simulate_result_t *r = NULL;
            p.in.schedule = sch[k];
            CU_ASSERT_EQUAL_FATAL(pf_simulate(&p.in, &r, err, sizeof err), PF_OK);
            for (int s = 0; s < S; s++) {
                int want = sch[k] == PF_SCHEDULE_GPIPE  ? MB
                           : sch[k] == PF_SCHEDULE_1F1B ? (MB < S - s ? MB : S - s)
                                                     : (MB < 2 * (S - s) - 1 ? MB : 2 * (S - s) - 1);
                CU_ASSERT_EQUAL(r->peak_inflight[s], want);
                PF_ASSERT_CLOSE(r->peak_mem_bytes[s], 1000 + 10.0 * want, 1e-12);
            }
            pf_simulate_result_destroy(&r);
        }
    }
    pf_cluster_destroy(&c);
}

/* Two stages of different speed, 1 ms transfers each way (1e9 bytes at 1000 GB/s):
 * stage 0 f = 1, b = 2; stage 1 f = 2, b = 4; MB = 2; 1F1B orders: stage 0 F0 F1 B0 B1, stage 1
 * F0 B0 F1 B1.
 *   stage 0: F0 [0,1]  send0 [1,2]  F1 [1,2]  send1 [2,3]
 *   stage 1: F0 [2,4]  B0 [4,8]  grad0 [8,9]  F1 [8,10]  B1 [10,14]  grad1 [14,15]
 *   stage 0: B0 [9,11]  B1 [15,17]                                     step 17 ms.
 * Without communication (signal): stage 1 F0 [1,3] B0 [3,7] F1 [7,9] B1 [9,13], stage 0 B1
 * [13,15]: 15 ms. */
static void test_unequal_stages_by_hand(void)
{
    pf_cluster_t *c = pf_test_flat_cluster(2, 1000, 0);
    pipe_t p;
    pipe_init(&p, c, 2, 1, 2, 1.0, 2.0, PF_SCHEDULE_1F1B);
    p.stage[1].fwd_ms = 2;
    p.stage[1].bwd_ms = 4;
    p.stage[0].send_bytes = 1e9;
    char err[256];
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simulate(&p.in, &r, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(r->step_ms, 17.0, 1e-12);
    PF_ASSERT_CLOSE(r->busy_ms[0], 6.0, 1e-12);
    PF_ASSERT_CLOSE(r->busy_ms[1], 12.0, 1e-12);
    PF_ASSERT_CLOSE(r->comm_busy_ms[0], 4.0, 1e-12);
    PF_ASSERT_CLOSE(r->bubble_fraction, 1 - 18.0 / 34.0, 1e-12);
    /* the events of device 0's compute stream, in order */
    double want[4][2] = {{0, 1}, {1, 2}, {9, 11}, {15, 17}};
    int n = 0;
    for (int i = 0; i < r->nevents; i++) {
        const pf_simulate_event_t *e = &r->events[i];
        if (e->device != 0 || e->stream != PF_STREAM_COMPUTE)
            continue;
        CU_ASSERT_FATAL(n < 4);
        PF_ASSERT_CLOSE(e->start_ms, want[n][0], 1e-12);
        PF_ASSERT_CLOSE(e->end_ms, want[n][1], 1e-12);
        CU_ASSERT_EQUAL(e->kind, n < 2 ? PF_EV_FWD : PF_EV_BWD);
        n++;
    }
    CU_ASSERT_EQUAL(n, 4);
    pf_simulate_result_destroy(&r);
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_SIGNAL), 15.0, 1e-12);
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_GPIPE), 17.0, 1e-12);
    pf_cluster_destroy(&c);
}

/* The send events of device dev (-1: of every device). */
static int sends(const pf_simulate_result_t *r, int dev)
{
    int n = 0;
    for (int i = 0; i < r->nevents; i++)
        n += r->events[i].kind == PF_EV_SEND && (dev < 0 || r->events[i].device == dev);
    return n;
}

/* How many of the n sends want[k] = {device, start, end} (ms) the timeline holds. */
static int sends_found(const pf_simulate_result_t *r, const double (*want)[3], int n)
{
    int found = 0;
    for (int i = 0; i < r->nevents; i++) {
        const pf_simulate_event_t *e = &r->events[i];
        for (int k = 0; k < n && e->kind == PF_EV_SEND; k++)
            found += e->device == (int)want[k][0] && fabs(e->start_ms - want[k][1]) < 1e-12 &&
                     fabs(e->end_ms - want[k][2]) < 1e-12;
    }
    return found;
}

/* A device sends while it receives (links are full duplex): S = 2, MB = 2, 1F1B, f = b = 1,
 * every transfer 3 ms.
 *   stage 0: F0 [0,1] F1 [1,2]; its sends XF0 [1,4], XF1 [4,7] (one send at a time);
 *   stage 1: F0 [4,5] B0 [5,6], XB0 [6,9] while device 0 still sends XF1 (a send queue and a
 *            receive queue each), F1 [7,8] B1 [8,9], XB1 [9,12];
 *   stage 0: B0 [9,10] B1 [12,13]: step 13 ms (one queue for both: XB0 [7,10], XB1 [10,13],
 *            14 ms). */
static void test_full_duplex_by_hand(void)
{
    pf_cluster_t *c = pf_test_flat_cluster(2, 1000, 0);
    pipe_t p;
    pipe_init(&p, c, 2, 1, 2, 1.0, 1.0, PF_SCHEDULE_1F1B);
    p.stage[0].send_bytes = 3e9;
    char err[256];
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simulate(&p.in, &r, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(r->step_ms, 13.0, 1e-12);
    const double want[4][3] = {{0, 1, 4}, {0, 4, 7}, {1, 6, 9}, {1, 9, 12}};
    CU_ASSERT_EQUAL(sends(r, -1), 4);
    CU_ASSERT_EQUAL(sends_found(r, want, 4), 4);
    PF_ASSERT_CLOSE(r->comm_busy_ms[0], 12.0, 1e-12);
    pf_simulate_result_destroy(&r);
    pf_cluster_destroy(&c);
}

/* Two transfers over one device pair share it: stage 0 f = 0.1, each send 1 ms. send0 [0.1,1.1],
 * send1 ready at 0.2 waits for the link: [1.1, 2.1]. */
static void test_shared_link(void)
{
    pf_cluster_t *c = pf_test_flat_cluster(2, 1000, 0);
    pipe_t p;
    pipe_init(&p, c, 2, 1, 2, 0.1, 0.2, PF_SCHEDULE_GPIPE);
    p.stage[0].send_bytes = 1e9;
    char err[256];
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simulate(&p.in, &r, err, sizeof err), PF_OK);
    const double want[2][3] = {{0, 0.1, 1.1}, {0, 1.1, 2.1}};
    CU_ASSERT_EQUAL(sends(r, 0), 2);
    CU_ASSERT_EQUAL(sends_found(r, want, 2), 2);
    pf_simulate_result_destroy(&r);
    pf_cluster_destroy(&c);
}

/* Gradient all-reduce, S = 2, R = 2, MB = 4, f = 1, b = 2, no p2p traffic: the pipeline ends at
 * (4 + 1) x 3 = 15 ms. Ring of eq. 7 over 2 replicas: 2 (R - 1) / R x P / B = 4e9 B / 1000 GB/s
 * = 4 ms, plus 2 (R - 1) = 2 latencies of 10 us: stage 0's all-reduce after its last backward
 * ends at 15 + 4.02 ms. Two buckets of 2 + 0.02 ms: bucket 0 ready half-way through the last
 * backward [13, 15], at 14: [14, 16.02]; bucket 1 ready at 15 waits: [16.02, 18.04]. An
 * optimizer step of 0.5 ms follows. */
static void test_allreduce(void)
{
    pf_cluster_t *c = pf_test_flat_cluster(4, 1000, 10);
    pipe_t p;
    pipe_init(&p, c, 2, 2, 4, 1.0, 2.0, PF_SCHEDULE_1F1B);
    p.stage[0].param_bytes = p.stage[1].param_bytes = 4e9;
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_1F1B), 15 + 4.02, 1e-12);
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_GPIPE), 15 + 4.02, 1e-12);
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_SIGNAL), 15, 1e-12);
    p.in.buckets = 2;
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_1F1B), 18.04, 1e-12);
    p.stage[0].optimizer_ms = p.stage[1].optimizer_ms = 0.5;
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_1F1B), 18.54, 1e-12);
    /* R = 1: nothing to reduce */
    pipe_init(&p, c, 2, 1, 4, 1.0, 2.0, PF_SCHEDULE_1F1B);
    p.stage[0].param_bytes = p.stage[1].param_bytes = 4e9;
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_1F1B), 15, 1e-12);
    pf_cluster_destroy(&c);
}

/* Event [start, end] of `kind` on device d, stage s, micro-batch m (-1: any), the n-th such. */
static int event_at(const pf_simulate_result_t *r, int d, int kind, int s, int m, int n,
                    double *start, double *end)
{
    for (int i = 0; i < r->nevents; i++) {
        const pf_simulate_event_t *e = &r->events[i];
        if (e->device == d && e->kind == kind && e->stage == s && (m < 0 || e->microbatch == m) &&
            n-- == 0) {
            *start = e->start_ms;
            *end = e->end_ms;
            return 1;
        }
    }
    return 0;
}

/* A pipeline send and a gradient bucket on one link share it (linkshare.h). S = 2, R = 2,
 * MB = 2, f = 1, b = 2, 1F1B, stage s replica r on device 2 s + r, every link 1000 GB/s without
 * latency: each send 1e9 bytes, 1 ms; stage 1 all-reduces 4e9 bytes in 2 buckets, each a ring of
 * 2: 2e9 / 1000 GB/s = 2 ms. Each replica, alone:
 *   stage 0: F0 [0,1]  F1 [1,2]  act0 [1,2]  act1 [2,3]
 *   stage 1: F0 [2,3]  B0 [3,5]  grad0 [5,6]  F1 [5,6]  B1 [6,8]  grad1 at 8
 *   stage 0: B0 [6,8]  B1 after grad1
 *   stage 1's buckets: 0 ready at 7 (half of B1), [7,9]; 1 ready at 8, after bucket 0.
 * Every device on its own host: grad1 and bucket 0 both use device 2's NIC. grad1 is committed
 * at 8 (bucket 0 is, at 7): its window [8,9] overlaps bucket 0 by 1 ms, so it takes 2: [8,10]
 * (fair sharing ends it there too). Bucket 1 starts at 9 and its window [9,11] overlaps grad1's
 * [8,10] by 1: [9,12]. Stage 0's B1 [10,12]: step 12 ms (the link carries 1 + 2 + 2 ms of
 * work from 7 on, nothing idle, the last at 12).
 * Replica r on host r: the sends stay inside a host (NVLink), the buckets cross hosts (NIC):
 * nothing shared, grad1 [8,9], B1 [9,11], bucket 1 [9,11]: 11 ms, as before sharing.
 * All four on one host: sends and buckets on NVLink, shared again: 12 ms. */
static void test_link_sharing(void)
{
    int host_of[3][4] = {{0, 1, 2, 3}, {0, 1, 0, 1}, {0, 0, 0, 0}};
    double want_step[3] = {12, 11, 12}, want_grad1[3] = {10, 9, 10}, want_b1[3] = {12, 11, 12};
    for (int l = 0; l < 3; l++) {
        pf_cluster_t *c = pf_cluster_new("4", 4);
        for (int i = 0; i < 4; i++) {
            pf_device_t d = {.id = i, .host = host_of[l][i], .mem_bytes = 80e9};
            pf_cluster_set_device(c, i, &d);
            for (int j = 0; j < i; j++)
                pf_cluster_set_link(c, i, j, 1000, 0);
        }
        pipe_t p;
        pipe_init(&p, c, 2, 2, 2, 1.0, 2.0, PF_SCHEDULE_1F1B);
        p.stage[0].send_bytes = 1e9;
        p.stage[1].param_bytes = 4e9;
        p.in.buckets = 2;
        char err[256];
        pf_simulate_result_t *r = NULL;
        CU_ASSERT_EQUAL_FATAL(pf_simulate(&p.in, &r, err, sizeof err), PF_OK);
        PF_ASSERT_CLOSE(r->step_ms, want_step[l], 1e-12);
        double a = -1, b = -1;
        CU_ASSERT_FATAL(event_at(r, 2, PF_EV_SEND, 1, 1, 0, &a, &b));
        PF_ASSERT_CLOSE(a, 8, 1e-12);
        PF_ASSERT_CLOSE(b, want_grad1[l], 1e-12);
        CU_ASSERT_FATAL(event_at(r, 2, PF_EV_ALLREDUCE, 1, -1, 0, &a, &b));
        PF_ASSERT_CLOSE(a, 7, 1e-12);
        PF_ASSERT_CLOSE(b, 9, 1e-12);
        CU_ASSERT_FATAL(event_at(r, 3, PF_EV_ALLREDUCE, 1, -1, 1, &a, &b));
        PF_ASSERT_CLOSE(a, 9, 1e-12);
        PF_ASSERT_CLOSE(b, want_b1[l], 1e-12);
        CU_ASSERT_FATAL(event_at(r, 0, PF_EV_BWD, 0, 1, 0, &a, &b));
        PF_ASSERT_CLOSE(a, want_grad1[l], 1e-12);
        pf_simulate_result_destroy(&r);
        pf_cluster_destroy(&c);
    }
}

/* The data-parallel all-reduce as NCCL runs it (planner/ir/collective.h), and NVLS inside one
 * host (below): R = 4 replicas of one stage on two hosts of two (1000 GB/s at 10 us inside, 100 GB/s at 20 us between), 4e9 bytes.
 *   eq. 7's ring on the slowest link: 6 x 0.02 + 6/4 x 4e9 / 100e6 = 60.12 ms
 *   ring over both NICs of a host:     6 x 0.02 + 6/4 x 4e9 / min(1000, 2 x 100)e6 = 30.12
 *   tree:                              2 (10 + 20) us + 2 x 4e9 / 200e6 = 40.06
 *   hierarchical: RS in the host 0.01 + 1/2 x 4 = 2.01, all-reduce of 2e9 across on each NIC
 *                 0.04 + 2e9 / 100e6 = 20.04, AG 2.01: 24.06, the cheapest.
 * One micro-batch of f + b = 3 ms, then the all-reduce: 27.06. Megatron's buckets: 4e9 bytes of
 * bf16 gradients at max(4e7, 4e6) parameters a bucket = 8e7 bytes: 50 buckets. */
static void test_allreduce_hosts(void)
{
    pf_cluster_t *c = pf_cluster_new("2x2", 4);
    for (int i = 0; i < 4; i++) {
        pf_device_t d = {.id = i, .host = i / 2, .mem_bytes = 80e9};
        pf_cluster_set_device(c, i, &d);
        for (int j = 0; j < i; j++)
            pf_cluster_set_link(c, i, j, i / 2 == j / 2 ? 1000 : 100, i / 2 == j / 2 ? 10 : 20);
    }
    pipe_t p;
    pipe_init(&p, c, 1, 4, 1, 1.0, 2.0, PF_SCHEDULE_1F1B);
    p.stage[0].param_bytes = 4e9;
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_1F1B), 3 + 24.06, 1e-12);
    /* 3 buckets overlap the backward (Megatron's --overlap-grad-reduce): bucket 0 is ready after
     * 1/3 of it (t = 1 + 2/3), each takes 2 x (0.01 + 1/2 x 4/3) + (0.04 + 2/3 x 10) = 8.06 ms
     * (still hierarchical), one after another on the communication stream: 1 + 2/3 + 3 x 8.06 */
    p.in.buckets = 3;
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_1F1B), 1 + 2.0 / 3 + 3 * 8.06, 1e-12);
    pf_cluster_destroy(&c);
    /* one NVSwitch host of 4 at 100 GB/s, no latency: the ring's 6/4 x 4e9 / 100e6 = 60 ms;
     * with NVLS at a 300 GB/s bus bandwidth 6/4 x 4e9 / 300e6 = 20 ms */
    c = pf_cluster_new("1x4", 4);
    for (int i = 0; i < 4; i++) {
        pf_device_t d = {.id = i, .host = 0, .mem_bytes = 80e9};
        pf_cluster_set_device(c, i, &d);
        for (int j = 0; j < i; j++)
            pf_cluster_set_link(c, i, j, 100, 0);
    }
    pipe_init(&p, c, 1, 4, 1, 1.0, 2.0, PF_SCHEDULE_1F1B);
    p.stage[0].param_bytes = 4e9;
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_1F1B), 3 + 60, 1e-12);
    p.in.nvls_busbw_gbps = 300;
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_1F1B), 3 + 20, 1e-12);
    /* ZeRO-3: the ring all-gather of the 4e9 bytes, 3/4 x 4e9 / 100e6 = 30 ms, before the forward
     * and again before the backward; 2 x 30 - 3 = 57 ms do not hide behind the micro-batch's
     * compute and lengthen its backward, then the gradients' reduction (20 ms with NVLS) */
    p.in.nvls_busbw_gbps = 0;
    p.in.zero = 3;
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_1F1B), 3 + 57 + 60, 1e-12);
    PF_ASSERT_CLOSE(pf_training_zero3_exposed_ms(1.0, 3.0), 0, 1e-12); /* hidden */
    PF_ASSERT_CLOSE(pf_training_zero3_exposed_ms(30.0, 3.0), 57, 1e-12);
    CU_ASSERT_EQUAL(pf_training_grad_buckets(4e9, 4, 2), 50);
    CU_ASSERT_EQUAL(pf_training_grad_buckets(1e9, 64, 2), 8); /* 6.4e7 parameters a bucket */
    CU_ASSERT_EQUAL(pf_training_grad_buckets(0, 4, 2), 1);
    pf_cluster_destroy(&c);
}

/* Tensor parallelism: T = 2, collectives 0.5 ms per forward and backward on the compute stream:
 * stage time 1 + 0.5 + 2 + 0.5 = 4, S = 2, MB = 4: 5 x 4 = 20 ms; every device of a group is
 * busy 16 ms. */
static void test_tensor_parallel(void)
{
    pf_cluster_t *c = pf_test_flat_cluster(4, 1000, 0);
    pipe_t p;
    pipe_init(&p, c, 2, 1, 4, 1.0, 2.0, PF_SCHEDULE_1F1B);
    p.in.tp = 2;
    for (int s = 0; s < 2; s++) {
        p.stage[s].tp_fwd_ms = p.stage[s].tp_bwd_ms = 0.5;
        p.dev[s][0] = 2 * s;
        p.dev[s][1] = 2 * s + 1;
    }
    char err[256];
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simulate(&p.in, &r, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(r->step_ms, 20, 1e-12);
    CU_ASSERT_EQUAL(r->ndevices, 4);
    for (int d = 0; d < 4; d++)
        PF_ASSERT_CLOSE(r->busy_ms[d], 16, 1e-12);
    int tp = 0;
    for (int i = 0; i < r->nevents; i++)
        tp += r->events[i].kind == PF_EV_TP;
    CU_ASSERT_EQUAL(tp, 4 * 2 * 4); /* 4 devices x 2 collectives x 4 micro-batches */
    pf_simulate_result_destroy(&r);
    PF_ASSERT_CLOSE(step_of(&p, PF_SCHEDULE_SIGNAL), 15, 1e-12); /* collectives free too */
    pf_cluster_destroy(&c);
}

/* No stream runs two events at once, but for a device's send and receive (a link is full
 * duplex): two sends, two receives never overlap. */
static void no_stream_overlaps(const pf_simulate_result_t *r)
{
    for (int e = 0; e < r->nevents; e++)
        for (int f = e + 1; f < r->nevents; f++) {
            const pf_simulate_event_t *a = &r->events[e], *b = &r->events[f];
            if (a->device != b->device || a->stream != b->stream ||
                (a->stream == PF_STREAM_COMM && a->kind != b->kind))
                continue;
            CU_ASSERT(b->start_ms >= a->end_ms - 1e-9 || a->start_ms >= b->end_ms - 1e-9);
        }
}

/* With communication, on equal stages: eager-1F1B never slower than 1F1B (Zhuang et al., Sec. 4)
 * while a transfer (here 0.2, 1 and 2 ms) fits in a stage's compute (f + b = 3 ms), the regime
 * where there is compute to overlap it with. Past that the communication stream is the
 * bottleneck and its order decides (S = 2, MB = 4, 3 ms transfers: 1F1B 27.04, eager 30.04 ms);
 * on random stages, replicas and links: signal below every schedule and MB x the slowest stage
 * below signal. */
static void test_bounds(void)
{
    char err[256];
    int stages[] = {2, 4}, mbs[] = {4, 8};
    double sends[] = {0.2e9, 1e9, 2e9};
    pf_cluster_t *c = pf_test_flat_cluster(4, 1000, 5);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++) {
                pipe_t p;
                pipe_init(&p, c, stages[i], 1, mbs[j], 1.0, 2.0, PF_SCHEDULE_1F1B);
                for (int s = 0; s < stages[i]; s++)
                    p.stage[s].send_bytes = sends[k];
                double one = step_of(&p, PF_SCHEDULE_1F1B), eager = step_of(&p, PF_SCHEDULE_EAGER_1F1B);
                CU_ASSERT(eager <= one + 1e-9);
                CU_ASSERT(step_of(&p, PF_SCHEDULE_SIGNAL) <= eager + 1e-9);
                if (k == 1 && j == 1) /* 1 ms transfers: eager hides them, 1F1B cannot */
                    CU_ASSERT(eager < one - 1);
            }
    pf_cluster_destroy(&c);

    unsigned seed = 7;
    for (int trial = 0; trial < 200; trial++) {
        int S = 1 + (int)(rand_r(&seed) % 4), R = 1 + (int)(rand_r(&seed) % 2);
        int MB = 1 + (int)(rand_r(&seed) % 8);
        pf_cluster_t *cl = pf_cluster_new("rnd", S * R);
        for (int a = 0; a < S * R; a++) {
            pf_device_t d = {.id = a, .mem_bytes = 1};
            pf_cluster_set_device(cl, a, &d);
            for (int b = 0; b < a; b++)
                pf_cluster_set_link(cl, a, b, 100 + rand_r(&seed) % 900, rand_r(&seed) % 50);
        }
        pipe_t p;
        pipe_init(&p, cl, S, R, MB, 1, 1, PF_SCHEDULE_1F1B);
        p.in.buckets = 1 + (int)(rand_r(&seed) % 3);
        double slowest = 0;
        for (int s = 0; s < S; s++) {
            pf_simulate_stage_t *st = &p.stage[s];
            st->fwd_ms = 0.5 + rand_r(&seed) % 100 / 20.0;
            st->bwd_ms = 0.5 + rand_r(&seed) % 100 / 10.0;
            st->recompute_ms = rand_r(&seed) % 2 ? st->fwd_ms : 0;
            st->send_bytes = rand_r(&seed) % 100 * 1e7;
            st->param_bytes = rand_r(&seed) % 100 * 1e8;
            st->optimizer_ms = rand_r(&seed) % 3 * 0.1;
            slowest = fmax(slowest, st->fwd_ms + st->bwd_ms + st->recompute_ms);
        }
        double sig = step_of(&p, PF_SCHEDULE_SIGNAL);
        CU_ASSERT(MB * slowest <= sig + 1e-9);
        pf_training_schedule_t sch[] = {PF_SCHEDULE_GPIPE, PF_SCHEDULE_1F1B,
                                        PF_SCHEDULE_EAGER_1F1B};
        for (int k = 0; k < 3; k++) {
            pf_simulate_result_t *r = NULL;
            p.in.schedule = sch[k];
            CU_ASSERT_EQUAL_FATAL(pf_simulate(&p.in, &r, err, sizeof err), PF_OK);
            CU_ASSERT(sig <= r->step_ms + 1e-9);
            CU_ASSERT(r->bubble_fraction >= -1e-12 && r->bubble_fraction < 1);
            no_stream_overlaps(r);
            pf_simulate_result_destroy(&r);
        }
        pf_cluster_destroy(&cl);
    }
}

static void test_bad_input(void)
{
    pf_cluster_t *c = pf_test_flat_cluster(4, 100, 0);
    char err[256];
    pf_simulate_result_t *r = NULL;
    pipe_t p;
    pipe_init(&p, c, 2, 2, 4, 1.0, 2.0, PF_SCHEDULE_1F1B);
    p.dev[1][1] = 0;
    CU_ASSERT_EQUAL(pf_simulate(&p.in, &r, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "used twice"));
    p.dev[1][1] = 4;
    CU_ASSERT_EQUAL(pf_simulate(&p.in, &r, err, sizeof err), PF_EINPUT);
    p.dev[1][1] = 3;
    p.stage[1].bwd_ms = -1;
    CU_ASSERT_EQUAL(pf_simulate(&p.in, &r, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "stage 1: bwd_ms"));
    p.stage[1].bwd_ms = 2;
    p.in.microbatches = 0;
    CU_ASSERT_EQUAL(pf_simulate(&p.in, &r, err, sizeof err), PF_EINPUT);
    p.in.microbatches = 4;
    p.in.replicas = 3; /* 6 devices on 4 */
    CU_ASSERT_EQUAL(pf_simulate(&p.in, &r, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NULL(r);
    pf_training_schedule_t s;
    CU_ASSERT_EQUAL((s = pf_training_schedule_parse("eager-1f1b")), PF_SCHEDULE_EAGER_1F1B);
    CU_ASSERT_EQUAL(s, PF_SCHEDULE_EAGER_1F1B);
    CU_ASSERT_EQUAL(pf_training_schedule_parse("pipedream"), -1);
    CU_ASSERT_STRING_EQUAL(pf_training_schedule_name(PF_SCHEDULE_SIGNAL), "signal");
    pf_cluster_destroy(&c);
}

/* 0 -> 1 -> 2 -> 3 with a skip 0 -> 2; stages {0, 1} | {2, 3}, replicas on devices (0, 1) and
 * (2, 3). Stage 0: fwd 1 + 2, bwd 2 + 4, params 10 + 20, send = edges crossing the cut: 1->2
 * (300) + 0->2 (50) = 350, acts 100 + 200. Stage 1: acts 300 + 400 + its input 350. */
static pf_graph_t *chain4(void)
{
    char err[128];
    pf_graph_t *g = pf_graph_new("chain", 1);
    for (int i = 0; i < 4; i++) {
        pf_op_t op = {.id = i, .fwd_ms = i + 1, .bwd_ms = 2 * (i + 1), .param_bytes = 10 * (i + 1),
                      .mem_fwd_bytes = 100 * (i + 1)};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 100);
    pf_graph_add_edge(g, 1, 2, 300);
    pf_graph_add_edge(g, 2, 3, 500);
    pf_graph_add_edge(g, 0, 2, 50);
    CU_ASSERT_EQUAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    return g;
}

/* The bytes across a cut count a whole output once and a slice by itself, one byte per element:
 * ops a, b, c, d on stages {a}, {b, c}, {d}; a's output (10 elements) feeds b, c and d whole,
 * b's (5) and c's (7) feed d. Cut 0: a's output once, 10 (its three edges sum to 30); cut 1: b's,
 * c's and a's relayed to d, 5 + 7 + 10 = 22. An MoE-like dispatch of 40 elements sends each of
 * four experts its slice of 10 on the next stage, each expert 10 to a combine: 40 across both
 * cuts (slices add up). Without shapes every edge counts: 30 and 22. */
static void cut_case(int shapes, int moe, const double *want)
{
    char err[128];
    pf_graph_t *g = pf_graph_new("fan", 1);
    int n = moe ? 6 : 4;
    const int64_t elems[2][6] = {{10, 5, 7, 1, 0, 0}, {40, 10, 10, 10, 10, 10}};
    for (int i = 0; i < n; i++) {
        pf_op_t op = {.id = i, .fwd_ms = 1, .bwd_ms = 1};
        if (shapes)
            op.output = (pf_shape_t){.ndim = 1, .dim = {elems[moe][i]}};
        pf_graph_add_op(g, &op);
    }
    const int fan[5][3] = {{0, 1, 10}, {0, 2, 10}, {0, 3, 10}, {1, 3, 5}, {2, 3, 7}};
    for (int e = 0; e < (moe ? 8 : 5); e++)
        if (moe)
            pf_graph_add_edge(g, e < 4 ? 0 : e - 3, e < 4 ? e + 1 : 5, 10);
        else
            pf_graph_add_edge(g, fan[e][0], fan[e][1], fan[e][2]);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_plan_t *p = pf_plan_new(3, 1);
    int a[] = {0}, mid[] = {1, 2, 3, 4}, last[] = {moe ? 5 : 3};
    pf_plan_set_stage_ops(p, 0, a, 1);
    pf_plan_set_stage_ops(p, 1, mid, moe ? 4 : 2);
    pf_plan_set_stage_ops(p, 2, last, 1);
    double cut[3] = {-1, -1, -1};
    CU_ASSERT_EQUAL_FATAL(pf_simulate_cut_bytes(g, p, cut), PF_OK);
    PF_ASSERT_CLOSE(cut[0], want[0], 1e-12);
    PF_ASSERT_CLOSE(cut[1], want[1], 1e-12);
    CU_ASSERT_EQUAL(cut[2], -1); /* S - 1 entries */
    pf_plan_destroy(&p);
    pf_graph_destroy(&g);
}

static void test_cut_bytes(void)
{
    cut_case(1, 0, (const double[]){10, 22});
    cut_case(1, 1, (const double[]){40, 40});
    cut_case(0, 0, (const double[]){30, 22});
}

static pf_plan_t *chain4_plan(void)
{
    pf_plan_t *p = pf_plan_new(2, 2);
    int a[] = {0, 1}, b[] = {2, 3};
    pf_plan_set_stage_ops(p, 0, a, 2);
    pf_plan_set_stage_ops(p, 1, b, 2);
    for (int s = 0; s < 2; s++)
        for (int r = 0; r < 2; r++)
            pf_plan_stage_devices(p, s)[r] = 2 * s + r;
    p->microbatches = 4;
    p->devices = 4;
    return p;
}

static void test_from_plan(void)
{
    char err[256];
    pf_graph_t *g = chain4();
    pf_cluster_t *c = pf_test_flat_cluster(4, 100, 0);
    pf_plan_t *p = chain4_plan();
    pf_simulate_input_t in;
    CU_ASSERT_EQUAL_FATAL(pf_simulate_input_from_plan(g, c, p, &in, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(in.stages, 2);
    CU_ASSERT_EQUAL(in.replicas, 2);
    CU_ASSERT_EQUAL(in.microbatches, 4);
    CU_ASSERT_EQUAL(in.schedule, PF_SCHEDULE_1F1B);
    PF_ASSERT_CLOSE(in.stage[0].fwd_ms, 3, 1e-12);
    PF_ASSERT_CLOSE(in.stage[0].bwd_ms, 6, 1e-12);
    PF_ASSERT_CLOSE(in.stage[1].fwd_ms, 7, 1e-12);
    PF_ASSERT_CLOSE(in.stage[0].param_bytes, 30, 1e-12);
    /* the plan's default training, mixed-precision Adam: 16 B per 2-byte parameter = 8 x 30 */
    PF_ASSERT_CLOSE(in.stage[0].static_bytes, 240, 1e-12);
    PF_ASSERT_CLOSE(in.stage[0].send_bytes, 350, 1e-12);
    PF_ASSERT_CLOSE(in.stage[1].send_bytes, 0, 1e-12);
    PF_ASSERT_CLOSE(in.stage[0].act_bytes, 300, 1e-12);
    PF_ASSERT_CLOSE(in.stage[1].act_bytes, 1050, 1e-12);
    CU_ASSERT_EQUAL(in.stage[1].devices[1], 3);
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL(pf_simulate(&in, &r, err, sizeof err), PF_OK);
    CU_ASSERT(r && r->step_ms >= 4 * 21);
    pf_simulate_result_destroy(&r);
    pf_simulate_input_clear(&in);
    pf_simulate_input_clear(&in);
    CU_ASSERT_PTR_NULL(in.stage);

    free(p->stage_list[1].devices); /* unmapped */
    p->stage_list[1].devices = NULL;
    CU_ASSERT_EQUAL(pf_simulate_input_from_plan(g, c, p, &in, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no devices"));
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* One GPT layer (hidden 4096, heads 32, seq 2048, micro-batch 1) measured on one H100: the
 * layer's ops as a chain with their measured forward and backward times, simulated on one device
 * (S = R = T = 1, MB = 1), against the whole layer measured in one piece. The per-op sums are
 * 1.420 ms forward and 5.028 ms forward + backward against 1.330 and 4.905 measured (6.8% and
 * 2.5%: a whole layer launches fewer kernels than its ops one by one). */
static void test_h100_gpt_layer(void)
{
    char path[600], err[512];
    json_t *root = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_json_load_file(pf_test_data("h100/h100_reference.json", path,
                                                         sizeof path), &root, err, sizeof err),
                          PF_OK);
    json_t *layers = json_object_get(root, "gpt_layers"), *layer = NULL, *L;
    size_t i;
    json_array_foreach(layers, i, L)
    {
        if (json_integer_value(json_object_get(L, "hidden")) == 4096 &&
            json_integer_value(json_object_get(L, "microbatch")) == 1 &&
            json_object_get(L, "whole_layer"))
            layer = L;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(layer);
    json_t *whole = json_object_get(layer, "whole_layer"), *ops = json_object_get(layer, "ops");
    double want_fwd = json_real_value(json_object_get(whole, "fwd_ms"));
    double want_fb = json_real_value(json_object_get(whole, "fwd_bwd_ms"));
    CU_ASSERT_FATAL(want_fwd > 0 && want_fb > want_fwd && json_array_size(ops) == 9);

    pf_graph_t *g = pf_graph_new("gpt-layer-4096", 1);
    json_t *op;
    json_array_foreach(ops, i, op)
    {
        pf_op_t o = {.id = (int64_t)i, .name = json_string_value(json_object_get(op, "op")),
                     .fwd_ms = json_number_value(json_object_get(op, "fwd_ms")),
                     .bwd_ms = json_number_value(json_object_get(op, "bwd_ms")),
                     .param_bytes = json_number_value(json_object_get(op, "param_bytes"))};
        CU_ASSERT_EQUAL(pf_graph_add_op(g, &o), (int)i);
        if (i > 0)
            pf_graph_add_edge(g, (int)i - 1, (int)i,
                              json_number_value(json_object_get(json_array_get(ops, i - 1),
                                                                "out_bytes")));
    }
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_cluster_t *c = pf_cluster_new("h100", 1);
    pf_device_t d = {.id = 0, .mem_bytes = 80e9, .tflops = 989};
    pf_cluster_set_device(c, 0, &d);
    pf_plan_t *p = pf_plan_new(1, 1);
    int all[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    pf_plan_set_stage_ops(p, 0, all, 9);
    pf_plan_stage_devices(p, 0)[0] = 0;
    p->microbatches = 1;
    p->devices = 1;
    pf_simulate_input_t in;
    CU_ASSERT_EQUAL_FATAL(pf_simulate_input_from_plan(g, c, p, &in, err, sizeof err), PF_OK);
    in.timeline = 1;
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simulate(&in, &r, err, sizeof err), PF_OK);
    double fwd = -1;
    for (int e = 0; e < r->nevents; e++)
        if (r->events[e].kind == PF_EV_FWD)
            fwd = r->events[e].end_ms - r->events[e].start_ms;
    CU_ASSERT(fabs(fwd - want_fwd) <= 0.10 * want_fwd);
    CU_ASSERT(fabs(r->step_ms - want_fb) <= 0.10 * want_fb);
    PF_ASSERT_CLOSE(r->bubble_fraction, 0, 1e-12);
    pf_simulate_result_destroy(&r);
    pf_simulate_input_clear(&in);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
    json_decref(root);
}

static int file_has(const char *path, const char *needle)
{
    char buf[1 << 16];
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* The two commands on the chain of test_from_plan: the first line's form, the SVG files (names
 * escaped), and exit status 2 on bad input. */
static void test_commands(void)
{
    char err[256], gpath[600], cpath[600], ppath[600], upath[600], svg[600], cmd[4096],
        out[8192];
    pf_graph_t *g = chain4();
    pf_cluster_t *c = pf_test_flat_cluster(4, 100, 0);
    pf_device_t d = {.id = 0, .host = 0, .name = "gpu<0>&", .mem_bytes = 80e9};
    pf_cluster_set_device(c, 0, &d);
    pf_plan_t *p = chain4_plan();
    const char *dir = pf_test_tmpdir();
    snprintf(gpath, sizeof gpath, "%s/sim_g.json", dir);
    snprintf(cpath, sizeof cpath, "%s/sim_c.json", dir);
    snprintf(ppath, sizeof ppath, "%s/sim_p.json", dir);
    snprintf(upath, sizeof upath, "%s/sim_unmapped.json", dir);
    snprintf(svg, sizeof svg, "%s/sim_tl.svg", dir);
    CU_ASSERT_EQUAL_FATAL(pf_graph_save(g, gpath, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_cluster_save(c, cpath, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_plan_save(p, g, c, ppath, err, sizeof err), PF_OK);
    free(p->stage_list[0].devices);
    p->stage_list[0].devices = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_plan_save(p, g, c, upath, err, sizeof err), PF_OK);

    /* the figures are test_from_plan's; here the form of the first line and the files */
    snprintf(cmd, sizeof cmd, "%s simulate %s %s %s --schedule gpipe --microbatches 8 "
             "--timeline %s", pf_test_bin(), gpath, cpath, ppath, svg);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    double step;
    int pct;
    char sched[32];
    CU_ASSERT_EQUAL(sscanf(out, "step %lf ms (%31[^,], 8 micro-batches, bubble %d%%)", &step,
                           sched, &pct), 3);
    CU_ASSERT_STRING_EQUAL(sched, "gpipe");
    CU_ASSERT(step >= 8 * 21);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "peak_mem"));
    CU_ASSERT(file_has(svg, "<svg") && file_has(svg, "</svg>") && file_has(svg, "gpu&lt;0&gt;&amp;"));
    CU_ASSERT(file_has(svg, "idle (bubble)"));
    snprintf(cmd, sizeof cmd, "%s simulate %s %s %s --schedule pipedream", pf_test_bin(), gpath,
             cpath, ppath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "%s simulate %s %s %s", pf_test_bin(), gpath, cpath, upath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "sim_unmapped.json"));
    snprintf(cmd, sizeof cmd, "%s simulate --help", pf_test_bin());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--schedule"));

    snprintf(svg, sizeof svg, "%s/sim_map.svg", dir);
    snprintf(cmd, sizeof cmd, "%s draw %s %s %s -o %s", pf_test_bin(), ppath, cpath, gpath, svg);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT(file_has(svg, "</svg>") && file_has(svg, "gpu&lt;0&gt;&amp;: stage 0"));
    CU_ASSERT(file_has(svg, "host 1"));
    snprintf(cmd, sizeof cmd, "%s draw %s %s -o %s", pf_test_bin(), ppath, cpath, svg);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT(file_has(svg, "links used"));
    snprintf(cmd, sizeof cmd, "%s draw %s %s", pf_test_bin(), upath, cpath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "%s draw --help", pf_test_bin());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);

    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* T = 2: BERT-2 on two 4-GPU hosts, 2 stages (ops split in half) x 2 replicas x 2 ranks, stage 0
 * on host 0 and stage 1 on host 1. Per stage, compute + collectives = the per-device graph's op
 * times and the collectives are TAP's (same setting built here); every cross-stage transfer of
 * the per-device activation X between the two 1 x 2 meshes is Megatron's scatter/gather: each
 * rank sends X / 2 over its own 12.5 GB/s host link, then the two ranks of stage 1 all-gather
 * (one ring step of X / 2 at 100 GB/s), cheaper than any resharding, which sends X at least once
 * over one host link (Zhuang et al.'s lower bound for a broadcast). */
static void test_from_tp_plan(void)
{
    char err[256];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_BERT);
    mo.layers = 2;
    pf_graph_t *g = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_HIER);
    to.machines = 2;
    to.gpus_per_machine = 4;
    to.intra_gbps = 100;
    to.inter_gbps = 12.5;
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    int n = pf_graph_nops(g), half = n / 2;
    pf_plan_t *p = pf_plan_new(2, 2);
    int *ops = malloc((size_t)n * sizeof *ops);
    for (int v = 0; v < n; v++)
        ops[v] = v;
    pf_plan_set_stage_ops(p, 0, ops, half);
    pf_plan_set_stage_ops(p, 1, ops + half, n - half);
    pf_plan_set_tensor_parallel(p, 2);
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 4; i++)
            pf_plan_stage_devices(p, s)[i] = 4 * s + i;
    p->microbatches = 4;
    CU_ASSERT_EQUAL_FATAL(pf_plan_validate(p, g, c, err, sizeof err), PF_OK);

    pf_tp_setting_opts_t so;
    pf_tp_setting_opts_init(&so);
    so.tp = 2;
    pf_tp_setting_t *set = pf_tp_setting_new(g, c, &so, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(set);
    const pf_graph_t *dg = pf_tp_setting_graph(set);
    const pf_tap_result_t *tap = pf_tp_setting_tap(set);
    pf_simulate_input_t in;
    CU_ASSERT_EQUAL_FATAL(pf_simulate_input_from_plan(g, c, p, &in, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(in.tp, 2);
    double tp_total = 0;
    for (int s = 0; s < 2; s++) {
        double f = 0, b = 0, cf = 0, cb = 0;
        for (int i = 0; i < p->stage_list[s].nops; i++) {
            int v = p->stage_list[s].ops[i];
            f += pf_graph_op(dg, v)->fwd_ms;
            b += pf_graph_op(dg, v)->bwd_ms;
            cf += tap->ops[v].fwd_comm_ms;
            cb += tap->ops[v].bwd_comm_ms;
        }
        PF_ASSERT_CLOSE(in.stage[s].fwd_ms + in.stage[s].tp_fwd_ms, f, 1e-9);
        PF_ASSERT_CLOSE(in.stage[s].bwd_ms + in.stage[s].tp_bwd_ms, b, 1e-9);
        PF_ASSERT_CLOSE(in.stage[s].tp_fwd_ms, cf, 1e-12);
        PF_ASSERT_CLOSE(in.stage[s].tp_bwd_ms, cb, 1e-12);
        tp_total += cf + cb;
        CU_ASSERT_EQUAL(in.stage[s].devices[3], 4 * s + 3);
    }
    CU_ASSERT(tp_total > 0); /* BERT's matmuls split: Megatron's all-reduces are there */
    CU_ASSERT_PTR_NULL(in.stage[1].xfer_ms);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in.stage[0].xfer_ms);
    double X = in.stage[0].send_bytes, link_ms = X / 12.5e9 * 1e3;
    CU_ASSERT(X > 0);
    for (int r = 0; r < 2; r++) {
        pf_simulate_xfer_problem_t xp;
        double ms;
        pf_simulate_xfer_problem(p->stage_list[0].devices + 2 * r, p->stage_list[1].devices + 2 * r,
                                 2, X, &xp);
        CU_ASSERT_EQUAL(pf_simulate_xfer_ms(c, &xp, &ms, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL(in.stage[0].xfer_ms[r], ms);
        double sg = pf_cluster_lat_us(c, 0, 4) * 1e-3 + X / 2 / 12.5e9 * 1e3 +
                    pf_cluster_lat_us(c, 4, 5) * 1e-3 + X / 2 / 100e9 * 1e3;
        PF_ASSERT_CLOSE(ms, sg, 1e-9);
        CU_ASSERT(ms < link_ms);
    }
    /* 1F1B on 2 stages: at least MB x the slower stage's compute and collectives */
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simulate(&in, &r, err, sizeof err), PF_OK);
    double slow = 0;
    for (int s = 0; s < 2; s++)
        slow = fmax(slow, in.stage[s].fwd_ms + in.stage[s].bwd_ms + in.stage[s].tp_fwd_ms +
                              in.stage[s].tp_bwd_ms);
    CU_ASSERT(r->step_ms >= 4 * slow);
    CU_ASSERT_EQUAL(r->ndevices, 8);
    pf_simulate_result_destroy(&r);
    pf_simulate_input_clear(&in);
    /* given the times, the builder takes them as they are */
    double given[2] = {1.5, 2.5};
    CU_ASSERT_EQUAL_FATAL(pf_simulate_input_from_setting(g, c, set, p, given, &in, err, sizeof err),
                          PF_OK);
    CU_ASSERT(in.stage[0].xfer_ms[0] == 1.5 && in.stage[0].xfer_ms[1] == 2.5);
    pf_simulate_input_clear(&in);
    pf_tp_setting_destroy(&set);
    free(ops);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* 4 S R T MB x T tasks must stay under INT_MAX / 4 = 536870911: S R T = 8192, T = 1 gives room
 * for MB = 16383 (536838144) and not 16384 (536870912); the check reads the counts only. */
static void test_size_limit(void)
{
    pf_simulate_input_t in = {.stages = 1, .replicas = 8192, .tp = 1, .microbatches = 16383};
    char err[256];
    CU_ASSERT_EQUAL(pf_simulate_check_size(&in, err, sizeof err), PF_OK);
    in.microbatches = 16384;
    CU_ASSERT_EQUAL(pf_simulate_check_size(&in, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "8192 devices x 16384 micro-batches is too large"));
    /* one replica of those 8192 (what pf_simulate runs when they are alike) fits */
    in.replicas = 1;
    CU_ASSERT_EQUAL(pf_simulate_check_size(&in, err, sizeof err), PF_OK);
}

/* The mapping drawing of a plan whose stages differ (issue 24): stage 0 runs 2 x 1 on devices 0
 * and 1 (host 0), stage 1 runs 1 x 2 on {2, 3} (host 1), N = 2. Every stage replica and rank is
 * named, the legend gives each stage's degrees, and stage 1's group is linked to both replicas
 * of stage 0 (each of its micro-batches comes from one of them), rank k to rank k mod t. */
static void test_draw_mixed(void)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("two", 1);
    pf_op_t ops[2] = {{.id = 0, .name = "a", .type = "linear", .fwd_ms = 1, .bwd_ms = 2,
                       .param_bytes = 1e6},
                      {.id = 1, .name = "b", .type = "linear", .fwd_ms = 1, .bwd_ms = 2,
                       .param_bytes = 1e6}};
    pf_graph_add_op(g, &ops[0]);
    pf_graph_add_op(g, &ops[1]);
    pf_graph_add_edge(g, 0, 1, 1e6);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_cluster_t *c = pf_cluster_new("two-hosts", 4);
    for (int a = 0; a < 4; a++) {
        pf_device_t d = {.id = a, .host = a / 2, .mem_bytes = 16e9};
        pf_cluster_set_device(c, a, &d);
        for (int b = 0; b < a; b++)
            pf_cluster_set_link(c, a, b, a / 2 == b / 2 ? 100 : 10, 0);
    }
    pf_plan_t *p = pf_plan_new(2, 1);
    int op0 = 0, op1 = 1, d[2] = {2, 1}, t[2] = {1, 2}, dev[2][2] = {{0, 1}, {2, 3}};
    CU_ASSERT_EQUAL_FATAL(pf_plan_set_stage_ops(p, 0, &op0, 1), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_plan_set_stage_ops(p, 1, &op1, 1), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_plan_degrees_set(p, d, t, 2), PF_OK);
    for (int s = 0; s < 2; s++)
        memcpy(pf_plan_stage_devices(p, s), dev[s], sizeof dev[s]);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CU_ASSERT_EQUAL_FATAL(pf_draw_mapping_svg(p, c, g, f, err, sizeof err), PF_OK);
    fclose(f);
    const char *want[] = {": stage 0 replica 0 rank 0", ": stage 0 replica 1 rank 0",
                          ": stage 1 replica 0 rank 0", ": stage 1 replica 0 rank 1",
                          "stage 0 (2 x 1)", "stage 1 (1 x 2)", "2x1 | 1x2",
                          /* 2 x N / lcm(2, 1) = 2 x 1 transfers (forward, backward) of 1e6 B
                           * between each replica of stage 0 and each rank of stage 1's group:
                           * 2e6 B = 1.9 MiB */
                          "devices 0-2: 1.9 MiB", "devices 0-3: 1.9 MiB", "devices 1-2: 1.9 MiB",
                          "devices 1-3: 1.9 MiB",
                          /* stage 0's ring: 2 (2 - 1) / 2 x 1e6 B from each replica */
                          "devices 0-1: 1.9 MiB"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(buf, want[i])) {
            CU_FAIL("the mixed plan's drawing lacks a piece");
            printf("\n    missing: %s\n", want[i]);
        }
    CU_ASSERT_PTR_NULL(strstr(buf, "devices 2-3:")); /* one group: no ring, no transfer */
    free(buf);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

void pf_suite_simulate(void)
{
    CU_pSuite s = CU_add_suite("simulate", NULL, NULL);
    CU_add_test(s, "equal stages, no communication: (MB + S - 1)(f + b)",
                test_equal_stages_no_comm);
    CU_add_test(s, "peak memory: micro-batches in flight per schedule", test_peak_memory);
    CU_add_test(s, "unequal stages with transfers, worked by hand", test_unequal_stages_by_hand);
    CU_add_test(s, "a device sends while it receives, worked by hand", test_full_duplex_by_hand);
    CU_add_test(s, "the bytes across a cut count every tensor once, by hand", test_cut_bytes);
    CU_add_test(s, "transfers on one device pair serialize", test_shared_link);
    CU_add_test(s, "ring all-reduce (eq. 7), buckets, optimizer", test_allreduce);
    CU_add_test(s, "a send and a bucket on one link share it, by hand", test_link_sharing);
    CU_add_test(s, "data-parallel all-reduce across hosts: the hierarchical algorithm",
                test_allreduce_hosts);
    CU_add_test(s, "tensor-parallel collectives block compute", test_tensor_parallel);
    CU_add_test(s, "eager <= 1F1B; MB x slowest <= signal <= every schedule", test_bounds);
    CU_add_test(s, "bad input is refused with its place", test_bad_input);
    CU_add_test(s, "input from a graph and a mapped plan", test_from_plan);
    CU_add_test(s, "input from a T = 2 plan: TAP's collectives, B -> B resharding",
                test_from_tp_plan);
    CU_add_test(s, "one GPT layer vs its H100 measurement (10%)", test_h100_gpt_layer);
    CU_add_test(s, "planfarm simulate and planfarm draw", test_commands);
    CU_add_test(s, "the task count limit, at its edge", test_size_limit);
    CU_add_test(s, "the mapping drawing of a plan whose stages differ", test_draw_mixed);
}
