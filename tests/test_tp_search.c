/* tp_search: the search over (S, R, T) against exhaustive search on a small transformer, and the
 * memory of a tensor-parallel GPT-3 stage against Korthikanti et al.'s formula. */
#include "planner/ir/cost.h"
#include "planner/map/mapping.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/partition/partition.h"
#include "planner/search/search.h"
#include "planner/map/stage_graph.h"
#include "planner/inputs/topology.h"
#include "planner/tp/tp_setting.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pf_cluster_t *cluster_of(pf_topology_kind_t kind, int machines)
{
    char err[256];
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, kind);
    o.machines = machines;
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL(pf_topology_build(&o, &c, err, sizeof err), PF_OK);
    return c;
}

/* ---- memory: one stage of GPT-3 175B at T = 8 ---- */

/* Korthikanti et al. 2022: a layer's activations under t-way tensor parallelism (no sequence
 * parallelism, no recomputation) are s b h (10 + 24 / t + 5 a s / (h t)) bytes; a layer has
 * 12 h^2 + 13 h parameters (QKV 3h^2 + 3h, projection h^2 + h, MLP 8h^2 + 5h, two layernorms 4h),
 * each holding 16 B under mixed-precision Adam, split t ways. A pure middle stage of L layers
 * holding k micro-batches then needs
 *   16 L (12 h^2 + 13 h) / t + k L s b h (10 + 24 / t + 5 a s / (h t)).
 * The plan counts per op (layernorm weights and the row-parallel biases are not split, the
 * generator's dropout masks are 1 byte), so the two agree within 10%, as the issue asks. */
static void test_gpt3_stage_memory(void)
{
    char err[512];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 16; /* per-layer numbers are the same as with 96 */
    mo.hidden = 12288;
    mo.heads = 96;
    mo.seq = 2048;
    mo.microbatch = 1;
    mo.tflops = 989;
    mo.hbm_gbps = 3350;
    pf_graph_t *g = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    pf_cluster_t *c = cluster_of(PF_TOPOLOGY_DGX_H100, 8);
    pf_tp_setting_opts_t so;
    pf_tp_setting_opts_init(&so);
    so.tp = 8;
    pf_tp_setting_t *set = pf_tp_setting_new(g, c, &so, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(set);
    const pf_graph_t *tg = pf_tp_setting_graph(set);

    /* 4 stages of 4 layers; stage 1 holds layers 4..7 and nothing else */
    const int S = 4, MB = 8, L = 4;
    int n = pf_graph_nops(tg), *st = malloc((size_t)n * sizeof *st);
    for (int v = 0; v < n; v++) {
        int layer = -1;
        sscanf(pf_graph_op(tg, v)->name, "layers.%d.", &layer);
        st[v] = layer < 0 ? (v < 2 ? 0 : S - 1) : layer / L;
    }
    pf_cost_model_t cm;
    pf_cost_model_init(&cm, pf_tp_setting_cluster(set), S, MB, 0);
    pf_cost_model_set_training(&cm, &so.train, 1, 0);
    double plan_bytes = pf_cost_stage_mem_bytes(tg, st, 1, &cm);
    double h = 12288, a = 96, s = 2048, b = 1, t = 8;
    int k = pf_cost_inflight(&cm, 1); /* 1F1B: min(MB, S - 1) = 3 */
    CU_ASSERT_EQUAL(k, 3);
    double formula = 16 * L * (12 * h * h + 13 * h) / t +
                     k * L * s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
    CU_ASSERT(fabs(plan_bytes - formula) <= 0.10 * formula);
    /* and the same stage without tensor parallelism: t = 1 in the formula */
    double plan1 = pf_cost_stage_mem_bytes(g, st, 1, &cm);
    double formula1 = 16 * L * (12 * h * h + 13 * h) + k * L * s * b * h * (34 + 5 * a * s / h);
    CU_ASSERT(fabs(plan1 - formula1) <= 0.10 * formula1);
    free(st);
    pf_tp_setting_destroy(&set);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* ---- the search against exhaustive search ---- */

/* Two blocks of Megatron's MLP (fc1: h -> 4h, gelu, fc2: 4h -> h), then a head; costs that leave
 * no ties between partitions. */
static pf_graph_t *mlp_graph(void)
{
    static const char *name[] = {"layers.0.fc1", "layers.0.act", "layers.0.fc2",
                                 "layers.1.fc1", "layers.1.act", "layers.1.fc2", "head"};
    static const char *type[] = {"linear", "gelu", "linear", "linear", "gelu", "linear",
                                 "linear"};
    static const double fwd[] = {4.1, 0.7, 3.9, 2.0, 0.6, 6.0, 6.3};
    const int64_t b = 4, s = 128, h = 256;
    char err[256];
    pf_graph_t *g = pf_graph_new("mlp2", (int)b);
    for (int i = 0; i < 7; i++) {
        int wide_in = i % 3 == 1 || i % 3 == 2, wide_out = i % 3 == 0 || i % 3 == 1;
        if (i == 6)
            wide_in = wide_out = 0;
        int64_t din = wide_in ? 4 * h : h, dout = wide_out ? 4 * h : h;
        pf_op_t op = {.id = i, .name = name[i], .type = type[i], .fwd_ms = fwd[i],
                      .bwd_ms = 2 * fwd[i], .mem_fwd_bytes = 2.0 * b * s * din};
        op.input = (pf_shape_t){3, {b, s, din}};
        op.output = (pf_shape_t){3, {b, s, dout}};
        if (strcmp(type[i], "linear") == 0) {
            op.weight = (pf_shape_t){2, {din, dout}};
            op.param_bytes = 2.0 * din * dout;
        }
        pf_graph_add_op(g, &op);
    }
    for (int i = 0; i < 6; i++) {
        const pf_op_t *o = pf_graph_op(g, i);
        pf_graph_add_edge(g, i, i + 1, 2.0 * o->output.dim[0] * o->output.dim[1] *
                                           o->output.dim[2]);
    }
    CU_ASSERT_EQUAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    return g;
}

typedef struct {
    const pf_graph_t *g;
    const pf_cost_model_t *cm;
    int n, S, *st;
    double best;
    uint32_t best_chain[8], chain[8];
} chains_t;

static int closed(const pf_graph_t *g, uint32_t set)
{
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (((set >> ed->dst) & 1) && !((set >> ed->src) & 1))
            return 0;
    }
    return 1;
}

/* Every chain of downsets {} < F_1 < ... < F_S = V, its stages priced by cost.h. */
static void chains_rec(chains_t *x, uint32_t prev, int k, double cur)
{
    uint32_t full = (1u << x->n) - 1;
    if (k == x->S) {
        if (prev == full && cur < x->best) {
            x->best = cur;
            memcpy(x->best_chain, x->chain, sizeof x->chain);
        }
        return;
    }
    for (uint32_t f = prev + 1; f <= full; f++) {
        if ((f & prev) != prev || f == prev || !closed(x->g, f) ||
            (k + 1 == x->S) != (f == full))
            continue;
        for (int v = 0; v < x->n; v++)
            x->st[v] = ((f & ~prev) >> v) & 1 ? k : -1;
        if (pf_cost_stage_mem_bytes(x->g, x->st, k, x->cm) > x->cm->mem_limit_bytes)
            continue;
        double t = pf_cost_stage_time_ms(x->g, x->st, k, x->cm);
        x->chain[k] = f;
        chains_rec(x, f, k + 1, fmax(cur, t));
    }
}

/* Least full objective (eq. 5) over every placement of the S x R stage replicas. */
static double best_mapping(const pf_stage_graph_t *sg, const pf_cluster_t *c)
{
    int N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg), D = pf_cluster_ndevices(c);
    int dev[16], used[16] = {0}, x = 0;
    double best = INFINITY;
    dev[0] = -1;
    while (x >= 0) { /* iterative odometer over injective placements */
        if (dev[x] >= 0)
            used[dev[x]] = 0;
        do
            dev[x]++;
        while (dev[x] < D && used[dev[x]]);
        if (dev[x] >= D) {
            x--;
            continue;
        }
        used[dev[x]] = 1;
        if (x == N - 1) {
            best = fmin(best, pf_mapping_objective_ms(sg, c, PF_MAP_INST_FULL, dev));
        } else {
            dev[++x] = -1;
        }
    }
    return best;
}

/* The whole search in process (pf_test_search); T > 1 goes through TAP_ENUM jobs. */
static pf_plan_t *search_in_order(const pf_graph_t *g, const pf_cluster_t *c,
                                  const pf_search_opts_t *o, int expect_tap)
{
    pf_test_search_t seen;
    pf_plan_t *p = pf_test_search(g, c, o, &seen);
    CU_ASSERT_EQUAL(seen.jobs[PF_JOB_TAP_ENUM] > 0, expect_tap);
    CU_ASSERT_PTR_NOT_NULL(p);
    return p;
}

static void test_search_equals_brute_force(void)
{
    char err[512];
    pf_graph_t *g = mlp_graph();
    pf_cluster_t *c = cluster_of(PF_TOPOLOGY_DGX1, 1); /* 8 V100s, NVLink matrix: T in 1, 2, 4, 8 */
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.refine = 0;          /* refinement may trade one optimal partition for another */
    o.candidates = 64;     /* every (S, T) is mapped */
    o.rel_eps = 1e-12;     /* binary searches run to the optimum */
    o.probe_seconds = 600; /* and no probe gives up */
    pf_plan_t *p = search_in_order(g, c, &o, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int T = p->tensor_parallel;

    /* For every T and every S: the DP's partition objective equals the best chain. */
    int degrees[] = {1, 2, 4, 8}, checked = 0;
    for (int i = 0; i < 4; i++) {
        pf_tp_setting_opts_t so;
        pf_tp_setting_opts_init(&so);
        so.tp = degrees[i];
        pf_tp_setting_t *set = pf_tp_setting_new(g, c, &so, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(set);
        const pf_graph_t *tg = pf_tp_setting_graph(set);
        const pf_cluster_t *gc = pf_tp_setting_cluster(set);
        int Dg = pf_cluster_ndevices(gc);
        for (int S = 1; S <= Dg && S <= 7; S++) {
            if (Dg % S)
                continue;
            int R = Dg / S, st[8];
            pf_cost_model_t cm;
            pf_cost_model_init(&cm, gc, S, o.microbatches ? o.microbatches : 4, 0);
            pf_cost_model_set_training(&cm, &o.train, R, 0);
            chains_t x = {.g = tg, .cm = &cm, .n = 7, .S = S, .st = st, .best = INFINITY};
            chains_rec(&x, 0, 0, 0);
            pf_partition_opts_t po;
            pf_partition_opts_init(&po);
            po.stages = S;
            po.replicas = R;
            po.refine = 0;
            pf_plan_t *dp = NULL;
            int rc = pf_partition_run(tg, gc, &po, &dp, err, sizeof err);
            if (!isfinite(x.best)) {
                CU_ASSERT_EQUAL(rc, PF_EINFEASIBLE);
                continue;
            }
            CU_ASSERT_EQUAL_FATAL(rc, PF_OK);
            PF_ASSERT_CLOSE(dp->partition_objective_ms, x.best, 1e-12);
            checked++;
            if (degrees[i] == T && S == p->stages) {
                /* the winner's mapping is the best placement of its stage graph */
                pf_stage_graph_t *sg = pf_stage_graph_from_plan(tg, dp);
                PF_ASSERT_CLOSE(p->objective_ms, best_mapping(sg, gc), 1e-9);
                PF_ASSERT_CLOSE(p->partition_objective_ms, x.best, 1e-12);
                pf_stage_graph_destroy(&sg);
            }
            pf_plan_destroy(&dp);
        }
        pf_tp_setting_destroy(&set);
    }
    CU_ASSERT(checked >= 8);
    /* the plan's devices: T per replica, all distinct, memory within the devices */
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_OK);
    for (int st = 0; st < p->stages; st++)
        CU_ASSERT(p->stage_list[st].peak_mem_bytes <= pf_cluster_min_mem_bytes(c));
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* A global batch fixes micro-batch x MB x R; a batch no (S, R, T) can make is refused. */
static void test_global_batch(void)
{
    char err[512];
    pf_graph_t *g = mlp_graph(); /* micro-batch 4 */
    pf_cluster_t *c = cluster_of(PF_TOPOLOGY_DGX1, 1);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.global_batch = 96; /* 4 x MB x R = 96: R in {1, 2, 4, 8} gives MB 24, 12, 6, 3 */
    pf_plan_t *p = search_in_order(g, c, &o, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(4 * p->microbatches * p->replicas, 96);
    pf_plan_destroy(&p);
    o.global_batch = 6; /* 4 does not divide 6 */
    pf_search_t *s = pf_search_new(g, c, &o, err, sizeof err);
    CU_ASSERT_PTR_NULL(s);
    /* bad input (exit 2), not infeasible: with R in {1, 2, 4, 8} the multiples of 4 x R */
    CU_ASSERT_EQUAL(pf_search_validate(g, c, &o, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "gives 6 samples per step"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "reachable: a multiple of 4, 8, 16, 32"));
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Layer-aligned: blocks are whole; the head rides with the last block. Unaligned, the cut that
 * balances 2 stages best falls inside layers.1: forward times 4.1 0.7 3.9 | 2.0 0.6 6.0 | 6.3
 * (c_u = 3 x forward, transfers are microseconds) give 8.7 | 14.9 after layers.0, 10.7 | 12.9
 * after layers.1.fc1 and 11.3 | 12.3 after layers.1.act, the best; aligned, only the first cut
 * is allowed. */
static void test_layer_aligned(void)
{
    pf_graph_t *g = mlp_graph();
    pf_cluster_t *c = cluster_of(PF_TOPOLOGY_DGX1, 1);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.stages = 2;
    o.tp = 1;
    pf_plan_t *p = search_in_order(g, c, &o, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_NOT_EQUAL(p->stage_list[0].nops, 3);
    pf_plan_destroy(&p);
    o.layer_aligned = 1;
    p = search_in_order(g, c, &o, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->stage_list[0].nops, 3); /* layers.0.fc1, .act, .fc2 */
    CU_ASSERT_EQUAL(p->stage_list[1].nops, 4); /* layers.1.* and the head */
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(p->stage_list[0].ops[i], i);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

void pf_suite_tp_search(void)
{
    CU_pSuite s = CU_add_suite("tp_search", NULL, NULL);
    CU_add_test(s, "GPT-3 stage memory at T = 8 against Korthikanti's formula",
                test_gpt3_stage_memory);
    CU_add_test(s, "(S, R, T) search: partitions and mapping equal exhaustive search",
                test_search_equals_brute_force);
    CU_add_test(s, "global batch fixes micro-batches x replicas", test_global_batch);
    CU_add_test(s, "layer-aligned stages hold whole blocks", test_layer_aligned);
}
