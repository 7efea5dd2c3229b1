/* A hostile worker, client or agent: a sequence of messages in the real framing (proto/wire.h:
 * frame 1 the 4-byte header, frame 2 a protobuf body) put through what the broker does with
 * each before any state is involved: pf_wire_parse_header, then the unpack and the codec checks
 * of the kind (READY, HEARTBEAT, RESULT against fuzz.h's graph and cluster, FAILED, FETCH, BYE;
 * SUBMIT's graph, cluster and options as the helper thread decodes them; STATUS, RESULT_REQ,
 * CANCEL_REQ, LIST; REGISTER, MEASUREMENT, PROFILE_CLUSTER), and what a worker does with the
 * broker's JOB and BLOB (a hostile broker). The broker's own handlers (broker/worker_proto.c,
 * client_proto.c, agent_proto.c) are static behind its socket: tests/integration/wire.sh drives
 * those over a real socket.
 *
 * Input: messages, each [k][h0 h1 h2 h3 if k & 0x80][len lo][len hi][len bytes of body]:
 * k & 0x7f is the kind (the header is then the one pf_wire_header writes; a number that is no
 * kind makes a header the broker refuses), or with k & 0x80 the 4 header bytes are given raw.
 * The seeds (pf_fuzz_seeds) are sessions of a worker, a client, an agent and a broker. The
 * custom mutator keeps the framing and mutates one body (or one kind, or repeats a message), so
 * that mutations land in the protobuf, not in the framing. */
#include "planner/core/util.h"
#include "proto/job_codec.h"
#include "proto/model_codec.h"
#include "proto/plan_options_codec.h"
#include "proto/profile_codec.h"
#include "proto/wire.h"
#include "tests/fuzz/fuzz.h"

#include <stdlib.h>
#include <string.h>

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static const pf_wire_msg_t kinds[] = {
    PF_MSG_READY,      PF_MSG_HEARTBEAT,   PF_MSG_RESULT,     PF_MSG_FAILED,
    PF_MSG_FETCH,      PF_MSG_BYE,         PF_MSG_JOB,        PF_MSG_BLOB,
    PF_MSG_CANCEL,     PF_MSG_SUBMIT,      PF_MSG_STATUS,     PF_MSG_RESULT_REQ,
    PF_MSG_CANCEL_REQ, PF_MSG_LIST,        PF_MSG_REGISTER,   PF_MSG_MEASUREMENT,
    PF_MSG_PROFILE,    PF_MSG_PROFILE_CLUSTER,
};
#define NKINDS (sizeof kinds / sizeof kinds[0])
#define MAX_MSGS 64

static pf_graph_t *graph;
static pf_cluster_t *cluster;

/* SUBMIT as the helper thread decodes it (broker/prep.c): graph, cluster, options. */
static void on_submit(const uint8_t *data, size_t len)
{
    char err[512];
    Planfarm__Submit *m = planfarm__submit__unpack(NULL, len, data);
    if (!m)
        return;
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    pf_search_opts_t o;
    if (m->graph && m->cluster &&
        pf_model_codec_graph_from_pb(m->graph, &g, err, sizeof err) == PF_OK &&
        pf_model_codec_cluster_from_pb(m->cluster, &c, err, sizeof err) == PF_OK &&
        pf_plan_options_codec_from_pb(m->options, &o, err, sizeof err) == PF_OK) {
        if (pf_graph_nops(g) < 1 || pf_cluster_ndevices(c) < 1)
            abort(); /* decoded means usable */
    }
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
    planfarm__submit__free_unpacked(m, NULL);
}

/* RESULT as worker_proto.c checks it against its request's graph and cluster. */
static void on_result(const uint8_t *data, size_t len)
{
    char err[512];
    Planfarm__JobResult *m = planfarm__job_result__unpack(NULL, len, data);
    if (!m)
        return;
    pf_job_result_t r;
    if (pf_job_codec_result_from_pb(m, PF_FUZZ_OPS, PF_FUZZ_DEVICES, &r, err, sizeof err) == PF_OK)
        pf_job_result_clear(&r);
    planfarm__job_result__free_unpacked(m, NULL);
}

/* JOB as a worker checks it before a solver sees it (a hostile broker). */
static void on_job(const uint8_t *data, size_t len)
{
    char err[512];
    Planfarm__Job *m = planfarm__job__unpack(NULL, len, data);
    if (!m)
        return;
    pf_wire_job_t w;
    if (pf_job_codec_from_pb(m, &w, err, sizeof err) == PF_OK) {
        if (pf_job_codec_check(&w, graph, cluster, err, sizeof err) == PF_OK) {
            pf_job_t job;
            pf_job_codec_bind(&w, graph, cluster, &job);
        }
        pf_job_codec_clear(&w);
    }
    planfarm__job__free_unpacked(m, NULL);
}

static void on_profile(pf_wire_msg_t kind, const uint8_t *data, size_t len)
{
    char err[512];
    if (kind == PF_MSG_REGISTER) {
        pf_profile_codec_agent_info_t a;
        if (pf_profile_codec_decode_register(data, len, &a, err, sizeof err) == PF_OK)
            pf_profile_codec_agent_info_clear(&a);
    } else if (kind == PF_MSG_MEASUREMENT) {
        pf_profile_codec_measurement_t me;
        if (pf_profile_codec_decode_measurement(data, len, &me, err, sizeof err) == PF_OK)
            pf_profile_codec_measurement_clear(&me);
    } else if (kind == PF_MSG_PROFILE) {
        pf_profile_codec_task_t t;
        pf_profile_codec_decode_task(data, len, &t, err, sizeof err);
    } else {
        Planfarm__ProfileClusterRequest *m =
            planfarm__profile_cluster_request__unpack(NULL, len, data);
        if (m) {
            pf_profile_codec_check_sweep(m->sizes, m->n_sizes, m->reps, m->probe_timeout_s, err,
                                         sizeof err);
            planfarm__profile_cluster_request__free_unpacked(m, NULL);
        }
    }
}

#define UNPACK_FREE(type, fn, extra)                                                              \
    do {                                                                                           \
        type *m_ = planfarm__##fn##__unpack(NULL, len, data);                                      \
        if (m_) {                                                                                  \
            extra;                                                                                 \
            planfarm__##fn##__free_unpacked(m_, NULL);                                             \
        }                                                                                          \
    } while (0)

static void on_message(const uint8_t *hdr, size_t hlen, const uint8_t *data, size_t len)
{
    char err[128], line[400];
    pf_wire_msg_t kind;
    if (pf_wire_parse_header(hdr, hlen, &kind, err, sizeof err) != PF_OK) {
        if (!err[0])
            abort(); /* the broker logs why */
        return;
    }
    switch (kind) {
    case PF_MSG_READY:
        UNPACK_FREE(Planfarm__Ready, ready,
                    snprintf(line, sizeof line, "%u %u %.63s", m_->protocol, m_->credits,
                             m_->name ? m_->name : ""));
        break;
    case PF_MSG_HEARTBEAT: UNPACK_FREE(Planfarm__Heartbeat, heartbeat, (void)m_->running); break;
    case PF_MSG_RESULT: on_result(data, len); break;
    case PF_MSG_FAILED:
        UNPACK_FREE(Planfarm__Failed, failed,
                    snprintf(line, sizeof line, "%.256s", m_->error ? m_->error : "failed"));
        break;
    case PF_MSG_FETCH: UNPACK_FREE(Planfarm__Fetch, fetch, (void)m_->hash.len); break;
    case PF_MSG_BYE:
        UNPACK_FREE(Planfarm__Bye, bye,
                    snprintf(line, sizeof line, "%.200s", m_->reason ? m_->reason : ""));
        break;
    case PF_MSG_JOB: on_job(data, len); break;
    case PF_MSG_BLOB: UNPACK_FREE(Planfarm__Blob, blob, (void)m_->data.len); break;
    case PF_MSG_SUBMIT: on_submit(data, len); break;
    case PF_MSG_STATUS:
    case PF_MSG_RESULT_REQ:
    case PF_MSG_CANCEL_REQ:
    case PF_MSG_CANCEL:
        UNPACK_FREE(Planfarm__RequestRef, request_ref,
                    snprintf(line, sizeof line, "%.64s", m_->request_id ? m_->request_id : ""));
        break;
    case PF_MSG_REGISTER:
    case PF_MSG_MEASUREMENT:
    case PF_MSG_PROFILE:
    case PF_MSG_PROFILE_CLUSTER: on_profile(kind, data, len); break;
    default: break; /* LIST has no body to read; replies are not sent to a broker */
    }
}

/* One message of the input at *at: its header (4 bytes written to hdr), its body. 0 at the end. */
static int next_msg(const uint8_t *d, size_t n, size_t *at, uint8_t hdr[4], size_t *hlen,
                    const uint8_t **body, size_t *blen)
{
    if (*at + 3 > n)
        return 0;
    uint8_t k = d[(*at)++];
    if (k & 0x80) {
        if (*at + 4 + 2 > n)
            return 0;
        memcpy(hdr, d + *at, 4);
        *hlen = 4;
        *at += 4;
    } else {
        pf_wire_header((pf_wire_msg_t)(k & 0x7f), hdr);
        *hlen = PF_WIRE_HEADER_LEN;
    }
    size_t len = (size_t)d[*at] | (size_t)d[*at + 1] << 8;
    *at += 2;
    if (len > n - *at)
        len = n - *at;
    *body = d + *at;
    *blen = len;
    *at += len;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!graph) {
        graph = pf_fuzz_graph();
        cluster = pf_fuzz_cluster();
    }
    size_t at = 0, hlen, blen;
    uint8_t hdr[4];
    const uint8_t *body;
    for (int i = 0; i < MAX_MSGS && next_msg(data, size, &at, hdr, &hlen, &body, &blen); i++) {
        /* a copy, so ASan sees a read past the body as past its allocation */
        uint8_t *copy = malloc(blen ? blen : 1);
        if (!copy)
            return 0;
        memcpy(copy, body, blen);
        on_message(hdr, hlen, copy, blen);
        free(copy);
    }
    return 0;
}

/* Keep the framing: pick one message and mutate its body (mostly), its kind or raw header, or
 * append a copy of it; the lengths are rewritten. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    size_t at = 0, hlen, blen, starts[MAX_MSGS];
    uint8_t hdr[4];
    const uint8_t *body;
    int n = 0;
    while (n < MAX_MSGS && (starts[n] = at, next_msg(data, size, &at, hdr, &hlen, &body, &blen)))
        n++;
    if (n == 0 || (seed & 0xff) < 8) /* sometimes bytes as they come */
        return LLVMFuzzerMutate(data, size, max_size);
    size_t i = (seed >> 8) % (size_t)n, s = starts[i];
    size_t bstart = s + 1 + ((data[s] & 0x80) ? 4 : 0) + 2;
    size_t end = i + 1 < (size_t)n ? starts[i + 1] : at;
    unsigned what = (seed >> 16) % 16;
    if (what == 0) { /* another kind */
        data[s] = (uint8_t)kinds[(seed >> 20) % NKINDS];
        return size;
    }
    if (what == 1 && end - s <= max_size - size) { /* the message twice */
        memmove(data + end + (end - s), data + end, size - end);
        memmove(data + end, data + s, end - s);
        return size + (end - s);
    }
    /* the body, mutated in place with room to grow, then the tail moved after it */
    size_t old = end - bstart, room = max_size - (size - old);
    if (room > 65535)
        room = 65535;
    uint8_t *tmp = malloc(room + 1);
    if (!tmp)
        return size;
    memcpy(tmp, data + bstart, old);
    if (old == 0) /* LLVMFuzzerMutate wants a byte to start from */
        tmp[old++] = (uint8_t)(seed >> 24);
    size_t nb = LLVMFuzzerMutate(tmp, old, room);
    memmove(data + bstart + nb, data + end, size - end);
    memcpy(data + bstart, tmp, nb);
    free(tmp);
    data[bstart - 2] = (uint8_t)(nb & 0xff);
    data[bstart - 1] = (uint8_t)(nb >> 8);
    return size - old + nb;
}
