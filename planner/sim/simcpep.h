/* simcpep: what context and expert parallelism add to a simulated step (planner/inputs/cpep.h),
 * the same terms as the block search's analytic model (planner/partition/blockcpep.h).
 *
 * The graph a plan of context parallelism C runs is already one device's (cpep.h's graph: its
 * samples are sub-sequences, so its op times and stored activations are 1/C of a sequence's, and
 * the plan's R replicas are d x C); what the graph cannot hold is the traffic between the
 * devices that share a sequence or a layer's experts. Per stage and micro-batch:
 *   the K/V ring of every attention layer: a ring all-gather (collective.h, ring algorithm) of
 *     C chunks of the device's K and V (the graph's *.attn.k and *.attn.v outputs / T) over
 *     replicas jC .. jC + C - 1 of the stage (the slowest of the R / C groups), overlapped with
 *     the layer's attention core (the graph's core ops / T): forward max(0, ring - core),
 *     backward max(0, 2 ring - core's backward); a recomputing stage runs the forward's again;
 *   with E > 1 every MoE layer's 4 all-to-alls (dispatch and combine, forward and backward) of
 *     the dispatch's output (/ T under sequence parallelism) over the replicas j + iC, i < E,
 *     of each block of C E replicas (EP inside DP, Megatron-LM's order), the slowest group's;
 *     full recomputation runs the forward's two again.
 * Both go to the stage's tp_fwd_ms / tp_bwd_ms (communication on the compute stream, as the
 * simulator runs tensor-parallel collectives) and recompute_ms. */
#ifndef PF_SIMCPEP_H
#define PF_SIMCPEP_H

#include "planner/sim/simulate.h"

#include <stddef.h>

/* Adds the terms above to in (from g, c and plan p, before pf_chunks_split: one input stage per
 * plan stage). Nothing when p has neither (pf_plan_context_parallel 1, expert_parallel <= 1).
 * PF_EINPUT when the replicas do not divide by C E, PF_ERR out of memory. */
int pf_simcpep_add(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p,
                   pf_simulate_input_t *in, char *err, size_t errlen);

#endif
