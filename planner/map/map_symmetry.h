/* map_symmetry: automorphisms of the cluster's bandwidth and latency matrices that the DFS probe
 * of Algorithm 2 (map_probe.h) uses to skip subtrees that mirror one already searched:
 * interchangeable devices, host blocks, and the canonical device order under which the rules
 * combine exactly (the argument is at the top of map_symmetry.c). */
#ifndef PF_MAP_SYMMETRY_H
#define PF_MAP_SYMMETRY_H

#include "planner/ir/cluster.h"
#include "planner/ir/cluster_hier.h"

#include <stdbool.h>

/* Symmetry rules of the probe (the symmetry argument of pf_mapping_probe and pf_map_context_new,
 * and pf_mapping_opts_t.symmetry): none; all of them (interchangeable devices, replica orderings,
 * host blocks); all but host blocks (to measure what the block rule adds). */
#define PF_MAP_SYM_OFF 0
#define PF_MAP_SYM_ALL 1
#define PF_MAP_SYM_NO_BLOCKS 2

/* Above this many devices a hierarchical cluster is never turned into D x D tables or matrices
 * on the mapping's path (16,384 groups would take 4.3 GB): the links are looked up
 * (map_bounds.h), device classes come from the hierarchy (pf_map_symmetry_hier_classes), and
 * the blocks too (pf_map_symmetry_hier_units). */
#define PF_MAP_TABLES_MAX_DEVICES 1024

/* Interchangeable devices: a and b are in one class when swapping them leaves the bandwidth and
 * latency matrices unchanged (rows and columns). cls[d] gets the class of d (classes numbered by
 * their lowest device); returns the number of classes, or -1 when out of memory. */
int pf_map_symmetry_device_classes(const pf_cluster_t *c, int *cls);

/* The same classes read off a regular hierarchy (cluster_hier.h) whose used links are distinct
 * (no two levels with the same bandwidth and latency): devices of one host are interchangeable,
 * devices of different hosts are not when a host holds 2 or more (the host's other devices tell
 * them apart); with one device per host, hosts whose units below their lowest common level hold
 * no other host are. O(D). Returns the number of classes; -2 when c is no such hierarchy, -1
 * out of memory. */
int pf_map_symmetry_hier_classes(const pf_cluster_t *c, int *cls);

/* Host blocks: groups of devices (a machine, typically) that can trade places wholesale. Blocks A
 * and B of one class have the same size m, and the map a_i <-> b_i (i-th device of A <-> i-th of
 * B, by index; every other device fixed) is an automorphism of the bandwidth and latency matrices
 * (rows and columns: inside A and B, between them, and to and from every other device). Being
 * swappable is an equivalence (the swap of A and C is (A B)(B C)(A B)), so each block is checked
 * against the first block of each class. Blocks are proposed by the devices' host field and, when
 * that gives no class of two or more blocks, by the components of the links faster than the
 * slowest one; only the matrices decide. Blocks of one device, and blocks alone in their class,
 * are dropped. block[d] gets d's block (numbered by lowest device) or -1; block_class[b] (room for
 * D entries) the class of block b, numbered by first block; *capped (may be NULL) is set to true when
 * the budget of PF_MAP_BLOCK_BUDGET comparisons of matrix entries ran out (about 0.3 s), leaving
 * the blocks not yet compared in no class (less pruning, never wrong). 4096 devices in 512 DGX-1:
 * one class, 0.3 s. Returns the number of blocks, or -1 when out of memory. */
#define PF_MAP_BLOCK_BUDGET (1LL << 28)
int pf_map_symmetry_host_blocks(const pf_cluster_t *c, int *block, int *block_class,
                                bool *capped);

/* Units of a regular hierarchy as nested blocks (the quotient of the hierarchy's symmetry,
 * map_symmetry.c top): for each level l below the top one layer whose blocks are the full
 * level-l units (hosts, leaves, spines ...) that share their parent unit with another full one;
 * the blocks of a class are the full children of one parent, swapped position by position (an
 * automorphism of a regular hierarchy, the links depending on lowest common levels only).
 * A level whose link (bandwidth and latency) equals the one above it is merged into it: the
 * children of a unit are then the units of the next level not merged (hosts under a spine when
 * the leaf is as fast). Devices must be numbered host by host (cluster.h), so a unit is an
 * interval of devices and the canonical order is the index order. O(D) per layer, no pair of devices is looked at.
 * Fills the layers of sym (its blocks, classes, positions, and blk_end) and returns how many, 0
 * when c is no regular hierarchy numbered host by host, -1 out of memory. */
typedef struct {
    /* blk[d] = d's block or -1, blk_class[b] = b's class, blk_kpos[b] = b's place among its
     * class's blocks (block order); blk_end[b] = the canonical position after b's last device
     * where blocks are canonical intervals (the hierarchy's units), else NULL. */
    int *blk, nblk, *blk_class, *blk_kpos, nbcls, *blk_end;
} pf_map_sym_layer_t;

#define PF_MAP_SYM_MAX_LAYERS PF_CLUSTER_HIER_MAX_LEVELS

/* What the probe's symmetry rules need about a cluster of D devices. */
typedef struct {
    /* Device classes (pf_map_symmetry_device_classes; each device alone without symmetry). */
    int *cls, ncls;
    /* Blocks (none unless symmetry is PF_MAP_SYM_ALL), in layers that nest, coarsest first: on a
     * regular hierarchy the units of its levels (pf_map_symmetry_hier_units), top level first;
     * else at most one layer, pf_map_symmetry_host_blocks. canon = the devices in canonical
     * order, canon_pos its inverse. */
    pf_map_sym_layer_t lay[PF_MAP_SYM_MAX_LAYERS];
    int nlay;
    int *canon, *canon_pos;
} pf_map_symmetry_t;

int pf_map_symmetry_hier_units(pf_map_symmetry_t *sym, const pf_cluster_t *c);

/* Fills sym for cluster c under symmetry (PF_MAP_SYM_*). PF_OK, or PF_ERR when out of memory
 * (sym then holds nothing to free). */
int pf_map_symmetry_init(pf_map_symmetry_t *sym, const pf_cluster_t *c, int symmetry);
void pf_map_symmetry_free(pf_map_symmetry_t *sym); /* idempotent */

#endif
