/* The (S, R) partition sweep at scale: BERT-48 and GPT-96L (and, for the
 * model-size fit, BERT-24 and GPT-48) on 32, 64, 256 and 512 devices of every cluster generator
 * (planner/inputs/topology.h). Per (model, cluster, D): the partition jobs the search starts (every
 * S = 1, 2, 4, .. <= min(64, D) with R = D / S, default settings, all threads), their wall and
 * CPU time, per job and in total. Then how the total grows: the exponent b of total ~ a D^b
 * per model and of total ~ a ops^b per D, each a least-squares line through (log x, log t).
 *
 * Default: a quick subset (3 generators, 2 models) that runs in about a minute on the 2-core
 * development machine; PF_BENCH_SWEEP=full runs every generator and all four models.
 *
 * Last, the target "BERT-48 on 512 devices (torus) under 10 s on 2 cores": the whole
 * search as `planfarm plan` runs it (embedded broker, one worker with every core), wall time,
 * and its jobs by kind from the in-process driver. */
#include "bench/farm.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/partition/partition.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pf_graph_t *model(pf_model_kind_t kind, int layers)
{
    pf_model_opts_t o;
    pf_graph_t *g = NULL;
    char err[256];
    pf_model_opts_init(&o, kind);
    o.layers = layers;
    if (pf_model_build(&o, &g, err, sizeof err) != PF_OK)
        fprintf(stderr, "sweep: model: %s\n", err);
    return g;
}

/* D devices of one generator: machines of 8 (4 for hier), near-square grids, D random devices. */
static pf_cluster_t *cluster(pf_topology_kind_t kind, int D)
{
    pf_topology_opts_t o;
    pf_cluster_t *c = NULL;
    char err[256];
    pf_topology_opts_init(&o, kind);
    switch (kind) {
    case PF_TOPOLOGY_HIER:
        o.machines = D / o.gpus_per_machine;
        break;
    case PF_TOPOLOGY_DGX1:
    case PF_TOPOLOGY_NVSWITCH:
    case PF_TOPOLOGY_DGX_A100:
    case PF_TOPOLOGY_DGX_H100:
        o.machines = D / 8;
        break;
    case PF_TOPOLOGY_MESH2D:
    case PF_TOPOLOGY_TORUS2D: {
        int x = 1;
        while (x * x < D)
            x *= 2;
        o.dims[0] = x;
        o.dims[1] = D / x;
        o.dims[2] = 1;
        break;
    }
    case PF_TOPOLOGY_MESH3D:
    case PF_TOPOLOGY_TORUS3D: {
        int z = 1;
        while (z * z * z < D)
            z *= 2;
        o.dims[0] = o.dims[1] = z;
        o.dims[2] = D / (z * z);
        break;
    }
    default:
        o.devices = D;
    }
    if (pf_topology_build(&o, &c, err, sizeof err) != PF_OK)
        fprintf(stderr, "sweep: cluster %s (%d devices): %s\n", pf_topology_kind_name(kind), D, err);
    else if (pf_cluster_ndevices(c) != D)
        pf_cluster_destroy(&c);
    return c;
}

/* Least-squares slope of log t over log x. */
static double fit_exponent(const double *x, const double *t, int n)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (!(x[i] > 0 && t[i] > 0))
            continue;
        double lx = log(x[i]), ly = log(t[i]);
        sx += lx;
        sy += ly;
        sxx += lx * lx;
        sxy += lx * ly;
        m++;
    }
    double den = m * sxx - sx * sx;
    return m >= 2 && den > 0 ? (m * sxy - sx * sy) / den : NAN;
}

/* The whole search of BERT-48 on a 32 x 16 torus, as `planfarm plan` runs it. */
static int bert48_torus512(void)
{
    pf_topology_opts_t to;
    pf_cluster_t *c = NULL;
    char err[256], ep[256];
    pf_topology_opts_init(&to, PF_TOPOLOGY_TORUS2D);
    to.dims[0] = 32;
    to.dims[1] = 16;
    to.dims[2] = 1;
    pf_graph_t *g = model(PF_MODEL_BERT, 48);
    if (!g || pf_topology_build(&to, &c, err, sizeof err) != PF_OK) {
        fprintf(stderr, "sweep: %s\n", g ? err : "BERT-48");
        pf_graph_destroy(&g);
        return 1;
    }
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    printf("\nthe whole search, BERT-48 (%d ops) on torus2d 32 x 16 (512 devices), default options "
           "(target: under 10 s on 2 cores)\n", pf_graph_nops(g));
    zactor_t *b = pf_bench_broker_start("inproc://bench-sweep-512", ep, sizeof ep);
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    zactor_t *w = b ? pf_bench_worker_start(ep, 2, cores > 0 ? cores : 1, "sweep-512") : NULL;
    pf_bench_run_t run = {0};
    double c0 = pf_bench_cpu_s();
    if (w)
        run = pf_bench_client_search(ep, g, c, &o);
    double cpu = pf_bench_cpu_s() - c0;
    zactor_destroy(&w);
    zactor_destroy(&b);
    int rc = 0;
    if (!run.ok) {
        printf("  embedded broker + 1 worker: failed: %s\n",
               !b ? "the broker did not start" : !w ? "the worker did not start" : run.err);
        rc = 1;
    } else {
        printf("  embedded broker + 1 worker (every core): %.2f s wall, %.2f s CPU, %lld jobs, "
               "objective %.3f ms -> %s\n", run.wall_s, cpu, run.jobs, run.objective_ms,
               run.wall_s < 10 ? "met" : "NOT met");
    }
    pf_bench_drive_t d;
    pf_bench_drive(g, c, &o, 0, 1, &d);
    printf("  in-process driver, jobs one at a time (%.2f s wall, %.2f s CPU):\n", d.wall_s,
           d.cpu_s);
    for (int k = 0; k < PF_JOB_KIND_COUNT; k++)
        if (d.kind[k].jobs)
            printf("    %-13s %4lld jobs  %7.3f s wall  %7.3f s CPU  longest %.3f s\n",
                   pf_job_kind_name((pf_job_kind_t)k), d.kind[k].jobs, d.kind[k].wall_s,
                   d.kind[k].cpu_s, d.kind[k].max_s);
    printf("    the search's own work %.3f s\n", d.search.wall_s);
    if (d.status != PF_OK) {
        printf("  in-process driver failed: %s\n", d.err);
        rc = 1;
    }
    pf_bench_drive_free(&d);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
    return rc;
}

enum { NDEV = 4, MAXKINDS = 12, MAXMODELS = 4 };

int pf_bench_sweep(void)
{
    const char *mode = getenv("PF_BENCH_SWEEP");
    int full = mode && strcmp(mode, "full") == 0;
    static const int devs[NDEV] = {32, 64, 256, 512};
    static const pf_topology_kind_t quick_kinds[] = {PF_TOPOLOGY_HIER, PF_TOPOLOGY_TORUS2D, PF_TOPOLOGY_DGX_H100};
    static const pf_topology_kind_t all_kinds[] = {
        PF_TOPOLOGY_HIER,    PF_TOPOLOGY_DGX1,        PF_TOPOLOGY_NVSWITCH,    PF_TOPOLOGY_DGX_A100,
        PF_TOPOLOGY_DGX_H100, PF_TOPOLOGY_MESH2D,     PF_TOPOLOGY_TORUS2D,     PF_TOPOLOGY_MESH3D,
        PF_TOPOLOGY_TORUS3D, PF_TOPOLOGY_RANDOM_BLK1, PF_TOPOLOGY_RANDOM_BLK2, PF_TOPOLOGY_UNIFORM};
    static const struct {
        pf_model_kind_t kind;
        int layers;
        const char *label;
    } all_models[MAXMODELS] = {{PF_MODEL_BERT, 48, "BERT-48"},
                               {PF_MODEL_GPT, 96, "GPT-96L"},
                               {PF_MODEL_BERT, 24, "BERT-24"},
                               {PF_MODEL_GPT, 48, "GPT-48L"}};
    const pf_topology_kind_t *kinds = full ? all_kinds : quick_kinds;
    int nkinds = full ? (int)(sizeof all_kinds / sizeof *all_kinds)
                      : (int)(sizeof quick_kinds / sizeof *quick_kinds);
    int nmodels = full ? MAXMODELS : 2;
    /* total_s[model][kind][d]; NAN where the cluster could not be built */
    static double total_s[MAXMODELS][MAXKINDS][NDEV];
    double ops[MAXMODELS];
    printf("(S, R) partition jobs of the search: S = 1, 2, 4, .. <= min(64, D), R = D / S, default "
           "settings, all threads; %s run (PF_BENCH_SWEEP=full: every generator, 4 models)\n",
           full ? "full" : "quick");
    printf("%-8s %5s %-12s %5s %4s %4s %9s %9s %9s %9s %8s\n", "model", "ops", "cluster", "D",
           "jobs", "ok", "total s", "cpu s", "ms/job", "max ms", "max (S)");
    for (int mi = 0; mi < nmodels; mi++) {
        pf_graph_t *g = model(all_models[mi].kind, all_models[mi].layers);
        if (!g)
            return 1;
        ops[mi] = pf_graph_nops(g);
        for (int ki = 0; ki < nkinds; ki++)
            for (int di = 0; di < NDEV; di++) {
                int D = devs[di];
                total_s[mi][ki][di] = NAN;
                pf_cluster_t *c = cluster(kinds[ki], D);
                if (!c)
                    continue;
                int jobs = 0, ok = 0, maxS = 0;
                double wall = 0, cpu = 0, maxw = 0;
                for (int S = 1; S <= D && S <= 64; S *= 2) {
                    pf_partition_opts_t o;
                    pf_partition_opts_init(&o);
                    o.stages = S;
                    o.replicas = D / S;
                    pf_plan_t *p = NULL;
                    char err[512];
                    double w0 = pf_now_s(), c0 = pf_bench_cpu_s();
                    int rc = pf_partition_run(g, c, &o, &p, err, sizeof err);
                    double w = pf_now_s() - w0;
                    cpu += pf_bench_cpu_s() - c0;
                    wall += w;
                    jobs++;
                    ok += rc == PF_OK;
                    if (w > maxw) {
                        maxw = w;
                        maxS = S;
                    }
                    pf_plan_destroy(&p);
                }
                total_s[mi][ki][di] = wall;
                printf("%-8s %5d %-12s %5d %4d %4d %9.3f %9.3f %9.2f %9.2f %8d\n",
                       all_models[mi].label, (int)ops[mi], pf_topology_kind_name(kinds[ki]), D, jobs,
                       ok, wall, cpu, 1e3 * wall / jobs, 1e3 * maxw, maxS);
                fflush(stdout);
                pf_cluster_destroy(&c);
            }
        pf_graph_destroy(&g);
    }
    printf("\ngrowth: exponent b of total ~ a x^b, least squares over (log x, log total)\n");
    for (int mi = 0; mi < nmodels; mi++) {
        double x[MAXKINDS * NDEV], t[MAXKINDS * NDEV];
        int n = 0;
        for (int ki = 0; ki < nkinds; ki++)
            for (int di = 0; di < NDEV; di++) {
                x[n] = devs[di];
                t[n++] = total_s[mi][ki][di];
            }
        printf("  %-8s in D (32..512, every cluster):   b = %.2f\n", all_models[mi].label,
               fit_exponent(x, t, n));
    }
    for (int di = 0; di < NDEV; di++) {
        double x[MAXKINDS * MAXMODELS], t[MAXKINDS * MAXMODELS];
        int n = 0;
        for (int mi = 0; mi < nmodels; mi++)
            for (int ki = 0; ki < nkinds; ki++) {
                x[n] = ops[mi];
                t[n++] = total_s[mi][ki][di];
            }
        printf("  D = %3d  in model ops (%d models):      b = %.2f\n", devs[di], nmodels,
               fit_exponent(x, t, n));
    }
    return bert48_torus512();
}
