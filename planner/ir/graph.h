/* graph: the operator-level DAG (DESIGN.md "Graph").
 *
 * Build one with pf_graph_new, add ops and edges (by op index, 0..n-1 in insertion order), then
 * pf_graph_finalize: it validates, builds CSR adjacency both ways and a topological order, and
 * freezes the graph. Readers and the planner only see finalized graphs. */
#ifndef PF_GRAPH_H
#define PF_GRAPH_H

#include "planner/ir/op.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pf_graph pf_graph_t;

typedef struct {
    int src, dst; /* op indices */
    double bytes;
} pf_edge_t;

pf_graph_t *pf_graph_new(const char *name, int microbatch);
/* An empty graph with g's name, micro-batch and device model (for graphs derived from g). */
pf_graph_t *pf_graph_new_like(const pf_graph_t *g);
/* The device model whose prices the op times are (graph key "device_model": a preset's name
 * such as "a100-80g", written by `planfarm model --device`); NULL when the graph does not say.
 * Re-pricing an op at another tensor-parallel split scales its time by this model's ratio. */
#define PF_GRAPH_DEVICE_MODEL_MAX 64
const char *pf_graph_device_model(const pf_graph_t *g);
int pf_graph_set_device_model(pf_graph_t *g, const char *name); /* copies; NULL clears */
/* The model itself: the graph carries a copy of one that is no preset (graph key "device", a
 * model file's object: a calibrated GPU's), so that re-pricing it at another micro-batch or
 * split uses the table it was priced on, in this process or a worker's; a preset travels by its
 * name. set_device names the graph's model after dm (NULL clears both; PF_ERR: memory);
 * pf_graph_device is the carried model, else the preset of the graph's device_model, else
 * NULL. */
typedef struct pf_devmodel pf_devmodel_t;
int pf_graph_set_device(pf_graph_t *g, const pf_devmodel_t *dm);
const pf_devmodel_t *pf_graph_device(const pf_graph_t *g);
/* g's device_model and carried model into h (a graph derived from g); PF_ERR: memory. */
int pf_graph_copy_device(pf_graph_t *h, const pf_graph_t *g);
void pf_graph_destroy(pf_graph_t **g);
/* The model the graph is (graph key "model", planner/ir/arch.h: layers, widths, heads, block
 * kind), which exporters turn into a framework's model flags; NULL when the graph does not say
 * (an imported or traced graph). Graphs derived with pf_graph_new_like keep it. */
typedef struct pf_arch pf_arch_t;
const pf_arch_t *pf_graph_arch(const pf_graph_t *g);
int pf_graph_set_arch(pf_graph_t *g, const pf_arch_t *a); /* copies; NULL clears; PF_ERR: memory */

/* Returns the new op's index, or -1 when out of memory. name and type are copied (NULL name
 * becomes "op<id>"). */
int pf_graph_add_op(pf_graph_t *g, const pf_op_t *op);
/* Returns the new edge's index, or -1 (out of memory, or an index out of range). Parallel
 * edges are allowed here (generators and coarsening may build them): their bytes add up
 * wherever a cut is priced. Graph files may not repeat an edge (pf_graph_load rejects it:
 * "edges[7] repeats edges[2] (op 3 -> op 4)"). */
int pf_graph_add_edge(pf_graph_t *g, int src, int dst, double bytes);

/* Validate and freeze. Rejects (PF_EINPUT): an empty graph, negative or duplicate op ids,
 * names and types that are not valid UTF-8 ("ops[3].name: invalid UTF-8 at byte 7"), negative,
 * non-finite or absurd numbers ("ops[12].fwd_ms: 1e+308 is above the limit of 1e+09 ms", the
 * bounds of util.h), self-loops and cycles ("graph has a cycle: op 17 (a) -> op 18 (b) ->
 * op 17"). Messages name ops by file id and by position (ops[i], edges[j]). */
int pf_graph_finalize(pf_graph_t *g, char *err, size_t errlen);

const char *pf_graph_name(const pf_graph_t *g);
int pf_graph_microbatch(const pf_graph_t *g);
int pf_graph_nops(const pf_graph_t *g);
int pf_graph_nedges(const pf_graph_t *g);
const pf_op_t *pf_graph_op(const pf_graph_t *g, int v);
const pf_edge_t *pf_graph_edge(const pf_graph_t *g, int e);

/* Edge indices leaving / entering op v (CSR). Only valid after finalize. */
const int *pf_graph_out(const pf_graph_t *g, int v, int *count);
const int *pf_graph_in(const pf_graph_t *g, int v, int *count);
/* Topological order (op indices) and each op's position in it. Kahn's algorithm, ties broken by
 * the lowest op index, so the order is deterministic. */
const int *pf_graph_topo(const pf_graph_t *g);
const int *pf_graph_topo_pos(const pf_graph_t *g);
/* Index of the op whose file id is `id`, or -1. */
int pf_graph_find(const pf_graph_t *g, int64_t id);

/* c_u(v) = fwd_ms + bwd_ms (DESIGN.md cost definitions). */
double pf_graph_cu_ms(const pf_graph_t *g, int v);
double pf_graph_total_cu_ms(const pf_graph_t *g);
double pf_graph_total_param_bytes(const pf_graph_t *g);
/* Longest path by c_u (sum over its ops), the critical path of one forward+backward. */
double pf_graph_longest_path_ms(const pf_graph_t *g);

/* Files. The version pf_graph_save writes: 2 added the ops' work keys (fwd_flops, bwd_flops,
 * bytes_read, bytes_written, gemm); files without "version" are version 1 and load unchanged. */
#define PF_GRAPH_VERSION 2
/* Files. load returns PF_OK, PF_EINPUT (message "<file>: <place>: <problem>", or for a syntax
 * error "<file>:<line>:<column>: <jansson's message>") or PF_ERR. Both read the text element by
 * element (json_stream.h): no tree of the whole file is built (a 200,000-op file's tree was
 * 319 MB), and the graph and the messages are those of pf_graph_from_json on the parsed text. */
int pf_graph_load(const char *path, pf_graph_t **out, char *err, size_t errlen);
int pf_graph_load_buffer(const char *text, size_t len, const char *label, pf_graph_t **out,
                         char *err, size_t errlen);
/* The graph of a JSON root already parsed; the root stays the caller's, errors start with
 * label. */
struct json_t;
int pf_graph_from_json(struct json_t *root, const char *label, pf_graph_t **out, char *err,
                    size_t errlen);
/* path "-" or NULL = stdout. */
int pf_graph_save(const pf_graph_t *g, const char *path, char *err, size_t errlen);

#endif
