#include "planner/inputs/price.h"
#include "planner/core/util.h"

#include <math.h>

/* Fill h (empty, from the caller) with g's ops, each changed by op_fn, and g's edges with bytes
 * x mul / div; then finalize it. *count is the sum of op_fn's returns. */
typedef int (*op_fn_t)(pf_op_t *op, const void *ctx);

static int rebuild(const pf_graph_t *g, pf_graph_t *h, op_fn_t op_fn, const void *ctx,
                   double mul, double div, int *count, char *err, size_t errlen)
{
    int n = 0, rc;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        pf_op_t op = *pf_graph_op(g, v);
        n += op_fn(&op, ctx);
        if (pf_graph_add_op(h, &op) < 0)
            return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (pf_graph_add_edge(h, ed->src, ed->dst, ed->bytes * mul / div) < 0)
            return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    if ((rc = pf_graph_finalize(h, err, errlen)) == PF_OK)
        *count = n;
    return rc;
}

typedef struct {
    const pf_devmodel_t *dm;
    pf_prec_t p;
} price_ctx_t;

/* 1 when dm priced the op. */
static int price_op(pf_op_t *op, const void *ctx)
{
    const price_ctx_t *c = ctx;
    return pf_devmodel_op_ms(c->dm, c->p, &op->work, &op->fwd_ms, &op->bwd_ms);
}

int pf_price_graph(const pf_graph_t *g, const pf_devmodel_t *dm, pf_prec_t p, pf_graph_t **out,
                   int *npriced, char *err, size_t errlen)
{
    int rc, priced = 0;
    price_ctx_t ctx = {dm, p};
    pf_graph_t *h = pf_graph_new_like(g);
    *out = NULL;
    if (!h || pf_graph_set_device(h, dm) != PF_OK) {
        pf_graph_destroy(&h);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    if ((rc = rebuild(g, h, price_op, &ctx, 1, 1, &priced, err, errlen)) != PF_OK) {
        pf_graph_destroy(&h);
        return rc;
    }
    if (npriced)
        *npriced = priced;
    *out = h;
    return PF_OK;
}

/* ---- micro-batch re-pricing ---- */

static int64_t scaled(int64_t n, double r)
{
    int64_t v = llround((double)n * r);
    return v < 1 ? 1 : v;
}

static void scale_shape(pf_shape_t *s, int b0, int B)
{
    if (s->ndim > 0 && s->dim[0] == b0)
        s->dim[0] = B;
}

/* The op's work at r = B / b0 (price.h). */
static pf_op_work_t scale_work(const pf_op_work_t *w, double param_bytes, int b0, double r)
{
    pf_op_work_t n = *w;
    /* an op that reads less than its parameters does not read them whole (an embedding's
     * lookup reads the rows its tokens name): all it reads scales */
    double params = w->bytes_read >= param_bytes ? param_bytes : 0;
    n.fwd_flops *= r, n.bwd_flops *= r, n.bytes_written *= r;
    n.bytes_read = (w->bytes_read - params) * r + params;
    if (w->gemm_m <= 0)
        return n;
    if (w->gemm_batch > 1 && w->gemm_batch % b0 == 0)
        n.gemm_batch = scaled(w->gemm_batch, r);
    else
        n.gemm_m = scaled(w->gemm_m, r);
    return n;
}

typedef struct {
    const pf_devmodel_t *dm;
    int b0, B;
} scale_ctx_t;

/* One op at r: its quantities, and its times by dm's ratio (NULL: linearly). Returns 1 when it
 * was scaled linearly. */
static int scale_op(pf_op_t *op, const void *ctx)
{
    const scale_ctx_t *c = ctx;
    const pf_devmodel_t *dm = c->dm;
    int b0 = c->b0, B = c->B;
    double r = (double)B / b0, f0 = 0, b0_ms = 0, f1 = 0, b1 = 0;
    pf_op_work_t w = scale_work(&op->work, op->param_bytes, b0, r);
    int priced = dm && pf_devmodel_op_ms(dm, PF_PREC_BF16, &op->work, &f0, &b0_ms);
    if (priced)
        pf_devmodel_op_ms(dm, PF_PREC_BF16, &w, &f1, &b1);
    op->fwd_ms *= priced && f0 > 0 ? f1 / f0 : r;
    op->bwd_ms *= priced && b0_ms > 0 ? b1 / b0_ms : r;
    op->work = w;
    op->mem_fwd_bytes *= r, op->mem_bwd_bytes *= r;
    scale_shape(&op->input, b0, B);
    scale_shape(&op->output, b0, B);
    return !(priced && f0 > 0 && (b0_ms > 0 || op->bwd_ms == 0));
}

int pf_price_microbatch_ex(const pf_graph_t *g, int B, pf_graph_t **out, int *linear, char *err,
                           size_t errlen)
{
    int rc, lin = 0, b0 = pf_graph_microbatch(g);
    scale_ctx_t ctx = {pf_graph_device(g), b0, B};
    *out = NULL;
    if (B < 1 || b0 < 1)
        return pf_fail(err, errlen, PF_EINPUT, "microbatch_size: %d (graph's %d) must be >= 1",
                       B, b0);
    pf_graph_t *h = pf_graph_new(pf_graph_name(g), B);
    if (!h || pf_graph_copy_device(h, g) != PF_OK) {
        pf_graph_destroy(&h);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    if ((rc = rebuild(g, h, scale_op, &ctx, B, b0, &lin, err, errlen)) != PF_OK) {
        pf_graph_destroy(&h);
        return rc;
    }
    if (linear)
        *linear = lin > 0;
    *out = h;
    return PF_OK;
}

int pf_price_microbatch(const pf_graph_t *g, int B, pf_graph_t **out, char *err, size_t errlen)
{
    return pf_price_microbatch_ex(g, B, out, NULL, err, errlen);
}
