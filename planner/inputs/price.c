#include "planner/inputs/price.h"
#include "planner/core/util.h"

#include <math.h>

int pf_price_graph(const pf_graph_t *g, const pf_devmodel_t *dm, pf_prec_t p, pf_graph_t **out,
                   int *npriced, char *err, size_t errlen)
{
    int rc = PF_ERR, priced = 0;
    pf_graph_t *h = pf_graph_new_like(g);
    *out = NULL;
    if (!h || pf_graph_set_device_model(h, pf_devmodel_spec(dm)->name) != PF_OK) {
        pf_graph_destroy(&h);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    for (int v = 0; v < pf_graph_nops(g); v++) {
        pf_op_t op = *pf_graph_op(g, v);
        priced += pf_devmodel_op_ms(dm, p, &op.work, &op.fwd_ms, &op.bwd_ms);
        if (pf_graph_add_op(h, &op) < 0) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (pf_graph_add_edge(h, ed->src, ed->dst, ed->bytes) < 0) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    if ((rc = pf_graph_finalize(h, err, errlen)) != PF_OK)
        goto fail;
    if (npriced)
        *npriced = priced;
    *out = h;
    return PF_OK;
fail:
    pf_graph_destroy(&h);
    return rc;
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

/* One op at r: its quantities, and its times by dm's ratio (NULL: linearly). Returns 1 when it
 * was scaled linearly. */
static int scale_op(const pf_devmodel_t *dm, pf_op_t *op, int b0, int B)
{
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
    int rc = PF_ERR, lin = 0, b0 = pf_graph_microbatch(g);
    const char *name = pf_graph_device_model(g);
    const pf_devmodel_t *dm = name ? pf_devmodel_preset(name) : NULL;
    *out = NULL;
    if (B < 1 || b0 < 1)
        return pf_fail(err, errlen, PF_EINPUT, "microbatch_size: %d (graph's %d) must be >= 1",
                       B, b0);
    pf_graph_t *h = pf_graph_new(pf_graph_name(g), B);
    if (!h || pf_graph_set_device_model(h, name) != PF_OK) {
        pf_graph_destroy(&h);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    for (int v = 0; v < pf_graph_nops(g); v++) {
        pf_op_t op = *pf_graph_op(g, v);
        lin |= scale_op(dm, &op, b0, B);
        if (pf_graph_add_op(h, &op) < 0)
            goto oom;
    }
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (pf_graph_add_edge(h, ed->src, ed->dst, ed->bytes * B / b0) < 0)
            goto oom;
    }
    if ((rc = pf_graph_finalize(h, err, errlen)) != PF_OK)
        goto fail;
    if (linear)
        *linear = lin;
    *out = h;
    return PF_OK;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "out of memory");
fail:
    pf_graph_destroy(&h);
    return rc;
}

int pf_price_microbatch(const pf_graph_t *g, int B, pf_graph_t **out, char *err, size_t errlen)
{
    return pf_price_microbatch_ex(g, B, out, NULL, err, errlen);
}
