/* search_tap: phase 1 of the search for every tensor-parallel degree T > 1 (search.h "tap"):
 * per TAP unit (Shi et al., TAP; tap.h) one TAP_ENUM job per slice of its 3^N plans; when a
 * degree's slices are in, every unit takes its best plan and the degree may open (its setting,
 * then its DP jobs: search_partition.c, started by search.c). T = 1 has no TAP. */
#include "planner/search/search_tap.h"
#include "planner/search/search_queue.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Plans per TAP_ENUM job: 3^9; a transformer block has about 6 weights (729 plans), so most
 * units are one job per T. */
#define TAP_SLICE 19683

const pf_graph_t *pf_search_tap_graph(const pf_search_t *s, int tpi)
{
    return pf_tp_setting_graph(s->tap.tp[tpi].set);
}

const pf_cluster_t *pf_search_tap_cluster(const pf_search_t *s, int tpi)
{
    return pf_tp_setting_cluster(s->tap.tp[tpi].set);
}

/* The slices of one unit with weights, each one TAP_ENUM job. */
static int queue_unit(pf_search_t *s, int tpi, int u, uint64_t nplans, char *err, size_t errlen)
{
    tap_phase_t *tp = &s->tap;
    for (uint64_t lo = 0; lo < nplans; lo += TAP_SLICE) {
        if (pf_grow((void **)&tp->slice, &tp->slice_cap, (size_t)tp->nslice + 1,
                    sizeof *tp->slice))
            return pf_fail(err, errlen, PF_ERR, "out of memory");
        uint64_t hi = nplans - lo > TAP_SLICE ? lo + TAP_SLICE : nplans;
        tp->slice[tp->nslice] = (tap_slice_t){tpi, u, lo, hi};
        if (!pf_search_queue_job(s, PF_JOB_TAP_ENUM, (pf_search_owner_t){.slice = tp->nslice}))
            return pf_fail(err, errlen, PF_ERR, "out of memory");
        tp->nslice++;
        tp->tp[tpi].tap_left++;
    }
    return PF_OK;
}

/* One TAP_ENUM job per slice of every unit with weights; a unit without one has one plan. */
static int queue_degree(pf_search_t *s, int tpi, char *err, size_t errlen)
{
    tp_entry_t *t = &s->tap.tp[tpi];
    int nu = pf_tap_units_count(s->tap.units);
    t->plans = calloc((size_t)nu + 1, sizeof *t->plans);
    t->best = calloc((size_t)nu + 1, sizeof *t->best);
    if (!t->plans || !t->best)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    t->opts.tap_plans = t->plans;
    t->opts.ntap_plans = nu;
    for (int u = 0; u < nu; u++) {
        pf_tap_units_info_t info;
        pf_tap_units_info(s->tap.units, u, &info);
        t->best[u].unit = u;
        t->best[u].T = t->opts.tp;
        if (info.nweights == 0) { /* one plan: nothing to choose */
            t->best[u].hi = 1;
            t->best[u].feasible = 1;
            t->best[u].nbest = 1;
            continue;
        }
        int rc = queue_unit(s, tpi, u, info.nplans, err, errlen);
        if (rc != PF_OK)
            return rc;
    }
    return PF_OK;
}

/* The slices of T are in: every unit takes its best plan, or the degree is dropped. */
static void degree_over(pf_search_t *s, int tpi)
{
    tp_entry_t *t = &s->tap.tp[tpi];
    for (int u = 0; u < pf_tap_units_count(s->tap.units); u++) {
        if (t->best[u].nbest == 0) {
            pf_tap_units_info_t info;
            pf_tap_units_info(s->tap.units, u, &info);
            snprintf(t->why, sizeof t->why, "tensor parallelism %d: no plan of unit %s fits",
                     t->opts.tp, info.name);
            break;
        }
        t->plans[u] = t->best[u].best[0].plan;
    }
    s->tap.tp_left--;
}

int pf_search_tap_init(pf_search_t *s, int nt, char *err, size_t errlen)
{
    if (!(s->tap.tp = calloc((size_t)nt, sizeof *s->tap.tp)))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    return PF_OK;
}

int pf_search_tap_add(pf_search_t *s, int T, bool *over, char *err, size_t errlen)
{
    tap_phase_t *tp = &s->tap;
    int i = tp->ntp++, rc;
    tp_entry_t *t = &tp->tp[i];
    *over = false;
    pf_tp_setting_opts_init(&t->opts);
    t->opts.tp = T;
    t->opts.across_hosts = s->o.tp_across_hosts;
    t->opts.train = pf_search_opts_train(&s->o, T);
    if (T == 1)
        return PF_OK;
    if (!tp->units && !(tp->units = pf_tap_units_new(s->g, &t->opts.tap, err, errlen)))
        return PF_EINPUT;
    if ((rc = queue_degree(s, i, err, errlen)) != PF_OK)
        return rc;
    tp->tp_left++;
    if (t->tap_left == 0) {
        degree_over(s, i);
        *over = true;
    }
    return PF_OK;
}

void pf_search_tap_describe(const pf_search_t *s, const pf_search_owner_t *owner, pf_job_t *job)
{
    const tap_slice_t *sl = &s->tap.slice[owner->slice];
    job->setting = s->tap.tp[sl->tp].opts;
    job->setting.tap_plans = NULL; /* being chosen */
    job->setting.ntap_plans = 0;
    job->tap_unit = sl->unit;
    job->tap_lo = sl->lo;
    job->tap_hi = sl->hi;
}

bool pf_search_tap_absorb(pf_search_t *s, uint64_t id, const pf_search_owner_t *owner,
                          const pf_job_result_t *res)
{
    (void)id;
    const tap_slice_t *sl = &s->tap.slice[owner->slice];
    tp_entry_t *t = &s->tap.tp[sl->tp];
    pf_tap_slice_t both[2] = {t->best[sl->unit], res->tap}, merged;
    int n = both[0].hi > both[0].lo ? 2 : 1; /* the unit's first answer stands alone */
    if (pf_tap_merge(n == 2 ? both : both + 1, n, &merged, NULL, 0) != PF_OK) {
        pf_search_queue_fail(s, PF_ERR, "TAP answers of unit %d do not merge", sl->unit);
        return false;
    }
    t->best[sl->unit] = merged;
    if (--t->tap_left != 0)
        return false;
    degree_over(s, sl->tp);
    return true;
}

void pf_search_tap_clear(pf_search_t *s)
{
    for (int i = 0; i < s->tap.ntp; i++) {
        pf_tp_setting_destroy(&s->tap.tp[i].set);
        free(s->tap.tp[i].plans);
        free(s->tap.tp[i].best);
    }
    free(s->tap.tp);
    pf_tap_units_destroy(&s->tap.units);
    free(s->tap.slice);
}

const pf_search_kind_t pf_search_tap_kinds[] = {
    {PF_JOB_TAP_ENUM, pf_search_tap_describe, pf_search_tap_absorb, "TAP job", NULL},
    {PF_JOB_KIND_COUNT, NULL, NULL, NULL, NULL},
};
