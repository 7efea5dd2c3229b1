/* search: the public API of the search (search.h), the table of phases (each with its kinds) and the order of the
 * phases: tap -> partition -> map -> simulate -> done. Only this file starts a phase: each
 * phase's absorb reports when its part is over. The phases are search_tap.c,
 * search_partition.c, search_map.c and search_sim.c; the jobs and their queue search_queue.c
 * (search_state.h). */
#include "planner/search/search.h"
#include "planner/ir/devkinds.h"
#include "planner/search/search_blocks.h"
#include "planner/search/search_sim.h"
#include "planner/search/search_map.h"
#include "planner/search/search_partition.h"
#include "planner/search/search_tap.h"
#include "planner/search/search_queue.h"
#include "planner/search/search_stagedeg.h"
#include "planner/inputs/cpep.h"
#include "planner/inputs/price.h"
#include "planner/ir/cost.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the order of the phases ---- */

/* Every binary search is over: phase 4, and the plan once its jobs are in. */
static void map_over(pf_search_t *s)
{
    if (pf_search_sim_start(s))
        pf_search_sim_finish(s);
}

/* Every DP answer is in and no degree is in TAP: the best partitions go to mapping. */
static void partition_over(pf_search_t *s)
{
    if (pf_search_partition_rank(s)) {
        if (pf_search_map_start(s, s->part.chosen, s->part.nchosen))
            map_over(s);
    } else if (!pf_search_queue_stopped(s) && !pf_search_stagedeg_alone(s)) {
        pf_search_partition_fail_none(s); /* no uniform plan, and no per-stage one to try */
    }
}

/* The TAP of degree tpi is over: the degree opens (unless it was dropped), and partitioning is
 * over once it was the last degree in TAP and every DP answer is in. */
static void tap_over(pf_search_t *s, int tpi)
{
    char err[256];
    if (!s->tap.tp[tpi].why[0] && pf_search_partition_open(s, tpi, err, sizeof err) != PF_OK) {
        pf_search_queue_fail(s, PF_ERR, "%s", err);
        return;
    }
    if (s->tap.tp_left == 0 && s->part.dp_left == 0)
        partition_over(s);
}

static void tap_job_over(pf_search_t *s, const pf_search_owner_t *owner)
{
    tap_over(s, s->tap.slice[owner->slice].tp);
}

static void dp_job_over(pf_search_t *s, const pf_search_owner_t *owner)
{
    (void)owner;
    partition_over(s);
}

static void probe_over(pf_search_t *s, const pf_search_owner_t *owner)
{
    (void)owner;
    map_over(s);
}

static void simulation_over(pf_search_t *s, const pf_search_owner_t *owner)
{
    (void)owner;
    pf_search_sim_finish(s);
}

/* Every degree of degrees[nt]: T = 1 opens at once, T > 1 queues its TAP jobs (and opens at
 * once when no unit has a weight to split). */
static int start_degrees(pf_search_t *s, const int *degrees, int nt, char *err, size_t errlen)
{
    s->o.stage_tp_mask = 0;
    for (int i = 0; i < nt && s->o.stage_degrees; i++)
        s->o.stage_tp_mask |= degrees[i] < 64 ? 1ull << degrees[i] : 0;
    if (s->o.stage_tp_mask == 1ull << 1)
        s->o.stage_tp_mask = 0; /* T = 1 alone: the plain per-stage DP on T = 1's setting */
    int rc = pf_search_tap_init(s, nt, err, errlen);
    for (int i = 0; i < nt && rc == PF_OK; i++) {
        bool over = false;
        if ((rc = pf_search_tap_add(s, degrees[i], &over, err, errlen)) != PF_OK)
            break;
        if (degrees[i] == 1) {
            rc = pf_search_partition_open(s, i, err, errlen);
        } else if (over) {
            tap_over(s, i);
            if (s->phase == PF_PHASE_FAILED)
                rc = pf_fail(err, errlen, s->status, "%s", s->error);
        }
    }
    return rc;
}

/* ---- the phases' kinds of jobs ---- */

/* Each phase: the kinds it issues, and what comes next when one of their answers ends its part
 * (NULL: the phase's answers never end it by themselves). */
typedef struct {
    const pf_search_kind_t *kinds;
    void (*over)(pf_search_t *s, const pf_search_owner_t *owner);
} search_phase_t;

static const search_phase_t phases[] = {
    {pf_search_tap_kinds, tap_job_over},
    {pf_search_partition_kinds, dp_job_over},
    {pf_search_map_kinds, probe_over},
    {pf_search_sim_kinds, simulation_over},
};

/* The descriptor of kind k and the phase that issues it; NULL for a kind the search never
 * issues (NOOP). */
static const pf_search_kind_t *kind_of(pf_job_kind_t k, const search_phase_t **phase)
{
    for (size_t p = 0; p < sizeof phases / sizeof phases[0]; p++)
        for (const pf_search_kind_t *d = phases[p].kinds; d->describe; d++)
            if (d->kind == k) {
                if (phase)
                    *phase = &phases[p];
                return d;
            }
    return NULL;
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

/* ---- options ---- */

/* The options with their defaults filled in. */
static pf_search_opts_t resolved(const pf_search_opts_t *opts)
{
    pf_search_opts_t o = *opts;
    if (o.microbatches <= 0)
        o.microbatches = PF_DEFAULT_MICROBATCHES;
    return o;
}

/* The tensor-parallel degrees to try, ascending. */
static int tp_degrees(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                      int *out)
{
    int list[PF_SEARCH_MAX_TP_DEGREES], k = 0;
    int n = pf_tp_groups_degrees(c, o->tp_across_hosts, list, PF_SEARCH_MAX_TP_DEGREES);
    int weights = 0;
    for (int v = 0; v < pf_graph_nops(g) && !weights; v++)
        weights = pf_graph_op(g, v)->weight.ndim > 0;
    for (int i = 0; i < n; i++) {
        int T = list[i], paired = !o->nblock_pairs;
        for (int j = 0; j < o->nblock_pairs; j++)
            paired |= o->block_pairs[j][1] == T;
        if (paired && (o->tp ? T == o->tp : (T == 1 || (weights && T <= o->max_tp))))
            out[k++] = T;
    }
    return k;
}

/* The options' own ranges, before anything is derived from them. */
static int check_ranges(const pf_search_opts_t *o, int D, char *err, size_t errlen)
{
    if (o->stages < 0 || o->replicas < 0 || o->stages > D || o->replicas > D)
        return pf_fail(err, errlen, PF_EINPUT, "stages / replicas: must lie in [1, %d]", D);
    if (o->stages && o->replicas && (long long)o->stages * o->replicas > D)
        return pf_fail(err, errlen, PF_EINPUT, "stages x replicas: %d exceeds %d devices",
                       o->stages * o->replicas, D);
    if (o->coarsen_k > 0 && o->stages > o->coarsen_k)
        return pf_fail(err, errlen, PF_EINPUT,
                       "coarsen_k: K = %d hyper-ops cannot make %d stages (K must be >= S)",
                       o->coarsen_k, o->stages);
    if (o->schedules & ~((1u << PF_SCHEDULE_1F1B) | (1u << PF_SCHEDULE_GPIPE) |
                         (1u << PF_SCHEDULE_EAGER_1F1B)))
        return pf_fail(err, errlen, PF_EINPUT, "schedules: mask 0x%x names a schedule other "
                       "than 1f1b, gpipe and eager-1f1b", o->schedules);
    if (o->nalphas <= 0 || o->nalphas > PF_SEARCH_MAX_ALPHAS || o->candidates <= 0 ||
        o->probes_in_flight <= 0 || o->probes_in_flight > PF_SEARCH_MAX_IN_FLIGHT ||
        !(o->rel_eps > 0) || o->probe_timeouts < 0)
        return pf_fail(err, errlen, PF_EINPUT,
                       "search options: need 1-%d alphas, candidates >= 1, 1-%d probes in "
                       "flight, rel_eps > 0, probe time-outs >= 0",
                       PF_SEARCH_MAX_ALPHAS, PF_SEARCH_MAX_IN_FLIGHT);
    return PF_OK;
}

/* Adds R to the sorted set rs (n entries, at most cap). */
static void add_replicas(long long *rs, int *n, int cap, long long R)
{
    int i = 0;
    while (i < *n && rs[i] < R)
        i++;
    if ((i < *n && rs[i] == R) || *n == cap)
        return;
    memmove(rs + i + 1, rs + i, (size_t)(*n - i) * sizeof *rs);
    rs[i] = R;
    (*n)++;
}

/* Does the global batch fill `per` samples per micro-batch step, or C x it (sub-sequences on
 * d x C replicas, blockcpep.h) for a context parallelism C the request fixes or lets the block
 * search choose? */
static int batch_ok(const pf_search_opts_t *o, int D, long long per)
{
    int lo = o->context_parallel > 0 ? o->context_parallel : 1;
    int hi = o->context_parallel > 0 ? lo : pf_search_blocks_wanted(o) ? D : 1;
    for (int C = lo; C <= hi; C++)
        if (D % C == 0 && (o->global_batch * C) % per == 0)
            return 1;
    return 0;
}

/* With a global batch, some (S, R, T) must make a whole number of micro-batches. A batch none
 * makes is bad input (the user can pick another), so the message lists what the layouts reach:
 * the multiples of micro-batch x R for every replica count R they have. */
static int check_global_batch(const pf_graph_t *g, const pf_search_opts_t *o, int D,
                              const int *degrees, int nt, char *err, size_t errlen)
{
    int ok = 0, list[64], nr = 0;
    long long mb = pf_graph_microbatch(g), rs[32];
    if (!o->global_batch)
        return PF_OK;
    for (int i = 0; i < nt && !ok; i++) {
        int Dg = D / degrees[i];
        int ns = pf_search_partition_stage_counts(o, Dg, pf_graph_nops(g), list);
        for (int k = 0; k < ns && !ok; k++) {
            long long R = o->replicas ? o->replicas : Dg / list[k];
            ok = R > 0 && batch_ok(o, D, mb * R);
            if (R > 0)
                add_replicas(rs, &nr, 32, R);
        }
    }
    if (ok)
        return PF_OK;
    char reach[256] = "";
    for (int i = 0, at = 0; i < nr && at < (int)sizeof reach - 1; i++)
        at += snprintf(reach + at, sizeof reach - (size_t)at, "%s%lld", i ? ", " : "", mb * rs[i]);
    return pf_fail(err, errlen, PF_EINPUT,
                   "global_batch: no (stages, replicas, tensor-parallel degree) gives %lld "
                   "samples per step (micro-batch %lld x micro-batches x replicas); reachable: "
                   "a multiple of %s", o->global_batch, mb, reach[0] ? reach : "nothing");
}

/* Per-stage degrees share the step's micro-batches out among each stage's replicas: the step
 * must be a whole number of the graph's micro-batches. */
static int check_stage_degrees(const pf_graph_t *g, const pf_search_opts_t *o, char *err,
                               size_t errlen)
{
    long long mb = pf_graph_microbatch(g);
    if (!o->stage_degrees)
        return PF_OK;
    if (!o->global_batch)
        return pf_fail(err, errlen, PF_EINPUT, "stage_degrees: needs global_batch (the step's "
                       "micro-batches are what each stage's replicas share)");
    if (o->global_batch % mb || o->global_batch / mb > 1 << 20)
        return pf_fail(err, errlen, PF_EINPUT, "stage_degrees: global_batch %lld is not a "
                       "multiple of the graph's micro-batch %lld (or more than 2^20 of them)",
                       o->global_batch, mb);
    return PF_OK;
}

int pf_search_validate(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *opts,
                       char *err, size_t errlen)
{
    pf_search_opts_t o = resolved(opts);
    int D = pf_cluster_ndevices(c), stages_list[64];
    int rc = check_ranges(&o, D, err, errlen);
    if (rc != PF_OK || (rc = pf_search_blocks_check(&o, err, errlen)) != PF_OK)
        return rc;
    int nst = pf_search_partition_stage_counts(&o, D, pf_graph_nops(g), stages_list);
    if (nst == 0 || stages_list[0] < 1)
        return pf_fail(err, errlen, PF_EINPUT, "no (stages, replicas) fits %d devices", D);
    if ((rc = pf_training_check(&o.train, err, errlen)) != PF_OK)
        return rc;
    if (o.tp < 0 || o.max_tp < 1 || o.global_batch < 0)
        return pf_fail(err, errlen, PF_EINPUT, "tp, max_tp, global_batch: out of range");
    if (!(o.mem_headroom >= 0 && o.mem_headroom < 1))
        return pf_fail(err, errlen, PF_EINPUT, "mem_headroom: %g is not in [0, 1)",
                       o.mem_headroom);
    int degrees[PF_SEARCH_MAX_TP_DEGREES], nt = tp_degrees(g, c, &o, degrees);
    if (nt == 0)
        return pf_fail(err, errlen, PF_EINPUT, "tp: %d does not divide the devices of every "
                       "host of cluster %s%s", o.tp, pf_cluster_name(c),
                       o.tp_across_hosts ? "" : " (groups stay inside a host)");
    if ((rc = check_global_batch(g, &o, D, degrees, nt, err, errlen)) != PF_OK ||
        (rc = check_stage_degrees(g, &o, err, errlen)) != PF_OK)
        return rc;
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

/* Nothing to partition: why. */
static int nothing_to_partition(const pf_search_t *s, char *err, size_t errlen)
{
    char why[400];
    if (pf_search_partition_degrees_why(s, why, sizeof why))
        return pf_fail(err, errlen, PF_EINFEASIBLE, "%s", why);
    if (s->o.global_batch)
        return pf_fail(err, errlen, PF_EINFEASIBLE,
                       "global_batch: no (stages, replicas, tensor-parallel degree) gives %lld "
                       "samples per step (micro-batch %d x micro-batches x replicas)",
                       s->o.global_batch, pf_graph_microbatch(s->g));
    return pf_fail(err, errlen, PF_EINPUT, "no (stages, replicas) fits %d devices", s->ndev);
}

/* The graph at the block search's micro-batch (and context / expert parallelism): g itself, or
 * *owned (price.h, cpep.h). */
static int at_microbatch(const pf_graph_t *g, const pf_search_blocks_t *blocks,
                         pf_graph_t **owned, char *err, size_t errlen)
{
    *owned = NULL;
    if (!blocks->present)
        return PF_OK;
    const pf_blockcost_cand_t *c = &blocks->best[0].cand;
    if (c->cp > 1 || c->ep > 1) /* one device's sub-sequences and experts (cpep.h) */
        return pf_cpep_graph(g, c->b, c->cp > 1 ? c->cp : 1, c->ep > 1 ? c->ep : 1, owned, err,
                             errlen);
    if (c->b == pf_graph_microbatch(g))
        return PF_OK;
    return pf_price_microbatch(g, c->b, owned, err, errlen);
}

/* The block-level pre-phase. Left to the search (block_search -1, nothing of its own asked),
 * a cluster of several GPU kinds (the analytic model prices one), a graph without repeated
 * blocks (PF_EINPUT: a global batch is given) or without a fitting block candidate goes to the
 * op-level search instead, which weighs each device's kind and may cut inside a block. */
static int blocks_first(const pf_graph_t *g, const pf_cluster_t *c,
                        const pf_search_opts_t *request, pf_search_opts_t *fixed,
                        pf_search_blocks_t *blocks, pf_graph_t **owned, char *err, size_t errlen)
{
    bool asked = pf_search_blocks_asked(request);
    int rc = PF_EINPUT;
    if (asked || pf_devkinds_one(c)) {
        rc = pf_search_blocks_fix(g, c, fixed, blocks, err, errlen);
        if (rc == PF_OK)
            return at_microbatch(g, blocks, owned, err, errlen);
    }
    if (asked || (rc != PF_EINPUT && rc != PF_EINFEASIBLE))
        return rc;
    *fixed = *request;
    fixed->block_search = 0;
    memset(blocks, 0, sizeof *blocks);
    if (err && errlen)
        err[0] = '\0';
    return PF_OK;
}

pf_search_t *pf_search_new(const pf_graph_t *request_g, const pf_cluster_t *c,
                           const pf_search_opts_t *request, char *err, size_t errlen)
{
    /* the block-level pre-phase fixes (S, T, R), the micro-batch, recomputation and ZeRO first */
    pf_search_opts_t fixed = *request;
    pf_search_blocks_t blocks;
    pf_graph_t *owned = NULL;
    pf_search_t *s = NULL;
    memset(&blocks, 0, sizeof blocks);
    if (pf_search_blocks_check(request, err, errlen) != PF_OK)
        return NULL;
    if (pf_search_blocks_wanted(request) &&
        blocks_first(request_g, c, request, &fixed, &blocks, &owned, err, errlen) != PF_OK)
        return NULL;
    const pf_graph_t *g = owned ? owned : request_g;
    const pf_search_opts_t *opts = &fixed;
    pf_search_opts_t o = resolved(opts);
    int degrees[PF_SEARCH_MAX_TP_DEGREES];
    if (pf_search_validate(g, c, opts, err, errlen) != PF_OK)
        goto fail;
    pf_cost_model_t cm;
    pf_cost_model_init(&cm, c, 1, o.microbatches, o.flat_gbps);
    if (!(s = calloc(1, sizeof *s))) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    s->g = g;
    s->owned_g = owned;
    owned = NULL;
    s->c = c;
    s->o = o;
    s->ndev = pf_cluster_ndevices(c);
    s->flat_gbps = cm.flat_gbps;
    s->blocks = blocks;
    s->phase = PF_PHASE_PARTITION;
    s->sim.schedules = o.schedules ? o.schedules
                                   : (1u << PF_SCHEDULE_1F1B) | (1u << PF_SCHEDULE_GPIPE) |
                                         (1u << PF_SCHEDULE_EAGER_1F1B);
    int nt = tp_degrees(g, c, &o, degrees);
    if (pf_search_partition_init(s, err, errlen) != PF_OK ||
        start_degrees(s, degrees, nt, err, errlen) != PF_OK)
        goto fail;
    if (s->part.ndp == 0 && s->tap.tp_left == 0) {
        nothing_to_partition(s, err, errlen);
        goto fail;
    }
    return s;
fail:
    pf_graph_destroy(&owned);
    pf_search_destroy(&s);
    return NULL;
}

const pf_graph_t *pf_search_graph(const pf_search_t *s)
{
    return s->g;
}

void pf_search_destroy(pf_search_t **sp)
{
    if (!sp || !*sp)
        return;
    pf_search_t *s = *sp;
    pf_search_sim_clear(s);
    pf_search_map_clear(s);
    pf_search_partition_clear(s);
    pf_search_tap_clear(s);
    free(s->jobs);
    free(s->queue);
    free(s->cancelled);
    pf_plan_destroy(&s->result);
    pf_graph_destroy(&s->owned_g);
    free(s);
    *sp = NULL;
}

/* ---- the driver's side ---- */

int pf_search_job(const pf_search_t *s, uint64_t id, pf_job_t *job)
{
    const job_rec_t *j = pf_search_queue_record(s, id);
    const pf_search_kind_t *k = j ? kind_of(j->kind, NULL) : NULL;
    if (!k || (j->state != J_OUT && j->state != J_QUEUED))
        return 0;
    pf_job_init(job, j->kind);
    job->graph = s->g;
    job->cluster = s->c;
    k->describe(s, &j->owner, job);
    return 1;
}

int pf_search_next_job(pf_search_t *s, uint64_t *id, pf_job_t *job)
{
    uint64_t next = pf_search_queue_next(s);
    if (!next)
        return 0;
    *id = next;
    return pf_search_job(s, next, job);
}

/* The answer's form, by the kind's check against its job (job filled in). */
static int check_form(const pf_search_t *s, uint64_t id, const pf_job_result_t *res,
                      pf_job_t *job, char *err, size_t errlen)
{
    if (!pf_search_queue_record(s, id))
        return pf_fail(err, errlen, PF_EINPUT, "job %llu is not one of this search's",
                       (unsigned long long)id);
    if (!pf_search_job(s, id, job))
        return pf_fail(err, errlen, PF_EINPUT, "job %llu is no longer wanted",
                       (unsigned long long)id);
    return pf_job_check_answer(job, res, err, errlen);
}

static const pf_search_rerun_t *rerun_of(pf_job_kind_t kind)
{
    for (const pf_search_rerun_t *x = pf_search_sim_reruns; x->kind != PF_JOB_KIND_COUNT; x++)
        if (x->kind == kind)
            return x;
    return NULL;
}

int pf_search_check_answer_deferred(const pf_search_t *s, uint64_t id, const pf_job_result_t *res,
                                    pf_job_t *job, bool *rerun, char *err, size_t errlen)
{
    *rerun = false;
    int rc = check_form(s, id, res, job, err, errlen);
    if (rc != PF_OK)
        return rc;
    const job_rec_t *j = pf_search_queue_record(s, id);
    const pf_search_kind_t *k = kind_of(j->kind, NULL);
    if (k->failed && res->status != PF_OK)
        return pf_fail(err, errlen, PF_EINPUT, "the %s failed at its worker: %s", k->failed,
                       res->error);
    if (k->verify && res->status == PF_OK)
        return k->verify(s, &j->owner, job, res, err, errlen);
    const pf_search_rerun_t *x = rerun_of(j->kind);
    *rerun = x && res->status == PF_OK && x->rerun(s, &j->owner, res);
    return PF_OK;
}

int pf_search_check_rerun(const pf_search_t *s, uint64_t id, const pf_job_result_t *res,
                          const pf_job_result_t *own, char *err, size_t errlen)
{
    const job_rec_t *j = pf_search_queue_record(s, id);
    const pf_search_rerun_t *x = j ? rerun_of(j->kind) : NULL;
    if (!x)
        return pf_fail(err, errlen, PF_EINPUT, "job %llu is not re-run", (unsigned long long)id);
    return x->agree(res, own, err, errlen);
}

int pf_search_check_answer(const pf_search_t *s, uint64_t id, const pf_job_result_t *res,
                           char *err, size_t errlen)
{
    pf_job_t job;
    bool rerun;
    int rc = pf_search_check_answer_deferred(s, id, res, &job, &rerun, err, errlen);
    if (rc != PF_OK || !rerun)
        return rc;
    pf_job_result_t own;
    if (pf_job_run(&job, &own) != PF_OK)
        rc = pf_fail(err, errlen, PF_EINPUT, "the answer could not be re-run here: %s",
                     own.error);
    else
        rc = pf_search_check_rerun(s, id, res, &own, err, errlen);
    pf_job_result_clear(&own);
    return rc;
}

int pf_search_answer(pf_search_t *s, uint64_t id, const pf_job_result_t *res)
{
    job_rec_t *j = pf_search_queue_record(s, id);
    pf_job_t job;
    if (!j || j->state != J_OUT || !res || res->kind != j->kind)
        return 0;
    if (pf_search_queue_stopped(s))
        return 0;
    if (check_form(s, id, res, &job, NULL, 0) != PF_OK)
        return 0; /* not an answer: the job stays outstanding for the driver to send again */
    j->state = J_ANSWERED;
    s->answered++;
    const search_phase_t *phase;
    const pf_search_kind_t *k = kind_of(j->kind, &phase);
    if (k->failed && res->status != PF_OK)
        pf_search_queue_fail(s, res->status, "%s failed: %s", k->failed, res->error);
    else if (k->absorb(s, id, &j->owner, res) && phase->over)
        phase->over(s, &j->owner);
    return 1;
}

void pf_search_job_failed(pf_search_t *s, uint64_t id, const char *error)
{
    job_rec_t *j = pf_search_queue_record(s, id);
    if (!j || j->state != J_OUT)
        return;
    j->state = J_ANSWERED;
    pf_search_queue_fail(s, PF_ERR, "a job failed on every worker that ran it: %s", error);
}

void pf_search_cancel(pf_search_t *s, const char *why)
{
    pf_search_queue_fail(s, PF_ERR, "%s", why ? why : "cancelled");
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
    return pf_search_queue_stopped(s);
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
    double full_ms;
    if (s->result)
        st->best_objective_ms = s->result->objective_ms;
    else if ((s->phase == PF_PHASE_MAP || s->phase == PF_PHASE_SIMULATE) &&
             pf_search_map_leading(s, &full_ms) >= 0)
        st->best_objective_ms = full_ms;
}

int pf_search_result(pf_search_t *s, pf_plan_t **plan, char *err, size_t errlen)
{
    *plan = NULL;
    if (s->phase == PF_PHASE_FAILED)
        return pf_fail(err, errlen, s->status ? s->status : PF_ERR, "%s", s->error);
    if (s->phase != PF_PHASE_DONE)
        return pf_fail(err, errlen, PF_ERR, "search not finished");
    if (!s->result->blocks.present) /* a per-stage-degree plan: the others have theirs */
        pf_search_blocks_to_plan(&s->blocks, s->result, 0);
    *plan = s->result;
    s->result = NULL;
    return PF_OK;
}
