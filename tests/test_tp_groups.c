/* tp_groups: tensor-parallel groups on DGX-1 (Parmesan's NVLink matrix, worked by hand) and the
 * group cluster the pipeline sees. */
#include "planner/inputs/topology.h"
#include "planner/ir/cluster_hier.h"
#include "planner/tp/tp_groups.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <string.h>

static pf_cluster_t *dgx1(int machines)
{
    char err[256];
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX1);
    o.machines = machines;
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL(pf_topology_build(&o, &c, err, sizeof err), PF_OK);
    return c;
}

static void test_degrees(void)
{
    pf_cluster_t *c = dgx1(4);
    int t[16], n = pf_tp_groups_degrees(c, 0, t, 16);
    int want[] = {1, 2, 4, 8};
    CU_ASSERT_EQUAL_FATAL(n, 4);
    for (int i = 0; i < n; i++)
        CU_ASSERT_EQUAL(t[i], want[i]);
    n = pf_tp_groups_degrees(c, 1, t, 16); /* across hosts: every divisor of 32 */
    CU_ASSERT_EQUAL(n, 6);
    CU_ASSERT_EQUAL(t[5], 32);
    char err[256];
    CU_ASSERT_PTR_NULL(pf_tp_groups_new(c, 3, 0, err, sizeof err));
    CU_ASSERT_STRING_EQUAL(err, "tensor-parallel degree 3 does not divide the 32 devices of "
                                "cluster dgx1x4");
    CU_ASSERT_PTR_NULL(pf_tp_groups_new(c, 16, 0, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "does not divide the 8 devices of host 0"));
    pf_cluster_destroy(&c);
}

static void test_dgx1_groups(void)
{
    char err[256];
    pf_cluster_t *c = dgx1(2);
    /* T = 2: the DGX-1 rows give double NVLinks 0-1, 0-4, 1-3, 2-3, 2-6, 4-5, 5-7, 6-7; the
     * perfect matchings of double links are {01,23,45,67} and {04,13,26,57}; the first one
     * found (lowest devices first) is kept: every pair at 43.2 GB/s */
    pf_tp_groups_t *g = pf_tp_groups_new(c, 2, 0, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(pf_tp_groups_count(g), 8);
    const int want2[8][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}};
    for (int k = 0; k < 8; k++)
        CU_ASSERT(memcmp(pf_tp_groups_members(g, k), want2[k], sizeof want2[k]) == 0);
    PF_ASSERT_CLOSE(pf_tp_groups_link_gbps(g), 43.2, 1e-12);
    /* group cluster: {0,1} -> {2,3} is min(bw(0,2), bw(1,3)) = min(21.4, 43.2); {0,1} -> {8,9}
     * crosses machines: 1.4 */
    const pf_cluster_t *gc = pf_tp_groups_cluster(g);
    CU_ASSERT_EQUAL(pf_cluster_ndevices(gc), 8);
    PF_ASSERT_CLOSE(pf_cluster_bw_gbps(gc, 0, 1), 21.4, 1e-12);
    PF_ASSERT_CLOSE(pf_cluster_bw_gbps(gc, 0, 4), 1.4, 1e-12);
    /* {4,5} -> {6,7}: min(bw(4,6), bw(5,7)) = min(21.4, 43.2) */
    PF_ASSERT_CLOSE(pf_cluster_bw_gbps(gc, 2, 3), 21.4, 1e-12);
    CU_ASSERT_EQUAL(pf_cluster_device(gc, 5)->host, 1);
    CU_ASSERT_EQUAL(pf_cluster_validate(gc, err, sizeof err), PF_OK);
    pf_tp_groups_destroy(&g);
    CU_ASSERT_PTR_NULL(g);
    pf_tp_groups_destroy(&g);

    /* T = 4: no quad of a DGX-1 is all NVLink-double; {0,1,2,3} and {4,5,6,7} have every pair on
     * NVLink, slowest 21.4 (0-2, 0-3, 1-2 and 4-6, 4-7, 5-6); a quad mixing the halves has a
     * PCIe pair (10.1), e.g. 0-5 */
    g = pf_tp_groups_new(c, 4, 0, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const int want4[4][4] = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}};
    for (int k = 0; k < 4; k++)
        CU_ASSERT(memcmp(pf_tp_groups_members(g, k), want4[k], sizeof want4[k]) == 0);
    PF_ASSERT_CLOSE(pf_tp_groups_link_gbps(g), 21.4, 1e-12);
    pf_tp_groups_destroy(&g);

    /* T = 8: the whole machine, slowest link PCIe */
    g = pf_tp_groups_new(c, 8, 0, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    PF_ASSERT_CLOSE(pf_tp_groups_link_gbps(g), 10.1, 1e-12);
    PF_ASSERT_CLOSE(pf_cluster_bw_gbps(pf_tp_groups_cluster(g), 0, 1), 1.4, 1e-12);
    pf_tp_groups_destroy(&g);

    /* T = 1: the cluster itself */
    g = pf_tp_groups_new(c, 1, 0, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_PTR_EQUAL(pf_tp_groups_cluster(g), c);
    CU_ASSERT_EQUAL(pf_tp_groups_link_gbps(g), 0);
    pf_tp_groups_destroy(&g);
    /* across hosts, T = 16: one group of both machines, slowest link between them */
    g = pf_tp_groups_new(c, 16, 1, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    PF_ASSERT_CLOSE(pf_tp_groups_link_gbps(g), 1.4, 1e-12);
    pf_tp_groups_destroy(&g);
    pf_cluster_destroy(&c);
}

/* A 256-byte name of two-byte characters (the most a file may carry): "NAME/tp2" must cut NAME
 * on a character boundary, never mid-character (the group cluster then failed its UTF-8 check and
 * `plan` said only "mapping bounds failed"). */
static void test_derived_names_utf8(void)
{
    char name[PF_NAME_MAX + 1] = "", text[2048], err[256];
    for (int i = 0; i < PF_NAME_MAX / 2; i++)
        strcat(name, "\xc3\xa9"); /* e acute */
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"devices\": [{\"id\": 0, \"host\": 0, \"name\": \"%s\", "
             "\"mem_bytes\": 1e9, \"tflops\": 1}, {\"id\": 1, \"host\": 0, \"mem_bytes\": 1e9, "
             "\"tflops\": 1}], \"bandwidth_gbps\": [[0, 10], [10, 0]]}",
             name, name);
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_cluster_load_buffer(text, strlen(text), "c.json", &c, err, sizeof err),
                          PF_OK);
    pf_tp_groups_t *g = pf_tp_groups_new(c, 2, 0, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const pf_cluster_t *gc = pf_tp_groups_cluster(g);
    const char *n = pf_cluster_name(gc), *d = pf_cluster_device(gc, 0)->name;
    CU_ASSERT_EQUAL(strlen(n), PF_NAME_MAX); /* 126 characters + "/tp2" */
    CU_ASSERT_EQUAL(pf_utf8_invalid_at(n), -1);
    CU_ASSERT_STRING_EQUAL(n + strlen(n) - 4, "/tp2");
    CU_ASSERT_EQUAL(strlen(d), PF_NAME_MAX); /* 127 characters + "+1" */
    CU_ASSERT_EQUAL(pf_utf8_invalid_at(d), -1);
    CU_ASSERT_STRING_EQUAL(d + strlen(d) - 2, "+1");
    CU_ASSERT_EQUAL(pf_cluster_validate(gc, err, sizeof err), PF_OK);
    pf_tp_groups_destroy(&g);
    pf_cluster_destroy(&c);
}

/* The dense copy (format 1) of any cluster: same devices, every pair's link looked up. */
static pf_cluster_t *dense_copy(const pf_cluster_t *c)
{
    int D = pf_cluster_ndevices(c);
    pf_cluster_t *m = pf_cluster_new(pf_cluster_name(c), D);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    for (int a = 0; a < D; a++) {
        CU_ASSERT_EQUAL(pf_cluster_set_device(m, a, pf_cluster_device(c, a)), PF_OK);
        for (int b = 0; b < D; b++)
            if (a != b) {
                pf_cluster_set_bw(m, a, b, pf_cluster_bw_gbps(c, a, b));
                pf_cluster_set_lat(m, a, b, pf_cluster_lat_us(c, a, b));
            }
    }
    return m;
}

/* Groups of T on a hierarchy (the group cluster is the hierarchy of groups) against the dense
 * path on the same links: members, devices, every group pair's bandwidth and latency, the links
 * inside the groups, the bandwidth statistics. Returns the mismatches. */
static int compare_paths(const pf_cluster_t *h, int T)
{
    char err[256];
    pf_cluster_t *m = dense_copy(h);
    pf_tp_groups_t *gh = pf_tp_groups_new(h, T, 0, err, sizeof err);
    pf_tp_groups_t *gm = pf_tp_groups_new(m, T, 0, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(gh);
    CU_ASSERT_PTR_NOT_NULL_FATAL(gm);
    const pf_cluster_t *ch = pf_tp_groups_cluster(gh), *cm = pf_tp_groups_cluster(gm);
    CU_ASSERT_PTR_NOT_NULL(pf_cluster_hierarchy(ch)); /* the fast path was taken */
    CU_ASSERT_PTR_NULL(pf_cluster_hierarchy(cm));
    int n = pf_tp_groups_count(gm), bad = pf_tp_groups_count(gh) != n;
    bad += pf_tp_groups_link_gbps(gh) != pf_tp_groups_link_gbps(gm) ||
           pf_tp_groups_link_lat_us(gh) != pf_tp_groups_link_lat_us(gm);
    bad += strcmp(pf_cluster_name(ch), pf_cluster_name(cm)) != 0;
    for (int a = 0; a < n && !bad; a++) {
        const pf_device_t *x = pf_cluster_device(ch, a), *y = pf_cluster_device(cm, a);
        bad += memcmp(pf_tp_groups_members(gh, a), pf_tp_groups_members(gm, a),
                      (size_t)T * sizeof(int)) != 0;
        bad += x->id != y->id || x->host != y->host || strcmp(x->name, y->name) ||
               x->mem_bytes != y->mem_bytes || x->tflops != y->tflops ||
               (x->device_model == NULL) != (y->device_model == NULL) ||
               (x->device_model && strcmp(x->device_model, y->device_model));
        for (int b = 0; b < n; b++)
            bad += a != b && (pf_cluster_bw_gbps(ch, a, b) != pf_cluster_bw_gbps(cm, a, b) ||
                              pf_cluster_lat_us(ch, a, b) != pf_cluster_lat_us(cm, a, b));
    }
    bad += pf_cluster_bw_median(ch) != pf_cluster_bw_median(cm) ||
           pf_cluster_bw_min(ch) != pf_cluster_bw_min(cm) ||
           pf_cluster_bw_max(ch) != pf_cluster_bw_max(cm);
    pf_tp_groups_destroy(&gh);
    pf_tp_groups_destroy(&gm);
    pf_cluster_destroy(&m);
    return bad;
}

/* DGX-A100 x 12 (leaves of 2 hosts, spines of 2 leaves, oversubscribed) and a hand-made
 * hierarchy with two host kinds, a slower NIC and a missing host: every T that divides the
 * hosts gives the dense path's groups and links. */
static void test_hier_equals_dense(void)
{
    char err[256];
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX_A100);
    o.machines = 12;
    o.hosts_per_leaf = 2;
    o.leaves_per_spine = 2;
    o.oversub = 2;
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&o, &c, err, sizeof err), PF_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pf_cluster_hierarchy(c));
    for (int T = 2; T <= 8; T *= 2)
        CU_ASSERT_EQUAL(compare_paths(c, T), 0);
    pf_cluster_destroy(&c);

    pf_cluster_level_t lv[3] = {{"host", 4, 300, 2, 1}, {"leaf", 2, 40, 5, 2},
                                {"spine", 0, 40, 8, 1}};
    pf_cluster_host_kind_t k[2] = {{"big", "a100-80g", 4, 80e9, 312, 0, -1},
                                   {"small", "h100-sxm", 8, 40e9, 900, 450, 1}};
    pf_cluster_hier_t *h = pf_cluster_hier_new(7, lv, 3, k, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(pf_cluster_hier_set_host(h, 1, 1, 0), PF_OK);
    CU_ASSERT_EQUAL(pf_cluster_hier_set_host(h, 2, -1, 0), PF_OK);
    CU_ASSERT_EQUAL(pf_cluster_hier_set_host(h, 4, 0, 12.5), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_cluster_hier_validate(h, err, sizeof err), PF_OK);
    c = pf_cluster_new_hier("mixed", h);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(pf_cluster_ndevices(c), 5 * 4 + 8);
    CU_ASSERT_EQUAL(compare_paths(c, 2), 0);
    CU_ASSERT_EQUAL(compare_paths(c, 4), 0);
    /* 8 does not divide the 28 devices: refused */
    CU_ASSERT_PTR_NULL(pf_tp_groups_new(c, 8, 0, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "does not divide the 28 devices"));
    int t[8];
    CU_ASSERT_EQUAL(pf_tp_groups_degrees(c, 0, t, 8), 3); /* 1, 2, 4 */
    CU_ASSERT_EQUAL(t[2], 4);
    pf_cluster_destroy(&c);
}

void pf_suite_tp_groups(void)
{
    CU_pSuite s = CU_add_suite("tp_groups", NULL, NULL);
    CU_add_test(s, "degrees that divide every host", test_degrees);
    CU_add_test(s, "DGX-1 groups and the group cluster, by hand", test_dgx1_groups);
    CU_add_test(s, "groups on a hierarchy equal the dense path", test_hier_equals_dense);
    CU_add_test(s, "derived names of a 256-byte UTF-8 name stay whole", test_derived_names_utf8);
}
