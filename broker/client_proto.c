#include "broker/broker_int.h"
#include "planner/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int store_blob(pf_broker_t *b, const ProtobufCMessage *m, int kind, pf_blob_ref_t *ref)
{
    uint8_t *buf;
    size_t len;
    if (pf_codec_pack(m, &buf, &len) != PF_OK)
        return PF_ERR;
    int rc = pf_blobstore_put(b->blobs, kind, &buf, len, ref);
    free(buf);
    return rc;
}

static int running_requests(pf_broker_t *b)
{
    int n = 0;
    for (request_t *r = zlistx_first(b->order); r; r = zlistx_next(b->order))
        n += r->search != NULL;
    return n;
}

static void on_submit(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len)
{
    char err[512] = "";
    int rc;
    int running = running_requests(b);
    if (running >= b->o.max_running) { /* before decoding: a flood costs little */
        snprintf(err, sizeof err, "broker busy: %d requests are running; try again later",
                 running);
        pf_broker_send_error(b, p, PF_ERR, err);
        return;
    }
    Planfarm__Submit *m = planfarm__submit__unpack(NULL, len, data);
    if (!m) {
        pf_broker_malformed(b, p, "SUBMIT: not a valid Submit message");
        return;
    }
    request_t *r = calloc(1, sizeof *r);
    if (!r) {
        pf_broker_send_error(b, p, PF_ERR, "broker: out of memory");
        goto done;
    }
    r->last.best_objective_ms = NAN; /* nothing mapped yet */
    if (!m->graph || !m->cluster) {
        pf_broker_send_error(b, p, PF_EINPUT, "SUBMIT: needs a graph and a cluster");
        goto done;
    }
    pf_search_opts_t opts;
    if ((rc = pf_codec_graph_from_pb(m->graph, &r->g, err, sizeof err)) != PF_OK ||
        (rc = pf_codec_cluster_from_pb(m->cluster, &r->c, err, sizeof err)) != PF_OK ||
        (rc = pf_codec_options_from_pb(m->options, &opts, err, sizeof err)) != PF_OK) {
        pf_broker_send_error(b, p, rc, err);
        goto done;
    }
    if (pf_broker_request_new_id(b, r->id, sizeof r->id) != PF_OK ||
        pf_broker_request_new_seq(b, &r->seq) != PF_OK ||
        store_blob(b, &m->graph->base, PLANFARM__BLOB_KIND__BLOB_GRAPH, &r->gref) != PF_OK ||
        store_blob(b, &m->cluster->base, PLANFARM__BLOB_KIND__BLOB_CLUSTER, &r->cref) != PF_OK) {
        pf_broker_request_release(b, r);
        pf_broker_send_error(b, p, PF_ERR, "broker: out of memory");
        goto done;
    }
    snprintf(r->owner, sizeof r->owner, "%s", p->user);
    snprintf(r->label, sizeof r->label, "%s", m->label ? m->label : "");
    r->t_start = r->t_end = b->now;
    r->workers_max = pf_dispatch_workers(b->dispatch);
    r->state = PLANFARM__REQUEST_STATE__REQ_QUEUED;
    rc = pf_search_validate(r->g, r->c, &opts, err, sizeof err);
    if (rc == PF_OK && !(r->search = pf_search_new(r->g, r->c, &opts, err, sizeof err)))
        rc = PF_ERR;
    if (rc != PF_OK) { /* the request exists, failed, so that STATUS and RESULT can say why */
        r->state = PLANFARM__REQUEST_STATE__REQ_FAILED;
        r->status = rc;
        snprintf(r->error, sizeof r->error, "%s", err);
        pf_broker_request_release(b, r);
    }
    if (zhashx_insert(b->requests, r->id, r) != 0) {
        pf_broker_request_release(b, r);
        pf_broker_send_error(b, p, PF_ERR, "broker: out of memory");
        goto done;
    }
    if (!zlistx_add_end(b->order, r)) {
        pf_search_destroy(&r->search);
        pf_broker_request_release(b, r);
        zhashx_delete(b->requests, r->id); /* frees r */
        r = NULL;
        pf_broker_send_error(b, p, PF_ERR, "broker: out of memory");
        goto done;
    }
    b->nrequests++;
    pf_peer_info(b->o.quiet, "broker: request %s (%s): %zu ops on %zu devices%s%s", r->id, r->label,
              m->graph->n_ops, m->cluster->n_devices,
              r->error[0] ? ", failed: " : "", r->error);
    pf_broker_request_advance(b, r);
    Planfarm__RequestStatus st;
    pf_broker_request_status(b, r, &st);
    pf_broker_send(b, p, PF_MSG_SUBMIT_REPLY, &st.base);
    r = NULL;
    pf_broker_requests_evict(b);
done:
    pf_broker_request_free(&r);
    planfarm__submit__free_unpacked(m, NULL);
}

static request_t *client_ref(pf_broker_t *b, peer_t *p, const char *what, const uint8_t *data,
                             size_t len)
{
    Planfarm__RequestRef *m = planfarm__request_ref__unpack(NULL, len, data);
    if (!m) {
        pf_broker_malformed(b, p, "%s: not a valid RequestRef", what);
        return NULL;
    }
    request_t *r = pf_broker_request_find(b, m->request_id);
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
        on_submit(b, p, data, len);
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

