/* simulate_check: whether a simulator input (simulate_types.h) is consistent: counts, a task
 * count that fits an int, finite non-negative numbers, devices of the cluster used once (a
 * rank's later chunks on its first chunk's devices). Apart from simulate.c to keep it short. */
#ifndef PF_SIMULATE_CHECK_H
#define PF_SIMULATE_CHECK_H

#include "planner/sim/simulate_types.h"

#include <stddef.h>

/* PF_OK, or PF_EINPUT with the reason ("stage 2: device 5 is used twice"); PF_ERR out of
 * memory. */
int pf_simulate_check(const pf_simulate_input_t *in, char *err, size_t errlen);
/* Whether the task graph of the input as given fits an int's indices: PF_EINPUT "too large to
 * simulate" otherwise. pf_simulate asks it of what it runs, so identical data-parallel
 * replicas run as one (replica_groups.h) are counted once. */
int pf_simulate_check_size(const pf_simulate_input_t *in, char *err, size_t errlen);

#endif
