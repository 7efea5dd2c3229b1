#include "worker/worker.h"
#include "planner/jobs.h"
#include "planner/util.h"
#include "proto/job_codec.h"
#include "proto/wire.h"
#include "worker/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define DRAIN_BATCH 1024
#define SHUTDOWN_GRACE_S 2.0
#define INFO(w, ...)                                                                            \
    do {                                                                                        \
        if (!(w)->o.quiet)                                                                      \
            zsys_info(__VA_ARGS__);                                                             \
    } while (0)

typedef enum { J_WAITING, J_QUEUED, J_RUNNING, J_FINISHED } jstate_t;

typedef struct wjob {
    uint64_t id;
    pf_wire_job_t wire;
    pf_cached_t *graph, *cluster; /* pinned once found */
    atomic_int cancel;
    _Atomic int state; /* jstate_t; QUEUED -> RUNNING -> FINISHED under the mailbox lock */
    int failed;     /* answer FAILED (error) instead of RESULT */
    int parked;     /* finished while disconnected: sent on the next connection */
    int conn;       /* the connection it came on (pf_worker.conn then) */
    double seconds; /* solver wall time */
    char error[256];
    uint8_t *result;
    size_t result_len;
    struct wjob *next; /* inbox or outbox link */
} wjob_t;

/* What the solver thread shares with the socket thread. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    wjob_t *in_head, *in_tail, *out_head, *out_tail;
    wjob_t *running;
    int quit, exited;
    atomic_int stopping;
    int wake[2]; /* pipe: the solver writes a byte when an answer is ready */
    int threads;
    int hang_kind, hung; /* test hooks; hung is the solver thread's own */
    int delay_ms;
} shared_t;

struct pf_worker {
    pf_worker_opts_t o;
    char name[128], endpoint[256];
    int cores;
    zsock_t *dealer;
    shared_t *sh;
    pthread_t solver;
    int solver_started;
    pf_blob_cache_t *cache;
    zlistx_t *held;     /* wjob_t: every job this worker holds */
    zhashx_t *fetching; /* hex hash -> FETCH sent, BLOB awaited */
    int connected;
    int conn; /* connections made so far: credits count the jobs of the current one */
    double broker_seen, next_heartbeat, reconnect_at;
    int backoff_ms;
    int warned;
    uint8_t *buf;
    size_t bufcap;
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

/* ---- the solver thread ---- */

static void wake_socket_thread(shared_t *sh)
{
    char one = 1;
    while (write(sh->wake[1], &one, 1) < 0 && errno == EINTR)
        ;
}

static void run_job(shared_t *sh, wjob_t *j)
{
    struct timespec ten_ms = {0, 10000000};
    for (int t = 0; t < sh->delay_ms && !atomic_load(&j->cancel); t += 10)
        nanosleep(&ten_ms, NULL);
    if (sh->hang_kind == (int)j->wire.kind && !sh->hung) {
        sh->hung = 1;
        while (!atomic_load(&j->cancel) && !atomic_load(&sh->stopping))
            nanosleep(&ten_ms, NULL);
        j->failed = 1;
        snprintf(j->error, sizeof j->error, "cancelled (PF_WORKER_TEST_HANG_KIND hung it)");
        return;
    }
    pf_job_t job;
    pf_job_result_t res;
    pf_wire_job_bind(&j->wire, pf_cached_graph(j->graph), pf_cached_cluster(j->cluster), &job);
    job.threads = sh->threads;
    job.cancel = &j->cancel;
    int rc = pf_job_run(&job, &res);
    j->seconds = res.seconds;
    /* A run-time failure (out of memory) may not happen elsewhere: FAILED lets the broker try
     * another worker. Infeasible partitions, not-found probes and bad parameters are answers. */
    if (rc == PF_ERR || (rc != PF_OK && atomic_load(&j->cancel))) {
        j->failed = 1;
        snprintf(j->error, sizeof j->error, "%s",
                 atomic_load(&j->cancel) ? "cancelled" : res.error);
    } else {
        pf_arena_t *a = pf_arena_new();
        Planfarm__JobResult *m = a ? pf_codec_result_to_pb(a, j->id, &res) : NULL;
        if (!m || pf_codec_pack(&m->base, &j->result, &j->result_len) != PF_OK) {
            j->failed = 1;
            snprintf(j->error, sizeof j->error, "worker: out of memory encoding the result");
        }
        pf_arena_destroy(&a);
    }
    pf_job_result_clear(&res);
}

static void *solver_main(void *arg)
{
    shared_t *sh = arg;
    pthread_mutex_lock(&sh->mu);
    for (;;) {
        while (!sh->quit && !sh->in_head)
            pthread_cond_wait(&sh->work, &sh->mu);
        if (sh->quit)
            break;
        wjob_t *j = sh->in_head;
        sh->in_head = j->next;
        if (!sh->in_head)
            sh->in_tail = NULL;
        j->next = NULL;
        j->state = J_RUNNING;
        sh->running = j;
        pthread_mutex_unlock(&sh->mu);

        run_job(sh, j);

        pthread_mutex_lock(&sh->mu);
        sh->running = NULL;
        j->state = J_FINISHED;
        if (sh->out_tail)
            sh->out_tail->next = j;
        else
            sh->out_head = j;
        sh->out_tail = j;
        pthread_cond_broadcast(&sh->idle);
        wake_socket_thread(sh);
    }
    sh->exited = 1;
    pthread_cond_broadcast(&sh->idle);
    pthread_mutex_unlock(&sh->mu);
    return NULL;
}

/* ---- jobs on the socket thread ---- */

static void job_free(pf_worker_t *w, wjob_t *j)
{
    if (!j)
        return;
    pf_blob_cache_unpin(w->cache, j->graph);
    pf_blob_cache_unpin(w->cache, j->cluster);
    pf_wire_job_clear(&j->wire);
    free(j->result);
    free(j);
}

static void held_remove(pf_worker_t *w, wjob_t *j)
{
    void *h = zlistx_find(w->held, j);
    if (h)
        zlistx_delete(w->held, h);
}

static wjob_t *held_find(pf_worker_t *w, uint64_t id)
{
    for (wjob_t *j = zlistx_first(w->held); j; j = zlistx_next(w->held))
        if (j->id == id)
            return j;
    return NULL;
}

/* Take a queued job back from the solver's inbox: 1 when it was still there. */
static int unqueue(shared_t *sh, wjob_t *j)
{
    int found = 0;
    pthread_mutex_lock(&sh->mu);
    if (j->state == J_QUEUED) {
        wjob_t **pp = &sh->in_head, *prev = NULL;
        while (*pp && *pp != j) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        if (*pp) {
            *pp = j->next;
            if (sh->in_tail == j)
                sh->in_tail = prev;
            j->next = NULL;
            found = 1;
        }
    }
    pthread_mutex_unlock(&sh->mu);
    return found;
}

/* ---- sending ---- */

static void malformed(pf_worker_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void malformed(pf_worker_t *w, const char *fmt, ...)
{
    if (w->warned)
        return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    zsys_warning("worker %s: dropped a message from the broker: %s (further ones are dropped "
                 "silently)",
                 w->name, msg);
    w->warned = 1;
}

/* Non-blocking: a broker that does not read is found dead by the heartbeat, not by a stuck
 * send. */
static int send_raw(pf_worker_t *w, pf_msg_t kind, const uint8_t *body, size_t len)
{
    if (!w->dealer)
        return PF_ERR;
    void *s = zsock_resolve(w->dealer);
    uint8_t hdr[PF_WIRE_HEADER_LEN];
    pf_wire_header(kind, hdr);
    if (zmq_send(s, hdr, sizeof hdr, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return PF_ERR;
    zmq_send(s, body, len, ZMQ_DONTWAIT);
    return PF_OK;
}

static int send_msg(pf_worker_t *w, pf_msg_t kind, const ProtobufCMessage *m)
{
    size_t need = protobuf_c_message_get_packed_size(m);
    if (need > w->bufcap) {
        size_t cap = need < 1024 ? 1024 : need;
        uint8_t *nb = realloc(w->buf, cap);
        if (!nb)
            return PF_ERR;
        w->buf = nb;
        w->bufcap = cap;
    }
    return send_raw(w, kind, w->buf, protobuf_c_message_pack(m, w->buf));
}

static void send_failed(pf_worker_t *w, uint64_t id, const char *error)
{
    Planfarm__Failed m = PLANFARM__FAILED__INIT;
    m.job_id = id;
    m.error = (char *)error;
    send_msg(w, PF_MSG_FAILED, &m.base);
}

/* Answer a job this worker will not run (cancelled, blob lost) and forget it. */
static void drop_job(pf_worker_t *w, wjob_t *j, const char *why)
{
    send_failed(w, j->id, why);
    held_remove(w, j);
    job_free(w, j);
}

static void send_answer(pf_worker_t *w, wjob_t *j)
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
    char sink[256];
    while (read(w->sh->wake[0], sink, sizeof sink) > 0)
        ;
    pthread_mutex_lock(&w->sh->mu);
    wjob_t *j = w->sh->out_head;
    w->sh->out_head = w->sh->out_tail = NULL;
    pthread_mutex_unlock(&w->sh->mu);
    while (j) {
        wjob_t *next = j->next;
        j->next = NULL;
        if (w->connected) {
            send_answer(w, j);
            if (w->o.verbose)
                INFO(w, "worker %s: job %llu (%s) %s in %.3f s", w->name,
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

static int need_blob(const pf_blob_ref_t *r, pf_cached_t *have)
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
static void try_start(pf_worker_t *w, wjob_t *j)
{
    if (need_blob(&j->wire.graph, j->graph) &&
        (j->graph = pf_blob_cache_lookup(w->cache, j->wire.graph.hash, j->wire.graph.hash_len)))
        pf_blob_cache_pin(j->graph);
    if (need_blob(&j->wire.cluster, j->cluster) &&
        (j->cluster =
             pf_blob_cache_lookup(w->cache, j->wire.cluster.hash, j->wire.cluster.hash_len)))
        pf_blob_cache_pin(j->cluster);
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
        j->state = J_WAITING;
        return;
    }
    char err[256];
    if (pf_wire_job_check(&j->wire, pf_cached_graph(j->graph), pf_cached_cluster(j->cluster), err,
                          sizeof err) != PF_OK) {
        drop_job(w, j, err);
        return;
    }
    shared_t *sh = w->sh;
    pthread_mutex_lock(&sh->mu);
    j->state = J_QUEUED;
    if (sh->in_tail)
        sh->in_tail->next = j;
    else
        sh->in_head = j;
    sh->in_tail = j;
    pthread_cond_signal(&sh->work);
    pthread_mutex_unlock(&sh->mu);
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
    for (wjob_t *j = zlistx_first(w->held); j; j = zlistx_next(w->held))
        if (j->state == J_WAITING && ((ref_is(&j->wire.graph, hash) && !j->graph) ||
                                      (ref_is(&j->wire.cluster, hash) && !j->cluster)))
            zlistx_add_end(victims, j);
    for (wjob_t *j = zlistx_first(victims); j; j = zlistx_next(victims))
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
                 ? pf_codec_decode_graph(m->data.data, m->data.len, &g, err, sizeof err)
                 : pf_codec_decode_cluster(m->data.data, m->data.len, &c, err, sizeof err);
    if (rc != PF_OK || !pf_blob_cache_insert(w->cache, m->hash.data, m->hash.len, g, c,
                                             m->data.len)) {
        char why[320];
        snprintf(why, sizeof why, "blob %.12s: %s", key, rc != PF_OK ? err : "out of memory");
        fail_waiting(w, &m->hash, why);
        goto done;
    }
    /* try_start may drop a job from `held`: collect first */
    zlistx_t *waiting = zlistx_new();
    if (waiting) {
        for (wjob_t *j = zlistx_first(w->held); j; j = zlistx_next(w->held))
            if (j->state == J_WAITING)
                zlistx_add_end(waiting, j);
        for (wjob_t *j = zlistx_first(waiting); j; j = zlistx_next(waiting))
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
    for (wjob_t *h = zlistx_first(w->held); h; h = zlistx_next(w->held))
        mine += h->conn == w->conn;
    if (mine >= w->o.credits) {
        char why[96];
        snprintf(why, sizeof why, "worker: holds %d jobs already, its credits", mine);
        malformed(w, "JOB %llu: past the credits", (unsigned long long)m->id);
        send_failed(w, m->id, why);
        goto done;
    }
    wjob_t *j = calloc(1, sizeof *j);
    if (!j) {
        send_failed(w, m->id, "worker: out of memory");
        goto done;
    }
    j->id = m->id;
    j->conn = w->conn;
    if (pf_codec_job_from_pb(m, &j->wire, err, sizeof err) != PF_OK) {
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
        wjob_t *j = held_find(w, m->job_ids[i]);
        if (!j)
            continue;
        w->st.jobs_cancelled++;
        if (j->state == J_WAITING || (j->state == J_QUEUED && unqueue(w->sh, j)))
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
        for (wjob_t *j = zlistx_first(w->held); j; j = zlistx_next(w->held))
            if (j->state == J_WAITING || (j->state == J_QUEUED && unqueue(w->sh, j)))
                zlistx_add_end(victims, j);
        for (wjob_t *j = zlistx_first(victims); j; j = zlistx_next(victims)) {
            held_remove(w, j);
            job_free(w, j);
        }
        zlistx_destroy(&victims);
    }
    w->reconnect_at = pf_now_s() + w->backoff_ms / 1000.0;
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
    zsock_set_sndhwm(w->dealer, 100000);
    zsock_set_rcvhwm(w->dealer, 100000);
    int64_t maxmsg = w->o.max_msg_bytes;
    zmq_setsockopt(zsock_resolve(w->dealer), ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (zsock_connect(w->dealer, "%s", w->endpoint) < 0) {
        zsock_destroy(&w->dealer);
        return PF_ERR;
    }
    Planfarm__Ready m = PLANFARM__READY__INIT;
    Planfarm__JobKind kinds[] = {PLANFARM__JOB_KIND__JOB_NOOP, PLANFARM__JOB_KIND__JOB_DP_PARTITION,
                                 PLANFARM__JOB_KIND__JOB_MAP_PROBE};
    m.protocol = PF_WIRE_VERSION;
    m.version = "planfarm 0.1";
    m.cores = (uint32_t)w->cores;
    m.credits = (uint32_t)w->o.credits;
    m.kinds = kinds;
    m.n_kinds = sizeof kinds / sizeof kinds[0];
    m.name = w->name;
    send_msg(w, PF_MSG_READY, &m.base);
    w->connected = 1;
    w->conn++;
    w->broker_seen = pf_now_s();
    w->next_heartbeat = w->broker_seen + hb_s(w);
    w->warned = 0;
    /* answers finished while we were away: the broker still uses them if it needs them */
    zlistx_t *done = zlistx_new();
    if (done) {
        for (wjob_t *j = zlistx_first(w->held); j; j = zlistx_next(w->held))
            if (j->parked)
                zlistx_add_end(done, j);
        for (wjob_t *j = zlistx_first(done); j; j = zlistx_next(done)) {
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
    pf_msg_t kind;
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
    w->broker_seen = pf_now_s();
    /* A broker that sends anything but BYE is serving us: the next reconnect starts quick
     * again. BYE keeps the back-off growing (a broker that refuses every READY, e.g. another
     * protocol version, is not hammered at the heartbeat rate). */
    if (kind != PF_MSG_BYE)
        w->backoff_ms = w->o.heartbeat_ms;
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
    default: malformed(w, "%s is not sent to a worker", pf_msg_name(kind)); break;
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
static int loop(pf_worker_t *w, zsock_t *pipe)
{
    int stop = 0;
    if (connect_broker(w) != PF_OK) {
        zsys_error("worker %s: cannot connect to %s", w->name, w->endpoint);
        return PF_ERR;
    }
    INFO(w, "worker %s: connected to %s (%d credits, %d threads per job)", w->name, w->endpoint,
              w->o.credits, w->sh->threads);
    while (!stop) {
        zmq_pollitem_t items[3] = {{NULL, w->sh->wake[0], ZMQ_POLLIN, 0}};
        int n = 1, at_pipe = -1, at_dealer = -1;
        if (pipe) {
            items[n] = (zmq_pollitem_t){zsock_resolve(pipe), 0, ZMQ_POLLIN, 0};
            at_pipe = n++;
        }
        if (w->dealer) {
            items[n] = (zmq_pollitem_t){zsock_resolve(w->dealer), 0, ZMQ_POLLIN, 0};
            at_dealer = n++;
        }
        double now = pf_now_s();
        double until = w->connected ? w->next_heartbeat : w->reconnect_at;
        long timeout_ms = (long)((until - now) * 1000) + 1;
        int rc = zmq_poll(items, n, timeout_ms < 0 ? 0 : timeout_ms);
        if (rc < 0 && errno != EINTR)
            return PF_ERR;
        if (!pipe && zsys_interrupted) {
            INFO(w, "worker %s: interrupted, leaving", w->name);
            break;
        }
        if (rc > 0 && at_pipe >= 0 && (items[at_pipe].revents & ZMQ_POLLIN)) {
            char *cmd = zstr_recv(pipe);
            stop = !cmd || streq(cmd, "$TERM");
            free(cmd);
        }
        if (rc > 0 && (items[0].revents & ZMQ_POLLIN))
            drain_outbox(w);
        if (rc > 0 && at_dealer >= 0 && (items[at_dealer].revents & ZMQ_POLLIN))
            for (int i = 0; i < DRAIN_BATCH && recv_one(w); i++)
                ;
        now = pf_now_s();
        if (w->connected && now - w->broker_seen > w->o.liveness * hb_s(w)) {
            disconnect(w, "broker silent");
        } else if (!w->connected && now >= w->reconnect_at) {
            if (connect_broker(w) != PF_OK)
                disconnect(w, "cannot create a socket");
        } else if (w->connected && now >= w->next_heartbeat) {
            Planfarm__Heartbeat hb = PLANFARM__HEARTBEAT__INIT;
            hb.running = (uint32_t)zlistx_size(w->held);
            send_msg(w, PF_MSG_HEARTBEAT, &hb.base);
            w->next_heartbeat = now + hb_s(w);
        }
    }
    return PF_OK;
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
    w->cache = pf_blob_cache_new(w->o.cache_bytes);
    w->held = zlistx_new();
    w->fetching = zhashx_new();
    w->sh = calloc(1, sizeof *w->sh);
    if (!w->cache || !w->held || !w->fetching || !w->sh) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    shared_t *sh = w->sh;
    sh->wake[0] = sh->wake[1] = -1;
    sh->threads = w->o.threads > 0 ? w->o.threads : w->cores;
    sh->hang_kind = -1;
    const char *hang = getenv("PF_WORKER_TEST_HANG_KIND");
    for (int k = 0; hang && k < PF_JOB_KIND_COUNT; k++)
        if (streq(hang, pf_job_kind_name((pf_job_kind_t)k)))
            sh->hang_kind = k;
    const char *delay = getenv("PF_WORKER_TEST_DELAY_MS");
    sh->delay_ms = delay ? atoi(delay) : 0;
    if (pipe(sh->wake) != 0) {
        pf_fail(err, errlen, PF_ERR, "pipe: %s", strerror(errno));
        goto fail;
    }
    for (int i = 0; i < 2; i++) {
        fcntl(sh->wake[i], F_SETFL, fcntl(sh->wake[i], F_GETFL) | O_NONBLOCK);
        fcntl(sh->wake[i], F_SETFD, FD_CLOEXEC);
    }
    pthread_mutex_init(&sh->mu, NULL);
    pthread_cond_init(&sh->work, NULL);
    pthread_cond_init(&sh->idle, NULL);
    if (pthread_create(&w->solver, NULL, solver_main, sh) != 0) {
        pf_fail(err, errlen, PF_ERR, "cannot start the solver thread");
        goto fail;
    }
    w->solver_started = 1;
    return w;
fail:
    pf_worker_destroy(&w);
    return NULL;
}

static void shared_free(shared_t *sh)
{
    if (!sh)
        return;
    if (sh->wake[0] >= 0) {
        close(sh->wake[0]);
        close(sh->wake[1]);
        pthread_mutex_destroy(&sh->mu);
        pthread_cond_destroy(&sh->work);
        pthread_cond_destroy(&sh->idle);
    }
    free(sh);
}

void pf_worker_destroy(pf_worker_t **wp)
{
    if (!wp || !*wp)
        return;
    pf_worker_t *w = *wp;
    int solver_gone = 1;
    if (w->connected) {
        Planfarm__Bye m = PLANFARM__BYE__INIT;
        m.reason = "worker leaving";
        send_msg(w, PF_MSG_BYE, &m.base);
    }
    zsock_destroy(&w->dealer);
    if (w->solver_started) {
        shared_t *sh = w->sh;
        pthread_mutex_lock(&sh->mu);
        sh->quit = 1;
        atomic_store(&sh->stopping, 1);
        if (sh->running)
            atomic_store(&sh->running->cancel, 1);
        pthread_cond_broadcast(&sh->work);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)SHUTDOWN_GRACE_S;
        while (!sh->exited)
            if (pthread_cond_timedwait(&sh->idle, &sh->mu, &until) == ETIMEDOUT)
                break;
        solver_gone = sh->exited;
        pthread_mutex_unlock(&sh->mu);
        if (solver_gone) {
            pthread_join(w->solver, NULL);
        } else {
            /* A solve that ignores its cancel flag: it keeps its job, the blobs it reads and the
             * mailbox until the process exits. */
            zsys_warning("worker %s: a job is still running; leaving it to the process exit",
                         w->name);
            pthread_detach(w->solver);
        }
    }
    if (solver_gone) {
        if (w->held) {
            for (wjob_t *j = zlistx_first(w->held); j; j = zlistx_next(w->held))
                job_free(w, j);
            zlistx_destroy(&w->held);
        }
        pf_blob_cache_destroy(&w->cache);
        shared_free(w->sh);
    }
    zhashx_destroy(&w->fetching);
    free(w->buf);
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
        zstr_sendx(pipe, "ERROR", err, NULL);
        char *cmd;
        while ((cmd = zstr_recv(pipe)) != NULL) {
            int term = streq(cmd, "$TERM");
            free(cmd);
            if (term)
                break;
        }
        return;
    }
    zstr_sendx(pipe, "OK", NULL);
    loop(w, pipe);
    pf_worker_destroy(&w);
}
