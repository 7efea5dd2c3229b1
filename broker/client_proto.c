#include "broker/client_proto.h"
#include "broker/access.h"
#include "broker/intake.h"
#include "broker/peers.h"
#include "broker/publish.h"
#include "broker/requests.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <stdlib.h>

static request_t *client_ref(pf_broker_t *b, peer_t *p, const char *what, const uint8_t *data,
                             size_t len)
{
    Planfarm__RequestRef *m = planfarm__request_ref__unpack(NULL, len, data);
    if (!m) {
        pf_peers_malformed(b, p, "%s: not a valid RequestRef", what);
        return NULL;
    }
    request_t *r = pf_requests_find(b, m->request_id);
    if (!r) /* finished long ago: the journal still has it */
        r = pf_requests_recall(b, m->request_id, NULL);
    if (r && !pf_access_may_see(p, r))
        r = NULL; /* another's request looks like no request: ids are not confirmed */
    if (!r) {
        char msg[160];
        snprintf(msg, sizeof msg, "unknown request id '%.64s'", m->request_id);
        pf_peers_send_error(b, p, PF_EINPUT, msg);
    }
    planfarm__request_ref__free_unpacked(m, NULL);
    return r;
}

static void reply_status(pf_broker_t *b, peer_t *p, request_t *r)
{
    Planfarm__RequestStatus st;
    pf_publish_status(b, r, &st);
    pf_peers_send(b, p, PF_MSG_STATUS_REPLY, &st.base);
}

static void reply_result(pf_broker_t *b, peer_t *p, request_t *r)
{
    Planfarm__RequestStatus st;
    Planfarm__ResultReply m = PLANFARM__RESULT_REPLY__INIT;
    pf_publish_status(b, r, &st);
    m.status = &st;
    m.plan_json = r->plan_json ? r->plan_json : "";
    pf_peers_send(b, p, PF_MSG_RESULT_REPLY, &m.base);
}

/* The requests p may see, oldest first. */
static void reply_list(pf_broker_t *b, peer_t *p)
{
    size_t n = zlistx_size(b->order), i = 0;
    Planfarm__RequestStatus *all = calloc(n ? n : 1, sizeof *all);
    Planfarm__RequestStatus **ptr = calloc(n ? n : 1, sizeof *ptr);
    if (!all || !ptr) {
        pf_peers_send_error(b, p, PF_ERR, "broker: out of memory");
    } else {
        for (request_t *q = zlistx_first(b->order); q; q = zlistx_next(b->order)) {
            if (!pf_access_may_see(p, q))
                continue;
            pf_publish_status(b, q, &all[i]);
            ptr[i] = &all[i];
            i++;
        }
        Planfarm__ListReply m = PLANFARM__LIST_REPLY__INIT;
        m.requests = ptr;
        m.n_requests = i;
        pf_peers_send(b, p, PF_MSG_LIST_REPLY, &m.base);
    }
    free(all);
    free(ptr);
}

void pf_client_proto_on_msg(pf_broker_t *b, peer_t *p, pf_wire_msg_t kind, const uint8_t *data,
                            size_t len)
{
    request_t *r;
    switch (kind) {
    case PF_MSG_SUBMIT:
        pf_intake_submit(b, p, data, len);
        break;
    case PF_MSG_STATUS:
        if ((r = client_ref(b, p, "STATUS", data, len)))
            reply_status(b, p, r);
        break;
    case PF_MSG_RESULT_REQ:
        if ((r = client_ref(b, p, "RESULT", data, len)))
            reply_result(b, p, r);
        break;
    case PF_MSG_CANCEL_REQ:
        if ((r = client_ref(b, p, "CANCEL", data, len))) {
            pf_requests_cancel(b, r);
            reply_status(b, p, r);
        }
        break;
    case PF_MSG_LIST:
        reply_list(b, p);
        break;
    default:
        break;
    }
}
