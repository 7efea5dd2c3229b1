/* stagedeg_tpm: the instance and the stage prices of stagedeg_tp's DP (stagedeg_tpm.h; the
 * model and [Piper]'s choice of configurations are stagedeg_tp.h's). */
#include "planner/partition/stagedeg_tpm.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the instance ---- */

void pf_stagedeg_tpm_free(pf_stagedeg_tpm_t *m)
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

const pf_stagedeg_tmpc_t *pf_stagedeg_tpm_conf(const pf_stagedeg_tpm_t *m, int ti, int v, int l)
{
    return &m->tab->opt[m->tab->first[v] +
                        m->idx[((size_t)ti * m->n + v) * PF_STAGEDEG_TPM_MAXOPT + l]];
}

double pf_stagedeg_tpm_sync(const pf_stagedeg_tmpc_t *c, int slot)
{
    return c->sync_bytes ? c->sync_bytes[slot] : 0;
}

/* Two configurations whose fastest cannot depend on d or the boundary: same parameters and
 * sync bytes (then the terms of t(H) differ by time_ms / d alone). */
static int same_but_time(const pf_stagedeg_tpm_t *m, const pf_stagedeg_tmpc_t *a,
                         const pf_stagedeg_tmpc_t *b, int v)
{
    int nin, nout;
    pf_graph_in(m->g, v, &nin);
    pf_graph_out(m->g, v, &nout);
    if (a->param_bytes != b->param_bytes)
        return 0;
    for (int i = 0; i < nin + nout; i++)
        if (pf_stagedeg_tpm_sync(a, i) != pf_stagedeg_tpm_sync(b, i))
            return 0;
    return 1;
}

static int inst_check(const pf_stagedeg_tpm_t *m, char *err, size_t errlen)
{
    const pf_stagedeg_opts_t *o = m->o;
    if (o->devices < 1)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: %d devices", o->devices);
    if (o->edge_factor < 0 || o->allreduce_factor < 0)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: negative factor");
    if (o->allreduce_per_microbatch)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg_tp: allreduce_per_microbatch not modelled");
    if (m->cm->train.schedule != PF_SCHEDULE_1F1B && m->cm->train.schedule != PF_SCHEDULE_SIGNAL)
        return pf_fail(err, errlen, PF_EINPUT,
                       "stagedeg_tp: schedule %s is not modelled (1F1B only)",
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
static int inst_degrees(pf_stagedeg_tpm_t *m)
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
static int inst_table(pf_stagedeg_tpm_t *m, char *err, size_t errlen)
{
    size_t cells = (size_t)(m->nt ? m->nt : 1) * m->n;
    m->cnt = calloc(cells, sizeof *m->cnt);
    m->idx = calloc(cells * PF_STAGEDEG_TPM_MAXOPT, sizeof *m->idx);
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
                if (m->cnt[c] == PF_STAGEDEG_TPM_MAXOPT)
                    return pf_fail(err, errlen, PF_EINPUT,
                                   "stagedeg_tp: op %d has more than %d configurations for t = %d",
                                   v, PF_STAGEDEG_TPM_MAXOPT, m->ts[ti]);
                m->idx[c * PF_STAGEDEG_TPM_MAXOPT + m->cnt[c]++] = x - m->tab->first[v];
            }
            m->fast[c] = m->cnt[c] == 0 ? -1 : 0;
            if (m->cnt[c] == 2) {
                const pf_stagedeg_tmpc_t *a = pf_stagedeg_tpm_conf(m, ti, v, 0),
                                         *b = pf_stagedeg_tpm_conf(m, ti, v, 1);
                m->fast[c] = !same_but_time(m, a, b, v) ? -1 : b->time_ms < a->time_ms;
                m->stable[ti] &= m->fast[c] >= 0;
            }
        }
    }
    return PF_OK;
}

/* Each edge's place in its head's and tail's sync_bytes. */
static int inst_slots(pf_stagedeg_tpm_t *m)
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

int pf_stagedeg_tpm_init(pf_stagedeg_tpm_t *m, const pf_graph_t *g, const pf_cost_model_t *cm,
                         const pf_stagedeg_opts_t *o, const pf_stagedeg_tmpcs_t *tab, char *err,
                         size_t errlen)
{
    int rc;
    memset(m, 0, sizeof *m);
    *m = (pf_stagedeg_tpm_t){
        .g = g, .cm = cm, .o = o, .tab = tab, .n = pf_graph_nops(g), .D = o->devices};
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

/* Op v's terms under configuration c in stage h (a bitset): its boundary edges' bytes + sync. */
pf_stagedeg_tpm_sums_t pf_stagedeg_tpm_op_sums(const pf_stagedeg_tpm_t *m, const uint64_t *h, int v,
                                               const pf_stagedeg_tmpc_t *c)
{
    pf_stagedeg_tpm_sums_t s = {c->time_ms, 0, c->param_bytes, c->act_bytes, c->fixed_bytes};
    int nin, nout;
    const int *in = pf_graph_in(m->g, v, &nin), *out = pf_graph_out(m->g, v, &nout);
    for (int i = 0; i < nin; i++) {
        const pf_edge_t *e = pf_graph_edge(m->g, in[i]);
        if (!pf_bit_test(h, e->src))
            s.x += e->bytes + pf_stagedeg_tpm_sync(c, i);
    }
    for (int i = 0; i < nout; i++) {
        const pf_edge_t *e = pf_graph_edge(m->g, out[i]);
        if (!pf_bit_test(h, e->dst))
            s.x += e->bytes + pf_stagedeg_tpm_sync(c, nin + i);
    }
    return s;
}

/* ---- [Piper]'s choice of configurations for one stage ---- */

static int cand_cmp(const void *a, const void *b)
{
    const pf_stagedeg_tpm_cand_t *x = a, *y = b;
    if (x->ratio != y->ratio)
        return x->ratio < y->ratio ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

void pf_stagedeg_tpm_scratch_free(pf_stagedeg_tpm_scratch_t *sc)
{
    free(sc->h);
    free(sc->ops);
    free(sc->fast);
    free(sc->low);
    free(sc->pick);
    free(sc->terms);
    free(sc->val);
    free(sc->coef);
    free(sc->mem);
    free(sc->cand);
}

int pf_stagedeg_tpm_scratch_init(pf_stagedeg_tpm_scratch_t *sc, int n, int words)
{
    memset(sc, 0, sizeof *sc);
    sc->h = calloc((size_t)words, sizeof *sc->h);
    sc->ops = malloc((size_t)n * sizeof *sc->ops);
    sc->fast = malloc((size_t)n * sizeof *sc->fast);
    sc->low = malloc((size_t)n * sizeof *sc->low);
    sc->pick = malloc((size_t)n * sizeof *sc->pick);
    sc->terms = malloc((size_t)n * PF_STAGEDEG_TPM_MAXOPT * sizeof *sc->terms);
    sc->val = malloc((size_t)n * PF_STAGEDEG_TPM_MAXOPT * sizeof *sc->val);
    sc->coef = malloc((size_t)n * PF_STAGEDEG_TPM_MAXOPT * 2 * sizeof *sc->coef);
    sc->mem = malloc((size_t)n * PF_STAGEDEG_TPM_MAXOPT * sizeof *sc->mem);
    sc->cand = malloc((size_t)n * sizeof *sc->cand);
    return sc->h && sc->ops && sc->fast && sc->low && sc->pick && sc->terms && sc->val &&
                   sc->coef && sc->mem && sc->cand
               ? PF_OK
               : PF_ERR;
}

/* The sums of H's ops under the choice ch (an l per op). */
static pf_stagedeg_tpm_sums_t chosen(const pf_stagedeg_tpm_t *m,
                                     const pf_stagedeg_tpm_scratch_t *sc, const int *ch)
{
    pf_stagedeg_tpm_sums_t s = {0};
    (void)m;
    for (int i = 0; i < sc->nh; i++)
        pf_stagedeg_tpm_add(&s, &sc->terms[i * PF_STAGEDEG_TPM_MAXOPT + ch[i]]);
    return s;
}

/* Every op's terms at t (kept while the stage and t stay), its term of t(H) at d and its fastest
 * configuration into sc->fast (kept while d stays too); the fastest sums. */
pf_stagedeg_tpm_sums_t pf_stagedeg_tpm_fastest(const pf_stagedeg_tpm_t *m,
                                               pf_stagedeg_tpm_scratch_t *sc, int ti, int d)
{
    enum { K = PF_STAGEDEG_TPM_MAXOPT };
    if (sc->cti == ti && sc->cd == d)
        return sc->cfast;
    double bytes_per_ms = m->cm->flat_gbps * 1e6;
    for (int i = 0; i < sc->nh; i++) {
        int v = sc->ops[i], c = m->cnt[(size_t)ti * m->n + v];
        sc->fast[i] = 0;
        for (int l = 0; l < c; l++) {
            pf_stagedeg_tpm_sums_t *x = &sc->terms[i * K + l];
            if (sc->cti != ti) { /* d x t(H) of this op alone = a + (d - 1) b */
                *x = pf_stagedeg_tpm_op_sums(m, sc->h, v, pf_stagedeg_tpm_conf(m, ti, v, l));
                sc->coef[2 * (i * K + l)] = x->time + m->o->edge_factor * x->x / bytes_per_ms;
                sc->coef[2 * (i * K + l) + 1] =
                    m->o->allreduce_factor * x->p / m->mb / bytes_per_ms;
            }
            sc->val[i * K + l] =
                sc->coef[2 * (i * K + l)] + (d - 1) * sc->coef[2 * (i * K + l) + 1];
            if (sc->val[i * K + l] < sc->val[i * K + sc->fast[i]])
                sc->fast[i] = l;
        }
    }
    sc->cti = ti;
    sc->cd = d;
    sc->cfast = chosen(m, sc, sc->fast);
    return sc->cfast;
}

/* Piper's feasibility test: the stage fits at all when every op at its least-memory
 * configuration does (then the swaps below reach it). Fills sc->mem. */
static int least_fits(const pf_stagedeg_tpm_t *m, pf_stagedeg_tpm_scratch_t *sc, int ti, int d,
                      int y)
{
    enum { K = PF_STAGEDEG_TPM_MAXOPT };
    for (int i = 0; i < sc->nh; i++) {
        int c = m->cnt[(size_t)ti * m->n + sc->ops[i]];
        sc->low[i] = 0;
        for (int l = 0; l < c; l++) {
            sc->mem[i * K + l] =
                pf_stagedeg_tpm_memory(m, &sc->terms[i * K + l], d, y) - m->cm->reserve_bytes;
            if (sc->mem[i * K + l] < sc->mem[i * K + sc->low[i]])
                sc->low[i] = l;
        }
    }
    pf_stagedeg_tpm_sums_t lo = chosen(m, sc, sc->low);
    return pf_stagedeg_tpm_memory(m, &lo, d, y) <= m->cm->mem_limit_bytes;
}

/* Price of H at (t, d, y) as stagedeg_tp.h chooses; INFINITY when it does not fit. sc->pick gets
 * the choice and *mode 0 (every op at its fastest) or 2 (swaps by [Piper]'s heuristic). */
double pf_stagedeg_tpm_choose(const pf_stagedeg_tpm_t *m, pf_stagedeg_tpm_scratch_t *sc, int ti,
                              int d, int y, int *mode)
{
    enum { K = PF_STAGEDEG_TPM_MAXOPT };
    pf_stagedeg_tpm_sums_t f = pf_stagedeg_tpm_fastest(m, sc, ti, d);
    memcpy(sc->pick, sc->fast, (size_t)sc->nh * sizeof *sc->pick);
    *mode = 0;
    double over = pf_stagedeg_tpm_memory(m, &f, d, y) - m->cm->mem_limit_bytes;
    if (over <= 0)
        return pf_stagedeg_tpm_price(m, &f, d);
    if (!least_fits(m, sc, ti, d, y))
        return INFINITY;
    int nc = 0;
    for (int i = 0; i < sc->nh; i++) {
        int fi = sc->fast[i], oi = 1 - fi;
        if (m->cnt[(size_t)ti * m->n + sc->ops[i]] < 2)
            continue;
        double save = sc->mem[i * K + fi] - sc->mem[i * K + oi];
        if (save > 1e-9)
            sc->cand[nc++] = (pf_stagedeg_tpm_cand_t){
                (sc->val[i * K + oi] - sc->val[i * K + fi]) / save, save, i};
    }
    qsort(sc->cand, (size_t)nc, sizeof *sc->cand, cand_cmp);
    for (int c = 0; c < nc; c++) {
        sc->pick[sc->cand[c].i] = 1 - sc->pick[sc->cand[c].i];
        over -= sc->cand[c].save;
        if (over < 1e-9)
            break;
    }
    *mode = 2;
    pf_stagedeg_tpm_sums_t gr = chosen(m, sc, sc->pick);
    return pf_stagedeg_tpm_price(m, &gr, d);
}
