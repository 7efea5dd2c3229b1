/* calibrate: a graph's analytic op costs replaced by times measured on this GPU.
 *
 * Each op is turned into a probe (profiler/cuda_abi.h) from its type and shapes: its "shape
 * class". Ops of one class (the 48 identical blocks of a GPT) are timed once. The timer is a
 * callback so that the mapping and the rewrite are tested without a GPU; the profiler passes
 * one that calls libpfcuda.so. Ops with no probe (embedding, conv, unknown types, missing
 * shapes) keep their analytic fwd_ms/bwd_ms and are listed with the reason. */
#ifndef PF_CALIBRATE_H
#define PF_CALIBRATE_H

#include "planner/ir/graph.h"
#include "profiler/cuda_abi.h"

#include <stddef.h>

/* The probe of one op, or PF_EINPUT with why it has none. Rules (shapes row-major):
 *   linear, dense, fc, matmul with a weight, or a matmul whose input and output have the same
 *   rank: GEMM m = prod(output[:-1]), n = output[-1], k = input[-1];
 *   matmul [b, s, h] -> [b, a, s, t] (attention scores): batch b a, m = s, n = t, k = h / a;
 *   matmul [b, a, s, t] -> [b, s, h] (attention context): batch b a, m = s, k = t, n = h / a;
 *   layernorm, rmsnorm, softmax: rows prod(output[:-1]) of output[-1];
 *   add, sub, mul, residual (2 inputs); gelu, relu, silu, tanh, sigmoid, dropout, scale,
 *   elementwise (1 input): prod(output) elements;
 *   attention [b, s, h] (a fused op): head dimension 128 (64, or h, when 128 does not divide
 *   h), batch b h / d, sequence s; causal when the type or name says "causal". */
int pf_calibrate_probe(const pf_op_t *op, int dtype, pf_op_probe_t *probe, char *why,
                       size_t whylen);

typedef int (*pf_op_timer_fn)(void *ctx, const pf_op_probe_t *probe, double *fwd_ms,
                              double *bwd_ms, char *err, size_t errlen);

typedef struct {
    int op;          /* op index in the graph */
    char why[96];
} pf_calibrate_skip_t;

typedef struct {
    int ntimed;             /* ops whose costs were replaced */
    int nclasses;           /* distinct probes timed */
    int nskipped;
    pf_calibrate_skip_t *skipped; /* nskipped entries, by op index */
} pf_calibrate_report_t;

void pf_calibrate_report_clear(pf_calibrate_report_t *r);

/* *out: a new finalized graph, identical to g but for measured fwd_ms/bwd_ms. A timer failure
 * stops the calibration (PF_ERR with the op and the timer's message): a half-measured graph
 * would mix two cost models silently. */
int pf_calibrate_graph(const pf_graph_t *g, int dtype, pf_op_timer_fn timer, void *ctx,
                       pf_graph_t **out, pf_calibrate_report_t *rep, char *err, size_t errlen);

#endif
