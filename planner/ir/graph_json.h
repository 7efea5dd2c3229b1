/* graph_json: the elements of a graph file's "ops" and "edges" (DESIGN.md "Files"), one JSON
 * value at a time. graph.c's two readers (pf_graph_from_json on a parsed tree, pf_graph_load
 * reading the file element by element) both call these, so that they read every field the same
 * way and name the same place when one is wrong ("ops[3].fwd_ms: negative (-1)"). Ranges
 * beyond the types are pf_graph_finalize's. */
#ifndef PF_GRAPH_JSON_H
#define PF_GRAPH_JSON_H

#include "planner/core/json.h"
#include "planner/ir/arch.h"
#include "planner/ir/devmodel.h"
#include "planner/ir/op.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* The most ops and edges a file may hold (a graph's indices are ints). */
#define PF_GRAPH_JSON_MAX_OPS ((size_t)1 << 26)
#define PF_GRAPH_JSON_MAX_EDGES ((size_t)1 << 28)

/* An edge as the file gives it: endpoints by file id. */
typedef struct {
    int64_t src, dst;
    double bytes;
} pf_graph_json_edge_t;

/* The element at `path` ("ops[3]") into *op; its strings point into o. PF_OK or PF_EINPUT with
 * "<path>.<key>: <problem>". */
int pf_graph_json_op(json_t *o, const char *path, pf_op_t *op, char *err, size_t errlen);
/* The element at `path` ("edges[7]"): src, dst (integers) and bytes (not negative). */
int pf_graph_json_edge(json_t *e, const char *path, pf_graph_json_edge_t *x, char *err,
                       size_t errlen);
/* The top level's objects beside the ops: "model" into *arch (*has_arch 0 when absent) and
 * "device" (the model the graph was priced on when it is no preset: graph.h) into *device (the
 * caller's; NULL when absent), which must bear device_model's name. */
int pf_graph_json_extras(json_t *root, const char *device_model, pf_arch_t *arch, int *has_arch,
                         pf_devmodel_t **device, char *err, size_t errlen);
/* One op as a file's element (only the work that is known: 0 is left out, as in version 1). */
void pf_graph_json_write_op(pf_json_writer_t *w, const pf_op_t *o);

#endif
