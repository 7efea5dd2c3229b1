/* plan_recompute: a plan's recomputation stage by stage (DESIGN.md "Plan", "Recomputation per
 * stage"): stage_list[s].recompute where the stages differ (`--recompute auto`), else the plan's
 * train.recompute for every stage. */
#ifndef PF_PLAN_RECOMPUTE_H
#define PF_PLAN_RECOMPUTE_H

#include "planner/ir/plan.h"

/* Its functions (pf_plan_recompute_*) are declared in plan.h, beside pf_stage_t's fields they
 * read: plan.c writes and reads the keys through them, and including this header there would
 * make an include circle (scripts/check-cycles.sh). */

#endif
