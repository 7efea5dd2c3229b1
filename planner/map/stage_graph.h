/* stage_graph: the graph G' that device mapping works on (Parmesan V): S stages, each replicated R
 * times, with c_u(s), P(s) and M(s, s') (DESIGN.md "stage graph"). Stage replica x = s * R + r;
 * in G' stage replicas are adjacent only within one replica (r), where their stages exchange
 * messages (M(s, s') > 0).
 *
 * planner/map/mapping.h includes this header: its contract declares these functions. */
#ifndef PF_STAGE_GRAPH_H
#define PF_STAGE_GRAPH_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/ir/plan.h"

typedef struct pf_stage_graph pf_stage_graph_t;

/* From raw numbers: c_u(s) ms, P(s) bytes, M(s, s') bytes (S x S row-major, symmetric, diagonal
 * ignored). This is what travels on the wire. NULL when a count is out of range (S x R must be
 * at most 2^20), a number is negative or not finite, M is not symmetric, or out of memory. */
pf_stage_graph_t *pf_stage_graph_new(int stages, int replicas, const double *cu_ms,
                                     const double *param_bytes, const double *msg_bytes);
/* From a graph and a plan's stage ops: c_u(s) = sum c_u, P(s) = sum param_bytes,
 * M(s, s') = bytes of all edges between s and s', both directions. NULL when an op of the plan
 * is outside the graph, or out of memory (validate the plan first for a message). */
pf_stage_graph_t *pf_stage_graph_from_plan(const pf_graph_t *g, const pf_plan_t *p);
void pf_stage_graph_destroy(pf_stage_graph_t **sg);

int pf_stage_graph_stages(const pf_stage_graph_t *sg);
int pf_stage_graph_replicas(const pf_stage_graph_t *sg);
double pf_stage_graph_cu_ms(const pf_stage_graph_t *sg, int s);
double pf_stage_graph_param_bytes(const pf_stage_graph_t *sg, int s);
double pf_stage_graph_msg_bytes(const pf_stage_graph_t *sg, int s, int t);

/* A cluster that mixes device kinds (devkinds.h): c_u(s) on each kind, S x K row-major
 * (cu_sk[s K + k]), kinds numbered as pf_devkinds_number numbers the cluster's devices. Copied;
 * K <= 0 drops them. PF_OK, PF_EINPUT (a number negative or not finite), PF_ERR. */
int pf_stage_graph_set_kind_cu(pf_stage_graph_t *sg, int K, const double *cu_sk);
/* The kinds set (0: none, every device costs c_u(s)) and c_u(s) on kind k. */
int pf_stage_graph_nkinds(const pf_stage_graph_t *sg);
double pf_stage_graph_cu_kind_ms(const pf_stage_graph_t *sg, int s, int k);
/* Sets the per-kind c_u of the plan's stages on cluster c when c mixes kinds whose ratios are
 * not all 1 (g: the graph of from_plan); nothing otherwise. PF_OK or PF_ERR. */
int pf_stage_graph_price_kinds(pf_stage_graph_t *sg, const pf_graph_t *g, const pf_plan_t *p,
                               const pf_cluster_t *c);

/* Stages adjacent to s (M(s, s') > 0), ascending; *count gets their number. Eq. 6 sums over
 * them in this order. */
const int *pf_stage_graph_neighbors(const pf_stage_graph_t *sg, int s, int *count);
/* Bytes one replica of s sends around the all-reduce ring (eq. 7): 2 (R - 1) / R x P(s);
 * 0 when R = 1. */
double pf_stage_graph_allreduce_bytes(const pf_stage_graph_t *sg, int s);
/* The auto-selection ratio's two sides (Parmesan V-B, last paragraph): all-reduce bytes
 * = sum_s 2 (R - 1) / R x P(s); inter-stage bytes = sum of M over unordered adjacent pairs. */
double pf_stage_graph_total_allreduce_bytes(const pf_stage_graph_t *sg);
double pf_stage_graph_total_p2p_bytes(const pf_stage_graph_t *sg);

#endif
