#include "planner/ir/cost.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>

void pf_cost_model_init(pf_cost_model_t *cm, const pf_cluster_t *c, int stages, int microbatches,
                        double flat_gbps)
{
    cm->flat_gbps = flat_gbps > 0 ? flat_gbps : pf_cluster_bw_median(c);
    if (!(cm->flat_gbps > 0)) /* one device: nothing crosses a network, any value works */
        cm->flat_gbps = 1.0;
    cm->microbatches = microbatches > 0 ? microbatches : PF_DEFAULT_MICROBATCHES;
    cm->stages = stages > 0 ? stages : 1;
    cm->mem_limit_bytes = pf_cluster_min_mem_bytes(c);
    cm->stage_mult = NULL;
    pf_training_t t;
    pf_training_init(&t);
    pf_cost_model_set_training(cm, &t, 1, 0);
}

void pf_cost_model_set_training(pf_cost_model_t *cm, const pf_training_t *t, int replicas,
                                double reserve_bytes)
{
    cm->train = *t;
    cm->replicas = replicas > 0 ? replicas : 1;
    cm->state_factor = pf_training_state_factor(t, replicas);
    cm->reserve_bytes = reserve_bytes;
}

int pf_cost_inflight(const pf_cost_model_t *cm, int s)
{
    return pf_training_inflight(&cm->train, cm->stages, cm->microbatches, s);
}

double pf_cost_mem_bytes(const pf_cost_model_t *cm, int s, double param_bytes, double act_bytes)
{
    return cm->state_factor * param_bytes + pf_cost_inflight(cm, s) * act_bytes +
           cm->reserve_bytes;
}

double pf_cost_stage_time_ms(const pf_graph_t *g, const int *op_stage, int s,
                             const pf_cost_model_t *cm)
{
    double t = 0, cut_bytes = 0;
    int n = pf_graph_nops(g), m = pf_graph_nedges(g);
    for (int v = 0; v < n; v++)
        if (op_stage[v] == s)
            t += pf_graph_cu_ms(g, v);
    if (cm->stage_mult)
        t *= cm->stage_mult[s];
    for (int e = 0; e < m; e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if ((op_stage[ed->src] == s) != (op_stage[ed->dst] == s))
            cut_bytes += ed->bytes;
    }
    return t + pf_bytes_ms(cut_bytes, cm->flat_gbps); /* eq. 3 */
}

double pf_cost_stage_mem_bytes(const pf_graph_t *g, const int *op_stage, int s,
                               const pf_cost_model_t *cm)
{
    double params = 0, act = 0;
    int n = pf_graph_nops(g);
    for (int v = 0; v < n; v++) {
        if (op_stage[v] != s)
            continue;
        const pf_op_t *o = pf_graph_op(g, v);
        params += o->param_bytes;
        act += o->mem_fwd_bytes;
    }
    return pf_cost_mem_bytes(cm, s, params, act);
}

double pf_cost_op_mem_bytes(const pf_graph_t *g, int v, const pf_cost_model_t *cm)
{
    const pf_op_t *o = pf_graph_op(g, v);
    return cm->state_factor * o->param_bytes + o->mem_fwd_bytes + cm->reserve_bytes;
}

int pf_cost_fill_plan(pf_plan_t *p, const pf_graph_t *g, const pf_cost_model_t *cm)
{
    int *op_stage = pf_plan_op_stage(p, pf_graph_nops(g));
    if (!op_stage)
        return PF_ERR;
    double worst = 0;
    for (int s = 0; s < p->stages; s++) {
        pf_stage_t *st = &p->stage_list[s];
        st->compute_ms = 0;
        for (int i = 0; i < st->nops; i++)
            st->compute_ms += pf_graph_cu_ms(g, st->ops[i]);
        st->time_ms = pf_cost_stage_time_ms(g, op_stage, s, cm);
        st->peak_mem_bytes = pf_cost_stage_mem_bytes(g, op_stage, s, cm);
        double params = 0, act = 0;
        for (int i = 0; i < st->nops; i++) {
            params += pf_graph_op(g, st->ops[i])->param_bytes;
            act += pf_graph_op(g, st->ops[i])->mem_fwd_bytes;
        }
        pf_training_state_split_t sp;
        pf_training_state_split(&cm->train, cm->replicas, &sp);
        st->mem_weights_bytes = sp.weights * params;
        st->mem_grads_bytes = sp.grads * params;
        st->mem_optimizer_bytes = (sp.master + sp.moments) * params;
        st->inflight = pf_cost_inflight(cm, s);
        st->mem_activations_bytes = st->inflight * act;
        st->mem_reserve_bytes = cm->reserve_bytes;
        if (st->time_ms > worst)
            worst = st->time_ms;
    }
    p->partition_objective_ms = worst;
    free(op_stage);
    return PF_OK;
}

int pf_cost_check_ops_fit(const pf_graph_t *g, const pf_cost_model_t *cm, char *err,
                          size_t errlen)
{
    for (int v = 0; v < pf_graph_nops(g); v++) {
        double need = pf_cost_op_mem_bytes(g, v, cm);
        if (need > cm->mem_limit_bytes) {
            const pf_op_t *op = pf_graph_op(g, v);
            char a[32], b[32];
            pf_fmt_bytes(a, sizeof a, need);
            pf_fmt_bytes(b, sizeof b, cm->mem_limit_bytes);
            return pf_fail(err, errlen, PF_EINFEASIBLE,
                           "op %lld (%s) needs %s with its parameter state; devices have %s",
                           (long long)op->id, op->name, a, b);
        }
    }
    return PF_OK;
}
