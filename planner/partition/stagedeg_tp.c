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

enum { MAXOPT = 2 };

typedef struct {
    double time, x, p, act, fixed;
} sums_t;

/* ---- the instance ---- */

typedef struct {
    const pf_graph_t *g;
    const pf_cost_model_t *cm;
    const pf_stagedeg_opts_t *o;
    const pf_stagedeg_tmpcs_t *tab;
    int n, mb, D, S;   /* S: the most a chain's data-parallel degrees add up to */
    int nt, tmax, *ts; /* the t <= D some configuration has, ascending */
    int *cnt;          /* cnt[ti n + v]: v's configurations at ts[ti] (0..2) */
    int *idx;          /* idx[(ti n + v) 2 + l]: the l-th, counted from first[v] */
    int *fast;         /* fast[ti n + v]: v's fixed fastest l at ts[ti]; -1: none or not fixed */
    int *stable;       /* stable[ti]: every op with a configuration at ts[ti] has a fixed fastest */
    int *slot_in, *slot_out; /* per edge: its place in the head's / tail's sync_bytes */
    double *sf;              /* sf[d], d = 1..D */
} inst_t;

static void inst_free(inst_t *m)
{
    free(m->ts);
    free(m->cnt);
    free(m->idx);
    free(m->fast);
    free(m->stable);
    free(m->slot_in);
    free(m->slot_out);
    free(m->sf);
    memset(m, 0, sizeof *m);
}

static const pf_stagedeg_tmpc_t *conf(const inst_t *m, int ti, int v, int l)
{
    return &m->tab->opt[m->tab->first[v] + m->idx[((size_t)ti * m->n + v) * MAXOPT + l]];
}

static double sync_at(const pf_stagedeg_tmpc_t *c, int slot)
{
    return c->sync_bytes ? c->sync_bytes[slot] : 0;
}

/* Two configurations whose fastest cannot depend on d or the boundary: same parameters and
 * sync bytes (then the terms of t(H) differ by time_ms / d alone). */
static int same_but_time(const inst_t *m, const pf_stagedeg_tmpc_t *a, const pf_stagedeg_tmpc_t *b,
                         int v)
{
    int nin, nout;
    pf_graph_in(m->g, v, &nin);
    pf_graph_out(m->g, v, &nout);
    if (a->param_bytes != b->param_bytes)
        return 0;
    for (int i = 0; i < nin + nout; i++)
        if (sync_at(a, i) != sync_at(b, i))
            return 0;
    return 1;
}

static int inst_check(const inst_t *m, char *err, size_t errlen)
{
    const pf_stagedeg_opts_t *o = m->o;
    if (o->devices < 1)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: %d devices", o->devices);
    if (o->edge_factor < 0 || o->allreduce_factor < 0)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: negative factor");
    if (m->cm->train.schedule != PF_SCHEDULE_1F1B && m->cm->train.schedule != PF_SCHEDULE_SIGNAL)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: schedule %s is not modelled (1F1B only)",
                       pf_training_schedule_name(m->cm->train.schedule));
    if (m->n < 1 || !m->tab || !m->tab->opt || !m->tab->first || m->tab->first[0] != 0)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: no graph or no configurations");
    for (int v = 0; v < m->n; v++) {
        if (m->tab->first[v + 1] < m->tab->first[v])
            return pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: op %d: first decreases", v);
        for (int c = m->tab->first[v]; c < m->tab->first[v + 1]; c++) {
            const pf_stagedeg_tmpc_t *x = &m->tab->opt[c];
            if (x->t < 1 || !(x->time_ms >= 0) || !(x->param_bytes >= 0) || !(x->act_bytes >= 0) ||
                !(x->fixed_bytes >= 0))
                return pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: op %d: bad configuration %d",
                               v, c - m->tab->first[v]);
        }
    }
    return PF_OK;
}

/* The distinct t <= D of the configurations into m->ts. */
static int inst_degrees(inst_t *m)
{
    m->ts = malloc((size_t)m->D * sizeof *m->ts);
    if (!m->ts)
        return PF_ERR;
    m->nt = 0;
    m->tmax = 1;
    for (int t = 1; t <= m->D; t++) {
        int found = 0;
        for (int c = 0; c < m->tab->first[m->n] && !found; c++)
            found = m->tab->opt[c].t == t;
        if (found) {
            m->ts[m->nt++] = t;
            m->tmax = t;
        }
    }
    return PF_OK;
}

/* cnt, idx, fast and stable; PF_EINPUT for more than two configurations at one t. */
static int inst_table(inst_t *m, char *err, size_t errlen)
{
    size_t cells = (size_t)(m->nt ? m->nt : 1) * m->n;
    m->cnt = calloc(cells, sizeof *m->cnt);
    m->idx = calloc(cells * MAXOPT, sizeof *m->idx);
    m->fast = malloc(cells * sizeof *m->fast);
    m->stable = malloc((size_t)(m->nt ? m->nt : 1) * sizeof *m->stable);
    if (!m->cnt || !m->idx || !m->fast || !m->stable)
        return pf_fail(err, errlen, PF_ERR, "stagedeg_tp: out of memory");
    for (int ti = 0; ti < m->nt; ti++) {
        m->stable[ti] = 1;
        for (int v = 0; v < m->n; v++) {
            size_t c = (size_t)ti * m->n + v;
            for (int x = m->tab->first[v]; x < m->tab->first[v + 1]; x++) {
                if (m->tab->opt[x].t != m->ts[ti])
                    continue;
                if (m->cnt[c] == MAXOPT)
                    return pf_fail(err, errlen, PF_EINPUT,
                                   "stagedeg_tp: op %d has more than %d configurations for t = %d",
                                   v, MAXOPT, m->ts[ti]);
                m->idx[c * MAXOPT + m->cnt[c]++] = x - m->tab->first[v];
            }
            m->fast[c] = m->cnt[c] == 0 ? -1 : 0;
            if (m->cnt[c] == 2) {
                const pf_stagedeg_tmpc_t *a = conf(m, ti, v, 0), *b = conf(m, ti, v, 1);
                m->fast[c] = !same_but_time(m, a, b, v) ? -1 : b->time_ms < a->time_ms;
                m->stable[ti] &= m->fast[c] >= 0;
            }
        }
    }
    return PF_OK;
}

/* Each edge's place in its head's and tail's sync_bytes. */
static int inst_slots(inst_t *m)
{
    int ne = pf_graph_nedges(m->g);
    m->slot_in = malloc((size_t)(ne ? ne : 1) * sizeof *m->slot_in);
    m->slot_out = malloc((size_t)(ne ? ne : 1) * sizeof *m->slot_out);
    if (!m->slot_in || !m->slot_out)
        return PF_ERR;
    for (int v = 0; v < m->n; v++) {
        int nin, nout;
        const int *in = pf_graph_in(m->g, v, &nin), *out = pf_graph_out(m->g, v, &nout);
        for (int i = 0; i < nin; i++)
            m->slot_in[in[i]] = i;
        for (int i = 0; i < nout; i++)
            m->slot_out[out[i]] = nin + i;
    }
    return PF_OK;
}

static int inst_init(inst_t *m, const pf_graph_t *g, const pf_cost_model_t *cm,
                     const pf_stagedeg_opts_t *o, const pf_stagedeg_tmpcs_t *tab, char *err,
                     size_t errlen)
{
    int rc;
    memset(m, 0, sizeof *m);
    *m = (inst_t){.g = g, .cm = cm, .o = o, .tab = tab, .n = pf_graph_nops(g), .D = o->devices};
    if ((rc = inst_check(m, err, errlen)) != PF_OK)
        return rc;
    m->mb = cm->microbatches > 0 ? cm->microbatches : 1;
    m->S = o->degrees == PF_STAGEDEG_DEGREES_DIVIDE_MB && o->only_degree <= 0 && m->mb < m->D
               ? m->mb
               : m->D;
    m->sf = malloc(((size_t)m->D + 1) * sizeof *m->sf);
    if (!m->sf || inst_degrees(m) != PF_OK || inst_slots(m) != PF_OK)
        return pf_fail(err, errlen, PF_ERR, "stagedeg_tp: out of memory");
    for (int d = 1; d <= m->D; d++)
        m->sf[d] = o->state_factor > 0   ? o->state_factor
                   : o->state_factor < 0 ? 0
                                         : pf_training_state_factor(&cm->train, d);
    return inst_table(m, err, errlen);
}

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

/* ---- the model ---- */

/* t(H) from H's sums (stagedeg_tp.h). */
static double price(const inst_t *m, const sums_t *h, int d)
{
    double gbps = m->cm->flat_gbps;
    return (h->time + pf_bytes_ms(m->o->edge_factor * h->x, gbps)) / d +
           pf_bytes_ms(m->o->allreduce_factor * (d - 1) / d * h->p / m->mb, gbps);
}

static double memory(const inst_t *m, const sums_t *h, int d, int y)
{
    return m->sf[d] * h->p + y * h->act + h->fixed + m->cm->reserve_bytes;
}

static int y_of(const inst_t *m, int s, int d)
{
    int y = (s + d - 1) / d;
    return y < m->mb ? y : m->mb;
}

static void add(sums_t *a, const sums_t *b)
{
    a->time += b->time;
    a->x += b->x;
    a->p += b->p;
    a->act += b->act;
    a->fixed += b->fixed;
}

/* Op v's terms under configuration c in stage h (a bitset): its boundary edges' bytes + sync. */
static sums_t op_sums(const inst_t *m, const uint64_t *h, int v, const pf_stagedeg_tmpc_t *c)
{
    sums_t s = {c->time_ms, 0, c->param_bytes, c->act_bytes, c->fixed_bytes};
    int nin, nout;
    const int *in = pf_graph_in(m->g, v, &nin), *out = pf_graph_out(m->g, v, &nout);
    for (int i = 0; i < nin; i++) {
        const pf_edge_t *e = pf_graph_edge(m->g, in[i]);
        if (!pf_bit_test(h, e->src))
            s.x += e->bytes + sync_at(c, i);
    }
    for (int i = 0; i < nout; i++) {
        const pf_edge_t *e = pf_graph_edge(m->g, out[i]);
        if (!pf_bit_test(h, e->dst))
            s.x += e->bytes + sync_at(c, nin + i);
    }
    return s;
}

/* ---- [Piper]'s choice of configurations for one stage ---- */

typedef struct {
    double ratio, save;
    int i;
} cand_t;

static int cand_cmp(const void *a, const void *b)
{
    const cand_t *x = a, *y = b;
    if (x->ratio != y->ratio)
        return x->ratio < y->ratio ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* A thread's scratch for stage H: its bitset, ops (ascending), per op and configuration the
 * terms, and the choices. */
typedef struct {
    uint64_t *h;
    int *ops, nh, *fast, *low, *pick;
    sums_t *terms; /* terms[i MAXOPT + l] */
    double *val, *mem;
    cand_t *cand;
} scratch_t;

static void scratch_free(scratch_t *sc)
{
    free(sc->h);
    free(sc->ops);
    free(sc->fast);
    free(sc->low);
    free(sc->pick);
    free(sc->terms);
    free(sc->val);
    free(sc->mem);
    free(sc->cand);
}

static int scratch_init(scratch_t *sc, int n, int words)
{
    memset(sc, 0, sizeof *sc);
    sc->h = calloc((size_t)words, sizeof *sc->h);
    sc->ops = malloc((size_t)n * sizeof *sc->ops);
    sc->fast = malloc((size_t)n * sizeof *sc->fast);
    sc->low = malloc((size_t)n * sizeof *sc->low);
    sc->pick = malloc((size_t)n * sizeof *sc->pick);
    sc->terms = malloc((size_t)n * MAXOPT * sizeof *sc->terms);
    sc->val = malloc((size_t)n * MAXOPT * sizeof *sc->val);
    sc->mem = malloc((size_t)n * MAXOPT * sizeof *sc->mem);
    sc->cand = malloc((size_t)n * sizeof *sc->cand);
    return sc->h && sc->ops && sc->fast && sc->low && sc->pick && sc->terms && sc->val &&
                   sc->mem && sc->cand
               ? PF_OK
               : PF_ERR;
}

/* The sums of H's ops under the choice ch (an l per op). */
static sums_t chosen(const inst_t *m, const scratch_t *sc, const int *ch)
{
    sums_t s = {0};
    (void)m;
    for (int i = 0; i < sc->nh; i++)
        add(&s, &sc->terms[i * MAXOPT + ch[i]]);
    return s;
}

/* Every op's terms at (t, d) and its fastest configuration into sc->fast; the fastest sums. */
static sums_t stage_fastest(const inst_t *m, scratch_t *sc, int ti, int d)
{
    for (int i = 0; i < sc->nh; i++) {
        int v = sc->ops[i], c = m->cnt[(size_t)ti * m->n + v];
        sc->fast[i] = 0;
        for (int l = 0; l < c; l++) {
            sc->terms[i * MAXOPT + l] = op_sums(m, sc->h, v, conf(m, ti, v, l));
            sc->val[i * MAXOPT + l] = price(m, &sc->terms[i * MAXOPT + l], d);
            if (sc->val[i * MAXOPT + l] < sc->val[i * MAXOPT + sc->fast[i]])
                sc->fast[i] = l;
        }
    }
    return chosen(m, sc, sc->fast);
}

/* Price of H at (t, d, y) as stagedeg_tp.h chooses; INFINITY when it does not fit. sc->pick gets
 * the choice and *mode 0 (fastest), 2 ([Piper]'s) or 1 (least memory). */
static double stage_choose(const inst_t *m, scratch_t *sc, int ti, int d, int y, int *mode)
{
    double limit = m->cm->mem_limit_bytes;
    sums_t f = stage_fastest(m, sc, ti, d);
    memcpy(sc->pick, sc->fast, (size_t)sc->nh * sizeof *sc->pick);
    *mode = 0;
    double over = memory(m, &f, d, y) - limit;
    if (over <= 0)
        return price(m, &f, d);
    int nc = 0;
    for (int i = 0; i < sc->nh; i++) {
        int c = m->cnt[(size_t)ti * m->n + sc->ops[i]];
        sc->low[i] = 0;
        for (int l = 0; l < c; l++) {
            sums_t one = sc->terms[i * MAXOPT + l];
            sc->mem[i * MAXOPT + l] = memory(m, &one, d, y) - m->cm->reserve_bytes;
            if (sc->mem[i * MAXOPT + l] < sc->mem[i * MAXOPT + sc->low[i]])
                sc->low[i] = l;
        }
    }
    sums_t lo = chosen(m, sc, sc->low);
    if (memory(m, &lo, d, y) > limit)
        return INFINITY;
    for (int i = 0; i < sc->nh; i++) {
        int fi = sc->fast[i], oi = 1 - fi;
        if (m->cnt[(size_t)ti * m->n + sc->ops[i]] < 2)
            continue;
        double save = sc->mem[i * MAXOPT + fi] - sc->mem[i * MAXOPT + oi];
        if (save > 1e-9)
            sc->cand[nc++] = (cand_t){(sc->val[i * MAXOPT + oi] - sc->val[i * MAXOPT + fi]) / save,
                                      save, i};
    }
    qsort(sc->cand, (size_t)nc, sizeof *sc->cand, cand_cmp);
    for (int c = 0; c < nc; c++) {
        sc->pick[sc->cand[c].i] = 1 - sc->pick[sc->cand[c].i];
        over -= sc->cand[c].save;
        if (over < 1e-9)
            break;
    }
    sums_t gr = chosen(m, sc, sc->pick);
    double pg = price(m, &gr, d), pl = price(m, &lo, d);
    *mode = pl < pg ? 1 : 2;
    if (pl < pg)
        memcpy(sc->pick, sc->low, (size_t)sc->nh * sizeof *sc->pick);
    return fmin(pg, pl);
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
    return l < 0 ? NULL : conf(m, ti, v, l);
}

/* Edge e's sync at its tail (out) and head (in) under their fixed fastest at ts[ti]. */
static void edge_sync(const inst_t *m, int ti, int e, double *tail, double *head)
{
    const pf_edge_t *ed = pf_graph_edge(m->g, e);
    const pf_stagedeg_tmpc_t *a = fixed_fast(m, ti, ed->src), *b = fixed_fast(m, ti, ed->dst);
    *tail = a ? sync_at(a, m->slot_out[e]) : 0;
    *head = b ? sync_at(b, m->slot_in[e]) : 0;
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
                    add(&in->fs[(size_t)ti * in->N + X],
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
    double *T;
    long long *argj;
    int *argt, *argd;
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

/* Stage H (in sc) at (t, d), fastest sums f, as the first stage of the chain from F_i, into
 * every cell (k, s) of T[i]: [Piper]'s choice at y = ceil(s / d) only where the fastest does not
 * fit and the cell could still improve (the fastest's price bounds the others' from below). */
static void dp_stage(dp_t *dp, long long i, long long j, int ti, int d, const sums_t *f,
                     scratch_t *sc)
{
    const inst_t *m = dp->m;
    int td = m->ts[ti] * d, yprev = -1, mode;
    double *Ti = dp->T + (size_t)i * dp->C, pf = price(m, f, d), p = INFINITY;
    const double *Tj = dp->T + (size_t)j * dp->C;
    for (int s = d; s <= m->S; s++) {
        int sr = s - d, y = y_of(m, s, d), khi = khi_of(dp, sr);
        if (khi > m->D - td)
            khi = m->D - td;
        for (int kr = sr; kr <= khi; kr++) {
            double tj = Tj[dp->off[sr] + kr - sr];
            size_t c = (size_t)dp->off[s] + kr + td - s;
            if (!(fmax(pf, tj) < Ti[c]))
                continue;
            if (y != yprev)
                p = memory(m, f, d, y) <= m->cm->mem_limit_bytes ? pf
                                                                 : stage_choose(m, sc, ti, d, y, &mode);
            yprev = y;
            double v = fmax(p, tj);
            if (v < Ti[c]) {
                Ti[c] = v;
                dp->argj[(size_t)i * dp->C + c] = j;
                dp->argt[(size_t)i * dp->C + c] = ti;
                dp->argd[(size_t)i * dp->C + c] = d;
            }
        }
    }
}

/* Pair (F_i, F_j): every t all of H's ops have and every degree. */
static void dp_pair(dp_t *dp, long long i, long long j, scratch_t *sc)
{
    const inst_t *m = dp->m;
    const dsinfo_t *in = dp->in;
    int nh = in->pop[j] - in->pop[i];
    for (int ti = 0; ti < m->nt; ti++) {
        if (in->have[(size_t)ti * in->N + j] - in->have[(size_t)ti * in->N + i] != nh)
            continue;
        sums_t f = {0};
        if (m->stable[ti])
            f = pair_sums(dp, ti, i, j);
        for (int di = 0; di < dp->ndeg && dp->degs[di] * m->ts[ti] <= m->D; di++) {
            if (!m->stable[ti])
                f = stage_fastest(m, sc, ti, dp->degs[di]);
            dp_stage(dp, i, j, ti, dp->degs[di], &f, sc);
        }
    }
}

/* H = F_j \ F_i into sc (bitset and ops). */
static void scratch_stage(const dp_t *dp, scratch_t *sc, long long i, long long j)
{
    const uint64_t *fi = pf_downsets_get(dp->ds, i), *fj = pf_downsets_get(dp->ds, j);
    sc->nh = 0;
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
}

static int dp_solve(dp_t *dp, int nt)
{
    const dsinfo_t *in = dp->in;
    long long N = in->N;
    for (size_t c = 0; c < (size_t)N * dp->C; c++)
        dp->T[c] = INFINITY;
    dp->T[(size_t)(N - 1) * dp->C] = 0;
    long long hi = N - 1;
    while (hi > 0) {
        long long lo = hi;
        while (lo > 0 && in->pop[lo - 1] == in->pop[hi - 1])
            lo--;
#pragma omp parallel num_threads(nt) if (nt > 1 && hi - lo > 1)
        {
            scratch_t sc;
            int ok = scratch_init(&sc, dp->m->n, in->words) == PF_OK;
            if (!ok)
                atomic_store(&dp->oom, 1);
#pragma omp for schedule(dynamic, 1)
            for (long long i = lo; i < hi; i++)
                if (ok)
                    dp_cell(dp, i, &sc);
            scratch_free(&sc);
        }
        hi = lo;
    }
    return atomic_load(&dp->oom) ? PF_ERR : PF_OK;
}

/* The chain from {} at cell c as a result: stages, degrees, configurations. */
static pf_stagedeg_result_t *dp_chain(const dp_t *dp, int k, int s)
{
    const inst_t *m = dp->m;
    int S = 0;
    for (long long i = 0, kk = k, ss = s; i != dp->in->N - 1; S++) {
        size_t c = (size_t)i * dp->C + dp->off[ss] + kk - ss;
        kk -= (long long)m->ts[dp->argt[c]] * dp->argd[c];
        ss -= dp->argd[c];
        i = dp->argj[c];
    }
    pf_stagedeg_result_t *r = pf_stagedeg_result_new(m->n, S);
    scratch_t sc;
    if (!r || scratch_init(&sc, m->n, dp->in->words) != PF_OK) {
        if (r)
            scratch_free(&sc);
        pf_stagedeg_result_destroy(&r);
        return NULL;
    }
    long long i = 0;
    for (int st = 0; st < S; st++) {
        size_t c = (size_t)i * dp->C + dp->off[s] + k - s;
        long long j = dp->argj[c];
        int ti = dp->argt[c], d = dp->argd[c], mode;
        scratch_stage(dp, &sc, i, j);
        stage_choose(m, &sc, ti, d, y_of(m, s, d), &mode);
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
    scratch_free(&sc);
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
    dp->ndeg = 0;
    for (int d = 1; d <= m->S; d++)
        if (degree_ok(m, d))
            dp->degs[dp->ndeg++] = d;
    size_t cells = (size_t)dp->in->N * dp->C;
    dp->T = malloc(cells * sizeof *dp->T);
    dp->argj = malloc(cells * sizeof *dp->argj);
    dp->argt = malloc(cells * sizeof *dp->argt);
    dp->argd = malloc(cells * sizeof *dp->argd);
    return dp->T && dp->argj && dp->argt && dp->argd ? PF_OK : PF_ERR;
}

static void dp_free(dp_t *dp)
{
    free(dp->off);
    free(dp->degs);
    free(dp->T);
    free(dp->argj);
    free(dp->argt);
    free(dp->argd);
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
    if ((rc = inst_init(&m, g, cm, o, tab, err, errlen)) != PF_OK)
        goto done;
    long long N = pf_downsets_size(ds);
    if (N < 2 || pf_downsets_popcount(ds, N - 1) != m.n || pf_downsets_popcount(ds, 0) != 0) {
        rc = pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: downsets must run from {} to V");
        goto done;
    }
    if (dsinfo_build(&m, ds, &in) != PF_OK || dp_layout(&dp) != PF_OK ||
        dp_solve(&dp, o->threads > 0 ? o->threads : omp_get_max_threads()) != PF_OK)
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
    inst_free(&m);
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
            return pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: op %d: configuration %d is not "
                           "one for t = %d", v, l, r->tensor[s]);
        sums_t one = op_sums(m, h, v, &m->tab->opt[m->tab->first[v] + l]);
        add(sum, &one);
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
    if ((rc = inst_init(&m, g, cm, o, tab, err, errlen)) != PF_OK ||
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
        r->time_ms[s] = price(&m, &sum, r->degree[s]);
        r->mem_bytes[s] = memory(&m, &sum, r->degree[s], y_of(&m, K, r->degree[s]));
        K -= r->degree[s];
        r->objective_ms = r->mem_bytes[s] > cm->mem_limit_bytes ? INFINITY
                                                                : fmax(r->objective_ms, r->time_ms[s]);
    }
done:
    free(h);
    inst_free(&m);
    return rc;
}
