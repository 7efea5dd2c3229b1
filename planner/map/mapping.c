/* mapping: costs (eq. 5-9), baselines, the initial interval (eq. 10, 11 and the heuristic maps),
 * the in-process driver of Algorithm 1 (its search over the target is target_search.c) and
 * `planfarm map`. The precomputation of one instantiation is map_context.c, the bounds
 * map_bounds.c, the DFS probe (Algorithm 2) map_probe.c, its symmetry map_symmetry.c. */
#include "planner/map/mapping.h"
#include "planner/ir/devkinds.h"
#include "planner/ir/cost.h"
#include "planner/map/map_context.h"
#include "planner/map/target_search.h"
#include "planner/core/rng.h"
#include "planner/core/util.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

double pf_mapping_stage_time_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c,
                                pf_map_inst_t inst, const int *dev, int x)
{
    int s = x / pf_stage_graph_replicas(sg);
    double m = inst != PF_MAP_INST_AR ? m_term_ms(sg, c, dev, x) : 0.0;
    double ar = inst != PF_MAP_INST_M ? ar_term_ms(sg, c, dev, s) : 0.0;
    double cu = pf_stage_graph_nkinds(sg) > 0
                    ? pf_stage_graph_cu_kind_ms(sg, s, pf_devkinds_number_of(c, dev[x]))
                    : pf_stage_graph_cu_ms(sg, s);
    return cu + m + ar;
}

/* Each stage's ring once (every replica of s has the same eq. 9 term): O(N), not O(N R). The
 * sum is pf_mapping_stage_time_ms's, term for term. */
double pf_mapping_objective_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c,
                               pf_map_inst_t inst, const int *dev)
{
    int R = pf_stage_graph_replicas(sg), N = pf_stage_graph_stages(sg) * R;
    double t = 0, ar = 0;
    for (int x = 0; x < N; x++) {
        int s = x / R;
        if (x % R == 0)
            ar = inst != PF_MAP_INST_M ? ar_term_ms(sg, c, dev, s) : 0.0;
        double m = inst != PF_MAP_INST_AR ? m_term_ms(sg, c, dev, x) : 0.0;
        double cu = pf_stage_graph_nkinds(sg) > 0
                        ? pf_stage_graph_cu_kind_ms(sg, s, pf_devkinds_number_of(c, dev[x]))
                        : pf_stage_graph_cu_ms(sg, s);
        t = fmax(t, cu + m + ar);
    }
    return t;
}

double pf_mapping_step_estimate_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c,
                                   const int *dev, int microbatches)
{
    int S = pf_stage_graph_stages(sg), R = pf_stage_graph_replicas(sg);
    double pipe = 0, ar = 0;
    for (int x = 0; x < S * R; x++)
        pipe = fmax(pipe, pf_mapping_stage_time_ms(sg, c, PF_MAP_INST_M, dev, x));
    for (int s = 0; s < S; s++)
        ar = fmax(ar, ar_term_ms(sg, c, dev, s));
    return (microbatches + S - 1) * pipe + ar;
}

void pf_mapping_cs(const pf_stage_graph_t *sg, int *dev)
{
    int N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg);
    for (int x = 0; x < N; x++) /* x = s * R + r -> device s * R + r */
        dev[x] = x;
}

void pf_mapping_p2p(const pf_stage_graph_t *sg, int *dev)
{
    int S = pf_stage_graph_stages(sg), R = pf_stage_graph_replicas(sg);
    for (int s = 0; s < S; s++)
        for (int r = 0; r < R; r++)
            dev[s * R + r] = r * S + s;
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
    return PF_OK; /* the cluster was validated when read: O(D^2) per probe job is too much */
}

/* Best of the CS map, the p2p map and a seeded random one-to-one mapping (in that order of
 * preference on ties), under the context's instantiation. */
static int upper_bound(const pf_map_context_t *cx, const pf_stage_graph_t *sg, int D, uint64_t seed,
                       const int *initial, int *dev, double *upper_ms)
{
    int N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg);
    int *tmp = malloc((size_t)(D > N ? D : N) * sizeof *tmp);
    if (!tmp)
        return PF_ERR;
    pf_mapping_cs(sg, dev);
    *upper_ms = pf_map_context_objective_ms(cx, dev);
    pf_mapping_p2p(sg, tmp);
    double t = pf_map_context_objective_ms(cx, tmp);
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
    t = pf_map_context_objective_ms(cx, tmp);
    if (t < *upper_ms) {
        *upper_ms = t;
        memcpy(dev, tmp, (size_t)N * sizeof *dev);
    }
    if (initial && (t = pf_map_context_objective_ms(cx, initial)) < *upper_ms) {
        *upper_ms = t;
        memcpy(dev, initial, (size_t)N * sizeof *dev);
    }
    free(tmp);
    return PF_OK;
}

int pf_mapping_bounds(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_map_inst_t inst,
                      uint64_t seed, double *lower_ms, double *upper_ms, int *dev, char *err,
                      size_t errlen)
{
    int rc = check_input(sg, c, err, errlen);
    if (rc != PF_OK)
        return rc;
    pf_map_context_t *cx = pf_map_context_new(sg, c, inst, 0, err, errlen);
    if (!cx)
        return PF_ERR; /* check_input ruled out the other reason */
    *lower_ms = pf_map_context_lower_bound_ms(cx);
    rc = upper_bound(cx, sg, pf_cluster_ndevices(c), seed, NULL, dev, upper_ms);
    pf_map_context_destroy(&cx);
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

int pf_mapping_probe(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_map_inst_t inst,
                     double target_ms, double deadline_s, int symmetry, int threads,
                     const atomic_int *cancel, int *dev, pf_probe_result_t *res, char *err,
                     size_t errlen)
{
    int rc = check_input(sg, c, err, errlen);
    if (rc != PF_OK)
        return rc;
    if (isnan(target_ms))
        return pf_fail(err, errlen, PF_EINPUT, "probe target is not a number");
    pf_map_context_t *cx = pf_map_context_new(sg, c, inst, symmetry, err, errlen);
    if (!cx)
        return PF_ERR; /* check_input ruled out the other reason */
    rc = pf_map_probe_run(cx, target_ms, deadline_s, threads, cancel, dev, res, NULL);
    pf_map_context_destroy(&cx);
    return rc == PF_OK ? PF_OK : pf_fail(err, errlen, rc, "out of memory");
}

/* ---------------------------------------------------------------- Algorithm 1 */

void pf_mapping_opts_init(pf_mapping_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->inst = PF_MAP_INST_M;
    o->rel_eps = PF_MAPPING_DEFAULT_REL_EPS;
    o->batch = 1;
    o->probe_seconds = PF_MAPPING_DEFAULT_PROBE_SECONDS;
    o->symmetry = PF_MAP_SYM_ALL;
    o->seed = 1;
}

static double deadline_from(const pf_mapping_opts_t *o)
{
    return o->probe_seconds > 0 ? pf_now_s() + o->probe_seconds : 0.0;
}

/* One round of K probes at targets splitting (tl, tr) evenly. K = 1 runs one probe on all the
 * threads; K > 1 runs the probes side by side, one thread each (the paper's multi-target
 * enhancement), and a probe that finds a mapping cancels those at higher targets: their answer
 * cannot move the interval further than the found objective already does. */
static int probe_round(const pf_map_context_t *cx, const pf_mapping_opts_t *o, int K,
                       const double *t, int N, int *devs, pf_probe_result_t *res, int *cancelled)
{
    int threads = o->threads > 0 ? o->threads : omp_get_max_threads(), rc = PF_OK;
    if (K == 1)
        return pf_map_probe_run(cx, t[0], deadline_from(o), threads, NULL, devs, res,
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
        if (pf_map_probe_run(cx, t[i], deadline_from(o), 1, &cancel[i], devs + (size_t)i * N,
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

/* What one round of probes needs: up to K targets, their mappings and answers. */
typedef struct {
    int n; /* entries of a mapping */
    double *targets;
    int *devs, *cancelled;
    pf_probe_result_t *res;
} round_buf_t;

static void round_buf_free(round_buf_t *b)
{
    free(b->targets);
    free(b->devs);
    free(b->cancelled);
    free(b->res);
}

static int round_buf_alloc(round_buf_t *b, int K, int N)
{
    b->n = N;
    b->targets = malloc((size_t)K * sizeof *b->targets);
    b->devs = malloc((size_t)K * N * sizeof *b->devs);
    b->cancelled = malloc((size_t)K * sizeof *b->cancelled);
    b->res = malloc((size_t)K * sizeof *b->res);
    return b->targets && b->devs && b->cancelled && b->res ? PF_OK : PF_ERR;
}

/* The initial interval: t_l = eq. 10 / 11 (or the larger bound known from elsewhere), t_r = the
 * best of the heuristic maps, a random one and the optional initial mapping, whose mapping goes
 * to dev. */
static int initial_interval(const pf_map_context_t *cx, const pf_stage_graph_t *sg,
                            const pf_cluster_t *c, const pf_mapping_opts_t *o, int *dev, double *tl,
                            double *tr, char *err, size_t errlen)
{
    int N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg), rc;
    int *initial = malloc((size_t)N * sizeof *initial);
    if (!initial)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    *tl = pf_map_context_lower_bound_ms(cx);
    if (o->initial) { /* copied: it may be the caller's dev */
        if ((rc = check_mapping(o->initial, N, pf_cluster_ndevices(c))) != PF_OK) {
            free(initial);
            return pf_fail(err, errlen, rc, "initial mapping: %s",
                           rc == PF_ERR ? "out of memory" : "not one device per stage replica");
        }
        memcpy(initial, o->initial, (size_t)N * sizeof *initial);
    }
    rc = upper_bound(cx, sg, pf_cluster_ndevices(c), o->seed, o->initial ? initial : NULL, dev,
                     tr);
    free(initial);
    if (rc != PF_OK)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    if (o->known_lower_ms > *tl && isfinite(o->known_lower_ms))
        *tl = o->known_lower_ms;
    return PF_OK;
}

/* One round of Algorithm 1: the targets the search proposes, probed side by side, every answer
 * counted and absorbed. *k = 0 when the search is over. PF_OK or PF_ERR (out of memory). */
static int run_round(const pf_map_context_t *cx, const pf_mapping_opts_t *o, pf_target_search_t *ts,
                     round_buf_t *b, pf_mapping_stats_t *st, int *k)
{
    double t;
    *k = 0;
    while (pf_target_search_propose(ts, &t)) {
        b->targets[*k] = t;
        pf_target_search_sent(ts, (uint64_t)*k);
        (*k)++;
    }
    if (*k == 0)
        return PF_OK;
    if (probe_round(cx, o, *k, b->targets, b->n, b->devs, b->res, b->cancelled) != PF_OK)
        return PF_ERR;
    for (int i = 0; i < *k; i++) {
        const pf_probe_result_t *r = &b->res[i];
        pf_target_answer_t a = {PF_TARGET_CANCELLED, r->objective_ms, b->devs + (size_t)i * b->n};
        if (!b->cancelled[i]) {
            st->probes++;
            st->nodes += r->nodes;
            st->symmetric_pruned += r->symmetric_pruned;
            st->block_pruned += r->block_pruned;
            st->bound_pruned += r->bound_pruned;
            st->probes_timed_out += r->timed_out;
            a.verdict = r->found       ? PF_TARGET_FOUND
                        : r->timed_out ? PF_TARGET_TIMED_OUT
                                       : PF_TARGET_NONE;
        }
        pf_target_search_absorb(ts, (uint64_t)i, &a);
    }
    return PF_OK;
}

int pf_mapping_search(const pf_stage_graph_t *sg, const pf_cluster_t *c, const pf_mapping_opts_t *o,
                      int *dev, pf_mapping_stats_t *st, char *err, size_t errlen)
{
    int rc = check_input(sg, c, err, errlen);
    int N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg), K = o->batch, k;
    double t0 = pf_now_s(), tl = 0, tr = 0;
    pf_map_context_t *cx = NULL;
    pf_target_search_t *ts = NULL;
    round_buf_t b = {0};
    memset(st, 0, sizeof *st);
    if (rc != PF_OK)
        return rc;
    if (!(o->rel_eps >= 0) || !isfinite(o->rel_eps))
        return pf_fail(err, errlen, PF_EINPUT, "rel_eps must be a number >= 0");
    if (K < 1 || K > 1024)
        return pf_fail(err, errlen, PF_EINPUT, "batch must be in [1, 1024]");
    if (!(cx = pf_map_context_new(sg, c, o->inst, o->symmetry, err, errlen)))
        return PF_ERR; /* check_input ruled out the other reason */
    if (round_buf_alloc(&b, K, N) != PF_OK) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto done;
    }
    if ((rc = initial_interval(cx, sg, c, o, dev, &tl, &tr, err, errlen)) != PF_OK)
        goto done;
    st->initial_lower_ms = tl;
    st->initial_upper_ms = tr;
    tl = fmin(tl, tr); /* equal in exact arithmetic when the heuristic is optimal */
    /* Rounds of K targets (target_search.h): the in-process probes of a round run side by side
     * and all come back together. */
    pf_target_search_opts_t tso = {PF_TARGET_SEARCH_ROUNDS, K, o->rel_eps, 0};
    if (!(ts = pf_target_search_new(&tso, tl, tr, dev, N))) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto done;
    }
    do {
        if (run_round(cx, o, ts, &b, st, &k) != PF_OK) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto done;
        }
    } while (k > 0);
    memcpy(dev, pf_target_search_best(ts), (size_t)N * sizeof *dev);
    st->lower_proven = st->probes_timed_out == 0;
    st->lower_ms = pf_target_search_lower_ms(ts);
    st->objective_ms = pf_map_context_objective_ms(cx, dev);
    rc = PF_OK;
done:
    st->seconds = pf_now_s() - t0;
    pf_map_context_destroy(&cx);
    pf_target_search_destroy(&ts);
    round_buf_free(&b);
    return rc;
}

/* ---------------------------------------------------------------- planfarm map */

int pf_mapping_fill_plan(pf_plan_t *p, const pf_stage_graph_t *sg, const pf_cluster_t *c,
                         const int *dev, pf_map_inst_t used, const pf_mapping_stats_t *st)
{
    int S = pf_stage_graph_stages(sg), R = pf_stage_graph_replicas(sg);
    int *base = malloc((size_t)S * R * sizeof *base);
    if (!base)
        return PF_ERR;
    for (int s = 0; s < S; s++) {
        int *d = pf_plan_stage_devices(p, s);
        if (!d) {
            free(base);
            return PF_ERR;
        }
        for (int r = 0; r < R; r++)
            d[r] = dev[s * R + r];
    }
    p->devices = pf_cluster_ndevices(c);
    p->objective_ms = pf_mapping_objective_ms(sg, c, PF_MAP_INST_FULL, dev);
    p->simulated_step_ms = pf_mapping_step_estimate_ms(sg, c, dev, p->microbatches);
    if (st) {
        p->mapping.present = 1;
        snprintf(p->mapping.instantiation, sizeof p->mapping.instantiation, "%s",
                 pf_map_inst_name(used));
        p->mapping.objective_ms = st->objective_ms;
        p->mapping.lower_bound_ms = st->lower_ms;
        p->mapping.initial_lower_bound_ms = st->initial_lower_ms;
        p->mapping.initial_upper_bound_ms = st->initial_upper_ms;
        p->mapping.probes = st->probes;
        p->mapping.probes_timed_out = st->probes_timed_out;
        p->mapping.symmetric_pruned = st->symmetric_pruned;
        p->mapping.seconds = st->seconds;
    }
    pf_baseline_t *bl[2] = {&p->cs_map, &p->p2p_map};
    void (*heuristic[2])(const pf_stage_graph_t *, int *) = {pf_mapping_cs, pf_mapping_p2p};
    for (int i = 0; i < 2; i++) {
        heuristic[i](sg, base);
        bl[i]->present = 1;
        bl[i]->objective_ms = pf_mapping_objective_ms(sg, c, PF_MAP_INST_FULL, base);
        bl[i]->simulated_step_ms = pf_mapping_step_estimate_ms(sg, c, base, p->microbatches);
    }
    free(base);
    return PF_OK;
}

static void add_counts(pf_mapping_stats_t *sum, const pf_mapping_stats_t *st)
{
    sum->probes += st->probes;
    sum->probes_timed_out += st->probes_timed_out;
    sum->nodes += st->nodes;
    sum->symmetric_pruned += st->symmetric_pruned;
    sum->block_pruned += st->block_pruned;
    sum->bound_pruned += st->bound_pruned;
    sum->seconds += st->seconds;
}

int pf_mapping_search_auto(const pf_stage_graph_t *sg, const pf_cluster_t *c,
                           const pf_mapping_opts_t *o, int *dev, pf_mapping_stats_t *st,
                           pf_map_inst_t *used, char *err, size_t errlen)
{
    int N = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg), rc;
    int *other = malloc((size_t)N * sizeof *other);
    pf_mapping_stats_t sum, st2;
    pf_mapping_opts_t opt = *o;
    memset(st, 0, sizeof *st);
    memset(&sum, 0, sizeof sum);
    if (!other)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    /* 1. the instantiation the ratio picks, 2. the other one: keep the better under full */
    opt.inst = pf_map_inst_auto(sg);
    if ((rc = pf_mapping_search(sg, c, &opt, dev, st, err, errlen)) != PF_OK)
        goto done;
    *used = opt.inst;
    add_counts(&sum, st);
    int proven = st->lower_proven;
    double full = pf_mapping_objective_ms(sg, c, PF_MAP_INST_FULL, dev), lower_first = st->lower_ms;
    opt.inst = opt.inst == PF_MAP_INST_M ? PF_MAP_INST_AR : PF_MAP_INST_M;
    if ((rc = pf_mapping_search(sg, c, &opt, other, &st2, err, errlen)) != PF_OK)
        goto done;
    add_counts(&sum, &st2);
    proven &= st2.lower_proven;
    double full2 = pf_mapping_objective_ms(sg, c, PF_MAP_INST_FULL, other),
           lower_second = st2.lower_ms;
    if (full2 < full) {
        memcpy(dev, other, (size_t)N * sizeof *dev);
        full = full2;
        *st = st2;
        *used = opt.inst;
    }
    /* 3. full, starting from that mapping: each instantiation ignores one term, and a mapping
     * tuned for one can be poor under the other (an m mapping may scatter the all-reduce rings).
     * full >= m and full >= ar for every mapping, so both searches' lower bounds bound it too. */
    opt.inst = PF_MAP_INST_FULL;
    opt.initial = dev;
    opt.known_lower_ms = fmax(lower_first, lower_second);
    if ((rc = pf_mapping_search(sg, c, &opt, other, &st2, err, errlen)) != PF_OK)
        goto done;
    add_counts(&sum, &st2);
    proven &= st2.lower_proven;
    if (st2.objective_ms < full) {
        memcpy(dev, other, (size_t)N * sizeof *dev);
        *st = st2;
        *used = PF_MAP_INST_FULL;
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
    pf_cost_model_set_training(&cm, &p->train, p->replicas, 0);
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

int pf_mapping_plan(const pf_graph_t *g, const pf_cluster_t *c, pf_plan_t *p,
                    const pf_mapping_opts_t *o, char *err, size_t errlen)
{
    int rc = pf_plan_validate(p, g, c, err, errlen);
    if (rc != PF_OK || (rc = check_memory(g, c, p, err, errlen)) != PF_OK)
        return rc;
    int N = p->stages * p->replicas;
    pf_stage_graph_t *sg = pf_stage_graph_from_plan(g, p);
    int *dev = malloc((size_t)N * sizeof *dev);
    pf_mapping_stats_t st;
    pf_map_inst_t used = o->inst;
    if (!sg || !dev || pf_stage_graph_price_kinds(sg, g, p, c) != PF_OK) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto done;
    }
    rc = o->auto_inst ? pf_mapping_search_auto(sg, c, o, dev, &st, &used, err, errlen)
                      : pf_mapping_search(sg, c, o, dev, &st, err, errlen);
    if (rc != PF_OK)
        goto done;
    if (pf_mapping_fill_plan(p, sg, c, dev, used, &st) != PF_OK) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto done;
    }
    rc = PF_OK;
done:
    pf_stage_graph_destroy(&sg);
    free(dev);
    return rc;
}
