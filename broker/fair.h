/* fair: which client's job goes to the dispatch core next: the clients' lanes.
 *
 * The dispatch core (broker/dispatch.h) is first come, first served: a request that queues 200
 * jobs makes a request submitted a second later wait for all of them. So the broker keeps the
 * jobs its searches issue here, in one lane per client, and hands the dispatch core only as many
 * as it has free credits for (pf_fair_pop, called by the loop before it dispatches). Lanes take
 * turns (round-robin): with one busy client and one new one, every other free credit goes to the
 * new one, whatever the first has queued. Within a lane, jobs of higher-priority requests go
 * first, then in the order they were issued.
 *
 * Quota: a lane with `max_in_flight` jobs in the dispatch core (queued there or running) gets no
 * turn until one of them ends (pf_fair_done); 0 = no quota.
 *
 * No sockets and no clock: unit-tested on its own (tests/test_fair.c). */
#ifndef PF_FAIR_H
#define PF_FAIR_H

#include "planner/search/job.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pf_fair pf_fair_t;

typedef struct {
    uint64_t id; /* the dispatch core's job id */
    pf_job_kind_t kind;
    double timeout_s;
    void *owner; /* the request */
    uint64_t owner_job;
} pf_fair_job_t;

pf_fair_t *pf_fair_new(int max_in_flight);
void pf_fair_destroy(pf_fair_t **f);

/* Queue a job in lane `client` (created on first use) with its request's priority. PF_OK or
 * PF_ERR (out of memory, duplicate id). */
int pf_fair_push(pf_fair_t *f, const char *client, int priority, const pf_fair_job_t *job);
/* The next job, round-robin over lanes that have one and are under quota: true and *job (now
 * counted in flight for its lane), false when none may go. */
bool pf_fair_pop(pf_fair_t *f, pf_fair_job_t *job);
/* A job left the dispatch core (answered, poisoned, taken back): its lane may have another. Ids
 * not in flight are ignored. */
void pf_fair_done(pf_fair_t *f, uint64_t id);
/* The owner no longer needs the job: dropped when still queued here (true), else false (it is
 * in the dispatch core, or unknown) and, if in flight, counted as done. */
bool pf_fair_cancel(pf_fair_t *f, uint64_t id);
/* Every job of the owner, queued or in flight. */
void pf_fair_cancel_owner(pf_fair_t *f, const void *owner);

long long pf_fair_queued(const pf_fair_t *f);                      /* all lanes */
long long pf_fair_owner_queued(const pf_fair_t *f, const void *owner);
int pf_fair_lane_in_flight(const pf_fair_t *f, const char *client); /* 0 for an unknown lane */

#endif
