#include "broker/broker.h"
#include "broker/access.h"
#include "broker/agent_proto.h"
#include "broker/broker_state.h"
#include "broker/client_proto.h"
#include "broker/intake.h"
#include "broker/peers.h"
#include "broker/publish.h"
#include "broker/requests.h"
#include "broker/testseam.h"
#include "broker/worker_proto.h"
#include "planner/core/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

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
    o->max_credits = 64;
}

static double hb_s(const pf_broker_t *b)
{
    return b->o.heartbeat_ms / 1000.0;
}


/* ---- the loop ---- */

static void handle(pf_broker_t *b, zmq_msg_t *parts, int nparts)
{
    size_t idlen = zmq_msg_size(&parts[0]);
    if (idlen == 0 || idlen > IDENTITY_MAX)
        return;
    peer_t *p = pf_peers_get(b, zmq_msg_data(&parts[0]), idlen);
    if (!p) {
        zsys_error("broker: out of memory for a new peer");
        return;
    }
    p->last_seen = b->now;
    if (nparts > 1 && pf_access_admit(b, &p, &parts[1]) != PF_OK)
        return;
    if (nparts != 3) {
        pf_peers_malformed(b, p, "%d frames after the identity, expected 2", nparts - 1);
        return;
    }
    char err[128];
    pf_wire_msg_t kind;
    if (pf_wire_parse_header(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &kind, err,
                             sizeof err) != PF_OK) {
        pf_peers_malformed(b, p, "%s", err);
        return;
    }
    const uint8_t *data = zmq_msg_data(&parts[2]);
    size_t len = zmq_msg_size(&parts[2]);
    if (!pf_access_may_send(b, p, kind))
        return;
    if (pf_agent_proto_on_msg(b, p, kind, data, len))
        return;
    if (kind >= PF_MSG_READY && kind <= PF_MSG_BYE) {
        pf_worker_proto_on_msg(b, p, kind, data, len);
    } else if (kind >= PF_MSG_SUBMIT && kind <= PF_MSG_LIST) {
        if (p->kind == PEER_WORKER) {
            pf_peers_malformed(b, p, "%s is a client message and this peer is a worker",
                               pf_wire_msg_name(kind));
            return;
        }
        p->kind = PEER_CLIENT;
        pf_client_proto_on_msg(b, p, kind, data, len);
    } else {
        pf_peers_malformed(b, p, "%s is not sent to a broker", pf_wire_msg_name(kind));
    }
}

/* Receive one message without blocking: identity, header, body, and any extra frames (counted,
 * then dropped). false when nothing is waiting. */
static bool recv_one(pf_broker_t *b)
{
    zmq_msg_t parts[3];
    int n = pf_wire_recv(zsock_resolve(b->router), parts, 3);
    if (n == 0)
        return false;
    b->msgs_in++;
    /* Stamped on arrival, not when the batch began: a slow message (a large SUBMIT) would
     * otherwise age every heartbeat read after it, and the next tick would find their workers
     * silent. */
    b->now = pf_clock_now(&b->o.clock);
    handle(b, parts, n);
    pf_wire_close(parts, n, 3);
    return true;
}

/* dispatch event: a job failed max_attempts times. Its request decides what that means; a job of
 * no request is the test seam's. */
static void on_poisoned(void *ctx, void *owner, uint64_t owner_job, uint64_t job_id,
                        const char *error)
{
    pf_broker_t *b = ctx;
    zsys_warning("broker: %s", error);
    pf_fair_done(b->fair, job_id);
    if (owner)
        pf_requests_job_poisoned(b, owner, owner_job, error);
    else
        pf_testseam_noop_done(b, job_id, false);
}

static void pump(pf_broker_t *b)
{
    /* Only as many jobs enter the dispatch core as it has free credits for; which ones is the
     * lanes' turn-taking (broker/fair.h), so a queue a large request built never stands in front
     * of a small request's jobs. */
    if (pf_fair_queued(b->fair) > 0) {
        pf_dispatch_stats_t ds;
        pf_dispatch_get_stats(b->dispatch, &ds);
        pf_fair_job_t j;
        for (long long room = ds.credits_free - ds.queued; room > 0 && pf_fair_pop(b->fair, &j);
             room--)
            if (pf_dispatch_submit(b->dispatch, j.id, j.kind, j.timeout_s, j.owner,
                                   j.owner_job) != PF_OK)
                on_poisoned(b, j.owner, j.owner_job, j.id, "broker: out of memory queueing a job");
    }
    pf_dispatch_assign_t a;
    while (pf_dispatch_next(b->dispatch, b->now, &a))
        pf_worker_proto_send_job(b, &a);
}

static void tick(pf_broker_t *b)
{
    pf_dispatch_tick(b->dispatch, b->now);
    pf_agent_proto_tick(b);
    Planfarm__Heartbeat hb = PLANFARM__HEARTBEAT__INIT;
    zlistx_t *stale = zlistx_new();
    for (peer_t *p = zhashx_first(b->peers); p; p = zhashx_next(b->peers)) {
        if (p->kind == PEER_WORKER) {
            if (b->now - p->last_heartbeat_sent >= 0.9 * hb_s(b)) {
                hb.running = (uint32_t)pf_dispatch_worker_held(b->dispatch, p->worker);
                pf_peers_send(b, p, PF_MSG_HEARTBEAT, &hb.base);
                p->last_heartbeat_sent = b->now;
            }
        } else if (p->kind != PEER_AGENT && b->now - p->last_seen > PEER_IDLE_S && stale) {
            zlistx_add_end(stale, p);
        }
    }
    if (stale) {
        for (peer_t *p = zlistx_first(stale); p; p = zlistx_next(stale))
            pf_peers_drop(b, p);
        zlistx_destroy(&stale);
    }
}

static void on_pipe(pf_broker_t *b, zsock_t *pipe, bool *stop)
{
    zmsg_t *msg = zmsg_recv(pipe);
    if (!msg) {
        *stop = true;
        return;
    }
    char *cmd = zmsg_popstr(msg);
    if (!cmd || streq(cmd, "$TERM")) {
        *stop = true;
    } else if (streq(cmd, "STATS")) {
        pf_broker_stats_t st;
        pf_broker_get_stats(b, &st);
        zstr_sendf(pipe, "STATS %.6f %.6f %lld %lld %lld %lld %d %.6f %d %lld %.6f %lld",
                   st.wall_s, st.busy_s, st.msgs_in, st.msgs_out, st.malformed, st.dispatched,
                   st.workers, st.max_stall_s, st.preparing, st.reruns, st.rerun_max_s,
                   st.workers_lost);
    } else {
        pf_testseam_command(b, pipe, cmd, msg);
    }
    free(cmd);
    zmsg_destroy(&msg);
}

/* Metrics and the request list to the HTTP face, with the loop's stats. */
static void publish(pf_broker_t *b)
{
    if (!b->http)
        return;
    pf_broker_stats_t st;
    pf_broker_get_stats(b, &st);
    pf_publish_pages(b, &st, pf_agent_proto_count(b));
}

/* Answers and ends of this turn in one commit (acknowledged SUBMITs have committed already). */
static void journal_commit(pf_broker_t *b)
{
    char err[512];
    if (b->journal && pf_journal_commit(b->journal, err, sizeof err) != PF_OK) {
        b->journal_errors++;
        zsys_error("broker: %s", err);
    }
}

static int loop(pf_broker_t *b, zsock_t *pipe)
{
    zpoller_t *poller = zpoller_new(b->router, pf_prep_sock(b->prep), pipe, NULL);
    if (!poller)
        return PF_ERR;
    if (pipe)
        zpoller_set_nonstop(poller, true);
    b->now = pf_clock_now(&b->o.clock);
    double next_tick = b->now + hb_s(b);
    publish(b);
    bool stop = false;
    while (!stop) {
        /* at most one interval: a test's clock may jump, and the loop must look at it again */
        int timeout_ms = (int)((next_tick - pf_clock_now(&b->o.clock)) * 1000) + 1;
        if (timeout_ms > b->o.heartbeat_ms)
            timeout_ms = b->o.heartbeat_ms;
        void *which = zpoller_wait(poller, timeout_ms < 0 ? 0 : timeout_ms);
        double t0 = pf_now_s();
        b->now = pf_clock_now(&b->o.clock);
        if (pipe && which == pipe) {
            on_pipe(b, pipe, &stop);
        } else if (which == pf_prep_sock(b->prep)) {
            pf_intake_prepared(b);
        } else if (which == b->router) {
            for (int i = 0; i < DRAIN_BATCH && recv_one(b); i++)
                ;
        } else if (!which && zpoller_terminated(poller)) {
            if (!pipe)
                pf_peer_io_info(b->o.quiet, "broker: interrupted, shutting down");
            break;
        }
        b->now = pf_clock_now(&b->o.clock);
        if (b->now >= next_tick) {
            tick(b);
            publish(b);
            next_tick = b->now + hb_s(b);
        }
        pf_peers_drop_gone(b);
        pump(b);
        pf_peers_drop_gone(b);
        journal_commit(b);
        double turn_s = pf_now_s() - t0;
        b->busy_s += turn_s;
        if (turn_s > b->max_stall_s)
            b->max_stall_s = turn_s;
    }
    zpoller_destroy(&poller);
    return PF_OK;
}


/* ---- public ---- */

/* The options as given, or the defaults; PF_EINPUT for values the broker cannot run with. */
static int take_opts(pf_broker_t *b, const pf_broker_opts_t *opts, char *err, size_t errlen)
{
    if (opts)
        b->o = *opts;
    else
        pf_broker_opts_init(&b->o);
    if (!b->o.endpoint)
        b->o.endpoint = PF_BROKER_DEFAULT_ENDPOINT;
    if (b->o.heartbeat_ms <= 0 || b->o.liveness <= 0 || b->o.max_attempts <= 0 ||
        b->o.max_msg_bytes <= 0 || b->o.max_running <= 0 || b->o.max_credits <= 0 ||
        b->o.max_credits > MAX_CREDITS)
        return pf_fail(err, errlen, PF_EINPUT, "broker: heartbeat, liveness, attempts, message "
                                               "size, running requests and credits (at most %d) "
                                               "must be positive", MAX_CREDITS);
    return PF_OK;
}

/* The dispatch core, the tables, the helper thread, the lanes and the journal. */
static int make_parts(pf_broker_t *b, char *err, size_t errlen)
{
    pf_dispatch_opts_t dopts;
    pf_dispatch_opts_init(&dopts);
    dopts.max_attempts = b->o.max_attempts;
    dopts.liveness = b->o.liveness;
    pf_dispatch_events_t ev = {b, pf_worker_proto_on_cancel, on_poisoned, pf_worker_proto_on_dead};
    b->dispatch = pf_dispatch_new(&dopts, &ev);
    b->blobs = pf_blobstore_new();
    b->peers = zhashx_new();
    b->requests = zhashx_new();
    b->order = zlistx_new();
    b->gone = zlistx_new();
    if (!b->dispatch || !b->blobs || !b->peers || !b->requests || !b->order || !b->gone ||
        pf_agent_proto_init(b) != PF_OK)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    zhashx_set_destructor(b->peers, pf_peers_item_free);
    zhashx_set_destructor(b->requests, pf_requests_item_free);
    zlistx_set_destructor(b->gone, (zlistx_destructor_fn *)zstr_free);
    zlistx_set_duplicator(b->gone, (zlistx_duplicator_fn *)strdup);
    if (!(b->prep = pf_prep_new(b->o.prep_delay_ms, err, errlen)))
        return PF_ERR;
    if (!(b->fair = pf_fair_new(b->o.client_max_jobs)))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    if (b->o.journal_path && !(b->journal = pf_journal_open(b->o.journal_path, err, errlen)))
        return PF_ERR;
    return PF_OK;
}

static int allow_token(void *http, const char *token, const char *key, bool admin)
{
    return pf_http_allow(http, token, key, admin);
}

/* The ROUTER socket, bound; b->endpoint the address it got. */
static int bind_router(pf_broker_t *b, char *err, size_t errlen)
{
    b->router = zsock_new(ZMQ_ROUTER);
    if (!b->router)
        return pf_fail(err, errlen, PF_ERR, "cannot create a ROUTER socket");
    zsock_set_router_mandatory(b->router, 1);
    zsock_set_sndhwm(b->router, PEER_HWM);
    zsock_set_rcvhwm(b->router, PEER_HWM);
    zsock_set_linger(b->router, 100);
    if (b->auth)
        pf_auth_apply_server(b->auth, b->router);
    int64_t maxmsg = b->o.max_msg_bytes;
    zmq_setsockopt(zsock_resolve(b->router), ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (zsock_bind(b->router, "%s", b->o.endpoint) < 0)
        return pf_fail(err, errlen, PF_ERR, "cannot bind %s: %s", b->o.endpoint,
                       zmq_strerror(errno));
    if (b->auth && pf_auth_watch(b->auth, b->router, err, errlen) != PF_OK)
        return PF_ERR;
    char *last = zsock_last_endpoint(b->router); /* with the port a "tcp://...:0" got */
    snprintf(b->endpoint, sizeof b->endpoint, "%s", last ? last : b->o.endpoint);
    free(last);
    return PF_OK;
}

pf_broker_t *pf_broker_new(const pf_broker_opts_t *opts, char *err, size_t errlen)
{
    pf_broker_t *b = calloc(1, sizeof *b);
    if (!b) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    if (take_opts(b, opts, err, errlen) != PF_OK)
        goto fail;
    /* answers are trusted without a re-run only where no other process can send them */
    if (b->o.own_workers_only && strncmp(b->o.endpoint, "inproc://", 9) != 0) {
        pf_fail(err, errlen, PF_EINPUT, "broker: own workers only needs an inproc:// endpoint, "
                "not %s", b->o.endpoint);
        goto fail;
    }
    /* before anything listens: a refused endpoint binds nothing */
    if (pf_curve_check_plain("broker", b->o.endpoint, b->o.auth.cert != NULL, b->o.auth.insecure,
                             err, errlen) != PF_OK)
        goto fail;
    if (pf_auth_wanted(&b->o.auth) && (!(b->auth = pf_auth_new(&b->o.auth, err, errlen)) ||
                                       pf_auth_start(b->auth, err, errlen) != PF_OK))
        goto fail;
    if (make_parts(b, err, errlen) != PF_OK || bind_router(b, err, errlen) != PF_OK)
        goto fail;
    if (b->o.http_addr && !(b->http = pf_http_new(b->o.http_addr, err, errlen)))
        goto fail;
    if (b->http && b->auth) { /* a client's token shows it its own requests, an admin's all */
        pf_http_guard(b->http);
        if (pf_auth_http_tokens(b->auth, allow_token, b->http) != PF_OK) {
            pf_fail(err, errlen, PF_ERR, "--http: out of memory keeping the keys' tokens");
            goto fail;
        }
    }
    b->t_start_wall = pf_now_s();
    b->now = pf_clock_now(&b->o.clock);
    /* restored requests take fresh job numbers (random high halves), so a worker that still
     * answers the killed broker's jobs cannot be taken for answering these */
    if (pf_intake_restore(b, err, errlen) != PF_OK)
        goto fail;
    if (b->restored)
        pf_peer_io_info(b->o.quiet, "broker: journal %s: %lld unfinished requests restored",
                        b->o.journal_path, b->restored);
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
    pf_http_destroy(&b->http); /* its thread first: it holds nothing of ours, but stops now */
    if (b->router && b->peers)
        for (peer_t *p = zhashx_first(b->peers); p; p = zhashx_next(b->peers))
            if (p->kind == PEER_WORKER)
                pf_peers_send_bye(b, p, "broker shutting down");
    pf_agent_proto_free(b);
    zsock_destroy(&b->router);
    pf_auth_destroy(&b->auth); /* after the socket: zauth answers its handshakes until then */
    zlistx_destroy(&b->order);
    pf_prep_destroy(&b->prep);    /* its thread may hold a search: stopped first */
    zhashx_destroy(&b->requests); /* before the dispatch core: searches go with their requests */
    pf_journal_close(&b->journal);
    pf_dispatch_destroy(&b->dispatch);
    pf_fair_destroy(&b->fair);
    pf_blobstore_destroy(&b->blobs);
    zhashx_destroy(&b->peers);
    zlistx_destroy(&b->gone);
    pf_peer_io_pack_buf_free(&b->pack);
    free(b);
    *bp = NULL;
}

const char *pf_broker_endpoint(const pf_broker_t *b)
{
    return b->endpoint;
}

int pf_broker_run(pf_broker_t *b)
{
    pf_peer_io_info(b->o.quiet,
                    "broker: serving on %s (heartbeat %d ms, liveness %d, max attempts %d; "
                    "%s)",
                    b->endpoint, b->o.heartbeat_ms, b->o.liveness, b->o.max_attempts,
                    b->auth ? "CURVE" : "plain, no keys");
    if (b->auth)
        pf_peer_io_info(b->o.quiet, "broker: public key %s; %zu keys allowed",
                        pf_auth_public_txt(b->auth), pf_auth_keys(b->auth));
    if (b->http)
        pf_peer_io_info(b->o.quiet, "broker: status page and /metrics on %s", pf_http_url(b->http));
    return loop(b, NULL);
}

void pf_broker_get_stats(const pf_broker_t *b, pf_broker_stats_t *st)
{
    pf_dispatch_stats_t ds;
    pf_dispatch_get_stats(b->dispatch, &ds);
    memset(st, 0, sizeof *st);
    st->wall_s = pf_now_s() - b->t_start_wall;
    st->busy_s = b->busy_s;
    st->msgs_in = b->msgs_in;
    st->msgs_out = b->msgs_out;
    st->malformed = b->malformed;
    st->dispatched = ds.dispatched;
    st->answered = ds.answered;
    st->requeued = ds.requeued;
    st->poisoned = ds.poisoned;
    st->foreign_answers = b->foreign;
    st->workers = ds.workers;
    st->requests = b->nrequests;
    st->max_stall_s = b->max_stall_s;
    st->prep_max_s = b->prep_max_s;
    st->preparing = b->prep ? pf_prep_pending(b->prep) : 0;
    st->restored = b->restored;
    st->replayed_answers = b->replayed_answers;
    st->journal_errors = b->journal_errors;
    st->reruns = b->reruns;
    st->rerun_max_s = b->rerun_max_s;
    st->workers_lost = b->workers_lost;
}

int pf_broker_journal_compact_or_expire(const char *path, double expire_days, int compact,
                                        long long *removed, char *err, size_t errlen)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    pf_journal_t *j = pf_journal_open(path, err, errlen);
    if (!j)
        return PF_ERR;
    int rc = pf_journal_expire(j, (double)ts.tv_sec - expire_days * 86400.0, removed, err, errlen);
    if (rc == PF_OK && compact)
        rc = pf_journal_compact(j, err, errlen);
    pf_journal_close(&j);
    return rc;
}

void pf_broker_actor(zsock_t *pipe, void *args)
{
    char err[512] = "";
    pf_broker_t *b = pf_broker_new(args, err, sizeof err);
    zsock_signal(pipe, 0);
    if (!b) {
        pf_peer_io_actor_failed(pipe, err);
        return;
    }
    zstr_sendx(pipe, "OK", pf_broker_endpoint(b), NULL);
    loop(b, pipe);
    pf_broker_destroy(&b);
}
