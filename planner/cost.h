/* cost: the partitioning costs of DESIGN.md "Cost definitions", shared by the DP, refinement,
 * the stage graph and the tests. All per micro-batch of one replica.
 *
 *   c_u(v)  = fwd_ms + bwd_ms
 *   c_m(e)  = bytes(e) / B_flat
 *   t(H)    = sum_{v in H} c_u(v) + sum_{e crossing H's boundary} c_m(e)            (eq. 3)
 *   m(H)    = opt_factor x sum_{v in H} param_bytes + sum_{v in H} max(mem_fwd, mem_bwd)
 *             + k x (bytes of edges into H),  k = min(MB, S)                         (eq. 14)
 */
#ifndef PF_COST_H
#define PF_COST_H

#include "planner/cluster.h"
#include "planner/graph.h"
#include "planner/plan.h"

#define PF_DEFAULT_OPT_FACTOR 4.0 /* weights, gradients, two optimizer moments */
#define PF_DEFAULT_MICROBATCHES 4 /* Parmesan's setting (Sec. VIII) */

typedef struct {
    double flat_gbps;   /* B_flat: partitioning ignores topology */
    int microbatches;   /* MB */
    int stages;         /* S */
    double opt_factor;  /* parameter-state multiplier */
    double mem_limit_bytes; /* smallest device memory */
} pf_cost_model_t;

/* Defaults from the cluster: B_flat = median off-diagonal bandwidth (or flat_gbps when > 0),
 * memory limit = smallest device. */
void pf_cost_model_init(pf_cost_model_t *cm, const pf_cluster_t *c, int stages, int microbatches,
                        double flat_gbps);

/* k of eq. 14: stage inputs stashed by 1F1B. */
int pf_cost_stash_k(const pf_cost_model_t *cm);

/* Stage costs for the ops with op_stage[v] == s. */
double pf_cost_stage_time_ms(const pf_graph_t *g, const int *op_stage, int s,
                             const pf_cost_model_t *cm);
double pf_cost_stage_mem_bytes(const pf_graph_t *g, const int *op_stage, int s,
                               const pf_cost_model_t *cm);
/* The least memory any stage holding op v needs: its parameter state and its own peak (a stage
 * that also holds v's producers stashes no input for it). Above the device memory = infeasible. */
double pf_cost_op_mem_bytes(const pf_graph_t *g, int v, const pf_cost_model_t *cm);

/* PF_OK when every op fits a device alone (pf_cost_op_mem_bytes <= mem_limit_bytes), else
 * PF_EINFEASIBLE naming the first op that does not: no partition can then be feasible. */
int pf_cost_check_ops_fit(const pf_graph_t *g, const pf_cost_model_t *cm, char *err,
                          size_t errlen);

/* Eq. 7's volume: a ring all-reduce of param_bytes over R replicas sends 2 (R - 1) / R x
 * param_bytes through each replica's link (0 when R = 1). */
static inline double pf_cost_ring_allreduce_bytes(double param_bytes, int replicas)
{
    return replicas > 1 ? 2.0 * (replicas - 1) / replicas * param_bytes : 0.0;
}

/* Fill compute_ms, time_ms, peak_mem_bytes of every stage and partition_objective_ms. */
int pf_cost_fill_plan(pf_plan_t *p, const pf_graph_t *g, const pf_cost_model_t *cm);

#endif
