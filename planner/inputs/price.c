#include "planner/inputs/price.h"
#include "planner/core/util.h"

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
