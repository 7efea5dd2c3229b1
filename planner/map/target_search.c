/* target_search: Algorithm 1 (Liu et al., "Parmesan") as a state machine; target_search.h says
 * what the two policies are for. Nothing here reads a clock or starts a thread: the drivers
 * (mapping.c's in-process loop, the distributed search's map phase) do. */
#include "planner/map/target_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A probe that went out: the driver's tag and its target. */
typedef struct {
    uint64_t tag;
    double target_ms;
} probe_t;

/* ROUNDS: an answer kept until the whole round is in. */
typedef struct {
    bool in;
    pf_target_verdict_t verdict;
    double objective_ms;
} slot_t;

struct pf_target_search {
    pf_target_search_opts_t o;
    int n;              /* entries of a mapping */
    double lo, hi;      /* [t_l, t_r]; hi is the objective of best */
    int *best;
    int timeouts;
    bool over;
    bool proposed;      /* proposal awaits pf_target_search_sent */
    double proposal;
    probe_t *flight;    /* STREAM: out, unordered; ROUNDS: the round, ascending targets */
    int nflight;
    uint64_t *withdrawn;
    int nwithdrawn;
    double *pts;        /* STREAM: scratch for the widest gap (width + 2) */
    int nround, nin;    /* ROUNDS: targets in the round (nflight of them sent), answers in */
    slot_t *slot;
    int *slot_dev;      /* ROUNDS: width x n, the mapping each found answer brought */
};

pf_target_search_t *pf_target_search_new(const pf_target_search_opts_t *o, double lower_ms,
                                         double upper_ms, const int *dev, int n)
{
    if (o->width < 1 || n < 0 || o->max_timeouts < 0)
        return NULL;
    pf_target_search_t *ts = calloc(1, sizeof *ts);
    if (!ts)
        return NULL;
    size_t w = (size_t)o->width, m = n > 0 ? (size_t)n : 1;
    ts->o = *o;
    ts->n = n;
    ts->lo = lower_ms;
    ts->hi = upper_ms;
    ts->best = malloc(m * sizeof *ts->best);
    ts->flight = malloc(w * sizeof *ts->flight);
    ts->withdrawn = malloc(w * sizeof *ts->withdrawn);
    ts->pts = malloc((w + 2) * sizeof *ts->pts);
    if (!ts->best || !ts->flight || !ts->withdrawn || !ts->pts)
        goto fail;
    if (o->policy == PF_TARGET_SEARCH_ROUNDS) {
        ts->slot = calloc(w, sizeof *ts->slot);
        ts->slot_dev = malloc(w * m * sizeof *ts->slot_dev);
        if (!ts->slot || !ts->slot_dev)
            goto fail;
    }
    if (n > 0)
        memcpy(ts->best, dev, (size_t)n * sizeof *ts->best);
    return ts;
fail:
    pf_target_search_destroy(&ts);
    return NULL;
}

void pf_target_search_destroy(pf_target_search_t **tsp)
{
    if (!tsp || !*tsp)
        return;
    pf_target_search_t *ts = *tsp;
    free(ts->best);
    free(ts->flight);
    free(ts->withdrawn);
    free(ts->pts);
    free(ts->slot);
    free(ts->slot_dev);
    free(ts);
    *tsp = NULL;
}

static bool converged(const pf_target_search_t *ts)
{
    return ts->hi - ts->lo <= ts->o.rel_eps * ts->hi;
}

static void withdraw(pf_target_search_t *ts, int i)
{
    ts->withdrawn[ts->nwithdrawn++] = ts->flight[i].tag;
    ts->flight[i] = ts->flight[--ts->nflight];
}

/* Over: every probe still out is withdrawn, in the order they sit. */
static void finish(pf_target_search_t *ts)
{
    ts->over = true;
    ts->proposed = false;
    if (ts->o.policy != PF_TARGET_SEARCH_STREAM)
        return;
    for (int i = 0; i < ts->nflight; i++)
        ts->withdrawn[ts->nwithdrawn++] = ts->flight[i].tag;
    ts->nflight = 0;
}

/* ---- STREAM ---- */

/* The midpoint of the widest gap between the bounds and the targets out, so that W targets
 * split [t_l, t_r] evenly (the first of equal gaps, lowest first). */
static double widest_gap_midpoint(pf_target_search_t *ts)
{
    double *pts = ts->pts;
    int n = 0;
    pts[n++] = ts->lo;
    for (int i = 0; i < ts->nflight; i++)
        pts[n++] = ts->flight[i].target_ms;
    pts[n++] = ts->hi;
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && pts[k] < pts[k - 1]; k--) {
            double x = pts[k];
            pts[k] = pts[k - 1];
            pts[k - 1] = x;
        }
    int widest = 0;
    for (int i = 1; i + 1 < n; i++)
        if (pts[i + 1] - pts[i] > pts[widest + 1] - pts[widest])
            widest = i;
    return 0.5 * (pts[widest] + pts[widest + 1]);
}

static bool stream_propose(pf_target_search_t *ts, double *target_ms)
{
    if (converged(ts)) {
        finish(ts);
        return false;
    }
    if (ts->nflight + ts->nwithdrawn >= ts->o.width)
        return false;
    double target = widest_gap_midpoint(ts);
    if (!(target > ts->lo && target < ts->hi)) {
        /* nothing strictly inside (the bounds are adjacent doubles): with nothing out, no
         * answer would ever end the search */
        if (ts->nflight == 0)
            finish(ts);
        return false;
    }
    *target_ms = target;
    return true;
}

static void stream_absorb(pf_target_search_t *ts, int i, const pf_target_answer_t *a)
{
    double target = ts->flight[i].target_ms;
    ts->flight[i] = ts->flight[--ts->nflight];
    if (a->verdict == PF_TARGET_CANCELLED)
        return;
    if (a->verdict == PF_TARGET_FOUND) {
        if (a->objective_ms < ts->hi) {
            ts->hi = a->objective_ms;
            memcpy(ts->best, a->dev, (size_t)ts->n * sizeof *ts->best);
        }
    } else {
        ts->timeouts += a->verdict == PF_TARGET_TIMED_OUT;
        if (target > ts->lo)
            ts->lo = target;
    }
    if (ts->lo > ts->hi) /* only a timed-out probe can claim this; trust the mapping held */
        ts->lo = ts->hi;
    /* A timed-out probe says nothing about its target, and the later ones sit between it and
     * t_r, where the mapping held already is: past a few, each costs a full budget for a gain
     * below (t_r - t_l) / 2^k (bench/RESULTS.md, "probe time-outs"). */
    if (ts->o.max_timeouts > 0 && ts->timeouts >= ts->o.max_timeouts) {
        finish(ts);
        return;
    }
    for (int k = 0; k < ts->nflight;) { /* outside the interval a probe can no longer move it */
        double x = ts->flight[k].target_ms;
        if (x <= ts->lo || x >= ts->hi)
            withdraw(ts, k);
        else
            k++;
    }
    if (converged(ts))
        finish(ts);
}

/* ---- ROUNDS ---- */

/* K targets splitting (t_l, t_r) evenly, strictly inside and ascending. */
static void start_round(pf_target_search_t *ts)
{
    int K = ts->o.width, k = 0;
    double tl = ts->lo, tr = ts->hi;
    for (int i = 0; i < K; i++) {
        double t = tl + (tr - tl) * (i + 1) / (K + 1);
        if (t > tl && t < tr && (k == 0 || t > ts->flight[k - 1].target_ms))
            ts->flight[k++].target_ms = t;
    }
    ts->nround = k;
    ts->nflight = 0;
    ts->nin = 0;
    for (int i = 0; i < k; i++)
        ts->slot[i].in = false;
}

static bool rounds_propose(pf_target_search_t *ts, double *target_ms)
{
    if (ts->nflight < ts->nround) {
        *target_ms = ts->flight[ts->nflight].target_ms;
        return true;
    }
    if (ts->nin < ts->nround) /* waiting for the round */
        return false;
    if (converged(ts)) {
        finish(ts);
        return false;
    }
    start_round(ts);
    if (ts->nround == 0) { /* the interval is down to adjacent doubles */
        finish(ts);
        return false;
    }
    *target_ms = ts->flight[0].target_ms;
    return true;
}

/* The whole round is in: t_r moves to the least objective found, t_l to the largest target
 * without a mapping below it. A round that moves neither ends the search (it cannot happen with
 * exact probes). */
static void close_round(pf_target_search_t *ts)
{
    double new_tl = ts->lo, new_tr = ts->hi;
    int best = -1, k = ts->nround;
    for (int i = 0; i < k; i++) {
        const slot_t *sl = &ts->slot[i];
        if (sl->verdict == PF_TARGET_FOUND && sl->objective_ms < new_tr) {
            new_tr = sl->objective_ms;
            best = i;
        }
    }
    for (int i = 0; i < k; i++) {
        pf_target_verdict_t v = ts->slot[i].verdict;
        double t = ts->flight[i].target_ms;
        if ((v == PF_TARGET_NONE || v == PF_TARGET_TIMED_OUT) && t < new_tr)
            new_tl = fmax(new_tl, t);
    }
    if (best >= 0)
        memcpy(ts->best, ts->slot_dev + (size_t)best * ts->n, (size_t)ts->n * sizeof *ts->best);
    if (new_tl == ts->lo && new_tr == ts->hi)
        finish(ts);
    ts->lo = new_tl;
    ts->hi = new_tr;
}

static void rounds_absorb(pf_target_search_t *ts, int i, const pf_target_answer_t *a)
{
    slot_t *sl = &ts->slot[i];
    if (sl->in)
        return;
    sl->in = true;
    sl->verdict = a->verdict;
    sl->objective_ms = a->objective_ms;
    ts->timeouts += a->verdict == PF_TARGET_TIMED_OUT;
    if (a->verdict == PF_TARGET_FOUND)
        memcpy(ts->slot_dev + (size_t)i * ts->n, a->dev, (size_t)ts->n * sizeof *ts->slot_dev);
    if (++ts->nin == ts->nround)
        close_round(ts);
}

/* ---- both ---- */

bool pf_target_search_propose(pf_target_search_t *ts, double *target_ms)
{
    if (ts->over)
        return false;
    if (ts->proposed) {
        *target_ms = ts->proposal;
        return true;
    }
    bool any = ts->o.policy == PF_TARGET_SEARCH_STREAM ? stream_propose(ts, target_ms)
                                                        : rounds_propose(ts, target_ms);
    if (any) {
        ts->proposed = true;
        ts->proposal = *target_ms;
    }
    return any;
}

void pf_target_search_sent(pf_target_search_t *ts, uint64_t tag)
{
    if (!ts->proposed)
        return;
    ts->proposed = false;
    if (ts->o.policy == PF_TARGET_SEARCH_STREAM)
        ts->flight[ts->nflight].target_ms = ts->proposal;
    ts->flight[ts->nflight++].tag = tag;
}

void pf_target_search_absorb(pf_target_search_t *ts, uint64_t tag, const pf_target_answer_t *a)
{
    if (ts->over)
        return;
    for (int i = 0; i < ts->nflight; i++)
        if (ts->flight[i].tag == tag) {
            if (ts->o.policy == PF_TARGET_SEARCH_STREAM)
                stream_absorb(ts, i, a);
            else
                rounds_absorb(ts, i, a);
            return;
        }
}

int pf_target_search_take_withdrawn(pf_target_search_t *ts, uint64_t *tags, int cap)
{
    int n = ts->nwithdrawn < cap ? ts->nwithdrawn : cap;
    if (n <= 0)
        return 0;
    memcpy(tags, ts->withdrawn, (size_t)n * sizeof *tags);
    memmove(ts->withdrawn, ts->withdrawn + n, (size_t)(ts->nwithdrawn - n) * sizeof *tags);
    ts->nwithdrawn -= n;
    return n;
}

bool pf_target_search_done(const pf_target_search_t *ts)
{
    return ts->over;
}

double pf_target_search_lower_ms(const pf_target_search_t *ts)
{
    return ts->lo;
}

double pf_target_search_upper_ms(const pf_target_search_t *ts)
{
    return ts->hi;
}

const int *pf_target_search_best(const pf_target_search_t *ts)
{
    return ts->best;
}

int pf_target_search_timeouts(const pf_target_search_t *ts)
{
    return ts->timeouts;
}

int pf_target_search_in_flight(const pf_target_search_t *ts)
{
    return ts->nflight;
}
