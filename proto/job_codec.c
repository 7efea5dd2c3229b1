#include "proto/job_codec.h"
#include "proto/setting_codec.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- blob references ---- */

static Planfarm__BlobRef *ref_to_pb(pf_arena_t *a, const pf_blob_ref_t *r, Planfarm__BlobKind k)
{
    if (!r || r->hash_len == 0)
        return NULL;
    Planfarm__BlobRef *m = PF_ANEW(a, Planfarm__BlobRef, 1);
    uint8_t *h = PF_ANEW(a, uint8_t, r->hash_len);
    if (!m || !h)
        return NULL;
    planfarm__blob_ref__init(m);
    memcpy(h, r->hash, r->hash_len);
    m->hash.data = h;
    m->hash.len = r->hash_len;
    m->kind = k;
    m->size = r->size;
    return m;
}

static int ref_from_pb(const Planfarm__BlobRef *m, Planfarm__BlobKind want, pf_blob_ref_t *r,
                       const char *what, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (!m)
        return pf_fail(err, errlen, PF_EINPUT, "job.%s: missing", what);
    if (m->hash.len == 0 || m->hash.len > PF_HASH_MAX || m->kind != want)
        return pf_fail(err, errlen, PF_EINPUT, "job.%s: bad blob reference", what);
    memcpy(r->hash, m->hash.data, m->hash.len);
    r->hash_len = m->hash.len;
    r->size = m->size;
    return PF_OK;
}

/* ---- per-kind hooks ---- */

/* A kind's part of the Job and JobResult messages. Encoders return PF_OK or PF_ERR (out of
 * memory); decoders PF_OK or the error and its reason. answer_from_pb sees only PF_OK answers:
 * a solver's verdict carries no payload. */
typedef struct {
    int (*params_to_pb)(pf_arena_t *a, const pf_job_t *job, const pf_blob_ref_t *graph,
                        const pf_blob_ref_t *cluster, Planfarm__Job *m);
    int (*params_from_pb)(const Planfarm__Job *m, pf_wire_job_t *out, char *err, size_t errlen);
    int (*answer_to_pb)(pf_arena_t *a, const pf_job_result_t *res, Planfarm__JobResult *m);
    int (*answer_from_pb)(const Planfarm__JobResult *m, int nops, int ndevices,
                          pf_job_result_t *out, char *err, size_t errlen);
} job_codec_t;

/* NOOP: no parameters, no answer. */

static int noop_params_to_pb(pf_arena_t *a, const pf_job_t *job, const pf_blob_ref_t *graph,
                             const pf_blob_ref_t *cluster, Planfarm__Job *m)
{
    (void)a, (void)job, (void)graph, (void)cluster, (void)m;
    return PF_OK;
}

static int noop_params_from_pb(const Planfarm__Job *m, pf_wire_job_t *out, char *err,
                               size_t errlen)
{
    (void)m, (void)out, (void)err, (void)errlen;
    return PF_OK;
}

static int noop_answer_to_pb(pf_arena_t *a, const pf_job_result_t *res, Planfarm__JobResult *m)
{
    (void)a, (void)res, (void)m;
    return PF_OK;
}

static int noop_answer_from_pb(const Planfarm__JobResult *m, int nops, int ndevices,
                               pf_job_result_t *out, char *err, size_t errlen)
{
    (void)m, (void)nops, (void)ndevices, (void)out, (void)err, (void)errlen;
    return PF_OK;
}

/* DP_PARTITION: PartitionParams and the graph and cluster blobs; answers with a Plan. */

static int dp_params_to_pb(pf_arena_t *a, const pf_job_t *job, const pf_blob_ref_t *graph,
                           const pf_blob_ref_t *cluster, Planfarm__Job *m)
{
    const pf_partition_opts_t *o = &job->partition;
    Planfarm__PartitionParams *pp = PF_ANEW(a, Planfarm__PartitionParams, 1);
    if (!pp || !(m->graph = ref_to_pb(a, graph, PLANFARM__BLOB_KIND__BLOB_GRAPH)) ||
        !(m->cluster = ref_to_pb(a, cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER)))
        return PF_ERR;
    planfarm__partition_params__init(pp);
    pp->stages = (uint32_t)o->stages;
    pp->replicas = (uint32_t)o->replicas;
    pp->microbatches = (uint32_t)o->microbatches;
    pp->flat_gbps = o->flat_gbps;
    pp->coarsen_k = o->coarsen_k;
    pp->alpha = o->alpha;
    pp->refine = o->refine != 0;
    pp->refine_max_moves = (uint32_t)o->refine_max_moves;
    pp->max_downsets = o->max_downsets;
    pp->mem_headroom = o->mem_headroom;
    pp->stage_degrees = o->stage_degrees != 0;
    pp->stage_tp_mask = o->stage_tp_mask;
    pp->stage_recompute = o->stage_recompute != 0;
    pp->stage_hosts = (uint32_t)(o->stage_hosts > 0 ? o->stage_hosts : 0);
    if (o->group && job->graph) {
        int n = pf_graph_nops(job->graph);
        uint32_t *g = PF_ANEW(a, uint32_t, n);
        if (!g)
            return PF_ERR;
        for (int v = 0; v < n; v++)
            g[v] = (uint32_t)o->group[v];
        pp->group = g;
        pp->n_group = (size_t)n;
        pp->ngroups = (uint32_t)o->ngroups;
        pp->group_whole = o->group_whole != 0;
    }
    m->partition = pp;
    return PF_OK;
}

static int dp_params_from_pb(const Planfarm__Job *m, pf_wire_job_t *out, char *err, size_t errlen)
{
    int rc;
    const Planfarm__PartitionParams *pp = m->partition;
    if ((rc = ref_from_pb(m->graph, PLANFARM__BLOB_KIND__BLOB_GRAPH, &out->graph, "graph", err,
                          errlen)) ||
        (rc = ref_from_pb(m->cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER, &out->cluster, "cluster",
                          err, errlen)))
        return rc;
    if (!pp)
        return pf_fail(err, errlen, PF_EINPUT, "job.partition: missing");
    if (pp->stages == 0 || pp->stages > PF_WIRE_MAX_DEVICES || pp->replicas > PF_WIRE_MAX_DEVICES ||
        pp->microbatches > (1u << 20) || !isfinite(pp->flat_gbps) || !isfinite(pp->alpha) ||
        pp->alpha < 0 || pp->refine_max_moves > (1u << 20))
        return pf_fail(err, errlen, PF_EINPUT, "job.partition: parameter out of range");
    pf_partition_opts_init(&out->partition);
    out->partition.stages = (int)pp->stages;
    out->partition.replicas = (int)pp->replicas;
    out->partition.microbatches = (int)pp->microbatches;
    out->partition.flat_gbps = pp->flat_gbps;
    out->partition.coarsen_k = pp->coarsen_k;
    out->partition.alpha = pp->alpha;
    out->partition.refine = pp->refine;
    out->partition.refine_max_moves = (int)pp->refine_max_moves;
    if (pp->max_downsets > 0)
        out->partition.max_downsets = pp->max_downsets;
    if (!(pp->mem_headroom >= 0 && pp->mem_headroom < 1))
        return pf_fail(err, errlen, PF_EINPUT, "job.partition.mem_headroom: %g", pp->mem_headroom);
    out->partition.mem_headroom = pp->mem_headroom;
    out->partition.stage_degrees = pp->stage_degrees;
    out->partition.stage_tp_mask = pp->stage_tp_mask;
    out->partition.stage_recompute = pp->stage_recompute;
    if (pp->stage_hosts > PF_WIRE_MAX_DEVICES)
        return pf_fail(err, errlen, PF_EINPUT, "job.partition.stage_hosts: %u out of range",
                       pp->stage_hosts);
    out->partition.stage_hosts = (int)pp->stage_hosts;
    if (pp->n_group) {
        if (pp->n_group > PF_WIRE_MAX_OPS || pp->ngroups == 0 || pp->ngroups > pp->n_group)
            return pf_fail(err, errlen, PF_EINPUT, "job.partition.group: bad sizes");
        out->group = malloc(pp->n_group * sizeof *out->group);
        if (!out->group)
            return pf_fail(err, errlen, PF_ERR, "out of memory");
        for (size_t v = 0; v < pp->n_group; v++) {
            if (pp->group[v] >= pp->ngroups)
                return pf_fail(err, errlen, PF_EINPUT, "job.partition.group[%zu]: out of range",
                               v);
            out->group[v] = (int)pp->group[v];
        }
        out->group_len = pp->n_group;
        out->partition.group = out->group;
        out->partition.ngroups = (int)pp->ngroups;
        out->partition.group_whole = pp->group_whole;
    }
    return PF_OK;
}

static int dp_answer_to_pb(pf_arena_t *a, const pf_job_result_t *res, Planfarm__JobResult *m)
{
    if (res->plan && !(m->plan = pf_model_codec_plan_to_pb(a, res->plan)))
        return PF_ERR;
    return PF_OK;
}

static int dp_answer_from_pb(const Planfarm__JobResult *m, int nops, int ndevices,
                             pf_job_result_t *out, char *err, size_t errlen)
{
    if (!m->plan)
        return pf_fail(err, errlen, PF_EINPUT, "result.plan: missing");
    return pf_model_codec_plan_from_pb(m->plan, nops, ndevices, &out->plan, err, errlen);
}

/* MAP_PROBE: ProbeParams (the stage graph travels inline) and the cluster blob; answers with a
 * ProbeAnswer (a mapping when found). */

static int probe_params_to_pb(pf_arena_t *a, const pf_job_t *job, const pf_blob_ref_t *graph,
                              const pf_blob_ref_t *cluster, Planfarm__Job *m)
{
    (void)graph;
    Planfarm__ProbeParams *pp = PF_ANEW(a, Planfarm__ProbeParams, 1);
    if (!pp || !(m->cluster = ref_to_pb(a, cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER)))
        return PF_ERR;
    planfarm__probe_params__init(pp);
    if (!(pp->stage_graph = pf_model_codec_stage_graph_to_pb(a, job->stage_graph)))
        return PF_ERR;
    pp->instantiation = (uint32_t)job->inst;
    pp->target_ms = job->target_ms;
    pp->budget_s = job->budget_s;
    pp->symmetry = job->symmetry != 0;
    m->probe = pp;
    return PF_OK;
}

static int probe_params_from_pb(const Planfarm__Job *m, pf_wire_job_t *out, char *err,
                                size_t errlen)
{
    int rc;
    const Planfarm__ProbeParams *pp = m->probe;
    if ((rc = ref_from_pb(m->cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER, &out->cluster, "cluster",
                          err, errlen)))
        return rc;
    if (!pp || !pp->stage_graph)
        return pf_fail(err, errlen, PF_EINPUT, "job.probe: missing");
    if (pp->instantiation > PF_MAP_INST_FULL || !pf_is_finite_nonneg(pp->target_ms) ||
        !isfinite(pp->budget_s))
        return pf_fail(err, errlen, PF_EINPUT, "job.probe: parameter out of range");
    if ((rc = pf_model_codec_stage_graph_from_pb(pp->stage_graph, &out->stage_graph, err, errlen)))
        return rc;
    out->inst = (pf_map_inst_t)pp->instantiation;
    out->target_ms = pp->target_ms;
    out->budget_s = pp->budget_s;
    out->symmetry = pp->symmetry;
    return PF_OK;
}

static int probe_answer_to_pb(pf_arena_t *a, const pf_job_result_t *res, Planfarm__JobResult *m)
{
    Planfarm__ProbeAnswer *pa = PF_ANEW(a, Planfarm__ProbeAnswer, 1);
    if (!pa)
        return PF_ERR;
    planfarm__probe_answer__init(pa);
    pa->found = res->probe.found != 0;
    pa->timed_out = res->probe.timed_out != 0;
    pa->objective_ms = res->probe.objective_ms;
    pa->nodes = res->probe.nodes;
    pa->symmetric_pruned = res->probe.symmetric_pruned;
    if (res->devices && res->ndevices > 0) {
        int32_t *d = PF_ANEW(a, int32_t, res->ndevices);
        if (!d)
            return PF_ERR;
        for (int i = 0; i < res->ndevices; i++)
            d[i] = res->devices[i];
        pa->devices = d;
        pa->n_devices = (size_t)res->ndevices;
    }
    m->probe = pa;
    return PF_OK;
}

static int probe_answer_from_pb(const Planfarm__JobResult *m, int nops, int ndevices,
                                pf_job_result_t *out, char *err, size_t errlen)
{
    (void)nops;
    const Planfarm__ProbeAnswer *pa = m->probe;
    if (!pa)
        return pf_fail(err, errlen, PF_EINPUT, "result.probe: missing");
    out->probe.found = pa->found;
    out->probe.timed_out = pa->timed_out;
    out->probe.objective_ms = pa->objective_ms;
    out->probe.nodes = pa->nodes;
    out->probe.symmetric_pruned = pa->symmetric_pruned;
    if (!pa->found)
        return PF_OK;
    if (pa->n_devices == 0 || pa->n_devices > (size_t)ndevices ||
        !pf_is_finite_nonneg(pa->objective_ms))
        return pf_fail(err, errlen, PF_EINPUT, "result.probe: bad mapping");
    int rc = PF_OK;
    char *used = calloc((size_t)ndevices, 1);
    out->devices = malloc(pa->n_devices * sizeof *out->devices);
    if (!out->devices || !used) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < pa->n_devices; i++) {
        int d = pa->devices[i];
        if (d < 0 || d >= ndevices || used[d]++) {
            rc = pf_fail(err, errlen, PF_EINPUT,
                         "result.probe.devices[%zu]: out of range or repeated", i);
            goto done;
        }
        out->devices[i] = d;
    }
    out->ndevices = (int)pa->n_devices;
done:
    free(used);
    return rc;
}

/* TAP_ENUM: TapParams, the graph and cluster blobs; answers with the slice's best plans. */

static int tap_params_to_pb(pf_arena_t *a, const pf_job_t *job, const pf_blob_ref_t *graph,
                            const pf_blob_ref_t *cluster, Planfarm__Job *m)
{
    Planfarm__TapParams *tp = PF_ANEW(a, Planfarm__TapParams, 1);
    if (!tp || !(m->graph = ref_to_pb(a, graph, PLANFARM__BLOB_KIND__BLOB_GRAPH)) ||
        !(m->cluster = ref_to_pb(a, cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER)))
        return PF_ERR;
    planfarm__tap_params__init(tp);
    tp->unit = (uint32_t)job->tap_unit;
    tp->lo = job->tap_lo;
    tp->hi = job->tap_hi;
    m->tap = tp;
    return PF_OK;
}

static int tap_params_from_pb(const Planfarm__Job *m, pf_wire_job_t *out, char *err,
                              size_t errlen)
{
    int rc;
    if ((rc = ref_from_pb(m->graph, PLANFARM__BLOB_KIND__BLOB_GRAPH, &out->graph, "graph", err,
                          errlen)) ||
        (rc = ref_from_pb(m->cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER, &out->cluster,
                          "cluster", err, errlen)))
        return rc;
    if (!m->tap)
        return pf_fail(err, errlen, PF_EINPUT, "job.tap: missing");
    if (m->tap->unit > PF_WIRE_MAX_OPS || m->tap->lo >= m->tap->hi || out->setting.tp < 2)
        return pf_fail(err, errlen, PF_EINPUT, "job.tap: unit %u, plans [%llu, %llu) at T %d",
                       m->tap->unit, (unsigned long long)m->tap->lo,
                       (unsigned long long)m->tap->hi, out->setting.tp);
    out->tap_unit = (int)m->tap->unit;
    out->tap_lo = m->tap->lo;
    out->tap_hi = m->tap->hi;
    return PF_OK;
}

static int tap_answer_to_pb(pf_arena_t *a, const pf_job_result_t *res, Planfarm__JobResult *m)
{
    const pf_tap_slice_t *t = &res->tap;
    Planfarm__TapAnswer *ta = PF_ANEW(a, Planfarm__TapAnswer, 1);
    Planfarm__TapCandidate **best = PF_ANEW(a, Planfarm__TapCandidate *, PF_TAP_KEEP);
    if (!ta || !best)
        return PF_ERR;
    planfarm__tap_answer__init(ta);
    ta->unit = (uint32_t)t->unit;
    ta->tp = (uint32_t)t->T;
    ta->lo = t->lo;
    ta->hi = t->hi;
    ta->feasible = t->feasible;
    for (int i = 0; i < t->nbest && i < PF_TAP_KEEP; i++) {
        if (!(best[i] = PF_ANEW(a, Planfarm__TapCandidate, 1)))
            return PF_ERR;
        planfarm__tap_candidate__init(best[i]);
        best[i]->plan = t->best[i].plan;
        best[i]->time_ms = t->best[i].time_ms;
        best[i]->mem_bytes = t->best[i].mem_bytes;
        ta->n_best++;
    }
    ta->best = best;
    m->tap = ta;
    return PF_OK;
}

static int tap_answer_from_pb(const Planfarm__JobResult *m, int nops, int ndevices,
                              pf_job_result_t *out, char *err, size_t errlen)
{
    (void)nops, (void)ndevices;
    const Planfarm__TapAnswer *ta = m->tap;
    if (!ta)
        return pf_fail(err, errlen, PF_EINPUT, "result.tap: missing");
    if (ta->n_best > PF_TAP_KEEP || ta->unit > PF_WIRE_MAX_OPS || ta->tp > PF_SETTING_CODEC_MAX_TP)
        return pf_fail(err, errlen, PF_EINPUT, "result.tap: out of range");
    pf_tap_slice_t *t = &out->tap;
    t->unit = (int)ta->unit;
    t->T = (int)ta->tp;
    t->lo = ta->lo;
    t->hi = ta->hi;
    t->feasible = ta->feasible;
    t->nbest = (int)ta->n_best;
    for (size_t i = 0; i < ta->n_best; i++) {
        if (!ta->best[i])
            return pf_fail(err, errlen, PF_EINPUT, "result.tap.best[%zu]: missing", i);
        t->best[i].plan = ta->best[i]->plan;
        t->best[i].time_ms = ta->best[i]->time_ms;
        t->best[i].mem_bytes = ta->best[i]->mem_bytes;
    }
    return PF_OK; /* ranges and order: pf_job_check_answer */
}

/* SIMULATE: the candidate's plan inline, the schedule, the resharding times; graph and cluster
 * blobs. Answers with the step, the bubble and the memory verdict. */

static int sim_params_to_pb(pf_arena_t *a, const pf_job_t *job, const pf_blob_ref_t *graph,
                            const pf_blob_ref_t *cluster, Planfarm__Job *m)
{
    Planfarm__SimulateParams *sp = PF_ANEW(a, Planfarm__SimulateParams, 1);
    if (!sp || !job->plan || !(m->graph = ref_to_pb(a, graph, PLANFARM__BLOB_KIND__BLOB_GRAPH)) ||
        !(m->cluster = ref_to_pb(a, cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER)))
        return PF_ERR;
    planfarm__simulate_params__init(sp);
    if (!(sp->plan = pf_model_codec_plan_to_pb(a, job->plan)))
        return PF_ERR;
    sp->schedule = (uint32_t)job->schedule;
    if (job->xfer_ms && job->nxfer > 0) {
        double *x = PF_ANEW(a, double, job->nxfer);
        if (!x)
            return PF_ERR;
        memcpy(x, job->xfer_ms, (size_t)job->nxfer * sizeof *x);
        sp->xfer_ms = x;
        sp->n_xfer_ms = (size_t)job->nxfer;
    }
    m->simulate = sp;
    return PF_OK;
}

static int sim_params_from_pb(const Planfarm__Job *m, pf_wire_job_t *out, char *err,
                              size_t errlen)
{
    int rc;
    const Planfarm__SimulateParams *sp = m->simulate;
    if ((rc = ref_from_pb(m->graph, PLANFARM__BLOB_KIND__BLOB_GRAPH, &out->graph, "graph", err,
                          errlen)) ||
        (rc = ref_from_pb(m->cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER, &out->cluster,
                          "cluster", err, errlen)))
        return rc;
    if (!sp || !sp->plan)
        return pf_fail(err, errlen, PF_EINPUT, "job.simulate: missing");
    if (sp->schedule >= PF_SCHEDULE_SIGNAL)
        return pf_fail(err, errlen, PF_EINPUT, "job.simulate.schedule: %u is not 1f1b, gpipe or "
                       "eager-1f1b", sp->schedule);
    /* the graph is not known yet: bound op indices by the plan's own (pf_job_codec_check and
     * pf_plan_validate hold them to the graph) */
    uint32_t nops = 0;
    for (size_t s = 0; s < sp->plan->n_stage_list; s++)
        for (size_t i = 0; sp->plan->stage_list[s] && i < sp->plan->stage_list[s]->n_ops; i++)
            if (sp->plan->stage_list[s]->ops[i] >= nops)
                nops = sp->plan->stage_list[s]->ops[i] + 1;
    if (nops > PF_WIRE_MAX_OPS)
        return pf_fail(err, errlen, PF_EINPUT, "job.simulate.plan: op index %u out of range",
                       nops - 1);
    for (size_t s = 0; s < sp->plan->n_stage_list; s++)
        if (!sp->plan->stage_list[s])
            return pf_fail(err, errlen, PF_EINPUT, "job.simulate.plan.stage_list[%zu]: missing",
                           s);
    if ((rc = pf_model_codec_plan_from_pb(sp->plan, (int)nops, PF_WIRE_MAX_DEVICES, &out->plan, err,
                                          errlen)) != PF_OK)
        return rc;
    if (!pf_plan_is_mapped(out->plan))
        return pf_fail(err, errlen, PF_EINPUT, "job.simulate.plan: not mapped");
    if (sp->n_xfer_ms) {
        if (sp->n_xfer_ms != (size_t)(out->plan->stages - 1) * out->plan->replicas)
            return pf_fail(err, errlen, PF_EINPUT, "job.simulate.xfer_ms: %zu entries for %d "
                           "stage boundaries x %d replicas", sp->n_xfer_ms,
                           out->plan->stages - 1, out->plan->replicas);
        if (!(out->xfer_ms = malloc(sp->n_xfer_ms * sizeof *out->xfer_ms)))
            return pf_fail(err, errlen, PF_ERR, "out of memory");
        for (size_t i = 0; i < sp->n_xfer_ms; i++) {
            if (!pf_is_finite_nonneg(sp->xfer_ms[i]))
                return pf_fail(err, errlen, PF_EINPUT, "job.simulate.xfer_ms[%zu]: %g", i,
                               sp->xfer_ms[i]);
            out->xfer_ms[i] = sp->xfer_ms[i];
        }
        out->nxfer = (int)sp->n_xfer_ms;
    }
    out->schedule = (pf_training_schedule_t)sp->schedule;
    return PF_OK;
}

static int sim_answer_to_pb(pf_arena_t *a, const pf_job_result_t *res, Planfarm__JobResult *m)
{
    Planfarm__SimulateAnswer *sa = PF_ANEW(a, Planfarm__SimulateAnswer, 1);
    if (!sa)
        return PF_ERR;
    planfarm__simulate_answer__init(sa);
    sa->step_ms = res->sim.step_ms;
    sa->bubble_fraction = res->sim.bubble_fraction;
    sa->peak_mem_bytes = res->sim.peak_mem_bytes;
    sa->mem_bytes = res->sim.mem_bytes;
    sa->mem_limit_bytes = res->sim.mem_limit_bytes;
    sa->fits = res->sim.fits != 0;
    m->sim = sa;
    return PF_OK;
}

static int sim_answer_from_pb(const Planfarm__JobResult *m, int nops, int ndevices,
                              pf_job_result_t *out, char *err, size_t errlen)
{
    (void)nops, (void)ndevices;
    const Planfarm__SimulateAnswer *sa = m->sim;
    if (!sa)
        return pf_fail(err, errlen, PF_EINPUT, "result.sim: missing");
    out->sim.step_ms = sa->step_ms;
    out->sim.bubble_fraction = sa->bubble_fraction;
    out->sim.peak_mem_bytes = sa->peak_mem_bytes;
    out->sim.mem_bytes = sa->mem_bytes;
    out->sim.mem_limit_bytes = sa->mem_limit_bytes;
    out->sim.fits = sa->fits;
    return PF_OK; /* ranges: pf_job_check_answer */
}

/* RESHARD: the problem and the options; the cluster blob is the network. Answers with the
 * winning schedule's time and every algorithm's. */

static Planfarm__Mesh *mesh_to_pb(pf_arena_t *a, const pf_mesh_t *x)
{
    Planfarm__Mesh *m = PF_ANEW(a, Planfarm__Mesh, 1);
    int n = x->rows * x->cols;
    int32_t *d = PF_ANEW(a, int32_t, n > 0 ? n : 1);
    if (!m || !d || (n > 0 && !x->devices))
        return NULL;
    planfarm__mesh__init(m);
    m->rows = (uint32_t)x->rows;
    m->cols = (uint32_t)x->cols;
    for (int i = 0; i < n; i++)
        d[i] = x->devices[i];
    m->devices = d;
    m->n_devices = (size_t)n;
    return m;
}

static int reshard_params_to_pb(pf_arena_t *a, const pf_job_t *job, const pf_blob_ref_t *graph,
                                const pf_blob_ref_t *cluster, Planfarm__Job *m)
{
    (void)graph;
    const pf_reshard_problem_t *p = &job->reshard;
    const pf_reshard_opts_t *o = &job->reshard_opts;
    Planfarm__ReshardParams *rp = PF_ANEW(a, Planfarm__ReshardParams, 1);
    int n = p->ndims > 0 ? p->ndims : 1;
    int64_t *shape = PF_ANEW(a, int64_t, n);
    uint32_t *ss = PF_ANEW(a, uint32_t, n), *ds = PF_ANEW(a, uint32_t, n);
    if (!rp || !shape || !ss || !ds || !p->shape || !p->src_spec || !p->dst_spec ||
        !(m->cluster = ref_to_pb(a, cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER)))
        return PF_ERR;
    planfarm__reshard_params__init(rp);
    for (int i = 0; i < p->ndims; i++) {
        shape[i] = p->shape[i];
        ss[i] = (uint32_t)p->src_spec[i];
        ds[i] = (uint32_t)p->dst_spec[i];
    }
    rp->shape = shape;
    rp->n_shape = rp->n_src_spec = rp->n_dst_spec = (size_t)p->ndims;
    rp->src_spec = ss;
    rp->dst_spec = ds;
    rp->dtype_bytes = p->dtype_bytes;
    if (!(rp->src_mesh = mesh_to_pb(a, &p->src_mesh)) ||
        !(rp->dst_mesh = mesh_to_pb(a, &p->dst_mesh)))
        return PF_ERR;
    rp->algo = (uint32_t)o->algo;
    rp->strategies = o->strategies;
    rp->max_chunks = (uint32_t)o->max_chunks;
    rp->dfs_budget_s = o->sched.dfs_budget_s;
    rp->dfs_node_cap = o->sched.dfs_node_cap;
    rp->greedy_restarts = (uint32_t)o->sched.greedy_restarts;
    rp->greedy_trials = (uint32_t)o->sched.greedy_trials;
    rp->seed = o->sched.seed;
    m->reshard = rp;
    return PF_OK;
}

static int reshard_params_from_pb(const Planfarm__Job *m, pf_wire_job_t *out, char *err,
                                  size_t errlen)
{
    int rc;
    const Planfarm__ReshardParams *rp = m->reshard;
    if ((rc = ref_from_pb(m->cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER, &out->cluster,
                          "cluster", err, errlen)))
        return rc;
    if (!rp || !rp->src_mesh || !rp->dst_mesh)
        return pf_fail(err, errlen, PF_EINPUT, "job.reshard: missing");
    if (rp->n_shape == 0 || rp->n_shape > PF_RESHARD_MAX_DIMS ||
        rp->n_src_spec != rp->n_shape || rp->n_dst_spec != rp->n_shape)
        return pf_fail(err, errlen, PF_EINPUT, "job.reshard: %zu dims, %zu and %zu spec entries "
                       "(1..%d, one per dim)", rp->n_shape, rp->n_src_spec, rp->n_dst_spec,
                       PF_RESHARD_MAX_DIMS);
    const Planfarm__Mesh *mesh[2] = {rp->src_mesh, rp->dst_mesh};
    size_t total = 0;
    for (int i = 0; i < 2; i++) {
        if (mesh[i]->rows == 0 || mesh[i]->cols == 0 ||
            (uint64_t)mesh[i]->rows * mesh[i]->cols != mesh[i]->n_devices ||
            mesh[i]->n_devices > PF_WIRE_MAX_DEVICES)
            return pf_fail(err, errlen, PF_EINPUT, "job.reshard.%s_mesh: %u x %u with %zu "
                           "devices", i ? "dst" : "src", mesh[i]->rows, mesh[i]->cols,
                           mesh[i]->n_devices);
        total += mesh[i]->n_devices;
    }
    if (rp->algo >= PF_RESHARD_SCHED_NALGOS || rp->strategies > PF_XFER_ALL || rp->max_chunks > 4096 ||
        !isfinite(rp->dfs_budget_s) || rp->dfs_budget_s < 0 || rp->dfs_node_cap < 0 ||
        rp->greedy_restarts > 4096 || rp->greedy_trials > 4096)
        return pf_fail(err, errlen, PF_EINPUT, "job.reshard: an option is out of range");
    if (!(out->reshard_devices = malloc(total * sizeof *out->reshard_devices)))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (size_t i = 0; i < rp->src_mesh->n_devices; i++)
        out->reshard_devices[i] = rp->src_mesh->devices[i];
    for (size_t i = 0; i < rp->dst_mesh->n_devices; i++)
        out->reshard_devices[rp->src_mesh->n_devices + i] = rp->dst_mesh->devices[i];
    for (size_t i = 0; i < rp->n_shape; i++) {
        if (rp->src_spec[i] > PF_SHARDING_S01 || rp->dst_spec[i] > PF_SHARDING_S01)
            return pf_fail(err, errlen, PF_EINPUT, "job.reshard: spec of dim %zu out of range",
                           i);
        out->reshard_shape[i] = rp->shape[i];
        out->reshard_spec[0][i] = (pf_mesh_shard_t)rp->src_spec[i];
        out->reshard_spec[1][i] = (pf_mesh_shard_t)rp->dst_spec[i];
    }
    /* shape, dtype and devices against the network: pf_reshard_new, which names the field */
    out->reshard = (pf_reshard_problem_t){
        .ndims = (int)rp->n_shape, .shape = out->reshard_shape, .dtype_bytes = rp->dtype_bytes,
        .src_mesh = {(int)rp->src_mesh->rows, (int)rp->src_mesh->cols, out->reshard_devices},
        .dst_mesh = {(int)rp->dst_mesh->rows, (int)rp->dst_mesh->cols,
                     out->reshard_devices + rp->src_mesh->n_devices},
        .src_spec = out->reshard_spec[0], .dst_spec = out->reshard_spec[1]};
    pf_reshard_opts_default(&out->reshard_opts);
    out->reshard_opts.algo = (pf_reshard_sched_algo_t)rp->algo;
    out->reshard_opts.strategies = rp->strategies;
    out->reshard_opts.max_chunks = (int)rp->max_chunks;
    out->reshard_opts.sched.dfs_budget_s = rp->dfs_budget_s;
    out->reshard_opts.sched.dfs_node_cap = rp->dfs_node_cap;
    out->reshard_opts.sched.greedy_restarts = (int)rp->greedy_restarts;
    out->reshard_opts.sched.greedy_trials = (int)rp->greedy_trials;
    out->reshard_opts.sched.seed = rp->seed;
    return PF_OK;
}

static int reshard_answer_to_pb(pf_arena_t *a, const pf_job_result_t *res,
                                Planfarm__JobResult *m)
{
    Planfarm__ReshardAnswer *ra = PF_ANEW(a, Planfarm__ReshardAnswer, 1);
    double *ms = PF_ANEW(a, double, PF_RESHARD_SCHED_NALGOS);
    if (!ra || !ms)
        return PF_ERR;
    planfarm__reshard_answer__init(ra);
    ra->time_ms = res->reshard.time_ms;
    ra->algo = (uint32_t)res->reshard.algo;
    ra->ntasks = (uint32_t)res->reshard.ntasks;
    memcpy(ms, res->reshard.algo_ms, PF_RESHARD_SCHED_NALGOS * sizeof *ms);
    ra->algo_ms = ms;
    ra->n_algo_ms = PF_RESHARD_SCHED_NALGOS;
    m->reshard = ra;
    return PF_OK;
}

static int reshard_answer_from_pb(const Planfarm__JobResult *m, int nops, int ndevices,
                                  pf_job_result_t *out, char *err, size_t errlen)
{
    (void)nops, (void)ndevices;
    const Planfarm__ReshardAnswer *ra = m->reshard;
    if (!ra)
        return pf_fail(err, errlen, PF_EINPUT, "result.reshard: missing");
    if (ra->n_algo_ms != PF_RESHARD_SCHED_NALGOS || ra->ntasks > (1u << 30) ||
        ra->algo >= PF_RESHARD_SCHED_NALGOS)
        return pf_fail(err, errlen, PF_EINPUT, "result.reshard: %zu algorithm times, %u tasks, "
                       "algorithm %u", ra->n_algo_ms, ra->ntasks, ra->algo);
    out->reshard.time_ms = ra->time_ms;
    out->reshard.algo = (int)ra->algo;
    out->reshard.ntasks = (int)ra->ntasks;
    memcpy(out->reshard.algo_ms, ra->algo_ms, PF_RESHARD_SCHED_NALGOS * sizeof *ra->algo_ms);
    return PF_OK; /* ranges: pf_job_check_answer */
}

/* One entry per job kind, indexed by pf_job_kind_t; the wire's JobKind numbers are the same. */
static const job_codec_t job_codecs[] = {
    [PF_JOB_NOOP] = {noop_params_to_pb, noop_params_from_pb, noop_answer_to_pb,
                     noop_answer_from_pb},
    [PF_JOB_DP_PARTITION] = {dp_params_to_pb, dp_params_from_pb, dp_answer_to_pb,
                             dp_answer_from_pb},
    [PF_JOB_MAP_PROBE] = {probe_params_to_pb, probe_params_from_pb, probe_answer_to_pb,
                          probe_answer_from_pb},
    [PF_JOB_TAP_ENUM] = {tap_params_to_pb, tap_params_from_pb, tap_answer_to_pb,
                         tap_answer_from_pb},
    [PF_JOB_SIMULATE] = {sim_params_to_pb, sim_params_from_pb, sim_answer_to_pb,
                         sim_answer_from_pb},
    [PF_JOB_RESHARD] = {reshard_params_to_pb, reshard_params_from_pb, reshard_answer_to_pb,
                        reshard_answer_from_pb},
};
_Static_assert(sizeof job_codecs / sizeof job_codecs[0] == PF_JOB_KIND_COUNT,
               "every job kind of planner/search/job.h needs its entry in job_codecs");
_Static_assert((int)PLANFARM__JOB_KIND__JOB_NOOP == PF_JOB_NOOP &&
                   (int)PLANFARM__JOB_KIND__JOB_DP_PARTITION == PF_JOB_DP_PARTITION &&
                   (int)PLANFARM__JOB_KIND__JOB_MAP_PROBE == PF_JOB_MAP_PROBE &&
                   (int)PLANFARM__JOB_KIND__JOB_TAP_ENUM == PF_JOB_TAP_ENUM &&
                   (int)PLANFARM__JOB_KIND__JOB_SIMULATE == PF_JOB_SIMULATE &&
                   (int)PLANFARM__JOB_KIND__JOB_RESHARD == PF_JOB_RESHARD,
               "planfarm.proto's JobKind numbers are pf_job_kind_t's");

/* The kind's hooks; NULL for a number that is no kind (or a kind left without hooks). */
static const job_codec_t *job_codec(int kind)
{
    if (kind < 0 || kind >= PF_JOB_KIND_COUNT || !job_codecs[kind].params_from_pb)
        return NULL;
    return &job_codecs[kind];
}

/* ---- jobs ---- */

Planfarm__Job *pf_job_codec_to_pb(pf_arena_t *a, uint64_t id, uint32_t attempt,
                                  const pf_job_t *job, const pf_blob_ref_t *graph,
                                  const pf_blob_ref_t *cluster)
{
    const job_codec_t *jc = job_codec((int)job->kind);
    Planfarm__Job *m = PF_ANEW(a, Planfarm__Job, 1);
    if (!jc || !m)
        return NULL;
    planfarm__job__init(m);
    m->id = id;
    m->attempt = attempt;
    m->kind = (Planfarm__JobKind)job->kind;
    m->threads = job->threads > 0 ? (uint32_t)job->threads : 0;
    if (!(m->setting = pf_setting_codec_to_pb(a, &job->setting)))
        return NULL;
    return jc->params_to_pb(a, job, graph, cluster, m) == PF_OK ? m : NULL;
}

void pf_job_codec_clear(pf_wire_job_t *j)
{
    if (!j)
        return;
    free(j->group);
    free(j->tap_plans);
    free(j->xfer_ms);
    free(j->reshard_devices);
    pf_plan_destroy(&j->plan);
    pf_stage_graph_destroy(&j->stage_graph);
    memset(j, 0, sizeof *j);
}

int pf_job_codec_from_pb(const Planfarm__Job *m, pf_wire_job_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->id = m->id;
    out->attempt = m->attempt;
    out->threads = m->threads > 4096 ? 0 : (int)m->threads;
    if (m->id == 0)
        return pf_fail(err, errlen, PF_EINPUT, "job.id: zero");
    const job_codec_t *jc = job_codec((int)m->kind);
    if (!jc)
        return pf_fail(err, errlen, PF_EINPUT, "job.kind: unknown (%d)", (int)m->kind);
    out->kind = (pf_job_kind_t)m->kind;
    int rc = pf_setting_codec_from_pb(m->setting, &out->setting, &out->tap_plans, err, errlen);
    if (rc == PF_OK)
        rc = jc->params_from_pb(m, out, err, errlen);
    if (rc != PF_OK)
        pf_job_codec_clear(out);
    return rc;
}

int pf_job_codec_check(const pf_wire_job_t *w, const pf_graph_t *graph,
                      const pf_cluster_t *cluster, char *err, size_t errlen)
{
    const pf_job_kind_desc_t *d = pf_job_kind_desc(w->kind);
    if (!d)
        return pf_fail(err, errlen, PF_EINPUT, "job %llu: unknown kind %d",
                       (unsigned long long)w->id, (int)w->kind);
    if (((d->needs & PF_JOB_NEEDS_GRAPH) && !graph) ||
        ((d->needs & PF_JOB_NEEDS_CLUSTER) && !cluster))
        return pf_fail(err, errlen, PF_EINPUT, "job %llu: its blobs are not the %s%s%s a %s job "
                       "needs", (unsigned long long)w->id,
                       d->needs & PF_JOB_NEEDS_GRAPH ? "graph" : "",
                       (d->needs & PF_JOB_NEEDS_GRAPH) && (d->needs & PF_JOB_NEEDS_CLUSTER)
                           ? " and " : "",
                       d->needs & PF_JOB_NEEDS_CLUSTER ? "cluster" : "", d->name);
    /* the partitioner reads group[v] for every op v */
    if (w->group && graph && w->group_len != (size_t)pf_graph_nops(graph))
        return pf_fail(err, errlen, PF_EINPUT,
                       "job.partition.group: %zu entries for a graph of %d ops", w->group_len,
                       pf_graph_nops(graph));
    if (w->kind == PF_JOB_SIMULATE) {
        char why[200];
        if (!w->plan)
            return pf_fail(err, errlen, PF_EINPUT, "job %llu: simulate without a plan",
                           (unsigned long long)w->id);
        if (pf_plan_validate(w->plan, graph, cluster, why, sizeof why) != PF_OK)
            return pf_fail(err, errlen, PF_EINPUT, "job.simulate.plan: %s", why);
    }
    return PF_OK;
}

void pf_job_codec_bind(const pf_wire_job_t *w, const pf_graph_t *graph,
                      const pf_cluster_t *cluster, pf_job_t *job)
{
    pf_job_init(job, w->kind);
    job->graph = graph;
    job->cluster = cluster;
    job->partition = w->partition;
    job->stage_graph = w->stage_graph;
    job->inst = w->inst;
    job->target_ms = w->target_ms;
    job->budget_s = w->budget_s;
    job->symmetry = w->symmetry;
    job->threads = w->threads;
    job->setting = w->setting;
    job->tap_unit = w->tap_unit;
    job->tap_lo = w->tap_lo;
    job->tap_hi = w->tap_hi;
    job->plan = w->plan;
    job->schedule = w->schedule;
    job->xfer_ms = w->xfer_ms;
    job->nxfer = w->nxfer;
    if (w->kind == PF_JOB_RESHARD) {
        job->reshard = w->reshard;
        job->reshard_opts = w->reshard_opts;
    }
}

/* ---- results ---- */

Planfarm__JobResult *pf_job_codec_result_to_pb(pf_arena_t *a, uint64_t id, const pf_job_result_t *res)
{
    const job_codec_t *jc = job_codec((int)res->kind);
    Planfarm__JobResult *m = PF_ANEW(a, Planfarm__JobResult, 1);
    if (!jc || !m)
        return NULL;
    planfarm__job_result__init(m);
    m->id = id;
    m->kind = (Planfarm__JobKind)res->kind;
    m->status = res->status;
    m->error = (char *)res->error;
    m->seconds = res->seconds;
    return jc->answer_to_pb(a, res, m) == PF_OK ? m : NULL;
}

int pf_job_codec_result_from_pb(const Planfarm__JobResult *m, int nops, int ndevices,
                            pf_job_result_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const job_codec_t *jc = job_codec((int)m->kind);
    if (!jc)
        return pf_fail(err, errlen, PF_EINPUT, "result.kind: unknown (%d)", (int)m->kind);
    if (m->status != PF_OK && m->status != PF_ERR && m->status != PF_EINPUT &&
        m->status != PF_EINFEASIBLE)
        return pf_fail(err, errlen, PF_EINPUT, "result.status: unknown (%d)", m->status);
    out->kind = (pf_job_kind_t)m->kind;
    out->status = m->status;
    out->seconds = isfinite(m->seconds) ? m->seconds : 0;
    snprintf(out->error, sizeof out->error, "%s", m->error ? m->error : "");
    if (out->status != PF_OK)
        return PF_OK;
    int rc = jc->answer_from_pb(m, nops, ndevices, out, err, errlen);
    if (rc != PF_OK)
        pf_job_result_clear(out);
    return rc;
}
