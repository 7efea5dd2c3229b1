/* metrics: the Prometheus text of a hand-made snapshot, line for line, and the latency
 * histogram's bucket edges (an observation equal to a bound belongs to that bound's bucket). */
#include "broker/metrics.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdlib.h>
#include <string.h>

/* Bounds (s): 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 25 50 250.
 * dp_partition sees 0.003, 0.02, 0.02, 300: buckets (0.0025, 0.005], (0.01, 0.025] twice, +Inf;
 *   cumulative 0 0 1 1 3 ... 3, +Inf 4, sum 300.043.
 * map_probe sees 0.001 (on the first bound), 1 (on the tenth) and -2 (a clock that went back:
 *   counted as 0): cumulative 2 at le=0.001 .. 0.5, 3 from le=1 on, sum 1.001. */
static void snapshot(pf_metrics_t *m)
{
    memset(m, 0, sizeof *m);
    const long long requests[PF_METRICS_NSTATES] = {1, 2, 3, 0, 1};
    memcpy(m->requests, requests, sizeof requests);
    m->requests_submitted = 7;
    m->jobs_queued[PF_JOB_DP_PARTITION] = 5;
    m->jobs_queued[PF_JOB_TAP_ENUM] = 1;
    m->jobs_running[PF_JOB_MAP_PROBE] = 2;
    m->jobs_answered[PF_JOB_NOOP] = 9;
    m->jobs_answered[PF_JOB_DP_PARTITION] = 4;
    m->jobs_answered[PF_JOB_MAP_PROBE] = 10;
    const double dp_s[] = {0.003, 0.02, 0.02, 300}, probe_s[] = {0.001, 1, -2};
    for (int i = 0; i < 4; i++)
        pf_metrics_latency_observe(&m->latency[PF_JOB_DP_PARTITION], dp_s[i]);
    for (int i = 0; i < 3; i++)
        pf_metrics_latency_observe(&m->latency[PF_JOB_MAP_PROBE], probe_s[i]);
    m->dispatched = 20;
    m->requeued = 2;
    m->poisoned = 1;
    m->workers = 3;
    m->msgs_in = 100;
    m->msgs_out = 90;
    m->malformed = 4;
    m->handshakes_refused = 6;
    m->busy_s = 1.5;
    m->uptime_s = 60.25;
    m->journal_bytes = 4096;
}

static const char expected[] =
    "# HELP planfarm_requests Plan requests the broker holds, by state.\n"
    "# TYPE planfarm_requests gauge\n"
    "planfarm_requests{state=\"queued\"} 1\n"
    "planfarm_requests{state=\"running\"} 2\n"
    "planfarm_requests{state=\"done\"} 3\n"
    "planfarm_requests{state=\"failed\"} 0\n"
    "planfarm_requests{state=\"cancelled\"} 1\n"
    "# HELP planfarm_requests_submitted_total Plan requests accepted since the broker started.\n"
    "# TYPE planfarm_requests_submitted_total counter\n"
    "planfarm_requests_submitted_total 7\n"
    "# HELP planfarm_jobs_queued Jobs waiting for a worker, by kind.\n"
    "# TYPE planfarm_jobs_queued gauge\n"
    "planfarm_jobs_queued{kind=\"noop\"} 0\n"
    "planfarm_jobs_queued{kind=\"dp_partition\"} 5\n"
    "planfarm_jobs_queued{kind=\"map_probe\"} 0\n"
    "planfarm_jobs_queued{kind=\"tap_enum\"} 1\n"
    "planfarm_jobs_queued{kind=\"simulate\"} 0\n"
    "planfarm_jobs_queued{kind=\"reshard\"} 0\n"
    "# HELP planfarm_jobs_running Jobs held by a worker, by kind.\n"
    "# TYPE planfarm_jobs_running gauge\n"
    "planfarm_jobs_running{kind=\"noop\"} 0\n"
    "planfarm_jobs_running{kind=\"dp_partition\"} 0\n"
    "planfarm_jobs_running{kind=\"map_probe\"} 2\n"
    "planfarm_jobs_running{kind=\"tap_enum\"} 0\n"
    "planfarm_jobs_running{kind=\"simulate\"} 0\n"
    "planfarm_jobs_running{kind=\"reshard\"} 0\n"
    "# HELP planfarm_jobs_answered_total Jobs answered by workers, by kind.\n"
    "# TYPE planfarm_jobs_answered_total counter\n"
    "planfarm_jobs_answered_total{kind=\"noop\"} 9\n"
    "planfarm_jobs_answered_total{kind=\"dp_partition\"} 4\n"
    "planfarm_jobs_answered_total{kind=\"map_probe\"} 10\n"
    "planfarm_jobs_answered_total{kind=\"tap_enum\"} 0\n"
    "planfarm_jobs_answered_total{kind=\"simulate\"} 0\n"
    "planfarm_jobs_answered_total{kind=\"reshard\"} 0\n"
    "# HELP planfarm_job_latency_seconds Time from sending a job to a worker to its answer, by kind.\n"
    "# TYPE planfarm_job_latency_seconds histogram\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"0.001\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"0.0025\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"0.005\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"0.01\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"0.025\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"0.05\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"0.1\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"0.25\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"0.5\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"1\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"2.5\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"5\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"10\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"25\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"50\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"250\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"noop\",le=\"+Inf\"} 0\n"
    "planfarm_job_latency_seconds_sum{kind=\"noop\"} 0.000000\n"
    "planfarm_job_latency_seconds_count{kind=\"noop\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"0.001\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"0.0025\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"0.005\"} 1\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"0.01\"} 1\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"0.025\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"0.05\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"0.1\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"0.25\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"0.5\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"1\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"2.5\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"5\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"10\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"25\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"50\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"250\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"dp_partition\",le=\"+Inf\"} 4\n"
    "planfarm_job_latency_seconds_sum{kind=\"dp_partition\"} 300.043000\n"
    "planfarm_job_latency_seconds_count{kind=\"dp_partition\"} 4\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"0.001\"} 2\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"0.0025\"} 2\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"0.005\"} 2\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"0.01\"} 2\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"0.025\"} 2\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"0.05\"} 2\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"0.1\"} 2\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"0.25\"} 2\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"0.5\"} 2\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"1\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"2.5\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"5\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"10\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"25\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"50\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"250\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"map_probe\",le=\"+Inf\"} 3\n"
    "planfarm_job_latency_seconds_sum{kind=\"map_probe\"} 1.001000\n"
    "planfarm_job_latency_seconds_count{kind=\"map_probe\"} 3\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"0.001\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"0.0025\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"0.005\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"0.01\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"0.025\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"0.05\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"0.1\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"0.25\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"0.5\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"1\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"2.5\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"5\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"10\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"25\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"50\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"250\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"tap_enum\",le=\"+Inf\"} 0\n"
    "planfarm_job_latency_seconds_sum{kind=\"tap_enum\"} 0.000000\n"
    "planfarm_job_latency_seconds_count{kind=\"tap_enum\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"0.001\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"0.0025\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"0.005\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"0.01\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"0.025\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"0.05\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"0.1\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"0.25\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"0.5\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"1\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"2.5\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"5\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"10\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"25\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"50\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"250\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"simulate\",le=\"+Inf\"} 0\n"
    "planfarm_job_latency_seconds_sum{kind=\"simulate\"} 0.000000\n"
    "planfarm_job_latency_seconds_count{kind=\"simulate\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"0.001\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"0.0025\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"0.005\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"0.01\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"0.025\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"0.05\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"0.1\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"0.25\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"0.5\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"1\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"2.5\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"5\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"10\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"25\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"50\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"250\"} 0\n"
    "planfarm_job_latency_seconds_bucket{kind=\"reshard\",le=\"+Inf\"} 0\n"
    "planfarm_job_latency_seconds_sum{kind=\"reshard\"} 0.000000\n"
    "planfarm_job_latency_seconds_count{kind=\"reshard\"} 0\n"
    "# HELP planfarm_jobs_dispatched_total Jobs sent to workers (re-sends included).\n"
    "# TYPE planfarm_jobs_dispatched_total counter\n"
    "planfarm_jobs_dispatched_total 20\n"
    "# HELP planfarm_jobs_requeued_total Jobs queued again after a worker died, failed or passed a deadline.\n"
    "# TYPE planfarm_jobs_requeued_total counter\n"
    "planfarm_jobs_requeued_total 2\n"
    "# HELP planfarm_jobs_poisoned_total Jobs that failed on too many workers and failed their request.\n"
    "# TYPE planfarm_jobs_poisoned_total counter\n"
    "planfarm_jobs_poisoned_total 1\n"
    "# HELP planfarm_workers Live workers.\n"
    "# TYPE planfarm_workers gauge\n"
    "planfarm_workers 3\n"
    "# HELP planfarm_agents Registered GPU agents.\n"
    "# TYPE planfarm_agents gauge\n"
    "planfarm_agents 0\n"
    "# HELP planfarm_messages_received_total Messages received.\n"
    "# TYPE planfarm_messages_received_total counter\n"
    "planfarm_messages_received_total 100\n"
    "# HELP planfarm_messages_sent_total Messages sent.\n"
    "# TYPE planfarm_messages_sent_total counter\n"
    "planfarm_messages_sent_total 90\n"
    "# HELP planfarm_messages_malformed_total Messages dropped as malformed or not allowed from their sender.\n"
    "# TYPE planfarm_messages_malformed_total counter\n"
    "planfarm_messages_malformed_total 4\n"
    "# HELP planfarm_handshakes_refused_total CURVE handshakes refused: a key in no allow-list, a plain client, a wrong broker key.\n"
    "# TYPE planfarm_handshakes_refused_total counter\n"
    "planfarm_handshakes_refused_total 6\n"
    "# HELP planfarm_broker_busy_seconds_total Seconds the broker loop spent handling messages and timers.\n"
    "# TYPE planfarm_broker_busy_seconds_total counter\n"
    "planfarm_broker_busy_seconds_total 1.500000\n"
    "# HELP planfarm_broker_uptime_seconds Seconds since the broker started.\n"
    "# TYPE planfarm_broker_uptime_seconds gauge\n"
    "planfarm_broker_uptime_seconds 60.250000\n"
    "# HELP planfarm_journal_bytes Size of the request journal (0: none).\n"
    "# TYPE planfarm_journal_bytes gauge\n"
    "planfarm_journal_bytes 4096\n"
    ;

static void test_render(void)
{
    pf_metrics_t m;
    snapshot(&m);
    char *text = NULL, err[128] = "";
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(pf_metrics_render(&m, f, err, sizeof err), PF_OK);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(text, expected);
    if (strcmp(text, expected) != 0) /* the first line that differs, for whoever reads the log */
        for (size_t i = 0; text[i]; i++)
            if (text[i] != expected[i]) {
                fprintf(stderr, "metrics: differs at byte %zu: \"%.60s\"\n", i, text + i);
                break;
            }
    free(text);
}

/* Each bound's own value lands in its bucket; just above goes to the next; above 250 s to +Inf;
 * NaN and negatives to the first. Sum: 0.001 + 0.0011 + 250 + 251 = 501.0021. */
static void test_histogram_edges(void)
{
    pf_metrics_latency_t h;
    memset(&h, 0, sizeof h);
    const double *bound = pf_metrics_latency_bounds_s();
    CU_ASSERT_DOUBLE_EQUAL(bound[0], 0.001, 0);
    CU_ASSERT_DOUBLE_EQUAL(bound[PF_LATENCY_NBOUNDS - 1], 250, 0);
    for (int i = 1; i < PF_LATENCY_NBOUNDS; i++)
        CU_ASSERT(bound[i] > bound[i - 1]);
    pf_metrics_latency_observe(&h, 0.001);
    pf_metrics_latency_observe(&h, 0.0011);
    pf_metrics_latency_observe(&h, 250);
    pf_metrics_latency_observe(&h, 251);
    pf_metrics_latency_observe(&h, NAN);
    pf_metrics_latency_observe(&h, -1);
    CU_ASSERT_EQUAL(h.bucket[0], 3);
    CU_ASSERT_EQUAL(h.bucket[1], 1);
    CU_ASSERT_EQUAL(h.bucket[PF_LATENCY_NBOUNDS - 1], 1);
    CU_ASSERT_EQUAL(h.bucket[PF_LATENCY_NBOUNDS], 1);
    CU_ASSERT_EQUAL(h.count, 6);
    PF_ASSERT_CLOSE(h.sum_s, 501.0021, 1e-12);
}

/* A stream that fails is reported, not ignored. */
static void test_render_failure(void)
{
    pf_metrics_t m;
    snapshot(&m);
    FILE *f = fopen("/dev/full", "w");
    if (!f)
        return; /* no /dev/full here: nothing to check */
    char err[128] = "";
    CU_ASSERT_EQUAL(pf_metrics_render(&m, f, err, sizeof err), PF_ERR);
    CU_ASSERT_STRING_EQUAL(err, "metrics: cannot write the exposition text");
    fclose(f);
}

void pf_suite_metrics(void)
{
    CU_pSuite s = CU_add_suite("metrics", NULL, NULL);
    CU_add_test(s, "Prometheus text of a snapshot", test_render);
    CU_add_test(s, "latency bucket edges", test_histogram_edges);
    CU_add_test(s, "a failing stream", test_render_failure);
}
