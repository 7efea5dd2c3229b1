/* simstages: a plan whose stages differ, worked by hand; uniform plans against simulate.c; the
 * stages' prices against uniform plans of their degree; random degree vectors run every task
 * under every schedule; bad input refused. */
#include "planner/inputs/model_build.h"
#include "planner/ir/collective.h"
#include "planner/inputs/price.h"
#include "planner/ir/devmodel.h"
#include "planner/inputs/topology.h"
#include "planner/search/job.h"
#include "planner/sim/simstages.h"
#include "planner/sim/simstages_plan.h"
#include "planner/sim/simulate.h"
#include "planner/core/rng.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    pf_simstages_input_t in;
    pf_simulate_stage_t stage[4];
    int d[4], t[4], dev[4][64];
} pipe_t;

/* S stages of d[s] replicas x t[s] devices, numbered in order from device 0. */
static void pipe_init(pipe_t *p, const pf_cluster_t *c, int S, const int *d, const int *t, int N)
{
    memset(p, 0, sizeof *p);
    p->in = (pf_simstages_input_t){.stages = S, .replicas = p->d, .tp = p->t, .microbatches = N,
                                   .buckets = 1, .schedule = PF_SCHEDULE_1F1B, .timeline = 1,
                                   .stage = p->stage, .cluster = c};
    int next = 0;
    for (int s = 0; s < S; s++) {
        p->d[s] = d[s];
        p->t[s] = t[s];
        p->stage[s].devices = p->dev[s];
        for (int i = 0; i < d[s] * t[s]; i++)
            p->dev[s][i] = next++;
    }
}

/* d = (2, 1), t = 1, N = 4; stage 0 f 2, b 4 on devices 0 and 1 (replica 0: m = 0, 2; replica
 * 1: m = 1, 3), stage 1 f 1, b 2 on device 2; 1 ms transfers (1e9 bytes at 1000 GB/s). Stage 0
 * holds K_0 = 3 in flight, w_0 = min(2, ceil(3 / 2)) = 2: F F B B; stage 1 w = 1.
 *   dev0: F0 [0,2] F2 [2,4]      dev1: F1 [0,2] F3 [2,4]
 *   sends to dev2: m0 [2,3], m1 [3,4] (dev2's queue after m0), m2 [4,5], m3 [5,6]
 *   dev2: F0 [3,4] B0 [4,6] F1 [6,7] B1 [7,9] F2 [9,10] B2 [10,12] F3 [12,13] B3 [13,15]
 *   gradients back: m0 [6,7], m1 [9,10], m2 [12,13], m3 [15,16]
 *   dev0: B0 [7,11] B2 [13,17]   dev1: B1 [10,14] B3 [16,20]          step 20 ms.
 * Busy 12 ms on each device, bubble 1 - 36 / 60 = 0.4; each device's queue moves 4 (8 on dev2). */
static void test_by_hand(void)
{
    pf_cluster_t *c = pf_test_flat_cluster(3, 1000, 0);
    pipe_t p;
    int d[] = {2, 1}, t[] = {1, 1};
    pipe_init(&p, c, 2, d, t, 4);
    p.stage[0] = (pf_simulate_stage_t){.fwd_ms = 2, .bwd_ms = 4, .send_bytes = 1e9,
                                       .act_bytes = 10, .static_bytes = 1000, .devices = p.dev[0]};
    p.stage[1] = (pf_simulate_stage_t){.fwd_ms = 1, .bwd_ms = 2, .act_bytes = 10,
                                       .devices = p.dev[1]};
    char err[256];
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simstages_run(&p.in, &r, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(r->step_ms, 20, 1e-12);
    PF_ASSERT_CLOSE(r->bubble_fraction, 0.4, 1e-12);
    CU_ASSERT_EQUAL(r->ndevices, 3);
    CU_ASSERT_EQUAL(r->replicas, 2);
    CU_ASSERT_EQUAL(r->microbatches, 2);
    int inflight[] = {2, 2, 1};
    double comm[] = {4, 4, 8}, mem[] = {1020, 1020, 10};
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(r->device[i], i);
        PF_ASSERT_CLOSE(r->busy_ms[i], 12, 1e-12);
        PF_ASSERT_CLOSE(r->comm_busy_ms[i], comm[i], 1e-12);
        CU_ASSERT_EQUAL(r->peak_inflight[i], inflight[i]);
        PF_ASSERT_CLOSE(r->peak_mem_bytes[i], mem[i], 1e-12);
    }
    int recv_m3 = 0; /* micro-batch 3's activation arrives on device 2 from replica 1 */
    for (int e = 0; e < r->nevents; e++) {
        const pf_simulate_event_t *ev = &r->events[e];
        if (ev->kind == PF_EV_RECV && ev->device == 2 && ev->microbatch == 3) {
            recv_m3++;
            CU_ASSERT_EQUAL(ev->replica, 0);
            PF_ASSERT_CLOSE(ev->start_ms, 5, 1e-12);
        }
        if (ev->kind == PF_EV_BWD && ev->microbatch == 3) {
            CU_ASSERT(ev->device == 1 || ev->device == 2);
            if (ev->device == 1)
                PF_ASSERT_CLOSE(ev->start_ms, 16, 1e-12);
        }
    }
    CU_ASSERT_EQUAL(recv_m3, 1);
    pf_simulate_result_destroy(&r);
    pf_cluster_destroy(&c);
}

/* t = (1, 2), d = 1, N = 1: the activation goes from stage 0's one device to rank 0 of stage 1
 * (one pair: 1e9 bytes at 1000 GB/s, 1 ms), then stage 1's two devices all-gather it (the
 * collective model's time, AG); the gradient comes back over the one pair (1 ms) with no
 * gather (stage 0 has one device). F0 [0, 2], send [2, 3 + AG], F1 and B1 3 ms, back 1 ms, B0 4
 * ms: step 11 + AG. */
static void test_groups_of_two_sizes(void)
{
    pf_cluster_t *c = pf_test_flat_cluster(3, 1000, 0);
    pipe_t p;
    int d[] = {1, 1}, t[] = {1, 2};
    pipe_init(&p, c, 2, d, t, 1);
    p.stage[0] = (pf_simulate_stage_t){.fwd_ms = 2, .bwd_ms = 4, .send_bytes = 1e9,
                                       .devices = p.dev[0]};
    p.stage[1] = (pf_simulate_stage_t){.fwd_ms = 1, .bwd_ms = 2, .devices = p.dev[1]};
    pf_collective_group_t g;
    CU_ASSERT_EQUAL_FATAL(pf_collective_group_from_cluster(c, p.dev[1], 2, 0, &g), PF_OK);
    double ag = pf_collective_best_ms(&g, PF_COLL_ALLGATHER, 1e9);
    CU_ASSERT(ag > 0);
    char err[256];
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simstages_run(&p.in, &r, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(r->step_ms, 11 + ag, 1e-9);
    pf_simulate_result_destroy(&r);
    pf_cluster_destroy(&c);
}

/* A graph of ops with times (fwd, 2 fwd), chained, each edge `bytes`, each op 10 (i + 1)
 * parameter bytes. */
static pf_graph_t *chain(int n, const double *fwd, double bytes)
{
    char err[128];
    pf_graph_t *g = pf_graph_new("chain", 1);
    for (int i = 0; i < n; i++) {
        pf_op_t op = {.id = i, .fwd_ms = fwd[i], .bwd_ms = 2 * fwd[i],
                      .param_bytes = 1e6 * (i + 1), .mem_fwd_bytes = 100 * (i + 1)};
        pf_graph_add_op(g, &op);
        if (i > 0)
            pf_graph_add_edge(g, i - 1, i, bytes);
    }
    CU_ASSERT_EQUAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    return g;
}

/* S stages of nops[s] consecutive ops each; devices in order. */
static pf_plan_t *chain_plan(int S, const int *nops, const int *d, const int *t, int N)
{
    pf_plan_t *p = pf_plan_new(S, 1);
    int at = 0, next = 0;
    for (int s = 0; s < S; s++) {
        int ops[16];
        for (int i = 0; i < nops[s]; i++)
            ops[i] = at++;
        pf_plan_set_stage_ops(p, s, ops, nops[s]);
    }
    CU_ASSERT_EQUAL(pf_plan_degrees_set(p, d, t, N), PF_OK);
    for (int s = 0; s < S; s++)
        for (int i = 0; i < d[s] * t[s]; i++)
            pf_plan_stage_devices(p, s)[i] = next++;
    return p;
}

/* test_by_hand's pipeline as a graph, a cluster of 3 and a plan: ops of 2 and 1 ms forward, a
 * 1e9-byte cut, stages of d = (2, 1), t = 1, 4 micro-batches. */
static pf_plan_t *hand_plan(pf_graph_t **g, pf_cluster_t **c)
{
    double fwd[] = {2, 1};
    int nops[] = {1, 1}, d[] = {2, 1}, t[] = {1, 1};
    *g = chain(2, fwd, 1e9);
    *c = pf_test_flat_cluster(3, 1000, 0);
    return chain_plan(2, nops, d, t, 4);
}

/* The by-hand pipeline from a graph and a plan: the same step. */
static void test_by_hand_from_plan(void)
{
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    pf_plan_t *p = hand_plan(&g, &c);
    char err[256];
    pf_simstages_input_t in;
    CU_ASSERT_EQUAL_FATAL(pf_simstages_plan_input(g, c, p, &in, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(in.microbatches, 4);
    CU_ASSERT_EQUAL(in.replicas[0], 2);
    PF_ASSERT_CLOSE(in.stage[0].bwd_ms, 4, 1e-12);
    PF_ASSERT_CLOSE(in.stage[0].send_bytes, 1e9, 1e-12);
    PF_ASSERT_CLOSE(in.stage[1].act_bytes, 200 + 1e9, 1e-12);
    CU_ASSERT_EQUAL(in.stage[0].devices[1], 1);
    pf_simstages_input_clear(&in);
    pf_simstages_input_clear(&in);
    CU_ASSERT_PTR_NULL(in.stage);
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simstages_plan_simulate(g, c, p, PF_SCHEDULE_1F1B, 0, &r, err,
                                                     sizeof err), PF_OK);
    /* + stage 0's gradient all-reduce over devices 0 and 1 (1e6 bytes at 1000 GB/s, tiny) */
    CU_ASSERT(r->step_ms > 20 && r->step_ms < 20.1);
    CU_ASSERT_EQUAL(r->nevents, 0);
    int s, rep, k;
    pf_simstages_plan_row(p, 1, &s, &rep, &k);
    CU_ASSERT(s == 0 && rep == 1 && k == 0);
    pf_simstages_plan_row(p, 2, &s, &rep, &k);
    CU_ASSERT(s == 1 && rep == 0 && k == 0);
    pf_simstages_plan_row(p, 3, &s, &rep, &k);
    CU_ASSERT_EQUAL(s, -1);
    pf_simulate_result_destroy(&r);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

static void assert_same(const pf_simulate_result_t *a, const pf_simulate_result_t *b)
{
    CU_ASSERT_EQUAL_FATAL(a->ndevices, b->ndevices);
    CU_ASSERT_EQUAL(a->step_ms, b->step_ms);
    CU_ASSERT_EQUAL(a->bubble_fraction, b->bubble_fraction);
    CU_ASSERT_EQUAL(a->order, b->order);
    for (int i = 0; i < a->ndevices; i++) {
        CU_ASSERT_EQUAL(a->device[i], b->device[i]);
        CU_ASSERT_EQUAL(a->busy_ms[i], b->busy_ms[i]);
        CU_ASSERT_EQUAL(a->comm_busy_ms[i], b->comm_busy_ms[i]);
        CU_ASSERT_EQUAL(a->peak_mem_bytes[i], b->peak_mem_bytes[i]);
        CU_ASSERT_EQUAL(a->peak_inflight[i], b->peak_inflight[i]);
    }
}

/* pf_simulate on the plan's own input, each transfer of a T > 1 group at the cheaper of the
 * cross-mesh resharding and Megatron-LM's scatter/gather (what the search's RESHARD jobs give
 * simulate.c, and simstages prices itself; T = 1: the postal model, NULL xfer_ms), against
 * simstages. */
static void compare_uniform(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p)
{
    char err[256];
    pf_training_schedule_t sch[] = {PF_SCHEDULE_GPIPE, PF_SCHEDULE_1F1B, PF_SCHEDULE_EAGER_1F1B,
                                    PF_SCHEDULE_SIGNAL};
    pf_simulate_input_t in;
    CU_ASSERT_EQUAL_FATAL(pf_simulate_input_from_plan(g, c, p, &in, err, sizeof err), PF_OK);
    for (int s = 0; s < in.stages; s++) {
        free(in.stage[s].xfer_ms);
        in.stage[s].xfer_ms = NULL;
        if (in.tp <= 1 || s + 1 >= in.stages)
            continue;
        in.stage[s].xfer_ms = malloc((size_t)in.replicas * sizeof *in.stage[s].xfer_ms);
        CU_ASSERT_PTR_NOT_NULL_FATAL(in.stage[s].xfer_ms);
        for (int r = 0; r < in.replicas; r++) { /* simulate.c's RESHARD jobs' rule */
            pf_simulate_xfer_problem_t xp;
            pf_simulate_xfer_problem(in.stage[s].devices + r * in.tp,
                                     in.stage[s + 1].devices + r * in.tp, in.tp,
                                     in.stage[s].send_bytes, &xp);
            CU_ASSERT_EQUAL(pf_simulate_xfer_ms(c, &xp, &in.stage[s].xfer_ms[r], err, sizeof err),
                            PF_OK);
        }
    }
    for (int i = 0; i < 4; i++) {
        pf_simulate_result_t *a = NULL, *b = NULL;
        in.schedule = sch[i];
        CU_ASSERT_EQUAL_FATAL(pf_simulate(&in, &a, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL_FATAL(pf_simstages_plan_simulate(g, c, p, sch[i], 0, &b, err, sizeof err),
                              PF_OK);
        assert_same(a, b);
        pf_simulate_result_destroy(&a);
        pf_simulate_result_destroy(&b);
    }
    pf_simulate_input_clear(&in);
}

/* Uniform plans (every d_s = R, t_s = 1) are simulate.c's: the same figures bit for bit, with
 * transfers, latency and the gradient all-reduce, under every schedule. */
static void test_uniform_t1(void)
{
    double fwd[] = {1, 2.5, 1.5, 3};
    pf_graph_t *g = chain(4, fwd, 3e8);
    pf_cluster_t *c = pf_test_flat_cluster(8, 50, 5);
    int two[] = {2, 2}, four[] = {1, 1, 1, 1}, R1[] = {1, 1, 1, 1}, R2[] = {2, 2}, T1[] = {1, 1, 1, 1};
    pf_plan_t *p = chain_plan(2, two, R1, T1, 6);
    compare_uniform(g, c, p);
    pf_plan_destroy(&p);
    p = chain_plan(2, two, R2, T1, 8);
    compare_uniform(g, c, p);
    pf_plan_destroy(&p);
    p = chain_plan(4, four, R1, T1, 5);
    compare_uniform(g, c, p);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* BERT, 2 layers; 2 hosts of 4 GPUs, 100 GB/s inside, 12.5 across. */
static void bert_setup(pf_graph_t **g, pf_cluster_t **c)
{
    char err[256];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_BERT);
    mo.layers = 2;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, g, err, sizeof err), PF_OK);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_HIER);
    to.machines = 2;
    to.gpus_per_machine = 4;
    to.intra_gbps = 100;
    to.inter_gbps = 12.5;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, c, err, sizeof err), PF_OK);
}

/* Two stages of BERT's ops halves, d and t per stage, devices: stage 0 from 0, stage 1 from 4. */
static pf_plan_t *bert_plan(const pf_graph_t *g, const int *d, const int *t, int N)
{
    int n = pf_graph_nops(g), half = n / 2, *ops = malloc((size_t)n * sizeof *ops);
    pf_plan_t *p = pf_plan_new(2, 1);
    for (int v = 0; v < n; v++)
        ops[v] = v;
    pf_plan_set_stage_ops(p, 0, ops, half);
    pf_plan_set_stage_ops(p, 1, ops + half, n - half);
    free(ops);
    CU_ASSERT_EQUAL(pf_plan_degrees_set(p, d, t, N), PF_OK);
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < d[s] * t[s]; i++)
            pf_plan_stage_devices(p, s)[i] = 4 * s + i;
    return p;
}

/* T = 2 uniform (TAP's setting, its collectives on the compute stream): simulate.c with the
 * resharding jobs' transfer times gives the same figures. */
static void test_uniform_t2(void)
{
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    bert_setup(&g, &c);
    int d[] = {2, 2}, t[] = {2, 2};
    pf_plan_t *p = bert_plan(g, d, t, 8);
    compare_uniform(g, c, p);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Stage s of a mixed plan costs what it costs in a uniform plan of its own degree: d = (1, 2),
 * t = (2, 1) against the uniform T = 2 (stage 0) and T = 1, R = 2 (stage 1) plans. */
static void test_mixed_prices(void)
{
    char err[256];
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    bert_setup(&g, &c);
    int d[] = {1, 2}, t[] = {2, 1}, d1[] = {1, 1}, t2[] = {2, 2}, d2[] = {2, 2}, t1[] = {1, 1};
    pf_plan_t *p = bert_plan(g, d, t, 4), *u2 = bert_plan(g, d1, t2, 4),
              *u1 = bert_plan(g, d2, t1, 4);
    CU_ASSERT(pf_plan_degrees_mixed(p));
    pf_simstages_input_t in;
    pf_simulate_input_t a, b;
    CU_ASSERT_EQUAL_FATAL(pf_simstages_plan_input(g, c, p, &in, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_simulate_input_from_plan(g, c, u2, &a, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_simulate_input_from_plan(g, c, u1, &b, err, sizeof err), PF_OK);
    const pf_simulate_stage_t *want[] = {&a.stage[0], &b.stage[1]};
    for (int s = 0; s < 2; s++) {
        const pf_simulate_stage_t *x = &in.stage[s], *w = want[s];
        CU_ASSERT_EQUAL(x->fwd_ms, w->fwd_ms);
        CU_ASSERT_EQUAL(x->bwd_ms, w->bwd_ms);
        CU_ASSERT_EQUAL(x->tp_fwd_ms, w->tp_fwd_ms);
        CU_ASSERT_EQUAL(x->tp_bwd_ms, w->tp_bwd_ms);
        CU_ASSERT_EQUAL(x->param_bytes, w->param_bytes);
        CU_ASSERT_EQUAL(x->send_bytes, w->send_bytes);
        CU_ASSERT_EQUAL(x->act_bytes, w->act_bytes);
        CU_ASSERT_EQUAL(x->static_bytes, w->static_bytes);
    }
    CU_ASSERT(in.stage[0].tp_fwd_ms > 0 && in.stage[1].tp_fwd_ms == 0);
    /* the cut from the 1 x 2 mesh to each of the two 1 x 1 meshes, resharded per replica pair
     * (lcm(1, 2) = 2 of them): what reshard.h gives for that problem alone */
    CU_ASSERT_PTR_NOT_NULL_FATAL(in.stage[0].xfer_ms);
    CU_ASSERT_PTR_NULL(in.stage[1].xfer_ms);
    for (int m = 0; m < 2; m++) {
        int64_t shape[1] = {(int64_t)ceil(in.stage[0].send_bytes)};
        pf_mesh_shard_t spec[1] = {PF_SHARDING_R};
        pf_reshard_problem_t pr = {.ndims = 1, .shape = shape, .dtype_bytes = 1,
                                   .src_mesh = {1, 2, in.stage[0].devices},
                                   .dst_mesh = {1, 1, in.stage[1].devices + m},
                                   .src_spec = spec, .dst_spec = spec};
        pf_reshard_opts_t o;
        pf_reshard_opts_default(&o);
        o.sched.dfs_budget_s = 0;
        pf_reshard_net_t *net = pf_reshard_net_from_cluster(c, err, sizeof err);
        pf_reshard_t *rs = net ? pf_reshard_new(&pr, net, &o, err, sizeof err) : NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(rs);
        CU_ASSERT_EQUAL(in.stage[0].xfer_ms[m], pf_reshard_time_ms(rs));
        pf_reshard_destroy(&rs);
        pf_reshard_net_destroy(&net);
    }
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simstages_run(&in, &r, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(r->ndevices, 4);
    CU_ASSERT_EQUAL(r->device[2], 4);
    CU_ASSERT_EQUAL(r->device[3], 5);
    /* stage 0 (one replica) runs all 4 micro-batches, each stage-1 replica 2 */
    double f0 = in.stage[0].fwd_ms + in.stage[0].tp_fwd_ms, b0 = in.stage[0].bwd_ms + in.stage[0].tp_bwd_ms;
    PF_ASSERT_CLOSE(r->busy_ms[0], 4 * (f0 + b0), 1e-9);
    PF_ASSERT_CLOSE(r->busy_ms[3], 2 * (in.stage[1].fwd_ms + in.stage[1].bwd_ms), 1e-9);
    pf_simulate_result_destroy(&r);
    pf_simstages_input_clear(&in);
    pf_simulate_input_clear(&a);
    pf_simulate_input_clear(&b);
    pf_plan_destroy(&p);
    pf_plan_destroy(&u1);
    pf_plan_destroy(&u2);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Stage s's ops of a GPT halved, one device per replica; devices[s] its replicas'. */
static pf_plan_t *gpt_plan(const pf_graph_t *g, const int *d, int N, const int *const *devices)
{
    int t[] = {1, 1};
    pf_plan_t *p = bert_plan(g, d, t, N);
    for (int s = 0; s < 2; s++)
        for (int r = 0; r < d[s]; r++)
            p->stage_list[s].devices[r] = devices[s][r];
    return p;
}

/* A cluster of an A100, an A100 and an H100 (devkinds.h): stage 0's replicas on the A100 and
 * the H100 each run at their own kind's speed, as stage 0 of a uniform plan on that device. */
static void test_mixed_kinds(void)
{
    char err[256];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 2, mo.hidden = 512, mo.heads = 8, mo.seq = 512;
    pf_graph_t *raw = NULL, *g = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &raw, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_price_graph(raw, pf_devmodel_preset("a100-80g"), PF_PREC_BF16, &g,
                                         NULL, err, sizeof err), PF_OK);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_NVSWITCH);
    to.machines = 3;
    to.gpus_per_machine = 1;
    to.models = "a100-80g,a100-80g,h100-sxm";
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    int d[] = {2, 1}, one[] = {1, 1}, s0[] = {0, 2}, s1[] = {1}, h[] = {2};
    const int *mixed_dev[] = {s0, s1}, *on_a100[] = {s0, s1}, *on_h100[] = {h, s1};
    pf_plan_t *p = gpt_plan(g, d, 4, mixed_dev), *ua = gpt_plan(g, one, 2, on_a100),
              *uh = gpt_plan(g, one, 2, on_h100);
    pf_simstages_input_t in;
    pf_simulate_input_t a, b;
    CU_ASSERT_EQUAL_FATAL(pf_simstages_plan_input(g, c, p, &in, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_simulate_input_from_plan(g, c, ua, &a, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_simulate_input_from_plan(g, c, uh, &b, err, sizeof err), PF_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in.stage[0].rep_fwd_ms);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a.stage[0].rep_fwd_ms);
    CU_ASSERT_EQUAL(in.stage[0].rep_fwd_ms[0], a.stage[0].rep_fwd_ms[0]);
    CU_ASSERT_EQUAL(in.stage[0].rep_bwd_ms[0], a.stage[0].rep_bwd_ms[0]);
    CU_ASSERT_EQUAL(in.stage[0].rep_fwd_ms[1], b.stage[0].rep_fwd_ms[0]);
    CU_ASSERT_EQUAL(in.stage[0].rep_bwd_ms[1], b.stage[0].rep_bwd_ms[0]);
    CU_ASSERT(in.stage[0].rep_fwd_ms[1] < in.stage[0].rep_fwd_ms[0]);
    CU_ASSERT_EQUAL(in.stage[1].rep_fwd_ms[0], a.stage[1].rep_fwd_ms[0]);
    pf_simstages_input_clear(&in);
    pf_simulate_input_clear(&a);
    pf_simulate_input_clear(&b);
    pf_plan_destroy(&p);
    pf_plan_destroy(&ua);
    pf_plan_destroy(&uh);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&raw);
    pf_graph_destroy(&g);
}

/* Forwards before the first backward: simstages.h's w_s. */
static int want_inflight(const pipe_t *p, int s, pf_training_schedule_t sch)
{
    int K = 0, n = p->in.microbatches / p->d[s];
    for (int i = s; i < p->in.stages; i++)
        K += p->d[i];
    int c = (K + p->d[s] - 1) / p->d[s], w = sch == PF_SCHEDULE_EAGER_1F1B ? 2 * c - 1 : c;
    return sch == PF_SCHEDULE_GPIPE || w > n ? n : w;
}

/* One random pipeline: every schedule runs every task (each row busy n_s x its work, the most
 * in flight w_s), and free communication's best order bounds them from below. */
static void random_pipe(const pf_cluster_t *c, pf_rng_t *seed)
{
    static const int dv[] = {1, 2, 3, 4, 6};
    int S = 2 + (int)(pf_rng_below(seed, 3)), d[4], t[4], N = 12;
    for (int s = 0; s < S; s++) {
        d[s] = dv[pf_rng_below(seed, 5)];
        t[s] = 1 + (int)(pf_rng_below(seed, 2));
    }
    pipe_t p;
    pipe_init(&p, c, S, d, t, N);
    p.in.timeline = 0;
    p.in.buckets = 2;
    for (int s = 0; s < S; s++) {
        pf_simulate_stage_t *st = &p.stage[s];
        st->fwd_ms = 0.5 + pf_rng_uniform(seed);
        st->bwd_ms = 2 * st->fwd_ms;
        st->tp_fwd_ms = t[s] > 1 ? 0.1 : 0;
        st->optimizer_ms = 0.2;
        st->send_bytes = 1e8 * pf_rng_uniform(seed);
        st->param_bytes = 1e9 * pf_rng_uniform(seed);
    }
    pf_training_schedule_t sch[] = {PF_SCHEDULE_GPIPE, PF_SCHEDULE_1F1B, PF_SCHEDULE_EAGER_1F1B};
    double least = INFINITY, signal;
    char err[256];
    pf_simulate_result_t *r = NULL;
    for (int i = 0; i < 3; i++) {
        p.in.schedule = sch[i];
        CU_ASSERT_EQUAL_FATAL(pf_simstages_run(&p.in, &r, err, sizeof err), PF_OK);
        for (int s = 0, row = 0; s < S; s++)
            for (int j = 0; j < d[s] * t[s]; j++, row++) {
                const pf_simulate_stage_t *st = &p.stage[s];
                double work = st->fwd_ms + st->tp_fwd_ms + st->bwd_ms;
                PF_ASSERT_CLOSE(r->busy_ms[row], N / d[s] * work + st->optimizer_ms, 1e-9);
                CU_ASSERT_EQUAL(r->peak_inflight[row], want_inflight(&p, s, sch[i]));
                CU_ASSERT(r->step_ms >= r->busy_ms[row] - 1e-9);
            }
        least = fmin(least, r->step_ms);
        pf_simulate_result_destroy(&r);
    }
    p.in.schedule = PF_SCHEDULE_SIGNAL;
    CU_ASSERT_EQUAL_FATAL(pf_simstages_run(&p.in, &r, err, sizeof err), PF_OK);
    signal = r->step_ms;
    CU_ASSERT(signal <= least + 1e-9);
    pf_simulate_result_destroy(&r);
}

static void test_random_degrees(void)
{
    pf_cluster_t *c = pf_test_flat_cluster(48, 50, 3);
    pf_rng_t seed;
    pf_rng_seed(&seed, 24);
    for (int i = 0; i < 40; i++)
        random_pipe(c, &seed);
    pf_cluster_destroy(&c);
}

static void test_bad_input(void)
{
    char err[256];
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    pf_plan_t *p = hand_plan(&g, &c);
    pf_simulate_result_t *r = NULL;
    p->blocks.present = 1;
    p->blocks.virtual_stages = 2;
    CU_ASSERT_EQUAL(pf_simstages_plan_simulate(g, c, p, PF_SCHEDULE_1F1B, 0, &r, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "virtual stages"));
    p->blocks.present = 0;
    free(p->stage_list[1].devices); /* unmapped */
    p->stage_list[1].devices = NULL;
    CU_ASSERT_EQUAL(pf_simstages_plan_simulate(g, c, p, PF_SCHEDULE_1F1B, 0, &r, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no devices"));
    CU_ASSERT_PTR_NULL(r);

    pipe_t q;
    int d[] = {2, 1}, t[] = {1, 1};
    pipe_init(&q, c, 2, d, t, 4);
    q.stage[0].fwd_ms = q.stage[1].fwd_ms = 1;
    q.dev[1][0] = 0; /* stage 0's */
    CU_ASSERT_EQUAL(pf_simstages_run(&q.in, &r, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "used twice"));
    q.dev[1][0] = 2;
    q.in.microbatches = 3; /* d_0 = 2 does not divide it */
    CU_ASSERT_EQUAL(pf_simstages_run(&q.in, &r, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "dividing"));
    q.in.microbatches = 4;
    q.stage[1].bwd_ms = NAN;
    CU_ASSERT_EQUAL(pf_simstages_run(&q.in, &r, err, sizeof err), PF_EINPUT);
    q.stage[1].bwd_ms = 1;
    atomic_int stop = 1;
    q.in.cancel = &stop;
    CU_ASSERT_EQUAL(pf_simstages_run(&q.in, &r, err, sizeof err), PF_ERR);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cancelled"));
    q.in.cancel = NULL;
    CU_ASSERT_EQUAL(pf_simstages_run(&q.in, &r, err, sizeof err), PF_OK);
    pf_simulate_result_destroy(&r);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* `planfarm simulate` on the by-hand plan: the step, each device's stage and replica, the
 * timeline; --microbatches counts per replica of the widest stage. */
static void test_command(void)
{
    char err[256], gpath[600], cpath[600], ppath[600], svg[600], cmd[4096], out[8192];
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    pf_plan_t *p = hand_plan(&g, &c);
    const char *dir = pf_test_tmpdir();
    snprintf(gpath, sizeof gpath, "%s/simst_g.json", dir);
    snprintf(cpath, sizeof cpath, "%s/simst_c.json", dir);
    snprintf(ppath, sizeof ppath, "%s/simst_p.json", dir);
    snprintf(svg, sizeof svg, "%s/simst_tl.svg", dir);
    CU_ASSERT_EQUAL_FATAL(pf_graph_save(g, gpath, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_cluster_save(c, cpath, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_plan_save(p, g, c, ppath, err, sizeof err), PF_OK);
    snprintf(cmd, sizeof cmd, "%s simulate %s %s %s --timeline %s", pf_test_bin(), gpath, cpath,
             ppath, svg);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "step 20.00 ms (1f1b, 2 micro-batches"));
    const char *line = strstr(out, "peak_mem");
    int want_stage[] = {0, 0, 1}, want_rep[] = {0, 1, 0};
    for (int i = 0; i < 3 && line; i++) {
        int dev = -1, s = -1, r = -1;
        char name[64];
        line = strchr(line, '\n');
        CU_ASSERT_FATAL(line && sscanf(line + 1, "%d %63s %d %d", &dev, name, &s, &r) == 4);
        CU_ASSERT(dev == i && s == want_stage[i] && r == want_rep[i]);
        line++;
    }
    FILE *f = fopen(svg, "r");
    CU_ASSERT_PTR_NOT_NULL(f);
    if (f)
        fclose(f);
    snprintf(cmd, sizeof cmd, "%s simulate %s %s %s --microbatches 4 --schedule gpipe",
             pf_test_bin(), gpath, cpath, ppath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "(gpipe, 4 micro-batches"));
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* The search's SIMULATE job of a plan whose stages differ: simstages' step, and the memory
 * verdict from the simulated peaks (device 2 given less than its peak of ~1 GB). */
static void test_job(void)
{
    char err[256];
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    pf_plan_t *p = hand_plan(&g, &c);
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simstages_plan_simulate(g, c, p, PF_SCHEDULE_GPIPE, 0, &r, err,
                                                     sizeof err), PF_OK);
    pf_job_t job;
    pf_job_init(&job, PF_JOB_SIMULATE);
    job.graph = g;
    job.cluster = c;
    job.plan = p;
    job.schedule = PF_SCHEDULE_GPIPE;
    pf_job_result_t res;
    CU_ASSERT_EQUAL_FATAL(pf_job_run(&job, &res), PF_OK);
    CU_ASSERT_EQUAL(res.sim.step_ms, r->step_ms);
    CU_ASSERT_EQUAL(res.sim.peak_mem_bytes, r->peak_mem_bytes[2]);
    CU_ASSERT_EQUAL(res.sim.fits, 1);
    CU_ASSERT_EQUAL(pf_job_check_answer(&job, &res, err, sizeof err), PF_OK);
    pf_job_result_clear(&res);
    CU_ASSERT_EQUAL(pf_job_simulate_bound_ms(&job), 0); /* simulate.c's bound: uniform plans */
    pf_device_t small = {.id = 2, .host = 1, .mem_bytes = 5e8};
    pf_cluster_set_device(c, 2, &small);
    CU_ASSERT_EQUAL_FATAL(pf_job_run(&job, &res), PF_OK);
    CU_ASSERT_EQUAL(res.sim.fits, 0);
    CU_ASSERT_EQUAL(res.sim.mem_limit_bytes, 5e8);
    CU_ASSERT_EQUAL(pf_job_check_answer(&job, &res, err, sizeof err), PF_OK);
    pf_job_result_clear(&res);
    pf_simulate_result_destroy(&r);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

void pf_suite_simstages(void)
{
    CU_pSuite s = CU_add_suite("simstages", NULL, NULL);
    CU_add_test(s, "d = (2, 1): a step worked by hand", test_by_hand);
    CU_add_test(s, "t = (1, 2): one pair, then the receivers' all-gather", test_groups_of_two_sizes);
    CU_add_test(s, "the same from a graph and a plan", test_by_hand_from_plan);
    CU_add_test(s, "uniform T = 1 plans: simulate.c's figures bit for bit", test_uniform_t1);
    CU_add_test(s, "uniform T = 2 plan: simulate.c's with its resharding transfer times",
                test_uniform_t2);
    CU_add_test(s, "a mixed plan's stages priced as in uniform plans of their degree",
                test_mixed_prices);
    CU_add_test(s, "a cluster of two kinds: each replica at its devices' speed", test_mixed_kinds);
    CU_add_test(s, "random degree vectors: every task runs, w_s in flight", test_random_degrees);
    CU_add_test(s, "bad input refused with a message", test_bad_input);
    CU_add_test(s, "planfarm simulate of a plan whose stages differ", test_command);
    CU_add_test(s, "the search's SIMULATE job of such a plan", test_job);
}
