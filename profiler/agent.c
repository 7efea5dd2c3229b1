#include "profiler/agent.h"
#include "planner/core/util.h"
#include "profiler/cpu_probes.h"
#include "profiler/cuda_loader.h"
#include "profiler/local.h"
#include "profiler/record.h"
#include "proto/peer_io.h"
#include "proto/profile_codec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_REPS 10
#define DEFAULT_TIMEOUT_S 10.0
#define DEFAULT_STREAM_BYTES ((uint64_t)256 << 20)

struct pf_agent {
    pf_agent_opts_t o;
    char endpoint[256], name[PF_REC_NAME], host[PF_REC_NAME], echo_bind[256], advertise[128];
    pf_cuda_loader_t *cuda; /* NULL: CPU probes only */
    char cuda_status[256];
    int ngpus;
    zsock_t *dealer;
    pf_curve_client_t keys;
    pf_cpu_probes_echo_t *echo;
    int connected, silent_ticks, backoff_ms, warned;
    double next_heartbeat, reconnect_at;
    pf_peer_io_pack_buf_t pack;
    pf_agent_stats_t st;
};

void pf_agent_opts_init(pf_agent_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->echo_bind = "tcp://0.0.0.0:*";
    o->heartbeat_ms = 1000;
    o->liveness = 5;
    o->reconnect_max_ms = 32000;
}

static double hb_s(const pf_agent_t *a) { return a->o.heartbeat_ms / 1000.0; }

static int send_msg(pf_agent_t *a, pf_wire_msg_t kind, const ProtobufCMessage *m)
{
    return a->dealer ? pf_peer_io_send(zsock_resolve(a->dealer), NULL, 0, kind, m, &a->pack)
                     : PF_ERR;
}

/* ---- tasks ---- */

/* The host this agent speaks for, and its name as the measurer, go into every record of its
 * own host (probes stamp them with gethostname, which two agents on one machine share). */
static void own_records(pf_agent_t *a, pf_profile_codec_measurement_t *m)
{
    for (int i = 0; i < m->ndev; i++) {
        pf_record_name(m->dev[i].host, a->host);
        pf_record_name(m->dev[i].measured_by, a->name);
    }
    for (int i = 0; i < m->nlink; i++) {
        pf_record_name(m->link[i].src_host, a->host);
        pf_record_name(m->link[i].dst_host, a->host);
        pf_record_name(m->link[i].measured_by, a->name);
    }
}

static int task_local(pf_agent_t *a, const pf_profile_codec_task_t *t,
                      pf_profile_codec_measurement_t *m, char *err, size_t errlen)
{
    int rc;
    if (a->cuda && a->ngpus > 0) {
        pf_local_opts_t lo;
        pf_local_report_t rep;
        pf_local_opts_default(&lo);
        lo.nsizes = t->nsizes;
        memcpy(lo.sizes, t->sizes, sizeof lo.sizes);
        if (t->reps > 0)
            lo.reps = t->reps;
        pf_assemble_t *as = pf_assemble_new(a->host, err, errlen);
        if (!as)
            return PF_ERR;
        rc = pf_local_profile(&lo, a->cuda, NULL, NULL, NULL, as, &rep, err, errlen);
        int nd = pf_assemble_ndevices(as), nl = pf_assemble_nlinks(as);
        if (rc == PF_OK && ((nd && !(m->dev = calloc((size_t)nd, sizeof *m->dev))) ||
                            (nl && !(m->link = calloc((size_t)nl, sizeof *m->link)))))
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        for (int i = 0; rc == PF_OK && i < nd; i++)
            m->dev[m->ndev++] = *pf_assemble_device(as, i);
        for (int i = 0; rc == PF_OK && i < nl; i++)
            m->link[m->nlink++] = pf_assemble_link(as, i)->rec;
        pf_assemble_destroy(&as);
        if (rc == PF_OK)
            own_records(a, m);
        return rc;
    }
    double gbps = 0;
    uint64_t stream = t->stream_bytes ? t->stream_bytes : DEFAULT_STREAM_BYTES;
    if ((rc =
             pf_cpu_probes_mem_gbps((size_t)stream, t->reps > 0 ? t->reps : 3, &gbps, err, errlen)))
        return rc;
    if (!(m->dev = calloc(1, sizeof *m->dev)))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    pf_cpu_probes_device_rec(&m->dev[0], gbps);
    m->ndev = 1;
    own_records(a, m);
    return PF_OK;
}

/* "tcp://0.0.0.0:41234" -> "tcp://<advertise>:41234" */
static int advertised(const pf_agent_t *a, const char *bound, char *out, size_t len, char *err,
                      size_t errlen)
{
    const char *port = strrchr(bound, ':');
    if (!port || strncmp(bound, "tcp://", 6) != 0)
        return pf_fail(err, errlen, PF_ERR, "echo bound to '%s', not a tcp endpoint", bound);
    if ((size_t)snprintf(out, len, "tcp://%s%s", a->advertise, port) >= len)
        return pf_fail(err, errlen, PF_ERR, "echo endpoint too long");
    return PF_OK;
}

static int task_echo(pf_agent_t *a, pf_profile_codec_measurement_t *m, char *err, size_t errlen)
{
    pf_cpu_probes_echo_destroy(&a->echo);
    if (!(a->echo = pf_cpu_probes_echo_new(a->echo_bind, err, errlen)))
        return PF_ERR;
    return advertised(a, pf_cpu_probes_echo_endpoint(a->echo), m->echo_endpoint,
                      sizeof m->echo_endpoint, err, errlen);
}

static int task_pingpong(pf_agent_t *a, const pf_profile_codec_task_t *t,
                         pf_profile_codec_measurement_t *m, char *err, size_t errlen)
{
    double sizes[PF_SWEEP_MAX];
    int n = t->nsizes;
    if (n > 0) {
        memcpy(sizes, t->sizes, (size_t)n * sizeof *sizes);
    } else { /* the --local default: 4 B .. 16 MiB by x4 */
        for (n = 0; n < 12; n++)
            sizes[n] = 4.0 * (double)(1 << (2 * n));
    }
    if (!(m->link = calloc(1, sizeof *m->link)))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    int rc = pf_cpu_probes_pingpong_rec(
        t->peer_endpoint, a->host, t->peer_host, sizes, n, t->reps > 0 ? t->reps : DEFAULT_REPS,
        t->timeout_s > 0 ? t->timeout_s : DEFAULT_TIMEOUT_S, m->link, err, errlen);
    if (rc == PF_OK) {
        m->nlink = 1;
        pf_record_name(m->link[0].measured_by, a->name);
    }
    return rc;
}

static void on_profile(pf_agent_t *a, const uint8_t *data, size_t len)
{
    char err[256];
    pf_profile_codec_task_t t;
    pf_profile_codec_measurement_t m;
    memset(&m, 0, sizeof m);
    if (pf_profile_codec_decode_task(data, len, &t, err, sizeof err) != PF_OK) {
        a->st.malformed++;
        pf_peer_io_dropped(&a->warned, a->name, "the broker", "%s", err);
        return;
    }
    if (t.kind == PLANFARM__PROFILE_TASK_KIND__PROFILE_ECHO_STOP) {
        pf_cpu_probes_echo_destroy(&a->echo);
        return;
    }
    m.round = t.round;
    m.task = t.task;
    int rc;
    switch (t.kind) {
    case PLANFARM__PROFILE_TASK_KIND__PROFILE_LOCAL: rc = task_local(a, &t, &m, err, sizeof err); break;
    case PLANFARM__PROFILE_TASK_KIND__PROFILE_ECHO: rc = task_echo(a, &m, err, sizeof err); break;
    default: rc = task_pingpong(a, &t, &m, err, sizeof err); break;
    }
    if (rc != PF_OK) {
        pf_profile_codec_measurement_t failed = {.round = t.round, .task = t.task};
        snprintf(failed.error, sizeof failed.error, "%.60s: %.180s", a->name, err);
        pf_profile_codec_measurement_clear(&m);
        m = failed;
        a->st.tasks_failed++;
        zsys_warning("agent %s: task %u failed: %s", a->name, t.task, err);
    } else {
        a->st.tasks_done++;
    }
    pf_arena_t *arena = pf_arena_new();
    Planfarm__Measurement *pb = arena ? pf_profile_codec_measurement_to_pb(arena, &m) : NULL;
    if (pb)
        send_msg(a, PF_MSG_MEASUREMENT, &pb->base);
    else
        zsys_error("agent %s: out of memory encoding a measurement", a->name);
    pf_arena_destroy(&arena);
    pf_profile_codec_measurement_clear(&m);
    /* the probe held the thread: the broker's silence meanwhile is not its fault */
    a->silent_ticks = 0;
    a->next_heartbeat = pf_clock_now(&a->o.clock);
}

/* ---- connection ---- */

static void disconnect(pf_agent_t *a, const char *why)
{
    zsys_warning("agent %s: %s; reconnecting in %.1f s", a->name, why, a->backoff_ms / 1000.0);
    zsock_destroy(&a->dealer);
    pf_cpu_probes_echo_destroy(&a->echo);
    a->connected = 0;
    a->reconnect_at = pf_clock_now(&a->o.clock) + a->backoff_ms / 1000.0;
    a->backoff_ms = a->backoff_ms * 2 > a->o.reconnect_max_ms ? a->o.reconnect_max_ms
                                                               : a->backoff_ms * 2;
    a->st.reconnects++;
}

static int gpu_records(pf_agent_t *a, pf_record_device_t **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (!a->cuda || a->ngpus <= 0)
        return PF_OK;
    const pf_cuda_api_t *api = pf_cuda_loader_api(a->cuda);
    if (!(*out = calloc((size_t)a->ngpus, sizeof **out)))
        return PF_ERR;
    for (int g = 0; g < a->ngpus; g++) {
        pf_gpu_info_t info;
        char err[128];
        if (api->device_info(g, &info, err, sizeof err) != PF_OK)
            continue;
        pf_record_device_t *d = &(*out)[(*n)++];
        pf_record_stamp(d->measured_by, &d->when_unix_s);
        pf_record_name(d->host, a->host);
        pf_record_name(d->name, info.name);
        d->index = g;
        d->source = PF_SRC_GPU;
        d->mem_bytes = info.mem_bytes;
        d->sm_count = info.sm_count;
        d->clock_mhz = info.sm_clock_mhz;
    }
    return PF_OK;
}

static int connect_broker(pf_agent_t *a)
{
    a->dealer = zsock_new(ZMQ_DEALER);
    if (!a->dealer)
        return PF_ERR;
    zsock_set_linger(a->dealer, 0);
    pf_curve_client_apply(&a->keys, a->dealer);
    if (zsock_connect(a->dealer, "%s", a->endpoint) < 0) {
        zsock_destroy(&a->dealer);
        return PF_ERR;
    }
    pf_profile_codec_agent_info_t info;
    memset(&info, 0, sizeof info);
    memcpy(info.host, a->host, sizeof info.host);
    memcpy(info.name, a->name, sizeof info.name);
    snprintf(info.cuda_status, sizeof info.cuda_status, "%s", a->cuda_status);
    int rc = gpu_records(a, &info.dev, &info.ndev);
    pf_arena_t *arena = pf_arena_new();
    Planfarm__AgentRegister *m =
        rc == PF_OK && arena ? pf_profile_codec_register_to_pb(arena, &info) : NULL;
    rc = m ? send_msg(a, PF_MSG_REGISTER, &m->base) : PF_ERR;
    pf_arena_destroy(&arena);
    free(info.dev);
    if (rc != PF_OK) {
        zsock_destroy(&a->dealer);
        return PF_ERR;
    }
    a->connected = 1;
    a->silent_ticks = 0;
    a->warned = 0;
    a->next_heartbeat = pf_clock_now(&a->o.clock) + hb_s(a);
    return PF_OK;
}

static void on_message(pf_agent_t *a, zmq_msg_t *parts, int n)
{
    char err[128];
    pf_wire_msg_t kind;
    if (n != 2) {
        a->st.malformed++;
        pf_peer_io_dropped(&a->warned, a->name, "the broker", "%d frames, expected 2", n);
        return;
    }
    if (pf_wire_parse_header(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &kind, err,
                             sizeof err) != PF_OK) {
        a->st.malformed++;
        pf_peer_io_dropped(&a->warned, a->name, "the broker", "%s", err);
        return;
    }
    const uint8_t *data = zmq_msg_data(&parts[1]);
    size_t len = zmq_msg_size(&parts[1]);
    a->silent_ticks = 0;
    if (kind != PF_MSG_BYE) /* as the worker: a serving broker resets the back-off */
        a->backoff_ms = a->o.heartbeat_ms;
    switch (kind) {
    case PF_MSG_HEARTBEAT: break;
    case PF_MSG_PROFILE: on_profile(a, data, len); break;
    case PF_MSG_BYE: {
        Planfarm__Bye *m = planfarm__bye__unpack(NULL, len, data);
        char why[200];
        snprintf(why, sizeof why, "broker said BYE (%.150s)", m && m->reason ? m->reason : "");
        planfarm__bye__free_unpacked(m, NULL);
        disconnect(a, why);
        break;
    }
    default:
        a->st.malformed++;
        pf_peer_io_dropped(&a->warned, a->name, "the broker", "%s is not sent to an agent",
                           pf_wire_msg_name(kind));
        break;
    }
}

/* Until the next heartbeat or reconnect, at most one interval: a test's clock may jump, and
 * the loop must look at it again. */
static long poll_timeout_ms(const pf_agent_t *a)
{
    double now = pf_clock_now(&a->o.clock);
    double until = a->connected ? a->next_heartbeat : a->reconnect_at;
    long timeout_ms = (long)((until - now) * 1000) + 1;
    if (timeout_ms > a->o.heartbeat_ms)
        timeout_ms = a->o.heartbeat_ms;
    return timeout_ms < 0 ? 0 : timeout_ms;
}

/* Every message the dealer holds. */
static void drain_dealer(pf_agent_t *a)
{
    zmq_msg_t parts[2];
    int got;
    while (a->dealer && (got = pf_wire_recv(zsock_resolve(a->dealer), parts, 2)) > 0) {
        on_message(a, parts, got);
        pf_wire_close(parts, got, 2);
    }
}

/* Reconnect when due, give up on a silent broker, or send the heartbeat. */
static void tick(pf_agent_t *a)
{
    double now = pf_clock_now(&a->o.clock);
    if (!a->connected && now >= a->reconnect_at) {
        if (connect_broker(a) != PF_OK)
            disconnect(a, "cannot create a socket");
    } else if (a->connected && now >= a->next_heartbeat &&
               a->silent_ticks++ >= a->o.liveness) {
        disconnect(a, "broker silent");
    } else if (a->connected && now >= a->next_heartbeat) {
        Planfarm__Heartbeat hb = PLANFARM__HEARTBEAT__INIT;
        send_msg(a, PF_MSG_HEARTBEAT, &hb.base);
        a->next_heartbeat = now + hb_s(a);
    }
}

static int loop(pf_agent_t *a, zsock_t *pipe)
{
    if (connect_broker(a) != PF_OK) {
        zsys_error("agent %s: cannot connect to %s", a->name, a->endpoint);
        return PF_ERR;
    }
    pf_peer_io_info(a->o.quiet, "agent %s: host %s, %d GPU%s%s%s, connected to %s", a->name,
                    a->host, a->ngpus, a->ngpus == 1 ? "" : "s", a->cuda_status[0] ? "; " : "",
                    a->cuda_status, a->endpoint);
    for (;;) {
        zmq_pollitem_t items[2];
        int n = 0, at_pipe = -1, at_dealer = -1;
        if (pipe) {
            items[n] = (zmq_pollitem_t){zsock_resolve(pipe), 0, ZMQ_POLLIN, 0};
            at_pipe = n++;
        }
        if (a->dealer) {
            items[n] = (zmq_pollitem_t){zsock_resolve(a->dealer), 0, ZMQ_POLLIN, 0};
            at_dealer = n++;
        }
        long timeout_ms = poll_timeout_ms(a);
        int rc = n ? zmq_poll(items, n, timeout_ms) : (zclock_sleep((int)timeout_ms), 0);
        if (rc < 0 && errno != EINTR)
            return PF_ERR;
        if (!pipe && zsys_interrupted) {
            pf_peer_io_info(a->o.quiet, "agent %s: interrupted, leaving", a->name);
            return PF_OK;
        }
        if (rc > 0 && at_pipe >= 0 && (items[at_pipe].revents & ZMQ_POLLIN)) {
            char *cmd = zstr_recv(pipe);
            bool stop = !cmd || streq(cmd, "$TERM");
            free(cmd);
            if (stop)
                return PF_OK;
        }
        if (rc > 0 && at_dealer >= 0 && (items[at_dealer].revents & ZMQ_POLLIN))
            drain_dealer(a);
        tick(a);
    }
}

/* ---- public ---- */

pf_agent_t *pf_agent_new(const pf_agent_opts_t *opts, char *err, size_t errlen)
{
    pf_agent_t *a = calloc(1, sizeof *a);
    if (!a) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    a->o = *opts;
    if (!a->o.endpoint || !a->o.endpoint[0] || strlen(a->o.endpoint) >= sizeof a->endpoint) {
        pf_fail(err, errlen, PF_EINPUT, "agent: no broker endpoint, or one too long");
        goto fail;
    }
    if (a->o.heartbeat_ms <= 0 || a->o.liveness <= 0) {
        pf_fail(err, errlen, PF_EINPUT, "agent: heartbeat and liveness must be positive");
        goto fail;
    }
    if (a->o.reconnect_max_ms < a->o.heartbeat_ms)
        a->o.reconnect_max_ms = a->o.heartbeat_ms;
    snprintf(a->endpoint, sizeof a->endpoint, "%s", a->o.endpoint);
    if (pf_curve_client_init(&a->keys, &a->o.curve, "agent", a->endpoint, err, errlen) != PF_OK)
        goto fail;
    char me[PF_REC_NAME];
    double when;
    pf_record_stamp(me, &when);
    const char *host = a->o.host && a->o.host[0] ? a->o.host : me;
    if (strlen(host) >= sizeof a->host) {
        pf_fail(err, errlen, PF_EINPUT, "agent: host name '%s' longer than %d bytes", host,
                PF_REC_NAME - 1);
        goto fail;
    }
    pf_record_name(a->host, host);
    if (a->o.name && a->o.name[0]) {
        if (strlen(a->o.name) >= sizeof a->name) {
            pf_fail(err, errlen, PF_EINPUT, "agent: name longer than %d bytes", PF_REC_NAME - 1);
            goto fail;
        }
        pf_record_name(a->name, a->o.name);
    } else {
        snprintf(a->name, sizeof a->name, "%.40s:%d", a->host, (int)getpid());
    }
    const char *adv = a->o.advertise && a->o.advertise[0] ? a->o.advertise : a->host;
    snprintf(a->echo_bind, sizeof a->echo_bind, "%s",
             a->o.echo_bind && a->o.echo_bind[0] ? a->o.echo_bind : "tcp://0.0.0.0:*");
    if (strlen(adv) >= sizeof a->advertise) {
        pf_fail(err, errlen, PF_EINPUT, "agent: advertised address too long");
        goto fail;
    }
    snprintf(a->advertise, sizeof a->advertise, "%s", adv);
    a->backoff_ms = a->o.heartbeat_ms;
    if (a->o.no_cuda) {
        snprintf(a->cuda_status, sizeof a->cuda_status, "CUDA probes off (--no-cuda)");
    } else if ((a->cuda = pf_cuda_loader_open(a->cuda_status, sizeof a->cuda_status))) {
        char cerr[128];
        if (pf_cuda_loader_api(a->cuda)->device_count(&a->ngpus, cerr, sizeof cerr) != PF_OK)
            a->ngpus = 0;
        if (a->ngpus == 0) {
            snprintf(a->cuda_status, sizeof a->cuda_status, "no GPU found");
            pf_cuda_loader_close(&a->cuda);
        } else {
            a->cuda_status[0] = '\0';
        }
    }
    return a;
fail:
    pf_agent_destroy(&a);
    return NULL;
}

void pf_agent_destroy(pf_agent_t **ap)
{
    if (!ap || !*ap)
        return;
    pf_agent_t *a = *ap;
    if (a->connected) {
        Planfarm__Bye m = PLANFARM__BYE__INIT;
        m.reason = "agent leaving";
        send_msg(a, PF_MSG_BYE, &m.base);
    }
    pf_cpu_probes_echo_destroy(&a->echo);
    zsock_destroy(&a->dealer);
    pf_cuda_loader_close(&a->cuda);
    pf_curve_client_clear(&a->keys);
    pf_peer_io_pack_buf_free(&a->pack);
    free(a);
    *ap = NULL;
}

int pf_agent_run(pf_agent_t *a) { return loop(a, NULL); }

void pf_agent_get_stats(const pf_agent_t *a, pf_agent_stats_t *st) { *st = a->st; }

void pf_agent_actor(zsock_t *pipe, void *args)
{
    char err[512] = "";
    pf_agent_t *a = pf_agent_new(args, err, sizeof err);
    zsock_signal(pipe, 0);
    if (!a) {
        pf_peer_io_actor_failed(pipe, err);
        return;
    }
    zstr_sendx(pipe, "OK", NULL);
    loop(a, pipe);
    pf_agent_destroy(&a);
}
