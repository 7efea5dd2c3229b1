/* tap: TAP (Shi et al., "TAP: Efficient Derivation of Tensor Parallel Plans for Large Neural
 * Networks") over DistPar ("DistPar: tensor partitioning for distributed neural network
 * computing"): enumeration and rewrite of the units of tap_units.c; tap.h describes the model. */
#include "planner/tp/tap.h"
#include "planner/tp/tp_price.h"
#include "planner/tp/tap_units.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DONE 8     /* distinct conversions remembered per tensor */

void pf_tap_opts_init(pf_tap_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->min_duplicate = 2;
    o->max_unit_weights = 12;
    o->param_state_factor = 1;
}


/* ---- one instance of a unit, ready to price plans on ---- */

typedef struct {
    int nops, ntens, T;
    const pf_graph_t *g;
    const int *ops;           /* graph op of each position */
    const pf_tap_opts_t *o;
    const pf_sharding_link_t *link;
    int *in_start, *in_tens, *in_edge; /* inputs of position j: [in_start[j], in_start[j+1]) */
    int *widx;                /* digit of position j's weight, -1 without one */
    int *ext_out;             /* position j's output must end as B */
    int *tens_edge;           /* tensors: 0..nops-1 the ops' outputs, then outside producers;
                                 an outside tensor's first input position */
    double *tens_bytes;
    int *nsig;                /* [j * 3 + weight option] */
    pf_sharding_sig_t *sig;      /* [(j * 3 + option) * PF_SHARDING_MAX_SIGS + s] */
    double *split_ms;         /* [(j * 3 + weight option) * 2 + 0 fwd / 1 bwd] when split
                               * (tp_price.h) */
    double *wgrad_ms;         /* each position's weight-gradient all-reduce */
} inst_t;

#define NCODE (2 + PF_SHAPE_MAX) /* B, P, S(0 .. PF_SHAPE_MAX - 1) */

/* Per-evaluation state, one per thread. conv: the conversions of tensor x from one sharding
 * to another, found once per thread (the enumeration asks for the same ones millions of
 * times): [(x * NCODE + from) * NCODE + to], nsteps -1 until found. */
typedef struct {
    pf_sharding_t *prop, *fwd_done, *grad_done; /* per tensor; MAX_DONE conversions each */
    int *nfwd, *ngrad, *choice;
    pf_sharding_conv_t *conv;
} scratch_t;

/* Collects what a plan does when asked to (apply). */
typedef struct {
    pf_tap_coll_t *colls;
    size_t ncolls, cap;
    int failed;
} record_t;

static const pf_sharding_t weight_option[3] = {{PF_SHARDING_B, -1}, {PF_SHARDING_S, 0}, {PF_SHARDING_S, 1}};

static void inst_free(inst_t *t)
{
    free(t->in_start), free(t->in_tens), free(t->in_edge), free(t->widx), free(t->ext_out);
    free(t->tens_edge), free(t->tens_bytes), free(t->nsig), free(t->sig), free(t->split_ms);
    free(t->wgrad_ms);
    memset(t, 0, sizeof *t);
}

static double shape_elems(const pf_shape_t *s)
{
    double n = s->ndim ? 1 : 0;
    for (int i = 0; i < s->ndim; i++)
        n *= (double)s->dim[i];
    return n;
}

/* The bytes of op v's output: what its out-edges carry; for a graph output (the head's logits),
 * its output shape at the bytes per element of its first input that has a shape. */
static double output_bytes(const pf_graph_t *g, int v)
{
    int n;
    const int *out = pf_graph_out(g, v, &n), *in;
    double b = 0;
    for (int k = 0; k < n; k++)
        b = fmax(b, pf_graph_edge(g, out[k])->bytes);
    if (n > 0)
        return b;
    in = pf_graph_in(g, v, &n);
    for (int k = 0; k < n; k++) {
        const pf_edge_t *e = pf_graph_edge(g, in[k]);
        double elems = shape_elems(&pf_graph_op(g, e->src)->output);
        if (elems > 0)
            return e->bytes / elems * shape_elems(&pf_graph_op(g, v)->output);
    }
    return 0;
}

/* Tensor parallelism splits features: the last dimension, or dimension 1 (heads, channels) of a
 * 4-D tensor. Any other split (batch, sequence, space) is data or sequence parallelism. */
static bool feature_dim(pf_sharding_t p, int rank)
{
    return p.kind != PF_SHARDING_S || p.dim == rank - 1 || (rank == 4 && p.dim == 1);
}

static bool splits_tokens(const pf_sharding_sig_t *s, const pf_sharding_op_t *d)
{
    bool hit = !feature_dim(s->out, d->output.ndim);
    for (int k = 0; k < d->nin; k++)
        hit |= !feature_dim(s->in[k], d->in[k].ndim);
    return hit;
}

static int inst_alloc(inst_t *t, const pf_graph_t *g, const int *ops, int nops)
{
    int ne = 0;
    for (int j = 0; j < nops; j++) {
        int n;
        pf_graph_in(g, ops[j], &n);
        ne += n;
    }
    size_t nt = (size_t)nops + (size_t)ne;
    if (!(t->in_start = malloc(sizeof(int) * (size_t)(nops + 1))) ||
        !(t->in_tens = malloc(sizeof(int) * (size_t)(ne + 1))) ||
        !(t->in_edge = malloc(sizeof(int) * (size_t)(ne + 1))) ||
        !(t->widx = malloc(sizeof(int) * (size_t)nops)) ||
        !(t->ext_out = malloc(sizeof(int) * (size_t)nops)) ||
        !(t->tens_edge = malloc(sizeof(int) * nt)) ||
        !(t->tens_bytes = malloc(sizeof(double) * nt)) ||
        !(t->nsig = calloc((size_t)nops * 3, sizeof(int))) ||
        !(t->sig = malloc(sizeof *t->sig * (size_t)nops * 3 * PF_SHARDING_MAX_SIGS)) ||
        !(t->split_ms = malloc(sizeof *t->split_ms * (size_t)nops * 6)) ||
        !(t->wgrad_ms = malloc(sizeof *t->wgrad_ms * (size_t)(nops ? nops : 1))))
        return PF_ERR;
    return PF_OK;
}

/* The ops' own output tensors, their weight digits, and which outputs leave the instance. */
static void inst_outputs(inst_t *t)
{
    int nw = 0;
    t->ntens = t->nops;
    for (int j = 0; j < t->nops; j++) {
        const pf_op_t *op = pf_graph_op(t->g, t->ops[j]);
        t->tens_edge[j] = -1;
        t->tens_bytes[j] = output_bytes(t->g, t->ops[j]);
        t->widx[j] = op->param_bytes > 0 ? nw++ : -1;
        int nout;
        const int *out = pf_graph_out(t->g, t->ops[j], &nout);
        t->ext_out[j] = nout == 0;
        for (int k = 0; k < nout; k++) {
            int d = pf_graph_edge(t->g, out[k])->dst, inside = 0;
            for (int i = 0; i < t->nops; i++)
                inside |= t->ops[i] == d;
            t->ext_out[j] |= !inside;
        }
    }
}

/* The tensor an input edge of position j reads: an earlier position's output, an outside
 * producer already seen, or a new outside tensor. */
static int input_tensor(inst_t *t, int j, const pf_edge_t *e, int at)
{
    int tens = -1;
    for (int i = 0; i < j && tens < 0; i++)
        if (t->ops[i] == e->src)
            tens = i;
    for (int x = t->nops; x < t->ntens && tens < 0; x++)
        if (pf_graph_edge(t->g, t->in_edge[t->tens_edge[x]])->src == e->src)
            tens = x;
    if (tens < 0) {
        tens = t->ntens++;
        t->tens_bytes[tens] = e->bytes;
        t->tens_edge[tens] = at;
    }
    return tens;
}

/* Position j's DistPar signatures for each weight option, less the token splits unless
 * allowed. */
static void inst_sigs(inst_t *t, int j, const pf_sharding_op_t *d, int nin)
{
    for (int w = 0; w < (d->has_weight ? 3 : 1); w++) {
        pf_sharding_sig_t *s = t->sig + (size_t)(j * 3 + w) * PF_SHARDING_MAX_SIGS;
        int c = pf_sharding_op_rules(d, weight_option[w], t->T, s, PF_SHARDING_MAX_SIGS), kept = 0;
        if (nin > PF_SHARDING_MAX_IN && w == 0) { /* all B, whatever the count */
            memset(s, 0, sizeof *s);
            c = 1;
        }
        for (int i = 0; i < c; i++)
            if (t->o->allow_token_split || !splits_tokens(&s[i], d))
                s[kept++] = s[i];
        t->nsig[j * 3 + w] = kept;
    }
}

static int code(pf_sharding_t p)
{
    return p.kind == PF_SHARDING_S ? 2 + p.dim : p.kind == PF_SHARDING_P;
}

/* Each position's split time under each weight option, priced once (tp_price.h). */
static void inst_split_times(inst_t *t)
{
    for (int j = 0; j < t->nops; j++)
        t->wgrad_ms[j] = pf_sharding_conv_ms(PF_CONV_ALLREDUCE, t->T,
                                             pf_graph_op(t->g, t->ops[j])->param_bytes, t->link);
    const pf_devmodel_t *dm = pf_tp_price_model(t->g);
    for (int j = 0; j < t->nops; j++)
        for (int w = 0; w < 3; w++)
            pf_tp_price_split(dm, pf_graph_op(t->g, t->ops[j]), (pf_tp_split_t)w, t->T,
                              &t->split_ms[(j * 3 + w) * 2], &t->split_ms[(j * 3 + w) * 2 + 1]);
}

/* The shape an op's rules see for one input: its producer's output, unless the op reads a part of
 * it (an MoE expert reads its slice [tokens, h] of the dispatch's [experts, tokens, h]), where the
 * op's own input shape is the one its weight multiplies. */
static const pf_shape_t *input_shape(const pf_graph_t *g, const pf_op_t *op, const pf_edge_t *e,
                                     int nin)
{
    const pf_shape_t *src_out = &pf_graph_op(g, e->src)->output;
    if (!src_out->ndim || (nin == 1 && op->input.ndim &&
                           shape_elems(src_out) != shape_elems(&op->input)))
        return &op->input;
    return src_out;
}

static int inst_build(inst_t *t, const pf_graph_t *g, const int *ops, int nops, int T,
                      const pf_sharding_link_t *link, const pf_tap_opts_t *o)
{
    memset(t, 0, sizeof *t);
    *t = (inst_t){.nops = nops, .T = T, .g = g, .ops = ops, .o = o, .link = link};
    if (inst_alloc(t, g, ops, nops)) {
        inst_free(t);
        return PF_ERR;
    }
    inst_outputs(t);
    inst_split_times(t);
    int at = 0;
    for (int j = 0; j < nops; j++) {
        const pf_op_t *op = pf_graph_op(g, ops[j]);
        int nin;
        const int *in = pf_graph_in(g, ops[j], &nin);
        pf_sharding_op_t d = {.type = op->type, .has_weight = op->param_bytes > 0,
                           .weight = op->weight, .output = op->output,
                           .nin = nin <= PF_SHARDING_MAX_IN ? nin : 0};
        if (nin > PF_SHARDING_MAX_IN)
            d.type = NULL, d.output.ndim = 0; /* too many inputs for the rules: replicated */
        t->in_start[j] = at;
        for (int k = 0; k < nin; k++, at++) {
            const pf_edge_t *e = pf_graph_edge(g, in[k]);
            t->in_tens[at] = input_tensor(t, j, e, at);
            t->in_edge[at] = in[k];
            if (k < d.nin)
                d.in[k] = *input_shape(g, op, e, nin);
        }
        /* An op reading the graph's input (a stem convolution): the rules see that input at
         * the op's input shape, and any layout of it is free (each device loads its data). */
        if (nin == 0 && op->input.ndim && op->input.ndim == op->output.ndim)
            d.nin = 1, d.in[0] = op->input;
        inst_sigs(t, j, &d, nin);
    }
    t->in_start[nops] = at;
    return PF_OK;
}

/* ---- pricing one plan ---- */

static void scratch_free(scratch_t *sc)
{
    free(sc->prop), free(sc->fwd_done), free(sc->grad_done);
    free(sc->nfwd), free(sc->ngrad), free(sc->choice), free(sc->conv);
    memset(sc, 0, sizeof *sc);
}

static int scratch_new(scratch_t *sc, const inst_t *t)
{
    size_t nt = (size_t)t->ntens;
    memset(sc, 0, sizeof *sc);
    if (!(sc->prop = malloc(sizeof *sc->prop * nt)) ||
        !(sc->fwd_done = malloc(sizeof *sc->fwd_done * nt * MAX_DONE)) ||
        !(sc->grad_done = malloc(sizeof *sc->grad_done * nt * MAX_DONE)) ||
        !(sc->nfwd = malloc(sizeof *sc->nfwd * nt)) ||
        !(sc->ngrad = malloc(sizeof *sc->ngrad * nt)) ||
        !(sc->choice = malloc(sizeof *sc->choice * (size_t)(t->nops + 1))) ||
        !(sc->conv = malloc(sizeof *sc->conv * nt * NCODE * NCODE))) {
        scratch_free(sc);
        return PF_ERR;
    }
    for (size_t i = 0; i < nt * NCODE * NCODE; i++)
        sc->conv[i].nsteps = -1;
    return PF_OK;
}

static pf_sharding_t required(const pf_sharding_sig_t *s, int k, int grad)
{
    return k >= PF_SHARDING_MAX_IN ? pf_sharding_b() : grad ? s->in_grad[k] : s->in[k];
}

static bool done_has(const pf_sharding_t *list, int n, pf_sharding_t p)
{
    for (int i = 0; i < n; i++)
        if (pf_sharding_equal(list[i], p))
            return true;
    return false;
}

static double conv_ms(const inst_t *t, scratch_t *sc, int x, pf_sharding_t from,
                      pf_sharding_t to, pf_sharding_conv_t *c)
{
    c->nsteps = 0;
    c->ms = 0;
    if (pf_sharding_equal(from, to))
        return 0;
    pf_sharding_conv_t *memo = &sc->conv[((size_t)x * NCODE + code(from)) * NCODE + code(to)];
    if (memo->nsteps < 0 &&
        pf_sharding_convert(from, to, PF_SHAPE_MAX, t->T, t->tens_bytes[x], t->link, memo, NULL, 0)) {
        memo->nsteps = 0;
        memo->ms = INFINITY;
    }
    *c = *memo;
    return c->ms;
}

static double compute_ms(const inst_t *t, int j, int w, int split)
{
    const pf_op_t *op = pf_graph_op(t->g, t->ops[j]);
    const double *x = t->split_ms + (j * 3 + w) * 2;
    return split ? x[0] + x[1] : op->fwd_ms + op->bwd_ms;
}

/* What running position j by s costs now: its compute, a partial weight gradient's all-reduce,
 * and the conversions its inputs (forward) and their gradients (backward) need that no earlier
 * consumer has paid for. */
static double sig_cost(const inst_t *t, scratch_t *sc, int j, int w,
                       const pf_sharding_sig_t *s)
{
    double c = compute_ms(t, j, w, s->split);
    pf_sharding_conv_t cv;
    if (s->weight_grad_partial)
        c += t->wgrad_ms[j];
    for (int a = t->in_start[j]; a < t->in_start[j + 1]; a++) {
        int k = a - t->in_start[j], x = t->in_tens[a], dup_f = 0, dup_g = 0;
        pf_sharding_t need = required(s, k, 0), grad = required(s, k, 1);
        for (int b = t->in_start[j]; b < a; b++)
            if (t->in_tens[b] == x) {
                dup_f |= pf_sharding_equal(required(s, b - t->in_start[j], 0), need);
                dup_g |= pf_sharding_equal(required(s, b - t->in_start[j], 1), grad);
            }
        if (!dup_f && !done_has(sc->fwd_done + (size_t)x * MAX_DONE, sc->nfwd[x], need))
            c += conv_ms(t, sc, x, sc->prop[x], need, &cv);
        if (!dup_g && !done_has(sc->grad_done + (size_t)x * MAX_DONE, sc->ngrad[x], grad))
            c += conv_ms(t, sc, x, grad, pf_sharding_grad_expected(sc->prop[x]), &cv);
    }
    return c;
}

static void record(record_t *rec, pf_sharding_conv_kind_t kind, int backward, int op, int wgrad,
                   double bytes, double ms)
{
    if (!rec || rec->failed || ms == 0)
        return;
    if (pf_grow((void **)&rec->colls, &rec->cap, rec->ncolls + 1, sizeof *rec->colls)) {
        rec->failed = 1;
        return;
    }
    rec->colls[rec->ncolls++] = (pf_tap_coll_t){kind, backward, op, wgrad, bytes, ms};
}

/* Converts tensor x forward to `to`, or its gradient `grad` backward to what its producer
 * expects, unless done already; returns the time. `charge` is the position that pays. */
static double pay(const inst_t *t, scratch_t *sc, record_t *rec, int x, pf_sharding_t p,
                  int backward, int charge)
{
    pf_sharding_t *list = (backward ? sc->grad_done : sc->fwd_done) + (size_t)x * MAX_DONE;
    int *n = backward ? &sc->ngrad[x] : &sc->nfwd[x];
    pf_sharding_conv_t cv;
    if (done_has(list, *n, p))
        return 0;
    if (*n < MAX_DONE)
        list[(*n)++] = p;
    double ms = backward ? conv_ms(t, sc, x, p, pf_sharding_grad_expected(sc->prop[x]), &cv)
                         : conv_ms(t, sc, x, sc->prop[x], p, &cv);
    for (int i = 0; i < cv.nsteps; i++)
        record(rec, cv.step[i], backward, charge, 0, t->tens_bytes[x],
               pf_sharding_conv_ms(cv.step[i], t->T, t->tens_bytes[x], t->link));
    return ms;
}

/* An op's stored bytes: its output and what it keeps of its inputs (the conv kinds' rule,
 * model.h), or, when they are no more than its inputs, those inputs alone (the transformer
 * generators save each tensor once, by the op whose backward reads it: a row-parallel linear
 * keeps its split input, not its output, which Korthikanti et al. 2022's 24 sbh / t counts
 * split). */
static double scaled_mem(double mem, double out_bytes, int out_split, double in_bytes,
                         double in_split_bytes, int T)
{
    double out_part = mem > in_bytes ? fmin(out_bytes, mem) : 0, saved = mem - out_part, cut = 0;
    if (out_split)
        cut += out_part * (1 - 1.0 / T);
    if (in_bytes > 0 && in_split_bytes > 0)
        cut += saved * (in_split_bytes / in_bytes) * (1 - 1.0 / T);
    return mem - cut;
}

/* Per device: [0] mem_fwd, [1] mem_bwd of position j run by s (an op's saved activation is its
 * input: the share of it that arrives split is divided by T; so is a split output). */
static void op_mem(const inst_t *t, int j, const pf_sharding_sig_t *s, double mem[2])
{
    const pf_op_t *op = pf_graph_op(t->g, t->ops[j]);
    double in_all = 0, in_split = 0;
    for (int a = t->in_start[j]; a < t->in_start[j + 1]; a++) {
        double b = t->tens_bytes[t->in_tens[a]];
        in_all += b;
        if (required(s, a - t->in_start[j], 0).kind == PF_SHARDING_S)
            in_split += b;
    }
    int out_split = s->out.kind == PF_SHARDING_S;
    mem[0] = scaled_mem(op->mem_fwd_bytes, t->tens_bytes[j], out_split, in_all, in_split, t->T);
    mem[1] = scaled_mem(op->mem_bwd_bytes, t->tens_bytes[j], out_split, in_all, in_split, t->T);
}

static int weight_digit(uint64_t plan, int widx)
{
    while (widx-- > 0)
        plan /= 3;
    return (int)(plan % 3);
}

/* Prices plan `plan` on one instance: each op greedily takes its cheapest signature (or
 * forced[j]); the unit's outputs end as B. 0 with the time and memory, -1 when infeasible. */
static int eval_plan(const inst_t *t, uint64_t plan, const int *forced, scratch_t *sc,
                     record_t *rec, double *time_ms, double *mem_bytes)
{
    double time = 0, mem = 0;
    uint64_t rest = plan;
    for (int x = 0; x < t->ntens; x++)
        sc->prop[x] = pf_sharding_b(), sc->nfwd[x] = sc->ngrad[x] = 0;
    for (int j = 0; j < t->nops; j++) {
        const pf_op_t *op = pf_graph_op(t->g, t->ops[j]);
        int w = 0;
        if (t->widx[j] >= 0)
            w = (int)(rest % 3), rest /= 3;
        const pf_sharding_sig_t *s = t->sig + (size_t)(j * 3 + w) * PF_SHARDING_MAX_SIGS;
        int ns = t->nsig[j * 3 + w], pick = forced ? forced[j] : 0;
        if (ns == 0 || pick >= ns)
            return -1;
        double best = sig_cost(t, sc, j, w, &s[pick]);
        for (int i = 1; !forced && i < ns; i++) {
            double c = sig_cost(t, sc, j, w, &s[i]);
            if (c < best)
                best = c, pick = i;
        }
        s += pick;
        time += compute_ms(t, j, w, s->split);
        if (s->weight_grad_partial) {
            double ms = t->wgrad_ms[j];
            time += ms;
            record(rec, PF_CONV_ALLREDUCE, 1, j, 1, op->param_bytes, ms);
        }
        for (int a = t->in_start[j]; a < t->in_start[j + 1]; a++) {
            int k = a - t->in_start[j], x = t->in_tens[a], charge = x < t->nops ? x : j;
            time += pay(t, sc, rec, x, required(s, k, 0), 0, charge);
            time += pay(t, sc, rec, x, required(s, k, 1), 1, charge);
        }
        sc->prop[j] = s->out;
        sc->choice[j] = pick;
        double m[2];
        op_mem(t, j, s, m);
        mem += m[0] + op->param_bytes * (w ? 1.0 / t->T : 1.0) * t->o->param_state_factor;
    }
    for (int j = 0; j < t->nops; j++)
        if (t->ext_out[j]) {
            time += pay(t, sc, rec, j, pf_sharding_b(), 0, j);
            time += pay(t, sc, rec, j, pf_sharding_b(), 1, j);
        }
    *time_ms = time;
    *mem_bytes = mem;
    return t->o->mem_limit_bytes > 0 && mem > t->o->mem_limit_bytes ? -1 : 0;
}

/* ---- enumeration ---- */

static int check_args(const pf_tap_units_t *u, int unit, int T, const pf_sharding_link_t *link,
                      char *err, size_t errlen)
{
    if (T < 1)
        return pf_fail(err, errlen, PF_EINPUT, "tap: tensor-parallel degree %d is below 1", T);
    if (!link || !(link->gbps > 0) || !isfinite(link->gbps) ||
        !pf_is_finite_nonneg(link->latency_us))
        return pf_fail(err, errlen, PF_EINPUT,
                       "tap: the TP group's link needs gbps > 0 and latency_us >= 0");
    int nunits = u ? pf_tap_units_count(u) : 0;
    if (u && (unit < 0 || unit >= nunits))
        return pf_fail(err, errlen, PF_EINPUT, "tap: unit %d is not in 0..%d", unit, nunits - 1);
    return PF_OK;
}

/* Time, then memory, then the lower index: a total order, so any split of the work into
 * slices or threads keeps the same winners. */
static bool cand_before(const pf_tap_cand_t *a, const pf_tap_cand_t *b)
{
    if (a->time_ms != b->time_ms)
        return a->time_ms < b->time_ms;
    if (a->mem_bytes != b->mem_bytes)
        return a->mem_bytes < b->mem_bytes;
    return a->plan < b->plan;
}

static void keep(pf_tap_slice_t *s, pf_tap_cand_t c)
{
    int i = s->nbest < PF_TAP_KEEP ? s->nbest++ : PF_TAP_KEEP;
    if (i == PF_TAP_KEEP) {
        if (!cand_before(&c, &s->best[PF_TAP_KEEP - 1]))
            return;
        i = PF_TAP_KEEP - 1;
    }
    for (; i > 0 && cand_before(&c, &s->best[i - 1]); i--)
        s->best[i] = s->best[i - 1];
    s->best[i] = c;
}

int pf_tap_enum_slice(const pf_graph_t *g, const pf_tap_units_t *u, int unit, int T,
                      const pf_sharding_link_t *link, const pf_tap_opts_t *o, uint64_t lo,
                      uint64_t hi, pf_tap_slice_t *out, char *err, size_t errlen)
{
    int rc = check_args(u, unit, T, link, err, errlen), failed = 0;
    if (rc)
        return rc;
    pf_tap_units_info_t un;
    pf_tap_units_info(u, unit, &un);
    if (lo > hi || hi > un.nplans)
        return pf_fail(err, errlen, PF_EINPUT,
                       "tap: slice [%llu, %llu) is outside unit %s's %llu plans",
                       (unsigned long long)lo, (unsigned long long)hi, un.name,
                       (unsigned long long)un.nplans);
    memset(out, 0, sizeof *out);
    *out = (pf_tap_slice_t){.unit = unit, .T = T, .lo = lo, .hi = hi};
    inst_t t;
    if (inst_build(&t, g, pf_tap_units_instance(u, unit, 0), un.nops, T, link, o))
        return pf_fail(err, errlen, PF_ERR, "tap: out of memory");
#pragma omp parallel
    {
        scratch_t sc;
        pf_tap_slice_t local = {0};
        int ok = scratch_new(&sc, &t) == PF_OK;
#pragma omp for schedule(dynamic, 64)
        for (uint64_t p = lo; p < hi; p++) {
            double time, mem;
            if (ok && eval_plan(&t, p, NULL, &sc, NULL, &time, &mem) == 0) {
                local.feasible++;
                keep(&local, (pf_tap_cand_t){p, time, mem});
            }
        }
#pragma omp critical(pf_tap_merge)
        {
            failed |= !ok;
            out->feasible += local.feasible;
            for (int i = 0; i < local.nbest; i++)
                keep(out, local.best[i]);
        }
        scratch_free(&sc);
    }
    inst_free(&t);
    if (failed)
        return pf_fail(err, errlen, PF_ERR, "tap: out of memory");
    return PF_OK;
}

int pf_tap_merge(const pf_tap_slice_t *slices, int n, pf_tap_slice_t *out, char *err,
                 size_t errlen)
{
    if (n < 1)
        return pf_fail(err, errlen, PF_EINPUT, "tap: nothing to merge");
    pf_tap_slice_t m = {.unit = slices[0].unit, .T = slices[0].T, .lo = slices[0].lo,
                        .hi = slices[0].hi};
    for (int i = 0; i < n; i++) {
        if (slices[i].unit != m.unit || slices[i].T != m.T)
            return pf_fail(err, errlen, PF_EINPUT,
                           "tap: slice %d is of unit %d, T %d; slice 0 of unit %d, T %d", i,
                           slices[i].unit, slices[i].T, m.unit, m.T);
        m.lo = slices[i].lo < m.lo ? slices[i].lo : m.lo;
        m.hi = slices[i].hi > m.hi ? slices[i].hi : m.hi;
        m.feasible += slices[i].feasible;
        for (int k = 0; k < slices[i].nbest && k < PF_TAP_KEEP; k++)
            keep(&m, slices[i].best[k]);
    }
    *out = m;
    return PF_OK;
}

/* ---- rewrite onto every instance ---- */

void pf_tap_result_free(pf_tap_result_t *res)
{
    if (!res)
        return;
    for (int k = 0; res->units && k < res->nunits; k++) {
        free((char *)res->units[k].name);
        free(res->units[k].colls);
    }
    free(res->units);
    free(res->ops);
    free(res->edge_bytes);
    memset(res, 0, sizeof *res);
}

/* One instance under the representative's choices (or, for the representative, its own
 * greedy ones): fills res->ops and edge_bytes of its ops; rec gets its collectives. */
static int apply_instance(const inst_t *t, uint64_t plan, int unit, const int *forced,
                          scratch_t *sc, record_t *rec, pf_tap_result_t *res, double *time_ms)
{
    double mem;
    if (eval_plan(t, plan, forced, sc, rec, time_ms, &mem))
        return PF_EINFEASIBLE;
    if (rec->failed)
        return PF_ERR;
    for (int j = 0; j < t->nops; j++) {
        int v = t->ops[j], w = t->widx[j] >= 0 ? weight_digit(plan, t->widx[j]) : 0;
        const pf_op_t *op = pf_graph_op(t->g, v);
        const pf_sharding_sig_t *s = t->sig + (size_t)(j * 3 + w) * PF_SHARDING_MAX_SIGS + sc->choice[j];
        pf_tap_op_t *r = &res->ops[v];
        double comm[2] = {0, 0}, m[2];
        for (size_t c = 0; c < rec->ncolls; c++)
            if (rec->colls[c].op == j)
                comm[rec->colls[c].backward] += rec->colls[c].ms;
        op_mem(t, j, s, m);
        const double *x = t->split_ms + (j * 3 + w) * 2; /* inst_split_times */
        double f = s->split ? x[0] : op->fwd_ms, b = s->split ? x[1] : op->bwd_ms;
        *r = (pf_tap_op_t){.fwd_ms = f, .bwd_ms = b,
                           .fwd_comm_ms = comm[0], .bwd_comm_ms = comm[1],
                           .param_bytes = w ? op->param_bytes / t->T : op->param_bytes,
                           .mem_fwd_bytes = m[0], .mem_bwd_bytes = m[1],
                           .weight = weight_option[w], .output = s->out, .split = s->split,
                           .unit = unit};
        r->fwd_ms += comm[0];
        r->bwd_ms += comm[1];
        for (int a = t->in_start[j]; a < t->in_start[j + 1]; a++) {
            double b = pf_graph_edge(t->g, t->in_edge[a])->bytes;
            int split = required(s, a - t->in_start[j], 0).kind == PF_SHARDING_S;
            res->edge_bytes[t->in_edge[a]] = split ? b / t->T : b;
        }
    }
    return PF_OK;
}

/* Instance i of a unit under the representative's choices: instance 0 fixes choice and props,
 * every other must give the same properties. */
static int apply_one(const pf_graph_t *g, const pf_tap_units_info_t *un, const int *ops, int i,
                     int k, uint64_t plan, int T, const pf_sharding_link_t *link,
                     const pf_tap_opts_t *o, int *choice, pf_sharding_t *props,
                     pf_tap_unit_plan_t *up, pf_tap_result_t *res, char *err, size_t errlen)
{
    inst_t t = {0};
    scratch_t sc = {0};
    record_t rec = {0};
    double time;
    int rc = PF_ERR;
    if (inst_build(&t, g, ops, un->nops, T, link, o) || scratch_new(&sc, &t))
        goto oom;
    rc = apply_instance(&t, plan, k, i ? choice : NULL, &sc, &rec, res, &time);
    if (rc == PF_ERR)
        goto oom;
    if (rc) {
        rc = pf_fail(err, errlen, PF_EINFEASIBLE, "tap: plan %llu of unit %s cannot run "
                     "on its instance %d (op %s)", (unsigned long long)plan, un->name,
                     i, pf_graph_op(g, ops[0])->name);
        goto done;
    }
    for (int j = 0; j < un->nops; j++) {
        if (i == 0) {
            choice[j] = sc.choice[j], props[j] = sc.prop[j];
        } else if (!pf_sharding_equal(props[j], sc.prop[j])) {
            rc = pf_fail(err, errlen, PF_ERR, "tap: unit %s: instance %d gives op %s "
                         "another property than instance 0", un->name, i,
                         pf_graph_op(g, ops[j])->name);
            goto done;
        }
    }
    if (i == 0) { /* the representative's collectives, by graph op */
        for (size_t c = 0; c < rec.ncolls; c++)
            rec.colls[c].op = ops[rec.colls[c].op];
        up->time_ms = time;
        up->colls = rec.colls;
        up->ncolls = (int)rec.ncolls;
        rec = (record_t){0};
    }
    rc = PF_OK;
    goto done;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "tap: out of memory");
done:
    free(rec.colls);
    inst_free(&t);
    scratch_free(&sc);
    return rc;
}

int pf_tap_apply(const pf_graph_t *g, const pf_tap_units_t *u, int T,
                 const pf_sharding_link_t *link, const pf_tap_opts_t *o, const uint64_t *plans,
                 pf_tap_result_t *res, char *err, size_t errlen)
{
    int rc = check_args(NULL, 0, T, link, err, errlen), *choice = NULL;
    int nunits = pf_tap_units_count(u);
    pf_sharding_t *props = NULL;
    memset(res, 0, sizeof *res);
    if (rc)
        return rc;
    res->T = T;
    res->nops = pf_graph_nops(g);
    res->nunits = nunits;
    if (!(res->ops = calloc((size_t)res->nops, sizeof *res->ops)) ||
        !(res->units = calloc((size_t)nunits, sizeof *res->units)) ||
        !(res->edge_bytes = calloc((size_t)pf_graph_nedges(g) + 1, sizeof *res->edge_bytes)))
        goto oom;
    for (int k = 0; k < nunits; k++) {
        pf_tap_units_info_t un;
        pf_tap_units_info(u, k, &un);
        pf_tap_unit_plan_t *up = &res->units[k];
        if (plans[k] >= un.nplans) {
            rc = pf_fail(err, errlen, PF_EINPUT, "tap: plan %llu of unit %s is not below 3^%d",
                         (unsigned long long)plans[k], un.name, un.nweights);
            goto fail;
        }
        *up = (pf_tap_unit_plan_t){.name = pf_strdup(un.name), .ninstances = un.ninstances,
                                   .nops = un.nops, .nweights = un.nweights, .plan = plans[k]};
        free(choice), free(props);
        if (!up->name || !(choice = malloc(sizeof *choice * (size_t)un.nops)) ||
            !(props = malloc(sizeof *props * (size_t)un.nops)))
            goto oom;
        for (int i = 0; i < un.ninstances; i++)
            if ((rc = apply_one(g, &un, pf_tap_units_instance(u, k, i), i, k, plans[k], T, link,
                                o, choice, props, up, res, err, errlen)))
                goto fail;
    }
    free(choice);
    free(props);
    return PF_OK;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "tap: out of memory");
fail:
    free(choice);
    free(props);
    pf_tap_result_free(res);
    return rc;
}

int pf_tap_plan(const pf_graph_t *g, int T, const pf_sharding_link_t *link, const pf_tap_opts_t *o,
                pf_tap_result_t *res, char *err, size_t errlen)
{
    int rc = check_args(NULL, 0, T, link, err, errlen);
    uint64_t *plans = NULL;
    memset(res, 0, sizeof *res);
    if (rc)
        return rc;
    pf_tap_units_t *u = pf_tap_units_new(g, o, err, errlen);
    if (!u)
        return PF_ERR;
    int nunits = pf_tap_units_count(u);
    if (!(plans = malloc(sizeof *plans * (size_t)(nunits + 1)))) {
        rc = pf_fail(err, errlen, PF_ERR, "tap: out of memory");
        goto done;
    }
    for (int k = 0; k < nunits; k++) {
        pf_tap_slice_t s;
        pf_tap_units_info_t un;
        pf_tap_units_info(u, k, &un);
        if ((rc = pf_tap_enum_slice(g, u, k, T, link, o, 0, un.nplans, &s, err, errlen)))
            goto done;
        if (s.nbest == 0) {
            rc = pf_fail(err, errlen, PF_EINFEASIBLE,
                         "tap: no tensor-parallel plan of degree %d for unit %s", T, un.name);
            goto done;
        }
        plans[k] = s.best[0].plan;
    }
    rc = pf_tap_apply(g, u, T, link, o, plans, res, err, errlen);
done:
    free(plans);
    pf_tap_units_destroy(&u);
    return rc;
}

int pf_tap_graph(const pf_graph_t *g, const pf_tap_result_t *res, pf_graph_t **out, char *err,
                 size_t errlen)
{
    *out = NULL;
    if (res->nops != pf_graph_nops(g))
        return pf_fail(err, errlen, PF_EINPUT, "tap: the result has %d ops, the graph %d",
                       res->nops, pf_graph_nops(g));
    pf_graph_t *t = pf_graph_new_like(g);
    int rc = t ? PF_OK : PF_ERR;
    for (int v = 0; v < res->nops && !rc; v++) {
        pf_op_t op = *pf_graph_op(g, v);
        const pf_tap_op_t *r = &res->ops[v];
        op.fwd_ms = r->fwd_ms, op.bwd_ms = r->bwd_ms, op.param_bytes = r->param_bytes;
        op.comm_fwd_ms = r->fwd_comm_ms, op.comm_bwd_ms = r->bwd_comm_ms;
        op.mem_fwd_bytes = r->mem_fwd_bytes, op.mem_bwd_bytes = r->mem_bwd_bytes;
        if (pf_graph_add_op(t, &op) < 0)
            rc = PF_ERR;
    }
    for (int e = 0; e < pf_graph_nedges(g) && !rc; e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (pf_graph_add_edge(t, ed->src, ed->dst, res->edge_bytes[e]) < 0)
            rc = PF_ERR;
    }
    if (rc) {
        pf_graph_destroy(&t);
        return pf_fail(err, errlen, PF_ERR, "tap: out of memory");
    }
    if ((rc = pf_graph_finalize(t, err, errlen))) {
        pf_graph_destroy(&t);
        return rc;
    }
    *out = t;
    return PF_OK;
}
