/* mapctx: what one instantiation of the mapping problem precomputes once (per stage graph,
 * cluster and instantiation) and the DFS probe of Algorithm 2 that runs on it. pf_map_search
 * builds one context and probes it many times; pf_map_probe builds one per call.
 *
 * Precomputed: the postal-model tables in ms, the device classes and host blocks (mapping.h),
 * the canonical device order, the static per-(stage, device) lower bounds of eq. 10 / eq. 11
 * (Proposition 1, by sorting), the mapping order and the checking scheme (which stage replicas'
 * times become known at each depth). */
#ifndef PF_MAPCTX_H
#define PF_MAPCTX_H

#include "planner/mapping.h"

#include <stdatomic.h>

typedef struct pf_mapctx pf_mapctx_t;

/* NULL when out of memory or S x R > D. symmetry: PF_MAP_SYM_* (mapping.h). */
pf_mapctx_t *pf_mapctx_new(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst,
                           int symmetry);
void pf_mapctx_destroy(pf_mapctx_t **cx);

/* Eq. 10 (m), eq. 11 (ar), the joint bound (full): a lower bound of the optimum. */
double pf_mapctx_lower_bound_ms(const pf_mapctx_t *cx);
/* Eq. 5 under the context's instantiation; bit for bit pf_map_objective_ms. */
double pf_mapctx_objective_ms(const pf_mapctx_t *cx, const int *dev);
/* The mapping order (stage replicas by depth) and whether it is stage-major. */
const int *pf_mapctx_order(const pf_mapctx_t *cx, int *stage_major);

/* Algorithm 2 at target_ms. cancel (may be NULL): set by another thread to abandon the probe;
 * the result then has found = 0 and *cancelled = 1. Returns PF_OK or PF_ERR (out of memory). */
int pf_mapctx_probe(const pf_mapctx_t *cx, double target_ms, double deadline_s, int threads,
                    const atomic_int *cancel, int *dev, pf_probe_result_t *res, int *cancelled);

#endif
