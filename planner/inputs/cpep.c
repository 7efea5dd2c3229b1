/* cpep: context and expert parallelism seen from a graph (cpep.h). */
#include "planner/inputs/cpep.h"
#include "planner/core/util.h"
#include "planner/inputs/model.h"
#include "planner/inputs/price.h"
#include "planner/ir/training.h"

#include <string.h>

static int ends_with(const char *s, const char *suffix)
{
    size_t n = s ? strlen(s) : 0, k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* The bytes an op's output carries: its largest out-edge (k and v feed one op each). */
static double out_bytes(const pf_graph_t *g, int v)
{
    int n;
    const int *out = pf_graph_out(g, v, &n);
    double most = 0;
    for (int i = 0; i < n; i++) {
        double b = pf_graph_edge(g, out[i])->bytes;
        most = b > most ? b : most;
    }
    return most;
}

static int is_core(const char *name)
{
    return ends_with(name, ".attn.scores") || ends_with(name, ".attn.softmax") ||
           ends_with(name, ".attn.dropout") || ends_with(name, ".attn.context");
}

static void one_op(const pf_graph_t *g, int v, pf_cpep_facts_t *f, int *downs)
{
    const pf_op_t *op = pf_graph_op(g, v);
    if (ends_with(op->name, ".attn.scores")) {
        f->attn_layers++;
        if (op->work.gemm_m > f->seq)
            f->seq = op->work.gemm_m;
    }
    if (is_core(op->name))
        f->core_fwd_ms += op->fwd_ms, f->core_bwd_ms += op->bwd_ms;
    if (ends_with(op->name, ".attn.k") || ends_with(op->name, ".attn.v"))
        f->kv_bytes += out_bytes(g, v);
    if (op->type && !strcmp(op->type, "moe_dispatch")) {
        f->moe_layers++;
        f->a2a_bytes += op->work.bytes_written;
    }
    if (pf_model_op_expert(op)) {
        f->expert_param_bytes += op->param_bytes;
        *downs += ends_with(op->name, ".down");
    }
}

void pf_cpep_facts(const pf_graph_t *g, const int *ops, int nops, pf_cpep_facts_t *f)
{
    memset(f, 0, sizeof *f);
    int n = ops ? nops : pf_graph_nops(g), downs = 0;
    for (int i = 0; i < n; i++)
        one_op(g, ops ? ops[i] : i, f, &downs);
    f->experts = f->moe_layers > 0 ? downs / f->moe_layers : 0;
}

int pf_cpep_cp_ok(int64_t seq, int C)
{
    return C == 1 || (C > 1 && seq > 0 && seq % (2 * (int64_t)C) == 0);
}

int pf_cpep_ep_ok(const pf_cpep_facts_t *f, int E)
{
    return E == 1 || (E > 1 && f->experts > 0 && f->experts % E == 0);
}

double pf_cpep_ring_fwd_bytes(double kv_local, int C)
{
    return C > 1 ? (C - 1) * kv_local : 0;
}

/* Ring attention is blockwise ([RingAttn]): no device holds its s/C x s probabilities, so the
 * softmax (and a dropout after it) stores nothing and the backward recomputes the scores and
 * the softmax of each block, as flash attention does. */
static void blockwise(const pf_graph_t *g, int v, pf_op_t *op)
{
    if (pf_training_selective_op(g, v) && strcmp(op->type, "attention") != 0) {
        op->mem_fwd_bytes = 0;
        op->bwd_ms += op->fwd_ms;
    } else if (ends_with(op->name, ".attn.scores")) {
        op->bwd_ms += op->fwd_ms;
    }
}

/* g read as holding microbatch x C sub-sequences, its expert linears' parameters / E, its
 * attention blockwise (C > 1). */
static int relabel(const pf_graph_t *g, int C, int E, pf_graph_t **out, char *err, size_t errlen)
{
    pf_graph_t *h = pf_graph_new(pf_graph_name(g), pf_graph_microbatch(g) * C);
    int rc = PF_ERR;
    if (!h || pf_graph_copy_device(h, g) != PF_OK)
        goto fail;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        pf_op_t op = *pf_graph_op(g, v);
        if (pf_model_op_expert(&op))
            op.param_bytes /= E;
        if (C > 1)
            blockwise(g, v, &op);
        if (pf_graph_add_op(h, &op) < 0)
            goto fail;
    }
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (pf_graph_add_edge(h, ed->src, ed->dst, ed->bytes) < 0)
            goto fail;
    }
    if ((rc = pf_graph_finalize(h, err, errlen)) != PF_OK)
        goto fail_quiet;
    *out = h;
    return PF_OK;
fail:
    pf_fail(err, errlen, PF_ERR, "out of memory");
fail_quiet:
    pf_graph_destroy(&h);
    return rc;
}

int pf_cpep_graph(const pf_graph_t *g, int B, int C, int E, pf_graph_t **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    if (B < 1 || C < 1 || E < 1)
        return pf_fail(err, errlen, PF_EINPUT, "context/expert parallel graph: micro-batch %d, "
                       "C %d and E %d must be >= 1", B, C, E);
    if (C == 1 && E == 1)
        return pf_price_microbatch(g, B, out, err, errlen);
    pf_graph_t *h = NULL;
    int rc = relabel(g, C, E, &h, err, errlen);
    if (rc == PF_OK)
        rc = pf_price_microbatch(h, B, out, err, errlen);
    pf_graph_destroy(&h);
    return rc;
}
