/* The real broker, in process (pf_broker_actor on inproc://, a clock that never moves), and one
 * hostile peer per input speaking to it over a DEALER socket: the messages of fuzz_wire_peer.c's
 * format (same corpus shape), sent as they are, except that a RESULT or FAILED whose body decodes
 * gets the id of the last JOB the broker sent this peer, so that a hostile worker answers jobs it
 * really holds with mutated results. A polite client keeps one request of fuzz.h's graph and
 * cluster standing (submitted again once it ends), so a hostile peer's READY is followed by a
 * real JOB: the harness waits up to 100 ms for it. Each input ends with BYE (the broker drops
 * the worker and re-queues what it held); the polite client cancels every request the input
 * submitted (CANCEL_REQ) and must get an answer (STATUS of the standing request, or LIST) within
 * 8 s (under the fuzzer's -timeout=10), else the broker stopped serving: abort. */
#include "broker/broker.h"
#include "planner/core/util.h"
#include "proto/clock.h"
#include "proto/model_codec.h"
#include "proto/wire.h"
#include "tests/fuzz/fuzz.h"

#include <czmq.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MSGS 64
#define MAX_REQS 8

static zactor_t *broker;
static zsock_t *probe;
static char endpoint[256];
static pf_clock_manual_t fixed_clock;
static char standing[64]; /* the polite client's request, "" = none (yet) */

/* Before czmq's own atexit (registered by zsys_init, so run after this one): the actor stops
 * while its sockets are still there. */
static void stop(void)
{
    zsock_destroy(&probe);
    zactor_destroy(&broker);
}

static void start(void)
{
    zsys_init();
    atexit(stop);
    zsys_set_logstream(NULL);
    static pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "inproc://fuzz-broker";
    o.quiet = 1;
    o.clock = pf_clock_manual_init(&fixed_clock, 0);
    broker = zactor_new(pf_broker_actor, &o);
    char *status = NULL, *text = NULL;
    zstr_recvx(broker, &status, &text, NULL);
    if (!status || strcmp(status, "OK") != 0)
        abort();
    snprintf(endpoint, sizeof endpoint, "%s", text ? text : "");
    free(status);
    free(text);
    probe = zsock_new(ZMQ_DEALER);
    if (!probe || zsock_connect(probe, "%s", endpoint) != 0)
        abort();
}

static void send2(zsock_t *s, const uint8_t *hdr, size_t hlen, const uint8_t *body, size_t blen)
{
    zmsg_t *m = zmsg_new();
    zmsg_addmem(m, hdr, hlen);
    zmsg_addmem(m, body, blen);
    zmsg_send(&m, s);
}

static void send_msg(zsock_t *s, pf_wire_msg_t kind, const ProtobufCMessage *m)
{
    uint8_t hdr[PF_WIRE_HEADER_LEN], *buf = NULL;
    size_t len = 0;
    pf_wire_header(kind, hdr);
    if (pf_wire_pack(m, &buf, &len) != PF_OK)
        abort();
    send2(s, hdr, sizeof hdr, buf, len);
    free(buf);
}

typedef struct {
    uint64_t job; /* the last JOB's id, 0 = none yet */
    char reqs[MAX_REQS][64];
    int nreqs;
} peer_state_t;

/* Read what the broker sent us (no wait): JOB ids, SUBMIT_REPLY request ids. */
static void drain(zsock_t *s, peer_state_t *st)
{
    while (zsock_events(s) & ZMQ_POLLIN) {
        zmsg_t *m = zmsg_recv(s);
        zframe_t *h = m ? zmsg_first(m) : NULL, *b = m ? zmsg_next(m) : NULL;
        pf_wire_msg_t kind;
        char err[64];
        if (h && b &&
            pf_wire_parse_header(zframe_data(h), zframe_size(h), &kind, err, sizeof err) ==
                PF_OK) {
            if (kind == PF_MSG_JOB) {
                Planfarm__Job *j = planfarm__job__unpack(NULL, zframe_size(b), zframe_data(b));
                if (j)
                    st->job = j->id;
                planfarm__job__free_unpacked(j, NULL);
            } else if (kind == PF_MSG_SUBMIT_REPLY && st->nreqs < MAX_REQS) {
                Planfarm__RequestStatus *r =
                    planfarm__request_status__unpack(NULL, zframe_size(b), zframe_data(b));
                if (r && r->request_id)
                    snprintf(st->reqs[st->nreqs++], sizeof st->reqs[0], "%s", r->request_id);
                planfarm__request_status__free_unpacked(r, NULL);
            }
        }
        zmsg_destroy(&m);
    }
}

/* A RESULT or FAILED that decodes is re-addressed to the job this peer holds. */
static void send_answer(zsock_t *s, pf_wire_msg_t kind, const uint8_t *hdr, size_t hlen,
                        const uint8_t *body, size_t blen, const peer_state_t *st)
{
    if (st->job && kind == PF_MSG_RESULT) {
        Planfarm__JobResult *r = planfarm__job_result__unpack(NULL, blen, body);
        if (r) {
            r->id = st->job;
            send_msg(s, kind, &r->base);
            planfarm__job_result__free_unpacked(r, NULL);
            return;
        }
    } else if (st->job && kind == PF_MSG_FAILED) {
        Planfarm__Failed *f = planfarm__failed__unpack(NULL, blen, body);
        if (f) {
            f->job_id = st->job;
            send_msg(s, kind, &f->base);
            planfarm__failed__free_unpacked(f, NULL);
            return;
        }
    }
    send2(s, hdr, hlen, body, blen);
}

/* fuzz_wire_peer.c's framing: [k][4 raw header bytes if k & 0x80][len lo][len hi][body]. */
static int next_msg(const uint8_t *d, size_t n, size_t *at, uint8_t hdr[4], pf_wire_msg_t *kind,
                    const uint8_t **body, size_t *blen)
{
    if (*at + 3 > n)
        return 0;
    uint8_t k = d[(*at)++];
    *kind = (pf_wire_msg_t)(k & 0x7f);
    if (k & 0x80) {
        if (*at + 4 + 2 > n)
            return 0;
        memcpy(hdr, d + *at, 4);
        *at += 4;
        *kind = 0;
    } else {
        pf_wire_header(*kind, hdr);
    }
    size_t len = (size_t)d[*at] | (size_t)d[*at + 1] << 8;
    *at += 2;
    *blen = len > n - *at ? n - *at : len;
    *body = d + *at;
    *at += *blen;
    return 1;
}

/* A SUBMIT of fuzz.h's graph and cluster with default options, from the polite client. */
static void submit_standing(void)
{
    pf_graph_t *g = pf_fuzz_graph();
    pf_cluster_t *c = pf_fuzz_cluster();
    uint8_t *gb = NULL, *cb = NULL;
    size_t gl = 0, cl = 0;
    if (!g || !c || pf_model_codec_encode_graph(g, &gb, &gl) != PF_OK ||
        pf_model_codec_encode_cluster(c, &cb, &cl) != PF_OK)
        abort();
    Planfarm__Graph *gm = planfarm__graph__unpack(NULL, gl, gb);
    Planfarm__Cluster *cm = planfarm__cluster__unpack(NULL, cl, cb);
    if (!gm || !cm)
        abort();
    Planfarm__Submit sub = PLANFARM__SUBMIT__INIT;
    sub.graph = gm;
    sub.cluster = cm;
    sub.label = "standing";
    send_msg(probe, PF_MSG_SUBMIT, &sub.base);
    planfarm__graph__free_unpacked(gm, NULL);
    planfarm__cluster__free_unpacked(cm, NULL);
    free(gb);
    free(cb);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
}

/* The reply of kind `expect` to the polite client within 8 s, else the broker stopped serving:
 * abort. Replies to its CANCEL_REQs are read and dropped on the way. A SUBMIT_REPLY, or the
 * standing request's STATUS_REPLY, says whether the standing request is still on. */
static void polite_reply(pf_wire_msg_t expect, const char *what)
{
    zpoller_t *p = zpoller_new(probe, NULL);
    for (int64_t t0 = zclock_mono(); zclock_mono() - t0 < 8000;) {
        if (!zpoller_wait(p, 100))
            continue;
        zmsg_t *m = zmsg_recv(probe);
        zframe_t *h = m ? zmsg_first(m) : NULL, *b = m ? zmsg_next(m) : NULL;
        pf_wire_msg_t kind = 0;
        char err[64];
        if (!h || pf_wire_parse_header(zframe_data(h), zframe_size(h), &kind, err,
                                       sizeof err) != PF_OK)
            kind = 0;
        int done = kind == expect;
        if (done && b && (kind == PF_MSG_SUBMIT_REPLY || kind == PF_MSG_STATUS_REPLY)) {
            Planfarm__RequestStatus *r =
                planfarm__request_status__unpack(NULL, zframe_size(b), zframe_data(b));
            if (kind == PF_MSG_STATUS_REPLY && (!r || !r->request_id ||
                                                strcmp(r->request_id, standing) != 0))
                done = 0; /* a cancelled request's status */
            else if (r && r->request_id)
                snprintf(standing, sizeof standing, "%s",
                         pf_wire_request_state_ended(r->state) ? "" : r->request_id);
            planfarm__request_status__free_unpacked(r, NULL);
        }
        zmsg_destroy(&m);
        if (done) {
            zpoller_destroy(&p);
            return;
        }
    }
    fprintf(stderr, "fuzz_broker: no answer to %s in 8 s: the broker stopped serving\n", what);
    abort();
}

/* The polite client: the standing request's STATUS (or LIST) must be answered; a standing
 * request that ended is submitted again. */
static void check_alive(void)
{
    if (standing[0]) {
        Planfarm__RequestRef ref = PLANFARM__REQUEST_REF__INIT;
        ref.request_id = standing;
        send_msg(probe, PF_MSG_STATUS, &ref.base);
        polite_reply(PF_MSG_STATUS_REPLY, "STATUS");
    } else {
        static const uint8_t empty[1];
        uint8_t hdr[PF_WIRE_HEADER_LEN];
        pf_wire_header(PF_MSG_LIST, hdr);
        send2(probe, hdr, sizeof hdr, empty, 0);
        polite_reply(PF_MSG_LIST_REPLY, "LIST");
    }
    if (!standing[0]) {
        submit_standing();
        polite_reply(PF_MSG_SUBMIT_REPLY, "SUBMIT");
    }
}

/* After a READY: a JOB of the standing request, if one comes within 100 ms. */
static void await_job(zsock_t *s, peer_state_t *st)
{
    for (int i = 0; i < 100 && !st->job; i++) {
        zclock_sleep(1);
        drain(s, st);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!broker) {
        start();
        check_alive();
    }
    zsock_t *s = zsock_new(ZMQ_DEALER);
    if (!s || zsock_connect(s, "%s", endpoint) != 0)
        abort();
    peer_state_t st = {0};
    size_t at = 0, blen;
    uint8_t hdr[4];
    pf_wire_msg_t kind;
    const uint8_t *body;
    for (int i = 0; i < MAX_MSGS && next_msg(data, size, &at, hdr, &kind, &body, &blen); i++) {
        drain(s, &st);
        send_answer(s, kind, hdr, sizeof hdr, body, blen, &st);
        if (kind == PF_MSG_READY)
            await_job(s, &st);
        drain(s, &st);
    }
    zclock_sleep(1);
    drain(s, &st);
    if (getenv("PF_FUZZ_PRINT"))
        printf("fuzz_broker: last job held %llu, %d requests submitted, standing '%s'\n",
               (unsigned long long)st.job, st.nreqs, standing);
    Planfarm__Bye bye = PLANFARM__BYE__INIT;
    bye.reason = "fuzz input done";
    send_msg(s, PF_MSG_BYE, &bye.base);
    zsock_destroy(&s);
    for (int i = 0; i < st.nreqs; i++) {
        Planfarm__RequestRef ref = PLANFARM__REQUEST_REF__INIT;
        ref.request_id = st.reqs[i];
        send_msg(probe, PF_MSG_CANCEL_REQ, &ref.base);
    }
    check_alive();
    return 0;
}
