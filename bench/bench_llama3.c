/* Llama 3 405B's published pre-training configurations against planfarm (issue 22).
 *
 * llama3_405b.json ($PF_SHARED/data/megatron, default ../shared: Llama Team 2024, Tables 3 and 4):
 * the model (126 layers, hidden 16384, ffn 53248, 128 heads, 8 KV heads, vocab 128256) and the
 * configurations of 8,192 and 16,384 H100 at 16M tokens per step (sequences of 8192). For each
 * row of context parallelism 1: the published (t, p, d) planned with every dimension fixed
 * (whole layers per stage, 1F1B, micro-batch 1, the distributed optimizer (ZeRO-1), selective
 * recomputation, else full where selective does not fit), and the same model,
 * cluster and batch planned freely by the block-level search. Rates are model FLOPs (the
 * graph's forward and backward work, no recomputation) per second per GPU, as the paper's
 * TFLOP/s and MFU count them, beside the published figure. DGX-H100 hosts (hierarchical
 * cluster), ops priced on the h100-sxm device model. PF_BENCH_LLAMA3_MAX_GPUS (default 16384)
 * skips larger rows; PF_BENCH_LLAMA3_CP=1 adds the context-parallel row (seq 131,072: the
 * published (t, cp, p, d) fixed, and the free search with context parallelism), =only runs it
 * alone; no figure of the file is in this one. */
#include "bench/farm.h"
#include "planner/core/util.h"
#include "planner/inputs/model.h"
#include "planner/inputs/topology.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int layers, hidden, ffn, heads, kv_heads, vocab, seq;
} shape_t;

typedef struct {
    int gpus, t, cp, p, d, seq;
    double tokens, tflops;
} config_t;

static int build(const shape_t *m, int gpus, pf_graph_t **g, pf_cluster_t **c)
{
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_LLAMA);
    mo.layers = m->layers, mo.hidden = m->hidden, mo.ffn = m->ffn, mo.heads = m->heads;
    mo.kv_heads = m->kv_heads, mo.vocab = m->vocab, mo.seq = m->seq, mo.microbatch = 1;
    mo.precision_bytes = 2;
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX_H100);
    to.machines = gpus / 8;
    return pf_bench_build("llama3", &mo, "h100-sxm", PF_PREC_BF16, &to, g, c);
}

/* Model FLOPs of one sample: the graph's forward and backward work. */
static double sample_flops(const pf_graph_t *g)
{
    double f = 0;
    for (int v = 0; v < pf_graph_nops(g); v++)
        f += pf_graph_op(g, v)->work.fwd_flops + pf_graph_op(g, v)->work.bwd_flops;
    return f / pf_graph_microbatch(g);
}

/* One plan: TFLOP/s per GPU (0 when none, the reason in shape). */
static double plan(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                   double samples, double *wall_s, char *shape, size_t len)
{
    double step_ms;
    if (pf_bench_plan_step(g, c, o, &step_ms, wall_s, shape, len))
        return 0;
    return sample_flops(g) * samples / (step_ms * 1e-3) / pf_cluster_ndevices(c) / 1e12;
}

static void row(const shape_t *m, const config_t *cf)
{
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    if (build(m, cf->gpus, &g, &c))
        return;
    /* "about 16M" tokens: the sequences rounded up to a multiple of d x p, so that each replica's
     * micro-batches are a multiple of p as Megatron-LM's interleaving asks (2048 sequences of
     * 8192 at d 64 and 128, the paper's 16M) */
    long long unit = (long long)cf->d * cf->p, seqs = (long long)(cf->tokens / cf->seq);
    double samples = (double)((seqs + unit - 1) / unit * unit), wall, fwall, rwall;
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.stages = cf->p, o.tp = cf->t, o.replicas = cf->d;
    o.global_batch = (long long)samples;
    o.layer_aligned = 1;
    o.train.zero = 1; /* Megatron's distributed optimizer */
    /* PF_BENCH_LLAMA3_SP=1: with sequence parallelism (planner/tp/seqpar.h), as Megatron-LM
     * runs tensor parallelism with it */
    o.train.sequence_parallel = getenv("PF_BENCH_LLAMA3_SP") && atoi(getenv("PF_BENCH_LLAMA3_SP"));
    o.schedules = 1u << PF_SCHEDULE_1F1B;
    char fixed_shape[160], free_shape[160];
    double tf = 0;
    for (int rc = PF_RECOMPUTE_SELECTIVE; tf == 0 && rc <= PF_RECOMPUTE_FULL; rc++) {
        o.train.recompute = (pf_training_recompute_t)rc; /* the lighter that fits */
        tf = plan(g, c, &o, (double)o.global_batch, &wall, fixed_shape, sizeof fixed_shape);
    }
    /* as Meta ran it: (t, cp, p, d), micro-batch 1, sequence parallelism, the distributed optimizer,
     * interleaved with the first and last stage one layer fewer (the block search's uneven
     * interleaving); recomputation, the chunks per stage and TP overlap searched */
    char run_shape[160];
    pf_search_opts_init(&o);
    o.global_batch = (long long)samples;
    o.block_search = 1;
    o.layer_aligned = 1;
    o.stages = cf->p, o.tp = cf->t, o.microbatch_size = 1, o.sequence_parallel = 1;
    o.context_parallel = cf->cp > 0 ? cf->cp : 1, o.expert_parallel = 1; /* as published */
    o.train.zero = 1, o.zero_auto = 0;
    double rtf = plan(g, c, &o, (double)o.global_batch, &rwall, run_shape, sizeof run_shape);
    pf_search_opts_init(&o);
    o.global_batch = (long long)samples;
    o.block_search = 1;
    o.layer_aligned = 1;
    double ftf = plan(g, c, &o, (double)o.global_batch, &fwall, free_shape, sizeof free_shape);
    printf("%6d %3d %3d %4d %9.0f | fixed %6.1f (%.3f) %.1fs %s | as run %6.1f (%.3f) %.1fs %s "
           "| free %6.1f (%.3f of as run) %.1fs %s\n", cf->gpus, cf->t, cf->p, cf->d,
           cf->tflops, tf, tf / cf->tflops, wall, fixed_shape, rtf, rtf / cf->tflops, rwall,
           run_shape, ftf, rtf > 0 ? ftf / rtf : 0, fwall, free_shape);
    fflush(stdout);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
}

/* A row of context parallelism (the 131,072-token one): the published (t, cp, p, d) with every
 * dimension fixed through the block search (micro-batch 1, no interleaving, sequence
 * parallelism, ZeRO 1, 1F1B, selective recomputation else full), then the free search, context
 * parallelism included. The global batch is whole sequences, a multiple of d. */
static void row_cp(const shape_t *m0, const config_t *cf)
{
    shape_t m = *m0;
    m.seq = cf->seq;
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    if (build(&m, cf->gpus, &g, &c))
        return;
    long long seqs = (long long)(cf->tokens / cf->seq), batch = seqs - seqs % cf->d;
    double wall = 0, fwall, tf = 0;
    char fixed_shape[200], free_shape[200];
    pf_search_opts_t o;
    for (int rc = PF_RECOMPUTE_SELECTIVE; tf == 0 && rc <= PF_RECOMPUTE_FULL; rc++) {
        pf_search_opts_init(&o);
        o.global_batch = batch, o.layer_aligned = 1, o.block_search = 1;
        o.stages = cf->p, o.tp = cf->t, o.context_parallel = cf->cp, o.expert_parallel = 1;
        o.microbatch_size = 1, o.virtual_stages = 1, o.sequence_parallel = 1;
        o.zero_auto = 0, o.train.zero = 1, o.recompute_auto = 0;
        o.train.recompute = (pf_training_recompute_t)rc;
        o.schedules = 1u << PF_SCHEDULE_1F1B;
        tf = plan(g, c, &o, (double)batch, &wall, fixed_shape, sizeof fixed_shape);
    }
    pf_search_opts_init(&o);
    o.global_batch = batch, o.layer_aligned = 1, o.block_search = 1;
    double ftf = plan(g, c, &o, (double)batch, &fwall, free_shape, sizeof free_shape);
    printf("%6d %3d %3d %4d %9.0f | seq %d, %lld sequences, published cp %d | fixed %6.1f "
           "(%.3f) %.1fs %s | free %6.1f (%.3f of fixed) %.1fs %s\n", cf->gpus, cf->t, cf->p,
           cf->d, cf->tflops, cf->seq, batch, cf->cp, tf, tf / cf->tflops, wall, fixed_shape, ftf,
           tf > 0 ? ftf / tf : 0, fwall, free_shape);
    fflush(stdout);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
}

int pf_bench_llama3(void)
{
    json_t *root = pf_bench_shared_json("data/megatron/llama3_405b.json"), *cfg;
    if (!root)
        return 0;
    shape_t m;
    if (json_unpack(json_object_get(root, "model"), "{s:i, s:i, s:i, s:i, s:i, s:i, s:i}",
                    "layers", &m.layers, "hidden", &m.hidden, "ffn_hidden", &m.ffn, "heads",
                    &m.heads, "kv_heads", &m.kv_heads, "vocab", &m.vocab, "seq", &m.seq)) {
        printf("llama3_405b.json: model: unreadable\n");
        json_decref(root);
        return 1;
    }
    int max_gpus = getenv("PF_BENCH_LLAMA3_MAX_GPUS") ? atoi(getenv("PF_BENCH_LLAMA3_MAX_GPUS"))
                                                      : 16384;
    printf("Llama 3 405B on DGX-H100 (h100-sxm prices), 16M tokens per step; model TFLOP/s per "
           "GPU from the simulated step\n%6s %3s %3s %4s %9s | %s\n", "GPUs", "t", "p", "d",
           "published", "planfarm: published config fixed, 1F1B (ratio), plan s | as Meta ran it: "
           "interleaved, uneven ends (ratio) | free search");
    size_t i;
    json_array_foreach(json_object_get(root, "configurations"), i, cfg) {
        config_t cf;
        if (json_unpack(cfg, "{s:i, s:i, s:i, s:i, s:i, s:i, s:F, s:F}", "gpus", &cf.gpus,
                        "tensor_parallel", &cf.t, "context_parallel", &cf.cp,
                        "pipeline_parallel", &cf.p, "data_parallel", &cf.d, "seq", &cf.seq,
                        "tokens_per_batch", &cf.tokens, "tflops_per_gpu", &cf.tflops)) {
            printf("configurations[%zu]: unreadable\n", i);
            continue;
        }
        if (cf.gpus > max_gpus) {
            printf("%6d: skipped (PF_BENCH_LLAMA3_MAX_GPUS %d)\n", cf.gpus, max_gpus);
            continue;
        }
        const char *on = getenv("PF_BENCH_LLAMA3_CP");
        int only = on && !strcmp(on, "only");
        if (cf.cp != 1 || cf.seq != m.seq) {
            if (on && (only || atoi(on)))
                row_cp(&m, &cf);
            else
                printf("%6d: context parallelism %d at sequence %d: set PF_BENCH_LLAMA3_CP=1 "
                       "(about a minute)\n", cf.gpus, cf.cp, cf.seq);
            continue;
        }
        if (!only) /* PF_BENCH_LLAMA3_CP=only: the context-parallel rows alone */
            row(&m, &cf);
    }
    json_decref(root);
    return 0;
}
