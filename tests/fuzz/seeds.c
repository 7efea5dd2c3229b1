/* Seeds for the fuzz targets: valid inputs of every kind, so the fuzzer starts inside the formats
 * instead of having to discover JSON and protobuf. Writes OUTDIR/<target>/<name> files:
 *   graph_json, decode_graph     small generated models (gpt, bert, resnet, moe) and fuzz.h's graph
 *   cluster_json, decode_cluster fuzz.h's cluster and a 2 x 8 two-level one
 *   plan_json                    a plan over fuzz.h's graph and cluster, mapped and not
 *   decode_job                   a DP_PARTITION job with a grouping and a MAP_PROBE job
 *   decode_result                a partition result and a probe result
 *   decode_options               the default options and a set with every field given
 *   wire_header                  every message kind's header
 *   wire_peer                    sessions in the framing of fuzz_wire_peer.c: a worker (READY,
 *                                HEARTBEAT, the RESULTs above, FAILED, FETCH, BYE), a broker (the
 *                                JOBs above, BLOB), a client (SUBMIT of fuzz.h's graph and
 *                                cluster, STATUS, RESULT_REQ, CANCEL_REQ, LIST), an agent
 *   broker                       the same sessions, for fuzz_broker.c
 *   piper                        a three-node planner input
 * The text-format seeds (pipedream, piper) are files of tests/data; run.sh copies them. */
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/ir/plan.h"
#include "planner/search/search.h"
#include "planner/map/stage_graph.h"
#include "planner/core/util.h"
#include "proto/job_codec.h"
#include "proto/model_codec.h"
#include "proto/plan_options_codec.h"
#include "tests/fuzz/fuzz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *outdir;

static int path_for(char *buf, size_t len, const char *target, const char *name)
{
    snprintf(buf, len, "%s/%s", outdir, target);
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -1;
    snprintf(buf, len, "%s/%s/%s", outdir, target, name);
    return 0;
}

static int write_bytes(const char *target, const char *name, const uint8_t *data, size_t len)
{
    char path[1024];
    if (path_for(path, sizeof path, target, name) != 0)
        return -1;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = fwrite(data, 1, len, f);
    return fclose(f) == 0 && n == len ? 0 : -1;
}

/* A session of fuzz_wire_peer.c: messages [kind][len lo][len hi][body]. */
typedef struct {
    uint8_t buf[1 << 16];
    size_t len;
} session_t;
static session_t worker_s, broker_s, client_s, agent_s;

static void frame(session_t *s, pf_wire_msg_t kind, const uint8_t *body, size_t len)
{
    if (len > 0xffff || s->len + 3 + len > sizeof s->buf)
        return;
    if (len == 0) {
        s->buf[s->len++] = (uint8_t)kind;
        s->buf[s->len++] = 0;
        s->buf[s->len++] = 0;
        return;
    }
    s->buf[s->len++] = (uint8_t)kind;
    s->buf[s->len++] = (uint8_t)(len & 0xff);
    s->buf[s->len++] = (uint8_t)(len >> 8);
    memcpy(s->buf + s->len, body, len);
    s->len += len;
}

static int frame_msg(session_t *s, pf_wire_msg_t kind, const ProtobufCMessage *m)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (pf_wire_pack(m, &buf, &len) != PF_OK)
        return -1;
    frame(s, kind, buf, len);
    free(buf);
    return 0;
}

static int write_msg(const char *target, const char *name, const ProtobufCMessage *m)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!m || pf_wire_pack(m, &buf, &len) != PF_OK)
        return -1;
    /* the jobs and results go in the broker's and the worker's sessions too */
    if (strcmp(target, "decode_job") == 0)
        frame(&broker_s, PF_MSG_JOB, buf, len);
    else if (strcmp(target, "decode_result") == 0)
        frame(&worker_s, PF_MSG_RESULT, buf, len);
    int rc = write_bytes(target, name, buf, len);
    free(buf);
    return rc;
}

static int graph_seeds(const char *name, const pf_graph_t *g)
{
    char path[1024], err[256];
    uint8_t *buf = NULL;
    size_t len = 0;
    if (path_for(path, sizeof path, "graph_json", name) != 0 ||
        pf_graph_save(g, path, err, sizeof err) != PF_OK ||
        pf_model_codec_encode_graph(g, &buf, &len) != PF_OK)
        return -1;
    int rc = write_bytes("decode_graph", name, buf, len);
    free(buf);
    return rc;
}

static int cluster_seeds(const char *name, const pf_cluster_t *c)
{
    char path[1024], err[256];
    uint8_t *buf = NULL;
    size_t len = 0;
    if (path_for(path, sizeof path, "cluster_json", name) != 0 ||
        pf_cluster_save(c, path, err, sizeof err) != PF_OK ||
        pf_model_codec_encode_cluster(c, &buf, &len) != PF_OK)
        return -1;
    int rc = write_bytes("decode_cluster", name, buf, len);
    free(buf);
    return rc;
}

/* Generated models, shrunk so a seed stays a few kB. */
static int model_seeds(void)
{
    static const char *kinds[] = {"gpt", "bert", "resnet", "moe"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        pf_model_kind_t kind;
        pf_model_opts_t o;
        pf_graph_t *g = NULL;
        char err[256];
        if (pf_model_parse_kind(kinds[i], &kind) != PF_OK)
            return -1;
        pf_model_opts_init(&o, kind);
        if (kind != PF_MODEL_RESNET)
            o.layers = 2;
        if (pf_model_build(&o, &g, err, sizeof err) != PF_OK) {
            fprintf(stderr, "pf_fuzz_seeds: %s: %s\n", kinds[i], err);
            return -1;
        }
        int rc = graph_seeds(kinds[i], g);
        pf_graph_destroy(&g);
        if (rc != 0)
            return -1;
    }
    return 0;
}

static pf_cluster_t *two_level(void)
{
    enum { HOSTS = 2, PER = 8 };
    pf_cluster_t *c = pf_cluster_new("hier2x8", HOSTS * PER);
    for (int i = 0; i < HOSTS * PER; i++) {
        pf_device_t d = {.id = i, .host = i / PER, .mem_bytes = 80e9, .tflops = 989};
        pf_cluster_set_device(c, i, &d);
        for (int j = 0; j < HOSTS * PER; j++)
            if (i != j)
                pf_cluster_set_bw(c, i, j, i / PER == j / PER ? 450 : 50);
    }
    return c;
}

/* Stages {10,11,12} and {13,14,15} of fuzz.h's graph on devices 2 and 0 (the codec test's
 * shape); `mapped` adds the devices. */
static pf_plan_t *fuzz_plan(int mapped)
{
    pf_plan_t *p = pf_plan_new(2, 1);
    int a[] = {0, 1, 2}, b[] = {3, 4, 5};
    pf_plan_set_stage_ops(p, 0, a, 3);
    pf_plan_set_stage_ops(p, 1, b, 3);
    pf_plan_set_names(p, "fuzz", "fuzz4");
    p->partition_objective_ms = 12.25;
    if (mapped) {
        pf_plan_stage_devices(p, 0)[0] = 2;
        pf_plan_stage_devices(p, 1)[0] = 0;
        p->devices = 2;
        p->objective_ms = 13.5;
    }
    return p;
}

static int plan_seeds(const pf_graph_t *g, const pf_cluster_t *c)
{
    char path[1024], err[256];
    for (int mapped = 0; mapped <= 1; mapped++) {
        pf_plan_t *p = fuzz_plan(mapped);
        int rc = path_for(path, sizeof path, "plan_json", mapped ? "mapped" : "partition");
        if (rc == 0)
            rc = pf_plan_save(p, g, c, path, err, sizeof err);
        pf_plan_destroy(&p);
        if (rc != 0)
            return -1;
    }
    return 0;
}

static int job_seeds(const pf_graph_t *g, const pf_cluster_t *c)
{
    pf_arena_t *a = pf_arena_new();
    pf_blob_ref_t gr = {.hash = {1, 2, 3}, .hash_len = 32, .size = 1000};
    pf_blob_ref_t cr = {.hash = {9, 8, 7}, .hash_len = 32, .size = 500};
    int group[PF_FUZZ_OPS] = {0, 0, 1, 1, 2, 2};
    pf_job_t job = {.kind = PF_JOB_DP_PARTITION, .graph = g, .cluster = c};
    pf_partition_opts_init(&job.partition);
    job.partition.stages = 2;
    job.partition.replicas = 2;
    job.partition.alpha = 1;
    job.partition.group = group;
    job.partition.ngroups = 3;
    int rc = write_msg("decode_job", "dp_partition",
                       (ProtobufCMessage *)pf_job_codec_to_pb(a, 5, 1, &job, &gr, &cr));

    double cu[2] = {3, 4}, par[2] = {1e6, 2e6}, msg[4] = {0, 5e5, 5e5, 0};
    pf_stage_graph_t *sg = pf_stage_graph_new(2, 2, cu, par, msg);
    pf_job_t probe = {.kind = PF_JOB_MAP_PROBE, .cluster = c, .stage_graph = sg,
                      .inst = PF_MAP_INST_AR, .target_ms = 7.5, .budget_s = 1, .symmetry = 1};
    if (rc == 0)
        rc = write_msg("decode_job", "map_probe",
                       (ProtobufCMessage *)pf_job_codec_to_pb(a, 6, 0, &probe, NULL, &cr));

    pf_plan_t *p = fuzz_plan(0);
    pf_job_result_t part = {.kind = PF_JOB_DP_PARTITION, .status = PF_OK, .plan = p,
                            .seconds = 0.5};
    if (rc == 0)
        rc = write_msg("decode_result", "partition",
                       (ProtobufCMessage *)pf_job_codec_result_to_pb(a, 5, &part));
    int dev[4] = {2, 0, 1, 3};
    pf_job_result_t pr = {.kind = PF_JOB_MAP_PROBE, .status = PF_OK, .devices = dev,
                          .ndevices = 4};
    pr.probe = (pf_probe_result_t){.found = 1, .objective_ms = 4.5, .nodes = 99};
    if (rc == 0)
        rc = write_msg("decode_result", "probe",
                       (ProtobufCMessage *)pf_job_codec_result_to_pb(a, 6, &pr));
    pf_job_result_t failed = {.kind = PF_JOB_MAP_PROBE, .status = PF_EINFEASIBLE};
    snprintf(failed.error, sizeof failed.error, "no device fits stage 1");
    if (rc == 0)
        rc = write_msg("decode_result", "failed",
                       (ProtobufCMessage *)pf_job_codec_result_to_pb(a, 7, &failed));

    pf_search_opts_t o;
    pf_search_opts_init(&o);
    if (rc == 0)
        rc = write_msg("decode_options", "defaults",
                       (ProtobufCMessage *)pf_plan_options_codec_to_pb(a, &o));
    o.stages = 4;
    o.replicas = 2;
    o.microbatches = 8;
    o.coarsen_k = 3;
    o.max_downsets = 5000;
    o.refine = 0;
    o.flat_gbps = 25;
    o.nalphas = 2;
    o.alphas[0] = 0.5;
    o.alphas[1] = 2;
    o.auto_inst = 0;
    o.inst = PF_MAP_INST_AR;
    o.seed = 42;
    if (rc == 0)
        rc = write_msg("decode_options", "every_field",
                       (ProtobufCMessage *)pf_plan_options_codec_to_pb(a, &o));
    pf_plan_destroy(&p);
    pf_stage_graph_destroy(&sg);
    pf_arena_destroy(&a);
    return rc;
}

/* Piper's planner input, three nodes (the shipped ones exceed the fuzzer's -max_len). */
static int piper_seed(void)
{
    static const char text[] =
        "{\"nodes\": [{\"id\": 0, \"name\": \"embed\", \"TMPCs\": {\"1\": [{\"id\": "
        "\"vanilla\", \"timePerSample\": 3, \"parameterSize\": 4096, \"memoryUsageA\": 512}]}},\n"
        " {\"id\": 1, \"name\": \"Linear\", \"TMPCs\": {\"1\": [{\"id\": \"vanilla\", "
        "\"timePerSample\": 6, \"parameterSize\": 8192, \"memoryUsageA\": 256}]}},\n"
        " {\"id\": 2, \"name\": \"node2\", \"TMPCs\": {\"1\": [{\"id\": \"vanilla\", "
        "\"timePerSample\": 1.5, \"parameterSize\": 0, \"memoryUsageA\": 256}]}}],\n"
        " \"edges\": [{\"sourceId\": 0, \"destId\": 1, \"communicationCost\": 512},\n"
        " {\"sourceId\": 1, \"destId\": 2, \"communicationCost\": 256}]}\n";
    return write_bytes("piper", "three_nodes.json", (const uint8_t *)text, sizeof text - 1);
}

static int header_seeds(void)
{
    for (int k = 0; k < 256; k++) {
        if (strcmp(pf_wire_msg_name(k), "?") == 0)
            continue;
        uint8_t h[PF_WIRE_HEADER_LEN];
        pf_wire_header((pf_wire_msg_t)k, h);
        if (write_bytes("wire_header", pf_wire_msg_name(k), h, sizeof h) != 0)
            return -1;
    }
    return 0;
}

/* A length-delimited field (wire type 2) by hand: SUBMIT's graph, cluster, options. */
static void field(uint8_t *out, size_t *at, size_t cap, int num, const uint8_t *b, size_t len)
{
    if (*at + 12 + len > cap)
        return;
    out[(*at)++] = (uint8_t)(num << 3 | 2);
    for (size_t v = len;; v >>= 7) {
        out[(*at)++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        if (v <= 0x7f)
            break;
    }
    memcpy(out + *at, b, len);
    *at += len;
}

static int wire_seeds(const pf_graph_t *g, const pf_cluster_t *c)
{
    Planfarm__Ready ready = PLANFARM__READY__INIT;
    ready.protocol = PF_WIRE_VERSION;
    ready.credits = 2;
    ready.name = "fuzz-worker";
    Planfarm__JobKind kinds[] = {
        PLANFARM__JOB_KIND__JOB_DP_PARTITION, PLANFARM__JOB_KIND__JOB_MAP_PROBE,
        PLANFARM__JOB_KIND__JOB_TAP_ENUM, PLANFARM__JOB_KIND__JOB_SIMULATE,
        PLANFARM__JOB_KIND__JOB_RESHARD};
    ready.kinds = kinds;
    ready.n_kinds = sizeof kinds / sizeof kinds[0];
    Planfarm__Heartbeat hb = PLANFARM__HEARTBEAT__INIT;
    hb.running = 1;
    Planfarm__Failed failed = PLANFARM__FAILED__INIT;
    failed.job_id = 5;
    failed.error = "out of memory";
    uint8_t hash[32] = {1, 2, 3};
    Planfarm__Fetch fetch = PLANFARM__FETCH__INIT;
    fetch.hash.data = hash;
    fetch.hash.len = sizeof hash;
    Planfarm__Bye bye = PLANFARM__BYE__INIT;
    bye.reason = "done";
    session_t w = worker_s; /* the RESULTs job_seeds framed */
    worker_s.len = 0;
    int rc = frame_msg(&worker_s, PF_MSG_READY, &ready.base) |
             frame_msg(&worker_s, PF_MSG_HEARTBEAT, &hb.base);
    memcpy(worker_s.buf + worker_s.len, w.buf, w.len);
    worker_s.len += w.len;
    rc |= frame_msg(&worker_s, PF_MSG_FAILED, &failed.base) |
          frame_msg(&worker_s, PF_MSG_FETCH, &fetch.base) |
          frame_msg(&worker_s, PF_MSG_BYE, &bye.base);

    Planfarm__Blob blob = PLANFARM__BLOB__INIT;
    blob.hash = fetch.hash;
    blob.data.data = hash;
    blob.data.len = 8;
    rc |= frame_msg(&broker_s, PF_MSG_BLOB, &blob.base);

    uint8_t *gb = NULL, *cb = NULL, *ob = NULL;
    size_t gl = 0, cl = 0, ol = 0, at = 0;
    static uint8_t submit[1 << 15];
    pf_arena_t *a = pf_arena_new();
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    if (!a || pf_model_codec_encode_graph(g, &gb, &gl) != PF_OK ||
        pf_model_codec_encode_cluster(c, &cb, &cl) != PF_OK ||
        pf_wire_pack((ProtobufCMessage *)pf_plan_options_codec_to_pb(a, &o), &ob, &ol) != PF_OK)
        rc = -1;
    field(submit, &at, sizeof submit, 1, gb, gl);
    field(submit, &at, sizeof submit, 2, cb, cl);
    field(submit, &at, sizeof submit, 3, ob, ol);
    field(submit, &at, sizeof submit, 4, (const uint8_t *)"fuzz.json", 9);
    frame(&client_s, PF_MSG_SUBMIT, submit, at);
    free(gb);
    free(cb);
    free(ob);
    pf_arena_destroy(&a);
    Planfarm__RequestRef ref = PLANFARM__REQUEST_REF__INIT;
    ref.request_id = "0123456789abcdef";
    rc |= frame_msg(&client_s, PF_MSG_STATUS, &ref.base) |
          frame_msg(&client_s, PF_MSG_RESULT_REQ, &ref.base) |
          frame_msg(&client_s, PF_MSG_CANCEL_REQ, &ref.base);
    frame(&client_s, PF_MSG_LIST, NULL, 0);

    double sizes[2] = {1e3, 1e6};
    Planfarm__ProfileClusterRequest pc = PLANFARM__PROFILE_CLUSTER_REQUEST__INIT;
    pc.cluster_name = "lab";
    pc.sizes = sizes;
    pc.n_sizes = 2;
    pc.reps = 3;
    rc |= frame_msg(&agent_s, PF_MSG_PROFILE_CLUSTER, &pc.base) |
          frame_msg(&agent_s, PF_MSG_HEARTBEAT, &hb.base);
    for (int t = 0; t < 2 && rc == 0; t++) { /* fuzz_broker reads the same sessions */
        const char *target = t ? "broker" : "wire_peer";
        rc = write_bytes(target, "worker", worker_s.buf, worker_s.len) |
             write_bytes(target, "broker", broker_s.buf, broker_s.len) |
             write_bytes(target, "client", client_s.buf, client_s.len) |
             write_bytes(target, "agent", agent_s.buf, agent_s.len);
    }
    return rc ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pf_fuzz_seeds OUTDIR\n");
        return 2;
    }
    outdir = argv[1];
    if (mkdir(outdir, 0755) != 0 && errno != EEXIST) {
        perror(outdir);
        return 1;
    }
    pf_graph_t *g = pf_fuzz_graph();
    pf_cluster_t *c = pf_fuzz_cluster(), *big = two_level();
    int rc = g && c && big && graph_seeds("fuzz", g) == 0 && model_seeds() == 0 &&
                     cluster_seeds("fuzz4", c) == 0 && cluster_seeds("hier2x8", big) == 0 &&
                     plan_seeds(g, c) == 0 && job_seeds(g, c) == 0 && header_seeds() == 0 &&
                     piper_seed() == 0 && wire_seeds(g, c) == 0
                 ? 0
                 : 1;
    if (rc)
        fprintf(stderr, "pf_fuzz_seeds: could not write the seeds under %s\n", outdir);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
    pf_cluster_destroy(&big);
    return rc;
}
