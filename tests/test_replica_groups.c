/* replica_groups: one simulated replica standing for identical data-parallel replicas gives the
 * full simulation's figures exactly (step, bubble, every device's busy times and peaks), over
 * schedules, interleaving, buckets, ZeRO-3 and links shared by sends and buckets, on DGX-A100
 * hosts; a replica that differs (its compute, its pipeline links or their tier) turns it off. */
#include "planner/sim/replica_groups.h"
#include "planner/sim/simulate.h"
#include "planner/sim/reshard.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <string.h>

enum { S = 4, R = 4, T = 2 };

typedef struct {
    pf_simulate_input_t in;
    pf_simulate_stage_t stage[S];
    int dev[S][R * T];
    double fwd[R], bwd[R];
} fixture_t;

/* Replica r on host r (DGX-A100 x 4, 8 GPUs each), stage s rank k on GPU 2 s + k (shift: the
 * GPU index rotated on odd hosts, still one NVSwitch domain). */
static void setup(fixture_t *f, const pf_cluster_t *c, int shift)
{
    memset(f, 0, sizeof *f);
    for (int s = 0; s < S; s++) {
        for (int r = 0; r < R; r++)
            for (int k = 0; k < T; k++)
                f->dev[s][r * T + k] = r * 8 + (2 * s + k + (r % 2) * shift) % 8;
        f->stage[s] = (pf_simulate_stage_t){
            .fwd_ms = 1.0 + 0.25 * s, .bwd_ms = 2.0 + 0.5 * s, .tp_fwd_ms = 0.1,
            .tp_bwd_ms = 0.2, .optimizer_ms = 0.7, .param_bytes = 3e8 + 1e8 * s,
            .send_bytes = s + 1 < S ? 4e7 : 0, .act_bytes = 1e8, .static_bytes = 2e9,
            .devices = f->dev[s]};
    }
    f->in = (pf_simulate_input_t){.stages = S, .replicas = R, .tp = T, .microbatches = 6,
                                  .buckets = 3, .schedule = PF_SCHEDULE_1F1B, .stage = f->stage,
                                  .cluster = c};
}

/* Mismatches between the one-replica simulation and the full one (a timeline forces it). */
static int compare(const pf_simulate_input_t *in)
{
    char err[256];
    pf_simulate_input_t full = *in;
    full.timeline = 1;
    pf_simulate_result_t *a = NULL, *b = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_replica_groups_apply(in), 1);
    CU_ASSERT_EQUAL_FATAL(pf_simulate(in, &a, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_simulate(&full, &b, err, sizeof err), PF_OK);
    int bad = a->step_ms != b->step_ms || a->bubble_fraction != b->bubble_fraction ||
              a->ndevices != b->ndevices || a->replicas != b->replicas || a->order != b->order ||
              a->nevents != 0 || b->nevents == 0;
    for (int i = 0; i < a->ndevices && !bad; i++)
        bad += a->device[i] != b->device[i] || a->busy_ms[i] != b->busy_ms[i] ||
               a->comm_busy_ms[i] != b->comm_busy_ms[i] ||
               a->peak_mem_bytes[i] != b->peak_mem_bytes[i] ||
               a->peak_inflight[i] != b->peak_inflight[i];
    CU_ASSERT(b->step_ms > 0);
    pf_simulate_result_destroy(&a);
    pf_simulate_result_destroy(&b);
    return bad;
}

/* The longest pipeline send of the full simulation's timeline. */
static double longest_send(const pf_simulate_input_t *in)
{
    char err[256];
    pf_simulate_input_t full = *in;
    full.timeline = 1;
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simulate(&full, &r, err, sizeof err), PF_OK);
    double most = 0;
    for (int i = 0; i < r->nevents; i++)
        if (r->events[i].kind == PF_EV_SEND)
            most = fmax(most, r->events[i].end_ms - r->events[i].start_ms);
    pf_simulate_result_destroy(&r);
    return most;
}

static pf_cluster_t *dgx_a100(int machines)
{
    char err[256];
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX_A100);
    o.machines = machines;
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL(pf_topology_build(&o, &c, err, sizeof err), PF_OK);
    return c;
}

static void test_equal_to_full(void)
{
    pf_cluster_t *c = dgx_a100(4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    fixture_t f;
    static const pf_training_schedule_t sched[] = {PF_SCHEDULE_1F1B, PF_SCHEDULE_GPIPE,
                                                   PF_SCHEDULE_EAGER_1F1B, PF_SCHEDULE_SIGNAL};
    for (int i = 0; i < 4; i++)
        for (int zero = 0; zero <= 3; zero += 3)
            for (int shift = 0; shift <= 3; shift += 3) {
                setup(&f, c, shift);
                f.in.schedule = sched[i];
                f.in.zero = zero;
                CU_ASSERT_EQUAL(compare(&f.in), 0);
            }
    /* interleaved: 4 stages as 2 ranks' 2 chunks, each rank's chunks on its devices */
    setup(&f, c, 0);
    f.in.virtual_stages = 2;
    f.in.microbatches = 4;
    memcpy(f.dev[2], f.dev[0], sizeof f.dev[0]);
    memcpy(f.dev[3], f.dev[1], sizeof f.dev[0]);
    CU_ASSERT_EQUAL(compare(&f.in), 0);
    /* per-replica compute, all equal; and the resharding times given, all equal */
    setup(&f, c, 0);
    for (int r = 0; r < R; r++) {
        f.fwd[r] = 1.5;
        f.bwd[r] = 2.5;
    }
    double xfer[R] = {0.3, 0.3, 0.3, 0.3};
    f.stage[1].rep_fwd_ms = f.fwd;
    f.stage[1].rep_bwd_ms = f.bwd;
    f.stage[0].xfer_ms = xfer;
    CU_ASSERT_EQUAL(compare(&f.in), 0);
    /* links shared (linkshare.h): stage s replica r on host (s + r) mod 4, so that both the
     * pipeline's sends and the buckets cross hosts on the same NICs; some send is longer than
     * its time alone */
    static const pf_training_schedule_t sched2[] = {PF_SCHEDULE_1F1B, PF_SCHEDULE_GPIPE};
    for (int i = 0; i < 2; i++) {
        setup(&f, c, 0);
        f.in.schedule = sched2[i];
        for (int st = 0; st < S; st++)
            for (int r = 0; r < R; r++)
                for (int k = 0; k < T; k++)
                    f.dev[st][r * T + k] = (st + r) % 4 * 8 + 2 * st + k;
        CU_ASSERT_EQUAL(compare(&f.in), 0);
        CU_ASSERT(longest_send(&f.in) >
                  pf_cluster_xfer_ms(c, f.dev[0][0], f.dev[1][0], 4e7 / T) + 1e-9);
    }
    pf_cluster_destroy(&c);
}

static void test_differing_replica(void)
{
    pf_cluster_t *c = dgx_a100(4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    fixture_t f;
    setup(&f, c, 0);
    CU_ASSERT_EQUAL(pf_replica_groups_apply(&f.in), 1);
    f.in.timeline = 1;
    CU_ASSERT_EQUAL(pf_replica_groups_apply(&f.in), 0);
    f.in.timeline = 0;
    for (int r = 0; r < R; r++)
        f.fwd[r] = r == 2 ? 1.75 : 1.5;
    f.stage[2].rep_fwd_ms = f.fwd;
    CU_ASSERT_EQUAL(pf_replica_groups_apply(&f.in), 0);
    f.stage[2].rep_fwd_ms = NULL;
    /* replica 3's stage 1 -> 2 hop crosses hosts: another link */
    setup(&f, c, 0);
    int t = f.dev[2][3 * T];
    f.dev[2][3 * T] = f.dev[2][2 * T];
    f.dev[2][2 * T] = t;
    CU_ASSERT_EQUAL(pf_replica_groups_apply(&f.in), 0);
    double xfer[R] = {0.3, 0.3, 0.4, 0.3};
    setup(&f, c, 0);
    f.stage[0].xfer_ms = xfer;
    CU_ASSERT_EQUAL(pf_replica_groups_apply(&f.in), 0);
    pf_cluster_destroy(&c);
    /* equal times but another tier: 8 devices two to a host, every link 100 GB/s; replica 0's
     * hop 0 -> 1 stays in host 0, replica 1's 2 -> 5 crosses hosts (it would share its NIC with
     * the buckets, replica 0 its NVLink) */
    c = pf_cluster_new("flat", 8);
    for (int i = 0; i < 8; i++) {
        pf_device_t d = {.id = i, .host = i / 2, .mem_bytes = 80e9};
        pf_cluster_set_device(c, i, &d);
        for (int j = 0; j < i; j++)
            pf_cluster_set_link(c, i, j, 100, 5);
    }
    int d0[2] = {0, 2}, d1[2] = {1, 5};
    pf_simulate_stage_t st[2] = {{.fwd_ms = 1, .bwd_ms = 2, .send_bytes = 1e8, .devices = d0},
                                 {.fwd_ms = 1, .bwd_ms = 2, .devices = d1}};
    pf_simulate_input_t in = {.stages = 2, .replicas = 2, .tp = 1, .microbatches = 2,
                              .schedule = PF_SCHEDULE_1F1B, .stage = st, .cluster = c};
    CU_ASSERT_EQUAL(pf_replica_groups_apply(&in), 0);
    d1[1] = 3; /* 2 -> 3 inside host 1 */
    CU_ASSERT_EQUAL(pf_replica_groups_apply(&in), 1);
    pf_cluster_destroy(&c);
}

/* The resharding time of replica r's transfer, solved on its own. */
static double reshard_ms(const pf_cluster_t *c, const int *src, const int *dst, int T,
                         double bytes)
{
    char err[256];
    pf_simulate_xfer_problem_t xp;
    pf_simulate_xfer_problem(src, dst, T, bytes, &xp);
    pf_reshard_opts_t o;
    pf_reshard_opts_default(&o);
    o.sched.dfs_budget_s = 0;
    pf_reshard_net_t *net = pf_reshard_net_from_cluster(c, err, sizeof err);
    pf_reshard_t *r = pf_reshard_new(&xp.problem, net, &o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    double ms = pf_reshard_time_ms(r);
    pf_reshard_destroy(&r);
    pf_reshard_net_destroy(&net);
    return ms;
}

/* Transfers with one key: on DGX-A100 hosts every replica's stage-to-stage transfer inside its
 * host is replica 0's; one that crosses hosts, or lists its devices in another order, is not.
 * On DGX-1's irregular NVLink (a matrix) keys split the replicas, and within a key every
 * resharding, solved alone, takes the same time. */
static void test_same_xfers(void)
{
    pf_cluster_t *c = dgx_a100(4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    int src[8] = {0, 1, 8, 9, 16, 17, 24, 25}, dst[8] = {2, 3, 10, 11, 18, 19, 26, 27}, first[4];
    CU_ASSERT_EQUAL(pf_replica_groups_same_xfers(c, src, dst, 4, 2, first), PF_OK);
    CU_ASSERT(first[0] == 0 && first[1] == 0 && first[2] == 0 && first[3] == 0);
    dst[4] = 27; /* replica 2 receives on host 3 */
    dst[7] = 18;
    src[2] = 9; /* replica 1 lists its sources the other way round */
    src[3] = 8;
    CU_ASSERT_EQUAL(pf_replica_groups_same_xfers(c, src, dst, 4, 2, first), PF_OK);
    CU_ASSERT(first[0] == 0 && first[1] == 1 && first[2] == 2 && first[3] == 3);
    pf_cluster_destroy(&c);

    char err[256];
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX1);
    o.machines = 4;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&o, &c, err, sizeof err), PF_OK);
    int s2[16], d2[16], f2[8], distinct = 0;
    /* replica r on machine r / 2, GPUs (0, 1) -> (2, 3) or (4, 5) -> (6, 7) there */
    for (int r = 0; r < 8; r++) {
        int base = r / 2 * 8 + (r % 2) * 4;
        s2[2 * r] = base;
        s2[2 * r + 1] = base + 1;
        d2[2 * r] = base + (r == 5 ? 3 : 2); /* replica 5: 20 -> 23, 21 -> 22, other links */
        d2[2 * r + 1] = base + (r == 5 ? 2 : 3);
    }
    CU_ASSERT_EQUAL(pf_replica_groups_same_xfers(c, s2, d2, 8, 2, f2), PF_OK);
    for (int r = 0; r < 8; r++) {
        distinct += f2[r] == r;
        CU_ASSERT(f2[r] <= r && f2[f2[r]] == f2[r]);
        CU_ASSERT_EQUAL(reshard_ms(c, s2 + 2 * r, d2 + 2 * r, 2, 3e7),
                        reshard_ms(c, s2 + 2 * f2[r], d2 + 2 * f2[r], 2, 3e7));
    }
    CU_ASSERT(distinct >= 2 && distinct < 8);
    pf_cluster_destroy(&c);
}

void pf_suite_replica_groups(void)
{
    CU_pSuite s = CU_add_suite("replica_groups", NULL, NULL);
    CU_add_test(s, "one replica equals the full simulation, exactly", test_equal_to_full);
    CU_add_test(s, "a replica that differs turns it off", test_differing_replica);
    CU_add_test(s, "transfers with one key reshard alike", test_same_xfers);
}
