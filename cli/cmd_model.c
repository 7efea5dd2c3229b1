/* planfarm model gpt|bert|llama|moe|vit|resnet|unet [shape flags] [-o GRAPH]: generate a graph with analytic
 * op costs (planner/inputs/model.h). */
#include "cli/cli.h"
#include "planner/inputs/model.h"
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

/* Integer shape flags: which field they set and which kinds they apply to. */
static const struct {
    const char *name;
    size_t offset;
    unsigned kinds;
} int_flags[] = {
    {"layers", offsetof(pf_model_opts_t, layers), K_TRANSFORMER},
    {"hidden", offsetof(pf_model_opts_t, hidden), K_TRANSFORMER},
    {"heads", offsetof(pf_model_opts_t, heads), K_TRANSFORMER},
    {"seq", offsetof(pf_model_opts_t, seq), K_TEXT},
    {"vocab", offsetof(pf_model_opts_t, vocab), K_TEXT},
    {"ffn", offsetof(pf_model_opts_t, ffn), K_TRANSFORMER},
    {"kv-heads", offsetof(pf_model_opts_t, kv_heads), K_LLAMA},
    {"experts", offsetof(pf_model_opts_t, experts), K_MOE},
    {"top-k", offsetof(pf_model_opts_t, top_k), K_MOE},
    {"patch", offsetof(pf_model_opts_t, patch), K_VIT},
    {"depth", offsetof(pf_model_opts_t, depth), K_RESNET},
    {"image", offsetof(pf_model_opts_t, image), K_RESNET | K_UNET | K_VIT},
    {"classes", offsetof(pf_model_opts_t, classes), K_RESNET | K_UNET | K_VIT},
    {"levels", offsetof(pf_model_opts_t, levels), K_UNET},
    {"channels", offsetof(pf_model_opts_t, channels), K_UNET},
    {"microbatch", offsetof(pf_model_opts_t, microbatch), K_ALL},
};
#define N_INT_FLAGS (int)(sizeof int_flags / sizeof int_flags[0])

/* pf_model_opts_t fields as the planner's messages name them, and their flags. */
static const cli_flag_t model_flags[] = {
    {"layers", "--layers"},     {"hidden", "--hidden"},         {"heads", "--heads"},
    {"seq", "--seq"},           {"vocab", "--vocab"},           {"ffn", "--ffn"},
    {"depth", "--depth"},       {"image", "--image"},           {"classes", "--classes"},
    {"levels", "--levels"},     {"channels", "--channels"},     {"microbatch", "--microbatch"},
    {"tflops", "--tflops"},     {"efficiency", "--efficiency"}, {"hbm_gbps", "--hbm-gbps"},
    {"precision_bytes", "--precision"}, {"kv_heads", "--kv-heads"}, {"experts", "--experts"},
    {"top_k", "--top-k"},       {"patch", "--patch"},           {"preset", "--preset"},
    {NULL, NULL},
};

static const struct {
    const char *name;
    size_t offset;
    double hi;
} dbl_flags[] = {
    {"tflops", offsetof(pf_model_opts_t, tflops), 1e9},
    {"efficiency", offsetof(pf_model_opts_t, efficiency), 1},
    {"hbm-gbps", offsetof(pf_model_opts_t, hbm_gbps), 1e12},
};
#define N_DBL_FLAGS (int)(sizeof dbl_flags / sizeof dbl_flags[0])

enum { OPT_INT = 256, OPT_DBL = 512, OPT_PRECISION = 768, OPT_NAME, OPT_PRESET };

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
            "                  --layers, --hidden, --heads, --ffn as for gpt\n"
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
            "  --name NAME     graph name (default from the kind and the shape)\n"
            "  -o, --output GRAPH  output file (default or -: stdout)\n\n"
            "Op time: FLOPs / (T x 1e12 x E) for linear, matmul and conv; a roofline\n"
            "max(that, bytes moved / G) for the memory-bound ops (norms, softmax, activations,\n"
            "dropout, adds, pooling, embedding, MoE dispatch and combine). Saved activations of\n"
            "a transformer layer: Korthikanti et al. 2022, sbh(34 + 5as/h) for gpt and bert.\n"
            "Exit status 2 on an impossible shape.\n",
            g.layers, b.layers, g.hidden, b.hidden, g.heads, b.heads, g.seq, b.seq, g.vocab,
            b.vocab, m.experts, m.top_k, m.layers, m.hidden, m.heads, m.kv_heads, m.ffn, m.seq,
            m.vocab, r.depth, r.image, r.classes, u.levels, u.channels, u.image, u.classes,
            g.microbatch, b.microbatch, r.microbatch, u.microbatch, g.tflops, g.efficiency,
            g.hbm_gbps);
}

int cmd_model(int argc, char **argv)
{
    struct option opts[N_INT_FLAGS + N_DBL_FLAGS + 6];
    int n = 0;
    for (int i = 0; i < N_INT_FLAGS; i++)
        opts[n++] = (struct option){int_flags[i].name, required_argument, 0, OPT_INT + i};
    for (int i = 0; i < N_DBL_FLAGS; i++)
        opts[n++] = (struct option){dbl_flags[i].name, required_argument, 0, OPT_DBL + i};
    opts[n++] = (struct option){"precision", required_argument, 0, OPT_PRECISION};
    opts[n++] = (struct option){"name", required_argument, 0, OPT_NAME};
    opts[n++] = (struct option){"preset", required_argument, 0, OPT_PRESET};
    opts[n++] = (struct option){"output", required_argument, 0, 'o'};
    opts[n++] = (struct option){"help", no_argument, 0, 'h'};
    opts[n] = (struct option){0, 0, 0, 0};

    /* The kind may come after the flags (getopt permutes), so keep values until it is known. */
    long long int_val[N_INT_FLAGS];
    double dbl_val[N_DBL_FLAGS];
    int int_given[N_INT_FLAGS] = {0}, dbl_given[N_DBL_FLAGS] = {0};
    int precision_bytes = 0;
    const char *out = NULL, *name = NULL, *preset = NULL;
    char err[CLI_ERRLEN] = "";
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        if (c >= OPT_INT && c < OPT_INT + N_INT_FLAGS) {
            int i = c - OPT_INT;
            char flag[32];
            snprintf(flag, sizeof flag, "--%s", int_flags[i].name);
            if (cli_int("model", flag, optarg, 1, INT_MAX, &int_val[i]))
                return CLI_USAGE;
            int_given[i] = 1;
        } else if (c >= OPT_DBL && c < OPT_DBL + N_DBL_FLAGS) {
            int i = c - OPT_DBL;
            char flag[32];
            snprintf(flag, sizeof flag, "--%s", dbl_flags[i].name);
            if (cli_double("model", flag, optarg, 0, dbl_flags[i].hi, &dbl_val[i]))
                return CLI_USAGE;
            dbl_given[i] = 1;
        } else if (c == OPT_PRECISION) {
            if (!strcmp(optarg, "fp16") || !strcmp(optarg, "bf16"))
                precision_bytes = 2;
            else if (!strcmp(optarg, "fp32"))
                precision_bytes = 4;
            else
                return cli_usage_error("model", "--precision: '%s' is not fp16, bf16 or fp32",
                                       optarg);
        } else if (c == OPT_NAME) {
            if (!*optarg)
                return cli_usage_error("model", "--name: empty");
            name = optarg;
        } else if (c == OPT_PRESET) {
            preset = optarg;
        } else if (c == 'o') {
            out = optarg;
        } else if (c == 'h') {
            help(stdout);
            return CLI_OK;
        } else {
            return cli_usage_error("model", "unknown option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("model", "expected one model kind: gpt, bert, llama, moe, vit, "
                                        "resnet or unet");
    pf_model_kind_t kind;
    if (pf_model_parse_kind(argv[optind], &kind) != PF_OK)
        return cli_usage_error("model",
                               "'%s' is not a model kind (gpt, bert, llama, moe, vit, resnet, "
                               "unet)",
                               argv[optind]);

    pf_model_opts_t o;
    pf_model_opts_init(&o, kind);
    /* The preset first: explicit shape flags change it. */
    if (preset && pf_model_apply_preset(&o, preset, err, sizeof err) != PF_OK) {
        cli_flag_names(err, sizeof err, model_flags);
        return cli_usage_error("model", "%s", err);
    }
    for (int i = 0; i < N_INT_FLAGS; i++) {
        if (!int_given[i])
            continue;
        if (!(int_flags[i].kinds & KIND_BIT(kind)))
            return cli_usage_error("model", "--%s does not apply to %s", int_flags[i].name,
                                   pf_model_kind_name(kind));
        *(int *)((char *)&o + int_flags[i].offset) = (int)int_val[i];
    }
    for (int i = 0; i < N_DBL_FLAGS; i++)
        if (dbl_given[i])
            *(double *)((char *)&o + dbl_flags[i].offset) = dbl_val[i];
    if (precision_bytes)
        o.precision_bytes = precision_bytes;
    o.name = name;

    pf_graph_t *g;
    int rc = pf_model_build(&o, &g, err, sizeof err);
    if (rc != PF_OK) {
        cli_flag_names(err, sizeof err, model_flags);
        return cli_report("model", rc, err);
    }
    rc = pf_graph_save(g, out, err, sizeof err);
    if (rc == PF_OK && out && strcmp(out, "-"))
        fprintf(stderr, "planfarm model: wrote %s (%d ops, %d edges) to %s\n", pf_graph_name(g),
                pf_graph_nops(g), pf_graph_nedges(g), out);
    pf_graph_destroy(&g);
    return rc == PF_OK ? CLI_OK : cli_report("model", rc, err);
}
