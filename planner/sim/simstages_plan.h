/* simstages_plan: simstages.h's input from a graph, its cluster and a mapped plan whose stages
 * may differ (issue 24; plan.h's "data- and tensor-parallel degrees per stage"), priced by
 * simulate.c's own code so that a stage costs what it costs in a uniform plan. */
#ifndef PF_SIMSTAGES_PLAN_H
#define PF_SIMSTAGES_PLAN_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/ir/plan.h"
#include "planner/sim/simstages.h"

#include <stddef.h>

/* From a graph, its cluster and a mapped plan (every d_s and t_s, uniform or not): each
 * distinct t_s prices its stages through pf_simulate_input_from_setting on a clone of the plan
 * at d = 1, T = t_s, that degree's stages on their replica's devices and the stages between
 * them merged into fillers (a cut's bytes and a stage's ops do not change); on a cluster that
 * mixes device kinds once per replica. Schedule and micro-batches from the plan. PF_EINPUT
 * naming the problem (unmapped, interleaved or context-parallel plan, a bad schedule, a clone
 * the cluster has too few devices for); release with pf_simstages_input_clear. */
int pf_simstages_plan_input(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p,
                            pf_simstages_input_t *in, char *err, size_t errlen);
/* Input from the plan, `schedule` in place of the plan's, then one run. */
int pf_simstages_plan_simulate(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p,
                               pf_training_schedule_t schedule, int timeline,
                               pf_simulate_result_t **out, char *err, size_t errlen);

/* Result row `row` of plan p's simulation: its stage, replica and rank (-1 each outside). */
void pf_simstages_plan_row(const pf_plan_t *p, int row, int *stage, int *replica, int *rank);

/* Cuts with more replica pairs than this (lcm of the two degrees) are priced by the
 * scatter/gather rule alone: the resharding is solved once per pair. */
#define PF_SIMSTAGES_RESHARD_PAIRS 64

#endif
