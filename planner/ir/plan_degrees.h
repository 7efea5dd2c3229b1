/* plan_degrees: a plan's data- and tensor-parallel degrees stage by stage (DESIGN.md "Plan",
 * issue 24): stage_list[s].replicas / .tp where the stages differ, else the plan's replicas and
 * tensor_parallel for every stage. */
#ifndef PF_PLAN_DEGREES_H
#define PF_PLAN_DEGREES_H

#include "planner/ir/plan.h"

/* Its functions (pf_plan_degrees_*) are declared in plan.h beside pf_stage_t's fields they
 * read, as plan_recompute.h's are (plan.c reads and writes the keys through them). */

#endif
