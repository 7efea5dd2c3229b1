/* peers: the peer registry (ROUTER identity -> peer_t) and sending to one peer. A send that
 * finds a worker gone marks it; pf_peers_drop_gone takes such workers out of the dispatch core
 * after the operation that found them. Calls no other file of the broker. */
#ifndef PF_BROKER_PEERS_H
#define PF_BROKER_PEERS_H

#include "broker/broker_state.h"

void pf_peers_item_free(void **item); /* the peers table's destructor */
/* The peer with this identity, created (PEER_NEW) on first sight; NULL when out of memory. */
peer_t *pf_peers_get(pf_broker_t *b, const uint8_t *id, size_t len);
void pf_peers_drop(pf_broker_t *b, peer_t *p); /* forgets p (and frees it) */
/* A worker taken out of the dispatch core without saying BYE: remembered as PEER_GONE. */
void pf_peers_bury(peer_t *p);
/* A message the broker will not serve: counted always, logged once per peer. */
void pf_peers_malformed(pf_broker_t *b, peer_t *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* PF_OK, or PF_ERR: not sent (out of memory, the peer is gone or does not read). */
int pf_peers_send(pf_broker_t *b, peer_t *p, pf_wire_msg_t kind, const ProtobufCMessage *m);
void pf_peers_send_error(pf_broker_t *b, peer_t *p, int status, const char *msg);
void pf_peers_send_bye(pf_broker_t *b, peer_t *p, const char *reason);
/* Workers a send found unreachable leave the dispatch core (their jobs go to others). */
void pf_peers_drop_gone(pf_broker_t *b);

#endif
