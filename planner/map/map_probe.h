/* map_probe: the DFS probe of Algorithm 2 (Parmesan V-A) on a precomputed context
 * (map_context.h): is there a one-to-one mapping of the stage replicas to the devices with
 * max_x c_stage(x, p) <= target? */
#ifndef PF_MAP_PROBE_H
#define PF_MAP_PROBE_H

#include <stdatomic.h>

typedef struct pf_map_context pf_map_context_t; /* map_context.h */

typedef struct {
    int found;     /* a mapping with objective <= target exists (dev filled) */
    int timed_out; /* deadline reached first: counts as not found */
    double objective_ms;        /* of the mapping found */
    long long nodes;            /* DFS nodes visited */
    long long symmetric_pruned; /* candidate devices skipped as symmetric to one already tried
                                   (interchangeable devices, replica orderings, host blocks) */
    long long block_pruned;     /* of those, skipped by the host-block rule */
    long long bound_pruned;     /* candidate devices rejected by a stage-time bound or check */
} pf_probe_result_t;

/* Algorithm 2 at target_ms. deadline_s: an absolute pf_now_s() time (0 = none). threads = 0:
 * OpenMP's default. cancel (may be NULL): set by another thread to abandon the probe; the result
 * then has found = 0 and *cancelled = 1. The mapping returned is the one a sequential DFS would
 * find first, whatever the thread count (unless the deadline strikes). Returns PF_OK or PF_ERR
 * (out of memory). */
int pf_map_probe_run(const pf_map_context_t *cx, double target_ms, double deadline_s, int threads,
                    const atomic_int *cancel, int *dev, pf_probe_result_t *res, int *cancelled);

#endif
