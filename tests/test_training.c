/* training: parameter state per parameter, micro-batches in flight, recomputation's view of a
 * graph, all worked by hand. */
#include "planner/ir/training.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <string.h>

static void test_state_factor(void)
{
    pf_training_t t;
    pf_training_init(&t);
    /* mixed-precision Adam: 2 weights + 2 grads + 4 master + 8 moments = 16 B per 2-byte
     * parameter: 8 bytes of state per byte of param_bytes */
    PF_ASSERT_CLOSE(pf_training_state_factor(&t, 1), 8.0, 1e-15);
    t.precision_bytes = 4; /* fp32 Adam: 4 + 4 + 0 + 8 = 16 B per 4-byte parameter */
    PF_ASSERT_CLOSE(pf_training_state_factor(&t, 1), 4.0, 1e-15);
    t.optimizer = PF_OPTIMIZER_SGD; /* fp32 SGD with momentum: 4 + 4 + 4 = 12 B */
    PF_ASSERT_CLOSE(pf_training_state_factor(&t, 8), 3.0, 1e-15);
    t.precision_bytes = 2; /* bf16 SGD: 2 + 2 + 4 + 4 = 12 B per 2-byte parameter */
    PF_ASSERT_CLOSE(pf_training_state_factor(&t, 1), 6.0, 1e-15);
    t.optimizer = PF_OPTIMIZER_ADAM;
    /* ZeRO over R = 4 (bytes per parameter, then / 2): stage 1: 2 + 2 + 12/4 = 7 -> 3.5;
     * stage 2: 2 + 2/4 + 3 = 5.5 -> 2.75; stage 3: 2/4 + 2/4 + 3 = 4 -> 2 */
    t.zero = 1;
    PF_ASSERT_CLOSE(pf_training_state_factor(&t, 4), 3.5, 1e-15);
    t.zero = 2;
    PF_ASSERT_CLOSE(pf_training_state_factor(&t, 4), 2.75, 1e-15);
    t.zero = 3;
    PF_ASSERT_CLOSE(pf_training_state_factor(&t, 4), 2.0, 1e-15);
    pf_training_state_split_t sp;
    pf_training_state_split(&t, 4, &sp);
    PF_ASSERT_CLOSE(sp.weights, 0.25, 1e-15);
    PF_ASSERT_CLOSE(sp.master, 0.5, 1e-15);
    PF_ASSERT_CLOSE(sp.moments, 1.0, 1e-15);
    PF_ASSERT_CLOSE(pf_training_state_factor(&t, 1), 8.0, 1e-15); /* one replica: nothing shared */
    char err[128];
    t.zero = 4;
    CU_ASSERT_EQUAL(pf_training_check(&t, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "ZeRO stage 4 is not 0, 1, 2 or 3");
    t.zero = 0;
    t.precision_bytes = 3;
    CU_ASSERT_EQUAL(pf_training_check(&t, err, sizeof err), PF_EINPUT);
}

static void test_inflight_and_names(void)
{
    pf_training_t t;
    pf_training_init(&t);
    const int want8[] = {4, 3, 2, 1}, want2[] = {2, 2, 2, 1};
    for (int s = 0; s < 4; s++) {
        CU_ASSERT_EQUAL(pf_training_inflight(&t, 4, 8, s), want8[s]); /* min(MB, S - s) */
        CU_ASSERT_EQUAL(pf_training_inflight(&t, 4, 2, s), want2[s]);
    }
    t.schedule = PF_SCHEDULE_GPIPE;
    CU_ASSERT_EQUAL(pf_training_inflight(&t, 4, 8, 3), 8);
    CU_ASSERT_EQUAL(pf_training_block_len("layers.7.mlp.fc1"), strlen("layers.7"));
    CU_ASSERT_EQUAL(pf_training_block_len("model.layers.12.attn"), strlen("model.layers.12"));
    CU_ASSERT_EQUAL(pf_training_block_len("embed"), 0);
    CU_ASSERT_EQUAL(pf_training_block_len("layers.x7.a"), 0);
    CU_ASSERT_EQUAL(pf_training_precision_parse("fp16"), 2);
    CU_ASSERT_EQUAL(pf_training_precision_parse("fp8"), -1);
    CU_ASSERT_EQUAL(pf_training_recompute_parse("selective"), PF_RECOMPUTE_SELECTIVE);
    CU_ASSERT_STRING_EQUAL(pf_training_recompute_name(PF_RECOMPUTE_FULL), "full");
    CU_ASSERT_EQUAL(pf_training_optimizer_parse("sgd"), PF_OPTIMIZER_SGD);
    CU_ASSERT_EQUAL(pf_training_schedule_parse("gpipe"), PF_SCHEDULE_GPIPE);
}

/* embed -> layers.0.scores (matmul) -> layers.0.softmax -> layers.0.dropout -> layers.0.out
 * -> head, plus embed -> layers.0.out (residual). mem_fwd = 10, 20, 30, 40, 50, 60; fwd = 1..6,
 * bwd = 2 x fwd; edge bytes: embed->scores 7, scores->softmax 8, softmax->dropout 9,
 * dropout->out 11, out->head 12, embed->out 13. */
static pf_graph_t *layer_graph(void)
{
    static const char *name[] = {"embed", "layers.0.scores", "layers.0.softmax",
                                 "layers.0.dropout", "layers.0.out", "head"};
    static const char *type[] = {"embedding", "matmul", "softmax", "dropout", "linear", "linear"};
    char err[128];
    pf_graph_t *g = pf_graph_new("layer", 1);
    for (int i = 0; i < 6; i++) {
        pf_op_t op = {.id = i, .name = name[i], .type = type[i], .fwd_ms = i + 1,
                      .bwd_ms = 2 * (i + 1), .mem_fwd_bytes = 10 * (i + 1)};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 7);
    pf_graph_add_edge(g, 1, 2, 8);
    pf_graph_add_edge(g, 2, 3, 9);
    pf_graph_add_edge(g, 3, 4, 11);
    pf_graph_add_edge(g, 4, 5, 12);
    pf_graph_add_edge(g, 0, 4, 13);
    CU_ASSERT_EQUAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    return g;
}

/* layer_graph's ops with embed's output read by scores and out at 13 B each, and a second
 * output of 5 B to softmax. */
static pf_graph_t *layer_graph_shared(void)
{
    static const char *name[] = {"embed", "layers.0.scores", "layers.0.softmax",
                                 "layers.0.dropout", "layers.0.out", "head"};
    static const char *type[] = {"embedding", "matmul", "softmax", "dropout", "linear", "linear"};
    char err[128];
    pf_graph_t *g = pf_graph_new("layer", 1);
    for (int i = 0; g && i < 6; i++) {
        pf_op_t op = {.id = i, .name = name[i], .type = type[i], .fwd_ms = 1,
                      .bwd_ms = 2, .mem_fwd_bytes = 10 * (i + 1)};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 13);
    pf_graph_add_edge(g, 0, 2, 5);
    pf_graph_add_edge(g, 1, 2, 8);
    pf_graph_add_edge(g, 2, 3, 9);
    pf_graph_add_edge(g, 3, 4, 11);
    pf_graph_add_edge(g, 0, 4, 13);
    pf_graph_add_edge(g, 4, 5, 12);
    if (g && pf_graph_finalize(g, err, sizeof err) != PF_OK)
        pf_graph_destroy(&g);
    return g;
}

static void test_recompute_view(void)
{
    char err[128];
    double reserve = -1;
    pf_graph_t *g = layer_graph();
    pf_training_t t;
    pf_training_init(&t);
    pf_graph_t *v = pf_training_view(g, &t, &reserve, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(reserve, 0);
    for (int i = 0; i < 6; i++) { /* none: a copy */
        CU_ASSERT_EQUAL(pf_graph_op(v, i)->mem_fwd_bytes, pf_graph_op(g, i)->mem_fwd_bytes);
        CU_ASSERT_EQUAL(pf_graph_op(v, i)->bwd_ms, pf_graph_op(g, i)->bwd_ms);
    }
    CU_ASSERT_EQUAL(pf_graph_nedges(v), 6);
    pf_graph_destroy(&v);

    /* selective: the softmax (30 B, fwd 3) and the dropout fed by it (40 B, fwd 4) store nothing
     * and run their forward again in backward */
    t.recompute = PF_RECOMPUTE_SELECTIVE;
    v = pf_training_view(g, &t, &reserve, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    const double sel_mem[] = {10, 20, 0, 0, 50, 60}, sel_bwd[] = {2, 4, 6 + 3, 8 + 4, 10, 12};
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL(pf_graph_op(v, i)->mem_fwd_bytes, sel_mem[i]);
        CU_ASSERT_EQUAL(pf_graph_op(v, i)->bwd_ms, sel_bwd[i]);
    }
    CU_ASSERT_EQUAL(reserve, 0);
    pf_graph_destroy(&v);

    /* full: block layers.0 keeps what enters it from outside: scores stores embed->scores (7),
     * out stores embed->out (13), the others 0; every block op recomputes its forward; the
     * reserve is the block's activations 20 + 30 + 40 + 50 = 140; embed and head are in no block */
    t.recompute = PF_RECOMPUTE_FULL;
    v = pf_training_view(g, &t, &reserve, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    const double full_mem[] = {10, 7, 0, 0, 13, 60}, full_bwd[] = {2, 4 + 2, 6 + 3, 8 + 4, 10 + 5, 12};
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL(pf_graph_op(v, i)->mem_fwd_bytes, full_mem[i]);
        CU_ASSERT_EQUAL(pf_graph_op(v, i)->bwd_ms, full_bwd[i]);
    }
    CU_ASSERT_EQUAL(reserve, 140);
    pf_graph_destroy(&v);
    pf_graph_destroy(&g);
}

/* Full recomputation stores a layer input once however many ops of the block read it: embed's
 * output (13 B) read by scores and by out (a norm and a residual add) is stored by scores only,
 * 13 B, not 26; a second output of embed of other bytes (5 B, to softmax) is stored too. */
static void test_recompute_full_shared_input(void)
{
    char err[128];
    double reserve = -1;
    pf_graph_t *g = layer_graph_shared();
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pf_training_t t;
    pf_training_init(&t);
    t.recompute = PF_RECOMPUTE_FULL;
    pf_graph_t *v = pf_training_view(g, &t, &reserve, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    const double full_mem[] = {10, 13, 5, 0, 0, 60};
    double block = 0;
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL(pf_graph_op(v, i)->mem_fwd_bytes, full_mem[i]);
        block += i >= 1 && i <= 4 ? pf_graph_op(v, i)->mem_fwd_bytes : 0;
    }
    CU_ASSERT_EQUAL(block, 18);
    pf_graph_destroy(&v);
    pf_graph_destroy(&g);
}

/* TP overlap, G / t + (t - 1) max(G / t, C / (t - 1)) - G by hand: C 2 beside G 4 at t 2: one
 * transfer of 2 beside a chunk of 2, hidden: 2 + 2 - 4 = 0; C 3: 2 + 3 - 4 = 1; C 6 against
 * G 4 at t 4: transfers of 2 beside chunks of 1: 1 + 3 x 2 - 4 = 3; C 2 against G 4 at t 4:
 * transfers of 2/3 beside chunks of 1: 0; t 1 or no GEMM: all of C; no collective: 0. */
static void test_tp_overlap_exposed(void)
{
    PF_ASSERT_CLOSE(pf_training_tp_overlap_exposed_ms(2, 4, 2), 0, 1e-12);
    PF_ASSERT_CLOSE(pf_training_tp_overlap_exposed_ms(3, 4, 2), 1, 1e-12);
    PF_ASSERT_CLOSE(pf_training_tp_overlap_exposed_ms(6, 4, 4), 3, 1e-12);
    PF_ASSERT_CLOSE(pf_training_tp_overlap_exposed_ms(2, 4, 4), 0, 1e-12);
    PF_ASSERT_CLOSE(pf_training_tp_overlap_exposed_ms(6, 4, 1), 6, 1e-12);
    PF_ASSERT_CLOSE(pf_training_tp_overlap_exposed_ms(6, 0, 8), 6, 1e-12);
    PF_ASSERT_CLOSE(pf_training_tp_overlap_exposed_ms(0, 4, 8), 0, 1e-12);
}

void pf_suite_training(void)
{
    CU_pSuite s = CU_add_suite("training", NULL, NULL);
    CU_add_test(s, "parameter state per parameter: precision, optimizer, ZeRO", test_state_factor);
    CU_add_test(s, "micro-batches in flight, blocks and names", test_inflight_and_names);
    CU_add_test(s, "recomputation's view: selective and full, by hand", test_recompute_view);
    CU_add_test(s, "full recomputation stores a shared layer input once",
                test_recompute_full_shared_input);
    CU_add_test(s, "tensor-parallel overlap's exposed time", test_tp_overlap_exposed);
}
