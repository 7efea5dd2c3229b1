/* stagedeg_tp: the per-stage DP with data- and tensor-parallel degrees and a configuration per op
 * (stagedeg_tp.h gives the model, [Piper]'s choice of configurations and the recurrence).
 *
 * Pricing a pair (F_i inside F_j, H = F_j \ F_i) at t: where every op's fastest configuration at
 * t is fixed (its configurations share parameters and sync bytes, so the fastest is the least
 * time_ms whatever d and the boundary), from per-downset sums as stagedeg.c does, with the
 * boundary bytes
 *   X_t(H) = out_t(F_j) - out_t(F_i) + sum over edges e from F_i into H of w_t(e)
 *   out_t(F) = sum over edges leaving F of bytes + the sync of the edge's tail,
 *   w_t(e) = 2 bytes + the sync of the tail + the sync of the head
 * (the edges F_i -> H are counted once with their head's sync; those leaving F_j from F_i cancel).
 * Otherwise, and for [Piper]'s choice when the fastest configurations do not fit, from H's ops. */
#include "planner/partition/stagedeg_tp.h"
#include "planner/core/util.h"

#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef pf_stagedeg_tpm_t inst_t;
typedef pf_stagedeg_tpm_sums_t sums_t;
typedef pf_stagedeg_tpm_scratch_t scratch_t;
enum { MAXOPT = PF_STAGEDEG_TPM_MAXOPT };

static int degree_ok(const inst_t *m, int d)
{
    if (m->o->only_degree > 0)
        return d == m->o->only_degree;
    switch (m->o->degrees) {
    case PF_STAGEDEG_DEGREES_DIVIDE_MB: return m->mb % d == 0;
    case PF_STAGEDEG_DEGREES_POW2: return (d & (d - 1)) == 0;
    default: return 1;
    }
}

/* ---- per-downset sums (where the fastest is fixed) ---- */

typedef struct {
    long long N;
    int words;
    int *pop, *have; /* have[ti N + X]: ops of X with a configuration at ts[ti] */
    sums_t *fs;      /* fs[ti N + X]: X's fastest sums (x unused) */
    double *out;     /* out[ti N + X] = out_t(X) */
    double *w;       /* w[ti ne + e] = w_t(e) */
    long long *estart;
    int *eid; /* the edges leaving each downset */
} dsinfo_t;

static void dsinfo_free(dsinfo_t *in)
{
    free(in->pop);
    free(in->have);
    free(in->fs);
    free(in->out);
    free(in->w);
    free(in->estart);
    free(in->eid);
    memset(in, 0, sizeof *in);
}

/* The fastest fixed configuration of v at ts[ti], NULL when v has none or it is not fixed. */
static const pf_stagedeg_tmpc_t *fixed_fast(const inst_t *m, int ti, int v)
{
    int l = m->fast[(size_t)ti * m->n + v];
    return l < 0 ? NULL : pf_stagedeg_tpm_conf(m, ti, v, l);
}

/* Edge e's sync at its tail (out) and head (in) under their fixed fastest at ts[ti]. */
static void edge_sync(const inst_t *m, int ti, int e, double *tail, double *head)
{
    const pf_edge_t *ed = pf_graph_edge(m->g, e);
    const pf_stagedeg_tmpc_t *a = fixed_fast(m, ti, ed->src), *b = fixed_fast(m, ti, ed->dst);
    *tail = a ? pf_stagedeg_tpm_sync(a, m->slot_out[e]) : 0;
    *head = b ? pf_stagedeg_tpm_sync(b, m->slot_in[e]) : 0;
}

/* Downset X's sums at every t; with eid, its leaving edges from eid[0]. Returns how many leave. */
static long long set_sums(const inst_t *m, const dsinfo_t *in, long long X, const uint64_t *b,
                          int *eid)
{
    long long k = 0;
    for (int ti = 0; ti < m->nt; ti++) {
        size_t c = (size_t)ti * in->N + X;
        in->fs[c] = (sums_t){0};
        in->out[c] = 0;
        in->have[c] = 0;
    }
    for (int w = 0; w < in->words; w++)
        for (uint64_t x = b[w]; x; x &= x - 1) {
            int v = w * 64 + __builtin_ctzll(x), cnt;
            for (int ti = 0; ti < m->nt; ti++) {
                const pf_stagedeg_tmpc_t *c = fixed_fast(m, ti, v);
                in->have[(size_t)ti * in->N + X] += m->cnt[(size_t)ti * m->n + v] > 0;
                if (c)
                    pf_stagedeg_tpm_add(
                        &in->fs[(size_t)ti * in->N + X],
                        &(sums_t){c->time_ms, 0, c->param_bytes, c->act_bytes, c->fixed_bytes});
            }
            const int *e = pf_graph_out(m->g, v, &cnt);
            for (int i = 0; i < cnt; i++) {
                const pf_edge_t *ed = pf_graph_edge(m->g, e[i]);
                if (pf_bit_test(b, ed->dst))
                    continue;
                for (int ti = 0; ti < m->nt; ti++) {
                    double tail, head;
                    edge_sync(m, ti, e[i], &tail, &head);
                    in->out[(size_t)ti * in->N + X] += ed->bytes + tail;
                }
                if (eid)
                    eid[k] = e[i];
                k++;
            }
        }
    return k;
}

static int dsinfo_build(const inst_t *m, const pf_downsets_t *ds, dsinfo_t *in)
{
    long long N = pf_downsets_size(ds);
    int ne = pf_graph_nedges(m->g), nt = m->nt ? m->nt : 1;
    memset(in, 0, sizeof *in);
    in->N = N;
    in->words = pf_downsets_words(ds);
    in->pop = malloc((size_t)N * sizeof *in->pop);
    in->have = malloc((size_t)N * nt * sizeof *in->have);
    in->fs = malloc((size_t)N * nt * sizeof *in->fs);
    in->out = malloc((size_t)N * nt * sizeof *in->out);
    in->w = malloc((size_t)(ne ? ne : 1) * nt * sizeof *in->w);
    in->estart = calloc((size_t)N + 1, sizeof *in->estart);
    if (!in->pop || !in->have || !in->fs || !in->out || !in->w || !in->estart)
        return PF_ERR;
    for (int ti = 0; ti < m->nt; ti++)
        for (int e = 0; e < ne; e++) {
            double tail, head;
            edge_sync(m, ti, e, &tail, &head);
            in->w[(size_t)ti * ne + e] = 2 * pf_graph_edge(m->g, e)->bytes + tail + head;
        }
    for (long long X = 0; X < N; X++) {
        in->pop[X] = pf_downsets_popcount(ds, X);
        in->estart[X + 1] = in->estart[X] + set_sums(m, in, X, pf_downsets_get(ds, X), NULL);
    }
    in->eid = malloc((size_t)(in->estart[N] ? in->estart[N] : 1) * sizeof *in->eid);
    if (!in->eid)
        return PF_ERR;
    for (long long X = 0; X < N; X++)
        set_sums(m, in, X, pf_downsets_get(ds, X), in->eid + in->estart[X]);
    return PF_OK;
}

/* ---- the DP ---- */

typedef struct {
    const pf_downsets_t *ds;
    const dsinfo_t *in;
    const inst_t *m;
    int C, *off; /* cells per downset; cell (k, s) = off[s] + k - s, s <= k <= min(D, s tmax) */
    int *degs, ndeg;
    int nt;       /* the degrees ts[0 .. nt) stages may take (pf_stagedeg_tp_run's two passes) */
    double bound; /* a chain's value known to be reachable: no cell above it is kept */
    double *T;
    long long *argj;
    int *argt, *argd;
    int *drop;            /* per downset X, row s: the k where T falls, from drop[X C + off[s]] */
    int *ndrop;           /* how many: ndrop[X (S + 1) + s] */
    int *rows, *nrows;    /* the rows s with drops, ascending: rows[X (S + 1) ..], nrows[X] */
    int *argc;            /* the cell (of the same downset) whose stage a cell's value came from */
    int *cell_k, *cell_s; /* a cell's k and s */
    atomic_int oom;
} dp_t;

static int khi_of(const dp_t *dp, int s)
{
    return s * dp->m->tmax < dp->m->D ? s * dp->m->tmax : dp->m->D;
}

/* H = F_j \ F_i at ts[ti] from the sums (its fastest configurations fixed). */
static sums_t pair_sums(const dp_t *dp, int ti, long long i, long long j)
{
    const dsinfo_t *in = dp->in;
    const uint64_t *fj = pf_downsets_get(dp->ds, j);
    size_t ci = (size_t)ti * in->N + i, cj = (size_t)ti * in->N + j;
    int ne = pf_graph_nedges(dp->m->g);
    double into = 0;
    for (long long e = in->estart[i]; e < in->estart[i + 1]; e++)
        if (pf_bit_test(fj, pf_graph_edge(dp->m->g, in->eid[e])->dst))
            into += in->w[(size_t)ti * ne + in->eid[e]];
    sums_t h = in->fs[cj];
    h.time -= in->fs[ci].time;
    h.p -= in->fs[ci].p;
    h.act -= in->fs[ci].act;
    h.fixed -= in->fs[ci].fixed;
    h.x = in->out[cj] - in->out[ci] + into;
    return h;
}

/* Stage H (in sc) at (t, d), fastest sums f, as the first stage of the chain from F_i, into the
 * cells (k, s) of T[i]: [Piper]'s choice at y = ceil(s / d) only where the fastest does not fit
 * and a cell could still improve (the fastest's price bounds the others' from below). The rest of
 * the chain is read at the drops of T[j]'s row s - d only (dp_row: rows fall with k, so between
 * two drops nothing new comes), and no further than the first at or below the stage's price: from
 * there on the cell is the stage's price, which the row's running minimum carries on. With
 * exact_devices every finite cell is a drop and no row is carried. */
typedef struct {
    int ti, d, y; /* the last y priced, -1 none */
    double pf, p; /* the fastest's price; the price at y */
} stage_price_t;

/* The stage's price at (t, d) and s: the fastest's where it fits at y = ceil(s / d), else
 * [Piper]'s choice (kept for the next s of the same y). */
static double price_at(const inst_t *m, scratch_t *sc, const sums_t *f, stage_price_t *sp, int s)
{
    int y = pf_stagedeg_tpm_y(m, s, sp->d), mode;
    if (pf_stagedeg_tpm_memory(m, f, sp->d, y) <= m->cm->mem_limit_bytes)
        return sp->pf;
    if (y != sp->y)
        sp->p = pf_stagedeg_tpm_choose(m, sc, sp->ti, sp->d, y, &mode);
    sp->y = y;
    return sp->p;
}

static void dp_stage(dp_t *dp, long long i, long long j, int ti, int d, const sums_t *f,
                     scratch_t *sc)
{
    const inst_t *m = dp->m;
    int td = m->ts[ti] * d, exact = m->o->exact_devices;
    stage_price_t sp = {ti, d, -1, pf_stagedeg_tpm_price(m, f, d), INFINITY};
    if (sp.pf > dp->bound) /* the fastest bounds every price of the stage from below */
        return;
    const int *nds = dp->ndrop + (size_t)j * (m->S + 1), *rows = dp->rows + (size_t)j * (m->S + 1);
    for (int r = 0; r < dp->nrows[j] && rows[r] + d <= m->S; r++) {
        int sr = rows[r], s = sr + d, nd = nds[sr], priced = 0;
        const int *drop = dp->drop + (size_t)j * dp->C + dp->off[sr];
        const double *row = dp->T + (size_t)j * dp->C + dp->off[sr] - sr; /* row[k] */
        size_t base = (size_t)i * dp->C + dp->off[s] - s + td;            /* cell of k = kr + td */
        double p = sp.pf;
        for (int x = 0; x < nd && drop[x] + td <= m->D; x++) {
            int kr = drop[x];
            double tj = row[kr];
            if (tj > dp->bound) /* drops fall along k: a later one may be within */
                continue;
            if (pf_max_nonan(p, tj) < dp->T[base + kr]) {
                if (!priced && (p = price_at(m, sc, f, &sp, s)) == INFINITY)
                    return; /* nor at any larger y */
                priced = 1;
                double v = pf_max_nonan(p, tj);
                if (v < dp->T[base + kr] && v <= dp->bound) {
                    dp->T[base + kr] = v;
                    dp->argj[base + kr] = j;
                    dp->argt[base + kr] = ti;
                    dp->argd[base + kr] = d;
                    dp->argc[base + kr] = (int)(base + kr - (size_t)i * dp->C);
                }
            }
            if (!exact && tj <= p)
                break;
        }
    }
}

/* T[i] done: each cell takes the least of itself, its left neighbour (k - 1: a chain on fewer
 * devices serves k; not with exact_devices) and the one below (s - 1: a smaller sum of degrees
 * serves s, its stages priced at y no larger), remembering the cell its value came from; then its
 * drops, the cells below both neighbours: only those can give a later stage anything new. */
static void dp_row(dp_t *dp, long long i)
{
    const inst_t *m = dp->m;
    double *Ti = dp->T + (size_t)i * dp->C;
    int *oc = dp->argc + (size_t)i * dp->C, nrows = 0, exact = m->o->exact_devices;
    for (int s = 0; s <= m->S; s++) {
        int *drop = dp->drop + (size_t)i * dp->C + dp->off[s], nd = 0;
        for (int k = s; k <= khi_of(dp, s); k++) {
            int c = dp->off[s] + k - s, left = !exact && k > s ? c - 1 : -1;
            int below = s > 0 && k <= khi_of(dp, s - 1) ? dp->off[s - 1] + k - (s - 1) : -1;
            if (left >= 0 && Ti[left] < Ti[c]) {
                Ti[c] = Ti[left];
                oc[c] = oc[left];
            }
            if (below >= 0 && Ti[below] < Ti[c]) {
                Ti[c] = Ti[below];
                oc[c] = oc[below];
            }
            if (isfinite(Ti[c]) && (left < 0 || Ti[c] < Ti[left]) &&
                (below < 0 || Ti[c] < Ti[below]))
                drop[nd++] = k;
        }
        dp->ndrop[(size_t)i * (m->S + 1) + s] = nd;
        if (nd)
            dp->rows[(size_t)i * (m->S + 1) + nrows++] = s;
    }
    dp->nrows[i] = nrows;
}

/* Pair (F_i, F_j): every t all of H's ops have and every degree. */
static void dp_pair(dp_t *dp, long long i, long long j, scratch_t *sc)
{
    const inst_t *m = dp->m;
    const dsinfo_t *in = dp->in;
    int nh = in->pop[j] - in->pop[i];
    for (int ti = 0; ti < dp->nt; ti++) {
        if (in->have[(size_t)ti * in->N + j] - in->have[(size_t)ti * in->N + i] != nh)
            continue;
        sums_t f = {0};
        if (m->stable[ti])
            f = pair_sums(dp, ti, i, j);
        for (int di = 0; di < dp->ndeg && dp->degs[di] * m->ts[ti] <= m->D; di++) {
            if (!m->stable[ti])
                f = pf_stagedeg_tpm_fastest(m, sc, ti, dp->degs[di]);
            dp_stage(dp, i, j, ti, dp->degs[di], &f, sc);
        }
    }
}

/* H = F_j \ F_i into sc (bitset and ops). */
static void scratch_stage(const dp_t *dp, scratch_t *sc, long long i, long long j)
{
    const uint64_t *fi = pf_downsets_get(dp->ds, i), *fj = pf_downsets_get(dp->ds, j);
    sc->nh = 0;
    sc->cti = -1;
    for (int w = 0; w < dp->in->words; w++) {
        sc->h[w] = fj[w] & ~fi[w];
        for (uint64_t x = sc->h[w]; x; x &= x - 1)
            sc->ops[sc->nh++] = w * 64 + __builtin_ctzll(x);
    }
}

static int is_subset(const uint64_t *a, const uint64_t *b, int words)
{
    for (int w = 0; w < words; w++)
        if (a[w] & ~b[w])
            return 0;
    return 1;
}

static void dp_cell(dp_t *dp, long long i, scratch_t *sc)
{
    const dsinfo_t *in = dp->in;
    const uint64_t *fi = pf_downsets_get(dp->ds, i);
    for (long long j = i + 1; j < in->N; j++) {
        if (in->pop[j] == in->pop[i] || !is_subset(fi, pf_downsets_get(dp->ds, j), in->words))
            continue;
        scratch_stage(dp, sc, i, j);
        dp_pair(dp, i, j, sc);
    }
    dp_row(dp, i);
}

static int dp_solve(dp_t *dp, int nt)
{
    const dsinfo_t *in = dp->in;
    long long N = in->N;
    for (size_t c = 0; c < (size_t)N * dp->C; c++)
        dp->T[c] = INFINITY;
    dp->T[(size_t)(N - 1) * dp->C] = 0;
    dp->argc[(size_t)(N - 1) * dp->C] = 0;
    dp_row(dp, N - 1);
    long long hi = N - 1;
    while (hi > 0) {
        long long lo = hi;
        while (lo > 0 && in->pop[lo - 1] == in->pop[hi - 1])
            lo--;
#pragma omp parallel num_threads(nt) if (nt > 1 && hi - lo > 1)
        {
            scratch_t sc;
            int ok = pf_stagedeg_tpm_scratch_init(&sc, dp->m->n, in->words) == PF_OK;
            if (!ok)
                atomic_store(&dp->oom, 1);
#pragma omp for schedule(dynamic, 1)
            for (long long i = lo; i < hi; i++)
                if (ok)
                    dp_cell(dp, i, &sc);
            pf_stagedeg_tpm_scratch_free(&sc);
        }
        hi = lo;
    }
    return atomic_load(&dp->oom) ? PF_ERR : PF_OK;
}

/* Cell (k, s) of downset i -> the cell its value came from (*k, *s updated): its stage's args. */
static size_t dp_origin(const dp_t *dp, long long i, int *k, int *s)
{
    int o = dp->argc[(size_t)i * dp->C + dp->off[*s] + *k - *s];
    *k = dp->cell_k[o];
    *s = dp->cell_s[o];
    return (size_t)i * dp->C + o;
}

/* The chain from {} at cell (k, s) as a result: stages, degrees, configurations, each stage's
 * configurations chosen at the y its price was found at (the s of its origin cell; the chain
 * behind holds no more). */
static pf_stagedeg_result_t *dp_chain(const dp_t *dp, int k, int s)
{
    const inst_t *m = dp->m;
    int S = 0;
    for (long long i = 0, kk = k, ss = s; i != dp->in->N - 1; S++) {
        int k2 = (int)kk, s2 = (int)ss;
        size_t c = dp_origin(dp, i, &k2, &s2);
        kk = k2 - (long long)m->ts[dp->argt[c]] * dp->argd[c];
        ss = s2 - dp->argd[c];
        i = dp->argj[c];
    }
    pf_stagedeg_result_t *r = pf_stagedeg_result_new(m->n, S);
    scratch_t sc;
    if (!r || pf_stagedeg_tpm_scratch_init(&sc, m->n, dp->in->words) != PF_OK) {
        if (r)
            pf_stagedeg_tpm_scratch_free(&sc);
        pf_stagedeg_result_destroy(&r);
        return NULL;
    }
    long long i = 0;
    for (int st = 0; st < S; st++) {
        size_t c = dp_origin(dp, i, &k, &s);
        long long j = dp->argj[c];
        int ti = dp->argt[c], d = dp->argd[c], mode;
        scratch_stage(dp, &sc, i, j);
        pf_stagedeg_tpm_choose(m, &sc, ti, d, pf_stagedeg_tpm_y(m, s, d), &mode);
        for (int x = 0; x < sc.nh; x++) {
            int v = sc.ops[x];
            r->op_stage[v] = st;
            r->op_tmpc[v] = m->idx[((size_t)ti * m->n + v) * MAXOPT + sc.pick[x]];
        }
        r->degree[st] = d;
        r->tensor[st] = m->ts[ti];
        r->recompute[st] = mode;
        k -= m->ts[ti] * d;
        s -= d;
        i = j;
    }
    pf_stagedeg_tpm_scratch_free(&sc);
    return r;
}

static int dp_layout(dp_t *dp)
{
    const inst_t *m = dp->m;
    dp->off = malloc(((size_t)m->S + 2) * sizeof *dp->off);
    dp->degs = malloc((size_t)m->D * sizeof *dp->degs);
    if (!dp->off || !dp->degs)
        return PF_ERR;
    dp->off[0] = 0;
    for (int s = 0; s <= m->S; s++)
        dp->off[s + 1] = dp->off[s] + khi_of(dp, s) - s + 1;
    dp->C = dp->off[m->S + 1];
    dp->cell_k = malloc((size_t)dp->C * sizeof *dp->cell_k);
    dp->cell_s = malloc((size_t)dp->C * sizeof *dp->cell_s);
    if (!dp->cell_k || !dp->cell_s)
        return PF_ERR;
    for (int s = 0; s <= m->S; s++)
        for (int k = s; k <= khi_of(dp, s); k++) {
            dp->cell_k[dp->off[s] + k - s] = k;
            dp->cell_s[dp->off[s] + k - s] = s;
        }
    dp->ndeg = 0;
    for (int d = 1; d <= m->S; d++)
        if (degree_ok(m, d))
            dp->degs[dp->ndeg++] = d;
    size_t cells = (size_t)dp->in->N * dp->C;
    dp->T = malloc(cells * sizeof *dp->T);
    dp->argj = malloc(cells * sizeof *dp->argj);
    dp->argt = malloc(cells * sizeof *dp->argt);
    dp->argd = malloc(cells * sizeof *dp->argd);
    dp->drop = malloc(cells * sizeof *dp->drop);
    dp->ndrop = malloc((size_t)dp->in->N * (m->S + 1) * sizeof *dp->ndrop);
    dp->rows = malloc((size_t)dp->in->N * (m->S + 1) * sizeof *dp->rows);
    dp->argc = malloc(cells * sizeof *dp->argc);
    dp->nrows = malloc((size_t)dp->in->N * sizeof *dp->nrows);
    return dp->T && dp->argj && dp->argt && dp->argd && dp->drop && dp->ndrop && dp->rows &&
                   dp->nrows && dp->argc
               ? PF_OK
               : PF_ERR;
}

static void dp_free(dp_t *dp)
{
    free(dp->off);
    free(dp->degs);
    free(dp->T);
    free(dp->argj);
    free(dp->argt);
    free(dp->argd);
    free(dp->drop);
    free(dp->ndrop);
    free(dp->rows);
    free(dp->nrows);
    free(dp->argc);
    free(dp->cell_k);
    free(dp->cell_s);
}

/* The best cell of T[{}] (k = D with exact_devices), first in (s, k) order; -1 when none. */
static int dp_best(const dp_t *dp, int *bk, int *bs)
{
    const inst_t *m = dp->m;
    double best = INFINITY;
    *bk = *bs = -1;
    for (int s = 1; s <= m->S; s++)
        for (int k = s; k <= khi_of(dp, s); k++) {
            double v = dp->T[dp->off[s] + k - s];
            if ((!m->o->exact_devices || k == m->D) && v < best) {
                best = v;
                *bk = k;
                *bs = s;
            }
        }
    return *bk >= 0 ? PF_OK : -1;
}

/* Two passes when stages may take several degrees: the DP over the smallest degree alone (a
 * fraction of the work) gives a chain's value U that the full problem can reach too (its
 * configurations are the full problem's); then the full DP keeps no cell above U. Exact: every
 * suffix of a chain of value <= U has a value <= U, the candidates <= U are the same ones in the
 * same order, so the cells <= U, the optimum and its chain are those of one unbounded pass. */
static int solve_bounded(dp_t *dp, int nt)
{
    int bk, bs;
    dp->bound = INFINITY;
    dp->nt = 1;
    if (dp->m->nt > 1 && dp_solve(dp, nt) != PF_OK)
        return PF_ERR;
    if (dp->m->nt > 1 && dp_best(dp, &bk, &bs) == PF_OK)
        dp->bound = dp->T[dp->off[bs] + bk - bs];
    dp->nt = dp->m->nt;
    return dp_solve(dp, nt);
}

int pf_stagedeg_tp_run(const pf_graph_t *g, const pf_downsets_t *ds, const pf_cost_model_t *cm,
                       const pf_stagedeg_opts_t *o, const pf_stagedeg_tmpcs_t *tab,
                       pf_stagedeg_result_t **out, char *err, size_t errlen)
{
    inst_t m;
    dsinfo_t in = {0};
    dp_t dp = {.ds = ds, .in = &in, .m = &m};
    pf_stagedeg_result_t *r = NULL;
    int rc, bk, bs;
    *out = NULL;
    if ((rc = pf_stagedeg_tpm_init(&m, g, cm, o, tab, err, errlen)) != PF_OK)
        goto done;
    long long N = pf_downsets_size(ds);
    if (N < 2 || pf_downsets_popcount(ds, N - 1) != m.n || pf_downsets_popcount(ds, 0) != 0) {
        rc = pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: downsets must run from {} to V");
        goto done;
    }
    if (dsinfo_build(&m, ds, &in) != PF_OK || dp_layout(&dp) != PF_OK ||
        solve_bounded(&dp, o->threads > 0 ? o->threads : omp_get_max_threads()) != PF_OK)
        goto oom;
    r = dp_best(&dp, &bk, &bs) != PF_OK ? pf_stagedeg_result_new(m.n, 0) : dp_chain(&dp, bk, bs);
    if (!r || (r->stages && pf_stagedeg_tp_eval(g, cm, o, tab, r, err, errlen) != PF_OK))
        goto oom;
    *out = r;
    rc = PF_OK;
    goto done;
oom:
    pf_stagedeg_result_destroy(&r);
    rc = pf_fail(err, errlen, PF_ERR, "stagedeg_tp: out of memory (%lld downsets)",
                 (long long)pf_downsets_size(ds));
done:
    dp_free(&dp);
    dsinfo_free(&in);
    pf_stagedeg_tpm_free(&m);
    return rc;
}

/* ---- pricing a given assignment ---- */

/* Stage s of r: its sums; PF_EINPUT when an op's configuration is not one for t_s. */
static int eval_stage(const inst_t *m, const pf_stagedeg_result_t *r, int s, uint64_t *h,
                      sums_t *sum, char *err, size_t errlen)
{
    int words = (m->n + 63) / 64;
    memset(h, 0, (size_t)words * sizeof *h);
    for (int v = 0; v < m->n; v++)
        if (r->op_stage[v] == s)
            h[v / 64] |= 1ULL << (v % 64);
    *sum = (sums_t){0};
    for (int v = 0; v < m->n; v++) {
        if (r->op_stage[v] != s)
            continue;
        int l = r->op_tmpc[v];
        if (l < 0 || l >= m->tab->first[v + 1] - m->tab->first[v] ||
            m->tab->opt[m->tab->first[v] + l].t != r->tensor[s])
            return pf_fail(err, errlen, PF_EINPUT,
                           "stagedeg_tp: op %d: configuration %d is not one for t = %d", v, l,
                           r->tensor[s]);
        sums_t one = pf_stagedeg_tpm_op_sums(m, h, v, &m->tab->opt[m->tab->first[v] + l]);
        pf_stagedeg_tpm_add(sum, &one);
    }
    return PF_OK;
}

static int eval_devices(const inst_t *m, const pf_stagedeg_result_t *r, int *K, char *err,
                        size_t errlen)
{
    int used = 0;
    *K = 0;
    for (int s = 0; s < r->stages; s++) {
        if (r->degree[s] < 1 || r->tensor[s] < 1 || r->degree[s] * r->tensor[s] > m->D)
            return pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: stage %d: d %d x t %d", s,
                           r->degree[s], r->tensor[s]);
        used += r->degree[s] * r->tensor[s];
        *K += r->degree[s];
    }
    if (used > m->D)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: %d devices used of %d", used, m->D);
    return PF_OK;
}

int pf_stagedeg_tp_eval(const pf_graph_t *g, const pf_cost_model_t *cm, const pf_stagedeg_opts_t *o,
                        const pf_stagedeg_tmpcs_t *tab, pf_stagedeg_result_t *r, char *err,
                        size_t errlen)
{
    inst_t m;
    int rc, K;
    uint64_t *h = NULL;
    if ((rc = pf_stagedeg_tpm_init(&m, g, cm, o, tab, err, errlen)) != PF_OK ||
        (rc = eval_devices(&m, r, &K, err, errlen)) != PF_OK)
        goto done;
    h = malloc((size_t)((m.n + 63) / 64) * sizeof *h);
    if (!h) {
        rc = pf_fail(err, errlen, PF_ERR, "stagedeg_tp: out of memory");
        goto done;
    }
    r->objective_ms = r->stages ? 0 : INFINITY;
    for (int s = 0; s < r->stages; s++) {
        sums_t sum;
        if ((rc = eval_stage(&m, r, s, h, &sum, err, errlen)) != PF_OK)
            goto done;
        r->time_ms[s] = pf_stagedeg_tpm_price(&m, &sum, r->degree[s]);
        r->mem_bytes[s] =
            pf_stagedeg_tpm_memory(&m, &sum, r->degree[s], pf_stagedeg_tpm_y(&m, K, r->degree[s]));
        K -= r->degree[s];
        r->objective_ms =
            r->mem_bytes[s] > cm->mem_limit_bytes ? INFINITY : fmax(r->objective_ms, r->time_ms[s]);
    }
done:
    free(h);
    pf_stagedeg_tpm_free(&m);
    return rc;
}
