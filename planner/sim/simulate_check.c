#include "planner/sim/simulate_check.h"
#include "planner/sim/interleave.h"
#include "planner/core/util.h"

#include <limits.h>
#include <stdlib.h>

static int check_num(double v, const char *what, int s, char *err, size_t errlen)
{
    if (!pf_is_finite_nonneg(v))
        return pf_fail(err, errlen, PF_EINPUT, "stage %d: %s is negative or not finite", s, what);
    return PF_OK;
}

/* The sizes, the schedule, and a task count that fits an int. */
static int validate_shape(const pf_simulate_input_t *in, char *err, size_t errlen)
{
    if (!in || !in->cluster || !in->stage)
        return pf_fail(err, errlen, PF_EINPUT, "simulate: no cluster or no stages");
    if (in->stages < 1 || in->replicas < 1 || in->tp < 1 || in->microbatches < 1 ||
        in->buckets < 0)
        return pf_fail(err, errlen, PF_EINPUT,
                       "simulate: stages %d, replicas %d, tensor_parallel %d, microbatches %d, "
                       "buckets %d: all must be >= 1",
                       in->stages, in->replicas, in->tp, in->microbatches, in->buckets);
    if ((unsigned)in->schedule > PF_SCHEDULE_SIGNAL)
        return pf_fail(err, errlen, PF_EINPUT, "simulate: unknown schedule %d", in->schedule);
    int D = pf_cluster_ndevices(in->cluster);
    long long need = (long long)in->stages * in->replicas * in->tp;
    if (in->buckets > 1 << 16)
        return pf_fail(err, errlen, PF_EINPUT, "simulate: %d gradient buckets, at most 65536",
                       in->buckets);
    if (need / (in->virtual_stages > 1 ? in->virtual_stages : 1) > D)
        return pf_fail(err, errlen, PF_EINPUT,
                       "simulate: %d x %d x %d stage devices but the cluster has %d", in->stages,
                       in->replicas, in->tp, D);
    return PF_OK;
}

static int validate_numbers(const pf_simulate_stage_t *st, int s, int R, char *err,
                            size_t errlen)
{
    int rc;
    if ((rc = check_num(st->fwd_ms, "fwd_ms", s, err, errlen)) ||
        (rc = check_num(st->bwd_ms, "bwd_ms", s, err, errlen)) ||
        (rc = check_num(st->recompute_ms, "recompute_ms", s, err, errlen)) ||
        (rc = check_num(st->tp_fwd_ms, "tp_fwd_ms", s, err, errlen)) ||
        (rc = check_num(st->tp_bwd_ms, "tp_bwd_ms", s, err, errlen)) ||
        (rc = check_num(st->optimizer_ms, "optimizer_ms", s, err, errlen)) ||
        (rc = check_num(st->param_bytes, "param_bytes", s, err, errlen)) ||
        (rc = check_num(st->send_bytes, "send_bytes", s, err, errlen)) ||
        (rc = check_num(st->act_bytes, "act_bytes", s, err, errlen)) ||
        (rc = check_num(st->static_bytes, "static_bytes", s, err, errlen)))
        return rc;
    if (!st->devices)
        return pf_fail(err, errlen, PF_EINPUT, "stage %d: no devices", s);
    for (int r = 0; st->xfer_ms && r < R; r++)
        if ((rc = check_num(st->xfer_ms[r], "xfer_ms", s, err, errlen)) != PF_OK)
            return rc;
    return PF_OK;
}

/* Stage s's R x T devices are devices of the cluster (D), none already in seen. */
static int validate_devices(const pf_simulate_stage_t *st, int s, int n, int D, char *seen,
                            char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        int d = st->devices[i];
        if (d < 0 || d >= D)
            return pf_fail(err, errlen, PF_EINPUT, "stage %d: devices[%d] = %d is not a device "
                           "of the cluster (0..%d)", s, i, d, D - 1);
        if (seen[d]++)
            return pf_fail(err, errlen, PF_EINPUT, "stage %d: device %d is used twice", s, d);
    }
    return PF_OK;
}

int pf_simulate_check_size(const pf_simulate_input_t *in, char *err, size_t errlen)
{
    long long need = (long long)in->stages * in->replicas * in->tp;
    /* tasks: 2 S R MB compute + 2 S R MB T transfers; keep indices in an int */
    if ((double)need * in->microbatches * 4.0 * in->tp > INT_MAX / 4)
        return pf_fail(err, errlen, PF_EINPUT, "simulate: %lld devices x %d micro-batches is too "
                       "large to simulate", need, in->microbatches);
    return PF_OK;
}

int pf_simulate_check(const pf_simulate_input_t *in, char *err, size_t errlen)
{
    int rc = validate_shape(in, err, errlen), n = in->replicas * in->tp, P;
    if (rc != PF_OK || (rc = pf_interleave_check(in->stages, in->virtual_stages,
                                                 in->microbatches, &P, err, errlen)) != PF_OK)
        return rc;
    int D = pf_cluster_ndevices(in->cluster);
    char *seen = calloc((size_t)D, 1);
    if (!seen)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (int s = 0; s < in->stages && rc == PF_OK; s++) {
        const pf_simulate_stage_t *st = &in->stage[s];
        rc = validate_numbers(st, s, in->replicas, err, errlen);
        if (rc == PF_OK) /* a rank's later chunks: on its first chunk's devices */
            rc = s < P ? validate_devices(st, s, n, D, seen, err, errlen)
                       : pf_interleave_same_devices(st->devices, in->stage[s - P].devices, n, s, P,
                                                    err, errlen);
    }
    free(seen);
    return rc;
}

