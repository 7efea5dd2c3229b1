#include "profiler/cpu_probes.h"
#include "planner/core/util.h"

#include <czmq.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pf_cpu_probes_mem_gbps(size_t bytes, int reps, double *gbps, char *err, size_t errlen)
{
    size_t n = bytes / sizeof(double);
    *gbps = 0;
    if (n == 0 || reps < 1)
        return pf_fail(err, errlen, PF_EINPUT, "memory probe: %zu bytes, %d repetitions", bytes,
                       reps);
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return pf_fail(err, errlen, PF_ERR, "memory probe: cannot allocate 2 x %zu bytes", bytes);
    }
    /* First touch by the threads that will copy, so pages land on their NUMA nodes. */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        a[i] = 0;
        b[i] = (double)i;
    }
    double best_s = 0;
    for (int r = 0; r <= reps; r++) { /* repetition 0 warms up */
        double t0 = pf_now_s();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            a[i] = b[i];
        double dt = pf_now_s() - t0;
        if (r > 0 && (best_s == 0 || dt < best_s))
            best_s = dt;
    }
    volatile double sink = a[n / 2]; /* the copy must not be optimised away */
    (void)sink;
    free(a);
    free(b);
    *gbps = best_s > 0 ? 2.0 * (double)(n * sizeof(double)) / best_s / 1e9 : 0;
    return PF_OK;
}

void pf_cpu_probes_device_rec(pf_record_device_t *d, double mem_gbps)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    memset(d, 0, sizeof *d);
    pf_record_stamp(d->measured_by, &d->when_unix_s);
    pf_record_name(d->host, d->measured_by);
    pf_record_name(d->name, "cpu");
    d->index = 0;
    d->source = PF_SRC_CPU;
    d->mem_bytes = pages > 0 && page > 0 ? (double)pages * (double)page : 1.0;
    d->mem_gbps = mem_gbps;
}

struct pf_cpu_probes_echo {
    zactor_t *actor;
    char *endpoint;
};

/* The echo thread: signals that it runs (zactor_new waits for that), tells the caller its
 * endpoint (or "!reason"), then answers until $TERM. */
static void echo_actor(zsock_t *pipe, void *args)
{
    zsock_signal(pipe, 0);
    zsock_t *rep = zsock_new(ZMQ_REP);
    int port = rep ? zsock_bind(rep, "%s", (const char *)args) : -1;
    if (port < 0) {
        zstr_sendf(pipe, "!cannot bind %s: %s", (const char *)args, zmq_strerror(zmq_errno()));
        zsock_destroy(&rep);
        return;
    }
    zstr_send(pipe, zsock_endpoint(rep));
    zpoller_t *poller = zpoller_new(pipe, rep, NULL);
    while (poller) {
        zsock_t *which = zpoller_wait(poller, -1);
        if (which == rep) {
            zmsg_t *m = zmsg_recv(rep);
            if (m)
                zmsg_send(&m, rep);
            continue;
        }
        if (which == pipe) {
            char *cmd = zstr_recv(pipe);
            int term = !cmd || !strcmp(cmd, "$TERM");
            zstr_free(&cmd);
            if (term)
                break;
            continue;
        }
        break; /* interrupted */
    }
    zpoller_destroy(&poller);
    zsock_destroy(&rep);
}

pf_cpu_probes_echo_t *pf_cpu_probes_echo_new(const char *bind_endpoint, char *err, size_t errlen)
{
    pf_cpu_probes_echo_t *e = calloc(1, sizeof *e);
    if (!e) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    e->actor = zactor_new(echo_actor, (void *)bind_endpoint);
    char *ep = e->actor ? zstr_recv(e->actor) : NULL;
    if (!ep || ep[0] == '!') {
        pf_fail(err, errlen, PF_ERR, "echo: %s", ep ? ep + 1 : "cannot start its thread");
        zstr_free(&ep);
        pf_cpu_probes_echo_destroy(&e);
        return NULL;
    }
    e->endpoint = ep;
    return e;
}

const char *pf_cpu_probes_echo_endpoint(const pf_cpu_probes_echo_t *e) { return e->endpoint; }

void pf_cpu_probes_echo_destroy(pf_cpu_probes_echo_t **ep)
{
    if (!ep || !*ep)
        return;
    zactor_destroy(&(*ep)->actor);
    zstr_free(&(*ep)->endpoint);
    free(*ep);
    *ep = NULL;
}

int pf_cpu_probes_pingpong(const char *connect_endpoint, const double *bytes, int nsizes, int reps,
                           double timeout_s, double *ms_out, char *err, size_t errlen)
{
    int rc = PF_OK;
    double *rt = NULL;
    zsock_t *req = NULL;
    if (nsizes < 1 || nsizes > PF_SWEEP_MAX || reps < 1 || reps > 100000 || !(timeout_s > 0))
        return pf_fail(err, errlen, PF_EINPUT, "ping-pong: %d sizes, %d repetitions", nsizes,
                       reps);
    for (int i = 0; i < nsizes; i++)
        if (!(bytes[i] >= 1 && bytes[i] <= 1073741824.0))
            return pf_fail(err, errlen, PF_EINPUT, "ping-pong: size %g bytes out of 1 .. 1 GiB",
                           bytes[i]);
    if (!(rt = malloc((size_t)reps * sizeof *rt)) || !(req = zsock_new(ZMQ_REQ))) {
        rc = pf_fail(err, errlen, PF_ERR, "ping-pong: out of memory");
        goto fail;
    }
    zsock_set_rcvtimeo(req, (int)(timeout_s * 1000));
    zsock_set_linger(req, 0);
    if (zsock_connect(req, "%s", connect_endpoint) != 0) {
        rc = pf_fail(err, errlen, PF_EINPUT, "ping-pong: cannot connect to %s", connect_endpoint);
        goto fail;
    }
    for (int i = 0; i < nsizes; i++) {
        size_t len = (size_t)bytes[i];
        for (int r = -1; r < reps; r++) { /* r = -1 warms up the connection and the buffers */
            zframe_t *f = zframe_new(NULL, len);
            if (!f) {
                rc = pf_fail(err, errlen, PF_ERR, "ping-pong: out of memory");
                goto fail;
            }
            memset(zframe_data(f), 0x5a, len);
            double t0 = pf_now_s();
            if (zframe_send(&f, req, 0) != 0) {
                zframe_destroy(&f);
                rc = pf_fail(err, errlen, PF_ERR, "ping-pong: send to %s failed",
                             connect_endpoint);
                goto fail;
            }
            zframe_t *back = zframe_recv(req);
            double dt = pf_now_s() - t0;
            if (!back) {
                rc = pf_fail(err, errlen, PF_ERR, "ping-pong: no answer from %s within %g s",
                             connect_endpoint, timeout_s);
                goto fail;
            }
            size_t got = zframe_size(back);
            zframe_destroy(&back);
            if (got != len) {
                rc = pf_fail(err, errlen, PF_ERR, "ping-pong: %s answered %zu bytes for %zu",
                             connect_endpoint, got, len);
                goto fail;
            }
            if (r >= 0)
                rt[r] = dt;
        }
        /* The fastest repetition: other processes on either host only add time (a preempted
         * echo, a late wake-up), never take it away, so the minimum is the estimate of the
         * link's own cost least moved by load; a median of a few runs on a busy host can make
         * a larger message look faster than a smaller one and the postal fit fail. */
        double best = rt[0];
        for (int r = 1; r < reps; r++)
            best = fmin(best, rt[r]);
        ms_out[i] = best * 1e3 / 2;
    }
fail:
    zsock_destroy(&req);
    free(rt);
    return rc;
}

int pf_cpu_probes_pingpong_rec(const char *connect_endpoint, const char *src_host,
                               const char *dst_host, const double *bytes, int nsizes, int reps,
                               double timeout_s, pf_record_link_t *rec, char *err, size_t errlen)
{
    memset(rec, 0, sizeof *rec);
    int rc = pf_cpu_probes_pingpong(connect_endpoint, bytes, nsizes, reps, timeout_s, rec->ms, err,
                                    errlen);
    if (rc != PF_OK)
        return rc;
    pf_record_name(rec->src_host, src_host);
    pf_record_name(rec->dst_host, dst_host);
    rec->src_index = rec->dst_index = PF_END_HOST;
    rec->topo_level = -1;
    rec->source = PF_SRC_CPU;
    pf_record_name(rec->method, "zmq_tcp_pingpong");
    pf_record_stamp(rec->measured_by, &rec->when_unix_s);
    rec->nsizes = nsizes;
    memcpy(rec->bytes, bytes, (size_t)nsizes * sizeof *bytes);
    return PF_OK;
}
