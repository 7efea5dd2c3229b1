#include "planner/sim/stage_kinds.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>

int pf_stage_kinds_times(const pf_graph_t *dg, const pf_tap_result_t *tap, const pf_stage_t *ps,
                         int R, int T, const pf_devkinds_t *dk, double *rep_fwd_ms,
                         double *rep_bwd_ms)
{
    int K = pf_devkinds_count(dk);
    double *kf = calloc((size_t)K * 2, sizeof *kf); /* per kind: forward, then backward */
    if (!kf)
        return PF_ERR;
    double *kb = kf + K;
    for (int i = 0; i < ps->nops; i++) {
        int v = ps->ops[i];
        const pf_op_t *op = pf_graph_op(dg, v);
        double cf = tap ? tap->ops[v].fwd_comm_ms : 0, cb = tap ? tap->ops[v].bwd_comm_ms : 0;
        for (int k = 0; k < K; k++) {
            kf[k] += fmax(0, op->fwd_ms - cf) * pf_devkinds_fwd_ratio(dk, v, k);
            kb[k] += fmax(0, op->bwd_ms - cb) * pf_devkinds_bwd_ratio(dk, v, k);
        }
    }
    for (int r = 0; r < R; r++) {
        rep_fwd_ms[r] = rep_bwd_ms[r] = 0;
        for (int t = 0; t < T; t++) {
            int k = pf_devkinds_of(dk, ps->devices[r * T + t]);
            rep_fwd_ms[r] = fmax(rep_fwd_ms[r], kf[k]);
            rep_bwd_ms[r] = fmax(rep_bwd_ms[r], kb[k]);
        }
    }
    free(kf);
    return PF_OK;
}
