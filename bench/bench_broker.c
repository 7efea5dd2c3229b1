/* The distributed spine under load.
 *
 * 1. Dispatch rate: empty (NOOP) jobs through the real broker and one worker (a "NOOP n" command
 *    on the actor's pipe, served through the broker's test seam, queues them), over TCP loopback
 *    and inproc, with 1, 10 and 100 credits,
 *    against a bare ZeroMQ DEALER/ROUTER ping-pong (one message in flight) measured in the same
 *    run on the same transport. One job is one round trip broker -> worker -> broker, plus the
 *    worker's hop to its solver thread and back.
 * 2. One large search: BERT-96 on 64 devices (8 x DGX-1), every (S, R, T), mapping probes
 *    (BERT-48's whole search fell to about 1 s of jobs once the DP kept only the stage counts
 *    a chain under its upper bound can use: too little to measure a farm by).
 *    (a) In-process (bench/farm.h): the size of its jobs by kind, and its makespan replayed on
 *        1, 2, 4 and 8 ideal workers - how much parallelism the search itself offers.
 *    (b) A real broker and 1, 2 and 4 worker processes of PF_BENCH_THREADS OpenMP threads each
 *        (default 1) on TCP loopback: wall time, efficiency T1 / (N TN), jobs dispatched,
 *        messages, the broker loop's busy seconds, and the workers' busy share from the broker's
 *        job latencies. PF_BENCH_LAYERS overrides 96 (a smaller model for a quick look);
 *        PF_BENCH_IDEAL_ONLY=1 stops after (a). */
#include "bench/farm.h"
#include "broker/broker.h"
#include "broker/testseam.h"
#include "client/client.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"
#include "worker/worker.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- bare ping-pong ---- */

static void echo_actor(zsock_t *pipe, void *args)
{
    zsock_t *router = zsock_new(ZMQ_ROUTER);
    int port = zsock_bind(router, "%s", (const char *)args);
    zsock_signal(pipe, 0);
    char *ep = zsock_last_endpoint(router);
    zstr_send(pipe, port < 0 ? "" : ep);
    free(ep);
    zpoller_t *p = zpoller_new(pipe, router, NULL);
    for (;;) {
        void *which = zpoller_wait(p, -1);
        if (which != router)
            break;
        zmsg_t *m = zmsg_recv(router);
        zmsg_send(&m, router);
    }
    zpoller_destroy(&p);
    zsock_destroy(&router);
}

/* Round trips per second of a 4-byte header + 16-byte body, one in flight. */
static double bare_rate(const char *bind, int n)
{
    zactor_t *echo = zactor_new(echo_actor, (void *)bind);
    char *ep = zstr_recv(echo);
    zsock_t *d = zsock_new_dealer(ep);
    uint8_t hdr[4] = {'P', 'F', 1, 3}, body[16] = {0};
    double t0 = 0;
    for (int i = 0; i < n + 1000; i++) {
        if (i == 1000)
            t0 = pf_now_s(); /* after a warm-up */
        zmsg_t *m = zmsg_new();
        zmsg_addmem(m, hdr, sizeof hdr);
        zmsg_addmem(m, body, sizeof body);
        zmsg_send(&m, d);
        m = zmsg_recv(d);
        zmsg_destroy(&m);
    }
    double rate = n / (pf_now_s() - t0);
    zsock_destroy(&d);
    zactor_destroy(&echo);
    free(ep);
    return rate;
}

/* ---- broker + worker ---- */

static double noop_run(zactor_t *b, long n)
{
    char num[32];
    snprintf(num, sizeof num, "%ld", n);
    zstr_sendx(b, "NOOP", num, NULL);
    char *done = zstr_recv(b);
    double s = done ? atof(done + 5) : 0;
    free(done);
    return s;
}

static void broker_busy(zactor_t *b, double *wall, double *busy)
{
    zstr_send(b, "STATS");
    char *s = zstr_recv(b);
    *wall = *busy = 0;
    if (s)
        sscanf(s, "STATS %lf %lf", wall, busy);
    free(s);
}

/* Jobs per second with one worker holding `credits` jobs. */
static double broker_rate(const char *bind, int credits, long n, double *busy_share)
{
    char ep[256];
    *busy_share = 0;
    pf_testseam_noops_t noops;
    pf_testseam_noops_init(&noops);
    zactor_t *b = pf_bench_broker_start_seam(bind, &noops.seam, ep, sizeof ep);
    if (!b)
        return 0;
    zactor_t *w = pf_bench_worker_start(ep, credits, 1, "bench-worker");
    noop_run(b, 1000); /* warm-up: the worker has registered, buffers are sized */
    double w0, b0, w1, b1;
    broker_busy(b, &w0, &b0);
    double s = noop_run(b, n);
    broker_busy(b, &w1, &b1);
    *busy_share = w1 > w0 ? (b1 - b0) / (w1 - w0) : 0;
    zactor_destroy(&w);
    zactor_destroy(&b);
    return s > 0 ? n / s : 0;
}

static void dispatch_rates(void)
{
    static const struct {
        const char *name, *bind;
    } transports[] = {{"tcp", "tcp://127.0.0.1:*"}, {"inproc", "inproc://bench-broker"}};
    static const int credits[] = {1, 10, 100};
    printf("dispatch rate, NOOP jobs, broker + 1 worker (ratio = jobs/s / bare round trips/s)\n");
    printf("%-8s %-22s %12s %8s %12s\n", "", "", "per second", "ratio", "broker busy");
    for (size_t t = 0; t < 2; t++) {
        double bare = bare_rate(transports[t].bind, t == 0 ? 20000 : 50000);
        printf("%-8s %-22s %12.0f %8.2f %12s\n", transports[t].name, "bare DEALER/ROUTER", bare,
               1.0, "-");
        for (size_t c = 0; c < 3; c++) {
            char label[32];
            double busy = 0;
            long n = credits[c] == 1 ? 20000 : 100000;
            double rate = broker_rate(transports[t].bind, credits[c], n, &busy);
            snprintf(label, sizeof label, "broker, credits %d", credits[c]);
            printf("%-8s %-22s %12.0f %8.2f %11.0f%%\n", transports[t].name, label, rate,
                   bare > 0 ? rate / bare : 0, 100 * busy);
        }
        fflush(stdout);
    }
}

/* ---- one large search ---- */

/* Job sizes and the search's own dependencies: the farm driver runs the search in-process (one
 * thread per job) and replays it on N ideal workers (bench/farm.h): the speed-up no farm can
 * pass. */
static void search_ideal(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                         double *t1_s)
{
    static const int ns[] = {1, 2, 4, 8};
    printf("in-process, 1 thread per job: jobs by kind (count, mean, max, sum of wall s) and the "
           "makespan in job CPU s on N ideal workers (no wire, no idle gap)\n");
    double m1 = 0;
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        pf_bench_drive_t d;
        pf_bench_drive(g, c, o, 1, ns[i], &d);
        if (i == 0) {
            for (int k = 0; k < PF_JOB_KIND_COUNT; k++) {
                const pf_bench_acc_t *a = &d.kind[k];
                if (a->jobs)
                    printf("  %-13s %5lld jobs  mean %.4f s  max %.4f s  sum %.2f s\n",
                           pf_job_kind_name((pf_job_kind_t)k), a->jobs, a->wall_s / a->jobs,
                           a->max_s, a->wall_s);
            }
            printf("  search's own work (next_job + answer): %.3f s\n", d.search.wall_s);
            m1 = d.makespan_s;
            *t1_s = m1;
        }
        long long jobs = 0;
        for (int k = 0; k < PF_JOB_KIND_COUNT; k++)
            jobs += d.kind[k].jobs;
        printf("  N = %d: makespan %.2f s, %lld jobs, ideal speed-up %.2f, efficiency %.2f%s\n",
               ns[i], d.makespan_s, jobs, d.makespan_s > 0 ? m1 / d.makespan_s : 0,
               d.makespan_s > 0 ? m1 / (ns[i] * d.makespan_s) : 0,
               d.status == PF_OK ? "" : "  (search failed)");
        fflush(stdout);
        pf_bench_drive_free(&d);
    }
}

typedef struct {
    pf_bench_run_t run;
    double dispatched, msgs_in, msgs_out, busy_s, lat_sum_s[PF_JOB_KIND_COUNT];
} farm_run_t;

/* One search on a broker and nworkers worker processes (planfarm broker / worker). */
static farm_run_t farm_search(const pf_graph_t *g, const pf_cluster_t *c,
                              const pf_search_opts_t *o, int nworkers, int threads)
{
    farm_run_t r;
    memset(&r, 0, sizeof r);
    pf_bench_farm_t f;
    if (pf_bench_farm_start(&f, nworkers, threads, 2) != 0) {
        snprintf(r.run.err, sizeof r.run.err, "could not start the broker and %d workers",
                 nworkers);
        return r;
    }
    r.run = pf_bench_client_search(f.endpoint, g, c, o);
    r.dispatched = pf_bench_farm_metric(&f, "planfarm_jobs_dispatched_total");
    r.msgs_in = pf_bench_farm_metric(&f, "planfarm_messages_received_total");
    r.msgs_out = pf_bench_farm_metric(&f, "planfarm_messages_sent_total");
    r.busy_s = pf_bench_farm_metric(&f, "planfarm_broker_busy_seconds_total");
    for (int k = 0; k < PF_JOB_KIND_COUNT; k++) {
        char series[128];
        snprintf(series, sizeof series, "planfarm_job_latency_seconds_sum{kind=\"%s\"}",
                 pf_job_kind_name((pf_job_kind_t)k));
        r.lat_sum_s[k] = pf_bench_farm_metric(&f, series);
    }
    pf_bench_farm_stop(&f);
    return r;
}

static int search_scaling(void)
{
    char err[512];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_BERT);
    const char *layers = getenv("PF_BENCH_LAYERS"), *thr = getenv("PF_BENCH_THREADS");
    mo.layers = layers ? atoi(layers) : 96;
    int threads = thr ? atoi(thr) : 1;
    if (mo.layers < 1 || threads < 1)
        return 1;
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX1);
    to.machines = 8;
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    if (pf_model_build(&mo, &g, err, sizeof err) != PF_OK ||
        pf_topology_build(&to, &c, err, sizeof err) != PF_OK) {
        fprintf(stderr, "bench: %s\n", err);
        pf_graph_destroy(&g);
        return 1;
    }
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    printf("\nlarge search: BERT-%d (%d ops) on %s (%d devices), every (S, R, T)\n", mo.layers,
           pf_graph_nops(g), pf_cluster_name(c), pf_cluster_ndevices(c));
    double ideal_t1 = 0;
    search_ideal(g, c, &so, &ideal_t1);
    if (getenv("PF_BENCH_IDEAL_ONLY")) { /* the replay alone: job CPU seconds, load-proof */
        pf_graph_destroy(&g);
        pf_cluster_destroy(&c);
        return 0;
    }
    printf("worker processes (planfarm broker + N x planfarm worker --threads %d --credits 2, TCP "
           "loopback); efficiency = T1 / (N x TN);\n"
           "busy = sum of the broker's job latencies (send to answer, wire and the worker's queue "
           "included) / (N x wall): an upper bound on the workers' busy fraction\n",
           threads);
    printf("%-8s %9s %6s %9s %11s %8s %9s %9s %7s %7s\n", "workers", "wall_s", "jobs",
           "speed-up", "efficiency", "busy", "msgs in", "msgs out", "broker", "objective");
    fflush(stdout);
    static const int ns[] = {1, 2, 4};
    farm_run_t runs[3];
    int rc = 0;
    for (int i = 0; i < 3; i++) {
        runs[i] = farm_search(g, c, &so, ns[i], threads);
        farm_run_t *r = &runs[i];
        double lat = 0;
        for (int k = 0; k < PF_JOB_KIND_COUNT; k++)
            lat += r->lat_sum_s[k] == r->lat_sum_s[k] ? r->lat_sum_s[k] : 0;
        double speedup = r->run.wall_s > 0 ? runs[0].run.wall_s / r->run.wall_s : 0;
        if (!r->run.ok) {
            printf("%-8d failed: %s\n", ns[i], r->run.err);
            rc = 1;
            continue;
        }
        printf("%-8d %9.2f %6.0f %9.2f %11.2f %7.0f%% %9.0f %9.0f %6.2fs %9.3f\n", ns[i],
               r->run.wall_s, r->dispatched, speedup, speedup / ns[i],
               100 * lat / (ns[i] * r->run.wall_s), r->msgs_in, r->msgs_out, r->busy_s,
               r->run.objective_ms);
        fflush(stdout);
    }
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
    return rc;
}

int pf_bench_broker(void)
{
    zsys_set_logstream(NULL); /* worker and broker logs would interleave with the tables */
    dispatch_rates();
    if (getenv("PF_BENCH_SKIP_SEARCH"))
        return 0;
    return search_scaling();
}
