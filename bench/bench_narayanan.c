/* Megatron-LM's weak-scaling table against planfarm's cost model (issue 21).
 *
 * For every row of narayanan2021_table1.json (Narayanan et al. 2021, Table 1: GPT 1.7B to 1T on
 * 32 to 3072 A100, [Megatron]), the published (t, p, d) and global batch are planned with every
 * dimension fixed (S = p, T = t, R = d, whole layers per stage, full recomputation, 1F1B,
 * micro-batch 1, 2 and 4 where the memory model allows) on a DGX-A100 cluster of gpus / 8
 * machines, and the plan's simulated step is turned into TFLOP/s per GPU with the paper's own
 * count (eq. 3: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per step). Printed beside the published
 * figure, with the ratio; the target: every row within 10%, mean absolute error within 5%.
 *
 * Then each row planned freely (issue 22): the block-level search with only the model, the
 * cluster and the global batch given; its simulated TFLOP/s beside the published configuration's
 * (target: at least as fast on every row). PF_BENCH_NARAYANAN_NO_FREE=1 skips it.
 *
 * The table is read from $PF_SHARED/data/megatron (default ../shared); no figure of it is in
 * this file. PF_BENCH_NARAYANAN_MAX_GPUS (default 3072) skips larger rows; PF_BENCH_NARAYANAN_MB
 * ("1,2,4") the micro-batch sizes. */
#include "bench/farm.h"
#include "planner/core/util.h"
#include "planner/inputs/model.h"
#include "planner/inputs/topology.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEQ 2048 /* every row of Table 1 (the file's notes) */
#define VOCAB 51200
#define DEVICE "a100-80g" /* Selene's DGX A100 80GB (the file's source); mixed precision fp16 */

typedef struct {
    int heads, hidden, layers, t, p, gpus;
    long long batch;
    double published_tflops, params_b;
} row_t;

static int read_row(json_t *r, row_t *out)
{
    return json_unpack(r, "{s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:F, s:F}", "heads", &out->heads,
                       "hidden", &out->hidden, "layers", &out->layers, "tensor_parallel", &out->t,
                       "pipeline_parallel", &out->p, "gpus", &out->gpus, "global_batch",
                       &out->batch, "achieved_tflops_per_gpu", &out->published_tflops,
                       "params_b", &out->params_b);
}

/* Eq. 3 of [Megatron]: the FLOPs of one step with full recomputation. */
static double step_flops(const row_t *r)
{
    double B = (double)r->batch, s = SEQ, l = r->layers, h = r->hidden, V = VOCAB;
    return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

static int build(const row_t *r, int mb, pf_graph_t **g, pf_cluster_t **c)
{
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = r->layers, mo.hidden = r->hidden, mo.heads = r->heads;
    mo.seq = SEQ, mo.vocab = VOCAB, mo.microbatch = mb, mo.precision_bytes = 2;
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX_A100);
    to.machines = r->gpus / 8;
    return pf_bench_build("narayanan", &mo, DEVICE, PF_PREC_FP16, &to, g, c);
}

/* One row at micro-batch mb: the simulated TFLOP/s per GPU, 0 when no plan (reason printed). */
static double plan_row(const row_t *r, int mb, double *plan_s, char *why, size_t whylen)
{
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    *plan_s = 0;
    if (build(r, mb, &g, &c))
        return 0;
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.stages = r->p;
    o.tp = r->t;
    o.replicas = r->gpus / (r->t * r->p);
    o.global_batch = r->batch;
    o.layer_aligned = 1;
    o.train.recompute = PF_RECOMPUTE_FULL;
    o.schedules = 1u << PF_SCHEDULE_1F1B;
    char shape[192];
    double step_ms, tflops = 0;
    if (pf_bench_plan_step(g, c, &o, &step_ms, plan_s, shape, sizeof shape) == 0)
        tflops = step_flops(r) / (step_ms * 1e-3 * r->gpus) / 1e12;
    else
        snprintf(why, whylen, "      mb %d: %s\n", mb, shape);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
    return tflops;
}

/* The same row planned freely: only the model, the cluster and the global batch given (the
 * block-level search chooses t, p, d, recomputation and ZeRO; micro-batch 1). The simulated
 * TFLOP/s per GPU and the chosen shape into shape. */
static double free_row(const row_t *r, double *plan_s, char *shape, size_t len)
{
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    *plan_s = 0;
    snprintf(shape, len, "-");
    if (build(r, 1, &g, &c))
        return 0;
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.global_batch = r->batch;
    o.block_search = 1;
    o.layer_aligned = 1;
    double step_ms, tflops = 0;
    if (pf_bench_plan_step(g, c, &o, &step_ms, plan_s, shape, len) == 0)
        tflops = step_flops(r) / (step_ms * 1e-3 * r->gpus) / 1e12;
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
    return tflops;
}

static int parse_mbs(int *mbs)
{
    const char *s = getenv("PF_BENCH_NARAYANAN_MB") ? getenv("PF_BENCH_NARAYANAN_MB") : "1,2,4";
    int n = 0;
    for (char *end; *s && n < 8; s = *end ? end + 1 : end) {
        long v = strtol(s, &end, 10);
        if (end == s || v < 1)
            break;
        mbs[n++] = (int)v;
    }
    return n;
}

typedef struct {
    int counted, within;
    double abs_err;
} summary_t;

static void count(summary_t *s, double ratio)
{
    if (!(ratio > 0))
        return;
    double e = fabs(ratio - 1);
    s->abs_err += e;
    s->within += e <= 0.10;
    s->counted++;
}

static void report(const summary_t *s, const char *what)
{
    if (s->counted)
        printf("at %s: %d of %d rows within 10%%, mean absolute error %.1f%% (targets: every "
               "row, 5%%)\n", what, s->within, s->counted, 100 * s->abs_err / s->counted);
}

int pf_bench_narayanan(void)
{
    json_t *table = pf_bench_shared_json("data/megatron/narayanan2021_table1.json");
    if (!table)
        return 0;
    int max_gpus = getenv("PF_BENCH_NARAYANAN_MAX_GPUS") ? atoi(getenv("PF_BENCH_NARAYANAN_MAX_GPUS"))
                                                         : 3072;
    int mbs[8], nmb = parse_mbs(mbs), free_faster = 0, free_rows = 0;
    int free_search = !getenv("PF_BENCH_NARAYANAN_NO_FREE");
    summary_t first = {0}, best = {0};
    printf("Narayanan et al. 2021 Table 1 on DGX-A100 (full recomputation, 1F1B, (t, p, d) and "
           "batch as published);\nTFLOP/s per GPU by eq. 3 from planfarm's simulated step; ratio "
           "= planfarm / published at micro-batch 1\n");
    printf("%7s %5s %3s %3s %4s %5s %9s | %s\n", "params", "GPUs", "t", "p", "d", "batch",
           "published", "planfarm TFLOP/s by micro-batch (ratio), plan s");
    json_t *rows = json_object_get(table, "rows"), *jr;
    size_t i;
    json_array_foreach(rows, i, jr) {
        row_t r;
        if (read_row(jr, &r) || r.gpus % 8 || r.gpus % (r.t * r.p)) {
            printf("rows[%zu]: unreadable or not a whole number of DGX hosts\n", i);
            continue;
        }
        printf("%6.1fB %5d %3d %3d %4d %5lld %9.0f |", r.params_b, r.gpus, r.t, r.p,
               r.gpus / (r.t * r.p), r.batch, r.published_tflops);
        if (r.gpus > max_gpus) {
            printf(" skipped (PF_BENCH_NARAYANAN_MAX_GPUS %d)\n", max_gpus);
            continue;
        }
        double top = 0, first_tf = 0;
        char why[8][640] = {{0}};
        for (int k = 0; k < nmb; k++) {
            double plan_s, tf = plan_row(&r, mbs[k], &plan_s, why[k], sizeof why[k]);
            printf(" mb%d %6.1f (%.3f) %.1fs", mbs[k], tf, tf / r.published_tflops, plan_s);
            fflush(stdout);
            if (k == 0) {
                count(&first, tf / r.published_tflops);
                first_tf = tf;
            }
            top = tf > top ? tf : top;
        }
        count(&best, top / r.published_tflops);
        if (free_search) {
            char shape[192];
            double fs, ftf = free_row(&r, &fs, shape, sizeof shape);
            printf(" | free %6.1f (%.3f of published, %.3f of fixed mb1) %s %.1fs", ftf,
                   ftf / r.published_tflops, first_tf > 0 ? ftf / first_tf : 0, shape, fs);
            free_faster += first_tf > 0 && ftf >= first_tf * (1 - 1e-9);
            free_rows++;
        }
        printf("\n");
        for (int k = 0; k < nmb; k++)
            fputs(why[k], stdout);
        fflush(stdout);
    }
    report(&first, "the first micro-batch size");
    report(&best, "the best micro-batch size (the table does not say which Megatron ran)");
    if (free_rows)
        printf("free search (block-level, only model, cluster and batch given): at least as fast "
               "as the published (t, p, d) at micro-batch 1 on %d of %d rows (target: every "
               "row)\n", free_faster, free_rows);
    json_decref(table);
    return 0;
}
