/* map_stages_search: the placement of a plan whose stages differ (map_stages.h: the problem, its
 * objective and what the search guarantees), and `planfarm map`'s entry for such plans. */
#ifndef PF_MAP_STAGES_SEARCH_H
#define PF_MAP_STAGES_SEARCH_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/ir/plan.h"
#include "planner/map/map_stages.h"

#include <stddef.h>

#define PF_MAP_STAGES_SEARCH_EXHAUSTIVE 200000
#define PF_MAP_STAGES_SEARCH_ROUNDS 64
/* Replica times the swaps of one greedy placement may compute (about a second on large plans). */
#define PF_MAP_STAGES_SEARCH_EVALS 10000000LL
/* Above this many groups only the slowest stages' groups start a swap (each pass would
 * otherwise try every pair). */
#define PF_MAP_STAGES_SEARCH_ALL_PAIRS 512

typedef struct {
    long long exhaustive_max; /* enumerate when the in-host placements are at most this; 0 never */
    int rounds;               /* passes of the swap improvement */
    long long max_evals;      /* replica times the swaps may compute per placement improved */
} pf_map_stages_search_opts_t;

typedef struct {
    int exact;            /* 1: every in-host placement was enumerated */
    long long placements; /* evaluated by the enumeration */
    int candidates;       /* greedy placements tried */
    int swaps;            /* improving swaps and moves taken */
    int converged;        /* the last pass took none: a local optimum (map_stages.h (2)) */
    int split_groups;     /* groups spanning hosts in the result */
    double objective_ms, seconds;
} pf_map_stages_search_stats_t;

/* Defaults: exhaustive_max PF_MAP_STAGES_SEARCH_EXHAUSTIVE, rounds PF_MAP_STAGES_SEARCH_ROUNDS,
 * max_evals PF_MAP_STAGES_SEARCH_EVALS. The swaps stop at whichever limit comes first (then
 * converged is 0). */
void pf_map_stages_search_opts_init(pf_map_stages_search_opts_t *o);

/* The search of map_stages.h: dev (m->n entries) gets the placement, st (may be NULL) its
 * numbers. PF_OK or PF_ERR (out of memory). */
int pf_map_stages_search(const pf_map_stages_t *m, const pf_map_stages_search_opts_t *o, int *dev,
                         pf_map_stages_search_stats_t *st, char *err, size_t errlen);

/* What `planfarm map` does for a plan whose stages differ (pf_plan_degrees_mixed): validate it,
 * price its stages (per device kind on a mixed cluster), map it, and write every stage's
 * devices, devices, objective_ms (map_stages.h's objective), the mapping section (instantiation
 * "stages", objective_ms the same, lower bound absent) and simulated_step_ms = N x objective +
 * the slowest replica of every stage without its all-reduce (one micro-batch's trip through
 * the pipeline: fill and drain), an estimate until the simulator prices the plan; the CS map
 * and p2p map baselines are dropped (they place S x R equal groups). st may be NULL. */
int pf_map_stages_search_plan(const pf_graph_t *g, const pf_cluster_t *c, pf_plan_t *p,
                              const pf_map_stages_search_opts_t *o,
                              pf_map_stages_search_stats_t *st, char *err, size_t errlen);

#endif
