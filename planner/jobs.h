/* jobs: the one door into the solvers. Every job kind is a pure function of its inputs:
 * pf_job_run(job) -> result. The worker and the embedded mode's threads call only this, so a new
 * job kind touches the planner and the .proto, nothing else. */
#ifndef PF_JOBS_H
#define PF_JOBS_H

#include "planner/cluster.h"
#include "planner/graph.h"
#include "planner/mapping.h"
#include "planner/partition.h"
#include "planner/plan.h"

#include <stdatomic.h>
#include <stdint.h>

typedef enum {
    PF_JOB_NOOP = 0,         /* does nothing: dispatch benchmarks, liveness checks */
    PF_JOB_DP_PARTITION = 1, /* one (S, R, alpha): DP over downsets + refinement */
    PF_JOB_MAP_PROBE = 2,    /* one target of one candidate's binary search (Alg. 2) */
    PF_JOB_KIND_COUNT
} pf_job_kind_t;

const char *pf_job_kind_name(pf_job_kind_t k);

/* Inputs are borrowed: the caller keeps them alive while the job runs. */
typedef struct {
    pf_job_kind_t kind;
    const pf_graph_t *graph;     /* DP_PARTITION */
    const pf_cluster_t *cluster; /* DP_PARTITION, MAP_PROBE */
    pf_partition_opts_t partition; /* DP_PARTITION; .group / .ngroups borrowed */
    const pf_stage_graph_t *stage_graph; /* MAP_PROBE */
    pf_inst_t inst;              /* MAP_PROBE */
    double target_ms;            /* MAP_PROBE */
    double budget_s;             /* MAP_PROBE: seconds before "timed out"; <= 0 = none */
    int symmetry;                /* MAP_PROBE */
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
    double seconds;   /* solver wall time */
} pf_job_result_t;

/* Runs the job; res is overwritten (call pf_job_result_clear before reusing one). Returns
 * res->status; infeasible partitions and not-found probes are answers, not failures. A probe
 * whose cancel flag stopped it before it found a mapping returns PF_ERR ("cancelled"): it proved
 * nothing about its target. */
int pf_job_run(const pf_job_t *job, pf_job_result_t *res);
void pf_job_result_clear(pf_job_result_t *res);
/* Deep copy (plan and devices). */
int pf_job_result_copy(pf_job_result_t *dst, const pf_job_result_t *src);

#endif
