/* taskrun: the simulators' task-graph engine (taskrun.h). */
#include "planner/sim/taskrun.h"
#include "planner/sim/linkshare.h"
#include "planner/sim/readyheap.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct pf_taskrun {
    const pf_taskrun_shape_t *sh;
    int S, P, D, Dmax, Tmax, rows;
    int *row0;              /* P + 1: each rank's first result row */
    size_t ntasks;
    pf_taskrun_task_t *task;
    bool counting;          /* pf_taskrun_link's first pass counts the edges, the second fills */
    size_t nedges;
    int *succ_off, *succ;   /* CSR of edges by `from` */
    double *succ_frac;
    pf_readyheap_ent_t *heap;
    size_t nheap;
    double *free_ms;        /* per queue (linkshare.h's PF_LINKSHARE_*), per device: free from */
    int *row_of_dev;        /* cluster device -> result row, -1 */
    int *inflight;          /* S x Dmax: micro-batches in flight per stage replica */
    int *group;             /* Dmax: one bucket's rows, scratch */
    pf_linkshare_t *links;  /* per row: the three queues' transfers, for sharing (linkshare.h) */
    pf_simulate_event_t *ev;
    size_t nev, ev_cap;
};

/* When queue q (PF_LINKSHARE_SEND, _COLL, _RECV) of device dev is free. */
static double *queue_free(pf_taskrun_t *x, int q, int dev)
{
    return &x->free_ms[(size_t)q * x->D + dev];
}

static bool cancelled(const pf_taskrun_t *x)
{
    return x->sh->cancel && atomic_load(x->sh->cancel);
}

/* Rank k of replica r of stage s. */
static int dev_at(const pf_taskrun_t *x, int s, int r, int k)
{
    return x->sh->stage[s].devices[r * x->sh->tp[s] + k];
}

/* The sizes, the rows of the ranks' devices and the run's arrays. */
static int init(pf_taskrun_t *x)
{
    const pf_taskrun_shape_t *sh = x->sh;
    x->S = sh->stages;
    x->P = sh->ranks;
    x->D = pf_cluster_ndevices(sh->cluster);
    x->Dmax = x->Tmax = 1;
    for (int s = 0; s < x->S; s++) {
        x->Dmax = sh->replicas[s] > x->Dmax ? sh->replicas[s] : x->Dmax;
        x->Tmax = sh->tp[s] > x->Tmax ? sh->tp[s] : x->Tmax;
    }
    if (!(x->row0 = malloc((size_t)(x->P + 1) * sizeof *x->row0)))
        return PF_ERR;
    x->row0[0] = 0;
    for (int p = 0; p < x->P; p++)
        x->row0[p + 1] = x->row0[p] + sh->replicas[p] * sh->tp[p];
    x->rows = x->row0[x->P];
    x->task = malloc(x->ntasks * sizeof *x->task);
    x->heap = malloc(x->ntasks * sizeof *x->heap);
    x->free_ms = calloc(PF_LINKSHARE_QUEUES * (size_t)x->D, sizeof *x->free_ms);
    x->row_of_dev = malloc((size_t)x->D * sizeof *x->row_of_dev);
    x->inflight = calloc((size_t)x->S * x->Dmax, sizeof *x->inflight);
    x->group = malloc((size_t)x->Dmax * sizeof *x->group);
    x->links = pf_linkshare_new_devices(x->rows);
    if (!x->task || !x->heap || !x->free_ms || !x->row_of_dev || !x->inflight || !x->group ||
        !x->links)
        return PF_ERR;
    for (size_t i = 0; i < x->ntasks; i++)
        x->task[i] = (pf_taskrun_task_t){.kind = PF_TASK_ABSENT};
    for (int d = 0; d < x->D; d++)
        x->row_of_dev[d] = -1;
    for (int p = 0; p < x->P; p++)
        for (int i = x->row0[p]; i < x->row0[p + 1]; i++)
            x->row_of_dev[sh->stage[p].devices[i - x->row0[p]]] = i;
    return PF_OK;
}

pf_taskrun_t *pf_taskrun_new(const pf_taskrun_shape_t *shape, size_t ntasks)
{
    pf_taskrun_t *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->sh = shape;
    x->ntasks = ntasks;
    if (init(x) != PF_OK)
        pf_taskrun_destroy(&x);
    return x;
}

void pf_taskrun_destroy(pf_taskrun_t **tr)
{
    if (!tr || !*tr)
        return;
    pf_taskrun_t *x = *tr;
    free(x->row0);
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
    free(x->ev);
    free(x);
    *tr = NULL;
}

pf_taskrun_task_t *pf_taskrun_tasks(pf_taskrun_t *tr)
{
    return tr->task;
}

/* The first pass counts each task's successors and predecessors, the second writes each edge
 * into its source's row of the CSR (succ_off[from] is the row's next free place until then). */
void pf_taskrun_edge(pf_taskrun_t *x, size_t from, size_t to, double frac)
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
}

/* No list of edges is kept between the two passes. */
int pf_taskrun_link(pf_taskrun_t *x, pf_taskrun_edges_fn edges, void *ctx)
{
    if (!(x->succ_off = calloc(x->ntasks + 1, sizeof *x->succ_off)))
        return PF_ERR;
    x->counting = true;
    x->nedges = 0;
    edges(ctx);
    if (cancelled(x))
        return PF_ERR;
    for (size_t i = 0; i < x->ntasks; i++)
        x->succ_off[i + 1] += x->succ_off[i];
    x->succ = malloc((x->nedges ? x->nedges : 1) * sizeof *x->succ);
    x->succ_frac = malloc((x->nedges ? x->nedges : 1) * sizeof *x->succ_frac);
    if (!x->succ || !x->succ_frac)
        return PF_ERR;
    x->counting = false;
    edges(ctx); /* moves each succ_off[i] on to the start of row i + 1 */
    memmove(x->succ_off + 1, x->succ_off, x->ntasks * sizeof *x->succ_off);
    x->succ_off[0] = 0;
    return PF_OK;
}

/* ---- the run ---- */

static int emit(pf_taskrun_t *x, int dev, int stream, int kind, int s, int r, int m, double a,
                double b)
{
    if (!x->sh->timeline || b <= a)
        return PF_OK;
    if (pf_grow((void **)&x->ev, &x->ev_cap, x->nev + 1, sizeof *x->ev))
        return PF_ERR;
    x->ev[x->nev++] = (pf_simulate_event_t){dev, stream, kind, s, r, m, a, b};
    return PF_OK;
}

/* A forward (d = 1) or backward (-1) of stage s, replica r: its rank's micro-batch-chunks in
 * flight (over the stages on its devices) and their activation bytes at their most. */
static void note_inflight(pf_taskrun_t *x, pf_simulate_result_t *res, const pf_taskrun_task_t *t,
                          int row, int d)
{
    x->inflight[t->s * x->Dmax + t->r] += d;
    int n = 0;
    double bytes = 0;
    for (int s = t->s % x->P; d > 0 && s < x->S; s += x->P) {
        int live = x->inflight[s * x->Dmax + t->r];
        n += live;
        bytes += live * x->sh->stage[s].act_bytes;
    }
    for (int k = 0; k < x->sh->tp[t->s] && d > 0; k++) {
        if (n > res->peak_inflight[row + k])
            res->peak_inflight[row + k] = n;
        res->peak_mem_bytes[row + k] = fmax(res->peak_mem_bytes[row + k], bytes);
    }
}

/* A compute task on each of its replica's devices at once. */
static int run_compute(pf_taskrun_t *x, pf_simulate_result_t *res, const pf_taskrun_task_t *t,
                       double start)
{
    int T = x->sh->tp[t->s], row = x->row0[t->s % x->P] + t->r * T, rc = PF_OK;
    if (t->kind != PF_TASK_OPT)
        note_inflight(x, res, t, row, t->kind == PF_TASK_FWD ? 1 : -1);
    double end = start + t->dur_ms, body_end = end - t->tp_ms;
    int kind = t->kind == PF_TASK_FWD ? PF_EV_FWD : t->kind == PF_TASK_BWD ? PF_EV_BWD : PF_EV_OPT;
    for (int k = 0; k < T; k++) {
        int d = res->device[row + k];
        res->busy_ms[row + k] += t->dur_ms;
        rc |= emit(x, d, PF_STREAM_COMPUTE, kind, t->s, t->r, t->m, start, body_end);
        rc |= emit(x, d, PF_STREAM_COMPUTE, PF_EV_TP, t->s, t->r, t->m, body_end, end);
    }
    return rc;
}

/* A pipeline transfer: after the sender's send queue and the receiver's receive queue are free
 * (a link is full duplex, and Megatron-LM posts a stage's send and receive together: a device
 * sends while it receives), shared with their gradient buckets' use of the same link. */
static int run_xfer(pf_taskrun_t *x, pf_simulate_result_t *res, pf_taskrun_task_t *t,
                    double *start)
{
    int peer = t->kind == PF_TASK_XFER_F ? t->s + 1 : t->s - 1;
    if (t->dur_ms <= 0) /* nothing to move (or signal): only the dependency stays */
        return PF_OK;
    int a = dev_at(x, t->s, t->r, t->k), b = dev_at(x, peer, t->pr, t->k), rc;
    double *send = queue_free(x, PF_LINKSHARE_SEND, a), *recv = queue_free(x, PF_LINKSHARE_RECV, b);
    *start = fmax(*start, fmax(*send, *recv));
    int ends[2] = {x->row_of_dev[a], x->row_of_dev[b]};
    static const int lanes[2] = {PF_LINKSHARE_SEND, PF_LINKSHARE_RECV};
    rc = pf_linkshare_commit_lanes(x->links, ends, lanes, 2,
                                   pf_linkshare_tier(x->sh->cluster, a, b), *start, &t->dur_ms);
    *send = *recv = *start + t->dur_ms;
    res->comm_busy_ms[x->row_of_dev[a]] += t->dur_ms;
    res->comm_busy_ms[x->row_of_dev[b]] += t->dur_ms;
    rc |= emit(x, a, PF_STREAM_COMM, PF_EV_SEND, t->s, t->r, t->m, *start, *start + t->dur_ms);
    rc |= emit(x, b, PF_STREAM_COMM, PF_EV_RECV, peer, t->pr, t->m, *start, *start + t->dur_ms);
    return rc;
}

/* A gradient bucket: after every member's data-parallel queue is free. */
static int run_ar(pf_taskrun_t *x, pf_simulate_result_t *res, pf_taskrun_task_t *t, double *start)
{
    int d = x->sh->replicas[t->s], rc;
    if (t->dur_ms <= 0)
        return PF_OK;
    for (int r = 0; r < d; r++) {
        *start = fmax(*start, *queue_free(x, PF_LINKSHARE_COLL, dev_at(x, t->s, r, t->k)));
        x->group[r] = x->row_of_dev[dev_at(x, t->s, r, t->k)];
    }
    rc = pf_linkshare_commit(x->links, x->group, d, PF_LINKSHARE_COLL, (pf_link_tier_t)t->tier,
                             *start, &t->dur_ms);
    for (int r = 0; r < d; r++) {
        int dv = dev_at(x, t->s, r, t->k);
        *queue_free(x, PF_LINKSHARE_COLL, dv) = *start + t->dur_ms;
        res->comm_busy_ms[x->row_of_dev[dv]] += t->dur_ms;
        rc |= emit(x, dv, PF_STREAM_DP, PF_EV_ALLREDUCE, t->s, r, -1, *start, *start + t->dur_ms);
    }
    return rc;
}

/* Task id ran from start: its successors' ready times, and those it was the last wait of into
 * the heap. */
static void release(pf_taskrun_t *x, int id, double start)
{
    const pf_taskrun_task_t *t = &x->task[id];
    for (int e = x->succ_off[id]; e < x->succ_off[id + 1]; e++) {
        pf_taskrun_task_t *u = &x->task[x->succ[e]];
        double at = start + x->succ_frac[e] * t->dur_ms;
        if (at > u->ready_ms)
            u->ready_ms = at;
        if (--u->npred == 0)
            pf_readyheap_push(x->heap, &x->nheap, u->ready_ms, x->succ[e]);
    }
}

/* qsort's order of the events: by device, then stream, then start. */
static int event_cmp(const void *pa, const void *pb)
{
    const pf_simulate_event_t *a = pa, *b = pb;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    if (a->stream != b->stream)
        return a->stream < b->stream ? -1 : 1;
    return a->start_ms < b->start_ms ? -1 : a->start_ms > b->start_ms;
}

static pf_simulate_result_t *result_new(const pf_taskrun_t *x)
{
    pf_simulate_result_t *res = calloc(1, sizeof *res);
    if (!res)
        return NULL;
    size_t rows = (size_t)x->rows;
    res->stages = x->S;
    res->replicas = x->Dmax;
    res->tp = x->Tmax;
    res->ndevices = x->rows;
    res->device = malloc(rows * sizeof *res->device);
    res->busy_ms = calloc(rows, sizeof *res->busy_ms);
    res->comm_busy_ms = calloc(rows, sizeof *res->comm_busy_ms);
    res->peak_mem_bytes = calloc(rows, sizeof *res->peak_mem_bytes);
    res->peak_inflight = calloc(rows, sizeof *res->peak_inflight);
    if (!res->device || !res->busy_ms || !res->comm_busy_ms || !res->peak_mem_bytes ||
        !res->peak_inflight) {
        pf_taskrun_result_destroy(&res);
        return NULL;
    }
    for (int p = 0; p < x->P; p++)
        for (int i = x->row0[p]; i < x->row0[p + 1]; i++)
            res->device[i] = x->sh->stage[p].devices[i - x->row0[p]];
    return res;
}

/* The static bytes of each rank's stages, the bubble and the sorted events once the run is
 * over. */
static void finish(pf_taskrun_t *x, pf_simulate_result_t *res)
{
    double busy = 0;
    for (int p = 0; p < x->P; p++)
        for (int i = x->row0[p]; i < x->row0[p + 1]; i++) {
            busy += res->busy_ms[i];
            for (int s = p; s < x->S; s += x->P)
                res->peak_mem_bytes[i] += x->sh->stage[s].static_bytes;
        }
    res->bubble_fraction = res->step_ms > 0 ? 1.0 - busy / (x->rows * res->step_ms) : 0.0;
    if (x->nev)
        qsort(x->ev, x->nev, sizeof *x->ev, event_cmp);
    res->events = x->ev;
    res->nevents = (int)x->nev;
    x->ev = NULL;
}

/* Every push carries a ready time no earlier than the one popped, so the heap pops in time
 * order; a transfer or a bucket waits for its queues, which serve tasks in the order they became
 * ready. */
int pf_taskrun_run(pf_taskrun_t *x, pf_simulate_result_t **out)
{
    size_t done = 0, present = 0;
    int rc = PF_ERR;
    pf_simulate_result_t *res = result_new(x);
    *out = NULL;
    if (!res)
        return PF_ERR;
    for (size_t i = 0; i < x->ntasks; i++)
        if (x->task[i].kind != PF_TASK_ABSENT && (present++, x->task[i].npred == 0))
            pf_readyheap_push(x->heap, &x->nheap, x->task[i].ready_ms, (int)i);
    while (x->nheap) {
        int id = pf_readyheap_pop(x->heap, &x->nheap);
        pf_taskrun_task_t *t = &x->task[id];
        double start = t->ready_ms;
        if ((done & 4095) == 0 && cancelled(x))
            goto fail;
        int kind = t->kind;
        if ((kind == PF_TASK_XFER_F || kind == PF_TASK_XFER_B ? run_xfer(x, res, t, &start)
             : kind == PF_TASK_AR                           ? run_ar(x, res, t, &start)
                                                            : run_compute(x, res, t, start)) != PF_OK)
            goto fail;
        if (start + t->dur_ms > res->step_ms)
            res->step_ms = start + t->dur_ms;
        done++;
        release(x, id, start);
    }
    rc = 1; /* every schedule order is deadlock-free by construction; a leftover is a bug */
    if (done != present)
        goto fail;
    finish(x, res);
    *out = res;
    return PF_OK;
fail:
    pf_taskrun_result_destroy(&res);
    return rc;
}

void pf_taskrun_result_destroy(pf_simulate_result_t **rp)
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

int pf_taskrun_fail(int rc, bool cancelled, pf_training_schedule_t order, char *err,
                    size_t errlen)
{
    if (cancelled)
        return pf_fail(err, errlen, PF_ERR, "simulate: cancelled");
    if (rc > 0)
        return pf_fail(err, errlen, PF_ERR, "simulate: the %s order left tasks that never "
                       "became ready", pf_training_schedule_name(order));
    return pf_fail(err, errlen, PF_ERR, "simulate: out of memory");
}
