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

#include "planner/cluster.h"
#include "planner/graph.h"
#include "planner/plan.h"
#include "planner/stage_graph.h"

#include <stdatomic.h>
#include <stdint.h>

typedef enum { PF_INST_M = 0, PF_INST_AR = 1, PF_INST_FULL = 2 } pf_inst_t;

const char *pf_inst_name(pf_inst_t inst); /* "m", "ar", "full" */
int pf_inst_parse(const char *s, pf_inst_t *out); /* PF_OK or PF_EINPUT ("auto" is not one) */

/* The stage graph G' (pf_stage_graph_new, pf_stage_graph_from_plan, accessors) is declared in
 * planner/stage_graph.h. */

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
/* The paper's selection: AR when all-reduce bytes / inter-stage bytes > 1, else M (both sides as
 * pf_stage_graph_total_allreduce_bytes / _total_p2p_bytes define them; no inter-stage bytes and
 * some all-reduce bytes = AR). */
pf_inst_t pf_map_auto_instantiation(const pf_stage_graph_t *sg);

/* Baselines (dev gets S * R entries). CS map: the replicas of one stage on consecutive devices
 * (stage s replica r -> device s * R + r); p2p map: consecutive stages of one replica on
 * consecutive devices (replica r stage s -> device r * S + s). */
void pf_map_cs(const pf_stage_graph_t *sg, int *dev);
void pf_map_p2p(const pf_stage_graph_t *sg, int *dev);

/* Interchangeable devices: a and b are in one class when swapping them leaves the bandwidth and
 * latency matrices unchanged (rows and columns). cls[d] gets the class of d (classes numbered by
 * their lowest device); returns the number of classes, or -1 when out of memory. */
int pf_map_device_classes(const pf_cluster_t *c, int *cls);

/* Host blocks: groups of devices (a machine, typically) that can trade places wholesale. Blocks A
 * and B of one class have the same size m, and the map a_i <-> b_i (i-th device of A <-> i-th of
 * B, by index; every other device fixed) is an automorphism of the bandwidth and latency matrices
 * (rows and columns: inside A and B, between them, and to and from every other device). Being
 * swappable is an equivalence (the swap of A and C is (A B)(B C)(A B)), so each block is checked
 * against the first block of each class. Blocks are proposed by the devices' host field and, when
 * that gives no class of two or more blocks, by the components of the links faster than the
 * slowest one; only the matrices decide. Blocks of one device, and blocks alone in their class,
 * are dropped. block[d] gets d's block (numbered by lowest device) or -1; block_class[b] (room for
 * D entries) the class of block b, numbered by first block; *capped (may be NULL) is set to 1 when
 * the budget of PF_MAP_BLOCK_BUDGET comparisons of matrix entries ran out (about 0.3 s), leaving
 * the blocks not yet compared in no class (less pruning, never wrong). 4096 devices in 512 DGX-1:
 * one class, 0.3 s. Returns the number of blocks, or -1 when out of memory. */
#define PF_MAP_BLOCK_BUDGET (1LL << 28)
int pf_map_host_blocks(const pf_cluster_t *c, int *block, int *block_class, int *capped);

/* Initial interval of Algorithm 1: lower = eq. 10 (m) / eq. 11 (ar) by sorting (Proposition 1);
 * full: the joint bound max_s (c_u(s) + min_d (eq. 10 term + eq. 11 term at d)), never below the
 * larger of both; upper = the best of a random mapping (seeded) and the heuristic maps (CS, p2p),
 * whose mapping is written to dev. */
int pf_map_bounds(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst,
                  uint64_t seed, double *lower_ms, double *upper_ms, int *dev, char *err,
                  size_t errlen);

typedef struct {
    int found;     /* a mapping with objective <= target exists (dev filled) */
    int timed_out; /* deadline reached first: counts as not found */
    double objective_ms;        /* of the mapping found */
    long long nodes;            /* DFS nodes visited */
    long long symmetric_pruned; /* candidate devices skipped as symmetric to one already tried
                                   (interchangeable devices, replica orderings, host blocks) */
    long long block_pruned;     /* of those, skipped by the host-block rule */
    long long bound_pruned;     /* candidate devices rejected by a stage-time bound or check */
} pf_probe_result_t;

/* Symmetry rules of the probe (the symmetry argument of pf_map_probe and pf_mapctx_new, and
 * pf_map_opts_t.symmetry): none; all of them (interchangeable devices, replica orderings, host
 * blocks); all but host blocks (to measure what the block rule adds). */
#define PF_MAP_SYM_OFF 0
#define PF_MAP_SYM_ALL 1
#define PF_MAP_SYM_NO_BLOCKS 2

/* Algorithm 2: DFS with the precomputed checking scheme, pruning against target_ms. OpenMP over
 * the top-level branches with early exit. deadline_s is an absolute pf_now_s() time (0 = none).
 * symmetry: PF_MAP_SYM_*. threads = 0: OpenMP's default. cancel (may be
 * NULL): another thread sets it to abandon the probe, which then reports not found.
 * The answer does not depend on the thread count: the mapping returned is the one a sequential
 * DFS would find first (unless the deadline strikes). */
int pf_map_probe(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst,
                 double target_ms, double deadline_s, int symmetry, int threads,
                 const atomic_int *cancel, int *dev, pf_probe_result_t *res, char *err,
                 size_t errlen);

#define PF_MAP_DEFAULT_REL_EPS 1e-3
#define PF_MAP_DEFAULT_PROBE_SECONDS 1.0

typedef struct {
    pf_inst_t inst;
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
} pf_map_opts_t;

typedef struct {
    int probes, probes_timed_out;
    int lower_proven;     /* 1 when no probe timed out: lower_ms is then a proven bound */
    long long nodes, symmetric_pruned, block_pruned, bound_pruned;
    double initial_lower_ms, initial_upper_ms, lower_ms, objective_ms, seconds;
} pf_map_stats_t;

/* Defaults: instantiation m, no auto, rel_eps 1e-3, batch 1, probe_seconds 1, PF_MAP_SYM_ALL,
 * threads 0 (OpenMP's default), seed 1, no initial mapping. */
void pf_map_opts_init(pf_map_opts_t *o);

/* Algorithm 1 for one instantiation: dev gets the best mapping found (o->auto_inst is ignored
 * here; pf_map_plan implements it). */
int pf_map_search(const pf_stage_graph_t *sg, const pf_cluster_t *c, const pf_map_opts_t *o,
                  int *dev, pf_map_stats_t *st, char *err, size_t errlen);

/* Auto (Parmesan V-B, last paragraph, extended): search under the instantiation the ratio picks
 * and under the other one, keep the better mapping under full, then run a full search whose
 * initial upper bound includes it (so the result is never worse under full than either search,
 * the CS map or the p2p map). *used gets the instantiation whose search produced the mapping
 * kept; st holds that search's numbers except probes, probes_timed_out, nodes, symmetric_pruned,
 * block_pruned, bound_pruned and seconds, which add up all three searches, and lower_proven (all
 * three). */
int pf_map_search_auto(const pf_stage_graph_t *sg, const pf_cluster_t *c, const pf_map_opts_t *o,
                       int *dev, pf_map_stats_t *st, pf_inst_t *used, char *err, size_t errlen);

/* What `planfarm map` does: map p (whose stages have ops), write the devices, objective_ms
 * (full), the mapping section, the baselines and simulated_step_ms into p. With o->auto_inst it
 * runs pf_map_search_auto, else pf_map_search under o->inst. */
int pf_map_plan(const pf_graph_t *g, const pf_cluster_t *c, pf_plan_t *p, const pf_map_opts_t *o,
                char *err, size_t errlen);

#endif
