/* search_sim: phase 4 of the search, RESHARD and SIMULATE jobs, and the plan (search_sim.c). */
#ifndef PF_SEARCH_SIM_H
#define PF_SEARCH_SIM_H

#include "planner/search/search_state.h"

#include <stdbool.h>

/* Every binary search is over: each candidate becomes a plan and its jobs are queued; true when
 * there is nothing to wait for. */
bool pf_search_sim_start(pf_search_t *s);
/* Every simulation is in: the plan, or the search fails when no candidate fits. */
void pf_search_sim_finish(pf_search_t *s);
void pf_search_sim_describe(const pf_search_t *s, const pf_search_owner_t *owner, pf_job_t *job);
/* true when the answer was the last simulation and no candidate still times its transfers. */
bool pf_search_sim_absorb(pf_search_t *s, uint64_t id, const pf_search_owner_t *owner,
                          const pf_job_result_t *res);
/* A SIMULATE answer that could make the plan (it fits and no done pair beats it) is run again
 * here and must agree (1e-6 relative); PF_OK, or PF_EINPUT and both numbers. */
int pf_search_sim_verify(const pf_search_t *s, const pf_search_owner_t *owner, const pf_job_t *job,
                         const pf_job_result_t *res, char *err, size_t errlen);
/* The two halves of it (search_state.h, rerun and agree): whether the answer is to be re-run,
 * and whether a re-run agrees. */
bool pf_search_sim_rerun(const pf_search_t *s, const pf_search_owner_t *owner,
                         const pf_job_result_t *res);
int pf_search_sim_agree(const pf_job_result_t *res, const pf_job_result_t *own, char *err,
                        size_t errlen);
void pf_search_sim_describe_reshard(const pf_search_t *s, const pf_search_owner_t *owner,
                                    pf_job_t *job);
/* Every RESHARD answer solved again here; PF_EINPUT when it differs (search_state.h verify). */
int pf_search_sim_verify_reshard(const pf_search_t *s, const pf_search_owner_t *owner,
                                 const pf_job_t *job, const pf_job_result_t *res, char *err,
                                 size_t errlen);
/* Never ends the phase: a candidate's last transfer queues its SIMULATE jobs. false. */
bool pf_search_sim_absorb_reshard(pf_search_t *s, uint64_t id, const pf_search_owner_t *owner,
                                  const pf_job_result_t *res);
void pf_search_sim_clear(pf_search_t *s);

/* The kinds of jobs this phase issues (search_state.h). */
extern const pf_search_kind_t pf_search_sim_kinds[];
/* The kinds it checks by re-running them (search_state.h). */
extern const pf_search_rerun_t pf_search_sim_reruns[];

#endif
