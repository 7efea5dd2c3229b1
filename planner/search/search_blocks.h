/* search_blocks: the block-level pre-phase of the search (issue 22). For a graph made of
 * repeated blocks (blocks.h) it enumerates Megatron-LM style configurations with the analytic
 * model (blockenum.h, blockcost.h), keeps the best K, and hands their (S, T) pairs on with
 * whole layers per stage (--layer-aligned) to the phases that follow (partition, map,
 * simulate), each degree T with the recomputation, ZeRO stage and sequence parallelism of its
 * best-ranked candidate (the simulator chooses between degrees that train apart). Context and expert
 * parallelism (C, E) are searched with it (planner/partition/blockcpep.h): under C > 1 the later
 * phases plan one device's graph (planner/inputs/cpep.h) at C x the global batch on d x C
 * replicas, and the simulator adds the K/V ring and the all-to-alls (planner/sim/simcpep.h).
 * Sequence parallelism, virtual stages and the micro-batch size are recorded in the plan; the
 * later phases store sequence parallelism's activations (planner/tp/seqpar.h) and simulate the
 * virtual stages (planner/sim/chunks.h).
 *
 * The device and network prices come from block_env() in search_blocks.c: when the graph names
 * its device model (graph keys "device_model" and "device", `planfarm model --device`: the model
 * the graph carries, else the preset it names) and the collective model (blockcost.h's pf_blockcost_priced_t); else blockcost.h's roofline over the
 * cluster. */
#ifndef PF_SEARCH_BLOCKS_H
#define PF_SEARCH_BLOCKS_H

#include "planner/search/search_state.h"

#include <stddef.h>

/* Does the request ask for the block-level search (block_search 1, or one of its own
 * dimensions given: sequence parallelism, virtual stages, micro-batch size, context or expert
 * parallelism)? `--recompute auto` and `--zero auto` set block_search in the command line. */
int pf_search_blocks_asked(const pf_search_opts_t *o);
/* Asked, or left to the search (block_search -1, the command line's default) with a global
 * batch given: then a graph without repeated blocks, or whose block candidates all fail, is
 * planned by the op-level search instead (pf_search_new). */
int pf_search_blocks_wanted(const pf_search_opts_t *o);
/* PF_EINPUT naming the field when the block search is off (block_search 0) and one of its own
 * dimensions is given: it would not be honoured. */
int pf_search_blocks_check(const pf_search_opts_t *o, char *err, size_t errlen);

/* Runs the enumeration for graph g on cluster c and rewrites *o to the best candidate that the
 * later phases can hold (all of them): stages, replicas, tp, train.recompute, train.zero,
 * train.sequence_parallel, layer_aligned = 1, recompute_auto = zero_auto = 0; with several
 * pairs, block_pairs and each of their degrees' training (block_trains). The ranking goes to
 * *choice, the one handed on first. PF_EINPUT when the graph has no
 * repeated blocks or no --global-batch is given; PF_EINFEASIBLE when nothing fits. The micro-batch
 * is --microbatch-size when given, else the graph's; choice->best[0].cand.b is the one the later
 * phases must plan at (pf_search_new re-prices the graph to it: price.h). */
int pf_search_blocks_fix(const pf_graph_t *g, const pf_cluster_t *c, pf_search_opts_t *o,
                         pf_search_blocks_t *choice, char *err, size_t errlen);

/* The choice into the plan's keys (microbatch_size, virtual_stages, sequence_parallel,
 * context_parallel, expert_parallel, tp_comm_overlap, and each stage's recomputation under
 * `--recompute auto`); `flat`: the plan of an interleaved candidate without interleaving (v 1,
 * a v 1 candidate's record: search_state.h). */
void pf_search_blocks_to_plan(const pf_search_blocks_t *choice, pf_plan_t *p, int flat);

/* Has the block search a v 1 candidate for plan p's (p, t) (the pool's, or ranked alone for its
 * pair): its flat plan's record? None when no v 1 candidate of that pair fits, and then the flat
 * plan is not tried. */
int pf_search_blocks_has_flat(const pf_search_blocks_t *choice, const pf_plan_t *p);

/* A plan of candidate c (search_state.h) whose stages the block search gave different
 * recomputations (`--recompute auto`, pf_search_blocks_to_plan): the block model chose them at
 * its layer counts, the op-level partition may cut elsewhere, so each stage moves to a heavier
 * level until its memory fits its devices by the cost model (stage_rc.h's pf_stage_rc_fit).
 * PF_OK (nothing to do when the stages agree), PF_ERR out of memory. */
int pf_search_blocks_fit_recompute(const pf_search_t *s, int c, pf_plan_t *p);

/* An interleaved plan (blocks.virtual_stages > 1, set by pf_search_blocks_to_plan) gets the
 * layer counts its block search chose (blocks.first_layers, mid_layers, last_layers: L / p
 * each, or the first and the last one layer fewer with the embedding and the head in their
 * places, blockcost.h): the op-level partition balances its own times and may cut elsewhere
 * (Llama 3 405B on p 16: 8 x 15 + 6 where Megatron-LM's interleaving runs 7, 8 x 14, 7), a split
 * no interleaved schedule runs. The stages' ops are re-cut by block (the prologue to the first,
 * the epilogue to the last); their devices stay; per-stage estimates (compute_ms, memory) are
 * the partition's. PF_OK (nothing to do when not interleaved), PF_EINPUT when the counts do
 * not add up to g's blocks, PF_ERR out of memory. */
int pf_search_blocks_recut(const pf_graph_t *g, int precision_bytes, pf_plan_t *p);

#endif
