/* map_stages: the mapping of a plan whose stages differ (issue 24; DESIGN.md "Cost definitions",
 * mixed plans): stage s runs d_s data-parallel replicas of t_s devices each, and every replica's
 * device group is placed on the cluster. Plans whose stages agree keep mapping.h's exact search.
 *
 * A placement is one flat array dev[] of sum_s d_s t_s device indices, stage-major: stage s's
 * replica r, tensor-parallel rank k at dev[off(s) + r t_s + k], off(s) = sum_{s' < s} d_s' t_s'
 * (the layout of plan.stage_list[s].devices, stage after stage). Ranks of a group are ascending
 * device indices: a group is a set of devices.
 *
 * Objective (ms per micro-batch of the step, N micro-batches in all, replica r of stage s taking
 * those with m mod d_s = r):
 *   time(s, r) = (c_u(s, r) + c_m(s, r)) / d_s + ar(s)
 *   c_u(s, r)  = c_u(s) on the slowest kind among the group's devices (a tensor-parallel group
 *                waits for its slowest member); c_u(s) on a uniform cluster
 *   c_m(s, r)  = sum over neighbours s' (M(s, s') > 0, ascending) of the mean over the replicas r'
 *                of s' it exchanges with (r' = r mod gcd(d_s, d_s'): by the Chinese remainder
 *                theorem these share its micro-batches evenly, as d_s and d_s' divide N) of
 *                xfer(G(s, r), G(s', r')), where xfer(A, B) = max_k lat(a_k, b_k) + M(s, s') /
 *                min_k bw(a_k, b_k), a_k = A[k mod |A|], b_k = B[k mod |B|], k < max(|A|, |B|):
 *                tp_groups.h's group link, rank k to rank k, generalised to groups of two sizes
 *   ar(s)      = 2 (d_s - 1) / d_s x P(s) / B_min(s) / N, B_min(s) the slowest link of the ring
 *                replica 0, 1, ..., d_s - 1, 0 of any rank k (eq. 7, one all-reduce per step
 *                amortised over its N micro-batches); 0 when d_s = 1
 *   objective  = max over s and r of time(s, r)
 * The graph's numbers of stage s are per device of one replica at t_s (the partition that chose
 * t_s priced the ops so, as stagedeg_tp.h's configurations do); the mapping does not re-price
 * tensor parallelism.
 *
 * Search (map_stages_search.h). Exact when first-fit decreasing packs every group into the hosts
 * and an upper bound of the placements with every group inside one host (prod over groups of
 * sum_h C(|h|, t)) is at most exhaustive_max: all of those are enumerated, the first best kept.
 * Otherwise greedy placements: stage orders (all of them up to 4 stages, else pipeline order and
 * reversed; on a cluster that mixes kinds also "the heaviest stages by c_u(s) / d_s on the
 * fastest hosts first, tier by tier, each tier in pipeline order") x host orders (index; fastest
 * kind first) x stage- or replica-major, each group on the first host in order that has room
 * and keeps the other groups packable; the best 4 are improved by swaps of two equal-size
 * groups, moves of a group onto free devices of one host, and exchanges of one device of a group
 * with another device of its host (free or another group's), taken while the objective (then the
 * sum of the stages' slowest times, for ties) falls; the best result is kept. Guarantees of that
 * path: (1) never worse than any of its greedy placements; (2) when the passes end before
 * `rounds` and `max_evals` (stats.converged), no single swap, move or exchange lowers the objective (with more
 * than 512 groups only those of the slowest stages are tried); (3) every group lies in one host
 * whenever first-fit decreasing packs all groups into the hosts, which it always does when every
 * t_s divides every larger t_s and every host's device count (powers of two on hosts of 8), and
 * no improvement moves a group across hosts. No factor against the optimum is proven:
 * tests/test_map_stages.c measures it against brute force over every placement of 240 tiny
 * cases (4-6 devices, 2-3 stages): the optimum on all of those with regular links (one speed
 * inside hosts, one between), within 1.33x where every link has its own random speed. */
#ifndef PF_MAP_STAGES_H
#define PF_MAP_STAGES_H

#include "planner/ir/cluster.h"
#include "planner/map/stage_graph.h"

#include <stdbool.h>
#include <stddef.h>

/* The problem, read by map_stages_search.c (built by pf_map_stages_new, read-only after). */
typedef struct pf_map_stages {
    const pf_stage_graph_t *sg;
    const pf_cluster_t *c;
    int S, D, n, G;       /* stages, devices, placement length, groups (sum d_s) */
    long long n_micro;    /* N: micro-batches a step */
    int *d, *t, *off;     /* S, S, S + 1 */
    int *grp_stage;       /* G: group -> stage, stage-major */
    int nkinds, *kind;    /* kinds priced by sg (0: none) and device -> kind, or NULL */
    int H, *host_of;      /* hosts (numbered by first device) and device -> host */
    int *host_off, *host_dev; /* CSR: each host's devices, ascending */
    double *host_speed;   /* H: sum over stages of c_u on the host's slowest kind */
} pf_map_stages_t;

/* The problem: sg's c_u (per kind when set: kinds numbered as pf_devkinds_number numbers c's
 * devices), P and M; stage s's degrees d[s], t[s] (>= 1); n_micro micro-batches a step (each d[s]
 * divides it). NULL with the reason (PF_EINPUT's cases: a degree < 1 or not dividing n_micro,
 * more devices than c has; or out of memory). sg and c must outlive it. */
pf_map_stages_t *pf_map_stages_new(const pf_stage_graph_t *sg, const int *d, const int *t,
                                   long long n_micro, const pf_cluster_t *c, char *err,
                                   size_t errlen);
void pf_map_stages_destroy(pf_map_stages_t **m);

/* c_u(s) on device v: its kind's when sg prices kinds. */
double pf_map_stages_cu_ms(const pf_map_stages_t *m, int s, int v);
/* ar(s) of a placement: stage s's all-reduce per micro-batch. */
double pf_map_stages_ar_ms(const pf_map_stages_t *m, const int *dev, int s);
/* time(s, r), max_r time(s, r) and the objective of a complete placement (see above). */
double pf_map_stages_replica_ms(const pf_map_stages_t *m, const int *dev, int s, int r);
double pf_map_stages_stage_ms(const pf_map_stages_t *m, const int *dev, int s);
double pf_map_stages_objective_ms(const pf_map_stages_t *m, const int *dev);
/* Groups of dev whose devices are on more than one host. */
int pf_map_stages_split_groups(const pf_map_stages_t *m, const int *dev);
/* Whether first-fit decreasing packs n groups of the given sizes into hosts with free_in[h]
 * free devices (H hosts); scratch holds H + n ints. */
bool pf_map_stages_ffd_packs(const int *sizes, int n, const int *free_in, int H, int *scratch);

#endif
