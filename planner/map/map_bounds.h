/* map_bounds: the lower bounds that let the DFS probe (map_probe.c, Algorithm 2) cut branches:
 * the static per-(stage, device) bounds of eq. 10 / eq. 11 (Proposition 1, by sorting) with the
 * ring connectivity bound, and the ring components at a target (ring capacity).
 * They fill and read the context of map_context.h. */
#ifndef PF_MAP_BOUNDS_H
#define PF_MAP_BOUNDS_H

#include "planner/map/map_context.h"

/* The maximum spanning tree of the links and ring_bpms (see struct pf_map_context). cx's tables,
 * R and D must be filled. PF_OK or PF_ERR (out of memory). */
int pf_map_bounds_ring_connectivity(pf_map_context_t *cx);
/* static_m, static_ar, static_lb, lower_ms and rank; needs the tables, the symmetry (canonical
 * order) and the ring connectivity. PF_OK or PF_ERR (out of memory). */
int pf_map_bounds_static_bounds(pf_map_context_t *cx);
/* Ring capacity at target t_ms: all replicas of stage s share one component of the graph of
 * links fast enough for its ring (w >= T(s) / (t - c_u(s))). *comp (S x D) gets the component of
 * each device per stage, *comp_devices (S x D) the devices per component; the caller frees both.
 * PF_OK or PF_ERR (out of memory; both NULL). */
int pf_map_bounds_ring_components(const pf_map_context_t *cx, double t_ms, int **comp,
                              int **comp_devices);

#endif
