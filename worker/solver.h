/* solver: the worker's solver thread. It runs one job at a time through pf_job_run, the one door
 * into the solvers, so that a long OpenMP solve never stops the socket thread's heartbeats. It
 * holds no ZeroMQ socket: jobs and answers pass through a mutex-guarded mailbox, and a pipe
 * (pf_solver_wake_fd) wakes the socket thread when an answer is ready, so a solve that never
 * returns cannot block the ZeroMQ context at shutdown. */
#ifndef PF_SOLVER_H
#define PF_SOLVER_H

#include "proto/job_codec.h"
#include "worker/cache.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { PF_WJOB_WAITING, PF_WJOB_QUEUED, PF_WJOB_RUNNING, PF_WJOB_FINISHED } pf_wjob_state_t;

/* A job a worker holds, from its JOB message to its answer. The socket thread owns it; the solver
 * thread reads its inputs and writes its answer between QUEUED and FINISHED. */
typedef struct pf_wjob {
    uint64_t id;
    pf_wire_job_t wire;
    pf_cache_entry_t *graph, *cluster; /* pinned once found */
    atomic_int cancel;
    _Atomic int state; /* pf_wjob_state_t; QUEUED -> RUNNING -> FINISHED under the mailbox lock */
    int failed;        /* answer FAILED (error) instead of RESULT */
    int parked;        /* finished while disconnected: sent on the next connection */
    int conn;          /* the connection it came on (pf_worker.conn then) */
    double seconds;    /* solver wall time */
    char error[256];
    uint8_t *result; /* the packed JobResult when !failed */
    size_t result_len;
    struct pf_wjob *next; /* mailbox link */
} pf_wjob_t;

typedef struct {
    int threads;        /* OpenMP threads per job */
    int test_hang_kind; /* tests: the first job of this kind hangs until cancelled; -1 none */
    int test_delay_ms;  /* tests: every job sleeps this long first (cancel ends the sleep) */
} pf_solver_opts_t;

typedef struct pf_solver pf_solver_t;

/* Starts the thread; NULL and why on failure. */
pf_solver_t *pf_solver_new(const pf_solver_opts_t *o, char *err, size_t errlen);
/* Asks the thread to stop, cancels its running job and waits up to grace_s for it. Returns 1
 * when the thread is gone (*s freed and NULL), 0 when a job ignored its cancel flag: the thread,
 * its job and *s are left to the process exit. */
int pf_solver_stop(pf_solver_t **s, double grace_s);

/* Readable when answers wait in the outbox (poll it beside the sockets). */
int pf_solver_wake_fd(const pf_solver_t *s);
/* j goes to the inbox (state QUEUED). */
void pf_solver_queue(pf_solver_t *s, pf_wjob_t *j);
/* Takes a queued job back before it runs: 1 when it was still in the inbox. */
int pf_solver_unqueue(pf_solver_t *s, pf_wjob_t *j);
/* The finished jobs, oldest first, linked through ->next; the outbox is emptied. */
pf_wjob_t *pf_solver_take_answers(pf_solver_t *s);

#endif
