#include "planner/search/job.h"
#include "planner/ir/cost.h"
#include "planner/partition/partition_stagedeg.h"
#include "planner/sim/chunks.h"
#include "planner/sim/simbound.h"
#include "planner/sim/simulate_check.h"
#include "planner/sim/simulate.h"
#include "planner/sim/simstages_plan.h"
#include "planner/sim/stage_rc.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The setting a job plans on: NULL (the graph and cluster as they are) for T = 1 and no
 * recomputation, else built here from the job's own inputs (tp_setting.h). */
static int job_setting(const pf_job_t *job, pf_tp_setting_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (job->setting.tp <= 1 && job->setting.train.recompute == PF_RECOMPUTE_NONE)
        return PF_OK;
    *out = pf_tp_setting_new(job->graph, job->cluster, &job->setting, err, errlen);
    return *out ? PF_OK : PF_EINPUT;
}

/* --stage-degrees with tensor parallelism: the graph per device at every degree of the mask
 * that divides each host (tp_setting.h with TAP in-process, deterministic, as a worker rebuilds
 * any setting; a degree TAP cannot plan is not offered), then stagedeg_tp.h over single
 * devices. */
static int run_stage_tp(const pf_job_t *job, pf_partition_opts_t *o, pf_job_result_t *res)
{
    enum { MAXT = 16 };
    int list[MAXT], nt = 0, rc;
    int n = pf_tp_groups_degrees(job->cluster, job->setting.across_hosts, list, MAXT);
    pf_tp_setting_t *set[MAXT] = {0};
    pf_partition_stagedeg_tp_t tps[MAXT];
    char why[256] = "";
    for (int i = 0; i < n; i++) {
        if (list[i] >= 64 || !(o->stage_tp_mask >> list[i] & 1))
            continue;
        pf_tp_setting_opts_t so = job->setting;
        so.tp = list[i], so.tap_plans = NULL, so.ntap_plans = 0;
        if (!(set[nt] = pf_tp_setting_new(job->graph, job->cluster, &so, why, sizeof why)))
            continue;
        tps[nt] = (pf_partition_stagedeg_tp_t){list[i], pf_tp_setting_graph(set[nt])};
        o->reserve_bytes = fmax(o->reserve_bytes, pf_tp_setting_reserve_bytes(set[nt]));
        nt++;
    }
    rc = nt ? pf_partition_stagedeg_run_tp(job->graph, job->cluster, o, tps, nt, &res->plan,
                                           res->error, sizeof res->error)
            : pf_fail(res->error, sizeof res->error, PF_EINFEASIBLE, "per-stage tensor "
                      "parallelism: no degree of the mask 0x%llx can be planned%s%s",
                      o->stage_tp_mask, why[0] ? ": " : "", why);
    for (int i = 0; i < nt; i++)
        pf_tp_setting_destroy(&set[i]);
    return rc;
}

static int run_partition(const pf_job_t *job, pf_job_result_t *res)
{
    pf_partition_opts_t o = job->partition;
    pf_tp_setting_t *set = NULL;
    if (!job->graph || !job->cluster)
        return pf_fail(res->error, sizeof res->error, PF_EINPUT, "partition job without inputs");
    if (job->threads > 0)
        o.threads = job->threads;
    o.train = job->setting.train;
    if (o.stage_degrees && o.stage_tp_mask) {
        int rc = run_stage_tp(job, &o, res);
        if (rc == PF_OK)
            res->plan->train = job->setting.train;
        return rc;
    }
    int rc = job_setting(job, &set, res->error, sizeof res->error);
    if (rc != PF_OK)
        return rc;
    const pf_graph_t *g = set ? pf_tp_setting_graph(set) : job->graph;
    const pf_cluster_t *c = set ? pf_tp_setting_cluster(set) : job->cluster;
    o.train = job->setting.train;
    o.reserve_bytes = set ? pf_tp_setting_reserve_bytes(set) : 0;
    rc = (o.stage_degrees ? pf_partition_stagedeg_run : pf_partition_run)(g, c, &o, &res->plan,
                                                                          res->error,
                                                                          sizeof res->error);
    if (rc == PF_OK)
        res->plan->train = job->setting.train;
    pf_tp_setting_destroy(&set);
    return rc;
}

/* The cluster a probe maps onto: the group cluster of its degree T. */
static const pf_cluster_t *probe_cluster(const pf_job_t *job, pf_tp_groups_t **own, char *err,
                                         size_t errlen)
{
    *own = NULL;
    if (job->setting.tp <= 1)
        return job->cluster;
    *own = pf_tp_groups_new(job->cluster, job->setting.tp, job->setting.across_hosts, err,
                            errlen);
    return *own ? pf_tp_groups_cluster(*own) : NULL;
}

static int run_probe(const pf_job_t *job, pf_job_result_t *res)
{
    pf_tp_groups_t *groups = NULL;
    if (!job->stage_graph || !job->cluster)
        return pf_fail(res->error, sizeof res->error, PF_EINPUT, "probe job without inputs");
    const pf_cluster_t *c = probe_cluster(job, &groups, res->error, sizeof res->error);
    if (!c)
        return PF_EINPUT;
    int rc, n = pf_stage_graph_stages(job->stage_graph) * pf_stage_graph_replicas(job->stage_graph);
    if (n > pf_cluster_ndevices(c)) {
        rc = pf_fail(res->error, sizeof res->error, PF_EINPUT,
                     "probe job: %d stage replicas for %d devices", n, pf_cluster_ndevices(c));
        goto done;
    }
    res->devices = malloc((size_t)n * sizeof *res->devices);
    if (!res->devices) {
        rc = pf_fail(res->error, sizeof res->error, PF_ERR, "out of memory");
        goto done;
    }
    double deadline = job->budget_s > 0 ? pf_now_s() + job->budget_s : 0;
    rc = pf_mapping_probe(job->stage_graph, c, job->inst, job->target_ms, deadline, job->symmetry,
                          job->threads, job->cancel, res->devices, &res->probe, res->error,
                          sizeof res->error);
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
done:
    pf_tp_groups_destroy(&groups);
    return rc;
}

/* One slice of one unit's plans ([TAP]): the units are rebuilt from the graph (PRUNEGRAPH
 * is deterministic) and the collectives priced on the link of the job's groups. */
static int run_tap_enum(const pf_job_t *job, pf_job_result_t *res)
{
    pf_tp_groups_t *groups = NULL;
    pf_tap_units_t *units = NULL;
    int rc = PF_EINPUT;
    if (!job->graph || !job->cluster)
        return pf_fail(res->error, sizeof res->error, PF_EINPUT, "TAP job without inputs");
    if (job->setting.tp < 2)
        return pf_fail(res->error, sizeof res->error, PF_EINPUT, "TAP job for degree %d",
                       job->setting.tp);
    pf_tap_opts_t to = job->setting.tap;
    to.param_state_factor = pf_training_state_factor(&job->setting.train, 1);
    if (!(groups = pf_tp_groups_new(job->cluster, job->setting.tp, job->setting.across_hosts,
                                    res->error, sizeof res->error)) ||
        !(units = pf_tap_units_new(job->graph, &to, res->error, sizeof res->error)))
        goto done;
    pf_sharding_link_t link = pf_sharding_link_of(
        job->cluster, pf_tp_groups_members(groups, 0), job->setting.tp,
        pf_tp_groups_link_gbps(groups), pf_tp_groups_link_lat_us(groups));
    rc = pf_tap_enum_slice(job->graph, units, job->tap_unit, job->setting.tp, &link, &to,
                           job->tap_lo, job->tap_hi, &res->tap, res->error, sizeof res->error);
done:
    pf_tap_units_destroy(&units);
    pf_tp_groups_destroy(&groups);
    return rc;
}

/* The stages' memory under the job's schedule, by the cost model the partitioner checks memory
 * with (cost.h: parameter state + k_s micro-batches of activations + reserve), each against the
 * least memory among the stage's devices. */
static int sim_memory(const pf_job_t *job, const pf_graph_t *dg, const pf_tp_setting_t *set,
                      const pf_plan_t *p, const pf_simulate_input_t *in,
                      const pf_simulate_result_t *r, pf_job_result_t *res)
{
    int *op_stage = pf_plan_op_stage(p, pf_graph_nops(dg));
    pf_stage_rc_t views; /* each stage at its own recomputation (stage_rc.h) */
    if (!op_stage || pf_stage_rc_init(&views, job->graph, set, p, 0, res->error,
                                      sizeof res->error) != PF_OK) {
        free(op_stage);
        return pf_fail(res->error, sizeof res->error, PF_ERR, "out of memory");
    }
    pf_training_t train = job->setting.train;
    train.schedule = job->schedule;
    pf_cost_model_t cm;
    pf_cost_model_init(&cm, job->cluster, p->stages, p->microbatches, 0);
    pf_cost_model_set_training(&cm, &train, p->replicas,
                               set ? pf_tp_setting_reserve_bytes(set) : 0);
    int n = p->replicas * p->tensor_parallel;
    res->sim.fits = 1;
    for (int s = 0; s < p->stages; s++) {
        cm.reserve_bytes = pf_stage_rc_reserve_bytes(&views, p, s);
        double mem = pf_cost_stage_mem_bytes(pf_stage_rc_graph(&views, p, s), op_stage, s, &cm) +
                     pf_chunks_extra_bytes(in, r, s), limit = INFINITY;
        for (int i = 0; i < n; i++)
            limit = fmin(limit, pf_cluster_device(job->cluster,
                                                  p->stage_list[s].devices[i])->mem_bytes);
        if (mem > limit * (1 + 1e-12))
            res->sim.fits = 0;
        if (mem > res->sim.mem_bytes) {
            res->sim.mem_bytes = mem;
            res->sim.mem_limit_bytes = limit;
        }
    }
    free(op_stage);
    pf_stage_rc_clear(&views);
    return PF_OK;
}

/* What a SIMULATE job simulates: its setting, its plan under the job's training and schedule,
 * and the simulator's input from them (interleaving's chunks included). */
static int sim_input(const pf_job_t *job, pf_tp_setting_t **set, pf_plan_t **p,
                     pf_simulate_input_t *in, char *err, size_t errlen)
{
    if (!job->graph || !job->cluster || !job->plan)
        return pf_fail(err, errlen, PF_EINPUT, "simulate job without inputs");
    if (job->schedule == PF_SCHEDULE_SIGNAL || (unsigned)job->schedule >= PF_SCHEDULE_COUNT)
        return pf_fail(err, errlen, PF_EINPUT, "simulate job: schedule %d is not one to run",
                       (int)job->schedule);
    int T = job->setting.tp > 1 ? job->setting.tp : 1, rc;
    if (job->plan->tensor_parallel != T)
        return pf_fail(err, errlen, PF_EINPUT, "simulate job: a plan of tensor parallelism %d "
                       "in a setting of %d", job->plan->tensor_parallel, T);
    if (job->xfer_ms && job->nxfer != (job->plan->stages - 1) * job->plan->replicas)
        return pf_fail(err, errlen, PF_EINPUT, "simulate job: %d resharding times for %d "
                       "stage boundaries x %d replicas", job->nxfer, job->plan->stages - 1,
                       job->plan->replicas);
    if ((rc = job_setting(job, set, err, errlen)) != PF_OK)
        return rc;
    if (!(*p = pf_plan_clone(job->plan)))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    (*p)->train = job->setting.train;
    (*p)->train.schedule = job->schedule;
    snprintf((*p)->schedule, sizeof (*p)->schedule, "%s", pf_training_schedule_name(job->schedule));
    return pf_chunks_input_from_setting(job->graph, job->cluster, *set, *p, job->xfer_ms, in, err,
                                        errlen);
}

/* Whether every device's simulated peak (parameter state + the activations its replica holds in
 * flight) and its stage's recomputation reserve (stage_rc.h, as sim_memory counts it; from the
 * request's graph, so at t > 1 a bound) fit the device's memory; the device nearest its limit (or
 * most over) is the one named. */
static int mixed_memory(const pf_job_t *job, const pf_plan_t *p, const pf_simulate_result_t *r,
                        pf_job_result_t *res)
{
    pf_stage_rc_t views;
    if (pf_stage_rc_init(&views, job->graph, NULL, p, 0, res->error, sizeof res->error) != PF_OK)
        return pf_fail(res->error, sizeof res->error, PF_ERR, "out of memory");
    res->sim.fits = 1;
    double worst = -INFINITY;
    for (int i = 0; i < r->ndevices; i++) {
        int s, rep, k;
        pf_simstages_plan_row(p, i, &s, &rep, &k);
        double mem = r->peak_mem_bytes[i] + pf_stage_rc_reserve_bytes(&views, p, s);
        double limit = pf_cluster_device(job->cluster, r->device[i])->mem_bytes;
        res->sim.peak_mem_bytes = fmax(res->sim.peak_mem_bytes, r->peak_mem_bytes[i]);
        if (mem > limit * (1 + 1e-12))
            res->sim.fits = 0;
        if (mem - limit > worst) {
            worst = mem - limit;
            res->sim.mem_bytes = mem;
            res->sim.mem_limit_bytes = limit;
        }
    }
    pf_stage_rc_clear(&views);
    return PF_OK;
}

/* A plan whose stages differ (simstages.h) under the job's training and schedule: its step and
 * its memory verdict (mixed_memory). */
static int run_simulate_mixed(const pf_job_t *job, pf_job_result_t *res)
{
    pf_plan_t *p = NULL;
    pf_simstages_input_t in = {0};
    pf_simulate_result_t *r = NULL;
    int rc = PF_OK;
    if (job->schedule == PF_SCHEDULE_SIGNAL || (unsigned)job->schedule >= PF_SCHEDULE_COUNT)
        return pf_fail(res->error, sizeof res->error, PF_EINPUT, "simulate job: schedule %d is "
                       "not one to run", (int)job->schedule);
    if (!(p = pf_plan_clone(job->plan)))
        return pf_fail(res->error, sizeof res->error, PF_ERR, "out of memory");
    p->train = job->setting.train;
    p->train.schedule = job->schedule;
    snprintf(p->schedule, sizeof p->schedule, "%s", pf_training_schedule_name(job->schedule));
    if ((rc = pf_simstages_plan_input(job->graph, job->cluster, p, &in, res->error,
                                      sizeof res->error)) != PF_OK)
        goto done;
    in.cancel = job->cancel;
    if ((rc = pf_simstages_run(&in, &r, res->error, sizeof res->error)) != PF_OK)
        goto done;
    res->sim.step_ms = r->step_ms;
    res->sim.bubble_fraction = r->bubble_fraction;
    rc = mixed_memory(job, p, r, res);
done:
    pf_simulate_result_destroy(&r);
    pf_simstages_input_clear(&in);
    pf_plan_destroy(&p);
    return rc;
}

/* A candidate's plan under one schedule (simulate.h): its step time and whether its memory fits
 * under that schedule's micro-batches in flight. */
static int run_simulate(const pf_job_t *job, pf_job_result_t *res)
{
    /* stages that differ, or one degree T other than the setting's (a per-stage plan whose
     * stages came out alike, --stage-degrees): simstages prices each degree itself */
    int T = job->setting.tp > 0 ? job->setting.tp : 1;
    if (job->graph && job->cluster && job->plan &&
        (pf_plan_degrees_mixed(job->plan) || job->plan->tensor_parallel != T))
        return run_simulate_mixed(job, res);
    pf_tp_setting_t *set = NULL;
    pf_plan_t *p = NULL;
    pf_simulate_input_t in = {0};
    pf_simulate_result_t *r = NULL;
    int rc;
    if ((rc = sim_input(job, &set, &p, &in, res->error, sizeof res->error)) != PF_OK)
        goto done;
    in.cancel = job->cancel; /* the answer is no longer wanted: stop (search_sim.c) */
    if ((rc = pf_simulate(&in, &r, res->error, sizeof res->error)) != PF_OK)
        goto done;
    res->sim.step_ms = r->step_ms;
    res->sim.bubble_fraction = r->bubble_fraction;
    for (int i = 0; i < r->ndevices; i++)
        res->sim.peak_mem_bytes = fmax(res->sim.peak_mem_bytes, r->peak_mem_bytes[i]);
    rc = sim_memory(job, set ? pf_tp_setting_graph(set) : job->graph, set, p, &in, r, res);
done:
    pf_simulate_result_destroy(&r);
    pf_simulate_input_clear(&in);
    pf_plan_destroy(&p);
    pf_tp_setting_destroy(&set);
    return rc;
}

double pf_job_simulate_bound_ms(const pf_job_t *job)
{
    pf_tp_setting_t *set = NULL;
    pf_plan_t *p = NULL;
    pf_simulate_input_t in = {0};
    char err[256];
    double ms = 0;
    if (job->kind == PF_JOB_SIMULATE && sim_input(job, &set, &p, &in, err, sizeof err) == PF_OK &&
        pf_simulate_check(&in, err, sizeof err) == PF_OK)
        ms = pf_simbound_step_ms(&in);
    pf_simulate_input_clear(&in);
    pf_plan_destroy(&p);
    pf_tp_setting_destroy(&set);
    return ms;
}

/* One cross-mesh resharding problem on the cluster's network (reshard.h). */
static int run_reshard(const pf_job_t *job, pf_job_result_t *res)
{
    if (!job->cluster)
        return pf_fail(res->error, sizeof res->error, PF_EINPUT, "reshard job without a cluster");
    pf_reshard_net_t *net = pf_reshard_net_from_cluster(job->cluster, res->error,
                                                        sizeof res->error);
    if (!net)
        return PF_EINPUT;
    pf_reshard_t *r = pf_reshard_new(&job->reshard, net, &job->reshard_opts, res->error,
                                     sizeof res->error);
    pf_reshard_net_destroy(&net);
    if (!r)
        return PF_EINPUT;
    const pf_reshard_sched_result_t *sr = pf_reshard_schedule(r);
    res->reshard.time_ms = pf_reshard_time_ms(r);
    res->reshard.ntasks = pf_reshard_ntasks(r);
    res->reshard.algo = (int)sr->algo;
    memcpy(res->reshard.algo_ms, sr->algo_ms, sizeof res->reshard.algo_ms);
    pf_reshard_destroy(&r);
    return PF_OK;
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
    if (o->stage_degrees && pf_plan_degrees_step_microbatches(p) != o->microbatches)
        return pf_fail(err, errlen, PF_EINPUT, "per-stage partition of %lld micro-batches per "
                       "step for a job of %d", pf_plan_degrees_step_microbatches(p),
                       o->microbatches);
    if (!o->stage_degrees && (p->stages != o->stages || p->replicas != o->replicas ||
        p->microbatches != o->microbatches))
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
    pf_tp_groups_t *groups = NULL;
    int nx = pf_stage_graph_stages(sg) * pf_stage_graph_replicas(sg), rc = PF_OK;
    const pf_cluster_t *c = probe_cluster(job, &groups, err, errlen);
    if (!c)
        return PF_EINPUT;
    int D = pf_cluster_ndevices(c);
    char *used = NULL;
    if (!res->devices || res->ndevices != nx) {
        rc = pf_fail(err, errlen, PF_EINPUT, "a mapping of %d stage replicas, not %d",
                     res->devices ? res->ndevices : 0, nx);
        goto done;
    }
    if (!(used = calloc((size_t)D, 1))) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto done;
    }
    int bad = -1;
    for (int x = 0; x < nx && bad < 0; x++)
        if (res->devices[x] < 0 || res->devices[x] >= D || used[res->devices[x]]++)
            bad = x;
    if (bad >= 0) {
        rc = pf_fail(err, errlen, PF_EINPUT, "mapping: stage replica %d on device %d, out of "
                     "range or taken", bad, res->devices[bad]);
        goto done;
    }
    double obj = pf_mapping_objective_ms(sg, c, job->inst, res->devices);
    if (!(fabs(obj - res->probe.objective_ms) <= 1e-9 * fmax(1, obj)) ||
        obj > job->target_ms * (1 + 1e-9))
        rc = pf_fail(err, errlen, PF_EINPUT, "mapping claimed %g ms at target %g ms; it costs "
                     "%g ms", res->probe.objective_ms, job->target_ms, obj);
done:
    free(used);
    pf_tp_groups_destroy(&groups);
    return rc;
}

/* The best plans of a slice: in the slice, ranked, finite. */
static int check_tap_enum(const pf_job_t *job, const pf_job_result_t *res, char *err,
                          size_t errlen)
{
    const pf_tap_slice_t *t = &res->tap;
    if (t->unit != job->tap_unit || t->T != job->setting.tp || t->lo != job->tap_lo ||
        t->hi != job->tap_hi)
        return pf_fail(err, errlen, PF_EINPUT, "TAP answer for unit %d, T %d, plans [%llu, %llu) "
                       "to a job of unit %d, T %d, [%llu, %llu)", t->unit, t->T,
                       (unsigned long long)t->lo, (unsigned long long)t->hi, job->tap_unit,
                       job->setting.tp, (unsigned long long)job->tap_lo,
                       (unsigned long long)job->tap_hi);
    if (t->nbest < 0 || t->nbest > PF_TAP_KEEP || t->feasible > t->hi - t->lo ||
        (uint64_t)t->nbest > t->feasible)
        return pf_fail(err, errlen, PF_EINPUT, "TAP answer: %d best of %llu feasible plans",
                       t->nbest, (unsigned long long)t->feasible);
    for (int i = 0; i < t->nbest; i++) {
        const pf_tap_cand_t *b = &t->best[i];
        if (b->plan < t->lo || b->plan >= t->hi || !isfinite(b->time_ms) || b->time_ms < 0 ||
            !isfinite(b->mem_bytes) || b->mem_bytes < 0 ||
            (i > 0 && b->time_ms < t->best[i - 1].time_ms))
            return pf_fail(err, errlen, PF_EINPUT, "TAP answer: best[%d] is plan %llu at "
                           "%g ms, out of its slice or order", i, (unsigned long long)b->plan,
                           b->time_ms);
    }
    return PF_OK;
}

/* A simulated step ranks the candidates: finite, and the memory verdict agrees with its numbers. */
static int check_simulate(const pf_job_t *job, const pf_job_result_t *res, char *err,
                          size_t errlen)
{
    (void)job;
    const struct pf_sim_answer *x = &res->sim;
    if (!pf_is_finite_nonneg(x->step_ms) || !(x->bubble_fraction >= -1e-9) ||
        !(x->bubble_fraction <= 1 + 1e-9) || !pf_is_finite_nonneg(x->peak_mem_bytes) ||
        !pf_is_finite_nonneg(x->mem_bytes) || !(x->mem_limit_bytes >= 0) ||
        (x->fits != 0 && x->fits != 1))
        return pf_fail(err, errlen, PF_EINPUT, "simulate answer: step %g ms, bubble %g, memory "
                       "%g of %g bytes, fits %d", x->step_ms, x->bubble_fraction, x->mem_bytes,
                       x->mem_limit_bytes, x->fits);
    if (!x->fits && x->mem_bytes <= x->mem_limit_bytes)
        return pf_fail(err, errlen, PF_EINPUT, "simulate answer: %g bytes within %g do not fit",
                       x->mem_bytes, x->mem_limit_bytes);
    return PF_OK;
}

/* The resharding time is the winning algorithm's makespan, and no algorithm run beat it. */
static int check_reshard(const pf_job_t *job, const pf_job_result_t *res, char *err,
                         size_t errlen)
{
    (void)job;
    const struct pf_reshard_answer *x = &res->reshard;
    if (!pf_is_finite_nonneg(x->time_ms) || x->ntasks < 0 || x->algo < 0 ||
        x->algo >= PF_RESHARD_SCHED_BEST)
        return pf_fail(err, errlen, PF_EINPUT, "reshard answer: %g ms, %d tasks, algorithm %d",
                       x->time_ms, x->ntasks, x->algo);
    for (int a = 0; a < PF_RESHARD_SCHED_NALGOS; a++)
        if (isfinite(x->algo_ms[a]) && x->algo_ms[a] < x->time_ms * (1 - 1e-9))
            return pf_fail(err, errlen, PF_EINPUT, "reshard answer: %s found %g ms, yet %g ms "
                           "was chosen", pf_reshard_sched_algo_name((pf_reshard_sched_algo_t)a), x->algo_ms[a],
                           x->time_ms);
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

/* The DFS gives up at its budget; past it + margin the worker is presumed lost. */
static double timeout_reshard(const pf_job_t *job, const pf_job_limits_t *lim)
{
    double b = job->reshard_opts.sched.dfs_budget_s;
    return b > 0 ? b + lim->margin_s : lim->solve_s;
}

/* ---- the table ---- */

static const pf_job_kind_desc_t kinds[PF_JOB_KIND_COUNT] = {
    [PF_JOB_NOOP] = {PF_JOB_NOOP, "noop", 0, run_noop, timeout_noop, check_nothing},
    [PF_JOB_DP_PARTITION] = {PF_JOB_DP_PARTITION, "dp_partition",
                             PF_JOB_NEEDS_GRAPH | PF_JOB_NEEDS_CLUSTER, run_partition,
                             timeout_solve, check_partition},
    [PF_JOB_MAP_PROBE] = {PF_JOB_MAP_PROBE, "map_probe", PF_JOB_NEEDS_CLUSTER, run_probe,
                          timeout_budgeted, check_probe},
    [PF_JOB_TAP_ENUM] = {PF_JOB_TAP_ENUM, "tap_enum", PF_JOB_NEEDS_GRAPH | PF_JOB_NEEDS_CLUSTER,
                         run_tap_enum, timeout_solve, check_tap_enum},
    [PF_JOB_SIMULATE] = {PF_JOB_SIMULATE, "simulate", PF_JOB_NEEDS_GRAPH | PF_JOB_NEEDS_CLUSTER,
                         run_simulate, timeout_solve, check_simulate},
    [PF_JOB_RESHARD] = {PF_JOB_RESHARD, "reshard", PF_JOB_NEEDS_CLUSTER, run_reshard,
                        timeout_reshard, check_reshard},
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

void pf_job_init(pf_job_t *job, pf_job_kind_t kind)
{
    memset(job, 0, sizeof *job);
    job->kind = kind;
    pf_partition_opts_init(&job->partition);
    pf_tp_setting_opts_init(&job->setting);
    job->schedule = PF_SCHEDULE_1F1B;
    pf_reshard_opts_default(&job->reshard_opts);
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
