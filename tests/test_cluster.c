/* cluster: validation, file errors, statistics, round trip. */
#include "planner/ir/cluster.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEV(i) "{\"id\": " #i ", \"host\": 0, \"mem_bytes\": 1e9}"

static const struct {
    const char *text, *expect;
} bad[] = {
    {"{\"devices\": [" DEV(0) "]}", "c.json: cluster.bandwidth_gbps: missing"},
    {"{\"devices\": [], \"bandwidth_gbps\": []}", "c.json: cluster.devices: empty"},
    {"{\"devices\": [" DEV(0) ", " DEV(1) "], \"bandwidth_gbps\": [[0, 1]]}",
     "c.json: bandwidth_gbps: 1 rows, expected 2 (one per device)"},
    {"{\"devices\": [" DEV(0) ", " DEV(1) "], \"bandwidth_gbps\": [[0, 1], [1]]}",
     "c.json: bandwidth_gbps[1]: 1 columns, expected 2"},
    {"{\"devices\": [" DEV(0) ", " DEV(1) "], \"bandwidth_gbps\": [[0, 1], [0, 0]]}",
     "c.json: bandwidth_gbps[1][0]: zero (devices 1 and 0 cannot talk)"},
    {"{\"devices\": [" DEV(0) ", " DEV(1) "], \"bandwidth_gbps\": [[0, 1], [-3, 0]]}",
     "c.json: bandwidth_gbps[1][0]: negative"},
    {"{\"devices\": [" DEV(0) ", " DEV(1) "], \"bandwidth_gbps\": [[0, 1], [\"x\", 0]]}",
     "c.json: bandwidth_gbps[1][0]: not a number"},
    {"{\"devices\": [" DEV(0) ", " DEV(0) "], \"bandwidth_gbps\": [[0, 1], [1, 0]]}",
     "c.json: devices: duplicate id 0"},
    {"{\"devices\": [{\"id\": 0, \"mem_bytes\": 0}], \"bandwidth_gbps\": [[0]]}",
     "c.json: devices[0].mem_bytes: zero"},
    {"{\"devices\": [{\"id\": 0}], \"bandwidth_gbps\": [[0]]}",
     "c.json: devices[0].mem_bytes: missing"},
    {"{\"devices\": [" DEV(0) ", " DEV(1) "], \"bandwidth_gbps\": [[0, 1], [1, 0]], "
     "\"latency_us\": [[0, -1], [1, 0]]}",
     "c.json: latency_us[0][1]: negative"},
};

static void test_bad_files(void)
{
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[512] = "";
        pf_cluster_t *c = NULL;
        int rc = pf_cluster_load(pf_test_write("c.json", bad[i].text), &c, err, sizeof err);
        CU_ASSERT_EQUAL(rc, PF_EINPUT);
        CU_ASSERT_PTR_NULL(c);
        const char *base = strstr(err, "c.json");
        int ok = base && strncmp(base, bad[i].expect, strlen(bad[i].expect)) == 0;
        if (!ok)
            fprintf(stderr, "\n  case %zu: got '%s', want '%s'\n", i, err, bad[i].expect);
        CU_ASSERT(ok);
    }
}

/* Input gaps: each file and its whole message. */
static const struct {
    const char *text, *expect;
} gaps[] = {
    {"{\"devices\": [{\"id\": -1, \"mem_bytes\": 1e9}], \"bandwidth_gbps\": [[0]]}",
     "c.json: devices[0].id: negative (-1)"},
    {"{\"devices\": [{\"id\": 0, \"mem_bytes\": 1e30}], \"bandwidth_gbps\": [[0]]}",
     "c.json: devices[0].mem_bytes: 1e+30 is above the limit of 1e+18 bytes"},
    {"{\"devices\": [{\"id\": 0, \"mem_bytes\": 1e9, \"tflops\": 1e300}], "
     "\"bandwidth_gbps\": [[0]]}",
     "c.json: devices[0].tflops: 1e+300 is above the limit of 1e+09 TFLOPs"},
    {"{\"devices\": [" DEV(0) ", " DEV(1) "], \"bandwidth_gbps\": [[0, 1e308], [1, 0]]}",
     "c.json: bandwidth_gbps[0][1]: 1e+308 is above the limit of 1e+09 GB/s"},
    {"{\"devices\": [" DEV(0) ", " DEV(1) "], \"bandwidth_gbps\": [[0, 1], [1, 0]], "
     "\"latency_us\": [[0, 1], [2e9, 0]]}",
     "c.json: latency_us[1][0]: 2e+09 is above the limit of 1e+09 us"},
    /* jansson refuses bad UTF-8 and lone surrogates itself; the message is its own */
    {"{\"name\": \"\\udc00\", \"devices\": [" DEV(0) "], \"bandwidth_gbps\": [[0]]}",
     "c.json:1:17: invalid Unicode '\\uDC00' near '\"\\udc00\"'"},
};

static void test_input_gaps(void)
{
    for (size_t i = 0; i < sizeof gaps / sizeof gaps[0]; i++) {
        char err[512] = "";
        pf_cluster_t *c = NULL;
        int rc = pf_cluster_load(pf_test_write("c.json", gaps[i].text), &c, err, sizeof err);
        CU_ASSERT_EQUAL(rc, PF_EINPUT);
        CU_ASSERT_PTR_NULL(c);
        const char *base = strstr(err, "c.json");
        int ok = base && strcmp(base, gaps[i].expect) == 0;
        if (!ok)
            fprintf(stderr, "\n  case %zu: got '%s', want '%s'\n", i, err, gaps[i].expect);
        CU_ASSERT(ok);
    }
    /* names set in memory (a decoded message, a generator) are checked by validate */
    char err[256];
    pf_cluster_t *c = pf_cluster_new("ok", 1);
    pf_device_t d = {.id = 0, .name = "gpu\xc3(", .mem_bytes = 1e9};
    CU_ASSERT_EQUAL(pf_cluster_set_device(c, 0, &d), PF_OK);
    CU_ASSERT_EQUAL(pf_cluster_validate(c, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "devices[0].name: invalid UTF-8 at byte 3");
    pf_cluster_destroy(&c);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* min, median and max by selection against a full sort, on random asymmetric matrices with
 * many ties (few distinct values) and with none */
static void test_bw_stats_vs_sort(void)
{
    uint64_t rng = 12345;
    for (int t = 0; t < 300; t++) {
        int n = 2 + t % 13, distinct = t % 2 ? 3 : 1000000;
        pf_cluster_t *c = pf_cluster_new("r", n);
        double v[15 * 14];
        int k = 0;
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++) {
                if (a == b)
                    continue;
                rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
                double g = 1 + (double)((rng >> 33) % (uint64_t)distinct);
                pf_cluster_set_bw(c, a, b, g);
                v[k++] = g;
            }
        qsort(v, (size_t)k, sizeof *v, cmp_dbl);
        CU_ASSERT_EQUAL(pf_cluster_bw_min(c), v[0]);
        CU_ASSERT_EQUAL(pf_cluster_bw_max(c), v[k - 1]);
        CU_ASSERT_EQUAL(pf_cluster_bw_median(c), 0.5 * (v[k / 2 - 1] + v[k / 2])); /* k even */
        pf_cluster_destroy(&c);
    }
}

static void test_stats_and_round_trip(void)
{
    char err[256], path[700];
    /* 3 devices, bandwidths 10, 20, 40 each way: median of six values 10,10,20,20,40,40 = 20 */
    pf_cluster_t *c = pf_cluster_new("tri", 3);
    for (int i = 0; i < 3; i++) {
        pf_device_t d = {.id = 100 + i, .host = i / 2, .mem_bytes = (i + 1) * 1e9, .tflops = 125};
        pf_cluster_set_device(c, i, &d);
    }
    pf_cluster_set_link(c, 0, 1, 10, 2);
    pf_cluster_set_link(c, 0, 2, 20, 2);
    pf_cluster_set_link(c, 1, 2, 40, 5);
    CU_ASSERT_EQUAL_FATAL(pf_cluster_validate(c, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_cluster_nhosts(c), 2);
    PF_ASSERT_CLOSE(pf_cluster_bw_median(c), 20, 1e-12);
    PF_ASSERT_CLOSE(pf_cluster_bw_min(c), 10, 1e-12);
    PF_ASSERT_CLOSE(pf_cluster_bw_max(c), 40, 1e-12);
    PF_ASSERT_CLOSE(pf_cluster_min_mem_bytes(c), 1e9, 1e-12);
    CU_ASSERT(pf_cluster_is_symmetric(c));
    /* postal model: 5 us + 4e8 bytes / 40 GB/s = 0.005 + 10 ms */
    PF_ASSERT_CLOSE(pf_cluster_xfer_ms(c, 1, 2, 4e8), 10.005, 1e-12);
    CU_ASSERT_EQUAL(pf_cluster_xfer_ms(c, 1, 1, 4e8), 0);
    snprintf(path, sizeof path, "%s/tri.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(pf_cluster_save(c, path, err, sizeof err), PF_OK);
    pf_cluster_t *d;
    CU_ASSERT_EQUAL_FATAL(pf_cluster_load(path, &d, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_cluster_ndevices(d), 3);
    CU_ASSERT_EQUAL(memcmp(pf_cluster_bw_matrix(c), pf_cluster_bw_matrix(d), 9 * sizeof(double)),
                    0);
    CU_ASSERT_EQUAL(memcmp(pf_cluster_lat_matrix(c), pf_cluster_lat_matrix(d), 9 * sizeof(double)),
                    0);
    CU_ASSERT_EQUAL(pf_cluster_device(d, 2)->id, 102);
    CU_ASSERT_EQUAL(pf_cluster_device(d, 2)->host, 1);
    CU_ASSERT_STRING_EQUAL(pf_cluster_device(d, 2)->name, "dev102");
    /* asymmetric bandwidth is accepted and reported */
    pf_cluster_set_bw(d, 0, 1, 11);
    CU_ASSERT_EQUAL(pf_cluster_validate(d, err, sizeof err), PF_OK);
    CU_ASSERT(!pf_cluster_is_symmetric(d));
    pf_cluster_destroy(&c);
    pf_cluster_destroy(&d);
    CU_ASSERT_PTR_NULL(d);
}

void pf_suite_cluster(void)
{
    CU_pSuite s = CU_add_suite("cluster", NULL, NULL);
    CU_add_test(s, "bad files: each message names the place", test_bad_files);
    CU_add_test(s, "statistics, postal model, round trip", test_stats_and_round_trip);
    CU_add_test(s, "bandwidth min, median, max equal a full sort (300 random matrices)",
                test_bw_stats_vs_sort);
    CU_add_test(s, "negative ids, absurd numbers, bad UTF-8: exact messages", test_input_gaps);
}
