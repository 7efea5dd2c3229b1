/* blockcpep: the K/V ring and the all-to-all on two DGX-H100 hosts worked by hand, memory and
 * time of a part under C and E, and the search over (C, E): CP only where the sequence divides
 * by 2C, EP only on MoE graphs, C = E = 1 as blockenum alone. */
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/topology.h"
#include "planner/partition/blockcpep.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <string.h>

typedef struct {
    pf_graph_t *g;
    pf_cluster_t *c;
    pf_blocks_t *b;
    pf_cpep_facts_t f;
    pf_blockcost_roofline_t roof;
    pf_blockcost_env_t env;
    pf_blockcost_problem_t pr;
} fixture_t;

/* llama: 2 layers, hidden 512, 8 heads, 4 KV heads, micro-batch 2, seq `seq`; moe: 8 experts,
 * top-2, hidden 256, 4 heads, 2 KV heads, seq 256, micro-batch 1. Two DGX-H100 hosts (370 GB/s
 * and 2.5 us inside, 50 GB/s and 5 us per GPU between). */
static int setup(fixture_t *x, pf_model_kind_t kind, int seq, int64_t batch)
{
    char err[256];
    memset(x, 0, sizeof *x);
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, kind);
    mo.layers = 2, mo.vocab = 1000, mo.precision_bytes = 2;
    if (kind == PF_MODEL_LLAMA)
        mo.hidden = 512, mo.heads = 8, mo.kv_heads = 4, mo.ffn = 1024, mo.seq = seq,
        mo.microbatch = 2;
    else
        mo.hidden = 256, mo.heads = 4, mo.kv_heads = 2, mo.ffn = 512, mo.seq = 256,
        mo.microbatch = 1, mo.experts = 8, mo.top_k = 2;
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX_H100);
    to.machines = 2;
    if (pf_model_build(&mo, &x->g, err, sizeof err) ||
        pf_topology_build(&to, &x->c, err, sizeof err) ||
        !(x->b = pf_blocks_new(x->g, 2, err, sizeof err))) {
        fprintf(stderr, "\n  setup: %s\n", err);
        return -1;
    }
    int n;
    const int *ops = pf_blocks_instance(x->b, 0, &n);
    pf_cpep_facts(x->g, ops, n, &x->f);
    pf_blockcost_roofline_init(&x->roof, x->c, &x->env);
    x->pr = (pf_blockcost_problem_t){.blocks = x->b, .env = &x->env, .global_batch = batch,
                                     .ngpus = 16, .gpus_per_host = 8, .mem_bytes = 80e9};
    pf_training_init(&x->pr.training);
    return 0;
}

static void teardown(fixture_t *x)
{
    pf_blocks_destroy(&x->b);
    pf_graph_destroy(&x->g);
    pf_cluster_destroy(&x->c);
}

/* Ring, C = 2 at t = 8: devices 0 and 8, one per host. One block's K and V at b = 2: 2 x 2 x
 * 1024 x 4 x 64 x 2 bytes = 2 MiB; a device's share s / C over its rank's heads / t: 2 MiB / 2 / 8
 * = 128 KiB; forward sends C - 1 = 1 chunk. Time: the ring all-gather of the 2 chunks, 1 step:
 * 5 us + 1/2 x 256 KiB / 50 GB/s = 0.005 + 0.00262144 ms.
 * All-to-all, MoE E = 4 at t = 4 (C = 1): devices 0, 4 | 8, 12, two per host. A device's buffer:
 * top-2 x 256 tokens x 256 x 2 bytes = 256 KiB, / t = 64 KiB under sequence parallelism; direct:
 * one latency (5 us across hosts) + max(1/4 x 64 KiB / 370 GB/s inside, 2/4 x 64 KiB / 50 GB/s
 * through its own NIC) = 0.005 + 0.00065536 ms. */
static void test_comm_by_hand(void)
{
    fixture_t x;
    CU_ASSERT_EQUAL_FATAL(setup(&x, PF_MODEL_LLAMA, 1024, 16), 0);
    pf_blockcpep_t cp;
    pf_blockcpep_comm_t cm;
    pf_blockcpep_init(&cp, &x.f, 2, 2, 1, x.c);
    pf_blockcpep_comm(&cp, 8, 2, 1, &cm);
    PF_ASSERT_CLOSE(cm.ring_fwd_bytes, 131072, 1e-9);
    PF_ASSERT_CLOSE(cm.ring_fwd_ms, 0.005 + 0.00262144, 1e-12);
    CU_ASSERT_EQUAL(cm.a2a_ms, 0);
    teardown(&x);

    CU_ASSERT_EQUAL_FATAL(setup(&x, PF_MODEL_MOE, 256, 16), 0);
    pf_blockcpep_t ep;
    pf_blockcpep_init(&ep, &x.f, 1, 1, 4, x.c);
    pf_blockcpep_comm(&ep, 4, 1, 1, &cm);
    CU_ASSERT_EQUAL(cm.ring_fwd_bytes, 0);
    PF_ASSERT_CLOSE(cm.a2a_bytes, 65536, 1e-9);
    PF_ASSERT_CLOSE(cm.a2a_ms, 0.005 + 0.00065536, 1e-12);
    pf_blockcpep_comm(&ep, 4, 1, 0, &cm); /* without sequence parallelism: every token */
    PF_ASSERT_CLOSE(cm.a2a_bytes, 262144, 1e-9);
    teardown(&x);
}

/* A part under C = 2 (selective recomputation: no attention probabilities stored either way):
 * its compute and stored activations halve, its parameters stay; the block gains the ring's
 * exposed time. Without recomputation the blockwise ring attention stores no probabilities
 * either: the block keeps (all - core) / 2. Under E = 4 (MoE, t = 1): the block's parameters lose
 * 3/4 of the experts' and the stage memory with them; 4 all-to-alls per MoE layer. */
static void test_part_memory(void)
{
    fixture_t x;
    CU_ASSERT_EQUAL_FATAL(setup(&x, PF_MODEL_LLAMA, 1024, 32), 0);
    pf_blockcost_part_t a[3], b[3];
    pf_blockcost_parts(&x.pr, 1, 2, 0, PF_RECOMPUTE_SELECTIVE, a);
    pf_blockcpep_t cp;
    pf_blockcpep_init(&cp, &x.f, 2, 2, 1, x.c);
    pf_blockcost_problem_t pr = x.pr;
    pr.cpep = &cp, pr.cpep_part = pf_blockcpep_part, pr.cpep_check = pf_blockcpep_check;
    pf_blockcost_parts(&pr, 1, 2, 0, PF_RECOMPUTE_SELECTIVE, b);
    for (int i = 0; i < 3; i++) {
        PF_ASSERT_CLOSE(b[i].act_bytes, a[i].act_bytes / 2, 1e-9 * a[i].act_bytes);
        PF_ASSERT_CLOSE(b[i].fwd_ms, a[i].fwd_ms / 2, 1e-12);
        PF_ASSERT_CLOSE(b[i].p2p_bytes, a[i].p2p_bytes / 2, 1e-9);
        CU_ASSERT_EQUAL(b[i].param_bytes, a[i].param_bytes);
    }
    CU_ASSERT(b[1].tp_fwd_ms >= 0 && b[1].tp_bwd_ms >= b[1].tp_fwd_ms);
    CU_ASSERT(b[1].recompute_ms > a[1].recompute_ms / 2); /* + the blocks' scores */
    pf_blockcost_part_t n0, n1;
    const pf_blocks_part_t *blk = pf_blocks_block(x.b);
    CU_ASSERT(blk->act_core_bytes > 0);
    pf_blockcost_part(&x.pr, blk, 1, 2, 0, PF_RECOMPUTE_NONE, &n0);
    pf_blockcost_part(&pr, blk, 1, 2, 0, PF_RECOMPUTE_NONE, &n1);
    PF_ASSERT_CLOSE(n1.act_bytes, (n0.act_bytes - blk->act_core_bytes) / 2, 1e-9 * n0.act_bytes);
    /* the stage's memory at p = 1 on 16 GPUs, ZeRO 0: state + 1 micro-batch's activations; d 16,
     * or d 8 x C 2 as the model sees it (d = 16 at twice the batch, blockcpep.h) */
    pf_blockcost_cand_t c = {.t = 1, .p = 1, .d = 16, .b = 2, .v = 1, .first_layers = 2};
    pf_blockcost_eval_t e1, e2;
    pr.global_batch = 2 * x.pr.global_batch;
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_eval(&pr, &c, b, &e2), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_eval(&x.pr, &c, a, &e1), PF_OK);
    CU_ASSERT_EQUAL(e2.microbatches, 2 * e1.microbatches); /* 32 / (8 x 2) against 32 / (16 x 2) */
    double state = (2 * a[1].param_bytes + a[0].param_bytes + a[2].param_bytes) *
                   pf_training_state_factor(&x.pr.training, 16);
    PF_ASSERT_CLOSE(e2.mem_max_bytes - state, (e1.mem_max_bytes - state) / 2, 1e-6);
    c.d = 7; /* C does not divide d: not well formed */
    CU_ASSERT_EQUAL(pf_blockcpep_check(&cp, &c), PF_EINPUT);
    teardown(&x);

    CU_ASSERT_EQUAL_FATAL(setup(&x, PF_MODEL_MOE, 256, 16), 0);
    pf_blockcpep_t ep;
    pf_blockcpep_init(&ep, &x.f, 1, 1, 4, x.c);
    pr = x.pr;
    pr.cpep = &ep, pr.cpep_part = pf_blockcpep_part, pr.cpep_check = pf_blockcpep_check;
    pf_blockcost_parts(&x.pr, 1, 1, 0, PF_RECOMPUTE_NONE, a);
    pf_blockcost_parts(&pr, 1, 1, 0, PF_RECOMPUTE_NONE, b);
    PF_ASSERT_CLOSE(b[1].param_bytes, a[1].param_bytes - 0.75 * 8 * 3 * 262144.0, 1e-6);
    CU_ASSERT_EQUAL(b[0].param_bytes, a[0].param_bytes);
    PF_ASSERT_CLOSE(b[1].act_bytes, a[1].act_bytes, 1e-9);
    pf_blockcpep_comm_t cm;
    pf_blockcpep_comm(&ep, 1, 1, 0, &cm);
    PF_ASSERT_CLOSE(b[1].tp_fwd_ms - a[1].tp_fwd_ms, 2 * cm.a2a_ms, 1e-12);
    PF_ASSERT_CLOSE(b[1].tp_bwd_ms - a[1].tp_bwd_ms, 2 * cm.a2a_ms, 1e-12);
    /* EP with t > 1 needs sequence parallelism (Megatron-LM); E must divide d / C */
    pf_blockcost_cand_t m = {.t = 2, .p = 1, .d = 8, .b = 1, .v = 1, .first_layers = 2};
    CU_ASSERT_EQUAL(pf_blockcpep_check(&ep, &m), PF_EINPUT);
    m.sp = 1;
    CU_ASSERT_EQUAL(pf_blockcpep_check(&ep, &m), PF_OK);
    m.d = 6;
    CU_ASSERT_EQUAL(pf_blockcpep_check(&ep, &m), PF_EINPUT);
    teardown(&x);
}

/* blockcpep.h's order: the step, + the margin when C or E > 1 */
static double rank(const pf_blockenum_item_t *it)
{
    return it->eval.step_ms * (it->cand.cp > 1 || it->cand.ep > 1 ? 1 + PF_BLOCKCPEP_MARGIN : 1);
}

/* Every candidate found (no pruning, k large) has a legal (C, E). */
static void search(fixture_t *x, int fix_cp, int fix_ep, int *seen_cp, int *seen_ep, int *rc)
{
    char err[256];
    pf_blockenum_fix_t fix;
    pf_blockenum_fix_init(&fix);
    pf_blockenum_item_t out[512];
    int n = 0;
    *rc = pf_blockcpep_run(&x->pr, &x->f, pf_graph_microbatch(x->g), x->c, &fix, fix_cp, fix_ep,
                           512, 0, out, &n, NULL, err, sizeof err);
    for (int i = 0; i < n; i++) {
        int C = out[i].cand.cp, E = out[i].cand.ep;
        seen_cp[C < 32 ? C : 31]++, seen_ep[E < 32 ? E : 31]++;
        CU_ASSERT(i == 0 || rank(&out[i]) >= rank(&out[i - 1]));
        CU_ASSERT((long long)out[i].cand.t * out[i].cand.p * out[i].cand.d * C == 16);
    }
}

/* seq 1000 on 16 GPUs: C = 2 and 4 divide it (1000 % 8 = 0), 8 does not (1000 % 16): C = 8 is
 * never enumerated and fixing it is an input error; a dense graph has no E > 1. On the MoE graph
 * (8 experts) E > 1 appears, each dividing the experts. */
static void test_enumeration(void)
{
    fixture_t x;
    int cp[32] = {0}, ep[32] = {0}, rc;
    CU_ASSERT_EQUAL_FATAL(setup(&x, PF_MODEL_LLAMA, 1000, 16), 0);
    search(&x, 0, 0, cp, ep, &rc);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT(cp[1] > 0 && cp[2] > 0 && cp[4] > 0);
    CU_ASSERT_EQUAL(cp[8], 0);
    CU_ASSERT_EQUAL(cp[16], 0);
    for (int e = 2; e < 32; e++)
        CU_ASSERT_EQUAL(ep[e], 0);
    memset(cp, 0, sizeof cp);
    search(&x, 8, 0, cp, ep, &rc);
    CU_ASSERT_EQUAL(rc, PF_EINPUT);
    search(&x, 0, 2, cp, ep, &rc);
    CU_ASSERT_EQUAL(rc, PF_EINPUT);
    /* C = E = 1 fixed: blockenum's own run */
    char err[256];
    pf_blockenum_fix_t fix;
    pf_blockenum_fix_init(&fix);
    pf_blockenum_item_t a[4], b[4];
    int na = 0, nb = 0;
    CU_ASSERT_EQUAL(pf_blockenum_run(&x.pr, &fix, 4, 1, a, &na, NULL, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_blockcpep_run(&x.pr, &x.f, 2, x.c, &fix, 1, 1, 4, 1, b, &nb, NULL, err,
                                     sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(na, nb);
    for (int i = 0; i < na; i++) {
        CU_ASSERT_EQUAL(a[i].eval.step_ms, b[i].eval.step_ms);
        CU_ASSERT_EQUAL(a[i].cand.d, b[i].cand.d);
    }
    teardown(&x);

    int mcp[32] = {0}, mep[32] = {0};
    CU_ASSERT_EQUAL_FATAL(setup(&x, PF_MODEL_MOE, 256, 16), 0);
    search(&x, 1, 0, mcp, mep, &rc);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT(mep[2] > 0 && mep[4] > 0 && mep[8] > 0);
    CU_ASSERT_EQUAL(mep[16], 0);
    CU_ASSERT_EQUAL(mcp[1], mep[1] + mep[2] + mep[4] + mep[8]);
    teardown(&x);
}

void pf_suite_blockcpep(void)
{
    CU_pSuite s = CU_add_suite("blockcpep", NULL, NULL);
    CU_add_test(s, "ring and all-to-all on two hosts by hand", test_comm_by_hand);
    CU_add_test(s, "time and memory of a part under C and E", test_part_memory);
    CU_add_test(s, "CP where the sequence allows, EP on MoE graphs", test_enumeration);
}
