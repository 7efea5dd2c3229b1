/* simstages_plan: the input of simstages.h from a graph, its cluster and a mapped plan whose
 * stages may differ (issue 24): each stage's numbers through simulate.c's own pricing. */
#include "planner/sim/simstages_plan.h"
#include "planner/sim/simulate.h"
#include "planner/ir/cost.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Does the clone of degree T for replica r price stage s of p (else a filler holds its ops)? */
static bool kept(const pf_plan_t *p, int s, int T, int r)
{
    return pf_plan_degrees_tp(p, s) == T && pf_plan_degrees_replicas(p, s) > r;
}

/* The plan stages [lo, hi) a clone stage stands for: w = the kept stage, or -1 - the first
 * stage of a filler (up to the next kept stage). */
static void clone_span(const pf_plan_t *p, int T, int r, int w, int *lo, int *hi)
{
    *lo = w >= 0 ? w : -1 - w;
    *hi = *lo + 1;
    while (w < 0 && *hi < p->stages && !kept(p, *hi, T, r))
        (*hi)++;
}

/* Clone stage i: the ops of plan stages [lo, hi) (each in topological order, the stages in
 * order: so is their concatenation) and one recomputation, a kept stage's own, a filler's the
 * plan's heaviest (the clone's heaviest is then the setting's, stage_rc.h). */
static int clone_stage(pf_plan_t *q, int i, const pf_plan_t *p, int lo, int hi, bool keep,
                       int *ops)
{
    int n = 0;
    for (int s = lo; s < hi; s++) {
        memcpy(ops + n, p->stage_list[s].ops, (size_t)p->stage_list[s].nops * sizeof *ops);
        n += p->stage_list[s].nops;
    }
    if (pf_plan_set_stage_ops(q, i, ops, n) != PF_OK || !pf_plan_stage_devices(q, i))
        return PF_ERR;
    q->stage_list[i].has_recompute = 1;
    q->stage_list[i].recompute = keep ? pf_plan_recompute_stage(p, lo) : pf_plan_recompute_max(p);
    return PF_OK;
}

/* The fillers' devices: any the kept stages do not use (they only make the clone valid; the
 * fillers' numbers are not read). */
static void filler_devices(pf_plan_t *q, const int *which, char *used)
{
    int next = 0;
    for (int i = 0; i < q->stages; i++)
        for (int k = 0; k < q->tensor_parallel && which[i] < 0; k++) {
            while (used[next])
                next++;
            q->stage_list[i].devices[k] = next;
            used[next] = 1;
        }
}

/* The uniform clone of p at d = 1 and T: the stages of degree T with more than r replicas on
 * their replica r's devices, each run of other stages between them merged into one filler (the
 * bytes crossing a kept stage's cuts stay those of the plan). which (S entries) receives what
 * each clone stage stands for (clone_span). */
static int clone_new(const pf_plan_t *p, const pf_cluster_t *c, int T, int r, int *which,
                     pf_plan_t **out, char *err, size_t errlen)
{
    int S = p->stages, n = 0, D = pf_cluster_ndevices(c), total = 0;
    for (int s = 0; s < S; s++) {
        total += p->stage_list[s].nops;
        if (kept(p, s, T, r))
            which[n++] = s;
        else if (n == 0 || which[n - 1] >= 0)
            which[n++] = -1 - s;
    }
    if ((long long)n * T > D)
        return pf_fail(err, errlen, PF_EINPUT, "simstages: pricing the stages of tensor "
                       "parallelism %d takes a clone of %d stages x %d devices, the cluster has "
                       "%d", T, n, T, D);
    pf_plan_t *q = pf_plan_new(n, 1);
    int *ops = malloc((size_t)(total > 0 ? total : 1) * sizeof *ops);
    char *used = calloc((size_t)D, 1);
    bool ok = q && ops && used && pf_plan_set_tensor_parallel(q, T) == PF_OK;
    if (ok) {
        q->microbatches = p->microbatches;
        q->train = p->train;
        memcpy(q->schedule, p->schedule, sizeof q->schedule);
    }
    for (int i = 0; i < n && ok; i++) {
        int lo, hi;
        clone_span(p, T, r, which[i], &lo, &hi);
        ok = clone_stage(q, i, p, lo, hi, which[i] >= 0, ops) == PF_OK;
        for (int k = 0; k < T && ok && which[i] >= 0; k++)
            used[q->stage_list[i].devices[k] = p->stage_list[lo].devices[r * T + k]] = 1;
    }
    if (ok)
        filler_devices(q, which, used);
    free(ops);
    free(used);
    if (!ok)
        pf_plan_destroy(&q);
    *out = q;
    return ok ? PF_OK : pf_fail(err, errlen, PF_ERR, "out of memory");
}

/* The kept stages' numbers from the clone's input: replica 0's clone gives every number
 * (the parameter state at the stage's own d_s, which ZeRO shards over), each replica's clone
 * its compute time on a cluster that mixes device kinds (*kinds then set). */
static int take_costs(pf_simstages_input_t *in, const pf_plan_t *p, const pf_simulate_input_t *ci,
                      const int *which, int r, bool *kinds)
{
    for (int i = 0; i < ci->stages; i++) {
        int s = which[i];
        if (s < 0)
            continue;
        pf_simulate_stage_t *dst = &in->stage[s];
        const pf_simulate_stage_t *src = &ci->stage[i];
        if (r == 0) {
            int *dev = dst->devices;
            *dst = *src;
            dst->devices = dev;
            dst->xfer_ms = dst->rep_fwd_ms = dst->rep_bwd_ms = NULL;
            dst->static_bytes = pf_training_state_factor(&p->train, in->replicas[s]) *
                                (src->param_bytes / ci->tp);
        }
        if (!src->rep_fwd_ms)
            continue;
        *kinds = true;
        size_t d = (size_t)in->replicas[s];
        if (!dst->rep_fwd_ms && (!(dst->rep_fwd_ms = calloc(d, sizeof *dst->rep_fwd_ms)) ||
                                 !(dst->rep_bwd_ms = calloc(d, sizeof *dst->rep_bwd_ms))))
            return PF_ERR;
        dst->rep_fwd_ms[r] = src->rep_fwd_ms[0];
        dst->rep_bwd_ms[r] = src->rep_bwd_ms[0];
    }
    return PF_OK;
}

/* Prices the stages the clone of degree T for replica r keeps, under `set` (NULL: none). */
static int price_clone(const pf_graph_t *g, const pf_cluster_t *c, const pf_tp_setting_t *set,
                       const pf_plan_t *p, int T, int r, pf_simstages_input_t *in, bool *kinds,
                       char *err, size_t errlen)
{
    int *which = malloc((size_t)p->stages * sizeof *which), rc;
    double *no_xfer = calloc((size_t)p->stages, sizeof *no_xfer); /* postal hops here */
    pf_plan_t *q = NULL;
    pf_simulate_input_t ci = {0};
    if (!which || !no_xfer)
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
    else if ((rc = clone_new(p, c, T, r, which, &q, err, errlen)) == PF_OK &&
             (rc = pf_simulate_input_from_setting(g, c, set, q, no_xfer, &ci, err, errlen)) ==
                 PF_OK &&
             take_costs(in, p, &ci, which, r, kinds) != PF_OK)
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
    pf_simulate_input_clear(&ci);
    pf_plan_destroy(&q);
    free(which);
    free(no_xfer);
    return rc;
}

/* Do the tensor-parallel groups of degree T span hosts? The setting then lets them
 * (simulate.c builds its setting the same way). */
static bool spans_hosts(const pf_cluster_t *c, const pf_plan_t *p, int T)
{
    for (int s = 0; s < p->stages; s++)
        for (int i = 1; pf_plan_degrees_tp(p, s) == T && i < pf_plan_degrees_ndevices(p, s); i++)
            if (i % T && pf_cluster_device(c, p->stage_list[s].devices[i])->host !=
                             pf_cluster_device(c, p->stage_list[s].devices[i - i % T])->host)
                return true;
    return false;
}

/* Every stage of degree T: one tensor-parallel setting (when T > 1 or a stage recomputes, as
 * simulate.c's), one clone per replica index on a cluster that mixes kinds, else one. */
static int price_degree(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p, int T,
                        pf_simstages_input_t *in, char *err, size_t errlen)
{
    pf_tp_setting_t *set = NULL;
    if (T > 1 || pf_plan_recompute_max(p) != PF_RECOMPUTE_NONE) {
        pf_tp_setting_opts_t so;
        pf_tp_setting_opts_init(&so);
        so.tp = T;
        so.across_hosts = spans_hosts(c, p, T);
        so.train = p->train;
        so.train.recompute = pf_plan_recompute_max(p);
        char why[256];
        if (!(set = pf_tp_setting_new(g, c, &so, why, sizeof why)))
            return pf_fail(err, errlen, PF_EINPUT, "tensor parallelism %d: %s", T, why);
    }
    bool kinds = false;
    int rc = price_clone(g, c, set, p, T, 0, in, &kinds, err, errlen), dmax = 1;
    for (int s = 0; s < p->stages; s++)
        if (pf_plan_degrees_tp(p, s) == T && pf_plan_degrees_replicas(p, s) > dmax)
            dmax = pf_plan_degrees_replicas(p, s);
    for (int r = 1; r < dmax && kinds && rc == PF_OK; r++)
        rc = price_clone(g, c, set, p, T, r, in, &kinds, err, errlen);
    pf_tp_setting_destroy(&set);
    return rc;
}

/* What the plan asks that this simulator does not run, and its schedule. */
static int plan_supported(const pf_plan_t *p, pf_training_schedule_t *sched, char *err,
                          size_t errlen)
{
    if (!pf_plan_is_mapped(p))
        return pf_fail(err, errlen, PF_EINPUT,
                       "the plan's stages have no devices (map it first: planfarm map)");
    if (p->blocks.present && (p->blocks.virtual_stages > 1 || pf_plan_context_parallel(p) > 1 ||
                              pf_plan_expert_parallel(p) > 1))
        return pf_fail(err, errlen, PF_EINPUT, "simstages: a plan whose stages differ is "
                       "simulated without virtual stages, context or expert parallelism");
    *sched = PF_SCHEDULE_1F1B;
    if (p->schedule[0] && (int)(*sched = pf_training_schedule_parse(p->schedule)) < 0)
        return pf_fail(err, errlen, PF_EINPUT, "schedule: '%s' is not gpipe, 1f1b, eager-1f1b "
                       "or signal", p->schedule);
    long long n = (long long)(p->microbatches > 0 ? p->microbatches : PF_DEFAULT_MICROBATCHES) *
                  p->replicas;
    if (n > 1 << 24)
        return pf_fail(err, errlen, PF_EINPUT, "simstages: %lld micro-batches per step", n);
    return PF_OK;
}

/* The plan's degrees, devices and step into in (its stages' numbers come later). */
static int input_shape(const pf_plan_t *p, const pf_cluster_t *c, pf_training_schedule_t sched,
                       pf_simstages_input_t *in)
{
    int S = p->stages;
    in->stages = S;
    in->microbatches = (p->microbatches > 0 ? p->microbatches : PF_DEFAULT_MICROBATCHES) *
                       p->replicas;
    in->zero = p->train.zero;
    in->schedule = sched;
    in->cluster = c;
    if (!(in->stage = calloc((size_t)S, sizeof *in->stage)) ||
        !(in->replicas = malloc((size_t)S * sizeof *in->replicas)) ||
        !(in->tp = malloc((size_t)S * sizeof *in->tp)))
        return PF_ERR;
    for (int s = 0; s < S; s++) {
        int n = pf_plan_degrees_ndevices(p, s);
        in->replicas[s] = pf_plan_degrees_replicas(p, s);
        in->tp[s] = pf_plan_degrees_tp(p, s);
        if (!(in->stage[s].devices = malloc((size_t)n * sizeof *in->stage[s].devices)))
            return PF_ERR;
        memcpy(in->stage[s].devices, p->stage_list[s].devices, (size_t)n * sizeof(int));
    }
    return PF_OK;
}

/* The resharding of micro-batch m's tensor across the cut after stage s ([CrossMesh]: replicated
 * on the 1 x t_s mesh of replica m mod d_s, needed replicated on the 1 x t_{s+1} mesh of replica
 * m mod d_{s+1}), one time per replica pair: L = lcm(d_s, d_{s+1}) of them, m mod L. */
static int reshard_cut(const pf_reshard_net_t *net, pf_simstages_input_t *in, int s, char *err,
                       size_t errlen)
{
    const pf_simulate_stage_t *a = &in->stage[s], *b = &in->stage[s + 1];
    int ta = in->tp[s], tb = in->tp[s + 1], da = in->replicas[s], db = in->replicas[s + 1];
    int L = da / pf_gcd(da, db) * db;
    double *ms = malloc((size_t)L * sizeof *ms);
    if (!ms)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    int64_t shape[1] = {(int64_t)ceil(a->send_bytes)};
    pf_mesh_shard_t spec[1] = {PF_SHARDING_R};
    for (int m = 0; m < L; m++) {
        pf_reshard_problem_t pr = {.ndims = 1, .shape = shape, .dtype_bytes = 1,
                                   .src_mesh = {1, ta, a->devices + (m % da) * ta},
                                   .dst_mesh = {1, tb, b->devices + (m % db) * tb},
                                   .src_spec = spec, .dst_spec = spec};
        pf_reshard_opts_t o;
        pf_reshard_opts_default(&o);
        o.sched.dfs_budget_s = 0; /* the node cap alone: the same answer on every machine */
        pf_reshard_t *r = pf_reshard_new(&pr, net, &o, err, errlen);
        if (!r) {
            free(ms);
            return PF_EINPUT;
        }
        ms[m] = pf_reshard_time_ms(r);
        pf_reshard_destroy(&r);
    }
    in->stage[s].xfer_ms = ms;
    return PF_OK;
}

/* Every cut with a tensor-parallel group on either side whose replica pairs are few enough
 * (PF_SIMSTAGES_RESHARD_PAIRS) gets its resharding times (simstages.h: the simulator takes the
 * cheaper of them and Megatron-LM's scatter/gather, as simulate.c does with RESHARD jobs'). */
static int reshard_cuts(const pf_cluster_t *c, pf_simstages_input_t *in, char *err, size_t errlen)
{
    pf_reshard_net_t *net = NULL;
    int rc = PF_OK;
    for (int s = 0; s + 1 < in->stages && rc == PF_OK; s++) {
        int da = in->replicas[s], db = in->replicas[s + 1];
        if ((in->tp[s] == 1 && in->tp[s + 1] == 1) || in->stage[s].send_bytes <= 0 ||
            (long long)da / pf_gcd(da, db) * db > PF_SIMSTAGES_RESHARD_PAIRS)
            continue;
        if (!net && !(net = pf_reshard_net_from_cluster(c, err, errlen)))
            return PF_ERR;
        rc = reshard_cut(net, in, s, err, errlen);
    }
    pf_reshard_net_destroy(&net);
    return rc;
}

int pf_simstages_plan_input(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p,
                                 pf_simstages_input_t *in, char *err, size_t errlen)
{
    memset(in, 0, sizeof *in);
    pf_training_schedule_t sched = PF_SCHEDULE_1F1B;
    int rc = pf_plan_validate(p, g, c, err, errlen);
    if (rc != PF_OK || (rc = plan_supported(p, &sched, err, errlen)) != PF_OK)
        return rc;
    if (input_shape(p, c, sched, in) != PF_OK) {
        pf_simstages_input_clear(in);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    double most = 0;
    for (int s = 0; s < p->stages && rc == PF_OK; s++) {
        bool first = true; /* each degree once, at its first stage */
        for (int i = 0; i < s; i++)
            first = first && in->tp[i] != in->tp[s];
        if (first)
            rc = price_degree(g, c, p, in->tp[s], in, err, errlen);
    }
    for (int s = 0; s < p->stages && rc == PF_OK; s++)
        most = fmax(most, in->stage[s].param_bytes / in->tp[s]);
    if (rc == PF_OK)
        rc = reshard_cuts(c, in, err, errlen);
    in->buckets = pf_training_grad_buckets(most, p->replicas, p->train.precision_bytes);
    if (rc != PF_OK)
        pf_simstages_input_clear(in);
    return rc;
}

int pf_simstages_plan_simulate(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p,
                           pf_training_schedule_t schedule, int timeline,
                           pf_simulate_result_t **out, char *err, size_t errlen)
{
    pf_simstages_input_t in;
    *out = NULL;
    int rc = pf_simstages_plan_input(g, c, p, &in, err, errlen);
    if (rc != PF_OK)
        return rc;
    in.schedule = schedule;
    in.timeline = timeline;
    rc = pf_simstages_run(&in, out, err, errlen);
    pf_simstages_input_clear(&in);
    return rc;
}

void pf_simstages_plan_row(const pf_plan_t *p, int row, int *stage, int *replica, int *rank)
{
    *stage = *replica = *rank = -1;
    for (int s = 0; s < p->stages && row >= 0; s++) {
        int n = pf_plan_degrees_ndevices(p, s), t = pf_plan_degrees_tp(p, s);
        if (row < n) {
            *stage = s;
            *replica = row / t;
            *rank = row % t;
        }
        row -= n;
    }
}
