/* blocks: prologue + L identical blocks + epilogue (blocks.h). */
#include "planner/partition/blocks.h"
#include "planner/core/util.h"
#include "planner/ir/training.h"
#include "planner/tp/tap_units.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    pf_blocks_part_t pub;
    int *ops;
    pf_blocks_gemm_t *gemms;
    pf_blocks_memop_t *mem;
} part_t;

struct pf_blocks {
    int nblocks, nper, microbatch, precision_bytes;
    char *name;
    int *part_of; /* per op: -1 prologue, 0..L-1 block, L epilogue */
    int *inst;    /* L x nper op indices */
    part_t parts[3];
};

/* Scratch of one part's summary, indexed by op. */
typedef struct {
    const pf_graph_t *g;
    const pf_blocks_t *b;
    int part;     /* the part_of value of the ops summarised */
    char *split;  /* the op's output is split over t */
    char *marked; /* a producer already counted */
} scan_t;

static double elems(const pf_shape_t *s)
{
    double n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= (double)s->dim[i];
    return s->ndim ? n : 0;
}

static int is_type(const pf_op_t *op, const char *t) { return op->type && !strcmp(op->type, t); }

static int in_part(const scan_t *s, int u) { return s->b->part_of[u] == s->part; }

static int any_split_input(const scan_t *s, int v)
{
    int cnt;
    const int *in = pf_graph_in(s->g, v, &cnt);
    for (int i = 0; i < cnt; i++) {
        int u = pf_graph_edge(s->g, in[i])->src;
        if (in_part(s, u) && s->split[u])
            return 1;
    }
    return 0;
}

/* The GEMM shape of a linear with weight [in, out] (or [out, in]) reading [..., in]. */
static int linear_shape(const pf_op_t *op, pf_blocks_gemm_t *gm)
{
    const pf_shape_t *w = &op->weight, *x = &op->input;
    if (w->ndim != 2 || x->ndim < 1)
        return 0;
    int64_t kin = x->dim[x->ndim - 1];
    int64_t n = w->dim[0] == kin ? w->dim[1] : w->dim[1] == kin ? w->dim[0] : 0;
    double m = elems(x) / (double)kin;
    if (n <= 0 || kin <= 0 || m < 1)
        return 0;
    gm->m = (int64_t)m;
    gm->n = n;
    gm->k = kin;
    gm->batch = 1;
    return 1;
}

/* A weightless batched matmul (attention's scores or context): the operand of more dims gives
 * the batch (all but its last two), the other the remaining dimension. */
static int batched_shape(const pf_op_t *op, pf_blocks_gemm_t *gm)
{
    const pf_shape_t *in = &op->input, *out = &op->output;
    const pf_shape_t *big = out->ndim >= in->ndim ? out : in;
    if (big->ndim < 3 || in->ndim < 2 || out->ndim < 2)
        return 0;
    double batch = 1;
    for (int i = 0; i < big->ndim - 2; i++)
        batch *= (double)big->dim[i];
    double a = (double)big->dim[big->ndim - 2], c = (double)big->dim[big->ndim - 1];
    double rest = big == out ? elems(in) / (batch * a) : elems(out) / (batch * a);
    if (rest < 1 || rest != (double)(int64_t)rest)
        return 0;
    gm->batch = (int64_t)batch;
    gm->m = (int64_t)a;
    gm->n = big == out ? (int64_t)c : (int64_t)rest;
    gm->k = big == out ? (int64_t)rest : (int64_t)c;
    return 1;
}

static int gemm_shape(const pf_op_t *op, pf_blocks_gemm_t *gm)
{
    if (op->work.gemm_m > 0) {
        gm->m = op->work.gemm_m;
        gm->n = op->work.gemm_n;
        gm->k = op->work.gemm_k;
        gm->batch = op->work.gemm_batch > 0 ? op->work.gemm_batch : 1;
        return 1;
    }
    if (op->weight.ndim == 2 && op->param_bytes > 0)
        return linear_shape(op, gm);
    return batched_shape(op, gm);
}

static int is_gemm_type(const pf_op_t *op)
{
    return op->work.gemm_m > 0 || is_type(op, "linear") || is_type(op, "matmul");
}

static void add_work(pf_op_work_t *sum, const pf_op_work_t *w)
{
    sum->fwd_flops += w->fwd_flops;
    sum->bwd_flops += w->bwd_flops;
    sum->bytes_read += w->bytes_read;
    sum->bytes_written += w->bytes_written;
}

/* The backward all-reduce before a column-parallel op: one per distinct input tensor. */
static void count_bwd_ar(scan_t *s, part_t *p, int v)
{
    int cnt;
    const int *in = pf_graph_in(s->g, v, &cnt);
    for (int i = 0; i < cnt; i++) {
        const pf_edge_t *e = pf_graph_edge(s->g, in[i]);
        if (s->marked[e->src])
            continue;
        s->marked[e->src] = 1;
        p->pub.nar_bwd++;
        p->pub.ar_bwd_bytes += e->bytes;
    }
}

static double out_bytes(const scan_t *s, const pf_op_t *op)
{
    return elems(&op->output) * s->b->precision_bytes;
}

/* Classify op v (Megatron's propagation, blocks.h) and add it to the part. */
static void scan_op(scan_t *s, part_t *p, int v)
{
    const pf_op_t *op = pf_graph_op(s->g, v);
    int split_in = any_split_input(s, v), core = pf_training_selective_op(s->g, v);
    pf_blocks_gemm_t gm = {.op = v, .core = core};
    int weighted = op->param_bytes > 0;
    s->split[v] = (char)split_in;
    if (is_type(op, "embedding")) {
        p->pub.param_split_bytes += op->param_bytes;
        p->pub.nar_fwd++;
        p->pub.ar_fwd_bytes += out_bytes(s, op);
        s->split[v] = 0;
    } else if (is_gemm_type(op) && gemm_shape(op, &gm)) {
        gm.samples_in_batch = !weighted;
        if (weighted && !split_in) {
            gm.split = PF_BLOCKS_COLUMN;
            s->split[v] = 1;
            count_bwd_ar(s, p, v);
        } else if (weighted) {
            gm.split = PF_BLOCKS_ROW;
            s->split[v] = 0;
            p->pub.nar_fwd++;
            p->pub.ar_fwd_bytes += out_bytes(s, op);
        } else
            gm.split = split_in ? PF_BLOCKS_HEADS : PF_BLOCKS_WHOLE;
        if (weighted)
            p->pub.param_split_bytes += op->param_bytes;
        p->gemms[p->pub.ngemms++] = gm;
        goto stored;
    }
    double moved = op->work.bytes_read + op->work.bytes_written;
    if (moved <= 0)
        moved = (elems(&op->input) + elems(&op->output)) * s->b->precision_bytes;
    p->mem[p->pub.nmem++] =
        (pf_blocks_memop_t){.op = v, .bytes = moved, .split = split_in, .core = core};
stored:
    if (core && split_in)
        p->pub.act_core_bytes += op->mem_fwd_bytes;
    else if (split_in)
        p->pub.act_split_bytes += op->mem_fwd_bytes;
    else
        p->pub.act_whole_bytes += op->mem_fwd_bytes;
}

/* Distinct tensors crossing the part's boundary, each counted once at its largest edge. */
static void boundary_bytes(scan_t *s, part_t *p)
{
    for (int i = 0; i < p->pub.nops; i++) {
        int v = p->ops[i], cnt;
        const int *out = pf_graph_out(s->g, v, &cnt);
        double leave = 0;
        for (int j = 0; j < cnt; j++) {
            const pf_edge_t *e = pf_graph_edge(s->g, out[j]);
            if (!in_part(s, e->dst) && e->bytes > leave)
                leave = e->bytes;
        }
        p->pub.output_bytes += leave;
        const int *in = pf_graph_in(s->g, v, &cnt);
        for (int j = 0; j < cnt; j++) {
            const pf_edge_t *e = pf_graph_edge(s->g, in[j]);
            if (!in_part(s, e->src) && s->marked[e->src] != 2) {
                s->marked[e->src] = 2;
                p->pub.input_bytes += e->bytes;
            }
        }
    }
}

static int summarise(const pf_graph_t *g, pf_blocks_t *b, part_t *p, const int *ops, int nops,
                     int part)
{
    int n = pf_graph_nops(g);
    scan_t s = {.g = g, .b = b, .part = part};
    p->ops = malloc(sizeof *p->ops * (size_t)(nops ? nops : 1));
    p->gemms = calloc((size_t)(nops ? nops : 1), sizeof *p->gemms);
    p->mem = calloc((size_t)(nops ? nops : 1), sizeof *p->mem);
    s.split = calloc((size_t)n, 1);
    s.marked = calloc((size_t)n, 1);
    int rc = PF_ERR;
    if (!p->ops || !p->gemms || !p->mem || !s.split || !s.marked)
        goto done;
    memcpy(p->ops, ops, sizeof *ops * (size_t)nops);
    p->pub.nops = nops;
    for (int i = 0; i < nops; i++) {
        const pf_op_t *op = pf_graph_op(g, ops[i]);
        p->pub.param_bytes += op->param_bytes;
        p->pub.fwd_ms += op->fwd_ms;
        p->pub.bwd_ms += op->bwd_ms;
        add_work(&p->pub.work, &op->work);
        scan_op(&s, p, ops[i]);
    }
    memset(s.marked, 0, (size_t)n);
    boundary_bytes(&s, p);
    p->pub.ops = p->ops;
    p->pub.gemms = p->gemms;
    p->pub.mem = p->mem;
    rc = PF_OK;
done:
    free(s.split);
    free(s.marked);
    return rc;
}

/* The unit with the most ops in all its instances, among those repeated with >= 2 ops. */
static int largest_unit(const pf_tap_units_t *u)
{
    int best = -1;
    long best_ops = 0;
    for (int k = 0; k < pf_tap_units_count(u); k++) {
        pf_tap_units_info_t in;
        pf_tap_units_info(u, k, &in);
        long total = (long)in.ninstances * in.nops;
        if (in.ninstances >= 2 && in.nops >= 2 && total > best_ops) {
            best = k;
            best_ops = total;
        }
    }
    return best;
}

static int place_blocks(pf_blocks_t *b, const pf_graph_t *g, const pf_tap_units_t *u, int unit)
{
    pf_tap_units_info_t in;
    pf_tap_units_info(u, unit, &in);
    int n = pf_graph_nops(g), first_pos = n;
    const int *pos = pf_graph_topo_pos(g);
    b->nblocks = in.ninstances;
    b->nper = in.nops;
    if (!(b->name = pf_strdup(in.name)) ||
        !(b->inst = malloc(sizeof *b->inst * (size_t)in.ninstances * (size_t)in.nops)))
        return PF_ERR;
    for (int v = 0; v < n; v++)
        b->part_of[v] = -2;
    for (int i = 0; i < in.ninstances; i++) {
        const int *ops = pf_tap_units_instance(u, unit, i);
        memcpy(b->inst + (size_t)i * (size_t)in.nops, ops, sizeof *ops * (size_t)in.nops);
        for (int j = 0; j < in.nops; j++) {
            b->part_of[ops[j]] = i;
            if (pos[ops[j]] < first_pos)
                first_pos = pos[ops[j]];
        }
    }
    for (int v = 0; v < n; v++)
        if (b->part_of[v] == -2)
            b->part_of[v] = pos[v] < first_pos ? -1 : b->nblocks;
    return PF_OK;
}

/* The ops of part `part` in topological order. */
static int collect(const pf_graph_t *g, const pf_blocks_t *b, int part, int *out)
{
    int n = pf_graph_nops(g), k = 0;
    const int *topo = pf_graph_topo(g);
    for (int i = 0; i < n; i++)
        if (b->part_of[topo[i]] == part)
            out[k++] = topo[i];
    return k;
}

static int build(pf_blocks_t *b, const pf_graph_t *g, char *err, size_t errlen)
{
    pf_tap_opts_t o = {.min_duplicate = 2, .max_unit_weights = 64, .param_state_factor = 1,
                       .whole_instances = 1}; /* an MoE layer of 16 experts is one block */
    pf_tap_units_t *u = pf_tap_units_new(g, &o, err, errlen);
    int n = pf_graph_nops(g), *tmp = malloc(sizeof *tmp * (size_t)n), rc = PF_ERR, unit;
    if (!u || !tmp)
        goto done;
    if ((unit = largest_unit(u)) < 0) {
        rc = pf_fail(err, errlen, PF_EINPUT, "blocks: no repeated blocks in graph %s",
                     pf_graph_name(g));
        goto done;
    }
    if (place_blocks(b, g, u, unit))
        goto done;
    int np = collect(g, b, -1, tmp);
    if (summarise(g, b, &b->parts[0], tmp, np, -1) ||
        summarise(g, b, &b->parts[1], b->inst, b->nper, 0))
        goto done;
    int ne = collect(g, b, b->nblocks, tmp);
    if (summarise(g, b, &b->parts[2], tmp, ne, b->nblocks))
        goto done;
    rc = PF_OK;
done:
    if (rc == PF_ERR && u)
        pf_fail(err, errlen, PF_ERR, "blocks: out of memory");
    pf_tap_units_destroy(&u);
    free(tmp);
    return rc;
}

pf_blocks_t *pf_blocks_new(const pf_graph_t *g, int precision_bytes, char *err, size_t errlen)
{
    pf_blocks_t *b = calloc(1, sizeof *b);
    if (!b || !(b->part_of = malloc(sizeof *b->part_of * (size_t)pf_graph_nops(g)))) {
        pf_fail(err, errlen, PF_ERR, "blocks: out of memory");
        goto fail;
    }
    b->microbatch = pf_graph_microbatch(g);
    b->precision_bytes = precision_bytes > 0 ? precision_bytes : 2;
    if (build(b, g, err, errlen))
        goto fail;
    return b;
fail:
    pf_blocks_destroy(&b);
    return NULL;
}

void pf_blocks_destroy(pf_blocks_t **pb)
{
    if (!pb || !*pb)
        return;
    pf_blocks_t *b = *pb;
    for (int i = 0; i < 3; i++) {
        free(b->parts[i].ops);
        free(b->parts[i].gemms);
        free(b->parts[i].mem);
    }
    free(b->name);
    free(b->part_of);
    free(b->inst);
    free(b);
    *pb = NULL;
}

int pf_blocks_count(const pf_blocks_t *b) { return b->nblocks; }
int pf_blocks_microbatch(const pf_blocks_t *b) { return b->microbatch; }
const char *pf_blocks_name(const pf_blocks_t *b) { return b->name; }
const pf_blocks_part_t *pf_blocks_prologue(const pf_blocks_t *b) { return &b->parts[0].pub; }
const pf_blocks_part_t *pf_blocks_block(const pf_blocks_t *b) { return &b->parts[1].pub; }
const pf_blocks_part_t *pf_blocks_epilogue(const pf_blocks_t *b) { return &b->parts[2].pub; }

const int *pf_blocks_instance(const pf_blocks_t *b, int i, int *nops)
{
    if (i < 0 || i >= b->nblocks)
        return NULL;
    if (nops)
        *nops = b->nper;
    return b->inst + (size_t)i * (size_t)b->nper;
}

int pf_blocks_of(const pf_blocks_t *b, int v) { return b->part_of[v]; }
