/* metrics: what the broker tells Prometheus, as a plain struct and its rendering in the text
 * exposition format (version 0.0.4: "# HELP", "# TYPE", one sample a line, histograms as
 * cumulative `_bucket{le=...}` series with `_sum` and `_count`).
 *
 * The struct is a snapshot: the broker's loop fills it from its own state once per heartbeat
 * (broker/publish.c) and renders it there; the HTTP thread only serves the text (broker/http.h).
 * Nothing here reads the broker, so the rendering is tested on a hand-made snapshot. */
#ifndef PF_METRICS_H
#define PF_METRICS_H

#include "planner/search/job.h"

#include <stddef.h>
#include <stdio.h>

/* Upper bounds of the latency buckets, seconds: 1-2.5-5 steps from 1 ms (a mapping probe on a
 * small cluster) to 250 s (a partition DP near its deadline); anything longer lands in +Inf. */
#define PF_LATENCY_NBOUNDS 16
const double *pf_metrics_latency_bounds_s(void);

typedef struct {
    /* bucket[i]: observations in (bound[i-1], bound[i]]; bucket[PF_LATENCY_NBOUNDS]: above every
     * bound. Not cumulative here: the rendering sums them. */
    unsigned long long bucket[PF_LATENCY_NBOUNDS + 1];
    unsigned long long count;
    double sum_s;
} pf_metrics_latency_t;

/* Adds one observation; a negative or NaN time (a clock that went back) counts as 0. */
void pf_metrics_latency_observe(pf_metrics_latency_t *h, double seconds);

/* Request states, in the order of the wire's RequestState (queued, running, done, failed,
 * cancelled: proto/wire.h pf_wire_request_state_name). */
#define PF_METRICS_NSTATES 5

typedef struct {
    long long requests[PF_METRICS_NSTATES]; /* requests the broker holds, by state */
    long long requests_submitted;           /* accepted since start */
    long long jobs_queued[PF_JOB_KIND_COUNT], jobs_running[PF_JOB_KIND_COUNT];
    long long jobs_answered[PF_JOB_KIND_COUNT];
    pf_metrics_latency_t latency[PF_JOB_KIND_COUNT]; /* send of the live copy -> its answer */
    long long dispatched, requeued, poisoned;
    int workers;
    int agents; /* GPU agents registered; 0 while the broker has no agent registry */
    long long msgs_in, msgs_out, malformed;
    long long handshakes_refused; /* CURVE handshakes refused (0 on a plain broker) */
    double busy_s;   /* the loop's time handling messages and timers */
    double uptime_s; /* since the broker was made */
    long long journal_bytes; /* 0 without a journal */
} pf_metrics_t;

/* Writes every metric of m to f. PF_OK, or PF_ERR when the stream fails. */
int pf_metrics_render(const pf_metrics_t *m, FILE *f, char *err, size_t errlen);

#endif
