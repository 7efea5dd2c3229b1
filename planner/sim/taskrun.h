/* taskrun: the task-graph engine of the simulators (simulate.c: one R and one T for every stage;
 * simstages.c: each stage its own). A simulator numbers and builds the tasks of one step (what
 * runs, how long alone, on which stage replica) and their edges; taskrun runs them in time order
 * (DESIGN.md "Simulator"): a compute task on its replica's compute stream, a pipeline transfer
 * after its sender's send queue and its receiver's receive queue are free (a device sends while
 * it receives), a gradient bucket after the data-parallel queues of its whole group are free, a
 * transfer lengthened while the other kind uses the same link of its devices (linkshare.h). Tasks leave the ready heap (readyheap.h) by ready time, then
 * index: the same tasks numbered alike run the same events in the same order, which is why a
 * uniform plan gives bit for bit the same figures through either simulator. */
#ifndef PF_TASKRUN_H
#define PF_TASKRUN_H

#include "planner/sim/simulate_types.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

enum { PF_TASK_FWD, PF_TASK_BWD, PF_TASK_OPT, PF_TASK_XFER_F, PF_TASK_XFER_B, PF_TASK_AR,
       PF_TASK_ABSENT };

/* One task. The simulator fills kind to dur_ms / tp_ms; taskrun counts npred (zero it) and
 * moves ready_ms (zero: ready at the step's start). */
typedef struct {
    unsigned char kind;
    unsigned char tier;   /* PF_TASK_AR: its group's link (linkshare.h) */
    int s, r, k, m;       /* stage, replica (AR: none), rank, micro-batch (AR: bucket, OPT: -1) */
    int pr;               /* XFER_F / XFER_B: the replica of stage s + 1 / s - 1 at the other end */
    int npred;
    double dur_ms, tp_ms; /* tp_ms: the tensor-parallel collective's share of dur_ms (compute) */
    double ready_ms;
} pf_taskrun_task_t;

/* Where the tasks run. Stage s has replicas[s] replicas of tp[s] devices each, replica r's rank k
 * on stage[s].devices[r tp[s] + k]. The result's rows (one per device) are the ranks' devices:
 * stage s < ranks in order, rank-major; stage s >= ranks is a chunk on the devices of stage
 * s mod ranks (interleaving, interleave.h), with the same replicas and tp. */
typedef struct {
    const pf_cluster_t *cluster;
    const pf_simulate_stage_t *stage; /* stages entries: devices, act_bytes, static_bytes */
    const int *replicas, *tp;         /* stages entries each */
    int stages, ranks;
    int timeline;                     /* 1: record the events */
    const atomic_int *cancel;         /* non-zero: stop (PF_ERR); NULL: never */
} pf_taskrun_shape_t;

typedef struct pf_taskrun pf_taskrun_t;

/* An engine for ntasks tasks, all PF_TASK_ABSENT, on shape (read, not copied: it must outlive
 * the engine). NULL when out of memory. */
pf_taskrun_t *pf_taskrun_new(const pf_taskrun_shape_t *shape, size_t ntasks);
void pf_taskrun_destroy(pf_taskrun_t **tr);

/* The ntasks tasks, for the simulator to fill. */
pf_taskrun_task_t *pf_taskrun_tasks(pf_taskrun_t *tr);

/* Calls pf_taskrun_edge for every edge of the graph, the same edges in the same order on each
 * call. */
typedef void (*pf_taskrun_edges_fn)(void *ctx);
/* `to` may start once `from` has run frac of its time (from its start). Only inside `edges`. */
void pf_taskrun_edge(pf_taskrun_t *tr, size_t from, size_t to, double frac);
/* The edges: edges(ctx) called twice (to count, then to fill), once every task is filled in.
 * PF_ERR out of memory or cancelled. */
int pf_taskrun_link(pf_taskrun_t *tr, pf_taskrun_edges_fn edges, void *ctx);

/* Runs the tasks once (after pf_taskrun_link) into a new *out: its rows, step, busy times,
 * peaks (the static bytes of each rank's stages added), bubble and sorted events, stages, the
 * most replicas and tp of a stage; the caller sets schedule, order and microbatches. PF_OK,
 * PF_ERR out of memory or cancelled, 1 when tasks never became ready (a bug in the graph). */
int pf_taskrun_run(pf_taskrun_t *tr, pf_simulate_result_t **out);

/* A failed run (or link) of the tasks under `order` as the simulators report it: cancelled
 * first, then rc > 0 (tasks that never became ready), else out of memory. Always PF_ERR. */
int pf_taskrun_fail(int rc, bool cancelled, pf_training_schedule_t order, char *err,
                    size_t errlen);

/* Frees a result (pf_simulate_result_destroy). */
void pf_taskrun_result_destroy(pf_simulate_result_t **r);

#endif
