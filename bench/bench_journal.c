/* The journal's cost and what it buys.
 *
 * 1. SUBMITs per second, one client, one reply awaited per SUBMIT, with and without the journal
 *    (each journaled SUBMIT is one SQLite commit with synchronous=FULL: one fsync of the WAL).
 * 2. Requests per second for a batch of 200 small models (GPT, 1 layer, on one DGX-1, 200 seeds)
 *    through 2 embedded workers, with and without the journal.
 * 3. Recovery after a kill with 1,000 journaled unfinished requests: time until the restarted
 *    broker answers (rows read back) and until every request is prepared again.
 * 4. The loop while a large graph is coarsened on the helper thread: the slowest STATUS reply a
 *    client saw and the loop's longest turn (its own stat), against the setup's time.
 *    PF_BENCH_BIG_LAYERS (default 300 GPT layers, ~5,100 ops; 1765 is the 30,000 ops,
 *    minutes of coarsening) sets its size.
 * The journals live in a fresh directory under $TMPDIR (default /tmp), removed afterwards. */
#include "broker/broker.h"
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
#include <unistd.h>

static zactor_t *broker_start(pf_broker_opts_t *o, char *ep, size_t len)
{
    zactor_t *b = zactor_new(pf_broker_actor, o);
    char *status = NULL, *text = NULL;
    zstr_recvx(b, &status, &text, NULL);
    int ok = status && !strcmp(status, "OK");
    if (!ok)
        fprintf(stderr, "broker: %s\n", text ? text : "?");
    snprintf(ep, len, "%s", text ? text : "");
    free(status);
    free(text);
    if (!ok)
        zactor_destroy(&b);
    return b;
}

static void broker_opts(pf_broker_opts_t *o, const char *journal)
{
    pf_broker_opts_init(o);
    o->endpoint = "tcp://127.0.0.1:0";
    o->quiet = 1;
    o->max_running = 100000;
    o->max_finished = 100000;
    o->journal_path = journal;
}

static void stats(zactor_t *b, double *stall, int *preparing)
{
    zstr_send(b, "STATS");
    char *s = zstr_recv(b);
    double wall, busy;
    long long in, out, bad, disp;
    int workers;
    *stall = 0;
    *preparing = -1;
    if (s)
        sscanf(s, "STATS %lf %lf %lld %lld %lld %lld %d %lf %d", &wall, &busy, &in, &out, &bad,
               &disp, &workers, stall, preparing);
    free(s);
}

static zactor_t *worker_start(const char *ep)
{
    pf_worker_opts_t o;
    pf_worker_opts_init(&o);
    o.endpoint = ep;
    o.credits = 2;
    o.threads = 1;
    o.name = "bench";
    zactor_t *w = zactor_new(pf_worker_actor, &o);
    char *status = zstr_recv(w);
    int ok = status && !strcmp(status, "OK");
    free(status);
    if (!ok)
        zactor_destroy(&w);
    return w;
}

static pf_graph_t *gpt(int layers)
{
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = layers;
    pf_graph_t *g = NULL;
    char err[256];
    if (pf_model_build(&mo, &g, err, sizeof err) != PF_OK)
        fprintf(stderr, "model: %s\n", err);
    return g;
}

/* n distinct SUBMITs (seeds 1..n): seconds, 0 on failure. */
static double submit_n(pf_client_t *c, const pf_graph_t *g, const pf_cluster_t *cl, int n,
                       char (*ids)[64])
{
    char err[512];
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    double t0 = pf_now_s();
    for (int i = 0; i < n; i++) {
        Planfarm__RequestStatus *st;
        so.seed = (uint64_t)i + 1;
        if (pf_client_submit(c, g, cl, &so, "bench", &st, err, sizeof err) != PF_OK) {
            fprintf(stderr, "submit: %s\n", err);
            return 0;
        }
        if (ids)
            snprintf(ids[i], 64, "%s", st->request_id);
        planfarm__request_status__free_unpacked(st, NULL);
    }
    return pf_now_s() - t0;
}

static double submit_rate(const char *journal, int n, const pf_graph_t *g, const pf_cluster_t *cl)
{
    pf_broker_opts_t o;
    broker_opts(&o, journal);
    char ep[256], err[512];
    zactor_t *b = broker_start(&o, ep, sizeof ep);
    if (!b)
        return 0;
    pf_client_t *c = pf_client_new(ep, 10000, err, sizeof err);
    double s = submit_n(c, g, cl, n, NULL);
    pf_client_destroy(&c);
    zactor_destroy(&b);
    return s > 0 ? n / s : 0;
}

/* 200 requests submitted, then followed until every one is done: requests per second. */
static double batch_rate(const char *journal, int n, const pf_graph_t *g, const pf_cluster_t *cl)
{
    pf_broker_opts_t o;
    broker_opts(&o, journal);
    char ep[256], err[512];
    zactor_t *b = broker_start(&o, ep, sizeof ep);
    zactor_t *w1 = b ? worker_start(ep) : NULL, *w2 = b ? worker_start(ep) : NULL;
    char(*ids)[64] = calloc((size_t)n, sizeof *ids);
    pf_client_t *c = pf_client_new(ep, 10000, err, sizeof err);
    double t0 = pf_now_s(), rate = 0;
    if (!w1 || !w2 || !ids || submit_n(c, g, cl, n, ids) <= 0)
        goto done;
    for (int i = 0; i < n; i++) {
        for (;;) {
            Planfarm__RequestStatus *st;
            if (pf_client_status(c, ids[i], &st, err, sizeof err) != PF_OK)
                goto done;
            Planfarm__RequestState state = st->state;
            planfarm__request_status__free_unpacked(st, NULL);
            if (state == PLANFARM__REQUEST_STATE__REQ_DONE)
                break;
            if (pf_wire_request_state_ended(state))
                goto done;
            zclock_sleep(5);
        }
    }
    rate = n / (pf_now_s() - t0);
done:
    pf_client_destroy(&c);
    free(ids);
    zactor_destroy(&w1);
    zactor_destroy(&w2);
    zactor_destroy(&b);
    return rate;
}

int pf_bench_journal(void)
{
    char dir[512], path[600], err[512];
    snprintf(dir, sizeof dir, "%s/pf_bench_journal.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench journal: cannot make a directory under /tmp\n");
        return 1;
    }
    pf_graph_t *g = gpt(1);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX1);
    to.machines = 1;
    pf_cluster_t *cl = NULL;
    if (!g || pf_topology_build(&to, &cl, err, sizeof err) != PF_OK)
        return 1;
    int rc = 0;

    /* 1 */
    snprintf(path, sizeof path, "%s/submit.db", dir);
    double mem = submit_rate(NULL, 500, g, cl), disk = submit_rate(path, 500, g, cl);
    printf("SUBMITs/s (GPT 1 layer, one client, reply awaited): memory %.0f, journal %.0f "
           "(%.2fx; one fsync'd commit each)\n",
           mem, disk, mem > 0 ? disk / mem : 0);

    /* 2 */
    snprintf(path, sizeof path, "%s/batch.db", dir);
    double bmem = batch_rate(NULL, 200, g, cl), bdisk = batch_rate(path, 200, g, cl);
    printf("batch of 200 small models, 2 workers: memory %.1f requests/s, journal %.1f "
           "requests/s (%.2fx)\n",
           bmem, bdisk, bmem > 0 ? bdisk / bmem : 0);

    /* 3: a journal of 1,000 unfinished requests (no workers), then a new broker on it */
    snprintf(path, sizeof path, "%s/recover.db", dir);
    {
        pf_broker_opts_t o;
        broker_opts(&o, path);
        char ep[256];
        zactor_t *b = broker_start(&o, ep, sizeof ep);
        pf_client_t *c = b ? pf_client_new(ep, 10000, err, sizeof err) : NULL;
        double s = c ? submit_n(c, g, cl, 1000, NULL) : 0;
        pf_client_destroy(&c);
        zactor_destroy(&b);
        double t0 = pf_now_s();
        b = s > 0 ? broker_start(&o, ep, sizeof ep) : NULL;
        double up_s = pf_now_s() - t0, stall;
        int preparing = 1;
        while (b && preparing != 0) {
            stats(b, &stall, &preparing);
            if (preparing != 0)
                zclock_sleep(2);
        }
        double ready_s = pf_now_s() - t0;
        if (b)
            printf("recovery of 1,000 journaled requests: broker answering after %.3f s, all "
                   "prepared after %.3f s (%.2f ms per request)\n",
                   up_s, ready_s, 1e3 * ready_s / 1000);
        else
            rc = 1;
        zactor_destroy(&b);
    }

    /* 4 */
    int layers = getenv("PF_BENCH_BIG_LAYERS") ? atoi(getenv("PF_BENCH_BIG_LAYERS")) : 300;
    pf_graph_t *big = gpt(layers > 0 ? layers : 300);
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX1);
    to.machines = 8;
    pf_cluster_t *c64 = NULL;
    if (big && pf_topology_build(&to, &c64, err, sizeof err) == PF_OK) {
        pf_broker_opts_t o;
        broker_opts(&o, NULL);
        char ep[256];
        zactor_t *b = broker_start(&o, ep, sizeof ep);
        pf_client_t *c = pf_client_new(ep, 600000, err, sizeof err);
        pf_search_opts_t so;
        pf_search_opts_init(&so);
        Planfarm__RequestStatus *st = NULL;
        double t0 = pf_now_s(), worst_reply = 0;
        long long polls = 0;
        if (pf_client_submit(c, big, c64, &so, "big", &st, err, sizeof err) == PF_OK) {
            double submit_s = pf_now_s() - t0;
            char id[64];
            snprintf(id, sizeof id, "%s", st->request_id);
            int state = st->state;
            planfarm__request_status__free_unpacked(st, NULL);
            while (state == PLANFARM__REQUEST_STATE__REQ_PREPARING) {
                double q = pf_now_s();
                if (pf_client_status(c, id, &st, err, sizeof err) != PF_OK)
                    break;
                q = pf_now_s() - q;
                worst_reply = q > worst_reply ? q : worst_reply;
                polls++;
                state = st->state;
                planfarm__request_status__free_unpacked(st, NULL);
                zclock_sleep(10);
            }
            double prep_s = pf_now_s() - t0, stall;
            int preparing;
            stats(b, &stall, &preparing);
            printf("GPT %d layers (%d ops) on 64 devices: SUBMIT answered in %.3f s, prepared in "
                   "%.2f s; %lld STATUS meanwhile, slowest reply %.1f ms; the loop's longest "
                   "turn %.1f ms\n",
                   layers, pf_graph_nops(big), submit_s, prep_s, polls, 1e3 * worst_reply,
                   1e3 * stall);
        }
        pf_client_destroy(&c);
        zactor_destroy(&b);
    }
    pf_cluster_destroy(&c64);
    pf_graph_destroy(&big);
    pf_cluster_destroy(&cl);
    pf_graph_destroy(&g);
    const char *names[] = {"submit.db", "batch.db", "recover.db"};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) {
            static const char *suffix[] = {"", "-wal", "-shm"};
            snprintf(path, sizeof path, "%s/%s%s", dir, names[i], suffix[k]);
            unlink(path);
        }
    rmdir(dir);
    return rc;
}
