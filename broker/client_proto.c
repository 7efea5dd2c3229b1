#include "broker/broker_int.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static request_t *client_ref(pf_broker_t *b, peer_t *p, const char *what, const uint8_t *data,
                             size_t len)
{
    Planfarm__RequestRef *m = planfarm__request_ref__unpack(NULL, len, data);
    if (!m) {
        pf_broker_malformed(b, p, "%s: not a valid RequestRef", what);
        return NULL;
    }
    request_t *r = pf_broker_request_find(b, m->request_id);
    if (!r) /* finished long ago: the journal still has it */
        r = pf_broker_request_recall(b, m->request_id, NULL);
    if (r && !pf_broker_may_see(p, r))
        r = NULL; /* another's request looks like no request: ids are not confirmed */
    if (!r) {
        char msg[160];
        snprintf(msg, sizeof msg, "unknown request id '%.64s'", m->request_id);
        pf_broker_send_error(b, p, PF_EINPUT, msg);
    }
    planfarm__request_ref__free_unpacked(m, NULL);
    return r;
}

void pf_broker_on_client(pf_broker_t *b, peer_t *p, pf_msg_t kind, const uint8_t *data, size_t len)
{
    request_t *r;
    Planfarm__RequestStatus st;
    switch (kind) {
    case PF_MSG_SUBMIT:
        pf_broker_submit(b, p, data, len);
        break;
    case PF_MSG_STATUS:
        if ((r = client_ref(b, p, "STATUS", data, len))) {
            pf_broker_request_status(b, r, &st);
            pf_broker_send(b, p, PF_MSG_STATUS_REPLY, &st.base);
        }
        break;
    case PF_MSG_RESULT_REQ:
        if ((r = client_ref(b, p, "RESULT", data, len))) {
            Planfarm__ResultReply m = PLANFARM__RESULT_REPLY__INIT;
            pf_broker_request_status(b, r, &st);
            m.status = &st;
            m.plan_json = r->plan_json ? r->plan_json : "";
            pf_broker_send(b, p, PF_MSG_RESULT_REPLY, &m.base);
        }
        break;
    case PF_MSG_CANCEL_REQ:
        if ((r = client_ref(b, p, "CANCEL", data, len))) {
            if (r->preparing) /* ends when the helper thread hands it back */
                r->cancelled = 1;
            if (r->search) {
                r->cancelled = 1;
                pf_search_cancel(r->search, "cancelled by a client");
                pf_broker_request_advance(b, r);
            }
            pf_broker_request_status(b, r, &st);
            pf_broker_send(b, p, PF_MSG_STATUS_REPLY, &st.base);
        }
        break;
    case PF_MSG_LIST: {
        size_t n = zlistx_size(b->order), i = 0;
        Planfarm__RequestStatus *all = calloc(n ? n : 1, sizeof *all);
        Planfarm__RequestStatus **ptr = calloc(n ? n : 1, sizeof *ptr);
        if (!all || !ptr) {
            pf_broker_send_error(b, p, PF_ERR, "broker: out of memory");
        } else {
            for (request_t *q = zlistx_first(b->order); q; q = zlistx_next(b->order)) {
                if (!pf_broker_may_see(p, q))
                    continue;
                pf_broker_request_status(b, q, &all[i]);
                ptr[i] = &all[i];
                i++;
            }
            Planfarm__ListReply m = PLANFARM__LIST_REPLY__INIT;
            m.requests = ptr;
            m.n_requests = i;
            pf_broker_send(b, p, PF_MSG_LIST_REPLY, &m.base);
        }
        free(all);
        free(ptr);
        break;
    }
    default:
        break;
    }
}

