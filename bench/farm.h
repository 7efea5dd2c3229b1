/* farm: what the benchmarks share to run searches.
 *
 * 1. An in-process driver of one search (planner/search/search.h) that runs every job itself, one at a
 *    time, and books each job's wall and CPU time by kind, and the state machine's own work
 *    (pf_search_next_job + pf_search_answer: merging TAP slices, building the settings of each T,
 *    coarsening) apart. With nworkers > 1 it also replays the search on that many virtual workers:
 *    a job occupies a worker for the CPU time it really took (with one thread per job, its run time
 *    on an idle core whatever the machine's load), answers are fed back in the order the
 *    virtual workers finish, so the makespan is what N ideal workers (no wire, no idle gap) would
 *    take given the search's own dependencies - the ceiling of any farm's speed-up.
 * 2. The embedded broker and workers as CZMQ actors (inproc or TCP), and a search through them by
 *    the client API, as `planfarm plan --workers N` runs it.
 * 3. A broker and workers as separate `planfarm` processes on loopback, the broker's /metrics
 *    read over HTTP. */
#ifndef PF_BENCH_FARM_H
#define PF_BENCH_FARM_H

#include "broker/broker.h"
#include "planner/inputs/model.h"
#include "planner/ir/devmodel.h"
#include "planner/inputs/topology.h"
#include "planner/search/job.h"
#include "planner/search/search.h"

#include <czmq.h>
#include <jansson.h>
#include <sys/types.h>

typedef struct {
    long long jobs;
    double wall_s, cpu_s; /* summed over the jobs (cpu: the process, every OpenMP thread) */
    double max_s;         /* longest single job, wall */
} pf_bench_acc_t;

typedef struct {
    pf_bench_acc_t kind[PF_JOB_KIND_COUNT];
    pf_bench_acc_t search; /* the state machine's own calls */
    double wall_s, cpu_s;  /* the whole drive */
    double makespan_s;     /* virtual CPU seconds on nworkers workers (1: the CPU sum) */
    int nworkers;
    int status;            /* pf_search_result's */
    char err[512];
    pf_plan_t *plan;       /* owned; pf_bench_drive_free */
} pf_bench_drive_t;

/* threads: OpenMP threads per job (0 = default). Returns out->status. */
int pf_bench_drive(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                   int threads, int nworkers, pf_bench_drive_t *out);
void pf_bench_drive_free(pf_bench_drive_t *d);
double pf_bench_cpu_s(void); /* process CPU seconds */

/* ---- published tables ---- */

/* The model of mo, its ops priced on the device model preset `device` at precision prec (device
 * NULL: as generated), and the cluster of to. 0, or -1 with the reason on stderr after "bench
 * <what>: " and nothing left allocated. */
int pf_bench_build(const char *what, const pf_model_opts_t *mo, const char *device,
                   pf_prec_t prec, const pf_topology_opts_t *to, pf_graph_t **g,
                   pf_cluster_t **c);

/* $PF_SHARED/<rel> (PF_SHARED defaults to ../shared) parsed; NULL, with a "SKIP:" line on stdout,
 * when absent or unreadable: the benchmarks against published figures skip rather than fail. */
json_t *pf_bench_shared_json(const char *rel);

/* One in-process search (one worker, default threads): the plan's simulated step in *step_ms
 * (0 when no plan) and the search's wall time in *wall_s; shape gets the plan's shape
 * ("t8 p16 d8 v1 sp selective z1", then the block-level search's analytic step beside the
 * simulated one where it planned) or "no plan (<reason>)". Returns 0 when a plan came back
 * with a positive simulated step, else -1. */
int pf_bench_plan_step(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                       double *step_ms, double *wall_s, char *shape, size_t len);

/* ---- actors ---- */

zactor_t *pf_bench_broker_start(const char *bind, char *ep, size_t len);
/* The same with a test seam (broker/testseam.h), which must outlive the actor. */
zactor_t *pf_bench_broker_start_seam(const char *bind, const pf_testseam_t *seam, char *ep,
                                     size_t len);
zactor_t *pf_bench_worker_start(const char *ep, int credits, int threads, const char *name);
/* "STATS" of the broker actor: wall and busy seconds, jobs dispatched. */
void pf_bench_broker_stats(zactor_t *b, double *wall_s, double *busy_s, long long *dispatched);

typedef struct {
    int ok;
    double wall_s, objective_ms;
    long long jobs;
    char err[512];
} pf_bench_run_t;

/* One search through the broker at `ep` with the client API, polled every 10 ms. */
pf_bench_run_t pf_bench_client_search(const char *ep, const pf_graph_t *g, const pf_cluster_t *c,
                                      const pf_search_opts_t *o);

/* ---- processes ---- */

typedef struct {
    pid_t broker;
    pid_t workers[16];
    int nworkers;
    char endpoint[64];
    int http_port;
} pf_bench_farm_t;

/* Starts `planfarm broker` (binary: $PF_BIN, else ./planfarm) on free loopback ports with --http,
 * and nworkers `planfarm worker --threads threads --credits credits`; waits until /metrics
 * shows them all. 0 on success. */
int pf_bench_farm_start(pf_bench_farm_t *f, int nworkers, int threads, int credits);
/* SIGTERM to each process started, then waits for it. */
void pf_bench_farm_stop(pf_bench_farm_t *f);
/* The value of one metric line ("planfarm_jobs_dispatched_total",
 * "planfarm_job_latency_seconds_sum{kind=\"dp_partition\"}"); NAN when absent. */
double pf_bench_farm_metric(const pf_bench_farm_t *f, const char *series);

#endif
