/* mapping: stage replicas -> devices (Parmesan V, Algorithms 1 and 2, eq. 5-11), the MAP_PROBE
 * job, and the CS map / p2p map baselines (VIII).
 *
 * The stage graph G' has S x R stage replicas; stage replica x = s * R + r (stage-major), so a
 * mapping is an array dev[S * R] and plan.stage_list[s].devices[r] = dev[s * R + r].
 *
 * The cluster may have more devices than stage replicas (D >= S x R): a mapping is one-to-one
 * into the devices and the spare ones stay idle. Functions that take a cluster and a stage graph
 * with S x R > D fail with PF_EINPUT (or, for the double-valued ones, must not be called). */
#ifndef PF_MAPPING_H
#define PF_MAPPING_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/map/map_inst.h"
#include "planner/map/map_probe.h"
#include "planner/map/map_symmetry.h"
#include "planner/ir/plan.h"
#include "planner/map/stage_graph.h"

#include <stdatomic.h>
#include <stdint.h>

/* The stage graph G' (pf_stage_graph_new, pf_stage_graph_from_plan, accessors) is declared in
 * planner/map/stage_graph.h. */

/* c_stage(x, p) of stage replica x = s * R + r under an instantiation (eq. 6, 7, or both terms:
 * "full"), and the objective eq. 5 = max over all stage replicas. dev must be complete. */
double pf_mapping_stage_time_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c,
                                pf_map_inst_t inst, const int *dev, int x);
double pf_mapping_objective_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c,
                               pf_map_inst_t inst, const int *dev);
/* Estimated step until the simulator lands: (MB + S - 1) x max_x (c_u + c_m-term)
 * + max_x c_AR-term. */
double pf_mapping_step_estimate_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c,
                                   const int *dev, int microbatches);
/* Baselines (dev gets S * R entries). CS map: the replicas of one stage on consecutive devices
 * (stage s replica r -> device s * R + r); p2p map: consecutive stages of one replica on
 * consecutive devices (replica r stage s -> device r * S + s). */
void pf_mapping_cs(const pf_stage_graph_t *sg, int *dev);
void pf_mapping_p2p(const pf_stage_graph_t *sg, int *dev);

/* Initial interval of Algorithm 1: lower = eq. 10 (m) / eq. 11 (ar) by sorting (Proposition 1);
 * full: the joint bound max_s (c_u(s) + min_d (eq. 10 term + eq. 11 term at d)), never below the
 * larger of both; upper = the best of a random mapping (seeded) and the heuristic maps (CS, p2p),
 * whose mapping is written to dev. */
int pf_mapping_bounds(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_map_inst_t inst,
                      uint64_t seed, double *lower_ms, double *upper_ms, int *dev, char *err,
                      size_t errlen);

/* Algorithm 2: DFS with the precomputed checking scheme, pruning against target_ms. OpenMP over
 * the top-level branches with early exit. deadline_s is an absolute pf_now_s() time (0 = none).
 * symmetry: PF_MAP_SYM_*. threads = 0: OpenMP's default. cancel (may be
 * NULL): another thread sets it to abandon the probe, which then reports not found.
 * The answer does not depend on the thread count: the mapping returned is the one a sequential
 * DFS would find first (unless the deadline strikes). */
int pf_mapping_probe(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_map_inst_t inst,
                     double target_ms, double deadline_s, int symmetry, int threads,
                     const atomic_int *cancel, int *dev, pf_probe_result_t *res, char *err,
                     size_t errlen);

#define PF_MAPPING_DEFAULT_REL_EPS 1e-3
#define PF_MAPPING_DEFAULT_PROBE_SECONDS 1.0

typedef struct {
    pf_map_inst_t inst;
    int auto_inst;        /* pick by the ratio, evaluate the other too, keep the better (full) */
    double rel_eps;       /* stop when t_r - t_l <= rel_eps * t_r */
    int batch;            /* targets per round splitting [t_l, t_r] evenly (1 = plain bisection) */
    double probe_seconds; /* per-probe deadline; <= 0 = none */
    int symmetry;         /* PF_MAP_SYM_* */
    int threads;
    uint64_t seed;
    const int *initial;   /* optional S x R mapping added to the initial upper bound's candidates */
    double known_lower_ms; /* optional lower bound known from elsewhere; the initial lower bound
                              is the larger of it and eq. 10/11 (0 = none) */
} pf_mapping_opts_t;

typedef struct {
    int probes, probes_timed_out;
    int lower_proven;     /* 1 when no probe timed out: lower_ms is then a proven bound */
    long long nodes, symmetric_pruned, block_pruned, bound_pruned;
    double initial_lower_ms, initial_upper_ms, lower_ms, objective_ms, seconds;
} pf_mapping_stats_t;

/* Defaults: instantiation m, no auto, rel_eps 1e-3, batch 1, probe_seconds 1, PF_MAP_SYM_ALL,
 * threads 0 (OpenMP's default), seed 1, no initial mapping. */
void pf_mapping_opts_init(pf_mapping_opts_t *o);

/* Algorithm 1 for one instantiation: dev gets the best mapping found (o->auto_inst is ignored
 * here; pf_mapping_plan implements it). The search over the target is target_search.h's, policy
 * ROUNDS: o->batch probes a round, run side by side on this process's threads. */
int pf_mapping_search(const pf_stage_graph_t *sg, const pf_cluster_t *c, const pf_mapping_opts_t *o,
                      int *dev, pf_mapping_stats_t *st, char *err, size_t errlen);

/* Auto (Parmesan V-B, last paragraph, extended): search under the instantiation the ratio picks
 * and under the other one, keep the better mapping under full, then run a full search whose
 * initial upper bound includes it (so the result is never worse under full than either search,
 * the CS map or the p2p map). *used gets the instantiation whose search produced the mapping
 * kept; st holds that search's numbers except probes, probes_timed_out, nodes, symmetric_pruned,
 * block_pruned, bound_pruned and seconds, which add up all three searches, and lower_proven (all
 * three). */
int pf_mapping_search_auto(const pf_stage_graph_t *sg, const pf_cluster_t *c,
                           const pf_mapping_opts_t *o, int *dev, pf_mapping_stats_t *st,
                           pf_map_inst_t *used, char *err, size_t errlen);

/* The one writer of a mapping into a plan (`planfarm map` and the search): the stage devices from
 * dev (S x R), devices, objective_ms (full), simulated_step_ms, the CS map and p2p map baselines
 * and, when st is not NULL, the mapping section (instantiation used, st's numbers). PF_OK or
 * PF_ERR (out of memory). */
int pf_mapping_fill_plan(pf_plan_t *p, const pf_stage_graph_t *sg, const pf_cluster_t *c,
                         const int *dev, pf_map_inst_t used, const pf_mapping_stats_t *st);

/* What `planfarm map` does: map p (whose stages have ops), write the devices, objective_ms
 * (full), the mapping section, the baselines and simulated_step_ms into p. With o->auto_inst it
 * runs pf_mapping_search_auto, else pf_mapping_search under o->inst. */
int pf_mapping_plan(const pf_graph_t *g, const pf_cluster_t *c, pf_plan_t *p,
                    const pf_mapping_opts_t *o, char *err, size_t errlen);

#endif
