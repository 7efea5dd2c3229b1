/* devfit_layers: a framework's fixed cost per op, fitted to measured GPT layer times (planfarm
 * calibrate --layers; issue 21 item 5).
 *
 * Input: the "gpt_layers" of a profile such as ../shared/data/h100/h100_reference.json: per layer
 * hidden, seq, microbatch, tp (default 1) and ops [{op, fwd_ms, bwd_ms}] timed one by one. Each op
 * is priced from its shape on the base model (pf_devfit_layers_op_work). A kernel model has no term
 * for what the framework spends around each op (eager dispatch, autograd's engine, the
 * synchronisation of a per-op timing), and on small layers that is most of the measured time
 * (bench/RESULTS.md, "Device model"). The fit adds one fixed cost per direction to every op,
 * op_overhead_us fwd and bwd (devmodel.h), each the value in [0, the longest measured op] that
 * minimises sum over that direction's ops of log(predicted / measured)^2: a grid of 400 points,
 * then golden-section search around the best. Everything else of the base model is kept. */
#ifndef PF_DEVFIT_LAYERS_H
#define PF_DEVFIT_LAYERS_H

#include "planner/ir/devmodel.h"
#include "planner/ir/op.h"

#include <jansson.h>
#include <stddef.h>

#define PF_DEVFIT_LAYERS_MAX 64

typedef struct {
    double hidden, seq, microbatch, tp;
    double meas_ms, base_ms, fitted_ms; /* forward + backward over the layer's ops */
} pf_devfit_layer_t;

typedef struct {
    int nlayers, nops;
    pf_devfit_layer_t layer[PF_DEVFIT_LAYERS_MAX];
    double overhead_us_fwd, overhead_us_bwd;
    double op_rms_base, op_rms_fitted; /* exp(rms over ops and directions of
                                        * ln(predicted / measured)) - 1 */
} pf_devfit_layers_report_t;

/* The work of op `name` of a GPT layer (hidden h, tensor-parallel slice t, seq s, micro-batch mb,
 * bf16 activations, Megatron-LM's split): qkv, out_proj, fc1, fc2 GEMMs of s x mb token rows;
 * layernorm* (any suffix) reads and writes one activation, residual_add reads two and writes one,
 * gelu reads and writes the 4h/t MLP activation; attention_core a causal flash kernel of
 * 4 s^2 (h/t) mb x 0.5 FLOPs forward and 2.5x that backward, reading q, k, v and writing one
 * activation (each h/t wide). -1 for any other name. */
int pf_devfit_layers_op_work(const char *name, double h, double t, double s, double mb,
                             pf_op_work_t *w);

/* Fit base's op overheads to the layers in the file at path (a parsed root with label for the
 * _json form). PF_OK with *out (the caller's) and rep filled; PF_EINPUT with
 * "<file>: gpt_layers[2].ops[1].op: 'softmax' is not a GPT layer op (...)" and the like. */
int pf_devfit_layers_file(const char *path, const pf_devmodel_t *base, pf_devmodel_t **out,
                          pf_devfit_layers_report_t *rep, char *err, size_t errlen);
int pf_devfit_layers_json(json_t *root, const char *label, const pf_devmodel_t *base,
                          pf_devmodel_t **out, pf_devfit_layers_report_t *rep, char *err,
                          size_t errlen);

#endif
