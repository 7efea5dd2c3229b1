/* stage_kinds: a stage's compute per replica on a cluster that mixes device kinds (devkinds.h;
 * DESIGN.md "Cost definitions", mixed clusters), for the simulator's input. */
#ifndef PF_STAGE_KINDS_H
#define PF_STAGE_KINDS_H

#include "planner/ir/devkinds.h"
#include "planner/ir/plan.h"
#include "planner/tp/tap.h"

/* rep_fwd_ms / rep_bwd_ms (R entries each, the caller's): replica r of stage ps (its devices
 * r T .. r T + T - 1) runs each op v at its time in dg less TAP's collectives (tap may be
 * NULL) times v's ratio on the kind of the device, and a replica is as slow as the slowest
 * kind among its T devices (a tensor-parallel group waits for its slowest rank). PF_OK or
 * PF_ERR (out of memory). */
int pf_stage_kinds_times(const pf_graph_t *dg, const pf_tap_result_t *tap, const pf_stage_t *ps,
                         int R, int T, const pf_devkinds_t *dk, double *rep_fwd_ms,
                         double *rep_bwd_ms);

#endif
