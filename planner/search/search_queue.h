/* search_queue: the jobs of one search (search_state.h), the lowest of the search's files: a
 * job's record and id, the queue of jobs waiting to be issued, the outstanding jobs whose answers
 * are no longer wanted, and the search's failure, which cancels every job. It calls no phase. */
#ifndef PF_SEARCH_QUEUE_H
#define PF_SEARCH_QUEUE_H

#include "planner/search/search_state.h"

#include <stdbool.h>
#include <stdint.h>

/* A new job of the kind for owner, queued; its id, or 0 when out of memory. */
uint64_t pf_search_queue_job(pf_search_t *s, pf_job_kind_t kind, pf_search_owner_t owner);
/* The record of job id; NULL when id is not one of this search's. */
job_rec_t *pf_search_queue_record(const pf_search_t *s, uint64_t id);
/* The next queued job, now outstanding; 0 when none is waiting. */
uint64_t pf_search_queue_next(pf_search_t *s);
/* An outstanding job is reported for cancellation; a queued one is simply never issued. */
void pf_search_queue_cancel(pf_search_t *s, uint64_t id);
/* The search is over: done, or failed. */
bool pf_search_queue_stopped(const pf_search_t *s);
/* The search fails with code and message; every job is cancelled. */
void pf_search_queue_fail(pf_search_t *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
