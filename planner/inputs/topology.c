#include "planner/inputs/topology.h"
#include "planner/ir/cluster_hier.h"
#include "planner/ir/devmodel.h"
#include "planner/core/rng.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1073741824.0

/* Parmesan App. D-B, two-level hierarchy: Titan V (12 GB HBM2; 110 TFLOPs is NVIDIA's tensor-core
 * figure, the same kind of number as the V100's 125), PCIe 11 GB/s inside, Ethernet 1.1 between. */
#define HIER_MEM_BYTES (12 * GIB)
#define HIER_TFLOPS 110.0
#define HIER_INTRA_GBPS 11.0
#define HIER_INTER_GBPS 1.1

/* Parmesan App. D-B, Alibaba cloud 4x DGX-1: V100 16 GB, 125 TFLOPs (tensor cores). */
#define V100_MEM_BYTES (16 * GIB)
#define V100_TFLOPS 125.0
#define DGX1_GPUS 8
#define DGX1_DOUBLE_GBPS 43.2
#define DGX1_SINGLE_GBPS 21.4
#define DGX1_PCIE_GBPS 10.1
#define DGX1_INTER_GBPS 1.4

/* NVLink link counts between the 8 GPUs of a DGX-1 (2 = double link, 0 = PCIe only). */
static const unsigned char dgx1_links[DGX1_GPUS][DGX1_GPUS] = {
    {0, 2, 1, 1, 2, 0, 0, 0}, {2, 0, 1, 2, 0, 1, 0, 0}, {1, 1, 0, 2, 0, 0, 2, 0},
    {1, 2, 2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2, 1, 1}, {0, 1, 0, 0, 2, 0, 1, 2},
    {0, 0, 2, 0, 1, 1, 0, 2}, {0, 0, 0, 1, 1, 2, 2, 0}};

/* HGX H100 8-GPU: about 371-377 GB/s unidirectional peer copy through NVSwitch (rounded down to
 * 370); between machines one 400 Gb/s NDR InfiniBand port per GPU = 50 GB/s per GPU pair.
 * H100 SXM: 80 GB, 989 TFLOPs dense bf16. */
#define H100_MEM_BYTES (80 * GIB)
#define H100_TFLOPS 989.0
#define NVSWITCH_GPUS 8
#define NVSWITCH_INTRA_GBPS 370.0
#define NVSWITCH_INTER_GBPS 50.0

/* DGX A100 and DGX H100 (8 GPUs, NVSwitch inside, one InfiniBand HCA per GPU between machines).
 * Inside: the unidirectional bandwidth one GPU reaches copying to a peer. H100: 371-377 GB/s
 * measured (shared/data README; p2pBandwidthLatencyTest), 370 as the nvswitch kind, of an NVLink 4
 * peak of 18 links x 25 GB/s = 450 GB/s per direction (82 %). A100: NVLink 3, 12 links x 25 GB/s
 * = 300 GB/s per direction (NVIDIA's "600 GB/s" counts both); no measurement is at hand, so the
 * H100's measured 82 % of peak gives 247, rounded to 250 GB/s.
 * Between machines: A100 8x HDR 200 Gb/s = 25 GB/s per GPU; H100 8x NDR 400 Gb/s = 50 GB/s per GPU
 * (DGX A100 / DGX H100 datasheets).
 * Memory: A100 80GB and H100 80GB HBM3, both quoted as 80 GiB (A100 80GB reports 81920 MiB).
 * TFLOPs: dense bf16 tensor-core peak, 312 (A100 SXM) and 989 (H100 SXM) (NVIDIA datasheets).
 * Latency: a small peer copy over NVLink/NVSwitch takes about 2-3 us (p2pBandwidthLatencyTest's
 * GPU-to-GPU latency); a small message over InfiniBand with GPUDirect RDMA about 5 us end to end
 * (wire ~1-2 us plus the host-side posting and completion): 2.5 and 5 us. */
#define DGX_GPUS 8
#define A100_MEM_BYTES (80 * GIB)
#define A100_TFLOPS 312.0
#define DGX_A100_INTRA_GBPS 250.0
#define DGX_A100_INTER_GBPS 25.0
#define DGX_H100_INTRA_GBPS 370.0
#define DGX_H100_INTER_GBPS 50.0
#define DGX_NVLINK_LATENCY_US 2.5
#define DGX_IB_LATENCY_US 5.0
/* Scalable units of the DGX SuperPOD reference architectures: 20 DGX A100 or 32 DGX H100 per
 * unit, one leaf switch per rail (8 rails), full bisection (oversubscription 1) up to the core.
 * Spine groups of 16 units are our choice: bandwidth is equal at every level by default, so the
 * grouping only tells the planner which hosts share switches. */
#define SU_A100_HOSTS 20
#define SU_H100_HOSTS 32
#define SPINE_LEAVES 16

/* Random kinds (App. D-B), bounds in MB/us as the paper draws them. */
#define BLK1_INTRA_LO_MBUS 1e-4
#define BLK1_INTRA_HI_MBUS 1e-2
#define BLK1_INTER_MBUS 1e-4
#define BLK2_INTRA_LO_MBUS 1e-5
#define BLK2_INTRA_HI_MBUS 1e-2
#define UNIFORM_LO_MBUS 1e-5
#define UNIFORM_HI_MBUS 1e-2
/* The paper does not say how the node sizes b_1..b_L are drawn: we draw each uniformly in
 * [BLK_MIN, BLK_MAX] (a node of 2 to 8 devices, like real machines). */
#define BLK_MIN 2
#define BLK_MAX 8

static const struct {
    const char *name, *alias;
    pf_topology_kind_t kind;
} kinds[] = {
    {"hier", NULL, PF_TOPOLOGY_HIER},
    {"dgx1", NULL, PF_TOPOLOGY_DGX1},
    {"nvswitch", NULL, PF_TOPOLOGY_NVSWITCH},
    {"mesh2d", NULL, PF_TOPOLOGY_MESH2D},
    {"torus2d", NULL, PF_TOPOLOGY_TORUS2D},
    {"mesh3d", NULL, PF_TOPOLOGY_MESH3D},
    {"torus3d", NULL, PF_TOPOLOGY_TORUS3D},
    {"random-blk1", "random_blk_1", PF_TOPOLOGY_RANDOM_BLK1},
    {"random-blk2", "random_blk_2", PF_TOPOLOGY_RANDOM_BLK2},
    {"uniform", "uniform_dist", PF_TOPOLOGY_UNIFORM},
    {"dgx-a100", NULL, PF_TOPOLOGY_DGX_A100},
    {"dgx-h100", NULL, PF_TOPOLOGY_DGX_H100},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

int pf_topology_parse_kind(const char *s, pf_topology_kind_t *kind)
{
    for (size_t i = 0; s && i < NKINDS; i++) {
        if (!strcmp(s, kinds[i].name) || (kinds[i].alias && !strcmp(s, kinds[i].alias))) {
            *kind = kinds[i].kind;
            return PF_OK;
        }
    }
    return PF_EINPUT;
}

const char *pf_topology_kind_name(pf_topology_kind_t kind)
{
    for (size_t i = 0; i < NKINDS; i++)
        if (kinds[i].kind == kind)
            return kinds[i].name;
    return "unknown";
}

static int is_grid(pf_topology_kind_t k)
{
    return k == PF_TOPOLOGY_MESH2D || k == PF_TOPOLOGY_TORUS2D || k == PF_TOPOLOGY_MESH3D ||
           k == PF_TOPOLOGY_TORUS3D;
}

static int grid_ndims(pf_topology_kind_t k)
{
    return k == PF_TOPOLOGY_MESH3D || k == PF_TOPOLOGY_TORUS3D ? 3 : 2;
}

static int is_dgx_nvswitch(pf_topology_kind_t k)
{
    return k == PF_TOPOLOGY_DGX_A100 || k == PF_TOPOLOGY_DGX_H100;
}

static int is_random(pf_topology_kind_t k)
{
    return k == PF_TOPOLOGY_RANDOM_BLK1 || k == PF_TOPOLOGY_RANDOM_BLK2 || k == PF_TOPOLOGY_UNIFORM;
}

void pf_topology_opts_init(pf_topology_opts_t *o, pf_topology_kind_t kind)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->machines = 4;
    o->gpus_per_machine = 4;
    o->intra_gbps = HIER_INTRA_GBPS;
    o->inter_gbps = HIER_INTER_GBPS;
    o->dims[0] = o->dims[1] = 4;
    o->dims[2] = grid_ndims(kind) == 3 ? 4 : 1;
    o->devices = 64;
    o->seed = 1;
    o->hosts_per_leaf = kind == PF_TOPOLOGY_DGX_A100 ? SU_A100_HOSTS : SU_H100_HOSTS;
    o->leaves_per_spine = SPINE_LEAVES;
    o->oversub = 1;
    /* Mesh, torus and random kinds name no device: a V100, the GPU of the paper's DGX-1. */
    o->mem_bytes = V100_MEM_BYTES;
    o->tflops = V100_TFLOPS;
    switch (kind) {
    case PF_TOPOLOGY_HIER:
        o->mem_bytes = HIER_MEM_BYTES;
        o->tflops = HIER_TFLOPS;
        break;
    case PF_TOPOLOGY_DGX1:
        o->device_model = "v100";
        o->gpus_per_machine = DGX1_GPUS;
        o->intra_gbps = DGX1_DOUBLE_GBPS;
        o->inter_gbps = DGX1_INTER_GBPS;
        break;
    case PF_TOPOLOGY_NVSWITCH:
        o->gpus_per_machine = NVSWITCH_GPUS;
        o->intra_gbps = NVSWITCH_INTRA_GBPS;
        o->inter_gbps = NVSWITCH_INTER_GBPS;
        o->mem_bytes = H100_MEM_BYTES;
        o->tflops = H100_TFLOPS;
        o->device_model = "h100-sxm";
        break;
    case PF_TOPOLOGY_DGX_A100:
    case PF_TOPOLOGY_DGX_H100: {
        int a100 = kind == PF_TOPOLOGY_DGX_A100;
        o->gpus_per_machine = DGX_GPUS;
        o->intra_gbps = a100 ? DGX_A100_INTRA_GBPS : DGX_H100_INTRA_GBPS;
        o->inter_gbps = a100 ? DGX_A100_INTER_GBPS : DGX_H100_INTER_GBPS;
        o->mem_bytes = a100 ? A100_MEM_BYTES : H100_MEM_BYTES;
        o->tflops = a100 ? A100_TFLOPS : H100_TFLOPS;
        o->device_model = a100 ? "a100-80g" : "h100-sxm";
        o->latency_us = DGX_NVLINK_LATENCY_US;
        o->inter_latency_us = DGX_IB_LATENCY_US;
        break;
    }
    default:
        break;
    }
}

double pf_topology_table9_gbps(int hops)
{
    static const double first20[20] = {78.1, 39.0, 24.4, 14.6, 9.77, 7.81, 5.86,
                                       4.4,  2.93, 1.46, 0.88, 0.78, 0.68, 0.59,
                                       0.49, 0.39, 0.29, 0.19, 0.098, 0.098};
    if (hops < 1)
        return 0;
    if (hops <= 20)
        return first20[hops - 1];
    if (hops <= 31) /* "21-31"; the next range "31-51" overlaps at 31: the first range wins */
        return 0.088;
    if (hops <= 51)
        return 0.078;
    return 0.068;
}

/* ---- validation ---- */

static int check_positive(const char *what, double x, char *err, size_t errlen)
{
    if (!isfinite(x) || x <= 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %g, must be positive", what, x);
    return PF_OK;
}

/* The kinds built of switched machine blocks: a hierarchy by default, and a --models list. */
static int is_switched(pf_topology_kind_t k)
{
    return k == PF_TOPOLOGY_NVSWITCH || is_dgx_nvswitch(k);
}

static int writes_hierarchy(const pf_topology_opts_t *o)
{
    return !o->matrix && is_switched(o->kind);
}

static int check_count(const char *kind, long long ndev, char *err, size_t errlen)
{
    if (ndev > PF_TOPOLOGY_MAX_DEVICES)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %lld devices, more than the cap of %d", kind,
                       ndev, PF_TOPOLOGY_MAX_DEVICES);
    return PF_OK;
}

/* A machine kind's size: a matrix up to PF_TOPOLOGY_MAX_DEVICES, a hierarchy up to
 * PF_TOPOLOGY_MAX_MACHINES machines, and the hierarchy's own options. */
static int check_size(const pf_topology_opts_t *o, const char *kind, char *err, size_t errlen)
{
    if (!writes_hierarchy(o))
        return check_count(kind, (long long)o->machines * o->gpus_per_machine, err, errlen);
    if (o->machines > PF_TOPOLOGY_MAX_MACHINES ||
        (long long)o->machines * o->gpus_per_machine > PF_CLUSTER_HIER_MAX_DEVICES)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %d machines of %d GPUs, more than the cap of "
                       "%d machines and %d devices", kind, o->machines, o->gpus_per_machine,
                       PF_TOPOLOGY_MAX_MACHINES, PF_CLUSTER_HIER_MAX_DEVICES);
    if (o->hosts_per_leaf < 1 || o->leaves_per_spine < 1 || !isfinite(o->oversub) ||
        o->oversub < 1)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %d hosts per leaf, %d leaves per spine, "
                       "oversubscription %g (need >= 1 each)", kind, o->hosts_per_leaf,
                       o->leaves_per_spine, o->oversub);
    return PF_OK;
}

/* Checks the options that the kind uses and returns its device count in *ndev. */
static int check_opts(const pf_topology_opts_t *o, int *ndev, char *err, size_t errlen)
{
    const char *kind = pf_topology_kind_name(o->kind);
    int rc;
    if (!strcmp(kind, "unknown"))
        return pf_fail(err, errlen, PF_EINPUT, "unknown topology kind %d", (int)o->kind);
    if ((rc = check_positive("memory per device (bytes)", o->mem_bytes, err, errlen)))
        return rc;
    if (!isfinite(o->tflops) || o->tflops < 0)
        return pf_fail(err, errlen, PF_EINPUT, "tflops: %g, must be >= 0", o->tflops);
    if (!isfinite(o->latency_us) || o->latency_us < 0)
        return pf_fail(err, errlen, PF_EINPUT, "latency: %g us, must be >= 0", o->latency_us);
    if (!isfinite(o->inter_latency_us) || o->inter_latency_us < 0)
        return pf_fail(err, errlen, PF_EINPUT, "inter-machine latency: %g us, must be >= 0",
                       o->inter_latency_us);
    if (is_grid(o->kind)) {
        int nd = grid_ndims(o->kind);
        long long n = 1;
        for (int k = 0; k < 3; k++) {
            if (k >= nd && o->dims[k] != 1)
                return pf_fail(err, errlen, PF_EINPUT, "%s: dims[%d] = %d, a 2D grid needs 1",
                               kind, k, o->dims[k]);
            if (o->dims[k] < 1)
                return pf_fail(err, errlen, PF_EINPUT, "%s: dimension %d is %d, must be >= 1",
                               kind, k + 1, o->dims[k]);
            n *= o->dims[k];
            if ((rc = check_count(kind, n, err, errlen)))
                return rc;
        }
        *ndev = (int)n;
        return PF_OK;
    }
    if (is_random(o->kind)) {
        if (o->devices < 1)
            return pf_fail(err, errlen, PF_EINPUT, "%s: %d devices, must be >= 1", kind,
                           o->devices);
        if ((rc = check_count(kind, o->devices, err, errlen)))
            return rc;
        *ndev = o->devices;
        return PF_OK;
    }
    if (o->machines < 1)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %d machines, must be >= 1", kind, o->machines);
    if (o->gpus_per_machine < 1)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %d GPUs per machine, must be >= 1", kind,
                       o->gpus_per_machine);
    if (o->kind == PF_TOPOLOGY_DGX1 && o->gpus_per_machine != DGX1_GPUS)
        return pf_fail(err, errlen, PF_EINPUT, "dgx1: %d GPUs per machine, a DGX-1 has %d",
                       o->gpus_per_machine, DGX1_GPUS);
    if (is_dgx_nvswitch(o->kind) && o->gpus_per_machine != DGX_GPUS)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %d GPUs per machine, a DGX has %d", kind,
                       o->gpus_per_machine, DGX_GPUS);
    if (o->kind != PF_TOPOLOGY_DGX1 &&
        (rc = check_positive("intra-machine bandwidth (GB/s)", o->intra_gbps, err, errlen)))
        return rc;
    if ((rc = check_positive("inter-machine bandwidth (GB/s)", o->inter_gbps, err, errlen)) ||
        (rc = check_size(o, kind, err, errlen)))
        return rc;
    *ndev = o->machines * o->gpus_per_machine;
    return PF_OK;
}

/* ---- builders: each fills the devices' hosts and names and the bandwidth of every pair;
 *      pf_topology_build adds the devices and the latency. ---- */

static void name_default(const pf_topology_opts_t *o, char *buf, size_t len)
{
    const char *kind = pf_topology_kind_name(o->kind);
    if (o->kind == PF_TOPOLOGY_HIER || o->kind == PF_TOPOLOGY_NVSWITCH)
        snprintf(buf, len, "%s%dx%d", kind, o->machines, o->gpus_per_machine);
    else if (o->kind == PF_TOPOLOGY_DGX1 || is_dgx_nvswitch(o->kind))
        snprintf(buf, len, "%sx%d", kind, o->machines);
    else if (is_grid(o->kind) && grid_ndims(o->kind) == 2)
        snprintf(buf, len, "%s-%dx%d", kind, o->dims[0], o->dims[1]);
    else if (is_grid(o->kind))
        snprintf(buf, len, "%s-%dx%dx%d", kind, o->dims[0], o->dims[1], o->dims[2]);
    else
        snprintf(buf, len, "%s-%d-seed%llu", kind, o->devices, (unsigned long long)o->seed);
}

typedef struct {
    int *host;       /* per device */
    char **name;     /* per device */
    pf_cluster_t *c; /* receives the bandwidths (both directions) */
    int n;
} draft_t;

static void set_bw(draft_t *d, int a, int b, double gbps)
{
    pf_cluster_set_bw(d->c, a, b, gbps);
    pf_cluster_set_bw(d->c, b, a, gbps);
}

/* fmt takes up to three ints; unused trailing arguments are allowed (C11 7.21.6.1p2). */
static int set_name(draft_t *d, int i, const char *fmt, int x, int y, int z)
{
    char buf[64];
    snprintf(buf, sizeof buf, fmt, x, y, z);
    d->name[i] = pf_strdup(buf);
    return d->name[i] ? PF_OK : PF_ERR;
}

static int build_machines(const pf_topology_opts_t *o, draft_t *d)
{
    int g = o->gpus_per_machine;
    for (int i = 0; i < d->n; i++) {
        d->host[i] = i / g;
        if (set_name(d, i, "node%d/gpu%d", i / g, i % g, 0))
            return PF_ERR;
    }
    for (int a = 0; a < d->n; a++) {
        for (int b = a + 1; b < d->n; b++) {
            double bw = o->inter_gbps;
            if (d->host[a] == d->host[b]) {
                bw = o->intra_gbps;
                if (o->kind == PF_TOPOLOGY_DGX1) {
                    int links = dgx1_links[a % g][b % g];
                    bw = links == 2 ? DGX1_DOUBLE_GBPS
                                    : links == 1 ? DGX1_SINGLE_GBPS : DGX1_PCIE_GBPS;
                }
            }
            set_bw(d, a, b, bw);
        }
    }
    return PF_OK;
}

/* Device i sits at x = i % X, y = (i / X) % Y, z = i / (X Y). Hops = Manhattan distance; on a
 * torus each axis wraps, so an axis contributes min(|dx|, X - |dx|). */
static int build_grid(const pf_topology_opts_t *o, draft_t *d)
{
    int torus = o->kind == PF_TOPOLOGY_TORUS2D || o->kind == PF_TOPOLOGY_TORUS3D;
    int nd = grid_ndims(o->kind), X = o->dims[0], Y = o->dims[1];
    for (int i = 0; i < d->n; i++) {
        d->host[i] = i;
        if (set_name(d, i, nd == 2 ? "x%dy%d" : "x%dy%dz%d", i % X, i / X % Y, i / (X * Y)))
            return PF_ERR;
    }
    for (int a = 0; a < d->n; a++) {
        int pa[3] = {a % X, a / X % Y, a / (X * Y)};
        for (int b = a + 1; b < d->n; b++) {
            int pb[3] = {b % X, b / X % Y, b / (X * Y)}, hops = 0;
            for (int k = 0; k < 3; k++) {
                int delta = abs(pa[k] - pb[k]);
                if (torus && o->dims[k] - delta < delta)
                    delta = o->dims[k] - delta;
                hops += delta;
            }
            set_bw(d, a, b, pf_topology_table9_gbps(hops));
        }
    }
    return PF_OK;
}

/* A random composition b_1 + ... + b_L = D (App. D-B): each b_i uniform in [BLK_MIN, BLK_MAX],
 * redrawn while it would leave a remainder smaller than BLK_MIN (so no node is too small). Some
 * size is always valid (BLK_MIN, or the whole remainder when it is below BLK_MIN + BLK_MIN), so
 * the loop ends. D = 1 is one node of one device. Hosts = node index, devices in node order. */
static void draw_blocks(pf_rng_t *rng, draft_t *d)
{
    int dev = 0, node = 0;
    while (dev < d->n) {
        int rest = d->n - dev, size = rest;
        if (rest >= BLK_MIN) {
            do
                size = BLK_MIN + (int)pf_rng_below(rng, BLK_MAX - BLK_MIN + 1);
            while (!(size == rest || (size < rest && rest - size >= BLK_MIN)));
        }
        for (int k = 0; k < size; k++)
            d->host[dev++] = node;
        node++;
    }
}

static int build_random(const pf_topology_opts_t *o, draft_t *d)
{
    const double scale = PF_TOPOLOGY_GBPS_PER_MB_PER_US;
    pf_rng_t rng;
    pf_rng_seed(&rng, o->seed);
    if (o->kind == PF_TOPOLOGY_UNIFORM) {
        for (int i = 0; i < d->n; i++)
            d->host[i] = i;
    } else {
        draw_blocks(&rng, d);
    }
    for (int i = 0; i < d->n; i++)
        if (set_name(d, i, o->kind == PF_TOPOLOGY_UNIFORM ? "dev%d" : "node%d/dev%d", d->host[i], i, 0))
            return PF_ERR;

    if (o->kind == PF_TOPOLOGY_UNIFORM) { /* every pair U[1e-5, 1e-2] MB/us, row-major a < b */
        for (int a = 0; a < d->n; a++)
            for (int b = a + 1; b < d->n; b++)
                set_bw(d, a, b, pf_rng_range(&rng, UNIFORM_LO_MBUS, UNIFORM_HI_MBUS) * scale);
        return PF_OK;
    }
    if (o->kind == PF_TOPOLOGY_RANDOM_BLK1) {
        /* One intra-node bandwidth per node U[1e-4, 1e-2] MB/us, drawn in node order; a fixed
         * 1e-4 MB/us between nodes. */
        int nodes = d->host[d->n - 1] + 1;
        double *intra = malloc((size_t)nodes * sizeof *intra);
        if (!intra)
            return PF_ERR;
        for (int k = 0; k < nodes; k++)
            intra[k] = pf_rng_range(&rng, BLK1_INTRA_LO_MBUS, BLK1_INTRA_HI_MBUS) * scale;
        for (int a = 0; a < d->n; a++)
            for (int b = a + 1; b < d->n; b++)
                set_bw(d, a, b,
                       d->host[a] == d->host[b] ? intra[d->host[a]] : BLK1_INTER_MBUS * scale);
        free(intra);
        return PF_OK;
    }
    /* random_blk_2: every intra-node pair U[1e-5, 1e-2] MB/us (row-major a < b); base inter =
     * (mean of those pairs, summed in the same order) / 10; nodes i and j: base / |i - j|. */
    double sum = 0;
    long long count = 0;
    for (int a = 0; a < d->n; a++)
        for (int b = a + 1; b < d->n; b++)
            if (d->host[a] == d->host[b]) {
                double bw = pf_rng_range(&rng, BLK2_INTRA_LO_MBUS, BLK2_INTRA_HI_MBUS) * scale;
                set_bw(d, a, b, bw);
                sum += bw;
                count++;
            }
    double base = count ? sum / (double)count / 10 : 0;
    for (int a = 0; a < d->n; a++)
        for (int b = a + 1; b < d->n; b++)
            if (d->host[a] != d->host[b])
                set_bw(d, a, b, base / abs(d->host[a] - d->host[b]));
    return PF_OK;
}

/* --models: the preset names of the machine blocks, with their memory and dense bf16 peak. */
#define TOPOLOGY_MAX_MODELS 16
typedef struct {
    int n;      /* 0 = no list */
    int nkinds; /* distinct names */
    const char *name[TOPOLOGY_MAX_MODELS]; /* the presets' own names (static) */
    double mem_bytes[TOPOLOGY_MAX_MODELS], tflops[TOPOLOGY_MAX_MODELS];
    int kind[TOPOLOGY_MAX_MODELS]; /* the block's host kind: its name's first block */
} models_t;

static int parse_models(const pf_topology_opts_t *o, models_t *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (!o->models)
        return PF_OK;
    const char *kind = pf_topology_kind_name(o->kind);
    if (!is_switched(o->kind))
        return pf_fail(err, errlen, PF_EINPUT, "models: %s has one GPU kind (only nvswitch, "
                       "dgx-a100 and dgx-h100 take a list)", kind);
    for (const char *p = o->models;; m->n++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char nm[PF_DEVMODEL_NAME_MAX], names[256];
        snprintf(nm, sizeof nm, "%.*s", (int)(len < sizeof nm ? len : sizeof nm - 1), p);
        const pf_devmodel_t *dm = len < sizeof nm ? pf_devmodel_preset(nm) : NULL;
        if (!dm)
            return pf_fail(err, errlen, PF_EINPUT, "models: '%s' is not a device preset (%s)", nm,
                           pf_devmodel_names(names, sizeof names));
        if (m->n == TOPOLOGY_MAX_MODELS)
            return pf_fail(err, errlen, PF_EINPUT, "models: more than %d", TOPOLOGY_MAX_MODELS);
        m->name[m->n] = pf_devmodel_spec(dm)->name;
        m->mem_bytes[m->n] = pf_devmodel_spec(dm)->mem_bytes;
        m->tflops[m->n] = pf_devmodel_peak_tflops(dm, PF_PREC_BF16);
        int j = 0;
        while (j < m->n && m->name[j] != m->name[m->n])
            j++;
        m->kind[m->n] = j < m->n ? m->kind[j] : m->nkinds++;
        if (!end)
            break;
        p = end + 1;
    }
    if (++m->n > o->machines)
        return pf_fail(err, errlen, PF_EINPUT, "models: %d names for %d machines", m->n,
                       o->machines);
    return PF_OK;
}

/* The block (index into the list) of machine h of `machines`. */
static int models_block(const models_t *m, int host, int machines)
{
    return (int)((long long)host * m->n / machines);
}

/* The hierarchy of a machine kind (topology.h): the same links as build_machines' matrix. */
static int build_hierarchy(const pf_topology_opts_t *o, const models_t *m, const char *name,
                           pf_cluster_t **out, char *err, size_t errlen)
{
    int a100 = o->kind == PF_TOPOLOGY_DGX_A100, nvs = o->kind == PF_TOPOLOGY_NVSWITCH;
    double inter_lat = o->inter_latency_us > 0 ? o->inter_latency_us : o->latency_us;
    int64_t leaf = o->hosts_per_leaf, spine = leaf * o->leaves_per_spine;
    pf_cluster_level_t lv[4] = {
        {"host", o->gpus_per_machine, o->intra_gbps, o->latency_us, 1},
        {"leaf", o->machines <= leaf ? 0 : (int)leaf, o->inter_gbps, inter_lat, o->oversub},
        {"spine", o->machines <= spine ? 0 : o->leaves_per_spine, o->inter_gbps, inter_lat, 1},
        {"core", 0, o->inter_gbps, inter_lat, 1}};
    int nl = o->machines <= leaf ? 2 : o->machines <= spine ? 3 : 4;
    pf_cluster_host_kind_t kind[TOPOLOGY_MAX_MODELS] = {{
        .name = nvs ? "hgx-h100" : a100 ? "dgx-a100" : "dgx-h100",
        .device_model = o->device_model,
        .gpus = o->gpus_per_machine, .mem_bytes = o->mem_bytes, .tflops = o->tflops,
        .bw_gbps = o->intra_gbps, .lat_us = o->latency_us}};
    for (int b = m->n - 1; b >= 0; b--) { /* the first block of a name sets its kind */
        int k = m->kind[b];
        kind[k] = kind[0];
        kind[k].name = kind[k].device_model = m->name[b];
        kind[k].mem_bytes = m->mem_bytes[b];
        kind[k].tflops = m->tflops[b];
    }
    pf_cluster_hier_t *h =
        pf_cluster_hier_new(o->machines, lv, nl, kind, m->nkinds > 0 ? m->nkinds : 1);
    for (int host = 0; h && m->nkinds > 1 && host < o->machines; host++)
        if (pf_cluster_hier_set_host(h, host, m->kind[models_block(m, host, o->machines)], 0) !=
            PF_OK)
            pf_cluster_hier_destroy(&h);
    int rc;
    if (!h || !(*out = pf_cluster_new_hier(name, h))) {
        pf_cluster_hier_destroy(&h);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    /* A builder bug must not reach a file: the generated cluster passes the reader's checks. */
    if ((rc = pf_cluster_validate(*out, err, errlen)) != PF_OK)
        pf_cluster_destroy(out);
    return rc;
}

/* A device that no longer has its kind's memory or peak (--mem-gb, --tflops) is no longer that
 * GPU: it names no model. */
static void keep_model(pf_topology_opts_t *o)
{
    pf_topology_opts_t def;
    pf_topology_opts_init(&def, o->kind);
    if (o->mem_bytes != def.mem_bytes || o->tflops != def.tflops)
        o->device_model = NULL;
}

int pf_topology_build(const pf_topology_opts_t *o, pf_cluster_t **out, char *err, size_t errlen)
{
    pf_topology_opts_t opts = *o;
    draft_t d = {0};
    char name[96];
    int rc;
    *out = NULL;
    models_t m;
    if ((rc = check_opts(&opts, &d.n, err, errlen)) != PF_OK ||
        (rc = parse_models(&opts, &m, err, errlen)) != PF_OK)
        return rc;
    keep_model(&opts);
    if (!opts.name)
        name_default(&opts, name, sizeof name);
    if (writes_hierarchy(&opts))
        return build_hierarchy(&opts, &m, opts.name ? opts.name : name, out, err, errlen);
    d.host = calloc((size_t)d.n, sizeof *d.host);
    d.name = calloc((size_t)d.n, sizeof *d.name);
    d.c = pf_cluster_new(opts.name ? opts.name : name, d.n);
    rc = PF_ERR;
    if (!d.host || !d.name || !d.c)
        goto fail;
    if (is_grid(opts.kind))
        rc = build_grid(&opts, &d);
    else if (is_random(opts.kind))
        rc = build_random(&opts, &d);
    else
        rc = build_machines(&opts, &d);
    if (rc != PF_OK)
        goto fail;
    for (int i = 0; i < d.n; i++) {
        pf_device_t dev = {.id = i, .host = d.host[i], .name = d.name[i],
                           .mem_bytes = opts.mem_bytes, .tflops = opts.tflops,
                           .device_model = opts.device_model};
        if (m.n > 0) {
            int k = models_block(&m, d.host[i], opts.machines);
            dev.mem_bytes = m.mem_bytes[k];
            dev.tflops = m.tflops[k];
            dev.device_model = m.name[k];
        }
        if ((rc = pf_cluster_set_device(d.c, i, &dev)) != PF_OK)
            goto fail;
        for (int j = 0; j < d.n && (opts.latency_us > 0 || opts.inter_latency_us > 0); j++)
            if (j != i)
                pf_cluster_set_lat(d.c, i, j,
                                   opts.inter_latency_us > 0 && d.host[i] != d.host[j]
                                       ? opts.inter_latency_us
                                       : opts.latency_us);
    }
    /* A builder bug must not reach a file: the generated cluster passes the reader's checks. */
    if ((rc = pf_cluster_validate(d.c, err, errlen)) != PF_OK)
        goto fail;
    *out = d.c;
    d.c = NULL;
fail:
    if (rc == PF_ERR)
        pf_fail(err, errlen, PF_ERR, "out of memory");
    if (d.name)
        for (int i = 0; i < d.n; i++)
            free(d.name[i]);
    free(d.name);
    free(d.host);
    pf_cluster_destroy(&d.c);
    return rc;
}
