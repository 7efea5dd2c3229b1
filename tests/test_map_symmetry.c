/* map_symmetry: device classes and host blocks (detected, checked as automorphisms, on DGX-1 and
 * generated clusters), and symmetry pruning keeping the optimum against brute force. */
#include "planner/map/mapping.h"
#include "planner/ir/cluster_hier.h"
#include "planner/core/rng.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"
#include "tests/map_fixtures.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- symmetry */

static void test_symmetry(void)
{
    char err[256];
    int cls[8];
    pf_cluster_t *c = two_level(2, 4);
    CU_ASSERT_EQUAL(pf_map_symmetry_device_classes(c, cls), 2);
    CU_ASSERT(cls[0] == 0 && cls[3] == 0 && cls[4] == 1 && cls[7] == 1);
    pf_cluster_t *r = random_cluster(3, 6);
    CU_ASSERT_EQUAL(pf_map_symmetry_device_classes(r, cls), 6);
    pf_cluster_destroy(&r);

    long long sym_pruned = 0, nodes_with = 0, nodes_without = 0;
    static const int cases[][2] = {{2, 4}, {4, 2}, {8, 1}, {2, 2}, {3, 2}};
    for (int i = 0; i < 5; i++) {
        int S = cases[i][0], R = cases[i][1];
        pf_cluster_t *cc = S * R == 8 ? c : two_level(2, S * R / 2);
        for (uint64_t seed = 1; seed <= 2; seed++) {
            pf_stage_graph_t *sg = random_stage_graph(seed + 50, S, R);
            for (int inst = 0; inst < 3; inst++) {
                double opt = brute_force(sg, cc, (pf_map_inst_t)inst);
                int dev[MAXN];
                pf_probe_result_t with, without;
                for (int side = 0; side < 2; side++) {
                    double t = side ? opt * (1 + 1e-9) : opt * (1 - 1e-6);
                    CU_ASSERT_EQUAL(pf_mapping_probe(sg, cc, (pf_map_inst_t)inst, t, 0, 1, 1, NULL,
                                                     dev, &with, err, sizeof err),
                                    PF_OK);
                    CU_ASSERT_EQUAL(pf_mapping_probe(sg, cc, (pf_map_inst_t)inst, t, 0, 0, 1, NULL,
                                                     dev, &without, err, sizeof err),
                                    PF_OK);
                    CU_ASSERT_EQUAL(with.found, side);
                    CU_ASSERT_EQUAL(without.found, side);
                    CU_ASSERT_EQUAL(without.symmetric_pruned, 0);
                    if (!side) { /* an infeasible probe explores its whole (pruned) tree */
                        CU_ASSERT(with.nodes <= without.nodes);
                        sym_pruned += with.symmetric_pruned;
                        nodes_with += with.nodes;
                        nodes_without += without.nodes;
                    }
                }
                /* the search: same optimum with and without */
                pf_mapping_opts_t o = exact_opts((pf_map_inst_t)inst, 1, 1, 1);
                pf_mapping_stats_t a, b;
                CU_ASSERT_EQUAL(pf_mapping_search(sg, cc, &o, dev, &a, err, sizeof err), PF_OK);
                o.symmetry = 0;
                CU_ASSERT_EQUAL(pf_mapping_search(sg, cc, &o, dev, &b, err, sizeof err), PF_OK);
                CU_ASSERT(a.objective_ms <= opt * (1 + 1e-6) + 1e-12);
                CU_ASSERT(b.objective_ms <= opt * (1 + 1e-6) + 1e-12);
            }
            pf_stage_graph_destroy(&sg);
        }
        if (cc != c)
            pf_cluster_destroy(&cc);
    }
    /* (Where eq. 10/11 already exceed the target the probe stops at the root in both modes.) */
    CU_ASSERT(sym_pruned > 0);
    CU_ASSERT(nodes_with < nodes_without);
    pf_cluster_destroy(&c);
}

/* ---------------------------------------------------------------- host blocks */

/* Whether the device permutation perm is an automorphism of both matrices (off the diagonal),
 * checked entry by entry: the definition pf_map_symmetry_host_blocks must meet. */
static int is_automorphism(const pf_cluster_t *c, const int *perm)
{
    int D = pf_cluster_ndevices(c);
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++)
            if (a != b && (pf_cluster_bw_gbps(c, perm[a], perm[b]) != pf_cluster_bw_gbps(c, a, b) ||
                           pf_cluster_lat_us(c, perm[a], perm[b]) != pf_cluster_lat_us(c, a, b)))
                return 0;
    return 1;
}

/* Every two blocks of one class: swapping them (i-th device by index <-> i-th) is an
 * automorphism. Returns the number of blocks. */
static int check_blocks(const pf_cluster_t *c, int *block, int *bclass)
{
    int D = pf_cluster_ndevices(c), perm[64], mem[64][64], size[64] = {0};
    int n = pf_map_symmetry_host_blocks(c, block, bclass, NULL);
    CU_ASSERT_FATAL(n >= 0 && n <= D / 2);
    for (int d = 0; d < D; d++)
        if (block[d] >= 0)
            mem[block[d]][size[block[d]]++] = d;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            if (bclass[a] != bclass[b])
                continue;
            CU_ASSERT_EQUAL_FATAL(size[a], size[b]);
            for (int d = 0; d < D; d++)
                perm[d] = d;
            for (int i = 0; i < size[a]; i++) {
                perm[mem[a][i]] = mem[b][i];
                perm[mem[b][i]] = mem[a][i];
            }
            CU_ASSERT(is_automorphism(c, perm));
        }
    for (int b = 0; b < n; b++) { /* classes of two or more, numbered by first block */
        int k = bclass[b], same = 0, earlier_max = -1;
        CU_ASSERT(size[b] >= 2);
        for (int b2 = 0; b2 < n; b2++)
            same += bclass[b2] == k && b2 != b;
        for (int b2 = 0; b2 < b; b2++)
            earlier_max = bclass[b2] > earlier_max ? bclass[b2] : earlier_max;
        CU_ASSERT(same >= 1);
        CU_ASSERT(k <= earlier_max + 1);
    }
    return n;
}

/* H blocks of G devices and `spare` devices in no block. Inside every block the same random
 * matrix (bandwidth in [5, 100) GB/s, latency in [0, 30) us, each direction drawn on its own);
 * between blocks one matrix by position, X(i, j) for the i-th device of one block and the j-th of
 * another (uniform when seed % 3 == 0), slower; a spare device e talks to the i-th device of
 * every block alike. Device of block h, position i: h * G + i, or i * H + h when interleaved (the
 * blocks are then not index intervals). Host labels: the block, spare devices one each; with
 * bad_hosts every device has its own host, so only the matrices can reveal the blocks. */
static pf_cluster_t *block_cluster(uint64_t seed, int H, int G, int spare, int interleaved,
                                   int bad_hosts)
{
    pf_rng_t rng;
    double ibw[4][4], ilat[4][4], xbw[4][4], xlat[4][4], sbw[2][4][2], slat[2][4][2];
    int D = H * G + spare;
    pf_rng_seed(&rng, seed * 131 + 5);
    for (int i = 0; i < G; i++)
        for (int j = 0; j < G; j++) {
            ibw[i][j] = pf_rng_range(&rng, 5, 100);
            ilat[i][j] = pf_rng_range(&rng, 0, 30);
            xbw[i][j] = seed % 3 == 0 ? 2.0 : pf_rng_range(&rng, 0.5, 5);
            xlat[i][j] = seed % 3 == 0 ? 40.0 : pf_rng_range(&rng, 20, 60);
        }
    for (int e = 0; e < spare; e++)
        for (int i = 0; i < G; i++)
            for (int dir = 0; dir < 2; dir++) {
                sbw[e][i][dir] = pf_rng_range(&rng, 0.5, 20);
                slat[e][i][dir] = pf_rng_range(&rng, 0, 60);
            }
    pf_cluster_t *c = pf_cluster_new("blocks", D);
    int hb[16], pos[16]; /* block and position of each device; -1 - e for spare e */
    for (int h = 0; h < H; h++)
        for (int i = 0; i < G; i++) {
            int d = interleaved ? i * H + h : h * G + i;
            hb[d] = h;
            pos[d] = i;
        }
    for (int e = 0; e < spare; e++) {
        hb[H * G + e] = -1 - e;
        pos[H * G + e] = 0;
    }
    for (int d = 0; d < D; d++) {
        pf_device_t dv = {.id = d, .host = bad_hosts ? d : hb[d] >= 0 ? hb[d] : H - hb[d],
                          .mem_bytes = 16e9};
        pf_cluster_set_device(c, d, &dv);
    }
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++) {
            if (a == b)
                continue;
            double bw, lat;
            if (hb[a] < 0 && hb[b] < 0) {
                bw = 1;
                lat = 50;
            } else if (hb[a] < 0) {
                bw = sbw[-1 - hb[a]][pos[b]][0];
                lat = slat[-1 - hb[a]][pos[b]][0];
            } else if (hb[b] < 0) {
                bw = sbw[-1 - hb[b]][pos[a]][1];
                lat = slat[-1 - hb[b]][pos[a]][1];
            } else if (hb[a] == hb[b]) {
                bw = ibw[pos[a]][pos[b]];
                lat = ilat[pos[a]][pos[b]];
            } else {
                bw = xbw[pos[a]][pos[b]];
                lat = xlat[pos[a]][pos[b]];
            }
            pf_cluster_set_bw(c, a, b, bw);
            pf_cluster_set_lat(c, a, b, lat);
        }
    return c;
}

static void test_host_blocks_detect(void)
{
    char err[256];
    int block[64], bclass[64];
    bool capped = true;
    /* two DGX-1: the hybrid cube-mesh inside, 1.4 GB/s between; no two GPUs interchangeable */
    for (int machines = 2; machines <= 4; machines += 2) {
        pf_topology_opts_t to;
        pf_cluster_t *dgx = NULL;
        pf_topology_opts_init(&to, PF_TOPOLOGY_DGX1);
        to.machines = machines;
        CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &dgx, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL(pf_map_symmetry_device_classes(dgx, bclass), 8 * machines);
        CU_ASSERT_EQUAL(check_blocks(dgx, block, bclass), machines);
        CU_ASSERT_EQUAL(pf_map_symmetry_host_blocks(dgx, block, bclass, &capped), machines);
        CU_ASSERT_EQUAL(capped, false);
        for (int d = 0; d < 8 * machines; d++)
            CU_ASSERT_EQUAL(block[d], d / 8);
        for (int b = 0; b < machines; b++)
            CU_ASSERT_EQUAL(bclass[b], 0);
        pf_cluster_destroy(&dgx);
    }
    /* the two-level system: 3 blocks of 2, one class */
    pf_cluster_t *c = two_level(3, 2);
    CU_ASSERT_EQUAL(check_blocks(c, block, bclass), 3);
    CU_ASSERT(block[0] == 0 && block[1] == 0 && block[4] == 2 && block[5] == 2);
    pf_cluster_destroy(&c);

    /* generated block clusters: contiguous or interleaved, host labels right or useless (then
     * the components of the links faster than the slowest one propose the blocks: that finds
     * them when there are no spare devices; spare devices whose links are faster than some
     * inside a block merge everything, and the detector finds nothing, which is sound) */
    for (uint64_t seed = 1; seed <= 16; seed++) {
        int H = 2 + (int)(seed % 2), G = 2 + (int)(seed / 2 % 2);
        int interleaved = seed % 4 < 2, bad_hosts = seed % 4 == 1, spare = (int)(seed % 3);
        c = block_cluster(seed, H, G, spare, interleaved, bad_hosts);
        int n = check_blocks(c, block, bclass);
        if (bad_hosts && spare) {
            CU_ASSERT(n == 0 || n == H);
        } else {
            CU_ASSERT_EQUAL(n, H);
        }
        for (int h = 0; h < H && n; h++)
            for (int i = 0; i < G; i++)
                CU_ASSERT_EQUAL(block[interleaved ? i * H + h : h * G + i], h);
        pf_cluster_destroy(&c);
    }

    /* Blocks alike by their host labels (3 x 2 devices, host = d / 2) but not by the matrices:
     * one entry at a time breaks the swap of blocks 0 and 1, inside a block (bandwidth), between
     * the two (the cross matrix: B(0, 3) != B(1, 2)), towards block 2 (latency only), and block
     * 0's position order (B(0, 1) != B(2, 3) one way). The detector must not put 0 and 1 in one
     * class; blocks it does report are still automorphic (check_blocks). */
    for (int variant = 0; variant < 4; variant++) {
        c = two_level(3, 2);
        if (variant == 0)
            pf_cluster_set_link(c, 0, 1, 12, 5);
        else if (variant == 1)
            pf_cluster_set_link(c, 0, 3, 1.2, 20);
        else if (variant == 2)
            pf_cluster_set_lat(c, 1, 4, 21);
        else
            pf_cluster_set_bw(c, 0, 1, 12);
        int n = check_blocks(c, block, bclass);
        CU_ASSERT(block[0] < 0 || block[2] < 0 || bclass[block[0]] != bclass[block[2]]);
        CU_ASSERT(n <= 2);
        pf_cluster_destroy(&c);
    }
    /* uniform links: every device interchangeable, and blocks by the host labels too */
    c = two_level(2, 3);
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++)
            if (a != b)
                pf_cluster_set_link(c, a, b, 5, 1);
    CU_ASSERT_EQUAL(pf_map_symmetry_device_classes(c, bclass), 1);
    CU_ASSERT_EQUAL(check_blocks(c, block, bclass), 2);
    pf_cluster_destroy(&c);
    /* random links: nothing */
    c = random_cluster(4, 8);
    CU_ASSERT_EQUAL(check_blocks(c, block, bclass), 0);
    pf_cluster_destroy(&c);
}

/* Brute force over every one-to-one mapping on block clusters (2-3 blocks of 2-3 devices, spare
 * devices, contiguous or interleaved, labels right or useless): under m, ar and full the search
 * with all rules, without the block rule and without any symmetry rule reaches the optimum within
 * eps, and probes at opt (1 + 1e-9) and opt (1 - 1e-6) find / do not find a mapping; the block
 * rule fires. */
static void test_host_blocks_brute(void)
{
    char err[256];
    static const int cases[][4] = {/* H, G, S, R */
                                   {2, 2, 2, 2}, {2, 3, 3, 2}, {3, 2, 2, 3}, {3, 2, 3, 2},
                                   {2, 3, 2, 3}, {3, 2, 6, 1}, {2, 2, 1, 4}, {2, 3, 5, 1}};
    long long block_pruned = 0, nodes[3] = {0, 0, 0};
    for (int i = 0; i < 8; i++) {
        int H = cases[i][0], G = cases[i][1], S = cases[i][2], R = cases[i][3];
        for (uint64_t seed = 1; seed <= 3; seed++) {
            int spare = H * G < 8 && seed != 2 ? 1 : 0;
            pf_cluster_t *c = block_cluster(seed + 10 * (uint64_t)i, H, G, spare, seed == 2,
                                            seed == 3);
            pf_stage_graph_t *sg = random_stage_graph(seed + 40 + 10 * (uint64_t)i, S, R);
            int N = S * R, D = H * G + spare, dev[MAXN];
            for (int inst = 0; inst < 3; inst++) {
                double opt = brute_force(sg, c, (pf_map_inst_t)inst);
                for (int sym = 0; sym <= 2; sym++) {
                    pf_mapping_opts_t o =
                        exact_opts((pf_map_inst_t)inst, sym, 1 + (int)(seed % 2), 1);
                    pf_mapping_stats_t st;
                    CU_ASSERT_EQUAL_FATAL(pf_mapping_search(sg, c, &o, dev, &st, err, sizeof err),
                                          PF_OK);
                    CU_ASSERT(is_injective(dev, N, D));
                    CU_ASSERT(st.objective_ms <= opt * (1 + 1e-6) + 1e-12);
                    CU_ASSERT(st.objective_ms >= opt * (1 - 1e-12));
                    CU_ASSERT(st.lower_proven);
                    if (sym != PF_MAP_SYM_ALL)
                        CU_ASSERT_EQUAL(st.block_pruned, 0);
                    if (sym == PF_MAP_SYM_OFF)
                        CU_ASSERT_EQUAL(st.symmetric_pruned, 0);
                    for (int side = 0; side < 2; side++) {
                        pf_probe_result_t res;
                        double t = side ? opt * (1 + 1e-9) : opt * (1 - 1e-6);
                        CU_ASSERT_EQUAL(pf_mapping_probe(sg, c, (pf_map_inst_t)inst, t, 0, sym,
                                                     1 + (int)(seed % 2), NULL, dev, &res, err,
                                                     sizeof err), PF_OK);
                        CU_ASSERT_EQUAL(res.found, side);
                        CU_ASSERT(!res.timed_out);
                        if (side) {
                            CU_ASSERT(res.objective_ms <= opt * (1 + 1e-9));
                        } else {
                            nodes[sym] += res.nodes;
                        }
                        if (sym == PF_MAP_SYM_ALL)
                            block_pruned += res.block_pruned;
                    }
                }
            }
            pf_stage_graph_destroy(&sg);
            pf_cluster_destroy(&c);
        }
    }
    CU_ASSERT(block_pruned > 0);
    /* infeasible probes explore their whole tree: the block rule shrinks it */
    CU_ASSERT(nodes[PF_MAP_SYM_ALL] < nodes[PF_MAP_SYM_NO_BLOCKS]);
    CU_ASSERT(nodes[PF_MAP_SYM_NO_BLOCKS] < nodes[PF_MAP_SYM_OFF]);
}

/* A DGX-1-like case: two DGX-1 (16 GPUs, no interchangeable devices), S = 3, R = 2, m. With the
 * block rule the first stage replica has 8 candidates, not 16 (the second machine's GPUs mirror
 * the first's); an infeasible probe proves it with fewer nodes, a feasible one still finds a
 * mapping, and both searches reach the same optimum. */
static void test_host_blocks_dgx1(void)
{
    char err[256];
    pf_topology_opts_t to;
    pf_cluster_t *dgx = NULL;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX1);
    to.machines = 2;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &dgx, err, sizeof err), PF_OK);
    pf_stage_graph_t *sg = random_stage_graph(77, 3, 2);
    int dev[16];
    pf_mapping_stats_t st[3];
    for (int sym = 0; sym <= 2; sym++) {
        pf_mapping_opts_t o = exact_opts(PF_MAP_INST_FULL, sym, 2, 1);
        CU_ASSERT_EQUAL_FATAL(pf_mapping_search(sg, dgx, &o, dev, &st[sym], err, sizeof err),
                              PF_OK);
        CU_ASSERT(st[sym].lower_proven);
        CU_ASSERT(is_injective(dev, 6, 16));
    }
    PF_ASSERT_CLOSE(st[PF_MAP_SYM_ALL].objective_ms, st[PF_MAP_SYM_OFF].objective_ms, 1e-6);
    PF_ASSERT_CLOSE(st[PF_MAP_SYM_NO_BLOCKS].objective_ms, st[PF_MAP_SYM_OFF].objective_ms, 1e-6);
    CU_ASSERT(st[PF_MAP_SYM_ALL].block_pruned > 0);
    CU_ASSERT_EQUAL(st[PF_MAP_SYM_NO_BLOCKS].block_pruned, 0);
    double opt = st[PF_MAP_SYM_OFF].objective_ms;
    pf_probe_result_t with, without;
    for (int side = 0; side < 2; side++) {
        double t = side ? opt * (1 + 1e-9) : opt * (1 - 1e-3);
        CU_ASSERT_EQUAL(pf_mapping_probe(sg, dgx, PF_MAP_INST_FULL, t, 0, PF_MAP_SYM_ALL, 1, NULL,
                                         dev, &with, err, sizeof err),
                        PF_OK);
        CU_ASSERT_EQUAL(pf_mapping_probe(sg, dgx, PF_MAP_INST_FULL, t, 0, PF_MAP_SYM_NO_BLOCKS, 1,
                                         NULL, dev, &without, err, sizeof err),
                        PF_OK);
        CU_ASSERT_EQUAL(with.found, side);
        CU_ASSERT_EQUAL(without.found, side);
        if (!side) {
            CU_ASSERT(with.block_pruned > 0);
            CU_ASSERT(with.nodes < without.nodes);
        }
    }
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&dgx);
}

/* The class rule's representative must be the least device in the order the replica rule ranks
 * by. Machines (host = d mod 2) {0, 2} and {1, 3}, 5 GB/s everywhere, latency 0 us on 0-3 and
 * 1-2 and 1 us on the other pairs: swapping the machines, (0 1)(2 3), and the transpositions
 * (0 3) and (1 2) are automorphisms, so the device classes are {0, 3} and {1, 2}. Every static
 * bound is equal, so the ranks follow the canonical order 0, 2, 1, 3 (block {0, 2}, then
 * {1, 3}). One stage, R = 4, m: no neighbours, every mapping costs c_u = 1 ms. The replica rule
 * keeps only the mapping whose devices increase in rank, 0, 2, 1, 3, and a probe at 1 ms must
 * find it; taking {1, 2}'s representative by index (1, rank 2, when 0 is placed) would cut it.
 * Without the block rule the canonical order is the index order: 0, 1, 2, 3. */
static void test_host_blocks_canonical(void)
{
    char err[256];
    pf_cluster_t *c = new_cluster("interleaved", 4);
    for (int a = 0; a < 4; a++) {
        pf_device_t d = {.id = a, .host = a % 2, .mem_bytes = 16e9};
        pf_cluster_set_device(c, a, &d);
        for (int b = 0; b < 4; b++)
            if (a != b)
                pf_cluster_set_link(c, a, b, 5, a + b == 3 ? 0 : 1);
    }
    int cls[4], block[4], bclass[4];
    CU_ASSERT_EQUAL(pf_map_symmetry_device_classes(c, cls), 2);
    CU_ASSERT(cls[0] == cls[3] && cls[1] == cls[2]);
    CU_ASSERT_EQUAL(check_blocks(c, block, bclass), 2);
    CU_ASSERT(block[0] == 0 && block[2] == 0 && block[1] == 1 && block[3] == 1);
    double cu = 1, P = 0, M = 0;
    pf_stage_graph_t *sg = pf_stage_graph_new(1, 4, &cu, &P, &M);
    int dev[4];
    pf_probe_result_t res;
    CU_ASSERT_EQUAL(pf_mapping_probe(sg, c, PF_MAP_INST_M, 1.0, 0, PF_MAP_SYM_ALL, 1, NULL, dev,
                                     &res, err, sizeof err),
                    PF_OK);
    CU_ASSERT(res.found);
    CU_ASSERT(dev[0] == 0 && dev[1] == 2 && dev[2] == 1 && dev[3] == 3);
    CU_ASSERT(res.block_pruned > 0);
    CU_ASSERT_EQUAL(pf_mapping_probe(sg, c, PF_MAP_INST_M, 1.0, 0, PF_MAP_SYM_NO_BLOCKS, 1, NULL,
                                     dev, &res, err, sizeof err),
                    PF_OK);
    CU_ASSERT(res.found);
    CU_ASSERT(dev[0] == 0 && dev[1] == 1 && dev[2] == 2 && dev[3] == 3);
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&c);
}

/* Block clusters with ties everywhere, where device classes, block swaps and the replica rules
 * overlap: 2-3 blocks of 2-3 devices (contiguous or interleaved), bandwidth 1 or 5 GB/s and
 * latency 0 or 1 us by position inside a block and between blocks. Probes with every rule at
 * opt (1 + 1e-9) and opt (1 - 1e-6) against brute force, m, ar and full, 1 or 2 threads. (Ranking
 * ties by device index instead of the canonical order fails here within a few hundred cases.) */
static void test_host_blocks_tied(void)
{
    char err[256];
    long long fired = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        pf_rng_t rng;
        pf_rng_seed(&rng, seed * 977 + 3);
        int H = 2 + (int)pf_rng_below(&rng, 2), G = 2 + (int)pf_rng_below(&rng, 2), D = H * G;
        int interleaved = (int)pf_rng_below(&rng, 2), S, R;
        double ib[3][3], xb[3][3], il[3][3], xl[3][3];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                ib[i][j] = 1 + (double)pf_rng_below(&rng, 2) * 4;
                xb[i][j] = 1 + (double)pf_rng_below(&rng, 2) * 4;
                il[i][j] = (double)pf_rng_below(&rng, 2);
                xl[i][j] = (double)pf_rng_below(&rng, 2);
                if (pf_rng_below(&rng, 2)) {
                    ib[j][i] = ib[i][j];
                    xb[j][i] = xb[i][j];
                }
            }
        pf_cluster_t *c = new_cluster("tied", D);
        for (int a = 0; a < D; a++) {
            pf_device_t dv = {.id = a, .host = interleaved ? a % H : a / G, .mem_bytes = 16e9};
            pf_cluster_set_device(c, a, &dv);
        }
        for (int a = 0; a < D; a++)
            for (int b = 0; b < D; b++) {
                int ha = interleaved ? a % H : a / G, pa = interleaved ? a / H : a % G;
                int hb = interleaved ? b % H : b / G, pb = interleaved ? b / H : b % G;
                if (a == b)
                    continue;
                pf_cluster_set_bw(c, a, b, ha == hb ? ib[pa][pb] : xb[pa][pb]);
                pf_cluster_set_lat(c, a, b, ha == hb ? il[pa][pb] : xl[pa][pb]);
            }
        do {
            S = 1 + (int)pf_rng_below(&rng, 4);
            R = 1 + (int)pf_rng_below(&rng, 4);
        } while (S * R > D || S * R > (D > 8 ? 5 : 7));
        double cu[4], P[4], M[16] = {0};
        for (int s = 0; s < S; s++) {
            cu[s] = pf_rng_range(&rng, 0, 3);
            P[s] = pf_rng_range(&rng, 1e8, 3e9);
        }
        for (int s = 0; s < S; s++)
            for (int t = s + 1; t < S; t++)
                if (t == s + 1 || pf_rng_uniform(&rng) < 0.4)
                    M[s * S + t] = M[t * S + s] = pf_rng_range(&rng, 1e8, 2e9);
        pf_stage_graph_t *sg = pf_stage_graph_new(S, R, cu, P, M);
        CU_ASSERT_PTR_NOT_NULL_FATAL(sg);
        for (int inst = 0; inst < 3; inst++) {
            double opt = brute_force(sg, c, (pf_map_inst_t)inst);
            for (int side = 0; side < 2; side++) {
                pf_probe_result_t res;
                int dev[MAXN];
                double t = side ? opt * (1 + 1e-9) : opt * (1 - 1e-6);
                CU_ASSERT_EQUAL(pf_mapping_probe(sg, c, (pf_map_inst_t)inst, t, 0, PF_MAP_SYM_ALL,
                                             1 + (int)(seed % 2), NULL, dev, &res, err,
                                             sizeof err), PF_OK);
                CU_ASSERT_EQUAL(res.found, side);
                fired += res.block_pruned;
            }
        }
        pf_stage_graph_destroy(&sg);
        pf_cluster_destroy(&c);
    }
    CU_ASSERT(fired > 0);
}

/* Device classes read off a regular hierarchy equal the matrix's, with one and several GPUs per
 * host, partial units, and a level of count 1; a hierarchy with two equal levels, or an
 * exception, is refused (-2). */
static pf_cluster_t *hier(int hosts, int G, int leaf, double spine_gbps, int nic_host)
{
    /* a spine as fast as the leaf has its latency too: the two levels look alike */
    pf_cluster_level_t lv[4] = {{"host", G, 300, 2, 1}, {"leaf", leaf, 50, 5, 1},
                                {"spine", 2, spine_gbps, spine_gbps == 50 ? 5 : 7, 1},
                                {"core", 0, 20, 9, 1}};
    pf_cluster_host_kind_t k = {"gpu", NULL, G, 80e9, 100, 0, -1};
    pf_cluster_hier_t *h = pf_cluster_hier_new(hosts, lv, 4, &k, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    if (nic_host >= 0)
        CU_ASSERT_EQUAL(pf_cluster_hier_set_host(h, nic_host, 0, 10), PF_OK);
    pf_cluster_t *c = pf_cluster_new_hier("h", h);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    return c;
}

static void test_hier_classes(void)
{
    struct { int hosts, G, leaf; } k[] = {{5, 1, 2}, {7, 1, 2}, {9, 1, 1}, {5, 4, 2},
                                          {8, 2, 2}, {3, 1, 4}, {1, 4, 2}};
    for (int i = 0; i < 7; i++) {
        pf_cluster_t *c = hier(k[i].hosts, k[i].G, k[i].leaf, 40, -1);
        int D = pf_cluster_ndevices(c), a[64], b[64];
        int na = pf_map_symmetry_hier_classes(c, a), nb = pf_map_symmetry_device_classes(c, b);
        CU_ASSERT_EQUAL(na, nb);
        CU_ASSERT(na > 0 && memcmp(a, b, (size_t)D * sizeof *a) == 0);
        pf_cluster_destroy(&c);
    }
    int cls[64];
    pf_cluster_t *c = hier(5, 1, 2, 50, -1); /* spine links as fast as the leaf's */
    CU_ASSERT_EQUAL(pf_map_symmetry_hier_classes(c, cls), -2);
    pf_cluster_destroy(&c);
    c = hier(5, 2, 2, 40, 3); /* host 3's slower NIC */
    CU_ASSERT_EQUAL(pf_map_symmetry_hier_classes(c, cls), -2);
    pf_cluster_destroy(&c);
}

/* ---------------------------------------------------------------- hierarchy units */

/* hosts x G GPUs under nsw switch levels (1: one leaf holds every host; 2: leaves of 2 hosts
 * under one spine; 3: leaves of 2 under spines of 2 leaves under a core), cut into groups of T
 * (tp_groups.h: pf_cluster_hier_grouped, what the mapping sees with T > 1). Links distinct
 * per level unless nsw < 0. */
static pf_cluster_t *hier_shape(int hosts, int G, int nsw, int T)
{
    /* nsw < 0: |nsw| levels, the spine as fast as the leaf (a full-bisection fat tree) */
    bool flat = nsw < 0;
    nsw = flat ? -nsw : nsw;
    pf_cluster_level_t lv[4] = {{"host", G, 300, 2, 1}, {"leaf", nsw == 1 ? 0 : 2, 50, 5, 1},
                                {"spine", nsw == 2 ? 0 : 2, flat ? 50 : 25, flat ? 5 : 7, 1},
                                {"core", 0, 10, 9, 1}};
    pf_cluster_host_kind_t k = {"gpu", NULL, G, 80e9, 100, 0, -1};
    pf_cluster_hier_t *h = pf_cluster_hier_new(hosts, lv, nsw + 1, &k, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    if (T > 1) {
        pf_cluster_hier_t *g = pf_cluster_hier_grouped(h, T);
        pf_cluster_hier_destroy(&h);
        h = g;
        CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    }
    pf_cluster_t *c = pf_cluster_new_hier("units", h);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    return c;
}

/* Every two blocks of one class in every layer trade places (i-th device <-> i-th) by an
 * automorphism, checked pair by pair; blocks are index intervals ending at blk_end, in class
 * order. Returns the number of blocks over all layers. */
static int check_units(const pf_cluster_t *c, const pf_map_symmetry_t *sy)
{
    int D = pf_cluster_ndevices(c), perm[64], total = 0;
    for (int l = 0; l < sy->nlay; l++) {
        const pf_map_sym_layer_t *ly = &sy->lay[l];
        int first[64], size[64] = {0};
        CU_ASSERT_PTR_NOT_NULL_FATAL(ly->blk_end);
        for (int d = D - 1; d >= 0; d--)
            if (ly->blk[d] >= 0) {
                first[ly->blk[d]] = d;
                size[ly->blk[d]]++;
            }
        for (int a = 0; a < ly->nblk; a++) {
            CU_ASSERT_EQUAL(first[a] + size[a], ly->blk_end[a]);
            for (int b = a + 1; b < ly->nblk; b++) {
                if (ly->blk_class[a] != ly->blk_class[b])
                    continue;
                CU_ASSERT_EQUAL_FATAL(size[a], size[b]);
                CU_ASSERT(ly->blk_kpos[b] > ly->blk_kpos[a]);
                for (int d = 0; d < D; d++)
                    perm[d] = d;
                for (int i = 0; i < size[a]; i++) {
                    perm[first[a] + i] = first[b] + i;
                    perm[first[b] + i] = first[a] + i;
                }
                CU_ASSERT(is_automorphism(c, perm));
            }
        }
        total += ly->nblk;
    }
    for (int d = 0; d < D; d++)
        CU_ASSERT_EQUAL(sy->canon[d], d);
    return total;
}

/* The layers of hand-worked shapes: 8 hosts x 2 under leaves of 2 under spines of 2 has spines
 * (1 class of 2), leaves (2 classes of 2), hosts (4 classes of 2); 7 hosts lose the second
 * spine's blocks (partial) and the last leaf's; with the leaf as fast as the spine the leaf
 * level merges into it (spines, then hosts: 2 classes of 4; two levels: one class of 4 hosts);
 * an exception (a slower NIC) gives no units. */
static void test_hier_units(void)
{
    struct { int hosts, G, nsw, T, nlay, nblk, ncls0; } k[] = {
        {8, 2, 3, 1, 3, 14, 1}, {7, 2, 3, 1, 2, 8, 1}, {4, 2, 1, 1, 1, 4, 1},
        {4, 4, 2, 2, 2, 6, 1}, {3, 2, 2, 1, 1, 2, 1}, {6, 1, 3, 1, 2, 8, 1},
        {8, 2, -3, 1, 2, 10, 1}, {4, 2, -2, 1, 1, 4, 1}};
    for (int i = 0; i < 8; i++) {
        pf_cluster_t *c = hier_shape(k[i].hosts, k[i].G, k[i].nsw, k[i].T);
        pf_map_symmetry_t sy;
        CU_ASSERT_EQUAL_FATAL(pf_map_symmetry_init(&sy, c, PF_MAP_SYM_ALL), PF_OK);
        CU_ASSERT_EQUAL(sy.nlay, k[i].nlay);
        CU_ASSERT_EQUAL(check_units(c, &sy), k[i].nblk);
        CU_ASSERT_EQUAL(sy.lay[0].nbcls, k[i].ncls0);
        pf_map_symmetry_free(&sy);
        CU_ASSERT_EQUAL_FATAL(pf_map_symmetry_init(&sy, c, PF_MAP_SYM_NO_BLOCKS), PF_OK);
        CU_ASSERT_EQUAL(sy.nlay, 0);
        pf_map_symmetry_free(&sy);
        pf_cluster_destroy(&c);
    }
    pf_cluster_t *c = hier(5, 2, 2, 40, 3); /* host 3's slower NIC: no units */
    pf_map_symmetry_t sy;
    CU_ASSERT_EQUAL(pf_map_symmetry_hier_units(memset(&sy, 0, sizeof sy), c), 0);
    pf_cluster_destroy(&c);
}

/* Stage graph where the all-reduce dominates: S stages of R replicas, each stage's ring wants
 * one host and the stages talk little, so the optimum puts different stages on different hosts
 * (a mapping that mixes stages across hosts). */
static pf_stage_graph_t *ring_heavy(int S, int R)
{
    double cu[MAXN], P[MAXN], M[MAXN * MAXN] = {0};
    for (int s = 0; s < S; s++) {
        cu[s] = 1 + s;
        P[s] = 4e9;
        if (s + 1 < S)
            M[s * S + s + 1] = M[(s + 1) * S + s] = 1e7;
    }
    return pf_stage_graph_new(S, R, cu, P, M);
}

/* The quotient search (unit blocks) against the device-level DFS with no symmetry, exhaustively
 * over symmetric hierarchies of 2-4 hosts x 2-4 GPUs under one, two and three switch levels
 * (distinct links, or a leaf as fast as its spine: merged), T = 1 and T = 2, random and ring-heavy stage graphs, m, ar and full: the same optimum (both
 * proven), brute force too where it is cheap; probes just below the optimum explore fewer nodes
 * with the units than with device classes alone, and fewer than without symmetry. */
static void test_hier_quotient(void)
{
    char err[256];
    long long nodes[3] = {0, 0, 0}, block_pruned = 0;
    int mixed = 0;
    static const int shapes[][3] = {{2, 2, 1}, {2, 4, 1}, {4, 2, 1}, {3, 4, 2}, {4, 4, 2},
                                    {4, 2, 3}, {4, 4, 3}, {3, 2, 2}, {4, 2, -2}, {4, 4, -3}};
    for (int i = 0; i < 10; i++)
        for (int T = 1; T <= 2; T++) {
            pf_cluster_t *c = hier_shape(shapes[i][0], shapes[i][1], shapes[i][2], T);
            int D = pf_cluster_ndevices(c), G = shapes[i][1] / T;
            for (int g = 0; g < 4; g++) {
                int S = 1 + (g + i) % 3, R = g == 3 ? G : 1 + (g + T) % 3;
                while (S * R > D || S * R > 6)
                    S > 1 ? S-- : R--;
                pf_stage_graph_t *sg = g == 3 ? ring_heavy(S, R)
                                              : random_stage_graph(100 + 10 * i + g + T, S, R);
                for (int inst = 0; inst < 3; inst++) {
                    pf_mapping_stats_t st[3];
                    int dev[3][MAXN];
                    for (int sym = 0; sym <= 2; sym++) {
                        pf_mapping_opts_t o = exact_opts((pf_map_inst_t)inst, sym, 1 + g % 2, 1);
                        CU_ASSERT_EQUAL_FATAL(pf_mapping_search(sg, c, &o, dev[sym], &st[sym],
                                                                err, sizeof err), PF_OK);
                        CU_ASSERT(st[sym].lower_proven);
                        CU_ASSERT(is_injective(dev[sym], S * R, D));
                    }
                    double opt = st[PF_MAP_SYM_OFF].objective_ms;
                    PF_ASSERT_CLOSE(st[PF_MAP_SYM_ALL].objective_ms, opt, 1e-6);
                    PF_ASSERT_CLOSE(st[PF_MAP_SYM_NO_BLOCKS].objective_ms, opt, 1e-6);
                    if (D <= 8)
                        PF_ASSERT_CLOSE(brute_force(sg, c, (pf_map_inst_t)inst), opt, 1e-6);
                    if (g == 3 && S > 1 && inst != PF_MAP_INST_M) /* stages on distinct hosts */
                        mixed += pf_cluster_device(c, dev[PF_MAP_SYM_ALL][0])->host !=
                                 pf_cluster_device(c, dev[PF_MAP_SYM_ALL][R])->host;
                    for (int sym = 0; sym <= 2; sym++) {
                        pf_probe_result_t res;
                        CU_ASSERT_EQUAL(pf_mapping_probe(sg, c, (pf_map_inst_t)inst,
                                                         opt * (1 - 1e-6), 0, sym, 1, NULL,
                                                         dev[sym], &res, err, sizeof err), PF_OK);
                        CU_ASSERT(!res.found && !res.timed_out);
                        nodes[sym] += res.nodes;
                        if (sym == PF_MAP_SYM_ALL)
                            block_pruned += res.block_pruned;
                    }
                }
                pf_stage_graph_destroy(&sg);
            }
            pf_cluster_destroy(&c);
        }
    CU_ASSERT(mixed > 0);
    CU_ASSERT(block_pruned > 0);
    CU_ASSERT(nodes[PF_MAP_SYM_ALL] < nodes[PF_MAP_SYM_NO_BLOCKS]);
    CU_ASSERT(nodes[PF_MAP_SYM_NO_BLOCKS] < nodes[PF_MAP_SYM_OFF]);
}

/* Above PF_MAP_TABLES_MAX_DEVICES (no matrices: links looked up, classes and units read off
 * the levels): 130 hosts x 8 under three switch levels, the units reach the optimum of device
 * classes alone (full, a random and a ring-heavy stage graph), and a probe just below it
 * explores fewer nodes (17 against 1,041 on the random graph). */
static void test_hier_units_big(void)
{
    char err[256];
    pf_cluster_t *c = hier_shape(130, 8, 3, 1);
    CU_ASSERT_FATAL(pf_cluster_ndevices(c) > PF_MAP_TABLES_MAX_DEVICES);
    pf_map_symmetry_t sy;
    CU_ASSERT_EQUAL_FATAL(pf_map_symmetry_init(&sy, c, PF_MAP_SYM_ALL), PF_OK);
    CU_ASSERT_EQUAL(sy.nlay, 3);
    CU_ASSERT_EQUAL(sy.ncls, 130); /* one class per host */
    pf_map_symmetry_free(&sy);
    long long nodes[2] = {0, 0};
    for (int g = 0; g < 2; g++) {
        pf_stage_graph_t *sg = g ? ring_heavy(3, 4) : random_stage_graph(321, 3, 4);

        pf_mapping_stats_t st[2];
        int dev[MAXN];
        for (int k = 0; k < 2; k++) {
            pf_mapping_opts_t o = exact_opts(PF_MAP_INST_FULL, k ? PF_MAP_SYM_NO_BLOCKS
                                                                  : PF_MAP_SYM_ALL, 2, 1);
            CU_ASSERT_EQUAL_FATAL(pf_mapping_search(sg, c, &o, dev, &st[k], err, sizeof err),
                                  PF_OK);
            CU_ASSERT(st[k].lower_proven);
        }
        PF_ASSERT_CLOSE(st[0].objective_ms, st[1].objective_ms, 1e-6);
        CU_ASSERT(st[0].block_pruned > 0);
        pf_probe_result_t res[2]; /* just below the optimum: the whole (pruned) tree */
        for (int k = 0; k < 2; k++)
            CU_ASSERT_EQUAL(pf_mapping_probe(sg, c, PF_MAP_INST_FULL,
                                             st[1].objective_ms * (1 - 1e-6), 0,
                                             k ? PF_MAP_SYM_NO_BLOCKS : PF_MAP_SYM_ALL, 2, NULL,
                                             dev, &res[k], err, sizeof err), PF_OK);
        CU_ASSERT(!res[0].found && !res[1].found && !res[0].timed_out && !res[1].timed_out);
        nodes[0] += res[0].nodes;
        nodes[1] += res[1].nodes;
        pf_stage_graph_destroy(&sg);
    }
    CU_ASSERT(nodes[0] < nodes[1]);
    pf_cluster_destroy(&c);
}

void pf_suite_map_symmetry(void)
{
    CU_pSuite s = CU_add_suite("map_symmetry", NULL, NULL);
    CU_add_test(s, "device classes of a regular hierarchy equal the matrix's", test_hier_classes);
    CU_add_test(s, "symmetry pruning keeps the optimum", test_symmetry);
    CU_add_test(s, "host blocks: DGX-1, generated blocks, labels that lie",
                test_host_blocks_detect);
    CU_add_test(s, "host-block rule = brute force (m, ar, full; with, without, no symmetry)",
                test_host_blocks_brute);
    CU_add_test(s, "host-block rule on two DGX-1", test_host_blocks_dgx1);
    CU_add_test(s, "host blocks: the class representative is the least in canonical order",
                test_host_blocks_canonical);
    CU_add_test(s, "host-block rule = brute force on tied block clusters", test_host_blocks_tied);
    CU_add_test(s, "units of a regular hierarchy: layers, classes, automorphisms", test_hier_units);
    CU_add_test(s, "quotient over hierarchy units = device-level DFS (T 1 and 2, 1-3 levels)",
                test_hier_quotient);
    CU_add_test(s, "units above the table limit: the optimum of device classes, fewer nodes",
                test_hier_units_big);
}
