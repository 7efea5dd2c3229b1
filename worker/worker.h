/* worker: runs jobs for a broker (DESIGN.md "The wire"; zguide ch. 4, Paranoid Pirate worker).
 *
 * Two threads. The socket thread (worker.c) owns a DEALER connected to the broker: it sends READY
 * (cores, protocol, job kinds, credits, name), heartbeats every interval, fetches missing blobs,
 * queues jobs and sends answers. The solver thread (worker/solver.h) runs one job at a time, so a
 * long OpenMP solve never stops the heartbeats.
 *
 * A broker silent through `liveness` heartbeat intervals of the worker's loop (on the options'
 * clock) is presumed dead: the worker drops the jobs it had not started, closes the socket and
 * connects a new one after a back-off that doubles up to reconnect_max_ms (its identity changes,
 * so the broker sees a new worker). A BYE from the broker does the same. */
#ifndef PF_WORKER_H
#define PF_WORKER_H

#include "proto/clock.h"
#include "proto/curve.h"

#include <czmq.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pf_worker pf_worker_t;

typedef struct {
    const char *endpoint;  /* broker; required */
    int credits;           /* jobs held at once (queued + running); default 2 */
    int threads;           /* OpenMP threads per job; 0 = all cores */
    int heartbeat_ms;      /* default 1000 */
    int liveness;          /* default 5 */
    int reconnect_max_ms;  /* back-off cap; default 32000 */
    size_t cache_bytes;    /* decoded blobs kept, by blob bytes; default 1 GiB */
    int64_t max_msg_bytes; /* ZMQ_MAXMSGSIZE; default 256 MiB */
    const char *name;      /* shown in broker logs; default host:pid */
    int verbose;           /* log every job */
    int quiet;             /* no routine log lines (embedded mode); warnings still show */
    pf_clock_t clock;      /* heartbeats, liveness, back-off; default (zeroed) monotonic */
    pf_curve_opts_t curve; /* own cert and the broker's key (proto/curve.h); zeroed: plain,
                            * and then only to a local endpoint unless curve.insecure */
    /* Test hooks (tests and tests/integration only; never set in production):
     * test_hang_kind: a job kind name (planner/search/job.h); the first job of that kind hangs
     * until it is cancelled, to test deadline re-sends. test_delay_ms: every job sleeps that long
     * first, so that a fast search lasts long enough to kill or freeze a worker in the middle of
     * it. */
    const char *test_hang_kind;
    int test_delay_ms;
} pf_worker_opts_t;

void pf_worker_opts_init(pf_worker_opts_t *o);

pf_worker_t *pf_worker_new(const pf_worker_opts_t *o, char *err, size_t errlen);
/* Sends BYE, stops the solver thread (a job still running after a short grace is left to the
 * process exit) and frees the worker. */
void pf_worker_destroy(pf_worker_t **w);

/* Serves until SIGINT or SIGTERM. */
int pf_worker_run(pf_worker_t *w);

typedef struct {
    long long jobs_done, jobs_failed, jobs_cancelled, fetches, reconnects;
    int held;
} pf_worker_stats_t;

void pf_worker_get_stats(const pf_worker_t *w, pf_worker_stats_t *st);

/* The worker as a CZMQ actor (embedded mode, tests, benchmarks); args: a pf_worker_opts_t that
 * must live until the actor has started. After zactor_new the actor sends "OK" or "ERROR"
 * <message>; "$TERM" stops it. Commands on the pipe:
 *   "STATS"  replies "STATS" <connected 0|1> <reconnects> <jobs_done> <jobs_failed>
 *            <jobs_cancelled> <fetches> <held>, as of the end of the loop's previous turn (a
 *            second STATS is answered after the turn that read the first). */
void pf_worker_actor(zsock_t *pipe, void *args);

#endif
