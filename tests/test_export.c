/* export: every Megatron-LM flag and DeepSpeed key of a hand-made plan, uneven and refused layer
 * splits, and the rank -> device map inverted for every rank. */
#include "planner/export/export_megatron.h"
#include "planner/export/export_warnings.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/ir/plan.h"
#include "planner/core/rng.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GPT with `layers` layers, hidden 64, 4 heads, seq 16, vocab 100, microbatch 4. Op ids: embed
 * 0, layer i = 1 + 17i .. 17 + 17i (ln1 first, mlp.residual last; ln2 is 1 + 17i + 11),
 * final_ln 1 + 17 layers, head 2 + 17 layers. */
static pf_graph_t *small_gpt(int layers)
{
    pf_model_opts_t o;
    pf_model_opts_init(&o, PF_MODEL_GPT);
    o.layers = layers;
    o.hidden = 64;
    o.heads = 4;
    o.seq = 16;
    o.vocab = 100;
    o.microbatch = 4;
    char err[256];
    pf_graph_t *g = NULL;
    CU_ASSERT_EQUAL(pf_model_build(&o, &g, err, sizeof err), PF_OK);
    return g;
}

/* Two DGX H100 machines: devices 0-7 are node0/gpu0-7, 8-15 node1/gpu0-7. */
static pf_cluster_t *two_hosts(void)
{
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX_H100);
    o.machines = 2;
    char err[256];
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL(pf_topology_build(&o, &c, err, sizeof err), PF_OK);
    return c;
}

/* Stage s gets ops [cut[s], cut[s + 1]). */
static pf_plan_t *cut_plan(const pf_graph_t *g, int stages, int replicas, int tp, const int *cut)
{
    pf_plan_t *p = pf_plan_new(stages, replicas);
    int ops[4096];
    for (int s = 0; s < stages; s++) {
        for (int v = cut[s]; v < cut[s + 1]; v++)
            ops[v - cut[s]] = v;
        pf_plan_set_stage_ops(p, s, ops, cut[s + 1] - cut[s]);
    }
    (void)g;
    p->tensor_parallel = tp;
    /* pf_plan_stage_devices allocates R entries; a tensor-parallel plan holds R x T */
    for (int s = 0; s < stages; s++) {
        p->stage_list[s].devices = malloc((size_t)(replicas * tp) * sizeof(int));
        for (int i = 0; i < replicas * tp; i++)
            p->stage_list[s].devices[i] = -1;
    }
    pf_plan_set_names(p, pf_graph_name(g), "two-dgx-h100");
    return p;
}

/* The example: GPT with 4 layers in 2 stages (embed + layers 0-2 | layer 3 + final_ln + head),
 * 2 replicas x 2 tensor-parallel ranks, 8 micro-batches, bf16 Adam, ZeRO 1, selective
 * recomputation. Stage 0 runs on node1, stage 1 on node0, each replica's two ranks on a
 * swapped GPU pair, so the exact layout must reorder hosts and GPUs:
 *   stage 0: replica 0 -> devices 9, 8 (node1/gpu1, gpu0), replica 1 -> 11, 10
 *   stage 1: replica 0 -> 3, 2, replica 1 -> 1, 0                                           */
static pf_plan_t *example_plan(const pf_graph_t *g)
{
    const int cut[] = {0, 52, 71};
    pf_plan_t *p = cut_plan(g, 2, 2, 2, cut);
    const int dev[2][4] = {{9, 8, 11, 10}, {3, 2, 1, 0}};
    for (int s = 0; s < 2; s++)
        memcpy(p->stage_list[s].devices, dev[s], sizeof dev[s]);
    p->microbatches = 8;
    p->train.precision_bytes = 2;
    p->train.zero = 1;
    p->train.recompute = PF_RECOMPUTE_SELECTIVE;
    return p;
}

/* The block tests' plan: the 4-layer GPT in 2 even stages (embed + layers 0-1 | layers 2-3 +
 * final_ln + head), 2 replicas x T 2 in GPU order (stage 0 on node0, stage 1 on node1), 8
 * micro-batches in bf16. */
static pf_plan_t *even_plan(const pf_graph_t *g)
{
    const int cut[] = {0, 35, 71};
    pf_plan_t *p = cut_plan(g, 2, 2, 2, cut);
    const int dev[2][4] = {{0, 1, 2, 3}, {8, 9, 10, 11}};
    for (int s = 0; s < 2; s++)
        memcpy(p->stage_list[s].devices, dev[s], sizeof dev[s]);
    p->microbatches = 8;
    p->train.precision_bytes = 2;
    return p;
}

/* Text a writer produces, in a buffer the caller frees. */
typedef int (*writer_fn)(const pf_export_t *, FILE *, char *, size_t);
static char *written(const pf_export_t *x, writer_fn w, int *rc, char *err, size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    *rc = w(x, f, err, errlen);
    fclose(f);
    return buf;
}

/* The value after "    FLAG " in text (a flag on its own counts 1), or dflt when absent. */
static long megatron_value(const char *text, const char *flag, long dflt)
{
    char key[96];
    snprintf(key, sizeof key, "    %s", flag);
    for (const char *at = strstr(text, key); at; at = strstr(at + 1, key)) {
        const char *end = at + strlen(key);
        if (*end == '\n')
            return 1;
        if (*end == ' ')
            return strtol(end + 1, NULL, 10);
    }
    return dflt;
}

/* What Megatron-LM's validate_args and TransformerConfig.__post_init__ assert of these flags
 * (megatron/training/arguments.py, megatron/core/transformer/transformer_config.py): heads and
 * query groups divisible by t, heads by query groups, hidden by heads (unless --kv-channels gives
 * the head size: TransformerConfig checks it only without one), the layers split over p
 * (evenly, or the middle stages evenly once --decoder-first/last-pipeline-num-layers took theirs),
 * a virtual stage a divisor of a stage's layers, max-position-embeddings >= seq-length,
 * --num-query-groups only with --group-query-attention. */
static void check_megatron_constraints(const char *text)
{
    long t = megatron_value(text, "--tensor-model-parallel-size", 1);
    long p = megatron_value(text, "--pipeline-model-parallel-size", 1);
    long layers = megatron_value(text, "--num-layers", 0);
    long heads = megatron_value(text, "--num-attention-heads", 0);
    long hidden = megatron_value(text, "--hidden-size", 0);
    long gqa = megatron_value(text, "--group-query-attention", 0);
    long groups = megatron_value(text, "--num-query-groups", 0);
    long first = megatron_value(text, "--decoder-first-pipeline-num-layers", 0);
    long last = megatron_value(text, "--decoder-last-pipeline-num-layers", 0);
    long vl = megatron_value(text, "--num-layers-per-virtual-pipeline-stage", 0);
    long seq = megatron_value(text, "--seq-length", 0);
    long pos = megatron_value(text, "--max-position-embeddings", 0);
    CU_ASSERT_TRUE(t >= 1 && p >= 1 && layers >= 0); /* 0: only the model's array */
    if (heads) {
        CU_ASSERT_EQUAL(heads % t, 0);
        if (!megatron_value(text, "--kv-channels", 0))
            CU_ASSERT_EQUAL(hidden % heads, 0);
    }
    CU_ASSERT_EQUAL(groups != 0, gqa != 0);
    if (groups) {
        CU_ASSERT_EQUAL(groups % t, 0);
        CU_ASSERT_EQUAL(heads % groups, 0);
    }
    long rest = layers - first - last, middle = p - (first > 0) - (last > 0);
    if (layers)
        CU_ASSERT_TRUE(rest >= 0 && (middle > 0 ? rest % middle == 0 : rest == 0));
    if (vl)
        CU_ASSERT_TRUE(layers % p == 0 && (layers / p) % vl == 0);
    CU_ASSERT_TRUE(pos >= seq);
    if (megatron_value(text, "--sequence-parallel", 0))
        CU_ASSERT_TRUE(t > 1);
}

/* Every "--flag" the text holds is one of Megatron-LM's (tests/data/megatron_args.txt), and the
 * flags together pass Megatron-LM's own checks. */
static void check_megatron_names(const char *text)
{
    check_megatron_constraints(text);
    char path[600], line[128], known[4096] = " ";
    FILE *f = fopen(pf_test_data("megatron_args.txt", path, sizeof path), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    while (fgets(line, sizeof line, f))
        if (line[0] == '-') {
            line[strcspn(line, "\n")] = 0;
            strncat(known, line, sizeof known - strlen(known) - 3);
            strcat(known, " ");
        }
    fclose(f);
    int n = 0;
    for (const char *at = strstr(text, "    --"); at; at = strstr(at + 1, "    --")) {
        char flag[96];
        CU_ASSERT_EQUAL_FATAL(sscanf(at + 4, " %90s", flag + 1), 1);
        flag[0] = ' ';
        strcat(flag, " ");
        if (!strstr(known, flag))
            fprintf(stderr, "\n  not a Megatron-LM flag:%s\n", flag);
        CU_ASSERT_PTR_NOT_NULL(strstr(known, flag));
        n++;
    }
    CU_ASSERT_TRUE(n >= 5);
}

static void test_megatron_flags(void)
{
    pf_graph_t *g = small_gpt(4);
    pf_cluster_t *c = two_hosts();
    pf_plan_t *p = example_plan(g);
    char err[512] = "";
    int rc;
    pf_export_t *x = pf_export_new(p, g, c, &rc, err, sizeof err);
    if (!x)
        fprintf(stderr, "\n  %s\n", err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    CU_ASSERT_EQUAL(pf_export_layers(x), 4);
    CU_ASSERT_EQUAL(pf_export_stage_layers(x, 0), 3);
    CU_ASSERT_EQUAL(pf_export_stage_layers(x, 1), 1);
    CU_ASSERT_EQUAL(pf_export_stage_first_layer(x, 1), 3);
    CU_ASSERT_EQUAL(pf_export_world(x), 8);         /* 2 x 2 x 2 */
    CU_ASSERT_EQUAL(pf_export_global_batch(x), 64); /* 4 samples x 8 micro-batches x 2 replicas */
    /* T = 2: sequence parallel; first 3 layers, last 1 (S = 2 has no middle: both given);
     * ZeRO 1: distributed optimizer; selective recomputation; bf16 */
    const char *want =
        "# Megatron-LM arguments for plan gpt-4l-64h on two-dgx-h100 (planfarm export)\n"
        "# The model, from the graph's \"model\" object; add data, tokenizer and optimizer "
        "settings.\n"
        "MEGATRON_MODEL_ARGS=(\n"
        "    --hidden-size 64\n"
        "    --ffn-hidden-size 256\n"
        "    --num-attention-heads 4\n"
        "    --seq-length 16\n"
        "    --max-position-embeddings 16\n"
        "    # vocabulary 100: the tokenizer sets it (Megatron-LM pads it to a multiple of 128 x "
        "T)\n"
        "    # the graph's head holds its own vocabulary x hidden matrix, as planned\n"
        "    --untie-embeddings-and-output-weights\n"
        ")\n"
        "# 2 pipeline stages x 2 data-parallel replicas x 2 tensor-parallel ranks = 8 ranks.\n"
        "# The data-parallel size is implied: world / (pipeline x tensor). Ranks follow "
        "Megatron-LM's\n"
        "# order rank = pp x 4 + dp x 2 + tp; launch.sh puts each on the plan's device.\n"
        "# layers per stage: 3 1\n"
        "MEGATRON_PARALLEL_ARGS=(\n"
        "    --tensor-model-parallel-size 2\n"
        "    --pipeline-model-parallel-size 2\n"
        "    --num-layers 4\n"
        "    # uneven split: Megatron-LM divides the layers of the stages not named here evenly\n"
        "    --decoder-first-pipeline-num-layers 3\n"
        "    --decoder-last-pipeline-num-layers 1\n"
        "    # global batch = micro-batch 4 x 8 micro-batches x 2 replicas\n"
        "    --micro-batch-size 4\n"
        "    --global-batch-size 64\n"
        "    --bf16\n"
        "    --optimizer adam\n"
        "    --use-distributed-optimizer\n"
        "    --recompute-granularity selective\n"
        "    # tensor parallel > 1: Megatron-LM recommends sequence parallelism with it\n"
        "    --sequence-parallel\n"
        ")\n"
        "MEGATRON_ARGS=(\"${MEGATRON_MODEL_ARGS[@]}\" \"${MEGATRON_PARALLEL_ARGS[@]}\")\n";
    char *got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT_STRING_EQUAL(got, want);
    check_megatron_names(got);
    free(got);
    pf_export_destroy(&x);

    /* full recomputation, fp32 SGD, no ZeRO, T = 1 on the same split: no sequence parallel, no
     * distributed optimizer, no precision flag */
    p->train.recompute = PF_RECOMPUTE_FULL;
    p->train.precision_bytes = 4;
    p->train.optimizer = PF_OPTIMIZER_SGD;
    p->train.zero = 0;
    p->tensor_parallel = 1;
    x = pf_export_new(p, g, c, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    CU_ASSERT_EQUAL(pf_export_world(x), 4);
    got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "    # fp32: no mixed-precision flag\n"
                                       "    --optimizer sgd\n"
                                       "    --recompute-granularity full\n"
                                       "    --recompute-method uniform\n"
                                       "    --recompute-num-layers 1\n)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "--tensor-model-parallel-size 1\n"));
    CU_ASSERT_PTR_NULL(strstr(got, "--sequence-parallel"));
    CU_ASSERT_PTR_NULL(strstr(got, "--bf16"));
    CU_ASSERT_PTR_NULL(strstr(got, "--use-distributed-optimizer"));
    free(got);
    pf_export_destroy(&x);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* The model flags from the graph's "model" object (export_megatron.h), by hand for a Llama with
 * grouped-query attention, the MoE and BERT additions, a graph without the object, and the
 * models Megatron-LM would refuse at the plan's tensor-parallel size. */
static void test_megatron_model(void)
{
    pf_model_opts_t o;
    pf_arch_t a;
    pf_model_opts_init(&o, PF_MODEL_LLAMA);
    o.layers = 4, o.hidden = 4096, o.heads = 32, o.kv_heads = 8;
    CU_ASSERT_EQUAL_FATAL(pf_model_arch(&o, &a), PF_OK);
    char *buf = NULL, err[512] = "";
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pf_export_megatron_model(&a, f);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(buf,
        "# The model, from the graph's \"model\" object; add data, tokenizer and optimizer "
        "settings.\n"
        "MEGATRON_MODEL_ARGS=(\n"
        "    --hidden-size 4096\n"
        "    --ffn-hidden-size 11008\n"
        "    --num-attention-heads 32\n"
        "    # grouped-query attention: 4 query heads share each of 8 key/value heads\n"
        "    --group-query-attention\n"
        "    --num-query-groups 8\n"
        "    --seq-length 4096\n"
        "    --max-position-embeddings 4096\n"
        "    # vocabulary 32000: the tokenizer sets it (Megatron-LM pads it to a multiple of 128 x "
        "T)\n"
        "    --swiglu\n"
        "    --normalization RMSNorm\n"
        "    --position-embedding-type rope\n"
        "    # no biases and no dropout ops in the graph (Llama's block)\n"
        "    --disable-bias-linear\n"
        "    --attention-dropout 0\n"
        "    --hidden-dropout 0\n"
        "    # the graph's head holds its own vocabulary x hidden matrix, as planned\n"
        "    --untie-embeddings-and-output-weights\n"
        ")\n");
    check_megatron_names(buf);
    free(buf);
    /* t = 8 holds whole heads and groups; t = 16 splits a key/value head; the layer count must
     * be the plan's */
    CU_ASSERT_EQUAL(pf_export_megatron_check(&a, 4, 8, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_export_megatron_check(&a, 4, 16, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "8 query groups (kv heads) are not divisible by tensor "
                                       "parallel 16"));
    CU_ASSERT_EQUAL(pf_export_megatron_check(&a, 5, 2, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "says 4 layers but its ops hold 5 blocks"));
    CU_ASSERT_EQUAL(pf_export_megatron_check(NULL, 5, 3, err, sizeof err), PF_OK);
    /* MoE: experts and top-k; BERT: no binary head, the head stays tied (Megatron-LM's) */
    pf_model_opts_init(&o, PF_MODEL_MOE);
    CU_ASSERT_EQUAL_FATAL(pf_model_arch(&o, &a), PF_OK);
    f = open_memstream(&buf, &len);
    pf_export_megatron_model(&a, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "    --num-query-groups 8\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "    --num-experts 8\n    --moe-router-topk 2\n)\n"));
    check_megatron_names(buf);
    free(buf);
    pf_model_opts_init(&o, PF_MODEL_BERT);
    CU_ASSERT_EQUAL_FATAL(pf_model_arch(&o, &a), PF_OK);
    f = open_memstream(&buf, &len);
    pf_export_megatron_model(&a, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "    --bert-no-binary-head\n)\n"));
    CU_ASSERT_PTR_NULL(strstr(buf, "--untie"));
    CU_ASSERT_PTR_NULL(strstr(buf, "--swiglu"));
    CU_ASSERT_PTR_NULL(strstr(buf, "--group-query-attention"));
    check_megatron_names(buf);
    free(buf);
    /* resnet has no transformer shape */
    pf_model_opts_init(&o, PF_MODEL_RESNET);
    CU_ASSERT_EQUAL(pf_model_arch(&o, &a), PF_EINPUT);
    /* no object: an empty array and the flags to add, named */
    f = open_memstream(&buf, &len);
    pf_export_megatron_model(NULL, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "MEGATRON_MODEL_ARGS=(\n)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "# Add its flags yourself: --hidden-size, "
                                       "--num-attention-heads"));
    CU_ASSERT_PTR_NULL(strstr(buf, "    --"));
    free(buf);

    /* through the writer: the example plan (T = 2) of a graph whose model has 5 heads is refused
     * before anything is written; without the object it exports, with the comment */
    pf_graph_t *g = small_gpt(4);
    pf_cluster_t *c = two_hosts();
    pf_plan_t *p = example_plan(g);
    int rc;
    a = *pf_graph_arch(g);
    a.heads = 5, a.kv_heads = 5;
    CU_ASSERT_EQUAL_FATAL(pf_graph_set_arch(g, &a), PF_OK);
    pf_export_t *x = pf_export_new(p, g, c, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    char *got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(got, "");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "5 attention heads are not divisible by tensor parallel 2"));
    free(got);
    pf_export_destroy(&x);
    CU_ASSERT_EQUAL_FATAL(pf_graph_set_arch(g, NULL), PF_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x = pf_export_new(p, g, c, &rc, err, sizeof err));
    got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "MEGATRON_MODEL_ARGS=(\n)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "    --num-layers 4\n"));
    check_megatron_names(got);
    free(got);
    pf_export_destroy(&x);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* A head size apart from hidden / heads reaches Megatron-LM as --kv-channels (GPT-3 13B as
 * Calculon writes it: 40 heads of 128 in a hidden of 5140); without one no such flag. */
static void test_megatron_kv_channels(void)
{
    pf_model_opts_t o;
    pf_arch_t a;
    pf_model_opts_init(&o, PF_MODEL_GPT);
    o.layers = 2, o.hidden = 5140, o.heads = 40, o.head_dim = 128, o.ffn = 20560;
    for (int with = 1; with >= 0; with--) {
        if (!with)
            o.hidden = 5120, o.head_dim = 0;
        CU_ASSERT_EQUAL_FATAL(pf_model_arch(&o, &a), PF_OK);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        pf_export_megatron_model(&a, f);
        fclose(f);
        CU_ASSERT_EQUAL(strstr(buf, "    --num-attention-heads 40\n    --kv-channels 128\n") != NULL,
                        with);
        CU_ASSERT_EQUAL(strstr(buf, "--kv-channels") != NULL, with);
        check_megatron_names(buf);
        free(buf);
    }
}

/* The block search's choices (plan.h "blocks"): micro-batch 2 of a graph made at 4, 2 virtual
 * stages over 2 stages of 2 layers, sequence parallelism, full recomputation, ZeRO 1; then the
 * uneven interleaving (3 virtual stages: 4 layers + the embedding and the loss over 2 x 3
 * chunks), the refusals (4 virtual stages; 2 over a 3 | 1 split) and ZeRO 3. */
static void test_block_choices(void)
{
    pf_graph_t *g = small_gpt(4);
    pf_cluster_t *c = two_hosts();
    pf_plan_t *p = even_plan(g);
    p->train.zero = 1;
    p->train.recompute = PF_RECOMPUTE_FULL;
    p->blocks.present = 1;
    p->blocks.microbatch_size = 2;
    p->blocks.virtual_stages = 2;
    p->blocks.sequence_parallel = 1;
    p->blocks.first_layers = 2, p->blocks.last_layers = 2, p->blocks.candidates = 3;
    p->blocks.analytic_step_ms = 12.5;
    char err[512] = "", path[600];
    int rc;
    /* the plan file keeps them (plan.c reads what it writes) */
    pf_plan_t *back = NULL;
    snprintf(path, sizeof path, "%s/export-blocks-plan.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(pf_plan_save(p, g, c, path, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_plan_load(path, g, c, &back, err, sizeof err), PF_OK);
    CU_ASSERT_TRUE(back->blocks.present);
    CU_ASSERT_EQUAL(back->blocks.microbatch_size, 2);
    CU_ASSERT_EQUAL(back->blocks.virtual_stages, 2);
    CU_ASSERT_EQUAL(back->blocks.sequence_parallel, 1);
    CU_ASSERT_EQUAL(back->blocks.first_layers + back->blocks.last_layers, 4);
    CU_ASSERT_EQUAL(back->blocks.candidates, 3);
    CU_ASSERT_EQUAL(back->blocks.analytic_step_ms, 12.5);
    pf_plan_destroy(&back);
    pf_export_t *x = pf_export_new(p, g, c, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    CU_ASSERT_EQUAL(pf_export_microbatch(x), 2);
    CU_ASSERT_EQUAL(pf_export_global_batch(x), 32); /* 2 samples x 8 micro-batches x 2 */
    CU_ASSERT_EQUAL(pf_export_virtual_stages(x), 2);
    CU_ASSERT_EQUAL(pf_export_sequence_parallel(x), 1);
    const char *want = "MEGATRON_PARALLEL_ARGS=(\n"
                       "    --tensor-model-parallel-size 2\n"
                       "    --pipeline-model-parallel-size 2\n"
                       "    --num-layers 4\n"
                       "    # interleaved 1F1B: 2 virtual stages per stage of 2 layers\n"
                       "    --num-layers-per-virtual-pipeline-stage 1\n"
                       "    # global batch = micro-batch 2 x 8 micro-batches x 2 replicas\n"
                       "    --micro-batch-size 2\n"
                       "    --global-batch-size 32\n"
                       "    --bf16\n"
                       "    --optimizer adam\n"
                       "    --use-distributed-optimizer\n"
                       "    --recompute-granularity full\n"
                       "    --recompute-method uniform\n"
                       "    --recompute-num-layers 1\n"
                       "    --sequence-parallel\n"
                       ")\n";
    char *got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, want));
    check_megatron_names(got);
    free(got);
    got = written(x, pf_export_write_deepspeed, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\"train_batch_size\": 32,\n"
                                       "  \"train_micro_batch_size_per_gpu\": 2,\n"
                                       "  \"gradient_accumulation_steps\": 8,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\"activation_checkpoint_interval\": 1"));
    free(got);
    /* DeepSpeed: T = 2, sequence parallelism, 2 virtual stages; Megatron-LM: nothing */
    char lines[6][PF_EXPORT_WARN_LEN];
    CU_ASSERT_EQUAL_FATAL(pf_export_warnings(x, PF_EXPORT_DEEPSPEED, lines, 6), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(lines[1], "sequence parallelism: DeepSpeed's config has no key"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lines[2], "2 virtual stages: DeepSpeed's PipelineEngine has no "
                                            "interleaved 1F1B"));
    CU_ASSERT_EQUAL(pf_export_warnings(x, PF_EXPORT_MEGATRON, lines, 6), 0);
    pf_export_destroy(&x);
    /* tensor-parallel overlap: the plan keeps it, Megatron-LM gets --tp-comm-overlap after
     * --sequence-parallel; without sequence parallelism (below) neither */
    p->blocks.tp_comm_overlap = 1;
    CU_ASSERT_EQUAL_FATAL(pf_plan_save(p, g, c, path, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_plan_load(path, g, c, &back, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(back->blocks.tp_comm_overlap, 1);
    pf_plan_destroy(&back);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x = pf_export_new(p, g, c, &rc, err, sizeof err));
    got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "    --sequence-parallel\n    # the sequence-parallel "
                                       "all-gathers and reduce-scatters overlapped with the GEMMs\n"
                                       "    --tp-comm-overlap\n)\n"));
    check_megatron_names(got);
    free(got);
    pf_export_destroy(&x);
    /* no sequence parallelism planned, one virtual stage, selective: neither flag */
    p->blocks.sequence_parallel = 0, p->blocks.virtual_stages = 1;
    p->train.recompute = PF_RECOMPUTE_SELECTIVE;
    CU_ASSERT_PTR_NOT_NULL_FATAL(x = pf_export_new(p, g, c, &rc, err, sizeof err));
    got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_PTR_NULL(strstr(got, "--sequence-parallel"));
    CU_ASSERT_PTR_NULL(strstr(got, "--tp-comm-overlap"));
    CU_ASSERT_PTR_NULL(strstr(got, "virtual"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "    --recompute-granularity selective\n)\n"));
    free(got);
    pf_export_destroy(&x);
    /* ZeRO 3: the distributed optimizer (ZeRO 1), and a warning */
    p->train.zero = 3;
    CU_ASSERT_PTR_NOT_NULL_FATAL(x = pf_export_new(p, g, c, &rc, err, sizeof err));
    CU_ASSERT_EQUAL_FATAL(pf_export_warnings(x, PF_EXPORT_MEGATRON, lines, 6), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(lines[0], "ZeRO 3: Megatron-LM's distributed optimizer shards "
                                            "the optimizer state only"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lines[0], "no Megatron-LM flag"));
    got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "    --use-distributed-optimizer\n"));
    free(got);
    pf_export_destroy(&x);
    /* 3 virtual stages: 4 layers over 2 x 3 chunks only with the embedding and the loss each
     * in a layer's place (4 + 2 = 6 places, 1 per chunk, stages of 3 - 1 = 2 layers) */
    p->train.zero = 1, p->blocks.virtual_stages = 3;
    CU_ASSERT_PTR_NOT_NULL_FATAL(x = pf_export_new(p, g, c, &rc, err, sizeof err));
    got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "    --num-layers 4\n"
                                       "    # interleaved 1F1B: 3 virtual stages per stage; the "
                                       "embedding and the loss take one layer's place each,\n"
                                       "    # so the first and the last stage hold 2 layers, the "
                                       "others 3\n"
                                       "    --account-for-embedding-in-pipeline-split\n"
                                       "    --account-for-loss-in-pipeline-split\n"
                                       "    --num-layers-per-virtual-pipeline-stage 1\n"));
    check_megatron_names(got);
    free(got);
    pf_export_destroy(&x);
    /* 4 virtual stages: neither 4 nor 6 layers' places over 2 x 4 chunks; refused */
    p->blocks.virtual_stages = 4;
    CU_ASSERT_PTR_NOT_NULL_FATAL(x = pf_export_new(p, g, c, &rc, err, sizeof err));
    got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "4 virtual stages over 2 stages of 4 layers"));
    free(got);
    pf_export_destroy(&x);
    pf_plan_destroy(&p);
    /* 2 virtual stages over a 3 | 1 split: refused (interleaving needs equal stages) */
    p = example_plan(g);
    p->blocks.present = 1, p->blocks.virtual_stages = 2, p->blocks.microbatch_size = 4;
    CU_ASSERT_PTR_NOT_NULL_FATAL(x = pf_export_new(p, g, c, &rc, err, sizeof err));
    got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "2 virtual stages over 2 stages of 4 layers"));
    free(got);
    pf_export_destroy(&x);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Context parallelism 2 and expert parallelism 2 on the block-choices plan (2 stages x 2 replicas
 * x T 2): the 2 replicas are 1 data-parallel x 2 context-parallel, so the global batch is 2 x 8 x
 * 2 / 2 = 16 sequences; both sizes reach Megatron-LM, the plan file keeps them, DeepSpeed warns. */
static void test_context_expert(void)
{
    pf_graph_t *g = small_gpt(4);
    pf_cluster_t *c = two_hosts();
    pf_plan_t *p = even_plan(g);
    p->blocks.present = 1, p->blocks.microbatch_size = 2, p->blocks.virtual_stages = 1;
    p->blocks.context_parallel = 2, p->blocks.expert_parallel = 2;
    char err[512] = "", path[600];
    int rc;
    pf_plan_t *back = NULL;
    snprintf(path, sizeof path, "%s/export-cpep-plan.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(pf_plan_save(p, g, c, path, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_plan_load(path, g, c, &back, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(back->blocks.context_parallel, 2);
    CU_ASSERT_EQUAL(back->blocks.expert_parallel, 2);
    pf_plan_destroy(&back);
    pf_export_t *x = pf_export_new(p, g, c, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    CU_ASSERT_EQUAL(pf_export_global_batch(x), 16);
    CU_ASSERT_EQUAL(pf_export_context_parallel(x), 2);
    CU_ASSERT_EQUAL(pf_export_expert_parallel(x), 2);
    char *got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "    --num-layers 4\n"
                                       "    # context parallelism: the 2 replicas are 1 data-"
                                       "parallel x 2 context-parallel\n"
                                       "    --context-parallel-size 2\n"
                                       "    --expert-model-parallel-size 2\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "    --global-batch-size 16\n"));
    check_megatron_names(got);
    free(got);
    char lines[8][PF_EXPORT_WARN_LEN];
    int n = pf_export_warnings(x, PF_EXPORT_DEEPSPEED, lines, 8), found = 0;
    for (int i = 0; i < n && i < 8; i++)
        found += strstr(lines[i], "context parallelism 2: DeepSpeed's config has no ring") != NULL ||
                 strstr(lines[i], "expert parallelism 2: not a config key") != NULL;
    CU_ASSERT_EQUAL(found, 2);
    pf_export_destroy(&x);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

static void test_deepspeed_config(void)
{
    pf_graph_t *g = small_gpt(4);
    pf_cluster_t *c = two_hosts();
    pf_plan_t *p = example_plan(g);
    char err[512] = "";
    int rc;
    pf_export_t *x = pf_export_new(p, g, c, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    /* train_batch_size = 4 x 8 x 2 = 64 = micro x accumulation x data-parallel size (R, with
     * the tensor-parallel ranks in DeepSpeed's "model" axis); selective recomputation becomes
     * DeepSpeed's whole-layer checkpointing; nothing DeepSpeed does not read */
    const char *want = "{\n"
                       "  \"train_batch_size\": 64,\n"
                       "  \"train_micro_batch_size_per_gpu\": 4,\n"
                       "  \"gradient_accumulation_steps\": 8,\n"
                       "  \"zero_optimization\": {\n"
                       "    \"stage\": 1\n"
                       "  },\n"
                       "  \"bf16\": {\n"
                       "    \"enabled\": true\n"
                       "  },\n"
                       "  \"activation_checkpointing\": {\n"
                       "    \"partition_activations\": false,\n"
                       "    \"contiguous_memory_optimization\": false,\n"
                       "    \"cpu_checkpointing\": false\n"
                       "  },\n"
                       "  \"pipeline\": {\n"
                       "    \"activation_checkpoint_interval\": 1\n"
                       "  }\n"
                       "}\n";
    char *got = written(x, pf_export_write_deepspeed, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT_STRING_EQUAL(got, want);
    free(got);
    /* PipelineModule's arguments: 2 stages, topology pp 2 x mp 2 x dp 2, the plan's 3 + 1 */
    got = written(x, pf_export_write_deepspeed_pipe, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\nPIPELINE_STAGES = 2\nDATA_PARALLEL = 2\n"
                                       "TENSOR_PARALLEL = 2\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\nLAYERS_PER_STAGE = [3, 1]\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\nACTIVATION_CHECKPOINT_INTERVAL = 1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "PipelineModule(layers=layers, topology=topology"));
    free(got);
    /* what DeepSpeed cannot express: selective, T = 2, 3 | 1 blocks; Megatron-LM: nothing */
    char lines[4][PF_EXPORT_WARN_LEN];
    CU_ASSERT_EQUAL_FATAL(pf_export_warnings(x, PF_EXPORT_DEEPSPEED, lines, 4), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(lines[0], "selective recomputation: DeepSpeed checkpoints "
                                            "whole layers only"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lines[1], "tensor parallelism 2: DeepSpeed does not split "
                                            "layers itself"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lines[2], "uneven stages (3,1 blocks)"));
    CU_ASSERT_EQUAL(pf_export_warnings(x, PF_EXPORT_MEGATRON, lines, 4), 0);
    CU_ASSERT_EQUAL(pf_export_warnings(x, PF_EXPORT_TORCHRUN, lines, 4), 0);
    pf_export_destroy(&x);
    /* fp32, no recomputation, GPipe: no bf16, no checkpointing keys; the schedule warned about
     * by both, and only the count past max */
    p->train.precision_bytes = 4;
    p->train.recompute = PF_RECOMPUTE_NONE;
    p->train.schedule = PF_SCHEDULE_GPIPE;
    x = pf_export_new(p, g, c, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    got = written(x, pf_export_write_deepspeed, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT_PTR_NULL(strstr(got, "bf16"));
    CU_ASSERT_PTR_NULL(strstr(got, "checkpoint"));
    free(got);
    CU_ASSERT_EQUAL(pf_export_warnings(x, PF_EXPORT_DEEPSPEED, lines, 1), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(lines[0], "tensor parallelism 2"));
    CU_ASSERT_EQUAL(pf_export_warnings(x, PF_EXPORT_MEGATRON, lines, 4), 1);
    CU_ASSERT_STRING_EQUAL(lines[0], "schedule gpipe: Megatron-LM runs 1F1B; it holds fewer "
                                     "micro-batches than the plan counted");
    pf_export_destroy(&x);
    p->train.schedule = PF_SCHEDULE_1F1B;
    /* ZeRO 2 with a pipeline: DeepSpeed's pipeline engine refuses it, so do we */
    p->train.zero = 2;
    x = pf_export_new(p, g, c, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    got = written(x, pf_export_write_deepspeed, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "ZeRO 2 with 2 pipeline stages: DeepSpeed's pipeline engine "
                                "supports ZeRO stage 0 or 1 only");
    CU_ASSERT_STRING_EQUAL(got, "");
    free(got);
    got = written(x, pf_export_write_deepspeed_pipe, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_EINPUT);
    free(got);
    pf_export_destroy(&x);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* A plan whose stages recompute differently (--recompute auto): Megatron-LM and DeepSpeed have one
 * setting for every stage, so the nearest form at least as memory-safe, said plainly. The rule
 * alone: agreeing stages are exact; none + selective -> selective; any full -> block N with N the
 * most blocks per model chunk of a stage that recomputes. */
static void test_stage_recompute(void)
{
    const pf_training_recompute_t N = PF_RECOMPUTE_NONE, S = PF_RECOMPUTE_SELECTIVE,
                                  F = PF_RECOMPUTE_FULL;
    pf_export_recompute_t r;
    const int layers[4] = {3, 4, 4, 5};
    pf_export_megatron_recompute(4, (pf_training_recompute_t[]){F, F, F, F}, layers, 1, &r);
    CU_ASSERT(r.exact && r.granularity == F && r.block_layers == 0);
    pf_export_megatron_recompute(4, (pf_training_recompute_t[]){S, S, N, N}, layers, 1, &r);
    CU_ASSERT(!r.exact && r.granularity == S && r.block_layers == 0);
    pf_export_megatron_recompute(4, (pf_training_recompute_t[]){F, S, N, N}, layers, 1, &r);
    CU_ASSERT(!r.exact && r.granularity == F && r.block_layers == 4); /* stage 1's 4 blocks */
    pf_export_megatron_recompute(4, (pf_training_recompute_t[]){F, N, N, N}, layers, 2, &r);
    CU_ASSERT(!r.exact && r.granularity == F && r.block_layers == 2); /* 3 blocks in 2 chunks */

    /* the block tests' plan (2 + 2 blocks): stage 0 full, stage 1 none */
    pf_graph_t *g = small_gpt(4);
    pf_cluster_t *c = two_hosts();
    pf_plan_t *p = even_plan(g);
    p->train.recompute = F;
    p->stage_list[0].has_recompute = 1, p->stage_list[0].recompute = F;
    p->stage_list[1].has_recompute = 1, p->stage_list[1].recompute = N;
    char err[512] = "", lines[4][PF_EXPORT_WARN_LEN];
    int rc;
    pf_export_t *x = pf_export_new(p, g, c, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    char *got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "# the plan recomputes per stage (full x1+none x1); "
                                       "Megatron-LM's flags hold for\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "    --recompute-granularity full\n"
                                       "    --recompute-method block\n"
                                       "    --recompute-num-layers 2\n"));
    CU_ASSERT_PTR_NULL(strstr(got, "--recompute-method uniform"));
    free(got);
    int n = pf_export_warnings(x, PF_EXPORT_MEGATRON, lines, 4);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(lines[0], "recomputation per stage (full x1+none x1): "
                                            "Megatron-LM has no per-stage setting"));
    got = written(x, pf_export_write_deepspeed_pipe, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "(full x1+none x1 recomputation planned)\n"
                                       "ACTIVATION_CHECKPOINT_INTERVAL = 1\n"));
    free(got);
    n = pf_export_warnings(x, PF_EXPORT_DEEPSPEED, lines, 4);
    CU_ASSERT_TRUE_FATAL(n >= 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(lines[0], "DeepSpeed has no per-stage setting; exported as "
                                            "activation_checkpoint_interval 1 on every stage"));
    pf_export_destroy(&x);
    /* none and selective: selective on every stage */
    p->train.recompute = S, p->stage_list[0].recompute = S;
    x = pf_export_new(p, g, c, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    got = written(x, pf_export_write_megatron, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "stages planned lighter recompute more (more time, less "
                                       "memory)\n    --recompute-granularity selective\n"));
    free(got);
    pf_export_destroy(&x);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Every rank g: the plan's device of (s, r, k) = g's Megatron-LM coordinates, and the layout's
 * node and CUDA_VISIBLE_DEVICES entry lead to that same device. */
static void check_every_rank(const pf_export_t *x, const pf_plan_t *p, const pf_cluster_t *c)
{
    int R = p->replicas, T = p->tensor_parallel, W = pf_export_world(x), D = pf_cluster_ndevices(c);
    int *hits = calloc((size_t)D, sizeof *hits);
    for (int gr = 0; gr < W; gr++) {
        int s = gr / (R * T), r = gr % (R * T) / T, k = gr % T;
        CU_ASSERT_EQUAL(pf_export_rank(p, s, r, k), gr);
        CU_ASSERT_EQUAL(pf_export_plan_rank_device(x, gr), pf_export_device(p, s, r, k));
        int n = 0;
        while (gr >= pf_export_node(x, n)->first_rank + pf_export_node(x, n)->nproc)
            n++;
        const pf_export_node_t *nd = pf_export_node(x, n);
        CU_ASSERT_EQUAL(nd->node_rank, n);
        int gpu = nd->gpus[gr - nd->first_rank], found = -1;
        char name[96];
        for (int d = 0; d < D; d++) {
            snprintf(name, sizeof name, "%s/gpu%d", nd->name, gpu);
            if (pf_cluster_device(c, d)->host == nd->host && !strcmp(pf_cluster_device(c, d)->name,
                                                                    name))
                found = d;
        }
        CU_ASSERT_EQUAL(found, pf_export_layout_rank_device(x, gr));
        if (found >= 0)
            hits[found]++;
        if (pf_export_exact(x))
            CU_ASSERT_EQUAL(found, pf_export_plan_rank_device(x, gr));
        /* a rank whose planned device is on the node it lands on keeps that device */
        if (pf_cluster_device(c, pf_export_plan_rank_device(x, gr))->host == nd->host)
            CU_ASSERT_EQUAL(found, pf_export_plan_rank_device(x, gr));
    }
    for (int d = 0; d < D; d++)
        CU_ASSERT(hits[d] <= 1);
    free(hits);
}

static void test_rank_layout(void)
{
    pf_graph_t *g = small_gpt(4);
    pf_cluster_t *c = two_hosts();
    pf_plan_t *p = example_plan(g);
    char err[512] = "";
    int rc;
    pf_export_t *x = pf_export_new(p, g, c, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    /* ranks 0-3 are stage 0 (node1), 4-7 stage 1 (node0): node1 is node rank 0; rank 0 = (pp 0,
     * dp 0, tp 0) -> device 9 = node1/gpu1, rank 1 -> gpu0, rank 2 -> gpu3, rank 3 -> gpu2 */
    CU_ASSERT(pf_export_exact(x));
    CU_ASSERT_STRING_EQUAL(pf_export_reason(x), "");
    CU_ASSERT_EQUAL_FATAL(pf_export_nnodes(x), 2);
    const pf_export_node_t *n0 = pf_export_node(x, 0), *n1 = pf_export_node(x, 1);
    CU_ASSERT_STRING_EQUAL(n0->name, "node1");
    CU_ASSERT_EQUAL(n0->first_rank, 0);
    CU_ASSERT_EQUAL(n0->nproc, 4);
    const int want0[] = {1, 0, 3, 2}, want1[] = {3, 2, 1, 0};
    CU_ASSERT_EQUAL(memcmp(n0->gpus, want0, sizeof want0), 0);
    CU_ASSERT_STRING_EQUAL(n1->name, "node0");
    CU_ASSERT_EQUAL(n1->first_rank, 4);
    CU_ASSERT_EQUAL(memcmp(n1->gpus, want1, sizeof want1), 0);
    check_every_rank(x, p, c);

    int wrc;
    char *host = written(x, pf_export_write_hostfile, &wrc, err, sizeof err);
    CU_ASSERT_STRING_EQUAL(host, "node1 slots=4\nnode0 slots=4\n");
    free(host);
    char *sh = written(x, pf_export_write_launch, &wrc, err, sizeof err);
    CU_ASSERT_EQUAL(wrc, PF_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(sh, "#    5   1   0   1     1      2  node0/gpu2\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(sh, "node1) node_rank=0; nproc=4; gpus=1,0,3,2 ;;\n"
                                      "node0) node_rank=1; nproc=4; gpus=3,2,1,0 ;;\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(sh, "exec torchrun --nnodes 2 --nproc_per_node \"$nproc\" "
                                      "--node_rank \"$node_rank\" "
                                      "--master_addr \"${MASTER_ADDR:-node1}\" "));
    CU_ASSERT_PTR_NULL(strstr(sh, "NOT EXACT"));
    free(sh);
    pf_export_destroy(&x);
    pf_plan_destroy(&p);

    /* Not realisable: 2 stages x 2 replicas, replica 0 on node0, replica 1 on node1: ranks 0, 2
     * on node0 and 1, 3 on node1. node0 takes ranks 0-1: rank 0 keeps device 0, rank 1
     * (planned 8 on node1) gets node0's other planned device 1; node1 takes ranks 2-3: rank 2
     * (planned 1) gets 8, rank 3 keeps 9. 2 of 4 ranks keep their devices. */
    const int cut[] = {0, 52, 71};
    p = cut_plan(g, 2, 2, 1, cut);
    p->stage_list[0].devices[0] = 0;
    p->stage_list[0].devices[1] = 8;
    p->stage_list[1].devices[0] = 1;
    p->stage_list[1].devices[1] = 9;
    x = pf_export_new(p, g, c, &rc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    CU_ASSERT(!pf_export_exact(x));
    CU_ASSERT_STRING_EQUAL(pf_export_reason(x),
                           "torchrun gives each node one contiguous block of ranks, but the plan "
                           "puts ranks 0, 2 on node0; this layout keeps 2 of 4 ranks on their "
                           "planned devices");
    const int run[] = {0, 1, 8, 9};
    for (int gr = 0; gr < 4; gr++)
        CU_ASSERT_EQUAL(pf_export_layout_rank_device(x, gr), run[gr]);
    check_every_rank(x, p, c);
    sh = written(x, pf_export_write_launch, &wrc, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(strstr(sh, "#    1   0   1   0     0      1  node0/gpu1 (planned "
                                      "node1/gpu0)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(sh, "# NOT EXACT: torchrun gives"));
    free(sh);
    pf_export_destroy(&x);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Brute force: random placements of 2 stages x 2 replicas x 2 ranks on the 16 GPUs. Exact iff
 * every host's ranks are one contiguous block (checked here independently); every rank's layout
 * device is reached through its node and CUDA_VISIBLE_DEVICES; the layout uses each planned
 * device once. */
static void test_layout_brute_force(void)
{
    pf_graph_t *g = small_gpt(4);
    pf_cluster_t *c = two_hosts();
    const int cut[] = {0, 52, 71};
    pf_rng_t rng;
    pf_rng_seed(&rng, 14);
    int nexact = 0;
    for (int trial = 0; trial < 200; trial++) {
        pf_plan_t *p = cut_plan(g, 2, 2, 2, cut);
        int perm[16];
        for (int i = 0; i < 16; i++)
            perm[i] = i;
        for (int i = 15; i > 0; i--) {
            int j = (int)pf_rng_below(&rng, (uint64_t)i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        if (trial % 2) { /* half the trials: one stage per host, GPUs shuffled inside */
            int first_host = trial / 2 % 2, gpu[8];
            for (int i = 0; i < 8; i++)
                gpu[i] = i;
            for (int i = 7; i > 0; i--) {
                int j = (int)pf_rng_below(&rng, (uint64_t)i + 1), t = gpu[i];
                gpu[i] = gpu[j];
                gpu[j] = t;
            }
            for (int i = 0; i < 8; i++)
                perm[i] = (i < 4 ? first_host : 1 - first_host) * 8 + gpu[i];
        }
        for (int i = 0; i < 8; i++)
            p->stage_list[i / 4].devices[i % 4] = perm[i];
        char err[256];
        int rc;
        pf_export_t *x = pf_export_new(p, g, c, &rc, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(x);
        int contiguous = 1;
        for (int h = 0; h < 2; h++) {
            int lo = 99, hi = -1, n = 0;
            for (int gr = 0; gr < 8; gr++)
                if (perm[gr] / 8 == h) { /* rank gr = 4s + 2r + k = index into perm */
                    lo = gr < lo ? gr : lo;
                    hi = gr > hi ? gr : hi;
                    n++;
                }
            contiguous &= n == 0 || hi - lo + 1 == n;
        }
        CU_ASSERT_EQUAL(pf_export_exact(x), contiguous);
        nexact += contiguous;
        check_every_rank(x, p, c);
        int used[16] = {0};
        for (int gr = 0; gr < 8; gr++)
            used[pf_export_layout_rank_device(x, gr)]++;
        for (int gr = 0; gr < 8; gr++)
            CU_ASSERT_EQUAL(used[perm[gr]], 1);
        pf_export_destroy(&x);
        pf_plan_destroy(&p);
    }
    CU_ASSERT(nexact > 10 && nexact < 190); /* both kinds were exercised */
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* 8 layers on 4 stages, T = R = 1: layer i = ops 1 + 17i .. 17 + 17i, final_ln 137, head 138. */
static char *megatron_for(const pf_graph_t *g, const pf_cluster_t *c, const int *cut, int *rc,
                          char *err, size_t errlen)
{
    pf_plan_t *p = cut_plan(g, 4, 1, 1, cut);
    for (int s = 0; s < 4; s++)
        p->stage_list[s].devices[0] = s;
    char *got = NULL;
    pf_export_t *x = pf_export_new(p, g, c, rc, err, errlen);
    if (x)
        got = written(x, pf_export_write_megatron, rc, err, errlen);
    pf_export_destroy(&x);
    pf_plan_destroy(&p);
    return got;
}

static void test_uneven_split(void)
{
    pf_graph_t *g = small_gpt(8);
    pf_cluster_t *c = two_hosts();
    char err[512] = "";
    int rc;
    /* 1, 2, 2, 3 layers: stage 0 = embed + layer 0 (ops 0-17), 1 = layers 1-2 (18-51),
     * 2 = layers 3-4 (52-85), 3 = layers 5-7 + final_ln + head (86-138); the middle is even (2),
     * so first 1 and last 3 are given */
    const int a[] = {0, 18, 52, 86, 139};
    char *got = megatron_for(g, c, a, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT_TRUE(got && strstr(got, "    --num-layers 8\n"
                                              "    # uneven split: Megatron-LM divides the layers "
                                              "of the stages not named here evenly\n"
                                              "    --decoder-first-pipeline-num-layers 1\n"
                                              "    --decoder-last-pipeline-num-layers 3\n"));
    free(got);
    /* 2, 2, 2, 2 is even: no split flags */
    const int even[] = {0, 35, 69, 103, 139};
    got = megatron_for(g, c, even, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT_FALSE(got && strstr(got, "pipeline-num-layers"));
    CU_ASSERT_TRUE(got && strstr(got, "# layers per stage: 2 2 2 2\n"));
    free(got);
    /* 3, 2, 2, 1: middle even, first 3 and last 1 */
    const int b[] = {0, 52, 86, 120, 139};
    got = megatron_for(g, c, b, &rc, err, sizeof err);
    CU_ASSERT_TRUE(got && strstr(got, "--decoder-first-pipeline-num-layers 3\n"
                                              "    --decoder-last-pipeline-num-layers 1\n"));
    free(got);
    /* 2, 2, 3, 1: the middle stages differ, which only Megatron-LM's custom layout says: the
     * embedding, 2 layers | 2 | 3 | 1 and the loss; no first/last flags beside it */
    const int bad[] = {0, 35, 69, 120, 139};
    got = megatron_for(g, c, bad, &rc, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    CU_ASSERT_TRUE(got && strstr(got, "    --pipeline-model-parallel-layout "
                                              "\"Ett|tt|ttt|tL\"\n"));
    CU_ASSERT_FALSE(got && strstr(got, "pipeline-num-layers"));
    free(got);
    /* 1, 1, 1, 5: the first equals the middle, only the last is given (Megatron-LM splits the
     * other 8 - 5 = 3 layers over 3 stages) */
    const int last_only[] = {0, 18, 35, 52, 139};
    got = megatron_for(g, c, last_only, &rc, err, sizeof err);
    CU_ASSERT_TRUE(got && strstr(got, "    --decoder-last-pipeline-num-layers 5\n"));
    CU_ASSERT_FALSE(got && strstr(got, "--decoder-first"));
    free(got);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

static void test_refused(void)
{
    pf_graph_t *g = small_gpt(4);
    pf_cluster_t *c = two_hosts();
    char err[512] = "";
    int rc;
    /* cut inside layer 1: its ln1 .. attn.residual (ops 18-28) in stage 0, ln2 (29) on in 1 */
    const int inside[] = {0, 29, 71};
    pf_plan_t *p = cut_plan(g, 2, 1, 1, inside);
    p->stage_list[0].devices[0] = 0;
    p->stage_list[1].devices[0] = 1;
    CU_ASSERT_PTR_NULL(pf_export_new(p, g, c, &rc, err, sizeof err));
    CU_ASSERT_EQUAL(rc, PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "stage 1 cuts block layers.1: ops layers.1.ln2 .. in stage 1, "
                                "layers.1.ln1 .. in stage 0");
    pf_plan_destroy(&p);
    /* a last stage with only final_ln and head holds no layer */
    const int tail[] = {0, 52, 69, 71};
    p = cut_plan(g, 3, 1, 1, tail);
    for (int s = 0; s < 3; s++)
        p->stage_list[s].devices[0] = s;
    CU_ASSERT_PTR_NULL(pf_export_new(p, g, c, &rc, err, sizeof err));
    CU_ASSERT_STRING_EQUAL(err, "stage 2 holds no block: Megatron-LM and DeepSpeed give every "
                                "pipeline stage whole layers");
    pf_plan_destroy(&p);
    /* unmapped, and a device used twice across tensor-parallel ranks */
    const int two[] = {0, 52, 71};
    p = cut_plan(g, 2, 1, 2, two);
    CU_ASSERT_PTR_NULL(pf_export_new(p, g, c, &rc, err, sizeof err));
    CU_ASSERT_STRING_EQUAL(err, "stage 0 replica 0 tensor-parallel rank 0: no device");
    const int dup[2][2] = {{0, 1}, {2, 1}};
    for (int s = 0; s < 2; s++)
        memcpy(p->stage_list[s].devices, dup[s], sizeof dup[s]);
    CU_ASSERT_PTR_NULL(pf_export_new(p, g, c, &rc, err, sizeof err));
    CU_ASSERT_STRING_EQUAL(err, "stage 1 replica 0 tensor-parallel rank 1: device node0/gpu1 is "
                                "used twice");
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* planfarm export through the binary: files written, stdout, refusals and bad usage. */
/* `export deepspeed` to stdout: one JSON document (jansson parses all of it) with the plan's
 * numbers and no key DeepSpeed does not read; the uneven 3 | 1 split warned on stderr. */
static void check_deepspeed_cli(const char *gpath, const char *cpath, const char *ppath)
{
    char cmd[3000], out[8192];
    snprintf(cmd, sizeof cmd, "%s export deepspeed %s %s %s 2>/dev/null", pf_test_bin(), gpath,
             cpath, ppath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    json_error_t je;
    json_t *root = json_loads(out, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    /* 4 samples x 4 micro-batches x 2 replicas */
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "train_batch_size")), 32);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "train_micro_batch_size_per_gpu")), 4);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "gradient_accumulation_steps")), 4);
    json_t *zero = json_object_get(root, "zero_optimization");
    CU_ASSERT_TRUE(json_is_integer(json_object_get(zero, "stage")));
    CU_ASSERT_EQUAL(json_is_true(json_object_get(json_object_get(root, "bf16"), "enabled")), 1);
    CU_ASSERT_EQUAL(json_object_size(root), 5); /* batch x 3, ZeRO, bf16; no recomputation */
    json_decref(root);
    snprintf(cmd, sizeof cmd, "%s export deepspeed %s %s %s 2>&1 >/dev/null", pf_test_bin(),
             gpath, cpath, ppath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "planfarm export: warning: deepspeed: uneven stages (3,1 "
                                       "blocks)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "stdout holds ds_config.json only"));
}

static void test_cli(void)
{
    pf_graph_t *g = small_gpt(4);
    pf_cluster_t *c = two_hosts();
    const int cut[] = {0, 52, 71}, inside[] = {0, 29, 71};
    char gpath[600], cpath[600], ppath[600], qpath[600], dir[600], err[512];
    const char *tmp = pf_test_tmpdir();
    snprintf(gpath, sizeof gpath, "%s/export-gpt.json", tmp);
    snprintf(cpath, sizeof cpath, "%s/export-cluster.json", tmp);
    snprintf(ppath, sizeof ppath, "%s/export-plan.json", tmp);
    snprintf(qpath, sizeof qpath, "%s/export-cut.json", tmp);
    snprintf(dir, sizeof dir, "%s/export-out", tmp);
    CU_ASSERT_EQUAL(pf_graph_save(g, gpath, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_cluster_save(c, cpath, err, sizeof err), PF_OK);
    pf_plan_t *p = cut_plan(g, 2, 2, 1, cut);
    const int dev[2][2] = {{8, 9}, {0, 1}};
    for (int s = 0; s < 2; s++)
        memcpy(p->stage_list[s].devices, dev[s], sizeof dev[s]);
    CU_ASSERT_EQUAL(pf_plan_save(p, g, c, ppath, err, sizeof err), PF_OK);
    pf_plan_destroy(&p);
    p = cut_plan(g, 2, 1, 1, inside);
    p->stage_list[0].devices[0] = 0;
    p->stage_list[1].devices[0] = 1;
    CU_ASSERT_EQUAL(pf_plan_save(p, g, c, qpath, err, sizeof err), PF_OK);
    pf_plan_destroy(&p);

    struct {
        const char *args, *expect;
        int cut_plan, status;
    } cases[] = {
        {"megatron %s %s %s", "    --pipeline-model-parallel-size 2\n", 0, 0},
        {"megatron %s %s %s -o -", "node1 slots=2\nnode0 slots=2\n", 0, 0},
        {"deepspeed %s %s %s", "\"train_batch_size\": 32,", 0, 0}, /* 4 x 4 micro-batches x 2 */
        {"torchrun %s %s %s", "node1) node_rank=0; nproc=2; gpus=0,1 ;;", 0, 0},
        {"megatron %s %s %s -o %s", "wrote", 0, 0},
        {"megatron %s %s %s", "stage 1 cuts block layers.1", 1, 2},
        {"slurm %s %s %s", "'slurm' is not megatron, deepspeed or torchrun", 0, 2},
        {"megatron %s %s", "expected KIND GRAPH CLUSTER PLAN", 0, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2600], cmd[3000], out[8192];
        snprintf(args, sizeof args, cases[i].args, gpath, cpath,
                 cases[i].cut_plan ? qpath : ppath, dir);
        snprintf(cmd, sizeof cmd, "%s export %s", pf_test_bin(), args);
        int st = pf_test_run(cmd, out, sizeof out);
        if (st != cases[i].status || !strstr(out, cases[i].expect))
            fprintf(stderr, "\n  '%s': status %d, output:\n%s\n", cmd, st, out);
        CU_ASSERT_EQUAL(st, cases[i].status);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, cases[i].expect));
    }
    check_deepspeed_cli(gpath, cpath, ppath);
    /* -o DIR wrote the three files; launch.sh runs: an unknown host is refused by name */
    char cmd[3000], out[4096];
    snprintf(cmd, sizeof cmd, "grep -c . %s/megatron_args.sh %s/hostfile %s/launch.sh && "
             "sh %s/launch.sh nodeX train.py", dir, dir, dir, dir);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "/hostfile:2\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "launch.sh: 'nodeX' is not a host of this plan: node1 "
                                       "node0"));
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Plans whose stages differ (issue 24) are refused as infeasible, every run of stages named; the
 * binary exits 3 with the same words for every kind. */
static void test_mixed_refused(void)
{
    pf_graph_t *g = small_gpt(4);
    pf_cluster_t *c = two_hosts();
    char err[512], ppath[600], gpath[600], cpath[600];
    int rc = PF_OK;
    static const char *const tail = ": Megatron-LM and DeepSpeed run one data- and tensor-parallel "
                                    "degree for every stage; this plan needs a runtime with "
                                    "heterogeneous stages such as PipeDream's or Piper's";
    /* two stages: 2 x 1 on devices 0, 1 and 1 x 2 on 8, 9; N = 16 */
    pf_plan_t *p = even_plan(g);
    int d2[2] = {2, 1}, t2[2] = {1, 2}, dev2[2][2] = {{0, 1}, {8, 9}};
    CU_ASSERT_EQUAL_FATAL(pf_plan_degrees_set(p, d2, t2, 16), PF_OK);
    for (int s = 0; s < 2; s++)
        memcpy(pf_plan_stage_devices(p, s), dev2[s], sizeof dev2[s]);
    CU_ASSERT_PTR_NULL(pf_export_new(p, g, c, &rc, err, sizeof err));
    CU_ASSERT_EQUAL(rc, PF_EINFEASIBLE);
    char want[1024];
    snprintf(want, sizeof want, "stage 0 runs 2 x 1 devices, stage 1 runs 1 x 2%s", tail);
    CU_ASSERT_STRING_EQUAL(err, want);
    /* through the binary: exit 3 for megatron, deepspeed and torchrun alike */
    const char *tmp = pf_test_tmpdir();
    snprintf(gpath, sizeof gpath, "%s/export-mixed-gpt.json", tmp);
    snprintf(cpath, sizeof cpath, "%s/export-mixed-cluster.json", tmp);
    snprintf(ppath, sizeof ppath, "%s/export-mixed-plan.json", tmp);
    CU_ASSERT_EQUAL(pf_graph_save(g, gpath, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_cluster_save(c, cpath, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_plan_save(p, g, c, ppath, err, sizeof err), PF_OK);
    const char *kinds[3] = {"megatron", "deepspeed", "torchrun"};
    for (int i = 0; i < 3; i++) {
        char cmd[3000], out[4096];
        snprintf(cmd, sizeof cmd, "%s export %s %s %s %s", pf_test_bin(), kinds[i], gpath, cpath,
                 ppath);
        CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 3);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    }
    pf_plan_destroy(&p);
    /* four stages, the middle two alike: one run "stages 1-2" */
    const int cut[] = {0, 18, 35, 52, 71};
    p = cut_plan(g, 4, 1, 1, cut);
    int d4[4] = {1, 2, 2, 1}, t4[4] = {2, 1, 1, 2}, at = 0;
    CU_ASSERT_EQUAL_FATAL(pf_plan_degrees_set(p, d4, t4, 8), PF_OK);
    for (int s = 0; s < 4; s++) {
        int *dv = pf_plan_stage_devices(p, s);
        for (int i = 0; i < 2; i++)
            dv[i] = at++;
    }
    CU_ASSERT_PTR_NULL(pf_export_new(p, g, c, &rc, err, sizeof err));
    CU_ASSERT_EQUAL(rc, PF_EINFEASIBLE);
    snprintf(want, sizeof want, "stage 0 runs 1 x 2 devices, stages 1-2 run 2 x 1, stage 3 runs "
             "1 x 2%s", tail);
    CU_ASSERT_STRING_EQUAL(err, want);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

void pf_suite_export(void)
{
    CU_pSuite s = CU_add_suite("export", NULL, NULL);
    CU_add_test(s, "Megatron-LM: every flag of the example plan, by hand", test_megatron_flags);
    CU_add_test(s, "Megatron-LM: a head size apart from hidden / heads is --kv-channels",
                test_megatron_kv_channels);
    CU_add_test(s, "Megatron-LM model flags from the graph's model object; refused shapes",
                test_megatron_model);
    CU_add_test(s, "the block search's choices: micro-batch, interleaving, sequence parallelism, "
                "ZeRO 3", test_block_choices);
    CU_add_test(s, "context and expert parallelism: Megatron-LM sizes, batch, DeepSpeed warnings",
                test_context_expert);
    CU_add_test(s, "DeepSpeed: config, PipelineModule arguments and warnings of the example "
                   "plan; ZeRO 2 with a pipeline refused",
                test_deepspeed_config);
    CU_add_test(s, "rank layout: hosts and GPUs reordered, every rank inverted; not realisable",
                test_rank_layout);
    CU_add_test(s, "rank layout, brute force over random placements", test_layout_brute_force);
    CU_add_test(s, "uneven layer splits: first/last flags, unequal middle refused",
                test_uneven_split);
    CU_add_test(s, "plans that cut a layer or leave a stage without one are refused",
                test_refused);
    CU_add_test(s, "planfarm export through the binary", test_cli);
    CU_add_test(s, "recomputation per stage: the nearest memory-safe flags, said plainly",
                test_stage_recompute);
    CU_add_test(s, "plans whose stages differ: refused as infeasible, the stages named",
                test_mixed_refused);
}
