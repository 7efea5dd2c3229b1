/* dispatch: the broker's job bookkeeping without sockets or clocks (the caller passes `now` and
 * calls pf_dispatch_tick once per heartbeat interval), so
 * credit accounting, re-queueing and poisoning are unit-tested without a network.
 *
 *   queue     FIFO of jobs waiting for a worker; a job that comes back (worker died, deadline,
 *             FAILED) goes to the front, with one more attempt counted
 *   workers   each holds at most `credits` jobs (READY says how many); a job goes to the
 *             least-loaded worker with a free credit that runs its kind
 *   held      a worker's jobs, live or cancelled: a cancelled job keeps its credit until the
 *             worker answers for it (RESULT or FAILED), so a worker is never sent more than it
 *             agreed to hold, and a job is never sent to a worker that still holds a copy of it
 *   attempts  a worker death, a passed deadline or a FAILED counts one, and marks that worker as
 *             one the job failed on: the retry goes to a worker that has not failed it whenever
 *             one of its kind is connected (waiting for its credit). At max_attempts the job is
 *             poisoned, and its owner told (the request fails with that job's error), once it
 *             failed on max_attempts distinct workers or no worker it has not failed on is left
 *             ("failed 3 times on 1 worker")
 *
 * Jobs are pure (DESIGN.md "The search"): a late answer from a worker whose copy was cancelled is
 * still accepted while the job is outstanding, and any second answer is ignored. */
#ifndef PF_DISPATCH_H
#define PF_DISPATCH_H

#include "planner/search/job.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pf_dispatch pf_dispatch_t;

/* What the dispatch core asks of its owner (the broker, or a test). */
typedef struct {
    void *ctx;
    /* Tell a worker to drop a job it holds (a passed deadline, a job nobody needs any more). */
    void (*cancel)(void *ctx, void *worker_user, uint64_t job_id);
    /* A job failed max_attempts times; it has been removed. */
    void (*poisoned)(void *ctx, void *owner, uint64_t owner_job, uint64_t job_id,
                     const char *error);
    /* A worker stayed silent for `liveness` ticks; its jobs are back in the queue and its
     * handle is no longer valid. */
    void (*worker_dead)(void *ctx, void *worker_user);
} pf_dispatch_events_t;

typedef struct {
    int max_attempts; /* default 3 */
    /* Ticks (the owner's heartbeat intervals) a worker may stay silent; dead at the next one.
     * Counted in the owner's own ticks, not in seconds: an owner that was busy (a large message)
     * or not scheduled ticks late, and its workers are not blamed for the time it lost. */
    int liveness; /* default 5 */
} pf_dispatch_opts_t;

void pf_dispatch_opts_init(pf_dispatch_opts_t *o);

pf_dispatch_t *pf_dispatch_new(const pf_dispatch_opts_t *o, const pf_dispatch_events_t *ev);
void pf_dispatch_destroy(pf_dispatch_t **d);

/* ---- workers (handles are small ints, reused after a worker is removed) ---- */

/* kinds: bit (1 << pf_job_kind_t) for each kind it runs. Returns the handle or PF_ERR. */
int pf_dispatch_worker_add(pf_dispatch_t *d, int credits, unsigned kinds, void *user);
/* Any message from the worker: it is not silent in the current tick. */
void pf_dispatch_worker_seen(pf_dispatch_t *d, int w);
/* Gone (BYE, unreachable): its live jobs go back to the queue, one attempt counted each. */
void pf_dispatch_worker_remove(pf_dispatch_t *d, int w, const char *why);
int pf_dispatch_worker_held(const pf_dispatch_t *d, int w); /* jobs held, cancelled included */
/* Does worker w hold job id? 1: the live copy (the current attempt was sent to w), 0: a copy
 * since cancelled, -1: no copy (never sent to w, answered, or w is not a worker). */
int pf_dispatch_holds(const pf_dispatch_t *d, int w, uint64_t id);
/* Ids of the jobs w holds, live or cancelled (at most max); the count. */
int pf_dispatch_worker_jobs(const pf_dispatch_t *d, int w, uint64_t *ids, int max);
int pf_dispatch_workers(const pf_dispatch_t *d);             /* live workers */

/* ---- jobs ---- */

/* Queue a job. id: unique and > 0, chosen by the caller; owner and owner_job are handed back
 * with answers; timeout_s: how long one worker may hold it. PF_OK, or PF_ERR (duplicate id,
 * out of memory). */
int pf_dispatch_submit(pf_dispatch_t *d, uint64_t id, pf_job_kind_t kind, double timeout_s,
                       void *owner, uint64_t owner_job);

typedef struct {
    uint64_t job_id;
    pf_job_kind_t kind;
    uint32_t attempt; /* 0 on the first send */
    int worker;
    void *worker_user;
    void *owner;
    uint64_t owner_job;
} pf_dispatch_assign_t;

/* The next (job, worker) pair: the queue head to the least-loaded worker with a free credit.
 * true and *a filled (the job now counts against that worker), false when nothing can go. */
bool pf_dispatch_next(pf_dispatch_t *d, double now, pf_dispatch_assign_t *a);

/* Owner of an outstanding job: true and *owner / *owner_job, false when the job is not
 * outstanding. */
bool pf_dispatch_job_owner(pf_dispatch_t *d, uint64_t id, void **owner, uint64_t *owner_job);

/* A RESULT for job id from worker w (-1: from a peer that is no longer a worker). Frees w's
 * credit for it. true when the answer is to be used (the job was outstanding; it is removed and
 * any other worker holding it is sent a cancel), false when it is to be ignored. */
bool pf_dispatch_result(pf_dispatch_t *d, int w, uint64_t id);

/* A FAILED from worker w: frees the credit; when w held the live copy, one attempt is counted and
 * the job is queued again or poisoned. true when it counted, false when ignored. */
bool pf_dispatch_failed(pf_dispatch_t *d, int w, uint64_t id, const char *error);

/* The owner no longer needs the job: dropped from the queue, or its worker is sent a cancel. */
void pf_dispatch_cancel(pf_dispatch_t *d, uint64_t id);
/* Every outstanding job of this owner. */
void pf_dispatch_cancel_owner(pf_dispatch_t *d, void *owner);

/* One heartbeat interval of the owner. Deadlines: a job past its deadline at `now` is cancelled
 * at its worker and queued again (one attempt). Liveness: a worker that sent nothing since the
 * last `liveness` ticks is removed. */
void pf_dispatch_tick(pf_dispatch_t *d, double now);

typedef struct {
    long long queued, running; /* running: live copies held by workers */
    int workers, credits, credits_free;
    long long dispatched, answered, requeued, poisoned, late_accepted, ignored;
} pf_dispatch_stats_t;

void pf_dispatch_get_stats(const pf_dispatch_t *d, pf_dispatch_stats_t *st);
/* Jobs of one owner that wait in the queue and that workers hold. */
void pf_dispatch_owner_counts(pf_dispatch_t *d, const void *owner, long long *queued,
                              long long *running);

/* Jobs by kind (for the broker's /metrics): waiting in the queue, live copies held by workers,
 * and answered since the core was made. */
typedef struct {
    long long queued[PF_JOB_KIND_COUNT], running[PF_JOB_KIND_COUNT], answered[PF_JOB_KIND_COUNT];
} pf_dispatch_kind_counts_t;
void pf_dispatch_kind_counts(pf_dispatch_t *d, pf_dispatch_kind_counts_t *k);

/* A job a worker holds: its kind, the `now` that the pf_dispatch_next which sent its live copy
 * was given, and the worker holding that copy (the broker times answers with these). false when
 * the job is queued or not outstanding. */
bool pf_dispatch_job_sent(pf_dispatch_t *d, uint64_t id, pf_job_kind_t *kind, double *sent_at,
                          int *worker);

#endif
