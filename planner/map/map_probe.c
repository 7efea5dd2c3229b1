/* map_probe: the DFS probe (Parmesan V-A, Algorithm 2).
 *
 * The probe answers "is there a one-to-one p: stage replicas -> devices with max_x c_stage(x, p)
 * <= t?" exactly, by depth-first search over a fixed mapping order. What it adds to Algorithm 2,
 * all of it exact (a branch is cut only when no completion of it can meet the target):
 *
 *  - Partial lower bounds. Every term of eq. 6 is >= 0 and eq. 7 is a max, so a stage replica's
 *    time is bounded below before all its neighbours are placed: placed neighbours contribute
 *    their exact transfer, an unplaced one at least min latency + M / max bandwidth out of the
 *    device (lbterm), and a ring pair with one end placed at least the transfer over that
 *    device's fastest link. The static eq. 10 / eq. 11 bound of (stage, device) is a floor under
 *    all of it. A candidate is rejected when the bound of any stage it touches exceeds t; the
 *    paper's checking scheme (exact times of the stage replicas that become complete) runs too
 *    and is what decides acceptance.
 *  - Ring capacity (ar, full). At target t a ring link of stage s must carry at least
 *    T(s) / (t - c_u(s)), so the replicas of s share one component of the graph of such links
 *    (pf_map_bounds_ring_components); a placement that leaves a started stage's component with
 *    fewer free devices than its unplaced replicas is cut (ring_ok in map_probe.c).
 *  - Symmetry (map_symmetry.c): of devices, host blocks and replicas; why the rules combine
 *    exactly is argued there.
 *
 * Parallelism: the first one or two levels of the tree are cut into branches (in the sequential
 * order) that OpenMP threads take dynamically. A thread that finds a mapping in branch i publishes
 * i; threads in branches > i stop at once, those in branches < i go on, and the lowest branch
 * wins. So the probe returns the mapping a sequential DFS would, whatever the thread count. */
#include "planner/map/map_probe.h"
#include "planner/map/map_bounds.h"
#include "planner/map/map_context.h"
#include "planner/core/util.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Pruning by a partial bound uses t (1 + PRUNE_SLACK): the bounds add the same terms in another
 * order than the exact evaluation, so they may exceed the exact value by a few ulps. The exact
 * checks compare with t itself. */
#define PRUNE_SLACK 1e-12
#define DEADLINE_CHECK_MASK 255

static double lbterm(const pf_map_context_t *cx, int d, double bytes)
{
    return cx->min_lat_out[d] + bytes / cx->max_bw_out[d];
}

/* ---------------------------------------------------------------- the DFS */

typedef struct {
    atomic_int best_branch; /* lowest branch that found a mapping; INT_MAX = none */
    atomic_int stop;        /* deadline passed or cancelled */
    atomic_int failed;      /* out of memory in a thread */
    const atomic_int *cancel;
    double deadline_s;
    int *dev_out;
    double objective_ms;
    /* Ring components at this target (ar, full; NULL otherwise): comp[s * D + d] = the component
     * of d in the graph of links fast enough for stage s's ring (w >= T(s) / (t - c_u(s))),
     * comp_devices[s * D + c] = devices in component c. */
    int *comp, *comp_devices;
} shared_t;

typedef struct {
    double *slot;
    double old;
} undo_t;

typedef pf_map_bounds_keyed_t cand_t; /* key = the candidate's score */

typedef struct {
    const pf_map_context_t *cx;
    shared_t *sh;
    double target, t_prune;
    int *dev, *used;
    double *acc;  /* N: exact transfers to placed neighbours (eq. 8 so far) */
    double *rem;  /* N: lbterm of the neighbours not yet placed */
    double *mmax; /* S: max over placed replicas of their eq. 8 bound */
    double *arlb; /* S: eq. 9 bound from the placed ring pairs (and half-placed ones) */
    double *tp;   /* N + 1: max exact time checked above each depth (t_p of Algorithm 2) */
    undo_t *log;
    int nlog, log_cap;
    cand_t *cand;
    int ncand;
    size_t cand_cap;
    int *cls_stamp, stamp;
    /* per block layer l (map_symmetry.h): blk_used[l][b] = placed devices in block b,
     * blk_open[l][k] = blocks in use in class k (always its first ones in block order) */
    int *blk_used[PF_MAP_SYM_MAX_LAYERS], *blk_open[PF_MAP_SYM_MAX_LAYERS];
    long long nodes, sym_pruned, block_pruned, bound_pruned;
    int branch;
    int *comp_free;  /* S x D: free devices per ring component (ar, full) */
    int *placed;     /* S: replicas of each stage placed */
    int *stage_comp; /* S: the component of a stage's placed replicas, -1 = none yet */
} dfs_t;

static void dfs_free(dfs_t *st)
{
    free(st->dev);
    free(st->used);
    free(st->acc);
    free(st->rem);
    free(st->mmax);
    free(st->arlb);
    free(st->tp);
    free(st->log);
    free(st->cand);
    free(st->cls_stamp);
    for (int l = 0; l < PF_MAP_SYM_MAX_LAYERS; l++) {
        free(st->blk_used[l]);
        free(st->blk_open[l]);
    }
    free(st->comp_free);
    free(st->placed);
    free(st->stage_comp);
}

static int dfs_init(dfs_t *st, const pf_map_context_t *cx, shared_t *sh, double target)
{
    int N = cx->N, S = cx->S, D = cx->D;
    memset(st, 0, sizeof *st);
    st->cx = cx;
    st->sh = sh;
    st->target = target;
    st->t_prune = target + fabs(target) * PRUNE_SLACK;
    st->log_cap = N * (6 + 3 * cx->max_deg) + 8;
    st->cand_cap = 4 * D + 16;
    st->dev = malloc((size_t)N * sizeof *st->dev);
    st->used = calloc((size_t)D, sizeof *st->used);
    st->acc = calloc((size_t)N, sizeof *st->acc);
    st->rem = calloc((size_t)N, sizeof *st->rem);
    st->mmax = calloc((size_t)S, sizeof *st->mmax);
    st->arlb = calloc((size_t)S, sizeof *st->arlb);
    st->tp = calloc((size_t)N + 1, sizeof *st->tp);
    st->log = malloc((size_t)st->log_cap * sizeof *st->log);
    st->cand = malloc((size_t)st->cand_cap * sizeof *st->cand);
    st->cls_stamp = calloc((size_t)cx->sym.ncls, sizeof *st->cls_stamp);
    bool blk_ok = true;
    for (int l = 0; l < cx->sym.nlay; l++) {
        st->blk_used[l] = calloc((size_t)cx->sym.lay[l].nblk, sizeof *st->blk_used[l]);
        st->blk_open[l] = calloc((size_t)cx->sym.lay[l].nbcls, sizeof *st->blk_open[l]);
        blk_ok = blk_ok && st->blk_used[l] && st->blk_open[l];
    }
    if (!st->dev || !st->used || !st->acc || !st->rem || !st->mmax || !st->arlb || !st->tp ||
        !st->log || !st->cand || !st->cls_stamp || !blk_ok) {
        dfs_free(st);
        return PF_ERR;
    }
    if (sh->comp) {
        st->comp_free = malloc((size_t)S * D * sizeof *st->comp_free);
        st->placed = calloc((size_t)S, sizeof *st->placed);
        st->stage_comp = malloc((size_t)S * sizeof *st->stage_comp);
        if (!st->comp_free || !st->placed || !st->stage_comp) {
            dfs_free(st);
            return PF_ERR;
        }
        memcpy(st->comp_free, sh->comp_devices, (size_t)S * D * sizeof *st->comp_free);
        for (int s = 0; s < S; s++)
            st->stage_comp[s] = -1;
    }
    for (int x = 0; x < N; x++)
        st->dev[x] = -1;
    return PF_OK;
}

static inline void set_logged(dfs_t *st, double *slot, double v)
{
    st->log[st->nlog].slot = slot;
    st->log[st->nlog++].old = *slot;
    *slot = v;
}

static void undo_to(dfs_t *st, int mark)
{
    while (st->nlog > mark) {
        st->nlog--;
        *st->log[st->nlog].slot = st->log[st->nlog].old;
    }
}

/* Bounds after placing x on d. False when a stage it touches is bound to exceed the target.
 * commit = 1 applies the new partial sums (logged; the caller undoes on failure). *score: the
 * largest new bound of x or of a neighbour (used to order candidates). */
static bool place(dfs_t *st, int x, int d, int commit, double *score)
{
    const pf_map_context_t *cx = st->cx;
    int R = cx->R, D = cx->D, s = x / R, r = x % R, ok = 1;
    double sc = 0, mx = 0, pairv = 0;
    if (cx->use_m) {
        double a = 0, rm = 0;
        for (int k = cx->adj_off[s]; k < cx->adj_off[s + 1]; k++) {
            int s2 = cx->adj[k], x2 = s2 * R + r, e = st->dev[x2];
            double M = cx->adj_bytes[k];
            if (e < 0) {
                rm += lbterm(cx, d, M);
                continue;
            }
            const pf_map_links_t *lk = &cx->links;
            a += pf_map_links_lat_ms(lk, d, e) + M / pf_map_links_bw_bpms(lk, d, e);
            double acc2 = st->acc[x2] +
                          (pf_map_links_lat_ms(lk, e, d) + M / pf_map_links_bw_bpms(lk, e, d));
            double rem2 = st->rem[x2] - lbterm(cx, e, M);
            double mb2 = fmax(acc2 + fmax(rem2, 0.0), cx->bounds.static_m[(size_t)s2 * D + e]);
            double mmax2 = fmax(st->mmax[s2], mb2);
            double ar2 = cx->use_ar ? st->arlb[s2] : 0.0;
            double cu2 = pf_map_context_cu(cx, s2, e);
            if (cu2 + mmax2 + ar2 > st->t_prune) {
                ok = 0;
                if (!commit)
                    return false;
            }
            sc = fmax(sc, cu2 + mb2);
            if (commit) {
                set_logged(st, &st->acc[x2], acc2);
                set_logged(st, &st->rem[x2], rem2);
                set_logged(st, &st->mmax[s2], mmax2);
            }
        }
        mx = fmax(a + rm, cx->bounds.static_m[(size_t)s * D + d]);
        if (commit) {
            set_logged(st, &st->acc[x], a);
            set_logged(st, &st->rem[x], rm);
        }
    }
    double arv = 0;
    if (cx->use_ar) {
        double T = cx->ar_bytes[s];
        int xp = s * R + (r + R - 1) % R, xn = s * R + (r + 1) % R;
        pairv = cx->bounds.static_ar[(size_t)s * D + d];
        if (st->dev[xp] >= 0)
            pairv = fmax(pairv, T / pf_map_links_bw_bpms(&cx->links, st->dev[xp], d));
        else
            pairv = fmax(pairv, T / cx->max_bw_in[d]);
        if (st->dev[xn] >= 0)
            pairv = fmax(pairv, T / pf_map_links_bw_bpms(&cx->links, d, st->dev[xn]));
        else
            pairv = fmax(pairv, T / cx->max_bw_out[d]);
        arv = fmax(st->arlb[s], pairv);
        if (commit)
            set_logged(st, &st->arlb[s], arv);
    }
    double mm = cx->use_m ? fmax(st->mmax[s], mx) : 0.0;
    double cu = pf_map_context_cu(cx, s, d);
    if (cu + mm + arv > st->t_prune)
        ok = 0;
    if (commit && cx->use_m)
        set_logged(st, &st->mmax[s], mm);
    *score = fmax(sc, cu + mx + pairv);
    return ok;
}

/* Ring capacity (exact): all replicas of a stage must share one ring component (else a ring link
 * is too slow for the target), so placing x on d needs d in the component the stage already uses,
 * enough free devices left there for the stage's unplaced replicas, and enough left in every
 * other started stage's component for its own. */
static bool ring_ok(const dfs_t *st, int x, int d)
{
    const pf_map_context_t *cx = st->cx;
    const int *comp = st->sh->comp;
    int S = cx->S, D = cx->D, R = cx->R, s = x / R;
    if (!comp)
        return true;
    int c = comp[(size_t)s * D + d];
    if (st->stage_comp[s] >= 0 && st->stage_comp[s] != c)
        return false;
    if (st->comp_free[(size_t)s * D + c] - 1 < R - st->placed[s] - 1)
        return false;
    for (int s2 = 0; s2 < S; s2++) {
        int c2 = st->stage_comp[s2];
        if (s2 == s || c2 < 0 || comp[(size_t)s2 * D + d] != c2)
            continue;
        if (st->comp_free[(size_t)s2 * D + c2] - 1 < R - st->placed[s2])
            return false;
    }
    return true;
}

static void ring_take(dfs_t *st, int x, int d)
{
    const pf_map_context_t *cx = st->cx;
    const int *comp = st->sh->comp;
    int S = cx->S, D = cx->D, s = x / cx->R;
    if (!comp)
        return;
    for (int s2 = 0; s2 < S; s2++)
        st->comp_free[(size_t)s2 * D + comp[(size_t)s2 * D + d]]--;
    if (st->placed[s]++ == 0)
        st->stage_comp[s] = comp[(size_t)s * D + d];
}

static void ring_release(dfs_t *st, int x, int d)
{
    const pf_map_context_t *cx = st->cx;
    const int *comp = st->sh->comp;
    int S = cx->S, D = cx->D, s = x / cx->R;
    if (!comp)
        return;
    for (int s2 = 0; s2 < S; s2++)
        st->comp_free[(size_t)s2 * D + comp[(size_t)s2 * D + d]]++;
    if (--st->placed[s] == 0)
        st->stage_comp[s] = -1;
}

/* Place order[depth] on d and run the checking scheme. False (state to be undone by the
 * caller with undo_to and unassign) when a bound or an exact stage time exceeds the target. */
static bool commit(dfs_t *st, int depth, int d)
{
    const pf_map_context_t *cx = st->cx;
    int x = cx->order[depth];
    double score;
    int ring = ring_ok(st, x, d);
    st->dev[x] = d;
    st->used[d] = 1;
    for (int l = 0; l < cx->sym.nlay; l++) {
        int b = cx->sym.lay[l].blk[d];
        if (b >= 0 && st->blk_used[l][b]++ == 0)
            st->blk_open[l][cx->sym.lay[l].blk_class[b]]++;
    }
    ring_take(st, x, d);
    if (!ring || !place(st, x, d, 1, &score))
        return false;
    double tp = st->tp[depth];
    for (int i = cx->chk_off[depth]; i < cx->chk_off[depth + 1]; i++) {
        double t = pf_map_context_stage_time_ms(cx, st->dev, cx->chk[i]);
        if (t > st->target)
            return false;
        tp = fmax(tp, t);
    }
    st->tp[depth + 1] = tp;
    return true;
}

static void unassign(dfs_t *st, int depth)
{
    const pf_map_context_t *cx = st->cx;
    int x = cx->order[depth], d = st->dev[x];
    ring_release(st, x, d);
    st->used[d] = 0;
    for (int l = 0; l < cx->sym.nlay; l++) {
        int b = cx->sym.lay[l].blk[d];
        if (b >= 0 && --st->blk_used[l][b] == 0)
            st->blk_open[l][cx->sym.lay[l].blk_class[b]]--;
    }
    st->dev[x] = -1;
}

/* The block rule: a block not in use opens only as its class's first unused one, in every
 * layer. Returns how many devices from canonical position i on it rules out (the rest of the
 * first failing block when blocks are canonical intervals, else 1), 0 when d passes. Layers go
 * coarsest first, so an unused leaf or spine is skipped whole: a node costs the placed devices
 * plus the units it opens, not D. */
static int block_skip(const dfs_t *st, int i, int d)
{
    const pf_map_symmetry_t *sy = &st->cx->sym;
    for (int l = 0; l < sy->nlay; l++) {
        const pf_map_sym_layer_t *ly = &sy->lay[l];
        int b = ly->blk[d];
        if (b >= 0 && st->blk_used[l][b] == 0 &&
            ly->blk_kpos[b] != st->blk_open[l][ly->blk_class[b]])
            return ly->blk_end ? ly->blk_end[b] - i : 1;
    }
    return 0;
}

/* Pushes the candidates of depth onto the candidate stack, best first; returns how many. */
static int gen_candidates(dfs_t *st, int depth)
{
    const pf_map_context_t *cx = st->cx;
    int D = cx->D, x = cx->order[depth], s = x / cx->R, base = st->ncand;
    const int *rank = cx->bounds.rank + (size_t)s * D;
    int low = cx->low_ref[depth] >= 0 ? rank[st->dev[cx->low_ref[depth]]] : -1;
    if (pf_grow((void **)&st->cand, &st->cand_cap, (size_t)st->ncand + D, sizeof *st->cand)) {
        atomic_store(&st->sh->failed, 1);
        return 0;
    }
    st->stamp++;
    for (int i = 0; i < D; i++) { /* canonical order: a class's first member is its least */
        int d = cx->sym.canon[i], skip;
        if (st->used[d])
            continue;
        /* before the class rule, whose representative must be a device this rule keeps (an
         * unused block holds no placed device: skipping it whole skips no used one) */
        if ((skip = block_skip(st, i, d)) > 0) {
            st->sym_pruned += skip;
            st->block_pruned += skip;
            i += skip - 1;
            continue;
        }
        if (rank[d] <= low) { /* excluded by the replica order */
            st->sym_pruned++;
            continue;
        }
        if (cx->symmetry) {
            int c = cx->sym.cls[d];
            if (st->cls_stamp[c] == st->stamp) {
                st->sym_pruned++;
                continue;
            }
            st->cls_stamp[c] = st->stamp;
        }
        double score;
        if (cx->bounds.static_lb[(size_t)s * D + d] > st->t_prune || !ring_ok(st, x, d) ||
            !place(st, x, d, 0, &score)) {
            st->bound_pruned++;
            continue;
        }
        st->cand[st->ncand].key = score;
        st->cand[st->ncand++].d = d;
    }
    int n = st->ncand - base;
    qsort(st->cand + base, (size_t)n, sizeof *st->cand, pf_map_bounds_keyed_cmp);
    return n;
}

static bool should_stop(dfs_t *st)
{
    shared_t *sh = st->sh;
    if (atomic_load_explicit(&sh->best_branch, memory_order_relaxed) < st->branch ||
        atomic_load_explicit(&sh->stop, memory_order_relaxed) ||
        atomic_load_explicit(&sh->failed, memory_order_relaxed))
        return true;
    if (sh->cancel && atomic_load_explicit(sh->cancel, memory_order_relaxed)) {
        atomic_store(&sh->stop, 1);
        return true;
    }
    if ((st->nodes & DEADLINE_CHECK_MASK) == 0 && sh->deadline_s > 0 &&
        pf_now_s() > sh->deadline_s) {
        atomic_store(&sh->stop, 1);
        return true;
    }
    return false;
}

static void found(dfs_t *st)
{
    shared_t *sh = st->sh;
#pragma omp critical(pf_map_probe_found)
    {
        if (st->branch < atomic_load(&sh->best_branch)) {
            memcpy(sh->dev_out, st->dev, (size_t)st->cx->N * sizeof *st->dev);
            sh->objective_ms = pf_map_context_objective_ms(st->cx, st->dev);
            atomic_store(&sh->best_branch, st->branch);
        }
    }
}

/* Algorithm 2 below depth: true when a mapping was found (and published by found()). */
static bool dfs(dfs_t *st, int depth)
{
    const pf_map_context_t *cx = st->cx;
    if (depth == cx->N) {
        found(st);
        return true;
    }
    st->nodes++;
    if (should_stop(st))
        return false;
    int base = st->ncand, n = gen_candidates(st, depth);
    for (int i = 0; i < n; i++) {
        int mark = st->nlog;
        bool ok = commit(st, depth, st->cand[base + i].d);
        if (ok && dfs(st, depth + 1)) {
            st->ncand = base;
            return true;
        }
        if (!ok)
            st->bound_pruned++;
        undo_to(st, mark);
        unassign(st, depth);
        if (should_stop(st))
            break;
    }
    st->ncand = base;
    return false;
}

/* A top-level branch: the devices of the first len stage replicas in the mapping order. */
typedef struct {
    int len;
    int d[2];
} branch_t;

/* Branches in sequential DFS order: level 1, or levels 1 and 2 when level 1 alone would leave
 * threads idle. st0's nodes and prunes count the prefixes made. */
static int make_branches(dfs_t *st0, int threads, branch_t **brp, int *nbrp)
{
    const pf_map_context_t *cx = st0->cx;
    int nbr = 0;
    st0->nodes = 1;
    int n0 = gen_candidates(st0, 0);
    size_t cap = n0 ? (size_t)n0 : 1;
    int two = threads > 1 && cx->N > 1 && n0 < 4 * threads;
    branch_t *br = *brp = malloc((size_t)cap * sizeof *br);
    if (!br)
        return PF_ERR;
    for (int i = 0; i < n0; i++) {
        int d0 = st0->cand[i].d;
        if (!two) {
            br[nbr++] = (branch_t){1, {d0, -1}};
            continue;
        }
        int mark = st0->nlog;
        if (commit(st0, 0, d0)) {
            st0->nodes++;
            int base = st0->ncand, n1 = gen_candidates(st0, 1);
            if (pf_grow((void **)brp, &cap, (size_t)nbr + n1, sizeof *br))
                return PF_ERR;
            br = *brp;
            for (int j = 0; j < n1; j++)
                br[nbr++] = (branch_t){2, {d0, st0->cand[base + j].d}};
            st0->ncand = base;
        } else {
            st0->bound_pruned++;
        }
        undo_to(st0, mark);
        unassign(st0, 0);
    }
    *nbrp = nbr;
    return PF_OK;
}

/* The DFS below one branch's prefix (whose nodes were counted when the branches were made). */
static void run_branch(dfs_t *st, const branch_t *b)
{
    int placed = 0, good = 1;
    for (int k = 0; k < b->len && good; k++) {
        placed++;
        good = commit(st, k, b->d[k]);
    }
    if (good)
        dfs(st, b->len);
    else
        st->bound_pruned++;
    undo_to(st, 0);
    for (int k = 0; k < placed; k++)
        unassign(st, k);
}

/* The branches on `threads` OpenMP threads, taken dynamically; adds their counts to res. */
static void run_branches(const pf_map_context_t *cx, shared_t *sh, double target_ms,
                         int threads, const branch_t *br, int nbr, pf_probe_result_t *res)
{
    long long nodes = 0, symp = 0, blockp = 0, boundp = 0;
#pragma omp parallel num_threads(threads) reduction(+ : nodes, symp, blockp, boundp)
    {
        dfs_t st;
        int ok = dfs_init(&st, cx, sh, target_ms) == PF_OK;
        if (!ok)
            atomic_store(&sh->failed, 1);
#pragma omp for schedule(dynamic, 1)
        for (int i = 0; i < nbr; i++) {
            if (!ok)
                continue;
            st.branch = i;
            if (should_stop(&st))
                continue;
            run_branch(&st, &br[i]);
        }
        if (ok) {
            nodes += st.nodes;
            symp += st.sym_pruned;
            blockp += st.block_pruned;
            boundp += st.bound_pruned;
            dfs_free(&st);
        }
    }
    res->nodes += nodes;
    res->symmetric_pruned += symp;
    res->block_pruned += blockp;
    res->bound_pruned += boundp;
}

/* found, or why not: cancelled (by the caller's flag) or timed out. */
static void outcome(shared_t *sh, const atomic_int *cancel, pf_probe_result_t *res,
                    int *cancelled)
{
    if (atomic_load(&sh->best_branch) != INT_MAX) {
        res->found = 1;
        res->objective_ms = sh->objective_ms;
    } else if (atomic_load(&sh->stop)) {
        if (cancel && atomic_load(cancel)) {
            if (cancelled)
                *cancelled = 1;
        } else {
            res->timed_out = 1;
        }
    }
}

int pf_map_probe_run(const pf_map_context_t *cx, double target_ms, double deadline_s, int threads,
                     const atomic_int *cancel, int *dev, pf_probe_result_t *res, int *cancelled)
{
    shared_t sh = {.cancel = cancel, .deadline_s = deadline_s, .dev_out = dev,
                   .objective_ms = NAN};
    dfs_t st0;
    branch_t *br = NULL;
    int nbr = 0, rc = PF_ERR;
    memset(res, 0, sizeof *res);
    res->objective_ms = NAN;
    if (cancelled)
        *cancelled = 0;
    atomic_init(&sh.best_branch, INT_MAX);
    atomic_init(&sh.stop, 0);
    atomic_init(&sh.failed, 0);
    if (threads <= 0)
        threads = omp_get_max_threads();
    if (cx->use_ar &&
        pf_map_bounds_ring_components(&cx->bounds, target_ms + fabs(target_ms) * PRUNE_SLACK,
                                      &sh.comp, &sh.comp_devices) != PF_OK)
        return PF_ERR;
    if (dfs_init(&st0, cx, &sh, target_ms) != PF_OK) {
        free(sh.comp);
        free(sh.comp_devices);
        return PF_ERR;
    }
    if (cx->bounds.lower_ms > st0.t_prune) { /* eq. 10 / 11 already rule the target out */
        rc = PF_OK;
        goto done;
    }
    if (make_branches(&st0, threads, &br, &nbr) != PF_OK || atomic_load(&sh.failed))
        goto done;
    res->nodes = st0.nodes;
    res->symmetric_pruned = st0.sym_pruned;
    res->block_pruned = st0.block_pruned;
    res->bound_pruned = st0.bound_pruned;
    run_branches(cx, &sh, target_ms, threads, br, nbr, res);
    if (atomic_load(&sh.failed))
        goto done;
    outcome(&sh, cancel, res, cancelled);
    rc = PF_OK;
done:
    free(br);
    dfs_free(&st0);
    free(sh.comp);
    free(sh.comp_devices);
    return rc;
}
