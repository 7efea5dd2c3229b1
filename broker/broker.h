/* broker: the ZeroMQ front of the search (DESIGN.md "The wire"; zguide ch. 4, Majordomo with our
 * own message kinds). One ROUTER socket serves workers and clients; a peer is a worker once it
 * sends READY and a client once it sends a client message.
 *
 * One thread does everything but a request's setup: it receives a batch of messages, lets the
 * dispatch core (broker/dispatch.h) and the requests' search state machines (planner/search/search.h:
 * pure logic, never a solver) react, then hands queued jobs to workers with free credits, the
 * clients taking turns (broker/fair.h). Decoding a submitted graph and building its search
 * (phase 0 coarsening) run on a helper thread (broker/prep.h); requests, job answers and plans go
 * to a journal (broker/journal.h) from which a restarted broker goes on. Once per
 * `heartbeat_ms` of its clock (options; the monotonic clock unless a test moves time by hand) it
 * sends heartbeats, re-sends jobs past their deadline, and declares dead the workers it has not
 * heard from through `liveness` of these intervals (their jobs go back to the queue). Liveness
 * counts the loop's own intervals, not seconds: a broker that was busy or not scheduled does not
 * blame its workers for the time it lost.
 *
 * Files: broker/README.md lists them in the order a request passes through them, with who calls
 * whom; broker_int.h is the data they share.
 *
 * Network input is never trusted: a message with the wrong frame count, a bad header, an
 * undecodable or invalid body, or a kind its sender may not send is counted, logged once per
 * peer and dropped. */
#ifndef PF_BROKER_H
#define PF_BROKER_H

#include "broker/auth.h"
#include "planner/search/job.h"
#include "proto/clock.h"

#include <czmq.h>
#include <stddef.h>
#include <stdint.h>

#define PF_BROKER_DEFAULT_ENDPOINT "tcp://127.0.0.1:5710"

typedef struct pf_broker pf_broker_t;
typedef struct pf_testseam pf_testseam_t; /* broker/testseam.h */

typedef struct {
    const char *endpoint;   /* bind address; default PF_BROKER_DEFAULT_ENDPOINT */
    int heartbeat_ms;       /* default 1000 */
    int liveness;           /* heartbeat intervals of the broker's loop a worker may stay silent
                             * through before it is dead; default 5 */
    int max_attempts;       /* workers a job may outlive before it is poisoned; default 3 */
    int64_t max_msg_bytes;  /* ZMQ_MAXMSGSIZE: larger frames drop the connection; 256 MiB */
    pf_job_limits_t limits; /* deadlines of one attempt of a job (planner/search/job.h) */
    int max_finished;       /* finished requests kept for STATUS / RESULT; default 1000 */
    int max_running;        /* unfinished requests at once; a SUBMIT past it is refused (each
                             * holds its graph, cluster, blobs and search); default 64 */
    int max_credits;        /* jobs one worker may hold; a READY asking for more is clamped
                             * (and logged); default 64 */
    pf_auth_opts_t auth;    /* CurveZMQ and allow-lists (broker/auth.h); zeroed: plain, and
                             * then only on a local endpoint unless auth.insecure */
    int verbose;            /* also log job failures and failed sends */
    int quiet;              /* no routine log lines (embedded mode); warnings still show */
    pf_clock_t clock;       /* heartbeats, liveness, deadlines; default (zeroed) monotonic */
    const char *http_addr;  /* HOST:PORT of /metrics and the status page (broker/http.h);
                             * NULL: none */
    const char *journal_path; /* SQLite journal (broker/journal.h); NULL: requests live in memory
                               * only. Unfinished requests in it are restored by pf_broker_new */
    int prep_delay_ms;      /* test hook: the helper thread sleeps this long before each setup */
    int client_max_requests; /* unfinished requests one client may have; 0 = only max_running */
    int client_max_jobs;    /* jobs of one client in the dispatch core at once; 0 = no quota.
                             * Clients take turns for free credits either way (broker/fair.h) */
    const pf_testseam_t *testseam; /* benchmarks and tests only (broker/testseam.h): must
                                    * outlive the broker; NULL in the product */
} pf_broker_opts_t;

void pf_broker_opts_init(pf_broker_opts_t *o);

/* Binds the ROUTER socket; NULL and a message on failure. */
pf_broker_t *pf_broker_new(const pf_broker_opts_t *o, char *err, size_t errlen);
/* Expire the journal's finished requests submitted more than expire_days ago (at start), and
 * with compact also VACUUM it (planfarm broker --compact). *removed counts the expired ones. */
int pf_broker_journal_compact_or_expire(const char *path, double expire_days, int compact,
                                        long long *removed, char *err, size_t errlen);
/* Sends BYE to every worker, then closes. */
void pf_broker_destroy(pf_broker_t **b);
/* The bound endpoint (a tcp port of 0 or * is resolved). */
const char *pf_broker_endpoint(const pf_broker_t *b);

/* Serves until SIGINT or SIGTERM. PF_OK, or PF_ERR when it cannot poll its socket. */
int pf_broker_run(pf_broker_t *b);

typedef struct {
    double wall_s, busy_s; /* monotonic seconds since pf_broker_new, and those spent handling
                            * messages and timers (not the options' clock: a measurement) */
    long long msgs_in, msgs_out, malformed;
    long long dispatched, answered, requeued, poisoned;
    long long foreign_answers; /* RESULTs and FAILEDs for jobs the sender did not hold: dropped */
    int workers;
    long long requests;
    double max_stall_s;  /* longest turn of the loop (monotonic): how long STATUS could wait */
    double prep_max_s;   /* longest request setup on the helper thread */
    int preparing;       /* requests whose setup is queued or running */
    long long restored, replayed_answers, journal_errors;
} pf_broker_stats_t;

void pf_broker_get_stats(const pf_broker_t *b, pf_broker_stats_t *st);

/* The broker as a CZMQ actor (embedded mode, tests, benchmarks); args: a pf_broker_opts_t that
 * must live until the actor has started. After zactor_new, the actor sends "OK" <endpoint> or
 * "ERROR" <message>. Commands on the pipe (others go to the options' testseam, if any):
 *   "STATS"      replies "STATS" <wall_s> <busy_s> <msgs_in> <msgs_out> <malformed>
 *                <dispatched> <workers> <max_stall_s> <preparing>
 *   "$TERM"      stop (BYE to workers). */
void pf_broker_actor(zsock_t *pipe, void *args);

#endif
