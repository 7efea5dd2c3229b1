/* seqpar: sequence parallelism's memory and compute (Korthikanti et al. 2022, [Korthikanti22];
 * DESIGN.md "Cost definitions"). Under Megatron-LM's tensor parallelism the layer norms, the
 * dropouts outside the attention core and the residual adds run replicated on the T devices of a
 * group, each storing the whole activation (10 s b h of the 34 s b h a layer stores) and each
 * doing the whole work; sequence parallelism splits them along the sequence, so each device
 * stores 1/T and computes 1/T of them ([Korthikanti22] §4.2.2: they are independent along the
 * sequence), and turns each all-reduce of the group into a reduce-scatter + all-gather of the
 * same volume (the collective times stay as TAP priced them). */
#ifndef PF_SEQPAR_H
#define PF_SEQPAR_H

#include "planner/ir/graph.h"
#include "planner/tp/tap.h"

#include <stddef.h>

/* A copy of TAP's per-device graph `dev` of `orig` (same ops and edges; `tap` the result dev was
 * made from) where
 *   - every op whose stored activation TAP left whole (its mem_fwd_bytes in dev is that in orig:
 *     replicated on the T devices) stores mem_fwd_bytes / T: in a transformer layer the layer
 *     norms' inputs, the dropout masks outside the attention core and the inputs of the
 *     column-parallel linears, Korthikanti's 10 s b h, which sequence parallelism keeps split
 *     along the sequence (the linears all-gather their input again for the backward);
 *   - every op but a GEMM whose compute and weight TAP left whole (tap->ops[v].split == 0:
 *     layer norms, dropouts, residual adds) computes 1/T of it forward and backward; its
 *     collectives (comm_fwd_ms, comm_bwd_ms) keep their time.
 * Both only in units where TAP split something: a unit it left whole (too small, heads T does
 * not divide) runs replicated, without tensor parallelism and so without sequence parallelism.
 * The ops TAP split (attention core, linears) are divided already. NULL and the reason when out
 * of memory or the graphs and the result differ. */
pf_graph_t *pf_seqpar_graph(const pf_graph_t *orig, const pf_graph_t *dev,
                            const pf_tap_result_t *tap, int T, char *err, size_t errlen);

#endif
