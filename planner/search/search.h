/* search: one plan request as a state machine of jobs (DESIGN.md "The search"). Pure logic, no
 * I/O: the embedded mode, the broker and the tests drive the very same code.
 *
 *   new        validate (pf_search_validate); pick the tensor-parallel degrees T (each dividing
 *              every host's devices, unless they may span hosts; only 1 when no op has a weight
 *              shape); T = 1 goes straight to partitioning, every T > 1 first to TAP
 *   tap        (phase 1, PF_PHASE_PARTITION) per T > 1 and TAP unit (tap.h) one TAP_ENUM job
 *              per slice of its 3^N plans; when a T's slices are in, its units take their best
 *              plans and the setting of T (tp_setting.h: the per-device graph, the group
 *              cluster) is built, and its DP jobs are queued
 *   dp         for each (S, T) (S x R x T = devices, or the S / R the options fix; with a global
 *              batch only the R whose micro-batch count MB = batch / (microbatch x R) is whole)
 *              coarsen once per (alpha, K) (IV-B, eq. 4) and queue one DP_PARTITION job per
 *              (S, T, alpha), alpha in {0.01, 1, 100}; one per (S, T) when K >= ops (no
 *              coarsening, so alpha plays no part). DP jobs carry the grouping; layer-aligned
 *              plans group every repeated block (training.h) into one op and do not refine.
 *   partition  (PF_PHASE_PARTITION) the DP answers come in; the best few partitions (ranked by a
 *              flat-bandwidth step estimate per sample, eq. 7 at B_flat), one per (S, T), become
 *              candidates, mapped onto the group cluster of their T
 *   map        (PF_PHASE_MAP) per candidate one binary search (Alg. 1) per instantiation: m and
 *              ar with auto_inst (skipping one whose variable term is identically zero), else the
 *              one asked for; W MAP_PROBE jobs in flight at targets splitting [t_l, t_r] evenly;
 *              each answer moves the bounds, and probes whose targets fell outside are cancelled.
 *              With auto_inst, once both are over, one more search under full starts from the
 *              better of their mappings.
 *   simulate   (PF_PHASE_SIMULATE, phase 4) each candidate keeps the better of its mappings
 *              under "full" and becomes a plan (a group becomes its T devices); for T > 1 and
 *              S > 1 one RESHARD job per stage boundary and replica times the cross-stage
 *              transfer (a replicated activation between two 1 x T meshes, [CrossMesh]); then one
 *              SIMULATE job per allowed schedule runs it through the task-graph simulator and
 *              checks its memory under that schedule's micro-batches in flight (an interleaved
 *              candidate of the block search: also without interleaving, search_state.h)
 *   done       among the (candidate, schedule) pairs that fit memory, the least simulated step
 *              time per sample wins; its plan carries that schedule and simulated_step_ms, its
 *              CS / p2p baselines (the same plan on those maps' devices, simulated) and the
 *              search's counts
 *
 * Jobs are pure functions of their inputs, so a lost answer is recovered by running the job
 * again (pf_search_job gives its description back) and duplicates are ignored. */
#ifndef PF_SEARCH_H
#define PF_SEARCH_H

#include "planner/search/job.h"
#include "planner/search/search_opts.h"

#include <stdbool.h>
#include <stdint.h>

const char *pf_search_phase_name(pf_search_phase_t p);

typedef struct {
    pf_search_phase_t phase;
    long long jobs_issued, jobs_answered, jobs_outstanding, jobs_cancelled;
    double best_objective_ms; /* objective (full) of the plan as it would be now: the leading
                               * candidate's best mapping so far; NAN before any mapping */
} pf_search_status_t;

/* The checks pf_search_new runs first: PF_OK, PF_EINPUT (bad options: the message names the
 * option field, e.g. "coarsen_k: ..."), PF_EINFEASIBLE (an op alone fits no device). */
int pf_search_validate(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                       char *err, size_t errlen);
/* A search, or NULL with the reason in err (what pf_search_validate says, or out of memory:
 * callers that need the status code call pf_search_validate first). g and c are borrowed and
 * must outlive the search. When the block-level pre-phase runs at a micro-batch other than g's
 * (--microbatch-size), the search plans a copy of g re-priced at it (pf_price_microbatch), which
 * it owns: pf_search_graph. */
pf_search_t *pf_search_new(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                           char *err, size_t errlen);
void pf_search_destroy(pf_search_t **s);
/* The graph the search plans and its jobs carry (pf_job_t.graph): g, or g re-priced at the block
 * search's micro-batch. A driver that ships the graph to workers must ship this one. */
const pf_graph_t *pf_search_graph(const pf_search_t *s);

/* The next job to run, if one is ready: returns 1 and fills *id and *job (pointers in *job stay
 * valid until the search is destroyed); 0 when nothing is ready now. Ids are unique and > 0. */
int pf_search_next_job(pf_search_t *s, uint64_t *id, pf_job_t *job);
/* Describe an issued job again (to re-send it); 0 when the id is unknown or not needed now. */
int pf_search_job(const pf_search_t *s, uint64_t id, pf_job_t *job);
/* Is res an answer to job id that may be used? The driver asks before it counts an answer from
 * elsewhere (a worker, a journal) as done: a partition must split the request's graph into the
 * stages, replicas and micro-batches the job asked for; a found mapping must be a mapping of
 * every stage replica that costs what it claims and meets the probe's target (recomputed here);
 * a SIMULATE answer that could make the plan (it fits and no simulation in beats it) is run
 * again here and must agree. A DP_PARTITION verdict (infeasible, errors) passes: it is an
 * answer. Any other kind's error status is no answer ("the <kind> failed at its worker"): only
 * that attempt failed, and the driver sends the job elsewhere. PF_EINPUT with the reason. */
int pf_search_check_answer(const pf_search_t *s, uint64_t id, const pf_job_result_t *res,
                           char *err, size_t errlen);
/* pf_search_check_answer for a driver that must not run jobs itself (the broker's loop): every
 * check but the re-run. *rerun = true when the answer is to be re-run: run *job (pf_job_run;
 * it borrows the search's inputs, so the search must outlive the run) anywhere, then pass both
 * answers to pf_search_check_rerun before pf_search_answer. */
int pf_search_check_answer_deferred(const pf_search_t *s, uint64_t id, const pf_job_result_t *res,
                                    pf_job_t *job, bool *rerun, char *err, size_t errlen);
/* PF_OK when the re-run `own` agrees with `res` (the kind's tolerance), else PF_EINPUT and why. */
int pf_search_check_rerun(const pf_search_t *s, uint64_t id, const pf_job_result_t *res,
                          const pf_job_result_t *own, char *err, size_t errlen);
/* Feed an answer: returns 1 when it was used, 0 when ignored (unknown, duplicate, cancelled, or
 * failing the kind's check of its form: that job stays outstanding). What only
 * pf_search_check_answer does (re-running a leading simulation, refusing error statuses) is the
 * driver's to ask first; an error status fed here fails the search ("<kind> failed: ..."). */
int pf_search_answer(pf_search_t *s, uint64_t id, const pf_job_result_t *res);
/* A job that could not be run at all (it failed max_attempts times, on every worker that runs
 * its kind or on max_attempts of them): the search fails with this error. */
void pf_search_job_failed(pf_search_t *s, uint64_t id, const char *error);
/* Outstanding jobs whose answers are no longer needed: up to cap ids, removed from the list. */
int pf_search_take_cancelled(pf_search_t *s, uint64_t *ids, int cap);
/* Stop the whole search (client cancel). */
void pf_search_cancel(pf_search_t *s, const char *why);

int pf_search_done(const pf_search_t *s);
void pf_search_get_status(const pf_search_t *s, pf_search_status_t *st);
/* After done: PF_OK and the plan (caller owns it), or the code and message that ended it. */
int pf_search_result(pf_search_t *s, pf_plan_t **plan, char *err, size_t errlen);

#endif
