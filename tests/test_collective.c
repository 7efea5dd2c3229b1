/* collective: every algorithm's time on hand-worked groups, the cheapest choice, and the group
 * read from a cluster. Units: 1e9 bytes over 250 GB/s is 4 ms; 1 us = 0.001 ms. */
#include "planner/ir/collective.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>

/* 8 GPUs in one host at 250 GB/s, 5 us per step. */
static pf_collective_group_t one_host(double nvls)
{
    return (pf_collective_group_t){.n = 8, .hosts = 1, .per_host = 8, .intra_gbps = 250,
                                   .intra_lat_us = 5, .nvls_busbw_gbps = nvls};
}

/* 2 hosts x 8 GPUs, 250 GB/s NVLink at 5 us, one 25 GB/s NIC per GPU at 10 us. */
static pf_collective_group_t two_hosts(double nvls)
{
    return (pf_collective_group_t){.n = 16, .hosts = 2, .per_host = 8, .intra_gbps = 250,
                                   .intra_lat_us = 5, .inter_gbps = 25, .inter_lat_us = 10,
                                   .nvls_busbw_gbps = nvls};
}

/* An all-reduce by one algorithm (or the best, its choice into *chosen) */
static double ar(const pf_collective_group_t *g, double bytes, pf_collective_algo_t algo,
                 pf_collective_algo_t *chosen)
{
    return pf_collective_ms(g, PF_COLL_ALLREDUCE, bytes, algo, chosen);
}

static void test_one_host(void)
{
    pf_collective_group_t g = one_host(0);
    pf_collective_algo_t a;
    /* ring: 2 x 7 = 14 steps: 14 x 5 us = 0.07 ms + 14/8 x 4 ms = 7 ms */
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_RING, NULL), 7.07, 1e-12);
    /* tree: 2 x ceil(log2 8) = 6 latencies = 0.03 ms + 2 x 4 ms */
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_TREE, NULL), 8.03, 1e-12);
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_BEST, &a), 7.07, 1e-12);
    CU_ASSERT_EQUAL(a, PF_COLL_ALGO_RING);
    /* 1 kB: latency-bound, the tree's 6 latencies beat the ring's 14:
     * tree 0.03 + 2 x 1e3 / 250e6 = 0.030008, ring 0.07 + 1.75 x 4e-6 = 0.070007 */
    PF_ASSERT_CLOSE(ar(&g, 1e3, PF_COLL_ALGO_BEST, &a), 0.030008, 1e-12);
    CU_ASSERT_EQUAL(a, PF_COLL_ALGO_TREE);
    /* reduce-scatter and all-gather: 7 steps (0.035 ms) + 7/8 x 4 ms */
    PF_ASSERT_CLOSE(pf_collective_best_ms(&g, PF_COLL_REDUCE_SCATTER, 1e9), 3.535, 1e-12);
    PF_ASSERT_CLOSE(pf_collective_best_ms(&g, PF_COLL_ALLGATHER, 1e9), 3.535, 1e-12);
    /* no tree for RS, no NVLS without the switch, no hier on one host, no direct reduction */
    CU_ASSERT(isinf(pf_collective_ms(&g, PF_COLL_REDUCE_SCATTER, 1e9, PF_COLL_ALGO_TREE, NULL)));
    CU_ASSERT(isinf(ar(&g, 1e9, PF_COLL_ALGO_NVLS, NULL)));
    CU_ASSERT(isinf(ar(&g, 1e9, PF_COLL_ALGO_HIER, NULL)));
    CU_ASSERT(isinf(ar(&g, 1e9, PF_COLL_ALGO_DIRECT, NULL)));
    /* broadcast: a chain, 7 latencies + 4 ms; p2p: 1 latency + 4 ms */
    PF_ASSERT_CLOSE(pf_collective_best_ms(&g, PF_COLL_BROADCAST, 1e9), 4.035, 1e-12);
    PF_ASSERT_CLOSE(pf_collective_best_ms(&g, PF_COLL_P2P, 1e9), 4.005, 1e-12);
    /* all-to-all: 7/8 of the buffer leaves over NVLink: 0.005 + 7/8 x 4 */
    PF_ASSERT_CLOSE(pf_collective_best_ms(&g, PF_COLL_ALLTOALL, 1e9), 3.505, 1e-12);
    /* one member or nothing to move: free */
    g.n = 1;
    CU_ASSERT_EQUAL(pf_collective_best_ms(&g, PF_COLL_ALLREDUCE, 1e9), 0);
    g = one_host(0);
    CU_ASSERT_EQUAL(pf_collective_best_ms(&g, PF_COLL_ALLREDUCE, 0), 0);
}

static void test_nvls(void)
{
    /* the switch reduces: bus bandwidth 480 GB/s instead of 250; 2 latencies (0.01 ms) +
     * 14/8 x 1e9 / 480e6 = 3.6458333 ms */
    pf_collective_group_t g = one_host(480);
    pf_collective_algo_t a;
    double nvls = 0.01 + 1.75 * 1e9 / 480e6;
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_NVLS, NULL), nvls, 1e-12);
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_BEST, &a), nvls, 1e-12);
    CU_ASSERT_EQUAL(a, PF_COLL_ALGO_NVLS);
    /* RS: 1 latency + 7/8 x 1e9 / 480e6 */
    PF_ASSERT_CLOSE(pf_collective_best_ms(&g, PF_COLL_REDUCE_SCATTER, 1e9),
                    0.005 + 0.875 * 1e9 / 480e6, 1e-12);
    /* a group across hosts has no single switch: NVLS does not apply to it as a whole */
    g = two_hosts(480);
    CU_ASSERT(isinf(ar(&g, 1e9, PF_COLL_ALGO_NVLS, NULL)));
}

static void test_two_hosts(void)
{
    pf_collective_group_t g = two_hosts(0);
    pf_collective_algo_t a;
    /* ring: 8 channels over the 8 NICs: min(250, 8 x 25) = 200 GB/s; 30 steps of the inter-host
     * latency (0.3 ms) + 30/16 x 1e9 / 200e6 = 9.375 ms */
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_RING, NULL), 9.675, 1e-12);
    /* tree: 2 (3 x 5 + 1 x 10) us = 0.05 ms + 2 x 5 ms */
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_TREE, NULL), 10.05, 1e-12);
    /* hier: RS in the host 3.535 + all-reduce of 1e9/8 over 2 hosts on each NIC (2 steps of
     * 10 us + 2/2 x 1.25e8 / 25e6 = 5 ms) + AG in the host 3.535 */
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_HIER, NULL), 12.09, 1e-12);
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_BEST, &a), 9.675, 1e-12);
    CU_ASSERT_EQUAL(a, PF_COLL_ALGO_RING);
    /* 1 MB: ring 0.3 + 1.875 x 0.005 = 0.309375; tree 0.05 + 2 x 0.005 = 0.06;
     * hier (0.035 + 0.0035) x 2 + (0.02 + 0.005) = 0.102: the tree */
    PF_ASSERT_CLOSE(ar(&g, 1e6, PF_COLL_ALGO_BEST, &a), 0.06, 1e-12);
    CU_ASSERT_EQUAL(a, PF_COLL_ALGO_TREE);
    /* with NVLS in each host the intra phases run at 480: RS 0.005 + 7/8 x 1e9 / 480e6, twice,
     * + 5.02 across: 8.6758 beats the ring's 9.675 */
    g = two_hosts(480);
    double intra = 0.005 + 0.875 * 1e9 / 480e6;
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_BEST, &a), 2 * intra + 5.02, 1e-12);
    CU_ASSERT_EQUAL(a, PF_COLL_ALGO_HIER);
    g = two_hosts(0);
    /* all-gather: ring 15 x 0.01 + 15/16 x 5 = 4.8375; hier 3.535 + (0.01 + 1/2 x 5) = 6.045 */
    PF_ASSERT_CLOSE(pf_collective_ms(&g, PF_COLL_ALLGATHER, 1e9, PF_COLL_ALGO_HIER, NULL), 6.045,
                    1e-12);
    PF_ASSERT_CLOSE(pf_collective_best_ms(&g, PF_COLL_ALLGATHER, 1e9), 4.8375, 1e-12);
    /* all-to-all: 7/16 over NVLink (1.75 ms) and 8/16 through the NIC (20 ms) at once */
    PF_ASSERT_CLOSE(pf_collective_best_ms(&g, PF_COLL_ALLTOALL, 1e9), 20.01, 1e-12);
    /* p2p between hosts: 0.01 + 40 */
    PF_ASSERT_CLOSE(pf_collective_best_ms(&g, PF_COLL_P2P, 1e9), 40.01, 1e-12);
}

/* 2 hosts x 8 GPUs sharing 2 NICs a host (nics_per_host = 2): the ring's channels get 2 x 25
 * GB/s, the hierarchical algorithm's 8 rings of the inter-host phase take turns on 2 NICs. */
static void test_shared_nics(void)
{
    pf_collective_group_t g = two_hosts(0);
    g.nics_per_host = 2;
    pf_collective_algo_t a;
    /* ring: 0.3 + 30/16 x 1e9 / min(250, 50)e6 = 0.3 + 37.5 */
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_RING, NULL), 37.8, 1e-12);
    /* tree: 0.05 + 2 x 1e9 / 50e6 */
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_TREE, NULL), 40.05, 1e-12);
    /* hier: 3.535 + (0.02 + 1.25e8 / (25e6 x 2 / 8)) + 3.535 = 3.535 + 20.02 + 3.535: now the
     * cheapest (NCCL's reason for hierarchical algorithms on hosts with few NICs) */
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_BEST, &a), 27.09, 1e-12);
    CU_ASSERT_EQUAL(a, PF_COLL_ALGO_HIER);
    /* all-to-all: the 8/16 leaving the host go 8 members to 2 NICs: 20 ms x 4 */
    PF_ASSERT_CLOSE(pf_collective_best_ms(&g, PF_COLL_ALLTOALL, 1e9), 80.01, 1e-12);
    /* more NICs than members changes nothing */
    g.nics_per_host = 16;
    PF_ASSERT_CLOSE(pf_collective_best_ms(&g, PF_COLL_ALLREDUCE, 1e9), 9.675, 1e-12);
}

/* One GPU per host (the data-parallel group of a rank whose tensor-parallel group fills its
 * host): the ring on the NIC, as eq. 7 prices it: 2 (R-1)/R x bytes / B + 2 latencies. */
static void test_one_per_host_is_eq7(void)
{
    pf_collective_group_t g = {.n = 4, .hosts = 4, .per_host = 1, .inter_gbps = 25,
                               .inter_lat_us = 10};
    PF_ASSERT_CLOSE(ar(&g, 1e9, PF_COLL_ALGO_RING, NULL), 6 * 0.01 + 1.5 * 40, 1e-12);
    /* hier needs two members on a host */
    CU_ASSERT(isinf(ar(&g, 1e9, PF_COLL_ALGO_HIER, NULL)));
    /* tree: 2 x ceil(log2 4) x 10 us + 2 x 40 ms: the ring wins at 1 GB */
    PF_ASSERT_CLOSE(pf_collective_best_ms(&g, PF_COLL_ALLREDUCE, 1e9), 60.06, 1e-12);
}

/* 16 devices, 8 per host: 250 GB/s at 5 us inside, 25 GB/s at 10 us between. */
static pf_cluster_t *cluster_2x8(void)
{
    pf_cluster_t *c = pf_cluster_new("2x8", 16);
    for (int i = 0; i < 16; i++) {
        pf_device_t d = {.id = i, .host = i / 8, .name = "gpu", .mem_bytes = 80e9};
        pf_cluster_set_device(c, i, &d);
    }
    for (int a = 0; a < 16; a++)
        for (int b = a + 1; b < 16; b++)
            pf_cluster_set_link(c, a, b, a / 8 == b / 8 ? 250 : 25, a / 8 == b / 8 ? 5 : 10);
    return c;
}

static void test_from_cluster(void)
{
    pf_cluster_t *c = cluster_2x8();
    int all[16];
    for (int i = 0; i < 16; i++)
        all[i] = i;
    pf_collective_group_t g;
    CU_ASSERT_EQUAL_FATAL(pf_collective_group_from_cluster(c, all, 16, 0, &g), PF_OK);
    CU_ASSERT_EQUAL(g.n, 16);
    CU_ASSERT_EQUAL(g.hosts, 2);
    CU_ASSERT_EQUAL(g.per_host, 8);
    PF_ASSERT_CLOSE(g.intra_gbps, 250, 1e-12);
    PF_ASSERT_CLOSE(g.intra_lat_us, 5, 1e-12);
    PF_ASSERT_CLOSE(g.inter_gbps, 25, 1e-12);
    PF_ASSERT_CLOSE(g.inter_lat_us, 10, 1e-12);
    /* the same result as the hand-built two_hosts group */
    PF_ASSERT_CLOSE(pf_collective_best_ms(&g, PF_COLL_ALLREDUCE, 1e9), 9.675, 1e-12);
    /* uneven: 3 members on host 0 (one ring link slowed to 100 GB/s), 1 on host 1 */
    int uneven[4] = {8, 0, 1, 2};
    pf_cluster_set_link(c, 1, 2, 100, 7);
    CU_ASSERT_EQUAL(pf_collective_group_from_cluster(c, uneven, 4, 480, &g), PF_OK);
    CU_ASSERT_EQUAL(g.hosts, 2);
    CU_ASSERT_EQUAL(g.per_host, 3);
    PF_ASSERT_CLOSE(g.intra_gbps, 100, 1e-12);
    PF_ASSERT_CLOSE(g.intra_lat_us, 7, 1e-12);
    PF_ASSERT_CLOSE(g.inter_gbps, 25, 1e-12);
    PF_ASSERT_CLOSE(g.nvls_busbw_gbps, 480, 1e-12);
    /* a link outside the ring (0 -> 2 is one: 2 is host 0's last, 0 its first) does count;
     * 8's only rail is 8 -> 0 */
    int one_each[2] = {3, 11};
    CU_ASSERT_EQUAL(pf_collective_group_from_cluster(c, one_each, 2, 0, &g), PF_OK);
    CU_ASSERT_EQUAL(g.hosts, 2);
    CU_ASSERT_EQUAL(g.per_host, 1);
    CU_ASSERT_EQUAL(g.intra_gbps, 0);
    PF_ASSERT_CLOSE(g.inter_gbps, 25, 1e-12);
    pf_cluster_destroy(&c);
}

/* NVLS comes from the members' device models: 8 H100 of one host all-reduce at 480 GB/s, so
 * 1 GB costs 2 x 5 us + 1.75 x 1e9 / 480e6 = 3.656 ms (test_nvls's formula) and NVLS beats
 * the ring's 1.75 x 1e9 / 250e6 = 7 ms; one A100 among them turns it off; a caller's value
 * wins. */
static void test_nvls_from_models(void)
{
    pf_cluster_t *c = cluster_2x8();
    for (int i = 0; i < 16; i++) {
        pf_device_t d = *pf_cluster_device(c, i);
        d.device_model = i == 15 ? "a100-80g" : "h100-sxm";
        CU_ASSERT_EQUAL(pf_cluster_set_device(c, i, &d), PF_OK);
    }
    int host0[8] = {0, 1, 2, 3, 4, 5, 6, 7}, host1[8] = {8, 9, 10, 11, 12, 13, 14, 15};
    pf_collective_group_t g;
    pf_collective_algo_t a;
    CU_ASSERT_EQUAL_FATAL(pf_collective_group_from_cluster(c, host0, 8, 0, &g), PF_OK);
    PF_ASSERT_CLOSE(g.nvls_busbw_gbps, 480, 1e-12);
    PF_ASSERT_CLOSE(pf_collective_ms(&g, PF_COLL_ALLREDUCE, 1e9, PF_COLL_ALGO_BEST, &a),
                    0.01 + 1.75 * 1e9 / 480e6, 1e-12);
    CU_ASSERT_EQUAL(a, PF_COLL_ALGO_NVLS);
    CU_ASSERT_EQUAL_FATAL(pf_collective_group_from_cluster(c, host1, 8, 0, &g), PF_OK);
    CU_ASSERT_EQUAL(g.nvls_busbw_gbps, 0);
    CU_ASSERT_EQUAL_FATAL(pf_collective_group_from_cluster(c, host1, 8, 300, &g), PF_OK);
    CU_ASSERT_EQUAL(g.nvls_busbw_gbps, 300);
    pf_cluster_destroy(&c);
}

void pf_suite_collective(void)
{
    CU_pSuite s = CU_add_suite("collective", NULL, NULL);
    CU_add_test(s, "8 GPUs in one host: ring, tree, RS/AG, broadcast, p2p, all-to-all",
                test_one_host);
    CU_add_test(s, "NVLS inside an NVSwitch host", test_nvls);
    CU_add_test(s, "2 hosts x 8: ring over the NICs, tree, hierarchical, the choice",
                test_two_hosts);
    CU_add_test(s, "2 hosts x 8 on 2 NICs a host: hierarchical wins", test_shared_nics);
    CU_add_test(s, "one GPU per host: the ring of eq. 7", test_one_per_host_is_eq7);
    CU_add_test(s, "the group of cluster devices", test_from_cluster);
    CU_add_test(s, "NVLS from the members' device models", test_nvls_from_models);
}
