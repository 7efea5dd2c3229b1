/* simulate: one training step of a pipeline-, data- and tensor-parallel plan as a task graph
 * (DESIGN.md "simulate"; Parmesan's task-graph simulator, Sec. VI, after FlexFlow).
 *
 * Every device has a compute stream and a communication stream. Tasks: the forward and the
 * backward of each stage replica per micro-batch (tensor-parallel collectives run on the compute
 * stream right after them and block it, as in Megatron-LM), the p2p transfers between consecutive
 * stages (the sender's send queue and the receiver's receive queue are busy; postal model:
 * latency + bytes / bandwidth), the data-parallel gradient all-reduce of each stage (per rank k,
 * over the R replicas' rank-k devices, priced by planner/ir/collective.h: the cheapest of ring,
 * tree, NVLS and hierarchical, as NCCL's tuner picks), bucketed, each bucket launched as soon as
 * the last backward has produced its gradients (Megatron-LM's --overlap-grad-reduce), and the
 * optimizer step. The schedule fixes the order of the compute streams; communication streams
 * serve transfers in the order they become ready. A device's communication stream is its link
 * to the network (NVLink port and its own NIC, rail-optimised hosts), in three queues: its
 * pipeline sends and its pipeline receives (the link is full duplex and Megatron-LM posts a
 * stage's send and receive together, batched isend / irecv: a device sends while it receives,
 * two sends or two receives take turns) and, as Megatron-LM's second NCCL communicator runs
 * them, the gradient buckets, so a transfer of one kind never waits for the other kind (a last
 * gradient send queued behind a second of buckets would stall the pipeline's flush, which
 * Megatron-LM's separate streams do not); two of one kind ready at once finish when they would
 * sharing the bandwidth. A bucket that overlaps a pipeline send or receive on the same link of a
 * device (its NVLink port or its NIC), and a send or receive that overlaps a bucket, take
 * longer, as fair sharing would finish them (linkshare.h: the one committed second pays, the
 * first keeps its end).
 *
 * The input is a plain struct so that a caller (or a test) can describe a pipeline without a
 * graph; pf_simulate_input_from_plan builds one from a graph, a cluster and a mapped plan. */
#ifndef PF_SIMULATE_H
#define PF_SIMULATE_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/ir/plan.h"
#include "planner/sim/reshard.h"
#include "planner/sim/simulate_types.h"
#include "planner/sim/simulate_xfer.h"
#include "planner/tp/tp_setting.h"
#include "planner/ir/training.h"

#include <stddef.h>

/* Schedules: pf_training_schedule_t (planner/ir/training.h). */

/* The input and result types: simulate_types.h. */

/* From a graph, its cluster and a mapped plan. Per stage, over its ops in the per-device graph
 * of the plan's setting (tp_setting.h: TAP's graph for T, recomputation's view):
 *   fwd_ms, bwd_ms   op times less their tensor-parallel collectives (TAP's fwd/bwd_comm_ms)
 *   tp_fwd/bwd_ms    those collectives (0 when T = 1)
 *   param_bytes      T x P(s), P(s) per device (stage graph of the per-device graph): each rank
 *                    all-reduces its own P(s)
 *   send_bytes       bytes of the tensors that cross the cut after stage s, each once
 *                    (pf_simulate_cut_bytes: a pipeline relays skip connections through the
 *                    stages between), per device
 *   act_bytes        sum of mem_fwd_bytes + the bytes entering the stage (its stashed input,
 *                    eq. 14)
 *   static_bytes     the training's parameter state x P(s) (training.h)
 *   xfer_ms          T > 1: the activation is replicated (B) on the T devices of replica r of
 *                    stage s and needed replicated on those of stage s + 1: a B -> B resharding
 *                    between two 1 x T meshes, timed by planner/reshard (pf_simulate_xfer_problem);
 *                    T = 1: NULL (one send).
 * buckets            pf_training_grad_buckets (Megatron-LM's bucket size).
 * Schedule and micro-batches from the plan. Allocates in->stage and its arrays: release them
 * with pf_simulate_input_clear. */
int pf_simulate_input_from_plan(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p,
                                pf_simulate_input_t *in, char *err, size_t errlen);

/* The same with the setting given: `set` (NULL: built here from g, c, the plan's T and training
 * with TAP in-process, deterministic; groups may span hosts when the plan's do) and the
 * resharding times (`xfer_ms`: (S - 1) x R entries, stage s replica r at [s R + r]; NULL: timed
 * here). g and c are the request's graph and cluster, as for pf_tp_setting_new. */
int pf_simulate_input_from_setting(const pf_graph_t *g, const pf_cluster_t *c,
                                   const pf_tp_setting_t *set, const pf_plan_t *p,
                                   const double *xfer_ms, pf_simulate_input_t *in, char *err,
                                   size_t errlen);

/* The bytes per micro-batch that cross the cut after each stage s < S - 1 of p's stages on g
 * (cut[s]), across each cut from an op's stage to the farthest stage that reads it: an edge that
 * carries its source's whole output (its bytes = the output shape's elements x the graph's bytes
 * per element, read off the ops of one out-edge) counts once per source, however many consumers
 * read that output across the cut; any other edge (a slice, as an MoE dispatch's per expert; one
 * of several outputs; a graph without shapes) by its own bytes, as eq. 3 sums them. A pre-LN
 * transformer's residual stream feeds the next layer's norm and its residual add, two edges of
 * one tensor that Megatron-LM sends once (the stage graph's M(s, s') sums both, as eq. 6 asks).
 * PF_ERR out of memory. */
int pf_simulate_cut_bytes(const pf_graph_t *g, const pf_plan_t *p, double *cut);

/* Frees what pf_simulate_input_from_plan allocated and zeroes *in (idempotent). */
void pf_simulate_input_clear(pf_simulate_input_t *in);


/* One simulation of an input under a compute order (comm_free: communication takes no time). */
typedef int (*pf_simulate_order_fn)(const void *in, pf_training_schedule_t order, int comm_free,
                                    pf_simulate_result_t **out, char *err, size_t errlen);
/* The signal schedule's bound for a simulator (simulate.c, simstages.c): the best of GPipe,
 * 1F1B and eager-1F1B run by run_order with communication free. */
int pf_simulate_signal(pf_simulate_order_fn run_order, const void *in, pf_simulate_result_t **out,
                       char *err, size_t errlen);
/* Frees n stages' arrays (devices, xfer_ms, rep_fwd_ms, rep_bwd_ms) and the array itself. */
void pf_simulate_stages_free(pf_simulate_stage_t *stage, int n);

/* PF_OK with *out, PF_EINPUT when the input is inconsistent (counts, negative or non-finite
 * numbers, a device outside the cluster or used twice), PF_ERR when out of memory. */
int pf_simulate(const pf_simulate_input_t *in, pf_simulate_result_t **out, char *err,
                size_t errlen);
void pf_simulate_result_destroy(pf_simulate_result_t **r);

#endif
