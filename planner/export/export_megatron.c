/* export_megatron: Megatron-LM's model flags (export_megatron.h). */
#include "planner/export/export_megatron.h"
#include "planner/core/util.h"

#include <string.h>

int pf_export_megatron_check(const pf_arch_t *a, int layers, int T, char *err, size_t errlen)
{
    if (!a)
        return PF_OK;
    if (a->layers && a->layers != layers)
        return pf_fail(err, errlen, PF_EINPUT, "the graph's model says %lld layers but its ops "
                       "hold %d blocks: Megatron-LM would build another model",
                       (long long)a->layers, layers);
    /* TransformerConfig: every tensor-parallel rank holds whole heads and whole query groups */
    if (a->heads && a->heads % T)
        return pf_fail(err, errlen, PF_EINPUT, "%lld attention heads are not divisible by "
                       "tensor parallel %d: Megatron-LM needs --num-attention-heads a multiple "
                       "of --tensor-model-parallel-size", (long long)a->heads, T);
    if (a->kv_heads && a->kv_heads < a->heads && a->kv_heads % T)
        return pf_fail(err, errlen, PF_EINPUT, "%lld query groups (kv heads) are not divisible "
                       "by tensor parallel %d: Megatron-LM needs --num-query-groups a multiple "
                       "of --tensor-model-parallel-size", (long long)a->kv_heads, T);
    return PF_OK;
}

static void put_int(FILE *f, const char *flag, long long v)
{
    if (v > 0)
        fprintf(f, "    %s %lld\n", flag, v);
}

/* The block: activation, norm, positions, biases, head. Megatron-LM's defaults are GELU,
 * LayerNorm, learned absolute positions, biased linears and a head tied to the embedding. */
static void put_block(const pf_arch_t *a, FILE *f)
{
    int bert = !strcmp(a->kind, "bert");
    if (!strcmp(a->activation, "swiglu"))
        fprintf(f, "    --swiglu\n");
    if (!strcmp(a->norm, "rmsnorm"))
        fprintf(f, "    --normalization RMSNorm\n");
    if (!strcmp(a->positions, "rope"))
        fprintf(f, "    --position-embedding-type rope\n");
    if (a->bias == 0)
        fprintf(f, "    # no biases and no dropout ops in the graph (Llama's block)\n"
                "    --disable-bias-linear\n    --attention-dropout 0\n    --hidden-dropout 0\n");
    if (a->tied_embeddings == 0 && !bert)
        fprintf(f, "    # the graph's head holds its own vocabulary x hidden matrix, as planned\n"
                "    --untie-embeddings-and-output-weights\n");
    if (bert)
        fprintf(f, "    # BERT: pretrain_bert.py; the graph has the masked-LM head only (no "
                "next-sentence head).\n    # Megatron-LM ties that head to the embedding: the "
                "last stage holds less than planned\n    --bert-no-binary-head\n");
    if (a->experts > 0) {
        fprintf(f, "    --num-experts %lld\n", (long long)a->experts);
        put_int(f, "--moe-router-topk", a->top_k);
    }
}

void pf_export_megatron_model(const pf_arch_t *a, FILE *f)
{
    if (!a) {
        fprintf(f, "# The graph does not say what model it is (no \"model\" object: an imported "
                "or traced graph).\n# Add its flags yourself: --hidden-size, "
                "--num-attention-heads, --ffn-hidden-size, --seq-length,\n"
                "# --max-position-embeddings and, as the model has them, --swiglu, "
                "--normalization RMSNorm,\n# --position-embedding-type rope, "
                "--group-query-attention --num-query-groups N,\n"
                "# --untie-embeddings-and-output-weights, --disable-bias-linear.\n"
                "MEGATRON_MODEL_ARGS=(\n)\n");
        return;
    }
    fprintf(f, "# The model, from the graph's \"model\" object; add data, tokenizer and optimizer "
            "settings.\nMEGATRON_MODEL_ARGS=(\n");
    put_int(f, "--hidden-size", a->hidden);
    put_int(f, "--ffn-hidden-size", a->ffn_hidden);
    put_int(f, "--num-attention-heads", a->heads);
    if (a->kv_heads && a->kv_heads < a->heads)
        fprintf(f, "    # grouped-query attention: %lld query heads share each of %lld key/value "
                "heads\n    --group-query-attention\n    --num-query-groups %lld\n",
                (long long)(a->heads / a->kv_heads), (long long)a->kv_heads,
                (long long)a->kv_heads);
    if (!strcmp(a->kind, "vit"))
        fprintf(f, "    # ViT: Megatron-LM's vision scripts take the image and patch sizes "
                "(--img-h, --img-w, --patch-dim)\n");
    else if (a->seq > 0)
        fprintf(f, "    --seq-length %lld\n    --max-position-embeddings %lld\n",
                (long long)a->seq, (long long)a->seq);
    if (a->vocab > 0)
        fprintf(f, "    # vocabulary %lld: the tokenizer sets it (Megatron-LM pads it to a "
                "multiple of 128 x T)\n", (long long)a->vocab);
    put_block(a, f);
    fprintf(f, ")\n");
}
