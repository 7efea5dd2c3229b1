/* cluster_hier: a cluster described by its hierarchy (format 2) against the dense generators, a
 * hand-worked hierarchy with exceptions, statistics by brute force, files, the wire, and bad
 * inputs with their located messages. */
#include "planner/ir/cluster_hier.h"
#include "planner/ir/cluster.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/topology.h"
#include "planner/search/search.h"
#include "planner/core/util.h"
#include "proto/arena.h"
#include "proto/model_codec.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pf_cluster_t *generate(pf_topology_kind_t kind, int machines, int matrix, int per_leaf)
{
    char err[256];
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, kind);
    o.machines = machines;
    o.matrix = matrix;
    if (kind == PF_TOPOLOGY_NVSWITCH) { /* 4 GPUs and one latency everywhere */
        o.gpus_per_machine = 4;
        o.latency_us = 1.5;
    }
    if (per_leaf > 0) {
        o.hosts_per_leaf = per_leaf;
        o.leaves_per_spine = 2;
    }
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL(pf_topology_build(&o, &c, err, sizeof err), PF_OK);
    return c;
}

/* Every pair, every device: the hierarchy and the dense matrix of the same generator agree. */
static void check_equal(const pf_cluster_t *h, const pf_cluster_t *m)
{
    int D = pf_cluster_ndevices(m);
    CU_ASSERT_PTR_NOT_NULL(pf_cluster_hierarchy(h));
    CU_ASSERT_PTR_NULL(pf_cluster_hierarchy(m));
    CU_ASSERT_EQUAL_FATAL(pf_cluster_ndevices(h), D);
    CU_ASSERT_EQUAL(pf_cluster_nhosts(h), pf_cluster_nhosts(m));
    CU_ASSERT_EQUAL(pf_cluster_has_latency(h), pf_cluster_has_latency(m));
    int bad = 0;
    for (int a = 0; a < D; a++) {
        const pf_device_t *x = pf_cluster_device(h, a), *y = pf_cluster_device(m, a);
        bad += x->id != y->id || x->host != y->host || strcmp(x->name, y->name) ||
               x->mem_bytes != y->mem_bytes || x->tflops != y->tflops;
        for (int b = 0; b < D; b++)
            bad += pf_cluster_bw_gbps(h, a, b) != pf_cluster_bw_gbps(m, a, b) ||
                   pf_cluster_lat_us(h, a, b) != pf_cluster_lat_us(m, a, b) ||
                   pf_cluster_xfer_ms(h, a, b, 1e6) != pf_cluster_xfer_ms(m, a, b, 1e6);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(pf_cluster_bw_min(h), pf_cluster_bw_min(m));
    CU_ASSERT_EQUAL(pf_cluster_bw_median(h), pf_cluster_bw_median(m));
    CU_ASSERT_EQUAL(pf_cluster_bw_max(h), pf_cluster_bw_max(m));
    /* the materialized matrices are the dense ones, entry for entry */
    const double *hb = pf_cluster_bw_matrix(h), *mb = pf_cluster_bw_matrix(m);
    const double *hl = pf_cluster_lat_matrix(h), *ml = pf_cluster_lat_matrix(m);
    CU_ASSERT_FATAL(hb && hl);
    CU_ASSERT(memcmp(hb, mb, (size_t)D * D * sizeof *hb) == 0);
    CU_ASSERT(memcmp(hl, ml, (size_t)D * D * sizeof *hl) == 0);
}

static void test_equals_dense(void)
{
    const pf_topology_kind_t kinds[] = {PF_TOPOLOGY_DGX_A100, PF_TOPOLOGY_DGX_H100,
                                        PF_TOPOLOGY_NVSWITCH};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int machines = 2; machines <= 4; machines += 2)
            for (int per_leaf = 0; per_leaf <= 1; per_leaf++) { /* 1: four levels at 4 hosts */
                pf_cluster_t *h = generate(kinds[k], machines, 0, per_leaf);
                pf_cluster_t *m = generate(kinds[k], machines, 1, per_leaf);
                CU_ASSERT_FATAL(h && m);
                CU_ASSERT_EQUAL(pf_cluster_hier_nlevels(pf_cluster_hierarchy(h)),
                                per_leaf && machines == 4 ? 4 : per_leaf ? 3 : 2);
                check_equal(h, m);
                pf_cluster_destroy(&h);
                pf_cluster_destroy(&m);
            }
}

/* Six host slots under leaves of two, the leaves' uplinks oversubscribed 4:1; host 3 missing,
 * host 4 of a one-GPU kind, host 5 behind a 2 GB/s NIC:
 *   host 0: d0 d1   host 1: d2 d3 | host 2: d4 d5   host 3: -  | host 4: d6   host 5: d7 d8
 * inside a host 100 GB/s, 1 us; under one leaf 20 GB/s, 3 us; across the spine 16 / 4 = 4 GB/s,
 * 7 us; host 5's GPUs at most 2 GB/s above their host. */
static const char *hand_json =
    "{\"name\": \"hand\", \"format\": 2, \"hierarchy\": {\"hosts\": 6,"
    " \"levels\": [{\"name\": \"host\", \"count\": 2, \"bw_gbps\": 100, \"latency_us\": 1},"
    "  {\"name\": \"leaf\", \"count\": 2, \"bw_gbps\": 20, \"latency_us\": 3, "
    "\"oversubscription\": 4},"
    "  {\"name\": \"spine\", \"count\": 0, \"bw_gbps\": 16, \"latency_us\": 7}],"
    " \"host_kinds\": [{\"name\": \"big\", \"mem_bytes\": 8e9, \"tflops\": 10, "
    "\"device_model\": \"h100-sxm5-80gb\"},"
    "  {\"name\": \"small\", \"gpus\": 1, \"mem_bytes\": 4e9, \"tflops\": 5, \"bw_gbps\": 50, "
    "\"latency_us\": 2}],"
    " \"exceptions\": [{\"host\": 3, \"missing\": true}, {\"host\": 4, \"kind\": \"small\"},"
    "  {\"host\": 5, \"nic_gbps\": 2}]}}";

static void check_hand(const pf_cluster_t *c)
{
    CU_ASSERT_EQUAL_FATAL(pf_cluster_ndevices(c), 9);
    CU_ASSERT_EQUAL(pf_cluster_nhosts(c), 5);
    const int host[9] = {0, 0, 1, 1, 2, 2, 4, 5, 5};
    for (int i = 0; i < 9; i++)
        CU_ASSERT_EQUAL(pf_cluster_device(c, i)->host, host[i]);
    CU_ASSERT_STRING_EQUAL(pf_cluster_device(c, 6)->name, "node4/gpu0");
    CU_ASSERT_EQUAL(pf_cluster_device(c, 6)->mem_bytes, 4e9);
    CU_ASSERT_EQUAL(pf_cluster_device(c, 7)->tflops, 10);
    CU_ASSERT_EQUAL(pf_cluster_min_mem_bytes(c), 4e9);
    const struct {
        int a, b;
        double gbps, us;
    } pairs[] = {{0, 1, 100, 1}, {0, 2, 20, 3}, {3, 1, 20, 3}, {0, 4, 4, 7},   {5, 2, 4, 7},
                 {0, 6, 4, 7},   {7, 0, 2, 7},  {6, 7, 2, 3},  {8, 7, 100, 1}, {4, 5, 100, 1},
                 {3, 3, 0, 0}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, pairs[i].a, pairs[i].b), pairs[i].gbps);
        CU_ASSERT_EQUAL(pf_cluster_lat_us(c, pairs[i].a, pairs[i].b), pairs[i].us);
    }
    /* 72 ordered pairs: 28 at 2 (host 5 with host 4 under their leaf: 4, across the spine with
     * hosts 0-2: 24), 28 at 4, 8 at 20 (leaf 0), 8 at 100 (inside hosts 0, 1, 2, 5); the median
     * is the mean of the 36th and 37th smallest: 4 */
    /* per level, without NIC exceptions: 100 inside, 20 under a leaf, 16 / 4 across the spine */
    const pf_cluster_hier_t *h = pf_cluster_hierarchy(c);
    CU_ASSERT_EQUAL(pf_cluster_hier_level_pair_gbps(h, 0), 100);
    CU_ASSERT_EQUAL(pf_cluster_hier_level_pair_gbps(h, 1), 20);
    CU_ASSERT_EQUAL(pf_cluster_hier_level_pair_gbps(h, 2), 4);
    CU_ASSERT_EQUAL(pf_cluster_bw_min(c), 2);
    CU_ASSERT_EQUAL(pf_cluster_bw_median(c), 4);
    CU_ASSERT_EQUAL(pf_cluster_bw_max(c), 100);
    CU_ASSERT(pf_cluster_is_symmetric(c));
    CU_ASSERT(pf_cluster_has_latency(c));
    char err[256];
    CU_ASSERT_EQUAL(pf_cluster_validate(c, err, sizeof err), PF_OK);
}

/* The statistics of a hierarchy are the dense matrix's on its materialized copy. */
static void check_stats_by_matrix(const pf_cluster_t *c)
{
    int D = pf_cluster_ndevices(c);
    pf_cluster_t *m = pf_cluster_new("copy", D);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const double *bw = pf_cluster_bw_matrix(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bw);
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++)
            pf_cluster_set_bw(m, a, b, bw[(size_t)a * D + b]);
    CU_ASSERT_EQUAL(pf_cluster_bw_min(c), pf_cluster_bw_min(m));
    CU_ASSERT_EQUAL(pf_cluster_bw_median(c), pf_cluster_bw_median(m));
    CU_ASSERT_EQUAL(pf_cluster_bw_max(c), pf_cluster_bw_max(m));
    pf_cluster_destroy(&m);
}

static void test_hand_worked(void)
{
    char err[512] = "";
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_cluster_load(pf_test_write("hand.json", hand_json), &c, err,
                                          sizeof err),
                          PF_OK);
    check_hand(c);
    check_stats_by_matrix(c);
    const pf_cluster_hier_t *h = pf_cluster_hierarchy(c);
    CU_ASSERT_EQUAL(pf_cluster_hier_nexceptions(h), 3);
    CU_ASSERT_STRING_EQUAL(pf_cluster_hier_kind(h, 0)->device_model, "h100-sxm5-80gb");
    CU_ASSERT_PTR_NULL(pf_cluster_hier_kind(h, 1)->device_model);
    CU_ASSERT_EQUAL(pf_cluster_hier_common_level(h, 0, 1), 1);
    CU_ASSERT_EQUAL(pf_cluster_hier_common_level(h, 1, 5), 2);

    /* the file round trip: the same cluster, and the same text when written again */
    const char *path = pf_test_write("hand2.json", "");
    CU_ASSERT_EQUAL_FATAL(pf_cluster_save(c, path, err, sizeof err), PF_OK);
    pf_cluster_t *d = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_cluster_load(path, &d, err, sizeof err), PF_OK);
    check_hand(d);
    pf_cluster_destroy(&d);

    /* the wire: the hierarchy travels as its JSON text, not as D x D */
    pf_arena_t *a = pf_arena_new();
    Planfarm__Cluster *m = pf_model_codec_cluster_to_pb(a, c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(m->n_devices, 0);
    CU_ASSERT_EQUAL(m->n_bandwidth_gbps, 0);
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_cluster_from_pb(m, &d, err, sizeof err), PF_OK);
    check_hand(d);
    pf_cluster_destroy(&d);
    pf_arena_destroy(&a);
    pf_cluster_destroy(&c);
}

/* Above PF_CLUSTER_MATRIX_MAX_DEVICES the matrix is refused (NULL), the pairs still answer. */
static void test_matrix_refused_when_too_large(void)
{
    pf_cluster_t *c = generate(PF_TOPOLOGY_DGX_H100, PF_CLUSTER_MATRIX_MAX_DEVICES / 8 + 1, 0, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(pf_cluster_ndevices(c), PF_CLUSTER_MATRIX_MAX_DEVICES + 8);
    CU_ASSERT_PTR_NULL(pf_cluster_bw_matrix(c));
    CU_ASSERT_PTR_NULL(pf_cluster_lat_matrix(c));
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 0, PF_CLUSTER_MATRIX_MAX_DEVICES + 7), 50);
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 0, 7), 370);
    CU_ASSERT_EQUAL(pf_cluster_bw_median(c), 50);
    pf_cluster_destroy(&c);
    /* 16,384 machines (131,072 GPUs) as a hierarchy; one more is refused, as is a matrix of 4 */
    char err[256] = "";
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX_H100);
    o.machines = PF_TOPOLOGY_MAX_MACHINES;
    CU_ASSERT_EQUAL(pf_topology_build(&o, &c, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_cluster_ndevices(c), 131072);
    pf_cluster_destroy(&c);
    o.machines++;
    CU_ASSERT_EQUAL(pf_topology_build(&o, &c, err, sizeof err), PF_EINPUT);
    o.machines = PF_TOPOLOGY_MAX_DEVICES / 8 + 1;
    o.matrix = 1;
    CU_ASSERT_EQUAL(pf_topology_build(&o, &c, err, sizeof err), PF_EINPUT);
}

#define LV0 "{\"name\": \"host\", \"count\": 8, \"bw_gbps\": 100}"
#define LV1 "{\"name\": \"leaf\", \"count\": 0, \"bw_gbps\": 10}"
#define KIND "{\"name\": \"k\", \"mem_bytes\": 1e9}"
#define HIER(hosts, levels, kinds, rest)                                                         \
    "{\"hierarchy\": {\"hosts\": " #hosts ", \"levels\": [" levels "], \"host_kinds\": [" kinds \
    "]" rest "}}"

static const struct {
    const char *text, *expect;
} bad[] = {
    {HIER(2, LV0, KIND, ""), "c.json: hierarchy.levels: 2 hosts need a level above the host"},
    {HIER(2, LV0 ", {\"count\": 0, \"bw_gbps\": 0}", KIND, ""),
     "c.json: hierarchy.levels[1].bw_gbps: zero"},
    {HIER(4, LV0 ", {\"count\": 2, \"bw_gbps\": 10}", KIND, ""),
     "c.json: hierarchy.levels: the top level holds 2 hosts, but hierarchy.hosts is 4"},
    {HIER(4, LV0 ", {\"count\": 0, \"bw_gbps\": 10, \"oversubscription\": 0.5}", KIND, ""),
     "c.json: hierarchy.levels[1].oversubscription: 0.5, must be in [1, 1e6]"},
    {HIER(4, "{\"count\": 8, \"bw_gbps\": 100, \"oversubscription\": 2}, " LV1, KIND, ""),
     "c.json: hierarchy.levels[0].oversubscription: the host level has none"},
    {HIER(4, LV0 ", " LV1, "{\"name\": \"k\"}", ""),
     "c.json: hierarchy.host_kinds[0].mem_bytes: missing"},
    /* a host kind's optional fields: absent means the host level's, given must be valid */
    {HIER(4, LV0 ", " LV1, "{\"name\": \"k\", \"mem_bytes\": 1e9, \"gpus\": 0}", ""),
     "c.json: hierarchy.host_kinds[0].gpus: zero"},
    {HIER(4, LV0 ", " LV1, "{\"name\": \"k\", \"mem_bytes\": 1e9, \"gpus\": 4097}", ""),
     "c.json: hierarchy.host_kinds[0].gpus: 4097, must be in [1, 4096]"},
    {HIER(4, LV0 ", " LV1, "{\"name\": \"k\", \"mem_bytes\": 1e9, \"bw_gbps\": 0}", ""),
     "c.json: hierarchy.host_kinds[0].bw_gbps: zero"},
    {HIER(4, LV0 ", " LV1, "{\"name\": \"k\", \"mem_bytes\": 1e9, \"latency_us\": -1}", ""),
     "c.json: hierarchy.host_kinds[0].latency_us: negative (-1)"},
    {HIER(4, LV0 ", " LV1, KIND ", " KIND, ""),
     "c.json: hierarchy.host_kinds[1].name: 'k' is also host_kinds[0]"},
    {HIER(4, LV0 ", " LV1, KIND, ", \"exceptions\": [{\"host\": 1, \"kind\": \"x\"}]"),
     "c.json: hierarchy.exceptions[0].kind: 'x' is not a host kind"},
    {HIER(4, LV0 ", " LV1, KIND, ", \"exceptions\": [{\"host\": 9, \"missing\": true}]"),
     "c.json: hierarchy.exceptions[0].host: 9, but there are 4 hosts"},
    {HIER(4, LV0 ", " LV1, KIND, ", \"exceptions\": [{\"host\": 1}]"),
     "c.json: hierarchy.exceptions[0]: says nothing"},
    {HIER(4, LV0 ", " LV1, KIND, ", \"exceptions\": [{\"host\": 1, \"nic_gbps\": -1}]"),
     "c.json: hierarchy.exceptions[0].nic_gbps: negative"},
    {HIER(1, LV0, KIND, ", \"exceptions\": [{\"host\": 0, \"missing\": true}]"),
     "c.json: hierarchy: every host is missing"},
    {HIER(0, LV0, KIND, ""), "c.json: hierarchy.hosts: 0, must be in [1, 1048576]"},
    {"{\"hierarchy\": {\"hosts\": 1, \"levels\": [], \"host_kinds\": [" KIND "]}}",
     "c.json: hierarchy.levels: 0 levels, expected 1 to 8"},
    {"{\"devices\": [], \"hierarchy\": {}}", "c.json: cluster: \"hierarchy\" and \"devices\": give one"},
    {"{\"format\": 3, \"hierarchy\": {}}", "c.json: cluster.format: 3, this reader knows 1"},
    {"{\"format\": 2, \"devices\": []}", "c.json: cluster.format: 2, but the file has no \"hierarchy\""},
    {"{\"hierarchy\": [1]}", "c.json: hierarchy: not an object"},
};

static void test_bad_hierarchies(void)
{
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[512] = "";
        pf_cluster_t *c = NULL;
        int rc = pf_cluster_load(pf_test_write("c.json", bad[i].text), &c, err, sizeof err);
        CU_ASSERT_EQUAL(rc, PF_EINPUT);
        CU_ASSERT_PTR_NULL(c);
        CU_ASSERT(pf_test_err_from(err, "c.json", bad[i].expect, i));
    }
}

/* A matrix file without "format" (every file written before format 2) loads as it did; with
 * "format": 1 too. */
static void test_matrix_files_unchanged(void)
{
    const char *text[] = {
        "{\"devices\": [{\"id\": 0, \"mem_bytes\": 1e9}, {\"id\": 1, \"mem_bytes\": 1e9}], "
        "\"bandwidth_gbps\": [[0, 3], [5, 0]]}",
        "{\"format\": 1, \"devices\": [{\"id\": 0, \"mem_bytes\": 1e9}, {\"id\": 1, "
        "\"mem_bytes\": 1e9}], \"bandwidth_gbps\": [[0, 3], [5, 0]]}"};
    for (int i = 0; i < 2; i++) {
        char err[256] = "";
        pf_cluster_t *c = NULL;
        CU_ASSERT_EQUAL_FATAL(pf_cluster_load(pf_test_write("m.json", text[i]), &c, err,
                                              sizeof err),
                              PF_OK);
        CU_ASSERT_PTR_NULL(pf_cluster_hierarchy(c));
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 0, 1), 3);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 1, 0), 5);
        CU_ASSERT_EQUAL(pf_cluster_bw_median(c), 4);
        CU_ASSERT(!pf_cluster_is_symmetric(c));
        pf_cluster_destroy(&c);
    }
}

/* The whole search in process (every job run here, in order): its plan. */
static pf_plan_t *search_plan(const pf_graph_t *g, const pf_cluster_t *c, int tp)
{
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.tp = tp;
    pf_plan_t *p = pf_test_search(g, c, &o, NULL);
    CU_ASSERT_PTR_NOT_NULL(p);
    return p;
}

/* Plans on a hierarchy equal the matrix path's (issue 23): a small GPT on 2 and 4 DGX A100
 * hosts, T = 1 and T = 2, every number and every device of the plan. */
static void test_plans_equal_dense(void)
{
    char err[256];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 4;
    mo.hidden = 512;
    mo.heads = 8;
    mo.seq = 256;
    mo.vocab = 8192;
    pf_graph_t *g = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    for (int machines = 2; machines <= 4; machines += 2)
        for (int tp = 1; tp <= 2; tp++) {
            pf_cluster_t *h = generate(PF_TOPOLOGY_DGX_A100, machines, 0, 1);
            pf_cluster_t *m = generate(PF_TOPOLOGY_DGX_A100, machines, 1, 1);
            pf_plan_t *a = search_plan(g, h, tp), *b = search_plan(g, m, tp);
            CU_ASSERT_FATAL(a && b);
            CU_ASSERT(a->stages == b->stages && a->replicas == b->replicas &&
                      a->tensor_parallel == b->tensor_parallel && a->tensor_parallel == tp &&
                      a->microbatches == b->microbatches);
            CU_ASSERT_EQUAL(a->objective_ms, b->objective_ms);
            CU_ASSERT_EQUAL(a->simulated_step_ms, b->simulated_step_ms);
            CU_ASSERT_EQUAL(a->cs_map.simulated_step_ms, b->cs_map.simulated_step_ms);
            CU_ASSERT_EQUAL(a->p2p_map.simulated_step_ms, b->p2p_map.simulated_step_ms);
            int n = a->replicas * a->tensor_parallel;
            if (getenv("PF_TEST_VERBOSE"))
                fprintf(stderr, "  %d hosts, T %d: %d x %d x %d, step %g ms\n", machines, tp,
                        a->stages, a->replicas, a->tensor_parallel, a->simulated_step_ms);
            for (int st = 0; st < a->stages && st < b->stages; st++) {
                CU_ASSERT_EQUAL(a->stage_list[st].nops, b->stage_list[st].nops);
                CU_ASSERT(memcmp(pf_plan_stage_devices(a, st), pf_plan_stage_devices(b, st),
                                 (size_t)n * sizeof(int)) == 0);
            }
            pf_plan_destroy(&a);
            pf_plan_destroy(&b);
            pf_cluster_destroy(&h);
            pf_cluster_destroy(&m);
        }
    pf_graph_destroy(&g);
}

void pf_suite_cluster_hier(void)
{
    CU_pSuite s = CU_add_suite("cluster_hier", NULL, NULL);
    CU_add_test(s, "the hierarchy equals the dense generators pair by pair", test_equals_dense);
    CU_add_test(s, "hand-worked: levels, oversubscription, exceptions, statistics, file, wire",
                test_hand_worked);
    CU_add_test(s, "131,072 GPUs; the matrix refused above its cap",
                test_matrix_refused_when_too_large);
    CU_add_test(s, "bad hierarchies: located errors", test_bad_hierarchies);
    CU_add_test(s, "matrix files load unchanged", test_matrix_files_unchanged);
    CU_add_test(s, "plans on a hierarchy equal the matrix path's", test_plans_equal_dense);
}
