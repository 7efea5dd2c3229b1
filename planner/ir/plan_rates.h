/* plan_rates: what a step of a plan trains per second, and its model FLOPs utilisation; the
 * plan file's throughput_samples_per_s, tokens_per_s and mfu (DESIGN.md "Plan"). Takes the
 * plan's numbers rather than the plan, so that plan.c, which writes them, can call it. */
#ifndef PF_PLAN_RATES_H
#define PF_PLAN_RATES_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"

/* What a step trains at step_ms (NaN where not known), with MB micro-batches, R replicas and
 * `gpus` devices (S x R x T):
 *   samples_per_s  global batch (micro-batch x MB x R) / step
 *   tokens_per_s   samples_per_s x the sequence length: dim 1 of the [micro-batch, seq] input
 *                  of the graph's first op of type "embedding" (NaN without one)
 *   mfu            model FLOPs utilisation ([PaLM] App. B): the graph's fwd_flops +
 *                  bwd_flops (per micro-batch; recomputation not counted) x MB x R / (step x
 *                  gpus x the devices' peak FLOP/s, tflops); NaN when the graph has no FLOPs or
 *                  the cluster's devices do not share one known peak. */
typedef struct {
    double samples_per_s, tokens_per_s, mfu;
} pf_plan_rates_t;
pf_plan_rates_t pf_plan_rates(const pf_graph_t *g, const pf_cluster_t *c, double step_ms,
                              int microbatches, int replicas, int gpus);

#endif
