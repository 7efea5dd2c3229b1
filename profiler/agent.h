/* agent: `planfarm agent --connect EP`, the profiler on one host as a peer of the broker
 * (broker/agent_proto.c runs the other end; DESIGN.md "Profiler agent").
 *
 * It sends REGISTER (its host name and the GPUs libpfcuda.so finds, unmeasured), heartbeats,
 * and answers each PROFILE task with one MEASUREMENT:
 *   LOCAL     with a GPU: pf_local_profile (every GPU, every ordered pair, host copies), every
 *             record "gpu"; without: this host as one "cpu" device with its STREAM bandwidth;
 *   ECHO      binds a ZeroMQ echo (pf_cpu_probes_echo_new) on echo_bind and answers with its
 *             endpoint, the host part replaced by `advertise` (what a peer on another host can
 *             reach);
 *   PINGPONG  the size sweep against a peer's echo (pf_cpu_probes_pingpong_rec): one "cpu" link
 *             record from this host to the peer's;
 *   ECHO_STOP closes the echo.
 * Probes run on the agent's one thread: while one runs it sends no heartbeats, and the broker
 * counts no silence against an agent that holds a task (the task's deadline bounds it). The echo
 * is a thread of its own, so the echoing side keeps heartbeating.
 *
 * Like a worker (worker/worker.h) it presumes a broker silent through `liveness` heartbeat
 * intervals dead, or one that says BYE, closes the socket and registers again on a new one after
 * a back-off that doubles up to reconnect_max_ms; a broker restart is only a reconnect. */
#ifndef PF_AGENT_H
#define PF_AGENT_H

#include "proto/clock.h"
#include "proto/curve.h"

#include <czmq.h>
#include <stddef.h>

typedef struct pf_agent pf_agent_t;

typedef struct {
    const char *endpoint;  /* broker; required */
    const char *name;      /* in broker logs; default host:pid */
    const char *host;      /* host name its records carry; default gethostname. Agents on one
                            * machine given different names stand for different hosts (tests) */
    const char *echo_bind; /* default "tcp://0.0.0.0:*" */
    const char *advertise; /* host part of the echo endpoint peers get; default `host` */
    int no_cuda;           /* CPU probes only, even with libpfcuda.so and a GPU */
    int heartbeat_ms;      /* default 1000 */
    int liveness;          /* default 5 */
    int reconnect_max_ms;  /* default 32000 */
    int quiet;             /* no routine log lines; warnings still show */
    pf_clock_t clock;      /* heartbeats, liveness, back-off; default (zeroed) monotonic */
    pf_curve_opts_t curve; /* own cert and the broker's key, as a worker's (proto/curve.h);
                            * zeroed: plain, and then only to a local broker unless insecure */
} pf_agent_opts_t;

void pf_agent_opts_init(pf_agent_opts_t *o);

pf_agent_t *pf_agent_new(const pf_agent_opts_t *o, char *err, size_t errlen);
/* Sends BYE, closes the echo and the socket. */
void pf_agent_destroy(pf_agent_t **a);

/* Serves until SIGINT or SIGTERM. */
int pf_agent_run(pf_agent_t *a);

typedef struct {
    long long tasks_done, tasks_failed, reconnects, malformed;
} pf_agent_stats_t;
void pf_agent_get_stats(const pf_agent_t *a, pf_agent_stats_t *st);

/* The agent as a CZMQ actor (tests, embedded); args: a pf_agent_opts_t that must live until the
 * actor has started. It sends "OK" or "ERROR" <message>; "$TERM" stops it. */
void pf_agent_actor(zsock_t *pipe, void *args);

#endif
