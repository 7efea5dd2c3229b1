/* cost: the partitioning costs of DESIGN.md "Cost definitions", shared by the DP, refinement,
 * the stage graph and the tests. All per micro-batch of one replica.
 *
 *   c_u(v)  = fwd_ms + bwd_ms
 *   c_m(e)  = bytes(e) / B_flat
 *   t(H)    = sum_{v in H} c_u(v) + sum_{e crossing H's boundary} c_m(e)            (eq. 3)
 *             (the sum of c_u times stage_mult[s] on a mixed cluster)
 *   m(H, s) = state_factor x sum_{v in H} param_bytes + k_s x sum_{v in H} mem_fwd + reserve
 *             k_s = micro-batches stage s holds at its peak (min(MB, S - s) under 1F1B)
 *   (DESIGN.md "Memory per device": eq. 14 of Parmesan generalised to parameter state as
 *   training holds it and activations of the micro-batches in flight; planner/ir/training.h
 *   gives state_factor, k_s and, under full recomputation, the reserve.)
 */
#ifndef PF_COST_H
#define PF_COST_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/ir/plan.h"
#include "planner/ir/training.h"

#define PF_DEFAULT_MICROBATCHES 4 /* Parmesan's setting (Sec. VIII) */

typedef struct {
    double flat_gbps;       /* B_flat: partitioning ignores topology */
    int microbatches;       /* MB */
    int stages;             /* S */
    double state_factor;    /* parameter state per byte of parameters (training.h) */
    double reserve_bytes;   /* transient held on every stage (full recomputation) */
    double mem_limit_bytes; /* smallest device memory */
    pf_training_t train;
    int replicas;           /* the data-parallel group ZeRO divides over */
    /* A cluster that mixes device kinds (devkinds.h): stage s's compute sum_{v in H} c_u(v) is
     * multiplied by stage_mult[s], the graph ratio of the kind assumed to run it
     * (partition.c); NULL = 1 (every uniform cluster). Borrowed, S entries. */
    const double *stage_mult;
} pf_cost_model_t;

/* Defaults from the cluster: B_flat = median off-diagonal bandwidth (or flat_gbps when > 0),
 * memory limit = smallest device, default training (mixed-precision Adam, 1F1B, no ZeRO, no
 * recomputation) with one replica. */
void pf_cost_model_init(pf_cost_model_t *cm, const pf_cluster_t *c, int stages, int microbatches,
                        double flat_gbps);
/* How the stages train: state_factor for `replicas` data-parallel replicas (ZeRO divides over
 * them), the schedule's micro-batches in flight, and the reserve of pf_training_view. */
void pf_cost_model_set_training(pf_cost_model_t *cm, const pf_training_t *t, int replicas,
                                double reserve_bytes);

/* k_s: micro-batches whose activations stage s (0-based) holds at its peak. */
int pf_cost_inflight(const pf_cost_model_t *cm, int s);
/* Stage s's memory from the sums of its ops' parameter bytes and stored activations. */
double pf_cost_mem_bytes(const pf_cost_model_t *cm, int s, double param_bytes, double act_bytes);

/* Stage costs for the ops with op_stage[v] == s. */
double pf_cost_stage_time_ms(const pf_graph_t *g, const int *op_stage, int s,
                             const pf_cost_model_t *cm);
double pf_cost_stage_mem_bytes(const pf_graph_t *g, const int *op_stage, int s,
                               const pf_cost_model_t *cm);
/* The least memory any stage holding op v needs: its parameter state, one micro-batch of its
 * activations (the last stage holds one) and the reserve. Above the device memory = infeasible. */
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

/* Fill compute_ms, time_ms, peak_mem_bytes and its parts (mem_*_bytes, inflight) of every stage,
 * and partition_objective_ms. */
int pf_cost_fill_plan(pf_plan_t *p, const pf_graph_t *g, const pf_cost_model_t *cm);

#endif
