/* target_search: Algorithm 1 of Liu et al., "Parmesan" (the binary search over the mapping
 * target), as a state machine with no clock, no threads and no probes of its own. Its driver
 * asks it for targets to probe (propose, sent), runs the probes (Algorithm 2) however it likes,
 * and hands the answers back (absorb); the search keeps the interval [t_l, t_r] that holds the
 * optimum (Proposition 2: a found mapping moves t_r down to its objective, a target with no
 * mapping moves t_l up to it), the best mapping found and the probes no longer worth running.
 *
 * Two drivers, two ways of choosing targets (the policy), kept because each fits its driver and
 * both are pinned by the plans they produce:
 *   ROUNDS  pf_mapping_search, in-process: a round of K targets splitting (t_l, t_r) evenly runs
 * side by side and is absorbed when all of it is in (Parmesan's multi-target enhancement); a round
 * that moves neither bound ends the search. STREAM  the distributed search (planner/search):
 * answers come back one at a time from workers, so W probes stay in flight, each new target halving
 * the widest gap between the bounds and the targets out, every answer moves the bounds at once and
 * probes outside the new interval are withdrawn. A limit on timed-out probes ends it early. Both
 * stop when t_r - t_l <= rel_eps x t_r, or when no target lies strictly inside the interval (its
 * bounds are adjacent doubles). */
#ifndef PF_TARGET_SEARCH_H
#define PF_TARGET_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

typedef struct pf_target_search pf_target_search_t;

typedef enum {
    PF_TARGET_SEARCH_ROUNDS,
    PF_TARGET_SEARCH_STREAM
} pf_target_search_policy_t;

typedef struct {
    pf_target_search_policy_t policy;
    int width;          /* K targets per round (ROUNDS) or W probes in flight (STREAM), >= 1 */
    double rel_eps;     /* converged when t_r - t_l <= rel_eps x t_r */
    int max_timeouts;   /* STREAM: over after this many timed-out probes; 0 = no limit */
} pf_target_search_opts_t;

/* What a probe of one target said. */
typedef enum {
    PF_TARGET_FOUND,     /* a mapping with objective <= target: objective_ms and dev */
    PF_TARGET_NONE,      /* no mapping at or below the target */
    PF_TARGET_TIMED_OUT, /* ran out of time: treated as NONE, so t_l is no longer proven */
    PF_TARGET_CANCELLED  /* stopped by its driver: proves nothing (ROUNDS only) */
} pf_target_verdict_t;

typedef struct {
    pf_target_verdict_t verdict;
    double objective_ms; /* FOUND */
    const int *dev;      /* FOUND: n entries, copied */
} pf_target_answer_t;

/* A search over [lower_ms, upper_ms] (not reordered: lower > upper is already converged) whose
 * best mapping so far is dev (n entries, copied), of objective upper_ms. NULL when out of memory
 * or the options are out of range. */
pf_target_search_t *pf_target_search_new(const pf_target_search_opts_t *o, double lower_ms,
                                         double upper_ms, const int *dev, int n);
void pf_target_search_destroy(pf_target_search_t **ts);

/* A target to probe now: true and *target_ms, which stays the proposal until pf_target_search_sent
 * says it went out. False when nothing is to be sent now: answers are awaited, or the search is
 * over (pf_target_search_done). */
bool pf_target_search_propose(pf_target_search_t *ts, double *target_ms);
/* The target last proposed went out as the driver's probe `tag` (a job id, a slot). */
void pf_target_search_sent(pf_target_search_t *ts, uint64_t tag);
/* The answer to probe `tag`; unknown or withdrawn tags are ignored. */
void pf_target_search_absorb(pf_target_search_t *ts, uint64_t tag, const pf_target_answer_t *a);
/* Probes whose answers can no longer move the interval, up to cap tags in the order they were
 * withdrawn, removed from the list: the driver may stop them. Take them after every absorb. */
int pf_target_search_take_withdrawn(pf_target_search_t *ts, uint64_t *tags, int cap);

bool pf_target_search_done(const pf_target_search_t *ts);
double pf_target_search_lower_ms(const pf_target_search_t *ts);
/* t_r: the objective of the best mapping. */
double pf_target_search_upper_ms(const pf_target_search_t *ts);
const int *pf_target_search_best(const pf_target_search_t *ts);
int pf_target_search_timeouts(const pf_target_search_t *ts);
int pf_target_search_in_flight(const pf_target_search_t *ts);

#endif
