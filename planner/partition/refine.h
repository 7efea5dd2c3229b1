/* refine: Parmesan's iterative refinement (IV-C) of a partition into S stages, on atomic ops.
 *
 * A move takes one boundary op (an op with an edge to an op of another stage) to the stage of
 * one of its neighbours in another stage: s - 1 or s + 1 usually, a farther stage when a skip
 * edge leads there. A move is valid when
 *   - the stage order stays a pipeline: no edge from a later stage to an earlier one (moving v
 *     later needs every successor of v at or after the target, earlier every predecessor at or
 *     before it). With that order every stage is convex (Def. 4): a path that leaves a stage can
 *     only go to later stages and never comes back;
 *   - both changed stages fit the memory limit (eq. 14 + parameter state);
 *   - the source stage keeps at least one op;
 *   - the objective max t(H) (eq. 3) does not grow.
 * Among valid moves the one with the lexicographically highest gain (g1, g2, g3) is made, and
 * only if that gain is positive:
 *   g1 = decrease of D, the sum over boundary ops of their hop distance (undirected) to the
 *        nearest reconverging op (pf_refine_reconverging);
 *   g2 = decrease of the total bytes on edges between stages;
 *   g3 = decrease of the largest stage compute sum_{v in H} c_u(v).
 * Each move strictly lowers (D, bytes, max compute) lexicographically, so no move is undone and
 * the loop ends; it also stops after max_moves (I = 100 in the paper). */
#ifndef PF_REFINE_H
#define PF_REFINE_H

#include "planner/ir/cost.h"
#include "planner/ir/graph.h"

typedef struct {
    int moves;
    double objective_before_ms, objective_after_ms; /* max t(H) */
    long long distance_before, distance_after;      /* D */
    double cut_bytes_before, cut_bytes_after;
} pf_refine_stats_t;

/* op_stage[v] in [0, stages), a valid pipeline fitting memory; rewritten in place. */
int pf_refine_run(const pf_graph_t *g, const pf_cost_model_t *cm, int stages, int max_moves,
                  int *op_stage, pf_refine_stats_t *stats, char *err, size_t errlen);

/* Reconverging ops (IV-C): v is reconverging when it is a cut vertex (articulation point) of
 * the undirected graph underlying g, parallel edges counted once, and it has more than one
 * distinct predecessor or more than one distinct successor: the split and merge points of
 * branches and skip connections that a single tensor passes through. reconv[v] = 1 for those;
 * dist[v] = undirected hop distance to the nearest one, 0 for all ops when there is none, n
 * for ops in a component without one. */
int pf_refine_reconverging(const pf_graph_t *g, unsigned char *reconv, int *dist);

#endif
