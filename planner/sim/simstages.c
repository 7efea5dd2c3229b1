/* simstages: one step of a plan whose stages differ (simstages.h). Here: how its tasks are
 * numbered and built, their durations and edges; taskrun.c runs them, as it runs simulate.c's. A
 * task is addressed by its stage and the step's micro-batch m (replica m mod d_s), which with
 * every d_s = R and t_s = T numbers the tasks exactly as simulate.c does, so that a uniform plan
 * runs the same events in the same order. */
#include "planner/sim/simstages.h"
#include "planner/sim/interleave.h"
#include "planner/sim/linkshare.h"
#include "planner/sim/simulate.h"
#include "planner/sim/taskrun.h"
#include "planner/ir/collective.h"
#include "planner/core/util.h"

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the task graph ---- */

typedef struct {
    const pf_simstages_input_t *in;
    int S, N, NB, Dmax, Tmax;
    size_t base_xf, base_xb, base_ar, base_opt, ntasks;
    pf_taskrun_shape_t shape;
    pf_taskrun_t *tr;
    pf_taskrun_task_t *task;
    int *group;             /* Dmax, Tmax: one data-parallel or tensor-parallel group, scratch */
    int *ord;               /* 2 N: one replica's compute order, scratch */
    pf_training_schedule_t order;
} sx_t;

static int dof(const sx_t *x, int s)
{
    return x->in->replicas[s];
}
static int tof(const sx_t *x, int s)
{
    return x->in->tp[s];
}
/* Rank pairs between stage s and s + 1. */
static int pairs(const sx_t *x, int s)
{
    return tof(x, s) < tof(x, s + 1) ? tof(x, s) : tof(x, s + 1);
}
static size_t id_fwd(const sx_t *x, int s, int m)
{
    int d = dof(x, s);
    return (size_t)s * x->N + (size_t)(m % d) * (x->N / d) + m / d;
}
static size_t id_bwd(const sx_t *x, int s, int m)
{
    return (size_t)x->S * x->N + id_fwd(x, s, m);
}
static size_t id_xf(const sx_t *x, int s, int m, int k)
{
    return x->base_xf + id_fwd(x, s, m) * x->Tmax + k;
}
static size_t id_xb(const sx_t *x, int s, int m, int k)
{
    return x->base_xb + id_fwd(x, s, m) * x->Tmax + k;
}
static size_t id_ar(const sx_t *x, int s, int k, int b)
{
    return x->base_ar + ((size_t)s * x->Tmax + k) * x->NB + b;
}
static size_t id_opt(const sx_t *x, int s, int r)
{
    return x->base_opt + (size_t)s * x->Dmax + r;
}
static int dev_at(const sx_t *x, int s, int r, int k)
{
    return x->in->stage[s].devices[r * tof(x, s) + k];
}
/* Rank k of the replica of stage s that runs micro-batch m. */
static int dev_of(const sx_t *x, int s, int m, int k)
{
    return dev_at(x, s, m % dof(x, s), k);
}

static void add_edge(sx_t *x, size_t from, size_t to, double frac)
{
    pf_taskrun_edge(x->tr, from, to, frac);
}
/* A data-parallel collective over the rank-k devices of stage s's d_s replicas (simulate.c's
 * dp_coll_ms). */
static int dp_coll_ms(const sx_t *x, int s, int k, pf_collective_op_t op, double bytes, double *ms)
{
    for (int r = 0; r < dof(x, s); r++)
        x->group[r] = dev_at(x, s, r, k);
    pf_collective_group_t g;
    if (pf_collective_group_from_cluster(x->in->cluster, x->group, dof(x, s),
                                         x->in->nvls_busbw_gbps, &g) != PF_OK)
        return PF_ERR;
    *ms = pf_collective_best_ms(&g, op, bytes);
    return PF_OK;
}

/* Micro-batch m's tensor across the cut after stage `up`, from stage `from` to stage `to` (up
 * and up + 1, either way): Megatron-LM's scatter/gather ([Megatron] Sec. 4.1, simulate_xfer.h)
 * between groups of t_from and t_to devices: P = min of the two rank pairs each send 1/P of it
 * at once, then the receiving group all-gathers it when it has more than one device. With
 * equal t this is pf_simulate_xfer_scatter_gather_ms, the rule simulate.c takes when it is
 * cheaper than the cross-mesh resharding; every pair's task lasts the whole of it. */
static double hop_ms(const sx_t *x, int up, int from, int to, int m, int comm_free)
{
    const pf_simulate_stage_t *st = &x->in->stage[up];
    if (comm_free || st->send_bytes <= 0)
        return 0;
    int P = pairs(x, up), tn = tof(x, to);
    double scatter = 0;
    for (int k = 0; k < P; k++)
        scatter = fmax(scatter, pf_cluster_xfer_ms(x->in->cluster, dev_of(x, from, m, k),
                                                   dev_of(x, to, m, k), st->send_bytes / P));
    if (tn <= 1)
        return scatter;
    for (int k = 0; k < tn; k++)
        x->group[k] = dev_of(x, to, m, k);
    pf_collective_group_t g;
    if (pf_collective_group_from_cluster(x->in->cluster, x->group, tn, x->in->nvls_busbw_gbps,
                                         &g) != PF_OK)
        return scatter; /* out of memory: the scatter alone */
    return scatter + pf_collective_best_ms(&g, PF_COLL_ALLGATHER, st->send_bytes);
}

/* The cheaper of the scatter/gather and the caller's resharding time (xfer_ms), if any: per
 * replica pair, L = lcm(d_up, d_up+1) of them (simstages.h). */
static double cut_ms(const sx_t *x, int up, int from, int to, int m, int comm_free)
{
    const pf_simulate_stage_t *st = &x->in->stage[up];
    double sg = hop_ms(x, up, from, to, m, comm_free);
    if (comm_free || !st->xfer_ms)
        return sg;
    int da = dof(x, up), db = dof(x, up + 1);
    double rs = st->xfer_ms[m % (da / pf_gcd(da, db) * db)];
    return rs < sg ? rs : sg;
}

/* Micro-batch m's forward and backward on stage s and its transfers to the neighbours. */
static void microbatch_tasks(sx_t *x, int s, int m, double z3, int comm_free)
{
    const pf_simulate_stage_t *st = &x->in->stage[s];
    int r = m % dof(x, s);
    double tpf = comm_free ? 0 : st->tp_fwd_ms, tpb = comm_free ? 0 : st->tp_bwd_ms;
    double fwd = st->rep_fwd_ms ? st->rep_fwd_ms[r] : st->fwd_ms;
    double bwd = st->rep_bwd_ms ? st->rep_bwd_ms[r] : st->bwd_ms;
    x->task[id_fwd(x, s, m)] = (pf_taskrun_task_t){
        .kind = PF_TASK_FWD, .s = s, .r = r, .m = m, .dur_ms = fwd + tpf, .tp_ms = tpf};
    pf_taskrun_task_t *b = &x->task[id_bwd(x, s, m)];
    *b = (pf_taskrun_task_t){.kind = PF_TASK_BWD, .s = s, .r = r, .m = m,
                             .dur_ms = st->recompute_ms + bwd + tpb, .tp_ms = tpb};
    b->dur_ms += z3;
    double fwd_ms = s + 1 < x->S ? cut_ms(x, s, s, s + 1, m, comm_free) : 0;
    double bwd_ms = s > 0 ? cut_ms(x, s - 1, s, s - 1, m, comm_free) : 0;
    for (int k = 0; s + 1 < x->S && k < pairs(x, s); k++)
        x->task[id_xf(x, s, m, k)] =
            (pf_taskrun_task_t){.kind = PF_TASK_XFER_F, .s = s, .r = r, .k = k, .m = m,
                                .pr = m % dof(x, s + 1), .dur_ms = fwd_ms};
    for (int k = 0; s > 0 && k < pairs(x, s - 1); k++)
        x->task[id_xb(x, s, m, k)] =
            (pf_taskrun_task_t){.kind = PF_TASK_XFER_B, .s = s, .r = r, .k = k, .m = m,
                                .pr = m % dof(x, s - 1), .dur_ms = bwd_ms};
}

/* Every task of stage s: micro-batches, optimizer steps, gradient buckets (ZeRO-3's exposed
 * gather lengthens each backward, as simulate.c). */
static int stage_tasks(sx_t *x, int s, int comm_free)
{
    const pf_simulate_stage_t *st = &x->in->stage[s];
    int d = dof(x, s), t = tof(x, s);
    double gather_ms = 0;
    if (x->in->zero == 3 && d > 1 && !comm_free &&
        dp_coll_ms(x, s, 0, PF_COLL_ALLGATHER, st->param_bytes / t, &gather_ms) != PF_OK)
        return PF_ERR;
    double z3 = pf_training_zero3_exposed_ms(gather_ms, st->fwd_ms + st->recompute_ms + st->bwd_ms);
    for (int m = 0; m < x->N; m++)
        microbatch_tasks(x, s, m, z3, comm_free);
    for (int r = 0; r < d; r++)
        x->task[id_opt(x, s, r)] = (pf_taskrun_task_t){
            .kind = PF_TASK_OPT, .s = s, .r = r, .m = -1, .dur_ms = st->optimizer_ms};
    for (int k = 0; k < t && d > 1; k++) {
        double ms = 0;
        unsigned char tier = (unsigned char)pf_linkshare_group_tier(
            x->in->cluster, st->devices + k, d, t);
        if (!comm_free &&
            dp_coll_ms(x, s, k, PF_COLL_ALLREDUCE, st->param_bytes / t / x->NB, &ms) != PF_OK)
            return PF_ERR;
        for (int b = 0; b < x->NB; b++)
            x->task[id_ar(x, s, k, b)] = (pf_taskrun_task_t){
                .kind = PF_TASK_AR, .tier = tier, .s = s, .k = k, .m = b, .dur_ms = ms};
    }
    return PF_OK;
}

/* Forwards before stage s's first backward (simstages.h): K_s / d_s rounded up under 1F1B,
 * twice that less one under eager-1F1B, all n_s under GPipe; at most n_s. */
static int warmup(const sx_t *x, int s, pf_training_schedule_t order)
{
    int K = 0, d = dof(x, s), n = x->N / d;
    for (int i = s; i < x->S; i++)
        K += dof(x, i);
    int c = (K + d - 1) / d, w = order == PF_SCHEDULE_EAGER_1F1B ? 2 * c - 1 : c;
    return order == PF_SCHEDULE_GPIPE || w > n ? n : w;
}

/* Replica r of stage s after its last backward (micro-batch m): the buckets, each after its
 * share of that backward, then the optimizer step. */
static void grad_edges(sx_t *x, int s, int r, int m)
{
    size_t last = id_bwd(x, s, m);
    add_edge(x, last, id_opt(x, s, r), 1.0);
    for (int k = 0; k < tof(x, s) && dof(x, s) > 1; k++)
        for (int b = 0; b < x->NB; b++) {
            add_edge(x, last, id_ar(x, s, k, b), (double)(b + 1) / x->NB);
            add_edge(x, id_ar(x, s, k, b), id_opt(x, s, r), 1.0);
        }
}

/* Replica r of stage s: its compute order (a uniform pipeline's first rank of w_s ranks runs
 * w_s - 1 warm-up forwards and then a forward and a backward in turn, interleave.c: w_s forwards
 * before the first backward), each forward to the next stage through its transfers, each
 * backward to the previous one. */
static void replica_edges(sx_t *x, int s, int r, pf_training_schedule_t order)
{
    int d = dof(x, s), n = x->N / d;
    pf_interleave_order(order == PF_SCHEDULE_GPIPE ? order : PF_SCHEDULE_1F1B,
                        warmup(x, s, order), 1, n, 0, x->ord);
    size_t prev = SIZE_MAX;
    for (int j = 0; j < 2 * n; j++) {
        int fwd = x->ord[j] >= 0, m = r + (fwd ? x->ord[j] : -1 - x->ord[j]) * d;
        size_t t = fwd ? id_fwd(x, s, m) : id_bwd(x, s, m);
        if (prev != SIZE_MAX)
            add_edge(x, prev, t, 1.0);
        prev = t;
        for (int k = 0; fwd && s + 1 < x->S && k < pairs(x, s); k++) {
            add_edge(x, t, id_xf(x, s, m, k), 1.0);
            add_edge(x, id_xf(x, s, m, k), id_fwd(x, s + 1, m), 1.0);
        }
        for (int k = 0; !fwd && s > 0 && k < pairs(x, s - 1); k++) {
            add_edge(x, t, id_xb(x, s, m, k), 1.0);
            add_edge(x, id_xb(x, s, m, k), id_bwd(x, s - 1, m), 1.0);
        }
    }
    grad_edges(x, s, r, r + (-1 - x->ord[2 * n - 1]) * d);
}

static bool cancelled(const pf_simstages_input_t *in)
{
    return in->cancel && atomic_load(in->cancel);
}

/* Every replica's edges under x->order (pf_taskrun_link's callback). */
static void all_edges(void *ctx)
{
    sx_t *x = ctx;
    for (int s = 0; s < x->S; s++)
        for (int r = 0; r < dof(x, s); r++)
            replica_edges(x, s, r, x->order);
}

/* The task graph of one step: its tasks, then its edges. */
static int build(sx_t *x, pf_training_schedule_t order, int comm_free)
{
    for (int s = 0; s < x->S; s++)
        if (stage_tasks(x, s, comm_free) != PF_OK)
            return PF_ERR;
    x->order = order;
    return pf_taskrun_link(x->tr, all_edges, x);
}

static void sx_free(sx_t *x)
{
    pf_taskrun_destroy(&x->tr);
    free(x->group);
    free(x->ord);
}

/* Sizes, task bases, the engine and the scratch arrays of one run. PF_ERR out of memory. */
static int sx_init(sx_t *x, const pf_simstages_input_t *in)
{
    *x = (sx_t){.in = in, .S = in->stages, .N = in->microbatches,
                .NB = in->buckets > 1 ? in->buckets : 1, .Dmax = 1, .Tmax = 1};
    for (int s = 0; s < x->S; s++) {
        x->Dmax = dof(x, s) > x->Dmax ? dof(x, s) : x->Dmax;
        x->Tmax = tof(x, s) > x->Tmax ? tof(x, s) : x->Tmax;
    }
    size_t nf = (size_t)x->S * x->N;
    x->base_xf = 2 * nf;
    x->base_xb = x->base_xf + nf * x->Tmax;
    x->base_ar = x->base_xb + nf * x->Tmax;
    x->base_opt = x->base_ar + (size_t)x->S * x->Tmax * x->NB;
    x->ntasks = x->base_opt + (size_t)x->S * x->Dmax;
    x->shape = (pf_taskrun_shape_t){.cluster = in->cluster, .stage = in->stage,
                                    .replicas = in->replicas, .tp = in->tp, .stages = x->S,
                                    .ranks = x->S, .timeline = in->timeline, .cancel = in->cancel};
    x->group = malloc((size_t)(x->Dmax > x->Tmax ? x->Dmax : x->Tmax) * sizeof *x->group);
    x->ord = malloc(2 * (size_t)x->N * sizeof *x->ord);
    if (!x->group || !x->ord || !(x->tr = pf_taskrun_new(&x->shape, x->ntasks)))
        return PF_ERR;
    x->task = pf_taskrun_tasks(x->tr);
    return PF_OK;
}

/* One run of one compute order into a fresh result. */
static int simulate_order(const pf_simstages_input_t *in, pf_training_schedule_t order,
                          int comm_free, pf_simulate_result_t **out, char *err, size_t errlen)
{
    sx_t x;
    pf_simulate_result_t *res = NULL;
    int rc = PF_ERR;
    if (sx_init(&x, in) != PF_OK || build(&x, order, comm_free) != PF_OK ||
        (rc = pf_taskrun_run(x.tr, &res)) != PF_OK)
        goto fail;
    res->schedule = in->schedule;
    res->order = order;
    res->microbatches = x.N / x.Dmax;
    sx_free(&x);
    *out = res;
    return PF_OK;
fail:
    sx_free(&x);
    return pf_taskrun_fail(rc, cancelled(in), order, err, errlen);
}

/* ---- input checks ---- */

static int check_stage(const pf_simstages_input_t *in, int s, char *seen, char *err,
                       size_t errlen)
{
    const pf_simulate_stage_t *st = &in->stage[s];
    int d = in->replicas[s], t = in->tp[s], D = pf_cluster_ndevices(in->cluster);
    if (d < 1 || t < 1 || in->microbatches % d)
        return pf_fail(err, errlen, PF_EINPUT, "simstages: stage %d: %d replicas of %d devices "
                       "(both >= 1, the replicas dividing the %d micro-batches)", s, d, t,
                       in->microbatches);
    double v[] = {st->fwd_ms, st->bwd_ms, st->recompute_ms, st->tp_fwd_ms, st->tp_bwd_ms,
                  st->optimizer_ms, st->param_bytes, st->send_bytes, st->act_bytes,
                  st->static_bytes};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!pf_is_finite_nonneg(v[i]))
            return pf_fail(err, errlen, PF_EINPUT, "simstages: stage %d: a time or a size is "
                           "negative or not finite", s);
    for (int r = 0; r < d && (st->rep_fwd_ms || st->rep_bwd_ms); r++)
        if ((st->rep_fwd_ms && !pf_is_finite_nonneg(st->rep_fwd_ms[r])) ||
            (st->rep_bwd_ms && !pf_is_finite_nonneg(st->rep_bwd_ms[r])))
            return pf_fail(err, errlen, PF_EINPUT, "simstages: stage %d replica %d: a time is "
                           "negative or not finite", s, r);
    for (int i = 0; i < d * t; i++) {
        int dv = st->devices ? st->devices[i] : -1;
        if (dv < 0 || dv >= D || seen[dv]++)
            return pf_fail(err, errlen, PF_EINPUT, "simstages: stage %d: device entry %d (%d) "
                           "is not a device or used twice", s, i, dv);
    }
    return PF_OK;
}

static int check_input(const pf_simstages_input_t *in, char *err, size_t errlen)
{
    if (!in || !in->cluster || !in->stage || !in->replicas || !in->tp || in->stages < 1 ||
        in->microbatches < 1 || in->buckets < 0 || in->buckets > 1 << 16 ||
        (unsigned)in->schedule > PF_SCHEDULE_SIGNAL)
        return pf_fail(err, errlen, PF_EINPUT, "simstages: no cluster or stages, or stages, "
                       "micro-batches, buckets or schedule out of range");
    char *seen = calloc((size_t)pf_cluster_ndevices(in->cluster), 1);
    if (!seen)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    int rc = PF_OK, tmax = 1;
    for (int s = 0; s < in->stages && rc == PF_OK; s++) {
        rc = check_stage(in, s, seen, err, errlen);
        tmax = rc == PF_OK && in->tp[s] > tmax ? in->tp[s] : tmax;
    }
    free(seen);
    /* tasks: 2 S N compute + 2 S N Tmax transfers; keep indices in an int */
    if (rc == PF_OK && (double)in->stages * in->microbatches * (2.0 + 2.0 * tmax) > INT_MAX / 4)
        rc = pf_fail(err, errlen, PF_EINPUT, "simstages: %d stages x %d micro-batches is too "
                     "large to simulate", in->stages, in->microbatches);
    return rc;
}

static int run_order(const void *in, pf_training_schedule_t order, int comm_free,
                     pf_simulate_result_t **out, char *err, size_t errlen)
{
    return simulate_order(in, order, comm_free, out, err, errlen);
}

int pf_simstages_run(const pf_simstages_input_t *in, pf_simulate_result_t **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    int rc = check_input(in, err, errlen);
    if (rc != PF_OK)
        return rc;
    if (in->schedule != PF_SCHEDULE_SIGNAL)
        return simulate_order(in, in->schedule, 0, out, err, errlen);
    return pf_simulate_signal(run_order, in, out, err, errlen); /* as simulate.c */
}

void pf_simstages_input_clear(pf_simstages_input_t *in)
{
    if (!in)
        return;
    pf_simulate_stages_free(in->stage, in->stages);
    free(in->replicas);
    free(in->tp);
    memset(in, 0, sizeof *in);
}
