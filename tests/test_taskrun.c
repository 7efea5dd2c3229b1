/* taskrun: a two-stage pipeline of one device each worked by hand (a transfer waiting for its
 * queue, a forward waiting for its stream and its input), a send and a receive at once beside a
 * bucket on the same link, by hand, and a graph whose tasks never become ready. */
#include "planner/sim/linkshare.h"
#include "planner/sim/taskrun.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdlib.h>

static void edges_pipe(void *ctx)
{
    pf_taskrun_t *tr = ctx;
    pf_taskrun_edge(tr, 0, 1, 1.0); /* stage 0's stream order */
    pf_taskrun_edge(tr, 0, 2, 1.0); /* each forward's activation out */
    pf_taskrun_edge(tr, 1, 3, 1.0);
    pf_taskrun_edge(tr, 2, 4, 1.0); /* and into stage 1 */
    pf_taskrun_edge(tr, 3, 5, 1.0);
    pf_taskrun_edge(tr, 4, 5, 1.0); /* stage 1's stream order */
}

/* Devices 0 (host 0) and 1 (host 1); stage s on device s. Two micro-batches' forwards of 2 ms on
 * stage 0, their 3 ms sends, and 4 ms forwards on stage 1:
 *   device 0 computes [0, 2] and [2, 4];
 *   the sends run [2, 5] and, device 0's send queue busy until 5, [5, 8];
 *   device 1 computes [5, 9] and, after its first forward, [9, 13]: the step is 13 ms,
 *   12 of 2 x 13 device-ms busy (bubble 7/13), two micro-batches in flight on each device. */
static void test_pipeline_by_hand(void)
{
    pf_cluster_t *c = pf_cluster_new("2x1", 2);
    for (int i = 0; i < 2; i++) {
        pf_device_t d = {.id = i, .host = i, .mem_bytes = 80e9};
        pf_cluster_set_device(c, i, &d);
    }
    int dev[2] = {0, 1}, one[2] = {1, 1};
    pf_simulate_stage_t st[2] = {{.devices = &dev[0], .act_bytes = 10, .static_bytes = 100},
                                 {.devices = &dev[1], .act_bytes = 20, .static_bytes = 200}};
    pf_taskrun_shape_t sh = {.cluster = c, .stage = st, .replicas = one, .tp = one, .stages = 2,
                             .ranks = 2, .timeline = 1};
    pf_taskrun_t *tr = pf_taskrun_new(&sh, 6);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
    pf_taskrun_task_t *t = pf_taskrun_tasks(tr);
    for (int m = 0; m < 2; m++) {
        t[m] = (pf_taskrun_task_t){.kind = PF_TASK_FWD, .s = 0, .m = m, .dur_ms = 2};
        t[2 + m] = (pf_taskrun_task_t){.kind = PF_TASK_XFER_F, .s = 0, .m = m, .dur_ms = 3};
        t[4 + m] = (pf_taskrun_task_t){.kind = PF_TASK_FWD, .s = 1, .m = m, .dur_ms = 4};
    }
    CU_ASSERT_EQUAL(pf_taskrun_link(tr, edges_pipe, tr), PF_OK);
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_taskrun_run(tr, &r), PF_OK);
    CU_ASSERT_EQUAL(r->ndevices, 2);
    CU_ASSERT_EQUAL(r->device[1], 1);
    PF_ASSERT_CLOSE(r->step_ms, 13, 1e-12);
    PF_ASSERT_CLOSE(r->bubble_fraction, 7.0 / 13, 1e-12);
    PF_ASSERT_CLOSE(r->busy_ms[0], 4, 1e-12);
    PF_ASSERT_CLOSE(r->busy_ms[1], 8, 1e-12);
    PF_ASSERT_CLOSE(r->comm_busy_ms[0], 6, 1e-12);
    PF_ASSERT_CLOSE(r->comm_busy_ms[1], 6, 1e-12);
    CU_ASSERT_EQUAL(r->peak_inflight[0], 2);
    PF_ASSERT_CLOSE(r->peak_mem_bytes[1], 2 * 20 + 200, 1e-9);
    /* sorted by device, stream, start: device 1's forwards, then the sends it received */
    CU_ASSERT_EQUAL_FATAL(r->nevents, 8);
    const pf_simulate_event_t *e = &r->events[5];
    CU_ASSERT(e->device == 1 && e->stream == PF_STREAM_COMPUTE && e->kind == PF_EV_FWD);
    CU_ASSERT_EQUAL(e->microbatch, 1);
    PF_ASSERT_CLOSE(e->start_ms, 9, 1e-12);
    e = &r->events[7];
    CU_ASSERT(e->device == 1 && e->stream == PF_STREAM_COMM && e->kind == PF_EV_RECV);
    PF_ASSERT_CLOSE(e->start_ms, 5, 1e-12);
    PF_ASSERT_CLOSE(e->end_ms, 8, 1e-12);
    pf_taskrun_result_destroy(&r);
    pf_taskrun_destroy(&tr);
    pf_cluster_destroy(&c);
}

static void edges_none(void *ctx)
{
    (void)ctx;
}

/* Devices 0 and 1 on two hosts, stage s on device s, three tasks ready from the start but the
 * bucket at 1: stage 0's send to stage 1 and stage 1's send back, 3 ms each, run at once (each
 * device sends while it receives: [0, 3] both); stage 0's bucket of 4 ms on the NIC waits for no
 * transfer (its own queue) and is slowed by the union of device 0's send and receive windows
 * within [1, 5], [1, 3]: 2 ms (their sum would be 4): [1, 7]. */
static void test_duplex_and_bucket_by_hand(void)
{
    pf_cluster_t *c = pf_cluster_new("1x1x2", 2);
    for (int i = 0; i < 2; i++) {
        pf_device_t d = {.id = i, .host = i, .mem_bytes = 80e9};
        pf_cluster_set_device(c, i, &d);
    }
    int dev[2] = {0, 1}, one[2] = {1, 1};
    pf_simulate_stage_t st[2] = {{.devices = &dev[0]}, {.devices = &dev[1]}};
    pf_taskrun_shape_t sh = {.cluster = c, .stage = st, .replicas = one, .tp = one, .stages = 2,
                             .ranks = 2, .timeline = 1};
    pf_taskrun_t *tr = pf_taskrun_new(&sh, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
    pf_taskrun_task_t *t = pf_taskrun_tasks(tr);
    t[0] = (pf_taskrun_task_t){.kind = PF_TASK_XFER_F, .s = 0, .dur_ms = 3};
    t[1] = (pf_taskrun_task_t){.kind = PF_TASK_XFER_B, .s = 1, .dur_ms = 3};
    t[2] = (pf_taskrun_task_t){.kind = PF_TASK_AR, .s = 0, .tier = PF_LINK_NIC, .dur_ms = 4,
                               .ready_ms = 1};
    CU_ASSERT_EQUAL(pf_taskrun_link(tr, edges_none, tr), PF_OK);
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_taskrun_run(tr, &r), PF_OK);
    PF_ASSERT_CLOSE(r->step_ms, 7, 1e-12);
    PF_ASSERT_CLOSE(r->comm_busy_ms[0], 3 + 3 + 6, 1e-12);
    int sends = 0;
    for (int i = 0; i < r->nevents; i++) {
        const pf_simulate_event_t *e = &r->events[i];
        if (e->kind == PF_EV_SEND) {
            sends++;
            PF_ASSERT_CLOSE(e->start_ms, 0, 1e-12);
            PF_ASSERT_CLOSE(e->end_ms, 3, 1e-12);
        } else if (e->kind == PF_EV_ALLREDUCE) {
            PF_ASSERT_CLOSE(e->start_ms, 1, 1e-12);
            PF_ASSERT_CLOSE(e->end_ms, 7, 1e-12);
        }
    }
    CU_ASSERT_EQUAL(sends, 2);
    pf_taskrun_result_destroy(&r);
    pf_taskrun_destroy(&tr);
    pf_cluster_destroy(&c);
}

static void edges_loop(void *ctx)
{
    pf_taskrun_t *tr = ctx;
    pf_taskrun_edge(tr, 0, 1, 1.0);
    pf_taskrun_edge(tr, 1, 0, 1.0);
}

/* Two tasks waiting for each other: run says 1 and makes no result. */
static void test_never_ready(void)
{
    pf_cluster_t *c = pf_cluster_new("1", 1);
    pf_device_t d = {.id = 0, .host = 0, .mem_bytes = 80e9};
    pf_cluster_set_device(c, 0, &d);
    int dev = 0, one = 1;
    pf_simulate_stage_t st = {.devices = &dev};
    pf_taskrun_shape_t sh = {.cluster = c, .stage = &st, .replicas = &one, .tp = &one,
                             .stages = 1, .ranks = 1};
    pf_taskrun_t *tr = pf_taskrun_new(&sh, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
    pf_taskrun_task_t *t = pf_taskrun_tasks(tr);
    t[0] = (pf_taskrun_task_t){.kind = PF_TASK_FWD, .dur_ms = 1};
    t[1] = (pf_taskrun_task_t){.kind = PF_TASK_BWD, .dur_ms = 1};
    CU_ASSERT_EQUAL(t[2].kind, PF_TASK_ABSENT);
    CU_ASSERT_EQUAL(pf_taskrun_link(tr, edges_loop, tr), PF_OK);
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL(pf_taskrun_run(tr, &r), 1);
    CU_ASSERT_PTR_NULL(r);
    pf_taskrun_destroy(&tr);
    pf_cluster_destroy(&c);
}

void pf_suite_taskrun(void)
{
    CU_pSuite s = CU_add_suite("taskrun", NULL, NULL);
    CU_add_test(s, "a two-stage pipeline's times, busy, bubble, peaks and events by hand",
                test_pipeline_by_hand);
    CU_add_test(s, "tasks that wait for each other never become ready", test_never_ready);
    CU_add_test(s, "a device sends while it receives; a bucket slowed by their union, by hand",
                test_duplex_and_bucket_by_hand);
}
