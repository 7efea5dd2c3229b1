/* testseam: what a benchmark or a test may do inside a running broker actor that no peer can:
 * its own commands on the actor's pipe, and empty jobs (NOOP) that belong to no request, whose
 * round trips through the real loop and a real worker measure the dispatch rate
 * (bench/bench_broker.c, tests/test_broker.c). The product never fills
 * pf_broker_opts_t.testseam; then nothing here runs. Calls broker/dispatch.h only. */
#ifndef PF_BROKER_TESTSEAM_H
#define PF_BROKER_TESTSEAM_H

#include "broker/broker_opts.h"

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

struct pf_testseam {
    void *ctx;
    /* A command on the actor's pipe the broker does not know itself (it knows "$TERM" and
     * "STATS"); msg holds its arguments. Runs on the broker's thread: it may call
     * pf_testseam_noop and reply on pipe. */
    void (*command)(void *ctx, pf_broker_t *b, zsock_t *pipe, const char *cmd, zmsg_t *msg);
    /* A job queued with pf_testseam_noop left the broker: answered, or poisoned (!answered). */
    void (*noop_done)(void *ctx, uint64_t job_id, bool answered);
};

/* Queue one empty job, owned by no request, straight into the dispatch core. job_id: unique,
 * > 0, and not of the form a request's jobs take (those have a random high half); small
 * counters do. PF_OK, or PF_ERR (duplicate id, out of memory). */
int pf_testseam_noop(pf_broker_t *b, uint64_t job_id);

/* A ready seam for dispatch benchmarks and tests: the pipe command "NOOP" <n> queues n empty
 * jobs; when all are answered the actor sends "DONE" <seconds since that command>. Set
 * opts.testseam = &noops.seam after pf_testseam_noops_init(&noops); it must outlive the actor. */
typedef struct {
    pf_testseam_t seam;
    zsock_t *pipe;
    uint64_t next_id;
    long long left;
    double t0;
} pf_testseam_noops_t;

void pf_testseam_noops_init(pf_testseam_noops_t *n);

/* The broker's side (broker.c, worker_proto.c): hand a pipe command to the seam (false: there is
 * none), and tell it a job without a request has left. */
bool pf_testseam_command(pf_broker_t *b, zsock_t *pipe, const char *cmd, zmsg_t *msg);
void pf_testseam_noop_done(pf_broker_t *b, uint64_t job_id, bool answered);

#endif
