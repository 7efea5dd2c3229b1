#include "broker/metrics.h"
#include "planner/core/util.h"
#include "proto/wire.h"

#include <stdarg.h>

static const double latency_bounds_s[PF_LATENCY_NBOUNDS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 250};

const double *pf_metrics_latency_bounds_s(void)
{
    return latency_bounds_s;
}

void pf_metrics_latency_observe(pf_metrics_latency_t *h, double seconds)
{
    if (!(seconds > 0)) /* NaN too */
        seconds = 0;
    int i = 0;
    while (i < PF_LATENCY_NBOUNDS && seconds > latency_bounds_s[i])
        i++;
    h->bucket[i]++;
    h->count++;
    h->sum_s += seconds;
}

/* The writer keeps the stream's first failure, so the rendering is one straight list of lines. */
typedef struct {
    FILE *f;
    int failed;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vfprintf(o->f, fmt, ap) < 0)
        o->failed = 1;
    va_end(ap);
}

static void head(out_t *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Label values are fixed names (job kinds, request states) with no character the format escapes
 * (backslash, double quote, newline). */
static void by_kind(out_t *o, const char *name, const char *type, const char *help,
                    const long long v[PF_JOB_KIND_COUNT])
{
    head(o, name, type, help);
    for (int k = 0; k < PF_JOB_KIND_COUNT; k++)
        put(o, "%s{kind=\"%s\"} %lld\n", name, pf_job_kind_name((pf_job_kind_t)k), v[k]);
}

static void scalar(out_t *o, const char *name, const char *type, const char *help, long long v)
{
    head(o, name, type, help);
    put(o, "%s %lld\n", name, v);
}

static void seconds(out_t *o, const char *name, const char *type, const char *help, double v)
{
    head(o, name, type, help);
    put(o, "%s %.6f\n", name, v);
}

int pf_metrics_render(const pf_metrics_t *m, FILE *f, char *err, size_t errlen)
{
    out_t o = {f, 0};
    head(&o, "planfarm_requests", "gauge", "Plan requests the broker holds, by state.");
    for (int s = 0; s < PF_METRICS_NSTATES; s++)
        put(&o, "planfarm_requests{state=\"%s\"} %lld\n",
            pf_wire_request_state_name((Planfarm__RequestState)s), m->requests[s]);
    scalar(&o, "planfarm_requests_submitted_total", "counter",
           "Plan requests accepted since the broker started.", m->requests_submitted);
    by_kind(&o, "planfarm_jobs_queued", "gauge", "Jobs waiting for a worker, by kind.",
            m->jobs_queued);
    by_kind(&o, "planfarm_jobs_running", "gauge", "Jobs held by a worker, by kind.",
            m->jobs_running);
    by_kind(&o, "planfarm_jobs_answered_total", "counter", "Jobs answered by workers, by kind.",
            m->jobs_answered);

    head(&o, "planfarm_job_latency_seconds", "histogram",
         "Time from sending a job to a worker to its answer, by kind.");
    const double *bound = pf_metrics_latency_bounds_s();
    for (int k = 0; k < PF_JOB_KIND_COUNT; k++) {
        const char *kind = pf_job_kind_name((pf_job_kind_t)k);
        const pf_metrics_latency_t *h = &m->latency[k];
        unsigned long long below = 0;
        for (int i = 0; i < PF_LATENCY_NBOUNDS; i++) {
            below += h->bucket[i];
            put(&o, "planfarm_job_latency_seconds_bucket{kind=\"%s\",le=\"%g\"} %llu\n", kind,
                bound[i], below);
        }
        put(&o, "planfarm_job_latency_seconds_bucket{kind=\"%s\",le=\"+Inf\"} %llu\n", kind,
            h->count);
        put(&o, "planfarm_job_latency_seconds_sum{kind=\"%s\"} %.6f\n", kind, h->sum_s);
        put(&o, "planfarm_job_latency_seconds_count{kind=\"%s\"} %llu\n", kind, h->count);
    }

    scalar(&o, "planfarm_jobs_dispatched_total", "counter",
           "Jobs sent to workers (re-sends included).", m->dispatched);
    scalar(&o, "planfarm_jobs_requeued_total", "counter",
           "Jobs queued again after a worker died, failed or passed a deadline.", m->requeued);
    scalar(&o, "planfarm_jobs_poisoned_total", "counter",
           "Jobs that failed on too many workers and failed their request.", m->poisoned);
    scalar(&o, "planfarm_workers", "gauge", "Live workers.", m->workers);
    scalar(&o, "planfarm_agents", "gauge", "Registered GPU agents.", m->agents);
    scalar(&o, "planfarm_messages_received_total", "counter", "Messages received.", m->msgs_in);
    scalar(&o, "planfarm_messages_sent_total", "counter", "Messages sent.", m->msgs_out);
    scalar(&o, "planfarm_messages_malformed_total", "counter",
           "Messages dropped as malformed or not allowed from their sender.", m->malformed);
    scalar(&o, "planfarm_handshakes_refused_total", "counter",
           "CURVE handshakes refused: a key in no allow-list, a plain client, a wrong broker "
           "key.", m->handshakes_refused);
    seconds(&o, "planfarm_broker_busy_seconds_total", "counter",
            "Seconds the broker loop spent handling messages and timers.", m->busy_s);
    seconds(&o, "planfarm_broker_uptime_seconds", "gauge", "Seconds since the broker started.",
            m->uptime_s);
    scalar(&o, "planfarm_journal_bytes", "gauge", "Size of the request journal (0: none).",
           m->journal_bytes);
    if (fflush(f) != 0)
        o.failed = 1;
    return o.failed ? pf_fail(err, errlen, PF_ERR, "metrics: cannot write the exposition text")
                    : PF_OK;
}
