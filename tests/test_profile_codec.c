/* profile_codec: records through the wire field by field, every malformed field refused with its
 * name; and the broker dropping and counting a malformed MEASUREMENT (the round names it, the
 * task fails, the malformed count grows by one) while a good one makes a cluster. */
#include "broker/broker.h"
#include "planner/ir/cluster.h"
#include "planner/core/util.h"
#include "proto/peer_io.h"
#include "proto/profile_codec.h"
#include "testutil.h"

#include <czmq.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void sample_device(pf_record_device_t *d)
{
    memset(d, 0, sizeof *d);
    pf_record_name(d->host, "hosta");
    pf_record_name(d->name, "cpu");
    pf_record_name(d->measured_by, "agent-a");
    d->source = PF_SRC_CPU;
    d->mem_bytes = 64e9;
    d->mem_gbps = 20.5;
    d->when_unix_s = 1.7e9;
}

static void sample_link(pf_record_link_t *l)
{
    memset(l, 0, sizeof *l);
    pf_record_name(l->src_host, "hostb");
    pf_record_name(l->dst_host, "hosta");
    pf_record_name(l->method, "zmq_tcp_pingpong");
    pf_record_name(l->measured_by, "agent-b");
    l->src_index = l->dst_index = PF_END_HOST;
    l->source = PF_SRC_CPU;
    l->when_unix_s = 1.7e9;
    l->topo_level = -1;
    l->nsizes = 3;
    for (int i = 0; i < 3; i++) { /* 10 us + bytes / 1 GB/s */
        l->bytes[i] = 1e3 * pow(10, i);
        l->ms[i] = 0.01 + l->bytes[i] / 1e6;
    }
}

/* A valid measurement packed; `mutate` (may be NULL) spoils one field of the protobuf first. */
typedef void (*mutate_fn)(Planfarm__Measurement *m, pf_arena_t *a);

static int pack_measurement(mutate_fn mutate, uint8_t **buf, size_t *len)
{
    pf_record_device_t d;
    pf_record_link_t l;
    sample_device(&d);
    sample_link(&l);
    pf_profile_codec_measurement_t in = {
        .round = 7, .task = 3, .dev = &d, .ndev = 1, .link = &l, .nlink = 1};
    pf_arena_t *a = pf_arena_new();
    Planfarm__Measurement *m = pf_profile_codec_measurement_to_pb(a, &in);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    if (mutate)
        mutate(m, a);
    int rc = pf_wire_pack(&m->base, buf, len);
    pf_arena_destroy(&a);
    return rc;
}

static void test_roundtrip(void)
{
    uint8_t *buf;
    size_t len;
    char err[256];
    pf_profile_codec_measurement_t out;
    CU_ASSERT_EQUAL_FATAL(pack_measurement(NULL, &buf, &len), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_profile_codec_decode_measurement(buf, len, &out, err, sizeof err),
                          PF_OK);
    pf_record_device_t d;
    pf_record_link_t l;
    sample_device(&d);
    sample_link(&l);
    CU_ASSERT_EQUAL(out.round, 7);
    CU_ASSERT_EQUAL(out.task, 3);
    CU_ASSERT_EQUAL_FATAL(out.ndev, 1);
    CU_ASSERT_EQUAL_FATAL(out.nlink, 1);
    /* fixed-size records, zeroed before filling: equal byte for byte */
    CU_ASSERT_EQUAL(memcmp(&out.dev[0], &d, sizeof d), 0);
    CU_ASSERT_EQUAL(memcmp(&out.link[0], &l, sizeof l), 0);
    CU_ASSERT_STRING_EQUAL(out.link[0].method, "zmq_tcp_pingpong");
    CU_ASSERT_DOUBLE_EQUAL(out.link[0].ms[2], 0.01 + 0.1, 1e-15); /* 10 us + 100 kB at 1 GB/s */
    pf_profile_codec_measurement_clear(&out);
    pf_profile_codec_measurement_clear(&out); /* idempotent */
    free(buf);
}

static char long_name[80];
static double bytes41[41];
static void m_long_host(Planfarm__Measurement *m, pf_arena_t *a)
{
    (void)a;
    memset(long_name, 'h', 64); /* 64 bytes: no room for the NUL of a 64-byte field */
    long_name[64] = '\0';
    m->devices[0]->host = long_name;
}
static void m_empty_host(Planfarm__Measurement *m, pf_arena_t *a) { (void)a; m->devices[0]->host = ""; }
static void m_source(Planfarm__Measurement *m, pf_arena_t *a) { (void)a; m->links[0]->source = 2; }
static void m_counts(Planfarm__Measurement *m, pf_arena_t *a) { (void)a; m->links[0]->n_ms = 2; }
static void m_too_many(Planfarm__Measurement *m, pf_arena_t *a)
{
    (void)a;
    for (int i = 0; i < 41; i++)
        bytes41[i] = i + 1;
    m->links[0]->bytes = m->links[0]->ms = bytes41;
    m->links[0]->n_bytes = m->links[0]->n_ms = 41;
}
static void m_nan(Planfarm__Measurement *m, pf_arena_t *a) { (void)a; m->links[0]->ms[1] = NAN; }
static void m_index(Planfarm__Measurement *m, pf_arena_t *a) { (void)a; m->links[0]->src_index = -2; }
static void m_mem(Planfarm__Measurement *m, pf_arena_t *a) { (void)a; m->devices[0]->mem_bytes = 0; }
static void m_one_size(Planfarm__Measurement *m, pf_arena_t *a)
{
    (void)a;
    m->links[0]->n_bytes = m->links[0]->n_ms = 1;
}
static void m_negative_tflops(Planfarm__Measurement *m, pf_arena_t *a)
{
    (void)a;
    m->devices[0]->tflops = -1;
}

static void test_malformed(void)
{
    static const struct {
        mutate_fn f;
        const char *want;
    } cases[] = {
        {m_long_host, "devices[0]: host: 64 bytes, at most 63"},
        {m_empty_host, "devices[0]: device record: host or a name is empty"},
        {m_source, "links[0]: source: source 2"},
        {m_counts, "links[0]: 3 sizes but 2 times"},
        {m_too_many, "links[0]: 41 sizes, at most 40"},
        {m_nan, "links[0]: link hostb:-1 -> hosta:-1: point 1"},
        {m_index, "device index out of range"},
        {m_mem, "devices[0]: device hosta:0: mem_bytes is 0"},
        {m_one_size, "1 sizes, expected 2 .. 40"},
        {m_negative_tflops, "must be finite and non-negative"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *buf;
        size_t len;
        char err[256] = "";
        pf_profile_codec_measurement_t out;
        CU_ASSERT_EQUAL_FATAL(pack_measurement(cases[i].f, &buf, &len), PF_OK);
        CU_ASSERT_EQUAL(pf_profile_codec_decode_measurement(buf, len, &out, err, sizeof err),
                        PF_EINPUT);
        if (!strstr(err, cases[i].want))
            fprintf(stderr, "\ncase %zu: '%s' lacks '%s'\n", i, err, cases[i].want);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i].want));
        CU_ASSERT_PTR_NULL(out.dev); /* nothing kept */
        CU_ASSERT_PTR_NULL(out.link);
        free(buf);
    }
    char err[256] = "";
    pf_profile_codec_measurement_t out;
    const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
    CU_ASSERT_EQUAL(
        pf_profile_codec_decode_measurement(garbage, sizeof garbage, &out, err, sizeof err),
        PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a valid Measurement"));
}

static int decode_task(const pf_profile_codec_task_t *t, char *err, size_t errlen)
{
    pf_arena_t *a = pf_arena_new();
    uint8_t *buf;
    size_t len;
    pf_profile_codec_task_t out;
    Planfarm__ProfileTask *m = pf_profile_codec_task_to_pb(a, t);
    if (t->kind > 3)
        m->kind = t->kind; /* as sent by a peer with another enum */
    pf_wire_pack(&m->base, &buf, &len);
    int rc = pf_profile_codec_decode_task(buf, len, &out, err, errlen);
    if (rc == PF_OK)
        CU_ASSERT_EQUAL(memcmp(&out, t, sizeof out), 0);
    free(buf);
    pf_arena_destroy(&a);
    return rc;
}

static void test_task(void)
{
    char err[256];
    pf_profile_codec_task_t t;
    memset(&t, 0, sizeof t);
    t.round = 2;
    t.task = 9;
    t.kind = PLANFARM__PROFILE_TASK_KIND__PROFILE_PINGPONG;
    snprintf(t.peer_endpoint, sizeof t.peer_endpoint, "tcp://10.0.0.2:4100");
    pf_record_name(t.peer_host, "hosta");
    t.nsizes = 2;
    t.sizes[0] = 4;
    t.sizes[1] = 4096;
    t.reps = 5;
    t.timeout_s = 3;
    CU_ASSERT_EQUAL(decode_task(&t, err, sizeof err), PF_OK);
    pf_profile_codec_task_t bad = t;
    bad.sizes[1] = 4;
    CU_ASSERT_EQUAL(decode_task(&bad, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "given twice"));
    bad = t;
    bad.reps = 1001;
    CU_ASSERT_EQUAL(decode_task(&bad, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "reps 1001"));
    bad = t;
    bad.peer_endpoint[0] = '\0';
    CU_ASSERT_EQUAL(decode_task(&bad, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "needs a peer endpoint"));
    bad = t;
    bad.kind = (Planfarm__ProfileTaskKind)9;
    CU_ASSERT_EQUAL(decode_task(&bad, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown task kind 9"));
    bad = t;
    bad.sizes[1] = 2e9; /* past 1 GiB */
    CU_ASSERT_EQUAL(decode_task(&bad, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "sizes[1]"));
}

/* ---- the broker drops and counts a malformed MEASUREMENT ---- */

static pf_clock_manual_t clock_; /* never moved: no heartbeat tick, no deadline, in this test */

/* Next message on a DEALER within 10 s (a bound, not a timing: the broker answers at once). */
static pf_wire_msg_t recv_msg(zsock_t *s, zframe_t **body)
{
    zpoller_t *p = zpoller_new(s, NULL);
    void *which = zpoller_wait(p, 10000);
    zpoller_destroy(&p);
    if (!which)
        return 0;
    zmsg_t *m = zmsg_recv(s);
    zframe_t *hdr = zmsg_pop(m);
    pf_wire_msg_t kind = 0;
    char err[64];
    if (!hdr || pf_wire_parse_header(zframe_data(hdr), zframe_size(hdr), &kind, err,
                                     sizeof err) != PF_OK)
        kind = 0;
    zframe_destroy(&hdr);
    *body = zmsg_pop(m);
    zmsg_destroy(&m);
    return kind;
}

static void send_msg(zsock_t *s, pf_wire_msg_t kind, const ProtobufCMessage *m)
{
    pf_peer_io_pack_buf_t pb = {0};
    CU_ASSERT_EQUAL(pf_peer_io_send(zsock_resolve(s), NULL, 0, kind, m, &pb), PF_OK);
    pf_peer_io_pack_buf_free(&pb);
}

static long long broker_malformed(zactor_t *b)
{
    zstr_send(b, "STATS");
    char *s = zstr_recv(b);
    double wall, busy;
    long long in, out, malformed = -1, dispatched;
    int workers;
    sscanf(s, "STATS %lf %lf %lld %lld %lld %lld %d", &wall, &busy, &in, &out, &malformed,
           &dispatched, &workers);
    free(s);
    return malformed;
}

/* One round with a fake agent that answers its LOCAL task with `answer`; the client's reply. */
static Planfarm__ProfileClusterReply *round_with(zsock_t *agent, zsock_t *client,
                                                 mutate_fn answer)
{
    Planfarm__ProfileClusterRequest req = PLANFARM__PROFILE_CLUSTER_REQUEST__INIT;
    req.cluster_name = "unit";
    zframe_t *body = NULL;
    /* The agent's REGISTER and the client's request come on two connections, in no set order:
     * until the broker has the agent it answers "no profiler agent", and the client asks again
     * (a bounded count of tries, not a time). */
    for (int tries = 0; tries < 1000; tries++) {
        send_msg(client, PF_MSG_PROFILE_CLUSTER, &req.base);
        zpoller_t *p = zpoller_new(agent, client, NULL);
        void *which = zpoller_wait(p, 10000);
        zpoller_destroy(&p);
        if (which != client)
            break;
        CU_ASSERT_EQUAL_FATAL(recv_msg(client, &body), PF_MSG_ERROR);
        zframe_destroy(&body);
        zclock_sleep(5);
    }
    CU_ASSERT_EQUAL_FATAL(recv_msg(agent, &body), PF_MSG_PROFILE);
    pf_profile_codec_task_t t;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(
        pf_profile_codec_decode_task(zframe_data(body), zframe_size(body), &t, err, sizeof err),
        PF_OK);
    zframe_destroy(&body);
    CU_ASSERT_EQUAL(t.kind, PLANFARM__PROFILE_TASK_KIND__PROFILE_LOCAL);
    pf_record_device_t d;
    sample_device(&d);
    pf_profile_codec_measurement_t mm = {.round = t.round, .task = t.task, .dev = &d, .ndev = 1};
    pf_arena_t *a = pf_arena_new();
    Planfarm__Measurement *m = pf_profile_codec_measurement_to_pb(a, &mm);
    if (answer)
        answer(m, a);
    send_msg(agent, PF_MSG_MEASUREMENT, &m->base);
    pf_arena_destroy(&a);
    CU_ASSERT_EQUAL_FATAL(recv_msg(client, &body), PF_MSG_PROFILE_CLUSTER_REPLY);
    Planfarm__ProfileClusterReply *r =
        planfarm__profile_cluster_reply__unpack(NULL, zframe_size(body), zframe_data(body));
    zframe_destroy(&body);
    return r;
}

static void test_broker_drops_malformed(void)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:*";
    o.quiet = 1;
    o.clock = pf_clock_manual_init(&clock_, 0);
    zactor_t *b = zactor_new(pf_broker_actor, &o);
    char *status = NULL, *ep = NULL;
    zstr_recvx(b, &status, &ep, NULL);
    CU_ASSERT_STRING_EQUAL_FATAL(status, "OK");
    zsock_t *agent = zsock_new_dealer(ep), *client = zsock_new_dealer(ep);
    pf_profile_codec_agent_info_t info;
    memset(&info, 0, sizeof info);
    pf_record_name(info.host, "hosta");
    pf_record_name(info.name, "agent-a");
    pf_arena_t *a = pf_arena_new();
    send_msg(agent, PF_MSG_REGISTER, &pf_profile_codec_register_to_pb(a, &info)->base);
    pf_arena_destroy(&a);
    CU_ASSERT_EQUAL(broker_malformed(b), 0); /* STATS after REGISTER: it was handled first */

    Planfarm__ProfileClusterReply *r = round_with(agent, client, m_mem);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->status, PF_EINFEASIBLE); /* the only host's answer was dropped */
    CU_ASSERT_PTR_NOT_NULL(strstr(r->error, "no device was measured"));
    CU_ASSERT_EQUAL(r->dropped_records, 1);
    CU_ASSERT_EQUAL_FATAL(r->n_notes, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->notes[0], "malformed MEASUREMENT dropped"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->notes[0], "mem_bytes is 0"));
    CU_ASSERT_STRING_EQUAL(r->cluster_json, "");
    planfarm__profile_cluster_reply__free_unpacked(r, NULL);
    CU_ASSERT_EQUAL(broker_malformed(b), 1);

    /* the agent is still registered: a good answer makes a one-device cluster */
    r = round_with(agent, client, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->status, PF_OK);
    CU_ASSERT_EQUAL(r->dropped_records, 0);
    CU_ASSERT_EQUAL(r->hosts, 1);
    pf_cluster_t *c = NULL;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(pf_cluster_load_buffer(r->cluster_json, strlen(r->cluster_json), "reply",
                                                 &c, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_cluster_ndevices(c), 1);
    CU_ASSERT_DOUBLE_EQUAL(pf_cluster_device(c, 0)->mem_bytes, 64e9, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->cluster_json, "\"measured_by\": \"agent-a\""));
    pf_cluster_destroy(&c);
    planfarm__profile_cluster_reply__free_unpacked(r, NULL);
    CU_ASSERT_EQUAL(broker_malformed(b), 1);

    zsock_destroy(&agent);
    zsock_destroy(&client);
    zactor_destroy(&b);
    free(status);
    free(ep);
}

void pf_suite_profile_codec(void)
{
    CU_pSuite s = CU_add_suite("profile_codec", NULL, NULL);
    CU_add_test(s, "device and link records round-trip byte for byte", test_roundtrip);
    CU_add_test(s, "each malformed field refused by name, nothing kept", test_malformed);
    CU_add_test(s, "PROFILE tasks: duplicate sizes, reps, endpoint, kind, size bound",
                test_task);
    CU_add_test(s, "broker drops and counts a malformed MEASUREMENT; a good one assembles",
                test_broker_drops_malformed);
}
