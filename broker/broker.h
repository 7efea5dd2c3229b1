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
 * whom; broker_state.h is the data they share, broker_opts.h the options and broker_stats.h
 * the counters below them.
 *
 * Network input is never trusted: a message with the wrong frame count, a bad header, an
 * undecodable or invalid body, or a kind its sender may not send is counted, logged once per
 * peer and dropped. */
#ifndef PF_BROKER_H
#define PF_BROKER_H

#include "broker/broker_opts.h"
#include "broker/broker_stats.h"

#include <czmq.h>
#include <stddef.h>
#include <stdint.h>

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

void pf_broker_get_stats(const pf_broker_t *b, pf_broker_stats_t *st);

/* The broker as a CZMQ actor (embedded mode, tests, benchmarks); args: a pf_broker_opts_t that
 * must live until the actor has started. After zactor_new, the actor sends "OK" <endpoint> or
 * "ERROR" <message>. Commands on the pipe (others go to the options' testseam, if any):
 *   "STATS"      replies "STATS" <wall_s> <busy_s> <msgs_in> <msgs_out> <malformed>
 *                <dispatched> <workers> <max_stall_s> <preparing> <reruns> <rerun_max_s>
 *                <workers_lost>
 *   "$TERM"      stop (BYE to workers). */
void pf_broker_actor(zsock_t *pipe, void *args);

#endif
