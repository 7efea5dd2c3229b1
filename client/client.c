#include "client/client.h"
#include "planner/core/util.h"
#include "proto/plan_options_codec.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pf_client {
    char endpoint[256];
    int timeout_ms;
    zsock_t *dealer; /* made on demand; dropped after a timeout */
    pf_curve_client_t keys;
    zmsg_t *reply;
    int priority; /* of the requests it submits */
};

pf_client_t *pf_client_new(const char *endpoint, int timeout_ms, char *err, size_t errlen)
{
    return pf_client_new_secure(endpoint, timeout_ms, NULL, err, errlen);
}

pf_client_t *pf_client_new_secure(const char *endpoint, int timeout_ms,
                                  const pf_curve_opts_t *sec, char *err, size_t errlen)
{
    if (!endpoint || !endpoint[0] || strlen(endpoint) >= 256) {
        pf_fail(err, errlen, PF_EINPUT, "bad broker endpoint");
        return NULL;
    }
    pf_client_t *c = calloc(1, sizeof *c);
    if (!c) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    snprintf(c->endpoint, sizeof c->endpoint, "%s", endpoint);
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
    if (pf_curve_client_init(&c->keys, sec, "client", c->endpoint, err, errlen) != PF_OK)
        pf_client_destroy(&c);
    return c;
}

void pf_client_destroy(pf_client_t **cp)
{
    if (!cp || !*cp)
        return;
    zsock_destroy(&(*cp)->dealer);
    zmsg_destroy(&(*cp)->reply);
    pf_curve_client_clear(&(*cp)->keys);
    free(*cp);
    *cp = NULL;
}

int pf_client_call(pf_client_t *c, pf_wire_msg_t kind, const ProtobufCMessage *req,
                   pf_wire_msg_t want, const uint8_t **body, size_t *len, char *err, size_t errlen)
{
    zmsg_destroy(&c->reply);
    if (!c->dealer) {
        c->dealer = zsock_new(ZMQ_DEALER);
        if (!c->dealer)
            return pf_fail(err, errlen, PF_ERR, "cannot create a socket");
        zsock_set_linger(c->dealer, 0);
        pf_curve_client_apply(&c->keys, c->dealer);
        if (zsock_connect(c->dealer, "%s", c->endpoint) < 0) {
            zsock_destroy(&c->dealer);
            return pf_fail(err, errlen, PF_EINPUT, "bad broker endpoint '%s'", c->endpoint);
        }
    }
    uint8_t hdr[PF_WIRE_HEADER_LEN], *buf;
    size_t n;
    pf_wire_header(kind, hdr);
    if (pf_wire_pack(req, &buf, &n) != PF_OK)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    zmsg_t *msg = zmsg_new();
    if (!msg || zmsg_addmem(msg, hdr, sizeof hdr) || zmsg_addmem(msg, buf, n) ||
        zmsg_send(&msg, c->dealer)) {
        zmsg_destroy(&msg);
        free(buf);
        return pf_fail(err, errlen, PF_ERR, "cannot send to %s", c->endpoint);
    }
    free(buf);

    zpoller_t *poller = zpoller_new(c->dealer, NULL);
    if (!poller)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    /* A Ctrl-C does not cut a call short: the caller sees zsys_interrupted afterwards and may
     * still send a CANCEL. */
    zpoller_set_nonstop(poller, true);
    void *which = zpoller_wait(poller, c->timeout_ms);
    int interrupted = !which && zsys_interrupted;
    zpoller_destroy(&poller);
    if (!which) {
        zsock_destroy(&c->dealer);
        if (interrupted)
            return pf_fail(err, errlen, PF_ERR, "interrupted");
        /* a CURVE broker that does not know our key says nothing at all (zauth) */
        return pf_fail(err, errlen, PF_ERR, "no broker at %s: timed out after %g s%s",
                       c->endpoint, c->timeout_ms / 1000.0,
                       c->keys.own ? " (or it does not list this key, or --broker-key is not "
                                     "its key)"
                                   : "");
    }
    c->reply = zmsg_recv(c->dealer);
    zframe_t *h = c->reply ? zmsg_first(c->reply) : NULL;
    zframe_t *b = c->reply ? zmsg_next(c->reply) : NULL;
    pf_wire_msg_t got;
    char herr[128];
    if (!h || !b || zmsg_size(c->reply) != 2 ||
        pf_wire_parse_header(zframe_data(h), zframe_size(h), &got, herr, sizeof herr) != PF_OK)
        return pf_fail(err, errlen, PF_ERR, "broker at %s sent an invalid reply", c->endpoint);
    if (got == PF_MSG_ERROR) {
        Planfarm__ErrorReply *e = planfarm__error_reply__unpack(NULL, zframe_size(b),
                                                                zframe_data(b));
        int rc = e && e->status < 0 ? e->status : PF_ERR;
        pf_fail(err, errlen, rc, "%s", e && e->error ? e->error : "broker error");
        planfarm__error_reply__free_unpacked(e, NULL);
        return rc;
    }
    if (got != want)
        return pf_fail(err, errlen, PF_ERR, "broker at %s answered %s to %s", c->endpoint,
                       pf_wire_msg_name(got), pf_wire_msg_name(kind));
    *body = zframe_data(b);
    *len = zframe_size(b);
    return PF_OK;
}

#define UNPACK(type, fn, body, len, out, err, errlen)                                           \
    ((*(out) = fn(NULL, len, body)) ? PF_OK                                                      \
                                    : pf_fail(err, errlen, PF_ERR, "undecodable " type " reply"))

static int call_ref(pf_client_t *c, pf_wire_msg_t kind, pf_wire_msg_t want, const char *id,
                    const uint8_t **body, size_t *len, char *err, size_t errlen)
{
    Planfarm__RequestRef m = PLANFARM__REQUEST_REF__INIT;
    m.request_id = (char *)id;
    return pf_client_call(c, kind, &m.base, want, body, len, err, errlen);
}

int pf_client_submit(pf_client_t *c, const pf_graph_t *g, const pf_cluster_t *cl,
                     const pf_search_opts_t *o, const char *label, Planfarm__RequestStatus **out,
                     char *err, size_t errlen)
{
    const uint8_t *body;
    size_t len;
    int rc;
    *out = NULL;
    pf_arena_t *a = pf_arena_new();
    Planfarm__Submit m = PLANFARM__SUBMIT__INIT;
    if (!a || !(m.graph = pf_model_codec_graph_to_pb(a, g)) ||
        !(m.cluster = pf_model_codec_cluster_to_pb(a, cl)) ||
        !(m.options = pf_plan_options_codec_to_pb(a, o))) {
        pf_arena_destroy(&a);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    m.label = (char *)(label ? label : "");
    m.priority = c->priority;
    rc = pf_client_call(c, PF_MSG_SUBMIT, &m.base, PF_MSG_SUBMIT_REPLY, &body, &len, err, errlen);
    pf_arena_destroy(&a);
    if (rc != PF_OK)
        return rc;
    return UNPACK("SUBMIT", planfarm__request_status__unpack, body, len, out, err, errlen);
}

void pf_client_set_priority(pf_client_t *c, int priority)
{
    c->priority = priority;
}

int pf_client_status(pf_client_t *c, const char *id, Planfarm__RequestStatus **out, char *err,
                     size_t errlen)
{
    const uint8_t *body;
    size_t len;
    *out = NULL;
    int rc = call_ref(c, PF_MSG_STATUS, PF_MSG_STATUS_REPLY, id, &body, &len, err, errlen);
    if (rc != PF_OK)
        return rc;
    return UNPACK("STATUS", planfarm__request_status__unpack, body, len, out, err, errlen);
}

int pf_client_result(pf_client_t *c, const char *id, Planfarm__ResultReply **out, char *err,
                     size_t errlen)
{
    const uint8_t *body;
    size_t len;
    *out = NULL;
    int rc = call_ref(c, PF_MSG_RESULT_REQ, PF_MSG_RESULT_REPLY, id, &body, &len, err, errlen);
    if (rc != PF_OK)
        return rc;
    rc = UNPACK("RESULT", planfarm__result_reply__unpack, body, len, out, err, errlen);
    if (rc == PF_OK && !(*out)->status) {
        planfarm__result_reply__free_unpacked(*out, NULL);
        *out = NULL;
        return pf_fail(err, errlen, PF_ERR, "RESULT reply without a status");
    }
    return rc;
}

int pf_client_cancel(pf_client_t *c, const char *id, Planfarm__RequestStatus **out, char *err,
                     size_t errlen)
{
    const uint8_t *body;
    size_t len;
    *out = NULL;
    int rc = call_ref(c, PF_MSG_CANCEL_REQ, PF_MSG_STATUS_REPLY, id, &body, &len, err, errlen);
    if (rc != PF_OK)
        return rc;
    return UNPACK("CANCEL", planfarm__request_status__unpack, body, len, out, err, errlen);
}

int pf_client_list(pf_client_t *c, Planfarm__ListReply **out, char *err, size_t errlen)
{
    const uint8_t *body;
    size_t len;
    Planfarm__RequestRef none = PLANFARM__REQUEST_REF__INIT; /* LIST carries no fields */
    *out = NULL;
    int rc = pf_client_call(c, PF_MSG_LIST, &none.base, PF_MSG_LIST_REPLY, &body, &len, err,
                            errlen);
    if (rc != PF_OK)
        return rc;
    return UNPACK("LIST", planfarm__list_reply__unpack, body, len, out, err, errlen);
}

int pf_client_http_token(const pf_client_t *c, char out[PF_CURVE_TOKEN_TXT], char *err,
                         size_t errlen)
{
    uint8_t broker[32];
    if (!c->keys.own)
        return pf_fail(err, errlen, PF_EINPUT, "--http-token needs --cert and --broker-key (a "
                                               "broker without keys has no tokens)");
    if (!zmq_z85_decode(broker, c->keys.broker_txt) ||
        pf_curve_http_token(zcert_secret_key(c->keys.own), broker, out) != PF_OK)
        return pf_fail(err, errlen, PF_EINPUT, "--broker-key: not a usable CURVE key");
    return PF_OK;
}
