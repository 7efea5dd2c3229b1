/* prep: a request's setup off the broker's loop. Decoding a submitted graph,
 * validating it and pf_search_new (whose phase 0 coarsens the graph once per (alpha, K): minutes
 * for a 30,000-op model) run on one helper thread, so the loop keeps answering STATUS and sending
 * heartbeats meanwhile. A zactor would do, but its pipe has a high-water mark: a broker restarted
 * on 1,000 journaled requests would block handing them over. Here tasks go in through a locked
 * list and come back through another; an inproc PAIR socket, which the loop polls, only says
 * "look" (a notice that finds the socket full is dropped: one pending notice is enough).
 *
 * The loop owns a task until pf_prep_push, the thread until it is taken back with pf_prep_take;
 * nothing in a task is shared while the thread holds it. */
#ifndef PF_PREP_H
#define PF_PREP_H

#include "planner/search/search.h"

#include <czmq.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pf_prep pf_prep_t;

/* What a task is: a request's setup, or the re-run of a worker's answer that could make the
 * plan (pf_search_check_answer_deferred: a leading SIMULATE answer). Re-runs came to this thread
 * in issue 23: two simulations of a 1T GPT on 3,072 GPUs held the loop for seconds, and the
 * broker's own worker looked dead. */
typedef enum { PF_PREP_SETUP, PF_PREP_RERUN } pf_prep_kind_t;

typedef struct pf_prep_task {
    pf_prep_kind_t kind;
    char id[64]; /* the request's id: the loop looks it up again when the task comes back */
    /* in: packed Graph, Cluster and PlanOptions messages (owned, malloc'd) */
    uint8_t *graph, *cluster, *options;
    size_t graph_len, cluster_len, options_len;
    /* out: the decoded inputs and the search on them (the search borrows g and c), or rc and err */
    pf_graph_t *g;
    pf_cluster_t *c;
    pf_search_opts_t opts;
    pf_search_t *search;
    int rc;
    char err[512];
    double prep_s; /* seconds the thread spent on it */
    /* PF_PREP_RERUN: answer `res` of search job sid (dispatch job job_id) from the peer whose
     * key is `peer`, its RESULT message (for the journal), the job to run again (it borrows the
     * request's search, graph and cluster: the request keeps them while a re-run is out,
     * request_t.reruns) and, back from the thread, that run's answer `own` */
    uint64_t sid, job_id;
    char peer[512];
    pf_job_t job;
    pf_job_result_t res, own;
    uint8_t *result;
    size_t result_len;
    struct pf_prep_task *next;
} pf_prep_task_t;

/* A task holding copies of the three inputs; NULL when out of memory. */
pf_prep_task_t *pf_prep_task_new(const char *id, const uint8_t *graph, size_t graph_len,
                                 const uint8_t *cluster, size_t cluster_len,
                                 const uint8_t *options, size_t options_len);
/* A re-run: copies the peer key and the RESULT bytes, takes res over (cleared in the caller's
 * copy); NULL when out of memory (res is then the caller's still). */
pf_prep_task_t *pf_prep_rerun_new(const char *id, uint64_t sid, uint64_t job_id, const char *peer,
                                  const pf_job_t *job, pf_job_result_t *res,
                                  const uint8_t *result, size_t result_len);
void pf_prep_task_free(pf_prep_task_t **t);

/* Starts the thread. delay_ms: a test hook, a sleep before each task, setups and re-runs (0 in
 * production). */
pf_prep_t *pf_prep_new(int delay_ms, char *err, size_t errlen);
/* Stops the thread (after the task it is running) and frees every task it still has. */
void pf_prep_destroy(pf_prep_t **p);
/* Readable when tasks have come back: poll it, then pf_prep_take until NULL. */
zsock_t *pf_prep_sock(pf_prep_t *p);
void pf_prep_push(pf_prep_t *p, pf_prep_task_t *t);
/* A finished task (rc, and g, c, search when PF_OK), or NULL when none is ready. */
pf_prep_task_t *pf_prep_take(pf_prep_t *p);
/* Tasks pushed and not yet taken. */
int pf_prep_pending(pf_prep_t *p);

#endif
