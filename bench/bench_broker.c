/* The distributed spine under load.
 *
 * 1. Dispatch rate: empty (NOOP) jobs through the real broker and one worker (the broker actor's
 *    "NOOP n" command queues them), over TCP loopback and inproc, with 1, 10 and 100 credits,
 *    against a bare ZeroMQ DEALER/ROUTER ping-pong (one message in flight) measured in the same
 *    run on the same transport. One job is one round trip broker -> worker -> broker, plus the
 *    worker's hop to its solver thread and back.
 * 2. One large search: BERT-48 on 64 devices (8 x DGX-1), every (S, R), mapping probes, with 1 and
 *    2 embedded workers of PF_BENCH_THREADS OpenMP threads each (default 1): wall time, parallel
 *    efficiency T1 / (2 T2), jobs, and the share of the wall time the broker thread was busy.
 *    PF_BENCH_LAYERS overrides 48 (a smaller model for a quick look). */
#include "broker/broker.h"
#include "broker/client.h"
#include "planner/models.h"
#include "planner/topology.h"
#include "planner/util.h"
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

static zactor_t *broker_start(const char *bind, char *ep, size_t len)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = bind;
    zactor_t *b = zactor_new(pf_broker_actor, &o);
    char *status = NULL, *text = NULL;
    zstr_recvx(b, &status, &text, NULL);
    int ok = status && !strcmp(status, "OK");
    snprintf(ep, len, "%s", text ? text : "");
    free(status);
    free(text);
    if (!ok)
        zactor_destroy(&b);
    return b;
}

static zactor_t *worker_start(const char *ep, int credits, int threads, const char *name)
{
    pf_worker_opts_t o;
    pf_worker_opts_init(&o);
    o.endpoint = ep;
    o.credits = credits;
    o.threads = threads;
    o.name = name;
    zactor_t *w = zactor_new(pf_worker_actor, &o);
    char *status = zstr_recv(w);
    int ok = status && !strcmp(status, "OK");
    free(status);
    if (!ok)
        zactor_destroy(&w);
    return w;
}

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
    zactor_t *b = broker_start(bind, ep, sizeof ep);
    if (!b)
        return 0;
    zactor_t *w = worker_start(ep, credits, 1, "bench-worker");
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

typedef struct {
    double wall_s, busy_s, broker_wall_s, objective_ms;
    long long jobs;
    int ok;
} search_run_t;

static search_run_t large_search(const pf_graph_t *g, const pf_cluster_t *c, int nworkers,
                                 int threads)
{
    search_run_t r = {0};
    char ep[256], err[512], name[32], id[32];
    zactor_t *workers[8] = {0};
    zactor_t *b = broker_start("inproc://bench-search", ep, sizeof ep);
    if (!b)
        return r;
    for (int i = 0; i < nworkers; i++) {
        snprintf(name, sizeof name, "bench-%d", i + 1);
        workers[i] = worker_start(ep, 2, threads, name);
    }
    pf_client_t *cl = pf_client_new(ep, 60000, err, sizeof err);
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    double w0, b0, w1, b1;
    broker_busy(b, &w0, &b0);
    double t0 = pf_now_s();
    Planfarm__RequestStatus *st;
    if (pf_client_submit(cl, g, c, &so, "bench", &st, err, sizeof err) != PF_OK) {
        fprintf(stderr, "bench: submit: %s\n", err);
        goto done;
    }
    snprintf(id, sizeof id, "%s", st->request_id);
    planfarm__request_status__free_unpacked(st, NULL);
    for (;;) {
        if (pf_client_status(cl, id, &st, err, sizeof err) != PF_OK)
            goto done;
        int state = st->state;
        r.jobs = st->jobs_issued;
        r.objective_ms = st->best_objective_ms;
        planfarm__request_status__free_unpacked(st, NULL);
        if (state == PLANFARM__REQUEST_STATE__REQ_DONE) {
            r.ok = 1;
            break;
        }
        if (state != PLANFARM__REQUEST_STATE__REQ_RUNNING &&
            state != PLANFARM__REQUEST_STATE__REQ_QUEUED)
            break;
        zclock_sleep(20);
    }
    r.wall_s = pf_now_s() - t0;
    broker_busy(b, &w1, &b1);
    r.busy_s = b1 - b0;
    r.broker_wall_s = w1 - w0;
done:
    pf_client_destroy(&cl);
    for (int i = 0; i < nworkers; i++)
        zactor_destroy(&workers[i]);
    zactor_destroy(&b);
    return r;
}

static int search_scaling(void)
{
    char err[512];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_BERT);
    const char *layers = getenv("PF_BENCH_LAYERS"), *thr = getenv("PF_BENCH_THREADS");
    mo.layers = layers ? atoi(layers) : 48;
    int threads = thr ? atoi(thr) : 1;
    if (mo.layers < 1 || threads < 1)
        return 1;
    pf_topo_opts_t to;
    pf_topo_opts_init(&to, PF_TOPO_DGX1);
    to.machines = 8;
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    if (pf_model_build(&mo, &g, err, sizeof err) != PF_OK ||
        pf_topo_build(&to, &c, err, sizeof err) != PF_OK) {
        fprintf(stderr, "bench: %s\n", err);
        pf_graph_destroy(&g);
        return 1;
    }
    printf("\nlarge search: BERT-%d (%d ops) on %s (%d devices), every (S, R), %d OpenMP "
           "thread%s per worker\n",
           mo.layers, pf_graph_nops(g), pf_cluster_name(c), pf_cluster_ndevices(c), threads,
           threads > 1 ? "s" : "");
    printf("%-8s %10s %8s %10s %12s %12s\n", "workers", "wall_s", "jobs", "speedup",
           "efficiency", "broker busy");
    fflush(stdout);
    search_run_t one = large_search(g, c, 1, threads);
    search_run_t two = large_search(g, c, 2, threads);
    int rc = !(one.ok && two.ok);
    search_run_t *runs[2] = {&one, &two};
    for (int k = 0; k < 2; k++) {
        search_run_t *r = runs[k];
        double speedup = r->wall_s > 0 ? one.wall_s / r->wall_s : 0;
        printf("%-8d %10.2f %8lld %10.2f %12.2f %11.2f%%%s\n", k + 1, r->wall_s, r->jobs, speedup,
               speedup / (k + 1), r->broker_wall_s > 0 ? 100 * r->busy_s / r->broker_wall_s : 0,
               r->ok ? "" : "  (failed)");
    }
    if (one.ok && two.ok && one.objective_ms != two.objective_ms)
        printf("note: best objective %.6g ms with 1 worker, %.6g ms with 2\n", one.objective_ms,
               two.objective_ms);
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
