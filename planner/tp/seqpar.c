/* seqpar: sequence parallelism's memory and compute (seqpar.h). */
#include "planner/tp/seqpar.h"
#include "planner/core/util.h"

#include <stdlib.h>


/* Does unit u of TAP's result split anything? Only there does tensor parallelism run, and with it
 * sequence parallelism; a unit TAP left whole (too small, or heads T does not divide) runs
 * replicated on the T devices, as without either. split[u] for every unit. */
static unsigned char *units_split(const pf_tap_result_t *tap)
{
    unsigned char *split = calloc((size_t)tap->nunits + 1, 1);
    for (int v = 0; split && v < tap->nops; v++)
        if (tap->ops[v].split && tap->ops[v].unit >= 0 && tap->ops[v].unit < tap->nunits)
            split[tap->ops[v].unit] = 1;
    return split;
}

/* Is op v in the sequence-parallel region: in a unit TAP split? */
static int in_region(const pf_tap_result_t *tap, const unsigned char *split, int v)
{
    int u = tap->ops[v].unit;
    return u >= 0 && u < tap->nunits && split[u];
}

/* Does sequence parallelism split op v's compute: a non-GEMM op (layer norm, dropout, residual
 * add) TAP left whole, its weight whole too, in the sequence-parallel region? */
static int splits_compute(const pf_tap_result_t *tap, const unsigned char *split,
                          const pf_op_t *op, int v)
{
    const pf_tap_op_t *t = &tap->ops[v];
    return !t->split && t->weight.kind != PF_SHARDING_S && op->work.gemm_m <= 0 &&
           in_region(tap, split, v);
}

/* What a device computes of a replicated op when the group splits it along the sequence. */
static double split_ms(double ms, double comm_ms, int T)
{
    return comm_ms + (ms - comm_ms) / T;
}

pf_graph_t *pf_seqpar_graph(const pf_graph_t *orig, const pf_graph_t *dev,
                            const pf_tap_result_t *tap, int T, char *err, size_t errlen)
{
    int n = pf_graph_nops(dev), m = pf_graph_nedges(dev);
    if (n != pf_graph_nops(orig) || !tap || tap->nops != n || T < 1) {
        pf_fail(err, errlen, PF_EINPUT, "sequence parallelism: the per-device graph has %d ops, "
                "the graph %d, TAP's result %d (T %d)", n, pf_graph_nops(orig),
                tap ? tap->nops : -1, T);
        return NULL;
    }
    unsigned char *split = units_split(tap);
    pf_graph_t *out = split ? pf_graph_new_like(dev) : NULL;
    if (!out)
        goto oom;
    for (int v = 0; v < n; v++) {
        pf_op_t op = *pf_graph_op(dev, v);
        if (op.mem_fwd_bytes >= pf_graph_op(orig, v)->mem_fwd_bytes && in_region(tap, split, v))
            op.mem_fwd_bytes /= T;
        if (splits_compute(tap, split, pf_graph_op(orig, v), v)) {
            op.fwd_ms = split_ms(op.fwd_ms, op.comm_fwd_ms, T);
            op.bwd_ms = split_ms(op.bwd_ms, op.comm_bwd_ms, T);
        }
        if (pf_graph_add_op(out, &op) < 0)
            goto oom;
    }
    for (int e = 0; e < m; e++) {
        const pf_edge_t *ed = pf_graph_edge(dev, e);
        if (pf_graph_add_edge(out, ed->src, ed->dst, ed->bytes) < 0)
            goto oom;
    }
    if (pf_graph_finalize(out, err, errlen) != PF_OK)
        goto fail;
    free(split);
    return out;
oom:
    pf_fail(err, errlen, PF_ERR, "out of memory");
fail:
    free(split);
    pf_graph_destroy(&out);
    return NULL;
}
