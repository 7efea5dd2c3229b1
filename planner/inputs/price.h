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

#endif
