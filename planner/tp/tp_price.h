/* tp_price: an op's time when tensor parallelism splits it T ways.
 *
 * A split op does 1/T of its work, but a smaller GEMM runs at a lower efficiency (the H100 sweep
 * of bench/results/gpu-2026-11-26: 780 TFLOP/s at 2048 x 8192 x 8192, 562 at 1024 x 4096 x
 * 4096), so where the graph names the device model that priced it (pf_graph_device_model) and
 * the op carries its work, the split time is the op's time scaled by that model's ratio
 * model(split work) / model(whole work) (DESIGN.md "Cost definitions", device model); elsewhere,
 * and for a model the planner does not know, time / T. */
#ifndef PF_TP_PRICE_H
#define PF_TP_PRICE_H

#include "planner/ir/devmodel.h"
#include "planner/ir/graph.h"

/* How the split falls on the op: its weight replicated (the op splits its tokens or heads: the
 * GEMM's batch, else m), split on the weight's dimension 0 (the GEMM's k: row parallel) or 1
 * (n: column parallel) - TAP's weight options in that order. */
typedef enum { PF_TP_SPLIT_TOKENS = 0, PF_TP_SPLIT_K = 1, PF_TP_SPLIT_N = 2 } pf_tp_split_t;

/* The device model of g's times (graph.h pf_graph_device: carried, else the preset named), or
 * NULL (none named, or an unknown name). */
const pf_devmodel_t *pf_tp_price_model(const pf_graph_t *g);

/* op's forward and backward time split T ways as `how` says, on dm (NULL: time / T). */
void pf_tp_price_split(const pf_devmodel_t *dm, const pf_op_t *op, pf_tp_split_t how, int T,
                       double *fwd_ms, double *bwd_ms);

/* The work of one of the T parts (shapes rounded up). */
pf_op_work_t pf_tp_price_split_work(const pf_op_work_t *w, pf_tp_split_t how, int T);

#endif
