/* map_bounds: the lower bounds that let the DFS probe (map_probe.c, Algorithm 2) cut branches:
 * the static per-(stage, device) bounds of eq. 10 / eq. 11 (Proposition 1, by sorting) with the
 * ring connectivity bound, and the ring components at a target (ring capacity).
 *
 * They are computed from the postal-model tables they are given (map_context.c fills those and
 * keeps the result); this module knows nothing of the context. */
#ifndef PF_MAP_BOUNDS_H
#define PF_MAP_BOUNDS_H

#include "planner/ir/cluster_hier.h"
#include "planner/map/map_symmetry.h"

#include <stdbool.h>

/* A sort key with a device (or any index) to break ties. */
typedef struct {
    double key;
    int d;
} pf_map_bounds_keyed_t;
/* qsort comparator: by key, then index; a total order, so the result does not depend on qsort's
 * algorithm. */
static inline int pf_map_bounds_keyed_cmp(const void *a, const void *b)
{
    const pf_map_bounds_keyed_t *p = a, *q = b;
    if (p->key != q->key)
        return p->key < q->key ? -1 : 1;
    return (p->d > q->d) - (p->d < q->d);
}

/* The postal-model links in ms: the D x D tables, or (tables NULL: a hierarchy too large for
 * them, map_context.h) looked up through the cluster with the same operations, so both give the
 * same bits. */
typedef struct {
    const pf_cluster_t *c;
    int D;
    const double *lat_ms, *bw_bpms; /* D x D or NULL */
} pf_map_links_t;

static inline double pf_map_links_lat_ms(const pf_map_links_t *l, int a, int b)
{
    return l->lat_ms ? l->lat_ms[(size_t)a * l->D + b] : pf_cluster_lat_us(l->c, a, b) * 1e-3;
}

static inline double pf_map_links_bw_bpms(const pf_map_links_t *l, int a, int b)
{
    return l->bw_bpms ? l->bw_bpms[(size_t)a * l->D + b] : pf_cluster_bw_gbps(l->c, a, b) * 1e6;
}

/* What the bounds are computed from: S stages of R replicas on D devices, the terms the
 * instantiation uses, and the tables in ms (borrowed: they must outlive the bounds). */
typedef struct {
    int S, R, D;
    bool use_m, use_ar;
    const double *cu, *ar_bytes;    /* S */
    const int *adj_off;             /* S + 1: stage adjacency (CSR) */
    const double *adj_bytes;        /* M of each adjacency entry */
    int max_deg;
    pf_map_links_t links;
    const pf_map_symmetry_t *sym;   /* its canonical order breaks ties in rank */
} pf_map_bounds_input_t;

typedef struct {
    pf_map_bounds_input_t in;
    double *static_m, *static_ar; /* S x D: eq. 10 / eq. 11 terms at device d */
    double *static_lb;            /* S x D: c_u + the terms the instantiation uses */
    double lower_ms;              /* max over s of min over d of static_lb */
    int *rank; /* S x D: rank of d among the devices by (static_lb of s, canonical position) */
    /* Ring connectivity: a maximum spanning tree of the devices under w(a, b) = the faster
     * direction of the link, its D - 1 edges by decreasing w, and ring_bpms[d] = the largest b
     * such that d's component in {links with w >= b} holds at least R devices. */
    int *mst_a, *mst_b;
    double *mst_w, *ring_bpms;
    /* Without tables on a regular hierarchy (cluster_hier.h): rows are read per level, O(levels)
     * per device instead of O(D); NULL otherwise. */
    const pf_cluster_hier_t *regular;
} pf_map_bounds_t;

/* Fills b from in (copied into b->in). PF_OK, or PF_ERR when out of memory (b then holds nothing
 * to free). */
int pf_map_bounds_init(pf_map_bounds_t *b, const pf_map_bounds_input_t *in);
void pf_map_bounds_free(pf_map_bounds_t *b); /* idempotent */

/* Ring capacity at target t_ms: all replicas of stage s share one component of the graph of
 * links fast enough for its ring (w >= T(s) / (t - c_u(s))). *comp (S x D) gets the component of
 * each device per stage, *comp_devices (S x D) the devices per component; the caller frees both.
 * PF_OK or PF_ERR (out of memory; both NULL). */
int pf_map_bounds_ring_components(const pf_map_bounds_t *b, double t_ms, int **comp,
                                  int **comp_devices);

#endif
