/* cpep: context parallelism (CP, ring attention) and expert parallelism (EP, MoE) seen from a
 * graph (issue 22; DESIGN.md "Cost definitions", context and expert parallelism): the facts
 * both need of a transformer graph, the bytes each moves, and the graph one device of a CP x EP
 * configuration runs.
 *
 * Context parallelism C ([RingAttn]; Megatron-LM's --context-parallel-size): every sequence is
 * split into C chunks, device i of a CP group holding chunks i and 2C - 1 - i of 2C (the
 * load-balanced causal split, so the sequence must divide by 2C). Every device runs its s / C
 * tokens through every op, so its work and stored activations are 1/C of the sequence's (the
 * attention core too: its s / C queries meet all s keys, half of them masked, 1/C of the causal
 * s x s). Each layer's attention passes the K and V chunks around the ring of the C devices:
 * C - 1 steps, each sending the chunk the device holds and receiving the next, overlapped with
 * the attention of the chunk at hand. The attention is computed block by block, so no device
 * holds the s/C x s probabilities: they are not stored, and the backward recomputes each block's
 * scores and softmax (as flash attention does). Forward moves (C - 1) x the device's K and V;
 * backward moves K and V again and their gradients dK, dV the other way: 2 x the forward's. The
 * data-parallel gradient reduction spans d x C devices (the CP ranks hold the same weights).
 *
 * Expert parallelism E ([GShard]; Megatron-LM's --expert-model-parallel-size): the experts of
 * every MoE layer are spread over E devices, each holding experts / E of them, so the expert
 * weights, their gradients and optimizer state per device are 1/E (E divides the experts and
 * the data-parallel size). Every MoE layer sends each token to its top-k experts and back: an
 * all-to-all before the experts (dispatch) and one after (combine) in the forward, two in the
 * backward, each over the E devices with the tokens x top-k x hidden bytes a device holds
 * (its dispatch's output). With balanced routing every device still runs tokens x top-k expert
 * rows, so its work does not change. */
#ifndef PF_CPEP_H
#define PF_CPEP_H

#include "planner/ir/graph.h"

#include <stddef.h>
#include <stdint.h>

/* What CP and EP need of a set of ops, at the graph's micro-batch. Attention is recognised by
 * `planfarm model`'s names (*.attn.scores, *.attn.k, *.attn.v); MoE by its op types
 * (moe_dispatch) and expert linears (pf_model_op_expert). */
typedef struct {
    int64_t seq;           /* tokens per sample (the scores' rows); 0: no attention found */
    int attn_layers;       /* attention cores (*.attn.scores ops) */
    double kv_bytes;       /* K and V: the *.attn.k and *.attn.v linears' outputs */
    double core_fwd_ms, core_bwd_ms; /* the attention cores (scores, softmax, dropout, context) */
    int moe_layers;        /* moe_dispatch ops */
    int experts;           /* experts per MoE layer (0: none) */
    double a2a_bytes;      /* the dispatches' outputs: tokens x top-k x hidden x precision */
    double expert_param_bytes;
} pf_cpep_facts_t;

/* The facts of ops[0..nops) of g (ops NULL: every op). */
void pf_cpep_facts(const pf_graph_t *g, const int *ops, int nops, pf_cpep_facts_t *f);

/* Can a sequence of `seq` tokens be split C ways (C = 1, or seq % 2C = 0 as Megatron-LM's
 * load-balanced causal split needs)? Does E split f's experts (E = 1, or an MoE graph whose
 * experts divide by E)? */
int pf_cpep_cp_ok(int64_t seq, int C);
int pf_cpep_ep_ok(const pf_cpep_facts_t *f, int E);

/* The K and V bytes one device sends around the ring per micro-batch and layer, forward:
 * (C - 1) chunks of kv_local (its own s / C tokens' K and V, over its tensor-parallel rank's
 * kv heads). Backward sends twice this (K, V again and dK, dV). */
double pf_cpep_ring_fwd_bytes(double kv_local, int C);

/* The graph one device of a CP x EP configuration runs at B sequences per micro-batch: every
 * quantity that counts tokens at B / C of g's samples (price.h's re-pricing at a fraction of a
 * sample: g is read as holding microbatch x C sub-sequences, re-priced at B of them), expert
 * linears' param_bytes / E; with C > 1 the attention blockwise: the softmax (and a dropout
 * after it, pf_training_selective_op) stores nothing and adds its forward to its backward, the
 * scores add theirs. Its "samples" are sub-sequences: the later phases plan it with
 * C x the global batch and d x C replicas. C = E = 1: pf_price_microbatch(g, B). PF_OK with *out
 * (the caller's), PF_EINPUT when C, E or B is below 1, PF_ERR out of memory. */
int pf_cpep_graph(const pf_graph_t *g, int B, int C, int E, pf_graph_t **out, char *err,
                  size_t errlen);

#endif
