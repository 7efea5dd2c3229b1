/* partition_stagedeg: a DP_PARTITION job whose stages choose their own data-parallel degree
 * (issue 24; pf_partition_opts_t.stage_degrees). The graph is coarsened as pf_partition_run
 * coarsens it (the caller's groups, else K hyper-ops where the ops' downsets are too many), then
 * stagedeg.h's DP ([Piper]'s problem without tensor parallelism) picks the chain of stages, each
 * stage's d_s over at most the cluster's devices (every d_s dividing the step's micro-batches,
 * o->microbatches: N in all, not per replica) and, with o->stage_recompute and no recomputation
 * in the training, none or full recomputation per stage (its ops priced on training.h's full
 * view, whose reserve is then held on every stage). Its prices follow the pipeline planfarm's
 * simulator runs, not Piper's: a tensor crossing several stages is relayed through each, every
 * stage stores its input per micro-batch in flight, each boundary byte goes forward and back
 * (stagedeg.h's stash_inputs, edge factor 2), a ring all-reduce amortised over the step. The
 * answer is a plan with per-stage degrees (plan.h pf_plan_degrees_*), t_s = 1 on the cluster
 * given (a search with tensor parallelism passes its group cluster), each stage's time t(H, d_s)
 * per micro-batch of the pipeline and its memory per device; partition_objective_ms is their
 * max. No refinement (its moves price constant R). o->stages and o->replicas are not used. With
 * o->stage_hosts M the DP runs on D / M devices and N / M micro-batches and the degrees are
 * multiplied by M (times divided by M; the all-reduce across the M copies is left to the
 * simulator). */
#ifndef PF_PARTITION_STAGEDEG_H
#define PF_PARTITION_STAGEDEG_H

#include "planner/partition/partition.h"

/* PF_OK and *out; PF_EINFEASIBLE when no chain fits (the message says so); PF_EINPUT for bad
 * options; PF_ERR out of memory. */
int pf_partition_stagedeg_run(const pf_graph_t *g, const pf_cluster_t *c,
                              const pf_partition_opts_t *o, pf_plan_t **out, char *err,
                              size_t errlen);

/* One tensor-parallel degree t a stage may take and the graph per device at t (the same ops as
 * g, in the same order: tp_setting.h's graph of degree t, TAP's split and collectives priced). */
typedef struct {
    int t;
    const pf_graph_t *g;
} pf_partition_stagedeg_tp_t;

/* The same with a tensor-parallel degree per stage too (stagedeg_tp.h, [Piper]'s `full`):
 * every op's configuration at t is its figures in tps[i].g (time fwd + bwd, parameters and
 * activations per device; summed over a hyper-op's ops), c holds single devices, and stage s
 * uses d_s x t_s of them. The boundary bytes are g's edges. */
int pf_partition_stagedeg_run_tp(const pf_graph_t *g, const pf_cluster_t *c,
                                 const pf_partition_opts_t *o,
                                 const pf_partition_stagedeg_tp_t *tps, int ntp, pf_plan_t **out,
                                 char *err, size_t errlen);

#endif
