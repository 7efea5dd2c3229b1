/* lanes: a request's jobs on their way to the dispatch core. Jobs wait in their client's lane
 * (broker/fair.h) until the loop hands the dispatch core as many as it has free credits for;
 * a cancelled job leaves its lane or the dispatch core, and a job that left the dispatch core
 * frees its lane's quota. Calls broker/fair.h and broker/dispatch.h only. */
#ifndef PF_BROKER_LANES_H
#define PF_BROKER_LANES_H

#include "broker/broker_state.h"

/* A job's dispatch id: the request's number in the high half, the search's job id below. */
uint64_t pf_lanes_job_id(const request_t *r, uint64_t search_id);
/* Search job sid of r into its client's lane. PF_OK, or PF_ERR (out of memory). */
int pf_lanes_queue(pf_broker_t *b, request_t *r, uint64_t sid, const pf_job_t *job);
void pf_lanes_cancel(pf_broker_t *b, uint64_t job_id);
void pf_lanes_cancel_owner(pf_broker_t *b, request_t *r); /* every job of r */
/* The dispatch core may have let go of job_id (answered, failed): its lane's quota follows. */
void pf_lanes_job_left(pf_broker_t *b, uint64_t job_id);

#endif
