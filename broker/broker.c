#include "broker/broker.h"
#include "broker/blobstore.h"
#include "broker/dispatch.h"
#include "planner/search.h"
#include "planner/util.h"
#include "proto/job_codec.h"
#include "proto/wire.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define IDENTITY_MAX 255
#define PEER_IDLE_S 600   /* a client (or a peer that only sent garbage) is forgotten after this */
#define DRAIN_BATCH 4096  /* messages handled before timers and dispatch get a turn */
#define MAX_CREDITS 1000
/* Messages queued for (and from) one peer. A worker is sent at most its credits in jobs, as many
 * cancels, a blob or two per job and a heartbeat per interval; a client one reply per request.
 * Past this a send fails (ROUTER_MANDATORY: EAGAIN): a client's reply is dropped, a worker is
 * dropped, and a peer that never reads cannot make the broker hold its replies without bound. */
#define PEER_HWM (10 * MAX_CREDITS)
/* Routine events (requests, workers joining and leaving); warnings are never quiet. */
#define INFO(b, ...)                                                                            \
    do {                                                                                        \
        if (!(b)->o.quiet)                                                                      \
            zsys_info(__VA_ARGS__);                                                             \
    } while (0)

/* PEER_GONE: a worker declared dead or unreachable. Its late RESULTs are still used (jobs are
 * pure); a peer that never sent READY may not answer jobs at all. Forgotten after PEER_IDLE_S. */
typedef enum { PEER_NEW, PEER_WORKER, PEER_CLIENT, PEER_GONE } peer_kind_t;

typedef struct {
    char key[2 * IDENTITY_MAX + 1]; /* hex of the identity: the peers table's key */
    uint8_t id[IDENTITY_MAX];
    size_t id_len;
    peer_kind_t kind;
    int worker; /* dispatch handle when a worker */
    char name[64];
    int warned;
    double last_seen, last_heartbeat_sent;
} peer_t;

typedef struct {
    char id[16];
    uint32_t seq; /* high half of its jobs' dispatch ids */
    char label[128];
    pf_graph_t *g;
    pf_cluster_t *c;
    pf_blob_ref_t gref, cref;
    pf_search_t *search; /* NULL once finished */
    Planfarm__RequestState state;
    int status;
    char error[512];
    int cancelled;
    double t_start, t_end;
    int workers_max;
    pf_search_status_t last; /* snapshot when it finished */
    char *plan_json;
    size_t plan_len;
} request_t;

struct pf_broker {
    pf_broker_opts_t o;
    char endpoint[256];
    zsock_t *router;
    pf_dispatch_t *dispatch;
    pf_blobstore_t *blobs;
    zhashx_t *peers;    /* key -> peer_t */
    zhashx_t *requests; /* id -> request_t */
    zlistx_t *order;    /* request_t in submission order */
    zlistx_t *gone;     /* keys (strings) of peers found unreachable while sending */
    uint32_t next_seq;
    uint64_t next_noop;
    double t_start, now;
    uint8_t *buf; /* packing buffer, reused */
    size_t bufcap;
    /* bench */
    zsock_t *pipe;
    long long noop_left;
    double noop_t0;
    /* stats */
    double busy_s;
    long long msgs_in, msgs_out, malformed, nrequests;
};

void pf_broker_opts_init(pf_broker_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->endpoint = PF_BROKER_DEFAULT_ENDPOINT;
    o->heartbeat_ms = 1000;
    o->liveness = 5;
    o->max_attempts = 3;
    o->max_msg_bytes = 256LL << 20;
    pf_job_limits_init(&o->limits);
    o->max_finished = 1000;
    o->max_running = 64;
}

static double hb_s(const pf_broker_t *b)
{
    return b->o.heartbeat_ms / 1000.0;
}

static uint64_t job_id_of(const request_t *r, uint64_t search_id)
{
    return ((uint64_t)r->seq << 32) | (search_id & 0xffffffffu);
}

/* ---- peers ---- */

static void peer_free(void **item)
{
    free(*item);
    *item = NULL;
}

static peer_t *peer_get(pf_broker_t *b, const uint8_t *id, size_t len)
{
    char key[2 * IDENTITY_MAX + 1];
    pf_wire_hex(id, len, key);
    peer_t *p = zhashx_lookup(b->peers, key);
    if (p)
        return p;
    if (!(p = calloc(1, sizeof *p)))
        return NULL;
    memcpy(p->key, key, sizeof key);
    memcpy(p->id, id, len);
    p->id_len = len;
    p->kind = PEER_NEW;
    p->worker = -1;
    snprintf(p->name, sizeof p->name, "peer %.12s", key);
    if (zhashx_insert(b->peers, key, p) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

static void peer_drop(pf_broker_t *b, peer_t *p)
{
    zhashx_delete(b->peers, p->key); /* frees p */
}

/* A worker taken out of the dispatch core without saying BYE: remembered as PEER_GONE. */
static void peer_bury(peer_t *p)
{
    p->kind = PEER_GONE;
    p->worker = -1;
}

/* A message we will not serve: counted always, logged once per peer. */
static void malformed(pf_broker_t *b, peer_t *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void malformed(pf_broker_t *b, peer_t *p, const char *fmt, ...)
{
    b->malformed++;
    if (p && p->warned)
        return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    zsys_warning("broker: dropped a message from %s: %s (further ones from it are dropped "
                 "silently)",
                 p ? p->name : "a peer", msg);
    if (p)
        p->warned = 1;
}

/* ---- sending ---- */

/* Frames go out with ZMQ_DONTWAIT: the broker never blocks on one peer. With ROUTER_MANDATORY a
 * peer that is gone (EHOSTUNREACH) or whose queue is full (EAGAIN past the high-water mark)
 * makes the send fail; such a peer is dropped after the current operation. libzmq's zmq_send is
 * used directly because it needs no frame object per part on this hot path. */
static int send_raw(pf_broker_t *b, peer_t *p, pf_msg_t kind, const uint8_t *body, size_t len)
{
    void *s = zsock_resolve(b->router);
    uint8_t hdr[PF_WIRE_HEADER_LEN];
    pf_wire_header(kind, hdr);
    if (zmq_send(s, p->id, p->id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        int e = errno;
        if (b->o.verbose || p->kind == PEER_WORKER)
            zsys_warning("broker: cannot send %s to %s: %s", pf_msg_name(kind), p->name,
                         e == EHOSTUNREACH ? "peer is gone" : zmq_strerror(e));
        if (p->kind == PEER_WORKER)
            zlistx_add_end(b->gone, p->key);
        return PF_ERR;
    }
    zmq_send(s, hdr, sizeof hdr, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(s, body, len, ZMQ_DONTWAIT);
    b->msgs_out++;
    return PF_OK;
}

static int send_msg(pf_broker_t *b, peer_t *p, pf_msg_t kind, const ProtobufCMessage *m)
{
    size_t need = protobuf_c_message_get_packed_size(m);
    if (need > b->bufcap) {
        size_t cap = need < 4096 ? 4096 : need;
        uint8_t *nb = realloc(b->buf, cap);
        if (!nb) {
            zsys_error("broker: out of memory packing %s (%zu bytes)", pf_msg_name(kind), need);
            return PF_ERR;
        }
        b->buf = nb;
        b->bufcap = cap;
    }
    size_t len = protobuf_c_message_pack(m, b->buf);
    return send_raw(b, p, kind, b->buf, len);
}

static void send_error(pf_broker_t *b, peer_t *p, int status, const char *msg)
{
    Planfarm__ErrorReply m = PLANFARM__ERROR_REPLY__INIT;
    m.status = status;
    m.error = (char *)msg;
    send_msg(b, p, PF_MSG_ERROR, &m.base);
}

static void send_bye(pf_broker_t *b, peer_t *p, const char *reason)
{
    Planfarm__Bye m = PLANFARM__BYE__INIT;
    m.reason = (char *)reason;
    send_msg(b, p, PF_MSG_BYE, &m.base);
}

/* ---- dispatch events ---- */

static void on_cancel(void *ctx, void *worker_user, uint64_t job_id)
{
    pf_broker_t *b = ctx;
    peer_t *p = worker_user;
    Planfarm__Cancel m = PLANFARM__CANCEL__INIT;
    m.job_ids = &job_id;
    m.n_job_ids = 1;
    send_msg(b, p, PF_MSG_CANCEL, &m.base);
}

static void advance(pf_broker_t *b, request_t *r);

static void on_poisoned(void *ctx, void *owner, uint64_t owner_job, uint64_t job_id,
                        const char *error)
{
    pf_broker_t *b = ctx;
    request_t *r = owner;
    zsys_warning("broker: %s", error);
    (void)job_id;
    if (!r) { /* a benchmark job */
        if (b->noop_left > 0)
            b->noop_left--;
        return;
    }
    if (!r->search)
        return;
    pf_search_job_failed(r->search, owner_job, error);
    advance(b, r);
}

static void on_worker_dead(void *ctx, void *worker_user)
{
    pf_broker_t *b = ctx;
    peer_t *p = worker_user;
    zsys_warning("broker: worker %s is silent for %d heartbeats: its jobs go to others", p->name,
                 b->o.liveness);
    peer_bury(p);
}

/* ---- requests ---- */

static const char *state_name(Planfarm__RequestState s)
{
    switch (s) {
    case PLANFARM__REQUEST_STATE__REQ_QUEUED: return "queued";
    case PLANFARM__REQUEST_STATE__REQ_RUNNING: return "running";
    case PLANFARM__REQUEST_STATE__REQ_DONE: return "done";
    case PLANFARM__REQUEST_STATE__REQ_FAILED: return "failed";
    default: return "cancelled";
    }
}

static void request_free(request_t **rp)
{
    request_t *r = *rp;
    if (!r)
        return;
    pf_search_destroy(&r->search);
    pf_graph_destroy(&r->g);
    pf_cluster_destroy(&r->c);
    free(r->plan_json);
    free(r);
    *rp = NULL;
}

/* Blobs, graph and cluster of a request that no longer runs; safe to call twice. */
static void release_inputs(pf_broker_t *b, request_t *r)
{
    pf_blobstore_release(b->blobs, &r->gref);
    pf_blobstore_release(b->blobs, &r->cref);
    memset(&r->gref, 0, sizeof r->gref);
    memset(&r->cref, 0, sizeof r->cref);
    pf_graph_destroy(&r->g);
    pf_cluster_destroy(&r->c);
}

/* The request is over: keep its plan text (or its error) and its counters, free the rest. */
static void finish(pf_broker_t *b, request_t *r)
{
    char err[512] = "";
    pf_plan_t *plan = NULL;
    pf_search_get_status(r->search, &r->last);
    int rc = pf_search_result(r->search, &plan, err, sizeof err);
    r->t_end = b->now;
    if (rc == PF_OK) {
        plan->search.present = 1;
        plan->search.wall_s = r->t_end - r->t_start;
        plan->search.workers = r->workers_max;
        r->last.best_objective_ms = plan->objective_ms; /* the plan's, once there is one */
        FILE *f = open_memstream(&r->plan_json, &r->plan_len);
        if (!f) {
            rc = pf_fail(err, sizeof err, PF_ERR, "out of memory writing the plan");
        } else {
            rc = pf_plan_write(plan, r->g, r->c, f, err, sizeof err);
            if (fclose(f) != 0 && rc == PF_OK)
                rc = pf_fail(err, sizeof err, PF_ERR, "out of memory writing the plan");
        }
        pf_plan_destroy(&plan);
    }
    if (rc == PF_OK) {
        r->state = PLANFARM__REQUEST_STATE__REQ_DONE;
    } else {
        free(r->plan_json);
        r->plan_json = NULL;
        r->state = r->cancelled ? PLANFARM__REQUEST_STATE__REQ_CANCELLED
                                : PLANFARM__REQUEST_STATE__REQ_FAILED;
        r->status = rc;
        snprintf(r->error, sizeof r->error, "%s", err);
    }
    pf_dispatch_cancel_owner(b->dispatch, r);
    pf_search_destroy(&r->search);
    release_inputs(b, r);
    INFO(b, "broker: request %s %s after %.2f s, %lld jobs%s%s", r->id, state_name(r->state),
              r->t_end - r->t_start, r->last.jobs_issued, r->error[0] ? ": " : "", r->error);
}

/* Feed the dispatch core with what the search wants now, and cancel what it no longer needs. */
static void advance(pf_broker_t *b, request_t *r)
{
    if (!r->search)
        return;
    uint64_t ids[64];
    int n;
    while ((n = pf_search_take_cancelled(r->search, ids, 64)) > 0)
        for (int i = 0; i < n; i++)
            pf_dispatch_cancel(b->dispatch, job_id_of(r, ids[i]));
    uint64_t sid;
    pf_job_t job;
    while (r->search && pf_search_next_job(r->search, &sid, &job)) {
        if (pf_dispatch_submit(b->dispatch, job_id_of(r, sid), job.kind, pf_job_timeout_s(&job, &b->o.limits),
                               r, sid) != PF_OK) {
            pf_search_cancel(r->search, "broker: out of memory queueing a job");
            break;
        }
    }
    if (r->search && pf_search_done(r->search))
        finish(b, r);
}

static void fill_status(pf_broker_t *b, request_t *r, Planfarm__RequestStatus *m)
{
    planfarm__request_status__init(m);
    pf_search_status_t st = r->last;
    long long queued = 0, running = 0;
    if (r->search) {
        pf_search_get_status(r->search, &st);
        pf_dispatch_owner_counts(b->dispatch, r, &queued, &running);
    }
    m->request_id = r->id;
    m->state = r->state;
    m->phase = (char *)(r->search ? pf_search_phase_name(st.phase) : state_name(r->state));
    m->jobs_issued = st.jobs_issued;
    m->jobs_answered = st.jobs_answered;
    m->jobs_outstanding = st.jobs_outstanding;
    m->jobs_queued = queued;
    m->best_objective_ms = st.best_objective_ms;
    m->status = r->status;
    m->error = r->error;
    m->label = r->label;
    m->wall_s = (r->search ? b->now : r->t_end) - r->t_start;
    m->workers = (uint32_t)pf_dispatch_workers(b->dispatch);
}

static request_t *request_find(pf_broker_t *b, const char *id)
{
    return id ? zhashx_lookup(b->requests, id) : NULL;
}

/* Finished requests beyond max_finished go, oldest first. */
static void evict_finished(pf_broker_t *b)
{
    size_t finished = 0;
    for (request_t *r = zlistx_first(b->order); r; r = zlistx_next(b->order))
        finished += r->search == NULL;
    void *h = zlistx_first(b->order) ? zlistx_cursor(b->order) : NULL;
    while (h && finished > (size_t)b->o.max_finished) {
        request_t *r = zlistx_handle_item(h);
        void *next = zlistx_next(b->order) ? zlistx_cursor(b->order) : NULL;
        if (!r->search) {
            zlistx_delete(b->order, h);
            zhashx_delete(b->requests, r->id); /* the table's destructor frees it */
            finished--;
        }
        h = next;
    }
}

static int new_request_id(pf_broker_t *b, char *out, size_t len)
{
    for (int tries = 0; tries < 100; tries++) {
        zuuid_t *u = zuuid_new();
        if (!u)
            return PF_ERR;
        snprintf(out, len, "r%.8s", zuuid_str(u));
        zuuid_destroy(&u);
        for (char *c = out; *c; c++)
            if (*c >= 'A' && *c <= 'F')
                *c = (char)(*c - 'A' + 'a');
        if (!request_find(b, out))
            return PF_OK;
    }
    return PF_ERR;
}

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
        send_error(b, p, PF_ERR, err);
        return;
    }
    Planfarm__Submit *m = planfarm__submit__unpack(NULL, len, data);
    if (!m) {
        malformed(b, p, "SUBMIT: not a valid Submit message");
        return;
    }
    request_t *r = calloc(1, sizeof *r);
    if (!r) {
        send_error(b, p, PF_ERR, "broker: out of memory");
        goto done;
    }
    r->last.best_objective_ms = NAN; /* nothing mapped yet */
    if (!m->graph || !m->cluster) {
        send_error(b, p, PF_EINPUT, "SUBMIT: needs a graph and a cluster");
        goto done;
    }
    pf_search_opts_t opts;
    if ((rc = pf_codec_graph_from_pb(m->graph, &r->g, err, sizeof err)) != PF_OK ||
        (rc = pf_codec_cluster_from_pb(m->cluster, &r->c, err, sizeof err)) != PF_OK ||
        (rc = pf_codec_options_from_pb(m->options, &opts, err, sizeof err)) != PF_OK) {
        send_error(b, p, rc, err);
        goto done;
    }
    if (new_request_id(b, r->id, sizeof r->id) != PF_OK ||
        store_blob(b, &m->graph->base, PLANFARM__BLOB_KIND__BLOB_GRAPH, &r->gref) != PF_OK ||
        store_blob(b, &m->cluster->base, PLANFARM__BLOB_KIND__BLOB_CLUSTER, &r->cref) != PF_OK) {
        release_inputs(b, r);
        send_error(b, p, PF_ERR, "broker: out of memory");
        goto done;
    }
    if (++b->next_seq == 0) /* 0 would make job ids that benchmark NOOP ids use */
        ++b->next_seq;
    r->seq = b->next_seq;
    snprintf(r->label, sizeof r->label, "%s", m->label ? m->label : "");
    r->t_start = r->t_end = b->now;
    r->workers_max = pf_dispatch_workers(b->dispatch);
    r->state = PLANFARM__REQUEST_STATE__REQ_QUEUED;
    rc = pf_search_new(r->g, r->c, &opts, &r->search, err, sizeof err);
    if (rc != PF_OK) { /* the request exists, failed, so that STATUS and RESULT can say why */
        r->state = PLANFARM__REQUEST_STATE__REQ_FAILED;
        r->status = rc;
        snprintf(r->error, sizeof r->error, "%s", err);
        release_inputs(b, r);
    }
    if (zhashx_insert(b->requests, r->id, r) != 0) {
        release_inputs(b, r);
        send_error(b, p, PF_ERR, "broker: out of memory");
        goto done;
    }
    if (!zlistx_add_end(b->order, r)) {
        pf_search_destroy(&r->search);
        release_inputs(b, r);
        zhashx_delete(b->requests, r->id); /* frees r */
        r = NULL;
        send_error(b, p, PF_ERR, "broker: out of memory");
        goto done;
    }
    b->nrequests++;
    INFO(b, "broker: request %s (%s): %zu ops on %zu devices%s%s", r->id, r->label,
              m->graph->n_ops, m->cluster->n_devices,
              r->error[0] ? ", failed: " : "", r->error);
    advance(b, r);
    Planfarm__RequestStatus st;
    fill_status(b, r, &st);
    send_msg(b, p, PF_MSG_SUBMIT_REPLY, &st.base);
    r = NULL;
    evict_finished(b);
done:
    request_free(&r);
    planfarm__submit__free_unpacked(m, NULL);
}

static request_t *client_ref(pf_broker_t *b, peer_t *p, const char *what, const uint8_t *data,
                             size_t len)
{
    Planfarm__RequestRef *m = planfarm__request_ref__unpack(NULL, len, data);
    if (!m) {
        malformed(b, p, "%s: not a valid RequestRef", what);
        return NULL;
    }
    request_t *r = request_find(b, m->request_id);
    if (!r) {
        char msg[160];
        snprintf(msg, sizeof msg, "unknown request id '%.64s'", m->request_id);
        send_error(b, p, PF_EINPUT, msg);
    }
    planfarm__request_ref__free_unpacked(m, NULL);
    return r;
}

static void on_client(pf_broker_t *b, peer_t *p, pf_msg_t kind, const uint8_t *data, size_t len)
{
    request_t *r;
    Planfarm__RequestStatus st;
    switch (kind) {
    case PF_MSG_SUBMIT:
        on_submit(b, p, data, len);
        break;
    case PF_MSG_STATUS:
        if ((r = client_ref(b, p, "STATUS", data, len))) {
            fill_status(b, r, &st);
            send_msg(b, p, PF_MSG_STATUS_REPLY, &st.base);
        }
        break;
    case PF_MSG_RESULT_REQ:
        if ((r = client_ref(b, p, "RESULT", data, len))) {
            Planfarm__ResultReply m = PLANFARM__RESULT_REPLY__INIT;
            fill_status(b, r, &st);
            m.status = &st;
            m.plan_json = r->plan_json ? r->plan_json : "";
            send_msg(b, p, PF_MSG_RESULT_REPLY, &m.base);
        }
        break;
    case PF_MSG_CANCEL_REQ:
        if ((r = client_ref(b, p, "CANCEL", data, len))) {
            if (r->search) {
                r->cancelled = 1;
                pf_search_cancel(r->search, "cancelled by a client");
                advance(b, r);
            }
            fill_status(b, r, &st);
            send_msg(b, p, PF_MSG_STATUS_REPLY, &st.base);
        }
        break;
    case PF_MSG_LIST: {
        size_t n = zlistx_size(b->order), i = 0;
        Planfarm__RequestStatus *all = calloc(n ? n : 1, sizeof *all);
        Planfarm__RequestStatus **ptr = calloc(n ? n : 1, sizeof *ptr);
        if (!all || !ptr) {
            send_error(b, p, PF_ERR, "broker: out of memory");
        } else {
            for (request_t *q = zlistx_first(b->order); q; q = zlistx_next(b->order), i++) {
                fill_status(b, q, &all[i]);
                ptr[i] = &all[i];
            }
            Planfarm__ListReply m = PLANFARM__LIST_REPLY__INIT;
            m.requests = ptr;
            m.n_requests = n;
            send_msg(b, p, PF_MSG_LIST_REPLY, &m.base);
        }
        free(all);
        free(ptr);
        break;
    }
    default:
        break;
    }
}

/* ---- workers ---- */

static void send_job(pf_broker_t *b, const pf_dispatch_assign_t *a)
{
    peer_t *p = a->worker_user;
    request_t *r = a->owner;
    if (!r) { /* benchmark */
        Planfarm__Job m = PLANFARM__JOB__INIT;
        m.id = a->job_id;
        m.attempt = a->attempt;
        m.kind = PLANFARM__JOB_KIND__JOB_NOOP;
        send_msg(b, p, PF_MSG_JOB, &m.base);
        return;
    }
    pf_job_t job;
    if (!r->search || !pf_search_job(r->search, a->owner_job, &job)) {
        /* no longer wanted: take it back before it goes out, credit included */
        pf_dispatch_result(b->dispatch, a->worker, a->job_id);
        return;
    }
    r->state = PLANFARM__REQUEST_STATE__REQ_RUNNING; /* queued until a job goes out */
    pf_arena_t *arena = pf_arena_new();
    Planfarm__Job *m =
        arena ? pf_codec_job_to_pb(arena, a->job_id, a->attempt, &job, &r->gref, &r->cref) : NULL;
    if (!m) {
        zsys_error("broker: out of memory encoding job %llu", (unsigned long long)a->job_id);
        pf_dispatch_failed(b->dispatch, a->worker, a->job_id, "broker: out of memory encoding");
    } else {
        send_msg(b, p, PF_MSG_JOB, &m->base);
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
        malformed(b, p, "READY: not a valid Ready message");
        return;
    }
    if (m->protocol != PF_WIRE_VERSION) {
        char why[96];
        snprintf(why, sizeof why, "protocol %u not supported (this broker speaks %d)",
                 m->protocol, PF_WIRE_VERSION);
        malformed(b, p, "READY: %s", why);
        send_bye(b, p, why);
        goto done;
    }
    if (p->kind == PEER_WORKER) /* READY again: it restarted; what it held is lost */
        pf_dispatch_worker_remove(b->dispatch, p->worker, "worker sent READY again");
    int credits = m->credits == 0 ? 1 : m->credits > MAX_CREDITS ? MAX_CREDITS : (int)m->credits;
    unsigned kinds = kinds_mask(m);
    if (kinds == 0)
        kinds = 1u << PF_JOB_NOOP;
    int w = pf_dispatch_worker_add(b->dispatch, credits, kinds, p, b->now);
    if (w < 0) {
        zsys_error("broker: out of memory registering a worker");
        send_bye(b, p, "broker: out of memory");
        goto done;
    }
    p->kind = PEER_WORKER;
    p->worker = w;
    p->last_heartbeat_sent = b->now;
    if (m->name && m->name[0])
        snprintf(p->name, sizeof p->name, "%.63s", m->name);
    int live = pf_dispatch_workers(b->dispatch);
    for (request_t *r = zlistx_first(b->order); r; r = zlistx_next(b->order))
        if (r->search && live > r->workers_max)
            r->workers_max = live;
    INFO(b, "broker: worker %s ready: %u cores, %d credits (%d worker%s)", p->name, m->cores,
         credits, live, live == 1 ? "" : "s");
done:
    planfarm__ready__free_unpacked(m, NULL);
}

static void on_result(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len)
{
    char err[256];
    int w = p->kind == PEER_WORKER ? p->worker : -1;
    Planfarm__JobResult *m = planfarm__job_result__unpack(NULL, len, data);
    if (!m) {
        malformed(b, p, "RESULT: not a valid JobResult");
        return;
    }
    void *owner;
    uint64_t sid;
    if (!pf_dispatch_job_owner(b->dispatch, m->id, &owner, &sid)) {
        pf_dispatch_result(b->dispatch, w, m->id); /* frees the credit; the answer is not needed */
        goto done;
    }
    request_t *r = owner;
    if (!r) {
        if (pf_dispatch_result(b->dispatch, w, m->id) && b->noop_left > 0 && --b->noop_left == 0 &&
            b->pipe)
            zstr_sendf(b->pipe, "DONE %.6f", pf_now_s() - b->noop_t0);
        goto done;
    }
    pf_job_t job;
    if (!r->search || !pf_search_job(r->search, sid, &job)) {
        pf_dispatch_result(b->dispatch, w, m->id);
        goto done;
    }
    pf_job_result_t res;
    int rc = pf_codec_result_from_pb(m, pf_graph_nops(r->g), pf_cluster_ndevices(r->c), &res, err,
                                     sizeof err);
    if (rc == PF_OK && (rc = pf_search_check_answer(r->search, sid, &res, err, sizeof err)))
        pf_job_result_clear(&res);
    if (rc != PF_OK) {
        char why[400];
        malformed(b, p, "RESULT for job %llu: %s", (unsigned long long)m->id, err);
        snprintf(why, sizeof why, "%s sent an invalid result: %s", p->name, err);
        pf_dispatch_failed(b->dispatch, w, m->id, why);
        goto done;
    }
    if (pf_dispatch_result(b->dispatch, w, m->id)) {
        pf_search_answer(r->search, sid, &res);
        advance(b, r);
    }
    pf_job_result_clear(&res);
done:
    planfarm__job_result__free_unpacked(m, NULL);
}

static void on_failed(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len)
{
    Planfarm__Failed *m = planfarm__failed__unpack(NULL, len, data);
    if (!m) {
        malformed(b, p, "FAILED: not a valid Failed message");
        return;
    }
    char why[400];
    snprintf(why, sizeof why, "%s: %.256s", p->name, m->error ? m->error : "failed");
    if (pf_dispatch_failed(b->dispatch, p->worker, m->job_id, why) && b->o.verbose)
        INFO(b, "broker: job %llu failed on %s", (unsigned long long)m->job_id, why);
    planfarm__failed__free_unpacked(m, NULL);
}

static void on_fetch(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len)
{
    Planfarm__Fetch *m = planfarm__fetch__unpack(NULL, len, data);
    if (!m) {
        malformed(b, p, "FETCH: not a valid Fetch message");
        return;
    }
    Planfarm__Blob reply = PLANFARM__BLOB__INIT;
    const uint8_t *bytes;
    size_t n;
    int kind;
    reply.hash = m->hash;
    if (pf_blobstore_get(b->blobs, m->hash.data, m->hash.len, &kind, &bytes, &n) == PF_OK) {
        reply.kind = (Planfarm__BlobKind)kind;
        reply.data.data = (uint8_t *)bytes;
        reply.data.len = n;
    } else {
        reply.error = "no blob with that hash (its requests have finished)";
    }
    send_msg(b, p, PF_MSG_BLOB, &reply.base);
    planfarm__fetch__free_unpacked(m, NULL);
}

static void on_worker_msg(pf_broker_t *b, peer_t *p, pf_msg_t kind, const uint8_t *data,
                          size_t len)
{
    if (kind == PF_MSG_READY) {
        if (p->kind == PEER_CLIENT)
            malformed(b, p, "READY from a client");
        else
            on_ready(b, p, data, len);
        return;
    }
    if (p->kind == PEER_CLIENT) {
        malformed(b, p, "%s is a worker message and this peer is a client", pf_msg_name(kind));
        return;
    }
    if (p->kind == PEER_NEW || p->kind == PEER_GONE) {
        /* A worker we declared dead: a late RESULT is still used. A peer that never sent READY
         * answers nothing (job ids are easy to guess). Either is told to register again
         * (Majordomo's DISCONNECT). */
        if (kind == PF_MSG_RESULT && p->kind == PEER_GONE)
            on_result(b, p, data, len);
        else if (kind == PF_MSG_RESULT)
            malformed(b, p, "RESULT from a peer that never sent READY");
        if (kind != PF_MSG_BYE)
            send_bye(b, p, "unknown worker: send READY");
        return;
    }
    pf_dispatch_worker_seen(b->dispatch, p->worker, b->now);
    switch (kind) {
    case PF_MSG_HEARTBEAT: break;
    case PF_MSG_RESULT: on_result(b, p, data, len); break;
    case PF_MSG_FAILED: on_failed(b, p, data, len); break;
    case PF_MSG_FETCH: on_fetch(b, p, data, len); break;
    case PF_MSG_BYE:
        INFO(b, "broker: worker %s left", p->name);
        pf_dispatch_worker_remove(b->dispatch, p->worker, "worker left");
        peer_drop(b, p);
        break;
    default: break;
    }
}

/* ---- the loop ---- */

static void handle(pf_broker_t *b, zmq_msg_t *parts, int nparts)
{
    size_t idlen = zmq_msg_size(&parts[0]);
    if (idlen == 0 || idlen > IDENTITY_MAX)
        return;
    peer_t *p = peer_get(b, zmq_msg_data(&parts[0]), idlen);
    if (!p) {
        zsys_error("broker: out of memory for a new peer");
        return;
    }
    p->last_seen = b->now;
    if (nparts != 3) {
        malformed(b, p, "%d frames after the identity, expected 2", nparts - 1);
        return;
    }
    char err[128];
    pf_msg_t kind;
    if (pf_wire_parse_header(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &kind, err,
                             sizeof err) != PF_OK) {
        malformed(b, p, "%s", err);
        return;
    }
    const uint8_t *data = zmq_msg_data(&parts[2]);
    size_t len = zmq_msg_size(&parts[2]);
    if (kind >= PF_MSG_READY && kind <= PF_MSG_BYE) {
        on_worker_msg(b, p, kind, data, len);
    } else if (kind >= PF_MSG_SUBMIT && kind <= PF_MSG_LIST) {
        if (p->kind == PEER_WORKER) {
            malformed(b, p, "%s is a client message and this peer is a worker",
                      pf_msg_name(kind));
            return;
        }
        p->kind = PEER_CLIENT;
        on_client(b, p, kind, data, len);
    } else {
        malformed(b, p, "%s is not sent to a broker", pf_msg_name(kind));
    }
}

/* Receive one message without blocking: identity, header, body, and any extra frames (counted,
 * then dropped). Returns 0 when nothing is waiting. */
static int recv_one(pf_broker_t *b)
{
    zmq_msg_t parts[3];
    int n = pf_wire_recv(zsock_resolve(b->router), parts, 3);
    if (n == 0)
        return 0;
    b->msgs_in++;
    /* Stamped on arrival, not when the batch began: a slow message (a large SUBMIT) would
     * otherwise age every heartbeat read after it, and the next tick would find their workers
     * silent. */
    b->now = pf_now_s();
    handle(b, parts, n);
    pf_wire_close(parts, n, 3);
    return 1;
}

static void drop_gone(pf_broker_t *b)
{
    char *key;
    while ((key = zlistx_detach(b->gone, NULL)) != NULL) {
        peer_t *p = zhashx_lookup(b->peers, key);
        if (p && p->kind == PEER_WORKER) {
            zsys_warning("broker: worker %s is unreachable: its jobs go to others", p->name);
            pf_dispatch_worker_remove(b->dispatch, p->worker, "worker unreachable");
            peer_bury(p);
        }
        free(key);
    }
}

static void pump(pf_broker_t *b)
{
    pf_dispatch_assign_t a;
    while (pf_dispatch_next(b->dispatch, b->now, &a))
        send_job(b, &a);
}

static void tick(pf_broker_t *b)
{
    pf_dispatch_tick(b->dispatch, b->now);
    Planfarm__Heartbeat hb = PLANFARM__HEARTBEAT__INIT;
    zlistx_t *stale = zlistx_new();
    for (peer_t *p = zhashx_first(b->peers); p; p = zhashx_next(b->peers)) {
        if (p->kind == PEER_WORKER) {
            if (b->now - p->last_heartbeat_sent >= 0.9 * hb_s(b)) {
                hb.running = (uint32_t)pf_dispatch_worker_held(b->dispatch, p->worker);
                send_msg(b, p, PF_MSG_HEARTBEAT, &hb.base);
                p->last_heartbeat_sent = b->now;
            }
        } else if (b->now - p->last_seen > PEER_IDLE_S && stale) {
            zlistx_add_end(stale, p);
        }
    }
    if (stale) {
        for (peer_t *p = zlistx_first(stale); p; p = zlistx_next(stale))
            peer_drop(b, p);
        zlistx_destroy(&stale);
    }
}

static void on_pipe(pf_broker_t *b, int *stop)
{
    zmsg_t *msg = zmsg_recv(b->pipe);
    if (!msg) {
        *stop = 1;
        return;
    }
    char *cmd = zmsg_popstr(msg);
    if (!cmd || streq(cmd, "$TERM")) {
        *stop = 1;
    } else if (streq(cmd, "NOOP")) {
        char *arg = zmsg_popstr(msg);
        long long n = arg ? atoll(arg) : 0;
        free(arg);
        b->noop_t0 = pf_now_s();
        b->noop_left += n;
        for (long long i = 0; i < n; i++)
            pf_dispatch_submit(b->dispatch, ++b->next_noop, PF_JOB_NOOP, b->o.limits.noop_s, NULL,
                               0);
        if (n <= 0)
            zstr_sendf(b->pipe, "DONE %.6f", 0.0);
    } else if (streq(cmd, "STATS")) {
        pf_broker_stats_t st;
        pf_broker_get_stats(b, &st);
        zstr_sendf(b->pipe, "STATS %.6f %.6f %lld %lld %lld %lld %d", st.wall_s, st.busy_s,
                   st.msgs_in, st.msgs_out, st.malformed, st.dispatched, st.workers);
    }
    free(cmd);
    zmsg_destroy(&msg);
}

static int loop(pf_broker_t *b, zsock_t *pipe)
{
    zpoller_t *poller = zpoller_new(b->router, pipe, NULL);
    if (!poller)
        return PF_ERR;
    if (pipe)
        zpoller_set_nonstop(poller, true);
    b->pipe = pipe;
    b->now = pf_now_s();
    double next_tick = b->now + hb_s(b);
    int stop = 0, rc = PF_OK;
    while (!stop) {
        int timeout_ms = (int)((next_tick - pf_now_s()) * 1000) + 1;
        void *which = zpoller_wait(poller, timeout_ms < 0 ? 0 : timeout_ms);
        double t0 = pf_now_s();
        b->now = t0;
        if (pipe && which == pipe) {
            on_pipe(b, &stop);
        } else if (which == b->router) {
            for (int i = 0; i < DRAIN_BATCH && recv_one(b); i++)
                ;
        } else if (!which && zpoller_terminated(poller)) {
            if (!pipe)
                INFO(b, "broker: interrupted, shutting down");
            break;
        }
        b->now = pf_now_s();
        if (b->now >= next_tick) {
            tick(b);
            next_tick = b->now + hb_s(b);
        }
        drop_gone(b);
        pump(b);
        drop_gone(b);
        b->busy_s += pf_now_s() - t0;
    }
    zpoller_destroy(&poller);
    b->pipe = NULL;
    return rc;
}

/* ---- public ---- */

static void request_item_free(void **item)
{
    request_t *r = *item;
    request_free(&r);
    *item = NULL;
}

pf_broker_t *pf_broker_new(const pf_broker_opts_t *opts, char *err, size_t errlen)
{
    pf_broker_t *b = calloc(1, sizeof *b);
    if (!b) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    if (opts)
        b->o = *opts;
    else
        pf_broker_opts_init(&b->o);
    if (!b->o.endpoint)
        b->o.endpoint = PF_BROKER_DEFAULT_ENDPOINT;
    if (b->o.heartbeat_ms <= 0 || b->o.liveness <= 0 || b->o.max_attempts <= 0 ||
        b->o.max_msg_bytes <= 0 || b->o.max_running <= 0) {
        pf_fail(err, errlen, PF_EINPUT, "broker: heartbeat, liveness, attempts, message size and "
                                        "running requests must be positive");
        goto fail;
    }
    pf_dispatch_opts_t dopts;
    pf_dispatch_opts_init(&dopts);
    dopts.max_attempts = b->o.max_attempts;
    dopts.liveness_s = b->o.liveness * hb_s(b);
    pf_dispatch_events_t ev = {b, on_cancel, on_poisoned, on_worker_dead};
    b->dispatch = pf_dispatch_new(&dopts, &ev);
    b->blobs = pf_blobstore_new();
    b->peers = zhashx_new();
    b->requests = zhashx_new();
    b->order = zlistx_new();
    b->gone = zlistx_new();
    if (!b->dispatch || !b->blobs || !b->peers || !b->requests || !b->order || !b->gone) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    zhashx_set_destructor(b->peers, peer_free);
    zhashx_set_destructor(b->requests, request_item_free);
    zlistx_set_destructor(b->gone, (zlistx_destructor_fn *)zstr_free);
    zlistx_set_duplicator(b->gone, (zlistx_duplicator_fn *)strdup);

    b->router = zsock_new(ZMQ_ROUTER);
    if (!b->router) {
        pf_fail(err, errlen, PF_ERR, "cannot create a ROUTER socket");
        goto fail;
    }
    zsock_set_router_mandatory(b->router, 1);
    zsock_set_sndhwm(b->router, PEER_HWM);
    zsock_set_rcvhwm(b->router, PEER_HWM);
    zsock_set_linger(b->router, 100);
    int64_t maxmsg = b->o.max_msg_bytes;
    zmq_setsockopt(zsock_resolve(b->router), ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (zsock_bind(b->router, "%s", b->o.endpoint) < 0) {
        pf_fail(err, errlen, PF_ERR, "cannot bind %s: %s", b->o.endpoint, zmq_strerror(errno));
        goto fail;
    }
    char *last = zsock_last_endpoint(b->router); /* with the port a "tcp://...:0" got */
    snprintf(b->endpoint, sizeof b->endpoint, "%s", last ? last : b->o.endpoint);
    free(last);
    /* Request numbers (the high half of job ids) start at random: a worker that outlived a
     * broker sends the answers it finished meanwhile to the next broker on that endpoint, which
     * must not take them for answers to its own jobs. */
    zuuid_t *u = zuuid_new();
    if (u) {
        memcpy(&b->next_seq, zuuid_data(u), sizeof b->next_seq);
        zuuid_destroy(&u);
    }
    b->t_start = b->now = pf_now_s();
    return b;
fail:
    pf_broker_destroy(&b);
    return NULL;
}

void pf_broker_destroy(pf_broker_t **bp)
{
    if (!bp || !*bp)
        return;
    pf_broker_t *b = *bp;
    if (b->router && b->peers)
        for (peer_t *p = zhashx_first(b->peers); p; p = zhashx_next(b->peers))
            if (p->kind == PEER_WORKER)
                send_bye(b, p, "broker shutting down");
    zsock_destroy(&b->router);
    zlistx_destroy(&b->order);
    zhashx_destroy(&b->requests); /* before the dispatch core: searches go with their requests */
    pf_dispatch_destroy(&b->dispatch);
    pf_blobstore_destroy(&b->blobs);
    zhashx_destroy(&b->peers);
    zlistx_destroy(&b->gone);
    free(b->buf);
    free(b);
    *bp = NULL;
}

const char *pf_broker_endpoint(const pf_broker_t *b)
{
    return b->endpoint;
}

int pf_broker_run(pf_broker_t *b)
{
    INFO(b, "broker: serving on %s (heartbeat %d ms, liveness %d, max attempts %d)",
              b->endpoint, b->o.heartbeat_ms, b->o.liveness, b->o.max_attempts);
    return loop(b, NULL);
}

void pf_broker_get_stats(const pf_broker_t *b, pf_broker_stats_t *st)
{
    pf_dispatch_stats_t ds;
    pf_dispatch_get_stats(b->dispatch, &ds);
    memset(st, 0, sizeof *st);
    st->wall_s = pf_now_s() - b->t_start;
    st->busy_s = b->busy_s;
    st->msgs_in = b->msgs_in;
    st->msgs_out = b->msgs_out;
    st->malformed = b->malformed;
    st->dispatched = ds.dispatched;
    st->answered = ds.answered;
    st->requeued = ds.requeued;
    st->poisoned = ds.poisoned;
    st->workers = ds.workers;
    st->requests = b->nrequests;
}

void pf_broker_actor(zsock_t *pipe, void *args)
{
    char err[512] = "";
    pf_broker_t *b = pf_broker_new(args, err, sizeof err);
    zsock_signal(pipe, 0);
    if (!b) {
        zstr_sendx(pipe, "ERROR", err, NULL);
        char *cmd;
        while ((cmd = zstr_recv(pipe)) != NULL) { /* wait for $TERM */
            int term = streq(cmd, "$TERM");
            free(cmd);
            if (term)
                break;
        }
        return;
    }
    zstr_sendx(pipe, "OK", pf_broker_endpoint(b), NULL);
    loop(b, pipe);
    pf_broker_destroy(&b);
}
