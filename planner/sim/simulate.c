/* simulate: one step of a plan whose stages all have R replicas of T devices (simulate.h). Here:
 * how the tasks of a step are numbered and built, their durations and their edges (the compute
 * orders of interleave.h); taskrun.c runs them. */
#include "planner/sim/simulate.h"
#include "planner/sim/replica_groups.h"
#include "planner/sim/simulate_check.h"
#include "planner/sim/interleave.h"
#include "planner/sim/linkshare.h"
#include "planner/sim/taskrun.h"
#include "planner/ir/collective.h"
#include "planner/ir/cost.h"
#include "planner/sim/stage_kinds.h"
#include "planner/sim/stage_rc.h"
#include "planner/map/stage_graph.h"
#include "planner/core/util.h"

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- the task graph ---- */

typedef struct {
    const pf_simulate_input_t *in;
    int S, R, T, MB, NB, V, P; /* V chunks per rank, P = S / V ranks */
    int DR;                    /* replicas of the data-parallel collectives (dp_replicas or R) */
    size_t nf, base_xf, base_xb, base_ar, base_opt, ntasks;
    pf_taskrun_shape_t shape;
    int *deg;               /* 2 S: every stage's R, then every stage's T (shape) */
    pf_taskrun_t *tr;
    pf_taskrun_task_t *task;
    int *group;             /* DR: scratch, one data-parallel group's devices */
    int *ord;               /* P x 2 MB V: each rank's compute order (interleave.h) */
} sim_t;

static size_t id_fwd(const sim_t *x, int s, int r, int m)
{
    return ((size_t)s * x->R + r) * x->MB + m;
}
static size_t id_bwd(const sim_t *x, int s, int r, int m)
{
    return x->nf + id_fwd(x, s, r, m);
}
static size_t id_xf(const sim_t *x, int s, int r, int m, int k)
{
    return x->base_xf + id_fwd(x, s, r, m) * x->T + k;
}
static size_t id_xb(const sim_t *x, int s, int r, int m, int k)
{
    return x->base_xb + id_fwd(x, s, r, m) * x->T + k;
}
static size_t id_ar(const sim_t *x, int s, int k, int b)
{
    return x->base_ar + ((size_t)s * x->T + k) * x->NB + b;
}
static size_t id_opt(const sim_t *x, int s, int r)
{
    return x->base_opt + (size_t)s * x->R + r;
}
static int dev_of(const sim_t *x, int s, int r, int k)
{
    return x->in->stage[s].devices[r * x->T + k];
}

static void add_edge(sim_t *x, size_t from, size_t to, double frac)
{
    pf_taskrun_edge(x->tr, from, to, frac);
}

/* A data-parallel collective `op` of `bytes` over the replicas of stage s, rank k: the cheapest
 * algorithm of planner/ir/collective.h on the group the R devices form (ring over one channel
 * per NIC, tree, NVLS inside an NVSwitch host, hierarchical across hosts). */
static int dp_coll_ms(const sim_t *x, int s, int k, pf_collective_op_t op, double bytes,
                      double *ms)
{
    const pf_simulate_stage_t *dp = x->in->dp_stage ? x->in->dp_stage : x->in->stage;
    for (int r = 0; r < x->DR; r++)
        x->group[r] = dp[s].devices[r * x->T + k];
    pf_collective_group_t g;
    if (pf_collective_group_from_cluster(x->in->cluster, x->group, x->DR, x->in->nvls_busbw_gbps,
                                         &g) != PF_OK)
        return PF_ERR;
    *ms = pf_collective_best_ms(&g, op, bytes);
    return PF_OK;
}

/* A transfer between stage s (sending `up`) and s + 1 for replica r, device a to b: the
 * resharding time the input gives, else the postal model on rank k's share. The gradient goes back
 * the way the activation came (symmetric links). */
static double hop_ms(const sim_t *x, const pf_simulate_stage_t *up, int r, int a, int b,
                     int comm_free)
{
    return comm_free || up->send_bytes <= 0 ? 0
           : up->xfer_ms                    ? up->xfer_ms[r]
                                            : pf_cluster_xfer_ms(x->in->cluster, a, b,
                                                                 up->send_bytes / x->T);
}

/* The tasks of stage s, replica r, micro-batch m: forward, backward and the transfers to the
 * next stage (activations) and the previous one (gradients), per rank. */
static void microbatch_tasks(sim_t *x, int s, int r, int m, int comm_free)
{
    const pf_simulate_stage_t *st = &x->in->stage[s];
    double tpf = comm_free ? 0 : st->tp_fwd_ms, tpb = comm_free ? 0 : st->tp_bwd_ms;
    double fwd = st->rep_fwd_ms ? st->rep_fwd_ms[r] : st->fwd_ms;
    double bwd = st->rep_bwd_ms ? st->rep_bwd_ms[r] : st->bwd_ms;
    x->task[id_fwd(x, s, r, m)] = (pf_taskrun_task_t){
        .kind = PF_TASK_FWD, .s = s, .r = r, .m = m, .dur_ms = fwd + tpf, .tp_ms = tpf};
    x->task[id_bwd(x, s, r, m)] =
        (pf_taskrun_task_t){.kind = PF_TASK_BWD, .s = s, .r = r, .m = m,
                            .dur_ms = st->recompute_ms + bwd + tpb, .tp_ms = tpb};
    for (int k = 0; k < x->T; k++) {
        if (s + 1 < x->S) {
            double ms = hop_ms(x, st, r, dev_of(x, s, r, k), dev_of(x, s + 1, r, k), comm_free);
            x->task[id_xf(x, s, r, m, k)] = (pf_taskrun_task_t){
                .kind = PF_TASK_XFER_F, .s = s, .r = r, .k = k, .m = m, .pr = r, .dur_ms = ms};
        }
        if (s > 0) {
            double ms = hop_ms(x, &x->in->stage[s - 1], r, dev_of(x, s, r, k),
                               dev_of(x, s - 1, r, k), comm_free);
            x->task[id_xb(x, s, r, m, k)] = (pf_taskrun_task_t){
                .kind = PF_TASK_XFER_B, .s = s, .r = r, .k = k, .m = m, .pr = r, .dur_ms = ms};
        }
    }
}

/* Stage s rank k's gradient buckets: their link is that of the whole data-parallel group (over
 * all dp_replicas when one replica stands for many, so that it shares as each of them would). */
static int bucket_tasks(sim_t *x, int s, int k, int comm_free)
{
    const pf_simulate_stage_t *st = &x->in->stage[s];
    const pf_simulate_stage_t *dp = x->in->dp_stage ? x->in->dp_stage : x->in->stage;
    unsigned char tier =
        (unsigned char)pf_linkshare_group_tier(x->in->cluster, dp[s].devices + k, x->DR, x->T);
    double ms = 0;
    if (!comm_free &&
        dp_coll_ms(x, s, k, PF_COLL_ALLREDUCE, st->param_bytes / x->T / x->NB, &ms) != PF_OK)
        return PF_ERR;
    for (int b = 0; b < x->NB; b++)
        x->task[id_ar(x, s, k, b)] = (pf_taskrun_task_t){
            .kind = PF_TASK_AR, .tier = tier, .s = s, .k = k, .m = b, .dur_ms = ms};
    return PF_OK;
}

/* Every task of stage s: its micro-batches, optimizer steps and gradient all-reduce buckets. */
static int stage_tasks(sim_t *x, int s, int comm_free)
{
    const pf_simulate_stage_t *st = &x->in->stage[s];
    double gather_ms = 0;
    if (x->in->zero == 3 && x->DR > 1 && !comm_free &&
        dp_coll_ms(x, s, 0, PF_COLL_ALLGATHER, st->param_bytes / x->T, &gather_ms) != PF_OK)
        return PF_ERR;
    double z3 = pf_training_zero3_exposed_ms(gather_ms, st->fwd_ms + st->recompute_ms + st->bwd_ms);
    for (int r = 0; r < x->R; r++) {
        for (int m = 0; m < x->MB; m++) {
            microbatch_tasks(x, s, r, m, comm_free);
            x->task[id_bwd(x, s, r, m)].dur_ms += z3;
        }
        x->task[id_opt(x, s, r)] = (pf_taskrun_task_t){
            .kind = PF_TASK_OPT, .s = s, .r = r, .m = -1, .dur_ms = st->optimizer_ms};
    }
    for (int k = 0; k < x->T && x->DR > 1; k++)
        if (bucket_tasks(x, s, k, comm_free) != PF_OK)
            return PF_ERR;
    return PF_OK;
}

/* Replica r of stage s, last backward that of micro-batch m: bucket b is final after (b + 1) / NB
 * of it (gradients come from the last layer to the first) and its all-reduce may overlap the rest;
 * then the optimizer step, after the previous chunk's on the same devices. */
static void grad_edges(sim_t *x, int s, int r, int m)
{
    size_t last = id_bwd(x, s, r, m);
    add_edge(x, last, id_opt(x, s, r), 1.0);
    for (int k = 0; k < x->T && x->DR > 1; k++)
        for (int b = 0; b < x->NB; b++) {
            add_edge(x, last, id_ar(x, s, k, b), (double)(b + 1) / x->NB);
            add_edge(x, id_ar(x, s, k, b), id_opt(x, s, r), 1.0);
        }
    if (s >= x->P)
        add_edge(x, id_opt(x, s - x->P, r), id_opt(x, s, r), 1.0);
}

/* The edges of replica r of rank i: its compute order ord (interleave.h, over its V chunks),
 * each forward to the next stage through its transfers, each backward to the previous one, and
 * each chunk's last backward to its gradient edges. */
static void replica_edges(sim_t *x, int i, int r, const int *ord)
{
    int S = x->S, T = x->T, MB = x->MB, n = 2 * MB * x->V;
    size_t prev = SIZE_MAX;
    for (int j = 0; j < n; j++) {
        int e = ord[j] >= 0 ? ord[j] : -1 - ord[j], fwd = ord[j] >= 0;
        int s = e / MB * x->P + i, m = e % MB;
        size_t t = fwd ? id_fwd(x, s, r, m) : id_bwd(x, s, r, m);
        if (prev != SIZE_MAX)
            add_edge(x, prev, t, 1.0);
        prev = t;
        for (int k = 0; k < T; k++) {
            if (fwd && s + 1 < S) {
                add_edge(x, t, id_xf(x, s, r, m, k), 1.0);
                add_edge(x, id_xf(x, s, r, m, k), id_fwd(x, s + 1, r, m), 1.0);
            }
            if (!fwd && s > 0) {
                add_edge(x, t, id_xb(x, s, r, m, k), 1.0);
                add_edge(x, id_xb(x, s, r, m, k), id_bwd(x, s - 1, r, m), 1.0);
            }
        }
    }
    int mlast = (-1 - ord[n - 1]) % MB; /* every order ends each chunk with this micro-batch */
    for (int c = 0; c < x->V; c++)
        grad_edges(x, c * x->P + i, r, mlast);
}

static bool cancelled(const pf_simulate_input_t *in)
{
    return in->cancel && atomic_load(in->cancel);
}

/* Every replica's edges of every rank, in the orders x->ord (pf_taskrun_link's callback). */
static void all_edges(void *ctx)
{
    sim_t *x = ctx;
    for (int i = 0; i < x->P; i++)
        for (int r = 0; r < x->R; r++)
            replica_edges(x, i, r, x->ord + (size_t)i * 2 * x->MB * x->V);
}

/* The task graph of one step under compute order `order` (comm_free: every transfer and
 * collective takes no time). PF_ERR out of memory or cancelled (checked between its parts). */
static int build(sim_t *x, pf_training_schedule_t order, int comm_free)
{
    size_t n = 2 * (size_t)x->MB * x->V;
    for (int s = 0; s < x->S; s++)
        if (stage_tasks(x, s, comm_free) != PF_OK)
            return PF_ERR;
    for (int i = 0; i < x->P; i++)
        pf_interleave_order(order, x->P, x->V, x->MB, i, x->ord + (size_t)i * n);
    if (cancelled(x->in))
        return PF_ERR;
    return pf_taskrun_link(x->tr, all_edges, x);
}

static void sim_free(sim_t *x)
{
    pf_taskrun_destroy(&x->tr);
    free(x->deg);
    free(x->group);
    free(x->ord);
}

/* Sizes, task bases, the engine and the scratch arrays of one run. PF_ERR out of memory. */
static int sim_init(sim_t *x, const pf_simulate_input_t *in)
{
    *x = (sim_t){.in = in, .S = in->stages, .R = in->replicas, .T = in->tp,
                 .MB = in->microbatches, .NB = in->buckets > 1 ? in->buckets : 1,
                 .V = in->virtual_stages > 1 ? in->virtual_stages : 1};
    x->P = x->S / x->V;
    x->DR = in->dp_stage && in->dp_replicas > 0 ? in->dp_replicas : x->R;
    x->nf = (size_t)x->S * x->R * x->MB;
    x->base_xf = 2 * x->nf;
    x->base_xb = x->base_xf + x->nf * x->T;
    x->base_ar = x->base_xb + x->nf * x->T;
    x->base_opt = x->base_ar + (size_t)x->S * x->T * x->NB;
    x->ntasks = x->base_opt + (size_t)x->S * x->R;
    x->deg = malloc(2 * (size_t)x->S * sizeof *x->deg);
    x->group = malloc((size_t)x->DR * sizeof *x->group);
    x->ord = malloc((size_t)x->P * 2 * x->MB * x->V * sizeof *x->ord);
    if (!x->deg || !x->group || !x->ord)
        return PF_ERR;
    for (int s = 0; s < x->S; s++) {
        x->deg[s] = x->R;
        x->deg[x->S + s] = x->T;
    }
    /* one row per device: a rank's chunks share it */
    x->shape = (pf_taskrun_shape_t){.cluster = in->cluster, .stage = in->stage,
                                    .replicas = x->deg, .tp = x->deg + x->S, .stages = x->S,
                                    .ranks = x->P, .timeline = in->timeline, .cancel = in->cancel};
    if (!(x->tr = pf_taskrun_new(&x->shape, x->ntasks)))
        return PF_ERR;
    x->task = pf_taskrun_tasks(x->tr);
    return PF_OK;
}

void pf_simulate_result_destroy(pf_simulate_result_t **rp)
{
    pf_taskrun_result_destroy(rp); /* taskrun.c makes the results */
}

/* One simulation of one compute order into a fresh result. */
static int simulate_order(const pf_simulate_input_t *in, pf_training_schedule_t order, int comm_free,
                          pf_simulate_result_t **out, char *err, size_t errlen)
{
    sim_t x;
    pf_simulate_result_t *res = NULL;
    int rc = PF_ERR;
    if (sim_init(&x, in) != PF_OK || build(&x, order, comm_free) != PF_OK ||
        (rc = pf_taskrun_run(x.tr, &res)) != PF_OK)
        goto fail;
    res->schedule = in->schedule;
    res->order = order;
    res->microbatches = x.MB;
    sim_free(&x);
    *out = res;
    return PF_OK;
fail:
    sim_free(&x);
    return pf_taskrun_fail(rc, cancelled(in), order, err, errlen);
}

/* Identical replicas (replica_groups.h): replica 0 simulated, its figures copied. */
static int one_replica(const pf_simulate_input_t *in, pf_simulate_result_t **out, char *err,
                       size_t errlen)
{
    pf_simulate_input_t one;
    pf_simulate_result_t *r1 = NULL;
    pf_simulate_stage_t *stage = pf_replica_groups_reduce(in, &one);
    int rc = stage ? pf_simulate(&one, &r1, err, errlen)
                   : pf_fail(err, errlen, PF_ERR, "out of memory");
    free(stage);
    if (rc == PF_OK && !(*out = pf_replica_groups_expand(in, r1)))
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
    pf_simulate_result_destroy(&r1);
    return rc;
}

static int simulate_run_order(const void *in, pf_training_schedule_t order, int comm_free,
                              pf_simulate_result_t **out, char *err, size_t errlen)
{
    return simulate_order(in, order, comm_free, out, err, errlen);
}

int pf_simulate(const pf_simulate_input_t *in, pf_simulate_result_t **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = pf_simulate_check(in, err, errlen);
    if (rc != PF_OK)
        return rc;
    if (pf_replica_groups_apply(in)) /* one replica for all: the same figures */
        return one_replica(in, out, err, errlen);
    if ((rc = pf_simulate_check_size(in, err, errlen)) != PF_OK) /* what runs: counted here */
        return rc;
    if (in->schedule != PF_SCHEDULE_SIGNAL)
        return simulate_order(in, in->schedule, 0, out, err, errlen);
    return pf_simulate_signal(simulate_run_order, in, out, err, errlen);
}

int pf_simulate_signal(pf_simulate_order_fn run_order, const void *in, pf_simulate_result_t **out,
                       char *err, size_t errlen)
{
    /* Free communication cannot delay any task of a fixed compute order (every start time is a
     * longest path over the same compute durations), so the best order without communication
     * bounds every schedule with it from below. */
    static const pf_training_schedule_t orders[] = {PF_SCHEDULE_GPIPE, PF_SCHEDULE_1F1B,
                                                    PF_SCHEDULE_EAGER_1F1B};
    *out = NULL;
    for (int i = 0; i < 3; i++) {
        pf_simulate_result_t *r = NULL;
        int rc = run_order(in, orders[i], 1, &r, err, errlen);
        if (rc != PF_OK) {
            pf_simulate_result_destroy(out);
            return rc;
        }
        if (!*out || r->step_ms < (*out)->step_ms) {
            pf_simulate_result_destroy(out);
            *out = r;
        } else {
            pf_simulate_result_destroy(&r);
        }
    }
    return PF_OK;
}

void pf_simulate_stages_free(pf_simulate_stage_t *stage, int n)
{
    for (int s = 0; stage && s < n; s++) {
        free(stage[s].devices);
        free(stage[s].xfer_ms);
        free(stage[s].rep_fwd_ms);
        free(stage[s].rep_bwd_ms);
    }
    free(stage);
}

/* ---- from a plan ---- */

void pf_simulate_input_clear(pf_simulate_input_t *in)
{
    if (!in)
        return;
    pf_simulate_stages_free(in->stage, in->stages);
    memset(in, 0, sizeof *in);
}

/* Do the plan's tensor-parallel groups span hosts? Then its setting was built with groups that
 * may (tp_groups.h), and so is the one rebuilt here. */
static bool groups_span_hosts(const pf_cluster_t *c, const pf_plan_t *p)
{
    int T = p->tensor_parallel;
    for (int s = 0; s < p->stages; s++)
        for (int r = 0; r < p->replicas; r++) {
            const int *d = p->stage_list[s].devices + (size_t)r * T;
            for (int k = 1; k < T; k++)
                if (pf_cluster_device(c, d[k])->host != pf_cluster_device(c, d[0])->host)
                    return true;
        }
    return false;
}

int pf_simulate_input_from_plan(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p,
                                pf_simulate_input_t *in, char *err, size_t errlen)
{
    return pf_simulate_input_from_setting(g, c, NULL, p, NULL, in, err, errlen);
}

/* The tensor-parallel setting to simulate under: the caller's, checked against the plan's degree
 * T, or one built here (into *own) when the plan needs one (T > 1 or recomputation). */
static int resolve_setting(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p, int T,
                           const pf_tp_setting_t **set, pf_tp_setting_t **own, char *err,
                           size_t errlen)
{
    pf_tp_setting_opts_t so;
    if (*set && pf_tp_setting_degree(*set) != T)
        return pf_fail(err, errlen, PF_EINPUT, "the setting is for tensor parallelism %d, the "
                       "plan has %d", pf_tp_setting_degree(*set), T);
    if (!*set && (T > 1 || pf_plan_recompute_max(p) != PF_RECOMPUTE_NONE)) {
        pf_tp_setting_opts_init(&so);
        so.tp = T;
        so.across_hosts = groups_span_hosts(c, p);
        so.train = p->train;
        so.train.recompute = pf_plan_recompute_max(p); /* the lighter stages: stage_rc.h */
        char why[256];
        if (!(*set = *own = pf_tp_setting_new(g, c, &so, why, sizeof why)))
            return pf_fail(err, errlen, PF_EINPUT, "tensor parallelism %d: %s", T, why);
    }
    return PF_OK;
}

static double out_elems(const pf_op_t *op)
{
    double n = op->output.ndim > 0 ? 1 : 0;
    for (int d = 0; d < op->output.ndim; d++)
        n *= (double)op->output.dim[d];
    return n;
}

/* The graph's bytes per element: over the ops with one out-edge and a known output shape, the
 * largest bytes / output elements that at least 5% of them (and two) show. The largest: in a
 * tensor-parallel device's graph a split op's edge carries 1/T of the output its shape gives, a
 * replicated op's the whole; a one-off (an op writing more than its shape) is not counted. 0
 * when no ratio qualifies. */
static double elem_bytes(const pf_graph_t *g)
{
    double seen[16] = {0};
    int count[16] = {0}, nseen = 0, total = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        int k, i;
        const int *out = pf_graph_out(g, v, &k);
        double n = out_elems(pf_graph_op(g, v));
        if (k != 1 || n <= 0)
            continue;
        double r = pf_graph_edge(g, out[0])->bytes / n;
        for (i = 0; i < nseen && seen[i] != r; i++)
            ;
        if (i == nseen && nseen < 16)
            seen[nseen++] = r;
        if (i < nseen)
            count[i]++;
        total++;
    }
    double best = 0;
    for (int i = 0; i < nseen; i++)
        if (count[i] >= 2 && count[i] >= 0.05 * total && seen[i] > best)
            best = seen[i];
    return best;
}

/* Does edge e carry its source's whole output (e_bytes bytes per element, 0 unknown)? */
static int whole_output(const pf_graph_t *g, const pf_edge_t *e, double e_bytes)
{
    double whole = out_elems(pf_graph_op(g, e->src)) * e_bytes;
    return whole > 0 && fabs(e->bytes - whole) <= 1e-9 * whole;
}

/* Op v's bytes across the cut after stage c: its whole output once, however many of its edges
 * carry it across, and every other edge (a slice, one of several outputs) by its own bytes. */
static double op_cut_bytes(const pf_graph_t *g, const int *stage_of, int v, int c, double e_bytes)
{
    int k;
    const int *out = pf_graph_out(g, v, &k);
    double whole = 0, parts = 0;
    for (int i = 0; i < k; i++) {
        const pf_edge_t *ed = pf_graph_edge(g, out[i]);
        if (stage_of[ed->dst] <= c)
            continue;
        if (whole_output(g, ed, e_bytes))
            whole = ed->bytes;
        else
            parts += ed->bytes;
    }
    return whole + parts;
}

int pf_simulate_cut_bytes(const pf_graph_t *g, const pf_plan_t *p, double *cut)
{
    int n = pf_graph_nops(g), S = p->stages;
    int *stage_of = malloc((size_t)(n ? n : 1) * sizeof *stage_of);
    if (!stage_of)
        return PF_ERR;
    for (int v = 0; v < n; v++)
        stage_of[v] = -1;
    for (int s = 0; s < S; s++)
        for (int i = 0; i < p->stage_list[s].nops; i++)
            stage_of[p->stage_list[s].ops[i]] = s;
    double e_bytes = elem_bytes(g);
    for (int s = 0; s + 1 < S; s++)
        cut[s] = 0;
    for (int v = 0; v < n; v++) {
        int k, last = stage_of[v];
        const int *out = pf_graph_out(g, v, &k);
        for (int i = 0; i < k; i++) { /* the farthest stage that reads it */
            int d = stage_of[pf_graph_edge(g, out[i])->dst];
            last = d > last ? d : last;
        }
        for (int c = stage_of[v]; c >= 0 && c < last; c++)
            cut[c] += op_cut_bytes(g, stage_of, v, c, e_bytes);
    }
    free(stage_of);
    return PF_OK;
}

/* Stage s's times and bytes from its ops (dg: the graph the setting runs), the stage graph and
 * the tensors crossing each cut (cut, S - 1). */
static void stage_costs(pf_simulate_input_t *in, int s, const pf_plan_t *p, const pf_graph_t *dg,
                        const pf_tap_result_t *tap, const pf_stage_graph_t *sg, const double *cut)
{
    pf_simulate_stage_t *st = &in->stage[s];
    const pf_stage_t *ps = &p->stage_list[s];
    int S = in->stages;
    for (int i = 0; i < ps->nops; i++) {
        int v = ps->ops[i];
        const pf_op_t *op = pf_graph_op(dg, v);
        /* TAP's op times include their collectives: the simulator runs them apart */
        double cf = tap ? tap->ops[v].fwd_comm_ms : 0, cb = tap ? tap->ops[v].bwd_comm_ms : 0;
        st->fwd_ms += fmax(0, op->fwd_ms - cf);
        st->bwd_ms += fmax(0, op->bwd_ms - cb);
        st->tp_fwd_ms += cf;
        st->tp_bwd_ms += cb;
        st->act_bytes += op->mem_fwd_bytes;
    }
    st->send_bytes = s + 1 < S ? cut[s] : 0;
    double per_device = pf_stage_graph_param_bytes(sg, s);
    st->param_bytes = per_device * in->tp; /* the simulator gives each rank 1/T */
    st->static_bytes = pf_training_state_factor(&p->train, in->replicas) * per_device;
    if (s > 0)
        st->act_bytes += in->stage[s - 1].send_bytes;
}

/* Stage s's per-replica transfer to stage s + 1 as a cross-mesh resharding: the caller's times
 * (xfer_ms, S x R) or priced here. */
static int stage_xfers(pf_simulate_input_t *in, int s, const pf_plan_t *p, const double *xfer_ms,
                       char *err, size_t errlen)
{
    pf_simulate_stage_t *st = &in->stage[s];
    int R = in->replicas, T = in->tp, rc = PF_OK;
    if (!(st->xfer_ms = malloc((size_t)R * sizeof *st->xfer_ms)))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    if (xfer_ms) {
        memcpy(st->xfer_ms, xfer_ms + (size_t)s * R, (size_t)R * sizeof *st->xfer_ms);
        return PF_OK;
    }
    /* one resharding solved per transfer the solver sees alike (replica_groups.h) */
    const int *src = p->stage_list[s].devices, *dst = p->stage_list[s + 1].devices;
    double *solved = malloc((size_t)R * sizeof *solved);
    int *first = malloc((size_t)R * sizeof *first);
    pf_reshard_net_t *net = NULL;
    if (!solved || !first || pf_replica_groups_same_xfers(in->cluster, src, dst, R, T, first) ||
        (st->send_bytes > 0 && !(net = pf_reshard_net_from_cluster(in->cluster, err, errlen))))
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
    for (int r = 0; r < R && rc == PF_OK; r++) {
        pf_simulate_xfer_problem_t xp;
        pf_simulate_xfer_problem(src + (size_t)r * T, dst + (size_t)r * T, T, st->send_bytes, &xp);
        solved[r] = first[r] == r ? NAN : solved[first[r]];
        rc = pf_simulate_xfer_ms_on(in->cluster, net, &xp, &st->xfer_ms[r], &solved[r], err, errlen);
    }
    pf_reshard_net_destroy(&net);
    free(solved);
    free(first);
    return rc;
}

int pf_simulate_input_from_setting(const pf_graph_t *g, const pf_cluster_t *c,
                                   const pf_tp_setting_t *set, const pf_plan_t *p,
                                   const double *xfer_ms, pf_simulate_input_t *in, char *err,
                                   size_t errlen)
{
    memset(in, 0, sizeof *in);
    pf_stage_graph_t *sg = NULL;
    double *cut = NULL;
    pf_devkinds_t *dk = NULL;
    pf_tp_setting_t *own = NULL;
    pf_stage_rc_t views = {0};
    int rc = pf_plan_validate(p, g, c, err, errlen);
    if (rc != PF_OK)
        return rc;
    if (!pf_plan_is_mapped(p))
        return pf_fail(err, errlen, PF_EINPUT,
                       "the plan's stages have no devices (map it first: planfarm map)");
    if (pf_plan_degrees_mixed(p)) /* one R and one T here */
        return pf_fail(err, errlen, PF_EINPUT, "the plan's stages differ in their replicas or "
                       "tensor parallelism: simulate it with simstages_plan.h");
    pf_training_schedule_t sched = PF_SCHEDULE_1F1B;
    if (p->schedule[0] && (int)(sched = pf_training_schedule_parse(p->schedule)) < 0)
        return pf_fail(err, errlen, PF_EINPUT, "schedule: '%s' is not gpipe, 1f1b, eager-1f1b "
                       "or signal", p->schedule);
    int S = p->stages, R = p->replicas, T = p->tensor_parallel > 0 ? p->tensor_parallel : 1;
    if ((rc = resolve_setting(g, c, p, T, &set, &own, err, errlen)) != PF_OK)
        return rc;
    const pf_graph_t *dg = set ? pf_tp_setting_graph(set) : g;
    const pf_tap_result_t *tap = set ? pf_tp_setting_tap(set) : NULL;
    in->stages = S;
    in->replicas = R;
    in->tp = T;
    in->microbatches = p->microbatches > 0 ? p->microbatches : PF_DEFAULT_MICROBATCHES;
    in->buckets = 1;
    in->schedule = sched;
    in->cluster = c;
    in->stage = calloc((size_t)S, sizeof *in->stage);
    if (!in->stage || !(sg = pf_stage_graph_from_plan(dg, p)) ||
        !(cut = malloc((size_t)S * sizeof *cut)) || pf_simulate_cut_bytes(dg, p, cut) != PF_OK ||
        !(dk = pf_devkinds_new(dg, c)) || pf_stage_rc_init(&views, g, set, p, 0, err, errlen))
        goto oom;
    for (int s = 0; s < S; s++) {
        pf_simulate_stage_t *st = &in->stage[s];
        stage_costs(in, s, p, pf_stage_rc_graph(&views, p, s), tap, sg, cut); /* its recomputation */
        if (!pf_devkinds_uniform(dk) &&
            (!(st->rep_fwd_ms = calloc((size_t)R, sizeof *st->rep_fwd_ms)) ||
             !(st->rep_bwd_ms = calloc((size_t)R, sizeof *st->rep_bwd_ms)) ||
             pf_stage_kinds_times(pf_stage_rc_graph(&views, p, s), tap, &p->stage_list[s], R, T, dk, st->rep_fwd_ms,
                                  st->rep_bwd_ms) != PF_OK))
            goto oom;
        if (!(st->devices = malloc((size_t)R * T * sizeof *st->devices)))
            goto oom;
        memcpy(st->devices, p->stage_list[s].devices, (size_t)R * T * sizeof *st->devices);
        if (T > 1 && s + 1 < S && (rc = stage_xfers(in, s, p, xfer_ms, err, errlen)) != PF_OK)
            goto fail;
    }
    double most = 0;
    for (int s = 0; s < S; s++)
        most = fmax(most, in->stage[s].param_bytes / T);
    in->buckets = pf_training_grad_buckets(most, R, p->train.precision_bytes);
    in->zero = p->train.zero;
    pf_stage_rc_clear(&views);
    free(cut);
    pf_stage_graph_destroy(&sg);
    pf_devkinds_destroy(&dk);
    pf_tp_setting_destroy(&own);
    return PF_OK;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "out of memory");
fail:
    pf_stage_rc_clear(&views);
    free(cut);
    pf_devkinds_destroy(&dk);
    pf_stage_graph_destroy(&sg);
    pf_tp_setting_destroy(&own);
    pf_simulate_input_clear(in);
    return rc;
}
