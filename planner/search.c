#include "planner/search.h"
#include "planner/coarsen.h"
#include "planner/cost.h"
#include "planner/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IN_FLIGHT 64

enum { J_QUEUED, J_OUT, J_ANSWERED, J_CANCELLED };

typedef struct {
    pf_job_kind_t kind;
    int state;
    int owner;        /* DP: dp entry; probe: map task */
    double target_ms; /* probe */
} job_rec_t;

/* Phase 0: one coarsening per (alpha, K), shared by the DP jobs of every S that uses that K. */
typedef struct {
    double alpha;
    int k;
    int *group; /* op -> hyper-op */
    int ngroups;
    double seconds;
} coarse_t;

typedef struct {
    int stages, replicas;
    double alpha;
    int coarse; /* index into coarse[], -1 = the DP runs on atomic ops */
    int status;
    char error[256];
    pf_plan_t *plan;
    double flat_ms_per_sample; /* ranking before mapping */
} dp_entry_t;

typedef struct {
    int cand;
    pf_inst_t inst;
    double lo, hi, init_lo, init_hi;
    int *best_dev;   /* S x R */
    double best_obj; /* under inst */
    uint64_t in_flight[MAX_IN_FLIGHT];
    int nflight;
    int probes, timed_out;
    long long sym_pruned;
    double seconds;
    int done;
} map_task_t;

typedef struct {
    int dp;
    pf_stage_graph_t *sg;
    int task[3], ntasks; /* m and/or ar, then full (auto) */
} candidate_t;

struct pf_search {
    const pf_graph_t *g;
    const pf_cluster_t *c;
    pf_search_opts_t o;
    double flat_gbps;
    int ndev;

    job_rec_t *jobs; /* id = index + 1 */
    long long njobs;
    size_t jobs_cap;
    uint64_t *queue; /* ids waiting to be issued, FIFO */
    long long qhead, qtail;
    size_t qcap;
    uint64_t *cancelled;
    int ncancelled;
    size_t cancelled_cap;
    long long issued, answered, cancelled_total;

    coarse_t *coarse;
    int ncoarse;
    dp_entry_t *dp;
    int ndp, dp_left;
    candidate_t *cand;
    int ncand;
    map_task_t *task;
    int ntask, tasks_left;

    pf_search_phase_t phase;
    int status;
    char error[512];
    pf_plan_t *result;
};

const char *pf_search_phase_name(pf_search_phase_t p)
{
    switch (p) {
    case PF_PHASE_PARTITION: return "partition";
    case PF_PHASE_MAP: return "map";
    case PF_PHASE_DONE: return "done";
    default: return "failed";
    }
}

void pf_search_opts_init(pf_search_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->max_stages = 64;
    o->refine = 1;
    o->alphas[0] = 0.01;
    o->alphas[1] = 1;
    o->alphas[2] = 100;
    o->nalphas = 3;
    o->candidates = 3;
    o->probes_in_flight = 4;
    o->rel_eps = 1e-3;
    o->probe_seconds = 1; /* as `planfarm map`: a timed-out probe only costs optimality proof */
    o->symmetry = PF_MAP_SYM_ALL;
    o->auto_inst = 1;
    o->inst = PF_INST_FULL;
    o->seed = 1;
}

/* ---- bookkeeping ---- */

static uint64_t new_job(pf_search_t *s, pf_job_kind_t kind, int owner, double target_ms)
{
    if (pf_grow((void **)&s->jobs, &s->jobs_cap, (size_t)s->njobs + 1, sizeof *s->jobs))
        return 0;
    if ((size_t)s->qtail == s->qcap) {
        /* compact, then grow (no memmove on the first call: the queue is still NULL) */
        if (s->qhead > 0)
            memmove(s->queue, s->queue + s->qhead,
                    (size_t)(s->qtail - s->qhead) * sizeof *s->queue);
        s->qtail -= s->qhead;
        s->qhead = 0;
        if (pf_grow((void **)&s->queue, &s->qcap, (size_t)s->qtail + 1, sizeof *s->queue))
            return 0;
    }
    s->jobs[s->njobs] = (job_rec_t){kind, J_QUEUED, owner, target_ms};
    uint64_t id = (uint64_t)++s->njobs;
    s->queue[s->qtail++] = id;
    return id;
}

static job_rec_t *job_of(const pf_search_t *s, uint64_t id)
{
    if (id == 0 || id > (uint64_t)s->njobs)
        return NULL;
    return &s->jobs[id - 1];
}

/* An outstanding job is reported for cancellation; a queued one is simply never issued. */
static void cancel_job(pf_search_t *s, uint64_t id)
{
    job_rec_t *j = job_of(s, id);
    if (!j || (j->state != J_OUT && j->state != J_QUEUED))
        return;
    int was_out = j->state == J_OUT;
    j->state = J_CANCELLED;
    s->cancelled_total++;
    if (!was_out)
        return;
    if (pf_grow((void **)&s->cancelled, &s->cancelled_cap, (size_t)s->ncancelled + 1,
                sizeof *s->cancelled))
        return; /* the answer will be ignored anyway */
    s->cancelled[s->ncancelled++] = id;
}

static void fail(pf_search_t *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(pf_search_t *s, int code, const char *fmt, ...)
{
    if (s->phase == PF_PHASE_DONE || s->phase == PF_PHASE_FAILED)
        return;
    s->phase = PF_PHASE_FAILED;
    s->status = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error, sizeof s->error, fmt, ap);
    va_end(ap);
    for (long long i = 0; i < s->njobs; i++)
        cancel_job(s, (uint64_t)i + 1);
}

/* ---- the map phase: binary searches (Alg. 1) ---- */

static int converged(const pf_search_t *s, const map_task_t *t)
{
    return t->hi - t->lo <= s->o.rel_eps * t->hi;
}

/* Keep W probes in flight: each new target is the midpoint of the widest gap between the
 * bounds and the targets already out, so W targets split [t_l, t_r] evenly. */
static int refill(pf_search_t *s, map_task_t *t, int task_index)
{
    int w = s->o.probes_in_flight;
    while (!converged(s, t) && t->nflight < w) {
        double pts[MAX_IN_FLIGHT + 2];
        int n = 0;
        pts[n++] = t->lo;
        for (int i = 0; i < t->nflight; i++)
            pts[n++] = job_of(s, t->in_flight[i])->target_ms;
        pts[n++] = t->hi;
        for (int i = 1; i < n; i++) /* insertion sort: n <= 66 */
            for (int k = i; k > 0 && pts[k] < pts[k - 1]; k--) {
                double x = pts[k];
                pts[k] = pts[k - 1];
                pts[k - 1] = x;
            }
        int widest = 0;
        for (int i = 1; i + 1 < n; i++)
            if (pts[i + 1] - pts[i] > pts[widest + 1] - pts[widest])
                widest = i;
        double target = 0.5 * (pts[widest] + pts[widest + 1]);
        if (!(target > t->lo && target < t->hi))
            break;
        uint64_t id = new_job(s, PF_JOB_MAP_PROBE, task_index, target);
        if (!id)
            return PF_ERR;
        t->in_flight[t->nflight++] = id;
    }
    return PF_OK;
}

static void finish(pf_search_t *s);
static int add_full_task(pf_search_t *s, int cand);

static void task_done(pf_search_t *s, map_task_t *t)
{
    if (t->done)
        return;
    t->done = 1;
    for (int i = 0; i < t->nflight; i++)
        cancel_job(s, t->in_flight[i]);
    t->nflight = 0;
    /* auto: once the m and ar searches of a candidate are over, search under full from the
     * better of their mappings (each ignores one term, so its optimum can be poor under full) */
    candidate_t *cd = &s->cand[t->cand];
    if (s->o.auto_inst && t->inst != PF_INST_FULL && cd->ntasks == 2 &&
        s->task[cd->task[0]].done && s->task[cd->task[1]].done &&
        add_full_task(s, t->cand) != PF_OK)
        fail(s, PF_ERR, "out of memory");
    if (--s->tasks_left == 0)
        finish(s);
}

/* After the bounds moved (or were set): done, or keep W probes in flight. */
static void advance(pf_search_t *s, map_task_t *t, int task_index)
{
    if (converged(s, t))
        task_done(s, t);
    else if (refill(s, t, task_index) != PF_OK)
        fail(s, PF_ERR, "out of memory");
    else if (t->nflight == 0) /* nothing left to probe strictly inside the interval (the
                               * bounds are adjacent doubles): else no job would ever end it */
        task_done(s, t);
}

static void probe_answered(pf_search_t *s, job_rec_t *j, const pf_job_result_t *res)
{
    map_task_t *t = &s->task[j->owner];
    candidate_t *cd = &s->cand[t->cand];
    int nx = pf_stage_graph_stages(cd->sg) * pf_stage_graph_replicas(cd->sg);
    uint64_t id = (uint64_t)(j - s->jobs) + 1;
    for (int i = 0; i < t->nflight; i++)
        if (t->in_flight[i] == id) {
            t->in_flight[i] = t->in_flight[--t->nflight];
            break;
        }
    t->probes++;
    t->sym_pruned += res->probe.symmetric_pruned;
    t->seconds += res->seconds;
    if (res->probe.found) { /* checked by pf_search_check_answer */
        if (res->probe.objective_ms < t->best_obj) {
            t->best_obj = res->probe.objective_ms;
            memcpy(t->best_dev, res->devices, (size_t)nx * sizeof *t->best_dev);
        }
        if (res->probe.objective_ms < t->hi)
            t->hi = res->probe.objective_ms;
    } else {
        t->timed_out += res->probe.timed_out != 0;
        if (j->target_ms > t->lo)
            t->lo = j->target_ms;
    }
    if (t->lo > t->hi) /* only a timed-out probe can claim this; trust the mapping we hold */
        t->lo = t->hi;
    /* probes outside the new interval can no longer move it */
    for (int i = 0; i < t->nflight;) {
        double x = job_of(s, t->in_flight[i])->target_ms;
        if (x <= t->lo || x >= t->hi) {
            cancel_job(s, t->in_flight[i]);
            t->in_flight[i] = t->in_flight[--t->nflight];
        } else {
            i++;
        }
    }
    advance(s, t, j->owner);
}

/* Flat-bandwidth estimate used to rank partitions before they are mapped: the pipeline of
 * DESIGN.md's step estimate with every transfer at B_flat, divided by the samples of a step. */
static double flat_ms_per_sample(const pf_search_t *s, const pf_plan_t *p)
{
    int S = p->stages, R = p->replicas, MB = p->microbatches;
    double ar = 0;
    for (int st = 0; st < S; st++) {
        double params = 0;
        for (int i = 0; i < p->stage_list[st].nops; i++)
            params += pf_graph_op(s->g, p->stage_list[st].ops[i])->param_bytes;
        double t = R > 1 ? pf_bytes_ms(pf_cost_ring_allreduce_bytes(params, R), s->flat_gbps)
                         : 0; /* eq. 7 at B_flat */
        if (t > ar)
            ar = t;
    }
    double step = (MB + S - 1) * p->partition_objective_ms + ar;
    return step / ((double)pf_graph_microbatch(s->g) * MB * R);
}

static int cmp_dp(const void *a, const void *b, void *ctx)
{
    const pf_search_t *s = ctx;
    const dp_entry_t *x = &s->dp[*(const int *)a], *y = &s->dp[*(const int *)b];
    if (x->flat_ms_per_sample != y->flat_ms_per_sample)
        return x->flat_ms_per_sample < y->flat_ms_per_sample ? -1 : 1;
    if (x->stages != y->stages)
        return x->stages - y->stages;
    return x->alpha < y->alpha ? -1 : x->alpha > y->alpha;
}

static int add_task(pf_search_t *s, int cand, pf_inst_t inst)
{
    candidate_t *cd = &s->cand[cand];
    map_task_t *t = &s->task[s->ntask];
    char err[256];
    int nx = pf_stage_graph_stages(cd->sg) * pf_stage_graph_replicas(cd->sg);
    memset(t, 0, sizeof *t);
    t->cand = cand;
    t->inst = inst;
    t->best_dev = malloc((size_t)nx * sizeof *t->best_dev);
    if (!t->best_dev)
        return PF_ERR;
    int rc = pf_map_bounds(cd->sg, s->c, inst, s->o.seed, &t->lo, &t->hi, t->best_dev, err,
                           sizeof err);
    if (rc != PF_OK)
        return rc;
    t->init_lo = t->lo;
    t->init_hi = t->hi;
    t->best_obj = t->hi;
    cd->task[cd->ntasks++] = s->ntask;
    s->ntask++;
    s->tasks_left++;
    return PF_OK;
}

static int add_full_task(pf_search_t *s, int cand)
{
    candidate_t *cd = &s->cand[cand];
    const map_task_t *a = &s->task[cd->task[0]], *b = &s->task[cd->task[1]];
    int nx = pf_stage_graph_stages(cd->sg) * pf_stage_graph_replicas(cd->sg);
    int index = s->ntask, rc = add_task(s, cand, PF_INST_FULL);
    if (rc != PF_OK)
        return rc;
    map_task_t *t = &s->task[index];
    double fa = pf_map_objective_ms(cd->sg, s->c, PF_INST_FULL, a->best_dev);
    double fb = pf_map_objective_ms(cd->sg, s->c, PF_INST_FULL, b->best_dev);
    const map_task_t *seed = fa <= fb ? a : b;
    if (fmin(fa, fb) < t->hi) {
        t->hi = t->best_obj = t->init_hi = fmin(fa, fb);
        memcpy(t->best_dev, seed->best_dev, (size_t)nx * sizeof *t->best_dev);
    }
    /* full >= m and full >= ar for every mapping: their lower bounds bound it too */
    t->lo = t->init_lo = fmin(t->hi, fmax(t->lo, fmax(a->lo, b->lo)));
    advance(s, t, index);
    return PF_OK;
}

static void start_mapping(pf_search_t *s)
{
    int *order = malloc((size_t)s->ndp * sizeof *order), nfeasible = 0, best_infeasible = -1;
    if (!order) {
        fail(s, PF_ERR, "out of memory");
        return;
    }
    for (int i = 0; i < s->ndp; i++) {
        dp_entry_t *e = &s->dp[i];
        if (e->status == PF_OK && e->plan) {
            e->flat_ms_per_sample = flat_ms_per_sample(s, e->plan);
            order[nfeasible++] = i;
        } else if (e->status == PF_EINFEASIBLE) {
            if (best_infeasible < 0 || e->stages > s->dp[best_infeasible].stages)
                best_infeasible = i;
        } else {
            fail(s, e->status, "%s", e->error);
            free(order);
            return;
        }
    }
    if (nfeasible == 0) {
        /* the deepest pipeline spreads memory the most: its message is the one to show */
        fail(s, PF_EINFEASIBLE, "%s", best_infeasible >= 0 ? s->dp[best_infeasible].error : "");
        free(order);
        return;
    }
    qsort_r(order, (size_t)nfeasible, sizeof *order, cmp_dp, s);
    /* one candidate per S: its best alpha */
    int want = s->o.candidates, n = 0;
    s->cand = calloc((size_t)want, sizeof *s->cand);
    s->task = calloc((size_t)want * 3, sizeof *s->task);
    if (!s->cand || !s->task) {
        free(order);
        fail(s, PF_ERR, "out of memory");
        return;
    }
    for (int k = 0; k < nfeasible && n < want; k++) {
        int dup = 0;
        for (int c = 0; c < n; c++)
            dup |= s->dp[s->cand[c].dp].stages == s->dp[order[k]].stages;
        if (dup)
            continue;
        s->cand[n].dp = order[k];
        s->cand[n].sg = pf_stage_graph_from_plan(s->g, s->dp[order[k]].plan);
        if (!s->cand[n].sg) {
            free(order);
            fail(s, PF_ERR, "out of memory");
            return;
        }
        n++;
    }
    free(order);
    s->ncand = n;
    s->phase = PF_PHASE_MAP;
    for (int c = 0; c < n; c++) {
        candidate_t *cd = &s->cand[c];
        int S = pf_stage_graph_stages(cd->sg), R = pf_stage_graph_replicas(cd->sg);
        int rc = PF_OK;
        if (!s->o.auto_inst) {
            rc = add_task(s, c, s->o.inst);
        } else {
            /* A search under an instantiation whose variable term is identically zero cannot
             * tell mappings apart: skip it (m when S = 1, ar when R = 1). */
            pf_inst_t first = pf_map_auto_instantiation(cd->sg);
            pf_inst_t second = first == PF_INST_M ? PF_INST_AR : PF_INST_M;
            pf_inst_t both[2] = {first, second};
            for (int k = 0; k < 2 && rc == PF_OK; k++) {
                if ((both[k] == PF_INST_M && S == 1) || (both[k] == PF_INST_AR && R == 1))
                    continue;
                rc = add_task(s, c, both[k]);
            }
        }
        if (rc != PF_OK) {
            fail(s, rc, "%s", rc == PF_ERR ? "out of memory" : "mapping bounds failed");
            return;
        }
    }
    /* tasks_left counts one extra until every first search is launched, so that a candidate
     * whose bounds meet at once cannot finish the whole search early */
    s->tasks_left++;
    int first = s->ntask;
    for (int k = 0; k < first && !pf_search_done(s); k++) {
        advance(s, &s->task[k], k);
    }
    if (--s->tasks_left == 0 && !pf_search_done(s))
        finish(s);
}

/* The candidate a plan would come from now: each candidate's best mapping so far under "full",
 * candidates ranked by estimated step time per sample (so different R compare fairly).
 * *task = -1 when the winner had nothing to map (S = R = 1). Returns -1 without candidates. */
static int leading_candidate(const pf_search_t *s, int *task, double *full_ms)
{
    int best_c = -1;
    double best_per_sample = INFINITY;
    for (int c = 0; c < s->ncand; c++) {
        const candidate_t *cd = &s->cand[c];
        const pf_plan_t *p = s->dp[cd->dp].plan;
        int chosen = -1, dev0 = 0;
        double chosen_full = INFINITY;
        for (int k = 0; k < cd->ntasks; k++) {
            const map_task_t *t = &s->task[cd->task[k]];
            double full = pf_map_objective_ms(cd->sg, s->c, PF_INST_FULL, t->best_dev);
            if (full < chosen_full) {
                chosen_full = full;
                chosen = cd->task[k];
            }
        }
        const int *dev = chosen >= 0 ? s->task[chosen].best_dev : &dev0;
        if (chosen < 0)
            chosen_full = pf_map_objective_ms(cd->sg, s->c, PF_INST_FULL, dev);
        double step = pf_map_step_estimate_ms(cd->sg, s->c, dev, p->microbatches);
        double per_sample = step / ((double)pf_graph_microbatch(s->g) * p->microbatches *
                                    p->replicas);
        if (per_sample < best_per_sample) {
            best_per_sample = per_sample;
            best_c = c;
            *task = chosen;
            *full_ms = chosen_full;
        }
    }
    return best_c;
}

static void finish(pf_search_t *s)
{
    int best_t = -1, *cs_dev = NULL;
    double full_ms;
    int best_c = leading_candidate(s, &best_t, &full_ms);
    if (best_c < 0) {
        fail(s, PF_ERR, "no candidate survived mapping");
        return;
    }
    candidate_t *cd = &s->cand[best_c];
    pf_plan_t *p = pf_plan_clone(s->dp[cd->dp].plan);
    int S = pf_stage_graph_stages(cd->sg), R = pf_stage_graph_replicas(cd->sg);
    cs_dev = malloc((size_t)S * R * sizeof *cs_dev);
    if (!p || !cs_dev) {
        pf_plan_destroy(&p);
        free(cs_dev);
        fail(s, PF_ERR, "out of memory");
        return;
    }
    const int *dev = cs_dev;
    pf_map_stats_t st = {0}, *stp = NULL;
    pf_inst_t used = PF_INST_FULL;
    if (best_t >= 0) {
        const map_task_t *t = &s->task[best_t];
        dev = t->best_dev;
        used = t->inst;
        stp = &st;
        st.objective_ms = t->best_obj;
        st.lower_ms = t->lo;
        st.initial_lower_ms = t->init_lo;
        st.initial_upper_ms = t->init_hi;
        for (int k = 0; k < cd->ntasks; k++) { /* work of all the candidate's searches */
            const map_task_t *x = &s->task[cd->task[k]];
            st.probes += x->probes;
            st.probes_timed_out += x->timed_out;
            st.symmetric_pruned += x->sym_pruned;
            st.seconds += x->seconds;
        }
    } else {
        pf_map_cs(cd->sg, cs_dev);
    }
    if (pf_map_fill_plan(p, cd->sg, s->c, dev, used, stp) != PF_OK) {
        pf_plan_destroy(&p);
        free(cs_dev);
        fail(s, PF_ERR, "out of memory");
        return;
    }
    if (s->dp[cd->dp].coarse >= 0)
        p->partition_search.coarsen_s = s->coarse[s->dp[cd->dp].coarse].seconds;
    p->search.present = 1;
    p->search.jobs = s->njobs;
    free(cs_dev);
    s->result = p;
    s->phase = PF_PHASE_DONE;
    s->status = PF_OK;
}

/* ---- coarsening, done in pf_search_new ---- */

/* The grouping for (alpha, K), computed on first use. -1 = no coarsening (K >= ops). */
static int coarse_for(pf_search_t *s, const pf_cost_model_t *cm, double alpha, int k, char *err,
                      size_t errlen, int *rc)
{
    int n = pf_graph_nops(s->g);
    *rc = PF_OK;
    if (k >= n)
        return -1;
    for (int i = 0; i < s->ncoarse; i++)
        if (s->coarse[i].alpha == alpha && s->coarse[i].k == k)
            return i;
    coarse_t *c = &s->coarse[s->ncoarse];
    memset(c, 0, sizeof *c);
    c->alpha = alpha;
    c->k = k;
    c->group = malloc((size_t)n * sizeof *c->group);
    if (!c->group) {
        *rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        return -1;
    }
    pf_coarsen_opts_t co = {.k = k, .alpha = alpha};
    double t0 = pf_now_s();
    *rc = pf_coarsen_run(s->g, cm, &co, c->group, &c->ngroups, err, errlen);
    c->seconds = pf_now_s() - t0;
    if (*rc != PF_OK) {
        free(c->group);
        return -1;
    }
    return s->ncoarse++;
}

/* ---- public ---- */

/* The options with their defaults filled in. */
static pf_search_opts_t resolved(const pf_search_opts_t *opts)
{
    pf_search_opts_t o = *opts;
    if (o.microbatches <= 0)
        o.microbatches = PF_DEFAULT_MICROBATCHES;
    return o;
}

/* The stage counts S to partition for (S x R = D, or the one the options fix; S <= ops, S <=
 * coarsen_k hyper-ops): up to 64 into list; returns how many. */
static int stage_counts(const pf_search_opts_t *o, int D, int n, int *list)
{
    int nst = 0;
    if (o->stages) {
        list[nst++] = o->stages;
    } else if (o->replicas) {
        list[nst++] = D / o->replicas;
    } else {
        int most = o->coarsen_k > 0 && o->coarsen_k < n ? o->coarsen_k : n; /* stages need ops */
        for (int S = 1; S <= D && S <= most && S <= o->max_stages && nst < 64; S++)
            if (D % S == 0)
                list[nst++] = S;
    }
    return nst;
}

int pf_search_validate(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *opts,
                       char *err, size_t errlen)
{
    pf_search_opts_t o = resolved(opts);
    int D = pf_cluster_ndevices(c), stages_list[64];
    if (o.stages < 0 || o.replicas < 0 || o.stages > D || o.replicas > D)
        return pf_fail(err, errlen, PF_EINPUT, "stages / replicas: must lie in [1, %d]", D);
    if (o.stages && o.replicas && (long long)o.stages * o.replicas > D)
        return pf_fail(err, errlen, PF_EINPUT, "stages x replicas: %d exceeds %d devices",
                       o.stages * o.replicas, D);
    if (o.coarsen_k > 0 && o.stages > o.coarsen_k)
        return pf_fail(err, errlen, PF_EINPUT,
                       "coarsen_k: K = %d hyper-ops cannot make %d stages (K must be >= S)",
                       o.coarsen_k, o.stages);
    if (o.nalphas <= 0 || o.nalphas > PF_SEARCH_MAX_ALPHAS || o.candidates <= 0 ||
        o.probes_in_flight <= 0 || o.probes_in_flight > MAX_IN_FLIGHT || !(o.rel_eps > 0))
        return pf_fail(err, errlen, PF_EINPUT,
                       "search options: need 1-%d alphas, candidates >= 1, 1-%d probes in "
                       "flight, rel_eps > 0",
                       PF_SEARCH_MAX_ALPHAS, MAX_IN_FLIGHT);
    int nst = stage_counts(&o, D, pf_graph_nops(g), stages_list);
    if (nst == 0 || stages_list[0] < 1)
        return pf_fail(err, errlen, PF_EINPUT, "no (stages, replicas) fits %d devices", D);

    /* An op that cannot fit alone makes every partition infeasible: say so before any job. */
    pf_cost_model_t cm;
    pf_cost_model_init(&cm, c, 1, o.microbatches, o.flat_gbps);
    return pf_cost_check_ops_fit(g, &cm, err, errlen);
}

pf_search_t *pf_search_new(const pf_graph_t *g, const pf_cluster_t *c,
                           const pf_search_opts_t *opts, char *err, size_t errlen)
{
    pf_search_opts_t o = resolved(opts);
    int D = pf_cluster_ndevices(c), n = pf_graph_nops(g), rc, stages_list[64];
    if (pf_search_validate(g, c, opts, err, errlen) != PF_OK)
        return NULL;
    pf_cost_model_t cm;
    pf_cost_model_init(&cm, c, 1, o.microbatches, o.flat_gbps);
    pf_search_t *s = calloc(1, sizeof *s);
    if (!s) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    s->g = g;
    s->c = c;
    s->o = o;
    s->ndev = D;
    s->flat_gbps = cm.flat_gbps;
    s->phase = PF_PHASE_PARTITION;
    int nst = stage_counts(&o, D, n, stages_list);
    s->dp = calloc((size_t)nst * o.nalphas, sizeof *s->dp);
    s->coarse = calloc((size_t)nst * o.nalphas, sizeof *s->coarse);
    if (!s->dp || !s->coarse) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    for (int i = 0; i < nst; i++) {
        int S = stages_list[i];
        int k = o.coarsen_k > 0   ? o.coarsen_k
                : o.coarsen_k < 0 ? n
                                  : pf_partition_default_k(g, S, o.max_downsets);
        /* alpha only shapes the coarsening: without one, a single DP job per S */
        int nalphas = k < n ? o.nalphas : 1;
        for (int a = 0; a < nalphas; a++) {
            dp_entry_t *e = &s->dp[s->ndp];
            e->stages = S;
            e->replicas = o.replicas ? o.replicas : D / S;
            e->alpha = o.alphas[a];
            e->coarse = coarse_for(s, &cm, e->alpha, k, err, errlen, &rc);
            if (rc != PF_OK)
                goto fail;
            if (!new_job(s, PF_JOB_DP_PARTITION, s->ndp, 0)) {
                rc = pf_fail(err, errlen, PF_ERR, "out of memory");
                goto fail;
            }
            s->ndp++;
        }
    }
    s->dp_left = s->ndp;
    return s;
fail:
    pf_search_destroy(&s);
    return NULL;
}

void pf_search_destroy(pf_search_t **sp)
{
    if (!sp || !*sp)
        return;
    pf_search_t *s = *sp;
    for (int i = 0; i < s->ndp; i++)
        pf_plan_destroy(&s->dp[i].plan);
    for (int c = 0; c < s->ncand; c++)
        pf_stage_graph_destroy(&s->cand[c].sg);
    for (int k = 0; k < s->ntask; k++)
        free(s->task[k].best_dev);
    for (int i = 0; i < s->ncoarse; i++)
        free(s->coarse[i].group);
    free(s->coarse);
    free(s->dp);
    free(s->cand);
    free(s->task);
    free(s->jobs);
    free(s->queue);
    free(s->cancelled);
    pf_plan_destroy(&s->result);
    free(s);
    *sp = NULL;
}

int pf_search_job(const pf_search_t *s, uint64_t id, pf_job_t *job)
{
    const job_rec_t *j = job_of(s, id);
    if (!j || (j->state != J_OUT && j->state != J_QUEUED))
        return 0;
    pf_job_init(job, j->kind);
    job->cluster = s->c;
    if (j->kind == PF_JOB_DP_PARTITION) {
        const dp_entry_t *e = &s->dp[j->owner];
        job->graph = s->g;
        pf_partition_opts_init(&job->partition);
        job->partition.stages = e->stages;
        job->partition.replicas = e->replicas;
        job->partition.microbatches = s->o.microbatches;
        job->partition.flat_gbps = s->o.flat_gbps;
        job->partition.coarsen_k = s->o.coarsen_k;
        job->partition.alpha = e->alpha;
        if (e->coarse >= 0) {
            job->partition.group = s->coarse[e->coarse].group;
            job->partition.ngroups = s->coarse[e->coarse].ngroups;
        }
        job->partition.refine = s->o.refine;
        if (s->o.max_downsets > 0)
            job->partition.max_downsets = s->o.max_downsets;
    } else {
        const map_task_t *t = &s->task[j->owner];
        job->stage_graph = s->cand[t->cand].sg;
        job->inst = t->inst;
        job->target_ms = j->target_ms;
        job->budget_s = s->o.probe_seconds;
        job->symmetry = s->o.symmetry;
    }
    return 1;
}

int pf_search_next_job(pf_search_t *s, uint64_t *id, pf_job_t *job)
{
    while (s->qhead < s->qtail) {
        uint64_t next = s->queue[s->qhead++];
        job_rec_t *j = job_of(s, next);
        if (!j || j->state != J_QUEUED)
            continue; /* cancelled before it went out */
        j->state = J_OUT;
        s->issued++;
        *id = next;
        return pf_search_job(s, next, job);
    }
    return 0;
}

int pf_search_check_answer(const pf_search_t *s, uint64_t id, const pf_job_result_t *res,
                           char *err, size_t errlen)
{
    pf_job_t job;
    if (!job_of(s, id))
        return pf_fail(err, errlen, PF_EINPUT, "job %llu is not one of this search's",
                       (unsigned long long)id);
    if (!pf_search_job(s, id, &job))
        return pf_fail(err, errlen, PF_EINPUT, "job %llu is no longer wanted",
                       (unsigned long long)id);
    return pf_job_check_answer(&job, res, err, errlen);
}

int pf_search_answer(pf_search_t *s, uint64_t id, const pf_job_result_t *res)
{
    job_rec_t *j = job_of(s, id);
    if (!j || j->state != J_OUT || !res || res->kind != j->kind)
        return 0;
    if (s->phase == PF_PHASE_DONE || s->phase == PF_PHASE_FAILED)
        return 0;
    if (pf_search_check_answer(s, id, res, NULL, 0) != PF_OK)
        return 0; /* not an answer: the job stays outstanding for the driver to send again */
    j->state = J_ANSWERED;
    s->answered++;
    if (j->kind == PF_JOB_DP_PARTITION) {
        dp_entry_t *e = &s->dp[j->owner];
        e->status = res->status;
        snprintf(e->error, sizeof e->error, "%s", res->error);
        if (res->status == PF_OK) {
            e->plan = res->plan ? pf_plan_clone(res->plan) : NULL;
            if (!e->plan) {
                fail(s, PF_ERR, "%s", res->plan ? "out of memory" : "partition job sent no plan");
                return 1;
            }
        }
        if (--s->dp_left == 0)
            start_mapping(s);
    } else if (j->kind == PF_JOB_MAP_PROBE) {
        if (res->status != PF_OK) {
            fail(s, res->status, "mapping probe failed: %s", res->error);
            return 1;
        }
        probe_answered(s, j, res);
    }
    return 1;
}

void pf_search_job_failed(pf_search_t *s, uint64_t id, const char *error)
{
    job_rec_t *j = job_of(s, id);
    if (!j || j->state != J_OUT)
        return;
    j->state = J_ANSWERED;
    fail(s, PF_ERR, "a job failed on every worker that ran it: %s", error);
}

void pf_search_cancel(pf_search_t *s, const char *why)
{
    fail(s, PF_ERR, "%s", why ? why : "cancelled");
}

int pf_search_take_cancelled(pf_search_t *s, uint64_t *ids, int cap)
{
    int n = s->ncancelled < cap ? s->ncancelled : cap;
    if (n <= 0) /* s->cancelled may still be NULL */
        return 0;
    memcpy(ids, s->cancelled + (s->ncancelled - n), (size_t)n * sizeof *ids);
    s->ncancelled -= n;
    return n;
}

int pf_search_done(const pf_search_t *s)
{
    return s->phase == PF_PHASE_DONE || s->phase == PF_PHASE_FAILED;
}

void pf_search_get_status(const pf_search_t *s, pf_search_status_t *st)
{
    memset(st, 0, sizeof *st);
    st->phase = s->phase;
    st->jobs_issued = s->issued;
    st->jobs_answered = s->answered;
    st->jobs_cancelled = s->cancelled_total;
    long long out = 0;
    for (long long i = 0; i < s->njobs; i++)
        out += s->jobs[i].state == J_OUT;
    st->jobs_outstanding = out;
    st->best_objective_ms = NAN;
    int task;
    double full_ms;
    if (s->result)
        st->best_objective_ms = s->result->objective_ms;
    else if (s->phase == PF_PHASE_MAP && leading_candidate(s, &task, &full_ms) >= 0)
        st->best_objective_ms = full_ms;
}

int pf_search_result(pf_search_t *s, pf_plan_t **plan, char *err, size_t errlen)
{
    *plan = NULL;
    if (s->phase == PF_PHASE_FAILED)
        return pf_fail(err, errlen, s->status ? s->status : PF_ERR, "%s", s->error);
    if (s->phase != PF_PHASE_DONE)
        return pf_fail(err, errlen, PF_ERR, "search not finished");
    *plan = s->result;
    s->result = NULL;
    return PF_OK;
}
