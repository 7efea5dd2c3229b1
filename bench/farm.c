#include "bench/farm.h"
#include "broker/broker.h"
#include "client/client.h"
#include "planner/core/util.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/price.h"
#include "worker/worker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double pf_bench_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* ---- the in-process driver ---- */

#define DRIVE_MAX_WORKERS 64

typedef struct {
    int busy;
    uint64_t id;
    double end_s; /* virtual */
    pf_job_result_t res;
} vworker_t;

static void acc_add(pf_bench_acc_t *a, double wall_s, double cpu_s)
{
    a->jobs++;
    a->wall_s += wall_s;
    a->cpu_s += cpu_s;
    if (wall_s > a->max_s)
        a->max_s = wall_s;
}

int pf_bench_drive(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                   int threads, int nworkers, pf_bench_drive_t *out)
{
    memset(out, 0, sizeof *out);
    out->status = PF_ERR;
    if (nworkers < 1 || nworkers > DRIVE_MAX_WORKERS) {
        snprintf(out->err, sizeof out->err, "nworkers %d out of [1, %d]", nworkers,
                 DRIVE_MAX_WORKERS);
        return out->status;
    }
    out->nworkers = nworkers;
    vworker_t w[DRIVE_MAX_WORKERS];
    memset(w, 0, sizeof w);
    double t_start = pf_now_s(), c_start = pf_bench_cpu_s(), now = 0;
    pf_search_t *s = pf_search_new(g, c, o, out->err, sizeof out->err);
    if (!s)
        return out->status;
    uint64_t cancelled[256];
    for (;;) {
        for (int k = 0; k < nworkers && !pf_search_done(s); k++) {
            if (w[k].busy)
                continue;
            pf_job_t job;
            uint64_t id;
            double t0 = pf_now_s(), c0 = pf_bench_cpu_s();
            int got = pf_search_next_job(s, &id, &job);
            double dc = pf_bench_cpu_s() - c0;
            acc_add(&out->search, pf_now_s() - t0, dc);
            out->search.jobs--; /* counts answers, below */
            now += dc;
            if (!got)
                break;
            job.threads = threads;
            t0 = pf_now_s();
            c0 = pf_bench_cpu_s();
            pf_job_run(&job, &w[k].res);
            double dt = pf_now_s() - t0;
            dc = pf_bench_cpu_s() - c0;
            if ((unsigned)job.kind < PF_JOB_KIND_COUNT)
                acc_add(&out->kind[job.kind], dt, dc);
            w[k].busy = 1;
            w[k].id = id;
            w[k].end_s = now + dc;
        }
        int first = -1;
        for (int k = 0; k < nworkers; k++)
            if (w[k].busy && (first < 0 || w[k].end_s < w[first].end_s))
                first = k;
        if (first < 0 || pf_search_done(s))
            break;
        if (w[first].end_s > now)
            now = w[first].end_s;
        double t0 = pf_now_s(), c0 = pf_bench_cpu_s();
        pf_search_answer(s, w[first].id, &w[first].res);
        int n = pf_search_take_cancelled(s, cancelled, 256);
        double dc = pf_bench_cpu_s() - c0;
        acc_add(&out->search, pf_now_s() - t0, dc);
        now += dc;
        pf_job_result_clear(&w[first].res);
        w[first].busy = 0;
        /* A cancelled job frees its worker now (the broker tells the worker to stop it). */
        for (int i = 0; i < n; i++)
            for (int k = 0; k < nworkers; k++)
                if (w[k].busy && w[k].id == cancelled[i]) {
                    pf_job_result_clear(&w[k].res);
                    w[k].busy = 0;
                }
    }
    for (int k = 0; k < nworkers; k++)
        pf_job_result_clear(&w[k].res);
    out->makespan_s = now;
    if (!pf_search_done(s)) {
        snprintf(out->err, sizeof out->err,
                 "the search stalled: no job ready, none outstanding, not done");
        out->status = PF_ERR;
    } else {
        out->status = pf_search_result(s, &out->plan, out->err, sizeof out->err);
    }
    pf_search_destroy(&s);
    out->wall_s = pf_now_s() - t_start;
    out->cpu_s = pf_bench_cpu_s() - c_start;
    return out->status;
}

void pf_bench_drive_free(pf_bench_drive_t *d)
{
    if (d)
        pf_plan_destroy(&d->plan);
}

/* ---- published tables ---- */

int pf_bench_build(const char *what, const pf_model_opts_t *mo, const char *device,
                   pf_prec_t prec, const pf_topology_opts_t *to, pf_graph_t **g,
                   pf_cluster_t **c)
{
    char err[512] = "";
    pf_graph_t *raw = NULL;
    const pf_devmodel_t *dm = device ? pf_devmodel_preset(device) : NULL;
    *g = NULL, *c = NULL;
    if (device && !dm)
        snprintf(err, sizeof err, "no %s preset", device);
    int rc = (device && !dm) || pf_model_build(mo, &raw, err, sizeof err) != PF_OK ||
             (dm && pf_price_graph(raw, dm, prec, g, NULL, err, sizeof err) != PF_OK) ||
             pf_topology_build(to, c, err, sizeof err) != PF_OK;
    if (!dm && !rc) {
        *g = raw; /* as generated */
        raw = NULL;
    }
    pf_graph_destroy(&raw);
    if (rc) {
        fprintf(stderr, "bench %s: %s\n", what, err);
        pf_graph_destroy(g);
        pf_cluster_destroy(c);
        return -1;
    }
    return 0;
}

json_t *pf_bench_shared_json(const char *rel)
{
    char path[1024];
    const char *shared = getenv("PF_SHARED") ? getenv("PF_SHARED") : "../shared";
    snprintf(path, sizeof path, "%s/%s", shared, rel);
    json_error_t je;
    json_t *t = json_load_file(path, 0, &je);
    if (!t)
        printf("SKIP: %s: %s (set PF_SHARED)\n", path, je.text);
    return t;
}

int pf_bench_plan_step(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                       double *step_ms, double *wall_s, char *shape, size_t len)
{
    pf_bench_drive_t d;
    pf_bench_drive(g, c, o, 0, 1, &d);
    *wall_s = d.wall_s;
    *step_ms = 0;
    if (d.status == PF_OK && d.plan->simulated_step_ms > 0) {
        const pf_plan_t *p = d.plan;
        *step_ms = p->simulated_step_ms;
        int C = pf_plan_context_parallel(p), E = p->blocks.expert_parallel;
        char rc[96]; /* per stage where they differ */
        pf_plan_recompute_describe(p, rc, sizeof rc);
        snprintf(shape, len, "t%d p%d d%d v%d%s %s z%d", p->tensor_parallel, p->stages,
                 p->replicas / C, p->blocks.present ? p->blocks.virtual_stages : 1,
                 p->blocks.sequence_parallel ? " sp" : "", rc, p->train.zero);
        if (C > 1 || E > 1) /* d above is the data-parallel size, replicas / C */
            snprintf(shape + strlen(shape), len - strlen(shape), " cp%d ep%d", C, E > 1 ? E : 1);
        if (p->blocks.present) /* the block-level search's own estimate beside the simulator's */
            snprintf(shape + strlen(shape), len - strlen(shape),
                     " (analytic %.0f ms, simulated %.0f)", p->blocks.analytic_step_ms,
                     p->simulated_step_ms);
    } else {
        snprintf(shape, len, "no plan (%.120s)", d.err);
    }
    pf_bench_drive_free(&d);
    return *step_ms > 0 ? 0 : -1;
}

/* ---- actors ---- */

zactor_t *pf_bench_broker_start(const char *bind, char *ep, size_t len)
{
    return pf_bench_broker_start_seam(bind, NULL, ep, len);
}

zactor_t *pf_bench_broker_start_seam(const char *bind, const pf_testseam_t *seam, char *ep,
                                     size_t len)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = bind;
    o.quiet = 1;
    o.testseam = seam;
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

zactor_t *pf_bench_worker_start(const char *ep, int credits, int threads, const char *name)
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

void pf_bench_broker_stats(zactor_t *b, double *wall_s, double *busy_s, long long *dispatched)
{
    zstr_send(b, "STATS");
    char *s = zstr_recv(b);
    double wall = 0, busy = 0;
    long long in = 0, out = 0, bad = 0, disp = 0;
    if (s)
        sscanf(s, "STATS %lf %lf %lld %lld %lld %lld", &wall, &busy, &in, &out, &bad, &disp);
    free(s);
    if (wall_s)
        *wall_s = wall;
    if (busy_s)
        *busy_s = busy;
    if (dispatched)
        *dispatched = disp;
}

pf_bench_run_t pf_bench_client_search(const char *ep, const pf_graph_t *g, const pf_cluster_t *c,
                                      const pf_search_opts_t *o)
{
    pf_bench_run_t r = {0};
    char id[64];
    pf_client_t *cl = pf_client_new(ep, 60000, r.err, sizeof r.err);
    if (!cl)
        return r;
    double t0 = pf_now_s();
    Planfarm__RequestStatus *st;
    if (pf_client_submit(cl, g, c, o, "bench", &st, r.err, sizeof r.err) != PF_OK)
        goto done;
    snprintf(id, sizeof id, "%s", st->request_id);
    planfarm__request_status__free_unpacked(st, NULL);
    for (;;) {
        if (pf_client_status(cl, id, &st, r.err, sizeof r.err) != PF_OK)
            goto done;
        Planfarm__RequestState state = st->state;
        r.jobs = st->jobs_issued;
        r.objective_ms = st->best_objective_ms;
        planfarm__request_status__free_unpacked(st, NULL);
        if (pf_wire_request_state_ended(state)) {
            r.ok = state == PLANFARM__REQUEST_STATE__REQ_DONE;
            if (!r.ok)
                snprintf(r.err, sizeof r.err, "request %s", pf_wire_request_state_name(state));
            break;
        }
        zclock_sleep(10);
    }
    r.wall_s = pf_now_s() - t0;
done:
    pf_client_destroy(&cl);
    return r;
}

/* ---- processes ---- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static pid_t spawn(char *const argv[])
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, 1);
        dup2(null, 2);
    }
    execv(argv[0], argv);
    _exit(127);
}

/* GET /metrics; the body (malloc'd) or NULL. */
static char *http_metrics(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return NULL;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        goto done;
    static const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1))
        goto done;
    for (;;) {
        if (len + 4096 + 1 > cap && pf_grow((void **)&buf, &cap, len + 4096 + 1, 1) != PF_OK)
            goto done;
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    if (buf)
        buf[len] = '\0';
done:
    close(fd);
    return buf;
}

double pf_bench_farm_metric(const pf_bench_farm_t *f, const char *series)
{
    char *body = http_metrics(f->http_port);
    double v = NAN;
    size_t n = strlen(series);
    for (char *line = body; line && *line;) {
        char *next = strchr(line, '\n');
        if (strncmp(line, series, n) == 0 && line[n] == ' ') {
            v = atof(line + n + 1);
            break;
        }
        line = next ? next + 1 : NULL;
    }
    free(body);
    return v;
}

int pf_bench_farm_start(pf_bench_farm_t *f, int nworkers, int threads, int credits)
{
    memset(f, 0, sizeof *f);
    const char *bin = getenv("PF_BIN");
    char path[512], bind[64], http[64], thr[16], cred[16], name[16];
    snprintf(path, sizeof path, "%s", bin ? bin : "./planfarm");
    int port = free_port(), hport = free_port();
    if (port < 0 || hport < 0 || nworkers < 1 || nworkers > 16)
        return -1;
    snprintf(f->endpoint, sizeof f->endpoint, "tcp://127.0.0.1:%d", port);
    snprintf(bind, sizeof bind, "%s", f->endpoint);
    snprintf(http, sizeof http, "127.0.0.1:%d", hport);
    f->http_port = hport;
    char *bargv[] = {path, "broker", "--bind", bind, "--http", http, "--journal", "none", NULL};
    if ((f->broker = spawn(bargv)) < 0)
        return -1;
    snprintf(thr, sizeof thr, "%d", threads);
    snprintf(cred, sizeof cred, "%d", credits);
    for (int i = 0; i < nworkers; i++) {
        snprintf(name, sizeof name, "bench-%d", i + 1);
        char *wargv[] = {path, "worker", "--connect", bind, "--threads", thr,
                         "--credits", cred, "--name", name, NULL};
        if ((f->workers[i] = spawn(wargv)) < 0) {
            pf_bench_farm_stop(f);
            return -1;
        }
        f->nworkers = i + 1;
    }
    for (double t0 = pf_now_s(); pf_now_s() - t0 < 30;) {
        if (pf_bench_farm_metric(f, "planfarm_workers") == nworkers)
            return 0;
        zclock_sleep(50);
    }
    pf_bench_farm_stop(f);
    return -1;
}

void pf_bench_farm_stop(pf_bench_farm_t *f)
{
    for (int i = 0; i < f->nworkers; i++)
        if (f->workers[i] > 0) {
            kill(f->workers[i], SIGTERM);
            waitpid(f->workers[i], NULL, 0);
            f->workers[i] = 0;
        }
    if (f->broker > 0) {
        kill(f->broker, SIGTERM);
        waitpid(f->broker, NULL, 0);
        f->broker = 0;
    }
    f->nworkers = 0;
}
