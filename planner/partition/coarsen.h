/* coarsen: Parmesan's operator clustering (IV-B, eq. 4), named coarsen so that "cluster" always
 * means the machines.
 *
 * Adjacent hyper-ops are fused, cheapest eq. 4 cost first,
 *     cost(u, v) = c_u(u) + c_u(v) - alpha x c_m(u, v),
 * as long as the fusion keeps the hyper-op graph acyclic (u -> v may fuse iff no other path
 * u ~> v exists) and the fused hyper-op fits the smallest device on its own
 * (pf_cost_op_mem_bytes summed: parameter state plus peaks), until K hyper-ops remain or no legal
 * pair is left. A hyper-op is then priced exactly like the set of ops it holds, so a DP over the
 * hyper-op graph prices every union of hyper-ops as cost.h prices the expanded ops. */
#ifndef PF_COARSEN_H
#define PF_COARSEN_H

#include "planner/ir/cost.h"
#include "planner/ir/graph.h"

/* K when the caller gives none: S << K << |V| (IV-B). Parmesan uses K = 32 for S <= 16 on
 * vision models and K = 48-96 (two per layer) for BERT-24..48 (Tables VII-VIII). We take
 * clamp(8 S, 48, |V|): on our BERT-24 graph the floor of 32 left the DP 3% above the exact
 * optimum at S = 2 and 4, 48 reaches it (bench_partition, part 5). */
int pf_coarsen_default_k(int stages, int nops);

typedef struct {
    int k;        /* stop when this many hyper-ops remain (>= 1) */
    double alpha; /* eq. 4 weight of communication (>= 0) */
    /* Test hook, called after every fusion with one op of each fused hyper-op (any member:
     * the ops that name the two hyper-ops at that moment). NULL = none. */
    void (*on_fuse)(void *ctx, int op_a, int op_b);
    void *ctx;
} pf_coarsen_opts_t;

/* group[v] receives v's hyper-op in [0, *ngroups); hyper-ops are numbered in a topological
 * order of the hyper-op graph. cm gives B_flat (c_m) and the memory limit. */
int pf_coarsen_run(const pf_graph_t *g, const pf_cost_model_t *cm, const pf_coarsen_opts_t *o,
                   int *group, int *ngroups, char *err, size_t errlen);

/* The hyper-op graph of a grouping: one op per group, numbered by group, with
 *   fwd_ms, bwd_ms, param_bytes = sums over the members,
 *   mem_fwd_bytes = mem_bwd_bytes = sum of max(mem_fwd, mem_bwd) over the members (eq. 14
 *   sums these maxima, so any union of hyper-ops gets the same peak term as its ops),
 *   one edge per ordered pair of groups carrying the summed bytes; edges inside a group dropped.
 * Name = first member's name (topological order), type "hyper". PF_EINPUT when a group is
 * empty or out of range, or the grouping is not convex (the hyper-op graph has a cycle). */
int pf_coarsen_hyper_graph(const pf_graph_t *g, const int *group, int ngroups, pf_graph_t **out,
                           char *err, size_t errlen);

#endif
