/* The broker over real sockets (an actor on loopback TCP): requests, blobs, a hostile client, and
 * the client's timeout. Solver-free: requests that need solvers are only queued and cancelled
 * here; planning through workers is tests/integration/. */
#include "broker/blobstore.h"
#include "broker/broker.h"
#include "broker/testseam.h"
#include "client/client.h"
#include "planner/inputs/model.h"
#include "planner/inputs/topology.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/price.h"
#include "planner/core/util.h"
#include "tests/testutil.h"
#include "proto/clock.h"
#include "proto/plan_options_codec.h"
#include "worker/worker.h"

#include <czmq.h>
#include <math.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ---- blob store ---- */

static uint8_t *dup_bytes(const char *s)
{
    uint8_t *b = malloc(strlen(s) + 1);
    memcpy(b, s, strlen(s) + 1);
    return b;
}

/* SHA-1("abc") = a9993e36 4706816a ba3e2571 7850c26c 9cd0d89d (FIPS 180-2, appendix A.1). */
static void test_blobstore(void)
{
    pf_blobstore_t *s = pf_blobstore_new();
    pf_blob_ref_t r1, r2, r3;
    uint8_t *a = dup_bytes("abc"), *b = dup_bytes("abc"), *c = dup_bytes("abcd");
    CU_ASSERT_EQUAL(pf_blobstore_put(s, 0, &a, 3, &r1), PF_OK);
    CU_ASSERT_PTR_NULL(a);
    char hex[41];
    pf_wire_hex(r1.hash, r1.hash_len, hex);
    CU_ASSERT_STRING_EQUAL(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
    CU_ASSERT_EQUAL(r1.size, 3);
    /* the same bytes again: one copy, two references */
    CU_ASSERT_EQUAL(pf_blobstore_put(s, 0, &b, 3, &r2), PF_OK);
    CU_ASSERT_EQUAL(memcmp(r1.hash, r2.hash, 20), 0);
    CU_ASSERT_EQUAL(pf_blobstore_count(s), 1);
    CU_ASSERT_EQUAL(pf_blobstore_bytes(s), 3);
    CU_ASSERT_EQUAL(pf_blobstore_refs(s, &r1), 2);
    CU_ASSERT_EQUAL(pf_blobstore_put(s, 1, &c, 4, &r3), PF_OK);
    CU_ASSERT_EQUAL(pf_blobstore_count(s), 2);
    CU_ASSERT_EQUAL(pf_blobstore_bytes(s), 7);
    int kind;
    const uint8_t *data;
    size_t len;
    CU_ASSERT_EQUAL(pf_blobstore_get(s, r3.hash, r3.hash_len, &kind, &data, &len), PF_OK);
    CU_ASSERT_EQUAL(kind, 1);
    CU_ASSERT_EQUAL(len, 4);
    CU_ASSERT_EQUAL(memcmp(data, "abcd", 4), 0);
    pf_blobstore_release(s, &r1);
    CU_ASSERT_EQUAL(pf_blobstore_refs(s, &r1), 1);
    CU_ASSERT_EQUAL(pf_blobstore_get(s, r1.hash, r1.hash_len, &kind, &data, &len), PF_OK);
    pf_blobstore_release(s, &r2);
    CU_ASSERT_EQUAL(pf_blobstore_refs(s, &r1), 0);
    CU_ASSERT_EQUAL(pf_blobstore_get(s, r1.hash, r1.hash_len, &kind, &data, &len), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_blobstore_count(s), 1);
    CU_ASSERT_EQUAL(pf_blobstore_bytes(s), 4);
    pf_blobstore_release(s, &r1); /* one release too many: harmless */
    pf_blobstore_destroy(&s);
    CU_ASSERT_PTR_NULL(s);
}

/* ---- helpers ---- */

static void send_frames(zsock_t *s, int n, const void *const *data, const size_t *len)
{
    zmsg_t *m = zmsg_new();
    for (int i = 0; i < n; i++)
        zmsg_addmem(m, data[i], len[i]);
    zmsg_send(&m, s);
}

/* Every broker and worker of these tests reads this clock, and it moves only when a test moves it:
 * heartbeats, liveness and deadlines happen when a test says, whatever the machine's load. */
static pf_clock_manual_t test_clock;

static zactor_t *start_broker(pf_broker_opts_t *o, char *endpoint, size_t len)
{
    o->clock = pf_clock_manual_init(&test_clock, 0);
    zactor_t *a = zactor_new(pf_broker_actor, o);
    char *status = NULL, *text = NULL;
    zstr_recvx(a, &status, &text, NULL);
    CU_ASSERT_STRING_EQUAL(status, "OK");
    snprintf(endpoint, len, "%s", text ? text : "");
    free(status);
    free(text);
    return a;
}

static zactor_t *start_worker(const char *endpoint, int credits)
{
    pf_worker_opts_t o;
    pf_worker_opts_init(&o);
    o.endpoint = endpoint;
    o.credits = credits;
    o.threads = 1;
    o.heartbeat_ms = 100;
    o.name = "test-worker";
    o.clock = pf_clock_manual(&test_clock);
    zactor_t *a = zactor_new(pf_worker_actor, &o);
    char *status = zstr_recv(a);
    CU_ASSERT_STRING_EQUAL(status, "OK");
    free(status);
    return a;
}

/* "STATS" <wall> <busy> <in> <out> <malformed> <dispatched> <workers> */
static void broker_stats(zactor_t *b, long long *malformed, long long *dispatched, int *workers)
{
    zstr_send(b, "STATS");
    char *s = zstr_recv(b);
    double wall, busy;
    long long in, out;
    CU_ASSERT_EQUAL(sscanf(s, "STATS %lf %lf %lld %lld %lld %lld %d", &wall, &busy, &in, &out,
                           malformed, dispatched, workers),
                    7);
    free(s);
}

/* Run n NOOP jobs through the broker (its test seam, broker/testseam.h); 1 when all were
 * answered. */
static int noop_round(zactor_t *b, int n)
{
    char num[32];
    snprintf(num, sizeof num, "%d", n);
    zstr_sendx(b, "NOOP", num, NULL);
    zpoller_t *p = zpoller_new(b, NULL);
    void *which = NULL;
    /* a wait that ends early with nothing (an interrupted poll) is no verdict: only the bound is */
    double until = pf_now_s() + PF_EVENT_WAIT_S;
    while (!which && !zpoller_terminated(p) && pf_now_s() < until)
        which = zpoller_wait(p, (int)((until - pf_now_s()) * 1000) + 1);
    zpoller_destroy(&p);
    if (!which)
        return 0;
    char *done = zstr_recv(b);
    int ok = done && !strncmp(done, "DONE ", 5);
    free(done);
    return ok;
}

static pf_graph_t *tiny_graph(double mem_bytes)
{
    pf_graph_t *g = pf_graph_new("tiny", 1);
    for (int v = 0; v < 3; v++) {
        pf_op_t op = {.id = v, .name = "op", .type = "matmul", .fwd_ms = 1, .bwd_ms = 2,
                      .param_bytes = 1000, .mem_fwd_bytes = mem_bytes, .mem_bwd_bytes = 10};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 100);
    pf_graph_add_edge(g, 1, 2, 100);
    char err[256];
    CU_ASSERT_EQUAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    return g;
}

static pf_cluster_t *tiny_cluster(int n)
{
    pf_cluster_t *c = pf_cluster_new("four", n);
    for (int i = 0; i < n; i++) {
        pf_device_t d = {.id = i, .host = 0, .name = "gpu", .mem_bytes = 1e9, .tflops = 1};
        pf_cluster_set_device(c, i, &d);
        for (int k = 0; k < n; k++)
            if (k != i)
                pf_cluster_set_bw(c, i, k, 10);
    }
    char err[256];
    CU_ASSERT_EQUAL(pf_cluster_validate(c, err, sizeof err), PF_OK);
    return c;
}

/* ---- scripted peers ---- */

static void peer_send(zsock_t *s, pf_wire_msg_t kind, const ProtobufCMessage *m)
{
    uint8_t hdr[PF_WIRE_HEADER_LEN], *buf;
    size_t len;
    pf_wire_header(kind, hdr);
    pf_wire_pack(m, &buf, &len);
    const void *f[] = {hdr, buf};
    size_t l[] = {sizeof hdr, len};
    send_frames(s, 2, f, l);
    free(buf);
}

/* One message waiting on s (no wait): its kind, or 0 when none; the body goes to *body (may be
 * NULL) and is freed by the caller. */
static int peer_poll(zsock_t *s, zframe_t **body)
{
    if (body)
        *body = NULL;
    if (!(zsock_events(s) & ZMQ_POLLIN))
        return 0;
    zmsg_t *m = zmsg_recv(s);
    zframe_t *h = m ? zmsg_pop(m) : NULL, *b = m ? zmsg_pop(m) : NULL;
    pf_wire_msg_t kind = 0;
    char err[64];
    if (!h || pf_wire_parse_header(zframe_data(h), zframe_size(h), &kind, err, sizeof err))
        kind = 0;
    if (body) {
        *body = b;
        b = NULL;
    }
    zframe_destroy(&h);
    zframe_destroy(&b);
    zmsg_destroy(&m);
    return kind;
}

/* A fake worker that runs only NOOP jobs (so a request's jobs never go to it). */
static zsock_t *fake_worker(const char *ep, uint32_t credits)
{
    zsock_t *s = zsock_new_dealer(ep);
    Planfarm__JobKind kinds[] = {PLANFARM__JOB_KIND__JOB_NOOP};
    Planfarm__Ready m = PLANFARM__READY__INIT;
    m.protocol = PF_WIRE_VERSION;
    m.credits = credits;
    m.kinds = kinds;
    m.n_kinds = 1;
    m.name = "fake";
    peer_send(s, PF_MSG_READY, &m.base);
    return s;
}

static pf_graph_t *gpt_graph(int layers)
{
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = layers;
    pf_graph_t *g = NULL;
    char err[256];
    CU_ASSERT_EQUAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    return g;
}

/* A round trip from the scripted worker (a FETCH of a blob nobody has, answered by a BLOB with an
 * error): everything it sent before has been read by the broker. Counts the BYEs seen meanwhile. */
static int worker_sync(zsock_t *w, int *byes)
{
    static uint8_t nohash[20];
    Planfarm__Fetch f = PLANFARM__FETCH__INIT;
    f.hash.data = nohash;
    f.hash.len = sizeof nohash;
    peer_send(w, PF_MSG_FETCH, &f.base);
    for (double t0 = pf_now_s(); pf_now_s() - t0 < PF_EVENT_WAIT_S;) {
        int kind = peer_poll(w, NULL);
        if (kind == PF_MSG_BLOB)
            return 1;
        if (kind == PF_MSG_BYE)
            (*byes)++;
        if (!kind)
            zclock_sleep(2);
    }
    return 0;
}

/* Moves the clock 1.5 heartbeat intervals on (exactly one tick: the next is due one interval
 * after this one, and an exact multiple could fall a rounding error short of it) and waits for
 * the broker's tick: a HEARTBEAT at the scripted worker, or (a worker just declared dead is sent
 * none) no workers left. Returns the broker's worker count after the tick. */
static int broker_tick(zactor_t *b, zsock_t *w, double hb_s)
{
    pf_clock_manual_advance(&test_clock, 1.5 * hb_s);
    long long bad, dispatched;
    int workers = -1;
    for (double t0 = pf_now_s(); pf_now_s() - t0 < PF_EVENT_WAIT_S;) {
        int kind = peer_poll(w, NULL);
        if (kind == PF_MSG_HEARTBEAT)
            break;
        broker_stats(b, &bad, &dispatched, &workers);
        if (workers == 0)
            break;
        if (!kind)
            zclock_sleep(2);
    }
    broker_stats(b, &bad, &dispatched, &workers);
    return workers;
}

/* Liveness counts the broker's own heartbeat intervals, not seconds. A SUBMIT whose graph keeps
 * the broker's one thread busy for a while (an 8000-layer GPT, 112 k ops to decode, check and
 * store) while the clock jumps 10 s, 200 intervals of 50 ms, far past liveness 3: the broker
 * ticks once when it is done, and the worker's heartbeat read in the same batch (or just after)
 * keeps it alive. Timing it in seconds, the jump alone would kill the worker (it did, under
 * load, when the heartbeat was stamped with the time its batch began). Then the worker goes
 * silent: ticks 1, 2 and 3 find it silent through 1, 2 and 3 intervals and send it heartbeats;
 * the 4th declares it dead. */
static void test_slow_message_keeps_workers(void)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:0";
    o.heartbeat_ms = 50;
    o.liveness = 3;
    o.quiet = 1;
    char ep[256];
    pf_graph_t *g = gpt_graph(8000);
    pf_cluster_t *cl = tiny_cluster(64);
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    pf_arena_t *a = pf_arena_new();
    Planfarm__Submit m = PLANFARM__SUBMIT__INIT;
    m.graph = pf_model_codec_graph_to_pb(a, g);
    m.cluster = pf_model_codec_cluster_to_pb(a, cl);
    m.options = pf_plan_options_codec_to_pb(a, &so);
    uint8_t hdr[PF_WIRE_HEADER_LEN], *body;
    size_t len;
    pf_wire_header(PF_MSG_SUBMIT, hdr);
    CU_ASSERT_EQUAL_FATAL(pf_wire_pack(&m.base, &body, &len), PF_OK);

    zactor_t *b = start_broker(&o, ep, sizeof ep);
    zsock_t *w = fake_worker(ep, 1);
    zsock_t *client = zsock_new_dealer(ep);
    Planfarm__Heartbeat hb = PLANFARM__HEARTBEAT__INIT;
    int byes = 0;
    CU_ASSERT_FATAL(worker_sync(w, &byes));
    long long bad, dispatched;
    int workers;
    broker_stats(b, &bad, &dispatched, &workers);
    CU_ASSERT_EQUAL(workers, 1);

    const void *f[] = {hdr, body};
    size_t l[] = {sizeof hdr, len};
    send_frames(client, 2, f, l);
    pf_clock_manual_advance(&test_clock, 10.0);
    peer_send(w, PF_MSG_HEARTBEAT, &hb.base);
    int replied = 0;
    for (double t0 = pf_now_s(); !replied && pf_now_s() - t0 < PF_EVENT_WAIT_S;) {
        zclock_sleep(5);
        replied = peer_poll(client, NULL) == PF_MSG_SUBMIT_REPLY;
    }
    CU_ASSERT(replied);
    /* The broker ticks once for the jump, after the batch of messages it drains with the
     * SUBMIT, and sends the worker a heartbeat then. The SUBMIT_REPLY goes out inside that
     * batch: when the broker's thread lost its core after it, worker_sync's FETCH joined the
     * batch, the tick came after it, and the count below started at 1 silent interval, not 0
     * (the 4th tick's death came at the 3rd: 1 run in 29 under 2 CPU hogs per core). Waiting
     * for that heartbeat first puts worker_sync's message after the tick, whatever the order. */
    int ticked = 0;
    for (double t0 = pf_now_s(); !ticked && pf_now_s() - t0 < PF_EVENT_WAIT_S;) {
        int kind = peer_poll(w, NULL);
        ticked = kind == PF_MSG_HEARTBEAT;
        byes += kind == PF_MSG_BYE;
        if (!kind)
            zclock_sleep(2);
    }
    CU_ASSERT(ticked);
    CU_ASSERT(worker_sync(w, &byes));
    CU_ASSERT_EQUAL(byes, 0);
    broker_stats(b, &bad, &dispatched, &workers);
    CU_ASSERT_EQUAL(workers, 1);

    for (int k = 1; k <= 3; k++)
        CU_ASSERT_EQUAL(broker_tick(b, w, 0.05), 1);
    CU_ASSERT_EQUAL(broker_tick(b, w, 0.05), 0);

    free(body);
    pf_arena_destroy(&a);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
    zsock_destroy(&client);
    zsock_destroy(&w);
    zactor_destroy(&b);
}

/* ---- requests without workers ---- */

/* A 3-op graph on 4 devices: S in {1, 2} (S = 4 exceeds the ops); 3 ops need no coarsening, so
 * alpha is moot and each S is one DP job: 2 DP jobs queued. An op needing 2 GB on 1 GB devices makes the request exist, FAILED, status -3. */
static Planfarm__RequestStatus *status_of(pf_client_t *c, const char *id)
{
    char err[512];
    Planfarm__RequestStatus *st = NULL;
    CU_ASSERT_EQUAL(pf_client_status(c, id, &st, err, sizeof err), PF_OK);
    return st;
}

/* A SUBMIT's reply says "preparing" (the setup runs on the broker's helper thread): the status
 * once the setup is over (10 s at most). */
static Planfarm__RequestStatus *prepared(pf_client_t *c, Planfarm__RequestStatus *st)
{
    char id[64];
    for (int i = 0; st && st->state == PLANFARM__REQUEST_STATE__REQ_PREPARING && i < 2000; i++) {
        snprintf(id, sizeof id, "%s", st->request_id);
        planfarm__request_status__free_unpacked(st, NULL);
        zclock_sleep(5);
        st = status_of(c, id);
    }
    return st;
}

static void test_requests(void)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:0";
    char ep[256], err[512];
    zactor_t *b = start_broker(&o, ep, sizeof ep);
    pf_client_t *c = pf_client_new(ep, 5000, err, sizeof err);
    pf_graph_t *g = tiny_graph(10), *big = tiny_graph(2e9);
    pf_cluster_t *cl = tiny_cluster(4);
    pf_search_opts_t so;
    pf_search_opts_init(&so);

    Planfarm__RequestStatus *st;
    CU_ASSERT_EQUAL_FATAL(pf_client_submit(c, g, cl, &so, "tiny", &st, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_PREPARING);
    CU_ASSERT_STRING_EQUAL(st->phase, "preparing");
    st = prepared(c, st);
    char id[40];
    snprintf(id, sizeof id, "%s", st->request_id);
    CU_ASSERT_EQUAL(strlen(id), 33); /* "r" and 128 random bits in hex */
    CU_ASSERT_EQUAL(id[0], 'r');
    CU_ASSERT_EQUAL(strspn(id + 1, "0123456789abcdef"), 32);
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_QUEUED); /* no worker yet */
    CU_ASSERT_STRING_EQUAL(st->phase, "partition");
    CU_ASSERT_EQUAL(st->jobs_queued, 2);
    CU_ASSERT_EQUAL(st->jobs_outstanding, 2);
    CU_ASSERT_STRING_EQUAL(st->label, "tiny");
    planfarm__request_status__free_unpacked(st, NULL);

    CU_ASSERT_EQUAL(pf_client_submit(c, big, cl, &so, "big", &st, err, sizeof err), PF_OK);
    st = prepared(c, st);
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_FAILED);
    CU_ASSERT_EQUAL(st->status, PF_EINFEASIBLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(st->error, "needs"));
    char big_id[40];
    snprintf(big_id, sizeof big_id, "%s", st->request_id);
    planfarm__request_status__free_unpacked(st, NULL);

    /* bad options: more stages than devices; the request exists, failed, status -2 */
    so.stages = 3;
    so.replicas = 2;
    CU_ASSERT_EQUAL(pf_client_submit(c, g, cl, &so, "bad", &st, err, sizeof err), PF_OK);
    st = prepared(c, st);
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_FAILED);
    CU_ASSERT_EQUAL(st->status, PF_EINPUT);
    planfarm__request_status__free_unpacked(st, NULL);

    Planfarm__ResultReply *rr;
    CU_ASSERT_EQUAL(pf_client_result(c, big_id, &rr, err, sizeof err), PF_OK);
    CU_ASSERT_STRING_EQUAL(rr->plan_json, "");
    CU_ASSERT_EQUAL(rr->status->status, PF_EINFEASIBLE);
    planfarm__result_reply__free_unpacked(rr, NULL);

    CU_ASSERT_EQUAL(pf_client_status(c, "rdeadbeef", &st, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown request id"));

    CU_ASSERT_EQUAL(pf_client_cancel(c, id, &st, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_CANCELLED);
    CU_ASSERT_EQUAL(st->jobs_queued, 0);
    planfarm__request_status__free_unpacked(st, NULL);

    Planfarm__ListReply *l;
    CU_ASSERT_EQUAL(pf_client_list(c, &l, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(l->n_requests, 3);
    if (l->n_requests == 3) {
        CU_ASSERT_STRING_EQUAL(l->requests[0]->request_id, id);
        CU_ASSERT_STRING_EQUAL(l->requests[1]->label, "big");
    }
    planfarm__list_reply__free_unpacked(l, NULL);

    /* a graph that does not decode: the request exists (the graph is decoded on the helper
     * thread, after the reply) and failed, saying where */
    pf_arena_t *a = pf_arena_new();
    Planfarm__Submit m = PLANFARM__SUBMIT__INIT;
    m.graph = pf_model_codec_graph_to_pb(a, g);
    m.cluster = pf_model_codec_cluster_to_pb(a, cl);
    m.graph->edges[1]->dst = 99;
    const uint8_t *body;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(pf_client_call(c, PF_MSG_SUBMIT, &m.base, PF_MSG_SUBMIT_REPLY, &body,
                                         &len, err, sizeof err),
                          PF_OK);
    st = planfarm__request_status__unpack(NULL, len, body);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    st = prepared(c, st);
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_FAILED);
    CU_ASSERT_EQUAL(st->status, PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(st->error, "edges[1]"));
    planfarm__request_status__free_unpacked(st, NULL);
    pf_arena_destroy(&a);

    pf_client_destroy(&c);
    pf_graph_destroy(&g);
    pf_graph_destroy(&big);
    pf_cluster_destroy(&cl);
    zactor_destroy(&b);
}

/* max_finished = 1: of three finished (infeasible) requests only the newest is remembered. */
static void test_eviction(void)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:0";
    o.max_finished = 1;
    char ep[256], err[512], first[40] = "", last[40] = "";
    zactor_t *b = start_broker(&o, ep, sizeof ep);
    pf_client_t *c = pf_client_new(ep, 5000, err, sizeof err);
    pf_graph_t *big = tiny_graph(2e9);
    pf_cluster_t *cl = tiny_cluster(2);
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    for (int k = 0; k < 3; k++) {
        Planfarm__RequestStatus *st;
        so.seed = (uint64_t)k + 1; /* three different requests (the same inputs are one) */
        CU_ASSERT_EQUAL_FATAL(pf_client_submit(c, big, cl, &so, "big", &st, err, sizeof err),
                              PF_OK);
        st = prepared(c, st);
        snprintf(k == 0 ? first : last, sizeof last, "%s", st->request_id);
        planfarm__request_status__free_unpacked(st, NULL);
    }
    Planfarm__ListReply *l;
    CU_ASSERT_EQUAL(pf_client_list(c, &l, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(l->n_requests, 1);
    if (l->n_requests == 1)
        CU_ASSERT_STRING_EQUAL(l->requests[0]->request_id, last);
    planfarm__list_reply__free_unpacked(l, NULL);
    Planfarm__RequestStatus *st;
    CU_ASSERT_EQUAL(pf_client_status(c, first, &st, err, sizeof err), PF_EINPUT);
    pf_client_destroy(&c);
    pf_graph_destroy(&big);
    pf_cluster_destroy(&cl);
    zactor_destroy(&b);
}

/* ---- who may answer a job ---- */

static void send_result(zsock_t *s, uint64_t id, int status)
{
    Planfarm__JobResult r = PLANFARM__JOB_RESULT__INIT;
    r.id = id;
    r.kind = PLANFARM__JOB_KIND__JOB_DP_PARTITION;
    r.status = status;
    r.error = "no partition (scripted)";
    peer_send(s, PF_MSG_RESULT, &r.base);
}


/* The tiny request has two DP jobs. A scripted worker takes both and goes silent: declared dead
 * (liveness 2: at the third tick of the test's clock), its jobs are queued again. Its late RESULT
 * for one of them is dropped: it no longer holds the job (only the worker an attempt
 * was sent to answers). A peer that never said READY sends a RESULT for the other: dropped too.
 * Both are counted as malformed and as foreign answers; the request keeps both jobs queued
 * instead of failing as "infeasible". */
static void test_results_only_from_workers(void)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:0";
    o.heartbeat_ms = 50;
    o.liveness = 2;
    o.quiet = 1;
    char ep[256], err[512], id[40];
    zactor_t *b = start_broker(&o, ep, sizeof ep);
    pf_client_t *c = pf_client_new(ep, 5000, err, sizeof err);
    pf_graph_t *g = tiny_graph(10);
    pf_cluster_t *cl = tiny_cluster(4);
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    Planfarm__RequestStatus *st;
    CU_ASSERT_EQUAL_FATAL(pf_client_submit(c, g, cl, &so, "tiny", &st, err, sizeof err), PF_OK);
    snprintf(id, sizeof id, "%s", st->request_id);
    planfarm__request_status__free_unpacked(st, NULL);

    zsock_t *w = zsock_new_dealer(ep);
    Planfarm__JobKind kinds[] = {PLANFARM__JOB_KIND__JOB_DP_PARTITION};
    Planfarm__Ready ready = PLANFARM__READY__INIT;
    ready.protocol = PF_WIRE_VERSION;
    ready.credits = 2;
    ready.kinds = kinds;
    ready.n_kinds = 1;
    peer_send(w, PF_MSG_READY, &ready.base);
    uint64_t jobs[2] = {0, 0};
    int njobs = 0;
    for (double t0 = pf_now_s(); njobs < 2 && pf_now_s() - t0 < PF_EVENT_WAIT_S;) {
        zframe_t *body;
        int kind = peer_poll(w, &body);
        if (kind == PF_MSG_JOB) {
            Planfarm__Job *j = planfarm__job__unpack(NULL, zframe_size(body), zframe_data(body));
            if (j)
                jobs[njobs++] = j->id;
            planfarm__job__free_unpacked(j, NULL);
        } else if (!kind) {
            zclock_sleep(5);
        }
        zframe_destroy(&body);
    }
    CU_ASSERT_EQUAL_FATAL(njobs, 2);
    long long bad0, bad, dispatched;
    int workers = 1;
    CU_ASSERT_EQUAL(broker_tick(b, w, 0.05), 1);
    CU_ASSERT_EQUAL(broker_tick(b, w, 0.05), 1);
    CU_ASSERT_EQUAL_FATAL(broker_tick(b, w, 0.05), 0); /* silent: dead */
    broker_stats(b, &bad0, &dispatched, &workers);
    st = status_of(c, id);
    CU_ASSERT_EQUAL(st->jobs_queued, 2);
    planfarm__request_status__free_unpacked(st, NULL);

    send_result(w, jobs[0], PF_EINFEASIBLE); /* late, from the worker declared dead: dropped */
    zsock_t *evil = zsock_new_dealer(ep);
    send_result(evil, jobs[1], PF_EINFEASIBLE); /* from a stranger: dropped */
    int evil_bye = 0;
    for (double t0 = pf_now_s(); !evil_bye && pf_now_s() - t0 < PF_EVENT_WAIT_S;) {
        zclock_sleep(5);
        evil_bye = peer_poll(evil, NULL) == PF_MSG_BYE; /* told to send READY */
    }
    CU_ASSERT(evil_bye);
    st = status_of(c, id);
    CU_ASSERT_EQUAL(st->jobs_answered, 0);
    CU_ASSERT_EQUAL(st->jobs_queued, 2);
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_RUNNING); /* not failed */
    planfarm__request_status__free_unpacked(st, NULL);
    broker_stats(b, &bad, &dispatched, &workers);
    CU_ASSERT_EQUAL(bad - bad0, 2);

    zsock_destroy(&evil);
    zsock_destroy(&w);
    pf_client_destroy(&c);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
    zactor_destroy(&b);
}

/* A DP answer whose plan is S stages of the given op lists (stage s: ops[s][0..n[s])). */
static void send_partition(zsock_t *s, const Planfarm__Job *job, int nstages, const int *const *ops,
                           const int *n)
{
    pf_plan_t *p = pf_plan_new(nstages, (int)job->partition->replicas);
    for (int st = 0; st < nstages; st++)
        pf_plan_set_stage_ops(p, st, ops[st], n[st]);
    p->microbatches = (int)job->partition->microbatches;
    p->partition_objective_ms = 9;
    pf_arena_t *a = pf_arena_new();
    Planfarm__JobResult r = PLANFARM__JOB_RESULT__INIT;
    r.id = job->id;
    r.kind = PLANFARM__JOB_KIND__JOB_DP_PARTITION;
    r.status = PF_OK;
    r.plan = pf_model_codec_plan_to_pb(a, p);
    peer_send(s, PF_MSG_RESULT, &r.base);
    pf_arena_destroy(&a);
    pf_plan_destroy(&p);
}

/* The next JOB the scripted worker gets (NULL after 5 s); free with planfarm__job__free_unpacked. */
static Planfarm__Job *next_job(zsock_t *w)
{
    for (double t0 = pf_now_s(); pf_now_s() - t0 < PF_EVENT_WAIT_S;) {
        zframe_t *body;
        int kind = peer_poll(w, &body);
        Planfarm__Job *j = kind == PF_MSG_JOB ? planfarm__job__unpack(NULL, zframe_size(body),
                                                                      zframe_data(body))
                                              : NULL;
        zframe_destroy(&body);
        if (j)
            return j;
        if (!kind)
            zclock_sleep(5);
    }
    return NULL;
}

/* The tiny request's one-stage job (3 ops, S = 1, R = 4) answered with a plan that leaves op 2
 * in no stage: not a partition of the graph, so the broker must not hand it to the search. It is
 * counted as a failed attempt and the job comes back (attempt 1); the same job answered with all
 * three ops is then taken. Likewise a plan with the wrong number of stages. */
static void test_partition_answers_checked(void)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:0";
    o.quiet = 1;
    char ep[256], err[512], id[40];
    zactor_t *b = start_broker(&o, ep, sizeof ep);
    pf_client_t *c = pf_client_new(ep, 5000, err, sizeof err);
    pf_graph_t *g = tiny_graph(10);
    pf_cluster_t *cl = tiny_cluster(4);
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    so.stages = 1; /* one DP job */
    Planfarm__RequestStatus *st;
    CU_ASSERT_EQUAL_FATAL(pf_client_submit(c, g, cl, &so, "tiny", &st, err, sizeof err), PF_OK);
    st = prepared(c, st);
    snprintf(id, sizeof id, "%s", st->request_id);
    CU_ASSERT_EQUAL(st->jobs_queued, 1);
    planfarm__request_status__free_unpacked(st, NULL);

    zsock_t *w = zsock_new_dealer(ep);
    Planfarm__JobKind kinds[] = {PLANFARM__JOB_KIND__JOB_DP_PARTITION};
    Planfarm__Ready ready = PLANFARM__READY__INIT;
    ready.protocol = PF_WIRE_VERSION;
    ready.credits = 1;
    ready.kinds = kinds;
    ready.n_kinds = 1;
    peer_send(w, PF_MSG_READY, &ready.base);
    Planfarm__Job *job = next_job(w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(job);
    CU_ASSERT_PTR_NOT_NULL_FATAL(job->partition);
    CU_ASSERT_EQUAL(job->partition->stages, 1);
    CU_ASSERT_EQUAL(job->attempt, 0);
    static const int first_two[] = {0, 1}, all[] = {0, 1, 2}, last[] = {2};
    const int *ops_missing[] = {first_two}, *ops_all[] = {all}, *ops_split[] = {first_two, last};
    int n_missing[] = {2}, n_all[] = {3}, n_split[] = {2, 1};
    send_partition(w, job, 1, ops_missing, n_missing);
    Planfarm__Job *again = next_job(w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(again);
    CU_ASSERT_EQUAL(again->id, job->id);
    CU_ASSERT_EQUAL(again->attempt, 1);
    st = status_of(c, id);
    CU_ASSERT_EQUAL(st->jobs_answered, 0);
    planfarm__request_status__free_unpacked(st, NULL);
    /* two stages for a one-stage job: refused too */
    send_partition(w, again, 2, ops_split, n_split);
    planfarm__job__free_unpacked(again, NULL);
    again = next_job(w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(again);
    CU_ASSERT_EQUAL(again->attempt, 2);
    send_partition(w, again, 1, ops_all, n_all);
    planfarm__job__free_unpacked(again, NULL);
    int answered = 0;
    for (double t0 = pf_now_s(); !answered && pf_now_s() - t0 < PF_EVENT_WAIT_S;) {
        zclock_sleep(10);
        st = status_of(c, id);
        answered = st && st->jobs_answered == 1;
        if (st)
            planfarm__request_status__free_unpacked(st, NULL);
    }
    CU_ASSERT(answered);

    planfarm__job__free_unpacked(job, NULL);
    zsock_destroy(&w);
    pf_client_destroy(&c);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
    zactor_destroy(&b);
}

/* A client that sends 30000 STATUS requests and reads none of the replies. The broker queues
 * replies for one peer only up to its high-water mark, then drops them (ROUTER_MANDATORY says
 * EAGAIN), so a peer that never reads cannot make it hold unbounded memory. Over inproc the
 * queue between the two sockets is the broker's SNDHWM plus this client's RCVHWM (1000), with no
 * kernel buffers in between: the client finds at most that many replies waiting. */
static void test_unread_replies_bounded(void)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "inproc://test-broker-unread";
    o.quiet = 1;
    char ep[256];
    zactor_t *b = start_broker(&o, ep, sizeof ep);
    zsock_t *s = zsock_new(ZMQ_DEALER);
    zsock_set_rcvhwm(s, 1000);
    zsock_set_sndhwm(s, 0);
    CU_ASSERT_EQUAL_FATAL(zsock_connect(s, "%s", ep), 0);
    enum { N = 30000 };
    Planfarm__RequestRef ref = PLANFARM__REQUEST_REF__INIT;
    ref.request_id = "r00000000";
    for (int i = 0; i < N; i++)
        peer_send(s, PF_MSG_STATUS, &ref.base);
    long long bad, dispatched;
    int workers;
    for (double t0 = pf_now_s(); pf_now_s() - t0 < PF_EVENT_WAIT_S;) { /* until the broker has read them */
        zstr_send(b, "STATS");
        char *st = zstr_recv(b);
        double wall, busy;
        long long in = 0, out = 0;
        sscanf(st, "STATS %lf %lf %lld %lld %lld %lld %d", &wall, &busy, &in, &out, &bad,
               &dispatched, &workers);
        free(st);
        if (in >= N)
            break;
        zclock_sleep(10);
    }
    int waiting = 0;
    while (peer_poll(s, NULL) == PF_MSG_ERROR)
        waiting++;
    CU_ASSERT(waiting >= 1000);
    CU_ASSERT(waiting <= 12000);
    zsock_destroy(&s);
    zactor_destroy(&b);
}

/* max_running = 2: two requests waiting for workers fill the broker; a third SUBMIT gets an
 * ErrorReply (PF_ERR) and creates nothing; once one of the two is cancelled (finished), a
 * SUBMIT is taken again. A request that fails at once is finished and does not count. */
static void test_running_requests_bounded(void)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:0";
    o.max_running = 2;
    o.quiet = 1;
    char ep[256], err[512], first[40] = "";
    zactor_t *b = start_broker(&o, ep, sizeof ep);
    pf_client_t *c = pf_client_new(ep, 5000, err, sizeof err);
    pf_graph_t *g = tiny_graph(10), *big = tiny_graph(2e9);
    pf_cluster_t *cl = tiny_cluster(4);
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    Planfarm__RequestStatus *st;
    CU_ASSERT_EQUAL_FATAL(pf_client_submit(c, big, cl, &so, "infeasible", &st, err, sizeof err),
                          PF_OK);
    st = prepared(c, st);
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_FAILED);
    planfarm__request_status__free_unpacked(st, NULL);
    for (int k = 0; k < 2; k++) {
        so.seed = (uint64_t)k + 1; /* different requests: the same inputs would be one */
        CU_ASSERT_EQUAL_FATAL(pf_client_submit(c, g, cl, &so, "tiny", &st, err, sizeof err),
                              PF_OK);
        if (k == 0)
            snprintf(first, sizeof first, "%s", st->request_id);
        planfarm__request_status__free_unpacked(st, NULL);
    }
    so.seed = 3;
    CU_ASSERT_EQUAL(pf_client_submit(c, g, cl, &so, "one too many", &st, err, sizeof err),
                    PF_ERR);
    CU_ASSERT_PTR_NULL(st);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "broker busy: 2 requests are running"));
    Planfarm__ListReply *l;
    CU_ASSERT_EQUAL(pf_client_list(c, &l, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(l->n_requests, 3);
    planfarm__list_reply__free_unpacked(l, NULL);
    CU_ASSERT_EQUAL(pf_client_cancel(c, first, &st, err, sizeof err), PF_OK);
    planfarm__request_status__free_unpacked(st, NULL);
    so.seed = 4;
    CU_ASSERT_EQUAL(pf_client_submit(c, g, cl, &so, "room again", &st, err, sizeof err), PF_OK);
    if (st)
        planfarm__request_status__free_unpacked(st, NULL);
    pf_client_destroy(&c);
    pf_graph_destroy(&g);
    pf_graph_destroy(&big);
    pf_cluster_destroy(&cl);
    zactor_destroy(&b);
}

/* The id of the first job a fresh broker hands out for the tiny request (S = 1). */
static uint64_t first_job_id(void)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:0";
    o.quiet = 1;
    char ep[256], err[512];
    zactor_t *b = start_broker(&o, ep, sizeof ep);
    pf_client_t *c = pf_client_new(ep, 5000, err, sizeof err);
    pf_graph_t *g = tiny_graph(10);
    pf_cluster_t *cl = tiny_cluster(4);
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    so.stages = 1;
    Planfarm__RequestStatus *st;
    CU_ASSERT_EQUAL(pf_client_submit(c, g, cl, &so, "tiny", &st, err, sizeof err), PF_OK);
    if (st)
        planfarm__request_status__free_unpacked(st, NULL);
    zsock_t *w = zsock_new_dealer(ep);
    Planfarm__JobKind kinds[] = {PLANFARM__JOB_KIND__JOB_DP_PARTITION};
    Planfarm__Ready ready = PLANFARM__READY__INIT;
    ready.protocol = PF_WIRE_VERSION;
    ready.credits = 1;
    ready.kinds = kinds;
    ready.n_kinds = 1;
    peer_send(w, PF_MSG_READY, &ready.base);
    Planfarm__Job *job = next_job(w);
    uint64_t id = job ? job->id : 0;
    planfarm__job__free_unpacked(job, NULL);
    zsock_destroy(&w);
    pf_client_destroy(&c);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
    zactor_destroy(&b);
    return id;
}

/* A worker that outlives its broker sends the answers it finished while away to the broker it
 * reconnects to; a restarted broker must not take them for its own jobs. Job ids of two broker
 * instances differ (each request's number, their high half, is random), so such an answer is
 * dropped. Equal ids here would mean a chance of 1 in 2^32. */
static void test_job_ids_differ_across_brokers(void)
{
    uint64_t a = first_job_id(), b = first_job_id();
    CU_ASSERT(a != 0 && b != 0);
    CU_ASSERT(a != b);
}

/* ---- a hostile client ---- */

/* Nine malformed messages, each counted once, then a message above the size bound (libzmq drops
 * that connection before the broker sees it); the broker keeps serving a worker and a client. */
static void test_hostile(void)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:0";
    o.max_msg_bytes = 1 << 20;
    o.heartbeat_ms = 100;
    pf_testseam_noops_t noops; /* "NOOP" on the actor's pipe */
    pf_testseam_noops_init(&noops);
    o.testseam = &noops.seam;
    char ep[256], err[512];
    zactor_t *b = start_broker(&o, ep, sizeof ep);
    zactor_t *w = start_worker(ep, 4);
    CU_ASSERT(noop_round(b, 100));

    zsock_t *evil = zsock_new_dealer(ep);
    uint8_t junk[64];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    uint8_t status_hdr[4], result_hdr[4];
    pf_wire_header(PF_MSG_STATUS, status_hdr);
    pf_wire_header(PF_MSG_RESULT, result_hdr);
    const uint8_t bad_tag[] = {'X', 'X', 1, PF_MSG_STATUS};
    const uint8_t bad_version[] = {'P', 'F', 7, PF_MSG_STATUS};
    const uint8_t bad_kind[] = {'P', 'F', 1, 99};
    const uint8_t short_hdr[] = {'P', 'F'};
    uint8_t submit_hdr[4];
    pf_wire_header(PF_MSG_SUBMIT, submit_hdr);
    const void *f1[] = {junk};
    size_t l1[] = {sizeof junk};
    send_frames(evil, 1, f1, l1); /* 1: one frame */
    const void *f2[] = {junk, junk};
    size_t l2[] = {16, 40};
    send_frames(evil, 2, f2, l2); /* 2: random header */
    const void *f3[] = {bad_tag, junk};
    size_t l3[] = {4, 3};
    send_frames(evil, 2, f3, l3); /* 3: wrong tag */
    f3[0] = bad_version;
    send_frames(evil, 2, f3, l3); /* 4: wrong version */
    f3[0] = bad_kind;
    send_frames(evil, 2, f3, l3); /* 5: unknown kind */
    f3[0] = short_hdr;
    l3[0] = 2;
    send_frames(evil, 2, f3, l3); /* 6: truncated header */
    const void *f7[] = {submit_hdr, junk};
    size_t l7[] = {4, 64};
    send_frames(evil, 2, f7, l7); /* 7: SUBMIT whose body is not a Submit */
    const void *f8[] = {status_hdr, junk, junk, junk};
    size_t l8[] = {4, 3, 3, 3};
    send_frames(evil, 4, f8, l8); /* 8: too many frames */
    const void *f9[] = {status_hdr, ""};
    size_t l9[] = {4, 0};
    send_frames(evil, 2, f9, l9); /* a valid STATUS (empty id): this peer is now a client... */
    const void *f10[] = {result_hdr, junk};
    size_t l10[] = {4, 8};
    send_frames(evil, 2, f10, l10); /* 9: ...so a RESULT from it is malformed */
    zmsg_t *reply = zmsg_recv(evil); /* the STATUS got its answer: an ErrorReply */
    CU_ASSERT_PTR_NOT_NULL(reply);
    zmsg_destroy(&reply);

    size_t huge_len = (1 << 20) + 4096;
    uint8_t *huge = calloc(1, huge_len);
    const void *fh[] = {status_hdr, huge};
    size_t lh[] = {4, huge_len};
    zsock_t *evil2 = zsock_new_dealer(ep);
    send_frames(evil2, 2, fh, lh);
    free(huge);

    /* a well-behaved client and the worker are still served */
    pf_client_t *c = pf_client_new(ep, 5000, err, sizeof err);
    Planfarm__ListReply *l;
    CU_ASSERT_EQUAL(pf_client_list(c, &l, err, sizeof err), PF_OK);
    if (l)
        planfarm__list_reply__free_unpacked(l, NULL);
    CU_ASSERT(noop_round(b, 100));
    long long bad, dispatched;
    int workers;
    broker_stats(b, &bad, &dispatched, &workers);
    CU_ASSERT_EQUAL(bad, 9);
    CU_ASSERT_EQUAL(dispatched, 200);
    CU_ASSERT_EQUAL(workers, 1);

    pf_client_destroy(&c);
    zsock_destroy(&evil);
    zsock_destroy(&evil2);
    zactor_destroy(&w);
    zactor_destroy(&b);
}

/* The plan without the search's clock readings and counts (scripts/same-plans.sh leaves the same
 * out, and the count of workers that served it): keys ending in "_s", "seconds", "jobs",
 * "symmetric_pruned", "workers". */
static void strip_clocks(json_t *j)
{
    if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++)
            strip_clocks(json_array_get(j, i));
        return;
    }
    if (!json_is_object(j))
        return;
    const char *key;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(j, tmp, key, v) {
        size_t n = strlen(key);
        if ((n > 2 && strcmp(key + n - 2, "_s") == 0) || !strcmp(key, "seconds") ||
            !strcmp(key, "jobs") || !strcmp(key, "symmetric_pruned") || !strcmp(key, "workers"))
            json_object_del(j, key);
        else
            strip_clocks(v);
    }
}

/* A finished request's plan JSON, or NULL. */
static json_t *result_json(pf_client_t *c, const char *id)
{
    char err[512];
    Planfarm__ResultReply *rr = NULL;
    json_t *plan = NULL;
    if (pf_client_result(c, id, &rr, err, sizeof err) == PF_OK && rr)
        plan = json_loads(rr->plan_json, 0, NULL);
    if (rr)
        planfarm__result_reply__free_unpacked(rr, NULL);
    return plan;
}

/* Submit the tiny request, answer the scripted worker's jobs as `hostile` says until it is done;
 * returns its plan JSON without clock readings (NULL when it failed) and counts the jobs the
 * scripted worker answered. hostile: 0 none (the worker is not there), 1 every SIMULATE with
 * 0.001 ms that fits, 2 every job with status -3. */
static json_t *plan_with(pf_client_t *c, zsock_t *w, int hostile, int *answered)
{
    char err[512], id[40];
    pf_graph_t *g = tiny_graph(10);
    pf_cluster_t *cl = tiny_cluster(4);
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    Planfarm__RequestStatus *st;
    json_t *plan = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_client_submit(c, g, cl, &so, "hostile", &st, err, sizeof err), PF_OK);
    snprintf(id, sizeof id, "%s", st->request_id);
    planfarm__request_status__free_unpacked(st, NULL);
    int state = 0;
    for (double t0 = pf_now_s(); pf_now_s() - t0 < 30;) {
        zframe_t *body = NULL;
        int kind = w ? peer_poll(w, &body) : 0;
        Planfarm__Job *j = kind == PF_MSG_JOB ? planfarm__job__unpack(NULL, zframe_size(body),
                                                                      zframe_data(body))
                                              : NULL;
        zframe_destroy(&body);
        if (j) {
            Planfarm__JobResult r = PLANFARM__JOB_RESULT__INIT;
            Planfarm__SimulateAnswer sim = PLANFARM__SIMULATE_ANSWER__INIT;
            r.id = j->id;
            r.kind = j->kind;
            if (hostile == 1 && j->kind == PLANFARM__JOB_KIND__JOB_SIMULATE) {
                sim.step_ms = 0.001;
                sim.fits = 1;
                sim.mem_limit_bytes = 1e9;
                r.sim = &sim;
            } else {
                r.status = PF_EINFEASIBLE;
                r.error = "hostile";
            }
            peer_send(w, PF_MSG_RESULT, &r.base);
            ++*answered;
            planfarm__job__free_unpacked(j, NULL);
            continue;
        }
        if (kind)
            continue;
        zclock_sleep(5);
        if (!(st = status_of(c, id)))
            continue;
        state = st->state;
        planfarm__request_status__free_unpacked(st, NULL);
        if (state == PLANFARM__REQUEST_STATE__REQ_DONE ||
            state == PLANFARM__REQUEST_STATE__REQ_FAILED)
            break;
    }
    CU_ASSERT_EQUAL(state, PLANFARM__REQUEST_STATE__REQ_DONE);
    if (state != PLANFARM__REQUEST_STATE__REQ_DONE)
        fprintf(stderr, "hostile request ended in state %d\n", state);
    else if ((plan = result_json(c, id)))
        strip_clocks(plan);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
    return plan;
}

/* A request's plan through the broker and its workers (30 s at most): its JSON, or NULL. */
static json_t *plan_through(pf_client_t *c, const pf_graph_t *g, const pf_cluster_t *cl,
                            const pf_search_opts_t *so)
{
    char err[512], id[64];
    Planfarm__RequestStatus *st;
    if (pf_client_submit(c, g, cl, so, "mb", &st, err, sizeof err) != PF_OK)
        return NULL;
    snprintf(id, sizeof id, "%s", st->request_id);
    planfarm__request_status__free_unpacked(st, NULL);
    int state = 0;
    for (double t0 = pf_now_s(); pf_now_s() - t0 < 30 && state != PLANFARM__REQUEST_STATE__REQ_DONE &&
                                 state != PLANFARM__REQUEST_STATE__REQ_FAILED;) {
        zclock_sleep(20);
        if ((st = status_of(c, id))) {
            state = st->state;
            planfarm__request_status__free_unpacked(st, NULL);
        }
    }
    return state == PLANFARM__REQUEST_STATE__REQ_DONE ? result_json(c, id) : NULL;
}

static pf_graph_t *gpt_at(int microbatch)
{
    char err[256];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 4, mo.hidden = 512, mo.heads = 8, mo.seq = 256, mo.microbatch = microbatch;
    pf_graph_t *raw = NULL, *g = NULL;
    if (pf_model_build(&mo, &raw, err, sizeof err) == PF_OK)
        pf_price_graph(raw, pf_devmodel_preset("a100-80g"), PF_PREC_BF16, &g, NULL, err,
                       sizeof err);
    pf_graph_destroy(&raw);
    return g;
}

/* --microbatch-size 2 on a graph priced at micro-batch 1, submitted as is (planfarm batch does
 * not re-price): the search re-prices it and the workers get the re-priced graph, so the plan
 * is the one of the graph generated at micro-batch 2. */
static void test_microbatch_repriced(void)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:0";
    o.quiet = 1;
    char ep[256], err[512];
    zactor_t *b = start_broker(&o, ep, sizeof ep);
    pf_client_t *c = pf_client_new(ep, 5000, err, sizeof err);
    zactor_t *w = start_worker(ep, 2);
    pf_graph_t *g1 = gpt_at(1), *g2 = gpt_at(2);
    pf_cluster_t *cl = tiny_cluster(4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g2);
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    so.block_search = 1;
    so.microbatch_size = 2;
    so.global_batch = 32;
    json_t *p1 = plan_through(c, g1, cl, &so), *p2 = plan_through(c, g2, cl, &so);
    CU_ASSERT_PTR_NOT_NULL(p1);
    CU_ASSERT_PTR_NOT_NULL(p2);
    if (p1 && p2) {
        double s1 = json_number_value(json_object_get(p1, "simulated_step_ms")),
               s2 = json_number_value(json_object_get(p2, "simulated_step_ms"));
        CU_ASSERT(s2 > 0 && fabs(s1 - s2) <= 1e-6 * s2);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(p1, "microbatch_size")), 2);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(p1, "global_batch")), 32);
    }
    json_decref(p1);
    json_decref(p2);
    pf_graph_destroy(&g1);
    pf_graph_destroy(&g2);
    pf_cluster_destroy(&cl);
    zactor_destroy(&w);
    pf_client_destroy(&c);
    zactor_destroy(&b);
}

/* A hostile worker key next to a healthy worker: one scripted worker that runs every kind but
 * DP_PARTITION answers each SIMULATE with a 0.001 ms step (then, in a second request, every job
 * with status -3). Its answers are rejected (re-simulated, or failed attempts retried on the
 * healthy worker): both requests finish, with the plan the healthy worker alone makes. */
static void test_hostile_worker(void)
{
    json_t *ref = NULL;
    for (int hostile = 0; hostile <= 2; hostile++) { /* a fresh broker each: no plan reused */
        pf_broker_opts_t o;
        pf_broker_opts_init(&o);
        o.endpoint = "tcp://127.0.0.1:0";
        o.quiet = 1;
        char ep[256], err[512];
        zactor_t *b = start_broker(&o, ep, sizeof ep);
        pf_client_t *c = pf_client_new(ep, 5000, err, sizeof err);
        zactor_t *healthy = start_worker(ep, 2);
        zsock_t *w = NULL;
        if (hostile) {
            w = zsock_new_dealer(ep);
            Planfarm__JobKind kinds[] = {
                PLANFARM__JOB_KIND__JOB_MAP_PROBE, PLANFARM__JOB_KIND__JOB_TAP_ENUM,
                PLANFARM__JOB_KIND__JOB_SIMULATE, PLANFARM__JOB_KIND__JOB_RESHARD};
            Planfarm__Ready ready = PLANFARM__READY__INIT;
            ready.protocol = PF_WIRE_VERSION;
            ready.credits = 8;
            ready.kinds = kinds;
            ready.n_kinds = 4;
            ready.name = "hostile";
            peer_send(w, PF_MSG_READY, &ready.base);
            int byes = 0;
            CU_ASSERT(worker_sync(w, &byes)); /* registered before the request comes */
        }
        int answered = 0;
        json_t *p = plan_with(c, w, hostile, &answered);
        CU_ASSERT_PTR_NOT_NULL(p);
        if (!hostile) {
            ref = p;
        } else {
            CU_ASSERT(answered > 0);
            CU_ASSERT(p && ref && json_equal(p, ref));
            if (p && ref && !json_equal(p, ref) && getenv("PF_TEST_VERBOSE")) {
                char *x = json_dumps(ref, JSON_COMPACT | JSON_SORT_KEYS),
                     *y = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
                fprintf(stderr, "healthy: %s\nhostile %d: %s\n", x, hostile, y);
                free(x);
                free(y);
            }
            json_decref(p);
        }
        zsock_destroy(&w);
        zactor_destroy(&healthy);
        pf_client_destroy(&c);
        zactor_destroy(&b);
    }
    json_decref(ref);
}

/* Nothing listens on the port: the call ends after the timeout with a message naming the
 * endpoint, and the next call times out the same way (a fresh socket each time). */
static void test_client_timeout(void)
{
    zsock_t *probe = zsock_new(ZMQ_ROUTER);
    int port = zsock_bind(probe, "tcp://127.0.0.1:*");
    zsock_destroy(&probe); /* a port that was free a moment ago */
    char ep[64], err[512], want[128];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    pf_client_t *c = pf_client_new(ep, 200, err, sizeof err);
    for (int k = 0; k < 2; k++) {
        Planfarm__RequestStatus *st = NULL;
        double t0 = pf_now_s();
        CU_ASSERT_EQUAL(pf_client_status(c, "r00000000", &st, err, sizeof err), PF_ERR);
        double dt = pf_now_s() - t0;
        CU_ASSERT(dt >= 0.19 && dt < PF_EVENT_WAIT_S); /* ended by the timeout, not hung */
        snprintf(want, sizeof want, "no broker at %s: timed out after 0.2 s", ep);
        CU_ASSERT_STRING_EQUAL(err, want);
        CU_ASSERT_PTR_NULL(st);
    }
    pf_client_destroy(&c);
    CU_ASSERT_PTR_NULL(pf_client_new("", 100, err, sizeof err));
}

/* A leading SIMULATE answer is re-run on the broker's helper thread, not on its loop (issue 23:
 * two re-runs of a 1T GPT on 3,072 GPUs held the loop for seconds and the broker's own worker
 * was declared dead). The test hook holds every helper task 1.5 s, 15 heartbeat intervals of
 * 100 ms and far past liveness 3, while the test's clock moves as fast as the wall's: the request finishes, at least
 * one answer was re-run and took the 1.5 s, the loop's longest turn stays far below it (a stat
 * the loop keeps, not a wall-clock race: the old loop re-ran in the turn that received the
 * answer and could not meet 1 s), and no worker was lost. */
static void test_rerun_off_the_loop(void)
{
    char err[512], ep[256], id[64];
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:0";
    o.heartbeat_ms = 100; /* the test worker's interval too */
    o.liveness = 3;
    o.quiet = 1;
    o.prep_delay_ms = 1500;
    pf_graph_t *g = gpt_graph(1);
    pf_topology_opts_t to; /* one machine of 2 H100: a hierarchy (format 2) over the wire too */
    pf_topology_opts_init(&to, PF_TOPOLOGY_NVSWITCH);
    to.machines = 1;
    to.gpus_per_machine = 2;
    pf_cluster_t *cl = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &cl, err, sizeof err), PF_OK);
    CU_ASSERT_PTR_NOT_NULL(pf_cluster_hierarchy(cl));
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    zactor_t *b = start_broker(&o, ep, sizeof ep);
    zactor_t *w = start_worker(ep, 4);
    pf_client_t *c = pf_client_new(ep, 5000, err, sizeof err);
    Planfarm__RequestStatus *st = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_client_submit(c, g, cl, &so, "rerun", &st, err, sizeof err), PF_OK);
    snprintf(id, sizeof id, "%s", st->request_id);
    int done = 0;
    for (double t0 = pf_now_s(); !done && pf_now_s() - t0 < 3 * PF_EVENT_WAIT_S;) {
        planfarm__request_status__free_unpacked(st, NULL);
        pf_clock_manual_advance(&test_clock, 0.01); /* heartbeats and liveness go on */
        zclock_sleep(10);
        st = status_of(c, id);
        CU_ASSERT_PTR_NOT_NULL_FATAL(st);
        done = st->state == PLANFARM__REQUEST_STATE__REQ_DONE ||
               st->state == PLANFARM__REQUEST_STATE__REQ_FAILED;
    }
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_DONE);
    if (st->state != PLANFARM__REQUEST_STATE__REQ_DONE)
        fprintf(stderr, "rerun request: state %d: %s\n", (int)st->state, st->error);
    planfarm__request_status__free_unpacked(st, NULL);
    zstr_send(b, "STATS");
    char *stats = zstr_recv(b);
    double wall, busy, stall = 1e9, rerun_s = 0;
    long long in, out, bad, disp, reruns = 0, lost = -1;
    int workers = 0, preparing = -1;
    CU_ASSERT_EQUAL(sscanf(stats ? stats : "",
                           "STATS %lf %lf %lld %lld %lld %lld %d %lf %d %lld %lf %lld", &wall,
                           &busy, &in, &out, &bad, &disp, &workers, &stall, &preparing, &reruns,
                           &rerun_s, &lost),
                    12);
    CU_ASSERT(reruns >= 1);
    CU_ASSERT(rerun_s >= 1.4);
    CU_ASSERT(stall < 1.0);
    CU_ASSERT_EQUAL(lost, 0);
    CU_ASSERT_EQUAL(workers, 1);
    free(stats);
    pf_client_destroy(&c);
    zactor_destroy(&w);
    zactor_destroy(&b);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
}

/* Answers go unchecked by a re-run only where no other process can send them: a broker asked to
 * trust its own workers refuses to start on a TCP endpoint. */
static void test_own_workers_only_inproc(void)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:0";
    o.quiet = 1;
    o.own_workers_only = 1;
    zactor_t *a = zactor_new(pf_broker_actor, &o);
    char *status = NULL, *text = NULL;
    zstr_recvx(a, &status, &text, NULL);
    CU_ASSERT_STRING_EQUAL(status, "ERROR");
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "own workers only needs an inproc:// endpoint"));
    free(status);
    free(text);
    zactor_destroy(&a);
}

void pf_suite_broker(void)
{
    CU_pSuite s = CU_add_suite("broker", NULL, NULL);
    CU_add_test(s, "blob store: SHA-1 names, one copy, refcounts", test_blobstore);
    CU_add_test(s, "requests without workers", test_requests);
    CU_add_test(s, "finished requests are evicted oldest first", test_eviction);
    CU_add_test(s, "hostile client", test_hostile);
    CU_add_test(s, "a hostile worker changes no plan and fails no request", test_hostile_worker);
    CU_add_test(s, "client timeout", test_client_timeout);
    CU_add_test(s, "results only from the worker holding the job",
                test_results_only_from_workers);
    CU_add_test(s, "partition answers are checked against the graph and the job",
                test_partition_answers_checked);
    CU_add_test(s, "replies a client never reads are bounded", test_unread_replies_bounded);
    CU_add_test(s, "running requests are bounded", test_running_requests_bounded);
    CU_add_test(s, "job ids differ across broker instances", test_job_ids_differ_across_brokers);
    CU_add_test(s, "own workers only: inproc endpoints only", test_own_workers_only_inproc);
    CU_add_test(s, "a re-priced micro-batch reaches the workers", test_microbatch_repriced);
    CU_add_test(s, "a leading answer is re-run off the loop; no worker is lost",
                test_rerun_off_the_loop);
    CU_add_test(s, "a slow message does not make workers look dead",
                test_slow_message_keeps_workers);
}
