/* model_build: the graph of a model (model.h defines the kinds, the options and every op's
 * costs). */
#ifndef PF_MODEL_BUILD_H
#define PF_MODEL_BUILD_H

#include "planner/inputs/model.h"
#include "planner/ir/graph.h"

/* Validate and build a finalized graph. PF_EINPUT for impossible shapes (hidden not divisible by
 * heads, a depth not in the list, zero sizes, tensors past PF_MODEL_MAX_ELEMENTS); the message
 * names the command-line flag ("--heads: hidden 1000 is not divisible by 16 heads"). PF_ERR when
 * out of memory. */
int pf_model_build(const pf_model_opts_t *o, pf_graph_t **out, char *err, size_t errlen);

#endif
