/* plan_degrees: each stage's data- and tensor-parallel degree (plan.h, DESIGN.md "Plan"):
 * stage_list[s].replicas / .tensor_parallel where the stages differ (issue 24), else the plan's
 * replicas and tensor_parallel for every stage. */
#include "planner/ir/plan.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int pf_plan_degrees_replicas(const pf_plan_t *p, int s)
{
    int d = p->stage_list[s].replicas;
    return d > 0 ? d : p->replicas;
}

int pf_plan_degrees_tp(const pf_plan_t *p, int s)
{
    int t = p->stage_list[s].tensor_parallel;
    return t > 0 ? t : p->tensor_parallel;
}

int pf_plan_degrees_ndevices(const pf_plan_t *p, int s)
{
    return pf_plan_degrees_replicas(p, s) * pf_plan_degrees_tp(p, s);
}

long long pf_plan_degrees_total_devices(const pf_plan_t *p)
{
    long long n = 0;
    for (int s = 0; s < p->stages; s++)
        n += pf_plan_degrees_ndevices(p, s);
    return n;
}

int pf_plan_degrees_mixed(const pf_plan_t *p)
{
    for (int s = 1; s < p->stages; s++)
        if (pf_plan_degrees_replicas(p, s) != pf_plan_degrees_replicas(p, 0) ||
            pf_plan_degrees_tp(p, s) != pf_plan_degrees_tp(p, 0))
            return 1;
    return 0;
}

long long pf_plan_degrees_step_microbatches(const pf_plan_t *p)
{
    return (long long)p->microbatches * p->replicas;
}

int pf_plan_degrees_set(pf_plan_t *p, const int *d, const int *t, int n_micro)
{
    int dmax = 1, tmax = 1;
    for (int s = 0; s < p->stages; s++) {
        if (d[s] < 1 || t[s] < 1 || n_micro < 1 || n_micro % d[s])
            return PF_EINPUT;
        dmax = d[s] > dmax ? d[s] : dmax;
        tmax = t[s] > tmax ? t[s] : tmax;
    }
    for (int s = 0; s < p->stages; s++) {
        pf_stage_t *st = &p->stage_list[s];
        st->replicas = d[s];
        st->tensor_parallel = t[s];
        free(st->devices);
        st->devices = NULL;
    }
    p->replicas = dmax;
    p->tensor_parallel = tmax;
    p->microbatches = n_micro / dmax;
    return PF_OK;
}

void pf_plan_degrees_describe(const pf_plan_t *p, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int s = 0; s < p->stages && at < len; s++) {
        int n = snprintf(buf + at, len - at, "%s%dx%d", s ? " | " : "",
                         pf_plan_degrees_replicas(p, s), pf_plan_degrees_tp(p, s));
        if (n < 0)
            return;
        at += (size_t)n;
    }
}

static int read_degree(json_t *st, const char *path, const char *key, int max, int *out,
                       char *err, size_t errlen)
{
    int64_t v = 0;
    int rc = pf_json_get_int(st, path, key, PF_JSON_GET_POSITIVE, 0, &v, err, errlen);
    if (rc != PF_OK)
        return rc;
    if (v > max)
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: %lld too large", path, key, (long long)v);
    *out = (int)v;
    return PF_OK;
}

int pf_plan_degrees_read(json_t *st, const char *path, pf_stage_t *sl, char *err, size_t errlen)
{
    int rc = read_degree(st, path, "replicas", 1 << 20, &sl->replicas, err, errlen);
    if (rc == PF_OK)
        rc = read_degree(st, path, "tp", 1 << 16, &sl->tensor_parallel, err, errlen);
    /* before any device list is read: d x t sizes the stage's array */
    if (rc == PF_OK && (long long)sl->replicas * (sl->tensor_parallel ? sl->tensor_parallel : 1) >
                           PF_PLAN_DEGREES_MAX_DEVICES)
        rc = pf_fail(err, errlen, PF_EINPUT, "%s: replicas x tp = %lld exceeds %d devices", path,
                     (long long)sl->replicas * sl->tensor_parallel, PF_PLAN_DEGREES_MAX_DEVICES);
    return rc;
}

void pf_plan_degrees_write(pf_json_writer_t *w, const pf_plan_t *p, int s)
{
    if (!pf_plan_degrees_mixed(p))
        return;
    pf_json_writer_key(w, "replicas");
    pf_json_writer_int(w, pf_plan_degrees_replicas(p, s));
    pf_json_writer_key(w, "tp"); /* "tensor_parallel" there is the weights' split */
    pf_json_writer_int(w, pf_plan_degrees_tp(p, s));
}

int pf_plan_degrees_check(const pf_plan_t *p, int devices, char *err, size_t errlen)
{
    long long n_micro = pf_plan_degrees_step_microbatches(p);
    int dmax = 0, tmax = 0;
    for (int s = 0; s < p->stages; s++) { /* every stage, its own degrees or the plan's */
        int d = pf_plan_degrees_replicas(p, s), t = pf_plan_degrees_tp(p, s);
        if (n_micro % d)
            return pf_fail(err, errlen, PF_EINPUT, "stage_list[%d].replicas: %d does not divide "
                           "the step's %lld micro-batches (microbatches x replicas)", s, d,
                           n_micro);
        dmax = d > dmax ? d : dmax;
        tmax = t > tmax ? t : tmax;
    }
    if (dmax != p->replicas || tmax != p->tensor_parallel)
        return pf_fail(err, errlen, PF_EINPUT, "plan: replicas %d and tensor_parallel %d are not "
                       "the largest of the stages' (%d, %d)", p->replicas, p->tensor_parallel,
                       dmax, tmax);
    if (!pf_plan_degrees_mixed(p) &&
        (long long)p->stages * p->replicas * p->tensor_parallel > devices)
        return pf_fail(err, errlen, PF_EINPUT, "stages x replicas x tensor_parallel = %d x %d x "
                       "%d exceeds %d devices", p->stages, p->replicas, p->tensor_parallel,
                       devices);
    if (pf_plan_degrees_total_devices(p) > devices)
        return pf_fail(err, errlen, PF_EINPUT, "stage_list: the stages' replicas x "
                       "tensor_parallel add up to %lld devices, the cluster has %d",
                       pf_plan_degrees_total_devices(p), devices);
    return PF_OK;
}

void pf_plan_degrees_write_search(pf_json_writer_t *w, const pf_plan_t *p)
{
    if (!p->stagedeg.present)
        return;
    pf_json_writer_key(w, "stage_degrees");
    pf_json_writer_obj_begin_inline(w);
    pf_json_writer_key(w, "chosen");
    pf_json_writer_bool(w, p->stagedeg.chosen);
    pf_json_writer_key_num(w, "uniform_ms_per_sample", p->stagedeg.uniform_ms_per_sample);
    pf_json_writer_key_num(w, "per_stage_ms_per_sample", p->stagedeg.stagedeg_ms_per_sample);
    if (p->stagedeg.degrees[0]) {
        pf_json_writer_key(w, "degrees");
        pf_json_writer_str(w, p->stagedeg.degrees);
    }
    pf_json_writer_key_num(w, "per_stage_step_ms", p->stagedeg.stagedeg_step_ms);
    if (p->stagedeg.why[0]) {
        pf_json_writer_key(w, "why");
        pf_json_writer_str(w, p->stagedeg.why);
    }
    pf_json_writer_obj_end(w);
}
