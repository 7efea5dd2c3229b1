/* topology: cluster generators (issue "foundation", item 3): Parmesan's two-level hierarchy and
 * DGX-1 (App. D-B), an NVSwitch (H100-like) system, 2D/3D mesh and torus with bandwidth by hop
 * count (Table IX), and the random topologies random_blk_1, random_blk_2, uniform_dist. */
#ifndef PF_TOPOLOGY_H
#define PF_TOPOLOGY_H

#include "planner/cluster.h"

#include <stdint.h>

typedef enum {
    PF_TOPO_HIER,
    PF_TOPO_DGX1,
    PF_TOPO_NVSWITCH,
    PF_TOPO_MESH2D,
    PF_TOPO_TORUS2D,
    PF_TOPO_MESH3D,
    PF_TOPO_TORUS3D,
    PF_TOPO_RANDOM_BLK1,
    PF_TOPO_RANDOM_BLK2,
    PF_TOPO_UNIFORM
} pf_topo_kind_t;

typedef struct {
    pf_topo_kind_t kind;
    const char *name;       /* cluster name; NULL = derived */
    int machines, gpus_per_machine; /* hier, dgx1, nvswitch */
    double intra_gbps, inter_gbps;  /* hier, nvswitch */
    int dims[3];            /* mesh/torus: x, y (, z) */
    int devices;            /* random kinds */
    uint64_t seed;          /* random kinds: same seed, same file */
    double mem_bytes, tflops, latency_us;
} pf_topo_opts_t;

int pf_topo_parse_kind(const char *s, pf_topo_kind_t *kind); /* "hier", "dgx1", "random-blk1" ... */
void pf_topo_opts_init(pf_topo_opts_t *o, pf_topo_kind_t kind);
int pf_topo_build(const pf_topo_opts_t *o, pf_cluster_t **out, char *err, size_t errlen);

/* Parmesan Table IX: bandwidth in GB/s for a hop count >= 1. */
double pf_topo_table9_gbps(int hops);

#endif
