/* simstages: one training step of a plan whose stages differ (issue 24; DESIGN.md "simulate",
 * stages that differ): stage s runs on d_s data-parallel replicas of t_s devices each, the space
 * of [PipeDream] (stages replicated unevenly) and [Piper] (per-stage d and t). The result is
 * simulate.h's, so that the timeline drawing, `planfarm simulate` and the search read it as they
 * read pf_simulate's; simulate.c itself keeps one R and one T for every stage.
 *
 * Model. A step is N micro-batches in all; replica r of stage s takes the micro-batches m with
 * m mod d_s = r, in increasing m ([PipeDream]'s 1F1B-RR round robin), n_s = N / d_s of them.
 *   Compute: per micro-batch of one replica on its t_s devices, fwd_ms + tp_fwd_ms forward and
 *     recompute_ms + bwd_ms + tp_bwd_ms backward (+ ZeRO-3's exposed gather, as simulate.c),
 *     priced by pf_simulate_input_from_setting on a uniform clone of the plan at T = t_s (one
 *     pricing code; simstages_plan.h): the stage's ops in the tensor-parallel setting of
 *     degree t_s.
 *   Order per stage replica: 1F1B runs w_s = min(n_s, ceil(K_s / d_s)) forwards, then a backward
 *     and a forward alternate, then the remaining backwards; K_s = d_s + ... + d_{S-1} is the
 *     number of micro-batches the stages from s on hold in flight in the steady state ([Piper]'s
 *     y, [PipeDream]'s NOAM), so replica r keeps its share of them. Eager-1F1B ([CrossMesh])
 *     runs 2 ceil(K_s / d_s) - 1 first, GPipe all forwards, then all backwards from the newest.
 *     With every d_s = 1 these are simulate.c's orders (interleave.c), w_s = S - s.
 *   Transfers: the activation of micro-batch m from stage s replica m mod d_s to stage s + 1
 *     replica m mod d_{s+1}, its gradient back the same way, by Megatron-LM's scatter/gather
 *     ([Megatron] Sec. 4.1, simulate_xfer.h) between groups of t_s and t_{s+1} devices:
 *     send_bytes (the edges crossing the cut after s) split over P = min(t_s, t_{s+1}) rank
 *     pairs k -> k at once (the postal model, the slowest pair), then the receiving group
 *     all-gathers it when it has more than one device (collective.h); every pair's task lasts
 *     that long with the sender's send queue and the receiver's receive queue busy; or, when the input gives it (xfer_ms,
 *     simstages_plan.c solves it for every cut with a tensor-parallel group on either side),
 *     the cross-mesh resharding between the two meshes ([CrossMesh]; planner/sim/reshard.h),
 *     whichever is cheaper, as simulate.c takes the cheaper of its RESHARD jobs' time and the
 *     scatter/gather.
 *   Gradients: per stage with d_s > 1 and rank k < t_s, an all-reduce of param_bytes / t_s in
 *     NB buckets over the rank-k devices of its d_s replicas (collective.h's cheapest algorithm,
 *     as simulate.c), bucket b after (b + 1) / NB of every replica's last backward, on the data-
 *     parallel queue; then each replica's optimizer step (optimizer_ms).
 *   Links: each device's send, receive and bucket queues share its link as in simulate.c
 *     (linkshare.h).
 *
 * Deadlock-free orders. Every wait of the task graph is one of: F(s, m) before F(s + 1, m) and
 * B(s + 1, m) before B(s, m) (data); F(s, m) before F(s, m + d_s) and B(s, m) before
 * B(s, m + d_s), F(s, m + (w_s - 1) d_s) before B(s, m), and B(s, m) before F(s, m + w_s d_s)
 * (one replica's order; the last two absent where the index passes the replica's last). Give
 * F(s, m) the number m + a_s and B(s, m) the number m + a_s + g_s. Every wait goes from a
 * smaller number to a larger one (so the graph has no cycle) when a_s increases with s, g_s
 * decreases with s, g_{S-1} > 0 and (w_s - 1) d_s < g_s < w_s d_s (no upper bound when
 * w_s = n_s: no forward follows a backward there). Such g exist: for s < s', a later stage's
 * lower bound (w_{s'} - 1) d_{s'} < K_{s'} <= K_s - d_s < K_s <= w_s d_s, the earlier one's
 * upper bound (w_s d_s >= K_s when w_s is not capped by n_s); eager's w = 2c - 1 gives
 * (w_{s'} - 1) d_{s'} < 2 K_{s'} <= K_s + K_{s+1} <= w_s d_s the same way; GPipe numbers every
 * backward after every forward. Communication streams only delay a transfer, never hold one
 * task waiting for another, so every task runs (the run checks it; tests/test_simstages.c
 * runs random degree vectors). */
#ifndef PF_SIMSTAGES_H
#define PF_SIMSTAGES_H

#include "planner/ir/cluster.h"
#include "planner/ir/training.h"
#include "planner/sim/simulate_types.h"

#include <stdatomic.h>
#include <stddef.h>

typedef struct {
    int stages;                 /* S >= 1 */
    int *replicas, *tp;         /* S entries each: d_s, t_s >= 1 */
    int microbatches;           /* N: the step's micro-batches in all, every d_s divides it */
    int buckets;                /* gradient all-reduce buckets per stage (0 or 1: one) */
    int zero;                   /* ZeRO stage (training.h): 3 gathers before each micro-batch */
    double nvls_busbw_gbps;     /* as simulate_types.h */
    pf_training_schedule_t schedule; /* GPipe, 1F1B, eager-1F1B, or signal (free communication,
                                        the best of the three) */
    int timeline;
    /* S entries as simulate_types.h, per micro-batch of one replica on its t_s devices; devices
     * d_s x t_s (replica r's at [r t_s, r t_s + t_s)), rep_fwd_ms / rep_bwd_ms d_s entries or
     * NULL; xfer_ms NULL, or L_s = lcm(d_s, d_{s+1}) entries: the cross-mesh resharding's time
     * of micro-batch m's tensor across the cut after s at [m mod L_s] (the simulator takes the
     * cheaper of it and the scatter/gather below, for the gradient back too) */
    pf_simulate_stage_t *stage;
    const pf_cluster_t *cluster;
    const atomic_int *cancel;   /* non-zero: stop ("cancelled"); NULL: never */
} pf_simstages_input_t;

/* Frees what pf_simstages_plan_input (simstages_plan.h) allocated and zeroes *in (idempotent). */
void pf_simstages_input_clear(pf_simstages_input_t *in);

/* One step: PF_OK with *out (release with pf_simulate_result_destroy); rows are stage-major,
 * row (sum_{s' < s} d_s' t_s') + r t_s + k for rank k of replica r of stage s; result's
 * replicas and tp are the largest d_s and t_s, microbatches N / replicas; events carry the
 * step's micro-batch index m. PF_EINPUT for an inconsistent input, PF_ERR out of memory or
 * cancelled. */
int pf_simstages_run(const pf_simstages_input_t *in, pf_simulate_result_t **out, char *err,
                     size_t errlen);

#endif
