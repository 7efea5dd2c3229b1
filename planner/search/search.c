#include "planner/search/search.h"
#include "planner/partition/coarsen.h"
#include "planner/ir/cost.h"
#include "planner/sim/simulate.h"
#include "planner/tp/tp_groups.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IN_FLIGHT 64
#define MAX_TP_DEGREES 16
/* Plans per TAP_ENUM job: 3^9; a transformer block has about 6 weights (729 plans), so most
 * units are one job per T. */
#define TAP_SLICE 19683

enum { J_QUEUED, J_OUT, J_ANSWERED, J_CANCELLED };

typedef struct {
    pf_job_kind_t kind;
    int state;
    int owner;        /* DP: dp entry; probe: map task; TAP: tap job */
    double target_ms; /* probe */
} job_rec_t;

/* One tensor-parallel degree: its TAP phase (T > 1), then the setting its DP jobs plan on. */
typedef struct {
    pf_tp_setting_opts_t opts; /* .tap_plans = plans once TAP is over */
    pf_tp_setting_t *set;      /* NULL until then */
    uint64_t *plans;           /* the chosen plan of every TAP unit */
    pf_tap_slice_t *best;      /* per unit, the best of the slices answered so far */
    int tap_left;              /* TAP_ENUM jobs outstanding */
    int ndp;                   /* DP entries of this T */
    char why[256];             /* why this T was dropped, if it was */
} tp_entry_t;

typedef struct {
    int tp, unit;
    uint64_t lo, hi;
} tap_job_t;

/* Phase 0: one coarsening per (T, alpha, K), shared by the DP jobs of every S that uses it. */
typedef struct {
    int tp; /* index into tp[] */
    double alpha;
    int k;
    int *group; /* op -> hyper-op */
    int ngroups;
    double seconds;
} coarse_t;

typedef struct {
    int stages, replicas, microbatches;
    int tp;     /* index into tp[] */
    double alpha;
    int coarse; /* index into coarse[], -1 = the DP runs on atomic ops (or blocks) */
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
    int done, fits;
    double step_ms, bubble_fraction;
} sim_rec_t;

typedef struct {
    int dp;
    const pf_cluster_t *cluster; /* the group cluster of its T */
    pf_stage_graph_t *sg;
    int task[3], ntasks; /* m and/or ar, then full (auto) */
    /* phase 4 */
    pf_plan_t *plan;     /* mapped, R x T devices: what SIMULATE jobs run */
    double *xfer_ms;     /* T > 1, S > 1: (S - 1) x R resharding times (RESHARD jobs) */
    int xfer_left;
    sim_rec_t sim[PF_SCHEDULE_COUNT];
} candidate_t;

/* One RESHARD job: a candidate's transfer from stage `stage` to the next, replica `replica`.
 * Allocated once for the whole phase: the problem points into itself. */
typedef struct {
    int cand, stage, replica;
    pf_simulate_xfer_problem_t xp;
} xfer_rec_t;

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

    tp_entry_t *tp;
    int ntp, tp_left;      /* degrees, and those still in TAP */
    pf_tap_units_t *units; /* TAP units of g (when some T > 1) */
    tap_job_t *tapjob;
    int ntapjob;
    size_t tapjob_cap;
    int *block_group;      /* layer-aligned: op -> block group */
    int nblock_groups;
    coarse_t *coarse;
    int ncoarse;
    size_t coarse_cap;
    dp_entry_t *dp;
    int ndp, dp_left;
    size_t dp_cap;
    candidate_t *cand;
    int ncand;
    map_task_t *task;
    int ntask, tasks_left;
    unsigned schedules;    /* phase 4: the schedules simulated (mask of 1u << pf_schedule_t) */
    xfer_rec_t *xfer;
    int nxfer, sims_left;

    pf_search_phase_t phase;
    int status;
    char error[512];
    pf_plan_t *result;
};

static const pf_graph_t *tp_graph(const pf_search_t *s, int tpi)
{
    return pf_tp_setting_graph(s->tp[tpi].set);
}

static const pf_cluster_t *tp_cluster(const pf_search_t *s, int tpi)
{
    return pf_tp_setting_cluster(s->tp[tpi].set);
}

const char *pf_search_phase_name(pf_search_phase_t p)
{
    switch (p) {
    case PF_PHASE_PARTITION: return "partition";
    case PF_PHASE_MAP: return "map";
    case PF_PHASE_SIMULATE: return "simulate";
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
    o->probe_timeouts = 2;
    o->symmetry = PF_MAP_SYM_ALL;
    o->auto_inst = 1;
    o->inst = PF_INST_FULL;
    o->seed = 1;
    o->max_tp = 8;
    o->mem_headroom = 0.1;
    pf_training_init(&o->train);
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

static void mapped(pf_search_t *s);
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
        mapped(s);
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
    /* A probe that times out says nothing about its target, and the later ones sit between it
     * and t_r, where the mapping we hold already is: past a few, each costs a full budget for a
     * gain below (t_r - t_l) / 2^k. bench/RESULTS.md, "probe time-outs", has the measurements. */
    if (s->o.probe_timeouts > 0 && t->timed_out >= s->o.probe_timeouts) {
        task_done(s, t);
        return;
    }
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
static double flat_ms_per_sample(const pf_search_t *s, const dp_entry_t *e)
{
    const pf_plan_t *p = e->plan;
    const pf_graph_t *g = tp_graph(s, e->tp);
    int S = p->stages, R = p->replicas, MB = p->microbatches;
    double ar = 0;
    for (int st = 0; st < S; st++) {
        double params = 0; /* per device of the stage's group */
        for (int i = 0; i < p->stage_list[st].nops; i++)
            params += pf_graph_op(g, p->stage_list[st].ops[i])->param_bytes;
        double flat = s->o.flat_gbps > 0 ? s->o.flat_gbps
                                         : pf_cluster_bw_median(tp_cluster(s, e->tp));
        if (!(flat > 0))
            flat = s->flat_gbps;
        double t = R > 1 ? pf_bytes_ms(pf_cost_ring_allreduce_bytes(params, R), flat)
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
    if (x->tp != y->tp)
        return x->tp - y->tp;
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
    int rc = pf_map_bounds(cd->sg, cd->cluster, inst, s->o.seed, &t->lo, &t->hi, t->best_dev,
                           err, sizeof err);
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
    double fa = pf_map_objective_ms(cd->sg, cd->cluster, PF_INST_FULL, a->best_dev);
    double fb = pf_map_objective_ms(cd->sg, cd->cluster, PF_INST_FULL, b->best_dev);
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
            e->flat_ms_per_sample = flat_ms_per_sample(s, e);
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
        /* the deepest pipeline spreads memory the most: its message is the one to show; without
         * any DP job, why the degrees were dropped */
        const char *why = best_infeasible >= 0 ? s->dp[best_infeasible].error : "";
        for (int t = 0; !*why && t < s->ntp; t++)
            why = s->tp[t].why;
        fail(s, PF_EINFEASIBLE, "%s",
             *why ? why : "no (stages, replicas, tensor-parallel degree) fits the options");
        free(order);
        return;
    }
    qsort_r(order, (size_t)nfeasible, sizeof *order, cmp_dp, s);
    /* one candidate per (S, T): its best alpha */
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
        const dp_entry_t *e = &s->dp[order[k]];
        for (int c = 0; c < n; c++)
            dup |= s->dp[s->cand[c].dp].stages == e->stages && s->dp[s->cand[c].dp].tp == e->tp;
        if (dup)
            continue;
        s->cand[n].dp = order[k];
        s->cand[n].cluster = tp_cluster(s, e->tp);
        s->cand[n].sg = pf_stage_graph_from_plan(tp_graph(s, e->tp), e->plan);
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
        mapped(s);
}

/* A candidate's best mapping so far under "full": its task (-1 when it had nothing to map, S =
 * R = 1, and the CS map is its mapping) and that objective. */
static int cand_mapping(const pf_search_t *s, int c, double *full_ms)
{
    const candidate_t *cd = &s->cand[c];
    int chosen = -1, dev0 = 0;
    double chosen_full = INFINITY;
    for (int k = 0; k < cd->ntasks; k++) {
        const map_task_t *t = &s->task[cd->task[k]];
        double full = pf_map_objective_ms(cd->sg, cd->cluster, PF_INST_FULL, t->best_dev);
        if (full < chosen_full) {
            chosen_full = full;
            chosen = cd->task[k];
        }
    }
    if (chosen < 0)
        chosen_full = pf_map_objective_ms(cd->sg, cd->cluster, PF_INST_FULL, &dev0);
    *full_ms = chosen_full;
    return chosen;
}

static double samples_per_step(const pf_search_t *s, const pf_plan_t *p)
{
    return (double)pf_graph_microbatch(s->g) * p->microbatches * p->replicas;
}

/* The candidate a plan would come from before simulation: each candidate's best mapping so far
 * under "full", candidates ranked by the analytic step estimate per sample (so different R
 * compare fairly). *task = -1 when the winner had nothing to map (S = R = 1). Returns -1
 * without candidates. */
static int leading_candidate(const pf_search_t *s, int *task, double *full_ms)
{
    int best_c = -1, dev0 = 0;
    double best_per_sample = INFINITY;
    for (int c = 0; c < s->ncand; c++) {
        const candidate_t *cd = &s->cand[c];
        const pf_plan_t *p = s->dp[cd->dp].plan;
        double full;
        int chosen = cand_mapping(s, c, &full);
        const int *dev = chosen >= 0 ? s->task[chosen].best_dev : &dev0;
        double step = pf_map_step_estimate_ms(cd->sg, cd->cluster, dev, p->microbatches);
        double per_sample = step / samples_per_step(s, p);
        if (per_sample < best_per_sample) {
            best_per_sample = per_sample;
            best_c = c;
            *task = chosen;
            *full_ms = full;
        }
    }
    return best_c;
}

/* The winner's groups become their T devices (tp_groups.h); its TAP plan goes into the plan
 * per op (weight splits, collectives and their time per micro-batch). */
static int expand_tp(const pf_search_t *s, int tpi, pf_plan_t *p)
{
    const tp_entry_t *t = &s->tp[tpi];
    int T = t->opts.tp, S = p->stages, R = p->replicas, n = pf_graph_nops(s->g);
    p->devices = s->ndev;
    if (T == 1)
        return PF_OK;
    const pf_tp_groups_t *groups = pf_tp_setting_groups(t->set);
    int *grp = malloc((size_t)S * R * sizeof *grp);
    if (!grp)
        return PF_ERR;
    for (int st = 0; st < S; st++)
        memcpy(grp + (size_t)st * R, p->stage_list[st].devices, (size_t)R * sizeof *grp);
    pf_plan_set_tensor_parallel(p, T);
    for (int st = 0; st < S; st++) {
        int *d = pf_plan_stage_devices(p, st);
        if (!d) {
            free(grp);
            return PF_ERR;
        }
        for (int r = 0; r < R; r++)
            memcpy(d + (size_t)r * T, pf_tp_groups_members(groups, grp[st * R + r]),
                   (size_t)T * sizeof *d);
    }
    free(grp);
    const pf_tap_result_t *tap = pf_tp_setting_tap(t->set);
    if (!tap || pf_plan_alloc_tp(p, n) != PF_OK)
        return tap ? PF_ERR : PF_OK;
    for (int v = 0; v < n; v++) {
        const pf_tap_op_t *o = &tap->ops[v];
        if (pf_graph_op(s->g, v)->weight.ndim > 0)
            p->tp_split[v] = (signed char)(o->weight.kind == PF_SHARDING_S ? o->weight.dim : -1);
        p->tp_comm_ms[v] = o->fwd_comm_ms + o->bwd_comm_ms;
    }
    /* collectives are listed on the representative instance of each unit: count them on the
     * op in the same position of every instance */
    for (int u = 0; u < tap->nunits; u++) {
        const pf_tap_unit_plan_t *up = &tap->units[u];
        const int *rep0 = pf_tap_unit_instance(s->units, u, 0);
        for (int k = 0; k < up->ncolls; k++) {
            int pos = -1;
            for (int j = 0; rep0 && j < up->nops && pos < 0; j++)
                if (rep0[j] == up->colls[k].op)
                    pos = j;
            for (int i = 0; pos >= 0 && i < up->ninstances; i++)
                p->tp_colls[pf_tap_unit_instance(s->units, u, i)[pos]]++;
        }
    }
    return PF_OK;
}

/* One step's communication on the slowest stage for each kind: tensor parallel (the stage's
 * collectives, MB micro-batches), pipeline (eq. 6 term, MB micro-batches) and data parallel
 * (eq. 7 term, once). */
static void step_comm(const candidate_t *cd, const int *dev, pf_plan_t *p)
{
    int S = pf_stage_graph_stages(cd->sg), R = pf_stage_graph_replicas(cd->sg);
    int MB = p->microbatches;
    p->comm.present = 1;
    p->comm.tp_ms = p->comm.pp_ms = p->comm.dp_ms = 0;
    for (int st = 0; st < S; st++) {
        double tp = 0, cu = pf_stage_graph_cu_ms(cd->sg, st);
        for (int i = 0; p->tp_nops && i < p->stage_list[st].nops; i++)
            tp += p->tp_comm_ms[p->stage_list[st].ops[i]];
        p->comm.tp_ms = fmax(p->comm.tp_ms, MB * tp);
        for (int r = 0; r < R; r++) {
            int x = st * R + r;
            double m = pf_map_stage_time_ms(cd->sg, cd->cluster, PF_INST_M, dev, x) - cu;
            double ar = pf_map_stage_time_ms(cd->sg, cd->cluster, PF_INST_AR, dev, x) - cu;
            p->comm.pp_ms = fmax(p->comm.pp_ms, MB * m);
            p->comm.dp_ms = fmax(p->comm.dp_ms, ar);
        }
    }
}

/* The plan candidate c gives under `schedule`: its best mapping (under "full"), the CS / p2p
 * baselines, its groups expanded to T devices, memory parts by the schedule's micro-batches in
 * flight (pf_cost_fill_plan), communication per step. NULL when out of memory. */
static pf_plan_t *candidate_plan(const pf_search_t *s, int c, pf_schedule_t schedule)
{
    const candidate_t *cd = &s->cand[c];
    const dp_entry_t *e = &s->dp[cd->dp];
    double full_ms;
    int best_t = cand_mapping(s, c, &full_ms);
    pf_plan_t *p = pf_plan_clone(e->plan);
    int S = pf_stage_graph_stages(cd->sg), R = pf_stage_graph_replicas(cd->sg);
    int *cs_dev = malloc((size_t)S * R * sizeof *cs_dev);
    if (!p || !cs_dev)
        goto fail;
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
    if (pf_map_fill_plan(p, cd->sg, cd->cluster, dev, used, stp) != PF_OK ||
        expand_tp(s, e->tp, p) != PF_OK)
        goto fail;
    /* the partition came over the wire: give it the request's names, training and memory parts */
    pf_plan_set_names(p, pf_graph_name(s->g), pf_cluster_name(s->c));
    p->train = s->o.train;
    p->train.schedule = schedule;
    snprintf(p->schedule, sizeof p->schedule, "%s", pf_schedule_name(schedule));
    pf_cost_model_t cm;
    pf_cost_model_init(&cm, cd->cluster, p->stages, e->microbatches, s->o.flat_gbps);
    pf_cost_model_set_training(&cm, &p->train, p->replicas,
                               pf_tp_setting_reserve_bytes(s->tp[e->tp].set));
    pf_cost_fill_plan(p, tp_graph(s, e->tp), &cm);
    step_comm(cd, dev, p);
    if (e->coarse >= 0)
        p->partition_search.coarsen_s = s->coarse[e->coarse].seconds;
    free(cs_dev);
    return p;
fail:
    free(cs_dev);
    pf_plan_destroy(&p);
    return NULL;
}

static int cand_tp(const pf_search_t *s, int c)
{
    return s->tp[s->dp[s->cand[c].dp].tp].opts.tp;
}

/* Candidate c's resharding times are in (or it needs none): one SIMULATE job per schedule. */
static int queue_sims(pf_search_t *s, int c)
{
    for (int k = 0; k < PF_SCHEDULE_COUNT; k++)
        if (s->schedules & (1u << k)) {
            if (!new_job(s, PF_JOB_SIMULATE, c * PF_SCHEDULE_COUNT + k, 0))
                return PF_ERR;
            s->sims_left++;
        }
    return PF_OK;
}

static void finish(pf_search_t *s);

/* Phase 4 (DESIGN.md "simulate"): every candidate's plan from its best mapping; T > 1 pipelines
 * first time their cross-stage transfers (RESHARD jobs, one per stage boundary and replica),
 * then each candidate is simulated under every allowed schedule (SIMULATE jobs). */
static void mapped(pf_search_t *s)
{
    int need = 0;
    for (int c = 0; c < s->ncand; c++) {
        candidate_t *cd = &s->cand[c];
        if (!(cd->plan = candidate_plan(s, c, s->o.train.schedule))) {
            fail(s, PF_ERR, "out of memory");
            return;
        }
        if (cand_tp(s, c) > 1)
            need += (cd->plan->stages - 1) * cd->plan->replicas;
    }
    s->phase = PF_PHASE_SIMULATE;
    if (need > 0 && !(s->xfer = calloc((size_t)need, sizeof *s->xfer))) {
        fail(s, PF_ERR, "out of memory");
        return;
    }
    for (int c = 0; c < s->ncand; c++) {
        candidate_t *cd = &s->cand[c];
        const pf_plan_t *p = cd->plan;
        int T = cand_tp(s, c), S = p->stages, R = p->replicas;
        if (T > 1 && S > 1) {
            /* per-device bytes after each stage: the stage graph of the per-device graph, a
             * pipeline relaying skip connections through the stages between */
            const pf_stage_graph_t *sg = cd->sg;
            if (!(cd->xfer_ms = calloc((size_t)(S - 1) * R, sizeof *cd->xfer_ms))) {
                fail(s, PF_ERR, "out of memory");
                return;
            }
            for (int st = 0; st + 1 < S; st++) {
                double bytes = 0;
                for (int a = 0; a <= st; a++)
                    for (int b = st + 1; b < S; b++)
                        bytes += pf_stage_graph_msg_bytes(sg, a, b);
                for (int r = 0; r < R; r++) {
                    xfer_rec_t *x = &s->xfer[s->nxfer];
                    x->cand = c;
                    x->stage = st;
                    x->replica = r;
                    pf_simulate_xfer_problem(p->stage_list[st].devices + (size_t)r * T,
                                             p->stage_list[st + 1].devices + (size_t)r * T, T,
                                             bytes, &x->xp);
                    if (!new_job(s, PF_JOB_RESHARD, s->nxfer, 0)) {
                        fail(s, PF_ERR, "out of memory");
                        return;
                    }
                    s->nxfer++;
                    cd->xfer_left++;
                }
            }
        } else if (queue_sims(s, c) != PF_OK) {
            fail(s, PF_ERR, "out of memory");
            return;
        }
    }
    if (s->nxfer == 0 && s->sims_left == 0)
        finish(s);
}

/* The step of candidate c under a baseline mapping (CS or p2p map of its groups) and the
 * schedule, by the simulator, in-process: one simulation each, cheap next to the search.
 * NAN when it cannot be simulated (then the analytic estimate stays). */
static double baseline_step_ms(const pf_search_t *s, int c, int cs, pf_schedule_t schedule)
{
    const candidate_t *cd = &s->cand[c];
    const dp_entry_t *e = &s->dp[cd->dp];
    int S = e->plan->stages, R = e->plan->replicas;
    double ms = NAN;
    char err[256];
    pf_simulate_input_t in = {0};
    pf_simulate_result_t *r = NULL;
    pf_plan_t *p = pf_plan_clone(e->plan);
    int *dev = malloc((size_t)S * R * sizeof *dev);
    if (!p || !dev)
        goto done;
    (cs ? pf_map_cs : pf_map_p2p)(cd->sg, dev);
    for (int st = 0; st < S; st++) {
        int *d = pf_plan_stage_devices(p, st);
        if (!d)
            goto done;
        memcpy(d, dev + (size_t)st * R, (size_t)R * sizeof *d);
    }
    if (expand_tp(s, e->tp, p) != PF_OK)
        goto done;
    p->train = s->o.train;
    p->train.schedule = schedule;
    snprintf(p->schedule, sizeof p->schedule, "%s", pf_schedule_name(schedule));
    if (pf_simulate_input_from_setting(s->g, s->c, s->tp[e->tp].set, p, NULL, &in, err,
                                       sizeof err) == PF_OK &&
        pf_simulate(&in, &r, err, sizeof err) == PF_OK)
        ms = r->step_ms;
done:
    pf_simulate_result_destroy(&r);
    pf_simulate_input_clear(&in);
    pf_plan_destroy(&p);
    free(dev);
    return ms;
}

/* The plan: among every (candidate, schedule) whose memory fits under that schedule, the least
 * simulated step time per sample (ties: the earlier candidate, then 1f1b, gpipe, eager-1f1b). */
static void finish(pf_search_t *s)
{
    int best_c = -1, best_k = -1;
    double best = INFINITY;
    for (int c = 0; c < s->ncand; c++)
        for (int k = 0; k < PF_SCHEDULE_COUNT; k++) {
            const sim_rec_t *r = &s->cand[c].sim[k];
            if (!r->done || !r->fits)
                continue;
            double per_sample = r->step_ms / samples_per_step(s, s->cand[c].plan);
            if (per_sample < best) {
                best = per_sample;
                best_c = c;
                best_k = k;
            }
        }
    if (best_c < 0) {
        fail(s, PF_EINFEASIBLE, "no candidate's memory fits its devices under any schedule "
             "simulated (%d candidates)", s->ncand);
        return;
    }
    pf_plan_t *p = candidate_plan(s, best_c, (pf_schedule_t)best_k);
    if (!p) {
        fail(s, PF_ERR, "out of memory");
        return;
    }
    p->simulated_step_ms = s->cand[best_c].sim[best_k].step_ms;
    /* the baselines under the same simulator and schedule, so that their ratios mean something */
    double cs = baseline_step_ms(s, best_c, 1, (pf_schedule_t)best_k);
    double p2p = baseline_step_ms(s, best_c, 0, (pf_schedule_t)best_k);
    if (isfinite(cs) && isfinite(p2p)) {
        p->cs_map.simulated_step_ms = cs;
        p->p2p_map.simulated_step_ms = p2p;
    }
    p->search.present = 1;
    p->search.jobs = s->njobs;
    s->result = p;
    s->phase = PF_PHASE_DONE;
    s->status = PF_OK;
}

/* ---- coarsening, done in pf_search_new ---- */

/* The grouping of T's graph for (alpha, K), computed on first use. -1 = no coarsening (K >=
 * ops). */
static int coarse_for(pf_search_t *s, int tpi, const pf_cost_model_t *cm, double alpha, int k,
                      char *err, size_t errlen, int *rc)
{
    const pf_graph_t *g = tp_graph(s, tpi);
    int n = pf_graph_nops(g);
    *rc = PF_OK;
    if (k >= n)
        return -1;
    for (int i = 0; i < s->ncoarse; i++)
        if (s->coarse[i].tp == tpi && s->coarse[i].alpha == alpha && s->coarse[i].k == k)
            return i;
    if (pf_grow((void **)&s->coarse, &s->coarse_cap, (size_t)s->ncoarse + 1, sizeof *s->coarse)) {
        *rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        return -1;
    }
    coarse_t *c = &s->coarse[s->ncoarse];
    memset(c, 0, sizeof *c);
    c->tp = tpi;
    c->alpha = alpha;
    c->k = k;
    c->group = malloc((size_t)n * sizeof *c->group);
    if (!c->group) {
        *rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        return -1;
    }
    pf_coarsen_opts_t co = {.k = k, .alpha = alpha};
    double t0 = pf_now_s();
    *rc = pf_coarsen_run(g, cm, &co, c->group, &c->ngroups, err, errlen);
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

static int tp_degrees(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                      int *out);

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
    if (o.schedules & ~((1u << PF_SCHEDULE_1F1B) | (1u << PF_SCHEDULE_GPIPE) |
                        (1u << PF_SCHEDULE_EAGER_1F1B)))
        return pf_fail(err, errlen, PF_EINPUT, "schedules: mask 0x%x names a schedule other "
                       "than 1f1b, gpipe and eager-1f1b", o.schedules);
    if (o.nalphas <= 0 || o.nalphas > PF_SEARCH_MAX_ALPHAS || o.candidates <= 0 ||
        o.probes_in_flight <= 0 || o.probes_in_flight > MAX_IN_FLIGHT || !(o.rel_eps > 0) ||
        o.probe_timeouts < 0)
        return pf_fail(err, errlen, PF_EINPUT,
                       "search options: need 1-%d alphas, candidates >= 1, 1-%d probes in "
                       "flight, rel_eps > 0, probe time-outs >= 0",
                       PF_SEARCH_MAX_ALPHAS, MAX_IN_FLIGHT);
    int nst = stage_counts(&o, D, pf_graph_nops(g), stages_list);
    if (nst == 0 || stages_list[0] < 1)
        return pf_fail(err, errlen, PF_EINPUT, "no (stages, replicas) fits %d devices", D);

    int rc = pf_training_check(&o.train, err, errlen);
    if (rc != PF_OK)
        return rc;
    if (o.tp < 0 || o.max_tp < 1 || o.global_batch < 0)
        return pf_fail(err, errlen, PF_EINPUT, "tp, max_tp, global_batch: out of range");
    if (!(o.mem_headroom >= 0 && o.mem_headroom < 1))
        return pf_fail(err, errlen, PF_EINPUT, "mem_headroom: %g is not in [0, 1)",
                       o.mem_headroom);
    int degrees[MAX_TP_DEGREES], nt = tp_degrees(g, c, &o, degrees);
    if (nt == 0)
        return pf_fail(err, errlen, PF_EINPUT, "tp: %d does not divide the devices of every "
                       "host of cluster %s%s", o.tp, pf_cluster_name(c),
                       o.tp_across_hosts ? "" : " (groups stay inside a host)");
    if (o.global_batch) { /* some (S, R, T) must make a whole number of micro-batches */
        int ok = 0, list[64];
        long long mb = pf_graph_microbatch(g);
        for (int i = 0; i < nt && !ok; i++) {
            int Dg = D / degrees[i], ns = stage_counts(&o, Dg, pf_graph_nops(g), list);
            for (int k = 0; k < ns && !ok; k++) {
                long long R = o.replicas ? o.replicas : Dg / list[k];
                ok = R > 0 && o.global_batch % (mb * R) == 0;
            }
        }
        if (!ok)
            return pf_fail(err, errlen, PF_EINFEASIBLE,
                           "global_batch: no (stages, replicas, tensor-parallel degree) gives "
                           "%lld samples per step (micro-batch %lld x micro-batches x replicas)",
                           o.global_batch, mb);
    }
    /* An op that cannot fit alone makes every partition infeasible: say so before any job
     * (with T > 1 an op's weight may be split, so only then can it tell) */
    if (degrees[nt - 1] > 1)
        return PF_OK;
    pf_cost_model_t cm;
    pf_cost_model_init(&cm, c, 1, o.microbatches, o.flat_gbps);
    pf_cost_model_set_training(&cm, &o.train, 1, 0);
    cm.mem_limit_bytes *= 1 - o.mem_headroom;
    return pf_cost_check_ops_fit(g, &cm, err, errlen);
}

/* Layer-aligned plans: every repeated block (training.h) is one group; ops outside blocks join
 * the block before them (the first block for those ahead of every block), so each stage holds
 * whole blocks and the embedding and head ride with the first and last. */
static int block_groups(const pf_graph_t *g, int *group, int *ngroups)
{
    int n = pf_graph_nops(g), k = -1, pending = 0;
    const int *topo = pf_graph_topo(g);
    const char *cur = NULL;
    size_t cur_len = 0;
    for (int i = 0; i < n; i++) {
        int v = topo[i];
        const char *name = pf_graph_op(g, v)->name;
        size_t len = pf_training_block_len(name);
        if (len && (!cur || len != cur_len || strncmp(name, cur, len))) {
            k++;
            cur = name;
            cur_len = len;
        }
        if (k < 0) {
            group[v] = -1; /* ahead of every block: the first block's */
            pending++;
        } else {
            group[v] = k;
        }
    }
    if (k < 0)
        return PF_EINPUT; /* no repeated block at all */
    for (int v = 0; pending && v < n; v++)
        if (group[v] < 0)
            group[v] = 0;
    /* groups must be convex: a block's ops are contiguous in topological order here, and an op
     * outside blocks joins a neighbour in that order, so every group is an interval of it */
    *ngroups = k + 1;
    return PF_OK;
}

/* The tensor-parallel degrees to try, ascending. */
static int tp_degrees(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                      int *out)
{
    int list[MAX_TP_DEGREES], n = pf_tp_degrees(c, o->tp_across_hosts, list, MAX_TP_DEGREES), k = 0;
    int weights = 0;
    for (int v = 0; v < pf_graph_nops(g) && !weights; v++)
        weights = pf_graph_op(g, v)->weight.ndim > 0;
    for (int i = 0; i < n; i++) {
        int T = list[i];
        if (o->tp ? T == o->tp : (T == 1 || (weights && T <= o->max_tp)))
            out[k++] = T;
    }
    return k;
}

/* The micro-batches per replica for R replicas: the option, or what the global batch leaves
 * (0 when it does not divide). */
static int microbatches_for(const pf_search_t *s, int R)
{
    if (!s->o.global_batch)
        return s->o.microbatches;
    long long per_step = (long long)pf_graph_microbatch(s->g) * R;
    if (per_step <= 0 || s->o.global_batch % per_step)
        return 0;
    long long mb = s->o.global_batch / per_step;
    return mb <= 1 << 20 ? (int)mb : 0;
}

/* Phase 2 for one degree: its DP jobs, one per (S, alpha) with S x R = devices / T. */
static int add_dp_entries(pf_search_t *s, int tpi, char *err, size_t errlen)
{
    tp_entry_t *t = &s->tp[tpi];
    const pf_graph_t *g = tp_graph(s, tpi);
    const pf_cluster_t *c = tp_cluster(s, tpi);
    int D = pf_cluster_ndevices(c), n = pf_graph_nops(g), rc, stages_list[64];
    int nst = stage_counts(&s->o, D, n, stages_list);
    for (int i = 0; i < nst; i++) {
        int S = stages_list[i], R = s->o.replicas ? s->o.replicas : D / S;
        int MB = microbatches_for(s, R);
        if (S < 1 || R < 1 || (long long)S * R > D || MB < 1)
            continue;
        pf_cost_model_t cm;
        pf_cost_model_init(&cm, c, 1, MB, s->o.flat_gbps);
        pf_cost_model_set_training(&cm, &s->o.train, 1, pf_tp_setting_reserve_bytes(t->set));
        cm.mem_limit_bytes *= 1 - s->o.mem_headroom;
        int k = s->block_group       ? n
                : s->o.coarsen_k > 0 ? s->o.coarsen_k
                : s->o.coarsen_k < 0 ? n
                                     : pf_partition_default_k(g, S, s->o.max_downsets);
        /* alpha only shapes the coarsening: without one, a single DP job per S */
        int nalphas = k < n ? s->o.nalphas : 1;
        for (int a = 0; a < nalphas; a++) {
            if (pf_grow((void **)&s->dp, &s->dp_cap, (size_t)s->ndp + 1, sizeof *s->dp))
                return pf_fail(err, errlen, PF_ERR, "out of memory");
            dp_entry_t *e = &s->dp[s->ndp];
            memset(e, 0, sizeof *e);
            e->stages = S;
            e->replicas = R;
            e->microbatches = MB;
            e->tp = tpi;
            e->alpha = s->o.alphas[a];
            e->coarse = coarse_for(s, tpi, &cm, e->alpha, k, err, errlen, &rc);
            if (rc != PF_OK)
                return rc;
            if (!new_job(s, PF_JOB_DP_PARTITION, s->ndp, 0))
                return pf_fail(err, errlen, PF_ERR, "out of memory");
            s->ndp++;
            s->dp_left++;
            t->ndp++;
        }
    }
    return PF_OK;
}

/* Builds T's setting (once its TAP plans are chosen, or at once for T = 1) and queues its DP
 * jobs. A setting that cannot be built drops the degree (its reason kept); PF_ERR only for
 * running out of memory. */
static int open_degree(pf_search_t *s, int tpi, char *err, size_t errlen)
{
    tp_entry_t *t = &s->tp[tpi];
    char why[256];
    t->set = pf_tp_setting_new(s->g, s->c, &t->opts, why, sizeof why);
    if (!t->set) {
        snprintf(t->why, sizeof t->why, "tensor parallelism %d: %.200s", t->opts.tp, why);
        return PF_OK;
    }
    return add_dp_entries(s, tpi, err, errlen);
}

/* Phase 1 for T > 1: one TAP_ENUM job per slice of every unit with weights. */
static int add_tap_jobs(pf_search_t *s, int tpi, char *err, size_t errlen)
{
    tp_entry_t *t = &s->tp[tpi];
    int nu = pf_tap_units_count(s->units);
    t->plans = calloc((size_t)nu + 1, sizeof *t->plans);
    t->best = calloc((size_t)nu + 1, sizeof *t->best);
    if (!t->plans || !t->best)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    t->opts.tap_plans = t->plans;
    t->opts.ntap_plans = nu;
    for (int u = 0; u < nu; u++) {
        pf_tap_unit_info_t info;
        pf_tap_unit_info(s->units, u, &info);
        t->best[u].unit = u;
        t->best[u].T = t->opts.tp;
        if (info.nweights == 0) { /* one plan: nothing to choose */
            t->best[u].hi = 1;
            t->best[u].feasible = 1;
            t->best[u].nbest = 1;
            continue;
        }
        for (uint64_t lo = 0; lo < info.nplans; lo += TAP_SLICE) {
            if (pf_grow((void **)&s->tapjob, &s->tapjob_cap, (size_t)s->ntapjob + 1,
                        sizeof *s->tapjob))
                return pf_fail(err, errlen, PF_ERR, "out of memory");
            uint64_t hi = info.nplans - lo > TAP_SLICE ? lo + TAP_SLICE : info.nplans;
            s->tapjob[s->ntapjob] = (tap_job_t){tpi, u, lo, hi};
            if (!new_job(s, PF_JOB_TAP_ENUM, s->ntapjob, 0))
                return pf_fail(err, errlen, PF_ERR, "out of memory");
            s->ntapjob++;
            t->tap_left++;
        }
    }
    return PF_OK;
}

/* The slices of T are in: every unit takes its best plan; then the degree opens. */
static void tap_done(pf_search_t *s, int tpi)
{
    tp_entry_t *t = &s->tp[tpi];
    char err[256];
    for (int u = 0; u < pf_tap_units_count(s->units); u++) {
        if (t->best[u].nbest == 0) {
            pf_tap_unit_info_t info;
            pf_tap_unit_info(s->units, u, &info);
            snprintf(t->why, sizeof t->why, "tensor parallelism %d: no plan of unit %s fits",
                     t->opts.tp, info.name);
            break;
        }
        t->plans[u] = t->best[u].best[0].plan;
    }
    if (!t->why[0] && open_degree(s, tpi, err, sizeof err) != PF_OK) {
        fail(s, PF_ERR, "%s", err);
        return;
    }
    s->tp_left--;
    if (s->tp_left == 0 && s->dp_left == 0)
        start_mapping(s);
}

pf_search_t *pf_search_new(const pf_graph_t *g, const pf_cluster_t *c,
                           const pf_search_opts_t *opts, char *err, size_t errlen)
{
    pf_search_opts_t o = resolved(opts);
    int D = pf_cluster_ndevices(c), rc, degrees[MAX_TP_DEGREES];
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
    s->schedules = o.schedules ? o.schedules
                               : (1u << PF_SCHEDULE_1F1B) | (1u << PF_SCHEDULE_GPIPE) |
                                     (1u << PF_SCHEDULE_EAGER_1F1B);
    int nt = tp_degrees(g, c, &o, degrees);
    s->tp = calloc((size_t)nt, sizeof *s->tp);
    if (!s->tp) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    if (o.layer_aligned) {
        if (!(s->block_group = malloc((size_t)pf_graph_nops(g) * sizeof *s->block_group))) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
        if (block_groups(g, s->block_group, &s->nblock_groups) != PF_OK) {
            rc = pf_fail(err, errlen, PF_EINPUT, "layer_aligned: graph %s has no repeated "
                         "blocks (dotted names with a number, such as layers.7.mlp)",
                         pf_graph_name(g));
            goto fail;
        }
    }
    for (int i = 0; i < nt; i++) {
        tp_entry_t *t = &s->tp[s->ntp++];
        pf_tp_setting_opts_init(&t->opts);
        t->opts.tp = degrees[i];
        t->opts.across_hosts = o.tp_across_hosts;
        t->opts.train = o.train;
        if (degrees[i] > 1 && !s->units &&
            !(s->units = pf_tap_units_new(g, &t->opts.tap, err, errlen))) {
            rc = PF_EINPUT;
            goto fail;
        }
        if (degrees[i] == 1)
            rc = open_degree(s, s->ntp - 1, err, errlen);
        else
            rc = add_tap_jobs(s, s->ntp - 1, err, errlen);
        if (rc != PF_OK)
            goto fail;
        if (degrees[i] > 1 && t->tap_left == 0) { /* no unit had a weight to split */
            s->tp_left++;
            tap_done(s, s->ntp - 1);
            if (s->phase == PF_PHASE_FAILED) {
                rc = pf_fail(err, errlen, s->status, "%s", s->error);
                goto fail;
            }
        } else if (degrees[i] > 1) {
            s->tp_left++;
        }
    }
    if (s->ndp == 0 && s->tp_left == 0) {
        /* nothing to partition: say why */
        const char *why = "";
        for (int i = 0; i < s->ntp && !*why; i++)
            why = s->tp[i].why;
        if (*why)
            rc = pf_fail(err, errlen, PF_EINFEASIBLE, "%s", why);
        else if (o.global_batch)
            rc = pf_fail(err, errlen, PF_EINFEASIBLE,
                         "global_batch: no (stages, replicas, tensor-parallel degree) gives %lld "
                         "samples per step (micro-batch %d x micro-batches x replicas)",
                         o.global_batch, pf_graph_microbatch(g));
        else
            rc = pf_fail(err, errlen, PF_EINPUT, "no (stages, replicas) fits %d devices", D);
        goto fail;
    }
    return s;
fail:
    (void)rc;
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
    for (int c = 0; c < s->ncand; c++) {
        pf_stage_graph_destroy(&s->cand[c].sg);
        pf_plan_destroy(&s->cand[c].plan);
        free(s->cand[c].xfer_ms);
    }
    free(s->xfer);
    for (int k = 0; k < s->ntask; k++)
        free(s->task[k].best_dev);
    for (int i = 0; i < s->ncoarse; i++)
        free(s->coarse[i].group);
    for (int i = 0; i < s->ntp; i++) {
        pf_tp_setting_destroy(&s->tp[i].set);
        free(s->tp[i].plans);
        free(s->tp[i].best);
    }
    free(s->tp);
    pf_tap_units_destroy(&s->units);
    free(s->tapjob);
    free(s->block_group);
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
    job->graph = s->g;
    job->cluster = s->c;
    if (j->kind == PF_JOB_DP_PARTITION) {
        const dp_entry_t *e = &s->dp[j->owner];
        job->setting = s->tp[e->tp].opts;
        job->partition.stages = e->stages;
        job->partition.replicas = e->replicas;
        job->partition.microbatches = e->microbatches;
        job->partition.flat_gbps = s->o.flat_gbps;
        job->partition.coarsen_k = s->o.coarsen_k;
        job->partition.alpha = e->alpha;
        job->partition.train = s->o.train;
        job->partition.mem_headroom = s->o.mem_headroom;
        if (e->coarse >= 0) {
            job->partition.group = s->coarse[e->coarse].group;
            job->partition.ngroups = s->coarse[e->coarse].ngroups;
        } else if (s->block_group) {
            job->partition.group = s->block_group;
            job->partition.ngroups = s->nblock_groups;
        }
        /* refinement moves single ops across boundaries: it would cut blocks */
        job->partition.refine = s->o.refine && !s->block_group;
        if (s->o.max_downsets > 0)
            job->partition.max_downsets = s->o.max_downsets;
    } else if (j->kind == PF_JOB_TAP_ENUM) {
        const tap_job_t *t = &s->tapjob[j->owner];
        job->setting = s->tp[t->tp].opts;
        job->setting.tap_plans = NULL; /* being chosen */
        job->setting.ntap_plans = 0;
        job->tap_unit = t->unit;
        job->tap_lo = t->lo;
        job->tap_hi = t->hi;
    } else if (j->kind == PF_JOB_SIMULATE) {
        const candidate_t *cd = &s->cand[j->owner / PF_SCHEDULE_COUNT];
        job->setting = s->tp[s->dp[cd->dp].tp].opts;
        job->plan = cd->plan;
        job->schedule = (pf_schedule_t)(j->owner % PF_SCHEDULE_COUNT);
        job->xfer_ms = cd->xfer_ms;
        job->nxfer = cd->xfer_ms ? (cd->plan->stages - 1) * cd->plan->replicas : 0;
    } else if (j->kind == PF_JOB_RESHARD) {
        job->graph = NULL; /* the network is the cluster */
        job->reshard = s->xfer[j->owner].xp.problem;
        job->reshard_opts.sched.dfs_budget_s = 0; /* the node cap: one answer everywhere */
    } else {
        const map_task_t *t = &s->task[j->owner];
        const candidate_t *cd = &s->cand[t->cand];
        job->graph = NULL; /* a probe needs the cluster and its stage graph only */
        job->setting = s->tp[s->dp[cd->dp].tp].opts;
        job->stage_graph = cd->sg;
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
        if (--s->dp_left == 0 && s->tp_left == 0)
            start_mapping(s);
    } else if (j->kind == PF_JOB_TAP_ENUM) {
        const tap_job_t *tj = &s->tapjob[j->owner];
        tp_entry_t *t = &s->tp[tj->tp];
        if (res->status != PF_OK) {
            fail(s, res->status, "TAP job failed: %s", res->error);
            return 1;
        }
        pf_tap_slice_t both[2] = {t->best[tj->unit], res->tap}, merged;
        int n = both[0].hi > both[0].lo ? 2 : 1; /* the unit's first answer stands alone */
        if (pf_tap_merge(n == 2 ? both : both + 1, n, &merged, NULL, 0) != PF_OK) {
            fail(s, PF_ERR, "TAP answers of unit %d do not merge", tj->unit);
            return 1;
        }
        t->best[tj->unit] = merged;
        if (--t->tap_left == 0)
            tap_done(s, tj->tp);
    } else if (j->kind == PF_JOB_MAP_PROBE) {
        if (res->status != PF_OK) {
            fail(s, res->status, "mapping probe failed: %s", res->error);
            return 1;
        }
        probe_answered(s, j, res);
    } else if (j->kind == PF_JOB_RESHARD) {
        const xfer_rec_t *x = &s->xfer[j->owner];
        candidate_t *cd = &s->cand[x->cand];
        if (res->status != PF_OK) {
            fail(s, res->status, "resharding job failed: %s", res->error);
            return 1;
        }
        cd->xfer_ms[(size_t)x->stage * cd->plan->replicas + x->replica] = res->reshard.time_ms;
        if (--cd->xfer_left == 0 && queue_sims(s, x->cand) != PF_OK)
            fail(s, PF_ERR, "out of memory");
    } else if (j->kind == PF_JOB_SIMULATE) {
        sim_rec_t *r = &s->cand[j->owner / PF_SCHEDULE_COUNT].sim[j->owner % PF_SCHEDULE_COUNT];
        if (res->status != PF_OK) {
            fail(s, res->status, "simulation job failed: %s", res->error);
            return 1;
        }
        *r = (sim_rec_t){1, res->sim.fits, res->sim.step_ms, res->sim.bubble_fraction};
        if (--s->sims_left == 0) {
            int waiting = 0; /* candidates still timing their transfers */
            for (int c = 0; c < s->ncand; c++)
                waiting |= s->cand[c].xfer_left > 0;
            if (!waiting)
                finish(s);
        }
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
    else if ((s->phase == PF_PHASE_MAP || s->phase == PF_PHASE_SIMULATE) &&
             leading_candidate(s, &task, &full_ms) >= 0)
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
