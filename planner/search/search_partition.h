/* search_partition: phases 2 and 3 of the search, the DP jobs and their ranking
 * (search_partition.c). */
#ifndef PF_SEARCH_PARTITION_H
#define PF_SEARCH_PARTITION_H

#include "planner/search/search_state.h"

#include <stdbool.h>

/* Layer-aligned searches: the block groups of g. */
int pf_search_partition_init(pf_search_t *s, char *err, size_t errlen);
/* The stage counts S to partition for (S x R = D, or the one the options fix; S <= ops, S <=
 * coarsen_k hyper-ops): up to 64 into list; returns how many. */
/* Is (S, T) one of the block pre-phase's pairs (search_opts.h; every pair when it set none)? */
bool pf_search_partition_paired(const pf_search_opts_t *o, int S, int T);
int pf_search_partition_stage_counts(const pf_search_opts_t *o, int D, int n, int *list);
/* Builds T's setting and queues its DP jobs; a setting that cannot be built drops the degree
 * (its reason kept). PF_ERR only for running out of memory. */
int pf_search_partition_open(pf_search_t *s, int tpi, char *err, size_t errlen);
/* Every DP answer is in (and no degree is still in TAP): the best few partitions, one per
 * (S, T), become s->part.chosen. false when the search failed instead (none feasible, a DP
 * error, out of memory), or, with --stage-degrees, when no uniform partition is feasible and
 * the search goes on (s->part.nchosen 0: the caller tries the per-stage plans, else
 * pf_search_partition_fail_none). */
bool pf_search_partition_rank(pf_search_t *s);
/* The search fails with the reason no uniform partition is feasible. */
void pf_search_partition_fail_none(pf_search_t *s);
/* Why the degrees were dropped before any partition: the first dropped degree's reason, and
 * under a global batch that the other degrees give none of its (S, R). false when no degree
 * was dropped for a reason of its own. */
bool pf_search_partition_degrees_why(const pf_search_t *s, char *buf, size_t len);
/* The samples one step of plan p trains on. */
double pf_search_partition_samples_per_step(const pf_search_t *s, const pf_plan_t *p);
void pf_search_partition_describe(const pf_search_t *s, const pf_search_owner_t *owner,
                                  pf_job_t *job);
/* true when the answer was the last DP job's and no degree is still in TAP. */
bool pf_search_partition_absorb(pf_search_t *s, uint64_t id, const pf_search_owner_t *owner,
                                const pf_job_result_t *res);
void pf_search_partition_clear(pf_search_t *s);

/* The kinds of jobs this phase issues (search_state.h). */
extern const pf_search_kind_t pf_search_partition_kinds[];

#endif
