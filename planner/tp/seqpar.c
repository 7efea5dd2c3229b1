/* seqpar: sequence parallelism's memory and compute (seqpar.h). */
#include "planner/tp/seqpar.h"
#include "planner/core/util.h"


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
    pf_graph_t *out = pf_graph_new_like(dev);
    if (!out)
        goto oom;
    for (int v = 0; v < n; v++) {
        pf_op_t op = *pf_graph_op(dev, v);
        if (op.mem_fwd_bytes >= pf_graph_op(orig, v)->mem_fwd_bytes)
            op.mem_fwd_bytes /= T;
        if (!tap->ops[v].split) {
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
    return out;
oom:
    pf_fail(err, errlen, PF_ERR, "out of memory");
fail:
    pf_graph_destroy(&out);
    return NULL;
}
