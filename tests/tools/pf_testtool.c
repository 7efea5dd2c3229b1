/* pf_testtool: helpers for the tests/integration scripts (built by `make integration`; no python, no jq).
 *
 *   pf_testtool compare A.json B.json EPS
 *       exit 0 when two plan files have the same stages, replicas and stage op lists and
 *       objectives within EPS relative (the binary search's epsilon); else print why, exit 1.
 *   pf_testtool hostile ENDPOINT HUGE_MB
 *       send a broker malformed and oversized messages (random frames, truncated and wrong
 *       headers, wrong versions and kinds, undecodable bodies, too many frames, a worker message
 *       from a client, one frame of HUGE_MB MiB: run the broker with a smaller --max-msg-mb),
 *       then exit 0.
 *   pf_testtool rogue ENDPOINT CERT BROKER_KEY blackhole|forge
 *       a worker with a listed key (CERT: its secret cert; BROKER_KEY: the broker's public
 *       cert) that misbehaves:
 *       blackhole  READY asking for 64 credits; takes jobs, heartbeats, never answers; prints
 *                  "took N jobs" as they come; runs until killed
 *       forge      takes one job X and fetches its graph (must be served), then a second
 *                  connection that holds no job fetches the same blob (must be refused), then
 *                  sends RESULT (infeasible) for the 16 ids after X and a FAILED for X + 1,
 *                  none of which it was sent, and says BYE. Exit 0 when both fetches went as
 *                  they must; prints "forged 17 answers". */
#include "planner/core/util.h"
#include "proto/curve.h"
#include "proto/job_codec.h"

#include <czmq.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *load(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j)
        fprintf(stderr, "compare: %s:%d: %s\n", path, e.line, e.text);
    return j;
}

static int compare(const char *pa, const char *pb, double eps)
{
    json_t *a = load(pa), *b = load(pb);
    int bad = !a || !b;
    if (bad)
        goto done;
    const char *keys[] = {"stages", "replicas", "devices", "microbatches", "tensor_parallel"};
    for (size_t k = 0; k < 4; k++)
        if (!json_equal(json_object_get(a, keys[k]), json_object_get(b, keys[k]))) {
            fprintf(stderr, "compare: %s differs: %lld vs %lld\n", keys[k],
                    json_integer_value(json_object_get(a, keys[k])),
                    json_integer_value(json_object_get(b, keys[k])));
            bad = 1;
        }
    json_t *sa = json_object_get(a, "stage_list"), *sb = json_object_get(b, "stage_list");
    if (!json_is_array(sa) || !json_is_array(sb) || json_array_size(sa) != json_array_size(sb)) {
        fprintf(stderr, "compare: stage_list sizes differ\n");
        bad = 1;
    } else {
        for (size_t i = 0; i < json_array_size(sa); i++)
            if (!json_equal(json_object_get(json_array_get(sa, i), "ops"),
                            json_object_get(json_array_get(sb, i), "ops"))) {
                fprintf(stderr, "compare: stage %zu has different ops\n", i);
                bad = 1;
            }
    }
    double oa = json_number_value(json_object_get(a, "objective_ms"));
    double ob = json_number_value(json_object_get(b, "objective_ms"));
    if (!(fabs(oa - ob) <= eps * fmax(oa, ob))) {
        fprintf(stderr, "compare: objective %.9g vs %.9g ms, more than %g apart\n", oa, ob, eps);
        bad = 1;
    }
    if (!bad)
        printf("plans agree: %lld stages x %lld replicas, objective %.6g vs %.6g ms\n",
               json_integer_value(json_object_get(a, "stages")),
               json_integer_value(json_object_get(a, "replicas")), oa, ob);
done:
    json_decref(a);
    json_decref(b);
    return bad;
}

static void frames(zsock_t *s, int n, const void *const *data, const size_t *len)
{
    zmsg_t *m = zmsg_new();
    for (int i = 0; i < n; i++)
        zmsg_addmem(m, data[i], len[i]);
    zmsg_send(&m, s);
}

static int hostile(const char *endpoint, size_t huge_mb)
{
    zsock_t *s = zsock_new_dealer(endpoint);
    if (!s) {
        fprintf(stderr, "hostile: cannot connect to %s\n", endpoint);
        return 1;
    }
    uint8_t junk[512];
    srand(7);
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)rand();
    for (int k = 0; k < 200; k++) { /* random frames: 1 to 4 parts of random sizes */
        const void *d[4] = {junk, junk + 7, junk + 100, junk + 300};
        size_t l[4] = {(size_t)rand() % 64, (size_t)rand() % 200, (size_t)rand() % 100, 4};
        frames(s, 1 + rand() % 4, d, l);
    }
    const uint8_t bad_tag[] = {'Z', 'F', PF_WIRE_VERSION, PF_MSG_SUBMIT};
    const uint8_t bad_version[] = {'P', 'F', PF_WIRE_VERSION + 1, PF_MSG_SUBMIT};
    const uint8_t bad_kind[] = {'P', 'F', PF_WIRE_VERSION, 250};
    const uint8_t truncated[] = {'P', 'F', PF_WIRE_VERSION};
    uint8_t submit[4], result[4], status[4], ready[4];
    pf_wire_header(PF_MSG_SUBMIT, submit);
    pf_wire_header(PF_MSG_RESULT, result);
    pf_wire_header(PF_MSG_STATUS, status);
    pf_wire_header(PF_MSG_READY, ready);
    const void *hdrs[] = {bad_tag, bad_version, bad_kind, truncated, submit, ready, result};
    const size_t hlen[] = {4, 4, 4, 3, 4, 4, 4};
    for (size_t h = 0; h < sizeof hdrs / sizeof hdrs[0]; h++) {
        const void *d[2] = {hdrs[h], junk};
        size_t l[2] = {hlen[h], 33};
        frames(s, 2, d, l);
    }
    /* a truncated Submit: the first 10 bytes of a message that claims to be longer */
    const uint8_t cut[] = {0x0a, 0x80, 0x80, 0x04, 0x0a, 0x03, 'a', 'b', 'c', 0x10};
    const void *d2[2] = {submit, cut};
    size_t l2[2] = {4, sizeof cut};
    frames(s, 2, d2, l2);
    /* as a client now (a valid STATUS), then worker messages from it */
    const void *d3[2] = {status, ""};
    size_t l3[2] = {4, 0};
    frames(s, 2, d3, l3);
    const void *d4[2] = {result, junk};
    size_t l4[2] = {4, 12};
    frames(s, 2, d4, l4);
    /* one frame above the broker's bound: libzmq drops the connection */
    size_t huge = huge_mb << 20;
    uint8_t *big = calloc(1, huge);
    if (big) {
        zsock_t *s2 = zsock_new_dealer(endpoint);
        const void *d5[2] = {submit, big};
        size_t l5[2] = {4, huge};
        frames(s2, 2, d5, l5);
        zclock_sleep(500); /* let it go out before the socket closes */
        zsock_set_linger(s2, 0);
        zsock_destroy(&s2);
        free(big);
    }
    zclock_sleep(200);
    zsock_set_linger(s, 0);
    zsock_destroy(&s);
    printf("hostile: sent %d malformed messages and one of %zu MiB to %s\n", 200 + 9, huge_mb,
           endpoint);
    return 0;
}

/* ---- a rogue worker ---- */

static void rogue_send(zsock_t *s, pf_wire_msg_t kind, const ProtobufCMessage *m)
{
    uint8_t hdr[PF_WIRE_HEADER_LEN], *buf;
    size_t n;
    pf_wire_header(kind, hdr);
    if (pf_wire_pack(m, &buf, &n) != PF_OK)
        return;
    zmsg_t *msg = zmsg_new();
    zmsg_addmem(msg, hdr, sizeof hdr);
    zmsg_addmem(msg, buf, n);
    zmsg_send(&msg, s);
    free(buf);
}

/* The next message within timeout_ms: its kind (0: none) and body (caller destroys). */
static int rogue_recv(zsock_t *s, int timeout_ms, zframe_t **body)
{
    *body = NULL;
    zpoller_t *p = zpoller_new(s, NULL);
    void *which = zpoller_wait(p, timeout_ms);
    zpoller_destroy(&p);
    if (!which)
        return 0;
    zmsg_t *m = zmsg_recv(s);
    zframe_t *h = m ? zmsg_pop(m) : NULL;
    pf_wire_msg_t kind = 0;
    char err[64];
    if (!h || pf_wire_parse_header(zframe_data(h), zframe_size(h), &kind, err, sizeof err) !=
                  PF_OK)
        kind = 0;
    *body = m ? zmsg_pop(m) : NULL;
    zframe_destroy(&h);
    zmsg_destroy(&m);
    return (int)kind;
}

static zsock_t *rogue_connect(const char *endpoint, const pf_curve_client_t *keys, int credits,
                              int all_kinds)
{
    zsock_t *s = zsock_new(ZMQ_DEALER);
    zsock_set_linger(s, 0);
    pf_curve_client_apply(keys, s);
    zsock_connect(s, "%s", endpoint);
    Planfarm__JobKind kinds[PF_JOB_KIND_COUNT];
    for (int k = 0; k < PF_JOB_KIND_COUNT; k++)
        kinds[k] = (Planfarm__JobKind)k;
    Planfarm__Ready r = PLANFARM__READY__INIT;
    r.protocol = PF_WIRE_VERSION;
    r.credits = (uint32_t)credits;
    r.kinds = all_kinds ? kinds : &kinds[PF_JOB_NOOP];
    r.n_kinds = all_kinds ? PF_JOB_KIND_COUNT : 1;
    r.name = all_kinds ? "rogue" : "rogue-idle";
    rogue_send(s, PF_MSG_READY, &r.base);
    return s;
}

/* FETCH hash on s: 1 when the broker sent the blob's bytes, 0 when it refused, -1 no reply. */
static int rogue_fetch(zsock_t *s, ProtobufCBinaryData hash)
{
    Planfarm__Fetch f = PLANFARM__FETCH__INIT;
    f.hash = hash;
    rogue_send(s, PF_MSG_FETCH, &f.base);
    for (int i = 0; i < 100; i++) {
        zframe_t *body;
        int kind = rogue_recv(s, 100, &body);
        Planfarm__Blob *b = kind == PF_MSG_BLOB && body ? planfarm__blob__unpack(
                                                              NULL, zframe_size(body), zframe_data(body))
                                                        : NULL;
        zframe_destroy(&body);
        if (b) {
            int got = b->data.len > 0 && !(b->error && b->error[0]);
            planfarm__blob__free_unpacked(b, NULL);
            return got;
        }
    }
    return -1;
}

static int rogue(const char *endpoint, const char *cert, const char *broker_key, const char *mode)
{
    char err[512];
    pf_curve_opts_t o = {.cert = cert, .broker_key = broker_key};
    pf_curve_client_t keys;
    if (pf_curve_client_init(&keys, &o, "rogue", endpoint, err, sizeof err) != PF_OK) {
        fprintf(stderr, "rogue: %s\n", err);
        return 2;
    }
    int blackhole = !strcmp(mode, "blackhole"), rc = 1;
    zsock_t *s = rogue_connect(endpoint, &keys, blackhole ? 64 : 1, 1);
    Planfarm__Heartbeat hb = PLANFARM__HEARTBEAT__INIT;
    Planfarm__Job *job = NULL;
    int taken = 0;
    /* blackhole: forever (until killed); forge: until the first job, at most 60 s */
    for (int polls = 0; blackhole || (!job && polls < 1200); polls++) {
        zframe_t *body;
        int kind = rogue_recv(s, 50, &body);
        if (kind == PF_MSG_JOB && body) {
            Planfarm__Job *j = planfarm__job__unpack(NULL, zframe_size(body), zframe_data(body));
            if (j && blackhole) {
                printf("took %d jobs\n", ++taken);
                fflush(stdout);
                planfarm__job__free_unpacked(j, NULL);
            } else {
                job = j;
            }
        }
        zframe_destroy(&body);
        rogue_send(s, PF_MSG_HEARTBEAT, &hb.base);
    }
    if (!job || !job->graph) {
        fprintf(stderr, "rogue: no job with a graph came\n");
        goto done;
    }
    int own = rogue_fetch(s, job->graph->hash);
    zsock_t *idle = rogue_connect(endpoint, &keys, 1, 0);
    int other = rogue_fetch(idle, job->graph->hash);
    printf("fetch of its own job's graph: %s; from a connection without that job: %s\n",
           own == 1 ? "served" : own == 0 ? "refused" : "no reply",
           other == 1 ? "served" : other == 0 ? "refused" : "no reply");
    int forged = 0;
    for (uint64_t k = 1; k <= 16; k++, forged++) {
        Planfarm__JobResult r = PLANFARM__JOB_RESULT__INIT;
        r.id = job->id + k;
        r.kind = job->kind;
        r.status = PF_EINFEASIBLE;
        r.error = "forged";
        rogue_send(s, PF_MSG_RESULT, &r.base);
    }
    Planfarm__Failed f = PLANFARM__FAILED__INIT;
    f.job_id = job->id + 1;
    f.error = "forged";
    rogue_send(s, PF_MSG_FAILED, &f.base);
    forged++;
    Planfarm__Bye bye = PLANFARM__BYE__INIT;
    rogue_send(s, PF_MSG_BYE, &bye.base);
    rogue_send(idle, PF_MSG_BYE, &bye.base);
    zclock_sleep(200); /* let them go out */
    zsock_destroy(&idle);
    printf("forged %d answers\n", forged);
    rc = own == 1 && other == 0 ? 0 : 1;
done:
    planfarm__job__free_unpacked(job, NULL);
    zsock_destroy(&s);
    pf_curve_client_clear(&keys);
    return rc;
}

int main(int argc, char **argv)
{
    zsys_set_logstream(stderr);
    if (argc == 5 && !strcmp(argv[1], "compare"))
        return compare(argv[2], argv[3], atof(argv[4]));
    if (argc == 4 && !strcmp(argv[1], "hostile"))
        return hostile(argv[2], (size_t)atol(argv[3]));
    if (argc == 6 && !strcmp(argv[1], "rogue") &&
        (!strcmp(argv[5], "blackhole") || !strcmp(argv[5], "forge")))
        return rogue(argv[2], argv[3], argv[4], argv[5]);
    fprintf(stderr, "usage: pf_testtool compare A.json B.json EPS | hostile ENDPOINT HUGE_MB |\n"
                    "       rogue ENDPOINT CERT BROKER_KEY blackhole|forge\n");
    return 2;
}
