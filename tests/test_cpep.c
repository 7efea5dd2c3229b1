/* cpep: the facts of a small Llama and MoE graph, the K/V ring's bytes worked by hand, the
 * divisibility rules, and the per-device graph of a CP x EP configuration. */
#include "planner/inputs/cpep.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <string.h>

/* 2 layers, hidden 512, 8 heads (head_dim 64), 4 KV heads, seq 1024, micro-batch 2, bf16; moe:
 * 8 experts, top-2, hidden 256, 4 heads, seq 256, micro-batch 1. No device model: the re-pricing
 * is linear. */
static pf_graph_t *small(pf_model_kind_t kind)
{
    char err[256];
    pf_model_opts_t mo;
    pf_graph_t *g = NULL;
    pf_model_opts_init(&mo, kind);
    mo.layers = 2, mo.vocab = 1000, mo.precision_bytes = 2;
    if (kind == PF_MODEL_LLAMA)
        mo.hidden = 512, mo.heads = 8, mo.kv_heads = 4, mo.ffn = 1024, mo.seq = 1024,
        mo.microbatch = 2;
    else
        mo.hidden = 256, mo.heads = 4, mo.kv_heads = 2, mo.ffn = 512, mo.seq = 256,
        mo.microbatch = 1, mo.experts = 8, mo.top_k = 2;
    if (pf_model_build(&mo, &g, err, sizeof err))
        fprintf(stderr, "\n  model: %s\n", err);
    return g;
}

/* K of one layer: b s kv_heads head_dim x 2 bytes = 2 x 1024 x 4 x 64 x 2 = 1 MiB, V the same:
 * 2 layers x 2 MiB = 4 MiB. The ring at C = 4, t = 1: a device holds s / C = 256 tokens' K and V,
 * 2 x 256 x 4 x 64 x 2 x 2 = 512 KiB, and sends C - 1 = 3 of those chunks forward: 1.5 MiB per
 * layer ((C - 1)/C x the whole K and V: 3/4 x 2 MiB). */
static void test_facts_ring(void)
{
    pf_graph_t *g = small(PF_MODEL_LLAMA);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pf_cpep_facts_t f;
    pf_cpep_facts(g, NULL, 0, &f);
    CU_ASSERT_EQUAL(f.seq, 1024);
    CU_ASSERT_EQUAL(f.attn_layers, 2);
    PF_ASSERT_CLOSE(f.kv_bytes, 4.0 * 1048576, 1e-9);
    CU_ASSERT_EQUAL(f.moe_layers, 0);
    CU_ASSERT_EQUAL(f.experts, 0);
    CU_ASSERT(f.core_fwd_ms > 0 && f.core_bwd_ms > f.core_fwd_ms);
    double kv_local = f.kv_bytes / f.attn_layers / 4; /* C = 4, t = 1 */
    PF_ASSERT_CLOSE(kv_local, 524288, 1e-9);
    PF_ASSERT_CLOSE(pf_cpep_ring_fwd_bytes(kv_local, 4), 1572864, 1e-9);
    PF_ASSERT_CLOSE(pf_cpep_ring_fwd_bytes(kv_local, 4), 0.75 * f.kv_bytes / 2, 1e-9);
    CU_ASSERT_EQUAL(pf_cpep_ring_fwd_bytes(kv_local, 1), 0);
    /* the load-balanced causal split: 2C chunks */
    CU_ASSERT(pf_cpep_cp_ok(1024, 1) && pf_cpep_cp_ok(1024, 4) && pf_cpep_cp_ok(1024, 512));
    CU_ASSERT(!pf_cpep_cp_ok(1024, 3) && !pf_cpep_cp_ok(1024, 1024) && !pf_cpep_cp_ok(1024, 0));
    CU_ASSERT(!pf_cpep_cp_ok(0, 2)); /* no attention found */
    CU_ASSERT(pf_cpep_ep_ok(&f, 1) && !pf_cpep_ep_ok(&f, 2)); /* not an MoE graph */
    pf_graph_destroy(&g);
}

/* The MoE graph: one dispatch per layer of top-k x b s h x 2 bytes = 2 x 256 x 256 x 2 = 256 KiB;
 * 8 experts of 3 linears h x f = 256 x 512 x 2 bytes = 256 KiB each: 6 MiB per layer. */
static void test_facts_moe(void)
{
    pf_graph_t *g = small(PF_MODEL_MOE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pf_cpep_facts_t f;
    pf_cpep_facts(g, NULL, 0, &f);
    CU_ASSERT_EQUAL(f.moe_layers, 2);
    CU_ASSERT_EQUAL(f.experts, 8);
    PF_ASSERT_CLOSE(f.a2a_bytes, 2 * 262144.0, 1e-9);
    PF_ASSERT_CLOSE(f.expert_param_bytes, 2 * 8 * 3 * 262144.0, 1e-9);
    CU_ASSERT(pf_cpep_ep_ok(&f, 2) && pf_cpep_ep_ok(&f, 8));
    CU_ASSERT(!pf_cpep_ep_ok(&f, 3) && !pf_cpep_ep_ok(&f, 16) && !pf_cpep_ep_ok(&f, 0));
    pf_graph_destroy(&g);
}

/* 0 fwd_ms, 1 mem_fwd_bytes, 2 param_bytes, 3 bwd_ms; 4 the softmaxes' mem_fwd_bytes, 5 the
 * forward of the scores and softmaxes */
static double sum_ops(const pf_graph_t *g, int what)
{
    double s = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const pf_op_t *op = pf_graph_op(g, v);
        int sm = !strcmp(op->type, "softmax");
        int sc = sm || strstr(op->name, ".attn.scores") != NULL;
        s += what == 0   ? op->fwd_ms
             : what == 1 ? op->mem_fwd_bytes
             : what == 2 ? op->param_bytes
             : what == 3 ? op->bwd_ms
             : what == 4 ? sm * op->mem_fwd_bytes
                         : sc * op->fwd_ms;
    }
    return s;
}

/* One device's graph: C = 4 at the same 2 sequences per micro-batch runs 1/4 of every op
 * (linear re-pricing: no device model) and stores 1/4 of the activations but the attention
 * probabilities (blockwise: none), its backward recomputes the scores and softmaxes; its
 * parameters stay.
 * E = 4 on the MoE graph: the expert linears' parameters / 4, the rest as they were. */
static void test_graph(void)
{
    char err[256];
    pf_graph_t *g = small(PF_MODEL_LLAMA), *h = NULL, *m = small(PF_MODEL_MOE), *mh = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL_FATAL(pf_cpep_graph(g, 2, 4, 1, &h, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_graph_microbatch(h), 2);
    CU_ASSERT_EQUAL(pf_graph_nops(h), pf_graph_nops(g));
    PF_ASSERT_CLOSE(sum_ops(h, 0), sum_ops(g, 0) / 4, 1e-9 * sum_ops(g, 0));
    CU_ASSERT(sum_ops(g, 4) > 0);
    CU_ASSERT_EQUAL(sum_ops(h, 4), 0);
    PF_ASSERT_CLOSE(sum_ops(h, 1), (sum_ops(g, 1) - sum_ops(g, 4)) / 4, 1e-9 * sum_ops(g, 1));
    PF_ASSERT_CLOSE(sum_ops(h, 3), (sum_ops(g, 3) + sum_ops(g, 5)) / 4, 1e-9 * sum_ops(g, 3));
    PF_ASSERT_CLOSE(sum_ops(h, 2), sum_ops(g, 2), 1e-9 * sum_ops(g, 2));
    pf_cpep_facts_t f;
    pf_cpep_facts(h, NULL, 0, &f); /* K and V of the device's s / C tokens */
    PF_ASSERT_CLOSE(f.kv_bytes, 1048576, 1e-9);
    pf_cpep_facts_t mf;
    pf_cpep_facts(m, NULL, 0, &mf);
    CU_ASSERT_EQUAL_FATAL(pf_cpep_graph(m, 1, 1, 4, &mh, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(sum_ops(mh, 2), sum_ops(m, 2) - 0.75 * mf.expert_param_bytes, 1e-6);
    PF_ASSERT_CLOSE(sum_ops(mh, 0), sum_ops(m, 0), 1e-9 * sum_ops(m, 0));
    pf_graph_t *bad = NULL;
    CU_ASSERT_EQUAL(pf_cpep_graph(g, 2, 0, 1, &bad, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NULL(bad);
    pf_graph_destroy(&h);
    pf_graph_destroy(&mh);
    pf_graph_destroy(&g);
    pf_graph_destroy(&m);
}

void pf_suite_cpep(void)
{
    CU_pSuite s = CU_add_suite("cpep", NULL, NULL);
    CU_add_test(s, "facts and K/V ring bytes by hand", test_facts_ring);
    CU_add_test(s, "MoE facts", test_facts_moe);
    CU_add_test(s, "one device's graph under C and E", test_graph);
}
