/* search_stagedeg: the per-stage-degree plan beside the uniform one (search_stagedeg.h). */
#include "planner/search/search_stagedeg.h"
#include "planner/search/search_partition.h"
#include "planner/search/search_tap.h"
#include "planner/search/search_queue.h"
#include "planner/map/map_stages_search.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The k-th per-stage DP entry; NULL when there is none. */
static const dp_entry_t *stagedeg_entry(const pf_search_t *s, int k)
{
    for (int i = 0; i < s->part.ndp; i++)
        if (s->part.dp[i].stage_degrees && k-- == 0)
            return &s->part.dp[i];
    return NULL;
}

int pf_search_stagedeg_tp(const pf_search_t *s)
{
    const dp_entry_t *e = stagedeg_entry(s, 0);
    return e ? e->tp : 0;
}

pf_plan_t *pf_search_stagedeg_plan(const pf_search_t *s, int k, char *why, size_t whylen)
{
    const dp_entry_t *e = stagedeg_entry(s, k);
    char err[256];
    if (!e)
        return NULL;
    if (e->status != PF_OK || !e->plan) {
        if (!why[0]) /* the first entry's reason stands for both */
            snprintf(why, whylen, "%s", e->error[0] ? e->error : "the per-stage DP made no plan");
        return NULL;
    }
    pf_plan_t *p = pf_plan_clone(e->plan);
    if (!p)
        return NULL;
    pf_plan_set_names(p, pf_graph_name(s->g), pf_cluster_name(s->c));
    p->train = s->tap.tp[e->tp].opts.train; /* what its DP and SIMULATE jobs trained under */
    p->train.schedule = PF_SCHEDULE_1F1B; /* the order stagedeg.h prices */
    snprintf(p->schedule, sizeof p->schedule, "%s", pf_training_schedule_name(PF_SCHEDULE_1F1B));
    pf_map_stages_search_opts_t mo;
    pf_map_stages_search_opts_init(&mo);
    /* it runs on the broker's loop, between heartbeats: a tenth of the swaps' default work
     * (about 0.3 s at 2,048 GPUs), deterministic like every cap of it */
    mo.max_evals = PF_MAP_STAGES_SEARCH_EVALS / 10;
    /* the graph of the entry's setting prices every stage; a stage at another t is priced at
     * the entry's T there (the placement's objective only ranks placements) */
    if (pf_map_stages_search_plan(pf_search_tap_graph(s, e->tp), s->c, p, &mo, NULL, err,
                                  sizeof err) != PF_OK) {
        snprintf(why, whylen, "mapping: %s", err);
        pf_plan_destroy(&p);
    }
    return p;
}

static double per_sample(const pf_search_t *s, const pf_plan_t *p, double step_ms)
{
    return step_ms / pf_search_partition_samples_per_step(s, p);
}

/* The per-stage plan to weigh: the fastest per sample of those that fit, else the first made
 * (to report); -1 none. */
static int best_stagedeg(const pf_search_t *s)
{
    int best = -1;
    for (int k = 2; k < 2 + PF_SEARCH_STAGEDEG_PLANS; k++) {
        const pf_plan_t *q = s->sim.base_plan[k];
        if (!q || !isfinite(s->sim.base_ms[k]))
            continue;
        if (best < 0 || (s->sim.base_fits[k] && !s->sim.base_fits[best]) ||
            (s->sim.base_fits[k] == s->sim.base_fits[best] &&
             per_sample(s, q, s->sim.base_ms[k]) <
                 per_sample(s, s->sim.base_plan[best], s->sim.base_ms[best])))
            best = k;
    }
    return best;
}

void pf_search_stagedeg_choose(pf_search_t *s, pf_plan_t **p, const char *why)
{
    if (!s->o.stage_degrees)
        return;
    int k = best_stagedeg(s);
    pf_plan_t *deg = k >= 0 ? s->sim.base_plan[k] : NULL;
    double mine = per_sample(s, *p, (*p)->simulated_step_ms);
    double theirs = deg ? per_sample(s, deg, s->sim.base_ms[k]) : NAN;
    char note[160] = "";
    if (!deg)
        snprintf(note, sizeof note, "%s", why && *why ? why : "no per-stage plan");
    else if (!s->sim.base_fits[k])
        snprintf(note, sizeof note, "the per-stage plan does not fit memory under 1F1B");
    bool take = deg && s->sim.base_fits[k] && theirs < mine;
    if (take) { /* the uniform plan's baselines belong to it: the per-stage plan has none */
        pf_plan_t *won = pf_plan_clone(deg);
        if (won) {
            won->simulated_step_ms = s->sim.base_ms[k];
            pf_plan_destroy(p);
            *p = won;
        } else {
            take = false;
        }
    }
    (*p)->stagedeg.present = 1;
    (*p)->stagedeg.chosen = take;
    (*p)->stagedeg.uniform_ms_per_sample = mine;
    (*p)->stagedeg.stagedeg_ms_per_sample = theirs;
    snprintf((*p)->stagedeg.why, sizeof (*p)->stagedeg.why, "%s", note);
    (*p)->stagedeg.stagedeg_step_ms = deg ? s->sim.base_ms[k] : NAN;
    if (deg)
        pf_plan_degrees_describe(deg, (*p)->stagedeg.degrees, sizeof (*p)->stagedeg.degrees);
}

bool pf_search_stagedeg_alone(pf_search_t *s)
{
    int n = 0;
    for (int k = 0; k < PF_SEARCH_STAGEDEG_PLANS; k++) {
        pf_plan_t *p = pf_search_stagedeg_plan(s, k, s->sim.stagedeg_why,
                                               sizeof s->sim.stagedeg_why);
        s->sim.base_plan[2 + k] = p;
        s->sim.base_ms[2 + k] = NAN;
        if (!p)
            continue;
        pf_search_owner_t owner = {.sim = {.cand = 0, .schedule = PF_SCHEDULE_1F1B,
                                            .baseline = 3 + k,
                                            .variant = PF_SEARCH_AS_RANKED}};
        if (!pf_search_queue_job(s, PF_JOB_SIMULATE, owner)) {
            pf_search_queue_fail(s, PF_ERR, "out of memory");
            return true;
        }
        s->sim.base_left++;
        n++;
    }
    if (n > 0) {
        s->sim.stagedeg_alone = true;
        s->phase = PF_PHASE_SIMULATE;
    }
    return n > 0;
}

/* The fastest per-stage plan that fits becomes the answer (no uniform plan fits); the search
 * fails when none does. */
void pf_search_stagedeg_finish_alone(pf_search_t *s)
{
    int k = best_stagedeg(s);
    if (k < 0 || !s->sim.base_fits[k]) {
        pf_search_queue_fail(s, PF_EINFEASIBLE, "no uniform partition fits, and the per-stage "
                             "plan%s does not fit memory under 1F1B%s%s",
                             k < 0 ? "" : " simulated", k < 0 && s->sim.stagedeg_why[0] ? ": " : "",
                             k < 0 ? s->sim.stagedeg_why : "");
        return;
    }
    pf_plan_t *p = pf_plan_clone(s->sim.base_plan[k]);
    if (!p) {
        pf_search_queue_fail(s, PF_ERR, "out of memory");
        return;
    }
    p->simulated_step_ms = s->sim.base_ms[k];
    p->stagedeg.present = 1;
    p->stagedeg.chosen = 1;
    p->stagedeg.uniform_ms_per_sample = NAN;
    p->stagedeg.stagedeg_ms_per_sample = per_sample(s, p, s->sim.base_ms[k]);
    p->stagedeg.stagedeg_step_ms = s->sim.base_ms[k];
    snprintf(p->stagedeg.why, sizeof p->stagedeg.why, "no uniform partition fits memory");
    pf_plan_degrees_describe(p, p->stagedeg.degrees, sizeof p->stagedeg.degrees);
    p->search.present = 1;
    p->search.jobs = s->njobs;
    s->result = p;
    s->phase = PF_PHASE_DONE;
    s->status = PF_OK;
}
