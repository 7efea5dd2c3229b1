#include "planner/jobs.h"
#include "planner/util.h"

#include <stdlib.h>
#include <string.h>

const char *pf_job_kind_name(pf_job_kind_t k)
{
    switch (k) {
    case PF_JOB_NOOP: return "noop";
    case PF_JOB_DP_PARTITION: return "dp_partition";
    case PF_JOB_MAP_PROBE: return "map_probe";
    default: return "unknown";
    }
}

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

int pf_job_run(const pf_job_t *job, pf_job_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->kind = job->kind;
    double t0 = pf_now_s();
    switch (job->kind) {
    case PF_JOB_NOOP:
        res->status = PF_OK;
        break;
    case PF_JOB_DP_PARTITION:
        res->status = run_partition(job, res);
        break;
    case PF_JOB_MAP_PROBE:
        res->status = run_probe(job, res);
        break;
    default:
        res->status = pf_fail(res->error, sizeof res->error, PF_EINPUT, "unknown job kind %d",
                              (int)job->kind);
    }
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
