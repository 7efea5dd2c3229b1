/* The mapping over the quotient of a hierarchy (issue 23 item 2; planner/map/map_symmetry.c,
 * pf_map_symmetry_hier_units): the whole search (Algorithm 1, instantiation full) on DGX
 * hierarchies from 128 GPUs to 131,072, with the units of the hierarchy as blocks ("units") and
 * with device classes and replica orders only ("classes": what main did above 1,024 devices, no
 * blocks there; below it main proved host blocks on the matrix, which on DGX T = 8 groups, one
 * group per host, are none). The stage graph is a chain of uneven stages (chain(): c_u 10-12
 * ms, 2 or 4 GB of gradients per replica, 500 MB of activations to the next stage), S x R stage
 * replicas on the tensor-parallel groups of T GPUs (pf_cluster_hier_grouped, what the planner
 * maps on). Columns: objective of each, nodes, probes / probes past their 1 s deadline,
 * seconds (of the whole search, the context's set-up included).
 * PF_BENCH_QUOTIENT_MAX (default 131072) skips the rows of more GPUs. */
#include "planner/ir/cluster_hier.h"
#include "planner/map/mapping.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    const char *label;
    pf_topology_kind_t kind;
    int machines, T, S, R;
} quot_case_t;

/* The groups' cluster of T GPUs of a DGX hierarchy of `machines` hosts, or NULL. */
static pf_cluster_t *groups(const quot_case_t *q, char *err, size_t errlen)
{
    pf_topology_opts_t to;
    pf_cluster_t *c = NULL;
    pf_topology_opts_init(&to, q->kind);
    to.machines = q->machines;
    if (pf_topology_build(&to, &c, err, errlen) != PF_OK)
        return NULL;
    if (q->T == 1)
        return c;
    pf_cluster_hier_t *g = pf_cluster_hier_grouped(pf_cluster_hierarchy(c), q->T);
    pf_cluster_t *gc = g ? pf_cluster_new_hier("groups", g) : NULL;
    if (!gc)
        pf_cluster_hier_destroy(&g);
    pf_cluster_destroy(&c);
    return gc;
}

static pf_stage_graph_t *chain(int S, int R)
{
    double *cu = malloc((size_t)S * sizeof *cu), *P = malloc((size_t)S * sizeof *P);
    double *M = calloc((size_t)S * S, sizeof *M);
    pf_stage_graph_t *sg = NULL;
    if (cu && P && M) {
        for (int s = 0; s < S; s++) {
            cu[s] = 10 + s % 3;
            P[s] = 2e9 * (1 + s % 2);
            if (s + 1 < S)
                M[(size_t)s * S + s + 1] = M[(size_t)(s + 1) * S + s] = 5e8;
        }
        sg = pf_stage_graph_new(S, R, cu, P, M);
    }
    free(cu);
    free(P);
    free(M);
    return sg;
}

static int quot_row(const quot_case_t *q)
{
    static const int modes[2] = {PF_MAP_SYM_ALL, PF_MAP_SYM_NO_BLOCKS};
    char err[512];
    pf_cluster_t *c = groups(q, err, sizeof err);
    pf_stage_graph_t *sg = c ? chain(q->S, q->R) : NULL;
    int *dev = malloc((size_t)q->S * q->R * sizeof *dev), rc = 1;
    pf_mapping_stats_t st[2];
    if (!c || !sg || !dev) {
        fprintf(stderr, "%s: %s\n", q->label, c ? "out of memory" : err);
        goto done;
    }
    for (int i = 0; i < 2; i++) {
        pf_mapping_opts_t o;
        pf_mapping_opts_init(&o);
        o.inst = PF_MAP_INST_FULL;
        o.symmetry = modes[i];
        if (pf_mapping_search(sg, c, &o, dev, &st[i], err, sizeof err) != PF_OK) {
            fprintf(stderr, "%s: %s\n", q->label, err);
            goto done;
        }
    }
    printf("%-22s %7d %2d %8d %4d %5d %10.3f %10.3f %10lld %10lld %3d/%-3d %3d/%-3d %8.3f "
           "%8.3f\n",
           q->label, q->machines * 8, q->T, pf_cluster_ndevices(c), q->S, q->R,
           st[0].objective_ms, st[1].objective_ms, st[0].nodes, st[1].nodes, st[0].probes,
           st[0].probes_timed_out, st[1].probes, st[1].probes_timed_out, st[0].seconds,
           st[1].seconds);
    fflush(stdout);
    rc = 0;
done:
    free(dev);
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&c);
    return rc;
}

int pf_bench_quotient(void)
{
    static const quot_case_t cases[] = {
        {"dgx-h100 x 16, T 1", PF_TOPOLOGY_DGX_H100, 16, 1, 4, 8},
        {"dgx-h100 x 16, T 2", PF_TOPOLOGY_DGX_H100, 16, 2, 8, 8},
        {"dgx-h100 x 64, T 1", PF_TOPOLOGY_DGX_H100, 64, 1, 8, 64},
        {"dgx-h100 x 512, T 2", PF_TOPOLOGY_DGX_H100, 512, 2, 16, 128},
        {"dgx-h100 x 128, T 4", PF_TOPOLOGY_DGX_H100, 128, 4, 8, 32},
        {"dgx-h100 x 512, T 4", PF_TOPOLOGY_DGX_H100, 512, 4, 16, 64},
        {"dgx-h100 x 2048, T 4", PF_TOPOLOGY_DGX_H100, 2048, 4, 16, 256},
        {"dgx-a100 x 192, T 8", PF_TOPOLOGY_DGX_A100, 192, 8, 8, 24},
        {"dgx-a100 x 384, T 8", PF_TOPOLOGY_DGX_A100, 384, 8, 64, 6},
        {"dgx-h100 x 2048, T 8", PF_TOPOLOGY_DGX_H100, 2048, 8, 16, 128},
        {"dgx-h100 x 16384, T 8", PF_TOPOLOGY_DGX_H100, 16384, 8, 64, 256},
    };
    const char *mx = getenv("PF_BENCH_QUOTIENT_MAX");
    long max_gpus = mx ? atol(mx) : 131072;
    printf("mapping search (full) on DGX hierarchies: units of the hierarchy as blocks against "
           "device classes only\n");
    printf("%-22s %7s %2s %8s %4s %5s %10s %10s %10s %10s %7s %7s %8s %8s\n", "cluster", "GPUs",
           "T", "groups", "S", "R", "obj units", "classes", "nodes", "classes", "pr/t-o",
           "classes", "sec", "classes");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if ((long)cases[i].machines * 8 <= max_gpus && quot_row(&cases[i]))
            return 1;
    return 0;
}
