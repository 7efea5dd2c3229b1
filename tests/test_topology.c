/* topology: generated clusters against numbers worked out by hand (Parmesan Table IX, App. D-B,
 * DGX-1 link matrix), the rules of the random kinds, determinism, and bad options. */
#include "planner/inputs/topology.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1073741824.0
/* Random bounds converted with GB/s = MB/us x 10^6 / 1024 = MB/us x 976.5625:
 * 1e-5 -> 0.009765625, 1e-4 -> 0.09765625, 1e-2 -> 9.765625 GB/s. */
#define LO5_GBPS 0.009765625
#define LO4_GBPS 0.09765625
#define HI2_GBPS 9.765625

static pf_cluster_t *build(pf_topology_opts_t *o)
{
    char err[256] = "";
    pf_cluster_t *c = NULL;
    int rc = pf_topology_build(o, &c, err, sizeof err);
    if (rc != PF_OK)
        fprintf(stderr, "\n  pf_topology_build: %s\n", err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    if (c) {
        CU_ASSERT_EQUAL(pf_cluster_validate(c, err, sizeof err), PF_OK);
        CU_ASSERT(pf_cluster_is_symmetric(c));
    }
    return c;
}

static pf_cluster_t *build_grid(pf_topology_kind_t kind, int x, int y, int z)
{
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, kind);
    o.dims[0] = x;
    o.dims[1] = y;
    o.dims[2] = z;
    return build(&o);
}

static int count_bw(const pf_cluster_t *c, double gbps)
{
    int n = pf_cluster_ndevices(c), k = 0;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            k += a != b && pf_cluster_bw_gbps(c, a, b) == gbps;
    return k;
}

static void test_table9(void)
{
    CU_ASSERT_EQUAL(pf_topology_table9_gbps(1), 78.1);
    CU_ASSERT_EQUAL(pf_topology_table9_gbps(2), 39.0);
    CU_ASSERT_EQUAL(pf_topology_table9_gbps(10), 1.46);
    CU_ASSERT_EQUAL(pf_topology_table9_gbps(19), 0.098);
    CU_ASSERT_EQUAL(pf_topology_table9_gbps(20), 0.098);
    CU_ASSERT_EQUAL(pf_topology_table9_gbps(21), 0.088);
    CU_ASSERT_EQUAL(pf_topology_table9_gbps(31), 0.088); /* "21-31" and "31-51" overlap: first wins */
    CU_ASSERT_EQUAL(pf_topology_table9_gbps(32), 0.078);
    CU_ASSERT_EQUAL(pf_topology_table9_gbps(51), 0.078);
    CU_ASSERT_EQUAL(pf_topology_table9_gbps(52), 0.068);
    CU_ASSERT_EQUAL(pf_topology_table9_gbps(100), 0.068);
    CU_ASSERT_EQUAL(pf_topology_table9_gbps(0), 0);
    /* never rises with distance */
    for (int h = 1; h < 200; h++)
        CU_ASSERT(pf_topology_table9_gbps(h + 1) <= pf_topology_table9_gbps(h));
}

static void test_grid_2d(void)
{
    /* 4x4, device i at (i % 4, i / 4). (0,0) = 0 and (3,3) = 15: mesh 3 + 3 = 6 hops -> 7.81;
     * torus min(3, 4-3) + min(3, 1) = 2 hops -> 39.0. (0,0) and (2,2) = 10: 4 hops either way. */
    pf_cluster_t *t = build_grid(PF_TOPOLOGY_TORUS2D, 4, 4, 1);
    pf_cluster_t *m = build_grid(PF_TOPOLOGY_MESH2D, 4, 4, 1);
    if (!t || !m)
        goto out;
    CU_ASSERT_EQUAL(pf_cluster_ndevices(t), 16);
    CU_ASSERT_EQUAL(pf_cluster_nhosts(t), 16); /* one host per device */
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(t, 0, 15), 39.0);
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(m, 0, 15), 7.81);
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(t, 15, 0), 39.0);
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(t, 0, 10), 14.6);
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(m, 0, 10), 14.6);
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(t, 0, 3), 78.1);  /* (0,0)-(3,0) wraps: 1 hop */
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(m, 0, 3), 24.4);  /* 3 hops */
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(t, 5, 10), 39.0); /* (1,1)-(2,2) */
    /* neighbours: the torus gives each of 16 devices 4 neighbours = 64 ordered pairs at 1 hop;
     * the mesh has 2 x 4 x 3 = 24 edges = 48 ordered pairs; the torus's farthest pair is
     * 2 + 2 = 4 hops (14.6), the mesh's 6 (7.81). */
    CU_ASSERT_EQUAL(count_bw(t, 78.1), 64);
    CU_ASSERT_EQUAL(count_bw(m, 78.1), 48);
    CU_ASSERT_EQUAL(pf_cluster_bw_min(t), 14.6);
    CU_ASSERT_EQUAL(pf_cluster_bw_min(m), 7.81);
    CU_ASSERT_STRING_EQUAL(pf_cluster_device(t, 14)->name, "x2y3");
    CU_ASSERT_STRING_EQUAL(pf_cluster_name(t), "torus2d-4x4");
    CU_ASSERT_EQUAL(pf_cluster_device(m, 0)->mem_bytes, 16 * GIB);
    CU_ASSERT_FALSE(pf_cluster_has_latency(m));
out:
    pf_cluster_destroy(&t);
    pf_cluster_destroy(&m);

    /* A 60 x 1 line reaches the tail of the table: 0-59 is 59 hops on the mesh (0.068) and 1
     * on the torus; 0-31 is 31 hops (0.088) on the mesh, 0-32 is 32 (0.078); on the torus 0-30
     * is 30 hops (0.088) and 0-32 is 60 - 32 = 28 (0.088). */
    m = build_grid(PF_TOPOLOGY_MESH2D, 60, 1, 1);
    t = build_grid(PF_TOPOLOGY_TORUS2D, 60, 1, 1);
    if (m && t) {
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(m, 0, 59), 0.068);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(m, 0, 31), 0.088);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(m, 0, 32), 0.078);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(t, 0, 59), 78.1);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(t, 0, 30), 0.088);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(t, 0, 32), 0.088);
    }
    pf_cluster_destroy(&m);
    pf_cluster_destroy(&t);
}

static void test_grid_3d(void)
{
    /* 4x4x4: (0,0,0) = 0 and (3,3,3) = 63: mesh 9 hops -> 2.93, torus 1 + 1 + 1 -> 24.4. */
    pf_cluster_t *t = build_grid(PF_TOPOLOGY_TORUS3D, 4, 4, 4);
    pf_cluster_t *m = build_grid(PF_TOPOLOGY_MESH3D, 4, 4, 4);
    if (t && m) {
        CU_ASSERT_EQUAL(pf_cluster_ndevices(t), 64);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(t, 0, 63), 24.4);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(m, 0, 63), 2.93);
        /* each torus device has 6 neighbours: 64 x 6 ordered pairs at 1 hop */
        CU_ASSERT_EQUAL(count_bw(t, 78.1), 384);
        CU_ASSERT_STRING_EQUAL(pf_cluster_name(m), "mesh3d-4x4x4");
    }
    pf_cluster_destroy(&t);
    pf_cluster_destroy(&m);

    /* 3x5x7, device = x + 3 (y + 5 z). (2,4,6) = 2 + 3 x 34 = 104: mesh 2 + 4 + 6 = 12 hops
     * -> 0.78; torus min(2,1) + min(4,1) + min(6,1) = 3 -> 24.4. (2,3,4) = 2 + 3 x 23 = 71:
     * mesh 9 -> 2.93; torus min(2,1) + min(3,2) + min(4,3) = 6 -> 7.81. */
    t = build_grid(PF_TOPOLOGY_TORUS3D, 3, 5, 7);
    m = build_grid(PF_TOPOLOGY_MESH3D, 3, 5, 7);
    if (t && m) {
        CU_ASSERT_EQUAL(pf_cluster_ndevices(m), 105);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(m, 0, 104), 0.78);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(t, 0, 104), 24.4);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(m, 71, 0), 2.93);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(t, 71, 0), 7.81);
        /* (2,3,4) to (1,3,4) = 70: one hop along x */
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(m, 71, 70), 78.1);
        CU_ASSERT_STRING_EQUAL(pf_cluster_device(m, 71)->name, "x2y3z4");
    }
    pf_cluster_destroy(&t);
    pf_cluster_destroy(&m);
}

static void test_dgx1(void)
{
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX1);
    o.machines = 2;
    pf_cluster_t *c = build(&o);
    if (!c)
        return;
    CU_ASSERT_EQUAL(pf_cluster_ndevices(c), 16);
    CU_ASSERT_EQUAL(pf_cluster_nhosts(c), 2);
    CU_ASSERT_EQUAL(pf_cluster_device(c, 8)->host, 1);
    CU_ASSERT_STRING_EQUAL(pf_cluster_device(c, 9)->name, "node1/gpu1");
    CU_ASSERT_EQUAL(pf_cluster_device(c, 0)->mem_bytes, 17179869184.0);
    CU_ASSERT_EQUAL(pf_cluster_device(c, 0)->tflops, 125);
    CU_ASSERT_STRING_EQUAL(pf_cluster_name(c), "dgx1x2");
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 0, 1), 43.2); /* double NVLink */
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 0, 2), 21.4); /* single */
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 0, 5), 10.1); /* PCIe */
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 0, 8), 1.4);  /* other machine */
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 3, 7), 21.4);
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 14, 15), 43.2); /* GPUs 6-7 of machine 1 */
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 9, 10), 21.4);  /* GPUs 1-2 of machine 1 */
    CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 7, 8), 1.4);
    /* Row 0: links 2,1,1,2 to GPUs 1-4 and PCIe to 5-7: 2 x 43.2 + 2 x 21.4 + 3 x 10.1 = 159.5,
     * plus the 8 GPUs of machine 1 at 1.4 = 11.2: 170.7. */
    double row0 = 0;
    for (int b = 1; b < 16; b++)
        row0 += pf_cluster_bw_gbps(c, 0, b);
    PF_ASSERT_CLOSE(row0, 170.7, 1e-12);
    /* Every GPU has 2 double and 2 single links (6 NVLinks): per machine 8 x 2 = 16 ordered
     * pairs at 43.2, 16 at 21.4, 56 - 32 = 24 over PCIe; between machines 2 x 8 x 8 = 128. */
    CU_ASSERT_EQUAL(count_bw(c, 43.2), 2 * 16);
    CU_ASSERT_EQUAL(count_bw(c, 21.4), 2 * 16);
    CU_ASSERT_EQUAL(count_bw(c, 10.1), 2 * 24);
    CU_ASSERT_EQUAL(count_bw(c, 1.4), 128);
    pf_cluster_destroy(&c);
}

static void test_hier_and_nvswitch(void)
{
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, PF_TOPOLOGY_HIER);
    pf_cluster_t *c = build(&o);
    if (c) {
        /* 4 x 4, device i on machine i / 4: 0-3 same machine (11), 0-4 not (1.1). Of the
         * 16 x 15 = 240 ordered pairs 4 x 4 x 3 = 48 are inside a machine: median 1.1. */
        CU_ASSERT_EQUAL(pf_cluster_ndevices(c), 16);
        CU_ASSERT_EQUAL(pf_cluster_nhosts(c), 4);
        CU_ASSERT_EQUAL(pf_cluster_device(c, 5)->host, 1);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 0, 3), 11);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 15, 12), 11);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 0, 4), 1.1);
        CU_ASSERT_EQUAL(count_bw(c, 11), 48);
        CU_ASSERT_EQUAL(pf_cluster_bw_median(c), 1.1);
        CU_ASSERT_EQUAL(pf_cluster_device(c, 0)->mem_bytes, 12884901888.0); /* 12 x 2^30 */
        CU_ASSERT_EQUAL(pf_cluster_device(c, 0)->tflops, 110);
        CU_ASSERT_STRING_EQUAL(pf_cluster_name(c), "hier4x4");
    }
    pf_cluster_destroy(&c);

    /* 2 machines x 3 GPUs, own bandwidths, latency and name: device 2 is on machine 0, 3 on 1 */
    pf_topology_opts_init(&o, PF_TOPOLOGY_HIER);
    o.machines = 2;
    o.gpus_per_machine = 3;
    o.intra_gbps = 5;
    o.inter_gbps = 0.5;
    o.latency_us = 7;
    o.name = "tiny";
    c = build(&o);
    if (c) {
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 0, 2), 5);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 2, 3), 0.5);
        CU_ASSERT(pf_cluster_has_latency(c));
        CU_ASSERT_EQUAL(pf_cluster_lat_us(c, 1, 4), 7);
        CU_ASSERT_EQUAL(pf_cluster_lat_us(c, 4, 4), 0);
        /* postal model: 7 us + 1e9 bytes / 0.5 GB/s = 0.007 + 2000 ms */
        PF_ASSERT_CLOSE(pf_cluster_xfer_ms(c, 2, 3, 1e9), 2000.007, 1e-12);
        CU_ASSERT_STRING_EQUAL(pf_cluster_name(c), "tiny");
    }
    pf_cluster_destroy(&c);

    pf_topology_opts_init(&o, PF_TOPOLOGY_NVSWITCH);
    o.machines = 2;
    c = build(&o);
    if (c) {
        CU_ASSERT_EQUAL(pf_cluster_ndevices(c), 16);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 0, 7), 370);
        CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, 0, 8), 50);
        CU_ASSERT_EQUAL(pf_cluster_device(c, 15)->mem_bytes, 80 * GIB);
        CU_ASSERT_EQUAL(pf_cluster_device(c, 15)->tflops, 989);
        CU_ASSERT_STRING_EQUAL(pf_cluster_name(c), "nvswitch2x8");
    }
    pf_cluster_destroy(&c);
}

/* DGX A100 / H100: 8 GPUs per host on NVSwitch (one bandwidth inside), InfiniBand between
 * (per GPU), latency by host. */
static void test_dgx_nvswitch(void)
{
    static const struct {
        pf_topology_kind_t kind;
        double intra, inter, tflops;
        const char *name;
    } want[] = {{PF_TOPOLOGY_DGX_A100, 250, 25, 312, "dgx-a100x3"},
                {PF_TOPOLOGY_DGX_H100, 370, 50, 989, "dgx-h100x3"}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        pf_topology_opts_t o;
        pf_topology_opts_init(&o, want[k].kind);
        o.machines = 3;
        pf_cluster_t *c = build(&o); /* also checks validity and symmetry */
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        CU_ASSERT_EQUAL(pf_cluster_ndevices(c), 24);
        CU_ASSERT_EQUAL(pf_cluster_nhosts(c), 3);
        CU_ASSERT_STRING_EQUAL(pf_cluster_name(c), want[k].name);
        /* Host blocks: device i on host i / 8; every pair inside a block has the NVSwitch
         * figure and 2.5 us, every pair across blocks the InfiniBand one and 5 us. Of the
         * 24 x 23 = 552 ordered pairs 3 x 8 x 7 = 168 are inside a host. */
        for (int a = 0; a < 24; a++) {
            CU_ASSERT_EQUAL(pf_cluster_device(c, a)->host, a / 8);
            CU_ASSERT_EQUAL(pf_cluster_device(c, a)->mem_bytes, 80 * GIB);
            CU_ASSERT_EQUAL(pf_cluster_device(c, a)->tflops, want[k].tflops);
            for (int b = 0; b < 24; b++) {
                if (a == b)
                    continue;
                int same = a / 8 == b / 8;
                CU_ASSERT_EQUAL(pf_cluster_bw_gbps(c, a, b), same ? want[k].intra : want[k].inter);
                CU_ASSERT_EQUAL(pf_cluster_lat_us(c, a, b), same ? 2.5 : 5);
            }
        }
        CU_ASSERT_EQUAL(count_bw(c, want[k].intra), 168);
        CU_ASSERT_EQUAL(count_bw(c, want[k].inter), 552 - 168);
        CU_ASSERT_EQUAL(pf_cluster_bw_median(c), want[k].inter);
        /* postal model across hosts: 5 us + 1e9 B / inter GB/s */
        PF_ASSERT_CLOSE(pf_cluster_xfer_ms(c, 0, 23, 1e9), 0.005 + 1e3 / want[k].inter, 1e-12);
        pf_cluster_destroy(&c);
    }
    /* own inter-machine latency, no intra latency: only cross-host pairs get one */
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX_H100);
    o.machines = 2, o.latency_us = 0, o.inter_latency_us = 8;
    pf_cluster_t *c = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(pf_cluster_lat_us(c, 0, 7), 0);
    CU_ASSERT_EQUAL(pf_cluster_lat_us(c, 7, 8), 8);
    pf_cluster_destroy(&c);
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX_A100);
    o.gpus_per_machine = 4;
    char err[256] = "";
    CU_ASSERT_EQUAL(pf_topology_build(&o, &c, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "dgx-a100: 4 GPUs per machine, a DGX has 8");
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX_A100);
    o.inter_latency_us = -1;
    CU_ASSERT_EQUAL(pf_topology_build(&o, &c, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NULL(c);
}

static pf_cluster_t *build_random(pf_topology_kind_t kind, int devices, uint64_t seed)
{
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, kind);
    o.devices = devices;
    o.seed = seed;
    return build(&o);
}

static int same_cluster(const pf_cluster_t *a, const pf_cluster_t *b)
{
    int n = pf_cluster_ndevices(a);
    if (n != pf_cluster_ndevices(b))
        return 0;
    for (int i = 0; i < n; i++)
        if (pf_cluster_device(a, i)->host != pf_cluster_device(b, i)->host)
            return 0;
    return !memcmp(pf_cluster_bw_matrix(a), pf_cluster_bw_matrix(b),
                   (size_t)n * n * sizeof(double));
}

static void test_random_determinism(void)
{
    CU_ASSERT_EQUAL(PF_TOPOLOGY_GBPS_PER_MB_PER_US, 976.5625);
    pf_topology_kind_t kinds[] = {PF_TOPOLOGY_RANDOM_BLK1, PF_TOPOLOGY_RANDOM_BLK2, PF_TOPOLOGY_UNIFORM};
    for (int k = 0; k < 3; k++) {
        pf_cluster_t *a = build_random(kinds[k], 40, 7);
        pf_cluster_t *b = build_random(kinds[k], 40, 7);
        pf_cluster_t *c = build_random(kinds[k], 40, 8);
        if (a && b && c) {
            CU_ASSERT(same_cluster(a, b));
            CU_ASSERT_FALSE(same_cluster(a, c));
        }
        pf_cluster_destroy(&a);
        pf_cluster_destroy(&b);
        pf_cluster_destroy(&c);
    }
}

/* Hosts are node indices 0, 1, ... in device order; every node has 2..8 devices (1 only for a
 * single-device cluster). Returns the node count, or -1. */
static int check_blocks(const pf_cluster_t *c)
{
    int n = pf_cluster_ndevices(c), node = 0, size = 0;
    for (int i = 0; i < n; i++) {
        int h = pf_cluster_device(c, i)->host;
        if (h == node) {
            size++;
        } else if (h == node + 1 && size >= 2 && size <= 8) {
            node = h;
            size = 1;
        } else {
            return -1;
        }
    }
    int last_ok = n == 1 ? size == 1 : size >= 2 && size <= 8;
    return last_ok ? node + 1 : -1;
}

static void test_random_blk1(void)
{
    pf_cluster_t *c = build_random(PF_TOPOLOGY_RANDOM_BLK1, 64, 1);
    if (!c)
        return;
    int n = 64, nodes = check_blocks(c);
    CU_ASSERT(nodes >= 8 && nodes <= 32); /* 64 / 8 .. 64 / 2 */
    double *node_bw = calloc((size_t)nodes > 0 ? (size_t)nodes : 1, sizeof *node_bw);
    int ok_bounds = 1, ok_inter = 1, ok_const = 1;
    for (int a = 0; a < n && nodes > 0; a++) {
        for (int b = a + 1; b < n; b++) {
            int ha = pf_cluster_device(c, a)->host, hb = pf_cluster_device(c, b)->host;
            double bw = pf_cluster_bw_gbps(c, a, b);
            if (ha != hb) {
                ok_inter &= bw == LO4_GBPS; /* 1e-4 MB/us */
                continue;
            }
            ok_bounds &= bw >= LO4_GBPS && bw <= HI2_GBPS;
            if (node_bw[ha] == 0)
                node_bw[ha] = bw;
            ok_const &= bw == node_bw[ha]; /* one bandwidth per node */
        }
    }
    CU_ASSERT(ok_bounds);
    CU_ASSERT(ok_inter);
    CU_ASSERT(ok_const);
    /* the per-node draws differ from node to node */
    CU_ASSERT(nodes > 1 && node_bw[0] != node_bw[1]);
    free(node_bw);
    CU_ASSERT_STRING_EQUAL(pf_cluster_name(c), "random-blk1-64-seed1");
    pf_cluster_destroy(&c);

    /* Node sizes for every D in 1..40 and 25 seeds: always 2..8 (D = 1: one device). */
    int all_ok = 1;
    for (int d = 1; d <= 40; d++)
        for (uint64_t s = 0; s < 25; s++) {
            pf_cluster_t *r = build_random(PF_TOPOLOGY_RANDOM_BLK1, d, s);
            all_ok &= r && check_blocks(r) > 0;
            pf_cluster_destroy(&r);
        }
    CU_ASSERT(all_ok);
}

static void test_random_blk2(void)
{
    pf_cluster_t *c = build_random(PF_TOPOLOGY_RANDOM_BLK2, 64, 3);
    if (!c)
        return;
    int n = 64, nodes = check_blocks(c);
    CU_ASSERT(nodes >= 8);
    /* mean of every intra-node pair, summed row-major a < b as the generator documents */
    double sum = 0;
    int count = 0, ok_bounds = 1, distinct = 0;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            if (pf_cluster_device(c, a)->host == pf_cluster_device(c, b)->host) {
                double bw = pf_cluster_bw_gbps(c, a, b);
                ok_bounds &= bw >= LO5_GBPS && bw <= HI2_GBPS;
                sum += bw;
                count++;
                /* heterogeneous inside a node: pairs (a, a+1) and (a, a+2) of one node differ */
                if (b == a + 2)
                    distinct += bw != pf_cluster_bw_gbps(c, a, a + 1);
            }
    CU_ASSERT(ok_bounds);
    CU_ASSERT(distinct > 0);
    double base = sum / count / 10;
    int ok_inter = 1;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            int ha = pf_cluster_device(c, a)->host, hb = pf_cluster_device(c, b)->host;
            if (ha != hb)
                ok_inter &= pf_cluster_bw_gbps(c, a, b) == base / abs(ha - hb);
        }
    CU_ASSERT(ok_inter);
    /* nodes 0 and 2 get half of what neighbouring nodes 0 and 1 get */
    int first1 = 0, first2;
    while (pf_cluster_device(c, first1)->host != 1)
        first1++;
    for (first2 = first1; pf_cluster_device(c, first2)->host != 2; first2++)
        ;
    PF_ASSERT_CLOSE(pf_cluster_bw_gbps(c, 0, first2), pf_cluster_bw_gbps(c, 0, first1) / 2, 1e-15);
    pf_cluster_destroy(&c);
}

static void test_uniform(void)
{
    pf_cluster_t *c = build_random(PF_TOPOLOGY_UNIFORM, 64, 1);
    if (!c)
        return;
    int n = 64, ok = 1;
    double sum = 0;
    for (int a = 0; a < n; a++) {
        ok &= pf_cluster_device(c, a)->host == a;
        for (int b = a + 1; b < n; b++) {
            double bw = pf_cluster_bw_gbps(c, a, b);
            ok &= bw >= LO5_GBPS && bw <= HI2_GBPS;
            sum += bw;
        }
    }
    CU_ASSERT(ok);
    /* 2016 draws of U[0.009765625, 9.765625]: mean (lo + hi) / 2 = 4.8876953125, standard error
     * (hi - lo) / sqrt(12 x 2016) = 0.063; 5% (0.24) is about 4 standard errors. */
    PF_ASSERT_CLOSE(sum / 2016, 4.8876953125, 0.05);
    pf_cluster_destroy(&c);
}

static void expect_bad(pf_topology_opts_t *o, const char *want)
{
    char err[256] = "";
    pf_cluster_t *c = (pf_cluster_t *)1;
    int rc = pf_topology_build(o, &c, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_EINPUT);
    CU_ASSERT_PTR_NULL(c);
    if (!strstr(err, want)) {
        fprintf(stderr, "\n  got '%s', want '%s'\n", err, want);
        CU_FAIL("message");
    }
}

static void test_bad_options(void)
{
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, PF_TOPOLOGY_MESH2D);
    o.dims[1] = 0;
    expect_bad(&o, "mesh2d: dimension 2 is 0");
    pf_topology_opts_init(&o, PF_TOPOLOGY_TORUS2D);
    o.dims[2] = 3;
    expect_bad(&o, "a 2D grid needs 1");
    pf_topology_opts_init(&o, PF_TOPOLOGY_MESH3D);
    o.dims[0] = o.dims[1] = o.dims[2] = 20;
    expect_bad(&o, "8000 devices, more than the cap of 4096");
    pf_topology_opts_init(&o, PF_TOPOLOGY_TORUS3D);
    o.dims[0] = o.dims[1] = o.dims[2] = 1 << 20; /* the product would overflow int */
    expect_bad(&o, "more than the cap");
    pf_topology_opts_init(&o, PF_TOPOLOGY_UNIFORM);
    o.devices = 4097;
    expect_bad(&o, "4097 devices, more than the cap of 4096");
    o.devices = 0;
    expect_bad(&o, "0 devices");
    pf_topology_opts_init(&o, PF_TOPOLOGY_HIER);
    o.machines = 0;
    expect_bad(&o, "0 machines");
    pf_topology_opts_init(&o, PF_TOPOLOGY_HIER);
    o.intra_gbps = 0;
    expect_bad(&o, "intra-machine bandwidth");
    pf_topology_opts_init(&o, PF_TOPOLOGY_NVSWITCH);
    o.inter_gbps = NAN;
    expect_bad(&o, "inter-machine bandwidth");
    pf_topology_opts_init(&o, PF_TOPOLOGY_NVSWITCH);
    o.machines = 600; /* 4800 GPUs: too many for a matrix (a hierarchy takes up to 131,072) */
    o.matrix = 1;
    expect_bad(&o, "4800 devices");
    pf_topology_opts_init(&o, PF_TOPOLOGY_NVSWITCH);
    o.machines = PF_TOPOLOGY_MAX_MACHINES + 1;
    expect_bad(&o, "16385 machines of 8 GPUs, more than the cap of 16384 machines");
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX1);
    o.gpus_per_machine = 4;
    expect_bad(&o, "a DGX-1 has 8");
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX1);
    o.mem_bytes = 0;
    expect_bad(&o, "must be positive");
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX1);
    o.latency_us = -1;
    expect_bad(&o, "latency");
    pf_topology_opts_init(&o, PF_TOPOLOGY_DGX1);
    o.kind = (pf_topology_kind_t)99;
    expect_bad(&o, "unknown topology kind 99");
}

static void test_parse_kind(void)
{
    static const char *names[] = {"hier",    "dgx1",   "nvswitch",    "mesh2d",      "torus2d",
                                  "mesh3d",  "torus3d", "random-blk1", "random-blk2", "uniform"};
    pf_topology_kind_t k;
    for (int i = 0; i < 10; i++) {
        CU_ASSERT_EQUAL(pf_topology_parse_kind(names[i], &k), PF_OK);
        CU_ASSERT_EQUAL((int)k, i);
        CU_ASSERT_STRING_EQUAL(pf_topology_kind_name(k), names[i]);
    }
    CU_ASSERT_EQUAL(pf_topology_parse_kind("random_blk_2", &k), PF_OK);
    CU_ASSERT_EQUAL(k, PF_TOPOLOGY_RANDOM_BLK2);
    CU_ASSERT_EQUAL(pf_topology_parse_kind("uniform_dist", &k), PF_OK);
    CU_ASSERT_EQUAL(k, PF_TOPOLOGY_UNIFORM);
    CU_ASSERT_EQUAL(pf_topology_parse_kind("mesh", &k), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_topology_parse_kind("Hier", &k), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_topology_parse_kind("", &k), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_topology_parse_kind(NULL, &k), PF_EINPUT);
}

/* Run a shell command built from fmt; "@" in the result stands for the planfarm binary. */
static int run(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run(char *out, size_t cap, const char *fmt, ...)
{
    char cmd[2048], full[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    size_t n = 0;
    for (const char *p = cmd; *p && n + 1 < sizeof full; p++) {
        if (*p == '@')
            n += (size_t)snprintf(full + n, sizeof full - n, "%s", pf_test_bin());
        else
            full[n++] = *p;
        if (n >= sizeof full)
            n = sizeof full - 1;
    }
    full[n] = '\0';
    return pf_test_run(full, out, cap);
}

static void test_cli(void)
{
    char out[8192], p1[700], p2[700], p3[700];
    const char *dir = pf_test_tmpdir();
    snprintf(p1, sizeof p1, "%s/r1.json", dir);
    snprintf(p2, sizeof p2, "%s/r2.json", dir);
    snprintf(p3, sizeof p3, "%s/r3.json", dir);

    /* same seed: byte-identical files; another seed: different */
    CU_ASSERT_EQUAL(run(out, sizeof out, "@ cluster random-blk2 --devices 48 --seed 5 -o %s",
                        p1), 0);
    CU_ASSERT_EQUAL(run(out, sizeof out, "@ cluster random-blk2 --devices 48 --seed 5 -o %s",
                        p2), 0);
    CU_ASSERT_EQUAL(run(out, sizeof out, "@ cluster random-blk2 --devices 48 --seed 6 -o %s",
                        p3), 0);
    CU_ASSERT_EQUAL(run(out, sizeof out, "cmp -s %s %s", p1, p2), 0);
    CU_ASSERT_NOT_EQUAL(run(out, sizeof out, "cmp -s %s %s", p1, p3), 0);
    CU_ASSERT_EQUAL(run(out, sizeof out, "@ check %s", p1), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "cluster random-blk2-48-seed5: 48 devices"));

    /* the file reads back as the planner built it */
    pf_cluster_t *file = NULL, *mem = build_random(PF_TOPOLOGY_RANDOM_BLK2, 48, 5);
    char err[256];
    CU_ASSERT_EQUAL(pf_cluster_load(p1, &file, err, sizeof err), PF_OK);
    if (file && mem)
        CU_ASSERT(same_cluster(file, mem));
    pf_cluster_destroy(&file);
    pf_cluster_destroy(&mem);

    /* stdout, latency, and `planfarm check` on the result */
    CU_ASSERT_EQUAL(
        run(out, sizeof out, "@ cluster torus2d --dims 4x4 --latency-us 5 | @ check -"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "cluster torus2d-4x4: 16 devices on 16 hosts"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "min 14.6, median 39, max 78.1 GB/s (symmetric)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "latency:      5 .. 5 us"));
    CU_ASSERT_EQUAL(run(out, sizeof out, "@ cluster dgx-a100 --machines 2 | @ check -"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "cluster dgx-a100x2: 16 devices on 2 hosts"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "min 25, median 25, max 250 GB/s (symmetric)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "latency:      2.5 .. 5 us"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "hierarchy:    2 levels, 2 host slots, 0 exceptions"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "leaf     all below      25 GB/s per GPU"));
    CU_ASSERT_EQUAL(run(out, sizeof out,
                        "@ cluster dgx-h100 --machines 2 --inter-latency-us 7 | @ check -"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "latency:      2.5 .. 7 us"));
    CU_ASSERT_EQUAL(run(out, sizeof out, "@ cluster dgx1 --machines 2 --mem-gb 32"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"mem_bytes\": 34359738368")); /* 32 x 2^30 */
    CU_ASSERT_EQUAL(run(out, sizeof out, "@ cluster --help"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: planfarm cluster KIND"));

    static const struct {
        const char *args, *want;
    } bad[] = {
        {"mesh2d --dims 4x0", "--dims: '4x0': dimension 2 is 0, must be in [1, 4096]"},
        {"mesh2d --dims 4x4x4", "--dims: '4x4x4' has 3 dimensions, mesh2d needs 2 (XxY)"},
        {"torus3d --dims 4xx4", "--dims: '4xx4' is not of the form XxYxZ"},
        {"mesh3d --dims 20x20x20", "mesh3d: 8000 devices, more than the cap of 4096"},
        {"uniform --devices 5000", "--devices: 5000 is outside [1, 4096]"},
        {"ring", "unknown kind 'ring' (expected hier, dgx1"},
        {"", "expected a KIND"},
        {"dgx1 --gpus 4", "--gpus does not apply to dgx1"},
        {"hier --dims 4x4", "--dims does not apply to hier"},
        {"hier --inter-gbps 0", "--inter-gbps: must be positive"},
        {"dgx-h100 --gpus 4", "--gpus does not apply to dgx-h100"},
        {"torus2d --inter-latency-us 3", "--inter-latency-us does not apply to torus2d"},
        {"random-blk1 --seed x", "--seed: 'x' is not an integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run(out, sizeof out, "@ cluster %s", bad[i].args);
        CU_ASSERT_EQUAL(rc, 2);
        if (!strstr(out, bad[i].want)) {
            fprintf(stderr, "\n  '%s': got '%s', want '%s'\n", bad[i].args, out, bad[i].want);
            CU_FAIL("message");
        }
    }
}

void pf_suite_topology(void)
{
    CU_pSuite s = CU_add_suite("topology", NULL, NULL);
    CU_add_test(s, "Table IX by hop count, overlap at 31", test_table9);
    CU_add_test(s, "2D mesh and torus: hops, wrap-around, neighbour counts", test_grid_2d);
    CU_add_test(s, "3D mesh and torus, odd dimensions", test_grid_3d);
    CU_add_test(s, "DGX-1 link matrix and inter-machine bandwidth", test_dgx1);
    CU_add_test(s, "two-level hierarchy and NVSwitch", test_hier_and_nvswitch);
    CU_add_test(s, "DGX A100 / H100: host blocks, bandwidth, latency, device", test_dgx_nvswitch);
    CU_add_test(s, "random kinds: same seed same cluster, other seed differs",
                test_random_determinism);
    CU_add_test(s, "random_blk_1: node sizes, per-node bandwidth, fixed inter-node",
                test_random_blk1);
    CU_add_test(s, "random_blk_2: bounds, inter-node = mean intra / 10 / |i-j|", test_random_blk2);
    CU_add_test(s, "uniform_dist: bounds and mean", test_uniform);
    CU_add_test(s, "bad options are PF_EINPUT with a message", test_bad_options);
    CU_add_test(s, "kind names", test_parse_kind);
    CU_add_test(s, "CLI: byte-identical files, check, exit 2 on bad flags", test_cli);
}
