/* simcpep: the ring and the all-to-alls a context / expert parallel plan adds to a simulated
 * stage, on two DGX-H100 hosts: the terms of blockcpep (ring time worked by hand there), on the
 * plan's replicas. */
#include "planner/inputs/cpep.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/topology.h"
#include "planner/ir/collective.h"
#include "planner/sim/simcpep.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A one-stage plan of every op of g on 4 replicas, T = 1, devices 0, 8, 1, 9 (replicas 0 and 1
 * on different hosts), and its simulator input with zero times. */
typedef struct {
    pf_plan_t *p;
    pf_simulate_input_t in;
    pf_simulate_stage_t st;
    int dev[4];
} one_stage_t;

static int one_stage(const pf_graph_t *g, int C, int E, one_stage_t *x)
{
    memset(x, 0, sizeof *x);
    int n = pf_graph_nops(g), *ops = malloc(sizeof *ops * (size_t)n);
    if (!ops || !(x->p = pf_plan_new(1, 4))) {
        free(ops);
        return -1;
    }
    for (int v = 0; v < n; v++)
        ops[v] = v;
    int rc = pf_plan_set_stage_ops(x->p, 0, ops, n);
    free(ops);
    x->p->blocks.present = 1, x->p->blocks.context_parallel = C, x->p->blocks.expert_parallel = E;
    x->dev[0] = 0, x->dev[1] = 8, x->dev[2] = 1, x->dev[3] = 9;
    x->st.devices = x->dev;
    x->in = (pf_simulate_input_t){.stages = 1, .replicas = 4, .tp = 1, .microbatches = 1,
                                  .stage = &x->st};
    return rc;
}

static pf_graph_t *model(pf_model_kind_t kind)
{
    char err[256];
    pf_model_opts_t mo;
    pf_graph_t *g = NULL;
    pf_model_opts_init(&mo, kind);
    mo.layers = 2, mo.vocab = 1000, mo.precision_bytes = 2, mo.microbatch = 1;
    mo.hidden = 256, mo.heads = 4, mo.kv_heads = 2, mo.ffn = 512, mo.seq = 256;
    if (kind == PF_MODEL_MOE)
        mo.experts = 8, mo.top_k = 2;
    if (pf_model_build(&mo, &g, err, sizeof err))
        fprintf(stderr, "\n  model: %s\n", err);
    return g;
}

/* C = 2: the CP groups are replicas {0, 1} (devices 0, 8: across hosts) and {2, 3} (1, 9); the
 * ring of one layer is the ring all-gather of 2 chunks of the device's K and V, exposed beyond the
 * layer's attention core, forward and backward. C = 1 adds nothing; 4 replicas do not divide by
 * C E = 8. */
static void test_ring(void)
{
    char err[256];
    pf_cluster_t *c = NULL;
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX_H100);
    to.machines = 2;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    pf_graph_t *g = model(PF_MODEL_LLAMA), *h = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL_FATAL(pf_cpep_graph(g, 1, 2, 1, &h, err, sizeof err), PF_OK);
    one_stage_t x;
    CU_ASSERT_EQUAL_FATAL(one_stage(h, 2, 1, &x), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_simcpep_add(h, c, x.p, &x.in, err, sizeof err), PF_OK);
    pf_cpep_facts_t f;
    pf_cpep_facts(h, NULL, 0, &f);
    int devs[2] = {0, 8};
    pf_collective_group_t grp;
    CU_ASSERT_EQUAL_FATAL(pf_collective_group_from_cluster(c, devs, 2, 0, &grp), PF_OK);
    double kv = f.kv_bytes / f.attn_layers; /* the device's s / 2 tokens' K and V */
    double ring = pf_collective_ms(&grp, PF_COLL_ALLGATHER, 2 * kv, PF_COLL_ALGO_RING, NULL);
    PF_ASSERT_CLOSE(ring, 0.005 + kv / 50e6, 1e-12); /* 1 step: 1/2 of 2 chunks, 50 GB/s */
    double fwd = f.attn_layers * fmax(0, ring - f.core_fwd_ms / f.attn_layers);
    double bwd = f.attn_layers * fmax(0, 2 * ring - f.core_bwd_ms / f.attn_layers);
    PF_ASSERT_CLOSE(x.st.tp_fwd_ms, fwd, 1e-12);
    PF_ASSERT_CLOSE(x.st.tp_bwd_ms, bwd, 1e-12);
    CU_ASSERT(x.st.tp_bwd_ms > 0);
    CU_ASSERT_EQUAL(x.st.recompute_ms, 0);
    pf_plan_destroy(&x.p);
    CU_ASSERT_EQUAL_FATAL(one_stage(h, 1, 1, &x), PF_OK);
    CU_ASSERT_EQUAL(pf_simcpep_add(h, c, x.p, &x.in, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(x.st.tp_fwd_ms + x.st.tp_bwd_ms, 0);
    pf_plan_destroy(&x.p);
    CU_ASSERT_EQUAL_FATAL(one_stage(h, 2, 4, &x), PF_OK);
    CU_ASSERT_EQUAL(pf_simcpep_add(h, c, x.p, &x.in, err, sizeof err), PF_EINPUT);
    pf_plan_destroy(&x.p);
    pf_graph_destroy(&h);
    pf_graph_destroy(&g);

    /* E = 4 on the MoE graph: replicas 0..3 are one EP group (devices 0, 8, 1, 9: two per host);
     * 4 all-to-alls per MoE layer of the dispatch's output */
    g = model(PF_MODEL_MOE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL_FATAL(one_stage(g, 1, 4, &x), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_simcpep_add(g, c, x.p, &x.in, err, sizeof err), PF_OK);
    pf_cpep_facts(g, NULL, 0, &f);
    CU_ASSERT_EQUAL_FATAL(pf_collective_group_from_cluster(c, x.dev, 4, 0, &grp), PF_OK);
    double a2a = pf_collective_best_ms(&grp, PF_COLL_ALLTOALL, f.a2a_bytes / f.moe_layers);
    /* 5 us + 2/4 of 256 KiB through the NIC at 50 GB/s (inside: 1/4 at 370 GB/s, less) */
    PF_ASSERT_CLOSE(a2a, 0.005 + 0.5 * 262144 / 50e6, 1e-12);
    PF_ASSERT_CLOSE(x.st.tp_fwd_ms, 2.0 * f.moe_layers * a2a, 1e-12);
    PF_ASSERT_CLOSE(x.st.tp_bwd_ms, 2.0 * f.moe_layers * a2a, 1e-12);
    pf_plan_destroy(&x.p);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
}

void pf_suite_simcpep(void)
{
    CU_pSuite s = CU_add_suite("simcpep", NULL, NULL);
    CU_add_test(s, "K/V ring and all-to-alls on a plan's replicas", test_ring);
}
