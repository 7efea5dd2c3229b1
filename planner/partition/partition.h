/* partition: one (S, R) -> one partition, the DP_PARTITION job (Parmesan IV-A, App. B eq. 13).
 *
 *   coarsen (IV-B, eq. 4) -> exact DP over the downsets of the hyper-op graph (eq. 13, constant R,
 *   stage time eq. 3, memory eq. 14) -> refinement on atomic ops (IV-C).
 *
 * Costs are DESIGN.md's "Cost definitions" (planner/ir/cost.h). */
#ifndef PF_PARTITION_H
#define PF_PARTITION_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/ir/cost.h"
#include "planner/partition/downsets.h"
#include "planner/ir/plan.h"

/* Default cap on the downsets of the (coarsened) graph before the DP falls back to the prefixes
 * of one topological order. The DP looks at pairs of downsets (pruned, but quadratic at worst):
 * 20,000 keeps the worst case we measured (a wide random DAG) near a second or two on one core,
 * and lets the exact DP run on Piper's GNMT input (17,914 downsets). */
#define PF_PARTITION_DEFAULT_MAX_DOWNSETS 20000LL

typedef struct {
    int stages;             /* S >= 1 */
    int replicas;           /* R >= 1; 0 = devices / S */
    int microbatches;       /* MB; 0 = PF_DEFAULT_MICROBATCHES */
    double flat_gbps;       /* B_flat; <= 0 = median off-diagonal bandwidth of the cluster */
    int coarsen_k;          /* hyper-ops to keep; 0 = pf_partition_default_k; < 0 = none */
    double alpha;           /* eq. 4 weight of communication; default 1 */
    int refine;             /* IV-C on (default) or off */
    int refine_max_moves;   /* I, default 100 */
    long long max_downsets; /* past this, DP over topological prefixes (exact = 0) */
    int threads;            /* OpenMP threads; 0 = OpenMP's default */
    pf_training_t train;    /* memory: parameter state, micro-batches in flight (training.h) */
    double reserve_bytes;   /* held on every stage: pf_training_view's reserve for this graph */
    double mem_headroom;    /* fraction of device memory kept free (CUDA context, NCCL buffers,
                             * fragmentation); default 0 */
    /* Optional coarsening computed once per (alpha, K) by the search (pf_search_new): group[v] in
     * [0, ngroups). When set, coarsen_k and alpha are not used for coarsening. */
    const int *group;
    int ngroups;
    /* The groups are a constraint, not a coarsening (the search's --layer-aligned: one group per
     * repeated block): every group stays whole in one stage. No retry on single ops when no
     * grouped partition fits, no refinement; PF_EINFEASIBLE then, and when S > ngroups. */
    int group_whole;
    /* 1: every stage its own data-parallel degree (partition_stagedeg.h, issue 24): stages and
     * replicas are chosen by the DP, microbatches is the step's in all; the DP_PARTITION job
     * runs pf_partition_stagedeg_run instead of pf_partition_run. Default 0. */
    int stage_degrees;
    /* With stage_degrees: the tensor-parallel degrees a stage may take, bit t for degree t
     * (t < 64); 0: none, the stages run on the job's own setting (its T). Otherwise the job
     * prices every op at each t (tp_setting.h) and runs stagedeg_tp.h over single devices. */
    unsigned long long stage_tp_mask;
    /* With stage_degrees, M > 1: the chain is planned for one M-th of the devices and of the
     * step's micro-batches, and every stage's degree is multiplied by M ([PipeDream]'s
     * hierarchical optimizer: the pipeline inside a host, replicated across the M hosts; the
     * flat DP cannot see that a host's links are faster). 0 or 1: none. */
    int stage_hosts;
    /* With stage_degrees and no recomputation in train: 1 lets each stage recompute in full
     * (stagedeg.h's r_s); 0 (default) keeps train's for every stage (a request that fixed
     * --recompute). */
    int stage_recompute;
} pf_partition_opts_t;

void pf_partition_opts_init(pf_partition_opts_t *o);
/* PF_OK with *replicas (R: o->replicas or devices / S), or PF_EINPUT naming the option
 * (partition_opts.c, with the defaults above). */
int pf_partition_opts_check(const pf_graph_t *g, const pf_cluster_t *c,
                            const pf_partition_opts_t *o, int *replicas, char *err,
                            size_t errlen);

/* K when the caller gives none: |V| (no coarsening) when the graph has at most max_downsets
 * downsets (0 = the default cap), so the DP is exact on the ops themselves; otherwise
 * pf_coarsen_default_k(stages, |V|). */
int pf_partition_default_k(const pf_graph_t *g, int stages, long long max_downsets);

/* Returns PF_OK and a plan without devices (stage ops, per-stage compute/time/memory,
 * partition_objective_ms, partition_search stats); PF_EINFEASIBLE when no partition fits memory
 * (the message names the op or the stage; with group_whole, "of whole groups"); PF_EINPUT for
 * bad options. */
int pf_partition_run(const pf_graph_t *g, const pf_cluster_t *c, const pf_partition_opts_t *o,
                     pf_plan_t **out, char *err, size_t errlen);

/* The DP of eq. 13 alone, on g as it is (no coarsening, no refinement): ds must be
 * pf_downsets_enumerate(g) (nested = 0) or pf_downsets_topo_prefixes(g) (nested = 1).
 * *objective_ms = min over chains of ds of max t(F_i - F_i-1) with every stage fitting
 * cm->mem_limit_bytes, INFINITY when none fits; then op_stage (g's size) gets the stage of
 * every op of an optimal chain. threads <= 0 = OpenMP's default. */
int pf_partition_dp(const pf_graph_t *g, const pf_downsets_t *ds, int nested,
                    const pf_cost_model_t *cm, int stages, int threads, double *objective_ms,
                    int *op_stage, char *err, size_t errlen);

#endif
