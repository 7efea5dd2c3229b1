/* price: a graph's op times from a device model (planfarm model --device; DESIGN.md "Cost
 * definitions", device model). */
#ifndef PF_PRICE_H
#define PF_PRICE_H

#include "planner/ir/devmodel.h"
#include "planner/ir/graph.h"

#include <stddef.h>

/* A copy of g in which every op whose work is known (fwd_flops, bwd_flops, bytes or a GEMM
 * shape above 0) has fwd_ms / bwd_ms from pf_devmodel_op_ms at precision p; ops without work
 * keep their times. *npriced (may be NULL) = how many were priced. PF_OK with *out (the
 * caller's), or PF_ERR / PF_EINPUT (a priced time above the graph's limits). */
int pf_price_graph(const pf_graph_t *g, const pf_devmodel_t *dm, pf_prec_t p, pf_graph_t **out,
                   int *npriced, char *err, size_t errlen);

/* A copy of g at micro-batch B (samples). The graph's own micro-batch b0 = pf_graph_microbatch(g)
 * is what its costs were given for; every quantity that counts tokens is scaled by r = B / b0
 * (DESIGN.md "Cost definitions", another micro-batch): fwd/bwd FLOPs; bytes_written; bytes_read
 * less the op's parameter bytes (the parameter share of what it reads, estimated as param_bytes,
 * is read once whatever the batch; an op that reads less than its parameters, an embedding's
 * lookup, reads rows per token: all of it scales); mem_fwd_bytes, mem_bwd_bytes; every edge's
 * bytes; the first dimension of input and output shapes when it equals b0; the GEMM shape:
 * gemm_batch when it is above 1 and a multiple of b0 (attention's b x heads), else gemm_m (a
 * linear's b x seq rows), rounded to whole numbers. Parameters, weights and the op's other fields
 * stay. Times: when g has a device model (pf_graph_device: the one it carries, else the preset
 * it names), each of fwd_ms and bwd_ms is multiplied by that model's ratio op_ms(new work) /
 * op_ms(old work) at bf16 (as tp_price.h re-prices a tensor-parallel split), so a graph priced
 * on that model gets its price of the new work; otherwise, or for an op without work, times scale linearly by
 * r, and *linear (may be NULL) is set to 1 (else 0) so that callers can say so. PF_OK with *out
 * (the caller's), PF_EINPUT when B < 1 or a scaled number is beyond the graph's limits, PF_ERR
 * when out of memory. */
int pf_price_microbatch(const pf_graph_t *g, int B, pf_graph_t **out, char *err, size_t errlen);
int pf_price_microbatch_ex(const pf_graph_t *g, int B, pf_graph_t **out, int *linear, char *err,
                           size_t errlen);

#endif
