#include "planner/sim/simulate.h"
#include "planner/sim/replica_groups.h"
#include "planner/sim/simulate_check.h"
#include "planner/sim/interleave.h"
#include "planner/sim/linkshare.h"
#include "planner/sim/readyheap.h"
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

enum { T_FWD, T_BWD, T_OPT, T_XFER_F, T_XFER_B, T_AR, T_ABSENT };

typedef struct {
    unsigned char kind;
    int s, r, k, m;   /* stage, replica, rank (AR: rank), micro-batch (AR: bucket) */
    int npred;
    double dur_ms, tp_ms; /* tp_ms: the collective's share of dur_ms (compute tasks) */
    double ready_ms, start_ms, end_ms;
} task_t;


typedef struct {
    const pf_simulate_input_t *in;
    int S, R, T, MB, NB, V, P, D; /* V chunks per rank, P = S / V ranks, D devices */
    int DR;                    /* replicas of the data-parallel collectives (dp_replicas or R) */
    size_t nf, base_xf, base_xb, base_ar, base_opt, ntasks;
    task_t *task;
    bool counting;          /* build's first pass: add_edge counts, the second fills */
    size_t nedges;
    int *succ_off, *succ;   /* CSR of edges by `from` */
    double *succ_frac;
    pf_readyheap_ent_t *heap;
    size_t nheap;
    double *free_ms; /* per device: p2p stream free from; + D: DP collectives' (simulate.h) */
    int *row_of_dev;        /* cluster device -> result row, -1 */
    int *inflight;          /* per (virtual) stage replica */
    int *group;             /* R: scratch, one data-parallel group's devices */
    pf_linkshare_t *links;  /* per row: the two queues' transfers, for sharing (linkshare.h) */
    unsigned char *ar_tier; /* S x T: the tier of stage s rank k's gradient all-reduce */
    pf_simulate_event_t *ev;
    size_t nev, ev_cap;
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

/* `to` may start at `from`'s start + frac x its duration. The edges are made twice (build): the
 * first pass counts each task's successors and predecessors, the second writes each edge into
 * its source's row of the CSR (succ_off[from] is the row's next free place until then). */
static int add_edge(sim_t *x, size_t from, size_t to, double frac)
{
    if (x->counting) {
        x->succ_off[from + 1]++;
        x->task[to].npred++;
        x->nedges++;
    } else {
        int at = x->succ_off[from]++;
        x->succ[at] = (int)to;
        x->succ_frac[at] = frac;
    }
    return PF_OK;
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
    x->task[id_fwd(x, s, r, m)] = (task_t){
        .kind = T_FWD, .s = s, .r = r, .m = m, .dur_ms = fwd + tpf, .tp_ms = tpf};
    x->task[id_bwd(x, s, r, m)] =
        (task_t){.kind = T_BWD, .s = s, .r = r, .m = m,
                 .dur_ms = st->recompute_ms + bwd + tpb, .tp_ms = tpb};
    for (int k = 0; k < x->T; k++) {
        if (s + 1 < x->S) {
            double ms = hop_ms(x, st, r, dev_of(x, s, r, k), dev_of(x, s + 1, r, k), comm_free);
            x->task[id_xf(x, s, r, m, k)] =
                (task_t){.kind = T_XFER_F, .s = s, .r = r, .k = k, .m = m, .dur_ms = ms};
        }
        if (s > 0) {
            double ms = hop_ms(x, &x->in->stage[s - 1], r, dev_of(x, s, r, k),
                               dev_of(x, s - 1, r, k), comm_free);
            x->task[id_xb(x, s, r, m, k)] =
                (task_t){.kind = T_XFER_B, .s = s, .r = r, .k = k, .m = m, .dur_ms = ms};
        }
    }
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
        x->task[id_opt(x, s, r)] =
            (task_t){.kind = T_OPT, .s = s, .r = r, .m = -1, .dur_ms = st->optimizer_ms};
    }
    for (int k = 0; k < x->T && x->DR > 1; k++) {
        double ms = 0;
        if (!comm_free && dp_coll_ms(x, s, k, PF_COLL_ALLREDUCE, st->param_bytes / x->T / x->NB,
                                     &ms) != PF_OK)
            return PF_ERR;
        for (int b = 0; b < x->NB; b++)
            x->task[id_ar(x, s, k, b)] =
                (task_t){.kind = T_AR, .s = s, .k = k, .m = b, .dur_ms = ms};
    }
    return PF_OK;
}

/* Replica r of stage s, last backward that of micro-batch m: bucket b is final after (b + 1) / NB
 * of it (gradients come from the last layer to the first) and its all-reduce may overlap the rest;
 * then the optimizer step, after the previous chunk's on the same devices. */
static int grad_edges(sim_t *x, int s, int r, int m)
{
    size_t last = id_bwd(x, s, r, m);
    int rc = add_edge(x, last, id_opt(x, s, r), 1.0);
    for (int k = 0; k < x->T && x->DR > 1; k++)
        for (int b = 0; b < x->NB; b++) {
            rc |= add_edge(x, last, id_ar(x, s, k, b), (double)(b + 1) / x->NB);
            rc |= add_edge(x, id_ar(x, s, k, b), id_opt(x, s, r), 1.0);
        }
    if (s >= x->P)
        rc |= add_edge(x, id_opt(x, s - x->P, r), id_opt(x, s, r), 1.0);
    return rc;
}

/* The edges of replica r of rank i: its compute order ord (interleave.h, over its V chunks),
 * each forward to the next stage through its transfers, each backward to the previous one, and
 * each chunk's last backward to its gradient edges. */
static int replica_edges(sim_t *x, int i, int r, const int *ord)
{
    int S = x->S, T = x->T, MB = x->MB, n = 2 * MB * x->V, rc = PF_OK;
    size_t prev = SIZE_MAX;
    for (int j = 0; j < n && rc == PF_OK; j++) {
        int e = ord[j] >= 0 ? ord[j] : -1 - ord[j], fwd = ord[j] >= 0;
        int s = e / MB * x->P + i, m = e % MB;
        size_t t = fwd ? id_fwd(x, s, r, m) : id_bwd(x, s, r, m);
        if (prev != SIZE_MAX)
            rc |= add_edge(x, prev, t, 1.0);
        prev = t;
        for (int k = 0; k < T; k++) {
            if (fwd && s + 1 < S) {
                rc |= add_edge(x, t, id_xf(x, s, r, m, k), 1.0);
                rc |= add_edge(x, id_xf(x, s, r, m, k), id_fwd(x, s + 1, r, m), 1.0);
            }
            if (!fwd && s > 0) {
                rc |= add_edge(x, t, id_xb(x, s, r, m, k), 1.0);
                rc |= add_edge(x, id_xb(x, s, r, m, k), id_bwd(x, s - 1, r, m), 1.0);
            }
        }
    }
    int mlast = (-1 - ord[n - 1]) % MB; /* every order ends each chunk with this micro-batch */
    for (int c = 0; c < x->V && rc == PF_OK; c++)
        rc |= grad_edges(x, c * x->P + i, r, mlast);
    return rc;
}

static bool cancelled(const pf_simulate_input_t *in)
{
    return in->cancel && atomic_load(in->cancel);
}

/* Every replica's edges of every rank, in the orders ord (P x 2 MB V). */
static int all_edges(sim_t *x, const int *ord)
{
    int rc = PF_OK;
    for (int i = 0; i < x->P && rc == PF_OK; i++)
        for (int r = 0; r < x->R && rc == PF_OK; r++)
            rc |= replica_edges(x, i, r, ord + (size_t)i * 2 * x->MB * x->V);
    return rc;
}

/* The edges in CSR by their source (succ_off, succ, succ_frac) and every task's predecessors
 * counted: all_edges once to count, once to fill. No list of edges is kept in between. */
static int successor_csr(sim_t *x, const int *ord)
{
    if (!(x->succ_off = calloc(x->ntasks + 1, sizeof *x->succ_off)))
        return PF_ERR;
    x->counting = true;
    x->nedges = 0;
    all_edges(x, ord);
    if (cancelled(x->in))
        return PF_ERR;
    for (size_t i = 0; i < x->ntasks; i++)
        x->succ_off[i + 1] += x->succ_off[i];
    x->succ = malloc((x->nedges ? x->nedges : 1) * sizeof *x->succ);
    x->succ_frac = malloc((x->nedges ? x->nedges : 1) * sizeof *x->succ_frac);
    if (!x->succ || !x->succ_frac)
        return PF_ERR;
    x->counting = false;
    all_edges(x, ord); /* moves each succ_off[i] on to the start of row i + 1 */
    memmove(x->succ_off + 1, x->succ_off, x->ntasks * sizeof *x->succ_off);
    x->succ_off[0] = 0;
    return PF_OK;
}

/* The task graph of one step under compute order `order` (comm_free: every transfer and
 * collective takes no time). PF_ERR out of memory or cancelled (checked between its parts). */
static int build(sim_t *x, pf_training_schedule_t order, int comm_free)
{
    size_t n = 2 * (size_t)x->MB * x->V;
    int *ord = malloc((size_t)x->P * n * sizeof *ord);
    if (!ord)
        return PF_ERR;
    for (size_t i = 0; i < x->ntasks; i++)
        x->task[i].kind = T_ABSENT;
    int rc = PF_OK;
    for (int s = 0; s < x->S && rc == PF_OK; s++)
        rc = stage_tasks(x, s, comm_free);
    for (int i = 0; i < x->P; i++)
        pf_interleave_order(order, x->P, x->V, x->MB, i, ord + (size_t)i * n);
    if (rc == PF_OK && !cancelled(x->in))
        rc = successor_csr(x, ord);
    free(ord);
    return rc;
}

static int emit(sim_t *x, int dev, int stream, int kind, int s, int r, int m, double a, double b)
{
    if (!x->in->timeline || b <= a)
        return PF_OK;
    if (pf_grow((void **)&x->ev, &x->ev_cap, x->nev + 1, sizeof *x->ev))
        return PF_ERR;
    x->ev[x->nev++] = (pf_simulate_event_t){dev, stream, kind, s, r, m, a, b};
    return PF_OK;
}

/* A forward (d = 1) or backward (-1) of stage s, replica r: its rank's micro-batch-chunks in flight
 * and their activation bytes at their most (simulate_order adds the static bytes). */
static void note_inflight(sim_t *x, pf_simulate_result_t *res, const task_t *t, int row, int d)
{
    x->inflight[t->s * x->R + t->r] += d;
    int n = 0; double bytes = 0;
    for (int s = t->s % x->P; d > 0 && s < x->S; s += x->P) {
        int live = x->inflight[s * x->R + t->r];
        n += live;
        bytes += live * x->in->stage[s].act_bytes;
    }
    for (int k = 0; k < x->T && d > 0; k++) {
        res->peak_inflight[row + k] = n > res->peak_inflight[row + k] ? n : res->peak_inflight[row + k];
        res->peak_mem_bytes[row + k] = fmax(res->peak_mem_bytes[row + k], bytes);
    }
}

/* The sharing of each device's links by its two transfer queues (linkshare.h): per row, and
 * the tier of every data-parallel group (over all dp_replicas when one replica stands for many,
 * so that it shares as each of them would). */
static int links_init(sim_t *x)
{
    const pf_simulate_stage_t *dp = x->in->dp_stage ? x->in->dp_stage : x->in->stage;
    if (!(x->links = pf_linkshare_new(x->P * x->R * x->T, 2)) ||
        !(x->ar_tier = malloc((size_t)x->S * x->T)))
        return PF_ERR;
    for (int s = 0; s < x->S; s++)
        for (int k = 0; k < x->T; k++)
            x->ar_tier[s * x->T + k] = (unsigned char)pf_linkshare_group_tier(
                x->in->cluster, dp[s].devices + k, x->DR, x->T);
    return PF_OK;
}

/* Runs the task graph: compute tasks start when their predecessors (the stream order among them)
 * allow; a transfer or all-reduce also waits for the communication streams of all its devices,
 * which serve tasks in the order they became ready, and takes longer while the device's other
 * queue uses the same link (linkshare.h). Every push carries a ready time no earlier
 * than the one popped, so the heap pops in time order. */
static int run(sim_t *x, pf_simulate_result_t *res)
{
    int T = x->T, R = x->R;
    size_t done = 0, present = 0;
    if (links_init(x) != PF_OK)
        return PF_ERR;
    for (size_t i = 0; i < x->ntasks; i++) {
        task_t *t = &x->task[i];
        if (t->kind == T_ABSENT)
            continue;
        present++;
        if (t->npred == 0)
            pf_readyheap_push(x->heap, &x->nheap, x->task[i].ready_ms, (int)i);
    }
    while (x->nheap) {
        int id = pf_readyheap_pop(x->heap, &x->nheap);
        task_t *t = &x->task[id];
        double start = t->ready_ms;
        int row = (t->s % x->P * R + t->r) * T;
        int rc = PF_OK;
        switch (t->kind) {
        case T_FWD:
        case T_BWD:
        case T_OPT: {
            if (t->kind != T_OPT)
                note_inflight(x, res, t, row, t->kind == T_FWD ? 1 : -1);
            double end = start + t->dur_ms, body_end = end - t->tp_ms;
            int kind = t->kind == T_FWD ? PF_EV_FWD : t->kind == T_BWD ? PF_EV_BWD : PF_EV_OPT;
            for (int k = 0; k < T; k++) {
                int d = res->device[row + k];
                res->busy_ms[row + k] += t->dur_ms;
                rc |= emit(x, d, PF_STREAM_COMPUTE, kind, t->s, t->r, t->m, start, body_end);
                rc |= emit(x, d, PF_STREAM_COMPUTE, PF_EV_TP, t->s, t->r, t->m, body_end, end);
            }
            break;
        }
        case T_XFER_F:
        case T_XFER_B: {
            int peer_s = t->kind == T_XFER_F ? t->s + 1 : t->s - 1;
            int a = dev_of(x, t->s, t->r, t->k), b = dev_of(x, peer_s, t->r, t->k);
            if (t->dur_ms <= 0) /* nothing to move (or signal): only the dependency stays */
                break;
            start = fmax(start, fmax(x->free_ms[a], x->free_ms[b]));
            int ends[2] = {x->row_of_dev[a], x->row_of_dev[b]};
            rc |= pf_linkshare_commit(x->links, ends, 2, 0, pf_linkshare_tier(x->in->cluster, a, b),
                                      start, &t->dur_ms);
            x->free_ms[a] = x->free_ms[b] = start + t->dur_ms;
            res->comm_busy_ms[x->row_of_dev[a]] += t->dur_ms;
            res->comm_busy_ms[x->row_of_dev[b]] += t->dur_ms;
            rc |= emit(x, a, PF_STREAM_COMM, PF_EV_SEND, t->s, t->r, t->m, start,
                       start + t->dur_ms);
            rc |= emit(x, b, PF_STREAM_COMM, PF_EV_RECV, peer_s, t->r, t->m, start,
                       start + t->dur_ms);
            break;
        }
        case T_AR:
            if (t->dur_ms <= 0)
                break;
            for (int r = 0; r < R; r++) {
                start = fmax(start, x->free_ms[x->D + dev_of(x, t->s, r, t->k)]);
                x->group[r] = x->row_of_dev[dev_of(x, t->s, r, t->k)];
            }
            rc |= pf_linkshare_commit(x->links, x->group, R, 1, x->ar_tier[t->s * T + t->k], start,
                                      &t->dur_ms);
            for (int r = 0; r < R; r++) {
                int d = dev_of(x, t->s, r, t->k);
                x->free_ms[x->D + d] = start + t->dur_ms;
                res->comm_busy_ms[x->row_of_dev[d]] += t->dur_ms;
                rc |= emit(x, d, PF_STREAM_DP, PF_EV_ALLREDUCE, t->s, r, -1, start,
                           start + t->dur_ms);
            }
            break;
        }
        if (rc != PF_OK)
            return PF_ERR;
        t->start_ms = start;
        t->end_ms = start + t->dur_ms;
        if (t->end_ms > res->step_ms)
            res->step_ms = t->end_ms;
        done++;
        for (int e = x->succ_off[id]; e < x->succ_off[id + 1]; e++) {
            task_t *u = &x->task[x->succ[e]];
            double at = start + x->succ_frac[e] * t->dur_ms;
            if (at > u->ready_ms)
                u->ready_ms = at;
            if (--u->npred == 0)
                pf_readyheap_push(x->heap, &x->nheap, u->ready_ms, x->succ[e]);
        }
    }
    /* every schedule order is deadlock-free by construction; a leftover is a bug here */
    return done == present ? PF_OK : 1;
}

int pf_simulate_event_cmp(const void *pa, const void *pb)
{
    const pf_simulate_event_t *a = pa, *b = pb;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    if (a->stream != b->stream)
        return a->stream < b->stream ? -1 : 1;
    return a->start_ms < b->start_ms ? -1 : a->start_ms > b->start_ms;
}

static void sim_free(sim_t *x)
{
    free(x->task);
    free(x->succ_off);
    free(x->succ);
    free(x->succ_frac);
    free(x->heap);
    free(x->free_ms);
    free(x->row_of_dev);
    free(x->inflight);
    free(x->group);
    pf_linkshare_destroy(&x->links);
    free(x->ar_tier);
    free(x->ev);
}

void pf_simulate_result_destroy(pf_simulate_result_t **rp)
{
    if (!rp || !*rp)
        return;
    pf_simulate_result_t *r = *rp;
    free(r->device);
    free(r->busy_ms);
    free(r->comm_busy_ms);
    free(r->peak_mem_bytes);
    free(r->peak_inflight);
    free(r->events);
    free(r);
    *rp = NULL;
}

/* One simulation of one compute order into a fresh result. */
static int simulate_order(const pf_simulate_input_t *in, pf_training_schedule_t order, int comm_free,
                          pf_simulate_result_t **out, char *err, size_t errlen)
{
    sim_t x = {.in = in, .S = in->stages, .R = in->replicas, .T = in->tp,
               .MB = in->microbatches, .NB = in->buckets > 1 ? in->buckets : 1,
               .V = in->virtual_stages > 1 ? in->virtual_stages : 1};
    int D = x.D = pf_cluster_ndevices(in->cluster);
    x.P = x.S / x.V;
    x.DR = in->dp_stage && in->dp_replicas > 0 ? in->dp_replicas : x.R;
    int rc = PF_OK;
    pf_simulate_result_t *res = calloc(1, sizeof *res);
    size_t rows = (size_t)x.P * x.R * x.T; /* one per device: a rank's chunks share it */
    x.nf = (size_t)x.S * x.R * x.MB;
    x.base_xf = 2 * x.nf;
    x.base_xb = x.base_xf + x.nf * x.T;
    x.base_ar = x.base_xb + x.nf * x.T;
    x.base_opt = x.base_ar + (size_t)x.S * x.T * x.NB;
    x.ntasks = x.base_opt + (size_t)x.S * x.R;
    if (!res)
        goto fail;
    res->device = malloc(rows * sizeof *res->device);
    res->busy_ms = calloc(rows, sizeof *res->busy_ms);
    res->comm_busy_ms = calloc(rows, sizeof *res->comm_busy_ms);
    res->peak_mem_bytes = calloc(rows, sizeof *res->peak_mem_bytes);
    res->peak_inflight = calloc(rows, sizeof *res->peak_inflight);
    x.task = calloc(x.ntasks, sizeof *x.task);
    x.heap = malloc(x.ntasks * sizeof *x.heap);
    x.free_ms = calloc(2 * (size_t)D, sizeof *x.free_ms);
    x.row_of_dev = malloc((size_t)D * sizeof *x.row_of_dev);
    x.inflight = calloc((size_t)x.S * x.R, sizeof *x.inflight);
    x.group = malloc((size_t)x.DR * sizeof *x.group);
    if (!res->device || !res->busy_ms || !res->comm_busy_ms || !res->peak_mem_bytes ||
        !res->peak_inflight || !x.task || !x.heap || !x.free_ms || !x.row_of_dev || !x.inflight ||
        !x.group)
        goto fail;
    res->schedule = in->schedule;
    res->order = order;
    res->stages = x.S;
    res->replicas = x.R;
    res->tp = x.T;
    res->microbatches = x.MB;
    res->ndevices = (int)rows;
    for (int d = 0; d < D; d++)
        x.row_of_dev[d] = -1;
    for (int s = 0; s < x.P; s++)
        for (int i = 0; i < x.R * x.T; i++) {
            int row = s * x.R * x.T + i;
            res->device[row] = in->stage[s].devices[i];
            x.row_of_dev[in->stage[s].devices[i]] = row;
        }
    if (build(&x, order, comm_free) != PF_OK || cancelled(in)) {
        if (cancelled(in))
            rc = pf_fail(err, errlen, PF_ERR, "simulate: cancelled");
        goto fail;
    }
    if ((rc = run(&x, res)) != PF_OK) {
        if (rc > 0)
            rc = pf_fail(err, errlen, PF_ERR, "simulate: the %s order left tasks that never "
                         "became ready", pf_training_schedule_name(order));
        else
            rc = pf_fail(err, errlen, PF_ERR, "simulate: out of memory");
        goto fail;
    }
    double busy = 0;
    for (size_t i = 0; i < rows; i++) {
        busy += res->busy_ms[i];
        for (int s = (int)(i / ((size_t)x.R * x.T)); s < x.S; s += x.P)
            res->peak_mem_bytes[i] += in->stage[s].static_bytes;
    }
    res->bubble_fraction = res->step_ms > 0 ? 1.0 - busy / (rows * res->step_ms) : 0.0;
    if (x.nev)
        qsort(x.ev, x.nev, sizeof *x.ev, pf_simulate_event_cmp);
    res->events = x.ev;
    res->nevents = (int)x.nev;
    x.ev = NULL;
    sim_free(&x);
    *out = res;
    return PF_OK;
fail:
    sim_free(&x);
    pf_simulate_result_destroy(&res);
    return rc == PF_OK ? pf_fail(err, errlen, PF_ERR, "simulate: out of memory") : rc;
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

/* Stage s's times and bytes from its ops (dg: the graph the setting runs) and the stage graph. */
static void stage_costs(pf_simulate_input_t *in, int s, const pf_plan_t *p, const pf_graph_t *dg,
                        const pf_tap_result_t *tap, const pf_stage_graph_t *sg)
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
    for (int a = 0; a <= s; a++)
        for (int b = s + 1; b < S; b++)
            st->send_bytes += pf_stage_graph_msg_bytes(sg, a, b);
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
        !(dk = pf_devkinds_new(dg, c)) || pf_stage_rc_init(&views, g, set, p, 0, err, errlen))
        goto oom;
    for (int s = 0; s < S; s++) {
        pf_simulate_stage_t *st = &in->stage[s];
        stage_costs(in, s, p, pf_stage_rc_graph(&views, p, s), tap, sg); /* its recomputation */
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
    pf_stage_graph_destroy(&sg);
    pf_devkinds_destroy(&dk);
    pf_tp_setting_destroy(&own);
    return PF_OK;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "out of memory");
fail:
    pf_stage_rc_clear(&views);
    pf_devkinds_destroy(&dk);
    pf_stage_graph_destroy(&sg);
    pf_tp_setting_destroy(&own);
    pf_simulate_input_clear(in);
    return rc;
}
