#include "planner/ir/plan_rates.h"

#include <math.h>
#include <string.h>

static double graph_seq_len(const pf_graph_t *g)
{
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const pf_op_t *op = pf_graph_op(g, v);
        if (op->type && !strcmp(op->type, "embedding"))
            return op->input.ndim == 2 && op->input.dim[0] == pf_graph_microbatch(g) &&
                           op->input.dim[1] > 0
                       ? (double)op->input.dim[1]
                       : NAN;
    }
    return NAN;
}

/* The one peak FLOP/s every device of the cluster has; NaN when one is unknown or they
 * differ (MFU's denominator is GPUs x peak). */
static double shared_peak_flops(const pf_cluster_t *c)
{
    int D = pf_cluster_ndevices(c);
    double tf = D > 0 ? pf_cluster_device(c, 0)->tflops : 0;
    for (int d = 1; d < D && tf > 0; d++)
        if (pf_cluster_device(c, d)->tflops != tf)
            tf = 0;
    return tf > 0 ? tf * 1e12 : NAN;
}

pf_plan_rates_t pf_plan_rates(const pf_graph_t *g, const pf_cluster_t *c, double step_ms,
                              int microbatches, int replicas, int gpus)
{
    pf_plan_rates_t r = {NAN, NAN, NAN};
    double step_s = step_ms / 1e3, flops = 0;
    if (!(step_s > 0) || !isfinite(step_s) || microbatches < 1 || replicas < 1)
        return r;
    double per_step = (double)microbatches * replicas; /* micro-batches of the graph a step runs */
    r.samples_per_s = pf_graph_microbatch(g) * per_step / step_s;
    r.tokens_per_s = r.samples_per_s * graph_seq_len(g);
    for (int v = 0; v < pf_graph_nops(g); v++)
        flops += pf_graph_op(g, v)->work.fwd_flops + pf_graph_op(g, v)->work.bwd_flops;
    double peak = shared_peak_flops(c);
    if (flops > 0 && peak > 0 && gpus > 0)
        r.mfu = flops * per_step / (step_s * gpus * peak);
    return r;
}
