/* topology: cluster generators (issue "foundation", item 3): Parmesan's two-level hierarchy and
 * DGX-1 (App. D-B), an NVSwitch (H100-like) system, DGX A100 and DGX H100 machines (8 GPUs on
 * NVSwitch, InfiniBand between machines, intra- and inter-machine latency), 2D/3D mesh and torus with bandwidth by hop
 * count (Table IX), and the random topologies random_blk_1, random_blk_2, uniform_dist.
 *
 * Every generated bandwidth matrix is symmetric (one value per unordered pair). Random kinds
 * draw from planner/core/rng.h in a fixed order, so the same seed gives the same cluster on every
 * machine. Hosts: machine index (hier, dgx1, nvswitch, dgx-a100, dgx-h100), node index (random_blk_1/2), and one host
 * per device (mesh, torus, uniform: no device shares a machine with another). */
#ifndef PF_TOPOLOGY_H
#define PF_TOPOLOGY_H

#include "planner/ir/cluster.h"

#include <stdint.h>

/* Largest cluster a generator builds as a matrix: two 4096 x 4096 matrices are 256 MiB already.
 * A hierarchy (nvswitch, dgx-a100, dgx-h100 without `matrix`) stores nothing per pair: up to
 * PF_TOPOLOGY_MAX_MACHINES machines of 8 GPUs (131,072, issue 23). */
#define PF_TOPOLOGY_MAX_DEVICES 4096
#define PF_TOPOLOGY_MAX_MACHINES 16384

/* Parmesan App. D-B draws random bandwidths in MB/us and converts with 1 GB/s = 1024/10^6 MB/us,
 * so x MB/us = x * 10^6 / 1024 GB/s (976.5625, exact in binary). */
#define PF_TOPOLOGY_GBPS_PER_MB_PER_US (1e6 / 1024.0)

typedef enum {
    PF_TOPOLOGY_HIER,
    PF_TOPOLOGY_DGX1,
    PF_TOPOLOGY_NVSWITCH,
    PF_TOPOLOGY_MESH2D,
    PF_TOPOLOGY_TORUS2D,
    PF_TOPOLOGY_MESH3D,
    PF_TOPOLOGY_TORUS3D,
    PF_TOPOLOGY_RANDOM_BLK1,
    PF_TOPOLOGY_RANDOM_BLK2,
    PF_TOPOLOGY_UNIFORM,
    PF_TOPOLOGY_DGX_A100,
    PF_TOPOLOGY_DGX_H100
} pf_topology_kind_t;

typedef struct {
    pf_topology_kind_t kind;
    const char *name;       /* cluster name; NULL = derived ("dgx1x4", "torus2d-4x4", ...) */
    int machines, gpus_per_machine; /* hier, dgx1, dgx-a100, dgx-h100 (8 GPUs, fixed), nvswitch */
    double intra_gbps, inter_gbps;  /* hier, nvswitch, dgx-a100/h100; dgx1 uses inter_gbps only */
    int dims[3];            /* mesh/torus: x, y (, z); 2D kinds need dims[2] = 1 */
    int devices;            /* random kinds */
    uint64_t seed;          /* random kinds: same seed, same file */
    double mem_bytes, tflops;       /* every device */
    /* latency of every pair, or only of pairs on one machine where inter_latency_us > 0
     * (machine kinds); both 0 = no latency matrix. dgx-a100/h100 default to 2.5 and 5. */
    double latency_us, inter_latency_us;
    /* nvswitch, dgx-a100, dgx-h100: the dense matrix (format 1) instead of the hierarchy
     * (format 2, cluster_hier.h). The hierarchy: host -> leaf (hosts_per_leaf machines, a
     * scalable unit of one leaf switch per rail) -> spine (leaves_per_spine leaves) -> core,
     * levels made only as far as the machines need them; every level above the host at
     * inter_gbps and inter-machine latency, the leaf's uplinks oversubscribed by `oversub`. */
    int matrix;
    int hosts_per_leaf, leaves_per_spine;
    double oversub;
    /* The device model (devmodel.h preset) every device names: set by init for the kinds that
     * are one GPU (dgx1 v100, nvswitch and dgx-h100 h100-sxm, dgx-a100 a100-80g), dropped when
     * memory or peak differ from the init's; NULL = none named. */
    const char *device_model;
    /* Machine kinds: "a100-80g,h100-sxm": the machines in as many consecutive blocks as names
     * (machine h in block h x n / machines), each block's GPUs that preset with its memory and
     * dense bf16 peak (mem_bytes, tflops and device_model are then unused); NULL = one kind. */
    const char *models;
} pf_topology_opts_t;

/* "hier", "dgx1", "nvswitch", "mesh2d", "torus2d", "mesh3d", "torus3d", "random-blk1",
 * "random-blk2", "uniform", "dgx-a100", "dgx-h100" (also the paper's names random_blk_1, random_blk_2, uniform_dist).
 * PF_OK or PF_EINPUT. */
int pf_topology_parse_kind(const char *s, pf_topology_kind_t *kind);
const char *pf_topology_kind_name(pf_topology_kind_t kind); /* the CLI spelling */
/* Defaults of a kind: the machines of Parmesan App. D-B, 4x4 (x4) meshes, 64 random devices,
 * seed 1; memory and TFLOPs of the GPU each system has (see topology.c). */
void pf_topology_opts_init(pf_topology_opts_t *o, pf_topology_kind_t kind);
/* PF_EINPUT (nothing built) for impossible options: a dimension < 1, more than
 * PF_TOPOLOGY_MAX_DEVICES devices, a non-positive bandwidth or memory, ... */
int pf_topology_build(const pf_topology_opts_t *o, pf_cluster_t **out, char *err, size_t errlen);

/* Parmesan Table IX: bandwidth in GB/s for a hop count >= 1 (0 for hops < 1: a device and
 * itself). The table prints the ranges "21-31" and "31-51"; 31 hops takes the first (0.088). */
double pf_topology_table9_gbps(int hops);

#endif
