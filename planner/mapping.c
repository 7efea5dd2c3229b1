/* mapping: costs (eq. 5-9), baselines, bounds (eq. 10, 11), Algorithm 1 and `planfarm map`.
 * The DFS probe (Algorithm 2) and the precomputation it needs live in planner/mapctx.c. */
#include "planner/mapping.h"
#include "planner/cost.h"
#include "planner/mapctx.h"
#include "planner/rng.h"
#include "planner/util.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pf_inst_name(pf_inst_t inst)
{
    switch (inst) {
    case PF_INST_M: return "m";
    case PF_INST_AR: return "ar";
    case PF_INST_FULL: return "full";
    }
    return "?";
}

int pf_inst_parse(const char *s, pf_inst_t *out)
{
    if (!s)
        return PF_EINPUT;
    if (!strcmp(s, "m"))
        *out = PF_INST_M;
    else if (!strcmp(s, "ar"))
        *out = PF_INST_AR;
    else if (!strcmp(s, "full"))
        *out = PF_INST_FULL;
    else
        return PF_EINPUT;
    return PF_OK;
}

/* ---------------------------------------------------------------- costs */

/* Eq. 8: sum over the neighbours s' of s (ascending) of lat + M(s, s') / B, same replica. */
static double m_term_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c, const int *dev, int x)
{
    int R = pf_stage_graph_replicas(sg), s = x / R, r = x % R, k;
    const int *nb = pf_stage_graph_neighbors(sg, s, &k);
    double sum = 0;
    for (int i = 0; i < k; i++)
        sum += pf_cluster_xfer_ms(c, dev[x], dev[nb[i] * R + r],
                                  pf_stage_graph_msg_bytes(sg, s, nb[i]));
    return sum;
}

/* Eq. 9: max over the ring 0, 1, ..., R-1, 0 of 2 (R-1)/R P(s) / B(a, b); 0 when R = 1. */
static double ar_term_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c, const int *dev, int s)
{
    int R = pf_stage_graph_replicas(sg);
    double T = pf_stage_graph_allreduce_bytes(sg, s), worst = 0;
    if (R == 1)
        return 0;
    for (int q = 0; q < R; q++)
        worst = fmax(worst, pf_bytes_ms(T, pf_cluster_bw_gbps(c, dev[s * R + q],
                                                               dev[s * R + (q + 1) % R])));
    return worst;
}

double pf_map_stage_time_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst,
                            const int *dev, int x)
{
    int s = x / pf_stage_graph_replicas(sg);
    double m = inst != PF_INST_AR ? m_term_ms(sg, c, dev, x) : 0.0;
    double ar = inst != PF_INST_M ? ar_term_ms(sg, c, dev, s) : 0.0;
    return pf_stage_graph_cu_ms(sg, s) + m + ar;
}

double pf_map_objective_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst,
                           const int *dev)
{
    int N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg);
    double t = 0;
    for (int x = 0; x < N; x++)
        t = fmax(t, pf_map_stage_time_ms(sg, c, inst, dev, x));
    return t;
}

double pf_map_step_estimate_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c, const int *dev,
                               int microbatches)
{
    int S = pf_stage_graph_stages(sg), R = pf_stage_graph_replicas(sg);
    double pipe = 0, ar = 0;
    for (int x = 0; x < S * R; x++)
        pipe = fmax(pipe, pf_map_stage_time_ms(sg, c, PF_INST_M, dev, x));
    for (int s = 0; s < S; s++)
        ar = fmax(ar, ar_term_ms(sg, c, dev, s));
    return (microbatches + S - 1) * pipe + ar;
}

pf_inst_t pf_map_auto_instantiation(const pf_stage_graph_t *sg)
{
    double ar = pf_stage_graph_total_allreduce_bytes(sg);
    double p2p = pf_stage_graph_total_p2p_bytes(sg);
    return ar > p2p ? PF_INST_AR : PF_INST_M; /* ratio ar / p2p > 1, without dividing by 0 */
}

void pf_map_cs(const pf_stage_graph_t *sg, int *dev)
{
    int N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg);
    for (int x = 0; x < N; x++) /* x = s * R + r -> device s * R + r */
        dev[x] = x;
}

void pf_map_p2p(const pf_stage_graph_t *sg, int *dev)
{
    int S = pf_stage_graph_stages(sg), R = pf_stage_graph_replicas(sg);
    for (int s = 0; s < S; s++)
        for (int r = 0; r < R; r++)
            dev[s * R + r] = r * S + s;
}

/* Transposition (a b) is an automorphism of both matrices. Being one is an equivalence relation
 * ((a c) = (a b)(b c)(a b)), so comparing a device with each class's first member suffices. */
static int swappable(const double *bw, const double *lat, int D, int a, int b)
{
    size_t A = (size_t)a * D, B = (size_t)b * D;
    if (bw[A + b] != bw[B + a] || lat[A + b] != lat[B + a])
        return 0;
    for (int k = 0; k < D; k++) {
        if (k == a || k == b)
            continue;
        if (bw[A + k] != bw[B + k] || lat[A + k] != lat[B + k] ||
            bw[(size_t)k * D + a] != bw[(size_t)k * D + b] ||
            lat[(size_t)k * D + a] != lat[(size_t)k * D + b])
            return 0;
    }
    return 1;
}

int pf_map_device_classes(const pf_cluster_t *c, int *cls)
{
    int D = pf_cluster_ndevices(c), n = 0;
    const double *bw = pf_cluster_bw_matrix(c), *lat = pf_cluster_lat_matrix(c);
    int *first = malloc((size_t)D * sizeof *first);
    if (!first)
        return -1;
    for (int d = 0; d < D; d++) {
        cls[d] = -1;
        for (int k = 0; k < n && cls[d] < 0; k++)
            if (swappable(bw, lat, D, first[k], d))
                cls[d] = k;
        if (cls[d] < 0) {
            first[n] = d;
            cls[d] = n++;
        }
    }
    free(first);
    return n;
}

/* ---------------------------------------------------------------- host blocks */

/* Whether a_i <-> b_i (i < m), every other device fixed, is an automorphism of W off the
 * diagonal: W(a_i, a_j) = W(b_i, b_j) for i != j (inside the blocks), W(a_i, b_j) = W(b_i, a_j)
 * (between them), and rows and columns equal towards every device k outside (pair[k] == 0).
 * *work counts the pairs of entries compared. */
static int swap_is_automorphism(const double *W, int D, const int *A, const int *B, int m,
                                const unsigned char *pair, long long *work)
{
    for (int i = 0; i < m; i++) {
        size_t ai = (size_t)A[i] * D, bi = (size_t)B[i] * D;
        for (int j = 0; j < m; j++)
            if ((i != j && W[ai + A[j]] != W[bi + B[j]]) || W[ai + B[j]] != W[bi + A[j]]) {
                *work += j + 1;
                return 0;
            }
        for (int k = 0; k < D; k++)
            if (!pair[k] && (W[ai + k] != W[bi + k] ||
                             W[(size_t)k * D + A[i]] != W[(size_t)k * D + B[i]])) {
                *work += m + k + 1;
                return 0;
            }
        *work += m + D;
    }
    return 1;
}

/* Classes of the groups of one proposal (gid[d]: group of d, groups numbered in order of their
 * lowest device). Writes block / block_class as pf_map_host_blocks documents; returns the number
 * of blocks, -1 when out of memory. */
static int blocks_of_groups(const pf_cluster_t *c, const int *gid, int ngrp, int *block,
                            int *block_class, long long *work, int *capped)
{
    int D = pf_cluster_ndevices(c), nclass = 0, nblk = 0, rc = -1;
    const double *bw = pf_cluster_bw_matrix(c), *lat = pf_cluster_lat_matrix(c);
    size_t G = (size_t)ngrp; /* >= 1: D >= 2 here */
    int *off = calloc(G + 1, sizeof *off), *mem = malloc((size_t)D * sizeof *mem);
    int *gclass = malloc(G * sizeof *gclass), *first = malloc(G * sizeof *first);
    int *members = calloc(G, sizeof *members), *renum = malloc(G * sizeof *renum);
    unsigned char *pair = calloc((size_t)D, 1);
    if (!off || !mem || !gclass || !first || !members || !renum || !pair)
        goto done;
    for (int d = 0; d < D; d++)
        off[gid[d] + 1]++;
    for (int g = 0; g < ngrp; g++)
        off[g + 1] += off[g];
    for (int d = 0; d < D; d++) /* members by index: a device's position = its rank inside */
        mem[off[gid[d]] + members[gid[d]]++] = d;
    for (int g = 0; g < ngrp; g++) {
        int m = off[g + 1] - off[g];
        gclass[g] = -1;
        if (m < 2 || *capped)
            continue;
        for (int k = 0; k < nclass && gclass[g] < 0; k++) {
            int f = first[k];
            if (off[f + 1] - off[f] != m)
                continue;
            if (*work > PF_MAP_BLOCK_BUDGET) {
                *capped = 1;
                break;
            }
            for (int i = 0; i < m; i++)
                pair[mem[off[f] + i]] = pair[mem[off[g] + i]] = 1;
            if (swap_is_automorphism(bw, D, mem + off[f], mem + off[g], m, pair, work) &&
                swap_is_automorphism(lat, D, mem + off[f], mem + off[g], m, pair, work))
                gclass[g] = k;
            for (int i = 0; i < m; i++)
                pair[mem[off[f] + i]] = pair[mem[off[g] + i]] = 0;
        }
        if (gclass[g] < 0 && !*capped)
            first[gclass[g] = nclass++] = g;
    }
    /* keep the classes of two or more blocks, renumbered by first block */
    memset(members, 0, (size_t)ngrp * sizeof *members);
    for (int g = 0; g < ngrp; g++)
        if (gclass[g] >= 0)
            members[gclass[g]]++;
    for (int k = 0; k < nclass; k++)
        renum[k] = -1;
    int nkept = 0;
    for (int d = 0; d < D; d++)
        block[d] = -1;
    for (int g = 0; g < ngrp; g++) {
        int k = gclass[g];
        if (k < 0 || members[k] < 2)
            continue;
        if (renum[k] < 0)
            renum[k] = nkept++;
        block_class[nblk] = renum[k];
        for (int i = off[g]; i < off[g + 1]; i++)
            block[mem[i]] = nblk;
        nblk++;
    }
    rc = nblk;
done:
    free(off);
    free(mem);
    free(gclass);
    free(first);
    free(members);
    free(renum);
    free(pair);
    return rc;
}

typedef struct {
    int host, d;
} host_dev_t;

static int cmp_host_dev(const void *a, const void *b)
{
    const host_dev_t *p = a, *q = b;
    if (p->host != q->host)
        return p->host < q->host ? -1 : 1;
    return (p->d > q->d) - (p->d < q->d);
}

static int root_of(int *parent, int a)
{
    while (parent[a] != a)
        a = parent[a] = parent[parent[a]];
    return a;
}

int pf_map_host_blocks(const pf_cluster_t *c, int *block, int *block_class, int *capped)
{
    int D = pf_cluster_ndevices(c), n = -1, ngrp = 0, cap = 0;
    long long work = 0;
    if (capped)
        *capped = 0;
    if (D < 2) {
        for (int d = 0; d < D; d++)
            block[d] = -1;
        return 0;
    }
    int *gid = malloc((size_t)D * sizeof *gid), *parent = malloc((size_t)D * sizeof *parent);
    host_dev_t *hd = malloc((size_t)D * sizeof *hd);
    if (!gid || !parent || !hd)
        goto done;
    /* 1. the host field: groups numbered in order of their lowest device (parent[g]: the group
     * of the g-th distinct host in sorted order, -1 until its lowest device is met) */
    for (int d = 0; d < D; d++)
        hd[d] = (host_dev_t){pf_cluster_device(c, d)->host, d};
    qsort(hd, (size_t)D, sizeof *hd, cmp_host_dev);
    for (int i = 0, h = -1; i < D; i++) {
        if (i == 0 || hd[i].host != hd[i - 1].host)
            parent[++h] = -1;
        gid[hd[i].d] = h;
    }
    for (int d = 0; d < D; d++) {
        int h = gid[d];
        if (parent[h] < 0)
            parent[h] = ngrp++;
    }
    for (int d = 0; d < D; d++)
        gid[d] = parent[gid[d]];
    n = blocks_of_groups(c, gid, ngrp, block, block_class, &work, &cap);
    if (n != 0)
        goto done;
    /* 2. components of the links faster (either direction) than the slowest link */
    const double *bw = pf_cluster_bw_matrix(c);
    double slowest = INFINITY;
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++)
            if (a != b)
                slowest = fmin(slowest, bw[(size_t)a * D + b]);
    for (int d = 0; d < D; d++)
        parent[d] = d;
    for (int a = 0; a < D; a++)
        for (int b = a + 1; b < D; b++)
            if (fmax(bw[(size_t)a * D + b], bw[(size_t)b * D + a]) > slowest) {
                int ra = root_of(parent, a), rb = root_of(parent, b);
                if (ra != rb) /* the root stays the component's lowest device */
                    parent[ra > rb ? ra : rb] = ra < rb ? ra : rb;
            }
    ngrp = 0;
    for (int d = 0; d < D; d++) {
        int r = root_of(parent, d);
        gid[d] = r == d ? ngrp++ : gid[r];
    }
    n = blocks_of_groups(c, gid, ngrp, block, block_class, &work, &cap);
done:
    if (capped)
        *capped = cap;
    free(gid);
    free(parent);
    free(hd);
    return n;
}

/* ---------------------------------------------------------------- bounds */

static int check_input(const pf_stage_graph_t *sg, const pf_cluster_t *c, char *err,
                       size_t errlen)
{
    int S = pf_stage_graph_stages(sg), R = pf_stage_graph_replicas(sg);
    int D = pf_cluster_ndevices(c);
    if ((long long)S * R > D)
        return pf_fail(err, errlen, PF_EINPUT,
                       "stages x replicas = %d x %d stage replicas, but cluster %s has %d devices",
                       S, R, pf_cluster_name(c), D);
    return pf_cluster_validate(c, err, errlen);
}

/* Best of the CS map, the p2p map and a seeded random one-to-one mapping (in that order of
 * preference on ties), under the context's instantiation. */
static int upper_bound(const pf_mapctx_t *cx, const pf_stage_graph_t *sg, int D, uint64_t seed,
                       const int *initial, int *dev, double *upper_ms)
{
    int N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg);
    int *tmp = malloc((size_t)(D > N ? D : N) * sizeof *tmp);
    if (!tmp)
        return PF_ERR;
    pf_map_cs(sg, dev);
    *upper_ms = pf_mapctx_objective_ms(cx, dev);
    pf_map_p2p(sg, tmp);
    double t = pf_mapctx_objective_ms(cx, tmp);
    if (t < *upper_ms) {
        *upper_ms = t;
        memcpy(dev, tmp, (size_t)N * sizeof *dev);
    }
    pf_rng_t rng;
    pf_rng_seed(&rng, seed);
    for (int d = 0; d < D; d++)
        tmp[d] = d;
    for (int i = D - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)pf_rng_below(&rng, (uint64_t)i + 1), v = tmp[i];
        tmp[i] = tmp[j];
        tmp[j] = v;
    }
    t = pf_mapctx_objective_ms(cx, tmp);
    if (t < *upper_ms) {
        *upper_ms = t;
        memcpy(dev, tmp, (size_t)N * sizeof *dev);
    }
    if (initial && (t = pf_mapctx_objective_ms(cx, initial)) < *upper_ms) {
        *upper_ms = t;
        memcpy(dev, initial, (size_t)N * sizeof *dev);
    }
    free(tmp);
    return PF_OK;
}

int pf_map_bounds(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst,
                  uint64_t seed, double *lower_ms, double *upper_ms, int *dev, char *err,
                  size_t errlen)
{
    int rc = check_input(sg, c, err, errlen);
    if (rc != PF_OK)
        return rc;
    pf_mapctx_t *cx = pf_mapctx_new(sg, c, inst, 0);
    if (!cx)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    *lower_ms = pf_mapctx_lower_bound_ms(cx);
    rc = upper_bound(cx, sg, pf_cluster_ndevices(c), seed, NULL, dev, upper_ms);
    pf_mapctx_destroy(&cx);
    return rc == PF_OK ? PF_OK : pf_fail(err, errlen, rc, "out of memory");
}

/* PF_OK when dev maps N stage replicas one-to-one into D devices. */
static int check_mapping(const int *dev, int N, int D)
{
    unsigned char *used = calloc((size_t)D, 1);
    int rc = used ? PF_OK : PF_ERR;
    for (int x = 0; x < N && rc == PF_OK; x++) {
        if (dev[x] < 0 || dev[x] >= D || used[dev[x]])
            rc = PF_EINPUT;
        else
            used[dev[x]] = 1;
    }
    free(used);
    return rc;
}

/* ---------------------------------------------------------------- Algorithm 2 */

int pf_map_probe(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst,
                 double target_ms, double deadline_s, int symmetry, int threads,
                 const atomic_int *cancel, int *dev, pf_probe_result_t *res, char *err,
                 size_t errlen)
{
    int rc = check_input(sg, c, err, errlen);
    if (rc != PF_OK)
        return rc;
    if (isnan(target_ms))
        return pf_fail(err, errlen, PF_EINPUT, "probe target is not a number");
    pf_mapctx_t *cx = pf_mapctx_new(sg, c, inst, symmetry);
    if (!cx)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    rc = pf_mapctx_probe(cx, target_ms, deadline_s, threads, cancel, dev, res, NULL);
    pf_mapctx_destroy(&cx);
    return rc == PF_OK ? PF_OK : pf_fail(err, errlen, rc, "out of memory");
}

/* ---------------------------------------------------------------- Algorithm 1 */

void pf_map_opts_init(pf_map_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->inst = PF_INST_M;
    o->rel_eps = PF_MAP_DEFAULT_REL_EPS;
    o->batch = 1;
    o->probe_seconds = PF_MAP_DEFAULT_PROBE_SECONDS;
    o->symmetry = PF_MAP_SYM_ALL;
    o->seed = 1;
}

static double deadline_from(const pf_map_opts_t *o)
{
    return o->probe_seconds > 0 ? pf_now_s() + o->probe_seconds : 0.0;
}

/* One round of K probes at targets splitting (tl, tr) evenly. K = 1 runs one probe on all the
 * threads; K > 1 runs the probes side by side, one thread each (the paper's multi-target
 * enhancement), and a probe that finds a mapping cancels those at higher targets: their answer
 * cannot move the interval further than the found objective already does. */
static int probe_round(const pf_mapctx_t *cx, const pf_map_opts_t *o, int K, const double *t,
                       int N, int *devs, pf_probe_result_t *res, int *cancelled)
{
    int threads = o->threads > 0 ? o->threads : omp_get_max_threads(), rc = PF_OK;
    if (K == 1)
        return pf_mapctx_probe(cx, t[0], deadline_from(o), threads, NULL, devs, res,
                               cancelled);
    atomic_int *cancel = malloc((size_t)K * sizeof *cancel);
    if (!cancel)
        return PF_ERR;
    for (int i = 0; i < K; i++)
        atomic_init(&cancel[i], 0);
#pragma omp parallel for num_threads(threads < K ? threads : K) schedule(dynamic, 1)
    for (int i = 0; i < K; i++) {
        memset(&res[i], 0, sizeof res[i]);
        cancelled[i] = 1;
        if (atomic_load(&cancel[i]))
            continue;
        if (pf_mapctx_probe(cx, t[i], deadline_from(o), 1, &cancel[i], devs + (size_t)i * N,
                            &res[i], &cancelled[i]) != PF_OK) {
#pragma omp atomic write
            rc = PF_ERR;
        }
        if (res[i].found)
            for (int j = i + 1; j < K; j++)
                atomic_store(&cancel[j], 1);
    }
    free(cancel);
    return rc;
}

int pf_map_search(const pf_stage_graph_t *sg, const pf_cluster_t *c, const pf_map_opts_t *o,
                  int *dev, pf_map_stats_t *st, char *err, size_t errlen)
{
    int rc = check_input(sg, c, err, errlen);
    int N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg), K = o->batch;
    double t0 = pf_now_s();
    pf_mapctx_t *cx = NULL;
    int *devs = NULL, *cancelled = NULL, *initial = NULL;
    double *targets = NULL;
    pf_probe_result_t *res = NULL;
    memset(st, 0, sizeof *st);
    if (rc != PF_OK)
        return rc;
    if (!(o->rel_eps >= 0) || !isfinite(o->rel_eps))
        return pf_fail(err, errlen, PF_EINPUT, "rel_eps must be a number >= 0");
    if (K < 1 || K > 1024)
        return pf_fail(err, errlen, PF_EINPUT, "batch must be in [1, 1024]");
    cx = pf_mapctx_new(sg, c, o->inst, o->symmetry);
    devs = malloc((size_t)K * N * sizeof *devs);
    cancelled = malloc((size_t)K * sizeof *cancelled);
    targets = malloc((size_t)K * sizeof *targets);
    res = malloc((size_t)K * sizeof *res);
    initial = malloc((size_t)N * sizeof *initial);
    if (!cx || !devs || !cancelled || !targets || !res || !initial) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto done;
    }
    double tl = pf_mapctx_lower_bound_ms(cx), tr;
    if (o->initial) { /* copied: it may be the caller's dev */
        if ((rc = check_mapping(o->initial, N, pf_cluster_ndevices(c))) != PF_OK) {
            pf_fail(err, errlen, rc, "initial mapping: %s",
                    rc == PF_ERR ? "out of memory" : "not one device per stage replica");
            goto done;
        }
        memcpy(initial, o->initial, (size_t)N * sizeof *initial);
    }
    if (upper_bound(cx, sg, pf_cluster_ndevices(c), o->seed, o->initial ? initial : NULL, dev,
                    &tr) != PF_OK) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto done;
    }
    if (o->known_lower_ms > tl && isfinite(o->known_lower_ms))
        tl = o->known_lower_ms;
    st->initial_lower_ms = tl;
    st->initial_upper_ms = tr;
    tl = fmin(tl, tr); /* equal in exact arithmetic when the heuristic is optimal */

    /* Proposition 2 (App. A-C): the optimum stays in [tl, tr]; a found mapping moves tr to its
     * objective (<= the target), a target with no mapping moves tl up to it. */
    while (tr - tl > o->rel_eps * tr) {
        int k = 0;
        for (int i = 0; i < K; i++) {
            double t = tl + (tr - tl) * (i + 1) / (K + 1);
            if (t > tl && t < tr && (k == 0 || t > targets[k - 1]))
                targets[k++] = t;
        }
        if (k == 0) /* the interval is down to adjacent doubles */
            break;
        if (probe_round(cx, o, k, targets, N, devs, res, cancelled) != PF_OK) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto done;
        }
        double new_tl = tl, new_tr = tr;
        int best = -1;
        for (int i = 0; i < k; i++) {
            if (cancelled[i])
                continue;
            st->probes++;
            st->nodes += res[i].nodes;
            st->symmetric_pruned += res[i].symmetric_pruned;
            st->block_pruned += res[i].block_pruned;
            st->bound_pruned += res[i].bound_pruned;
            st->probes_timed_out += res[i].timed_out;
            if (res[i].found && res[i].objective_ms < new_tr) {
                new_tr = res[i].objective_ms;
                best = i;
            }
        }
        for (int i = 0; i < k; i++) /* largest not-found target below every found objective */
            if (!cancelled[i] && !res[i].found && targets[i] < new_tr)
                new_tl = fmax(new_tl, targets[i]);
        if (best >= 0)
            memcpy(dev, devs + (size_t)best * N, (size_t)N * sizeof *dev);
        if (new_tl == tl && new_tr == tr) /* cannot happen with exact probes; be safe */
            break;
        tl = new_tl;
        tr = new_tr;
    }
    st->lower_proven = st->probes_timed_out == 0;
    st->lower_ms = tl;
    st->objective_ms = pf_mapctx_objective_ms(cx, dev);
    rc = PF_OK;
done:
    st->seconds = pf_now_s() - t0;
    pf_mapctx_destroy(&cx);
    free(devs);
    free(cancelled);
    free(targets);
    free(res);
    free(initial);
    return rc;
}

/* ---------------------------------------------------------------- planfarm map */

static int write_devices(pf_plan_t *p, const int *dev)
{
    for (int s = 0; s < p->stages; s++) {
        int *d = pf_plan_stage_devices(p, s);
        if (!d)
            return PF_ERR;
        for (int r = 0; r < p->replicas; r++)
            d[r] = dev[s * p->replicas + r];
    }
    return PF_OK;
}

static void baseline(pf_baseline_t *b, const pf_stage_graph_t *sg, const pf_cluster_t *c,
                     const int *dev, int microbatches)
{
    b->present = 1;
    b->objective_ms = pf_map_objective_ms(sg, c, PF_INST_FULL, dev);
    b->simulated_step_ms = pf_map_step_estimate_ms(sg, c, dev, microbatches);
}

static void add_counts(pf_map_stats_t *sum, const pf_map_stats_t *st)
{
    sum->probes += st->probes;
    sum->probes_timed_out += st->probes_timed_out;
    sum->nodes += st->nodes;
    sum->symmetric_pruned += st->symmetric_pruned;
    sum->block_pruned += st->block_pruned;
    sum->bound_pruned += st->bound_pruned;
    sum->seconds += st->seconds;
}

int pf_map_search_auto(const pf_stage_graph_t *sg, const pf_cluster_t *c, const pf_map_opts_t *o,
                       int *dev, pf_map_stats_t *st, pf_inst_t *used, char *err, size_t errlen)
{
    int N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg), rc;
    int *other = malloc((size_t)N * sizeof *other);
    pf_map_stats_t sum, st2;
    pf_map_opts_t opt = *o;
    memset(st, 0, sizeof *st);
    memset(&sum, 0, sizeof sum);
    if (!other)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    /* 1. the instantiation the ratio picks, 2. the other one: keep the better under full */
    opt.inst = pf_map_auto_instantiation(sg);
    if ((rc = pf_map_search(sg, c, &opt, dev, st, err, errlen)) != PF_OK)
        goto done;
    *used = opt.inst;
    add_counts(&sum, st);
    int proven = st->lower_proven;
    double full = pf_map_objective_ms(sg, c, PF_INST_FULL, dev), lower_first = st->lower_ms;
    opt.inst = opt.inst == PF_INST_M ? PF_INST_AR : PF_INST_M;
    if ((rc = pf_map_search(sg, c, &opt, other, &st2, err, errlen)) != PF_OK)
        goto done;
    add_counts(&sum, &st2);
    proven &= st2.lower_proven;
    double full2 = pf_map_objective_ms(sg, c, PF_INST_FULL, other), lower_second = st2.lower_ms;
    if (full2 < full) {
        memcpy(dev, other, (size_t)N * sizeof *dev);
        full = full2;
        *st = st2;
        *used = opt.inst;
    }
    /* 3. full, starting from that mapping: each instantiation ignores one term, and a mapping
     * tuned for one can be poor under the other (an m mapping may scatter the all-reduce rings).
     * full >= m and full >= ar for every mapping, so both searches' lower bounds bound it too. */
    opt.inst = PF_INST_FULL;
    opt.initial = dev;
    opt.known_lower_ms = fmax(lower_first, lower_second);
    if ((rc = pf_map_search(sg, c, &opt, other, &st2, err, errlen)) != PF_OK)
        goto done;
    add_counts(&sum, &st2);
    proven &= st2.lower_proven;
    if (st2.objective_ms < full) {
        memcpy(dev, other, (size_t)N * sizeof *dev);
        *st = st2;
        *used = PF_INST_FULL;
    }
    st->probes = sum.probes;
    st->probes_timed_out = sum.probes_timed_out;
    st->nodes = sum.nodes;
    st->symmetric_pruned = sum.symmetric_pruned;
    st->block_pruned = sum.block_pruned;
    st->bound_pruned = sum.bound_pruned;
    st->seconds = sum.seconds;
    st->lower_proven = proven;
done:
    free(other);
    return rc;
}

/* A plan may come from a partition made for other devices: every stage must fit these. */
static int check_memory(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p, char *err,
                        size_t errlen)
{
    pf_cost_model_t cm;
    int *op_stage = pf_plan_op_stage(p, pf_graph_nops(g));
    if (!op_stage)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    pf_cost_model_init(&cm, c, p->stages, p->microbatches, 0);
    int rc = PF_OK;
    for (int s = 0; s < p->stages && rc == PF_OK; s++) {
        double need = pf_cost_stage_mem_bytes(g, op_stage, s, &cm); /* eq. 14 + state */
        if (need > cm.mem_limit_bytes) {
            char a[32], b[32];
            pf_fmt_bytes(a, sizeof a, need);
            pf_fmt_bytes(b, sizeof b, cm.mem_limit_bytes);
            rc = pf_fail(err, errlen, PF_EINFEASIBLE,
                         "stage %d needs %s, devices of %s have %s: partition the graph for "
                         "this cluster",
                         s, a, pf_cluster_name(c), b);
        }
    }
    free(op_stage);
    return rc;
}

int pf_map_plan(const pf_graph_t *g, const pf_cluster_t *c, pf_plan_t *p, const pf_map_opts_t *o,
                char *err, size_t errlen)
{
    int rc = pf_plan_validate(p, g, c, err, errlen);
    if (rc != PF_OK || (rc = check_memory(g, c, p, err, errlen)) != PF_OK)
        return rc;
    int N = p->stages * p->replicas;
    pf_stage_graph_t *sg = pf_stage_graph_from_plan(g, p);
    int *dev = malloc((size_t)N * sizeof *dev), *base = malloc((size_t)N * sizeof *base);
    pf_map_stats_t st;
    pf_inst_t used = o->inst;
    if (!sg || !dev || !base) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto done;
    }
    rc = o->auto_inst ? pf_map_search_auto(sg, c, o, dev, &st, &used, err, errlen)
                      : pf_map_search(sg, c, o, dev, &st, err, errlen);
    if (rc != PF_OK)
        goto done;
    if (write_devices(p, dev) != PF_OK) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto done;
    }
    p->devices = pf_cluster_ndevices(c);
    p->objective_ms = pf_map_objective_ms(sg, c, PF_INST_FULL, dev);
    p->simulated_step_ms = pf_map_step_estimate_ms(sg, c, dev, p->microbatches);
    p->mapping.present = 1;
    snprintf(p->mapping.instantiation, sizeof p->mapping.instantiation, "%s", pf_inst_name(used));
    p->mapping.objective_ms = st.objective_ms;
    p->mapping.lower_bound_ms = st.lower_ms;
    p->mapping.initial_lower_bound_ms = st.initial_lower_ms;
    p->mapping.initial_upper_bound_ms = st.initial_upper_ms;
    p->mapping.probes = st.probes;
    p->mapping.probes_timed_out = st.probes_timed_out;
    p->mapping.symmetric_pruned = st.symmetric_pruned;
    p->mapping.seconds = st.seconds;
    pf_map_cs(sg, base);
    baseline(&p->cs_map, sg, c, base, p->microbatches);
    pf_map_p2p(sg, base);
    baseline(&p->p2p_map, sg, c, base, p->microbatches);
    rc = PF_OK;
done:
    pf_stage_graph_destroy(&sg);
    free(dev);
    free(base);
    return rc;
}
