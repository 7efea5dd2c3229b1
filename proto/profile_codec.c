#include "proto/profile_codec.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pf_profile_codec_measurement_clear(pf_profile_codec_measurement_t *m)
{
    if (!m)
        return;
    free(m->dev);
    free(m->link);
    memset(m, 0, sizeof *m);
}

void pf_profile_codec_agent_info_clear(pf_profile_codec_agent_info_t *a)
{
    if (!a)
        return;
    free(a->dev);
    memset(a, 0, sizeof *a);
}

/* A protobuf string into a fixed field of `cap` bytes: it must fit with its NUL. protobuf-c
 * stops at the first NUL of a string, so a string with one inside arrives cut short, never
 * unterminated; the length check is what guards the field. */
static int copy_str(char *dst, size_t cap, const char *src, const char *what, char *err,
                    size_t errlen)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %zu bytes, at most %zu", what, n, cap - 1);
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
    return PF_OK;
}

/* Source enums travel as plain numbers: anything but 0 and 1 is refused, not cast. */
static int copy_source(uint32_t v, pf_record_source_t *out, const char *what, char *err,
                       size_t errlen)
{
    if (v != PF_SRC_CPU && v != PF_SRC_GPU)
        return pf_fail(err, errlen, PF_EINPUT, "%s: source %u, expected 0 (cpu) or 1 (gpu)",
                       what, v);
    *out = (pf_record_source_t)v;
    return PF_OK;
}

/* ---- records ---- */

Planfarm__DeviceRecord *pf_profile_codec_device_to_pb(pf_arena_t *a, const pf_record_device_t *d)
{
    Planfarm__DeviceRecord *m = PF_ANEW(a, Planfarm__DeviceRecord, 1);
    if (!m)
        return NULL;
    planfarm__device_record__init(m);
    m->host = (char *)d->host;
    m->index = d->index;
    m->name = (char *)d->name;
    m->source = (uint32_t)d->source;
    m->mem_bytes = d->mem_bytes;
    m->tflops = d->tflops;
    m->mem_gbps = d->mem_gbps;
    m->sm_count = d->sm_count;
    m->clock_mhz = d->clock_mhz;
    m->measured_by = (char *)d->measured_by;
    m->when_unix_s = d->when_unix_s;
    return m;
}

Planfarm__LinkRecord *pf_profile_codec_link_to_pb(pf_arena_t *a, const pf_record_link_t *l)
{
    Planfarm__LinkRecord *m = PF_ANEW(a, Planfarm__LinkRecord, 1);
    if (!m)
        return NULL;
    planfarm__link_record__init(m);
    m->src_host = (char *)l->src_host;
    m->src_index = l->src_index;
    m->dst_host = (char *)l->dst_host;
    m->dst_index = l->dst_index;
    m->source = (uint32_t)l->source;
    m->method = (char *)l->method;
    m->measured_by = (char *)l->measured_by;
    m->when_unix_s = l->when_unix_s;
    m->topo_level = l->topo_level;
    m->nvlinks = l->nvlinks;
    m->bytes = (double *)l->bytes;
    m->n_bytes = (size_t)l->nsizes;
    m->ms = (double *)l->ms;
    m->n_ms = (size_t)l->nsizes;
    return m;
}

int pf_profile_codec_device_from_pb(const Planfarm__DeviceRecord *m, pf_record_device_t *d,
                                    char *err, size_t errlen)
{
    int rc;
    memset(d, 0, sizeof *d);
    if ((rc = copy_str(d->host, PF_REC_NAME, m->host, "host", err, errlen)) ||
        (rc = copy_str(d->name, PF_REC_NAME, m->name, "name", err, errlen)) ||
        (rc = copy_str(d->measured_by, PF_REC_NAME, m->measured_by, "measured_by", err,
                       errlen)) ||
        (rc = copy_source(m->source, &d->source, "source", err, errlen)))
        return rc;
    d->index = m->index;
    d->mem_bytes = m->mem_bytes;
    d->tflops = m->tflops;
    d->mem_gbps = m->mem_gbps;
    d->sm_count = m->sm_count;
    d->clock_mhz = m->clock_mhz;
    d->when_unix_s = m->when_unix_s;
    return pf_record_check_device(d, err, errlen);
}

int pf_profile_codec_link_from_pb(const Planfarm__LinkRecord *m, pf_record_link_t *l, char *err,
                                  size_t errlen)
{
    int rc;
    memset(l, 0, sizeof *l);
    if (m->n_bytes != m->n_ms)
        return pf_fail(err, errlen, PF_EINPUT, "%zu sizes but %zu times", m->n_bytes, m->n_ms);
    if (m->n_bytes > PF_SWEEP_MAX)
        return pf_fail(err, errlen, PF_EINPUT, "%zu sizes, at most %d", m->n_bytes,
                       PF_SWEEP_MAX);
    if ((rc = copy_str(l->src_host, PF_REC_NAME, m->src_host, "src_host", err, errlen)) ||
        (rc = copy_str(l->dst_host, PF_REC_NAME, m->dst_host, "dst_host", err, errlen)) ||
        (rc = copy_str(l->method, PF_REC_NAME, m->method, "method", err, errlen)) ||
        (rc = copy_str(l->measured_by, PF_REC_NAME, m->measured_by, "measured_by", err,
                       errlen)) ||
        (rc = copy_source(m->source, &l->source, "source", err, errlen)))
        return rc;
    l->src_index = m->src_index;
    l->dst_index = m->dst_index;
    l->when_unix_s = m->when_unix_s;
    l->topo_level = m->topo_level;
    l->nvlinks = m->nvlinks;
    l->nsizes = (int)m->n_bytes;
    for (size_t i = 0; i < m->n_bytes; i++) {
        l->bytes[i] = m->bytes[i];
        l->ms[i] = m->ms[i];
    }
    return pf_record_check_link(l, err, errlen);
}

/* Records of a message into an owned array, each checked; `what` names them in errors. */
static int devices_from_pb(Planfarm__DeviceRecord **in, size_t n, pf_record_device_t **out,
                           int *nout, char *err, size_t errlen)
{
    *out = NULL;
    *nout = 0;
    if (n > PF_PROFILE_MAX_DEVICES)
        return pf_fail(err, errlen, PF_EINPUT, "%zu device records, at most %d", n,
                       PF_PROFILE_MAX_DEVICES);
    if (n == 0)
        return PF_OK;
    if (!(*out = calloc(n, sizeof **out)))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int rc = pf_profile_codec_device_from_pb(in[i], &(*out)[i], err, errlen);
        if (rc != PF_OK) {
            char where[32];
            snprintf(where, sizeof where, "devices[%zu]", i);
            pf_err_prefix(err, errlen, where);
            free(*out);
            *out = NULL;
            return rc;
        }
    }
    *nout = (int)n;
    return PF_OK;
}

int pf_profile_codec_check_sweep(const double *sizes, size_t nsizes, uint32_t reps,
                                 double timeout_s, char *err, size_t errlen)
{
    if (nsizes > PF_SWEEP_MAX)
        return pf_fail(err, errlen, PF_EINPUT, "%zu sizes, at most %d", nsizes, PF_SWEEP_MAX);
    for (size_t i = 0; i < nsizes; i++) {
        if (!(sizes[i] >= 1 && sizes[i] <= PF_PROFILE_MAX_BYTES))
            return pf_fail(err, errlen, PF_EINPUT, "sizes[%zu]: %g bytes, expected 1 .. %.0f",
                           i, sizes[i], PF_PROFILE_MAX_BYTES);
        for (size_t j = 0; j < i; j++)
            if (sizes[j] == sizes[i])
                return pf_fail(err, errlen, PF_EINPUT, "sizes[%zu]: %g bytes given twice", i,
                               sizes[i]);
    }
    if (reps > PF_PROFILE_MAX_REPS)
        return pf_fail(err, errlen, PF_EINPUT, "reps %u, at most %d", reps, PF_PROFILE_MAX_REPS);
    if (!(timeout_s >= 0 && timeout_s <= PF_PROFILE_MAX_TIMEOUT_S))
        return pf_fail(err, errlen, PF_EINPUT, "timeout %g s, expected 0 .. %.0f", timeout_s,
                       PF_PROFILE_MAX_TIMEOUT_S);
    return PF_OK;
}

/* ---- REGISTER ---- */

Planfarm__AgentRegister *pf_profile_codec_register_to_pb(pf_arena_t *a,
                                                         const pf_profile_codec_agent_info_t *info)
{
    Planfarm__AgentRegister *m = PF_ANEW(a, Planfarm__AgentRegister, 1);
    Planfarm__DeviceRecord **dev = PF_ANEW(a, Planfarm__DeviceRecord *, info->ndev);
    if (!m || !dev)
        return NULL;
    planfarm__agent_register__init(m);
    m->protocol = PF_WIRE_VERSION;
    m->host = (char *)info->host;
    m->name = (char *)info->name;
    m->cuda_status = (char *)info->cuda_status;
    for (int i = 0; i < info->ndev; i++)
        if (!(dev[i] = pf_profile_codec_device_to_pb(a, &info->dev[i])))
            return NULL;
    m->devices = dev;
    m->n_devices = (size_t)info->ndev;
    return m;
}

int pf_profile_codec_decode_register(const uint8_t *data, size_t len,
                                     pf_profile_codec_agent_info_t *out, char *err, size_t errlen)
{
    int rc;
    memset(out, 0, sizeof *out);
    Planfarm__AgentRegister *m = planfarm__agent_register__unpack(NULL, len, data);
    if (!m)
        return pf_fail(err, errlen, PF_EINPUT, "REGISTER: not a valid AgentRegister");
    if (m->protocol != PF_WIRE_VERSION) {
        rc = pf_fail(err, errlen, PF_EINPUT, "REGISTER: protocol %u, expected %d", m->protocol,
                     PF_WIRE_VERSION);
        goto done;
    }
    if ((rc = copy_str(out->host, sizeof out->host, m->host, "REGISTER: host", err, errlen)) ||
        (rc = copy_str(out->name, sizeof out->name, m->name, "REGISTER: name", err, errlen)) ||
        (rc = copy_str(out->cuda_status, sizeof out->cuda_status, m->cuda_status,
                       "REGISTER: cuda_status", err, errlen)))
        goto done;
    if (!out->host[0]) {
        rc = pf_fail(err, errlen, PF_EINPUT, "REGISTER: empty host");
        goto done;
    }
    if ((rc = devices_from_pb(m->devices, m->n_devices, &out->dev, &out->ndev, err, errlen))) {
        pf_err_prefix(err, errlen, "REGISTER");
        goto done;
    }
    for (int i = 0; i < out->ndev; i++)
        if (strcmp(out->dev[i].host, out->host) != 0) {
            rc = pf_fail(err, errlen, PF_EINPUT, "REGISTER: devices[%d]: host '%s', the agent "
                         "says '%s'", i, out->dev[i].host, out->host);
            goto done;
        }
done:
    if (rc != PF_OK)
        pf_profile_codec_agent_info_clear(out);
    planfarm__agent_register__free_unpacked(m, NULL);
    return rc;
}

/* ---- MEASUREMENT ---- */

Planfarm__Measurement *pf_profile_codec_measurement_to_pb(pf_arena_t *a,
                                                          const pf_profile_codec_measurement_t *in)
{
    Planfarm__Measurement *m = PF_ANEW(a, Planfarm__Measurement, 1);
    Planfarm__DeviceRecord **dev = PF_ANEW(a, Planfarm__DeviceRecord *, in->ndev);
    Planfarm__LinkRecord **link = PF_ANEW(a, Planfarm__LinkRecord *, in->nlink);
    if (!m || !dev || !link)
        return NULL;
    planfarm__measurement__init(m);
    m->round = in->round;
    m->task = in->task;
    for (int i = 0; i < in->ndev; i++)
        if (!(dev[i] = pf_profile_codec_device_to_pb(a, &in->dev[i])))
            return NULL;
    for (int i = 0; i < in->nlink; i++)
        if (!(link[i] = pf_profile_codec_link_to_pb(a, &in->link[i])))
            return NULL;
    m->devices = dev;
    m->n_devices = (size_t)in->ndev;
    m->links = link;
    m->n_links = (size_t)in->nlink;
    m->echo_endpoint = (char *)in->echo_endpoint;
    m->error = (char *)in->error;
    return m;
}

int pf_profile_codec_decode_measurement(const uint8_t *data, size_t len,
                                        pf_profile_codec_measurement_t *out, char *err,
                                        size_t errlen)
{
    int rc;
    memset(out, 0, sizeof *out);
    Planfarm__Measurement *m = planfarm__measurement__unpack(NULL, len, data);
    if (!m)
        return pf_fail(err, errlen, PF_EINPUT, "MEASUREMENT: not a valid Measurement");
    out->round = m->round;
    out->task = m->task;
    if ((rc = copy_str(out->echo_endpoint, sizeof out->echo_endpoint, m->echo_endpoint,
                       "MEASUREMENT: echo_endpoint", err, errlen)) ||
        (rc = copy_str(out->error, sizeof out->error, m->error, "MEASUREMENT: error", err,
                       errlen)))
        goto done;
    if ((rc = devices_from_pb(m->devices, m->n_devices, &out->dev, &out->ndev, err, errlen))) {
        pf_err_prefix(err, errlen, "MEASUREMENT");
        goto done;
    }
    if (m->n_links > PF_PROFILE_MAX_LINKS) {
        rc = pf_fail(err, errlen, PF_EINPUT, "MEASUREMENT: %zu link records, at most %d",
                     m->n_links, PF_PROFILE_MAX_LINKS);
        goto done;
    }
    if (m->n_links && !(out->link = calloc(m->n_links, sizeof *out->link))) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < m->n_links; i++)
        if ((rc = pf_profile_codec_link_from_pb(m->links[i], &out->link[i], err, errlen)) !=
            PF_OK) {
            char where[64];
            snprintf(where, sizeof where, "MEASUREMENT: links[%zu]", i);
            pf_err_prefix(err, errlen, where);
            goto done;
        }
    out->nlink = (int)m->n_links;
done:
    if (rc != PF_OK)
        pf_profile_codec_measurement_clear(out);
    planfarm__measurement__free_unpacked(m, NULL);
    return rc;
}

/* ---- PROFILE ---- */

Planfarm__ProfileTask *pf_profile_codec_task_to_pb(pf_arena_t *a, const pf_profile_codec_task_t *t)
{
    Planfarm__ProfileTask *m = PF_ANEW(a, Planfarm__ProfileTask, 1);
    if (!m)
        return NULL;
    planfarm__profile_task__init(m);
    m->round = t->round;
    m->task = t->task;
    m->kind = t->kind;
    m->peer_endpoint = (char *)t->peer_endpoint;
    m->peer_host = (char *)t->peer_host;
    m->sizes = (double *)t->sizes;
    m->n_sizes = (size_t)t->nsizes;
    m->reps = (uint32_t)t->reps;
    m->timeout_s = t->timeout_s;
    m->stream_bytes = t->stream_bytes;
    return m;
}

int pf_profile_codec_decode_task(const uint8_t *data, size_t len, pf_profile_codec_task_t *out,
                                 char *err, size_t errlen)
{
    int rc;
    memset(out, 0, sizeof *out);
    Planfarm__ProfileTask *m = planfarm__profile_task__unpack(NULL, len, data);
    if (!m)
        return pf_fail(err, errlen, PF_EINPUT, "PROFILE: not a valid ProfileTask");
    switch (m->kind) {
    case PLANFARM__PROFILE_TASK_KIND__PROFILE_LOCAL:
    case PLANFARM__PROFILE_TASK_KIND__PROFILE_ECHO:
    case PLANFARM__PROFILE_TASK_KIND__PROFILE_PINGPONG:
    case PLANFARM__PROFILE_TASK_KIND__PROFILE_ECHO_STOP: break;
    default:
        rc = pf_fail(err, errlen, PF_EINPUT, "PROFILE: unknown task kind %d", (int)m->kind);
        goto done;
    }
    out->round = m->round;
    out->task = m->task;
    out->kind = m->kind;
    if ((rc = copy_str(out->peer_endpoint, sizeof out->peer_endpoint, m->peer_endpoint,
                       "PROFILE: peer_endpoint", err, errlen)) ||
        (rc = copy_str(out->peer_host, sizeof out->peer_host, m->peer_host,
                       "PROFILE: peer_host", err, errlen)))
        goto done;
    if (out->kind == PLANFARM__PROFILE_TASK_KIND__PROFILE_PINGPONG &&
        (!out->peer_endpoint[0] || !out->peer_host[0])) {
        rc = pf_fail(err, errlen, PF_EINPUT, "PROFILE: a ping-pong needs a peer endpoint and host");
        goto done;
    }
    if ((rc = pf_profile_codec_check_sweep(m->sizes, m->n_sizes, m->reps, m->timeout_s, err,
                                           errlen))) {
        pf_err_prefix(err, errlen, "PROFILE");
        goto done;
    }
    if (m->n_sizes == 1) {
        rc = pf_fail(err, errlen, PF_EINPUT, "PROFILE: one size is no sweep (0 or 2 .. %d)",
                     PF_SWEEP_MAX);
        goto done;
    }
    out->nsizes = (int)m->n_sizes;
    if (m->n_sizes) /* none: the agent's default sweep */
        memcpy(out->sizes, m->sizes, m->n_sizes * sizeof *m->sizes);
    out->reps = (int)m->reps;
    out->timeout_s = m->timeout_s;
    out->stream_bytes = m->stream_bytes;
    if (out->stream_bytes > ((uint64_t)16 << 30)) {
        rc = pf_fail(err, errlen, PF_EINPUT, "PROFILE: stream_bytes %llu, at most 16 GiB",
                     (unsigned long long)out->stream_bytes);
        goto done;
    }
done:
    planfarm__profile_task__free_unpacked(m, NULL);
    return rc;
}
