/* stagedeg: the downset DP with a data-parallel degree and a recomputation choice per stage
 * (issue 24; [Piper]'s problem without tensor parallelism, its `notp`).
 *
 * Problem. Cut the graph into a chain of downsets {} = F_0 < F_1 < ... < F_S = V; stage s holds
 * H_s = F_{s+1} \ F_s, runs on d_s data-parallel replicas and stores its activations either
 * plainly or under full recomputation (r_s). Minimise the slowest stage's time per micro-batch
 *   max_s t(H_s, d_s, r_s)   subject to sum_s d_s <= D (or = D) and every stage fitting memory.
 *
 * Time per micro-batch of stage H on d replicas under recomputation r (the pipeline's
 * throughput: d replicas take turns on the micro-batches, so each sees 1/d of them):
 *   t(H, d, r) = (c_u^r(H) + ef x cut(H) / B) / d  +  ar x (d - 1)/d x P(H) / (MB x B)
 * - c_u^r(H) = sum of the ops' c_u in mode r (r = full adds the recomputed forward), cut(H) the
 *   bytes of edges crossing H's boundary, B = cm->flat_gbps: planfarm's eq. 3 (cost.h), once per
 *   micro-batch, divided over the d replicas as [Piper] divides compute and edge traffic.
 * - ef (edge_factor): 1 = planfarm's eq. 3 (each boundary byte once); 2 = [Piper]'s model, which
 *   sends every boundary edge twice (activation forward, its gradient backward).
 * - The gradient all-reduce once per batch of MB micro-batches, amortised over them:
 *   ar x (d - 1)/d x P(H) bytes, P(H) = the stage's parameter bytes. ar (allreduce_factor) = 2 is
 *   a ring all-reduce, planfarm's eq. 7 (cost.h pf_cost_ring_allreduce_bytes); ar = 4 is
 *   [Piper]'s getDataParallelResyncCost (it follows PipeDream's parameter-server model). We
 *   default to the ring, which is what NCCL runs; the Piper bench sets 4 to price as Piper does.
 *   ar = 0 leaves the all-reduce out, as pf_partition_dp does (constant R: the mapping prices
 *   it): then with every d_s = R, t(H, R, none) = t(H) / R exactly.
 * - allreduce_per_microbatch = 1: the all-reduce runs after every micro-batch of every replica
 *   (no gradient accumulation) and the replicas take turns on it as on the compute, so its term is
 *   divided by d instead of MB: t = (c_u^r(H) + ef x cut(H) / B + ar x (d - 1)/d x P(H) / B) / d.
 *   With ef = 0, ar = 4 this is [PipeDream]'s time of a stage replicated d times (section 3.1,
 *   its partitioning DP: T(i -> j, m) = 1/m x (compute, weight synchronisation W^m = 4 (m - 1)
 *   |w| / (m B)); the paper takes their max, as if they overlapped, its released optimizer
 *   (optimizer_graph_hierarchical.py compute_partitioning, one level of workers) adds them,
 *   (compute + 4 (m - 1) P / (B m)) / m, and that sum is what it reports and what this is. Its
 *   transfers between stages enter only under --activation_compression_ratio, hence ef = 0.
 *   bench/bench_stagedeg_pd.c runs it so; tests/test_stagedeg.c re-derives its recurrence).
 * Memory of stage s on each of its devices:
 *   m = sf(d) x P(H) + y_s x act^r(H) + fixed^r(H) + reserve,  y_s = min(MB, ceil(K_s / d_s))
 * with K_s = d_s + d_{s+1} + ... + d_{S-1} (the degrees of stage s and every stage after it).
 * Under 1F1B stage s starts as many forwards as the pipeline behind it holds before its first
 * backward; with d_s replicas taking turns each holds ceil(K_s / d_s) of them ([Piper]'s
 * memoryUsageA x y + memoryUsageB with the same y). With every d = R this is min(MB, S - s):
 * cost.h's k_s. sf(d) = state_factor when set, else pf_training_state_factor(train, d) (ZeRO
 * divides over the stage's own d). fixed^r is what a stage holds once (recomputation's working
 * set; [Piper]'s memoryUsageB beyond the parameter state).
 *
 * The DP. Because y_s depends on the stages *after* s, the table runs from the end of the
 * pipeline: T[F][k] = the least max stage time of a chain from F to V whose stages use exactly
 * k devices (k = K of its first stage), T[V][0] = 0, and
 *   T[F][k] = min over downsets G > F, d, r of max(t(G \ F, d, r), T[G][k - d])
 * with G \ F fitting memory at y = min(MB, ceil(k / d)). The answer is min over k <= D of T[{}][k]
 * (k = D with exact_devices). This is the brief's T[F, k] with the last stage F \ F' read from
 * the other end; [Piper]'s runDP does the same (its ideals are closed under successors).
 * Downsets of one size depend only on larger ones: one size class at a time, its cells in
 * parallel (OpenMP), each thread writing its own cells.
 *
 * Degrees: PF_STAGEDEG_DEGREES_DIVIDE_MB (default, [Piper]'s rules: d divides MB and the degrees
 * add up to at most MB, since a replica needs a micro-batch), _ANY (every d in 1..D), _POW2.
 * Recomputation is chosen per stage: none or full for all its ops, and with recompute_ops also
 * "ops", [Piper]'s per-node choice made as its knapsack heuristic makes it (KNAPSACK_FAST_
 * HEURISTIC in its algo.cpp): when the stage does not fit with no recomputation, its ops are
 * taken in increasing order of extra time per byte saved (y x (act_none - act_full) + fixed_none
 * - fixed_full at the stage's y; ties by op index) and recomputed until it fits. Not an exact
 * knapsack: the DP is exact over chains and degrees for that per-stage price (tests), and never
 * worse than none/full per stage (the greedy stops at or before "all ops", and costs >= 0). On
 * [Piper]'s resnet at 8 devices the per-stage choice alone was 4% slower than Piper's optimum.
 * Only 1F1B (and the signal bound, which counts as 1F1B) is modelled: PF_EINPUT otherwise.
 * A tensor-parallel degree per stage and a configuration per op ([Piper]'s `full` problem):
 * stagedeg_tp.h, which returns this result with tensor[] and op_tmpc[] filled.
 *
 * Missing before the search can use it (a later session): the plan format has one R for every
 * stage (pf_plan_t.replicas) and no per-stage recomputation; the mapping places S x R equal
 * groups; the simulator and export assume equal stages; the pipeline between stages of different
 * degrees is a resharding (planner/reshard*: RESHARD jobs) that t(H, d, r) prices as plain edge
 * traffic divided by d; no coarsening or refinement wraps this DP (it runs on the graph given);
 * cm->stage_mult (mixed clusters) is ignored. */
#ifndef PF_STAGEDEG_H
#define PF_STAGEDEG_H

#include "planner/ir/cost.h"
#include "planner/ir/graph.h"
#include "planner/partition/downsets.h"

typedef enum {
    PF_STAGEDEG_DEGREES_DIVIDE_MB, /* d | MB, sum of d <= MB ([Piper]) */
    PF_STAGEDEG_DEGREES_ANY,       /* 1..D */
    PF_STAGEDEG_DEGREES_POW2       /* 1, 2, 4, ... <= D */
} pf_stagedeg_degrees_t;

/* One op's costs in one recomputation mode, per micro-batch of one replica. */
typedef struct {
    double cu_ms;       /* fwd + bwd (+ the recomputed forward) */
    double act_bytes;   /* stored for backward per micro-batch in flight */
    double fixed_bytes; /* held once, whatever d and the micro-batches in flight */
} pf_stagedeg_opcost_t;

typedef struct {
    int devices;                   /* D >= 1 */
    int exact_devices;             /* 1: sum of d_s = D; 0: <= D (default, as [Piper]) */
    pf_stagedeg_degrees_t degrees; /* default DIVIDE_MB */
    int only_degree;               /* > 0: every d_s is this one (the constant-R problem) */
    double edge_factor;            /* ef above; default 1 */
    double allreduce_factor;       /* ar above; default 2 */
    int allreduce_per_microbatch;  /* 1: the all-reduce per micro-batch, over d ([PipeDream]);
                                    * 0 (default): once per MB micro-batches. pf_stagedeg_run and
                                    * _eval only (stagedeg_tp.h refuses it) */
    double state_factor;           /* > 0: sf(d) for every d; 0 (default): training's; < 0: the
                                    * parameters hold nothing (their state is in the ops'
                                    * fixed_bytes, as [Piper]'s memoryUsageB carries it) */
    /* Per op, by mode; none NULL = the graph's (c_u, mem_fwd_bytes, 0). full NULL = no
     * recomputation is searched. Borrowed. */
    const pf_stagedeg_opcost_t *none, *full;
    /* 1: a third choice per stage, "ops": recompute some of its ops, chosen by [Piper]'s knapsack
     * heuristic (below); needs full. 0 (default): none or full per stage. */
    int recompute_ops;
    /* 1: planfarm's pipeline, as its simulator runs it: a tensor crossing several stages is
     * relayed through each (Megatron-LM's and PipeDream's pipelines send only to the next
     * stage), so stage H receives every byte crossing the cut before it, out(F_i), and sends
     * every byte crossing the cut after it, out(F_j): cut(H) = out(F_i) + out(F_j) (edge_factor
     * 2 then counts the gradients back), and it stores its input out(F_i) for each micro-batch
     * in flight (eq. 14, as cost.h): m gains y x out(F_i). 0 (default): [Piper]'s model (each
     * edge between its two stages only, no stash). pf_stagedeg_run and _eval only. */
    int stash_inputs;
    int threads; /* OpenMP threads; 0 = OpenMP's default */
} pf_stagedeg_opts_t;

typedef struct {
    double objective_ms; /* max over stages of t(H, d, r); INFINITY when nothing fits */
    int stages;          /* 0 when nothing fits */
    int nops;
    int *op_stage;       /* nops entries */
    int *degree;         /* d_s */
    int *tensor;         /* t_s: devices per replica (1 here; stagedeg_tp.h sets others) */
    int *op_tmpc;        /* nops entries: -1 here; stagedeg_tp.h's configuration per op */
    int *recompute;      /* r_s: 0 none, 1 full, 2 some ops (op_recompute says which) */
    int *op_recompute;   /* nops entries: 1 where the op is recomputed */
    double *time_ms;     /* t(H_s, d_s, r_s) */
    double *mem_bytes;   /* m of stage s on each of its devices */
} pf_stagedeg_result_t;

void pf_stagedeg_opts_init(pf_stagedeg_opts_t *o);

/* The DP over ds (pf_downsets_enumerate(g) or pf_downsets_topo_prefixes(g)) with cm's B_flat,
 * MB, training (state factor, schedule), reserve and memory limit (cm->stages is not used).
 * PF_OK and *out (objective INFINITY and 0 stages when nothing fits), or PF_EINPUT / PF_ERR. */
int pf_stagedeg_run(const pf_graph_t *g, const pf_downsets_t *ds, const pf_cost_model_t *cm,
                    const pf_stagedeg_opts_t *o, pf_stagedeg_result_t **out, char *err,
                    size_t errlen);
void pf_stagedeg_result_destroy(pf_stagedeg_result_t **r);
/* An empty result for nops ops and S stages (objective INFINITY, every t_s 1, op_tmpc -1); NULL
 * when out of memory. */
pf_stagedeg_result_t *pf_stagedeg_result_new(int nops, int S);

/* Price a given assignment (stages in pipeline order): fills time_ms and mem_bytes of r from
 * op_stage, degree and op_recompute (recompute is not read) and sets objective_ms (INFINITY
 * when a stage does not fit). */
int pf_stagedeg_eval(const pf_graph_t *g, const pf_cost_model_t *cm, const pf_stagedeg_opts_t *o,
                     pf_stagedeg_result_t *r, char *err, size_t errlen);

#endif
