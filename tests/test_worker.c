/* The worker: its blob cache (LRU by blob bytes, pins), and its side of the protocol against a
 * broker played by this test on a ROUTER socket: READY, RESULT for a NOOP job, FETCH for a
 * missing blob and FAILED when the blob cannot be had, CANCEL of a waiting job, heartbeats,
 * and a new connection (new identity, READY again) after a BYE, after a back-off measured on
 * the test's clock.
 *
 * Every worker here reads a clock that moves only when the test moves it, and every wait is for
 * an event (a message, a state the worker reports), bounded by PF_EVENT_WAIT_S only to end a
 * failing test: nothing depends on how loaded the machine is. */
#include "planner/core/util.h"
#include "proto/clock.h"
#include "proto/job_codec.h"
#include "tests/testutil.h"
#include "worker/cache.h"
#include "worker/worker.h"

#include <czmq.h>
#include <string.h>

/* ---- cache ---- */

static pf_graph_t *one_op_graph(void)
{
    pf_graph_t *g = pf_graph_new("g", 1);
    pf_op_t op = {.id = 0, .name = "a", .fwd_ms = 1, .bwd_ms = 1};
    pf_graph_add_op(g, &op);
    char err[128];
    pf_graph_finalize(g, err, sizeof err);
    return g;
}

/* Bound 100 bytes. Insert h1 (40), h2 (40): 80 kept. Touch h1, insert h3 (40): 120 > 100, the
 * least recently used unpinned entry (h2) goes -> 80. Pin h1, insert h4 (90): 170; h3 goes
 * (130), h1 is pinned and h4 is the one being inserted, so 130 stays above the bound. Touch h1
 * (order h4, h1) and unpin it: h4 is now the least recently used -> 40. */
static void test_cache(void)
{
    pf_cache_t *c = pf_cache_new(100);
    uint8_t h1[20] = {1}, h2[20] = {2}, h3[20] = {3}, h4[20] = {4};
    pf_cache_entry_t *e1 = pf_cache_insert(c, h1, 20, one_op_graph(), NULL, 40);
    CU_ASSERT_PTR_NOT_NULL(pf_cache_entry_graph(e1));
    CU_ASSERT_PTR_NULL(pf_cache_entry_cluster(e1));
    pf_cache_insert(c, h2, 20, one_op_graph(), NULL, 40);
    CU_ASSERT_EQUAL(pf_cache_bytes(c), 80);
    CU_ASSERT_PTR_EQUAL(pf_cache_lookup(c, h1, 20), e1);
    pf_cache_insert(c, h3, 20, one_op_graph(), NULL, 40);
    CU_ASSERT_EQUAL(pf_cache_bytes(c), 80);
    CU_ASSERT_PTR_NULL(pf_cache_lookup(c, h2, 20));
    CU_ASSERT_PTR_NOT_NULL(pf_cache_lookup(c, h3, 20));
    pf_cache_pin(e1);
    pf_cache_insert(c, h4, 20, one_op_graph(), NULL, 90);
    CU_ASSERT_EQUAL(pf_cache_bytes(c), 130);
    CU_ASSERT_PTR_NULL(pf_cache_lookup(c, h3, 20));
    CU_ASSERT_PTR_EQUAL(pf_cache_lookup(c, h1, 20), e1);
    /* the lookup made h1 the most recent; unpinning evicts down to the bound: h4 is older */
    pf_cache_unpin(c, e1);
    CU_ASSERT_EQUAL(pf_cache_bytes(c), 40);
    CU_ASSERT_EQUAL(pf_cache_count(c), 1);
    CU_ASSERT_PTR_EQUAL(pf_cache_lookup(c, h1, 20), e1);
    /* the same hash again keeps the first object */
    CU_ASSERT_PTR_EQUAL(pf_cache_insert(c, h1, 20, one_op_graph(), NULL, 40), e1);
    CU_ASSERT_EQUAL(pf_cache_count(c), 1);
    CU_ASSERT_PTR_NULL(pf_cache_insert(c, h2, 0, one_op_graph(), NULL, 1));
    pf_cache_destroy(&c);
    CU_ASSERT_PTR_NULL(c);
}

/* ---- protocol against a scripted broker ---- */

/* The workers' clock: heartbeats, liveness and back-off happen when a test moves it. */
static pf_clock_manual_t test_clock;

/* The worker actor's "STATS": connected, reconnects and the jobs it holds, as of its last turn. */
typedef struct {
    int connected, held;
    long long reconnects, done, failed, cancelled, fetches;
} wstats_t;

static int worker_stats(zactor_t *w, wstats_t *st)
{
    zstr_send(w, "STATS");
    char *s = zstr_recv(w);
    int n = s ? sscanf(s, "STATS %d %lld %lld %lld %lld %lld %d", &st->connected,
                       &st->reconnects, &st->done, &st->failed, &st->cancelled, &st->fetches,
                       &st->held)
              : 0;
    free(s);
    return n == 7;
}

/* Two STATS round trips: the worker has finished a turn of its loop that began after this call
 * (the first reply may be sent before that turn's decisions; the second comes after them), so
 * it has looked at the clock as the test left it. Returns the state after that turn. */
static int worker_settled(zactor_t *w, wstats_t *st)
{
    return worker_stats(w, st) && worker_stats(w, st);
}

/* Until the worker has dropped its connection (it read a BYE), bounded. */
static int wait_disconnected(zactor_t *w)
{
    wstats_t st = {.connected = 1};
    for (double t0 = pf_now_s(); pf_now_s() - t0 < PF_EVENT_WAIT_S;) {
        if (!worker_stats(w, &st))
            return 0;
        if (!st.connected)
            return 1;
        zclock_sleep(1);
    }
    return 0;
}

/* Options of a worker under test: one OpenMP thread, the test's clock. */
static void test_worker_opts(pf_worker_opts_t *o, const char *ep)
{
    pf_worker_opts_init(o);
    o->endpoint = ep;
    o->threads = 1;
    o->name = "w-under-test";
    o->clock = pf_clock_manual_init(&test_clock, 100.0);
}

typedef struct {
    zframe_t *identity;
    pf_wire_msg_t kind;
    zframe_t *body;
} recv_t;

static void recv_clear(recv_t *r)
{
    zframe_destroy(&r->identity);
    zframe_destroy(&r->body);
}

/* The next message from the worker that is not a HEARTBEAT (unless want_hb); 0 if none came
 * within PF_EVENT_WAIT_S (a failing test). */
static int expect(zsock_t *router, recv_t *r, int want_hb)
{
    memset(r, 0, sizeof *r);
    zpoller_t *p = zpoller_new(router, NULL);
    double until = pf_now_s() + PF_EVENT_WAIT_S;
    int ok = 0;
    while (!ok && pf_now_s() < until) {
        /* a wait that ends early with nothing (an interrupted poll) is no verdict: only the
         * bound is */
        if (!zpoller_wait(p, (int)((until - pf_now_s()) * 1000) + 1)) {
            if (zpoller_terminated(p))
                break;
            continue;
        }
        zmsg_t *m = zmsg_recv(router);
        if (!m || zmsg_size(m) != 3) {
            zmsg_destroy(&m);
            continue;
        }
        zframe_t *id = zmsg_pop(m), *hdr = zmsg_pop(m), *body = zmsg_pop(m);
        pf_wire_msg_t kind;
        char err[64];
        if (pf_wire_parse_header(zframe_data(hdr), zframe_size(hdr), &kind, err, sizeof err) ==
                PF_OK &&
            (kind != PF_MSG_HEARTBEAT || want_hb)) {
            r->identity = id;
            r->kind = kind;
            r->body = body;
            id = body = NULL;
            ok = 1;
        }
        zframe_destroy(&id);
        zframe_destroy(&hdr);
        zframe_destroy(&body);
        zmsg_destroy(&m);
    }
    zpoller_destroy(&p);
    return ok;
}

static void send_to(zsock_t *router, zframe_t *identity, pf_wire_msg_t kind,
                    const ProtobufCMessage *m)
{
    uint8_t hdr[4], *buf;
    size_t len;
    pf_wire_header(kind, hdr);
    pf_wire_pack(m, &buf, &len);
    zmsg_t *msg = zmsg_new();
    zmsg_append(msg, &(zframe_t *){zframe_dup(identity)});
    zmsg_addmem(msg, hdr, 4);
    zmsg_addmem(msg, buf, len);
    zmsg_send(&msg, router);
    free(buf);
}

/* The broker's side, played by the test: a ROUTER on a loopback port the kernel picks. */
static zsock_t *scripted_router(char *ep, size_t len)
{
    zsock_t *router = zsock_new(ZMQ_ROUTER);
    int port = zsock_bind(router, "tcp://127.0.0.1:*");
    CU_ASSERT(port > 0);
    snprintf(ep, len, "tcp://127.0.0.1:%d", port);
    return router;
}

static void test_protocol(void)
{
    char ep[64];
    zsock_t *router = scripted_router(ep, sizeof ep);
    pf_worker_opts_t o;
    test_worker_opts(&o, ep);
    o.credits = 3;
    o.heartbeat_ms = 50;
    o.liveness = 3; /* the clock moves 1.5 intervals below: one silent tick of three */
    zactor_t *w = zactor_new(pf_worker_actor, &o);
    char *ok = zstr_recv(w);
    CU_ASSERT_STRING_EQUAL(ok, "OK");
    free(ok);

    recv_t r;
    CU_ASSERT_FATAL(expect(router, &r, 0));
    CU_ASSERT_EQUAL(r.kind, PF_MSG_READY);
    Planfarm__Ready *ready = planfarm__ready__unpack(NULL, zframe_size(r.body), zframe_data(r.body));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ready);
    CU_ASSERT_EQUAL(ready->protocol, PF_WIRE_VERSION);
    CU_ASSERT_EQUAL(ready->credits, 3);
    CU_ASSERT_EQUAL(ready->n_kinds, PF_JOB_KIND_COUNT); /* every kind of the table */
    CU_ASSERT_STRING_EQUAL(ready->name, "w-under-test");
    CU_ASSERT(ready->cores >= 1);
    planfarm__ready__free_unpacked(ready, NULL);
    zframe_t *who = zframe_dup(r.identity);
    recv_clear(&r);

    /* a heartbeat comes once the clock has moved one interval (50 ms): 1.5 intervals here, as
     * an exact multiple could fall a rounding error short of it */
    pf_clock_manual_advance(&test_clock, 0.075);
    CU_ASSERT(expect(router, &r, 1) && r.kind == PF_MSG_HEARTBEAT);
    recv_clear(&r);

    /* a NOOP job is answered with a RESULT of the same id, status 0 */
    Planfarm__Job job = PLANFARM__JOB__INIT;
    job.id = 77;
    job.kind = PLANFARM__JOB_KIND__JOB_NOOP;
    send_to(router, who, PF_MSG_JOB, &job.base);
    CU_ASSERT_FATAL(expect(router, &r, 0));
    CU_ASSERT_EQUAL(r.kind, PF_MSG_RESULT);
    Planfarm__JobResult *res =
        planfarm__job_result__unpack(NULL, zframe_size(r.body), zframe_data(r.body));
    CU_ASSERT_PTR_NOT_NULL_FATAL(res);
    CU_ASSERT_EQUAL(res->id, 77);
    CU_ASSERT_EQUAL(res->status, 0);
    planfarm__job_result__free_unpacked(res, NULL);
    recv_clear(&r);

    /* a probe job naming a cluster blob the worker lacks: FETCH with that hash */
    uint8_t hash[20];
    for (int i = 0; i < 20; i++)
        hash[i] = (uint8_t)(0xa0 + i);
    Planfarm__BlobRef ref = PLANFARM__BLOB_REF__INIT;
    ref.hash.data = hash;
    ref.hash.len = 20;
    ref.kind = PLANFARM__BLOB_KIND__BLOB_CLUSTER;
    double cu[2] = {1, 1}, par[2] = {0, 0}, msg[4] = {0, 5, 5, 0};
    Planfarm__StageGraph sg = PLANFARM__STAGE_GRAPH__INIT;
    sg.stages = 2;
    sg.replicas = 1;
    sg.cu_ms = cu;
    sg.n_cu_ms = 2;
    sg.param_bytes = par;
    sg.n_param_bytes = 2;
    sg.msg_bytes = msg;
    sg.n_msg_bytes = 4;
    Planfarm__ProbeParams pp = PLANFARM__PROBE_PARAMS__INIT;
    pp.stage_graph = &sg;
    pp.target_ms = 5;
    pp.budget_s = 1;
    job.id = 78;
    job.kind = PLANFARM__JOB_KIND__JOB_MAP_PROBE;
    job.cluster = &ref;
    job.probe = &pp;
    send_to(router, who, PF_MSG_JOB, &job.base);
    CU_ASSERT_FATAL(expect(router, &r, 0));
    CU_ASSERT_EQUAL(r.kind, PF_MSG_FETCH);
    Planfarm__Fetch *f = planfarm__fetch__unpack(NULL, zframe_size(r.body), zframe_data(r.body));
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(f->hash.len, 20);
    CU_ASSERT_EQUAL(memcmp(f->hash.data, hash, 20), 0);
    planfarm__fetch__free_unpacked(f, NULL);
    recv_clear(&r);
    /* a second job on the same blob does not fetch it again; CANCEL drops it with FAILED */
    job.id = 79;
    send_to(router, who, PF_MSG_JOB, &job.base);
    uint64_t cancel_ids[] = {79};
    Planfarm__Cancel cancel = PLANFARM__CANCEL__INIT;
    cancel.job_ids = cancel_ids;
    cancel.n_job_ids = 1;
    send_to(router, who, PF_MSG_CANCEL, &cancel.base);
    CU_ASSERT_FATAL(expect(router, &r, 0));
    CU_ASSERT_EQUAL(r.kind, PF_MSG_FAILED);
    Planfarm__Failed *fl = planfarm__failed__unpack(NULL, zframe_size(r.body), zframe_data(r.body));
    CU_ASSERT_EQUAL(fl->job_id, 79);
    CU_ASSERT_STRING_EQUAL(fl->error, "cancelled");
    planfarm__failed__free_unpacked(fl, NULL);
    recv_clear(&r);
    /* the broker cannot serve the blob: job 78 is answered FAILED, naming the blob */
    Planfarm__Blob blob = PLANFARM__BLOB__INIT;
    blob.hash = ref.hash;
    blob.error = "no blob with that hash";
    send_to(router, who, PF_MSG_BLOB, &blob.base);
    CU_ASSERT_FATAL(expect(router, &r, 0));
    CU_ASSERT_EQUAL(r.kind, PF_MSG_FAILED);
    fl = planfarm__failed__unpack(NULL, zframe_size(r.body), zframe_data(r.body));
    CU_ASSERT_EQUAL(fl->job_id, 78);
    CU_ASSERT_PTR_NOT_NULL(strstr(fl->error, "blob a0a1a2"));
    planfarm__failed__free_unpacked(fl, NULL);
    recv_clear(&r);
    /* a job that does not decode is answered FAILED too */
    job.id = 80;
    job.probe = NULL;
    send_to(router, who, PF_MSG_JOB, &job.base);
    CU_ASSERT_FATAL(expect(router, &r, 0));
    CU_ASSERT_EQUAL(r.kind, PF_MSG_FAILED);
    fl = planfarm__failed__unpack(NULL, zframe_size(r.body), zframe_data(r.body));
    CU_ASSERT_EQUAL(fl->job_id, 80);
    CU_ASSERT_PTR_NOT_NULL(strstr(fl->error, "job.probe"));
    planfarm__failed__free_unpacked(fl, NULL);
    recv_clear(&r);

    /* garbage is ignored; BYE makes it come back on a new socket: READY, new identity */
    zmsg_t *junk = zmsg_new();
    zmsg_append(junk, &(zframe_t *){zframe_dup(who)});
    zmsg_addstr(junk, "garbage");
    zmsg_send(&junk, router);
    Planfarm__Bye bye = PLANFARM__BYE__INIT;
    bye.reason = "unknown worker: send READY";
    send_to(router, who, PF_MSG_BYE, &bye.base);
    /* it comes back one back-off later: one heartbeat interval, since this broker had been
     * serving it (moved 1.5 intervals on once the BYE is read, for the rounding as above) */
    CU_ASSERT_FATAL(wait_disconnected(w));
    pf_clock_manual_advance(&test_clock, 0.075);
    CU_ASSERT_FATAL(expect(router, &r, 0));
    CU_ASSERT_EQUAL(r.kind, PF_MSG_READY);
    CU_ASSERT(!zframe_eq(r.identity, who));
    recv_clear(&r);
    wstats_t st;
    CU_ASSERT(worker_settled(w, &st) && st.connected && st.reconnects == 1);

    zactor_destroy(&w);
    /* leaving, it says BYE */
    CU_ASSERT(expect(router, &r, 0) && r.kind == PF_MSG_BYE);
    recv_clear(&r);
    zframe_destroy(&who);
    zsock_destroy(&router);
}

/* A worker with options o, connected to the scripted broker on `router`; returns it after its
 * READY (identity in *who). */
static zactor_t *worker_with(zsock_t *router, pf_worker_opts_t *o, zframe_t **who)
{
    zactor_t *w = zactor_new(pf_worker_actor, o);
    char *ok = zstr_recv(w);
    CU_ASSERT_STRING_EQUAL(ok, "OK");
    free(ok);
    recv_t r;
    *who = NULL;
    if (expect(router, &r, 0) && r.kind == PF_MSG_READY)
        *who = zframe_dup(r.identity);
    recv_clear(&r);
    return w;
}

/* The same with 2 credits, no routine log lines. */
static zactor_t *worker_at(zsock_t *router, const char *ep, zframe_t **who)
{
    pf_worker_opts_t o;
    test_worker_opts(&o, ep);
    o.credits = 2;
    o.quiet = 1;
    return worker_with(router, &o, who);
}

/* Answer the worker's FETCH with the blob whose bytes are buf[0..len) (kind k). */
static void serve_fetch(zsock_t *router, zframe_t *who, const uint8_t *buf, size_t len,
                        const uint8_t *hash, Planfarm__BlobKind k)
{
    Planfarm__Blob blob = PLANFARM__BLOB__INIT;
    blob.hash.data = (uint8_t *)hash;
    blob.hash.len = 20;
    blob.kind = k;
    blob.data.data = (uint8_t *)buf;
    blob.data.len = len;
    send_to(router, who, PF_MSG_BLOB, &blob.base);
}

static void sha1(const uint8_t *buf, size_t len, uint8_t out[20])
{
    zdigest_t *d = zdigest_new();
    zdigest_update(d, buf, len);
    memcpy(out, zdigest_data(d), 20);
    zdigest_destroy(&d);
}

/* A partition job whose grouping has 1 entry for a 3-op graph: the solver would read group[1]
 * and group[2] past the end of the array. The worker fetches both blobs, then answers FAILED
 * naming the grouping, without running it. */
static void test_group_mismatch(void)
{
    char ep[64];
    zsock_t *router = scripted_router(ep, sizeof ep);
    zframe_t *who;
    zactor_t *w = worker_at(router, ep, &who);
    CU_ASSERT_PTR_NOT_NULL_FATAL(who);

    pf_graph_t *g = pf_graph_new("three", 1);
    for (int v = 0; v < 3; v++) {
        pf_op_t op = {.id = v, .name = "op", .fwd_ms = 1, .bwd_ms = 1};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 10);
    pf_graph_add_edge(g, 1, 2, 10);
    char err[256];
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_cluster_t *c = pf_cluster_new("two", 2);
    for (int i = 0; i < 2; i++) {
        pf_device_t d = {.id = i, .name = "gpu", .mem_bytes = 1e9, .tflops = 1};
        pf_cluster_set_device(c, i, &d);
        pf_cluster_set_bw(c, i, 1 - i, 10);
    }
    CU_ASSERT_EQUAL_FATAL(pf_cluster_validate(c, err, sizeof err), PF_OK);
    uint8_t *gbuf, *cbuf, gh[20], ch[20];
    size_t glen, clen;
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_encode_graph(g, &gbuf, &glen), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_encode_cluster(c, &cbuf, &clen), PF_OK);
    sha1(gbuf, glen, gh);
    sha1(cbuf, clen, ch);

    Planfarm__BlobRef gref = PLANFARM__BLOB_REF__INIT, cref = PLANFARM__BLOB_REF__INIT;
    gref.hash.data = gh;
    gref.hash.len = 20;
    gref.kind = PLANFARM__BLOB_KIND__BLOB_GRAPH;
    cref.hash.data = ch;
    cref.hash.len = 20;
    cref.kind = PLANFARM__BLOB_KIND__BLOB_CLUSTER;
    uint32_t group[1] = {0};
    Planfarm__PartitionParams pp = PLANFARM__PARTITION_PARAMS__INIT;
    pp.stages = 1;
    pp.replicas = 1;
    pp.group = group;
    pp.n_group = 1;
    pp.ngroups = 1;
    Planfarm__Job job = PLANFARM__JOB__INIT;
    job.id = 5;
    job.kind = PLANFARM__JOB_KIND__JOB_DP_PARTITION;
    job.graph = &gref;
    job.cluster = &cref;
    job.partition = &pp;
    send_to(router, who, PF_MSG_JOB, &job.base);
    recv_t r;
    for (int k = 0; k < 2; k++) { /* two FETCHes, in either order */
        CU_ASSERT_FATAL(expect(router, &r, 0));
        CU_ASSERT_EQUAL_FATAL(r.kind, PF_MSG_FETCH);
        Planfarm__Fetch *f =
            planfarm__fetch__unpack(NULL, zframe_size(r.body), zframe_data(r.body));
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        if (f->hash.len == 20 && !memcmp(f->hash.data, gh, 20))
            serve_fetch(router, who, gbuf, glen, gh, PLANFARM__BLOB_KIND__BLOB_GRAPH);
        else
            serve_fetch(router, who, cbuf, clen, ch, PLANFARM__BLOB_KIND__BLOB_CLUSTER);
        planfarm__fetch__free_unpacked(f, NULL);
        recv_clear(&r);
    }
    CU_ASSERT_FATAL(expect(router, &r, 0));
    CU_ASSERT_EQUAL(r.kind, PF_MSG_FAILED);
    if (r.kind == PF_MSG_FAILED) {
        Planfarm__Failed *fl =
            planfarm__failed__unpack(NULL, zframe_size(r.body), zframe_data(r.body));
        CU_ASSERT_EQUAL(fl->job_id, 5);
        CU_ASSERT_PTR_NOT_NULL(strstr(fl->error, "job.partition.group: 1 entries for a graph of "
                                                 "3 ops"));
        planfarm__failed__free_unpacked(fl, NULL);
    }
    recv_clear(&r);

    /* the same blobs with a full grouping run: RESULT */
    uint32_t full[3] = {0, 1, 2};
    pp.group = full;
    pp.n_group = 3;
    pp.ngroups = 3;
    job.id = 6;
    send_to(router, who, PF_MSG_JOB, &job.base);
    CU_ASSERT_FATAL(expect(router, &r, 0));
    CU_ASSERT_EQUAL(r.kind, PF_MSG_RESULT);
    recv_clear(&r);

    zactor_destroy(&w);
    free(gbuf);
    free(cbuf);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
    zframe_destroy(&who);
    zsock_destroy(&router);
}

/* Credits 2: the worker agreed to hold two jobs. A broker that sends a third while both wait for
 * a blob gets FAILED for it (a worker never holds more than it agreed to: each job may carry a
 * stage graph of up to the message bound). Once one is cancelled, a new one is taken again. */
static void test_credits_enforced(void)
{
    char ep[64];
    zsock_t *router = scripted_router(ep, sizeof ep);
    zframe_t *who;
    zactor_t *w = worker_at(router, ep, &who);
    CU_ASSERT_PTR_NOT_NULL_FATAL(who);
    uint8_t hash[20] = {0xee};
    Planfarm__BlobRef ref = PLANFARM__BLOB_REF__INIT;
    ref.hash.data = hash;
    ref.hash.len = 20;
    ref.kind = PLANFARM__BLOB_KIND__BLOB_CLUSTER;
    double cu[1] = {1}, par[1] = {0}, msg[1] = {0};
    Planfarm__StageGraph sg = PLANFARM__STAGE_GRAPH__INIT;
    sg.stages = 1;
    sg.replicas = 1;
    sg.cu_ms = cu;
    sg.n_cu_ms = 1;
    sg.param_bytes = par;
    sg.n_param_bytes = 1;
    sg.msg_bytes = msg;
    sg.n_msg_bytes = 1;
    Planfarm__ProbeParams pp = PLANFARM__PROBE_PARAMS__INIT;
    pp.stage_graph = &sg;
    pp.target_ms = 5;
    Planfarm__Job job = PLANFARM__JOB__INIT;
    job.kind = PLANFARM__JOB_KIND__JOB_MAP_PROBE;
    job.cluster = &ref;
    job.probe = &pp;
    for (uint64_t id = 1; id <= 3; id++) {
        job.id = id;
        send_to(router, who, PF_MSG_JOB, &job.base);
    }
    /* one FETCH for the blob both held jobs wait for, and FAILED for job 3 */
    recv_t r;
    int fetches = 0;
    uint64_t failed = 0;
    while (expect(router, &r, 0)) {
        if (r.kind == PF_MSG_FETCH)
            fetches++;
        if (r.kind == PF_MSG_FAILED) {
            Planfarm__Failed *fl =
                planfarm__failed__unpack(NULL, zframe_size(r.body), zframe_data(r.body));
            failed = fl ? fl->job_id : 0;
            if (fl)
                CU_ASSERT_PTR_NOT_NULL(strstr(fl->error, "credits"));
            planfarm__failed__free_unpacked(fl, NULL);
        }
        recv_clear(&r);
        if (failed)
            break;
    }
    recv_clear(&r);
    CU_ASSERT_EQUAL(fetches, 1);
    CU_ASSERT_EQUAL(failed, 3);
    /* cancel job 1 (FAILED "cancelled"); job 4 is then held. The worker answers in the order
     * it reads, so cancelling job 2 after sending job 4 proves it: had job 4 been refused, its
     * FAILED would come before job 2's. */
    uint64_t one[] = {1}, two[] = {2};
    Planfarm__Cancel cancel = PLANFARM__CANCEL__INIT;
    cancel.job_ids = one;
    cancel.n_job_ids = 1;
    send_to(router, who, PF_MSG_CANCEL, &cancel.base);
    CU_ASSERT(expect(router, &r, 0) && r.kind == PF_MSG_FAILED);
    recv_clear(&r);
    job.id = 4;
    send_to(router, who, PF_MSG_JOB, &job.base);
    cancel.job_ids = two;
    send_to(router, who, PF_MSG_CANCEL, &cancel.base);
    CU_ASSERT_FATAL(expect(router, &r, 0));
    CU_ASSERT_EQUAL(r.kind, PF_MSG_FAILED);
    if (r.kind == PF_MSG_FAILED) {
        Planfarm__Failed *fl =
            planfarm__failed__unpack(NULL, zframe_size(r.body), zframe_data(r.body));
        CU_ASSERT_PTR_NOT_NULL_FATAL(fl);
        CU_ASSERT_EQUAL(fl->job_id, 2);
        CU_ASSERT_STRING_EQUAL(fl->error, "cancelled");
        planfarm__failed__free_unpacked(fl, NULL);
    }
    recv_clear(&r);
    wstats_t st;
    CU_ASSERT(worker_settled(w, &st) && st.held == 1); /* job 4 */

    zactor_destroy(&w);
    zframe_destroy(&who);
    zsock_destroy(&router);
}

/* Moves the test's clock 1.5 heartbeat intervals of hb_s on: exactly one tick of the worker (the
 * next is due one interval after this one; an exact multiple could fall a rounding error short). */
static void tick(double hb_s)
{
    pf_clock_manual_advance(&test_clock, 1.5 * hb_s);
}

/* Liveness 2 counts the worker's own heartbeat ticks since the broker last sent anything: ticks 1
 * and 2 find it silent through 1 and 2 intervals and send heartbeats, the 3rd reconnects. A
 * message from the broker (a NOOP job, its RESULT read back, so the worker has read the job)
 * starts the count again. */
static void test_liveness_in_ticks(void)
{
    char ep[64];
    zsock_t *router = scripted_router(ep, sizeof ep);
    pf_worker_opts_t o;
    test_worker_opts(&o, ep);
    o.heartbeat_ms = 50;
    o.liveness = 2;
    o.quiet = 1;
    zframe_t *who;
    zactor_t *w = worker_with(router, &o, &who);
    CU_ASSERT_PTR_NOT_NULL_FATAL(who);
    recv_t r;
    tick(0.05);
    CU_ASSERT(expect(router, &r, 1) && r.kind == PF_MSG_HEARTBEAT);
    recv_clear(&r);
    Planfarm__Job job = PLANFARM__JOB__INIT;
    job.id = 1;
    job.kind = PLANFARM__JOB_KIND__JOB_NOOP;
    send_to(router, who, PF_MSG_JOB, &job.base);
    CU_ASSERT(expect(router, &r, 0) && r.kind == PF_MSG_RESULT);
    recv_clear(&r);
    for (int k = 1; k <= 2; k++) { /* silent through 1, then 2 intervals: still connected */
        tick(0.05);
        CU_ASSERT(expect(router, &r, 1) && r.kind == PF_MSG_HEARTBEAT);
        recv_clear(&r);
    }
    wstats_t st;
    CU_ASSERT(worker_settled(w, &st) && st.connected && st.reconnects == 0);
    tick(0.05); /* the 3rd silent tick */
    CU_ASSERT_FATAL(wait_disconnected(w));
    CU_ASSERT(worker_settled(w, &st) && !st.connected && st.reconnects == 1);
    tick(0.05); /* one back-off (one interval) later it is back, under a new identity */
    CU_ASSERT_FATAL(expect(router, &r, 0));
    CU_ASSERT_EQUAL(r.kind, PF_MSG_READY);
    CU_ASSERT(!zframe_eq(r.identity, who));
    recv_clear(&r);
    zactor_destroy(&w);
    zframe_destroy(&who);
    zsock_destroy(&router);
}

/* A broker that answers every READY with BYE (a protocol version it does not speak): the worker
 * reconnects after a back-off that doubles each time, 20, 40, 80 and 160 ms of its clock with a
 * 20 ms heartbeat, not at the heartbeat rate forever. For each wait b the test holds the clock
 * at (BYE read) + b - 1 ms, lets the worker look at it (still disconnected), then moves it 2 ms
 * on and gets READY. */
static void test_backoff_after_bye(void)
{
    char ep[64];
    zsock_t *router = scripted_router(ep, sizeof ep);
    pf_worker_opts_t o;
    test_worker_opts(&o, ep);
    o.heartbeat_ms = 20;
    o.reconnect_max_ms = 10000;
    o.quiet = 1;
    zactor_t *w = zactor_new(pf_worker_actor, &o);
    char *ok = zstr_recv(w);
    CU_ASSERT_STRING_EQUAL(ok, "OK");
    free(ok);
    recv_t r;
    Planfarm__Bye bye = PLANFARM__BYE__INIT;
    bye.reason = "protocol 1 not supported (this broker speaks 2)";
    const double backoff_s[] = {0.020, 0.040, 0.080, 0.160};
    for (int k = 0; k < 4; k++) {
        CU_ASSERT_FATAL(expect(router, &r, 0));
        CU_ASSERT_EQUAL_FATAL(r.kind, PF_MSG_READY);
        send_to(router, r.identity, PF_MSG_BYE, &bye.base);
        recv_clear(&r);
        CU_ASSERT_FATAL(wait_disconnected(w));
        pf_clock_manual_advance(&test_clock, backoff_s[k] - 0.001);
        wstats_t st;
        CU_ASSERT(worker_settled(w, &st) && !st.connected && st.reconnects == k + 1);
        pf_clock_manual_advance(&test_clock, 0.002);
    }
    CU_ASSERT(expect(router, &r, 0) && r.kind == PF_MSG_READY);
    recv_clear(&r);
    zactor_destroy(&w);
    zsock_destroy(&router);
}

void pf_suite_worker(void)
{
    CU_pSuite s = CU_add_suite("worker", NULL, NULL);
    CU_add_test(s, "blob cache: LRU by bytes, pins", test_cache);
    CU_add_test(s, "protocol against a scripted broker", test_protocol);
    CU_add_test(s, "a grouping shorter than its graph is refused", test_group_mismatch);
    CU_add_test(s, "a job past the worker's credits is refused", test_credits_enforced);
    CU_add_test(s, "liveness counts heartbeat ticks since the broker last spoke",
                test_liveness_in_ticks);
    CU_add_test(s, "reconnects back off when the broker keeps saying BYE",
                test_backoff_after_bye);
}
