#include "planner/jobs.h"
#include "planner/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int run_partition(const pf_job_t *job, pf_job_result_t *res)
{
    pf_partition_opts_t o = job->partition;
    if (!job->graph || !job->cluster)
        return pf_fail(res->error, sizeof res->error, PF_EINPUT, "partition job without inputs");
    if (job->threads > 0)
        o.threads = job->threads;
    return pf_partition_run(job->graph, job->cluster, &o, &res->plan, res->error,
                            sizeof res->error);
}

static int run_probe(const pf_job_t *job, pf_job_result_t *res)
{
    if (!job->stage_graph || !job->cluster)
        return pf_fail(res->error, sizeof res->error, PF_EINPUT, "probe job without inputs");
    int n = pf_stage_graph_stages(job->stage_graph) * pf_stage_graph_replicas(job->stage_graph);
    if (n > pf_cluster_ndevices(job->cluster))
        return pf_fail(res->error, sizeof res->error, PF_EINPUT,
                       "probe job: %d stage replicas for %d devices", n,
                       pf_cluster_ndevices(job->cluster));
    res->devices = malloc((size_t)n * sizeof *res->devices);
    if (!res->devices)
        return pf_fail(res->error, sizeof res->error, PF_ERR, "out of memory");
    double deadline = job->budget_s > 0 ? pf_now_s() + job->budget_s : 0;
    int rc = pf_map_probe(job->stage_graph, job->cluster, job->inst, job->target_ms, deadline,
                          job->symmetry, job->threads, job->cancel, res->devices, &res->probe,
                          res->error, sizeof res->error);
    if (rc == PF_OK && !res->probe.found && job->cancel && atomic_load(job->cancel)) {
        /* Stopped by its flag, not exhausted: "no mapping meets the target" would be a claim
         * the search moves t_l on (a deadline-cancelled copy's answer is still accepted), so
         * this is no answer at all. (A probe that finished just before the flag rose is
         * discarded too: its job was no longer wanted.) */
        rc = pf_fail(res->error, sizeof res->error, PF_ERR, "cancelled");
    }
    if (rc == PF_OK && res->probe.found) {
        res->ndevices = n;
    } else {
        free(res->devices);
        res->devices = NULL;
    }
    return rc;
}

/* ---- checks of answers against their jobs ---- */

/* A partition becomes a candidate's stage graph and, maybe, the plan: it must split the job's
 * graph into the stages, replicas and micro-batches the job asked for. */
static int check_partition(const pf_job_t *job, const pf_job_result_t *res, char *err,
                           size_t errlen)
{
    const pf_partition_opts_t *o = &job->partition;
    const pf_plan_t *p = res->plan;
    if (!p)
        return pf_fail(err, errlen, PF_EINPUT, "partition answer without a plan");
    if (p->stages != o->stages || p->replicas != o->replicas ||
        p->microbatches != o->microbatches)
        return pf_fail(err, errlen, PF_EINPUT,
                       "partition of %d stages x %d replicas, %d micro-batches for a job of "
                       "%d x %d, %d",
                       p->stages, p->replicas, p->microbatches, o->stages, o->replicas,
                       o->microbatches);
    if (!isfinite(p->partition_objective_ms) || p->partition_objective_ms < 0)
        return pf_fail(err, errlen, PF_EINPUT, "partition objective %g ms",
                       p->partition_objective_ms);
    return pf_plan_validate(p, job->graph, job->cluster, err, errlen);
}

/* A found mapping moves the binary search's t_r: it must be a mapping of every stage replica
 * and meet the target, by our own count of its objective. */
static int check_probe(const pf_job_t *job, const pf_job_result_t *res, char *err, size_t errlen)
{
    if (!res->probe.found)
        return PF_OK;
    const pf_stage_graph_t *sg = job->stage_graph;
    int nx = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg);
    int D = pf_cluster_ndevices(job->cluster);
    if (!res->devices || res->ndevices != nx)
        return pf_fail(err, errlen, PF_EINPUT, "a mapping of %d stage replicas, not %d",
                       res->devices ? res->ndevices : 0, nx);
    char *used = calloc((size_t)D, 1);
    if (!used)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    int bad = -1;
    for (int x = 0; x < nx && bad < 0; x++)
        if (res->devices[x] < 0 || res->devices[x] >= D || used[res->devices[x]]++)
            bad = x;
    free(used);
    if (bad >= 0)
        return pf_fail(err, errlen, PF_EINPUT, "mapping: stage replica %d on device %d, "
                       "out of range or taken", bad, res->devices[bad]);
    double obj = pf_map_objective_ms(sg, job->cluster, job->inst, res->devices);
    if (!(fabs(obj - res->probe.objective_ms) <= 1e-9 * fmax(1, obj)) ||
        obj > job->target_ms * (1 + 1e-9))
        return pf_fail(err, errlen, PF_EINPUT, "mapping claimed %g ms at target %g ms; it costs %g ms",
                       res->probe.objective_ms, job->target_ms, obj);
    return PF_OK;
}

static int check_nothing(const pf_job_t *job, const pf_job_result_t *res, char *err, size_t errlen)
{
    (void)job, (void)res, (void)err, (void)errlen;
    return PF_OK;
}

static int run_noop(const pf_job_t *job, pf_job_result_t *res)
{
    (void)job, (void)res;
    return PF_OK;
}

/* ---- deadlines ---- */

static double timeout_noop(const pf_job_t *job, const pf_job_limits_t *lim)
{
    (void)job;
    return lim->noop_s;
}

static double timeout_solve(const pf_job_t *job, const pf_job_limits_t *lim)
{
    (void)job;
    return lim->solve_s;
}

/* A probe gives up at its own budget; past budget + margin its worker is presumed lost. */
static double timeout_budgeted(const pf_job_t *job, const pf_job_limits_t *lim)
{
    return job->budget_s > 0 ? job->budget_s + lim->margin_s : lim->solve_s;
}

/* ---- the table ---- */

static const pf_job_kind_desc_t kinds[PF_JOB_KIND_COUNT] = {
    [PF_JOB_NOOP] = {PF_JOB_NOOP, "noop", 0, run_noop, timeout_noop, check_nothing},
    [PF_JOB_DP_PARTITION] = {PF_JOB_DP_PARTITION, "dp_partition",
                             PF_JOB_NEEDS_GRAPH | PF_JOB_NEEDS_CLUSTER, run_partition,
                             timeout_solve, check_partition},
    [PF_JOB_MAP_PROBE] = {PF_JOB_MAP_PROBE, "map_probe", PF_JOB_NEEDS_CLUSTER, run_probe,
                          timeout_budgeted, check_probe},
};

const pf_job_kind_desc_t *pf_job_kind_desc(pf_job_kind_t k)
{
    if ((int)k < 0 || k >= PF_JOB_KIND_COUNT || !kinds[k].name)
        return NULL;
    return &kinds[k];
}

const char *pf_job_kind_name(pf_job_kind_t k)
{
    const pf_job_kind_desc_t *d = pf_job_kind_desc(k);
    return d ? d->name : "unknown";
}

int pf_job_kind_by_name(const char *name)
{
    for (int k = 0; name && k < PF_JOB_KIND_COUNT; k++)
        if (kinds[k].name && strcmp(kinds[k].name, name) == 0)
            return k;
    return -1;
}

void pf_job_limits_init(pf_job_limits_t *l)
{
    l->solve_s = 1800;
    l->margin_s = 30;
    l->noop_s = 30;
}

double pf_job_timeout_s(const pf_job_t *job, const pf_job_limits_t *lim)
{
    const pf_job_kind_desc_t *d = pf_job_kind_desc(job->kind);
    return d ? d->timeout_s(job, lim) : lim->noop_s;
}

int pf_job_check_answer(const pf_job_t *job, const pf_job_result_t *res, char *err,
                        size_t errlen)
{
    const pf_job_kind_desc_t *d = pf_job_kind_desc(job->kind);
    if (!d)
        return pf_fail(err, errlen, PF_EINPUT, "unknown job kind %d", (int)job->kind);
    if (res->kind != job->kind)
        return pf_fail(err, errlen, PF_EINPUT, "a %s answer for a %s job",
                       pf_job_kind_name(res->kind), d->name);
    if (res->status != PF_OK)
        return PF_OK;
    return d->check(job, res, err, errlen);
}

int pf_job_run(const pf_job_t *job, pf_job_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->kind = job->kind;
    double t0 = pf_now_s();
    const pf_job_kind_desc_t *d = pf_job_kind_desc(job->kind);
    if (d)
        res->status = d->run(job, res);
    else
        res->status = pf_fail(res->error, sizeof res->error, PF_EINPUT, "unknown job kind %d",
                              (int)job->kind);
    res->seconds = pf_now_s() - t0;
    return res->status;
}

void pf_job_result_clear(pf_job_result_t *res)
{
    if (!res)
        return;
    pf_plan_destroy(&res->plan);
    free(res->devices);
    memset(res, 0, sizeof *res);
}

int pf_job_result_copy(pf_job_result_t *dst, const pf_job_result_t *src)
{
    *dst = *src;
    dst->plan = NULL;
    dst->devices = NULL;
    if (src->plan && !(dst->plan = pf_plan_clone(src->plan)))
        goto fail;
    if (src->devices) {
        dst->devices = malloc((size_t)src->ndevices * sizeof *dst->devices);
        if (!dst->devices)
            goto fail;
        memcpy(dst->devices, src->devices, (size_t)src->ndevices * sizeof *dst->devices);
    }
    return PF_OK;
fail:
    pf_job_result_clear(dst);
    return PF_ERR;
}
