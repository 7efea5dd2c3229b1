/* client_proto: what clients send (SUBMIT, STATUS, RESULT_REQ, CANCEL_REQ, LIST) and the
 * replies. SUBMIT goes to broker/intake.h; the others look the request up (broker/requests.h,
 * recalled from the journal when evicted) and answer with its status (broker/publish.h).
 * Called by the loop only. */
#ifndef PF_BROKER_CLIENT_PROTO_H
#define PF_BROKER_CLIENT_PROTO_H

#include "broker/broker_state.h"

void pf_client_proto_on_msg(pf_broker_t *b, peer_t *p, pf_wire_msg_t kind, const uint8_t *data,
                            size_t len);

#endif
