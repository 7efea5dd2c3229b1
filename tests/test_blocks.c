/* blocks: a tiny GPT (2 layers, h 64, 4 heads, s 16, vocab 100, micro-batch 4, fp16) cut into
 * prologue + blocks + epilogue, every number of one block worked by hand; a Llama's blocks; a
 * graph without repeated blocks refused. */
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/partition/blocks.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <string.h>

/* b = 4, s = 16, h = 64: one activation s b h x 2 bytes = 8192 */
static pf_graph_t *tiny(pf_model_kind_t kind, int layers)
{
    char err[256];
    pf_model_opts_t mo;
    pf_graph_t *g = NULL;
    pf_model_opts_init(&mo, kind);
    mo.layers = layers, mo.hidden = 64, mo.heads = 4, mo.seq = 16, mo.vocab = 100;
    mo.microbatch = 4;
    if (kind == PF_MODEL_LLAMA)
        mo.ffn = 176, mo.kv_heads = 4;
    if (pf_model_build(&mo, &g, err, sizeof err))
        fprintf(stderr, "\n  model: %s\n", err);
    return g;
}

static int split_of(const pf_blocks_part_t *p, const pf_graph_t *g, const char *suffix)
{
    for (int i = 0; i < p->ngemms; i++) {
        const char *n = pf_graph_op(g, p->gemms[i].op)->name;
        size_t a = strlen(n), b = strlen(suffix);
        if (a >= b && !strcmp(n + a - b, suffix))
            return (int)p->gemms[i].split;
    }
    return -1;
}

static void test_gpt_parts(void)
{
    char err[256];
    pf_graph_t *g = tiny(PF_MODEL_GPT, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pf_blocks_t *b = pf_blocks_new(g, 2, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(pf_blocks_count(b), 3);
    CU_ASSERT_STRING_EQUAL(pf_blocks_name(b), "layers.#");
    const pf_blocks_part_t *blk = pf_blocks_block(b), *pro = pf_blocks_prologue(b),
                           *epi = pf_blocks_epilogue(b);
    CU_ASSERT_EQUAL(pro->nops, 1); /* embed */
    CU_ASSERT_EQUAL(epi->nops, 2); /* final_ln, head */
    CU_ASSERT_EQUAL(blk->nops, 17);
    CU_ASSERT_EQUAL(pro->nops + 3 * blk->nops + epi->nops, pf_graph_nops(g));
    /* parameters: ln 2 x 256, q k v out 4 x (64 x 64 + 64) x 2 = 4 x 8320, fc1 (64 x 256 + 256)
     * x 2 = 33280, fc2 (256 x 64 + 64) x 2 = 32896: 99968, of which the linears' 99456 split */
    PF_ASSERT_CLOSE(blk->param_bytes, 99968, 1e-12);
    PF_ASSERT_CLOSE(blk->param_split_bytes, 99456, 1e-12);
    /* [Korthikanti22] Table 2 in units of s b h x 2 bytes = 8192 / 2 = 4096 bytes per sbh:
     * whole 10 sbh (ln1 2, qkv input 2, dropout after out 1, ln2 2, fc1 input 2, dropout 1),
     * split 24 sbh (q k 4, v 2, out input 2, gelu 8, fc2 input 8), core 5 a s^2 b = 5 x 4 x 256
     * x 4 = 20480 bytes (softmax 2 a s^2 b, dropout mask + output 3 a s^2 b) */
    PF_ASSERT_CLOSE(blk->act_whole_bytes, 10 * 4096, 1e-12);
    PF_ASSERT_CLOSE(blk->act_split_bytes, 24 * 4096, 1e-12);
    PF_ASSERT_CLOSE(blk->act_core_bytes, 20480, 1e-12);
    /* Megatron-LM's split: q k v fc1 column, out fc2 row, the attention matmuls by heads */
    CU_ASSERT_EQUAL(blk->ngemms, 8);
    CU_ASSERT_EQUAL(split_of(blk, g, "attn.q"), PF_BLOCKS_COLUMN);
    CU_ASSERT_EQUAL(split_of(blk, g, "attn.v"), PF_BLOCKS_COLUMN);
    CU_ASSERT_EQUAL(split_of(blk, g, "attn.scores"), PF_BLOCKS_HEADS);
    CU_ASSERT_EQUAL(split_of(blk, g, "attn.context"), PF_BLOCKS_HEADS);
    CU_ASSERT_EQUAL(split_of(blk, g, "attn.out"), PF_BLOCKS_ROW);
    CU_ASSERT_EQUAL(split_of(blk, g, "mlp.fc1"), PF_BLOCKS_COLUMN);
    CU_ASSERT_EQUAL(split_of(blk, g, "mlp.fc2"), PF_BLOCKS_ROW);
    CU_ASSERT_EQUAL(split_of(epi, g, "head"), PF_BLOCKS_COLUMN);
    /* the scores: 16 products (4 samples x 4 heads) of (16 x 16) @ (16 x 16) */
    for (int i = 0; i < blk->ngemms; i++)
        if (blk->gemms[i].split == PF_BLOCKS_HEADS) {
            CU_ASSERT_EQUAL(blk->gemms[i].batch, 16);
            CU_ASSERT_EQUAL(blk->gemms[i].m, 16);
            CU_ASSERT_EQUAL(blk->gemms[i].n, 16);
            CU_ASSERT_EQUAL(blk->gemms[i].k, 16);
            CU_ASSERT_TRUE(blk->gemms[i].samples_in_batch);
        } else if (blk->gemms[i].split == PF_BLOCKS_ROW && blk->gemms[i].k == 256)
            CU_ASSERT_EQUAL(blk->gemms[i].m, 64); /* fc2: (64 x 256) @ (256 x 64) */
    /* tensor parallelism: 2 all-reduces of b s h forward (out, fc2), 2 backward (the input of
     * q k v, once, and of fc1) */
    CU_ASSERT_EQUAL(blk->nar_fwd, 2);
    CU_ASSERT_EQUAL(blk->nar_bwd, 2);
    PF_ASSERT_CLOSE(blk->ar_fwd_bytes, 2 * 8192, 1e-12);
    PF_ASSERT_CLOSE(blk->ar_bwd_bytes, 2 * 8192, 1e-12);
    PF_ASSERT_CLOSE(blk->input_bytes, 8192, 1e-12);
    PF_ASSERT_CLOSE(blk->output_bytes, 8192, 1e-12);
    CU_ASSERT_EQUAL(blk->nmem, 17 - 8);
    /* the block of op layers.2.mlp.fc1 is 2; embed is the prologue, head the epilogue */
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const char *n = pf_graph_op(g, v)->name;
        if (!strcmp(n, "layers.2.mlp.fc1"))
            CU_ASSERT_EQUAL(pf_blocks_of(b, v), 2);
        if (!strcmp(n, "embed"))
            CU_ASSERT_EQUAL(pf_blocks_of(b, v), -1);
        if (!strcmp(n, "head"))
            CU_ASSERT_EQUAL(pf_blocks_of(b, v), 3);
    }
    int n1;
    const int *i1 = pf_blocks_instance(b, 1, &n1);
    CU_ASSERT_EQUAL(n1, 17);
    CU_ASSERT_STRING_EQUAL(pf_graph_op(g, i1[0])->name, "layers.1.ln1");
    CU_ASSERT_PTR_NULL(pf_blocks_instance(b, 3, NULL));
    pf_blocks_destroy(&b);
    pf_blocks_destroy(&b);
    pf_graph_destroy(&g);
}

static void test_llama(void)
{
    char err[256];
    pf_graph_t *g = tiny(PF_MODEL_LLAMA, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pf_blocks_t *b = pf_blocks_new(g, 2, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(pf_blocks_count(b), 4);
    const pf_blocks_part_t *blk = pf_blocks_block(b);
    /* SwiGLU: gate and up column-parallel, down row-parallel */
    CU_ASSERT_EQUAL(split_of(blk, g, "mlp.gate"), PF_BLOCKS_COLUMN);
    CU_ASSERT_EQUAL(split_of(blk, g, "mlp.up"), PF_BLOCKS_COLUMN);
    CU_ASSERT_EQUAL(split_of(blk, g, "mlp.down"), PF_BLOCKS_ROW);
    CU_ASSERT_EQUAL(blk->nar_fwd, 2);
    CU_ASSERT_EQUAL(blk->nar_bwd, 2);
    pf_blocks_destroy(&b);
    pf_graph_destroy(&g);
}

/* An MoE layer of 16 experts (7 + 3 x 16 weighted ops, past TAP's 39-weight enumeration) is
 * still one block: every layer's ops in its instance, the epilogue without an expert op, and
 * each expert's gate, up and down in the block's GEMMs. (Split into TAP's per-expert parts, the
 * block once was the rest of the layer and every expert went to the epilogue, so the last stage
 * held all the experts' weights.) */
static void test_moe_16_experts(void)
{
    char err[256];
    pf_model_opts_t mo;
    pf_graph_t *g = NULL;
    pf_model_opts_init(&mo, PF_MODEL_MOE);
    mo.layers = 4, mo.hidden = 64, mo.heads = 4, mo.kv_heads = 4, mo.ffn = 128, mo.seq = 16;
    mo.vocab = 100, mo.experts = 16, mo.top_k = 2, mo.microbatch = 2;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    pf_blocks_t *b = pf_blocks_new(g, 2, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(pf_blocks_count(b), 4);
    int nops, layer_ops = 0;
    for (int v = 0; v < pf_graph_nops(g); v++)
        layer_ops += !strncmp(pf_graph_op(g, v)->name, "layers.0.", 9);
    const int *ops = pf_blocks_instance(b, 0, &nops);
    CU_ASSERT_EQUAL(nops, layer_ops);
    for (int i = 0; ops && i < nops; i++)
        CU_ASSERT_EQUAL(strncmp(pf_graph_op(g, ops[i])->name, "layers.0.", 9), 0);
    const pf_blocks_part_t *blk = pf_blocks_block(b), *epi = pf_blocks_epilogue(b);
    int expert_gemms = 0;
    for (int i = 0; i < blk->ngemms; i++)
        expert_gemms += strstr(pf_graph_op(g, blk->gemms[i].op)->name, ".experts.") != NULL;
    CU_ASSERT_EQUAL(expert_gemms, 16 * 3);
    for (int i = 0; i < epi->ngemms; i++)
        CU_ASSERT_PTR_NULL(strstr(pf_graph_op(g, epi->gemms[i].op)->name, ".experts."));
    pf_blocks_destroy(&b);
    pf_graph_destroy(&g);
}

static void test_no_blocks(void)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("chain", 1);
    pf_op_t op = {.type = "linear", .fwd_ms = 1, .bwd_ms = 2};
    const char *names[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        op.id = i, op.name = names[i];
        pf_graph_add_op(g, &op);
        if (i)
            pf_graph_add_edge(g, i - 1, i, 10);
    }
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    CU_ASSERT_PTR_NULL(pf_blocks_new(g, 2, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no repeated blocks"));
    pf_graph_destroy(&g);
}

void pf_suite_blocks(void)
{
    CU_pSuite s = CU_add_suite("blocks", NULL, NULL);
    CU_add_test(s, "GPT parts worked by hand", test_gpt_parts);
    CU_add_test(s, "Llama's SwiGLU split", test_llama);
    CU_add_test(s, "no repeated blocks", test_no_blocks);
    CU_add_test(s, "an MoE layer of 16 experts is one block", test_moe_16_experts);
}
