/* Tensor parallelism at scale.
 *
 * 1. Plans of GPT-3 175B and of the 1T-parameter GPT of Narayanan et al. 2021 (Table 1) on
 *    DGX-A100 and DGX-H100 clusters, with the published global batch and selective
 *    recomputation, by the whole (S, R, T) search, run in-process by bench/farm.c's driver (one
 *    job at a time, every core per job, as `planfarm plan` with one worker): plan time, the chosen
 *    PP x DP x TP, micro-batches, memory per GPU against capacity, and the time split by phase
 *    (TAP_ENUM, DP_PARTITION, MAP_PROBE jobs, and the search's own work between them). Then the
 *    configuration Megatron-LM published for the model, planned by the same search with S and T
 *    fixed to it, so both are priced by planfarm's one cost model.
 * 2. TAP: pf_tap_plan at T = 8 on GPT-3-shaped graphs of 12, 24, 48 and 96 layers, in-process
 *    (target: 96 layers <= 1.3x the time of 24); then the TAP phase through the embedded
 *    broker with 1 and 2 single-thread workers: a search fixed to T = 8, one stage, one replica
 *    on one DGX-H100 whose memory never binds, so partitioning and mapping are trivial.
 *
 * Environment: PF_BENCH_1T_MACHINES (default 64: 512 GPUs) for the 1T rows, PF_BENCH_TP_SKIP=1
 * skips part 1, PF_BENCH_TP_ONLY="gpt3" keeps only the GPT-3 rows. */
#include "bench/farm.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/tp/tap.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"

#include <czmq.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct {
    const char *name;
    int layers, hidden, heads;
    long long global_batch;
} gpt_shape_t;

static const gpt_shape_t GPT3 = {"GPT-3 175B", 96, 12288, 96, 1536};
static const gpt_shape_t GPT1T = {"GPT 1T", 128, 25600, 160, 3072};

/* Per GPU: dense bf16 peak and HBM bandwidth (A100 80GB SXM, H100 SXM5 datasheets). */
typedef struct {
    pf_topology_kind_t kind;
    const char *name;
    double tflops, hbm_gbps;
} gpu_t;

static const gpu_t A100 = {PF_TOPOLOGY_DGX_A100, "dgx-a100", 312, 2039};
static const gpu_t H100 = {PF_TOPOLOGY_DGX_H100, "dgx-h100", 989, 3350};

static int build(const gpt_shape_t *m, int layers, const gpu_t *gpu, int machines,
                 double mem_bytes, pf_graph_t **g, pf_cluster_t **c)
{
    char err[512];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = layers > 0 ? layers : m->layers;
    mo.hidden = m->hidden;
    mo.heads = m->heads;
    mo.seq = 2048;
    mo.vocab = 51200; /* Narayanan et al. 2021, every model of Table 1 */
    mo.microbatch = 1;
    mo.precision_bytes = 2;
    mo.tflops = gpu->tflops;
    mo.hbm_gbps = gpu->hbm_gbps;
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, gpu->kind);
    to.machines = machines;
    if (mem_bytes > 0)
        to.mem_bytes = mem_bytes;
    if (pf_model_build(&mo, g, err, sizeof err) != PF_OK ||
        pf_topology_build(&to, c, err, sizeof err) != PF_OK) {
        fprintf(stderr, "bench tp: %s\n", err);
        pf_graph_destroy(g);
        return 1;
    }
    return 0;
}

/* ---- 1. plans ---- */

/* Megatron-LM's published (t, p) for a model of this shape on this many GPUs, from
 * narayanan2021_table1.json ($PF_SHARED/data/megatron, default ../shared): 0 when none. */
static int published_tp(const gpt_shape_t *m, int gpus, int *t, int *p)
{
    char path[1024];
    const char *shared = getenv("PF_SHARED") ? getenv("PF_SHARED") : "../shared";
    snprintf(path, sizeof path, "%s/data/megatron/narayanan2021_table1.json", shared);
    json_t *root = json_load_file(path, 0, NULL), *r;
    size_t i;
    int found = 0;
    json_array_foreach(json_object_get(root, "rows"), i, r) {
        int layers = 0, hidden = 0, g = 0, tt = 0, pp = 0;
        if (json_unpack(r, "{s:i, s:i, s:i, s:i, s:i}", "layers", &layers, "hidden", &hidden,
                        "gpus", &g, "tensor_parallel", &tt, "pipeline_parallel", &pp) == 0 &&
            layers == m->layers && hidden == m->hidden && g == gpus) {
            *t = tt, *p = pp, found = 1;
        }
    }
    json_decref(root);
    return found;
}

static double max_stage_mem(const pf_plan_t *p, int *worst)
{
    double m = 0;
    for (int s = 0; s < p->stages; s++)
        if (p->stage_list[s].peak_mem_bytes > m) {
            m = p->stage_list[s].peak_mem_bytes;
            *worst = s;
        }
    return m;
}

static void print_drive(const char *label, const gpt_shape_t *m, const pf_cluster_t *c,
                        const pf_bench_drive_t *d)
{
    const pf_bench_acc_t *tap = &d->kind[PF_JOB_TAP_ENUM], *dp = &d->kind[PF_JOB_DP_PARTITION],
                         *map = &d->kind[PF_JOB_MAP_PROBE];
    printf("%-11s %-12s %5d %-9s", m->name, pf_cluster_name(c), pf_cluster_ndevices(c), label);
    if (d->status != PF_OK) {
        printf(" no plan (%s) after %.1f s\n", d->err, d->wall_s);
        return;
    }
    const pf_plan_t *p = d->plan;
    int worst = 0;
    double mem = max_stage_mem(p, &worst);
    double cap = pf_cluster_device(c, 0)->mem_bytes;
    char shape[32];
    snprintf(shape, sizeof shape, "%dx%dx%d", p->stages, p->replicas, p->tensor_parallel);
    printf(" %7.1f %7.1f %-10s %5d %6.1f/%4.0f %9.2f | %4lld %7.1f %7.1f %4lld %7.1f %4lld %7.1f\n",
           d->wall_s, d->cpu_s, shape, p->microbatches, mem / GIB, cap / GIB,
           p->simulated_step_ms / 1e3, tap->jobs, tap->wall_s, d->search.wall_s, dp->jobs,
           dp->wall_s, map->jobs, map->wall_s);
    const pf_stage_t *st = &p->stage_list[worst];
    printf("%-39s   stage %d of %d: weights %.1f, gradients %.1f, optimizer %.1f, activations "
           "%.1f (%d micro-batches in flight), reserve %.1f GiB; longest job %.2f s\n",
           "", worst, p->stages, st->mem_weights_bytes / GIB, st->mem_grads_bytes / GIB,
           st->mem_optimizer_bytes / GIB, st->mem_activations_bytes / GIB, st->inflight,
           st->mem_reserve_bytes / GIB,
           dp->max_s > map->max_s ? (dp->max_s > tap->max_s ? dp->max_s : tap->max_s)
                                  : (map->max_s > tap->max_s ? map->max_s : tap->max_s));
    fflush(stdout);
}

static int plan_rows(const gpt_shape_t *m, const gpu_t *gpu, int machines)
{
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    if (build(m, 0, gpu, machines, 0, &g, &c))
        return 1;
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.global_batch = m->global_batch;
    o.train.recompute = PF_RECOMPUTE_SELECTIVE;
    pf_bench_drive_t d;
    pf_bench_drive(g, c, &o, 0, 1, &d);
    print_drive("search", m, c, &d);
    pf_bench_drive_free(&d);
    /* Megatron's (t, p) for this GPU count, when it published one: the same search with S and T
     * fixed (R follows). */
    int pub_t, pub_p;
    if (published_tp(m, pf_cluster_ndevices(c), &pub_t, &pub_p)) {
        o.stages = pub_p;
        o.tp = pub_t;
        pf_bench_drive(g, c, &o, 0, 1, &d);
        print_drive("Megatron", m, c, &d);
        pf_bench_drive_free(&d);
    }
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
    return 0;
}

static int plans(void)
{
    const char *only = getenv("PF_BENCH_TP_ONLY"), *m1t = getenv("PF_BENCH_1T_MACHINES");
    int machines_1t = m1t ? atoi(m1t) : 64;
    printf("1. plans: micro-batch 1, seq 2048, vocab 51200, bf16 mixed-precision Adam (16 B per "
           "parameter), selective recomputation, 1F1B;\n"
           "   op times at 50%% of the GPU's dense bf16 peak (A100 312, H100 989 TFLOPs).\n"
           "   plan s / cpu s: the whole search in-process, one job at a time, every core per "
           "job; shape PP x DP x TP; MB: micro-batches per step;\n"
           "   mem: largest stage's peak per GPU / capacity, GiB; step s: simulated step; then "
           "jobs and wall seconds by phase:\n"
           "   TAP (TAP_ENUM jobs), srch (the search's own work: TAP merge, building each T's "
           "setting, coarsening), DP (DP_PARTITION), MAP (MAP_PROBE)\n");
    printf("%-11s %-12s %5s %-9s %7s %7s %-10s %5s %11s %9s | %4s %7s %7s %4s %7s %4s %7s\n",
           "model", "cluster", "GPUs", "", "plan s", "cpu s", "PPxDPxTP", "MB", "mem GiB",
           "step s", "TAP", "s", "srch s", "DP", "s", "MAP", "s");
    fflush(stdout);
    int rc = 0;
    rc |= plan_rows(&GPT3, &A100, 8);
    rc |= plan_rows(&GPT3, &H100, 8);
    if (!(only && strcmp(only, "gpt3") == 0) && machines_1t > 0) {
        rc |= plan_rows(&GPT1T, &A100, machines_1t);
        rc |= plan_rows(&GPT1T, &H100, machines_1t);
    }
    printf("Megatron rows: (t, p) of narayanan2021_table1.json for the same model and GPU count "
           "(the 1T GPT on 3072 GPUs: PF_BENCH_1T_MACHINES=384)\n");
    return rc;
}

/* ---- 2. TAP ---- */

static int tap_direct(void)
{
    static const int layers[] = {12, 24, 48, 96};
    printf("\n2a. pf_tap_plan at T = 8 on GPT-3-shaped layers (hidden 12288, 96 heads), link "
           "370 GB/s, 2.5 us;\n    best of 3, wall and CPU seconds (OpenMP over the plans)\n");
    printf("%7s %6s %6s %-34s %9s %9s %8s\n", "layers", "ops", "units", "largest unit",
           "wall s", "cpu s", "x 24L");
    double t24 = 0;
    int rc = 0;
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        pf_graph_t *g = NULL;
        pf_cluster_t *c = NULL;
        char err[512];
        if (build(&GPT3, layers[i], &H100, 1, 0, &g, &c))
            return 1;
        pf_tap_opts_t o;
        pf_tap_opts_init(&o);
        pf_sharding_link_t link = {370, 2.5, 0};
        double best = 1e30, best_cpu = 0;
        for (int rep = 0; rep < 3; rep++) {
            pf_tap_result_t res;
            memset(&res, 0, sizeof res);
            double t0 = pf_now_s(), c0 = pf_bench_cpu_s();
            int st = pf_tap_plan(g, 8, &link, &o, &res, err, sizeof err);
            double dt = pf_now_s() - t0, dc = pf_bench_cpu_s() - c0;
            pf_tap_result_free(&res);
            if (st != PF_OK) {
                fprintf(stderr, "bench tp: pf_tap_plan: %s\n", err);
                rc = 1;
                break;
            }
            if (dt < best) {
                best = dt;
                best_cpu = dc;
            }
        }
        pf_tap_units_t *u = pf_tap_units_new(g, &o, err, sizeof err);
        char largest[64] = "-";
        int nunits = u ? pf_tap_units_count(u) : 0;
        uint64_t most = 0;
        for (int k = 0; k < nunits; k++) {
            pf_tap_units_info_t in;
            if (pf_tap_units_info(u, k, &in) == PF_OK && in.nplans >= most) {
                most = in.nplans;
                snprintf(largest, sizeof largest, "%s x%d, %d w, %llu plans", in.name,
                         in.ninstances, in.nweights, (unsigned long long)in.nplans);
            }
        }
        pf_tap_units_destroy(&u);
        if (layers[i] == 24)
            t24 = best;
        printf("%7d %6d %6d %-34s %9.4f %9.4f %8s\n", layers[i], pf_graph_nops(g), nunits,
               largest, best, best_cpu, "");
        if (layers[i] > 24 && t24 > 0)
            printf("%7s %6s %6s %-34s %9s %9s %7.2fx\n", "", "", "", "", "", "", best / t24);
        fflush(stdout);
        pf_graph_destroy(&g);
        pf_cluster_destroy(&c);
    }
    return rc;
}

static int tap_broker(void)
{
    static const int layers[] = {12, 24, 48, 96};
    printf("\n2b. the TAP phase through the broker: a search fixed to T = 8, S = 1, R = 1 on one "
           "DGX-H100 whose memory never binds;\n"
           "    embedded broker (inproc) + N workers of 1 thread; 'in-process' = the farm "
           "driver's split of the same search (jobs, wall s)\n");
    printf("%7s %9s %9s %9s %8s | %-26s\n", "layers", "1 worker", "2 workers", "speed-up",
           "jobs", "in-process: TAP, srch, DP, MAP");
    int rc = 0;
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        pf_graph_t *g = NULL;
        pf_cluster_t *c = NULL;
        if (build(&GPT3, layers[i], &H100, 1, 1e15, &g, &c))
            return 1;
        pf_search_opts_t o;
        pf_search_opts_init(&o);
        o.tp = 8;
        o.stages = 1;
        pf_bench_run_t run[2];
        for (int nw = 1; nw <= 2; nw++) {
            char ep[256], name[32], bind[64];
            zactor_t *w[2] = {0};
            /* a fresh inproc name per broker: the previous one's unbind is asynchronous */
            snprintf(bind, sizeof bind, "inproc://bench-tap-%d-%d", layers[i], nw);
            zactor_t *b = pf_bench_broker_start(bind, ep, sizeof ep);
            for (int k = 0; b && k < nw; k++) {
                snprintf(name, sizeof name, "tap-%d", k + 1);
                w[k] = pf_bench_worker_start(ep, 2, 1, name);
            }
            memset(&run[nw - 1], 0, sizeof run[0]);
            int started = b != NULL;
            if (b)
                run[nw - 1] = pf_bench_client_search(ep, g, c, &o);
            for (int k = 0; k < nw; k++)
                zactor_destroy(&w[k]);
            zactor_destroy(&b);
            if (!run[nw - 1].ok) {
                fprintf(stderr, "bench tp: %d layers, %d workers: %s\n", layers[i], nw,
                        started ? run[nw - 1].err : "the broker did not start");
                rc = 1;
            }
        }
        pf_bench_drive_t d;
        pf_bench_drive(g, c, &o, 1, 1, &d);
        printf("%7d %9.3f %9.3f %8.2fx %8lld | %lld %.3f, %.3f, %lld %.3f, %lld %.3f%s\n",
               layers[i], run[0].wall_s, run[1].wall_s,
               run[1].wall_s > 0 ? run[0].wall_s / run[1].wall_s : 0, run[0].jobs,
               d.kind[PF_JOB_TAP_ENUM].jobs, d.kind[PF_JOB_TAP_ENUM].wall_s, d.search.wall_s,
               d.kind[PF_JOB_DP_PARTITION].jobs, d.kind[PF_JOB_DP_PARTITION].wall_s,
               d.kind[PF_JOB_MAP_PROBE].jobs, d.kind[PF_JOB_MAP_PROBE].wall_s,
               d.status == PF_OK ? "" : "  (in-process search failed)");
        fflush(stdout);
        pf_bench_drive_free(&d);
        pf_graph_destroy(&g);
        pf_cluster_destroy(&c);
    }
    return rc;
}

int pf_bench_tp(void)
{
    zsys_set_logstream(NULL);
    int rc = 0;
    if (!getenv("PF_BENCH_TP_SKIP"))
        rc |= plans();
    rc |= tap_direct();
    rc |= tap_broker();
    return rc;
}
