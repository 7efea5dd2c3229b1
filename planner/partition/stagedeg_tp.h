/* stagedeg_tp: the per-stage DP of stagedeg.h with a tensor-parallel degree t_s per stage and a
 * configuration per op ([Piper]'s `full` problem, its "TMPCs"; issue 24).
 *
 * Problem. As stagedeg.h, but stage s runs on d_s replicas of t_s devices each (d_s x t_s
 * devices; sum_s d_s t_s <= D, or = D with exact_devices), and every op v of the stage runs one
 * of its configurations for t_s devices (pf_stagedeg_tmpc_t: [Piper]'s TMPC). A configuration
 * c of op v for t devices gives, per micro-batch of one replica: time_ms (fwd + bwd on the t
 * devices, any recomputation included), param_bytes (what the data-parallel all-reduce moves per
 * device), act_bytes (stored per micro-batch in flight), fixed_bytes (held once) and sync bytes
 * per neighbour (the resharding an edge to or from another stage costs on top of its bytes:
 * [Piper]'s syncTimeFw / syncTimeBw, in bytes as Piper's code uses them).
 *
 * Time per micro-batch of stage H on d replicas of t devices with configurations c(v):
 *   t(H) = (sum_v time(c(v)) + ef x X(H) / B) / d  +  ar x (d - 1)/d x sum_v P(c(v)) / (MB x B)
 *   X(H) = sum over edges e = (u, v) crossing H's boundary of bytes(e) + sync(c(v), e) when v is
 *          in H (an edge in), bytes(e) + sync(c(u), e) when u is (an edge out)
 * ef, ar, B, MB as stagedeg.h ([Piper]: ef = 2, ar = 4). Edges inside a stage cost nothing,
 * whatever the configurations of their ends (as [Piper]'s getTPSForResult). Memory on each device:
 *   m = sf(d) x sum P(c(v)) + y x sum act(c(v)) + sum fixed(c(v)) + reserve,
 *   y = min(MB, ceil(K_s / d_s)), K_s = d_s + ... + d_{S-1}
 * (the sum of the *data-parallel* degrees behind, [Piper]'s suffix sum: a replica of t devices
 * holds one micro-batch's activations split over its t devices, which act_bytes already says).
 *
 * The choice of configurations per stage, d and y is [Piper]'s (its getAllTPSsForIdealPair and
 * KNAPSACK_FAST_HEURISTIC): every op takes its fastest configuration at (H, d) (least term of
 * t(H) above, its boundary edges included; the first on a tie); if that fits memory it is the
 * price. Otherwise, when even every op's least-memory configuration does not fit, the stage does
 * not fit at this y. Otherwise each op's other configuration that saves memory over its fastest
 * is a candidate, taken in increasing order of extra time per byte saved (ties by op index) until
 * the stage fits. (A choice of every op's least-memory configuration is never cheaper: the swaps
 * are a subset of its changes, each adding time.) At most two configurations per op and t, the
 * heuristic's limit in [Piper] (PF_EINPUT otherwise).
 *
 * The DP. T[F][k][s] = the least max stage time of a chain from F to V using at most k devices
 * (exactly k with exact_devices) whose data-parallel degrees add up to at most s:
 *   T[F][k][s] = min over G > F, t, d of max(t(G \ F, t, d, y = ceil(s / d)), T[G][k - td][s - d])
 * over t with a configuration for every op of G \ F, d allowed by o->degrees (d | MB, and
 * s <= MB, under [Piper]'s rules), k <= D; cells hold s <= k <= s x t_max only. A stage priced at
 * an s above its chain's true sum sees y too large, never too small: the optimum is the exact
 * chain's, as in [Piper]'s runDP, which keeps "at most" k and s too. Rows fall with k and s, so a
 * stage only reads the cells of T[G] below both neighbours, and along k no further than the first
 * at or below its own price (the rest of the row carries it on). Each cell remembers the cell its
 * value came from, so the chain is rebuilt at the y each stage was priced at. Prices come from
 * per-downset sums where every op's fastest configuration at t cannot depend on d or the boundary
 * (its configurations share param_bytes and sync bytes, as recomputation's do), else from the
 * stage's ops; the heuristic above walks the stage's ops only when its fastest configurations do
 * not fit. Downsets of one size in parallel, as stagedeg.h. With more than one t the DP runs
 * twice: over the smallest t alone first (a fraction of the work), whose optimum U the full
 * problem reaches too, then over every t keeping no cell above U; exact, since every suffix of a
 * chain of value <= U is <= U and the candidates <= U are the same, in the same order.
 *
 * Not modelled (as stagedeg.h): schedules other than 1F1B; the plan, mapping and simulator do not
 * take per-stage t, d or configurations yet. */
#ifndef PF_STAGEDEG_TP_H
#define PF_STAGEDEG_TP_H

#include "planner/partition/stagedeg_tpm.h" /* pf_stagedeg_tmpc_t, pf_stagedeg_tmpcs_t */


/* The DP over ds (from {} to V) with o's devices, exact_devices, degrees, only_degree, factors,
 * state_factor and threads (o->none, o->full and o->recompute_ops are not used: the
 * configurations carry recomputation) and cm's B_flat, MB, training, reserve and memory limit.
 * *out as pf_stagedeg_run's, with tensor[s] = t_s, op_tmpc[v] = the index of v's configuration
 * counted from tab->first[v], recompute[s] = 0 (every op at its fastest) or 2 ([Piper]'s swaps),
 * op_recompute all 0. A t for which an op has no configuration is not offered to the stages
 * holding it. PF_OK, PF_EINPUT (options, or more than two configurations
 * for one op and one t) or PF_ERR. */
int pf_stagedeg_tp_run(const pf_graph_t *g, const pf_downsets_t *ds, const pf_cost_model_t *cm,
                       const pf_stagedeg_opts_t *o, const pf_stagedeg_tmpcs_t *tab,
                       pf_stagedeg_result_t **out, char *err, size_t errlen);

/* Price a given assignment (stages in pipeline order): op_stage, degree, tensor and op_tmpc of r
 * give time_ms, mem_bytes and objective_ms (INFINITY when a stage does not fit). PF_EINPUT when a
 * configuration is not one for its stage's t, or the degrees use more than o->devices. */
int pf_stagedeg_tp_eval(const pf_graph_t *g, const pf_cost_model_t *cm, const pf_stagedeg_opts_t *o,
                        const pf_stagedeg_tmpcs_t *tab, pf_stagedeg_result_t *r, char *err,
                        size_t errlen);

#endif
