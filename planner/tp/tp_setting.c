#include "planner/tp/tp_setting.h"
#include "planner/tp/seqpar.h"
#include "planner/core/util.h"

#include <stdlib.h>
#include <string.h>

struct pf_tp_setting {
    int T;
    pf_tp_groups_t *groups;
    pf_tap_units_t *units;
    pf_tap_result_t tap;
    int has_tap;
    pf_graph_t *tp_graph;   /* TAP's per-device graph (T > 1) */
    pf_graph_t *sp_graph;   /* that with sequence parallelism (seqpar.h: memory and compute), when on */
    pf_graph_t *view;       /* after recomputation; NULL when that changes nothing */
    const pf_graph_t *base; /* before it (per-stage recomputation views it: stage_rc.h) */
    pf_training_recompute_t recompute;
    const pf_graph_t *graph;
    double reserve_bytes;
    pf_sharding_link_t link;
};

void pf_tp_setting_opts_init(pf_tp_setting_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->tp = 1;
    pf_tap_opts_init(&o->tap);
    pf_training_init(&o->train);
}

pf_tp_setting_t *pf_tp_setting_new(const pf_graph_t *g, const pf_cluster_t *c,
                                   const pf_tp_setting_opts_t *o, char *err, size_t errlen)
{
    pf_tp_setting_t *s = calloc(1, sizeof *s);
    if (!s) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    s->T = o->tp;
    if (!(s->groups = pf_tp_groups_new(c, o->tp, o->across_hosts, err, errlen)))
        goto fail;
    s->link = pf_sharding_link_of(c, pf_tp_groups_members(s->groups, 0), o->tp,
                                  pf_tp_groups_link_gbps(s->groups),
                                  pf_tp_groups_link_lat_us(s->groups));
    const pf_graph_t *cur = g;
    if (o->tp > 1) {
        pf_tap_opts_t to = o->tap;
        to.param_state_factor = pf_training_state_factor(&o->train, 1);
        if (o->tap_plans) {
            if (!(s->units = pf_tap_units_new(g, &to, err, errlen)))
                goto fail;
            if (o->ntap_plans != pf_tap_units_count(s->units)) {
                pf_fail(err, errlen, PF_EINPUT, "%d TAP plans for the %d units of graph %s",
                        o->ntap_plans, pf_tap_units_count(s->units), pf_graph_name(g));
                goto fail;
            }
            if (pf_tap_apply(g, s->units, o->tp, &s->link, &to, o->tap_plans, &s->tap, err,
                             errlen) != PF_OK)
                goto fail;
        } else if (pf_tap_plan(g, o->tp, &s->link, &to, &s->tap, err, errlen) != PF_OK) {
            goto fail;
        }
        s->has_tap = 1;
        if (pf_tap_graph(g, &s->tap, &s->tp_graph, err, errlen) != PF_OK)
            goto fail;
        cur = s->tp_graph;
        if (o->train.sequence_parallel) {
            if (!(s->sp_graph = pf_seqpar_graph(g, cur, &s->tap, o->tp, err, errlen)))
                goto fail;
            cur = s->sp_graph;
        }
    }
    s->base = cur;
    s->recompute = o->train.recompute;
    if (o->train.recompute != PF_RECOMPUTE_NONE) {
        if (!(s->view = pf_training_view(cur, &o->train, &s->reserve_bytes, err, errlen)))
            goto fail;
        cur = s->view;
    }
    s->graph = cur;
    return s;
fail:
    pf_tp_setting_destroy(&s);
    return NULL;
}

void pf_tp_setting_destroy(pf_tp_setting_t **sp)
{
    pf_tp_setting_t *s = sp ? *sp : NULL;
    if (!s)
        return;
    pf_tp_groups_destroy(&s->groups);
    pf_tap_units_destroy(&s->units);
    if (s->has_tap)
        pf_tap_result_free(&s->tap);
    pf_graph_destroy(&s->tp_graph);
    pf_graph_destroy(&s->sp_graph);
    pf_graph_destroy(&s->view);
    free(s);
    *sp = NULL;
}

int pf_tp_setting_degree(const pf_tp_setting_t *s) { return s->T; }
const pf_graph_t *pf_tp_setting_graph(const pf_tp_setting_t *s) { return s->graph; }
const pf_cluster_t *pf_tp_setting_cluster(const pf_tp_setting_t *s)
{
    return pf_tp_groups_cluster(s->groups);
}
const pf_tp_groups_t *pf_tp_setting_groups(const pf_tp_setting_t *s) { return s->groups; }
double pf_tp_setting_reserve_bytes(const pf_tp_setting_t *s) { return s->reserve_bytes; }
const pf_graph_t *pf_tp_setting_base_graph(const pf_tp_setting_t *s) { return s->base; }
pf_training_recompute_t pf_tp_setting_recompute(const pf_tp_setting_t *s) { return s->recompute; }
const pf_tap_result_t *pf_tp_setting_tap(const pf_tp_setting_t *s)
{
    return s->has_tap ? &s->tap : NULL;
}
pf_sharding_link_t pf_tp_setting_link(const pf_tp_setting_t *s) { return s->link; }
