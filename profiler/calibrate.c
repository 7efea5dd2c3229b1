#include "profiler/calibrate.h"
#include "planner/core/util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int has_word(const char *s, const char *w)
{
    if (!s)
        return 0;
    size_t n = strlen(w);
    for (; *s; s++)
        if (!strncasecmp(s, w, n))
            return 1;
    return 0;
}

static int type_is(const char *type, const char *const *names)
{
    for (; *names; names++)
        if (!strcasecmp(type, *names))
            return 1;
    return 0;
}

static int64_t prod(const pf_shape_t *s, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++)
        p *= s->dim[i];
    return p;
}

int pf_calibrate_probe(const pf_op_t *op, int dtype, pf_op_probe_t *p, char *why, size_t whylen)
{
    static const char *const gemm_t[] = {"linear", "dense", "fc", "matmul", "gemm", "mm", NULL};
    static const char *const rows_t[] = {"layernorm", "layer_norm", "rmsnorm", "softmax", NULL};
    static const char *const bin_t[] = {"add", "sub", "mul", "residual", NULL};
    static const char *const un_t[] = {"gelu", "relu", "silu", "tanh", "sigmoid", "dropout",
                                       "scale", "elementwise", NULL};
    const pf_shape_t *in = &op->input, *out = &op->output;
    const char *type = op->type ? op->type : "";
    memset(p, 0, sizeof *p);
    p->dtype = dtype;
    p->batch = 1;
    if (out->ndim < 1)
        return pf_fail(why, whylen, PF_EINPUT, "no output shape");
    for (int i = 0; i < out->ndim; i++)
        if (out->dim[i] <= 0)
            return pf_fail(why, whylen, PF_EINPUT, "output shape has a zero dimension");
    for (int i = 0; i < in->ndim; i++)
        if (in->dim[i] <= 0)
            return pf_fail(why, whylen, PF_EINPUT, "input shape has a zero dimension");
    int64_t last = out->dim[out->ndim - 1], rows = prod(out, 0, out->ndim - 1);
    if (type_is(type, gemm_t)) {
        if (in->ndim < 1)
            return pf_fail(why, whylen, PF_EINPUT, "matmul without an input shape");
        p->kind = PF_CUDA_OP_GEMM;
        if (in->ndim == 3 && out->ndim == 4 && op->weight.ndim == 0) { /* scores */
            int64_t heads = out->dim[1];
            if (in->dim[2] % heads)
                return pf_fail(why, whylen, PF_EINPUT, "hidden %lld not divisible by %lld heads",
                               (long long)in->dim[2], (long long)heads);
            p->batch = out->dim[0] * heads;
            p->m = out->dim[2];
            p->n = out->dim[3];
            p->k = in->dim[2] / heads;
        } else if (in->ndim == 4 && out->ndim == 3 && op->weight.ndim == 0) { /* context */
            int64_t heads = in->dim[1];
            if (out->dim[2] % heads)
                return pf_fail(why, whylen, PF_EINPUT, "hidden %lld not divisible by %lld heads",
                               (long long)out->dim[2], (long long)heads);
            p->batch = in->dim[0] * heads;
            p->m = in->dim[2];
            p->k = in->dim[3];
            p->n = out->dim[2] / heads;
        } else if (in->ndim == out->ndim || op->weight.ndim > 0) {
            p->m = rows;
            p->n = last;
            p->k = in->dim[in->ndim - 1];
        } else {
            return pf_fail(why, whylen, PF_EINPUT, "matmul %d-d -> %d-d: no GEMM shape rule",
                           in->ndim, out->ndim);
        }
        return PF_OK;
    }
    if (type_is(type, rows_t)) {
        p->kind = has_word(type, "softmax") ? PF_CUDA_OP_SOFTMAX : PF_CUDA_OP_LAYERNORM;
        p->m = rows;
        p->n = last;
        return PF_OK;
    }
    if (type_is(type, bin_t) || type_is(type, un_t)) {
        p->kind = PF_CUDA_OP_ELEMENTWISE;
        p->m = rows * last;
        p->inputs = type_is(type, bin_t) ? 2 : 1;
        return PF_OK;
    }
    if (has_word(type, "attention")) {
        if (in->ndim != 3)
            return pf_fail(why, whylen, PF_EINPUT, "attention wants input [batch, seq, hidden]");
        int64_t h = in->dim[2], d = h % 128 == 0 ? 128 : h % 64 == 0 ? 64 : h;
        p->kind = PF_CUDA_OP_ATTENTION;
        p->m = in->dim[0] * (h / d);
        p->n = in->dim[1];
        p->k = d;
        p->causal = has_word(type, "causal") || has_word(op->name, "causal");
        return PF_OK;
    }
    return pf_fail(why, whylen, PF_EINPUT, "type '%.40s' has no probe", type);
}

void pf_calibrate_report_clear(pf_calibrate_report_t *r)
{
    free(r->skipped);
    memset(r, 0, sizeof *r);
}

typedef struct {
    pf_op_probe_t probe;
    double fwd_ms, bwd_ms;
} class_t;

int pf_calibrate_graph(const pf_graph_t *g, int dtype, pf_op_timer_fn timer, void *ctx,
                       pf_graph_t **out, pf_calibrate_report_t *rep, char *err, size_t errlen)
{
    class_t *cls = NULL;
    size_t ncls = 0, clscap = 0, skipcap = 0;
    pf_graph_t *ng = NULL;
    int rc = PF_OK, n = pf_graph_nops(g);
    *out = NULL;
    memset(rep, 0, sizeof *rep);
    if (!(ng = pf_graph_new(pf_graph_name(g), pf_graph_microbatch(g)))) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    for (int v = 0; v < n; v++) {
        pf_op_t op = *pf_graph_op(g, v);
        pf_op_probe_t pr;
        char why[96];
        if (pf_calibrate_probe(&op, dtype, &pr, why, sizeof why) != PF_OK) {
            if (pf_grow((void **)&rep->skipped, &skipcap, (size_t)rep->nskipped + 1,
                        sizeof *rep->skipped)) {
                rc = pf_fail(err, errlen, PF_ERR, "out of memory");
                goto fail;
            }
            rep->skipped[rep->nskipped].op = v;
            snprintf(rep->skipped[rep->nskipped++].why, sizeof why, "%s", why);
        } else {
            size_t c;
            for (c = 0; c < ncls; c++)
                if (!memcmp(&cls[c].probe, &pr, sizeof pr))
                    break;
            if (c == ncls) {
                if (pf_grow((void **)&cls, &clscap, ncls + 1, sizeof *cls)) {
                    rc = pf_fail(err, errlen, PF_ERR, "out of memory");
                    goto fail;
                }
                cls[ncls].probe = pr;
                if ((rc = timer(ctx, &pr, &cls[ncls].fwd_ms, &cls[ncls].bwd_ms, err, errlen))) {
                    char where[160];
                    snprintf(where, sizeof where, "timing ops[%d] (%.60s)", v,
                             op.name ? op.name : "?");
                    pf_err_prefix(err, errlen, where);
                    goto fail;
                }
                if (!pf_is_finite_nonneg(cls[ncls].fwd_ms) ||
                    !pf_is_finite_nonneg(cls[ncls].bwd_ms)) {
                    rc = pf_fail(err, errlen, PF_ERR, "timing ops[%d]: timer gave %g / %g ms", v,
                                 cls[ncls].fwd_ms, cls[ncls].bwd_ms);
                    goto fail;
                }
                ncls++;
            }
            op.fwd_ms = cls[c].fwd_ms;
            op.bwd_ms = cls[c].bwd_ms;
            rep->ntimed++;
        }
        if (pf_graph_add_op(ng, &op) < 0) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (pf_graph_add_edge(ng, ed->src, ed->dst, ed->bytes) < 0) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    if ((rc = pf_graph_finalize(ng, err, errlen)) != PF_OK)
        goto fail;
    rep->nclasses = (int)ncls;
    free(cls);
    *out = ng;
    return PF_OK;
fail:
    free(cls);
    pf_graph_destroy(&ng);
    pf_calibrate_report_clear(rep);
    return rc;
}
