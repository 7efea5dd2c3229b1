/* access: who a peer is (the CURVE key its connection was admitted with) and what its roles let
 * it send and see: its own requests, a blob of a job it holds. Calls broker/peers.h only. */
#ifndef PF_BROKER_ACCESS_H
#define PF_BROKER_ACCESS_H

#include "broker/broker_state.h"

#include <stdbool.h>

/* Who sent this message (its first frame after the identity carries the connection's
 * "User-Id", the CURVE key zauth admitted): sets (*pp)->user and ->roles on first sight. A peer
 * whose routing id now comes with another key is a new peer (the old one is forgotten).
 * PF_OK, or PF_ERR: drop the message. */
int pf_access_admit(pf_broker_t *b, peer_t **pp, zmq_msg_t *frame);
/* May p send a message of this kind (its roles)? Counted and logged once when not. */
bool pf_access_may_send(pf_broker_t *b, peer_t *p, pf_wire_msg_t kind);
/* May p see (and cancel) r: its own, or p is an admin. */
bool pf_access_may_see(const peer_t *p, const request_t *r);
/* An answer for a job p was not sent: dropped, counted (b->foreign), logged once per peer. */
void pf_access_foreign_answer(pf_broker_t *b, peer_t *p, const char *what, uint64_t job_id);
/* Is this blob an input of a job that worker p holds? */
bool pf_access_may_fetch(pf_broker_t *b, peer_t *p, const uint8_t *hash, size_t len);

#endif
