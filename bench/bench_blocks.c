/* The block-level search (issue 22): GPT-3 175B (96 layers, hidden 12288, 96 heads, seq 2048,
 * vocab 51200: the shape [Korthikanti22] Table 3 runs at t 8, p 8) on 64 to 3072 A100 (DGX A100 machines) at global
 * batch 1536: the pruned enumeration's wall time, candidates evaluated and skipped, its best K
 * by the analytic step (blockcost.h priced by the a100-80g device model and the collective
 * model; PF_BENCH_BLOCKS_ROOFLINE=1 for the roofline), and Megatron-LM's (t 8, p 8, d 1)
 * configuration on 64 GPUs priced by the same model, with the best's step over it.
 * Memory: 90% of a device (the search's default --mem-headroom). Target: under 1 s per row on
 * 2 cores. PF_BENCH_BLOCKS_K (default 5) sets K. */
#include "bench/farm.h"
#include "planner/core/util.h"
#include "planner/inputs/model.h"
#include "planner/inputs/topology.h"
#include "planner/partition/blockenum.h"

#include <stdio.h>
#include <stdlib.h>

#define DEVICE "a100-80g" /* the device model's preset; PF_BENCH_BLOCKS_ROOFLINE=1: the roofline */

static int build(int gpus, pf_graph_t **g, pf_cluster_t **c)
{
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 96, mo.hidden = 12288, mo.heads = 96, mo.seq = 2048, mo.vocab = 51200;
    mo.microbatch = 1, mo.precision_bytes = 2;
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX_A100);
    to.machines = gpus / 8;
    /* the graph as generated: the block-level search prices blocks itself (blockcost.h) */
    return pf_bench_build("blocks", &mo, NULL, PF_PREC_BF16, &to, g, c);
}

static void print_item(int rank, const pf_blockenum_item_t *it)
{
    char d[128];
    pf_blockenum_describe(&it->cand, d, sizeof d);
    printf("    %2d  %-54s step %9.1f ms  m %4d  mem %5.1f GB  bubble+dp+opt %7.1f ms\n", rank, d,
           it->eval.step_ms, it->eval.microbatches, it->eval.mem_max_bytes / 1e9,
           it->eval.step_ms - it->eval.microbatches * it->eval.stage_max_ms);
}

/* Megatron-LM's published choice for 64 GPUs, the rest searched (b, v, recompute, sp, ZeRO). */
static void megatron_row(const pf_blockcost_problem_t *pr, const pf_blockenum_item_t *best)
{
    pf_blockenum_fix_t f;
    pf_blockenum_item_t out[3];
    int n;
    char err[256];
    pf_blockenum_fix_init(&f);
    f.t = 8, f.p = 8, f.b = 1, f.v = 1, f.recompute = PF_RECOMPUTE_FULL, f.sp = 0, f.zero = 0;
    if (pf_blockenum_run(pr, &f, 1, 1, out, &n, NULL, err, sizeof err) == PF_OK) {
        printf("    Megatron-LM (t 8, p 8, d 1, b 1, full recomputation, no sp, 1F1B):\n");
        print_item(0, &out[0]);
        printf("    best / Megatron-LM: %.3f\n", best->eval.step_ms / out[0].eval.step_ms);
    } else
        printf("    Megatron-LM's configuration: %s\n", err);
    pf_blockenum_fix_init(&f);
    f.t = 8, f.p = 8;
    if (pf_blockenum_run(pr, &f, 1, 1, out, &n, NULL, err, sizeof err) == PF_OK) {
        printf("    (t 8, p 8) with the rest searched:\n");
        print_item(0, &out[0]);
    }
}

static int run_row(int gpus, int k, int *slow)
{
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    char err[512];
    if (build(gpus, &g, &c))
        return -1;
    pf_blocks_t *b = pf_blocks_new(g, 2, err, sizeof err);
    pf_blockcost_roofline_t roof;
    pf_blockcost_priced_t priced;
    pf_blockcost_env_t env;
    const pf_devmodel_t *dm = pf_devmodel_preset(DEVICE);
    if (dm && !getenv("PF_BENCH_BLOCKS_ROOFLINE"))
        pf_blockcost_priced_init(&priced, c, dm, 2, &env);
    else
        pf_blockcost_roofline_init(&roof, c, &env);
    pf_blockcost_problem_t pr = {.blocks = b, .env = &env, .global_batch = 1536, .ngpus = gpus,
                                 .gpus_per_host = 8,
                                 /* the search's default headroom (--mem-headroom 0.1) */
                                 .mem_bytes = pf_cluster_min_mem_bytes(c) * 0.9};
    pf_training_init(&pr.training);
    pf_blockenum_item_t *out = calloc((size_t)k, sizeof *out);
    pf_blockenum_stats_t st;
    int n = 0, rc = -1;
    if (!b || !out)
        goto done;
    double t0 = pf_now_s();
    pf_blockenum_fix_t fix;
    pf_blockenum_fix_init(&fix);
    rc = pf_blockenum_run(&pr, &fix,
                          k, 1, out, &n, &st, err, sizeof err);
    double wall = pf_now_s() - t0;
    *slow += wall >= 1.0;
    printf("  %4d A100: %.3f s (target < 1 s), %ld evaluated, %ld skipped\n", gpus, wall,
           st.evaluated, st.skipped);
    if (rc != PF_OK)
        printf("    %s\n", err);
    for (int i = 0; i < n; i++)
        print_item(i + 1, &out[i]);
    if (gpus == 64 && n > 0)
        megatron_row(&pr, &out[0]);
done:
    free(out);
    pf_blocks_destroy(&b);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
    return rc == PF_OK ? 0 : -1;
}

int pf_bench_blocks(void)
{
    int k = getenv("PF_BENCH_BLOCKS_K") ? atoi(getenv("PF_BENCH_BLOCKS_K")) : 5, slow = 0;
    const int gpus[] = {64, 128, 256, 512, 1024, 1536, 3072};
    printf("bench blocks: GPT-3 175B at global batch 1536, block-level search (analytic model, %s "
           "prices)\n", getenv("PF_BENCH_BLOCKS_ROOFLINE") ? "roofline" : DEVICE " + collective");
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++)
        run_row(gpus[i], k > 0 ? k : 5, &slow);
    printf("  rows at or over 1 s: %d\n", slow);
    return 0;
}
