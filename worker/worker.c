#include "worker/worker.h"
#include "planner/search/job.h"
#include "planner/core/util.h"
#include "proto/job_codec.h"
#include "proto/peer_io.h"
#include "proto/wire.h"
#include "worker/cache.h"
#include "worker/solver.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#define DRAIN_BATCH 1024
#define SHUTDOWN_GRACE_S 2.0

struct pf_worker {
    pf_worker_opts_t o;
    char name[128], endpoint[256];
    int cores;
    zsock_t *dealer;
    pf_curve_client_t keys;
    pf_solver_t *solver;
    int threads; /* OpenMP threads per job */
    pf_cache_t *cache;
    zlistx_t *held;     /* pf_wjob_t: every job this worker holds */
    zhashx_t *fetching; /* hex hash -> FETCH sent, BLOB awaited */
    int connected;
    int conn; /* connections made so far: credits count the jobs of the current one */
    int silent_ticks; /* heartbeat intervals since the broker last sent anything */
    double next_heartbeat, reconnect_at; /* on the options' clock */
    int backoff_ms;
    int warned;
    int refused; /* the broker answered ERROR (a key it does not list as a worker's): leave */
    pf_peer_io_pack_buf_t pack;
    pf_worker_stats_t st;
};

void pf_worker_opts_init(pf_worker_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->credits = 2;
    o->heartbeat_ms = 1000;
    o->liveness = 5;
    o->reconnect_max_ms = 32000;
    o->cache_bytes = (size_t)1 << 30;
    o->max_msg_bytes = 256LL << 20;
}

static double hb_s(const pf_worker_t *w)
{
    return w->o.heartbeat_ms / 1000.0;
}

/* ---- jobs on the socket thread ---- */

static void job_free(pf_worker_t *w, pf_wjob_t *j)
{
    if (!j)
        return;
    pf_cache_unpin(w->cache, j->graph);
    pf_cache_unpin(w->cache, j->cluster);
    pf_job_codec_clear(&j->wire);
    free(j->result);
    free(j);
}

static void held_remove(pf_worker_t *w, pf_wjob_t *j)
{
    void *h = zlistx_find(w->held, j);
    if (h)
        zlistx_delete(w->held, h);
}

static pf_wjob_t *held_find(pf_worker_t *w, uint64_t id)
{
    for (pf_wjob_t *j = zlistx_first(w->held); j; j = zlistx_next(w->held))
        if (j->id == id)
            return j;
    return NULL;
}

/* ---- sending ---- */

static void malformed(pf_worker_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void malformed(pf_worker_t *w, const char *fmt, ...)
{
    if (w->warned)
        return;
    char self[160];
    snprintf(self, sizeof self, "worker %s", w->name);
    va_list ap;
    va_start(ap, fmt);
    pf_peer_io_vdropped(&w->warned, self, "the broker", fmt, ap);
    va_end(ap);
}

/* Non-blocking: a broker that does not read is found dead by the heartbeat, not by a stuck
 * send. */
static int send_raw(pf_worker_t *w, pf_wire_msg_t kind, const uint8_t *body, size_t len)
{
    return w->dealer ? pf_peer_io_send_raw(zsock_resolve(w->dealer), NULL, 0, kind, body, len)
                     : PF_ERR;
}

static int send_msg(pf_worker_t *w, pf_wire_msg_t kind, const ProtobufCMessage *m)
{
    return w->dealer ? pf_peer_io_send(zsock_resolve(w->dealer), NULL, 0, kind, m, &w->pack)
                     : PF_ERR;
}

static void send_failed(pf_worker_t *w, uint64_t id, const char *error)
{
    Planfarm__Failed m = PLANFARM__FAILED__INIT;
    m.job_id = id;
    m.error = (char *)error;
    send_msg(w, PF_MSG_FAILED, &m.base);
}

/* Answer a job this worker will not run (cancelled, blob lost) and forget it. */
static void drop_job(pf_worker_t *w, pf_wjob_t *j, const char *why)
{
    send_failed(w, j->id, why);
    held_remove(w, j);
    job_free(w, j);
}

static void send_answer(pf_worker_t *w, pf_wjob_t *j)
{
    if (j->failed) {
        send_failed(w, j->id, j->error);
        w->st.jobs_failed++;
    } else {
        send_raw(w, PF_MSG_RESULT, j->result, j->result_len);
        w->st.jobs_done++;
    }
}

/* Answers the solver finished: sent now, or kept until the next connection. */
static void drain_outbox(pf_worker_t *w)
{
    pf_wjob_t *j = pf_solver_take_answers(w->solver);
    while (j) {
        pf_wjob_t *next = j->next;
        j->next = NULL;
        if (w->connected) {
            send_answer(w, j);
            if (w->o.verbose)
                pf_peer_io_info(w->o.quiet, "worker %s: job %llu (%s) %s in %.3f s", w->name,
                                (unsigned long long)j->id, pf_job_kind_name(j->wire.kind),
                                j->failed ? j->error : "done", j->seconds);
            held_remove(w, j);
            job_free(w, j);
        } else {
            j->parked = 1;
        }
        j = next;
    }
}

/* ---- blobs and job start ---- */

static int need_blob(const pf_blob_ref_t *r, pf_cache_entry_t *have)
{
    return r->hash_len > 0 && !have;
}

static void fetch(pf_worker_t *w, const pf_blob_ref_t *r)
{
    char key[2 * PF_HASH_MAX + 1];
    pf_wire_hex(r->hash, r->hash_len, key);
    if (zhashx_lookup(w->fetching, key))
        return;
    Planfarm__Fetch m = PLANFARM__FETCH__INIT;
    m.hash.data = (uint8_t *)r->hash;
    m.hash.len = r->hash_len;
    if (send_msg(w, PF_MSG_FETCH, &m.base) == PF_OK) {
        zhashx_insert(w->fetching, key, (void *)1);
        w->st.fetches++;
    }
}

/* Pin what the cache has; fetch what it lacks; queue the job when it has everything and it fits
 * what it got (else it is answered FAILED and forgotten: j is gone). */
static void try_start(pf_worker_t *w, pf_wjob_t *j)
{
    if (need_blob(&j->wire.graph, j->graph) &&
        (j->graph = pf_cache_lookup(w->cache, j->wire.graph.hash, j->wire.graph.hash_len)))
        pf_cache_pin(j->graph);
    if (need_blob(&j->wire.cluster, j->cluster) &&
        (j->cluster = pf_cache_lookup(w->cache, j->wire.cluster.hash, j->wire.cluster.hash_len)))
        pf_cache_pin(j->cluster);
    int missing = 0;
    if (need_blob(&j->wire.graph, j->graph)) {
        fetch(w, &j->wire.graph);
        missing = 1;
    }
    if (need_blob(&j->wire.cluster, j->cluster)) {
        fetch(w, &j->wire.cluster);
        missing = 1;
    }
    if (missing) {
        j->state = PF_WJOB_WAITING;
        return;
    }
    char err[256];
    if (pf_job_codec_check(&j->wire, pf_cache_entry_graph(j->graph),
                           pf_cache_entry_cluster(j->cluster), err, sizeof err) != PF_OK) {
        drop_job(w, j, err);
        return;
    }
    pf_solver_queue(w->solver, j);
}

static int ref_is(const pf_blob_ref_t *r, const ProtobufCBinaryData *hash)
{
    return r->hash_len == hash->len && hash->len > 0 && !memcmp(r->hash, hash->data, hash->len);
}

/* Every job waiting for this blob is answered FAILED: it cannot run here. */
static void fail_waiting(pf_worker_t *w, const ProtobufCBinaryData *hash, const char *why)
{
    zlistx_t *victims = zlistx_new();
    if (!victims)
        return;
    for (pf_wjob_t *j = zlistx_first(w->held); j; j = zlistx_next(w->held))
        if (j->state == PF_WJOB_WAITING && ((ref_is(&j->wire.graph, hash) && !j->graph) ||
                                      (ref_is(&j->wire.cluster, hash) && !j->cluster)))
            zlistx_add_end(victims, j);
    for (pf_wjob_t *j = zlistx_first(victims); j; j = zlistx_next(victims))
        drop_job(w, j, why);
    zlistx_destroy(&victims);
}

static void on_blob(pf_worker_t *w, const uint8_t *data, size_t len)
{
    char err[256], key[2 * PF_HASH_MAX + 1];
    Planfarm__Blob *m = planfarm__blob__unpack(NULL, len, data);
    if (!m) {
        malformed(w, "BLOB: not a valid Blob message");
        return;
    }
    if (m->hash.len == 0 || m->hash.len > PF_HASH_MAX) {
        malformed(w, "BLOB: bad hash length %zu", m->hash.len);
        goto done;
    }
    pf_wire_hex(m->hash.data, m->hash.len, key);
    zhashx_delete(w->fetching, key);
    if (m->error && m->error[0]) {
        snprintf(err, sizeof err, "blob %.12s: %s", key, m->error);
        fail_waiting(w, &m->hash, err);
        goto done;
    }
    zdigest_t *dg = zdigest_new();
    int same = dg != NULL;
    if (dg) {
        zdigest_update(dg, m->data.data, m->data.len);
        same = zdigest_size(dg) == m->hash.len &&
               !memcmp(zdigest_data(dg), m->hash.data, m->hash.len);
        zdigest_destroy(&dg);
    }
    if (!same) {
        snprintf(err, sizeof err, "blob %.12s: its bytes do not match its hash", key);
        fail_waiting(w, &m->hash, err);
        goto done;
    }
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    int rc = m->kind == PLANFARM__BLOB_KIND__BLOB_GRAPH
                 ? pf_model_codec_decode_graph(m->data.data, m->data.len, &g, err, sizeof err)
                 : pf_model_codec_decode_cluster(m->data.data, m->data.len, &c, err, sizeof err);
    if (rc != PF_OK || !pf_cache_insert(w->cache, m->hash.data, m->hash.len, g, c, m->data.len)) {
        char why[320];
        snprintf(why, sizeof why, "blob %.12s: %s", key, rc != PF_OK ? err : "out of memory");
        fail_waiting(w, &m->hash, why);
        goto done;
    }
    /* try_start may drop a job from `held`: collect first */
    zlistx_t *waiting = zlistx_new();
    if (waiting) {
        for (pf_wjob_t *j = zlistx_first(w->held); j; j = zlistx_next(w->held))
            if (j->state == PF_WJOB_WAITING)
                zlistx_add_end(waiting, j);
        for (pf_wjob_t *j = zlistx_first(waiting); j; j = zlistx_next(waiting))
            try_start(w, j);
        zlistx_destroy(&waiting);
    }
done:
    planfarm__blob__free_unpacked(m, NULL);
}

static void on_job(pf_worker_t *w, const uint8_t *data, size_t len)
{
    char err[256];
    Planfarm__Job *m = planfarm__job__unpack(NULL, len, data);
    if (!m) {
        malformed(w, "JOB: not a valid Job message");
        return;
    }
    if (held_find(w, m->id)) {
        malformed(w, "JOB %llu: already held", (unsigned long long)m->id);
        goto done;
    }
    /* READY promised the broker `credits` jobs at most (jobs left from an earlier connection
     * are the old broker identity's, not counted); more would grow without bound. */
    int mine = 0;
    for (pf_wjob_t *h = zlistx_first(w->held); h; h = zlistx_next(w->held))
        mine += h->conn == w->conn;
    if (mine >= w->o.credits) {
        char why[96];
        snprintf(why, sizeof why, "worker: holds %d jobs already, its credits", mine);
        malformed(w, "JOB %llu: past the credits", (unsigned long long)m->id);
        send_failed(w, m->id, why);
        goto done;
    }
    pf_wjob_t *j = calloc(1, sizeof *j);
    if (!j) {
        send_failed(w, m->id, "worker: out of memory");
        goto done;
    }
    j->id = m->id;
    j->conn = w->conn;
    if (pf_job_codec_from_pb(m, &j->wire, err, sizeof err) != PF_OK) {
        char why[320];
        snprintf(why, sizeof why, "cannot decode the job: %s", err);
        send_failed(w, m->id, why);
        job_free(w, j);
        goto done;
    }
    if (!zlistx_add_end(w->held, j)) {
        send_failed(w, m->id, "worker: out of memory");
        job_free(w, j);
        goto done;
    }
    try_start(w, j);
done:
    planfarm__job__free_unpacked(m, NULL);
}

static void on_cancel(pf_worker_t *w, const uint8_t *data, size_t len)
{
    Planfarm__Cancel *m = planfarm__cancel__unpack(NULL, len, data);
    if (!m) {
        malformed(w, "CANCEL: not a valid Cancel message");
        return;
    }
    for (size_t i = 0; i < m->n_job_ids; i++) {
        pf_wjob_t *j = held_find(w, m->job_ids[i]);
        if (!j)
            continue;
        w->st.jobs_cancelled++;
        if (j->state == PF_WJOB_WAITING || (j->state == PF_WJOB_QUEUED && pf_solver_unqueue(w->solver, j)))
            drop_job(w, j, "cancelled");
        else
            atomic_store(&j->cancel, 1); /* running: it answers when it stops */
    }
    planfarm__cancel__free_unpacked(m, NULL);
}

/* ---- connection ---- */

static void disconnect(pf_worker_t *w, const char *why)
{
    zsys_warning("worker %s: %s; reconnecting in %.1f s", w->name, why, w->backoff_ms / 1000.0);
    zsock_destroy(&w->dealer);
    w->connected = 0;
    zhashx_purge(w->fetching);
    /* Jobs not yet started are the broker's to hand out again. */
    zlistx_t *victims = zlistx_new();
    if (victims) {
        for (pf_wjob_t *j = zlistx_first(w->held); j; j = zlistx_next(w->held))
            if (j->state == PF_WJOB_WAITING || (j->state == PF_WJOB_QUEUED && pf_solver_unqueue(w->solver, j)))
                zlistx_add_end(victims, j);
        for (pf_wjob_t *j = zlistx_first(victims); j; j = zlistx_next(victims)) {
            held_remove(w, j);
            job_free(w, j);
        }
        zlistx_destroy(&victims);
    }
    w->reconnect_at = pf_clock_now(&w->o.clock) + w->backoff_ms / 1000.0;
    w->backoff_ms = w->backoff_ms * 2 > w->o.reconnect_max_ms ? w->o.reconnect_max_ms
                                                               : w->backoff_ms * 2;
    w->st.reconnects++;
}

static int connect_broker(pf_worker_t *w)
{
    w->dealer = zsock_new(ZMQ_DEALER);
    if (!w->dealer)
        return PF_ERR;
    zsock_set_linger(w->dealer, 0);
    pf_curve_client_apply(&w->keys, w->dealer);
    zsock_set_sndhwm(w->dealer, 100000);
    zsock_set_rcvhwm(w->dealer, 100000);
    int64_t maxmsg = w->o.max_msg_bytes;
    zmq_setsockopt(zsock_resolve(w->dealer), ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (zsock_connect(w->dealer, "%s", w->endpoint) < 0) {
        zsock_destroy(&w->dealer);
        return PF_ERR;
    }
    Planfarm__Ready m = PLANFARM__READY__INIT;
    Planfarm__JobKind kinds[PF_JOB_KIND_COUNT]; /* every kind of the table (planner/search/job.h) */
    for (int k = 0; k < PF_JOB_KIND_COUNT; k++)
        kinds[k] = (Planfarm__JobKind)k;
    m.protocol = PF_WIRE_VERSION;
    m.version = "planfarm 0.1";
    m.cores = (uint32_t)w->cores;
    m.credits = (uint32_t)w->o.credits;
    m.kinds = kinds;
    m.n_kinds = sizeof kinds / sizeof kinds[0];
    m.name = w->name;
    /* the first heartbeat is due one interval after the clock as it was before READY went out:
     * a broker (or a test) that moves the clock on reading READY finds it due */
    w->connected = 1;
    w->conn++;
    w->silent_ticks = 0;
    w->next_heartbeat = pf_clock_now(&w->o.clock) + hb_s(w);
    w->warned = 0;
    send_msg(w, PF_MSG_READY, &m.base);
    /* answers finished while we were away: the broker still uses them if it needs them */
    zlistx_t *done = zlistx_new();
    if (done) {
        for (pf_wjob_t *j = zlistx_first(w->held); j; j = zlistx_next(w->held))
            if (j->parked)
                zlistx_add_end(done, j);
        for (pf_wjob_t *j = zlistx_first(done); j; j = zlistx_next(done)) {
            send_answer(w, j);
            held_remove(w, j);
            job_free(w, j);
        }
        zlistx_destroy(&done);
    }
    return PF_OK;
}

static void on_message(pf_worker_t *w, zmq_msg_t *parts, int n)
{
    char err[128];
    pf_wire_msg_t kind;
    if (n != 2) {
        malformed(w, "%d frames, expected 2", n);
        return;
    }
    if (pf_wire_parse_header(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &kind, err,
                             sizeof err) != PF_OK) {
        malformed(w, "%s", err);
        return;
    }
    const uint8_t *data = zmq_msg_data(&parts[1]);
    size_t len = zmq_msg_size(&parts[1]);
    w->silent_ticks = 0;
    /* A broker that sends anything but BYE is serving us: the next reconnect starts quick
     * again. BYE keeps the back-off growing (a broker that refuses every READY, e.g. another
     * protocol version, is not hammered at the heartbeat rate). */
    if (kind != PF_MSG_BYE)
        w->backoff_ms = w->o.heartbeat_ms;
    w->threads = w->o.threads > 0 ? w->o.threads : w->cores;
    switch (kind) {
    case PF_MSG_JOB: on_job(w, data, len); break;
    case PF_MSG_BLOB: on_blob(w, data, len); break;
    case PF_MSG_CANCEL: on_cancel(w, data, len); break;
    case PF_MSG_HEARTBEAT: break;
    case PF_MSG_BYE: {
        Planfarm__Bye *m = planfarm__bye__unpack(NULL, len, data);
        char why[200];
        snprintf(why, sizeof why, "broker said BYE (%.150s)", m && m->reason ? m->reason : "");
        planfarm__bye__free_unpacked(m, NULL);
        disconnect(w, why);
        break;
    }
    case PF_MSG_ERROR: {
        /* the broker sends a worker ERROR only when it refuses the key: retrying cannot help */
        Planfarm__ErrorReply *m = planfarm__error_reply__unpack(NULL, len, data);
        zsys_error("worker %s: %s; leaving", w->name,
                   m && m->error ? m->error : "the broker refused this worker");
        planfarm__error_reply__free_unpacked(m, NULL);
        w->refused = 1;
        break;
    }
    default: malformed(w, "%s is not sent to a worker", pf_wire_msg_name(kind)); break;
    }
}

/* One message from the broker without blocking; 0 when none is waiting. */
static int recv_one(pf_worker_t *w)
{
    if (!w->dealer)
        return 0;
    zmq_msg_t parts[2];
    int n = pf_wire_recv(zsock_resolve(w->dealer), parts, 2);
    if (n == 0)
        return 0;
    on_message(w, parts, n);
    pf_wire_close(parts, n, 2);
    return 1;
}

/* zmq_poll rather than zpoller: the solver's wake-up pipe is a plain file descriptor, which
 * zmq_pollitem_t takes as it is. */
/* Until the next heartbeat or reconnect, at most one interval: a test's clock may jump, and
 * the loop must look at it again. */
static long poll_timeout_ms(const pf_worker_t *w)
{
    double now = pf_clock_now(&w->o.clock);
    double until = w->connected ? w->next_heartbeat : w->reconnect_at;
    long timeout_ms = (long)((until - now) * 1000) + 1;
    if (timeout_ms > w->o.heartbeat_ms)
        timeout_ms = w->o.heartbeat_ms;
    return timeout_ms < 0 ? 0 : timeout_ms;
}

/* A command from the actor's pipe; true when it says stop. */
static bool pipe_command(pf_worker_t *w, zsock_t *pipe)
{
    char *cmd = zstr_recv(pipe);
    bool stop = !cmd || streq(cmd, "$TERM");
    if (cmd && streq(cmd, "STATS")) {
        pf_worker_stats_t st;
        pf_worker_get_stats(w, &st);
        zstr_sendf(pipe, "STATS %d %lld %lld %lld %lld %lld %d", w->connected, st.reconnects,
                   st.jobs_done, st.jobs_failed, st.jobs_cancelled, st.fetches, st.held);
    }
    free(cmd);
    return stop;
}

/* Reconnect when due, give up on a silent broker, or send the heartbeat. */
static void tick(pf_worker_t *w)
{
    double now = pf_clock_now(&w->o.clock);
    if (!w->connected && now >= w->reconnect_at) {
        if (connect_broker(w) != PF_OK)
            disconnect(w, "cannot create a socket");
    } else if (w->connected && now >= w->next_heartbeat &&
               w->silent_ticks++ >= w->o.liveness) {
        disconnect(w, "broker silent");
    } else if (w->connected && now >= w->next_heartbeat) {
        Planfarm__Heartbeat hb = PLANFARM__HEARTBEAT__INIT;
        hb.running = (uint32_t)zlistx_size(w->held);
        send_msg(w, PF_MSG_HEARTBEAT, &hb.base);
        w->next_heartbeat = now + hb_s(w);
    }
}

static int loop(pf_worker_t *w, zsock_t *pipe)
{
    bool stop = false;
    if (connect_broker(w) != PF_OK) {
        zsys_error("worker %s: cannot connect to %s", w->name, w->endpoint);
        return PF_ERR;
    }
    pf_peer_io_info(w->o.quiet, "worker %s: connected to %s (%d credits, %d threads per job)",
                    w->name, w->endpoint, w->o.credits, w->threads);
    while (!stop && !w->refused) {
        zmq_pollitem_t items[3] = {{NULL, pf_solver_wake_fd(w->solver), ZMQ_POLLIN, 0}};
        int n = 1, at_pipe = -1, at_dealer = -1;
        if (pipe) {
            items[n] = (zmq_pollitem_t){zsock_resolve(pipe), 0, ZMQ_POLLIN, 0};
            at_pipe = n++;
        }
        if (w->dealer) {
            items[n] = (zmq_pollitem_t){zsock_resolve(w->dealer), 0, ZMQ_POLLIN, 0};
            at_dealer = n++;
        }
        int rc = zmq_poll(items, n, poll_timeout_ms(w));
        if (rc < 0 && errno != EINTR)
            return PF_ERR;
        if (!pipe && zsys_interrupted) {
            pf_peer_io_info(w->o.quiet, "worker %s: interrupted, leaving", w->name);
            break;
        }
        if (rc > 0 && at_pipe >= 0 && (items[at_pipe].revents & ZMQ_POLLIN))
            stop = pipe_command(w, pipe);
        if (rc > 0 && (items[0].revents & ZMQ_POLLIN))
            drain_outbox(w);
        if (rc > 0 && at_dealer >= 0 && (items[at_dealer].revents & ZMQ_POLLIN))
            for (int i = 0; i < DRAIN_BATCH && recv_one(w); i++)
                ;
        tick(w);
    }
    return w->refused ? PF_EINPUT : PF_OK;
}

/* ---- public ---- */

pf_worker_t *pf_worker_new(const pf_worker_opts_t *opts, char *err, size_t errlen)
{
    pf_worker_t *w = calloc(1, sizeof *w);
    if (!w) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    w->o = *opts;
    if (!w->o.endpoint || !w->o.endpoint[0]) {
        pf_fail(err, errlen, PF_EINPUT, "worker: no broker endpoint");
        goto fail;
    }
    if (w->o.credits < 1 || w->o.heartbeat_ms <= 0 || w->o.liveness <= 0 || w->o.threads < 0) {
        pf_fail(err, errlen, PF_EINPUT, "worker: credits, heartbeat and liveness must be "
                                        "positive");
        goto fail;
    }
    if (w->o.reconnect_max_ms < w->o.heartbeat_ms)
        w->o.reconnect_max_ms = w->o.heartbeat_ms;
    snprintf(w->endpoint, sizeof w->endpoint, "%s", w->o.endpoint);
    w->o.endpoint = w->endpoint;
    if (pf_curve_client_init(&w->keys, &w->o.curve, "worker", w->endpoint, err, errlen) != PF_OK)
        goto fail;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    w->cores = cores > 0 ? (int)cores : 1;
    if (w->o.name && w->o.name[0]) {
        snprintf(w->name, sizeof w->name, "%s", w->o.name);
    } else {
        char *host = zsys_hostname();
        snprintf(w->name, sizeof w->name, "%s:%d", host ? host : "?", (int)getpid());
        free(host);
    }
    w->o.name = w->name;
    w->backoff_ms = w->o.heartbeat_ms;
    w->cache = pf_cache_new(w->o.cache_bytes);
    w->held = zlistx_new();
    w->fetching = zhashx_new();
    if (!w->cache || !w->held || !w->fetching) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    w->threads = w->o.threads > 0 ? w->o.threads : w->cores; /* before the solver takes it */
    pf_solver_opts_t so = {.threads = w->threads, .test_hang_kind = -1,
                           .test_delay_ms = w->o.test_delay_ms};
    if (w->o.test_hang_kind && (so.test_hang_kind = pf_job_kind_by_name(w->o.test_hang_kind)) < 0) {
        pf_fail(err, errlen, PF_EINPUT, "worker: test hang kind '%s' is no job kind",
                w->o.test_hang_kind);
        goto fail;
    }
    if (!(w->solver = pf_solver_new(&so, err, errlen)))
        goto fail;
    return w;
fail:
    pf_worker_destroy(&w);
    return NULL;
}

void pf_worker_destroy(pf_worker_t **wp)
{
    if (!wp || !*wp)
        return;
    pf_worker_t *w = *wp;
    /* a job that ignores its cancel flag keeps what it reads (its job, the blobs) */
    int solver_gone = 1;
    if (w->connected) {
        Planfarm__Bye m = PLANFARM__BYE__INIT;
        m.reason = "worker leaving";
        send_msg(w, PF_MSG_BYE, &m.base);
    }
    zsock_destroy(&w->dealer);
    if (!pf_solver_stop(&w->solver, SHUTDOWN_GRACE_S)) {
        solver_gone = 0;
        zsys_warning("worker %s: a job is still running; leaving it to the process exit",
                     w->name);
    }
    if (solver_gone) {
        if (w->held) {
            for (pf_wjob_t *j = zlistx_first(w->held); j; j = zlistx_next(w->held))
                job_free(w, j);
            zlistx_destroy(&w->held);
        }
        pf_cache_destroy(&w->cache);
    }
    zhashx_destroy(&w->fetching);
    pf_curve_client_clear(&w->keys);
    pf_peer_io_pack_buf_free(&w->pack);
    free(w);
    *wp = NULL;
}

int pf_worker_run(pf_worker_t *w)
{
    return loop(w, NULL);
}

void pf_worker_get_stats(const pf_worker_t *w, pf_worker_stats_t *st)
{
    *st = w->st;
    st->held = (int)zlistx_size(w->held);
}

void pf_worker_actor(zsock_t *pipe, void *args)
{
    char err[512] = "";
    pf_worker_t *w = pf_worker_new(args, err, sizeof err);
    zsock_signal(pipe, 0);
    if (!w) {
        pf_peer_io_actor_failed(pipe, err);
        return;
    }
    zstr_sendx(pipe, "OK", NULL);
    loop(w, pipe);
    pf_worker_destroy(&w);
}
