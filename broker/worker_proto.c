#include "broker/worker_proto.h"
#include "broker/access.h"
#include "broker/lanes.h"
#include "broker/peers.h"
#include "broker/prep.h"
#include "broker/requests.h"
#include "broker/testseam.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- dispatch events ---- */

void pf_worker_proto_on_cancel(void *ctx, void *worker_user, uint64_t job_id)
{
    pf_broker_t *b = ctx;
    peer_t *p = worker_user;
    Planfarm__Cancel m = PLANFARM__CANCEL__INIT;
    m.job_ids = &job_id;
    m.n_job_ids = 1;
    pf_peers_send(b, p, PF_MSG_CANCEL, &m.base);
}


void pf_worker_proto_on_dead(void *ctx, void *worker_user)
{
    pf_broker_t *b = ctx;
    peer_t *p = worker_user;
    zsys_warning("broker: worker %s is silent for %d heartbeats: its jobs go to others", p->name,
                 b->o.liveness);
    b->workers_lost++;
    pf_peers_bury(p);
}


/* ---- messages ---- */

/* A checked answer (rc PF_OK) goes to its request, a failed check makes it a failed attempt
 * of the job on that worker. res is cleared. */
static void settle(pf_broker_t *b, peer_t *p, request_t *r, uint64_t sid, uint64_t job_id, int rc,
                   const char *err, pf_job_result_t *res, const uint8_t *data, size_t len)
{
    if (rc != PF_OK) {
        char why[400];
        pf_peers_malformed(b, p, "RESULT for job %llu: %s", (unsigned long long)job_id, err);
        snprintf(why, sizeof why, "%s sent an invalid result: %s", p->name, err);
        pf_dispatch_failed(b->dispatch, p->worker, job_id, why);
    } else if (pf_dispatch_result(b->dispatch, p->worker, job_id)) {
        pf_requests_answer(b, r, sid, res, data, len);
    }
    pf_job_result_clear(res);
}


void pf_worker_proto_send_job(pf_broker_t *b, const pf_dispatch_assign_t *a)
{
    peer_t *p = a->worker_user;
    request_t *r = a->owner;
    if (!r) { /* a job of no request: the test seam's empty job */
        Planfarm__Job m = PLANFARM__JOB__INIT;
        m.id = a->job_id;
        m.attempt = a->attempt;
        m.kind = PLANFARM__JOB_KIND__JOB_NOOP;
        pf_peers_send(b, p, PF_MSG_JOB, &m.base);
        return;
    }
    pf_job_t job;
    if (!pf_requests_job_out(r, a->owner_job, &job)) {
        /* no longer wanted: take it back before it goes out, credit included */
        pf_dispatch_result(b->dispatch, a->worker, a->job_id);
        pf_lanes_job_left(b, a->job_id);
        return;
    }
    pf_arena_t *arena = pf_arena_new();
    Planfarm__Job *m =
        arena ? pf_job_codec_to_pb(arena, a->job_id, a->attempt, &job, &r->gref, &r->cref) : NULL;
    if (!m) {
        zsys_error("broker: out of memory encoding job %llu", (unsigned long long)a->job_id);
        pf_dispatch_failed(b->dispatch, a->worker, a->job_id, "broker: out of memory encoding");
    } else {
        pf_peers_send(b, p, PF_MSG_JOB, &m->base);
    }
    pf_arena_destroy(&arena);
}

static unsigned kinds_mask(const Planfarm__Ready *m)
{
    unsigned mask = 0;
    for (size_t i = 0; i < m->n_kinds; i++)
        if ((int)m->kinds[i] >= 0 && (int)m->kinds[i] < PF_JOB_KIND_COUNT)
            mask |= 1u << m->kinds[i];
    return mask;
}

static void on_ready(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len)
{
    Planfarm__Ready *m = planfarm__ready__unpack(NULL, len, data);
    if (!m) {
        pf_peers_malformed(b, p, "READY: not a valid Ready message");
        return;
    }
    if (m->protocol != PF_WIRE_VERSION) {
        char why[96];
        snprintf(why, sizeof why, "protocol %u not supported (this broker speaks %d)",
                 m->protocol, PF_WIRE_VERSION);
        pf_peers_malformed(b, p, "READY: %s", why);
        pf_peers_send_bye(b, p, why);
        goto done;
    }
    if (p->kind == PEER_WORKER) /* READY again: it restarted; what it held is lost */
        pf_dispatch_worker_remove(b->dispatch, p->worker, "worker sent READY again");
    uint32_t cap = (uint32_t)b->o.max_credits; /* a worker may not hoard jobs */
    int credits = m->credits == 0 ? 1 : (int)(m->credits > cap ? cap : m->credits);
    if (m->credits > cap)
        zsys_warning("broker: worker %.63s asked for %u credits: given %d (--max-credits)",
                     m->name && m->name[0] ? m->name : p->name, m->credits, credits);
    unsigned kinds = kinds_mask(m);
    if (kinds == 0)
        kinds = 1u << PF_JOB_NOOP;
    int w = pf_dispatch_worker_add(b->dispatch, credits, kinds, p);
    if (w < 0) {
        zsys_error("broker: out of memory registering a worker");
        pf_peers_send_bye(b, p, "broker: out of memory");
        goto done;
    }
    p->kind = PEER_WORKER;
    p->worker = w;
    p->last_heartbeat_sent = b->now;
    if (m->name && m->name[0])
        snprintf(p->name, sizeof p->name, "%.63s", m->name);
    int live = pf_dispatch_workers(b->dispatch);
    pf_requests_note_workers(b, live);
    pf_peer_io_info(b->o.quiet, "broker: worker %s ready: %u cores, %d credits (%d worker%s)",
                    p->name, m->cores, credits, live, live == 1 ? "" : "s");
done:
    planfarm__ready__free_unpacked(m, NULL);
}

/* A RESULT from worker w for job_id, before the dispatch core forgets the job: its latency by
 * kind (the metrics' histograms). Only the live copy's answer: a cancelled copy's was sent at
 * some earlier time. */
static void time_answer(pf_broker_t *b, int w, uint64_t job_id)
{
    pf_job_kind_t kind;
    double sent_at;
    int holder;
    if (w < 0 || !pf_dispatch_job_sent(b->dispatch, job_id, &kind, &sent_at, &holder) ||
        holder != w || (unsigned)kind >= PF_JOB_KIND_COUNT)
        return;
    pf_metrics_latency_observe(&b->latency[kind], b->now - sent_at);
}

static void on_result(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len)
{
    char err[256];
    int w = p->kind == PEER_WORKER ? p->worker : -1;
    Planfarm__JobResult *m = planfarm__job_result__unpack(NULL, len, data);
    if (!m) {
        pf_peers_malformed(b, p, "RESULT: not a valid JobResult");
        return;
    }
    time_answer(b, w, m->id);
    void *owner;
    uint64_t sid;
    /* Only the worker an attempt of the job was sent to may answer it (a copy since cancelled
     * still counts: the job is pure, and its answer was asked for). Anything else is a forged
     * or misrouted answer: a peer must not fail or fake others' requests. */
    if (pf_dispatch_holds(b->dispatch, w, m->id) < 0) {
        pf_access_foreign_answer(b, p, "RESULT", m->id);
        goto done;
    }
    if (!pf_dispatch_job_owner(b->dispatch, m->id, &owner, &sid)) {
        pf_dispatch_result(b->dispatch, w, m->id); /* frees the credit; the answer is not needed */
        goto done;
    }
    request_t *r = owner;
    if (!r) {
        if (pf_dispatch_result(b->dispatch, w, m->id))
            pf_testseam_noop_done(b, m->id, true);
        goto done;
    }
    if (!pf_requests_wants(r, sid)) {
        pf_dispatch_result(b->dispatch, w, m->id);
        goto done;
    }
    pf_job_result_t res;
    pf_job_t job;
    bool rerun = false;
    int rc = pf_job_codec_result_from_pb(m, pf_graph_nops(r->g), pf_cluster_ndevices(r->c), &res, err,
                                     sizeof err);
    if (rc == PF_OK && (rc = pf_search_check_answer_deferred(r->search, sid, &res, &job, &rerun,
                                                             err, sizeof err)) != PF_OK)
        pf_job_result_clear(&res);
    if (rc == PF_OK && rerun && !b->o.own_workers_only) { /* w holds the job until it is back */
        pf_prep_task_t *t = pf_prep_rerun_new(r->id, sid, m->id, p->key, &job, &res, data, len);
        pf_job_result_clear(&res);
        if (t) {
            r->reruns++;
            pf_prep_push(b->prep, t);
            goto done;
        }
        rc = pf_fail(err, sizeof err, PF_ERR, "broker: out of memory re-running it");
    }
    settle(b, p, r, sid, m->id, rc, err, &res, data, len);
done:
    pf_lanes_job_left(b, m->id);
    planfarm__job_result__free_unpacked(m, NULL);
}

void pf_worker_proto_rerun_back(pf_broker_t *b, pf_prep_task_t *t)
{
    char err[400] = "";
    request_t *r = pf_requests_find(b, t->id);
    if (!r)
        return;
    r->reruns--;
    peer_t *p = zhashx_lookup(b->peers, t->peer);
    b->reruns++;
    if (t->prep_s > b->rerun_max_s)
        b->rerun_max_s = t->prep_s;
    /* a worker declared dead meanwhile had its jobs sent elsewhere: this answer is not needed */
    if (r->search && p && (p->kind == PEER_WORKER || p->kind == PEER_GONE) &&
        pf_dispatch_holds(b->dispatch, p->worker, t->job_id) >= 0 &&
        pf_requests_wants(r, t->sid)) {
        int rc = t->own.status != PF_OK
                     ? pf_fail(err, sizeof err, PF_EINPUT, "the answer could not be re-run "
                               "here: %s", t->own.error)
                     : pf_search_check_rerun(r->search, t->sid, &t->res, &t->own, err, sizeof err);
        settle(b, p, r, t->sid, t->job_id, rc, err, &t->res, t->result, t->result_len);
    }
    pf_lanes_job_left(b, t->job_id);
    pf_requests_advance(b, r); /* a search that ended meanwhile finishes now */
}

static void on_failed(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len)
{
    Planfarm__Failed *m = planfarm__failed__unpack(NULL, len, data);
    if (!m) {
        pf_peers_malformed(b, p, "FAILED: not a valid Failed message");
        return;
    }
    if (pf_dispatch_holds(b->dispatch, p->worker, m->job_id) < 0) {
        pf_access_foreign_answer(b, p, "FAILED", m->job_id);
        planfarm__failed__free_unpacked(m, NULL);
        return;
    }
    char why[400];
    snprintf(why, sizeof why, "%s: %.256s", p->name, m->error ? m->error : "failed");
    if (pf_dispatch_failed(b->dispatch, p->worker, m->job_id, why) && b->o.verbose)
        pf_peer_io_info(b->o.quiet, "broker: job %llu failed on %s", (unsigned long long)m->job_id,
                        why);
    pf_lanes_job_left(b, m->job_id);
    planfarm__failed__free_unpacked(m, NULL);
}

static void on_fetch(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len)
{
    Planfarm__Fetch *m = planfarm__fetch__unpack(NULL, len, data);
    if (!m) {
        pf_peers_malformed(b, p, "FETCH: not a valid Fetch message");
        return;
    }
    Planfarm__Blob reply = PLANFARM__BLOB__INIT;
    const uint8_t *bytes;
    size_t n;
    int kind;
    reply.hash = m->hash;
    if (!pf_access_may_fetch(b, p, m->hash.data, m->hash.len)) {
        /* the same answer as for a blob that is gone: a worker learns nothing about others' */
        pf_peers_malformed(b, p, "FETCH of a blob no job it holds needs");
        reply.error = "no blob with that hash for the jobs this worker holds";
    } else if (pf_blobstore_get(b->blobs, m->hash.data, m->hash.len, &kind, &bytes, &n) == PF_OK) {
        reply.kind = (Planfarm__BlobKind)kind;
        reply.data.data = (uint8_t *)bytes;
        reply.data.len = n;
    } else {
        reply.error = "no blob with that hash (its requests have finished)";
    }
    pf_peers_send(b, p, PF_MSG_BLOB, &reply.base);
    planfarm__fetch__free_unpacked(m, NULL);
}

void pf_worker_proto_on_msg(pf_broker_t *b, peer_t *p, pf_wire_msg_t kind, const uint8_t *data,
                            size_t len)
{
    if (kind == PF_MSG_READY) {
        if (p->kind == PEER_CLIENT)
            pf_peers_malformed(b, p, "READY from a client");
        else
            on_ready(b, p, data, len);
        return;
    }
    if (p->kind == PEER_CLIENT) {
        pf_peers_malformed(b, p, "%s is a worker message and this peer is a client",
                           pf_wire_msg_name(kind));
        return;
    }
    if (p->kind == PEER_NEW || p->kind == PEER_GONE) {
        /* A worker we declared dead holds nothing any more (its jobs went back to the queue or
         * to others), and a peer that never sent READY was never sent a job: a RESULT from
         * either is dropped and counted. Either is told to register again (Majordomo's
         * DISCONNECT). */
        if (kind == PF_MSG_RESULT || kind == PF_MSG_FAILED)
            pf_access_foreign_answer(b, p, pf_wire_msg_name(kind), 0);
        if (kind != PF_MSG_BYE)
            pf_peers_send_bye(b, p, "unknown worker: send READY");
        return;
    }
    pf_dispatch_worker_seen(b->dispatch, p->worker);
    switch (kind) {
    case PF_MSG_HEARTBEAT: break;
    case PF_MSG_RESULT: on_result(b, p, data, len); break;
    case PF_MSG_FAILED: on_failed(b, p, data, len); break;
    case PF_MSG_FETCH: on_fetch(b, p, data, len); break;
    case PF_MSG_BYE:
        pf_peer_io_info(b->o.quiet, "broker: worker %s left", p->name);
        pf_dispatch_worker_remove(b->dispatch, p->worker, "worker left");
        pf_peers_drop(b, p);
        break;
    default: break;
    }
}

