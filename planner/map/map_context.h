/* map_context: what one instantiation of the mapping problem precomputes once (per stage graph,
 * cluster, instantiation and symmetry setting) for the DFS probe of Algorithm 2 (map_probe.h):
 * the postal-model tables in ms, the symmetry of the cluster (map_symmetry.h), the static
 * per-(stage, device) lower bounds of eq. 10 / eq. 11 and the ring connectivity (map_bounds.h),
 * the mapping order and the checking scheme. pf_mapping_search builds one context and probes it
 * many times; pf_mapping_probe builds one per call.
 *
 * map_context.c fills the struct (the bounds through map_bounds.h, which is given the tables and
 * never sees the context); map_probe.c reads it; mapping.c uses only the functions. */
#ifndef PF_MAP_CONTEXT_H
#define PF_MAP_CONTEXT_H

#include "planner/ir/cluster.h"
#include "planner/map/map_bounds.h"
#include "planner/map/map_inst.h"
#include "planner/map/map_symmetry.h"
#include "planner/map/stage_graph.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct pf_map_context pf_map_context_t;


struct pf_map_context {
    int S, R, N, D;
    pf_map_inst_t inst;
    bool use_m, use_ar;
    int symmetry;
    double *cu, *ar_bytes;          /* S; cu = the least over kinds on a mixed cluster */
    int nkinds;                     /* > 0: a mixed cluster (stage_graph.h per-kind c_u) */
    int *kind;                      /* D: device -> kind (pf_devkinds_number), or NULL */
    double *cu_kind;                /* S x nkinds, or NULL */
    int *adj_off, *adj, max_deg;    /* stage adjacency (CSR), as the stage graph has it */
    double *adj_bytes;              /* M of each adjacency entry */
    /* D x D: latency ms, bandwidth bytes per ms; NULL on a hierarchy of more than
     * PF_MAP_TABLES_MAX_DEVICES (links.c looks them up: 16,384 groups would take 4.3 GB) */
    double *lat_ms, *bw_bpms;
    pf_map_links_t links;           /* the tables or the cluster, for the accessors below */
    double *min_lat_out;            /* D: smallest latency out of d */
    double *max_bw_out, *max_bw_in; /* D: fastest link out of / into d */
    pf_map_symmetry_t sym;          /* device classes, host blocks, canonical order */
    pf_map_bounds_t bounds;         /* eq. 10 / eq. 11, ring connectivity, rank (map_bounds.h) */
    bool stage_major;
    int *order, *pos; /* depth -> stage replica, stage replica -> depth */
    int *chk_off, *chk; /* CSR by depth: stage replicas whose time is complete there */
    int *low_ref;       /* by depth: stage replica whose device bounds the candidates, or -1 */
};

/* NULL with the reason in err when S x R > D (PF_EINPUT's case) or out of memory.
 * symmetry: PF_MAP_SYM_* (map_symmetry.h). */
pf_map_context_t *pf_map_context_new(const pf_stage_graph_t *sg, const pf_cluster_t *c,
                                     pf_map_inst_t inst, int symmetry, char *err, size_t errlen);
void pf_map_context_destroy(pf_map_context_t **cx);

/* Eq. 10 (m), eq. 11 (ar), the joint bound (full): a lower bound of the optimum. */
double pf_map_context_lower_bound_ms(const pf_map_context_t *cx);
/* Eq. 5 under the context's instantiation; bit for bit pf_mapping_objective_ms. */
double pf_map_context_objective_ms(const pf_map_context_t *cx, const int *dev);
/* The mapping order (stage replicas by depth) and whether it is stage-major. */
const int *pf_map_context_order(const pf_map_context_t *cx, bool *stage_major);

/* c_u(s) on device d: its kind's when the cluster mixes kinds. */
static inline double pf_map_context_cu(const pf_map_context_t *cx, int s, int d)
{
    return cx->cu_kind ? cx->cu_kind[(size_t)s * cx->nkinds + cx->kind[d]] : cx->cu[s];
}

/* Eq. 8 of stage replica x: its neighbours' transfers, ascending. */
static inline double pf_map_context_m_ms(const pf_map_context_t *cx, const int *dev, int x)
{
    int R = cx->R, s = x / R, r = x % R, d = dev[x];
    double m = 0;
    for (int k = cx->adj_off[s]; k < cx->adj_off[s + 1]; k++) {
        int e = dev[cx->adj[k] * R + r];
        m += pf_map_links_lat_ms(&cx->links, d, e) +
             cx->adj_bytes[k] / pf_map_links_bw_bpms(&cx->links, d, e);
    }
    return m;
}

/* Eq. 9 of stage s: the max over its ring pairs (the same for all its replicas). */
static inline double pf_map_context_ar_ms(const pf_map_context_t *cx, const int *dev, int s)
{
    int R = cx->R;
    double ar = 0;
    for (int q = 0; q < R; q++) {
        int a = dev[s * R + q], b = dev[s * R + (q + 1) % R];
        ar = fmax(ar, cx->ar_bytes[s] / pf_map_links_bw_bpms(&cx->links, a, b));
    }
    return ar;
}

/* c_stage(x, p), summed in the order pf_mapping_stage_time_ms uses: c_u + (eq. 8 over neighbours
 * ascending) + (eq. 9 max over ring pairs). */
static inline double pf_map_context_stage_time_ms(const pf_map_context_t *cx, const int *dev, int x)
{
    int s = x / cx->R;
    double m = cx->use_m ? pf_map_context_m_ms(cx, dev, x) : 0.0;
    double ar = cx->use_ar ? pf_map_context_ar_ms(cx, dev, s) : 0.0;
    return pf_map_context_cu(cx, s, dev[x]) + m + ar;
}

#endif
