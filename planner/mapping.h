/* mapping: stage replicas -> devices (Parmesan V, Algorithms 1 and 2, eq. 5-11), the MAP_PROBE
 * job, and the CS map / p2p map baselines (VIII).
 *
 * The stage graph G' has S x R stage replicas; stage replica x = s * R + r (stage-major), so a
 * mapping is an array dev[S * R] and plan.stage_list[s].devices[r] = dev[s * R + r]. */
#ifndef PF_MAPPING_H
#define PF_MAPPING_H

#include "planner/cluster.h"
#include "planner/graph.h"
#include "planner/plan.h"

#include <stdint.h>

typedef enum { PF_INST_M = 0, PF_INST_AR = 1, PF_INST_FULL = 2 } pf_inst_t;

const char *pf_inst_name(pf_inst_t inst); /* "m", "ar", "full" */
int pf_inst_parse(const char *s, pf_inst_t *out); /* PF_OK or PF_EINPUT ("auto" is not one) */

typedef struct pf_stage_graph pf_stage_graph_t;

/* From raw numbers: c_u(s) ms, P(s) bytes, M(s, s') bytes (S x S, symmetric, diagonal ignored).
 * This is what travels on the wire. */
pf_stage_graph_t *pf_stage_graph_new(int stages, int replicas, const double *cu_ms,
                                     const double *param_bytes, const double *msg_bytes);
/* From a graph and a plan's stage ops: c_u(s) = sum c_u, P(s) = sum param_bytes,
 * M(s, s') = bytes of all edges between s and s' (DESIGN.md "stage graph"). */
pf_stage_graph_t *pf_stage_graph_from_plan(const pf_graph_t *g, const pf_plan_t *p);
void pf_stage_graph_destroy(pf_stage_graph_t **sg);

int pf_stage_graph_stages(const pf_stage_graph_t *sg);
int pf_stage_graph_replicas(const pf_stage_graph_t *sg);
double pf_stage_graph_cu_ms(const pf_stage_graph_t *sg, int s);
double pf_stage_graph_param_bytes(const pf_stage_graph_t *sg, int s);
double pf_stage_graph_msg_bytes(const pf_stage_graph_t *sg, int s, int t);

/* c_stage(x, p) of stage replica x = s * R + r under an instantiation (eq. 6, 7, or both terms:
 * "full"), and the objective eq. 5 = max over all stage replicas. dev must be complete. */
double pf_map_stage_time_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst,
                            const int *dev, int x);
double pf_map_objective_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst,
                           const int *dev);
/* Estimated step until the simulator lands: (MB + S - 1) x max_x (c_u + c_m-term)
 * + max_x c_AR-term. */
double pf_map_step_estimate_ms(const pf_stage_graph_t *sg, const pf_cluster_t *c, const int *dev,
                               int microbatches);
/* The paper's selection: AR when all-reduce bytes / inter-stage bytes > 1, else M. */
pf_inst_t pf_map_auto_instantiation(const pf_stage_graph_t *sg);

/* Baselines (dev gets S * R entries). CS map: the replicas of one stage on consecutive devices;
 * p2p map: consecutive stages of one replica on consecutive devices. */
void pf_map_cs(const pf_stage_graph_t *sg, int *dev);
void pf_map_p2p(const pf_stage_graph_t *sg, int *dev);

/* Initial interval of Algorithm 1: lower = eq. 10 (m) / eq. 11 (ar) / the larger of both (full),
 * by sorting (Proposition 1); upper = the best of a random mapping (seeded) and the heuristic
 * maps, whose mapping is written to dev. */
int pf_map_bounds(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst,
                  uint64_t seed, double *lower_ms, double *upper_ms, int *dev, char *err,
                  size_t errlen);

typedef struct {
    int found;     /* a mapping with objective <= target exists (dev filled) */
    int timed_out; /* deadline reached first: counts as not found */
    double objective_ms;        /* of the mapping found */
    long long nodes;            /* DFS nodes visited */
    long long symmetric_pruned; /* branches skipped as symmetric to one already tried */
} pf_probe_result_t;

/* Algorithm 2: DFS with the precomputed checking scheme, pruning against target_ms. OpenMP over
 * the top-level branches with early exit. deadline_s is an absolute pf_now_s() time (0 = none).
 * symmetry = 1 prunes interchangeable devices. threads = 0: OpenMP's default. */
int pf_map_probe(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst,
                 double target_ms, double deadline_s, int symmetry, int threads, int *dev,
                 pf_probe_result_t *res, char *err, size_t errlen);

typedef struct {
    pf_inst_t inst;
    int auto_inst;        /* pick by the ratio, evaluate the other too, keep the better (full) */
    double rel_eps;       /* stop when t_r - t_l <= rel_eps * t_r */
    int batch;            /* targets per round splitting [t_l, t_r] evenly (1 = plain bisection) */
    double probe_seconds; /* per-probe deadline; <= 0 = none */
    int symmetry;
    int threads;
    uint64_t seed;
} pf_map_opts_t;

typedef struct {
    int probes, probes_timed_out;
    long long nodes, symmetric_pruned;
    double initial_lower_ms, initial_upper_ms, lower_ms, objective_ms, seconds;
} pf_map_stats_t;

void pf_map_opts_init(pf_map_opts_t *o);

/* Algorithm 1 for one instantiation: dev gets the best mapping found. */
int pf_map_search(const pf_stage_graph_t *sg, const pf_cluster_t *c, const pf_map_opts_t *o,
                  int *dev, pf_map_stats_t *st, char *err, size_t errlen);

/* What `planfarm map` does: map p (whose stages have ops), write the devices, objective_ms
 * (full), the mapping section, the baselines and simulated_step_ms into p. */
int pf_map_plan(const pf_graph_t *g, const pf_cluster_t *c, pf_plan_t *p, const pf_map_opts_t *o,
                char *err, size_t errlen);

#endif
