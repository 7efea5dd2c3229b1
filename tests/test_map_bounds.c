/* map_bounds: eq. 6 / 7 stage times and the eq. 10 / 11 lower bounds worked by hand (with the
 * baselines and the search on the same example), the ring connectivity bound and ring capacity. */
#include "planner/map/mapping.h"
#include "planner/map/map_bounds.h"
#include "planner/ir/cluster_hier.h"
#include "planner/core/rng.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"
#include "tests/map_fixtures.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- hand-worked example */

/* Two stages, two replicas, four devices.
 *   c_u = 1, 2 ms; P = 1e9, 2e9 bytes; M(0, 1) = 1e8 bytes.
 *   B(0,1) = B(2,3) = 100 GB/s, lat 2 us; B(0,2) = B(1,3) = 10 GB/s, lat 10 us;
 *   B(0,3) = B(1,2) = 1 GB/s, lat 10 us.
 * CS map: x = s * R + r -> device x: (s0: 0, 1), (s1: 2, 3).
 *   eq. 8: every stage replica talks over a 10 GB/s link: 0.010 + 1e8 / 1e7 = 10.01 ms.
 *   eq. 9 (R = 2: 2 (R-1)/R = 1, ring pairs 0->1 and 1->0): s0 over 100 GB/s: 1e9 / 1e8 = 10 ms;
 *   s1: 2e9 / 1e8 = 20 ms.
 *   m:    s0: 1 + 10.01 = 11.01, s1: 2 + 10.01 = 12.01           -> 12.01
 *   ar:   s0: 1 + 10 = 11,       s1: 2 + 20 = 22                 -> 22
 *   full: s0: 1 + 10.01 + 10 = 21.01, s1: 2 + 10.01 + 20 = 32.01 -> 32.01
 *   step (MB = 4): (4 + 2 - 1) x 12.01 + 20 = 80.05
 * p2p map: replica r stage s -> r * S + s: dev = (s0: 0, 2), (s1: 1, 3).
 *   eq. 8 over 100 GB/s: 0.002 + 1e8 / 1e8 = 1.002 ms; m: s0 2.002, s1 3.002 -> 3.002
 *   eq. 9: s0 over B(0,2) = 10: 1e9 / 1e7 = 100; s1 over B(1,3) = 10: 200.
 *   full: s1: 2 + 1.002 + 200 = 203.002
 * Lower bounds. m (eq. 10): s1 on any device: 2 + min lat 0.002 + 1e8 / max bw 1e8 = 3.002, equal
 * to the p2p map, so the search needs no probe. ar (eq. 11): s1 on any device, best partner over
 * 100 GB/s both ways: 2 + 20 = 22, equal to the CS map. full (joint): s1: 2 + 1.002 + 20 = 23.002.
 * The full optimum: s1's ring must use a 100 GB/s pair ({0,1} or {2,3}; else >= 200 ms), then
 * s0 sits on the other pair and every m transfer crosses at best 10 GB/s: 32.01. */
static void test_hand_worked(void)
{
    char err[256];
    double cu[2] = {1, 2}, P[2] = {1e9, 2e9}, M[4] = {0, 1e8, 1e8, 0};
    pf_stage_graph_t *sg = pf_stage_graph_new(2, 2, cu, P, M);
    pf_cluster_t *c = new_cluster("hand", 4);
    pf_cluster_set_link(c, 0, 1, 100, 2);
    pf_cluster_set_link(c, 2, 3, 100, 2);
    pf_cluster_set_link(c, 0, 2, 10, 10);
    pf_cluster_set_link(c, 1, 3, 10, 10);
    pf_cluster_set_link(c, 0, 3, 1, 10);
    pf_cluster_set_link(c, 1, 2, 1, 10);
    int cs[4], p2p[4], dev[4];
    pf_mapping_cs(sg, cs);
    pf_mapping_p2p(sg, p2p);
    CU_ASSERT(cs[0] == 0 && cs[1] == 1 && cs[2] == 2 && cs[3] == 3);
    CU_ASSERT(p2p[0] == 0 && p2p[1] == 2 && p2p[2] == 1 && p2p[3] == 3);

    PF_ASSERT_CLOSE(pf_mapping_stage_time_ms(sg, c, PF_MAP_INST_M, cs, 0), 11.01, 1e-12);
    PF_ASSERT_CLOSE(pf_mapping_stage_time_ms(sg, c, PF_MAP_INST_M, cs, 3), 12.01, 1e-12);
    PF_ASSERT_CLOSE(pf_mapping_stage_time_ms(sg, c, PF_MAP_INST_AR, cs, 1), 11.0, 1e-12);
    PF_ASSERT_CLOSE(pf_mapping_stage_time_ms(sg, c, PF_MAP_INST_AR, cs, 2), 22.0, 1e-12);
    PF_ASSERT_CLOSE(pf_mapping_stage_time_ms(sg, c, PF_MAP_INST_FULL, cs, 0), 21.01, 1e-12);
    PF_ASSERT_CLOSE(pf_mapping_stage_time_ms(sg, c, PF_MAP_INST_FULL, cs, 2), 32.01, 1e-12);
    PF_ASSERT_CLOSE(pf_mapping_objective_ms(sg, c, PF_MAP_INST_M, cs), 12.01, 1e-12);
    PF_ASSERT_CLOSE(pf_mapping_objective_ms(sg, c, PF_MAP_INST_AR, cs), 22.0, 1e-12);
    PF_ASSERT_CLOSE(pf_mapping_objective_ms(sg, c, PF_MAP_INST_FULL, cs), 32.01, 1e-12);
    PF_ASSERT_CLOSE(pf_mapping_step_estimate_ms(sg, c, cs, 4), 80.05, 1e-12);
    PF_ASSERT_CLOSE(pf_mapping_objective_ms(sg, c, PF_MAP_INST_M, p2p), 3.002, 1e-12);
    PF_ASSERT_CLOSE(pf_mapping_objective_ms(sg, c, PF_MAP_INST_AR, p2p), 202.0, 1e-12);
    PF_ASSERT_CLOSE(pf_mapping_objective_ms(sg, c, PF_MAP_INST_FULL, p2p), 203.002, 1e-12);

    double lo, hi;
    CU_ASSERT_EQUAL(pf_mapping_bounds(sg, c, PF_MAP_INST_M, 1, &lo, &hi, dev, err, sizeof err),
                    PF_OK);
    PF_ASSERT_CLOSE(lo, 3.002, 1e-12);
    PF_ASSERT_CLOSE(hi, 3.002, 1e-12);
    CU_ASSERT_EQUAL(pf_mapping_bounds(sg, c, PF_MAP_INST_AR, 1, &lo, &hi, dev, err, sizeof err),
                    PF_OK);
    PF_ASSERT_CLOSE(lo, 22.0, 1e-12);
    PF_ASSERT_CLOSE(hi, 22.0, 1e-12);
    CU_ASSERT_EQUAL(pf_mapping_bounds(sg, c, PF_MAP_INST_FULL, 1, &lo, &hi, dev, err, sizeof err),
                    PF_OK);
    PF_ASSERT_CLOSE(lo, 23.002, 1e-12);

    pf_mapping_opts_t o = exact_opts(PF_MAP_INST_M, 1, 1, 1);
    pf_mapping_stats_t st;
    CU_ASSERT_EQUAL(pf_mapping_search(sg, c, &o, dev, &st, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(st.objective_ms, 3.002, 1e-12);
    CU_ASSERT_EQUAL(st.probes, 0);
    o.inst = PF_MAP_INST_FULL;
    CU_ASSERT_EQUAL(pf_mapping_search(sg, c, &o, dev, &st, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(st.objective_ms, 32.01, 1e-12);
    PF_ASSERT_CLOSE(brute_force(sg, c, PF_MAP_INST_FULL), 32.01, 1e-12);
    CU_ASSERT(st.probes > 0);

    /* all-reduce bytes 2e9 + ... : sum 1 x (1e9 + 2e9) = 3e9 > 1e8 inter-stage bytes: ar */
    CU_ASSERT_EQUAL(pf_map_inst_auto(sg), PF_MAP_INST_AR);
    PF_ASSERT_CLOSE(pf_stage_graph_total_allreduce_bytes(sg), 3e9, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_total_p2p_bytes(sg), 1e8, 1e-15);
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&c);
}


/* ---------------------------------------------------------------- ring connectivity */

/* Two machines of 4 GPUs (11 GB/s inside, 1.1 across; latencies do not enter eq. 7). One stage,
 * R = 8, c_u = 1 ms, P = 1.1e9 bytes: T = 2 x 7/8 x 1.1e9 = 1.925e9 bytes. Any ring through all 8
 * devices crosses between the machines, so the optimum under ar is 1 + 1.925e9 / 1.1e9 B/s =
 * 1 + 1750 = 1751 ms, whatever the order. Eq. 11 alone sees each device's two 11 GB/s
 * neighbours (1 + 175 = 176 ms); the ring connectivity bound (8 devices are connected only once
 * the 1.1 GB/s links count) gives 1751, so the search needs no probe and a probe just below the
 * optimum stops at the root. With S = 2, R = 4 the rings fit in one machine each: 11 GB/s. */
static void test_ring_connectivity(void)
{
    char err[256];
    double cu[2] = {1, 1}, P[2] = {1.1e9, 1.1e9}, M[4] = {0, 1e6, 1e6, 0};
    pf_cluster_t *c = two_level(2, 4);
    pf_stage_graph_t *sg = pf_stage_graph_new(1, 8, cu, P, M);
    int dev[12];
    double lo, hi;
    CU_ASSERT_EQUAL(pf_mapping_bounds(sg, c, PF_MAP_INST_AR, 1, &lo, &hi, dev, err, sizeof err),
                    PF_OK);
    PF_ASSERT_CLOSE(lo, 1751.0, 1e-12);
    PF_ASSERT_CLOSE(brute_force(sg, c, PF_MAP_INST_AR), 1751.0, 1e-12);
    pf_probe_result_t res;
    CU_ASSERT_EQUAL(
        pf_mapping_probe(sg, c, PF_MAP_INST_AR, 1750.0, 0, 0, 1, NULL, dev, &res, err, sizeof err),
        PF_OK);
    CU_ASSERT(!res.found);
    CU_ASSERT_EQUAL(res.nodes, 0);
    pf_stage_graph_destroy(&sg);

    /* two stages of 4: 2 x 3/4 x 1.1e9 = 1.65e9 bytes over 11 GB/s = 150 ms, each ring inside a
     * machine; a probe below 151 ms must fail, and one at 151 must find that mapping */
    sg = pf_stage_graph_new(2, 4, cu, P, M);
    CU_ASSERT_EQUAL(pf_mapping_bounds(sg, c, PF_MAP_INST_AR, 1, &lo, &hi, dev, err, sizeof err),
                    PF_OK);
    PF_ASSERT_CLOSE(lo, 151.0, 1e-12);
    CU_ASSERT_EQUAL(
        pf_mapping_probe(sg, c, PF_MAP_INST_AR, 151.0, 0, 1, 1, NULL, dev, &res, err, sizeof err),
        PF_OK);
    CU_ASSERT(res.found);
    CU_ASSERT((dev[0] < 4) == (dev[1] < 4) && (dev[0] < 4) == (dev[3] < 4));
    CU_ASSERT((dev[4] < 4) == (dev[7] < 4) && (dev[0] < 4) != (dev[4] < 4));
    pf_stage_graph_destroy(&sg);

    /* three stages of 4 on two machines: one ring must cross, 1 + 1.65e9 / 1.1e9 = 1501 ms;
     * eq. 11 and the per-device bound both say 151, the capacity check in the probe proves it */
    pf_cluster_t *c12 = two_level(2, 6);
    double cu3[3] = {1, 1, 1}, P3[3] = {1.1e9, 1.1e9, 1.1e9}, M3[9] = {0};
    sg = pf_stage_graph_new(3, 4, cu3, P3, M3);
    CU_ASSERT_EQUAL(pf_mapping_probe(sg, c12, PF_MAP_INST_AR, 1500.0, 0, 1, 1, NULL, dev, &res, err,
                                     sizeof err),
                    PF_OK);
    CU_ASSERT(!res.found);
    CU_ASSERT(res.nodes < 100);
    CU_ASSERT_EQUAL(pf_mapping_probe(sg, c12, PF_MAP_INST_AR, 1501.0, 0, 1, 1, NULL, dev, &res, err,
                                     sizeof err),
                    PF_OK);
    CU_ASSERT(res.found);
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&c12);
    pf_cluster_destroy(&c);
}

/* ---------------------------------------------------------------- hierarchies without tables */

/* A regular hierarchy: hosts of G GPUs (300 GB/s, 2 us), leaves of 2 hosts, spines of 2 leaves
 * (leaf_gbps, 5 us; oversubscribed 2), a core over all (20 GB/s, 9 us). */
static pf_cluster_t *regular(int hosts, int G, double leaf_gbps)
{
    pf_cluster_level_t lv[4] = {{"host", G, 300, 2, 1}, {"leaf", 2, leaf_gbps, 5, 2},
                                {"spine", 2, 40, 7, 1}, {"core", 0, 20, 9, 1}};
    pf_cluster_host_kind_t k = {"gpu", NULL, G, 80e9, 100, 0, -1};
    pf_cluster_hier_t *h = pf_cluster_hier_new(hosts, lv, 4, &k, 1);
    char err[256];
    CU_ASSERT_EQUAL(pf_cluster_hier_validate(h, err, sizeof err), PF_OK);
    pf_cluster_t *c = pf_cluster_new_hier("reg", h);
    CU_ASSERT_PTR_NOT_NULL(c);
    return c;
}

/* The bounds from the levels (no tables: rows, spanning tree) against the bounds from the D x D
 * tables: every static bound, the rank, the ring connectivity and the ring components at a few
 * targets. Returns the mismatches. */
static int bounds_agree(const pf_cluster_t *c, int S, int R)
{
    int D = pf_cluster_ndevices(c), bad = 0;
    double *lat = malloc((size_t)D * D * sizeof *lat), *bw = malloc((size_t)D * D * sizeof *bw);
    /* a chain of 4 stages: stage s talks to s - 1 and s + 1 (adj_off), these bytes each */
    double cu[4] = {3, 1, 2, 4}, ar[4] = {2e8, 5e8, 1e8, 3e8};
    double bytes[6] = {4e7, 4e7, 2e7, 2e7, 1e7, 1e7};
    int adj_off[5] = {0, 1, 3, 5, 6};
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++) {
            lat[(size_t)a * D + b] = pf_cluster_lat_us(c, a, b) * 1e-3;
            bw[(size_t)a * D + b] = pf_cluster_bw_gbps(c, a, b) * 1e6;
        }
    pf_map_symmetry_t sym;
    CU_ASSERT_EQUAL_FATAL(pf_map_symmetry_init(&sym, c, PF_MAP_SYM_OFF), PF_OK);
    pf_map_bounds_input_t in = {.S = S, .R = R, .D = D, .use_m = true, .use_ar = R > 1, .cu = cu,
                                .ar_bytes = ar, .adj_off = adj_off, .adj_bytes = bytes,
                                .max_deg = 2, .links = {c, D, lat, bw}, .sym = &sym};
    pf_map_bounds_t x, y;
    CU_ASSERT_EQUAL_FATAL(pf_map_bounds_init(&x, &in), PF_OK);
    in.links.lat_ms = in.links.bw_bpms = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_map_bounds_init(&y, &in), PF_OK);
    CU_ASSERT_PTR_NULL(x.regular);
    CU_ASSERT_PTR_NOT_NULL(y.regular);
    bad += x.lower_ms != y.lower_ms;
    for (size_t i = 0; i < (size_t)S * D; i++)
        bad += x.static_m[i] != y.static_m[i] || x.static_ar[i] != y.static_ar[i] ||
               x.static_lb[i] != y.static_lb[i] || x.rank[i] != y.rank[i];
    for (int d = 0; d < D; d++)
        bad += x.ring_bpms[d] != y.ring_bpms[d];
    double targets[5] = {3.5, 8, 20, 60, 1e4};
    for (int t = 0; t < 5; t++) {
        int *cx, *nx, *cy, *ny;
        CU_ASSERT_EQUAL_FATAL(pf_map_bounds_ring_components(&x, targets[t], &cx, &nx), PF_OK);
        CU_ASSERT_EQUAL_FATAL(pf_map_bounds_ring_components(&y, targets[t], &cy, &ny), PF_OK);
        for (size_t i = 0; i < (size_t)S * D; i++) /* same partition, same sizes */
            for (size_t j = i % D ? i - i % D : i; j < i; j++)
                bad += (cx[i] == cx[j]) != (cy[i] == cy[j]);
        for (size_t i = 0; i < (size_t)S * D; i++)
            bad += nx[(size_t)(i / D) * D + cx[i]] != ny[(size_t)(i / D) * D + cy[i]];
        free(cx);
        free(nx);
        free(cy);
        free(ny);
    }
    pf_map_bounds_free(&x);
    pf_map_bounds_free(&y);
    pf_map_symmetry_free(&sym);
    free(lat);
    free(bw);
    return bad;
}

static void test_hier_without_tables(void)
{
    struct { int hosts, G; double leaf; } k[] = {
        {7, 4, 50}, {7, 1, 50}, {8, 2, 50}, {5, 8, 50}, /* monotone: the levels' tree */
        {7, 2, 500}, {6, 1, 40},                        /* leaf faster than the host; a tie */
    };
    for (int i = 0; i < 6; i++)
        for (int R = 1; R <= 4; R++) {
            pf_cluster_t *c = regular(k[i].hosts, k[i].G, k[i].leaf);
            CU_ASSERT_EQUAL(bounds_agree(c, 4, R), 0);
            pf_cluster_destroy(&c);
        }
}

void pf_suite_map_bounds(void)
{
    CU_pSuite s = CU_add_suite("map_bounds", NULL, NULL);
    CU_add_test(s, "eq. 6/7 stage times, eq. 10/11 bounds, worked by hand", test_hand_worked);
    CU_add_test(s, "ring connectivity bound and ring capacity", test_ring_connectivity);
    CU_add_test(s, "a regular hierarchy's bounds from its levels equal the tables'",
                test_hier_without_tables);
}
