/* tp_setting: the graph and cluster one tensor-parallel degree T plans on (DESIGN.md "The
 * search", phases 1-3).
 *
 *   cluster  T devices of one host per group (tp_groups.h): the group cluster
 *   graph    the model per device and micro-batch: TAP's plan for T (tap.h: compute / T where a
 *            weight is split, plus its collectives on the slowest link inside a group; split
 *            weights and activations divided by T), then recomputation's view (training.h)
 *   reserve  what recomputation holds on every stage
 *
 * It is a pure function of the inputs, so a worker rebuilds exactly what the search built from
 * the graph, the cluster, T and the chosen TAP plan of every unit. */
#ifndef PF_TP_SETTING_H
#define PF_TP_SETTING_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/tp/tap.h"
#include "planner/tp/tp_groups.h"
#include "planner/ir/training.h"

#include <stdint.h>

typedef struct {
    int tp;                    /* T >= 1 */
    int across_hosts;          /* groups may span hosts */
    pf_tap_opts_t tap;
    const uint64_t *tap_plans; /* T > 1: the plan of every TAP unit; NULL: TAP in-process */
    int ntap_plans;
    pf_training_t train;
} pf_tp_setting_opts_t;

void pf_tp_setting_opts_init(pf_tp_setting_opts_t *o);

typedef struct pf_tp_setting pf_tp_setting_t;

/* g and c are borrowed and must outlive the setting. NULL and the reason: T does not divide the
 * hosts (PF_EINPUT), a TAP unit has no plan that fits, or the plans do not fit the units. */
pf_tp_setting_t *pf_tp_setting_new(const pf_graph_t *g, const pf_cluster_t *c,
                                   const pf_tp_setting_opts_t *o, char *err, size_t errlen);
void pf_tp_setting_destroy(pf_tp_setting_t **s);

int pf_tp_setting_degree(const pf_tp_setting_t *s);
const pf_graph_t *pf_tp_setting_graph(const pf_tp_setting_t *s);
const pf_cluster_t *pf_tp_setting_cluster(const pf_tp_setting_t *s);
const pf_tp_groups_t *pf_tp_setting_groups(const pf_tp_setting_t *s);
double pf_tp_setting_reserve_bytes(const pf_tp_setting_t *s);
/* The graph before recomputation's view (TAP's, with sequence parallelism's memory) and the
 * recomputation the setting's graph runs: a plan whose stages recompute differently views the
 * base once per level (planner/sim/stage_rc.h). */
const pf_graph_t *pf_tp_setting_base_graph(const pf_tp_setting_t *s);
pf_training_recompute_t pf_tp_setting_recompute(const pf_tp_setting_t *s);
/* TAP's result for T > 1 (per-op splits, collectives per unit); NULL for T = 1. */
const pf_tap_result_t *pf_tp_setting_tap(const pf_tp_setting_t *s);
/* The link TAP prices collectives on: the slowest inside any group. */
pf_sharding_link_t pf_tp_setting_link(const pf_tp_setting_t *s);

#endif
