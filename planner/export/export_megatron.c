/* export_megatron: Megatron-LM's model flags and the layer split (export_megatron.h). */
#include "planner/export/export_megatron.h"
#include "planner/core/util.h"
#include "planner/partition/blockcost.h"

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
    if (a->head_dim > 0)
        put_int(f, "--kv-channels", a->head_dim);
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

/* ---- the layer split over the stages ---- */

/* Interleaving with the embedding and the loss each in a layer's place (as Llama 3 ran 126
 * layers on 16 stages): the stages hold blockcost.h's pf_blockcost_interleave_split of kind 1,
 * (L + 2) / S - 1 layers at the ends and (L + 2) / S in between. */
static int uneven_interleaved(const pf_export_split_t *x, int v)
{
    int S = x->S, first, mid, last;
    if (pf_blockcost_interleave_split(x->layers, S, v, &first, &mid, &last) != 1)
        return 0;
    for (int s = 0; s < S; s++)
        if (x->stage_layers[s] != (s == 0 ? first : s == S - 1 ? last : mid))
            return 0;
    return 1;
}

/* Megatron-LM counts the input embedding and the loss as one layer each in the split
 * (--account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split), then
 * --num-layers-per-virtual-pipeline-stage counts those places ((L + 2) / (S v)). */
static int uneven_interleaved_flags(const pf_export_split_t *x, FILE *f, int v)
{
    int S = x->S, L = x->layers;
    fprintf(f, "    # interleaved 1F1B: %d virtual stages per stage; the embedding and the loss "
            "take one layer's place each,\n    # so the first and the last stage hold %d layers, "
            "the others %d\n", v, (L + 2) / S - 1, (L + 2) / S);
    fprintf(f, "    --account-for-embedding-in-pipeline-split\n"
            "    --account-for-loss-in-pipeline-split\n"
            "    --num-layers-per-virtual-pipeline-stage %d\n", (L + 2) / (S * v));
    return PF_OK;
}

/* Stages of any layer counts, as Megatron-LM's --pipeline-model-parallel-layout spells them: E
 * the embedding, t a transformer layer, L the loss, | between stages ("Custom Pipeline Model
 * Parallel Layout" in Megatron-LM's docs): "Ett|ttt|tL" for 2, 3, 1 layers. */
static int layout(const pf_export_split_t *x, FILE *f)
{
    fprintf(f, "    # uneven middle stages: Megatron-LM's custom layout (E embedding, t layer, L "
            "loss; a release\n    # that parses this string form, 2025 on)\n"
            "    --pipeline-model-parallel-layout \"E");
    for (int s = 0; s < x->S; s++) {
        for (int k = 0; k < x->stage_layers[s]; k++)
            fputc('t', f);
        fputs(s < x->S - 1 ? "|" : "L\"\n", f);
    }
    return PF_OK;
}

/* The layer split: PF_EINPUT when Megatron-LM cannot write it. Uneven ends go by
 * --decoder-first/last-pipeline-num-layers (the middle stages are split evenly), unequal middle
 * stages by the custom layout; interleaving by --num-layers-per-virtual-pipeline-stage =
 * L / (p v), which needs equal stages. */
int pf_export_megatron_layers(const pf_export_split_t *x, FILE *f, char *err, size_t errlen)
{
    int S = x->S, L = x->layers, first = x->stage_layers[0], last = x->stage_layers[S - 1];
    int mid = S > 2 ? x->stage_layers[1] : 0, v = x->v;
    for (int s = 2; s < S - 1; s++)
        if (x->stage_layers[s] != mid && v > 1)
            return pf_fail(err, errlen, PF_EINPUT, "stages 1 and %d hold %d and %d layers: "
                           "Megatron-LM interleaves only equal stages (or ends one layer "
                           "short)", s, mid, x->stage_layers[s]);
        else if (x->stage_layers[s] != mid)
            return layout(x, f);
    /* S = 2 has no middle: give both ends when they differ */
    int even = 1;
    for (int s = 1; s < S; s++)
        even &= x->stage_layers[s] == first;
    if (v > 1 && uneven_interleaved(x, v))
        return uneven_interleaved_flags(x, f, v);
    if (v > 1 && (!even || L % (S * v)))
        return pf_fail(err, errlen, PF_EINPUT, "%d virtual stages over %d stages of %d layers: "
                       "Megatron-LM's --num-layers-per-virtual-pipeline-stage needs every stage "
                       "to hold the same number of layers, a multiple of %d", v, S, L, v);
    int put_first = !even && (S == 2 || first != mid), put_last = !even && (S == 2 || last != mid);
    if (put_first || put_last)
        fprintf(f, "    # uneven split: Megatron-LM divides the layers of the stages not named "
                "here evenly\n");
    if (put_first)
        fprintf(f, "    --decoder-first-pipeline-num-layers %d\n", first);
    if (put_last)
        fprintf(f, "    --decoder-last-pipeline-num-layers %d\n", last);
    if (v > 1)
        fprintf(f, "    # interleaved 1F1B: %d virtual stages per stage of %d layers\n"
                "    --num-layers-per-virtual-pipeline-stage %d\n", v, L / S, L / (S * v));
    return PF_OK;
}

void pf_export_megatron_recompute(int S, const pf_training_recompute_t *rc,
                                  const int *stage_layers, int v, pf_export_recompute_t *out)
{
    pf_training_recompute_t most = PF_RECOMPUTE_NONE;
    int n = 0;
    out->exact = 1;
    for (int s = 0; s < S; s++) {
        out->exact &= rc[s] == rc[0];
        most = rc[s] > most ? rc[s] : most;
        if (rc[s] != PF_RECOMPUTE_NONE) { /* its blocks per model chunk, rounded up */
            int per = (stage_layers[s] + v - 1) / (v > 0 ? v : 1);
            n = per > n ? per : n;
        }
    }
    out->granularity = most;
    out->block_layers = !out->exact && most == PF_RECOMPUTE_FULL ? (n > 0 ? n : 1) : 0;
}
