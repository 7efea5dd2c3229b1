/* stage_rc: the graph each stage of a plan runs when its stages recompute differently
 * (DESIGN.md "Plan", stage_list[s].recompute; the block search's `--recompute auto` picks the
 * lightest level that fits each stage, blockcost.h: the first stages hold more micro-batches in
 * flight). A tensor-parallel setting views its graph under one recomputation (tp_setting.h);
 * here its base graph (before that view) is viewed once more per other level a stage uses
 * (training.h's pf_training_view), and each stage reads its ops' times and stored bytes from
 * its own level's graph: the simulator's stage costs (simulate.c), the search's memory check
 * (job.c) and the fit below. A plan whose stages agree uses the setting's graph alone. */
#ifndef PF_STAGE_RC_H
#define PF_STAGE_RC_H

#include "planner/ir/cost.h"
#include "planner/ir/plan.h"
#include "planner/tp/tp_setting.h"

#include <stddef.h>

typedef struct {
    const pf_graph_t *top;     /* the setting's graph (or the model's without a setting) */
    pf_training_recompute_t top_level;
    const pf_graph_t *g[3];    /* by level; NULL: top */
    pf_graph_t *own[3];
    double reserve_bytes[3];   /* full recomputation's transient (training.h), by level */
} pf_stage_rc_t;

/* The levels plan p's stages use (every level up to the setting's with all != 0), viewed from
 * set's base graph (g when set is NULL: the model as it is, recomputing nothing). PF_OK, or
 * PF_ERR out of memory (x cleared). */
int pf_stage_rc_init(pf_stage_rc_t *x, const pf_graph_t *g, const pf_tp_setting_t *set,
                     const pf_plan_t *p, int all, char *err, size_t errlen);
void pf_stage_rc_clear(pf_stage_rc_t *x);
/* Stage s's graph and its reserve. */
const pf_graph_t *pf_stage_rc_graph(const pf_stage_rc_t *x, const pf_plan_t *p, int s);
double pf_stage_rc_reserve_bytes(const pf_stage_rc_t *x, const pf_plan_t *p, int s);

/* A mixed plan's stages made to fit: each stage whose memory under the cost model (cost.h:
 * parameter state + micro-batches in flight x stored activations + reserve, cm's training and
 * schedule) exceeds (1 - headroom) x its smallest device (the cluster's smallest when not
 * mapped) moves to the next heavier level, up to the setting's; the stage's memory parts,
 * compute and time are refilled from its level's graph. Nothing to do when the stages agree.
 * PF_OK, or PF_ERR out of memory. */
int pf_stage_rc_fit(pf_stage_rc_t *x, pf_plan_t *p, const pf_cluster_t *c,
                    const pf_cost_model_t *cm, double headroom);

#endif
