/* reshard_sched: host-level load balance and scheduling of the unit communication tasks of one
 * cross-mesh resharding task (Zhuang et al., "On Optimizing the Communication of Model
 * Parallelism", Sec. 3.2, eq. 1-4).
 *
 * The problem (eq. 1-3): every unit task has a set of receiver hosts and a set of candidate sender
 * hosts (those holding a replica of its slice, eq. 2); its duration depends on the sender chosen.
 * A task occupies its sender host and all its receiver hosts for its whole duration, and two tasks
 * sharing a host never overlap (eq. 3); minimise the completion time of the last task (eq. 1).
 * As in the seed, a schedule is a sender per task plus an order: each task starts as soon as every
 * host it involves has finished the tasks placed before it (pf_reshard_sched_eval).
 *
 * This module knows hosts and durations only; planner/reshard builds the instance from tensors. */
#ifndef PF_RESHARD_SCHED_H
#define PF_RESHARD_SCHED_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    PF_RESHARD_SCHED_NAIVE = 0, /* candidate 0 sends every task, tasks in index order (§3.2 "Naive") */
    PF_RESHARD_SCHED_LPT,       /* eq. 4 by longest-processing-time-first ("Load balance only") */
    PF_RESHARD_SCHED_DFS,       /* DFS over (next task, sender) with pruning, under caps ("DFS") */
    PF_RESHARD_SCHED_GREEDY,    /* "Greedy Search with Randomization" */
    PF_RESHARD_SCHED_BEST,      /* all of the above, the shortest schedule wins (§5.3.1 "ours") */
    PF_RESHARD_SCHED_NALGOS
} pf_reshard_sched_algo_t;

typedef struct pf_reshard_sched pf_reshard_sched_t;

typedef struct {
    double dfs_budget_s;  /* wall-clock cap on the DFS; 0 = none (tests use the node cap) */
    int64_t dfs_node_cap; /* search-tree nodes the DFS may place; 0 = none */
    int greedy_restarts;  /* independent runs of the randomized greedy, each its own RNG stream */
    int greedy_trials;    /* random task orders tried per greedy iteration */
    uint64_t seed;
} pf_reshard_sched_opts_t;

typedef struct {
    int ntasks;
    int *order;         /* task indices in execution order */
    int *cand;          /* by task: the index of the chosen candidate sender (add_task order) */
    double *start_ms;   /* by task */
    double makespan_ms; /* eq. 1 */
    pf_reshard_sched_algo_t algo;             /* the one that produced this schedule */
    double algo_ms[PF_RESHARD_SCHED_NALGOS];  /* makespan of each algorithm run; NAN where not run */
    int64_t dfs_nodes;                 /* nodes the DFS placed */
    int dfs_complete;                  /* 1: the DFS exhausted its tree (optimal schedule) */
} pf_reshard_sched_result_t;

void pf_reshard_sched_opts_default(pf_reshard_sched_opts_t *o);
const char *pf_reshard_sched_algo_name(pf_reshard_sched_algo_t a);
/* "naive", "lpt", "dfs", "greedy", "best" -> PF_OK, or PF_EINPUT naming the word. */
int pf_reshard_sched_algo_parse(const char *name, pf_reshard_sched_algo_t *out, char *err, size_t errlen);

pf_reshard_sched_t *pf_reshard_sched_new(int nhosts, char *err, size_t errlen);
void pf_reshard_sched_destroy(pf_reshard_sched_t **s);

/* Add one unit task: the hosts receiving it (distinct, in [0, nhosts)), and its candidate sender
 * hosts (distinct) with the task's duration from each (finite, >= 0). Candidate 0 is the naive
 * algorithm's sender. Returns the task's index (>= 0) or PF_EINPUT / PF_ERR. */
int pf_reshard_sched_add_task(pf_reshard_sched_t *s, int nrecv, const int *recv_hosts, int ncand,
                       const int *cand_hosts, const double *cand_ms, char *err, size_t errlen);
int pf_reshard_sched_ntasks(const pf_reshard_sched_t *s);

/* Start times of a schedule (order: a permutation of the tasks; cand: a candidate per task) and
 * its makespan (eq. 1). start_ms may be NULL. No validation: callers pass a permutation. */
double pf_reshard_sched_eval(const pf_reshard_sched_t *s, const int *order, const int *cand, double *start_ms);

/* Schedule by one algorithm (or all, PF_RESHARD_SCHED_BEST). out is filled and owns its arrays. */
int pf_reshard_sched_solve(const pf_reshard_sched_t *s, pf_reshard_sched_algo_t algo, const pf_reshard_sched_opts_t *o,
                    pf_reshard_sched_result_t *out, char *err, size_t errlen);
void pf_reshard_sched_result_free(pf_reshard_sched_result_t *r); /* idempotent; leaves r zeroed */

#endif
