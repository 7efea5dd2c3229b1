/* requests: a request's whole life, and the table and order that hold requests. It is created
 * (by SUBMIT or from the journal), prepared, fed to the dispatch core through its client's lane
 * while its search wants jobs, answered, cancelled, and ended: done with a plan, failed or
 * cancelled. Every change of its state is made here, and so is every journal write of that
 * state (its answers and its end; SUBMIT journals the request itself). Finished requests past
 * max_finished leave memory and are recalled from the journal when asked for.
 * Calls broker/lanes.h and broker/publish.h (a finished plan), nothing above. */
#ifndef PF_BROKER_REQUESTS_H
#define PF_BROKER_REQUESTS_H

#include "broker/broker_state.h"

#include <stdbool.h>

/* A request being prepared (state PREPARING), not yet in the table: id NULL for a fresh one
 * (128 random bits), its job ids' high half random. NULL when out of memory. */
request_t *pf_requests_new(pf_broker_t *b, const char *id, const char *label);
/* A request of the journal, not yet in the table: a finished one as it ended (state, error,
 * plan and counters), an unfinished one restored and to be prepared again. */
request_t *pf_requests_from_journal(pf_broker_t *b, const pf_journal_row_t *row);
void pf_requests_free(request_t **r);
void pf_requests_item_free(void **item); /* the requests table's destructor */
/* Into the table and the order; on failure (PF_ERR) r is freed. */
int pf_requests_insert(pf_broker_t *b, request_t *r);

request_t *pf_requests_find(pf_broker_t *b, const char *id);
/* The request with this key that is preparing, running or done, in memory or (done) in the
 * journal; NULL when there is none. */
request_t *pf_requests_find_key(pf_broker_t *b, const char *key);
/* A finished request no longer in memory, by id (or, id NULL, the newest done one with key),
 * brought back from the journal; NULL when there is none. */
request_t *pf_requests_recall(pf_broker_t *b, const char *id, const char *key);
/* Requests preparing or running (the max_running cap); of one client when client is not NULL. */
int pf_requests_running(pf_broker_t *b, const char *client);
/* Finished requests beyond max_finished go, oldest first. */
void pf_requests_evict(pf_broker_t *b);

/* Its setup ended (the helper thread's task t): the inputs, graph, cluster and search become
 * the request's and it is queued (true), or it ends failed or cancelled (false). */
bool pf_requests_start(pf_broker_t *b, request_t *r, pf_prep_task_t *t);
/* A request that ends before its search exists (bad input, cancelled while preparing). */
void pf_requests_fail_unprepared(pf_broker_t *b, request_t *r, int rc, const char *err);
/* Feed its client's lane with what the search wants now, cancel what it no longer needs, and
 * end the request when its search is done. */
void pf_requests_advance(pf_broker_t *b, request_t *r);

/* Search job sid about to go to a worker: false when the search no longer wants it, else *job
 * and the request counts as running. */
bool pf_requests_job_out(request_t *r, uint64_t sid, pf_job_t *job);
/* Does its search still want an answer for job sid? */
bool pf_requests_wants(const request_t *r, uint64_t sid);
/* A checked answer for search job sid (data: its wire bytes, journaled when the search used
 * it, in the order used), then advance. */
void pf_requests_answer(pf_broker_t *b, request_t *r, uint64_t sid, const pf_job_result_t *res,
                        const uint8_t *data, size_t len);
/* Search job sid failed max_attempts times: the search decides, then advance. */
void pf_requests_job_poisoned(pf_broker_t *b, request_t *r, uint64_t sid, const char *error);
/* A client's CANCEL. */
void pf_requests_cancel(pf_broker_t *b, request_t *r);
/* live workers now: the most a running request has seen (its plan says so). */
void pf_requests_note_workers(pf_broker_t *b, int live);

#endif
