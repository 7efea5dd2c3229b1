/* reshard_sched: Zhuang et al., "On Optimizing the Communication of Model Parallelism",
 * Sec. 3.2. See the header for the model (eq. 1-3). */
#include "planner/sim/reshard_sched.h"

#include "planner/core/rng.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct pf_reshard_sched {
    int nhosts, ntasks;
    int *recv_off; /* ntasks + 1 offsets into recv */
    int *recv;
    int *cand_off; /* ntasks + 1 offsets into cand_host / cand_ms */
    int *cand_host;
    double *cand_ms;
    size_t recv_off_cap, recv_cap, cand_off_cap, cand_cap, cand_ms_cap;
    int max_cand, max_recv;
};

static const char *const algo_names[PF_RESHARD_SCHED_NALGOS] = {"naive", "lpt", "dfs", "greedy", "best"};

void pf_reshard_sched_opts_default(pf_reshard_sched_opts_t *o)
{
    *o = (pf_reshard_sched_opts_t){.dfs_budget_s = 0.5, .dfs_node_cap = 2000000, .greedy_restarts = 16,
                            .greedy_trials = 32, .seed = 1};
}

const char *pf_reshard_sched_algo_name(pf_reshard_sched_algo_t a)
{
    return (unsigned)a < PF_RESHARD_SCHED_NALGOS ? algo_names[a] : "?";
}

int pf_reshard_sched_algo_parse(const char *name, pf_reshard_sched_algo_t *out, char *err, size_t errlen)
{
    for (int a = 0; a < PF_RESHARD_SCHED_NALGOS; a++)
        if (name && !strcmp(name, algo_names[a])) {
            *out = (pf_reshard_sched_algo_t)a;
            return PF_OK;
        }
    return pf_fail(err, errlen, PF_EINPUT,
                   "load-balance algorithm '%s': expected naive, lpt, dfs, greedy or best",
                   name ? name : "(null)");
}

pf_reshard_sched_t *pf_reshard_sched_new(int nhosts, char *err, size_t errlen)
{
    pf_reshard_sched_t *s = NULL;
    if (nhosts < 1) {
        pf_fail(err, errlen, PF_EINPUT, "reshard schedule: %d hosts, need at least 1", nhosts);
        return NULL;
    }
    s = calloc(1, sizeof *s);
    if (!s || pf_grow((void **)&s->recv_off, &s->recv_off_cap, 1, sizeof(int)) ||
        pf_grow((void **)&s->cand_off, &s->cand_off_cap, 1, sizeof(int)))
        goto fail;
    s->nhosts = nhosts;
    s->recv_off[0] = s->cand_off[0] = 0;
    return s;
fail:
    pf_reshard_sched_destroy(&s);
    pf_fail(err, errlen, PF_ERR, "reshard schedule: out of memory");
    return NULL;
}

void pf_reshard_sched_destroy(pf_reshard_sched_t **sp)
{
    if (!sp || !*sp)
        return;
    pf_reshard_sched_t *s = *sp;
    free(s->recv_off);
    free(s->recv);
    free(s->cand_off);
    free(s->cand_host);
    free(s->cand_ms);
    free(s);
    *sp = NULL;
}

int pf_reshard_sched_ntasks(const pf_reshard_sched_t *s) { return s->ntasks; }

static int distinct_hosts(const int *h, int n, int nhosts)
{
    for (int i = 0; i < n; i++) {
        if (h[i] < 0 || h[i] >= nhosts)
            return 0;
        for (int j = 0; j < i; j++)
            if (h[j] == h[i])
                return 0;
    }
    return 1;
}

int pf_reshard_sched_add_task(pf_reshard_sched_t *s, int nrecv, const int *recv_hosts, int ncand,
                       const int *cand_hosts, const double *cand_ms, char *err, size_t errlen)
{
    int t = s->ntasks;
    if (nrecv < 1 || ncand < 1)
        return pf_fail(err, errlen, PF_EINPUT, "unit task %d: %d receiver and %d sender hosts, "
                       "need at least one of each", t, nrecv, ncand);
    if (!distinct_hosts(recv_hosts, nrecv, s->nhosts) ||
        !distinct_hosts(cand_hosts, ncand, s->nhosts))
        return pf_fail(err, errlen, PF_EINPUT, "unit task %d: hosts must be distinct and in "
                       "[0, %d)", t, s->nhosts);
    for (int k = 0; k < ncand; k++)
        if (!pf_is_finite_nonneg(cand_ms[k]))
            return pf_fail(err, errlen, PF_EINPUT, "unit task %d: duration %g ms from candidate "
                           "%d is not finite and >= 0", t, cand_ms[k], k);
    size_t nr = (size_t)s->recv_off[t] + (size_t)nrecv, nc = (size_t)s->cand_off[t] + (size_t)ncand;
    if (pf_grow((void **)&s->recv_off, &s->recv_off_cap, (size_t)t + 2, sizeof(int)) ||
        pf_grow((void **)&s->cand_off, &s->cand_off_cap, (size_t)t + 2, sizeof(int)) ||
        pf_grow((void **)&s->recv, &s->recv_cap, nr, sizeof(int)) ||
        pf_grow((void **)&s->cand_host, &s->cand_cap, nc, sizeof(int)) ||
        pf_grow((void **)&s->cand_ms, &s->cand_ms_cap, nc, sizeof(double)))
        return pf_fail(err, errlen, PF_ERR, "reshard schedule: out of memory");
    memcpy(s->recv + s->recv_off[t], recv_hosts, (size_t)nrecv * sizeof(int));
    memcpy(s->cand_host + s->cand_off[t], cand_hosts, (size_t)ncand * sizeof(int));
    memcpy(s->cand_ms + s->cand_off[t], cand_ms, (size_t)ncand * sizeof(double));
    s->recv_off[t + 1] = (int)nr;
    s->cand_off[t + 1] = (int)nc;
    if (ncand > s->max_cand)
        s->max_cand = ncand;
    if (nrecv > s->max_recv)
        s->max_recv = nrecv;
    s->ntasks++;
    return t;
}

static bool receives(const pf_reshard_sched_t *s, int t, int h)
{
    for (int i = s->recv_off[t]; i < s->recv_off[t + 1]; i++)
        if (s->recv[i] == h)
            return true;
    return false;
}

static int ncand_of(const pf_reshard_sched_t *s, int t) { return s->cand_off[t + 1] - s->cand_off[t]; }
static int sender_of(const pf_reshard_sched_t *s, int t, int k) { return s->cand_host[s->cand_off[t] + k]; }
static double ms_of(const pf_reshard_sched_t *s, int t, int k) { return s->cand_ms[s->cand_off[t] + k]; }

/* Eq. 3: the task starts when its sender and every receiver host are free. */
static double earliest_start(const pf_reshard_sched_t *s, const double *free_ms, int t, int k)
{
    double start = free_ms[sender_of(s, t, k)];
    for (int i = s->recv_off[t]; i < s->recv_off[t + 1]; i++)
        start = fmax(start, free_ms[s->recv[i]]);
    return start;
}

static void occupy(const pf_reshard_sched_t *s, double *free_ms, int t, int k, double end)
{
    free_ms[sender_of(s, t, k)] = end;
    for (int i = s->recv_off[t]; i < s->recv_off[t + 1]; i++)
        free_ms[s->recv[i]] = end;
}

static double eval_ws(const pf_reshard_sched_t *s, const int *order, const int *cand, double *start_ms,
                      double *free_ms)
{
    double makespan = 0;
    for (int h = 0; h < s->nhosts; h++)
        free_ms[h] = 0;
    for (int i = 0; i < s->ntasks; i++) {
        int t = order[i];
        double start = earliest_start(s, free_ms, t, cand[t]), end = start + ms_of(s, t, cand[t]);
        occupy(s, free_ms, t, cand[t], end);
        if (start_ms)
            start_ms[t] = start;
        makespan = fmax(makespan, end);
    }
    return makespan;
}

double pf_reshard_sched_eval(const pf_reshard_sched_t *s, const int *order, const int *cand, double *start_ms)
{
    double *free_ms = malloc((size_t)s->nhosts * sizeof *free_ms);
    if (!free_ms)
        return NAN;
    double makespan = eval_ws(s, order, cand, start_ms, free_ms);
    free(free_ms);
    return makespan;
}

static double min_ms_of(const pf_reshard_sched_t *s, int t)
{
    double m = INFINITY;
    for (int k = 0; k < ncand_of(s, t); k++)
        m = fmin(m, ms_of(s, t, k));
    return m;
}

/* A schedule under construction or kept: order + candidate per task. */
typedef struct {
    int *order, *cand;
    double makespan_ms;
} sched_t;

static void naive(const pf_reshard_sched_t *s, sched_t *out, double *free_ms)
{
    for (int t = 0; t < s->ntasks; t++) {
        out->order[t] = t;
        out->cand[t] = 0;
    }
    out->makespan_ms = eval_ws(s, out->order, out->cand, NULL, free_ms);
}

/* Tasks by decreasing shortest duration, ties by index: LPT's order and the DFS's branch order. */
static void lpt_order(const pf_reshard_sched_t *s, const double *min_ms, int *order)
{
    for (int t = 0; t < s->ntasks; t++)
        order[t] = t;
    /* insertion sort: stable, no global comparator state, n is small (unit tasks of one tensor) */
    for (int i = 1; i < s->ntasks; i++) {
        int t = order[i], j = i;
        while (j > 0 && (min_ms[order[j - 1]] < min_ms[t] ||
                         (min_ms[order[j - 1]] == min_ms[t] && order[j - 1] > t))) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = t;
    }
}

/* Eq. 4 ("Load balance only"): longest task first, to the candidate sender host with the
 * lightest load so far (ties: the shorter duration, then the lower candidate). The execution
 * order is that same longest-first order. */
static void lpt(const pf_reshard_sched_t *s, const double *min_ms, sched_t *out, double *load_ms,
                double *free_ms)
{
    lpt_order(s, min_ms, out->order);
    for (int h = 0; h < s->nhosts; h++)
        load_ms[h] = 0;
    for (int i = 0; i < s->ntasks; i++) {
        int t = out->order[i], best = 0;
        for (int k = 1; k < ncand_of(s, t); k++) {
            double lk = load_ms[sender_of(s, t, k)], lb = load_ms[sender_of(s, t, best)];
            if (lk < lb || (lk == lb && ms_of(s, t, k) < ms_of(s, t, best)))
                best = k;
        }
        out->cand[t] = best;
        load_ms[sender_of(s, t, best)] += ms_of(s, t, best);
    }
    out->makespan_ms = eval_ws(s, out->order, out->cand, NULL, free_ms);
}

/* ---- DFS with pruning (Zhuang et al., Sec. 3.2) ----
 * A node places one more task (with its sender) at the end of the sequence. Two reductions keep
 * the tree small without losing the optimum:
 *  - identical tasks (same receivers, same candidates and durations) are interchangeable: one
 *    class is placed in index order (evenly sharded tensors make many tasks identical, §3.2);
 *  - two adjacent tasks with disjoint hosts start at the same times in either order: only the
 *    order with the lower index first is explored.
 * Bound (the seed's "sum of task durations on a single device", eq. 4): a host cannot finish
 * before its free time plus the shortest durations of the remaining tasks that must use it
 * (its receivers, and tasks whose only candidate sender it is). */
typedef struct {
    const pf_reshard_sched_t *s;
    double *free_ms, *rem_ms, *min_ms;
    int *cls_of, *cls_members, *cls_off, *cls_next, ncls, *cls_order;
    int *seq, *cand, *kbuf;
    int64_t *mark;
    double *undo;
    int64_t stamp;
    sched_t best;
    int64_t nodes, node_cap;
    double budget_s, t0_s;
    int stopped;
} dfs_t;

static bool same_task(const pf_reshard_sched_t *s, int a, int b)
{
    int nra = s->recv_off[a + 1] - s->recv_off[a], nrb = s->recv_off[b + 1] - s->recv_off[b];
    if (nra != nrb || ncand_of(s, a) != ncand_of(s, b))
        return false;
    for (int i = 0; i < nra; i++) {
        int h = s->recv[s->recv_off[a] + i], found = 0;
        for (int j = 0; j < nrb && !found; j++)
            found = s->recv[s->recv_off[b] + j] == h;
        if (!found)
            return false;
    }
    for (int k = 0; k < ncand_of(s, a); k++)
        if (sender_of(s, a, k) != sender_of(s, b, k) || ms_of(s, a, k) != ms_of(s, b, k))
            return false;
    return true;
}

/* Add sign x the task's shortest duration to the hosts it uses whatever its sender: its
 * receivers, and its sender when it has only one candidate. */
static void add_fixed_load(const dfs_t *d, int t, double sign)
{
    const pf_reshard_sched_t *s = d->s;
    for (int i = s->recv_off[t]; i < s->recv_off[t + 1]; i++)
        d->rem_ms[s->recv[i]] += sign * d->min_ms[t];
    if (ncand_of(s, t) == 1) {
        int h = sender_of(s, t, 0);
        if (!receives(s, t, h))
            d->rem_ms[h] += sign * d->min_ms[t];
    }
}

static double bound(const dfs_t *d, double makespan)
{
    double lb = makespan;
    for (int h = 0; h < d->s->nhosts; h++)
        lb = fmax(lb, d->free_ms[h] + d->rem_ms[h]);
    return lb;
}

static void mark_hosts(dfs_t *d, int t, int k)
{
    d->stamp++;
    d->mark[sender_of(d->s, t, k)] = d->stamp;
    for (int i = d->s->recv_off[t]; i < d->s->recv_off[t + 1]; i++)
        d->mark[d->s->recv[i]] = d->stamp;
}

static bool touches_mark(const dfs_t *d, int t, int k)
{
    if (d->mark[sender_of(d->s, t, k)] == d->stamp)
        return true;
    for (int i = d->s->recv_off[t]; i < d->s->recv_off[t + 1]; i++)
        if (d->mark[d->s->recv[i]] == d->stamp)
            return true;
    return false;
}

static bool out_of_budget(dfs_t *d)
{
    if (d->stopped)
        return true;
    d->nodes++;
    if ((d->node_cap > 0 && d->nodes > d->node_cap) ||
        (d->budget_s > 0 && (d->nodes & 1023) == 0 && pf_now_s() - d->t0_s > d->budget_s))
        d->stopped = 1;
    return d->stopped;
}

static void dfs(dfs_t *d, int depth, double makespan)
{
    const pf_reshard_sched_t *s = d->s;
    if (depth == s->ntasks) {
        if (makespan < d->best.makespan_ms) {
            d->best.makespan_ms = makespan;
            memcpy(d->best.order, d->seq, (size_t)s->ntasks * sizeof(int));
            memcpy(d->best.cand, d->cand, (size_t)s->ntasks * sizeof(int));
        }
        return;
    }
    int prev = depth > 0 ? d->seq[depth - 1] : -1;
    int *kbuf = d->kbuf + (size_t)depth * (size_t)s->max_cand;
    double *undo = d->undo + (size_t)depth * (size_t)(s->max_recv + 1);
    for (int ci = 0; ci < d->ncls; ci++) {
        int c = d->cls_order[ci];
        if (d->cls_next[c] == d->cls_off[c + 1])
            continue;
        int t = d->cls_members[d->cls_next[c]], nk = ncand_of(s, t);
        /* senders by earliest finish first, so good leaves come early and tighten the bound */
        for (int k = 0; k < nk; k++) {
            double end = earliest_start(s, d->free_ms, t, k) + ms_of(s, t, k);
            int j = k;
            while (j > 0 && earliest_start(s, d->free_ms, t, kbuf[j - 1]) +
                                    ms_of(s, t, kbuf[j - 1]) > end) {
                kbuf[j] = kbuf[j - 1];
                j--;
            }
            kbuf[j] = k;
        }
        for (int ki = 0; ki < nk; ki++) {
            int k = kbuf[ki];
            if (prev >= 0) {
                mark_hosts(d, prev, d->cand[prev]);
                if (t < prev && !touches_mark(d, t, k))
                    continue;
            }
            if (out_of_budget(d))
                return;
            double start = earliest_start(s, d->free_ms, t, k), end = start + ms_of(s, t, k);
            int h0 = sender_of(s, t, k), nr = s->recv_off[t + 1] - s->recv_off[t];
            undo[0] = d->free_ms[h0];
            for (int i = 0; i < nr; i++)
                undo[i + 1] = d->free_ms[s->recv[s->recv_off[t] + i]];
            occupy(s, d->free_ms, t, k, end);
            add_fixed_load(d, t, -1);
            double child_mk = fmax(makespan, end);
            if (bound(d, child_mk) < d->best.makespan_ms) {
                d->seq[depth] = t;
                d->cand[t] = k;
                d->cls_next[c]++;
                dfs(d, depth + 1, child_mk);
                d->cls_next[c]--;
            }
            add_fixed_load(d, t, +1);
            for (int i = nr - 1; i >= 0; i--)
                d->free_ms[s->recv[s->recv_off[t] + i]] = undo[i + 1];
            d->free_ms[h0] = undo[0];
            if (d->stopped)
                return;
        }
    }
}

static int sched_alloc(sched_t *x, int n)
{
    x->order = malloc((size_t)(n ? n : 1) * sizeof(int));
    x->cand = malloc((size_t)(n ? n : 1) * sizeof(int));
    x->makespan_ms = INFINITY;
    return x->order && x->cand ? 0 : -1;
}

static void sched_free(sched_t *x)
{
    free(x->order);
    free(x->cand);
    x->order = x->cand = NULL;
}

static void sched_copy(sched_t *dst, const sched_t *src, int n)
{
    memcpy(dst->order, src->order, (size_t)n * sizeof(int));
    memcpy(dst->cand, src->cand, (size_t)n * sizeof(int));
    dst->makespan_ms = src->makespan_ms;
}

/* The DFS starts from the incumbent (the better of naive and LPT): the seed's pruning needs a
 * "current best completion time", and the search then only returns something shorter. */
static int run_dfs(const pf_reshard_sched_t *s, const pf_reshard_sched_opts_t *o, const double *min_ms,
                   const sched_t *incumbent, sched_t *out, int64_t *nodes, int *complete)
{
    int n = s->ntasks, rc = -1;
    dfs_t d = {.s = s, .min_ms = (double *)min_ms, .node_cap = o->dfs_node_cap,
               .budget_s = o->dfs_budget_s, .t0_s = pf_now_s()};
    size_t nn = (size_t)(n ? n : 1);
    d.free_ms = calloc((size_t)s->nhosts, sizeof(double));
    d.rem_ms = calloc((size_t)s->nhosts, sizeof(double));
    d.mark = calloc((size_t)s->nhosts, sizeof(int64_t));
    d.cls_of = malloc(nn * sizeof(int));
    d.cls_members = malloc(nn * sizeof(int));
    d.cls_off = malloc((nn + 1) * sizeof(int));
    d.cls_next = malloc(nn * sizeof(int));
    d.cls_order = malloc(nn * sizeof(int));
    d.seq = malloc(nn * sizeof(int));
    d.cand = calloc(nn, sizeof(int));
    d.kbuf = malloc(nn * (size_t)s->max_cand * sizeof(int));
    d.undo = malloc(nn * (size_t)(s->max_recv + 1) * sizeof(double));
    int *rep = malloc(nn * sizeof(int));
    if (!d.free_ms || !d.rem_ms || !d.mark || !d.cls_of || !d.cls_members || !d.cls_off ||
        !d.cls_next || !d.cls_order || !d.seq || !d.cand || !d.kbuf || !d.undo || !rep ||
        sched_alloc(&d.best, n))
        goto fail;
    sched_copy(&d.best, incumbent, n);

    /* classes of identical tasks, members in index order, classes by LPT order of their first */
    int *by_lpt = d.cls_members; /* scratch before the members are written */
    lpt_order(s, min_ms, by_lpt);
    for (int i = 0; i < n; i++) {
        int t = by_lpt[i], c = -1;
        for (int j = 0; j < d.ncls && c < 0; j++)
            if (same_task(s, rep[j], t))
                c = j;
        if (c < 0) {
            c = d.ncls++;
            rep[c] = t;
        }
        d.cls_of[t] = c;
    }
    for (int c = 0; c <= d.ncls; c++)
        d.cls_off[c] = 0;
    for (int t = 0; t < n; t++)
        d.cls_off[d.cls_of[t] + 1]++;
    for (int c = 0; c < d.ncls; c++) {
        d.cls_off[c + 1] += d.cls_off[c];
        d.cls_next[c] = d.cls_off[c];
        d.cls_order[c] = c;
    }
    for (int t = 0; t < n; t++)
        d.cls_members[d.cls_next[d.cls_of[t]]++] = t;
    for (int c = 0; c < d.ncls; c++)
        d.cls_next[c] = d.cls_off[c];
    for (int t = 0; t < n; t++)
        add_fixed_load(&d, t, +1);

    dfs(&d, 0, 0.0);
    sched_copy(out, &d.best, n);
    *nodes = d.stopped ? d.nodes - 1 : d.nodes;
    *complete = !d.stopped;
    rc = 0;
fail:
    free(d.free_ms);
    free(d.rem_ms);
    free(d.mark);
    free(d.cls_of);
    free(d.cls_members);
    free(d.cls_off);
    free(d.cls_next);
    free(d.cls_order);
    free(d.seq);
    free(d.cand);
    free(d.kbuf);
    free(d.undo);
    free(rep);
    sched_free(&d.best);
    return rc;
}

/* ---- Greedy Search with Randomization (Zhuang et al., Sec. 3.2) ----
 * Each iteration picks a set of tasks that share no host and involve as many hosts as possible:
 * `trials` random orders of the remaining tasks, each scanned once, taking every task that still
 * fits (with the free candidate sender of least load); the largest set found is appended to the
 * sequence. Each restart draws its own stream from the seed; the shortest schedule wins. */

/* The greedy search's workspace: the remaining tasks, one trial's picks and the round's best,
 * each host's stamp (used in the current trial when equal to stamp) and accumulated load. */
typedef struct {
    int *remaining, *perm, *pick, *pick_cand, *best_pick, *best_cand, *used;
    double *load_ms;
    int stamp;
    pf_rng_t rng;
} greedy_t;

/* One trial: a random order of the nrem remaining tasks, scanned once, taking every task whose
 * hosts are still free with its free candidate of least load. Picks go to pick / pick_cand
 * (*np of them); returns the number of hosts they involve. */
static int greedy_trial(const pf_reshard_sched_t *s, greedy_t *g, int nrem, int *np)
{
    memcpy(g->perm, g->remaining, (size_t)nrem * sizeof(int));
    for (int i = nrem - 1; i > 0; i--) {
        int j = (int)pf_rng_below(&g->rng, (uint64_t)i + 1), tmp = g->perm[i];
        g->perm[i] = g->perm[j];
        g->perm[j] = tmp;
    }
    int stamp = ++g->stamp, nhosts_used = 0, *used = g->used;
    *np = 0;
    for (int i = 0; i < nrem; i++) {
        int t = g->perm[i], ok = 1, kbest = -1;
        for (int j = s->recv_off[t]; j < s->recv_off[t + 1] && ok; j++)
            ok = used[s->recv[j]] != stamp;
        for (int k = 0; ok && k < ncand_of(s, t); k++) {
            int h = sender_of(s, t, k);
            if (used[h] != stamp &&
                (kbest < 0 || g->load_ms[h] < g->load_ms[sender_of(s, t, kbest)]))
                kbest = k;
        }
        if (!ok || kbest < 0)
            continue;
        int h = sender_of(s, t, kbest);
        nhosts_used += !receives(s, t, h) + (s->recv_off[t + 1] - s->recv_off[t]);
        used[h] = stamp;
        for (int j = s->recv_off[t]; j < s->recv_off[t + 1]; j++)
            used[s->recv[j]] = stamp;
        g->pick[*np] = t;
        g->pick_cand[(*np)++] = kbest;
    }
    return nhosts_used;
}

/* One iteration: the trial whose set involves the most hosts (best_pick / best_cand); returns
 * its size. */
static int greedy_round(const pf_reshard_sched_t *s, const pf_reshard_sched_opts_t *o,
                        greedy_t *g, int nrem)
{
    int best_n = 0, best_hosts = -1;
    for (int trial = 0; trial < (o->greedy_trials > 0 ? o->greedy_trials : 1); trial++) {
        int np, nhosts_used = greedy_trial(s, g, nrem, &np);
        if (nhosts_used > best_hosts) {
            best_hosts = nhosts_used;
            best_n = np;
            memcpy(g->best_pick, g->pick, (size_t)np * sizeof(int));
            memcpy(g->best_cand, g->pick_cand, (size_t)np * sizeof(int));
        }
    }
    return best_n;
}

/* Appends the round's set to cur's order from *placed on, charges its senders, and drops it from
 * the remaining tasks (keeping the rest in their order); returns how many remain. */
static int greedy_place(const pf_reshard_sched_t *s, greedy_t *g, sched_t *cur, int *placed,
                        int best_n, int nrem)
{
    for (int i = 0; i < best_n; i++) {
        int t = g->best_pick[i];
        cur->order[(*placed)++] = t;
        cur->cand[t] = g->best_cand[i];
        g->load_ms[sender_of(s, t, g->best_cand[i])] += ms_of(s, t, g->best_cand[i]);
    }
    int w = 0;
    for (int i = 0; i < nrem; i++) {
        int keep = 1;
        for (int j = 0; j < best_n && keep; j++)
            keep = g->remaining[i] != g->best_pick[j];
        if (keep)
            g->remaining[w++] = g->remaining[i];
    }
    return w;
}

static int run_greedy(const pf_reshard_sched_t *s, const pf_reshard_sched_opts_t *o, sched_t *out,
                      double *free_ms)
{
    int n = s->ntasks, rc = -1;
    size_t nn = (size_t)(n ? n : 1);
    greedy_t g = {0};
    g.remaining = malloc(nn * sizeof(int));
    g.perm = malloc(nn * sizeof(int));
    g.pick = malloc(nn * sizeof(int));
    g.pick_cand = malloc(nn * sizeof(int));
    g.best_pick = malloc(nn * sizeof(int));
    g.best_cand = malloc(nn * sizeof(int));
    g.used = calloc((size_t)s->nhosts, sizeof(int));
    g.load_ms = malloc((size_t)s->nhosts * sizeof(double));
    sched_t cur = {0};
    if (!g.remaining || !g.perm || !g.pick || !g.pick_cand || !g.best_pick || !g.best_cand ||
        !g.used || !g.load_ms || sched_alloc(&cur, n))
        goto fail;
    out->makespan_ms = INFINITY;
    for (int r = 0; r < (o->greedy_restarts > 0 ? o->greedy_restarts : 1); r++) {
        pf_rng_seed(&g.rng, o->seed + 0x9E3779B97F4A7C15ull * (uint64_t)(r + 1));
        int nrem = n, placed = 0;
        for (int t = 0; t < n; t++)
            g.remaining[t] = t;
        for (int h = 0; h < s->nhosts; h++)
            g.load_ms[h] = 0;
        while (nrem > 0)
            nrem = greedy_place(s, &g, &cur, &placed, greedy_round(s, o, &g, nrem), nrem);
        cur.makespan_ms = eval_ws(s, cur.order, cur.cand, NULL, free_ms);
        if (cur.makespan_ms < out->makespan_ms)
            sched_copy(out, &cur, n);
    }
    rc = 0;
fail:
    free(g.remaining);
    free(g.perm);
    free(g.pick);
    free(g.pick_cand);
    free(g.best_pick);
    free(g.best_cand);
    free(g.used);
    free(g.load_ms);
    sched_free(&cur);
    return rc;
}

void pf_reshard_sched_result_free(pf_reshard_sched_result_t *r)
{
    if (!r)
        return;
    free(r->order);
    free(r->cand);
    free(r->start_ms);
    memset(r, 0, sizeof *r);
}

/* The algorithm that solve reports: the one asked for, or under BEST the shortest of the others
 * (ties: the lower-numbered); fills out->algo_ms for those that ran. */
static pf_reshard_sched_algo_t pick_winner(pf_reshard_sched_algo_t algo, const sched_t *run,
                                           pf_reshard_sched_result_t *out)
{
    int want_all = algo == PF_RESHARD_SCHED_BEST;
    for (int a = 0; a < PF_RESHARD_SCHED_BEST; a++)
        if (want_all || a == (int)algo || a == PF_RESHARD_SCHED_NAIVE || a == PF_RESHARD_SCHED_LPT)
            out->algo_ms[a] = run[a].makespan_ms;
    if (!want_all)
        return algo;
    pf_reshard_sched_algo_t win = PF_RESHARD_SCHED_NAIVE;
    for (int a = 1; a < PF_RESHARD_SCHED_BEST; a++)
        if (run[a].makespan_ms < run[win].makespan_ms)
            win = (pf_reshard_sched_algo_t)a;
    out->algo_ms[PF_RESHARD_SCHED_BEST] = run[win].makespan_ms;
    return win;
}

/* Runs the algorithms algo needs into run[]: naive and LPT always (cheap, and the DFS's
 * incumbent), the DFS and the greedy search when asked for or under BEST. 0 or -1 (out of
 * memory). */
static int run_algorithms(const pf_reshard_sched_t *s, pf_reshard_sched_algo_t algo,
                          const pf_reshard_sched_opts_t *o, const double *min_ms, sched_t *run,
                          double *load_ms, double *free_ms, pf_reshard_sched_result_t *out)
{
    int want_all = algo == PF_RESHARD_SCHED_BEST;
    naive(s, &run[PF_RESHARD_SCHED_NAIVE], free_ms);
    lpt(s, min_ms, &run[PF_RESHARD_SCHED_LPT], load_ms, free_ms);
    if (want_all || algo == PF_RESHARD_SCHED_DFS) {
        const sched_t *inc =
            run[PF_RESHARD_SCHED_LPT].makespan_ms <= run[PF_RESHARD_SCHED_NAIVE].makespan_ms
                ? &run[PF_RESHARD_SCHED_LPT]
                : &run[PF_RESHARD_SCHED_NAIVE];
        if (run_dfs(s, o, min_ms, inc, &run[PF_RESHARD_SCHED_DFS], &out->dfs_nodes,
                    &out->dfs_complete))
            return -1;
    }
    if ((want_all || algo == PF_RESHARD_SCHED_GREEDY) &&
        run_greedy(s, o, &run[PF_RESHARD_SCHED_GREEDY], free_ms))
        return -1;
    return 0;
}

int pf_reshard_sched_solve(const pf_reshard_sched_t *s, pf_reshard_sched_algo_t algo,
                           const pf_reshard_sched_opts_t *o, pf_reshard_sched_result_t *out,
                           char *err, size_t errlen)
{
    int n = s->ntasks, rc = PF_ERR;
    memset(out, 0, sizeof *out);
    if ((unsigned)algo >= PF_RESHARD_SCHED_NALGOS)
        return pf_fail(err, errlen, PF_EINPUT, "load-balance algorithm %d unknown", (int)algo);
    if (o->dfs_budget_s < 0 || !isfinite(o->dfs_budget_s) || o->dfs_node_cap < 0)
        return pf_fail(err, errlen, PF_EINPUT, "DFS budget %g s / node cap %lld: must be >= 0",
                       o->dfs_budget_s, (long long)o->dfs_node_cap);
    size_t nn = (size_t)(n ? n : 1);
    double *min_ms = malloc(nn * sizeof(double));
    double *free_ms = malloc((size_t)s->nhosts * sizeof(double));
    double *load_ms = malloc((size_t)s->nhosts * sizeof(double));
    sched_t run[PF_RESHARD_SCHED_BEST] = {{0}};
    out->ntasks = n;
    out->order = malloc(nn * sizeof(int));
    out->cand = malloc(nn * sizeof(int));
    out->start_ms = malloc(nn * sizeof(double));
    if (!min_ms || !free_ms || !load_ms || !out->order || !out->cand || !out->start_ms)
        goto fail;
    for (int a = 0; a < PF_RESHARD_SCHED_BEST; a++)
        if (sched_alloc(&run[a], n))
            goto fail;
    for (int a = 0; a < PF_RESHARD_SCHED_NALGOS; a++)
        out->algo_ms[a] = NAN;
    for (int t = 0; t < n; t++)
        min_ms[t] = min_ms_of(s, t);
    if (run_algorithms(s, algo, o, min_ms, run, load_ms, free_ms, out))
        goto fail;
    pf_reshard_sched_algo_t win = pick_winner(algo, run, out);
    out->algo = win;
    memcpy(out->order, run[win].order, (size_t)n * sizeof(int));
    memcpy(out->cand, run[win].cand, (size_t)n * sizeof(int));
    out->makespan_ms = eval_ws(s, out->order, out->cand, out->start_ms, free_ms);
    rc = PF_OK;
fail:
    if (rc != PF_OK) {
        pf_reshard_sched_result_free(out);
        pf_fail(err, errlen, PF_ERR, "reshard schedule: out of memory");
    }
    for (int a = 0; a < PF_RESHARD_SCHED_BEST; a++)
        sched_free(&run[a]);
    free(min_ms);
    free(free_ms);
    free(load_ms);
    return rc;
}
