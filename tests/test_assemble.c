/* assemble: a cluster from the recorded measurements of 2 hosts x 4 GPUs. */
#include "planner/ir/cluster.h"
#include "planner/core/util.h"
#include "planner/inputs/assemble.h"
#include "tests/testutil.h"

#include <jansson.h>
#include <string.h>

/* An exact postal sweep, 4 B .. 256 MiB by x4: its fit gives back lat_us and gbps. */
static pf_record_link_t link_rec(const char *sh, int si, const char *dh, int di, double lat_us,
                                 double gbps, pf_record_source_t src, const char *method)
{
    pf_record_link_t l = {.src_index = si,
                          .dst_index = di,
                          .source = src,
                          .when_unix_s = 1.7e9,
                          .topo_level = src == PF_SRC_GPU ? 10 : -1,
                          .nvlinks = src == PF_SRC_GPU};
    pf_record_name(l.src_host, sh);
    pf_record_name(l.dst_host, dh);
    pf_record_name(l.method, method);
    pf_record_name(l.measured_by, src == PF_SRC_GPU ? sh : "agent-pair");
    for (double b = 4; b <= 268435456.0; b *= 4) {
        l.bytes[l.nsizes] = b;
        l.ms[l.nsizes++] = lat_us * 1e-3 + b / (gbps * 1e6);
    }
    return l;
}

static pf_record_device_t gpu(const char *host, int index)
{
    pf_record_device_t d = {.index = index,
                            .source = PF_SRC_GPU,
                            .mem_bytes = 80e9,
                            .tflops = 700 + index,
                            .mem_gbps = 2900,
                            .sm_count = 132,
                            .clock_mhz = 1980,
                            .when_unix_s = 1.7e9};
    pf_record_name(d.host, host);
    pf_record_name(d.name, "NVIDIA H100 80GB HBM3");
    pf_record_name(d.measured_by, host);
    return d;
}

/* Peer copies i -> j on one host at 100 + 10 i + 2 j GB/s (asymmetric on purpose), 8 us. */
static double peer_gbps(int i, int j) { return 100 + 10 * i + 2 * j; }

/* Host "a" first, then "b" (b's device records in reverse order). Host a: every ordered pair,
 * and a slower peer-access-off copy for 0 -> 1 that must lose. Host b: every ordered pair but
 * 2 -> 3, which must come from 3 -> 2. Between the hosts one ping-pong record a -> b: 12.5 GB/s,
 * 50 us, for all 32 cross-host entries in both directions. */
static pf_assemble_t *two_hosts(int with_network)
{
    char err[256];
    pf_assemble_t *a = pf_assemble_new("2x4", err, sizeof err);
    for (int i = 0; i < 4; i++) {
        pf_record_device_t d = gpu("a", i);
        CU_ASSERT_EQUAL(pf_assemble_add_device(a, &d, err, sizeof err), PF_OK);
    }
    for (int i = 3; i >= 0; i--) {
        pf_record_device_t d = gpu("b", i);
        CU_ASSERT_EQUAL(pf_assemble_add_device(a, &d, err, sizeof err), PF_OK);
    }
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                if (i == j || (h == 1 && i == 2 && j == 3))
                    continue;
                pf_record_link_t l = link_rec(h ? "b" : "a", i, h ? "b" : "a", j, 8,
                                              peer_gbps(i, j), PF_SRC_GPU, "cuda_peer_copy");
                CU_ASSERT_EQUAL(pf_assemble_add_link(a, &l, err, sizeof err), PF_OK);
            }
    pf_record_link_t off = link_rec("a", 0, "a", 1, 15, 37, PF_SRC_GPU, "cuda_copy_no_p2p");
    CU_ASSERT_EQUAL(pf_assemble_add_link(a, &off, err, sizeof err), PF_OK);
    if (with_network) {
        pf_record_link_t net =
            link_rec("a", PF_END_HOST, "b", PF_END_HOST, 50, 12.5, PF_SRC_CPU, "zmq_tcp_pingpong");
        CU_ASSERT_EQUAL(pf_assemble_add_link(a, &net, err, sizeof err), PF_OK);
    }
    return a;
}

static void test_two_hosts(void)
{
    char err[256];
    pf_assemble_t *a = two_hosts(1);
    pf_cluster_t *c;
    CU_ASSERT_EQUAL_FATAL(pf_assemble_build(a, &c, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_cluster_ndevices(c), 8);
    CU_ASSERT_EQUAL(pf_cluster_nhosts(c), 2);
    for (int s = 0; s < 8; s++) {
        const pf_device_t *d = pf_cluster_device(c, s);
        CU_ASSERT_EQUAL(d->host, s / 4);
        CU_ASSERT_EQUAL(d->tflops, 700 + s % 4); /* b's devices sorted by ordinal */
        for (int t = 0; t < 8; t++) {
            if (s == t)
                continue;
            double bw = pf_cluster_bw_gbps(c, s, t), lat = pf_cluster_lat_us(c, s, t);
            int i = s % 4, j = t % 4;
            if (s / 4 != t / 4) { /* across hosts: the network, both directions */
                PF_ASSERT_CLOSE(bw, 12.5, 1e-9);
                PF_ASSERT_CLOSE(lat, 50, 1e-9);
                PF_ASSERT_CLOSE(bw, pf_cluster_bw_gbps(c, t, s), 1e-12);
            } else if (s == 6 && t == 7) { /* b:2 -> b:3 was not measured: b:3 -> b:2 */
                PF_ASSERT_CLOSE(bw, peer_gbps(3, 2), 1e-9);
            } else {
                PF_ASSERT_CLOSE(bw, peer_gbps(i, j), 1e-9);
                PF_ASSERT_CLOSE(lat, 8, 1e-9);
            }
        }
    }
    /* a:0 -> a:1 took the peer-access copy (102 GB/s), not the 37 GB/s one */
    PF_ASSERT_CLOSE(pf_cluster_bw_gbps(c, 0, 1), 102, 1e-9);
    int net = pf_assemble_nlinks(a) - 1;
    CU_ASSERT_EQUAL(pf_assemble_origin(a, 0, 7), net);
    CU_ASSERT_EQUAL(pf_assemble_origin(a, 7, 0), net);
    CU_ASSERT_EQUAL(pf_assemble_link(a, net)->used, 32);
    CU_ASSERT_EQUAL(pf_assemble_link(a, net - 1)->used, 0); /* the no-p2p copy */

    /* Saved with provenance; the planner's reader still loads it (unknown keys ignored). */
    char path[1024];
    snprintf(path, sizeof path, "%s/2x4.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(pf_assemble_save(a, c, path, err, sizeof err), PF_OK);
    pf_cluster_t *back;
    CU_ASSERT_EQUAL_FATAL(pf_cluster_load(path, &back, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(memcmp(pf_cluster_bw_matrix(back), pf_cluster_bw_matrix(c),
                           64 * sizeof(double)), 0);
    CU_ASSERT_EQUAL(memcmp(pf_cluster_lat_matrix(back), pf_cluster_lat_matrix(c),
                           64 * sizeof(double)), 0);
    pf_cluster_destroy(&back);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    json_t *prov = json_object_get(root, "provenance");
    json_t *devs = json_object_get(prov, "devices"), *links = json_object_get(prov, "links");
    CU_ASSERT_EQUAL(json_array_size(devs), 8);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(devs, 5), "host")),
                           "b");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(devs, 5), "source")),
                           "gpu");
    CU_ASSERT_EQUAL(json_array_size(links), (size_t)pf_assemble_nlinks(a));
    json_t *nl = json_array_get(links, (size_t)net);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(nl, "source")), "cpu");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(nl, "method")), "zmq_tcp_pingpong");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(nl, "measured_by")), "agent-pair");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(nl, "used_for")), 32);
    CU_ASSERT_PTR_NULL(json_object_get(nl, "nvml_topology")); /* a network link: none */
    json_t *l01 = json_array_get(links, 0);                   /* a:0 -> a:1 */
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(l01, "nvml_topology")), 10);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(l01, "nvlinks")), 1);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(l01, "dst_index")), 1);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(l01, "used_for")), 1);
    PF_ASSERT_CLOSE(json_number_value(json_object_get(nl, "gbps")), 12.5, 1e-9);
    CU_ASSERT(json_number_value(json_object_get(nl, "fit_rel_rms")) < 1e-9);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(nl, "when")),
                           "2023-11-14T22:13:20Z"); /* 1.7e9 s */
    json_decref(root);
    pf_cluster_destroy(&c);
    pf_assemble_destroy(&a);
    pf_assemble_destroy(&a); /* idempotent */
}

static void test_missing_and_bad(void)
{
    char err[256];
    pf_assemble_t *a = two_hosts(0);
    pf_cluster_t *c;
    CU_ASSERT_EQUAL(pf_assemble_build(a, &c, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "never paired"));
    pf_record_device_t d = gpu("a", 2);
    CU_ASSERT_EQUAL(pf_assemble_add_device(a, &d, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "a:2 given twice"));
    d = gpu("c", 0);
    d.mem_bytes = 0;
    CU_ASSERT_EQUAL(pf_assemble_add_device(a, &d, err, sizeof err), PF_EINPUT);
    memset(d.host, 'x', sizeof d.host); /* no terminator, as a hostile message could send */
    d.mem_bytes = 1;
    CU_ASSERT_EQUAL(pf_assemble_add_device(a, &d, err, sizeof err), PF_EINPUT);
    pf_record_link_t l = link_rec("a", 0, "a", 0, 1, 1, PF_SRC_GPU, "x");
    CU_ASSERT_EQUAL(pf_assemble_add_link(a, &l, err, sizeof err), PF_EINPUT);
    l = link_rec("a", 0, "a", 1, 1, 1, PF_SRC_GPU, "x");
    l.nvlinks = -3;
    CU_ASSERT_EQUAL(pf_assemble_add_link(a, &l, err, sizeof err), PF_EINPUT);
    l = link_rec("a", 0, "a", 1, 1, 1, PF_SRC_GPU, "x");
    l.nsizes = PF_SWEEP_MAX + 1;
    CU_ASSERT_EQUAL(pf_assemble_add_link(a, &l, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "link a:0 -> a:1"));
    pf_assemble_destroy(&a);
}

/* A measured-looking matrix: H hosts x G GPUs, in-host links at 300 GB/s except that the one
 * from device 0 to 1 is `first_gbps`, between hosts 24 GB/s at 8 us; 80 GB and 700 TFLOP/s. */
static pf_cluster_t *measured(int H, int G, double first_gbps)
{
    int n = H * G;
    pf_cluster_t *c = pf_cluster_new("m", n);
    for (int i = 0; i < n; i++) {
        pf_device_t d = {.id = i, .host = i / G, .name = "gpu", .mem_bytes = 8e10,
                         .tflops = 700 + (i % 3)};
        pf_cluster_set_device(c, i, &d);
    }
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            if (a != b) {
                int same = a / G == b / G;
                pf_cluster_set_bw(c, a, b, a == 0 && b == 1 ? first_gbps : same ? 300 : 24);
                pf_cluster_set_lat(c, a, b, same ? 3 : 8);
            }
    return c;
}

/* Equal hosts and links within 10% of their medians give the hierarchy of the medians (the
 * 290 GB/s link is 3.3% off 300; peaks 700..702 are within 10% of 701); a link at 200 GB/s
 * (33% off), one device, or hosts of unequal size keep the matrix. */
static void test_fits_hierarchy(void)
{
    char why[256];
    pf_cluster_t *c = measured(3, 4, 290), *h = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_assemble_hierarchy(c, PF_ASSEMBLE_HIER_TOL, &h, why, sizeof why),
                          PF_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pf_cluster_hierarchy(h));
    CU_ASSERT_EQUAL(pf_cluster_ndevices(h), 12);
    CU_ASSERT_EQUAL(pf_cluster_nhosts(h), 3);
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(h, 0, 1), 300);
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(h, 5, 7), 300);
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(h, 0, 11), 24);
    CU_ASSERT_EQUAL(pf_cluster_lat_us(h, 0, 11), 8);
    CU_ASSERT_EQUAL(pf_cluster_lat_us(h, 1, 2), 3);
    CU_ASSERT_EQUAL(pf_cluster_device(h, 4)->host, 1);
    CU_ASSERT_EQUAL(pf_cluster_device(h, 4)->mem_bytes, 8e10);
    CU_ASSERT_EQUAL(pf_cluster_device(h, 4)->tflops, 701);
    pf_cluster_destroy(&h);
    pf_cluster_destroy(&c);
    c = measured(3, 4, 200);
    CU_ASSERT_EQUAL(pf_assemble_hierarchy(c, PF_ASSEMBLE_HIER_TOL, &h, why, sizeof why),
                    PF_EINFEASIBLE);
    CU_ASSERT_PTR_NULL(h);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "in-host bandwidths 200 to 300 GB/s"));
    pf_cluster_destroy(&c);
    c = measured(1, 1, 0);
    CU_ASSERT_EQUAL(pf_assemble_hierarchy(c, PF_ASSEMBLE_HIER_TOL, &h, why, sizeof why),
                    PF_EINFEASIBLE);
    pf_cluster_destroy(&c);
    c = measured(2, 3, 300); /* device 5 moves to host 2: hosts of 3, 2 and 1 GPUs */
    pf_device_t d = *pf_cluster_device(c, 5);
    d.host = 2;
    pf_cluster_set_device(c, 5, &d);
    CU_ASSERT_EQUAL(pf_assemble_hierarchy(c, PF_ASSEMBLE_HIER_TOL, &h, why, sizeof why),
                    PF_EINFEASIBLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "hosts hold different GPU counts"));
    pf_cluster_destroy(&c);
    /* one GPU per host: only the network level's link is used */
    c = measured(4, 1, 24);
    CU_ASSERT_EQUAL_FATAL(pf_assemble_hierarchy(c, PF_ASSEMBLE_HIER_TOL, &h, why, sizeof why),
                          PF_OK);
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(h, 0, 3), 24);
    pf_cluster_destroy(&h);
    pf_cluster_destroy(&c);
}

void pf_suite_assemble(void)
{
    CU_pSuite s = CU_add_suite("assemble", NULL, NULL);
    CU_add_test(s, "2 hosts x 4 GPUs: complete matrix, fallbacks, provenance", test_two_hosts);
    CU_add_test(s, "unpaired hosts and bad records are refused", test_missing_and_bad);
    CU_add_test(s, "a measured matrix fits a hierarchy, or says why not", test_fits_hierarchy);
}
