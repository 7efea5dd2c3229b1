/* search_tap: phase 1 of the search for every tensor-parallel degree T > 1 (search_tap.c). */
#ifndef PF_SEARCH_TAP_H
#define PF_SEARCH_TAP_H

#include "planner/search/search_state.h"

#include <stdbool.h>

/* Room for nt degrees. */
int pf_search_tap_init(pf_search_t *s, int nt, char *err, size_t errlen);
/* Degree T joins as s->tap.tp[s->tap.ntp - 1]: T > 1 queues its TAP jobs, and *over says that
 * its TAP is over at once (no unit has a weight to split). T = 1 has no TAP. */
int pf_search_tap_add(pf_search_t *s, int T, bool *over, char *err, size_t errlen);
/* T's graph and group cluster, once its setting is built. */
const pf_graph_t *pf_search_tap_graph(const pf_search_t *s, int tpi);
const pf_cluster_t *pf_search_tap_cluster(const pf_search_t *s, int tpi);
void pf_search_tap_describe(const pf_search_t *s, const pf_search_owner_t *owner, pf_job_t *job);
/* true when the answer was the last of its degree: every unit has taken its best plan (or the
 * degree is dropped, its reason in why) and the degree may open. */
bool pf_search_tap_absorb(pf_search_t *s, uint64_t id, const pf_search_owner_t *owner,
                          const pf_job_result_t *res);
void pf_search_tap_clear(pf_search_t *s);

/* The kinds of jobs this phase issues (search_state.h). */
extern const pf_search_kind_t pf_search_tap_kinds[];

#endif
