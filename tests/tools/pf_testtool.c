/* pf_testtool: helpers for the tests/integration scripts (built by `make integration`; no python, no jq).
 *
 *   pf_testtool compare A.json B.json EPS
 *       exit 0 when two plan files have the same stages, replicas and stage op lists and
 *       objectives within EPS relative (the binary search's epsilon); else print why, exit 1.
 *   pf_testtool hostile ENDPOINT HUGE_MB
 *       send a broker malformed and oversized messages (random frames, truncated and wrong
 *       headers, wrong versions and kinds, undecodable bodies, too many frames, a worker message
 *       from a client, one frame of HUGE_MB MiB: run the broker with a smaller --max-msg-mb),
 *       then exit 0. */
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

int main(int argc, char **argv)
{
    zsys_set_logstream(stderr);
    if (argc == 5 && !strcmp(argv[1], "compare"))
        return compare(argv[2], argv[3], atof(argv[4]));
    if (argc == 4 && !strcmp(argv[1], "hostile"))
        return hostile(argv[2], (size_t)atol(argv[3]));
    fprintf(stderr, "usage: pf_testtool compare A.json B.json EPS | hostile ENDPOINT HUGE_MB\n");
    return 2;
}
