/* search_stagedeg: --stage-degrees (issue 24): the plan whose stages choose their own
 * data-parallel degree, tried beside the best uniform one.
 *
 * The partition phase queues one more DP_PARTITION job (partition_stagedeg.h, on the T = 1
 * graph, the step's micro-batches in all), and on a cluster of several hosts a second one that
 * plans one host's share and replicates it over the hosts ([PipeDream]'s hierarchy: the flat
 * DP cannot see that links inside a host are faster); neither is ranked nor mapped with the
 * uniform entries. When the uniform winner is known, its plan is mapped here (map_stages.h: stage
 * replicas of different sizes, fast devices for the heaviest stage) and simulated under 1F1B
 * as a SIMULATE job beside the winner's two baselines (baseline 3: always re-run on the trusted
 * side). The per-stage plan becomes the answer when it fits and trains faster per sample than
 * the uniform one; the plan records both figures either way (search.stage_degrees), so the
 * uniform plan stays one point of the space and can never get worse. */
#ifndef PF_SEARCH_STAGEDEG_H
#define PF_SEARCH_STAGEDEG_H

#include "planner/search/search_state.h"

/* The k-th per-stage entry's plan (0 flat, 1 per host), mapped and dressed (names, training,
 * 1F1B); NULL when there is no such entry, its DP found none (*why says so, unless it already
 * holds a reason) or out of memory. */
pf_plan_t *pf_search_stagedeg_plan(const pf_search_t *s, int k, char *why, size_t whylen);
/* No uniform partition fits but a per-stage DP made a plan: the per-stage plans alone are
 * mapped and their SIMULATE jobs queued (s->sim.stagedeg_alone; pf_search_sim_finish then
 * takes the fastest that fits, or fails saying none does). false when there is none to try (the
 * caller reports the uniform failure) or when queueing failed (the search failed). */
bool pf_search_stagedeg_alone(pf_search_t *s);
/* When the per-stage plans queued by pf_search_stagedeg_alone are simulated. */
void pf_search_stagedeg_finish_alone(pf_search_t *s);
/* The entry of s->tap.tp the per-stage plan was partitioned for (T = 1). */
int pf_search_stagedeg_tp(const pf_search_t *s);
/* The answer between the uniform plan *p (its simulated_step_ms set) and the best per-stage
 * plan (s->sim.base_plan[2..], their simulations in base_ms / base_fits): *p is replaced when
 * that plan fits and is faster per sample; both figures go into the answer's stagedeg. */
void pf_search_stagedeg_choose(pf_search_t *s, pf_plan_t **p, const char *why);

#endif
