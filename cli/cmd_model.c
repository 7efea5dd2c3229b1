/* planfarm model gpt|bert|llama|moe|vit|resnet|unet [shape flags] [-o GRAPH]: generate a graph with analytic
 * op costs (planner/inputs/model.h). */
#include "cli/cli.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/price.h"
#include "planner/ir/devmodel.h"
#include "planner/core/util.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define KIND_BIT(k) (1u << (k))
#define K_TEXT                                                                                   \
    (KIND_BIT(PF_MODEL_GPT) | KIND_BIT(PF_MODEL_BERT) | KIND_BIT(PF_MODEL_LLAMA) |              \
     KIND_BIT(PF_MODEL_MOE))
#define K_LLAMA (KIND_BIT(PF_MODEL_LLAMA) | KIND_BIT(PF_MODEL_MOE))
#define K_MOE KIND_BIT(PF_MODEL_MOE)
#define K_VIT KIND_BIT(PF_MODEL_VIT)
#define K_TRANSFORMER (K_TEXT | K_VIT)
#define K_RESNET KIND_BIT(PF_MODEL_RESNET)
#define K_UNET KIND_BIT(PF_MODEL_UNET)
#define K_ALL (K_TRANSFORMER | K_RESNET | K_UNET)

/* The shape flags, then the cost flags: each stores into a pf_model_opts_t of given values that
 * the kind's defaults take over once the kind is known (getopt permutes: it may come last). */
#define M(field) offsetof(pf_model_opts_t, field)
#define SHAPE(name, field) {name, 0, CLI_OPT_INT, .offset = M(field), .lo = 1, .hi = INT_MAX}
static const cli_option_t value_options[] = {
    SHAPE("layers", layers),         SHAPE("hidden", hidden),   SHAPE("heads", heads),
    SHAPE("seq", seq),               SHAPE("vocab", vocab),     SHAPE("ffn", ffn),
    SHAPE("kv-heads", kv_heads),     SHAPE("experts", experts), SHAPE("top-k", top_k),
    SHAPE("patch", patch),           SHAPE("depth", depth),     SHAPE("image", image),
    SHAPE("classes", classes),       SHAPE("levels", levels),   SHAPE("channels", channels),
    SHAPE("microbatch", microbatch), SHAPE("head-dim", head_dim),
    {"tflops", 0, CLI_OPT_DOUBLE, .offset = M(tflops), .dlo = 0, .dhi = 1e9},
    {"efficiency", 0, CLI_OPT_DOUBLE, .offset = M(efficiency), .dlo = 0, .dhi = 1},
    {"hbm-gbps", 0, CLI_OPT_DOUBLE, .offset = M(hbm_gbps), .dlo = 0, .dhi = 1e12},
    CLI_OPTION_END,
};
#undef SHAPE
#undef M
#define N_SHAPE 17
#define N_VALUES (N_SHAPE + 3)

/* The kinds each shape flag applies to, row by row. */
static const unsigned shape_kinds[N_SHAPE] = {
    K_TRANSFORMER, K_TRANSFORMER, K_TRANSFORMER, K_TEXT, K_TEXT,
    K_TRANSFORMER, K_LLAMA,       K_MOE,         K_MOE,  K_VIT,
    K_RESNET,      K_RESNET | K_UNET | K_VIT,    K_RESNET | K_UNET | K_VIT,
    K_UNET,        K_UNET,        K_ALL,         K_TRANSFORMER,
};

/* pf_model_opts_t fields as the planner's messages name them, and their flags. */
static const cli_flag_t model_flags[] = {
    {"layers", "--layers"},     {"hidden", "--hidden"},         {"heads", "--heads"},
    {"seq", "--seq"},           {"vocab", "--vocab"},           {"ffn", "--ffn"},
    {"depth", "--depth"},       {"image", "--image"},           {"classes", "--classes"},
    {"levels", "--levels"},     {"channels", "--channels"},     {"microbatch", "--microbatch"},
    {"tflops", "--tflops"},     {"efficiency", "--efficiency"}, {"hbm_gbps", "--hbm-gbps"},
    {"precision_bytes", "--precision"}, {"kv_heads", "--kv-heads"}, {"experts", "--experts"},
    {"top_k", "--top-k"},       {"patch", "--patch"},           {"preset", "--preset"},
    {"head_dim", "--head-dim"},
    {NULL, NULL},
};

static void help(FILE *f)
{
    pf_model_opts_t g, b, r, u, m;
    pf_model_opts_init(&g, PF_MODEL_GPT);
    pf_model_opts_init(&b, PF_MODEL_BERT);
    pf_model_opts_init(&r, PF_MODEL_RESNET);
    pf_model_opts_init(&u, PF_MODEL_UNET);
    pf_model_opts_init(&m, PF_MODEL_MOE);
    fprintf(f,
            "usage: planfarm model gpt|bert|llama|moe|vit|resnet|unet [shape flags] [-o GRAPH]\n\n"
            "Generates an operator graph with analytic costs (FLOPs from the shapes; backward =\n"
            "2 x forward) and writes it as JSON (-o -, or no -o: stdout).\n\n"
            "gpt, bert (defaults: gpt = GPT-2 XL, bert = BERT-Large):\n"
            "  --layers N      transformer blocks (gpt %d, bert %d)\n"
            "  --hidden H      hidden size (gpt %d, bert %d)\n"
            "  --heads A       attention heads; must divide H (gpt %d, bert %d)\n"
            "  --head-dim D    each head's size (default H / A); with it A need not divide\n"
            "                  H: q, k, v are A x D wide (Megatron-LM's --kv-channels)\n"
            "  --seq S         sequence length (gpt %d, bert %d)\n"
            "  --vocab V       vocabulary (gpt %d, bert %d)\n"
            "  --ffn F         MLP inner size (default 4 x H)\n"
            "llama (RMSNorm, rotary, grouped-query attention, SwiGLU, no biases):\n"
            "  --preset P      7b (default), 13b, 70b (Llama 2) or 405b (Llama 3.1); the flags\n"
            "                  above and --kv-heads then change the preset's shape\n"
            "  --kv-heads K    key/value heads; must divide A (default A: no grouping)\n"
            "moe (llama blocks whose MLP is top-k routed SwiGLU experts; default Mixtral 8x7B):\n"
            "  --experts E     experts per layer (default %d)\n"
            "  --top-k K       experts per token (default %d); each expert gets\n"
            "                  microbatch x seq x K / E tokens, which must be a whole number\n"
            "  and the llama flags but --preset (defaults %d layers, hidden %d, %d heads,\n"
            "  %d kv heads, ffn %d per expert, seq %d, vocab %d)\n"
            "vit (patch embedding + the bert encoder block + a class-token head):\n"
            "  --preset P      b (default, ViT-B/16), l (ViT-L/16) or h (ViT-H/14)\n"
            "  --image N, --patch P, --classes C  (default 224, preset's patch, 1000);\n"
            "                  --layers, --hidden, --heads, --head-dim, --ffn as for gpt\n"
            "resnet:\n"
            "  --depth D       18, 34, 50, 101 or 152 (default %d)\n"
            "  --image N       image side (default %d)\n"
            "  --classes C     classes (default %d)\n"
            "unet:\n"
            "  --levels L      encoder levels, each with a long skip to its decoder (default %d)\n"
            "  --channels C    channels of level 0, doubled per level (default %d)\n"
            "  --image N       image side, divisible by 2^L (default %d)\n"
            "  --classes C     output channels (default %d)\n"
            "every kind:\n"
            "  --microbatch B  samples per micro-batch (gpt %d, bert %d, llama and moe 1, vit 32,\n"
            "                  resnet %d, unet %d)\n"
            "  --precision P   fp16, bf16 (2 bytes) or fp32 (4 bytes) (default fp16)\n"
            "  --tflops T      device peak TFLOPs (default %g, V100-like)\n"
            "  --efficiency E  fraction of the peak a kernel reaches, in (0, 1] (default %g)\n"
            "  --hbm-gbps G    memory bandwidth for memory-bound ops, GB/s (default %g)\n"
            "  --device D      price every op that carries its work (FLOPs, bytes, GEMM\n"
            "                  shape) on device model D: a preset (planfarm devices) or a\n"
            "                  model file (planfarm calibrate), at --precision\n"
            "  --name NAME     graph name (default from the kind and the shape)\n"
            "  -o, --output GRAPH  output file (default or -: stdout)\n\n"
            "Op time: FLOPs / (T x 1e12 x E) for linear, matmul and conv; a roofline\n"
            "max(that, bytes moved / G) for the memory-bound ops (norms, softmax, activations,\n"
            "dropout, adds, pooling, embedding, MoE dispatch and combine). Saved activations of\n"
            "a transformer layer: Korthikanti et al. 2022, sbh(34 + 5as/h) for gpt and bert\n"
            "(without --head-dim).\n"
            "Exit status 2 on an impossible shape.\n",
            g.layers, b.layers, g.hidden, b.hidden, g.heads, b.heads, g.seq, b.seq, g.vocab,
            b.vocab, m.experts, m.top_k, m.layers, m.hidden, m.heads, m.kv_heads, m.ffn, m.seq,
            m.vocab, r.depth, r.image, r.classes, u.levels, u.channels, u.image, u.classes,
            g.microbatch, b.microbatch, r.microbatch, u.microbatch, g.tflops, g.efficiency,
            g.hbm_gbps);
}

/* The flags that are not shape or cost values. */
typedef struct {
    int precision_bytes; /* 0: the kind's */
    int prec;            /* the device model's precision (pf_prec_t; 0 = bf16) */
    const char *out, *name, *preset, *device;
} model_args_t;

static int parse_precision(const char *cmd, const char *arg, void *base)
{
    model_args_t *a = base;
    a->prec = pf_devmodel_prec_parse(arg);
    if (!strcmp(arg, "fp16") || !strcmp(arg, "bf16"))
        a->precision_bytes = 2;
    else if (!strcmp(arg, "fp32"))
        a->precision_bytes = 4;
    else {
        cli_usage_error(cmd, "--precision: '%s' is not fp16, bf16 or fp32", arg);
        return -1;
    }
    return 0;
}

static int parse_name(const char *cmd, const char *arg, void *base)
{
    if (!*arg) {
        cli_usage_error(cmd, "--name: empty");
        return -1;
    }
    ((model_args_t *)base)->name = arg;
    return 0;
}

#define A(field) offsetof(model_args_t, field)
static const cli_option_t model_options[] = {
    {"precision", 0, CLI_OPT_CUSTOM, .parse = parse_precision},
    {"name", 0, CLI_OPT_CUSTOM, .parse = parse_name},
    {"preset", 0, CLI_OPT_STRING, .offset = A(preset)},
    {"device", 0, CLI_OPT_STRING, .offset = A(device)},
    {"output", 'o', CLI_OPT_STRING, .offset = A(out)},
    CLI_OPTION_HELP,
    CLI_OPTION_END,
};
#undef A

/* The kind's defaults, its preset, then the values given (each shape flag must apply to the
 * kind); CLI_OK or the usage status. */
static int model_opts(pf_model_kind_t kind, const pf_model_opts_t *vals, const bool *given,
                      const model_args_t *a, pf_model_opts_t *o)
{
    char err[CLI_ERRLEN] = "";
    pf_model_opts_init(o, kind);
    if (a->preset && pf_model_apply_preset(o, a->preset, err, sizeof err) != PF_OK) {
        cli_flag_names(err, sizeof err, model_flags);
        return cli_usage_error("model", "%s", err);
    }
    for (int i = 0; i < N_VALUES; i++) {
        size_t at = value_options[i].offset;
        if (!given[i])
            continue;
        if (i < N_SHAPE && !(shape_kinds[i] & KIND_BIT(kind)))
            return cli_usage_error("model", "--%s does not apply to %s", value_options[i].name,
                                   pf_model_kind_name(kind));
        if (i < N_SHAPE)
            *(int *)((char *)o + at) = *(const int *)((const char *)vals + at);
        else
            *(double *)((char *)o + at) = *(const double *)((const char *)vals + at);
    }
    if (a->precision_bytes)
        o->precision_bytes = a->precision_bytes;
    o->name = a->name;
    return CLI_OK;
}

/* Re-price *g on --device (ops without work keep the analytic times). */
static int price(pf_graph_t **g, const model_args_t *a, char *err, size_t errlen)
{
    pf_devmodel_t *dm = NULL;
    pf_graph_t *h = NULL;
    int n = 0, rc = pf_devmodel_resolve(a->device, &dm, err, errlen);
    if (rc != PF_OK) {
        pf_err_prefix(err, errlen, "--device");
        return rc;
    }
    rc = pf_price_graph(*g, dm, a->prec < 0 ? PF_PREC_BF16 : (pf_prec_t)a->prec, &h, &n, err,
                        errlen);
    if (rc == PF_OK) {
        fprintf(stderr, "planfarm model: priced %d of %d ops on %s\n", n, pf_graph_nops(h),
                pf_devmodel_spec(dm)->name);
        pf_graph_destroy(g);
        *g = h;
    }
    pf_devmodel_destroy(&dm);
    return rc;
}

int cmd_model(int argc, char **argv)
{
    pf_model_opts_t vals = {0}, o;
    bool given[N_VALUES] = {false};
    model_args_t a = {0};
    const cli_options_t spec = {"model", help, NULL, NULL,
                                {{value_options, &vals, given},
                                 {model_options, &a, NULL},
                                 {NULL, NULL, NULL}}};
    int status, first = cli_options_parse(&spec, argc, argv, &status);
    if (first < 0)
        return status;
    if (argc - first != 1)
        return cli_usage_error("model", "expected one model kind: gpt, bert, llama, moe, vit, "
                                        "resnet or unet");
    pf_model_kind_t kind;
    if (pf_model_parse_kind(argv[first], &kind) != PF_OK)
        return cli_usage_error("model",
                               "'%s' is not a model kind (gpt, bert, llama, moe, vit, resnet, "
                               "unet)",
                               argv[first]);
    int rc = model_opts(kind, &vals, given, &a, &o);
    if (rc != CLI_OK)
        return rc;
    char err[CLI_ERRLEN] = "";
    pf_graph_t *g;
    if ((rc = pf_model_build(&o, &g, err, sizeof err)) != PF_OK) {
        cli_flag_names(err, sizeof err, model_flags);
        return cli_report("model", rc, err);
    }
    if (a.device && (rc = price(&g, &a, err, sizeof err)) != PF_OK) {
        pf_graph_destroy(&g);
        return cli_report("model", rc, err);
    }
    rc = pf_graph_save(g, a.out, err, sizeof err);
    if (rc == PF_OK && a.out && strcmp(a.out, "-"))
        fprintf(stderr, "planfarm model: wrote %s (%d ops, %d edges) to %s\n", pf_graph_name(g),
                pf_graph_nops(g), pf_graph_nedges(g), a.out);
    pf_graph_destroy(&g);
    return rc == PF_OK ? CLI_OK : cli_report("model", rc, err);
}
