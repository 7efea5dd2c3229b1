/* partition: coarsen (IV-B) -> DP over downsets (IV-A, eq. 13) -> refine (IV-C).
 *
 * The DP. Downsets F_0 = {} .. F_{D-1} = V come sorted by size, so every proper subset of F_i
 * sits in an earlier size class. With a constant R (App. B, eq. 13) and stage time eq. 3:
 *   T[1][F] = t(F)                       (+inf when m(F) exceeds the smallest device)
 *   T[s][F] = min over downsets F' strictly inside F of max(T[s-1][F'], t(F - F'))
 * and the answer is T[S][V]. A stage F - F' is nonempty, so T[s][F] = +inf when |F| < s.
 *
 * Pricing a pair without walking the graph. Per downset X we keep c_u(X), its parameter state
 * fixed(X) = state_factor x params, its stored activations act(X) = sum of mem_fwd, out(X) =
 * bytes of edges leaving X, and the list of those edges (usually few). For H = F - F':
 *   c_u(H)  = c_u(F) - c_u(F')
 *   w(F' -> H) = bytes of the edges leaving F' whose head is in F  (F's bitset tells)
 *   cut(H)  = w(F' -> H) + w(H -> V \ F) = out(F) - out(F') + 2 w(F' -> H)
 *             (out(F') = w(F' -> H) + w(F' -> V \ F), out(F) = w(H -> V \ F) + w(F' -> V \ F);
 *              this is out(F') + out(F) - 2 w(F' -> V \ F))
 *   t(H)    = c_u(H) + cut(H) / B_flat                                           (eq. 3)
 *   m(H, s) = fixed(F) - fixed(F') + k_s (act(F) - act(F')) + reserve
 *             (eq. 14 generalised, planner/ir/cost.h; k_s depends on H's place s in the chain,
 *             so the memory test is made per stage count)
 * Pruning (details at dp_cell): t(H) >= c_u(H), so candidates F' are scanned by decreasing
 * c_u(F') and the scan ends when the compute alone reaches the best value found for F at every
 * stage count; pairs are skipped before the subset test by cheap bounds. An upper bound from the
 * DP over the topological prefixes (a sub-family of the downsets, cheap) also prunes: a stage
 * slower than that bound cannot be part of an optimal chain; a lower bound ends cells early.
 *
 * Parallelism: T[.][F] reads T[.][F'] of strictly smaller downsets only, so all downsets of one
 * size class are independent; each thread owns whole cells T[2..S][F] (one F at a time) and reads
 * finished smaller classes (dp_cells: one parallel region per DP, a thread waits only where a
 * class begins). Pairs are visited in a fixed order and improvements are strict, so the result
 * does not depend on the thread count. */
#include "planner/partition/partition.h"
#include "planner/partition/partition_layout.h"
#include "planner/partition/coarsen.h"
#include "planner/partition/refine.h"
#include "planner/core/util.h"

#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pf_partition_default_k(const pf_graph_t *g, int stages, long long max_downsets)
{
    int n = pf_graph_nops(g);
    /* Coarsening exists to make the DP affordable (IV-B); when the ops' own downsets already are,
     * it can only lose quality (BERT-24 at S = 8: +0.33% with K = 64, not recovered by
     * refinement), so solve exactly. */
    long long d = pf_downsets_count(g, max_downsets > 0 ? max_downsets : PF_PARTITION_DEFAULT_MAX_DOWNSETS);
    /* ... unless the exact DP is too big anyway: its setup sums every downset over the ops
     * (D x n) and its cells pair downsets (up to D^2 / 2): a chain of 50,000 ops has only 50,001
     * downsets but gave no plan in 300 s. Under 2^26 every example stays exact (same-plans.sh: 0
     * of 49 outputs differ). */
    if (d >= 0 && (double)d * n <= (double)(1 << 26))
        return n;
    return pf_coarsen_default_k(stages, n);
}

/* ---- per-downset sums ---- */

typedef struct {
    long long D;
    int words, n;
    double *cu, *fixed, *act, *mbase, *out; /* mbase = fixed + act: memory at k_s = 1 */
    long long *estart; /* out-edge list of downset i: [estart[i], estart[i+1]) */
    int *edst;
    double *ebytes;
    long long *class_start; /* first index of each size 0..n, and D at n + 1 */
    int *pop;               /* ops per downset */
    int threads;            /* OpenMP threads worth using on these downsets (dp_threads) */
} dsinfo_t;

static void dsinfo_free(dsinfo_t *in)
{
    free(in->cu);
    free(in->fixed);
    free(in->act);
    free(in->mbase);
    free(in->out);
    free(in->estart);
    free(in->edst);
    free(in->ebytes);
    free(in->class_start);
    free(in->pop);
    memset(in, 0, sizeof *in);
}

/* Sums over the ops of downset i (in index order, so equal sets get equal rounding); with
 * dst != NULL also its leaving edges. Returns how many edges leave. */
static long long downset_sums(const pf_graph_t *g, const pf_cost_model_t *cm, const uint64_t *b,
                              int words, double *cu, double *fixed, double *act, double *out,
                              int *dst, double *bytes)
{
    long long k = 0;
    double c = 0, f = 0, a = 0, o = 0;
    for (int w = 0; w < words; w++) {
        uint64_t x = b[w];
        while (x) {
            int v = w * 64 + __builtin_ctzll(x);
            x &= x - 1;
            const pf_op_t *op = pf_graph_op(g, v);
            c += pf_graph_cu_ms(g, v);
            f += cm->state_factor * op->param_bytes;
            a += op->mem_fwd_bytes;
            int cnt;
            const int *e = pf_graph_out(g, v, &cnt);
            for (int i = 0; i < cnt; i++) {
                const pf_edge_t *ed = pf_graph_edge(g, e[i]);
                if (pf_bit_test(b, ed->dst))
                    continue;
                o += ed->bytes;
                if (dst) {
                    dst[k] = ed->dst;
                    bytes[k] = ed->bytes;
                }
                k++;
            }
        }
    }
    *cu = c;
    *fixed = f;
    *act = a;
    *out = o;
    return k;
}

/* Threads for one DP: 1 unless its pairs pay for a team. The work is bounded by
 *   pairs = sum over downsets F of (downsets smaller than F)
 * (the candidates dp_cell may scan; pruning scans fewer: gnmt (PipeDream), 7,874 downsets, S = 8:
 * 30.2 M bound, 18.2 M scanned, 136 ms on one thread). Measured on this 2-core machine
 * (2026-11-23, load 4-8, min of 7 runs of pf_partition_dp, S = 4):
 *   bert32a100 (Piper)  43 downsets,     896 pairs: 0.065 ms 1 thread, 2 threads 0.75-0.90x
 *   resnet18            102 downsets,  5,109 pairs: 0.22 ms,           1.07-1.13x
 *   resnet50            242 downsets, 29,069 pairs: 0.96-1.2 ms,       1.24-1.34x
 *   resnet101           412 downsets, 84,574 pairs: 3.0-4.2 ms,        1.01-1.23x
 * On a quiet machine a team pays from a few thousand pairs; under load a join can wait for the
 * other thread's next time slice (4 ms here), which only a DP of several ms on one thread
 * amortises: hence 10^5 pairs. */
enum { DP_PARALLEL_MIN_PAIRS = 100000 };

static int dp_threads(const dsinfo_t *in, int nt)
{
    double pairs = 0;
    for (int c = 1; c <= in->n; c++)
        pairs += (double)(in->class_start[c + 1] - in->class_start[c]) * in->class_start[c];
    return pairs >= DP_PARALLEL_MIN_PAIRS ? nt : 1;
}

static int dsinfo_build(const pf_graph_t *g, const pf_downsets_t *ds, const pf_cost_model_t *cm,
                        int nt, dsinfo_t *in)
{
    long long D = pf_downsets_size(ds);
    int n = pf_graph_nops(g);
    memset(in, 0, sizeof *in);
    in->D = D;
    in->n = n;
    in->words = pf_downsets_words(ds);
    in->cu = malloc((size_t)D * sizeof *in->cu);
    in->fixed = malloc((size_t)D * sizeof *in->fixed);
    in->act = malloc((size_t)D * sizeof *in->act);
    in->mbase = malloc((size_t)D * sizeof *in->mbase);
    in->out = malloc((size_t)D * sizeof *in->out);
    in->estart = calloc((size_t)D + 1, sizeof *in->estart);
    in->class_start = calloc((size_t)n + 2, sizeof *in->class_start);
    in->pop = malloc((size_t)D * sizeof *in->pop);
    if (!in->cu || !in->fixed || !in->act || !in->mbase || !in->out || !in->estart || !in->class_start || !in->pop)
        goto oom;
    for (long long i = 0; i < D; i++) {
        in->pop[i] = pf_downsets_popcount(ds, i);
        in->class_start[in->pop[i] + 1]++;
    }
    for (int c = 0; c <= n; c++)
        in->class_start[c + 1] += in->class_start[c];
    nt = in->threads = dp_threads(in, nt);
#pragma omp parallel for schedule(dynamic, 64) num_threads(nt) if (nt > 1)
    for (long long i = 0; i < D; i++)
        in->estart[i + 1] = downset_sums(g, cm, pf_downsets_get(ds, i), in->words, &in->cu[i],
                                         &in->fixed[i], &in->act[i], &in->out[i], NULL, NULL);
    for (long long i = 0; i < D; i++) {
        in->estart[i + 1] += in->estart[i];
        in->mbase[i] = in->fixed[i] + in->act[i];
    }
    size_t ne = (size_t)in->estart[D];
    in->edst = malloc((ne ? ne : 1) * sizeof *in->edst);
    in->ebytes = malloc((ne ? ne : 1) * sizeof *in->ebytes);
    if (!in->edst || !in->ebytes)
        goto oom;
#pragma omp parallel for schedule(dynamic, 64) num_threads(nt) if (nt > 1)
    for (long long i = 0; i < D; i++) {
        double c, f, a, o;
        downset_sums(g, cm, pf_downsets_get(ds, i), in->words, &c, &f, &a, &o,
                     in->edst + in->estart[i], in->ebytes + in->estart[i]);
    }
    return PF_OK;
oom:
    dsinfo_free(in);
    return PF_ERR;
}

/* ---- the DP kernel ---- */

enum { BY_TIME, BY_MEMORY };

typedef struct {
    const pf_downsets_t *ds;
    const dsinfo_t *in;
    const pf_cost_model_t *cm;
    int S, nested, mode;
    double cap;         /* stage values above it are treated as infeasible */
    const double *mult; /* BY_TIME on a mixed cluster: stage s's compute multiplier at
                         * mult[s - 1] (cost.h stage_mult); NULL = 1 */
    double bscale;      /* the least multiplier (1 without): c_u bounds below are scaled by it */
    double floor_value; /* a lower bound of the answer: cells are clamped up to it */
    const double *base; /* c_u (BY_TIME) or memory at k_s = 1 (BY_MEMORY) per downset */
    long long *order;   /* downsets sorted by base; the s* arrays are in that order, so the
                         * scan in dp_cell reads memory sequentially */
    double *sbase, *sout, *smin_t; /* base, out(F), min over s of T[s][F] */
    int *spop;
    double *T;   /* T[s][F] at T[rank(F) S + s - 1], rank = position in `order`: the scan
                  * reads the rows of consecutive candidates */
    int *arg;    /* the F' of cell (F, s) at arg[F S + s - 1] (F = downset index) */
} dp_t;

/* Stage H = F_i - F_j (j's set inside i's): its eq. 3 time, and its parameter state and stored
 * activations for the memory test. */
static double stage_time(const dp_t *dp, long long j, long long i, double *fixed, double *act,
                         double *cu)
{
    const dsinfo_t *in = dp->in;
    const uint64_t *fi = pf_downsets_get(dp->ds, i);
    double into = 0; /* w(F_j -> H) */
    for (long long e = in->estart[j]; e < in->estart[j + 1]; e++)
        if (pf_bit_test(fi, in->edst[e]))
            into += in->ebytes[e];
    *fixed = in->fixed[i] - in->fixed[j];
    *act = in->act[i] - in->act[j];
    double cut = in->out[i] - in->out[j] + 2 * into;
    *cu = in->cu[i] - in->cu[j];
    return in->cu[i] - in->cu[j] + pf_bytes_ms(cut, dp->cm->flat_gbps);
}

/* H's value as stage s (1-based) of a chain: its time (its compute cu scaled by the stage's
 * multiplier), +inf when its memory does not fit; its memory in BY_MEMORY mode. */
static double value_at(const dp_t *dp, double time, double cu, double fixed, double act, int s)
{
    double mem = fixed + pf_cost_inflight(dp->cm, s - 1) * act + dp->cm->reserve_bytes;
    if (dp->mode == BY_MEMORY)
        return mem;
    if (dp->mult)
        time += (dp->mult[s - 1] - 1) * cu;
    return mem > dp->cm->mem_limit_bytes ? INFINITY : time;
}

static bool is_subset(const uint64_t *a, const uint64_t *b, int words)
{
    for (int w = 0; w < words; w++)
        if (a[w] & ~b[w])
            return false;
    return true;
}

/* The stage counts s for which cell i (pop ops) computes T[s][F_i]: 2..min(S - 1, pop), or only S
 * for V. A chain under the cap has every stage under it, and its stages' bases add up to the base
 * of what they cover (c_u, and memory at k_s = 1, are sums over ops). So s stages ending at F
 * need base(F) <= s cap, and the S - s after it base(V) - base(F) <= (S - s) cap; outside that
 * range T[s][F] only feeds chains above the cap, whose value is not the answer, and staying +inf
 * is exact for every chain that can be. */
static void stage_count_range(const dp_t *dp, long long i, int pop, int *slo_out, int *shi_out)
{
    long long D = dp->in->D;
    int S = dp->S, last = i == D - 1;
    int slo = last ? S : 2, shi = last ? S : (S - 1 < pop ? S - 1 : pop);
    if (!last && dp->cap > 0 && isfinite(dp->cap)) {
        double slack = dp->cap * (1 + 1e-9), rest = dp->base[D - 1] - dp->base[i];
        while (slo <= shi && dp->base[i] * dp->bscale > slo * slack)
            slo++;
        while (shi >= slo && rest * dp->bscale > (S - shi) * slack)
            shi--;
    }
    *slo_out = slo;
    *shi_out = shi;
}

/* The rank (by base) where cell i's scan of candidates F' starts: F_i's own, past subsets whose
 * rounded c_u ties or exceeds F_i's by an ulp. T[s-1][F'] >= base(F') / (s - 1) (the bases of
 * its stages add up), and every stored T is under the cap: candidates above (shi - 1) cap have
 * none to offer, skipped by bisection instead of one by one. */
static long long scan_start(const dp_t *dp, long long rank_i, double bi, int shi)
{
    const double *sbase = dp->sbase;
    long long D = dp->in->D, top = rank_i;
    while (top + 1 < D && sbase[top + 1] <= bi + 1e-12 * fabs(bi))
        top++;
    if (dp->cap > 0 && isfinite(dp->cap)) {
        double most = (shi - 1) * dp->cap * (1 + 1e-9) / dp->bscale;
        if (sbase[top] > most) {
            long long lo = -1, hi = top; /* sbase[lo] <= most < sbase[hi] */
            while (hi - lo > 1) {
                long long mid = lo + (hi - lo) / 2;
                if (sbase[mid] <= most)
                    lo = mid;
                else
                    hi = mid;
            }
            top = lo;
        }
    }
    return top;
}

/* T[s][F_i] for every s this cell needs: 1, then 2..min(S-1, |F_i|), or only S for V.
 *
 * Candidates F' are scanned by decreasing c_u(F'), from c_u(F_i) down: the last stage
 * H = F_i - F' has t(H) >= c_u(H) = c_u(F_i) - c_u(F'), which grows along the scan, so the scan
 * ends once it reaches the largest best value over the stage counts (nothing further can improve
 * any of them). Per pair, before the subset test and the edge list:
 *   t(H) >= c_u(H) + |out(F) - out(F')| / B   (cut(H) >= |w(H -> V \ F) - w(F' -> H)|)
 *   m(H, s) >= fixed(H) + act(H)                    (k_s >= 1)
 * and the pair must beat the best of some s where T[s-1][F'] is below it too.
 * BY_MEMORY runs the same with the memory at k_s = 1 in place of c_u.
 * Cells are clamped up to a lower bound L of the answer (max(largest op, total / S)):
 * max(T, L) obeys the same recurrence and gives the same answer, and a cell whose stage counts
 * all reach L is done. */
static void dp_cell(const dp_t *dp, long long i, long long rank_i, int pop)
{
    const dsinfo_t *in = dp->in;
    int S = dp->S;
    double *Ti = dp->T + (size_t)rank_i * S;
    int *argi = dp->arg + (size_t)i * S;
    double f1, a1, c1, t1 = stage_time(dp, 0, i, &f1, &a1, &c1);
    double v1 = value_at(dp, t1, c1, f1, a1, 1);
    Ti[0] = v1 <= dp->cap ? fmax(v1, dp->floor_value) : INFINITY;
    if (S == 1)
        return;
    int slo, shi;
    stage_count_range(dp, i, pop, &slo, &shi);
    if (slo > shi)
        return;
    const uint64_t *fi = pf_downsets_get(dp->ds, i);
    const double *sbase = dp->sbase, *sout = dp->sout, *smin_t = dp->smin_t;
    const int *spop = dp->spop;
    const int by_time = dp->mode == BY_TIME;
    const double per_byte = by_time ? pf_bytes_ms(1.0, dp->cm->flat_gbps) : 0;
    const double bi = dp->base[i], oi = in->out[i];
    double lim = INFINITY; /* max over s of the best so far */
    long long top = scan_start(dp, rank_i, bi, shi);
    for (long long q = top; q >= 0; q--) {
        double low = (bi - sbase[q]) * dp->bscale;
        if (low >= lim || low > dp->cap)
            break;
        if (spop[q] >= pop || smin_t[q] >= lim) /* not a proper subset; or T too high */
            continue;
        double dout = oi - sout[q];
        low += per_byte * (by_time ? fabs(dout) : fmax(0.0, -dout));
        if (low >= lim || low > dp->cap)
            continue;
        long long j = dp->order[q];
        const double *Tj = dp->T + (size_t)q * S;
        double thr = -INFINITY;
        for (int s = slo; s <= shi; s++)
            if (Tj[s - 2] < Ti[s - 1] && Ti[s - 1] > thr)
                thr = Ti[s - 1];
        if (low >= thr)
            continue;
        if (!dp->nested && !is_subset(pf_downsets_get(dp->ds, j), fi, in->words))
            continue;
        double fx, ac, cu, tm = stage_time(dp, j, i, &fx, &ac, &cu);
        double newlim = 0;
        for (int s = slo; s <= shi; s++) {
            double val = value_at(dp, tm, cu, fx, ac, s);
            if (!(val <= dp->cap)) {
                newlim = fmax(newlim, Ti[s - 1]);
                continue;
            }
            double cand = fmax(Tj[s - 2], fmax(val, dp->floor_value));
            if (cand < Ti[s - 1]) {
                Ti[s - 1] = cand;
                argi[s - 1] = (int)j;
            }
            newlim = fmax(newlim, Ti[s - 1]);
        }
        lim = newlim;
        if (lim <= dp->floor_value)
            break;
    }
}

typedef struct {
    double key;
    long long idx;
} keyed_t;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static void dp_free_sorted(dp_t *dp)
{
    free(dp->sbase);
    free(dp->sout);
    free(dp->smin_t);
    free(dp->spop);
    dp->sbase = dp->sout = dp->smin_t = NULL;
    dp->spop = NULL;
}

/* Every cell T[.][F_i], i = 1 .. D-1 (F_0 = {} has none). A cell of size class c reads the rows of
 * smaller downsets only, so it may start once class c - 1 is finished (a class is only handed out
 * after the one before it has been, so that implies every smaller class). Cells are handed out
 * one at a time in index order (= by size) from a shared counter, and a thread waits for
 * class c - 1 only when it draws the first cells of class c: one parallel region per DP instead
 * of one per size class. A region costs a fork and a join: on this 2-core machine under load
 * (8-13 runnable processes) each join waited for the other thread's next time slice, 4-24 ms,
 * so gnmt's 48 classes (one region each) took 0.55 s of wall time with 2 threads against
 * 0.14 s with 1. A thread holding a cell is never waiting for a later class, so the wait ends. */
static int dp_cells(dp_t *dp, const long long *rank, int nt)
{
    const dsinfo_t *in = dp->in;
    long long D = in->D;
    int n = in->n;
    atomic_llong next = 1;
    atomic_llong *done = malloc((size_t)(n + 1) * sizeof *done);
    if (!done)
        return PF_ERR;
    for (int c = 0; c <= n; c++)
        atomic_init(&done[c], 0);
#pragma omp parallel num_threads(nt) if (nt > 1)
    for (;;) {
        long long i = atomic_fetch_add(&next, 1);
        if (i >= D)
            break;
        int c = in->pop[i];
        long long need = in->class_start[c] - in->class_start[c - 1];
        for (int spin = 0; c > 1 && atomic_load(&done[c - 1]) < need; spin++)
            if (spin >= 64) /* the thread finishing class c - 1 may need this core */
                sched_yield();
        dp_cell(dp, i, rank[i], c);
        double m = INFINITY;
        for (int x = 0; x < dp->S; x++)
            m = fmin(m, dp->T[(size_t)rank[i] * dp->S + x]);
        dp->smin_t[rank[i]] = m;
        atomic_fetch_add(&done[c], 1); /* seq_cst: the row above is visible to whoever sees it */
    }
    free(done);
    return PF_OK;
}

static int dp_solve(dp_t *dp, double *value)
{
    const dsinfo_t *in = dp->in;
    long long D = in->D;
    keyed_t *kv = malloc((size_t)D * sizeof *kv);
    dp->order = malloc((size_t)D * sizeof *dp->order);
    if (!kv || !dp->order) {
        free(kv);
        free(dp->order);
        dp->order = NULL;
        return PF_ERR;
    }
    dp->base = dp->mode == BY_TIME ? in->cu : in->mbase;
    for (long long i = 0; i < D; i++) {
        kv[i].key = dp->base[i];
        kv[i].idx = i;
    }
    qsort(kv, (size_t)D, sizeof *kv, cmp_keyed);
    for (long long i = 0; i < D; i++)
        dp->order[i] = kv[i].idx;
    free(kv);
    long long *rank = malloc((size_t)D * sizeof *rank);
    if (!rank) {
        free(dp->order);
        dp->order = NULL;
        return PF_ERR;
    }
    dp->sbase = malloc((size_t)D * sizeof *dp->sbase);
    dp->sout = malloc((size_t)D * sizeof *dp->sout);
    dp->smin_t = malloc((size_t)D * sizeof *dp->smin_t);
    dp->spop = malloc((size_t)D * sizeof *dp->spop);
    if (!dp->sbase || !dp->sout || !dp->smin_t || !dp->spop) {
        free(rank);
        free(dp->order);
        dp->order = NULL;
        dp_free_sorted(dp);
        return PF_ERR;
    }
    for (long long q = 0; q < D; q++) {
        long long i = dp->order[q];
        rank[i] = q;
        dp->sbase[q] = dp->base[i];
        dp->sout[q] = in->out[i];
        dp->spop[q] = in->pop[i];
        dp->smin_t[q] = INFINITY;
    }
    for (size_t x = 0; x < (size_t)dp->S * (size_t)D; x++) {
        dp->T[x] = INFINITY;
        dp->arg[x] = -1;
    }
    if (dp_cells(dp, rank, in->threads) != PF_OK) {
        free(rank);
        free(dp->order);
        dp->order = NULL;
        dp_free_sorted(dp);
        return PF_ERR;
    }
    *value = dp->T[(size_t)rank[D - 1] * dp->S + dp->S - 1];
    free(rank);
    free(dp->order);
    dp->order = NULL;
    dp_free_sorted(dp);
    return PF_OK;
}

/* Stages of an optimal chain: op_stage[v] for every op (hyper-op) of the graph. */
static void dp_chain(const dp_t *dp, int *op_stage)
{
    long long D = dp->in->D, i = D - 1;
    int words = dp->in->words;
    for (int s = dp->S; s >= 1; s--) {
        long long j = s > 1 ? dp->arg[(size_t)i * dp->S + s - 1] : 0;
        const uint64_t *fi = pf_downsets_get(dp->ds, i), *fj = pf_downsets_get(dp->ds, j);
        for (int w = 0; w < words; w++) {
            uint64_t x = fi[w] & ~fj[w];
            while (x) {
                op_stage[w * 64 + __builtin_ctzll(x)] = s - 1;
                x &= x - 1;
            }
        }
        i = j;
    }
}

static int dp_run(const pf_graph_t *g, const pf_downsets_t *ds, int nested,
                  const pf_cost_model_t *cm, int S, int nt, int mode, double *value,
                  int *op_stage, char *err, size_t errlen)
{
    dsinfo_t in = {0}, pin = {0};
    pf_downsets_t *prefixes = NULL;
    int rc = PF_ERR, n = pf_graph_nops(g);
    long long D = pf_downsets_size(ds);
    dp_t dp = {.ds = ds, .cm = cm, .S = S, .nested = nested, .mode = mode, .cap = INFINITY,
               .mult = mode == BY_TIME ? cm->stage_mult : NULL, .bscale = 1};
    for (int s = 0; dp.mult && s < S; s++)
        dp.bscale = fmin(dp.bscale, dp.mult[s]);
    *value = INFINITY;
    if (D < 2 || pf_downsets_popcount(ds, D - 1) != n)
        return pf_fail(err, errlen, PF_ERR, "partition: downsets do not end with the whole graph");
    /* Lower bound of the answer: some stage holds the largest op, some the average (each stage
     * holds the reserve once). */
    double biggest = 0, total = 0, reserve = mode == BY_TIME ? 0 : cm->reserve_bytes;
    for (int v = 0; v < n; v++) {
        double x = mode == BY_TIME ? pf_graph_cu_ms(g, v) : pf_cost_op_mem_bytes(g, v, cm);
        biggest = fmax(biggest, x);
        total += x - reserve;
    }
    dp.floor_value = fmax(biggest, total / S + reserve) * dp.bscale * (1 - 1e-12);
    dp.T = malloc((size_t)S * (size_t)D * sizeof *dp.T);
    dp.arg = malloc((size_t)S * (size_t)D * sizeof *dp.arg);
    if (!dp.T || !dp.arg)
        goto oom;
    if (!nested && S > 1) {
        /* Upper bound from the prefixes of one topological order (all of them downsets). */
        dp_t pre = dp;
        double ub;
        prefixes = pf_downsets_topo_prefixes(g);
        if (!prefixes || dsinfo_build(g, prefixes, cm, nt, &pin) != PF_OK)
            goto oom;
        pre.ds = prefixes;
        pre.in = &pin;
        pre.nested = 1;
        if (dp_solve(&pre, &ub) != PF_OK)
            goto oom;
        /* The prefixes' chain meets the lower bound: it is optimal, and the DP over all the
         * downsets could only find another chain of the same value (PipeDream's gnmt at 8
         * stages: its largest op is the answer). */
        if (isfinite(ub) && ub <= dp.floor_value / (1 - 1e-12) * (1 + 1e-9)) {
            *value = ub;
            if (op_stage)
                dp_chain(&pre, op_stage);
            rc = PF_OK;
            goto done;
        }
        if (isfinite(ub))
            dp.cap = ub * (1 + 1e-9);
    }
    if (dsinfo_build(g, ds, cm, nt, &in) != PF_OK)
        goto oom;
    dp.in = &in;
    if (dp_solve(&dp, value) != PF_OK)
        goto oom;
    if (!isfinite(*value) && isfinite(dp.cap)) { /* only rounding could get here: no cap */
        dp.cap = INFINITY;
        if (dp_solve(&dp, value) != PF_OK)
            goto oom;
    }
    if (isfinite(*value) && op_stage)
        dp_chain(&dp, op_stage);
    rc = PF_OK;
    goto done;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "partition: out of memory (%lld downsets, %d stages)", D, S);
done:
    dsinfo_free(&in);
    dsinfo_free(&pin);
    pf_downsets_destroy(&prefixes);
    free(dp.T);
    free(dp.arg);
    return rc;
}

static int thread_count(int threads)
{
    return threads > 0 ? threads : omp_get_max_threads();
}

int pf_partition_dp(const pf_graph_t *g, const pf_downsets_t *ds, int nested,
                    const pf_cost_model_t *cm, int stages, int threads, double *objective_ms,
                    int *op_stage, char *err, size_t errlen)
{
    if (stages < 1)
        return pf_fail(err, errlen, PF_EINPUT, "partition: %d stages", stages);
    return dp_run(g, ds, nested, cm, stages, thread_count(threads), BY_TIME, objective_ms,
                  op_stage, err, errlen);
}

/* ---- the whole flow ---- */

typedef struct {
    long long downsets;
    int exact;
    double best_mem_bytes; /* when infeasible: the least largest-stage memory over the chains */
} solve_info_t;

/* Downsets of h (prefixes past the cap), the DP, and on failure the memory DP for the message. */
static int solve(const pf_graph_t *h, const pf_cost_model_t *cm, int S, long long cap, int nt,
                 double *obj, int *hstage, solve_info_t *si, char *err, size_t errlen)
{
    int capped = 0, rc;
    pf_downsets_t *ds = pf_downsets_enumerate(h, cap, &capped);
    si->exact = ds != NULL;
    if (!ds && !capped)
        return pf_fail(err, errlen, PF_ERR, "partition: out of memory enumerating downsets");
    if (!ds && !(ds = pf_downsets_topo_prefixes(h)))
        return pf_fail(err, errlen, PF_ERR, "partition: out of memory");
    si->downsets = pf_downsets_size(ds);
    rc = dp_run(h, ds, !si->exact, cm, S, nt, BY_TIME, obj, hstage, err, errlen);
    si->best_mem_bytes = NAN;
    if (rc == PF_OK && !isfinite(*obj))
        rc = dp_run(h, ds, !si->exact, cm, S, nt, BY_MEMORY, &si->best_mem_bytes, NULL, err,
                    errlen);
    pf_downsets_destroy(&ds);
    return rc;
}

/* Stage op lists in g's topological order. */
static int set_stages(pf_plan_t *p, const pf_graph_t *g, const int *op_stage, int *scratch)
{
    int n = pf_graph_nops(g);
    const int *topo = pf_graph_topo(g);
    for (int s = 0; s < p->stages; s++) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if (op_stage[topo[i]] == s)
                scratch[k++] = topo[i];
        if (pf_plan_set_stage_ops(p, s, scratch, k) != PF_OK)
            return PF_ERR;
    }
    return PF_OK;
}

/* One partitioning run: the ops g, the graph h the DP runs on (g or the coarsened one) with
 * group[v] = v's hyper-op, the hyper-ops' stages and the ops'. */
typedef struct {
    const pf_graph_t *g, *h;
    pf_graph_t *coarse;
    int n, nh, S, nt;
    int *group, *hstage, *op_stage, *scratch;
    pf_cost_model_t cm;
    solve_info_t si;
    double obj;
} run_t;

/* IV-B: coarsen (or take the caller's grouping) into rn->h. */
static int run_coarsen(run_t *rn, const pf_partition_opts_t *o, char *err, size_t errlen)
{
    const pf_graph_t *g = rn->g;
    int n = rn->n, rc;
    int K = o->coarsen_k == 0 ? pf_partition_default_k(g, rn->S, o->max_downsets) : o->coarsen_k;
    if (o->group) {
        memcpy(rn->group, o->group, (size_t)n * sizeof *rn->group);
        rn->nh = o->ngroups;
    } else if (o->coarsen_k >= 0 && K < n) {
        pf_coarsen_opts_t co = {.k = K, .alpha = o->alpha};
        if ((rc = pf_coarsen_run(g, &rn->cm, &co, rn->group, &rn->nh, err, errlen)) != PF_OK)
            return rc;
    } else {
        for (int v = 0; v < n; v++)
            rn->group[v] = v;
    }
    if (rn->nh < n || o->group) {
        if ((rc = pf_coarsen_hyper_graph(g, rn->group, rn->nh, &rn->coarse, err, errlen)) !=
            PF_OK)
            return rc;
        rn->h = rn->coarse;
    }
    return PF_OK;
}

/* IV-A: the DP (eq. 13) over rn->h; when nothing fits, again over the ops (fusions fit one device
 * but can hide the cut memory needs), unless groups stay whole (cuts would split them). */
static int run_dp(run_t *rn, const pf_partition_opts_t *o, char *err, size_t errlen)
{
    const pf_graph_t *g = rn->g;
    int n = rn->n, S = rn->S, rc;
    if ((rc = solve(rn->h, &rn->cm, S, o->max_downsets, rn->nt, &rn->obj, rn->hstage, &rn->si,
                    err, errlen)) != PF_OK)
        return rc;
    /* the fine retry only where its DP is affordable (see pf_partition_default_k) */
    if (!isfinite(rn->obj) && rn->h != g && !o->group_whole && (double)n * n <= 0x1p26) {
        solve_info_t fine = {0};
        if ((rc = solve(g, &rn->cm, S, o->max_downsets, rn->nt, &rn->obj, rn->hstage, &fine, err,
                        errlen)) != PF_OK)
            return rc;
        if (isfinite(rn->obj) || !isfinite(rn->si.best_mem_bytes) ||
            fine.best_mem_bytes < rn->si.best_mem_bytes)
            rn->si = fine;
        if (isfinite(rn->obj)) {
            rn->h = g;
            rn->nh = n;
            for (int v = 0; v < n; v++)
                rn->group[v] = v;
        }
    }
    if (!isfinite(rn->obj)) {
        char a[32], b[32];
        pf_fmt_bytes(a, sizeof a, rn->cm.mem_limit_bytes);
        pf_fmt_bytes(b, sizeof b, rn->si.best_mem_bytes);
        return pf_fail(err, errlen, PF_EINFEASIBLE,
                       "no partition into %d stage%s%s fits %s per device; the best found needs %s "
                       "on its largest stage%s", S, S == 1 ? "" : "s",
                       o->group_whole ? " of whole groups" : "", a, b,
                       rn->si.exact ? "" : " (searched topological prefixes only)");
    }
    for (int v = 0; v < n; v++)
        rn->op_stage[v] = rn->hstage[rn->group[v]];
    return PF_OK;
}

/* The plan's partition_search record: sizes, timings (t0..t3: coarsen, DP, refine). */
static void record_search(pf_plan_t *p, const run_t *rn, const pf_partition_opts_t *o,
                          const double t[4], int moves, double before)
{
    p->partition_search.present = 1;
    p->partition_search.ops = rn->n;
    p->partition_search.hyper_ops = rn->nh;
    p->partition_search.downsets = rn->si.downsets;
    p->partition_search.exact = rn->si.exact;
    /* alpha (eq. 4) only weighs fusions: without coarsening it played no part */
    p->partition_search.alpha = rn->nh < rn->n ? o->alpha : NAN;
    p->partition_search.flat_gbps = rn->cm.flat_gbps;
    p->partition_search.coarsen_s = t[1] - t[0];
    p->partition_search.dp_s = t[2] - t[1];
    p->partition_search.refine_s = t[3] - t[2];
    p->partition_search.refine_moves = moves;
    p->partition_search.objective_before_refine_ms = before;
}

/* The cost model of the run and the checks that need it. */
static int run_setup(run_t *rn, const pf_cluster_t *c, const pf_partition_opts_t *o, int R,
                     char *err, size_t errlen)
{
    int rc, n = rn->n, S = rn->S;
    pf_cost_model_init(&rn->cm, c, S, o->microbatches, o->flat_gbps);
    pf_cost_model_set_training(&rn->cm, &o->train, R, o->reserve_bytes);
    rn->cm.mem_limit_bytes *= 1 - o->mem_headroom;
    if ((rc = pf_cost_check_ops_fit(rn->g, &rn->cm, err, errlen)) != PF_OK)
        return rc;
    int parts = o->group_whole ? o->ngroups : n; /* whole groups: a stage needs one */
    if (parts < S)
        return pf_fail(err, errlen, PF_EINFEASIBLE, "no partition into %d stages: graph %s has "
                       "only %d %s%s", S, pf_graph_name(rn->g), parts,
                       o->group_whole ? "group" : "op", parts == 1 ? "" : "s");
    rn->group = malloc((size_t)n * sizeof *rn->group);
    rn->hstage = malloc((size_t)n * sizeof *rn->hstage);
    rn->op_stage = malloc((size_t)n * sizeof *rn->op_stage);
    rn->scratch = malloc((size_t)n * sizeof *rn->scratch);
    if (!rn->group || !rn->hstage || !rn->op_stage || !rn->scratch)
        return pf_fail(err, errlen, PF_ERR, "partition: out of memory");
    return PF_OK;
}

/* The DP under each layout's multipliers (none on a uniform cluster); the best layout's stays
 * in rn->cm.stage_mult for refinement and the plan's times. */
static int run_dp_layouts(run_t *rn, const pf_cluster_t *c, const pf_partition_opts_t *o,
                          double *mult, char *err, size_t errlen)
{
    int nl, S = rn->S, best = 0, rc;
    if (pf_partition_layout_mult(rn->g, c, S, mult, &nl) != PF_OK)
        return pf_fail(err, errlen, PF_ERR, "partition: out of memory");
    if (nl == 0)
        return run_dp(rn, o, err, errlen);
    double best_obj = INFINITY;
    for (int l = 0; l < nl; l++) {
        rn->cm.stage_mult = mult + (size_t)l * S;
        if ((rc = run_dp(rn, o, err, errlen)) != PF_OK)
            return rc;
        if (rn->obj < best_obj) {
            best_obj = rn->obj;
            best = l;
        }
    }
    rn->cm.stage_mult = mult + (size_t)best * S;
    return best == nl - 1 ? PF_OK : run_dp(rn, o, err, errlen);
}

int pf_partition_run(const pf_graph_t *g, const pf_cluster_t *c, const pf_partition_opts_t *o,
                     pf_plan_t **out, char *err, size_t errlen)
{
    int S = o->stages, R = 1, rc;
    run_t rn = {.g = g, .h = g, .n = pf_graph_nops(g), .S = S, .nt = thread_count(o->threads)};
    rn.nh = rn.n;
    pf_plan_t *p = NULL;
    double t[4], *mult = NULL;
    *out = NULL;
    if ((rc = pf_partition_opts_check(g, c, o, &R, err, errlen)) != PF_OK)
        return rc;
    if (!(mult = malloc((size_t)S * 2 * sizeof *mult)))
        return pf_fail(err, errlen, PF_ERR, "partition: out of memory");
    if ((rc = run_setup(&rn, c, o, R, err, errlen)) != PF_OK)
        goto fail;
    t[0] = pf_now_s();
    if ((rc = run_coarsen(&rn, o, err, errlen)) != PF_OK)
        goto fail;
    t[1] = pf_now_s();
    if ((rc = run_dp_layouts(&rn, c, o, mult, err, errlen)) != PF_OK)
        goto fail;
    t[2] = pf_now_s();
    if (!(p = pf_plan_new(S, R)) || set_stages(p, g, rn.op_stage, rn.scratch) != PF_OK ||
        pf_cost_fill_plan(p, g, &rn.cm) != PF_OK) {
        rc = pf_fail(err, errlen, PF_ERR, "partition: out of memory");
        goto fail;
    }
    double before = p->partition_objective_ms;
    /* IV-C: refine on atomic ops (single-op moves would cut whole groups). */
    pf_refine_stats_t rs = {0};
    if (o->refine && S > 1 && !o->group_whole) {
        if ((rc = pf_refine_run(g, &rn.cm, S, o->refine_max_moves, rn.op_stage, &rs, err,
                                errlen)) != PF_OK)
            goto fail;
        if (set_stages(p, g, rn.op_stage, rn.scratch) != PF_OK ||
            pf_cost_fill_plan(p, g, &rn.cm) != PF_OK) {
            rc = pf_fail(err, errlen, PF_ERR, "partition: out of memory");
            goto fail;
        }
    }
    t[3] = pf_now_s();

    p->devices = pf_cluster_ndevices(c);
    p->microbatches = rn.cm.microbatches;
    pf_plan_set_names(p, pf_graph_name(g), pf_cluster_name(c));
    record_search(p, &rn, o, t, rs.moves, before);
    *out = p;
    p = NULL;
    rc = PF_OK;
fail:
    pf_plan_destroy(&p);
    pf_graph_destroy(&rn.coarse);
    free(mult);
    free(rn.group);
    free(rn.hstage);
    free(rn.op_stage);
    free(rn.scratch);
    return rc;
}
