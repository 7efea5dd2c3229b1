#include "planner/ir/training.h"
#include "planner/core/util.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pf_training_init(pf_training_t *t)
{
    memset(t, 0, sizeof *t);
    t->precision_bytes = 2;
    t->optimizer = PF_OPTIMIZER_ADAM;
    t->zero = 0;
    t->recompute = PF_RECOMPUTE_NONE;
    t->schedule = PF_SCHEDULE_1F1B;
}

int pf_training_check(const pf_training_t *t, char *err, size_t errlen)
{
    if (t->precision_bytes != 2 && t->precision_bytes != 4)
        return pf_fail(err, errlen, PF_EINPUT, "precision: %d bytes per parameter is neither "
                       "2 (bf16, fp16) nor 4 (fp32)", t->precision_bytes);
    if (t->zero < 0 || t->zero > 3)
        return pf_fail(err, errlen, PF_EINPUT, "ZeRO stage %d is not 0, 1, 2 or 3", t->zero);
    if ((unsigned)t->optimizer > PF_OPTIMIZER_SGD || (unsigned)t->recompute > PF_RECOMPUTE_FULL ||
        (unsigned)t->schedule >= PF_SCHEDULE_COUNT)
        return pf_fail(err, errlen, PF_EINPUT, "training options out of range");
    return PF_OK;
}

static const char *const optimizer_names[] = {"adam", "sgd"};
static const char *const recompute_names[] = {"none", "selective", "full"};
static const char *const schedule_names[PF_SCHEDULE_COUNT] = {"1f1b", "gpipe", "eager-1f1b",
                                                               "signal"};

const char *pf_training_precision_name(int precision_bytes)
{
    return precision_bytes == 4 ? "fp32" : precision_bytes == 2 ? "bf16" : "?";
}
const char *pf_training_optimizer_name(pf_training_optimizer_t o)
{
    return (unsigned)o <= PF_OPTIMIZER_SGD ? optimizer_names[o] : "?";
}
const char *pf_training_recompute_name(pf_training_recompute_t r)
{
    return (unsigned)r <= PF_RECOMPUTE_FULL ? recompute_names[r] : "?";
}
const char *pf_training_schedule_name(pf_training_schedule_t s)
{
    return (unsigned)s < PF_SCHEDULE_COUNT ? schedule_names[s] : "?";
}

static int parse_name(const char *s, const char *const *names, int n)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

int pf_training_precision_parse(const char *s)
{
    if (!s)
        return -1;
    if (!strcmp(s, "bf16") || !strcmp(s, "fp16"))
        return 2;
    return strcmp(s, "fp32") == 0 ? 4 : -1;
}
int pf_training_optimizer_parse(const char *s) { return parse_name(s, optimizer_names, 2); }
int pf_training_recompute_parse(const char *s) { return parse_name(s, recompute_names, 3); }
int pf_training_schedule_parse(const char *s)
{
    return parse_name(s, schedule_names, PF_SCHEDULE_COUNT);
}

void pf_training_state_split(const pf_training_t *t, int replicas, pf_training_state_split_t *out)
{
    double p = t->precision_bytes > 0 ? t->precision_bytes : 2;
    double r = replicas > 1 ? replicas : 1;
    /* bytes per parameter, then per byte of param_bytes (one parameter is p bytes there) */
    double master = p < 4 ? 4 : 0;
    double moments = t->optimizer == PF_OPTIMIZER_SGD ? 4 : 8;
    out->weights = p / p / (t->zero >= 3 ? r : 1);
    out->grads = p / p / (t->zero >= 2 ? r : 1);
    out->master = master / p / (t->zero >= 1 ? r : 1);
    out->moments = moments / p / (t->zero >= 1 ? r : 1);
}

double pf_training_state_factor(const pf_training_t *t, int replicas)
{
    pf_training_state_split_t s;
    pf_training_state_split(t, replicas, &s);
    return s.weights + s.grads + s.master + s.moments;
}

int pf_training_inflight(const pf_training_t *t, int stages, int microbatches, int s)
{
    if (t->schedule == PF_SCHEDULE_GPIPE)
        return microbatches;
    int k = t->schedule == PF_SCHEDULE_EAGER_1F1B ? 2 * (stages - s) - 1 : stages - s;
    return k < microbatches ? (k > 1 ? k : 1) : microbatches;
}

void pf_training_recompute_runs(int n, pf_training_recompute_t (*level)(const void *ctx, int s),
                                const void *ctx, char *buf, size_t len)
{
    size_t at = 0;
    if (len)
        buf[0] = 0;
    for (int s = 0, run = 1; s < n && at < len; s++, run++) {
        pf_training_recompute_t r = level(ctx, s);
        if (s + 1 < n && level(ctx, s + 1) == r)
            continue;
        int k = run == n ? snprintf(buf, len, "%s", pf_training_recompute_name(r))
                         : snprintf(buf + at, len - at, "%s%s x%d", at ? "+" : "",
                                    pf_training_recompute_name(r), run);
        at += k > 0 ? (size_t)k : 0;
        run = 0;
    }
}

size_t pf_training_block_len(const char *name)
{
    /* the first dot-separated component made of digits ends the block's name */
    const char *p = name;
    while (p && *p) {
        const char *end = strchr(p, '.');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        int digits = n > 0;
        for (size_t i = 0; i < n && digits; i++)
            digits = isdigit((unsigned char)p[i]);
        if (digits && p != name)
            return (size_t)(p - name) + n;
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

int pf_training_cmp_block_name(const void *a, const void *b, void *graph)
{
    const pf_graph_t *g = graph;
    const char *x = pf_graph_op(g, *(const int *)a)->name, *y = pf_graph_op(g, *(const int *)b)->name;
    size_t lx = pf_training_block_len(x), ly = pf_training_block_len(y);
    int c = strncmp(x, y, lx < ly ? lx : ly);
    return c ? c : (lx > ly) - (lx < ly);
}

static int same_block(const char *a, size_t la, const char *b, size_t lb)
{
    return la > 0 && la == lb && strncmp(a, b, la) == 0;
}

typedef struct {
    const char *name;
    size_t len;
    double bytes;
} block_op_t;

static int cmp_block_op(const void *pa, const void *pb)
{
    const block_op_t *a = pa, *b = pb;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = strncmp(a->name, b->name, n);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* Full recomputation rematerialises one block at a time: the largest block's activations. */
static double largest_block_bytes(const pf_graph_t *g, const size_t *blen, block_op_t *scratch)
{
    int n = pf_graph_nops(g), k = 0;
    for (int v = 0; v < n; v++)
        if (blen[v] > 0)
            scratch[k++] = (block_op_t){pf_graph_op(g, v)->name, blen[v],
                                        pf_graph_op(g, v)->mem_fwd_bytes};
    qsort(scratch, (size_t)k, sizeof *scratch, cmp_block_op);
    double best = 0, run = 0;
    for (int i = 0; i < k; i++) {
        if (i > 0 && cmp_block_op(&scratch[i - 1], &scratch[i]) != 0)
            run = 0;
        run += scratch[i].bytes;
        best = fmax(best, run);
    }
    return best;
}

/* Is the tensor of edge e (from outside v's block) read by an op of v's block before v (an edge
 * from the same op of the same bytes: one output; edges of other sizes are other outputs)? The
 * block stores it once, with its first reader. */
static int read_before(const pf_graph_t *g, int v, const pf_edge_t *e, const size_t *blen)
{
    int cnt;
    const int *out = pf_graph_out(g, e->src, &cnt);
    const char *name = pf_graph_op(g, v)->name;
    for (int i = 0; i < cnt; i++) {
        const pf_edge_t *o = pf_graph_edge(g, out[i]);
        int u = o->dst;
        if (u < v && o->bytes == e->bytes &&
            same_block(name, blen[v], pf_graph_op(g, u)->name, blen[u]))
            return 1;
    }
    return 0;
}

/* What op v stores under full recomputation: the tensors entering its block from outside that
 * it is the first of its block to read (a layer input read by the norm and by the residual add
 * is one tensor, Korthikanti's 2 s b h, stored once). */
static double block_input_bytes(const pf_graph_t *g, int v, const size_t *blen)
{
    double kept = 0;
    int cnt;
    const int *in = pf_graph_in(g, v, &cnt);
    const char *name = pf_graph_op(g, v)->name;
    for (int i = 0; i < cnt; i++) {
        const pf_edge_t *e = pf_graph_edge(g, in[i]);
        if (!same_block(name, blen[v], pf_graph_op(g, e->src)->name, blen[e->src]) &&
            !read_before(g, v, e, blen))
            kept += e->bytes;
    }
    return kept;
}

int pf_training_selective_op(const pf_graph_t *g, int v)
{
    const pf_op_t *op = pf_graph_op(g, v);
    if (!strcmp(op->type, "attention") || !strcmp(op->type, "softmax"))
        return 1;
    if (strcmp(op->type, "dropout") != 0)
        return 0;
    int cnt;
    const int *in = pf_graph_in(g, v, &cnt);
    for (int i = 0; i < cnt; i++)
        if (!strcmp(pf_graph_op(g, pf_graph_edge(g, in[i])->src)->type, "softmax"))
            return 1;
    return 0;
}

pf_graph_t *pf_training_view(const pf_graph_t *g, const pf_training_t *t, double *reserve_bytes,
                             char *err, size_t errlen)
{
    int n = pf_graph_nops(g), m = pf_graph_nedges(g);
    block_op_t *block_ops = NULL;
    size_t *blen = NULL;
    pf_graph_t *out = pf_graph_new_like(g);
    *reserve_bytes = 0;
    if (!out || !(blen = malloc(((size_t)n + 1) * sizeof *blen)) ||
        !(block_ops = malloc(((size_t)n + 1) * sizeof *block_ops))) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    for (int v = 0; v < n; v++)
        blen[v] = pf_training_block_len(pf_graph_op(g, v)->name);
    if (t->recompute == PF_RECOMPUTE_FULL)
        *reserve_bytes = largest_block_bytes(g, blen, block_ops);
    for (int v = 0; v < n; v++) {
        pf_op_t op = *pf_graph_op(g, v);
        if (t->recompute == PF_RECOMPUTE_SELECTIVE && pf_training_selective_op(g, v)) {
            op.mem_fwd_bytes = 0;
            op.bwd_ms += op.fwd_ms;
        } else if (t->recompute == PF_RECOMPUTE_FULL && blen[v] > 0) {
            op.mem_fwd_bytes = block_input_bytes(g, v, blen);
            op.bwd_ms += op.fwd_ms;
        }
        if (pf_graph_add_op(out, &op) < 0) {
            pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    for (int e = 0; e < m; e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (pf_graph_add_edge(out, ed->src, ed->dst, ed->bytes) < 0) {
            pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    if (pf_graph_finalize(out, err, errlen) != PF_OK)
        goto fail;
    free(blen);
    free(block_ops);
    return out;
fail:
    free(blen);
    free(block_ops);
    pf_graph_destroy(&out);
    return NULL;
}

double pf_training_tp_overlap_exposed_ms(double comm_ms, double gemm_ms, int t)
{
    if (t <= 1 || comm_ms <= 0)
        return fmax(0, comm_ms);
    return fmax(0, comm_ms - (t - 1.0) / t * fmax(0, gemm_ms));
}

double pf_training_zero3_exposed_ms(double gather_ms, double compute_ms)
{
    return fmax(0, 2 * gather_ms - compute_ms);
}

int pf_training_grad_buckets(double rank_bytes, int replicas, int precision_bytes)
{
    double per = fmax(40e6, 1e6 * replicas) * (precision_bytes > 0 ? precision_bytes : 2);
    double n = ceil(rank_bytes / per);
    return n < 1 ? 1 : n > 1 << 16 ? 1 << 16 : (int)n;
}
