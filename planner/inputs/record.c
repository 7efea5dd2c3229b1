#include "planner/inputs/record.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *pf_record_source_name(pf_record_source_t s) { return s == PF_SRC_GPU ? "gpu" : "cpu"; }

void pf_record_name(char dst[PF_REC_NAME], const char *src)
{
    snprintf(dst, PF_REC_NAME, "%s", src ? src : "");
}

/* Fixed-size name fields may come off the wire: they must hold a NUL. */
static int terminated(const char *s) { return memchr(s, '\0', PF_REC_NAME) != NULL; }

int pf_record_check_device(const pf_record_device_t *d, char *err, size_t errlen)
{
    if (!terminated(d->host) || !d->host[0] || !terminated(d->name) ||
        !terminated(d->measured_by))
        return pf_fail(err, errlen, PF_EINPUT, "device record: host or a name is empty or "
                                               "not terminated");
    if (d->index < 0 || d->index > (1 << 15))
        return pf_fail(err, errlen, PF_EINPUT, "device %s:%d: index out of range", d->host,
                       d->index);
    if (d->source != PF_SRC_CPU && d->source != PF_SRC_GPU)
        return pf_fail(err, errlen, PF_EINPUT, "device %s:%d: unknown source %d", d->host,
                       d->index, (int)d->source);
    if (!(d->mem_bytes > 0) || !isfinite(d->mem_bytes))
        return pf_fail(err, errlen, PF_EINPUT, "device %s:%d: mem_bytes is %g", d->host, d->index,
                       d->mem_bytes);
    if (!pf_is_finite_nonneg(d->tflops) || !pf_is_finite_nonneg(d->mem_gbps) ||
        !pf_is_finite_nonneg(d->clock_mhz) || d->sm_count < 0 || d->sm_count > (1 << 20) ||
        !pf_is_finite_nonneg(d->when_unix_s))
        return pf_fail(err, errlen, PF_EINPUT,
                       "device %s:%d: tflops, mem_gbps, clock, SMs and time must be finite and "
                       "non-negative", d->host, d->index);
    return PF_OK;
}

int pf_record_check_link(const pf_record_link_t *l, char *err, size_t errlen)
{
    if (!terminated(l->src_host) || !l->src_host[0] || !terminated(l->dst_host) ||
        !l->dst_host[0] || !terminated(l->method) || !terminated(l->measured_by))
        return pf_fail(err, errlen, PF_EINPUT, "link record: a host or a name is empty or not "
                                               "terminated");
    char where[2 * PF_REC_NAME + 64];
    snprintf(where, sizeof where, "link %s:%d -> %s:%d", l->src_host, l->src_index, l->dst_host,
             l->dst_index);
    if (l->src_index < PF_END_HOST || l->dst_index < PF_END_HOST || l->src_index > (1 << 15) ||
        l->dst_index > (1 << 15))
        return pf_fail(err, errlen, PF_EINPUT, "%s: device index out of range", where);
    if (!strcmp(l->src_host, l->dst_host) && l->src_index == l->dst_index)
        return pf_fail(err, errlen, PF_EINPUT, "%s: both ends are the same", where);
    if (l->source != PF_SRC_CPU && l->source != PF_SRC_GPU)
        return pf_fail(err, errlen, PF_EINPUT, "%s: unknown source %d", where, (int)l->source);
    if (!pf_is_finite_nonneg(l->when_unix_s))
        return pf_fail(err, errlen, PF_EINPUT, "%s: bad time", where);
    if (l->topo_level < -1 || l->topo_level > 100 || l->nvlinks < 0 || l->nvlinks > 64)
        return pf_fail(err, errlen, PF_EINPUT, "%s: topology level %d, %d NVLinks", where,
                       l->topo_level, l->nvlinks);
    if (l->nsizes < 2 || l->nsizes > PF_SWEEP_MAX)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %d sizes, expected 2 .. %d", where, l->nsizes,
                       PF_SWEEP_MAX);
    for (int i = 0; i < l->nsizes; i++)
        if (!(l->bytes[i] > 0) || !isfinite(l->bytes[i]) || !(l->ms[i] > 0) ||
            !isfinite(l->ms[i]))
            return pf_fail(err, errlen, PF_EINPUT, "%s: point %d (%g bytes, %g ms) is not "
                           "positive and finite", where, i, l->bytes[i], l->ms[i]);
    return PF_OK;
}
