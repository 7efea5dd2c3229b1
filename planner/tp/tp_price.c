#include "planner/tp/tp_price.h"

static int64_t part(int64_t n, int T)
{
    return (n + T - 1) / T;
}

const pf_devmodel_t *pf_tp_price_model(const pf_graph_t *g)
{
    return pf_graph_device(g);
}

pf_op_work_t pf_tp_price_split_work(const pf_op_work_t *w, pf_tp_split_t how, int T)
{
    pf_op_work_t p = *w;
    p.fwd_flops /= T, p.bwd_flops /= T, p.bytes_read /= T, p.bytes_written /= T;
    if (w->gemm_m <= 0)
        return p;
    if (how == PF_TP_SPLIT_K)
        p.gemm_k = part(w->gemm_k, T);
    else if (how == PF_TP_SPLIT_N)
        p.gemm_n = part(w->gemm_n, T);
    else if (w->gemm_batch >= T) /* heads */
        p.gemm_batch = part(w->gemm_batch, T);
    else
        p.gemm_m = part(w->gemm_m, T);
    return p;
}

void pf_tp_price_split(const pf_devmodel_t *dm, const pf_op_t *op, pf_tp_split_t how, int T,
                       double *fwd_ms, double *bwd_ms)
{
    *fwd_ms = op->fwd_ms / T;
    *bwd_ms = op->bwd_ms / T;
    double f1, b1, f0 = 0, b0 = 0;
    if (!dm || T <= 1 || !pf_devmodel_op_ms(dm, PF_PREC_BF16, &op->work, &f0, &b0))
        return;
    pf_op_work_t p = pf_tp_price_split_work(&op->work, how, T);
    pf_devmodel_op_ms(dm, PF_PREC_BF16, &p, &f1, &b1);
    if (f0 > 0)
        *fwd_ms = op->fwd_ms * f1 / f0;
    if (b0 > 0)
        *bwd_ms = op->bwd_ms * b1 / b0;
}
