/* publish: how a request and the broker look from outside. A request's status (the STATUS, LIST
 * and SUBMIT replies, the status page), the metrics and the request list handed to the HTTP
 * face once per heartbeat, and a finished request's plan and mapping picture handed to it once.
 * Everything here runs on the loop's thread and only reads the broker: it is called and calls
 * no other file of the broker (the loop passes in its stats). */
#ifndef PF_BROKER_PUBLISH_H
#define PF_BROKER_PUBLISH_H

#include "broker/broker_state.h"
#include "broker/broker_stats.h"

/* r as a client sees it now. */
void pf_publish_status(pf_broker_t *b, request_t *r, Planfarm__RequestStatus *m);
/* Metrics and the request list to the HTTP face (nothing without one); st: the broker's stats
 * now, agents: registered profiler agents. */
void pf_publish_pages(pf_broker_t *b, const pf_broker_stats_t *st, int agents);
/* A request that just finished with a plan: its JSON and mapping picture to the HTTP face. */
void pf_publish_plan(pf_broker_t *b, request_t *r, const pf_plan_t *plan);

#endif
