/* client: the client side of the broker protocol (submit, status, result, cancel, list). One
 * request at a time on a DEALER socket, one reply per request, with a timeout. After a timeout
 * the socket is closed and a new one is made for the next request (zguide ch. 4, Lazy Pirate),
 * so a late reply is never taken for the answer to a later question. */
#ifndef PF_CLIENT_H
#define PF_CLIENT_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/search/search.h"
#include "proto/curve.h"
#include "proto/job_codec.h"

#include <stddef.h>

typedef struct pf_client pf_client_t;

/* No traffic yet: a broker that is not there shows at the first call. Plain: the endpoint must
 * be local (proto/curve.h). */
pf_client_t *pf_client_new(const char *endpoint, int timeout_ms, char *err, size_t errlen);
/* With CurveZMQ keys (own cert, the broker's public cert) or --insecure; sec NULL: as
 * pf_client_new. */
pf_client_t *pf_client_new_secure(const char *endpoint, int timeout_ms,
                                  const pf_curve_opts_t *sec, char *err, size_t errlen);
void pf_client_destroy(pf_client_t **c);

/* Send one message and wait for the reply of kind `want`. PF_OK and the reply's body (valid until
 * the next call); an ErrorReply becomes its status and message; PF_ERR "no broker at E: timed out
 * after N s" when nothing comes back. */
int pf_client_call(pf_client_t *c, pf_wire_msg_t kind, const ProtobufCMessage *req,
                   pf_wire_msg_t want, const uint8_t **body, size_t *len, char *err, size_t errlen);

/* Typed requests; *out is freed with the matching planfarm__*__free_unpacked. */
int pf_client_submit(pf_client_t *c, const pf_graph_t *g, const pf_cluster_t *cl,
                     const pf_search_opts_t *o, const char *label, Planfarm__RequestStatus **out,
                     char *err, size_t errlen);
/* Priority of the requests submitted from now on: among one client's requests, jobs of higher
 * ones go to workers first (broker/fair.h); default 0. */
void pf_client_set_priority(pf_client_t *c, int priority);
int pf_client_status(pf_client_t *c, const char *id, Planfarm__RequestStatus **out, char *err,
                     size_t errlen);
int pf_client_result(pf_client_t *c, const char *id, Planfarm__ResultReply **out, char *err,
                     size_t errlen);
int pf_client_cancel(pf_client_t *c, const char *id, Planfarm__RequestStatus **out, char *err,
                     size_t errlen);
int pf_client_list(pf_client_t *c, Planfarm__ListReply **out, char *err, size_t errlen);

/* This client's token for the status page of its broker (broker/http.h): derived from its
 * secret key and the broker's public key, no broker asked. PF_EINPUT without keys. */
int pf_client_http_token(const pf_client_t *c, char out[PF_CURVE_TOKEN_TXT], char *err,
                         size_t errlen);

#endif
