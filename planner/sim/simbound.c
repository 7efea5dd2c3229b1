/* simbound: the simulator's compute-only longest path (simbound.h). */
#include "planner/sim/simbound.h"
#include "planner/sim/interleave.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct {
    const pf_simulate_input_t *in;
    int S, P, V, MB, n; /* n: tasks per rank, 2 MB V */
    int *ord;           /* P x n: each rank's order (interleave.h) */
    double *fwd, *bwd;  /* S: one replica's durations, as simulate.c's tasks have them */
    double *end;        /* 2 S MB: forward (s MB + m) and backward (S MB + s MB + m) ends, -1 */
    int *pos;           /* P: the next task of each rank */
    double *clock;      /* P: the end of each rank's last task */
    int *stack, nstack; /* ranks that may go on */
    bool *queued;
} bound_t;

/* Replica r's task durations, summed as simulate.c sums them (the same doubles); ZeRO-3's
 * exposed gather is left out (it is >= 0). */
static void durations(bound_t *b, int r)
{
    for (int s = 0; s < b->S; s++) {
        const pf_simulate_stage_t *st = &b->in->stage[s];
        double f = st->rep_fwd_ms ? st->rep_fwd_ms[r] : st->fwd_ms;
        double w = st->rep_bwd_ms ? st->rep_bwd_ms[r] : st->bwd_ms;
        b->fwd[s] = f + st->tp_fwd_ms;
        b->bwd[s] = st->recompute_ms + w + st->tp_bwd_ms;
    }
}

static void wake(bound_t *b, int rank)
{
    if (!b->queued[rank]) {
        b->queued[rank] = true;
        b->stack[b->nstack++] = rank;
    }
}

/* Rank i runs its tasks in order while their inputs are done; each one done wakes the rank that
 * waits for it (the next stage's for a forward, the previous stage's for a backward). */
static void advance(bound_t *b, int i)
{
    const int *ord = b->ord + (size_t)i * b->n;
    int S = b->S, MB = b->MB, P = b->P;
    double *endf = b->end, *endb = b->end + (size_t)S * MB;
    while (b->pos[i] < b->n) {
        int e = ord[b->pos[i]], fwd = e >= 0;
        if (!fwd)
            e = -1 - e;
        int s = e / MB * P + i, m = e % MB;
        double dep = fwd ? (s > 0 ? endf[(size_t)(s - 1) * MB + m] : 0)
                         : (s + 1 < S ? endb[(size_t)(s + 1) * MB + m] : endf[(size_t)s * MB + m]);
        if (dep < 0)
            return; /* woken when dep is done */
        double end = fmax(b->clock[i], dep) + (fwd ? b->fwd[s] : b->bwd[s]);
        (fwd ? endf : endb)[(size_t)s * MB + m] = b->clock[i] = end;
        b->pos[i]++;
        if (fwd && s + 1 < S)
            wake(b, (s + 1) % P);
        if (!fwd && s > 0)
            wake(b, (s - 1) % P);
    }
}

/* Rank i's optimizer steps: chunk c's after its last backward (of the micro-batch every order
 * ends a chunk with) and after chunk c - 1's (simulate.c's grad_edges). The rank's last end. */
static double optimizer_end(const bound_t *b, int i)
{
    const int *ord = b->ord + (size_t)i * b->n;
    const double *endb = b->end + (size_t)b->S * b->MB;
    int mlast = (-1 - ord[b->n - 1]) % b->MB;
    double opt = 0; /* chunk c's step ends after chunk c - 1's */
    for (int c = 0; c < b->V; c++) {
        int s = c * b->P + i;
        opt = fmax(endb[(size_t)s * b->MB + mlast], opt) + b->in->stage[s].optimizer_ms;
    }
    return fmax(opt, b->clock[i]);
}

/* One replica's longest path; -1 when a rank never finishes (no order deadlocks: a bug). */
static double one_replica(bound_t *b, int r)
{
    durations(b, r);
    for (size_t k = 0; k < 2 * (size_t)b->S * b->MB; k++)
        b->end[k] = -1;
    b->nstack = 0;
    for (int i = 0; i < b->P; i++) {
        b->pos[i] = 0;
        b->clock[i] = 0;
        b->queued[i] = false;
        wake(b, i);
    }
    while (b->nstack > 0) {
        int i = b->stack[--b->nstack];
        b->queued[i] = false;
        advance(b, i);
    }
    double step = 0;
    for (int i = 0; i < b->P; i++) {
        if (b->pos[i] < b->n)
            return -1;
        step = fmax(step, optimizer_end(b, i));
    }
    return step;
}

/* Replicas whose durations differ from replica 0's (a mixed cluster's) are bounded too. */
static bool replica_differs(const pf_simulate_input_t *in, int r)
{
    for (int s = 0; s < in->stages; s++) {
        const pf_simulate_stage_t *st = &in->stage[s];
        if ((st->rep_fwd_ms && st->rep_fwd_ms[r] != st->rep_fwd_ms[0]) ||
            (st->rep_bwd_ms && st->rep_bwd_ms[r] != st->rep_bwd_ms[0]))
            return true;
    }
    return false;
}

static void bound_free(bound_t *b)
{
    free(b->ord);
    free(b->fwd);
    free(b->bwd);
    free(b->end);
    free(b->pos);
    free(b->clock);
    free(b->stack);
    free(b->queued);
}

double pf_simbound_step_ms(const pf_simulate_input_t *in)
{
    if (!in || in->schedule == PF_SCHEDULE_SIGNAL || in->stages < 1 || in->microbatches < 1)
        return 0;
    bound_t b = {.in = in, .S = in->stages, .MB = in->microbatches,
                 .V = in->virtual_stages > 1 ? in->virtual_stages : 1};
    b.P = b.S / b.V;
    b.n = 2 * b.MB * b.V;
    b.ord = malloc((size_t)b.P * b.n * sizeof *b.ord);
    b.fwd = malloc((size_t)b.S * sizeof *b.fwd);
    b.bwd = malloc((size_t)b.S * sizeof *b.bwd);
    b.end = malloc(2 * (size_t)b.S * b.MB * sizeof *b.end);
    b.pos = malloc((size_t)b.P * sizeof *b.pos);
    b.clock = malloc((size_t)b.P * sizeof *b.clock);
    b.stack = malloc((size_t)b.P * sizeof *b.stack);
    b.queued = malloc((size_t)b.P * sizeof *b.queued);
    double step = 0;
    if (b.ord && b.fwd && b.bwd && b.end && b.pos && b.clock && b.stack && b.queued) {
        for (int i = 0; i < b.P; i++)
            pf_interleave_order(in->schedule, b.P, b.V, b.MB, i, b.ord + (size_t)i * b.n);
        for (int r = 0; r < in->replicas && step >= 0; r++)
            if (r == 0 || replica_differs(in, r)) {
                double v = one_replica(&b, r);
                step = v < 0 ? -1 : fmax(step, v);
            }
    }
    bound_free(&b);
    return step > 0 ? step : 0;
}
