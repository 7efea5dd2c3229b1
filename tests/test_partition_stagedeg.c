/* partition_stagedeg: the DP_PARTITION job with per-stage degrees, hand-worked. */
#include "planner/partition/partition_stagedeg.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static pf_partition_opts_t opts(int n_micro)
{
    pf_partition_opts_t o;
    pf_partition_opts_init(&o);
    o.stage_degrees = 1;
    o.microbatches = n_micro;
    o.flat_gbps = 1;
    o.coarsen_k = -1;
    return o;
}

/* cu = [8, 8, 2] ms, only op 2 has parameters (40e6 bytes: 40 ms at 1 GB/s), N = 8
 * micro-batches, D = 8 (d | 8 and sum d <= 8, [Piper]'s rule). Op 2 on d replicas costs
 * 2 / d + 2 (d - 1)/d x 40 / 8 ms: 2 at d = 1, 6 at d = 2; ops 0 and 1 need d >= 2 each (or 4
 * together) to come under 8. Ops 0 and 1 on 4 replicas (16 / 4 = 4) and op 2 on one (2): 4 ms
 * on 5 devices. Nothing is below 4: op 2 must stay at d = 1 (else >= 6), leaving 7 devices,
 * and ops 0 and 1 take 16 / d ms on d of them together, or 8 / d0 and 8 / d1 with d0 + d1 <= 7
 * (d | 8: at best 4 and 2, max 4). With every stage at one degree the best is 6 (d = 2, op 2
 * at 6), at d = 1 8. One stage on 8 replicas: 18 / 8 + 2 x 7/8 x 40 / 8 = 11 ms. */
static void test_mixed_degrees_win(void)
{
    char err[256];
    double cu[] = {8, 8, 2}, param[] = {0, 0, 40e6};
    pf_graph_t *g = pf_test_chain(3, cu, param, NULL);
    pf_cluster_t *c = pf_test_flat_cluster(8, 1, 0);
    pf_partition_opts_t o = opts(8);
    pf_plan_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_partition_stagedeg_run(g, c, &o, &p, err, sizeof err), PF_OK);
    CU_ASSERT_DOUBLE_EQUAL(p->partition_objective_ms, 4, 1e-9);
    for (int s = 0; s < p->stages; s++)
    CU_ASSERT(pf_plan_degrees_mixed(p));
    CU_ASSERT_EQUAL(pf_plan_degrees_step_microbatches(p), 8);
    CU_ASSERT(pf_plan_degrees_total_devices(p) <= 8);
    int last = p->stages - 1;
    CU_ASSERT(p->stage_list[last].nops == 1 && p->stage_list[last].ops[0] == 2 &&
              pf_plan_degrees_replicas(p, last) == 1);
    for (int s = 0; s < p->stages; s++)
        CU_ASSERT(p->stage_list[s].time_ms <= 4 + 1e-9);
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_OK);
    pf_plan_destroy(&p);

    /* one group of all three ops: one stage, on 8 replicas (11 ms; 12 on 4, 14 on 2, 18 on 1) */
    int group[] = {0, 0, 0};
    o.group = group;
    o.ngroups = 1;
    CU_ASSERT_EQUAL_FATAL(pf_partition_stagedeg_run(g, c, &o, &p, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(p->stages, 1);
    CU_ASSERT_EQUAL(p->replicas, 8);
    CU_ASSERT_DOUBLE_EQUAL(p->partition_objective_ms, 11, 1e-9);
    CU_ASSERT_FALSE(pf_plan_degrees_mixed(p));
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Without parameters, data parallelism is free: one stage on all 4 devices, 18 / 4 ms. A step
 * of 0 micro-batches is refused by name. */
static void test_one_stage_and_bad_input(void)
{
    char err[256];
    double cu[] = {8, 8, 2}, param[] = {0, 0, 0};
    pf_graph_t *g = pf_test_chain(3, cu, param, NULL);
    pf_cluster_t *c = pf_test_flat_cluster(4, 1, 0);
    pf_partition_opts_t o = opts(4);
    pf_plan_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_partition_stagedeg_run(g, c, &o, &p, err, sizeof err), PF_OK);
    CU_ASSERT_DOUBLE_EQUAL(p->partition_objective_ms, 4.5, 1e-9);
    CU_ASSERT(p->stages == 1 && p->replicas == 4 && p->microbatches == 1);
    pf_plan_destroy(&p);
    o.microbatches = 0;
    CU_ASSERT_EQUAL(pf_partition_stagedeg_run(g, c, &o, &p, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "per-stage degrees need the step's micro-batches"));
    CU_ASSERT_PTR_NULL(p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* With tensor parallelism per stage: configurations from one graph per degree. Offering t = 1
 * alone gives the plain DP's answer (4 ms, above); adding t = 2 at half the time and half the
 * parameters per device cannot beat 4 (ops 0 and 1 each need d t >= 4 devices to go under 4
 * ms, 8 between them, and op 2 needs one more) but may use it: the plan stays within 8
 * devices, its stages within 4 ms, each stage's t in {1, 2}. */
static void test_tensor_parallel_per_stage(void)
{
    char err[256];
    double cu[] = {8, 8, 2}, param[] = {0, 0, 40e6}, cu2[] = {4, 4, 1}, param2[] = {0, 0, 20e6};
    pf_graph_t *g = pf_test_chain(3, cu, param, NULL), *g2 = pf_test_chain(3, cu2, param2, NULL);
    pf_cluster_t *c = pf_test_flat_cluster(8, 1, 0);
    pf_partition_opts_t o = opts(8);
    pf_plan_t *p = NULL;
    pf_partition_stagedeg_tp_t one[] = {{1, g}}, two[] = {{1, g}, {2, g2}};
    CU_ASSERT_EQUAL_FATAL(pf_partition_stagedeg_run_tp(g, c, &o, one, 1, &p, err, sizeof err),
                          PF_OK);
    CU_ASSERT_DOUBLE_EQUAL(p->partition_objective_ms, 4, 1e-9);
    pf_plan_destroy(&p);
    CU_ASSERT_EQUAL_FATAL(pf_partition_stagedeg_run_tp(g, c, &o, two, 2, &p, err, sizeof err),
                          PF_OK);
    CU_ASSERT_DOUBLE_EQUAL(p->partition_objective_ms, 4, 1e-9);
    CU_ASSERT(pf_plan_degrees_total_devices(p) <= 8);
    for (int s = 0; s < p->stages; s++) {
        int t = pf_plan_degrees_tp(p, s);
        CU_ASSERT(t == 1 || t == 2);
        CU_ASSERT(p->stage_list[s].time_ms <= 4 + 1e-9);
    }
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_OK);
    pf_plan_destroy(&p);
    /* a degree's graph with other ops is refused by name */
    pf_graph_t *short_g = pf_test_chain(2, cu, param, NULL);
    pf_partition_stagedeg_tp_t bad[] = {{1, g}, {2, short_g}};
    CU_ASSERT_EQUAL(pf_partition_stagedeg_run_tp(g, c, &o, bad, 2, &p, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "a degree's graph has other ops than graph hand"));
    pf_graph_destroy(&short_g);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g2);
    pf_graph_destroy(&g);
}

/* Per host (stage_hosts M = 2): the chain of test_mixed_degrees_win planned on 4 devices and 4
 * micro-batches is 8 ms (op 2 alone on one device, ops 0 and 1 on at most 3: each needs 2 to
 * go below 8, or both 4), so twice that pipeline runs one micro-batch every 4 ms: degrees even,
 * at most 8 devices, the step's 8 micro-batches. M = 3 divides neither. */
static void test_per_host(void)
{
    char err[256];
    double cu[] = {8, 8, 2}, param[] = {0, 0, 40e6};
    pf_graph_t *g = pf_test_chain(3, cu, param, NULL);
    pf_cluster_t *c = pf_test_flat_cluster(8, 1, 0);
    pf_partition_opts_t o = opts(8);
    o.stage_hosts = 2;
    pf_plan_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_partition_stagedeg_run(g, c, &o, &p, err, sizeof err), PF_OK);
    CU_ASSERT_DOUBLE_EQUAL(p->partition_objective_ms, 4, 1e-9);
    CU_ASSERT_EQUAL(pf_plan_degrees_step_microbatches(p), 8);
    CU_ASSERT(pf_plan_degrees_total_devices(p) <= 8);
    for (int s = 0; s < p->stages; s++)
        CU_ASSERT_EQUAL(pf_plan_degrees_replicas(p, s) % 2, 0);
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_OK);
    pf_plan_destroy(&p);
    o.stage_hosts = 3;
    CU_ASSERT_EQUAL(pf_partition_stagedeg_run(g, c, &o, &p, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "stage_hosts: 3 does not divide the 8 devices and the 8 "
                                "micro-batches");
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

void pf_suite_partition_stagedeg(void)
{
    CU_pSuite s = CU_add_suite("partition_stagedeg", NULL, NULL);
    CU_add_test(s, "stages of different degrees win; whole groups", test_mixed_degrees_win);
    CU_add_test(s, "no parameters: one stage on every device; bad input", test_one_stage_and_bad_input);
    CU_add_test(s, "tensor parallelism per stage", test_tensor_parallel_per_stage);
    CU_add_test(s, "one host's share, replicated over the hosts", test_per_host);
}
