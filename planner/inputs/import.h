/* import: real profiles -> graph files (issue "foundation", item 4).
 *
 * Two formats, both taken as measured: every op keeps the file's node id, the profile's times and
 * sizes, and the graph records the batch size those numbers were measured at (its `microbatch`;
 * DESIGN.md says graph numbers are per micro-batch, and a PipeDream profile is per mini-batch of
 * the profiled size, so one profiled mini-batch is one micro-batch here, unscaled).
 *
 * PipeDream (SOSP'19) profile text, one node a line and one edge a line:
 *   nodeN -- <description> -- forward_compute_time=<ms>, backward_compute_time=<ms>,
 *            activation_size=<bytes or [b0; b1; ...]>, parameter_size=<bytes>
 *   <tab>nodeA -- nodeB
 * in any order. Each node becomes one op:
 *   id            N
 *   name          "nodeN.<Class>" (Class = the description up to its first '(', e.g. node12.Conv2d;
 *                 dots in the class become '_', so the id is the only hierarchy level)
 *   type          from the class (pf_import_type_of: Conv2d -> conv, Linear -> linear, ...)
 *   fwd_ms/bwd_ms forward_compute_time / backward_compute_time
 *   param_bytes   parameter_size
 *   mem_fwd_bytes = mem_bwd_bytes = activation_size (the sum of a list): the profile gives one
 *                 activation figure and eq. 14 sums max(m_fwd, m_bwd) over a stage, so it is the
 *                 activation one micro-batch keeps alive; a 2x "plus its gradient" on every op
 *                 would count gradient buffers that live one op at a time as if all were live.
 *   work          (graph.h) what the profile measured and nothing more: bytes_read = parameter_size
 *                 (the weights the kernels read; what an op reads from its producers is on its
 *                 in-edges), bytes_written = activation_size (its output). No FLOPs and no GEMM
 *                 shape: the profile gives none, so they stay 0 (unknown) and the times stay
 *                 the measured ones.
 *   edge A -> B   bytes = A's activation (the consumer receives the producer's output). When A
 *                 has a list and B is `__getitem__(k)` with k in range, bytes = list[k] (in every
 *                 shipped profile such a consumer's own activation_size equals list[k]); any other
 *                 consumer of a list gets the sum.
 * Errors (PF_EINPUT) read "<file>:<line>: <problem>": a bad or negative number, a missing or
 * repeated field, a line that is neither a node nor an edge, a node defined twice, an edge to an
 * undefined node, a repeated edge, a self-loop, an edge that closes a cycle, NUL bytes, a line
 * over 1 MiB. A file with no node lines is "<file>: no node lines".
 *
 * Piper (NeurIPS'21) planner input, JSON: nodes[{id, name, TMPCs}], edges[{sourceId, destId,
 * communicationCost}]. The single-device "vanilla" configuration (TMPCs["1"], the entry whose id
 * is "vanilla") gives each op:
 *   id, name      the node's id; its name, with ".k" (k = 0, 1, ... in file order) appended when
 *                 several nodes share it (bert32a100: ParallelTransformerLayer.0 .. .31)
 *   type          pf_import_type_of(name); "" for PipeDream-style names "nodeN" (no class given)
 *   fwd_ms/bwd_ms timePerSample / 3 and 2 x timePerSample / 3. timePerSample is the whole forward
 *                 + backward time of the profiled batch (resnet.json's equal PipeDream resnet50's
 *                 fwd + bwd node by node) and Piper keeps no split; backward ~ 2 x forward is the
 *                 rule the analytic generators use too (planner/inputs/model.h).
 *   param_bytes   parameterSize
 *   mem_fwd_bytes = mem_bwd_bytes = memoryUsageA (the activations, = PipeDream's activation_size).
 *                 memoryUsageB is weights + gradients (2 x parameterSize in every shipped file);
 *                 it is not read, since the cost model adds opt_factor x param_bytes itself.
 *   work          as PipeDream's: bytes_read = parameterSize, bytes_written = memoryUsageA; no
 *                 FLOPs, no GEMM shape (Piper's input gives none)
 *   edge bytes    communicationCost
 * syncTimeFw/Bw, other configurations and the top-level device/bandwidth keys are ignored. Errors
 * (PF_EINPUT) read "<file>: <JSON path>: <problem>", e.g. `nodes[3].TMPCs: no "1" vanilla
 * configuration`; JSON syntax errors "<file>:<line>:<column>: ...".
 *
 * Both readers accept path "-" (stdin). The graph is named after the file ("vgg16").
 * The readers are import_pipedream.c and import_piper.c; import.c holds what they share. */
#ifndef PF_IMPORT_H
#define PF_IMPORT_H

#include "planner/ir/graph.h"

/* PipeDream's profile text (node and edge lines). microbatch: the profiled batch size recorded in
 * the graph (0 = the known value for the shipped models, else 1). PF_EINPUT names file:line. */
int pf_import_pipedream(const char *path, int microbatch, pf_graph_t **out, char *err,
                        size_t errlen);
/* Piper's JSON input, single-device "vanilla" configuration. */
int pf_import_piper(const char *path, int microbatch, pf_graph_t **out, char *err, size_t errlen);

/* The profiled batch size of a shipped profile, told by format ("pipedream" or "piper"), file
 * stem and op count: PipeDream alexnet 256, vgg16 128, resnet50 128, resnet101 64; Piper resnet
 * 128 (it is PipeDream's resnet50 profile). 0 when unknown. */
int pf_import_known_microbatch(const char *format, const char *stem, int nops);

/* Op type for a PyTorch module class name ("Conv2d" -> "conv", "Input0" -> "input"); unknown
 * classes map to their name in lower case. Never NULL; points to static storage or into buf. */
const char *pf_import_type_of(const char *class_name, char *buf, size_t len);

/* ---- shared by the two readers (import_pipedream.c, import_piper.c) ---- */

#define PF_IMPORT_MAX_CLASS_CHARS 64

/* "dir/vgg16.txt" -> "vgg16"; "-" -> "stdin". */
void pf_import_file_stem(const char *path, char *buf, size_t len);
/* path for messages: "<stdin>" for "-" */
const char *pf_import_label(const char *path);
/* microbatch 0: the shipped profile's batch size when known, else 1. */
int pf_import_resolve_microbatch(const char *format, const char *stem, int nops, int microbatch);

/* The id index: node ids sorted (pf_import_key_cmp: by id, then order, the node's place in the
 * file, so that of two nodes with one id the later one is reported), looked up by binary search
 * (pf_import_key_find: the index of a key with that id, or -1). */
typedef struct {
    int64_t id;
    long order;
    int index;
} pf_import_key_t;
int pf_import_key_cmp(const void *a, const void *b);
int pf_import_key_find(const pf_import_key_t *keys, size_t n, int64_t id);

#endif
