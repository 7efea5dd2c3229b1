/* plan_blocks: the repeated blocks (training.h: layers.7) a plan's stages hold, for the plan file's
 * "blocks" and "cut_blocks" keys (DESIGN.md "Plan"). Ops with the same block name share a block,
 * wherever they sit in the graph. */
#ifndef PF_PLAN_BLOCKS_H
#define PF_PLAN_BLOCKS_H

#include "planner/ir/graph.h"

typedef struct pf_plan_blocks pf_plan_blocks_t;
typedef struct pf_jw pf_json_writer_t;

/* Stage s holds ops[s][0 .. nops[s]); NULL when out of memory. */
pf_plan_blocks_t *pf_plan_blocks_new(const pf_graph_t *g, int stages, const int *const *ops,
                                     const int *nops);
void pf_plan_blocks_destroy(pf_plan_blocks_t **b);
/* Stage s's "blocks" (those it holds whole), "cut_blocks" and "op_names". */
void pf_plan_blocks_write(pf_plan_blocks_t *b, pf_json_writer_t *w, const pf_graph_t *g,
                          const int *ops, int nops, int s);

#endif
