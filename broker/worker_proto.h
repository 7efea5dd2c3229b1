/* worker_proto: what workers send (READY, HEARTBEAT, RESULT, FAILED, FETCH, BYE), jobs out to
 * them, and the dispatch core's events about workers (cancel a copy, a worker gone silent). A
 * checked answer goes to its request (broker/requests.h); an answer to a job of no request to
 * the test seam (broker/testseam.h). Called by the loop only. */
#ifndef PF_BROKER_WORKER_PROTO_H
#define PF_BROKER_WORKER_PROTO_H

#include "broker/broker_state.h"

void pf_worker_proto_on_msg(pf_broker_t *b, peer_t *p, pf_wire_msg_t kind, const uint8_t *data,
                            size_t len);
/* A job the dispatch core assigned, to its worker (or taken back when no longer wanted). */
void pf_worker_proto_send_job(pf_broker_t *b, const pf_dispatch_assign_t *a);
/* dispatch events */
void pf_worker_proto_on_cancel(void *ctx, void *worker_user, uint64_t job_id);
void pf_worker_proto_on_dead(void *ctx, void *worker_user);
/* A re-run the helper thread is done with (broker/prep.h, PF_PREP_RERUN): the answer it checked
 * goes to its request, or is one failed attempt of its job on that worker. */
struct pf_prep_task;
void pf_worker_proto_rerun_back(pf_broker_t *b, struct pf_prep_task *t);

#endif
