/* Fixtures shared by the map suites (test_mapping.c, test_map_bounds.c, test_map_probe.c,
 * test_map_symmetry.c, test_map_context.c): random and hand-made stage graphs and clusters, the
 * brute-force optimum over every one-to-one mapping, and exact search options. Static inline so
 * that each suite takes what it uses. */
#ifndef PF_TEST_MAP_FIXTURES_H
#define PF_TEST_MAP_FIXTURES_H

#include "planner/map/mapping.h"
#include "planner/core/rng.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>

#define MAXN 12

/* S stages: a chain s -> s+1 plus skip edges with probability 0.3; c_u in [1, 10) ms, P in
 * [1e7, 3e8) bytes, M in [1e7, 2e8) bytes (10 GB/s: 1 to 20 ms per transfer, the same order as
 * c_u, so that placement matters). */
static inline pf_stage_graph_t *random_stage_graph(uint64_t seed, int S, int R)
{
    pf_rng_t rng;
    double cu[MAXN], P[MAXN], M[MAXN * MAXN] = {0};
    pf_rng_seed(&rng, seed);
    for (int s = 0; s < S; s++) {
        cu[s] = pf_rng_range(&rng, 1, 10);
        P[s] = pf_rng_range(&rng, 1e7, 3e8);
    }
    for (int s = 0; s + 1 < S; s++)
        for (int t = s + 1; t < S; t++)
            if (t == s + 1 || pf_rng_uniform(&rng) < 0.3)
                M[s * S + t] = M[t * S + s] = pf_rng_range(&rng, 1e7, 2e8);
    return pf_stage_graph_new(S, R, cu, P, M);
}

static inline pf_cluster_t *new_cluster(const char *name, int D)
{
    pf_cluster_t *c = pf_cluster_new(name, D);
    for (int i = 0; i < D; i++) {
        pf_device_t d = {.id = i, .host = i, .mem_bytes = 16e9};
        pf_cluster_set_device(c, i, &d);
    }
    return c;
}

/* Random bandwidths in [1, 100) GB/s, symmetric except on seeds divisible by 3 (each direction
 * drawn on its own, as a profiler measures them); on odd seeds random latencies in [0, 50) us. */
static inline pf_cluster_t *random_cluster(uint64_t seed, int D)
{
    pf_rng_t rng;
    pf_rng_seed(&rng, seed * 7919 + 1);
    pf_cluster_t *c = new_cluster("random", D);
    for (int a = 0; a < D; a++)
        for (int b = a + 1; b < D; b++) {
            pf_cluster_set_link(c, a, b, pf_rng_range(&rng, 1, 100),
                                seed % 2 ? pf_rng_range(&rng, 0, 50) : 0);
            if (seed % 3 == 0) {
                pf_cluster_set_bw(c, b, a, pf_rng_range(&rng, 1, 100));
                pf_cluster_set_lat(c, b, a, seed % 2 ? pf_rng_range(&rng, 0, 50) : 0);
            }
        }
    return c;
}

/* Parmesan's two-level hierarchy: hosts x gpus, 11 GB/s inside a host, 1.1 GB/s across. */
static inline pf_cluster_t *two_level(int hosts, int gpus)
{
    pf_cluster_t *c = new_cluster("two-level", hosts * gpus);
    for (int a = 0; a < hosts * gpus; a++) {
        pf_device_t d = {.id = a, .host = a / gpus, .mem_bytes = 16e9};
        pf_cluster_set_device(c, a, &d);
        for (int b = 0; b < a; b++)
            pf_cluster_set_link(c, a, b, a / gpus == b / gpus ? 11 : 1.1,
                                a / gpus == b / gpus ? 5 : 20);
    }
    return c;
}

/* ---------------------------------------------------------------- brute force */

typedef struct {
    const pf_stage_graph_t *sg;
    const pf_cluster_t *c;
    pf_map_inst_t inst;
    int N, D;
    int dev[MAXN], used[MAXN];
    double best;
    long long count;
} brute_t;

static inline void brute_rec(brute_t *b, int x)
{
    if (x == b->N) {
        double t = pf_mapping_objective_ms(b->sg, b->c, b->inst, b->dev);
        if (t < b->best)
            b->best = t;
        b->count++;
        return;
    }
    for (int d = 0; d < b->D; d++) {
        if (b->used[d])
            continue;
        b->used[d] = 1;
        b->dev[x] = d;
        brute_rec(b, x + 1);
        b->used[d] = 0;
    }
}

/* The optimum of eq. 5 over every one-to-one mapping of the S x R stage replicas. */
static inline double brute_force(const pf_stage_graph_t *sg, const pf_cluster_t *c,
                                 pf_map_inst_t inst)
{
    brute_t b = {.sg = sg, .c = c, .inst = inst, .best = INFINITY};
    b.N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg);
    b.D = pf_cluster_ndevices(c);
    brute_rec(&b, 0);
    return b.best;
}

static inline int is_injective(const int *dev, int N, int D)
{
    int used[64] = {0};
    for (int x = 0; x < N; x++) {
        if (dev[x] < 0 || dev[x] >= D || used[dev[x]])
            return 0;
        used[dev[x]] = 1;
    }
    return 1;
}

static inline pf_mapping_opts_t exact_opts(pf_map_inst_t inst, int symmetry, int threads, int batch)
{
    pf_mapping_opts_t o;
    pf_mapping_opts_init(&o);
    o.inst = inst;
    o.symmetry = symmetry;
    o.threads = threads;
    o.batch = batch;
    o.probe_seconds = 0; /* exact: no deadline */
    o.rel_eps = 1e-6;
    return o;
}

#endif
