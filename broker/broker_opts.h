/* broker_opts: how a broker is set up (pf_broker_opts_t) and the names of its opaque types. It
 * sits below both the public face (broker/broker.h) and the broker's own files (the state they
 * share, broker/broker_state.h, and the testseam's callbacks, broker/testseam.h), so that none of
 * them has to include the loop's header to know its options. */
#ifndef PF_BROKER_OPTS_H
#define PF_BROKER_OPTS_H

#include "broker/auth.h"
#include "planner/search/job.h"
#include "proto/clock.h"

#include <stdint.h>

#define PF_BROKER_DEFAULT_ENDPOINT "tcp://127.0.0.1:5710"

typedef struct pf_broker pf_broker_t;     /* defined in broker/broker_state.h */
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
    int own_workers_only;   /* every worker is this process's own (planfarm plan's embedded
                             * broker on an inproc:// endpoint): answers are not re-run, the
                             * re-run would be the same code on the same inputs in the same
                             * process (pf_search_check_answer_deferred) */
    int client_max_requests; /* unfinished requests one client may have; 0 = only max_running */
    int client_max_jobs;    /* jobs of one client in the dispatch core at once; 0 = no quota.
                             * Clients take turns for free credits either way (broker/fair.h) */
    const pf_testseam_t *testseam; /* benchmarks and tests only (broker/testseam.h): must
                                    * outlive the broker; NULL in the product */
} pf_broker_opts_t;

#endif
