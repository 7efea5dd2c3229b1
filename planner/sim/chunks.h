/* chunks: a pipeline of P stages as the P x V model chunks of interleaved 1F1B ([Narayanan21]
 * Sec. 2.2; DESIGN.md "simulate"). A plan keeps its P stages of whole layers (map/ and export/
 * see them as before) and says `virtual_stages` V; the simulator's input then gets P V stages,
 * chunk c of rank i (stage c P + i) on stage i's devices with 1/V of its work, so that
 * interleave.h's order runs them. */
#ifndef PF_CHUNKS_H
#define PF_CHUNKS_H

#include "planner/ir/plan.h"
#include "planner/sim/simulate.h"

#include <stddef.h>

/* Splits every stage i of a P-stage input (virtual_stages 0 or 1) into V chunks: chunk c of
 * rank i is stage c P + i with stage i's times (fwd, bwd, recompute, tp, optimizer, a mixed
 * cluster's per-replica fwd and bwd) and bytes (param, static) over V; its activations (stage i's less its stashed input) over V plus its own
 * stashed input, the boundary activation H (the largest send_bytes of the stages but the last);
 * it sends stage i's send_bytes, the last rank's chunks (but the very last) H to rank 0 (priced
 * as a resharding between the two groups when T > 1, as from_setting prices the others); the
 * gradient buckets per chunk ceil(buckets / V). V <= 1: nothing changes. PF_EINPUT when P < 2,
 * the input is split already, or the micro-batches are not a multiple of P; PF_ERR out of
 * memory (the input is then as it was). */
int pf_chunks_split(pf_simulate_input_t *in, int V, char *err, size_t errlen);

/* As pf_chunks_split, under sequence parallelism when sp (and T > 1): a chunk's stashed input
 * is H / T per device, the sequence-split tensor Megatron-LM sends and keeps ([Korthikanti22]
 * §4.2.2), where without it the received tensor is gathered whole ([Narayanan21] §4.1). */
int pf_chunks_split_sp(pf_simulate_input_t *in, int V, int sp, char *err, size_t errlen);

/* Tensor-parallel communication overlap (plan key tp_comm_overlap, with sequence parallelism
 * and T > 1; training.h, [Wang23]): each stage's tp_fwd_ms (tp_bwd_ms) becomes
 * pf_training_tp_overlap_exposed_ms of it against the forward (backward) time of the stage's
 * weighted GEMMs split T ways (g's ops with parameters and a GEMM shape, tp_price.h: the column-
 * and row-parallel linears). Before pf_chunks_split (an unsplit input of p's stages); otherwise,
 * or without the key, nothing changes. pf_chunks_input_from_setting applies it. */
void pf_chunks_tp_overlap(pf_simulate_input_t *in, const pf_graph_t *g, const pf_plan_t *p);

/* The plan's V: its block search's virtual_stages when it has one, else 1. */
int pf_chunks_of_plan(const pf_plan_t *p);

/* pf_simulate_input_from_setting, context and expert parallelism's traffic (simcpep.h), its
 * tensor-parallel overlap (pf_chunks_tp_overlap), then
 * split into the plan's V chunks: the input of what the plan runs (a SIMULATE job and planfarm
 * simulate both build it this way). */
int pf_chunks_input_from_setting(const pf_graph_t *g, const pf_cluster_t *c,
                                 const pf_tp_setting_t *set, const pf_plan_t *p,
                                 const double *xfer_ms, pf_simulate_input_t *in, char *err,
                                 size_t errlen);

/* What interleaving adds to the memory of rank i over 1F1B's (which holds min(MB, P - i)
 * micro-batches of the whole stage, cost.h): its simulated peak (r, one row per device) less its
 * chunks' static bytes less min(MB, P - i) x the sum of its chunks' act_bytes. V <= 1: 0. */
double pf_chunks_extra_bytes(const pf_simulate_input_t *in, const pf_simulate_result_t *r, int i);

#endif
