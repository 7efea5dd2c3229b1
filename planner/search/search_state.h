/* search_state: the state of one search, shared by the search's files and private to
 * planner/search/. Each file owns one part of struct pf_search and the jobs of its kinds:
 *
 *   search_queue.c      the jobs, their queue and ids, the search's end (failure)  s->jobs ...
 *   search_tap.c        tensor-parallel degrees and their TAP_ENUM jobs             s->tap
 *   search_partition.c  coarsenings, DP_PARTITION jobs, the ranking of them         s->part
 *   search_map.c        candidates and their binary searches (MAP_PROBE)            s->map
 *   search_sim.c        RESHARD and SIMULATE jobs, the plan                         s->sim
 *   search.c            the public API, the table of phases and the order of the phases
 *
 * A phase reads the parts of the phases before it and writes only its own; it calls only the
 * files listed above it (sim -> map -> partition -> tap -> queue). None starts the next phase:
 * its absorb reports when its part is over, and search.c moves the search on. */
#ifndef PF_SEARCH_STATE_H
#define PF_SEARCH_STATE_H

#include "planner/map/target_search.h"
#include "planner/partition/blockenum.h"
#include "planner/search/search_opts.h"
#include "planner/sim/simulate.h"

#include <stdbool.h>

#define PF_SEARCH_MAX_IN_FLIGHT 64
#define PF_SEARCH_MAX_TP_DEGREES 16

/* ---- search_queue.c: jobs ---- */

enum { J_QUEUED, J_OUT, J_ANSWERED, J_CANCELLED };

/* What a job works for: one meaning per kind, each an index into its phase's records. */
typedef union {
    int dp;    /* DP_PARTITION: the entry of s->part.dp it partitions */
    int slice; /* TAP_ENUM: the slice of s->tap.slice it enumerates */
    struct {
        int task;         /* MAP_PROBE: the binary search of s->map.task it probes for, */
        double target_ms; /* at this target */
    } probe;
    struct {
        int cand;               /* SIMULATE: the candidate of s->map.cand it simulates, */
        pf_training_schedule_t schedule; /* under this schedule; */
        int baseline;           /* 0, or the winner's baseline: 1 CS map, 2 p2p map, 3 and 4
                                 * the per-stage-degree plans (search_stagedeg.h) */
        int variant;            /* the candidate's plan: PF_SEARCH_AS_RANKED or _FLAT */
    } sim;
    int xfer;  /* RESHARD: the transfer of s->sim.xfer it times */
} pf_search_owner_t;

typedef struct {
    pf_job_kind_t kind;
    int state; /* J_* */
    pf_search_owner_t owner;
} job_rec_t;

/* ---- search_tap.c ---- */

/* One tensor-parallel degree: its TAP phase (T > 1), then the setting its DP jobs plan on. */
typedef struct {
    pf_tp_setting_opts_t opts; /* .tap_plans = plans once TAP is over */
    pf_tp_setting_t *set;      /* NULL until then */
    uint64_t *plans;           /* the chosen plan of every TAP unit */
    pf_tap_slice_t *best;      /* per unit, the best of the slices answered so far */
    int tap_left;              /* TAP_ENUM jobs outstanding */
    char why[256];             /* why this T was dropped, if it was */
} tp_entry_t;

/* One TAP_ENUM job: plans [lo, hi) of one unit for one degree. */
typedef struct {
    int tp, unit;
    uint64_t lo, hi;
} tap_slice_t;

typedef struct {
    tp_entry_t *tp;
    int ntp, tp_left;      /* degrees, and those still in TAP */
    pf_tap_units_t *units; /* TAP units of g (when some T > 1) */
    tap_slice_t *slice;
    int nslice;
    size_t slice_cap;
} tap_phase_t;

/* ---- search_partition.c ---- */

/* One coarsening per (T, alpha, K), shared by the DP jobs of every S that uses it. */
typedef struct {
    int tp; /* index into s->tap.tp */
    double alpha;
    int k;
    int *group; /* op -> hyper-op */
    int ngroups;
    double seconds;
} coarse_t;

typedef struct {
    int stages, replicas, microbatches;
    int tp;     /* index into s->tap.tp */
    double alpha;
    int coarse; /* index into s->part.coarse, -1 = the DP runs on atomic ops (or blocks) */
    int status;
    char error[256];
    pf_plan_t *plan;
    double flat_ms_per_sample; /* ranking before mapping */
    int stage_degrees; /* a per-stage-degree entry (search_stagedeg.h): not ranked or mapped
                        * with the others; microbatches is the step's in all */
    int stage_hosts;   /* its partition option (partition.h): > 1 planned per host */
} dp_entry_t;

typedef struct {
    int *block_group; /* layer-aligned: op -> block group */
    int nblock_groups;
    coarse_t *coarse;
    int ncoarse;
    size_t coarse_cap;
    dp_entry_t *dp;
    int ndp, dp_left;
    size_t dp_cap;
    int *chosen; /* the candidates of mapping, entries of dp, best first */
    int nchosen;
    int best_infeasible; /* the entry whose failure is reported when none is feasible; -1 */
} partition_phase_t;

/* ---- search_map.c ---- */

/* One binary search (Algorithm 1) of one candidate under one instantiation. */
typedef struct {
    int cand;
    pf_map_inst_t inst;
    double init_lo, init_hi;
    pf_target_search_t *ts; /* bounds, best mapping, probes in flight */
    int probes;
    long long sym_pruned;
    double seconds;
    bool done;
} map_task_t;

/* A partition carried into mapping, on the group cluster of its T. */
typedef struct {
    int dp; /* index into s->part.dp */
    const pf_cluster_t *cluster;
    pf_stage_graph_t *sg;
    int task[3], ntasks; /* m and/or ar, then full (auto) */
} candidate_t;

typedef struct {
    candidate_t *cand;
    int ncand;
    map_task_t *task;
    int ntask, tasks_left;
} map_phase_t;

/* ---- search_sim.c ---- */

#define PF_SEARCH_STAGEDEG_PLANS 2 /* --stage-degrees' DP jobs: flat, and per host */

typedef struct {
    bool done, fits;
    double step_ms, bubble_fraction;
    uint64_t job;     /* its SIMULATE job, 0 before it is queued */
    bool bounded;     /* bound_ms is known: pf_job_simulate_bound_ms, computed when first needed */
    bool pruned;      /* never simulated: its bound already lost to a simulated step */
    double bound_ms;
} sim_rec_t;

/* A candidate's plans in phase 4: as the block search ranked it, and, when that one is
 * interleaved and --virtual-stages left free, the same stages on the same devices without
 * interleaving. The analytic model prices the interleaved hops hidden behind the chunks'
 * compute; where a hop takes longer than a chunk (a very slow link between hosts) the simulator
 * finds the v x more transfers stall the pipeline (GPT-3 13B on 4 DGX A100 at 0.195 GB/s
 * between hosts: 3784 ms at the ranked v 2 against 3672 at v 1), so both are simulated and the
 * step picks. */
enum { PF_SEARCH_AS_RANKED, PF_SEARCH_FLAT, PF_SEARCH_VARIANTS };

typedef struct {
    pf_plan_t *plan[PF_SEARCH_VARIANTS]; /* mapped, R x T devices: what SIMULATE jobs run;
                                          * plan[PF_SEARCH_FLAT] NULL when there is none */
    double *xfer_ms; /* T > 1, S > 1: (S - 1) x R resharding times (RESHARD jobs), both plans' */
    int xfer_left;
    sim_rec_t sim[PF_SEARCH_VARIANTS][PF_SCHEDULE_COUNT];
} sim_cand_t;

/* One RESHARD job: a candidate's transfer from stage `stage` to the next, replica `replica`.
 * Allocated once for the whole phase: the problem points into itself. */
typedef struct {
    int cand, stage, replica;
    pf_simulate_xfer_problem_t xp;
} xfer_rec_t;

typedef struct {
    unsigned schedules; /* the schedules simulated (mask of 1u << pf_training_schedule_t) */
    sim_cand_t *cand;   /* per candidate of s->map */
    xfer_rec_t *xfer;
    int nxfer, sims_left;
    /* the winner, waiting for its baselines' SIMULATE jobs (none for one on its own devices) and
     * the per-stage-degree plans' (search_sim.c) */
    /* [2], [3]: the per-stage-degree plans (search_stagedeg.h), flat and per host */
    pf_plan_t *pending, *base_plan[2 + PF_SEARCH_STAGEDEG_PLANS];
    double base_ms[2 + PF_SEARCH_STAGEDEG_PLANS];
    bool base_fits[2 + PF_SEARCH_STAGEDEG_PLANS];
    char stagedeg_why[160]; /* why there is no per-stage plan (search_stagedeg.h) */
    bool stagedeg_alone;    /* no uniform plan fits: only the per-stage plans are simulated */
    int base_left, best_c, best_k, best_v;
} sim_phase_t;

/* ---- search_blocks.c: the block-level pre-phase ---- */

/* The analytic ranking's pool: the later phases take --block-candidates distinct (p, t) pairs
 * from it (a pair's other variants, another v or recomputation, would not be tried by them) */
#define PF_SEARCH_BLOCKS_POOL 32
#define PF_SEARCH_BLOCKS_K 8
/* how far ahead (a fraction of its step) a candidate at another micro-batch than the graph's
 * must rank to lead the search (search_blocks.c, graph_microbatch_leads) */
#define PF_SEARCH_BLOCKS_B_MARGIN 0.01
typedef struct {
    int present;
    int layer_aligned_asked; /* the request's own --layer-aligned (the block search sets it) */
    int n; /* candidates ranked, best first */
    pf_blockenum_item_t best[PF_SEARCH_BLOCKS_POOL];
    pf_blockenum_stats_t stats;
    double wall_s;
    /* the candidate (index in best) whose training each tensor-parallel degree handed on takes
     * (search_blocks.c's apply: the best-ranked of that degree) */
    int ntrains;
    int train_of[PF_SEARCH_BLOCKS_K];
    /* the pairs handed on (index in best of each), and for each interleaved one the pool holds
     * no v 1 item of, its best v 1 candidate ranked alone (the record of its flat plan) */
    int npairs, pair_of[PF_SEARCH_BLOCKS_K];
    int nflat;
    pf_blockenum_item_t flat[PF_SEARCH_BLOCKS_K];
} pf_search_blocks_t;

struct pf_search {
    const pf_graph_t *g; /* the request's graph, or owned_g */
    pf_graph_t *owned_g; /* the request's re-priced at the block search's micro-batch (price.h) */
    const pf_cluster_t *c;
    pf_search_opts_t o;
    double flat_gbps;
    int ndev;

    job_rec_t *jobs; /* id = index + 1 */
    long long njobs;
    size_t jobs_cap;
    uint64_t *queue; /* ids waiting to be issued, FIFO */
    long long qhead, qtail;
    size_t qcap;
    uint64_t *cancelled;
    int ncancelled;
    size_t cancelled_cap;
    long long issued, answered, cancelled_total;

    tap_phase_t tap;
    partition_phase_t part;
    map_phase_t map;
    sim_phase_t sim;
    pf_search_blocks_t blocks;

    pf_search_phase_t phase;
    int status;
    char error[512];
    pf_plan_t *result;
};

/* What the search does with the jobs of one kind. Each phase file lists the kinds it issues
 * (pf_search_<phase>_kinds, ended by a row whose describe is NULL), so that adding a kind to a
 * phase touches that file and job.c only; search.c knows the phases, not the kinds. */
typedef struct {
    pf_job_kind_t kind;
    /* fill in the job's own inputs (kind, graph and cluster are set) */
    void (*describe)(const pf_search_t *s, const pf_search_owner_t *owner, pf_job_t *job);
    /* take an answer that passed pf_search_check_answer; true when it ended its phase's part */
    bool (*absorb)(pf_search_t *s, uint64_t id, const pf_search_owner_t *owner,
                   const pf_job_result_t *res);
    /* a solver error fails the search as "<failed> failed: <error>"; NULL: absorb takes every
     * verdict (an infeasible partition is an answer). From a worker, such an error is no answer
     * (pf_search_check_answer): only that attempt failed, and the job is sent elsewhere. */
    const char *failed;
    /* Optional: re-check an answer that passed the kind's check, by the search's own state and
     * in process, before it can change the plan (a SIMULATE answer that would lead is re-run
     * here). NULL: the kind's check is all. PF_OK, or PF_EINPUT and why. */
    int (*verify)(const pf_search_t *s, const pf_search_owner_t *owner, const pf_job_t *job,
                  const pf_job_result_t *res, char *err, size_t errlen);
} pf_search_kind_t;

/* Kinds whose answers are checked by running them again, instead of a verify: an answer for
 * which rerun says true is run again (pf_job_run of its job) and must agree with that run. In
 * two halves so that a driver may run the job off its own thread
 * (pf_search_check_answer_deferred: the broker's loop never simulates). A table of its own
 * (search_sim.c's pf_search_sim_reruns, ended by PF_JOB_KIND_COUNT) rather than two more
 * columns in every phase's table of kinds. */
typedef struct {
    pf_job_kind_t kind;
    bool (*rerun)(const pf_search_t *s, const pf_search_owner_t *owner,
                  const pf_job_result_t *res);
    int (*agree)(const pf_job_result_t *res, const pf_job_result_t *own, char *err,
                 size_t errlen);
} pf_search_rerun_t;

#endif
