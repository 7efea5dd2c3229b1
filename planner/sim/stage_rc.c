/* stage_rc: one graph per recomputation level a plan's stages use (stage_rc.h). */
#include "planner/sim/stage_rc.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void pf_stage_rc_clear(pf_stage_rc_t *x)
{
    for (int r = 0; r < 3; r++)
        pf_graph_destroy(&x->own[r]);
    memset(x, 0, sizeof *x);
}

/* Level r's graph from base (the setting's own level is set already). */
static int view_level(pf_stage_rc_t *x, const pf_graph_t *base, int r, char *err,
                      size_t errlen)
{
    if (x->g[r])
        return PF_OK;
    if (r == PF_RECOMPUTE_NONE) { /* the view of none is the base itself */
        x->g[r] = base;
        return PF_OK;
    }
    pf_training_t t;
    pf_training_init(&t);
    t.recompute = (pf_training_recompute_t)r;
    if (!(x->own[r] = pf_training_view(base, &t, &x->reserve_bytes[r], err, errlen)))
        return PF_ERR;
    x->g[r] = x->own[r];
    return PF_OK;
}

int pf_stage_rc_init(pf_stage_rc_t *x, const pf_graph_t *g, const pf_tp_setting_t *set,
                     const pf_plan_t *p, int all, char *err, size_t errlen)
{
    memset(x, 0, sizeof *x);
    x->top = set ? pf_tp_setting_graph(set) : g;
    x->top_level = set ? pf_tp_setting_recompute(set) : PF_RECOMPUTE_NONE;
    x->g[x->top_level] = x->top;
    x->reserve_bytes[x->top_level] = set ? pf_tp_setting_reserve_bytes(set) : 0;
    if (!pf_plan_recompute_mixed(p))
        return PF_OK;
    const pf_graph_t *base = set ? pf_tp_setting_base_graph(set) : g;
    for (int s = 0; s < p->stages; s++)
        if (view_level(x, base, pf_plan_recompute_stage(p, s), err, errlen) != PF_OK)
            goto fail;
    for (int r = 0; all && r <= (int)x->top_level; r++)
        if (view_level(x, base, r, err, errlen) != PF_OK)
            goto fail;
    return PF_OK;
fail:
    pf_stage_rc_clear(x);
    return PF_ERR;
}

const pf_graph_t *pf_stage_rc_graph(const pf_stage_rc_t *x, const pf_plan_t *p, int s)
{
    const pf_graph_t *g = x->g[pf_plan_recompute_stage(p, s)];
    return g ? g : x->top;
}

double pf_stage_rc_reserve_bytes(const pf_stage_rc_t *x, const pf_plan_t *p, int s)
{
    int r = pf_plan_recompute_stage(p, s);
    return x->g[r] ? x->reserve_bytes[r] : x->reserve_bytes[x->top_level];
}


static double stage_limit_bytes(const pf_plan_t *p, const pf_cluster_t *c, int s)
{
    const pf_stage_t *st = &p->stage_list[s];
    int n = p->replicas * p->tensor_parallel;
    double limit = INFINITY;
    for (int i = 0; st->devices && i < n; i++)
        if (st->devices[i] >= 0)
            limit = fmin(limit, pf_cluster_device(c, st->devices[i])->mem_bytes);
    return isinf(limit) ? pf_cluster_min_mem_bytes(c) : limit;
}

/* Stage s's numbers from its level's graph (as pf_cost_fill_plan fills them). */
static void refill_stage(pf_plan_t *p, const pf_graph_t *g, const int *op_stage, int s,
                         const pf_cost_model_t *cm)
{
    pf_stage_t *st = &p->stage_list[s];
    double act = 0;
    st->compute_ms = 0;
    for (int i = 0; i < st->nops; i++) {
        st->compute_ms += pf_graph_cu_ms(g, st->ops[i]);
        act += pf_graph_op(g, st->ops[i])->mem_fwd_bytes;
    }
    st->time_ms = pf_cost_stage_time_ms(g, op_stage, s, cm);
    st->peak_mem_bytes = pf_cost_stage_mem_bytes(g, op_stage, s, cm);
    st->inflight = pf_cost_inflight(cm, s);
    st->mem_activations_bytes = st->inflight * act;
    st->mem_reserve_bytes = cm->reserve_bytes;
}

int pf_stage_rc_fit(pf_stage_rc_t *x, pf_plan_t *p, const pf_cluster_t *c,
                    const pf_cost_model_t *cm, double headroom)
{
    if (!pf_plan_recompute_mixed(p))
        return PF_OK;
    int *op_stage = pf_plan_op_stage(p, pf_graph_nops(x->top));
    if (!op_stage)
        return PF_ERR;
    pf_cost_model_t m = *cm;
    for (int s = 0; s < p->stages; s++) {
        pf_stage_t *st = &p->stage_list[s];
        double limit = (1 - headroom) * stage_limit_bytes(p, c, s);
        int r = pf_plan_recompute_stage(p, s);
        for (; r <= (int)x->top_level; r++) {
            st->has_recompute = 1;
            st->recompute = (pf_training_recompute_t)r;
            m.reserve_bytes = pf_stage_rc_reserve_bytes(x, p, s);
            if (pf_cost_stage_mem_bytes(pf_stage_rc_graph(x, p, s), op_stage, s, &m) <= limit)
                break;
        }
        if (r > (int)x->top_level) /* none fits: the heaviest, as every stage had before */
            st->recompute = x->top_level;
        m.reserve_bytes = pf_stage_rc_reserve_bytes(x, p, s);
        refill_stage(p, pf_stage_rc_graph(x, p, s), op_stage, s, &m);
    }
    p->partition_objective_ms = 0;
    for (int s = 0; s < p->stages; s++)
        p->partition_objective_ms = fmax(p->partition_objective_ms, p->stage_list[s].time_ms);
    free(op_stage);
    return PF_OK;
}
