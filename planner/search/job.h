/* jobs: the one door into the solvers, and the one place in the planner that knows the job kinds.
 *
 * Every job kind is a pure function of its inputs: pf_job_run(job) -> result. Each kind has one
 * descriptor in the table of job.c: its name, the inputs a worker must resolve before it runs
 * it, the deadline of one attempt, its run function and the check of an answer against its job.
 * The broker, the worker and the search look a kind up there. The planner knows no protobuf, so
 * a kind's wire messages are encoded in proto/ (its job codec), keyed by the same enum. Adding a
 * kind: one descriptor here, its row (describe / absorb) in its phase's pf_search_<phase>_kinds
 * (search_<phase>.c), one .proto message and its codec (docs/DESIGN.md "Adding a job kind"). */
#ifndef PF_JOB_H
#define PF_JOB_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/map/mapping.h"
#include "planner/partition/partition.h"
#include "planner/ir/plan.h"
#include "planner/sim/reshard.h"
#include "planner/tp/tap.h"
#include "planner/tp/tp_setting.h"

#include <stdatomic.h>
#include <stdint.h>

typedef enum {
    PF_JOB_NOOP = 0,         /* does nothing: dispatch benchmarks, liveness checks */
    PF_JOB_DP_PARTITION = 1, /* one (S, R, alpha): DP over downsets + refinement */
    PF_JOB_MAP_PROBE = 2,    /* one target of one candidate's binary search (Alg. 2) */
    PF_JOB_TAP_ENUM = 3,     /* one slice of one TAP unit's 3^N plans for one degree T */
    PF_JOB_SIMULATE = 4,     /* one mapped candidate under one schedule (simulate.h) */
    PF_JOB_RESHARD = 5,      /* one cross-mesh resharding problem (reshard.h, [CrossMesh]) */
    PF_JOB_KIND_COUNT
} pf_job_kind_t;

/* Inputs are borrowed: the caller keeps them alive while the job runs. */
typedef struct {
    pf_job_kind_t kind;
    const pf_graph_t *graph;     /* DP_PARTITION */
    const pf_cluster_t *cluster; /* DP_PARTITION, MAP_PROBE */
    pf_partition_opts_t partition; /* DP_PARTITION; .group / .ngroups borrowed */
    const pf_stage_graph_t *stage_graph; /* MAP_PROBE */
    pf_map_inst_t inst;              /* MAP_PROBE */
    double target_ms;            /* MAP_PROBE */
    double budget_s;             /* MAP_PROBE: seconds before "timed out"; <= 0 = none */
    int symmetry;                /* MAP_PROBE */
    /* Tensor parallelism and training (DP_PARTITION, MAP_PROBE, TAP_ENUM): graph and cluster are
     * the request's own; a job plans on the setting they make (tp_setting.h). tp 1 and the
     * default training: the graph and cluster as they are. .tap_plans is borrowed. */
    pf_tp_setting_opts_t setting;
    int tap_unit;                /* TAP_ENUM: the unit, and plans [tap_lo, tap_hi) of it */
    uint64_t tap_lo, tap_hi;
    /* SIMULATE: a candidate's mapped plan (R x T devices per stage; its training is the
     * setting's) under `schedule`; xfer_ms: (S - 1) x R resharding times of its cross-stage
     * transfers when T > 1 (NULL: timed inside the job). All borrowed. A plan whose stages
     * differ (d_s x t_s devices) runs in simstages.h, which prices its own settings: tp and
     * xfer_ms are not read, and fits compares each device's simulated peak with its memory. */
    const pf_plan_t *plan;
    pf_training_schedule_t schedule;
    const double *xfer_ms;
    int nxfer;
    /* RESHARD: the problem (its arrays borrowed) and the options; the network is the cluster's */
    pf_reshard_problem_t reshard;
    pf_reshard_opts_t reshard_opts;
    int threads;                 /* OpenMP threads; 0 = default */
    const atomic_int *cancel;    /* optional: set non-zero to stop the job early */
} pf_job_t;

typedef struct {
    pf_job_kind_t kind;
    int status;       /* PF_OK, or the solver's code (PF_EINFEASIBLE, PF_EINPUT, PF_ERR) */
    char error[256];  /* the solver's message when status != PF_OK */
    pf_plan_t *plan;  /* DP_PARTITION: the partition (owned) */
    pf_probe_result_t probe; /* MAP_PROBE */
    int *devices;     /* MAP_PROBE when found: S x R devices (owned) */
    int ndevices;
    pf_tap_slice_t tap; /* TAP_ENUM */
    struct pf_sim_answer { /* SIMULATE */
        double step_ms, bubble_fraction;
        double peak_mem_bytes;  /* the simulator's, the most of any device */
        double mem_bytes;       /* the cost model's under the schedule, the most of any stage */
        double mem_limit_bytes; /* the least device memory of that stage */
        int fits;               /* every stage's mem_bytes within its devices' memory */
    } sim;
    struct pf_reshard_answer { /* RESHARD */
        double time_ms;   /* eq. 1 of the winning schedule */
        int algo;         /* pf_reshard_sched_algo_t */
        int ntasks;       /* unit communication tasks */
        double algo_ms[PF_RESHARD_SCHED_NALGOS]; /* each algorithm's makespan; NAN where not run */
    } reshard;
    double seconds;   /* solver wall time */
} pf_job_result_t;

/* Limits an operator sets on one attempt of a job (broker options); each kind derives its
 * deadline from them. */
typedef struct {
    double solve_s;  /* a solver job without a budget of its own; default 1800 */
    double margin_s; /* added to a job's own budget (a probe's); default 30 */
    double noop_s;   /* default 30 */
} pf_job_limits_t;

void pf_job_limits_init(pf_job_limits_t *l);

/* Blobs a worker resolves before it runs a job of the kind. */
enum { PF_JOB_NEEDS_GRAPH = 1u << 0, PF_JOB_NEEDS_CLUSTER = 1u << 1 };

typedef struct {
    pf_job_kind_t kind;
    const char *name; /* "dp_partition": logs, options that name a kind, the wire's kind list */
    unsigned needs;   /* PF_JOB_NEEDS_* */
    int (*run)(const pf_job_t *job, pf_job_result_t *res);
    /* Seconds one attempt may take before the job is sent again. */
    double (*timeout_s)(const pf_job_t *job, const pf_job_limits_t *lim);
    /* Is res a well-formed answer to job, by the job's own inputs? Solver verdicts (status !=
     * PF_OK) pass: what they mean is the search's business. PF_EINPUT and why otherwise. */
    int (*check)(const pf_job_t *job, const pf_job_result_t *res, char *err, size_t errlen);
} pf_job_kind_desc_t;

/* The kind's descriptor; NULL when k is not a kind. */
const pf_job_kind_desc_t *pf_job_kind_desc(pf_job_kind_t k);
/* The descriptor's name, "unknown" for anything else. */
const char *pf_job_kind_name(pf_job_kind_t k);
/* The kind named `name`, or -1. */
int pf_job_kind_by_name(const char *name);
double pf_job_timeout_s(const pf_job_t *job, const pf_job_limits_t *lim);
/* The kind's check, after res->kind == job->kind; PF_EINPUT for an unknown kind. */
int pf_job_check_answer(const pf_job_t *job, const pf_job_result_t *res, char *err,
                        size_t errlen);

/* A job of the kind with every parameter at its default (tp 1, default training). */
void pf_job_init(pf_job_t *job, pf_job_kind_t kind);

/* Runs the job; res is overwritten (call pf_job_result_clear before reusing one). Returns
 * res->status; infeasible partitions and not-found probes are answers, not failures. A probe
 * whose cancel flag stopped it before it found a mapping returns PF_ERR ("cancelled"): it proved
 * nothing about its target; so does a SIMULATE job whose flag was set (the simulator looks at it
 * between the parts of building its task graph). */
int pf_job_run(const pf_job_t *job, pf_job_result_t *res);
/* A SIMULATE job's answer without running it: a lower bound of its step_ms (simbound.h) on the
 * input the job would build (the same setting, plan and chunks); 0 when there is none (another
 * kind, an input the job would refuse, the signal schedule, out of memory). One pass over the
 * compute tasks: the search skips candidates whose bound already loses (search_sim.c). */
double pf_job_simulate_bound_ms(const pf_job_t *job);
void pf_job_result_clear(pf_job_result_t *res);
/* Deep copy (plan and devices). */
int pf_job_result_copy(pf_job_result_t *dst, const pf_job_result_t *src);

#endif
