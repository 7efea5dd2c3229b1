/* mapping: eq. 5-11 by hand, Algorithms 1 and 2 against brute force over every one-to-one
 * mapping, Theorem 3's reduction from Hamiltonian path, symmetry pruning, the baselines, the
 * plan driver and the command. */
#include "planner/map/mapping.h"
#include "planner/core/rng.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 12

/* ---------------------------------------------------------------- fixtures */

/* S stages: a chain s -> s+1 plus skip edges with probability 0.3; c_u in [1, 10) ms, P in
 * [1e7, 3e8) bytes, M in [1e7, 2e8) bytes (10 GB/s: 1 to 20 ms per transfer, the same order as
 * c_u, so that placement matters). */
static pf_stage_graph_t *random_stage_graph(uint64_t seed, int S, int R)
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

static pf_cluster_t *new_cluster(const char *name, int D)
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
static pf_cluster_t *random_cluster(uint64_t seed, int D)
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
static pf_cluster_t *two_level(int hosts, int gpus)
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
    pf_inst_t inst;
    int N, D;
    int dev[MAXN], used[MAXN];
    double best;
    long long count;
} brute_t;

static void brute_rec(brute_t *b, int x)
{
    if (x == b->N) {
        double t = pf_map_objective_ms(b->sg, b->c, b->inst, b->dev);
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
static double brute_force(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst)
{
    brute_t b = {.sg = sg, .c = c, .inst = inst, .best = INFINITY};
    b.N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg);
    b.D = pf_cluster_ndevices(c);
    brute_rec(&b, 0);
    return b.best;
}

static int is_injective(const int *dev, int N, int D)
{
    int used[64] = {0};
    for (int x = 0; x < N; x++) {
        if (dev[x] < 0 || dev[x] >= D || used[dev[x]])
            return 0;
        used[dev[x]] = 1;
    }
    return 1;
}

static pf_map_opts_t exact_opts(pf_inst_t inst, int symmetry, int threads, int batch)
{
    pf_map_opts_t o;
    pf_map_opts_init(&o);
    o.inst = inst;
    o.symmetry = symmetry;
    o.threads = threads;
    o.batch = batch;
    o.probe_seconds = 0; /* exact: no deadline */
    o.rel_eps = 1e-6;
    return o;
}

/* Search, probes just above and below the optimum, and Proposition 1, for one case. */
static void check_against_brute(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst,
                                int threads, int batch, int symmetry)
{
    char err[256];
    int N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg), D = pf_cluster_ndevices(c);
    int dev[MAXN], dev2[MAXN];
    double opt = brute_force(sg, c, inst);

    double lo, hi;
    CU_ASSERT_EQUAL_FATAL(pf_map_bounds(sg, c, inst, 5, &lo, &hi, dev, err, sizeof err), PF_OK);
    CU_ASSERT(lo <= opt * (1 + 1e-12)); /* Proposition 1 */
    CU_ASSERT(hi >= opt * (1 - 1e-12));
    PF_ASSERT_CLOSE(hi, pf_map_objective_ms(sg, c, inst, dev), 0);

    pf_map_opts_t o = exact_opts(inst, symmetry, threads, batch);
    pf_map_stats_t st;
    CU_ASSERT_EQUAL_FATAL(pf_map_search(sg, c, &o, dev, &st, err, sizeof err), PF_OK);
    CU_ASSERT(is_injective(dev, N, D));
    CU_ASSERT(st.objective_ms <= opt * (1 + o.rel_eps) + 1e-12);
    CU_ASSERT(st.objective_ms >= opt * (1 - 1e-12));
    CU_ASSERT(st.lower_ms <= opt * (1 + 1e-12));
    CU_ASSERT(st.lower_proven);
    CU_ASSERT_EQUAL(st.probes_timed_out, 0);
    PF_ASSERT_CLOSE(st.objective_ms, pf_map_objective_ms(sg, c, inst, dev), 0);

    pf_probe_result_t res;
    CU_ASSERT_EQUAL(pf_map_probe(sg, c, inst, opt * (1 + 1e-9), 0, symmetry, threads, NULL, dev, &res,
                                 err, sizeof err), PF_OK);
    CU_ASSERT(res.found);
    CU_ASSERT(res.objective_ms <= opt * (1 + 1e-9));
    CU_ASSERT(is_injective(dev, N, D));
    PF_ASSERT_CLOSE(res.objective_ms, pf_map_objective_ms(sg, c, inst, dev), 0);
    /* the same mapping whatever the thread count */
    CU_ASSERT_EQUAL(pf_map_probe(sg, c, inst, opt * (1 + 1e-9), 0, symmetry, 1, NULL, dev2, &res, err,
                                 sizeof err), PF_OK);
    CU_ASSERT(memcmp(dev, dev2, (size_t)N * sizeof *dev) == 0);
    CU_ASSERT_EQUAL(pf_map_probe(sg, c, inst, opt * (1 - 1e-6), 0, symmetry, threads, NULL, dev, &res,
                                 err, sizeof err), PF_OK);
    CU_ASSERT(!res.found);
    CU_ASSERT(!res.timed_out);
}

static void test_brute_force(void)
{
    static const int cases[][3] = {/* S, R, spare devices */
                                   {2, 2, 0}, {4, 2, 0}, {2, 4, 0}, {8, 1, 0}, {3, 2, 0},
                                   {6, 1, 0}, {4, 1, 0}, {3, 2, 1}, {2, 3, 1}, {5, 1, 2}};
    int ncases = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < ncases; i++) {
        int S = cases[i][0], R = cases[i][1], D = S * R + cases[i][2];
        int seeds = S * R + cases[i][2] >= 8 ? 2 : 5;
        for (int seed = 1; seed <= seeds; seed++) {
            pf_stage_graph_t *sg = random_stage_graph((uint64_t)(100 * i + seed), S, R);
            pf_cluster_t *c = random_cluster((uint64_t)(100 * i + seed), D);
            for (int inst = 0; inst < 3; inst++)
                check_against_brute(sg, c, (pf_inst_t)inst, 1 + seed % 2, 1 + (seed % 3 == 0) * 2,
                                    1);
            pf_stage_graph_destroy(&sg);
            pf_cluster_destroy(&c);
        }
    }
}

/* ---------------------------------------------------------------- independent evaluator */

/* DESIGN.md's stage time, from the raw numbers (not pf_map_*): c_u + eq. 6 over the neighbours
 * in the same replica (lat us / 1000 + M / (B x 1e9) s in ms, sender's row) + eq. 7 over the ring
 * 0, 1, ..., R-1, 0 (0 when R = 1). */
typedef struct {
    int S, R, D;
    double cu[MAXN], P[MAXN], M[MAXN * MAXN], bw[MAXN * MAXN], lat[MAXN * MAXN];
    int dev[MAXN], used[MAXN];
    double best;
} indep_t;

static double indep_objective(const indep_t *x, pf_inst_t inst, const int *dev)
{
    double worst = 0;
    for (int s = 0; s < x->S; s++)
        for (int r = 0; r < x->R; r++) {
            double t = x->cu[s], ring = 0;
            int a = dev[s * x->R + r];
            for (int s2 = 0; s2 < x->S && inst != PF_INST_AR; s2++)
                if (s2 != s && x->M[s * x->S + s2] > 0) {
                    int b = dev[s2 * x->R + r];
                    t += x->lat[a * x->D + b] / 1000 +
                         x->M[s * x->S + s2] / (x->bw[a * x->D + b] * 1e9) * 1e3;
                }
            for (int q = 0; q < x->R && inst != PF_INST_M && x->R > 1; q++) {
                int u = dev[s * x->R + q], w = dev[s * x->R + (q + 1) % x->R];
                ring = fmax(ring, 2.0 * (x->R - 1) / x->R * x->P[s] / (x->bw[u * x->D + w] * 1e9) *
                                      1e3);
            }
            worst = fmax(worst, t + ring);
        }
    return worst;
}

static void indep_rec(indep_t *x, pf_inst_t inst, int k)
{
    if (k == x->S * x->R) {
        x->best = fmin(x->best, indep_objective(x, inst, x->dev));
        return;
    }
    for (int d = 0; d < x->D; d++)
        if (!x->used[d]) {
            x->used[d] = 1;
            x->dev[k] = d;
            indep_rec(x, inst, k + 1);
            x->used[d] = 0;
        }
}

/* Clusters the other tests lack, with up to 2 spare devices: kind 0, devices in 1-3 groups with
 * a bandwidth and latency per ordered pair of groups (interchangeable devices, asymmetric
 * between groups); 1, every direction drawn on its own; 2, latency-dominated (1-3 ms latencies,
 * 100 GB/s, kilobyte messages); 3, two bandwidth values and no latency (ties everywhere).
 * Stages with c_u or P = 0 now and then, S and R from 1. Checked: pf_map_objective_ms equals
 * the evaluator above; eq. 10 / 11 / joint bound <= the optimum; the search reaches it within
 * eps with and without symmetry pruning, 1 or 2 threads, batch 1 or 3; a probe at the optimum
 * finds a mapping and one just below does not. */
static void test_independent_evaluator(void)
{
    char err[256];
    int cases = 0, with_classes = 0;
    for (uint64_t seed = 1; seed <= 80; seed++) {
        pf_rng_t rng;
        pf_rng_seed(&rng, seed * 31 + 7);
        static indep_t x;
        memset(&x, 0, sizeof x);
        do {
            x.S = 1 + (int)pf_rng_below(&rng, 5);
            x.R = 1 + (int)pf_rng_below(&rng, 4);
        } while (x.S * x.R > 7);
        int N = x.S * x.R, kind = (int)pf_rng_below(&rng, 4), groups = 1 + (int)pf_rng_below(&rng, 3);
        x.D = N + (int)pf_rng_below(&rng, 3);
        if (x.D > 8)
            x.D = 8;
        int grp[MAXN];
        double gbw[3][3], glat[3][3];
        for (int d = 0; d < x.D; d++)
            grp[d] = (int)pf_rng_below(&rng, (uint64_t)groups);
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) {
                gbw[a][b] = pf_rng_range(&rng, 1, 50);
                glat[a][b] = pf_rng_range(&rng, 0, 30);
            }
        for (int a = 0; a < x.D; a++)
            for (int b = 0; b < x.D; b++) {
                double *bw = &x.bw[a * x.D + b], *lat = &x.lat[a * x.D + b];
                if (a == b)
                    continue;
                if (kind == 0) {
                    *bw = gbw[grp[a]][grp[b]];
                    *lat = glat[grp[a]][grp[b]];
                } else if (kind == 1) {
                    *bw = pf_rng_range(&rng, 1, 50);
                    *lat = pf_rng_range(&rng, 0, 30);
                } else if (kind == 2) {
                    *bw = 100;
                    *lat = (double)(1 + pf_rng_below(&rng, 3)) * 1000;
                } else {
                    *bw = (double)(1 + pf_rng_below(&rng, 2)) * 10;
                }
            }
        pf_cluster_t *c = new_cluster("indep", x.D);
        for (int a = 0; a < x.D; a++)
            for (int b = 0; b < x.D; b++)
                if (a != b) {
                    pf_cluster_set_bw(c, a, b, x.bw[a * x.D + b]);
                    pf_cluster_set_lat(c, a, b, x.lat[a * x.D + b]);
                }
        int cls[MAXN];
        with_classes += pf_map_symmetry_device_classes(c, cls) < x.D;
        double scale = kind == 2 ? 1e-3 : 1;
        for (int s = 0; s < x.S; s++) {
            x.cu[s] = pf_rng_uniform(&rng) < 0.2 ? 0 : pf_rng_range(&rng, 0, 10);
            x.P[s] = pf_rng_uniform(&rng) < 0.2 ? 0 : pf_rng_range(&rng, 1e7, 3e8) * scale;
        }
        for (int s = 0; s < x.S; s++)
            for (int t = s + 1; t < x.S; t++)
                if (pf_rng_uniform(&rng) < (t == s + 1 ? 0.9 : 0.3))
                    x.M[s * x.S + t] = x.M[t * x.S + s] = pf_rng_range(&rng, 1e7, 2e8) * scale;
        pf_stage_graph_t *sg = pf_stage_graph_new(x.S, x.R, x.cu, x.P, x.M);
        CU_ASSERT_PTR_NOT_NULL_FATAL(sg);
        for (int inst = 0; inst < 3; inst++) {
            x.best = INFINITY;
            indep_rec(&x, (pf_inst_t)inst, 0);
            double opt = x.best, lo, hi;
            int dev[MAXN];
            cases++;
            CU_ASSERT_EQUAL_FATAL(pf_map_bounds(sg, c, (pf_inst_t)inst, 5, &lo, &hi, dev, err,
                                                sizeof err), PF_OK);
            PF_ASSERT_CLOSE(pf_map_objective_ms(sg, c, (pf_inst_t)inst, dev),
                            indep_objective(&x, (pf_inst_t)inst, dev), 1e-12);
            CU_ASSERT(lo <= opt * (1 + 1e-12));
            int sym = (int)(seed % 2), threads = 1 + (int)(seed / 2 % 2);
            pf_map_opts_t o = exact_opts((pf_inst_t)inst, sym, threads, seed % 3 ? 1 : 3);
            o.rel_eps = 1e-7;
            pf_map_stats_t st;
            CU_ASSERT_EQUAL_FATAL(pf_map_search(sg, c, &o, dev, &st, err, sizeof err), PF_OK);
            CU_ASSERT(is_injective(dev, N, x.D));
            CU_ASSERT(st.objective_ms <= opt * (1 + 1e-6) + 1e-12);
            PF_ASSERT_CLOSE(st.objective_ms, indep_objective(&x, (pf_inst_t)inst, dev), 1e-12);
            CU_ASSERT(st.lower_ms <= opt * (1 + 1e-12));
            pf_probe_result_t res;
            CU_ASSERT_EQUAL(pf_map_probe(sg, c, (pf_inst_t)inst, opt * (1 + 1e-9), 0, sym, threads,
                                         NULL, dev, &res, err, sizeof err), PF_OK);
            CU_ASSERT(res.found);
            if (opt > 0) {
                CU_ASSERT_EQUAL(pf_map_probe(sg, c, (pf_inst_t)inst, opt * (1 - 1e-7), 0, sym,
                                             threads, NULL, dev, &res, err, sizeof err), PF_OK);
                CU_ASSERT(!res.found);
            }
        }
        pf_stage_graph_destroy(&sg);
        pf_cluster_destroy(&c);
    }
    CU_ASSERT_EQUAL(cases, 240);
    CU_ASSERT(with_classes >= 10); /* the symmetry rules had devices to prune */
}

/* ---------------------------------------------------------------- hand-worked example */

/* Two stages, two replicas, four devices.
 *   c_u = 1, 2 ms; P = 1e9, 2e9 bytes; M(0, 1) = 1e8 bytes.
 *   B(0,1) = B(2,3) = 100 GB/s, lat 2 us; B(0,2) = B(1,3) = 10 GB/s, lat 10 us;
 *   B(0,3) = B(1,2) = 1 GB/s, lat 10 us.
 * CS map: x = s * R + r -> device x: (s0: 0, 1), (s1: 2, 3).
 *   eq. 8: every stage replica talks over a 10 GB/s link: 0.010 + 1e8 / 1e7 = 10.01 ms.
 *   eq. 9 (R = 2: 2 (R-1)/R = 1, ring pairs 0->1 and 1->0): s0 over 100 GB/s: 1e9 / 1e8 = 10 ms;
 *   s1: 2e9 / 1e8 = 20 ms.
 *   m:    s0: 1 + 10.01 = 11.01, s1: 2 + 10.01 = 12.01           -> 12.01
 *   ar:   s0: 1 + 10 = 11,       s1: 2 + 20 = 22                 -> 22
 *   full: s0: 1 + 10.01 + 10 = 21.01, s1: 2 + 10.01 + 20 = 32.01 -> 32.01
 *   step (MB = 4): (4 + 2 - 1) x 12.01 + 20 = 80.05
 * p2p map: replica r stage s -> r * S + s: dev = (s0: 0, 2), (s1: 1, 3).
 *   eq. 8 over 100 GB/s: 0.002 + 1e8 / 1e8 = 1.002 ms; m: s0 2.002, s1 3.002 -> 3.002
 *   eq. 9: s0 over B(0,2) = 10: 1e9 / 1e7 = 100; s1 over B(1,3) = 10: 200.
 *   full: s1: 2 + 1.002 + 200 = 203.002
 * Lower bounds. m (eq. 10): s1 on any device: 2 + min lat 0.002 + 1e8 / max bw 1e8 = 3.002, equal
 * to the p2p map, so the search needs no probe. ar (eq. 11): s1 on any device, best partner over
 * 100 GB/s both ways: 2 + 20 = 22, equal to the CS map. full (joint): s1: 2 + 1.002 + 20 = 23.002.
 * The full optimum: s1's ring must use a 100 GB/s pair ({0,1} or {2,3}; else >= 200 ms), then
 * s0 sits on the other pair and every m transfer crosses at best 10 GB/s: 32.01. */
static void test_hand_worked(void)
{
    char err[256];
    double cu[2] = {1, 2}, P[2] = {1e9, 2e9}, M[4] = {0, 1e8, 1e8, 0};
    pf_stage_graph_t *sg = pf_stage_graph_new(2, 2, cu, P, M);
    pf_cluster_t *c = new_cluster("hand", 4);
    pf_cluster_set_link(c, 0, 1, 100, 2);
    pf_cluster_set_link(c, 2, 3, 100, 2);
    pf_cluster_set_link(c, 0, 2, 10, 10);
    pf_cluster_set_link(c, 1, 3, 10, 10);
    pf_cluster_set_link(c, 0, 3, 1, 10);
    pf_cluster_set_link(c, 1, 2, 1, 10);
    int cs[4], p2p[4], dev[4];
    pf_map_cs(sg, cs);
    pf_map_p2p(sg, p2p);
    CU_ASSERT(cs[0] == 0 && cs[1] == 1 && cs[2] == 2 && cs[3] == 3);
    CU_ASSERT(p2p[0] == 0 && p2p[1] == 2 && p2p[2] == 1 && p2p[3] == 3);

    PF_ASSERT_CLOSE(pf_map_stage_time_ms(sg, c, PF_INST_M, cs, 0), 11.01, 1e-12);
    PF_ASSERT_CLOSE(pf_map_stage_time_ms(sg, c, PF_INST_M, cs, 3), 12.01, 1e-12);
    PF_ASSERT_CLOSE(pf_map_stage_time_ms(sg, c, PF_INST_AR, cs, 1), 11.0, 1e-12);
    PF_ASSERT_CLOSE(pf_map_stage_time_ms(sg, c, PF_INST_AR, cs, 2), 22.0, 1e-12);
    PF_ASSERT_CLOSE(pf_map_stage_time_ms(sg, c, PF_INST_FULL, cs, 0), 21.01, 1e-12);
    PF_ASSERT_CLOSE(pf_map_stage_time_ms(sg, c, PF_INST_FULL, cs, 2), 32.01, 1e-12);
    PF_ASSERT_CLOSE(pf_map_objective_ms(sg, c, PF_INST_M, cs), 12.01, 1e-12);
    PF_ASSERT_CLOSE(pf_map_objective_ms(sg, c, PF_INST_AR, cs), 22.0, 1e-12);
    PF_ASSERT_CLOSE(pf_map_objective_ms(sg, c, PF_INST_FULL, cs), 32.01, 1e-12);
    PF_ASSERT_CLOSE(pf_map_step_estimate_ms(sg, c, cs, 4), 80.05, 1e-12);
    PF_ASSERT_CLOSE(pf_map_objective_ms(sg, c, PF_INST_M, p2p), 3.002, 1e-12);
    PF_ASSERT_CLOSE(pf_map_objective_ms(sg, c, PF_INST_AR, p2p), 202.0, 1e-12);
    PF_ASSERT_CLOSE(pf_map_objective_ms(sg, c, PF_INST_FULL, p2p), 203.002, 1e-12);

    double lo, hi;
    CU_ASSERT_EQUAL(pf_map_bounds(sg, c, PF_INST_M, 1, &lo, &hi, dev, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(lo, 3.002, 1e-12);
    PF_ASSERT_CLOSE(hi, 3.002, 1e-12);
    CU_ASSERT_EQUAL(pf_map_bounds(sg, c, PF_INST_AR, 1, &lo, &hi, dev, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(lo, 22.0, 1e-12);
    PF_ASSERT_CLOSE(hi, 22.0, 1e-12);
    CU_ASSERT_EQUAL(pf_map_bounds(sg, c, PF_INST_FULL, 1, &lo, &hi, dev, err, sizeof err),
                    PF_OK);
    PF_ASSERT_CLOSE(lo, 23.002, 1e-12);

    pf_map_opts_t o = exact_opts(PF_INST_M, 1, 1, 1);
    pf_map_stats_t st;
    CU_ASSERT_EQUAL(pf_map_search(sg, c, &o, dev, &st, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(st.objective_ms, 3.002, 1e-12);
    CU_ASSERT_EQUAL(st.probes, 0);
    o.inst = PF_INST_FULL;
    CU_ASSERT_EQUAL(pf_map_search(sg, c, &o, dev, &st, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(st.objective_ms, 32.01, 1e-12);
    PF_ASSERT_CLOSE(brute_force(sg, c, PF_INST_FULL), 32.01, 1e-12);
    CU_ASSERT(st.probes > 0);

    /* all-reduce bytes 2e9 + ... : sum 1 x (1e9 + 2e9) = 3e9 > 1e8 inter-stage bytes: ar */
    CU_ASSERT_EQUAL(pf_map_auto_instantiation(sg), PF_INST_AR);
    PF_ASSERT_CLOSE(pf_stage_graph_total_allreduce_bytes(sg), 3e9, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_total_p2p_bytes(sg), 1e8, 1e-15);
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&c);
}

static void test_baselines_three_by_two(void)
{
    double cu[3] = {1, 1, 1}, P[3] = {0, 0, 0}, M[9] = {0};
    pf_stage_graph_t *sg = pf_stage_graph_new(3, 2, cu, P, M);
    int cs[6], p2p[6];
    int want_cs[6] = {0, 1, 2, 3, 4, 5};
    /* x = s * 2 + r -> r * 3 + s: (0,0)->0 (0,1)->3 (1,0)->1 (1,1)->4 (2,0)->2 (2,1)->5 */
    int want_p2p[6] = {0, 3, 1, 4, 2, 5};
    pf_map_cs(sg, cs);
    pf_map_p2p(sg, p2p);
    CU_ASSERT(memcmp(cs, want_cs, sizeof cs) == 0);
    CU_ASSERT(memcmp(p2p, want_p2p, sizeof p2p) == 0);
    pf_stage_graph_destroy(&sg);
}

/* ---------------------------------------------------------------- stage graph */

/* ops 0..5, stages {0,1} {2,3} {4,5}; edges 0->1 (5), 1->2 (7), 0->3 (11), 3->4 (13), 1->5 (17).
 * M(0,1) = 7 + 11 = 18, M(1,2) = 13, M(0,2) = 17. c_u(v) = 3 (v + 1) ms (fwd v+1, bwd 2(v+1)),
 * so c_u(s0) = 3 + 6 = 9, c_u(s1) = 9 + 12 = 21, c_u(s2) = 15 + 18 = 33; P(v) = 100 v. */
static void test_stage_graph_from_plan(void)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("six", 1);
    for (int v = 0; v < 6; v++) {
        pf_op_t op = {.id = 10 + v, .fwd_ms = v + 1, .bwd_ms = 2 * (v + 1),
                      .param_bytes = 100 * v};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 5);
    pf_graph_add_edge(g, 1, 2, 7);
    pf_graph_add_edge(g, 0, 3, 11);
    pf_graph_add_edge(g, 3, 4, 13);
    pf_graph_add_edge(g, 1, 5, 17);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_plan_t *p = pf_plan_new(3, 2);
    int a[] = {0, 1}, b[] = {2, 3}, c[] = {4, 5};
    pf_plan_set_stage_ops(p, 0, a, 2);
    pf_plan_set_stage_ops(p, 1, b, 2);
    pf_plan_set_stage_ops(p, 2, c, 2);
    pf_stage_graph_t *sg = pf_stage_graph_from_plan(g, p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sg);
    CU_ASSERT_EQUAL(pf_stage_graph_stages(sg), 3);
    CU_ASSERT_EQUAL(pf_stage_graph_replicas(sg), 2);
    PF_ASSERT_CLOSE(pf_stage_graph_cu_ms(sg, 0), 9, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_cu_ms(sg, 1), 21, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_cu_ms(sg, 2), 33, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_param_bytes(sg, 2), 900, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_msg_bytes(sg, 0, 1), 18, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_msg_bytes(sg, 1, 0), 18, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_msg_bytes(sg, 1, 2), 13, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_msg_bytes(sg, 2, 0), 17, 1e-15);
    /* 2 (R-1)/R P = P for R = 2 */
    PF_ASSERT_CLOSE(pf_stage_graph_allreduce_bytes(sg, 1), 500, 1e-15);
    int k;
    const int *nb = pf_stage_graph_neighbors(sg, 0, &k);
    CU_ASSERT(k == 2 && nb[0] == 1 && nb[1] == 2);
    pf_stage_graph_destroy(&sg);
    pf_stage_graph_destroy(&sg); /* idempotent */

    /* raw numbers: M must be symmetric and finite, counts positive */
    double cu2[2] = {1, 1}, P2[2] = {0, 0}, Masym[4] = {0, 1, 2, 0}, Mneg[4] = {0, -1, -1, 0};
    CU_ASSERT_PTR_NULL(pf_stage_graph_new(2, 1, cu2, P2, Masym));
    CU_ASSERT_PTR_NULL(pf_stage_graph_new(2, 1, cu2, P2, Mneg));
    CU_ASSERT_PTR_NULL(pf_stage_graph_new(0, 1, cu2, P2, Mneg));
    pf_plan_destroy(&p);
    pf_graph_destroy(&g);
}

/* ---------------------------------------------------------------- Theorem 3 */

static int has_ham_path_rec(const int adj[8][8], int n, int *used, int last, int count)
{
    if (count == n)
        return 1;
    for (int v = 0; v < n; v++)
        if (!used[v] && (last < 0 || adj[last][v])) {
            used[v] = 1;
            int ok = has_ham_path_rec(adj, n, used, v, count + 1);
            used[v] = 0;
            if (ok)
                return 1;
        }
    return 0;
}

/* Theorem 3 (App. A-E): n devices, bandwidth 1 GB/s between devices joined by an edge of G and
 * 0.5 GB/s elsewhere; a chain of n stages, R = 1, c_u = 0, messages of 5e5 bytes between
 * consecutive stages. One transfer then costs 0.5 ms over an edge of G and 1 ms otherwise. Under
 * m an inner stage pays two transfers: 1 ms when both are over edges of G, >= 1.5 ms otherwise;
 * an end stage pays one, <= 1 ms. So max stage time <= 1 ms <=> consecutive stages sit on
 * adjacent vertices of G <=> the stage order is a Hamiltonian path of G. (With n = 2 the
 * stages are ends only; the graphs below have n = 5.) */
static void check_hamiltonian(const int adj[8][8], int n, const char *what)
{
    char err[256];
    double cu[8] = {0}, P[8] = {0}, M[64] = {0};
    for (int s = 0; s + 1 < n; s++)
        M[s * n + s + 1] = M[(s + 1) * n + s] = 5e5;
    pf_stage_graph_t *sg = pf_stage_graph_new(n, 1, cu, P, M);
    pf_cluster_t *c = new_cluster("ham", n);
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            pf_cluster_set_link(c, a, b, adj[a][b] ? 1.0 : 0.5, 0);
    int used[8] = {0}, dev[8];
    int want = has_ham_path_rec(adj, n, used, -1, 0);
    for (int sym = 0; sym < 2; sym++) {
        pf_probe_result_t res;
        CU_ASSERT_EQUAL_FATAL(pf_map_probe(sg, c, PF_INST_M, 1.0, 0, sym, 1, NULL, dev, &res, err,
                                           sizeof err), PF_OK);
        if (res.found != want)
            fprintf(stderr, "\n  %s: Hamiltonian path %d, probe found %d\n", what, want,
                    res.found);
        CU_ASSERT_EQUAL(res.found, want);
        if (res.found) /* the devices in stage order walk along edges of G */
            for (int s = 0; s + 1 < n; s++)
                CU_ASSERT(adj[dev[s]][dev[s + 1]]);
    }
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&c);
}

static void test_theorem3_reduction(void)
{
    int n = 5, adj[8][8];
    char what[64];
    /* every graph on 5 labelled vertices (10 possible edges: 1024 edge masks) */
    for (int mask = 0; mask < 1024; mask++) {
        int k = 0;
        memset(adj, 0, sizeof adj);
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++, k++)
                if (mask >> k & 1)
                    adj[a][b] = adj[b][a] = 1;
        snprintf(what, sizeof what, "edge mask %d", mask);
        check_hamiltonian(adj, n, what);
    }
    for (uint64_t seed = 1; seed <= 6; seed++) {
        pf_rng_t rng;
        pf_rng_seed(&rng, seed);
        memset(adj, 0, sizeof adj);
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++)
                if (pf_rng_uniform(&rng) < 0.45)
                    adj[a][b] = adj[b][a] = 1;
        snprintf(what, sizeof what, "random graph seed %llu", (unsigned long long)seed);
        check_hamiltonian(adj, n, what);
    }
    memset(adj, 0, sizeof adj); /* a path 3-0-4-1-2: Hamiltonian */
    int path[5] = {3, 0, 4, 1, 2};
    for (int i = 0; i + 1 < n; i++)
        adj[path[i]][path[i + 1]] = adj[path[i + 1]][path[i]] = 1;
    check_hamiltonian(adj, n, "path");
    memset(adj, 0, sizeof adj); /* a star: no Hamiltonian path for n >= 4 */
    for (int v = 1; v < n; v++)
        adj[0][v] = adj[v][0] = 1;
    check_hamiltonian(adj, n, "star");
    memset(adj, 0, sizeof adj); /* a triangle and an edge: disconnected */
    adj[0][1] = adj[1][0] = adj[1][2] = adj[2][1] = adj[0][2] = adj[2][0] = 1;
    adj[3][4] = adj[4][3] = 1;
    check_hamiltonian(adj, n, "disconnected");
}

/* ---------------------------------------------------------------- symmetry */

static void test_symmetry(void)
{
    char err[256];
    int cls[8];
    pf_cluster_t *c = two_level(2, 4);
    CU_ASSERT_EQUAL(pf_map_symmetry_device_classes(c, cls), 2);
    CU_ASSERT(cls[0] == 0 && cls[3] == 0 && cls[4] == 1 && cls[7] == 1);
    pf_cluster_t *r = random_cluster(3, 6);
    CU_ASSERT_EQUAL(pf_map_symmetry_device_classes(r, cls), 6);
    pf_cluster_destroy(&r);

    long long sym_pruned = 0, nodes_with = 0, nodes_without = 0;
    static const int cases[][2] = {{2, 4}, {4, 2}, {8, 1}, {2, 2}, {3, 2}};
    for (int i = 0; i < 5; i++) {
        int S = cases[i][0], R = cases[i][1];
        pf_cluster_t *cc = S * R == 8 ? c : two_level(2, S * R / 2);
        for (uint64_t seed = 1; seed <= 2; seed++) {
            pf_stage_graph_t *sg = random_stage_graph(seed + 50, S, R);
            for (int inst = 0; inst < 3; inst++) {
                double opt = brute_force(sg, cc, (pf_inst_t)inst);
                int dev[MAXN];
                pf_probe_result_t with, without;
                for (int side = 0; side < 2; side++) {
                    double t = side ? opt * (1 + 1e-9) : opt * (1 - 1e-6);
                    CU_ASSERT_EQUAL(pf_map_probe(sg, cc, (pf_inst_t)inst, t, 0, 1, 1, NULL, dev, &with,
                                                 err, sizeof err), PF_OK);
                    CU_ASSERT_EQUAL(pf_map_probe(sg, cc, (pf_inst_t)inst, t, 0, 0, 1, NULL, dev,
                                                 &without, err, sizeof err), PF_OK);
                    CU_ASSERT_EQUAL(with.found, side);
                    CU_ASSERT_EQUAL(without.found, side);
                    CU_ASSERT_EQUAL(without.symmetric_pruned, 0);
                    if (!side) { /* an infeasible probe explores its whole (pruned) tree */
                        CU_ASSERT(with.nodes <= without.nodes);
                        sym_pruned += with.symmetric_pruned;
                        nodes_with += with.nodes;
                        nodes_without += without.nodes;
                    }
                }
                /* the search: same optimum with and without */
                pf_map_opts_t o = exact_opts((pf_inst_t)inst, 1, 1, 1);
                pf_map_stats_t a, b;
                CU_ASSERT_EQUAL(pf_map_search(sg, cc, &o, dev, &a, err, sizeof err), PF_OK);
                o.symmetry = 0;
                CU_ASSERT_EQUAL(pf_map_search(sg, cc, &o, dev, &b, err, sizeof err), PF_OK);
                CU_ASSERT(a.objective_ms <= opt * (1 + 1e-6) + 1e-12);
                CU_ASSERT(b.objective_ms <= opt * (1 + 1e-6) + 1e-12);
            }
            pf_stage_graph_destroy(&sg);
        }
        if (cc != c)
            pf_cluster_destroy(&cc);
    }
    /* (Where eq. 10/11 already exceed the target the probe stops at the root in both modes.) */
    CU_ASSERT(sym_pruned > 0);
    CU_ASSERT(nodes_with < nodes_without);
    pf_cluster_destroy(&c);
}

/* ---------------------------------------------------------------- host blocks */

/* Whether the device permutation perm is an automorphism of both matrices (off the diagonal),
 * checked entry by entry: the definition pf_map_symmetry_host_blocks must meet. */
static int is_automorphism(const pf_cluster_t *c, const int *perm)
{
    int D = pf_cluster_ndevices(c);
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++)
            if (a != b && (pf_cluster_bw_gbps(c, perm[a], perm[b]) != pf_cluster_bw_gbps(c, a, b) ||
                           pf_cluster_lat_us(c, perm[a], perm[b]) != pf_cluster_lat_us(c, a, b)))
                return 0;
    return 1;
}

/* Every two blocks of one class: swapping them (i-th device by index <-> i-th) is an
 * automorphism. Returns the number of blocks. */
static int check_blocks(const pf_cluster_t *c, int *block, int *bclass)
{
    int D = pf_cluster_ndevices(c), perm[64], mem[64][64], size[64] = {0};
    int n = pf_map_symmetry_host_blocks(c, block, bclass, NULL);
    CU_ASSERT_FATAL(n >= 0 && n <= D / 2);
    for (int d = 0; d < D; d++)
        if (block[d] >= 0)
            mem[block[d]][size[block[d]]++] = d;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            if (bclass[a] != bclass[b])
                continue;
            CU_ASSERT_EQUAL_FATAL(size[a], size[b]);
            for (int d = 0; d < D; d++)
                perm[d] = d;
            for (int i = 0; i < size[a]; i++) {
                perm[mem[a][i]] = mem[b][i];
                perm[mem[b][i]] = mem[a][i];
            }
            CU_ASSERT(is_automorphism(c, perm));
        }
    for (int b = 0; b < n; b++) { /* classes of two or more, numbered by first block */
        int k = bclass[b], same = 0, earlier_max = -1;
        CU_ASSERT(size[b] >= 2);
        for (int b2 = 0; b2 < n; b2++)
            same += bclass[b2] == k && b2 != b;
        for (int b2 = 0; b2 < b; b2++)
            earlier_max = bclass[b2] > earlier_max ? bclass[b2] : earlier_max;
        CU_ASSERT(same >= 1);
        CU_ASSERT(k <= earlier_max + 1);
    }
    return n;
}

/* H blocks of G devices and `spare` devices in no block. Inside every block the same random
 * matrix (bandwidth in [5, 100) GB/s, latency in [0, 30) us, each direction drawn on its own);
 * between blocks one matrix by position, X(i, j) for the i-th device of one block and the j-th of
 * another (uniform when seed % 3 == 0), slower; a spare device e talks to the i-th device of
 * every block alike. Device of block h, position i: h * G + i, or i * H + h when interleaved (the
 * blocks are then not index intervals). Host labels: the block, spare devices one each; with
 * bad_hosts every device has its own host, so only the matrices can reveal the blocks. */
static pf_cluster_t *block_cluster(uint64_t seed, int H, int G, int spare, int interleaved,
                                   int bad_hosts)
{
    pf_rng_t rng;
    double ibw[4][4], ilat[4][4], xbw[4][4], xlat[4][4], sbw[2][4][2], slat[2][4][2];
    int D = H * G + spare;
    pf_rng_seed(&rng, seed * 131 + 5);
    for (int i = 0; i < G; i++)
        for (int j = 0; j < G; j++) {
            ibw[i][j] = pf_rng_range(&rng, 5, 100);
            ilat[i][j] = pf_rng_range(&rng, 0, 30);
            xbw[i][j] = seed % 3 == 0 ? 2.0 : pf_rng_range(&rng, 0.5, 5);
            xlat[i][j] = seed % 3 == 0 ? 40.0 : pf_rng_range(&rng, 20, 60);
        }
    for (int e = 0; e < spare; e++)
        for (int i = 0; i < G; i++)
            for (int dir = 0; dir < 2; dir++) {
                sbw[e][i][dir] = pf_rng_range(&rng, 0.5, 20);
                slat[e][i][dir] = pf_rng_range(&rng, 0, 60);
            }
    pf_cluster_t *c = pf_cluster_new("blocks", D);
    int hb[16], pos[16]; /* block and position of each device; -1 - e for spare e */
    for (int h = 0; h < H; h++)
        for (int i = 0; i < G; i++) {
            int d = interleaved ? i * H + h : h * G + i;
            hb[d] = h;
            pos[d] = i;
        }
    for (int e = 0; e < spare; e++) {
        hb[H * G + e] = -1 - e;
        pos[H * G + e] = 0;
    }
    for (int d = 0; d < D; d++) {
        pf_device_t dv = {.id = d, .host = bad_hosts ? d : hb[d] >= 0 ? hb[d] : H - hb[d],
                          .mem_bytes = 16e9};
        pf_cluster_set_device(c, d, &dv);
    }
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++) {
            if (a == b)
                continue;
            double bw, lat;
            if (hb[a] < 0 && hb[b] < 0) {
                bw = 1;
                lat = 50;
            } else if (hb[a] < 0) {
                bw = sbw[-1 - hb[a]][pos[b]][0];
                lat = slat[-1 - hb[a]][pos[b]][0];
            } else if (hb[b] < 0) {
                bw = sbw[-1 - hb[b]][pos[a]][1];
                lat = slat[-1 - hb[b]][pos[a]][1];
            } else if (hb[a] == hb[b]) {
                bw = ibw[pos[a]][pos[b]];
                lat = ilat[pos[a]][pos[b]];
            } else {
                bw = xbw[pos[a]][pos[b]];
                lat = xlat[pos[a]][pos[b]];
            }
            pf_cluster_set_bw(c, a, b, bw);
            pf_cluster_set_lat(c, a, b, lat);
        }
    return c;
}

static void test_host_blocks_detect(void)
{
    char err[256];
    int block[64], bclass[64], capped = 1;
    /* two DGX-1: the hybrid cube-mesh inside, 1.4 GB/s between; no two GPUs interchangeable */
    for (int machines = 2; machines <= 4; machines += 2) {
        pf_topology_opts_t to;
        pf_cluster_t *dgx = NULL;
        pf_topology_opts_init(&to, PF_TOPOLOGY_DGX1);
        to.machines = machines;
        CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &dgx, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL(pf_map_symmetry_device_classes(dgx, bclass), 8 * machines);
        CU_ASSERT_EQUAL(check_blocks(dgx, block, bclass), machines);
        CU_ASSERT_EQUAL(pf_map_symmetry_host_blocks(dgx, block, bclass, &capped), machines);
        CU_ASSERT_EQUAL(capped, 0);
        for (int d = 0; d < 8 * machines; d++)
            CU_ASSERT_EQUAL(block[d], d / 8);
        for (int b = 0; b < machines; b++)
            CU_ASSERT_EQUAL(bclass[b], 0);
        pf_cluster_destroy(&dgx);
    }
    /* the two-level system: 3 blocks of 2, one class */
    pf_cluster_t *c = two_level(3, 2);
    CU_ASSERT_EQUAL(check_blocks(c, block, bclass), 3);
    CU_ASSERT(block[0] == 0 && block[1] == 0 && block[4] == 2 && block[5] == 2);
    pf_cluster_destroy(&c);

    /* generated block clusters: contiguous or interleaved, host labels right or useless (then
     * the components of the links faster than the slowest one propose the blocks: that finds
     * them when there are no spare devices; spare devices whose links are faster than some
     * inside a block merge everything, and the detector finds nothing, which is sound) */
    for (uint64_t seed = 1; seed <= 16; seed++) {
        int H = 2 + (int)(seed % 2), G = 2 + (int)(seed / 2 % 2);
        int interleaved = seed % 4 < 2, bad_hosts = seed % 4 == 1, spare = (int)(seed % 3);
        c = block_cluster(seed, H, G, spare, interleaved, bad_hosts);
        int n = check_blocks(c, block, bclass);
        if (bad_hosts && spare) {
            CU_ASSERT(n == 0 || n == H);
        } else {
            CU_ASSERT_EQUAL(n, H);
        }
        for (int h = 0; h < H && n; h++)
            for (int i = 0; i < G; i++)
                CU_ASSERT_EQUAL(block[interleaved ? i * H + h : h * G + i], h);
        pf_cluster_destroy(&c);
    }

    /* Blocks alike by their host labels (3 x 2 devices, host = d / 2) but not by the matrices:
     * one entry at a time breaks the swap of blocks 0 and 1, inside a block (bandwidth), between
     * the two (the cross matrix: B(0, 3) != B(1, 2)), towards block 2 (latency only), and block
     * 0's position order (B(0, 1) != B(2, 3) one way). The detector must not put 0 and 1 in one
     * class; blocks it does report are still automorphic (check_blocks). */
    for (int variant = 0; variant < 4; variant++) {
        c = two_level(3, 2);
        if (variant == 0)
            pf_cluster_set_link(c, 0, 1, 12, 5);
        else if (variant == 1)
            pf_cluster_set_link(c, 0, 3, 1.2, 20);
        else if (variant == 2)
            pf_cluster_set_lat(c, 1, 4, 21);
        else
            pf_cluster_set_bw(c, 0, 1, 12);
        int n = check_blocks(c, block, bclass);
        CU_ASSERT(block[0] < 0 || block[2] < 0 || bclass[block[0]] != bclass[block[2]]);
        CU_ASSERT(n <= 2);
        pf_cluster_destroy(&c);
    }
    /* uniform links: every device interchangeable, and blocks by the host labels too */
    c = two_level(2, 3);
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++)
            if (a != b)
                pf_cluster_set_link(c, a, b, 5, 1);
    CU_ASSERT_EQUAL(pf_map_symmetry_device_classes(c, bclass), 1);
    CU_ASSERT_EQUAL(check_blocks(c, block, bclass), 2);
    pf_cluster_destroy(&c);
    /* random links: nothing */
    c = random_cluster(4, 8);
    CU_ASSERT_EQUAL(check_blocks(c, block, bclass), 0);
    pf_cluster_destroy(&c);
}

/* Brute force over every one-to-one mapping on block clusters (2-3 blocks of 2-3 devices, spare
 * devices, contiguous or interleaved, labels right or useless): under m, ar and full the search
 * with all rules, without the block rule and without any symmetry rule reaches the optimum within
 * eps, and probes at opt (1 + 1e-9) and opt (1 - 1e-6) find / do not find a mapping; the block
 * rule fires. */
static void test_host_blocks_brute(void)
{
    char err[256];
    static const int cases[][4] = {/* H, G, S, R */
                                   {2, 2, 2, 2}, {2, 3, 3, 2}, {3, 2, 2, 3}, {3, 2, 3, 2},
                                   {2, 3, 2, 3}, {3, 2, 6, 1}, {2, 2, 1, 4}, {2, 3, 5, 1}};
    long long block_pruned = 0, nodes[3] = {0, 0, 0};
    for (int i = 0; i < 8; i++) {
        int H = cases[i][0], G = cases[i][1], S = cases[i][2], R = cases[i][3];
        for (uint64_t seed = 1; seed <= 3; seed++) {
            int spare = H * G < 8 && seed != 2 ? 1 : 0;
            pf_cluster_t *c = block_cluster(seed + 10 * (uint64_t)i, H, G, spare, seed == 2,
                                            seed == 3);
            pf_stage_graph_t *sg = random_stage_graph(seed + 40 + 10 * (uint64_t)i, S, R);
            int N = S * R, D = H * G + spare, dev[MAXN];
            for (int inst = 0; inst < 3; inst++) {
                double opt = brute_force(sg, c, (pf_inst_t)inst);
                for (int sym = 0; sym <= 2; sym++) {
                    pf_map_opts_t o = exact_opts((pf_inst_t)inst, sym, 1 + (int)(seed % 2), 1);
                    pf_map_stats_t st;
                    CU_ASSERT_EQUAL_FATAL(pf_map_search(sg, c, &o, dev, &st, err, sizeof err),
                                          PF_OK);
                    CU_ASSERT(is_injective(dev, N, D));
                    CU_ASSERT(st.objective_ms <= opt * (1 + 1e-6) + 1e-12);
                    CU_ASSERT(st.objective_ms >= opt * (1 - 1e-12));
                    CU_ASSERT(st.lower_proven);
                    if (sym != PF_MAP_SYM_ALL)
                        CU_ASSERT_EQUAL(st.block_pruned, 0);
                    if (sym == PF_MAP_SYM_OFF)
                        CU_ASSERT_EQUAL(st.symmetric_pruned, 0);
                    for (int side = 0; side < 2; side++) {
                        pf_probe_result_t res;
                        double t = side ? opt * (1 + 1e-9) : opt * (1 - 1e-6);
                        CU_ASSERT_EQUAL(pf_map_probe(sg, c, (pf_inst_t)inst, t, 0, sym,
                                                     1 + (int)(seed % 2), NULL, dev, &res, err,
                                                     sizeof err), PF_OK);
                        CU_ASSERT_EQUAL(res.found, side);
                        CU_ASSERT(!res.timed_out);
                        if (side) {
                            CU_ASSERT(res.objective_ms <= opt * (1 + 1e-9));
                        } else {
                            nodes[sym] += res.nodes;
                        }
                        if (sym == PF_MAP_SYM_ALL)
                            block_pruned += res.block_pruned;
                    }
                }
            }
            pf_stage_graph_destroy(&sg);
            pf_cluster_destroy(&c);
        }
    }
    CU_ASSERT(block_pruned > 0);
    /* infeasible probes explore their whole tree: the block rule shrinks it */
    CU_ASSERT(nodes[PF_MAP_SYM_ALL] < nodes[PF_MAP_SYM_NO_BLOCKS]);
    CU_ASSERT(nodes[PF_MAP_SYM_NO_BLOCKS] < nodes[PF_MAP_SYM_OFF]);
}

/* A DGX-1-like case: two DGX-1 (16 GPUs, no interchangeable devices), S = 3, R = 2, m. With the
 * block rule the first stage replica has 8 candidates, not 16 (the second machine's GPUs mirror
 * the first's); an infeasible probe proves it with fewer nodes, a feasible one still finds a
 * mapping, and both searches reach the same optimum. */
static void test_host_blocks_dgx1(void)
{
    char err[256];
    pf_topology_opts_t to;
    pf_cluster_t *dgx = NULL;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX1);
    to.machines = 2;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &dgx, err, sizeof err), PF_OK);
    pf_stage_graph_t *sg = random_stage_graph(77, 3, 2);
    int dev[16];
    pf_map_stats_t st[3];
    for (int sym = 0; sym <= 2; sym++) {
        pf_map_opts_t o = exact_opts(PF_INST_FULL, sym, 2, 1);
        CU_ASSERT_EQUAL_FATAL(pf_map_search(sg, dgx, &o, dev, &st[sym], err, sizeof err), PF_OK);
        CU_ASSERT(st[sym].lower_proven);
        CU_ASSERT(is_injective(dev, 6, 16));
    }
    PF_ASSERT_CLOSE(st[PF_MAP_SYM_ALL].objective_ms, st[PF_MAP_SYM_OFF].objective_ms, 1e-6);
    PF_ASSERT_CLOSE(st[PF_MAP_SYM_NO_BLOCKS].objective_ms, st[PF_MAP_SYM_OFF].objective_ms, 1e-6);
    CU_ASSERT(st[PF_MAP_SYM_ALL].block_pruned > 0);
    CU_ASSERT_EQUAL(st[PF_MAP_SYM_NO_BLOCKS].block_pruned, 0);
    double opt = st[PF_MAP_SYM_OFF].objective_ms;
    pf_probe_result_t with, without;
    for (int side = 0; side < 2; side++) {
        double t = side ? opt * (1 + 1e-9) : opt * (1 - 1e-3);
        CU_ASSERT_EQUAL(pf_map_probe(sg, dgx, PF_INST_FULL, t, 0, PF_MAP_SYM_ALL, 1, NULL, dev,
                                     &with, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL(pf_map_probe(sg, dgx, PF_INST_FULL, t, 0, PF_MAP_SYM_NO_BLOCKS, 1, NULL,
                                     dev, &without, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL(with.found, side);
        CU_ASSERT_EQUAL(without.found, side);
        if (!side) {
            CU_ASSERT(with.block_pruned > 0);
            CU_ASSERT(with.nodes < without.nodes);
        }
    }
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&dgx);
}

/* The class rule's representative must be the least device in the order the replica rule ranks
 * by. Machines (host = d mod 2) {0, 2} and {1, 3}, 5 GB/s everywhere, latency 0 us on 0-3 and
 * 1-2 and 1 us on the other pairs: swapping the machines, (0 1)(2 3), and the transpositions
 * (0 3) and (1 2) are automorphisms, so the device classes are {0, 3} and {1, 2}. Every static
 * bound is equal, so the ranks follow the canonical order 0, 2, 1, 3 (block {0, 2}, then
 * {1, 3}). One stage, R = 4, m: no neighbours, every mapping costs c_u = 1 ms. The replica rule
 * keeps only the mapping whose devices increase in rank, 0, 2, 1, 3, and a probe at 1 ms must
 * find it; taking {1, 2}'s representative by index (1, rank 2, when 0 is placed) would cut it.
 * Without the block rule the canonical order is the index order: 0, 1, 2, 3. */
static void test_host_blocks_canonical(void)
{
    char err[256];
    pf_cluster_t *c = new_cluster("interleaved", 4);
    for (int a = 0; a < 4; a++) {
        pf_device_t d = {.id = a, .host = a % 2, .mem_bytes = 16e9};
        pf_cluster_set_device(c, a, &d);
        for (int b = 0; b < 4; b++)
            if (a != b)
                pf_cluster_set_link(c, a, b, 5, a + b == 3 ? 0 : 1);
    }
    int cls[4], block[4], bclass[4];
    CU_ASSERT_EQUAL(pf_map_symmetry_device_classes(c, cls), 2);
    CU_ASSERT(cls[0] == cls[3] && cls[1] == cls[2]);
    CU_ASSERT_EQUAL(check_blocks(c, block, bclass), 2);
    CU_ASSERT(block[0] == 0 && block[2] == 0 && block[1] == 1 && block[3] == 1);
    double cu = 1, P = 0, M = 0;
    pf_stage_graph_t *sg = pf_stage_graph_new(1, 4, &cu, &P, &M);
    int dev[4];
    pf_probe_result_t res;
    CU_ASSERT_EQUAL(pf_map_probe(sg, c, PF_INST_M, 1.0, 0, PF_MAP_SYM_ALL, 1, NULL, dev, &res,
                                 err, sizeof err), PF_OK);
    CU_ASSERT(res.found);
    CU_ASSERT(dev[0] == 0 && dev[1] == 2 && dev[2] == 1 && dev[3] == 3);
    CU_ASSERT(res.block_pruned > 0);
    CU_ASSERT_EQUAL(pf_map_probe(sg, c, PF_INST_M, 1.0, 0, PF_MAP_SYM_NO_BLOCKS, 1, NULL, dev,
                                 &res, err, sizeof err), PF_OK);
    CU_ASSERT(res.found);
    CU_ASSERT(dev[0] == 0 && dev[1] == 1 && dev[2] == 2 && dev[3] == 3);
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&c);
}

/* Block clusters with ties everywhere, where device classes, block swaps and the replica rules
 * overlap: 2-3 blocks of 2-3 devices (contiguous or interleaved), bandwidth 1 or 5 GB/s and
 * latency 0 or 1 us by position inside a block and between blocks. Probes with every rule at
 * opt (1 + 1e-9) and opt (1 - 1e-6) against brute force, m, ar and full, 1 or 2 threads. (Ranking
 * ties by device index instead of the canonical order fails here within a few hundred cases.) */
static void test_host_blocks_tied(void)
{
    char err[256];
    long long fired = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        pf_rng_t rng;
        pf_rng_seed(&rng, seed * 977 + 3);
        int H = 2 + (int)pf_rng_below(&rng, 2), G = 2 + (int)pf_rng_below(&rng, 2), D = H * G;
        int interleaved = (int)pf_rng_below(&rng, 2), S, R;
        double ib[3][3], xb[3][3], il[3][3], xl[3][3];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                ib[i][j] = 1 + (double)pf_rng_below(&rng, 2) * 4;
                xb[i][j] = 1 + (double)pf_rng_below(&rng, 2) * 4;
                il[i][j] = (double)pf_rng_below(&rng, 2);
                xl[i][j] = (double)pf_rng_below(&rng, 2);
                if (pf_rng_below(&rng, 2)) {
                    ib[j][i] = ib[i][j];
                    xb[j][i] = xb[i][j];
                }
            }
        pf_cluster_t *c = new_cluster("tied", D);
        for (int a = 0; a < D; a++) {
            pf_device_t dv = {.id = a, .host = interleaved ? a % H : a / G, .mem_bytes = 16e9};
            pf_cluster_set_device(c, a, &dv);
        }
        for (int a = 0; a < D; a++)
            for (int b = 0; b < D; b++) {
                int ha = interleaved ? a % H : a / G, pa = interleaved ? a / H : a % G;
                int hb = interleaved ? b % H : b / G, pb = interleaved ? b / H : b % G;
                if (a == b)
                    continue;
                pf_cluster_set_bw(c, a, b, ha == hb ? ib[pa][pb] : xb[pa][pb]);
                pf_cluster_set_lat(c, a, b, ha == hb ? il[pa][pb] : xl[pa][pb]);
            }
        do {
            S = 1 + (int)pf_rng_below(&rng, 4);
            R = 1 + (int)pf_rng_below(&rng, 4);
        } while (S * R > D || S * R > (D > 8 ? 5 : 7));
        double cu[4], P[4], M[16] = {0};
        for (int s = 0; s < S; s++) {
            cu[s] = pf_rng_range(&rng, 0, 3);
            P[s] = pf_rng_range(&rng, 1e8, 3e9);
        }
        for (int s = 0; s < S; s++)
            for (int t = s + 1; t < S; t++)
                if (t == s + 1 || pf_rng_uniform(&rng) < 0.4)
                    M[s * S + t] = M[t * S + s] = pf_rng_range(&rng, 1e8, 2e9);
        pf_stage_graph_t *sg = pf_stage_graph_new(S, R, cu, P, M);
        CU_ASSERT_PTR_NOT_NULL_FATAL(sg);
        for (int inst = 0; inst < 3; inst++) {
            double opt = brute_force(sg, c, (pf_inst_t)inst);
            for (int side = 0; side < 2; side++) {
                pf_probe_result_t res;
                int dev[MAXN];
                double t = side ? opt * (1 + 1e-9) : opt * (1 - 1e-6);
                CU_ASSERT_EQUAL(pf_map_probe(sg, c, (pf_inst_t)inst, t, 0, PF_MAP_SYM_ALL,
                                             1 + (int)(seed % 2), NULL, dev, &res, err,
                                             sizeof err), PF_OK);
                CU_ASSERT_EQUAL(res.found, side);
                fired += res.block_pruned;
            }
        }
        pf_stage_graph_destroy(&sg);
        pf_cluster_destroy(&c);
    }
    CU_ASSERT(fired > 0);
}

/* ---------------------------------------------------------------- ring connectivity */

/* Two machines of 4 GPUs (11 GB/s inside, 1.1 across; latencies do not enter eq. 7). One stage,
 * R = 8, c_u = 1 ms, P = 1.1e9 bytes: T = 2 x 7/8 x 1.1e9 = 1.925e9 bytes. Any ring through all 8
 * devices crosses between the machines, so the optimum under ar is 1 + 1.925e9 / 1.1e9 B/s =
 * 1 + 1750 = 1751 ms, whatever the order. Eq. 11 alone sees each device's two 11 GB/s
 * neighbours (1 + 175 = 176 ms); the ring connectivity bound (8 devices are connected only once
 * the 1.1 GB/s links count) gives 1751, so the search needs no probe and a probe just below the
 * optimum stops at the root. With S = 2, R = 4 the rings fit in one machine each: 11 GB/s. */
static void test_ring_connectivity(void)
{
    char err[256];
    double cu[2] = {1, 1}, P[2] = {1.1e9, 1.1e9}, M[4] = {0, 1e6, 1e6, 0};
    pf_cluster_t *c = two_level(2, 4);
    pf_stage_graph_t *sg = pf_stage_graph_new(1, 8, cu, P, M);
    int dev[12];
    double lo, hi;
    CU_ASSERT_EQUAL(pf_map_bounds(sg, c, PF_INST_AR, 1, &lo, &hi, dev, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(lo, 1751.0, 1e-12);
    PF_ASSERT_CLOSE(brute_force(sg, c, PF_INST_AR), 1751.0, 1e-12);
    pf_probe_result_t res;
    CU_ASSERT_EQUAL(pf_map_probe(sg, c, PF_INST_AR, 1750.0, 0, 0, 1, NULL, dev, &res, err, sizeof err),
                    PF_OK);
    CU_ASSERT(!res.found);
    CU_ASSERT_EQUAL(res.nodes, 0);
    pf_stage_graph_destroy(&sg);

    /* two stages of 4: 2 x 3/4 x 1.1e9 = 1.65e9 bytes over 11 GB/s = 150 ms, each ring inside a
     * machine; a probe below 151 ms must fail, and one at 151 must find that mapping */
    sg = pf_stage_graph_new(2, 4, cu, P, M);
    CU_ASSERT_EQUAL(pf_map_bounds(sg, c, PF_INST_AR, 1, &lo, &hi, dev, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(lo, 151.0, 1e-12);
    CU_ASSERT_EQUAL(pf_map_probe(sg, c, PF_INST_AR, 151.0, 0, 1, 1, NULL, dev, &res, err, sizeof err),
                    PF_OK);
    CU_ASSERT(res.found);
    CU_ASSERT((dev[0] < 4) == (dev[1] < 4) && (dev[0] < 4) == (dev[3] < 4));
    CU_ASSERT((dev[4] < 4) == (dev[7] < 4) && (dev[0] < 4) != (dev[4] < 4));
    pf_stage_graph_destroy(&sg);

    /* three stages of 4 on two machines: one ring must cross, 1 + 1.65e9 / 1.1e9 = 1501 ms;
     * eq. 11 and the per-device bound both say 151, the capacity check in the probe proves it */
    pf_cluster_t *c12 = two_level(2, 6);
    double cu3[3] = {1, 1, 1}, P3[3] = {1.1e9, 1.1e9, 1.1e9}, M3[9] = {0};
    sg = pf_stage_graph_new(3, 4, cu3, P3, M3);
    CU_ASSERT_EQUAL(pf_map_probe(sg, c12, PF_INST_AR, 1500.0, 0, 1, 1, NULL, dev, &res, err, sizeof err),
                    PF_OK);
    CU_ASSERT(!res.found);
    CU_ASSERT(res.nodes < 100);
    CU_ASSERT_EQUAL(pf_map_probe(sg, c12, PF_INST_AR, 1501.0, 0, 1, 1, NULL, dev, &res, err, sizeof err),
                    PF_OK);
    CU_ASSERT(res.found);
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&c12);
    pf_cluster_destroy(&c);
}

/* ---------------------------------------------------------------- deadline, batch, errors */

static void test_deadline_and_errors(void)
{
    char err[256];
    /* 24 devices (asymmetric links), 8 x 3 stage replicas, m. The optimum is about 16.366 ms,
     * eq. 10 gives 15.121; proving that no mapping meets 16.35 takes the DFS about 6.9 million
     * nodes (2.7 s on one core of the development machine), so a 30 ms deadline strikes first:
     * far fewer nodes (about 80 k in 30 ms there; fewer on a loaded machine). Counted in nodes,
     * not seconds, so that the check does not depend on the machine's load. */
    pf_stage_graph_t *sg = random_stage_graph(9, 8, 3);
    pf_cluster_t *c = random_cluster(9, 24);
    int dev[24];
    double lo, hi;
    CU_ASSERT_EQUAL_FATAL(pf_map_bounds(sg, c, PF_INST_M, 1, &lo, &hi, dev, err, sizeof err),
                          PF_OK);
    pf_probe_result_t res;
    CU_ASSERT_EQUAL(pf_map_probe(sg, c, PF_INST_M, 16.35, pf_now_s() + 0.03, 1, 2, NULL, dev,
                                 &res, err, sizeof err), PF_OK);
    CU_ASSERT(res.nodes > 0 && res.nodes < 1000000);
    CU_ASSERT(res.timed_out);
    CU_ASSERT(!res.found);

    /* a search with deadlines records the timed-out probes and the unproven lower bound */
    pf_map_opts_t o = exact_opts(PF_INST_M, 1, 2, 1);
    o.probe_seconds = 0.02;
    o.rel_eps = 1e-4;
    pf_map_stats_t st;
    CU_ASSERT_EQUAL(pf_map_search(sg, c, &o, dev, &st, err, sizeof err), PF_OK);
    CU_ASSERT(is_injective(dev, 24, 24));
    CU_ASSERT(st.objective_ms <= hi);
    CU_ASSERT_EQUAL(st.lower_proven, st.probes_timed_out == 0);
    PF_ASSERT_CLOSE(st.objective_ms, pf_map_objective_ms(sg, c, PF_INST_M, dev), 0);
    o.batch = 3;
    CU_ASSERT_EQUAL(pf_map_search(sg, c, &o, dev, &st, err, sizeof err), PF_OK);
    CU_ASSERT(is_injective(dev, 24, 24));
    CU_ASSERT(st.objective_ms <= hi);

    /* more stage replicas than devices; bad options */
    pf_cluster_t *small = random_cluster(1, 20);
    CU_ASSERT_EQUAL(pf_map_search(sg, small, &o, dev, &st, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "20 devices"));
    o.batch = 0;
    CU_ASSERT_EQUAL(pf_map_search(sg, c, &o, dev, &st, err, sizeof err), PF_EINPUT);
    pf_inst_t inst;
    CU_ASSERT_EQUAL(pf_inst_parse("ar", &inst), PF_OK);
    CU_ASSERT_EQUAL(inst, PF_INST_AR);
    CU_ASSERT_EQUAL(pf_inst_parse("auto", &inst), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(pf_inst_name(PF_INST_FULL), "full");
    pf_cluster_destroy(&small);
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&c);
}

/* ---------------------------------------------------------------- plan and command */

static pf_plan_t *chain_plan(const pf_graph_t *g, int S, int R)
{
    int n = pf_graph_nops(g), per = n / S;
    pf_plan_t *p = pf_plan_new(S, R);
    const int *topo = pf_graph_topo(g);
    for (int s = 0; s < S; s++) {
        int lo = s * per, hi = s == S - 1 ? n : lo + per;
        pf_plan_set_stage_ops(p, s, topo + lo, hi - lo);
    }
    return p;
}

static void test_map_plan(void)
{
    char err[256];
    pf_graph_t *g = pf_test_random_dag(11, 24, 0.15);
    pf_cluster_t *c = two_level(2, 4);
    pf_plan_t *p = chain_plan(g, 4, 2);
    pf_map_opts_t o = exact_opts(PF_INST_M, 1, 1, 1);
    o.auto_inst = 1;
    CU_ASSERT_EQUAL_FATAL(pf_map_plan(g, c, p, &o, err, sizeof err), PF_OK);
    CU_ASSERT(pf_plan_is_mapped(p));
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_OK);
    pf_stage_graph_t *sg = pf_stage_graph_from_plan(g, p);
    int dev[8], cs[8];
    for (int s = 0; s < 4; s++)
        for (int r = 0; r < 2; r++)
            dev[s * 2 + r] = p->stage_list[s].devices[r];
    PF_ASSERT_CLOSE(p->objective_ms, pf_map_objective_ms(sg, c, PF_INST_FULL, dev), 0);
    PF_ASSERT_CLOSE(p->simulated_step_ms, pf_map_step_estimate_ms(sg, c, dev, p->microbatches),
                    0);
    CU_ASSERT(p->mapping.present);
    pf_inst_t used;
    CU_ASSERT_EQUAL_FATAL(pf_inst_parse(p->mapping.instantiation, &used), PF_OK);
    PF_ASSERT_CLOSE(p->mapping.objective_ms, pf_map_objective_ms(sg, c, used, dev), 0);
    CU_ASSERT(p->mapping.lower_bound_ms <= p->mapping.objective_ms);
    CU_ASSERT(p->cs_map.present && p->p2p_map.present);
    pf_map_cs(sg, cs);
    PF_ASSERT_CLOSE(p->cs_map.objective_ms, pf_map_objective_ms(sg, c, PF_INST_FULL, cs), 0);
    /* auto keeps the better of the two under full and polishes it with a full search that
     * starts from it and from the baselines: never worse than either search or baseline */
    CU_ASSERT(p->objective_ms <= p->cs_map.objective_ms);
    CU_ASSERT(p->objective_ms <= p->p2p_map.objective_ms);
    pf_map_opts_t om = exact_opts(PF_INST_M, 1, 1, 1);
    pf_map_stats_t st;
    int d2[8];
    CU_ASSERT_EQUAL(pf_map_search(sg, c, &om, d2, &st, err, sizeof err), PF_OK);
    CU_ASSERT(p->objective_ms <= pf_map_objective_ms(sg, c, PF_INST_FULL, d2));
    om.inst = PF_INST_AR;
    CU_ASSERT_EQUAL(pf_map_search(sg, c, &om, d2, &st, err, sizeof err), PF_OK);
    CU_ASSERT(p->objective_ms <= pf_map_objective_ms(sg, c, PF_INST_FULL, d2));
    pf_stage_graph_destroy(&sg);

    /* files and the command */
    char gpath[600], cpath[600], ppath[600], cmd[4096], out[8192];
    snprintf(gpath, sizeof gpath, "%s/map_g.json", pf_test_tmpdir());
    snprintf(cpath, sizeof cpath, "%s/map_c.json", pf_test_tmpdir());
    snprintf(ppath, sizeof ppath, "%s/map_p.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL(pf_graph_save(g, gpath, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_cluster_save(c, cpath, err, sizeof err), PF_OK);
    for (int s = 0; s < 4; s++) { /* unmapped, as partition writes it */
        free(p->stage_list[s].devices);
        p->stage_list[s].devices = NULL;
    }
    p->mapping.present = p->cs_map.present = p->p2p_map.present = 0;
    CU_ASSERT_EQUAL(pf_plan_save(p, g, c, ppath, err, sizeof err), PF_OK);
    snprintf(cmd, sizeof cmd, "%s map %s %s %s --instantiation full --threads 1 --eps 1e-4",
             pf_test_bin(), gpath, cpath, ppath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"mapping\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"instantiation\": \"full\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"cs_map\""));
    /* the plan from stdin, written to a file that plan_load reads back mapped */
    snprintf(cmd, sizeof cmd, "%s map %s %s - -o %s/map_out.json < %s", pf_test_bin(), gpath,
             cpath, pf_test_tmpdir(), ppath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    snprintf(ppath, sizeof ppath, "%s/map_out.json", pf_test_tmpdir());
    pf_plan_t *q = NULL;
    CU_ASSERT_EQUAL(pf_plan_load(ppath, g, c, &q, err, sizeof err), PF_OK);
    CU_ASSERT(q && pf_plan_is_mapped(q));
    pf_plan_destroy(&q);
    snprintf(cmd, sizeof cmd, "%s map %s %s %s --instantiation bogus", pf_test_bin(), gpath,
             cpath, ppath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "%s map %s %s /nonexistent.json", pf_test_bin(), gpath, cpath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "%s map %s %s %s --batch 0", pf_test_bin(), gpath, cpath, ppath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "%s map --help", pf_test_bin());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--instantiation"));
    pf_plan_destroy(&p);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
}

/* A plan partitioned for other devices must fit these: the stage that does not is named. */
static void test_map_plan_memory(void)
{
    char err[256];
    pf_graph_t *g = pf_test_random_dag(21, 6, 0.2); /* params >= 0, up to 1e8 bytes per op */
    pf_cluster_t *c = pf_cluster_new("small", 2);
    for (int i = 0; i < 2; i++) {
        pf_device_t d = {.id = i, .mem_bytes = 1e6};
        pf_cluster_set_device(c, i, &d);
    }
    pf_cluster_set_link(c, 0, 1, 10, 0);
    pf_plan_t *p = pf_plan_new(2, 1);
    int a[] = {0, 1, 2}, b[] = {3, 4, 5};
    pf_plan_set_stage_ops(p, 0, a, 3);
    pf_plan_set_stage_ops(p, 1, b, 3);
    pf_map_opts_t o;
    pf_map_opts_init(&o);
    CU_ASSERT_EQUAL(pf_map_plan(g, c, p, &o, err, sizeof err), PF_EINFEASIBLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "stage 0 needs"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "devices of small have 976.6 KiB"));
    CU_ASSERT(!pf_plan_is_mapped(p));
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

void pf_suite_mapping(void)
{
    CU_pSuite s = CU_add_suite("mapping", NULL, NULL);
    CU_add_test(s, "a plan whose stages do not fit the devices: exit 3, names the stage",
                test_map_plan_memory);
    CU_add_test(s, "eq. 6/7 stage times, eq. 10/11 bounds, worked by hand", test_hand_worked);
    CU_add_test(s, "CS and p2p device lists", test_baselines_three_by_two);
    CU_add_test(s, "stage graph from a plan", test_stage_graph_from_plan);
    CU_add_test(s, "search and probe = brute force (m, ar, full)", test_brute_force);
    CU_add_test(s, "DESIGN.md's objective evaluated independently; search = brute force on "
                   "grouped, asymmetric, latency-bound, tied clusters with spare devices",
                test_independent_evaluator);
    CU_add_test(s, "Theorem 3: feasible <=> Hamiltonian path", test_theorem3_reduction);
    CU_add_test(s, "symmetry pruning keeps the optimum", test_symmetry);
    CU_add_test(s, "host blocks: DGX-1, generated blocks, labels that lie",
                test_host_blocks_detect);
    CU_add_test(s, "host-block rule = brute force (m, ar, full; with, without, no symmetry)",
                test_host_blocks_brute);
    CU_add_test(s, "host-block rule on two DGX-1", test_host_blocks_dgx1);
    CU_add_test(s, "host blocks: the class representative is the least in canonical order",
                test_host_blocks_canonical);
    CU_add_test(s, "host-block rule = brute force on tied block clusters", test_host_blocks_tied);
    CU_add_test(s, "ring connectivity bound and ring capacity", test_ring_connectivity);
    CU_add_test(s, "deadline, batch, bad input", test_deadline_and_errors);
    CU_add_test(s, "map a plan; the map command", test_map_plan);
}
