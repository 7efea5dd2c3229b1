/* op: one operator of a graph (graph.h), the record its readers fill and every layer above
 * reads. Apart from graph.h so that graph_json.c, which reads one from JSON, needs nothing of
 * the graph itself. */
#ifndef PF_OP_H
#define PF_OP_H

#include <stdint.h>

#define PF_SHAPE_MAX 8
typedef struct {
    int ndim; /* 0 = absent */
    int64_t dim[PF_SHAPE_MAX];
} pf_shape_t;

/* The work an op does per micro-batch of one replica, what a device model prices (DESIGN.md
 * "Files", graph keys fwd_flops, bwd_flops, bytes_read, bytes_written, gemm). 0 = not known.
 * A GEMM-like op also gives its forward product: `gemm_batch` products of (m x k) @ (k x n);
 * gemm_m = 0 when the op is not one. */
typedef struct {
    double fwd_flops, bwd_flops;
    double bytes_read, bytes_written;
    int64_t gemm_m, gemm_n, gemm_k, gemm_batch;
} pf_op_work_t;

/* One operator. Costs are per micro-batch of one replica. */
typedef struct {
    int64_t id;       /* id in the file; unique */
    const char *name; /* hierarchical, dotted; owned by the graph once added */
    const char *type; /* free text: matmul, linear, conv, layernorm, ... */
    double fwd_ms, bwd_ms;
    double param_bytes, mem_fwd_bytes, mem_bwd_bytes;
    pf_shape_t weight, input, output;
    pf_op_work_t work;
    /* Of fwd_ms and bwd_ms, the communication: a tensor-parallel setting's collectives
     * (tap.c), which another device kind does not speed up or slow down (devkinds.h); 0 in
     * graphs read from files. */
    double comm_fwd_ms, comm_bwd_ms;
} pf_op_t;

#endif
