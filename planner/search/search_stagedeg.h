/* search_stagedeg: --stage-degrees (issue 24): the plan whose stages choose their own
 * data-parallel degree, tried beside the best uniform one.
 *
 * The partition phase queues one more DP_PARTITION job (partition_stagedeg.h, on the T = 1
 * graph, the step's micro-batches in all) that is neither ranked nor mapped with the uniform
 * entries. When the uniform winner is known, its plan is mapped here (map_stages.h: stage
 * replicas of different sizes, fast devices for the heaviest stage) and simulated under 1F1B
 * as a SIMULATE job beside the winner's two baselines (baseline 3: always re-run on the trusted
 * side). The per-stage plan becomes the answer when it fits and trains faster per sample than
 * the uniform one; the plan records both figures either way (search.stage_degrees), so the
 * uniform plan stays one point of the space and can never get worse. */
#ifndef PF_SEARCH_STAGEDEG_H
#define PF_SEARCH_STAGEDEG_H

#include "planner/search/search_state.h"

/* The per-stage entry's plan, mapped and dressed (names, training, 1F1B); NULL when none was
 * asked for, its DP found none (*why says so when why is given) or out of memory. */
pf_plan_t *pf_search_stagedeg_plan(const pf_search_t *s, char *why, size_t whylen);
/* The entry of s->tap.tp the per-stage plan was partitioned for (T = 1). */
int pf_search_stagedeg_tp(const pf_search_t *s);
/* The answer between the uniform plan *p (its simulated_step_ms set) and the per-stage plan
 * (s->sim.base_plan[2], its simulation in base_ms[2] / base_fits[2]): *p is replaced when the
 * per-stage plan fits and is faster per sample; both figures go into the answer's stagedeg. */
void pf_search_stagedeg_choose(pf_search_t *s, pf_plan_t **p, const char *why);

#endif
