/* replica_groups: one simulated replica for a group of identical data-parallel replicas (issue
 * 23 item 2).
 *
 * Replicas of the same stages whose compute times and pipeline transfers are equal, each hop on
 * the tier of replica 0's (linkshare.h: what it shares with the gradient buckets), their devices
 * interchangeable as far as the step sees them, run the same timeline: each replica's
 * tasks use only its own devices' streams, their relative order in the ready queue is the same
 * in every replica, and the one thing they share, each stage's gradient all-reduce, starts when
 * the last of them is ready, which is the same moment in all. So pf_simulate runs replica 0
 * alone, with the all-reduce still priced over every replica's devices (simulate.h dp_stage),
 * and copies its rows to the others: the step, the busy times, the peaks and the bubble equal the
 * full simulation's, bit for bit (tests). A step of R replicas costs 1 / R of the tasks: the 1T
 * GPT on 131,072 GPUs simulates 64 stages, not 256 x 64. Not used when a timeline is asked for
 * (its events name every replica) or when some replica differs. pf_simulate (simulate.c) calls
 * the three steps: apply, reduce, then expand the reduced input's result. */
#ifndef PF_REPLICA_GROUPS_H
#define PF_REPLICA_GROUPS_H

#include "planner/sim/simulate_types.h"

/* Whether in (validated) has more than one replica, all identical (above), and no timeline.
 * O(S R T). */
int pf_replica_groups_apply(const pf_simulate_input_t *in);

/* The input of replica 0 alone into *one (its collectives over in's replicas): its stage
 * array is returned (free it after simulating; the rest is borrowed from in), NULL when out of
 * memory. */
pf_simulate_stage_t *pf_replica_groups_reduce(const pf_simulate_input_t *in,
                                              pf_simulate_input_t *one);
/* in's result from replica 0's (`one`, from the reduced input): every replica's rows copied,
 * the bubble summed over them as simulate.c does. NULL when out of memory. */
pf_simulate_result_t *pf_replica_groups_expand(const pf_simulate_input_t *in,
                                               const pf_simulate_result_t *one);

/* The replicas whose cross-stage transfer (src -> dst, T devices each, replica r at r T) a
 * resharding solves alike: first[r] = the lowest replica whose transfer has r's key, r itself
 * when none. The key is what the solver (reshard.h) reads of its 2T devices: per pair, the order
 * of the devices and of their hosts (it sorts and numbers them by these only) and the links both
 * ways (the postal model it prices with); with equal bytes, equal keys give equal answers. On a
 * DGX cluster every replica has replica 0's key. O(R T^2). PF_OK or PF_ERR (out of memory). */
int pf_replica_groups_same_xfers(const pf_cluster_t *c, const int *src, const int *dst, int R,
                                 int T, int *first);

#endif
