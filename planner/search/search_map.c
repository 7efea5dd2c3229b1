/* search_map: the map phase of the search (search.h "map"): per candidate one binary search over
 * the mapping target (Liu et al., "Parmesan", Algorithm 1; target_search.h, policy STREAM) per
 * instantiation, each answer of a MAP_PROBE job (Algorithm 2) moving its bounds at once. With
 * auto_inst, m and ar first (skipping one whose variable term is identically zero), then one
 * more search under full from the better of their mappings. When the last search is over,
 * search.c starts phase 4. */
#include "planner/search/search_map.h"
#include "planner/search/search_partition.h"
#include "planner/search/search_tap.h"
#include "planner/search/search_queue.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int nreplicas(const candidate_t *cd)
{
    return pf_stage_graph_stages(cd->sg) * pf_stage_graph_replicas(cd->sg);
}

/* A new binary search of candidate cand under inst over [lo, hi], dev its mapping of
 * objective hi. */
static int add_task_at(pf_search_t *s, int cand, pf_map_inst_t inst, double lo, double hi,
                       const int *dev)
{
    map_phase_t *mp = &s->map;
    candidate_t *cd = &mp->cand[cand];
    map_task_t *t = &mp->task[mp->ntask];
    pf_target_search_opts_t o = {PF_TARGET_SEARCH_STREAM, s->o.probes_in_flight, s->o.rel_eps,
                                 s->o.probe_timeouts};
    memset(t, 0, sizeof *t);
    t->cand = cand;
    t->inst = inst;
    t->init_lo = lo;
    t->init_hi = hi;
    if (!(t->ts = pf_target_search_new(&o, lo, hi, dev, nreplicas(cd))))
        return PF_ERR;
    cd->task[cd->ntasks++] = mp->ntask;
    mp->ntask++;
    mp->tasks_left++;
    return PF_OK;
}

/* A search under inst from the initial interval of Algorithm 1 (pf_mapping_bounds). */
static int add_task(pf_search_t *s, int cand, pf_map_inst_t inst)
{
    candidate_t *cd = &s->map.cand[cand];
    char err[256];
    double lo, hi;
    int *dev = malloc((size_t)nreplicas(cd) * sizeof *dev);
    if (!dev)
        return PF_ERR;
    int rc =
        pf_mapping_bounds(cd->sg, cd->cluster, inst, s->o.seed, &lo, &hi, dev, err, sizeof err);
    if (rc == PF_OK)
        rc = add_task_at(s, cand, inst, lo, hi, dev);
    free(dev);
    return rc;
}

static bool task_done(pf_search_t *s, int k);

/* Withdrawn probes are cancelled. */
static void cancel_withdrawn(pf_search_t *s, map_task_t *t)
{
    uint64_t ids[PF_SEARCH_MAX_IN_FLIGHT];
    int n;
    while ((n = pf_target_search_take_withdrawn(t->ts, ids, PF_SEARCH_MAX_IN_FLIGHT)) > 0)
        for (int i = 0; i < n; i++)
            pf_search_queue_cancel(s, ids[i]);
}

/* After the bounds moved (or were set): done, or keep W probes in flight. true when that ended
 * the last search. */
static bool advance(pf_search_t *s, int k)
{
    map_task_t *t = &s->map.task[k];
    double target;
    cancel_withdrawn(s, t);
    while (pf_target_search_propose(t->ts, &target)) {
        uint64_t id = pf_search_queue_job(s, PF_JOB_MAP_PROBE,
                                          (pf_search_owner_t){.probe = {k, target}});
        if (!id) {
            pf_search_queue_fail(s, PF_ERR, "out of memory");
            return false;
        }
        pf_target_search_sent(t->ts, id);
    }
    cancel_withdrawn(s, t);
    return pf_target_search_done(t->ts) && task_done(s, k);
}

/* auto: once the m and ar searches of a candidate are over, search under full from the better of
 * their mappings (each ignores one term, so its optimum can be poor under full). */
static int add_full_task(pf_search_t *s, int cand)
{
    candidate_t *cd = &s->map.cand[cand];
    const map_task_t *a = &s->map.task[cd->task[0]], *b = &s->map.task[cd->task[1]];
    int nx = nreplicas(cd), index = s->map.ntask, rc;
    double lo, hi;
    char err[256];
    int *dev = malloc((size_t)nx * sizeof *dev);
    if (!dev)
        return PF_ERR;
    rc = pf_mapping_bounds(cd->sg, cd->cluster, PF_MAP_INST_FULL, s->o.seed, &lo, &hi, dev, err,
                           sizeof err);
    const int *da = pf_target_search_best(a->ts), *db = pf_target_search_best(b->ts);
    double fa = pf_mapping_objective_ms(cd->sg, cd->cluster, PF_MAP_INST_FULL, da);
    double fb = pf_mapping_objective_ms(cd->sg, cd->cluster, PF_MAP_INST_FULL, db);
    if (rc == PF_OK && fmin(fa, fb) < hi) {
        hi = fmin(fa, fb);
        memcpy(dev, fa <= fb ? da : db, (size_t)nx * sizeof *dev);
    }
    /* full >= m and full >= ar for every mapping: their lower bounds bound it too */
    lo = fmin(hi, fmax(lo, fmax(pf_target_search_lower_ms(a->ts),
                                pf_target_search_lower_ms(b->ts))));
    if (rc == PF_OK)
        rc = add_task_at(s, cand, PF_MAP_INST_FULL, lo, hi, dev);
    free(dev);
    if (rc == PF_OK)
        advance(s, index); /* never the last search: the one that started it is not over yet */
    return rc;
}

/* Search k is over; with auto_inst, a candidate's m and ar searches start its full one. true
 * when k was the last search. */
static bool task_done(pf_search_t *s, int k)
{
    map_task_t *t = &s->map.task[k];
    if (t->done)
        return false;
    t->done = true;
    candidate_t *cd = &s->map.cand[t->cand];
    if (s->o.auto_inst && t->inst != PF_MAP_INST_FULL && cd->ntasks == 2 &&
        s->map.task[cd->task[0]].done && s->map.task[cd->task[1]].done &&
        add_full_task(s, t->cand) != PF_OK)
        pf_search_queue_fail(s, PF_ERR, "out of memory");
    return --s->map.tasks_left == 0;
}

/* The first searches of candidate c: the instantiation asked for, or with auto_inst m and ar,
 * skipping one whose variable term is identically zero (it cannot tell mappings apart: m when
 * S = 1, ar when R = 1). */
static int add_first_tasks(pf_search_t *s, int c)
{
    const candidate_t *cd = &s->map.cand[c];
    int S = pf_stage_graph_stages(cd->sg), R = pf_stage_graph_replicas(cd->sg), rc = PF_OK;
    if (!s->o.auto_inst)
        return add_task(s, c, s->o.inst);
    pf_map_inst_t first = pf_map_inst_auto(cd->sg);
    pf_map_inst_t both[2] = {first, first == PF_MAP_INST_M ? PF_MAP_INST_AR : PF_MAP_INST_M};
    for (int k = 0; k < 2 && rc == PF_OK; k++) {
        if ((both[k] == PF_MAP_INST_M && S == 1) || (both[k] == PF_MAP_INST_AR && R == 1))
            continue;
        rc = add_task(s, c, both[k]);
    }
    return rc;
}

/* The candidates' stage graphs, on the group cluster of their T. */
static int add_candidates(pf_search_t *s, const int *dp, int n)
{
    map_phase_t *mp = &s->map;
    mp->cand = calloc((size_t)s->o.candidates, sizeof *mp->cand);
    mp->task = calloc((size_t)s->o.candidates * 3, sizeof *mp->task);
    if (!mp->cand || !mp->task)
        return PF_ERR;
    for (int c = 0; c < n; c++) {
        const dp_entry_t *e = &s->part.dp[dp[c]];
        mp->cand[c].dp = dp[c];
        mp->cand[c].cluster = pf_search_tap_cluster(s, e->tp);
        const pf_graph_t *tg = pf_search_tap_graph(s, e->tp);
        mp->cand[c].sg = pf_stage_graph_from_plan(tg, e->plan);
        if (!mp->cand[c].sg ||
            pf_stage_graph_price_kinds(mp->cand[c].sg, tg, e->plan, mp->cand[c].cluster) != PF_OK)
            return PF_ERR;
        mp->ncand = c + 1;
    }
    return PF_OK;
}

bool pf_search_map_start(pf_search_t *s, const int *dp, int n)
{
    map_phase_t *mp = &s->map;
    if (add_candidates(s, dp, n) != PF_OK) {
        pf_search_queue_fail(s, PF_ERR, "out of memory");
        return false;
    }
    s->phase = PF_PHASE_MAP;
    for (int c = 0; c < n; c++) {
        int rc = add_first_tasks(s, c);
        if (rc != PF_OK) {
            pf_search_queue_fail(s, rc, "%s",
                                 rc == PF_ERR ? "out of memory" : "mapping bounds failed");
            return false;
        }
    }
    /* tasks_left counts one extra until every first search is launched, so that a candidate
     * whose bounds meet at once cannot finish the whole search early */
    mp->tasks_left++;
    int first = mp->ntask;
    for (int k = 0; k < first && !pf_search_queue_stopped(s); k++)
        advance(s, k);
    return --mp->tasks_left == 0 && !pf_search_queue_stopped(s);
}

int pf_search_map_best(const pf_search_t *s, int c, double *full_ms)
{
    const candidate_t *cd = &s->map.cand[c];
    int chosen = -1, dev0 = 0;
    double chosen_full = INFINITY;
    for (int k = 0; k < cd->ntasks; k++) {
        const map_task_t *t = &s->map.task[cd->task[k]];
        double full = pf_mapping_objective_ms(cd->sg, cd->cluster, PF_MAP_INST_FULL,
                                              pf_target_search_best(t->ts));
        if (full < chosen_full) {
            chosen_full = full;
            chosen = cd->task[k];
        }
    }
    if (chosen < 0)
        chosen_full = pf_mapping_objective_ms(cd->sg, cd->cluster, PF_MAP_INST_FULL, &dev0);
    *full_ms = chosen_full;
    return chosen;
}

const int *pf_search_map_stats(const pf_search_t *s, int c, int k, pf_mapping_stats_t *st)
{
    const candidate_t *cd = &s->map.cand[c];
    memset(st, 0, sizeof *st);
    if (k < 0)
        return NULL;
    const map_task_t *t = &s->map.task[k];
    st->objective_ms = pf_target_search_upper_ms(t->ts);
    st->lower_ms = pf_target_search_lower_ms(t->ts);
    st->initial_lower_ms = t->init_lo;
    st->initial_upper_ms = t->init_hi;
    for (int i = 0; i < cd->ntasks; i++) { /* work of all the candidate's searches */
        const map_task_t *x = &s->map.task[cd->task[i]];
        st->probes += x->probes;
        st->probes_timed_out += pf_target_search_timeouts(x->ts);
        st->symmetric_pruned += x->sym_pruned;
        st->seconds += x->seconds;
    }
    return pf_target_search_best(t->ts);
}

/* Each candidate's best mapping so far under "full", candidates ranked by the analytic step
 * estimate per sample (so different R compare fairly). */
int pf_search_map_leading(const pf_search_t *s, double *full_ms)
{
    int best_c = -1, dev0 = 0;
    double best_per_sample = INFINITY;
    for (int c = 0; c < s->map.ncand; c++) {
        const candidate_t *cd = &s->map.cand[c];
        const pf_plan_t *p = s->part.dp[cd->dp].plan;
        double full;
        int chosen = pf_search_map_best(s, c, &full);
        const int *dev = chosen >= 0 ? pf_target_search_best(s->map.task[chosen].ts) : &dev0;
        double step = pf_mapping_step_estimate_ms(cd->sg, cd->cluster, dev, p->microbatches);
        double per_sample = step / pf_search_partition_samples_per_step(s, p);
        if (per_sample < best_per_sample) {
            best_per_sample = per_sample;
            best_c = c;
            *full_ms = full;
        }
    }
    return best_c;
}

void pf_search_map_describe(const pf_search_t *s, const pf_search_owner_t *owner, pf_job_t *job)
{
    const map_task_t *t = &s->map.task[owner->probe.task];
    const candidate_t *cd = &s->map.cand[t->cand];
    job->graph = NULL; /* a probe needs the cluster and its stage graph only */
    job->setting = s->tap.tp[s->part.dp[cd->dp].tp].opts;
    job->stage_graph = cd->sg;
    job->inst = t->inst;
    job->target_ms = owner->probe.target_ms;
    job->budget_s = s->o.probe_seconds;
    job->symmetry = s->o.symmetry;
}

/* A found mapping was checked by pf_search_check_answer. */
bool pf_search_map_absorb(pf_search_t *s, uint64_t id, const pf_search_owner_t *owner,
                          const pf_job_result_t *res)
{
    map_task_t *t = &s->map.task[owner->probe.task];
    pf_target_answer_t a = {res->probe.found       ? PF_TARGET_FOUND
                            : res->probe.timed_out ? PF_TARGET_TIMED_OUT
                                                   : PF_TARGET_NONE,
                            res->probe.objective_ms, res->devices};
    t->probes++;
    t->sym_pruned += res->probe.symmetric_pruned;
    t->seconds += res->seconds;
    pf_target_search_absorb(t->ts, id, &a);
    return advance(s, owner->probe.task);
}

void pf_search_map_clear(pf_search_t *s)
{
    for (int c = 0; c < s->map.ncand; c++)
        pf_stage_graph_destroy(&s->map.cand[c].sg);
    for (int k = 0; k < s->map.ntask; k++)
        pf_target_search_destroy(&s->map.task[k].ts);
    free(s->map.cand);
    free(s->map.task);
}

const pf_search_kind_t pf_search_map_kinds[] = {
    {PF_JOB_MAP_PROBE, pf_search_map_describe, pf_search_map_absorb, "mapping probe", NULL},
    {PF_JOB_KIND_COUNT, NULL, NULL, NULL, NULL},
};
