/* intake: how a request enters the broker and comes back after a restart.
 *
 *   SUBMIT   decode the envelope, pack its three inputs, key them (pf_journal_key); a request
 *            with the same key that runs or finished done is the answer (a batch run twice plans
 *            nothing twice); otherwise journal it (committed before the reply: Titanic), reply
 *            "preparing" and hand the setup to the helper thread (broker/prep.h)
 *   prepared the search exists (broker/requests.h takes it over); a restored request gets its
 *            journaled answers back in their order, and the request runs
 *   restart  every unfinished request of the journal is prepared again; finished ones are there
 *            for STATUS and RESULT (and those evicted from memory are recalled from the journal)
 *
 * Calls broker/requests.h, broker/lanes.h, broker/publish.h, broker/access.h and
 * broker/peers.h; nothing calls back into it but the loop and the client protocol. */
#ifndef PF_BROKER_INTAKE_H
#define PF_BROKER_INTAKE_H

#include "broker/broker_state.h"

/* SUBMIT: keyed, journaled, answered "preparing", set up on the helper thread. */
void pf_intake_submit(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len);
/* Requests whose setup the helper thread finished go on (the loop polls pf_prep_sock). */
void pf_intake_prepared(pf_broker_t *b);
/* Unfinished requests of the journal prepared again, finished ones listed (pf_broker_new). */
int pf_intake_restore(pf_broker_t *b, char *err, size_t errlen);

#endif
