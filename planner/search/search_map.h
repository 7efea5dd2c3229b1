/* search_map: the map phase of the search, one binary search per candidate and instantiation
 * (search_map.c). */
#ifndef PF_SEARCH_MAP_H
#define PF_SEARCH_MAP_H

#include "planner/search/search_state.h"

#include <stdbool.h>

/* The candidates (entries of s->part.dp, best first) start their binary searches; true when
 * every search is over at once. */
bool pf_search_map_start(pf_search_t *s, const int *dp, int n);
/* Candidate c's best mapping so far under "full": the task it comes from (-1 when it had
 * nothing to map, S = R = 1, and the CS map is its mapping) and that objective. */
int pf_search_map_best(const pf_search_t *s, int c, double *full_ms);
/* The mapping of task k (NULL for -1) and, into st, the numbers of its search with the work of
 * all its candidate's searches. */
const int *pf_search_map_stats(const pf_search_t *s, int c, int k, pf_mapping_stats_t *st);
/* The candidate a plan would come from now, and its best objective under full; -1 without
 * candidates. */
int pf_search_map_leading(const pf_search_t *s, double *full_ms);
void pf_search_map_describe(const pf_search_t *s, const pf_search_owner_t *owner, pf_job_t *job);
/* true when the answer ended the last binary search. */
bool pf_search_map_absorb(pf_search_t *s, uint64_t id, const pf_search_owner_t *owner,
                          const pf_job_result_t *res);
void pf_search_map_clear(pf_search_t *s);

/* The kinds of jobs this phase issues (search_state.h). */
extern const pf_search_kind_t pf_search_map_kinds[];

#endif
