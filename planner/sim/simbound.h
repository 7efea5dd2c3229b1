/* simbound: a lower bound of the simulated step (simulate.h) that costs one pass over the compute
 * tasks, so that the search need not simulate a candidate that cannot win (issue 22: the 1T GPT
 * on 3,072 A100 simulated three interleaved candidates of 0.3-1.2 million tasks each, and only
 * the first could make the plan).
 *
 * The bound is the longest path through the compute tasks alone: each rank runs its forwards
 * and backwards in its schedule's order (interleave.h), a forward waits for the previous
 * stage's forward of its micro-batch, a backward for the next stage's backward, and each stage's
 * optimizer step for its last backward and the previous chunk's step, every duration as the
 * simulator gives it (tensor-parallel collectives included, they run on the compute stream);
 * transfers, all-reduces and ZeRO-3's exposed gathers take no time. In the simulator every
 * compute task starts when its predecessors allow and runs exactly its duration, and a transfer
 * or collective only ever adds a non-negative delay between a task and its successor, so no task
 * of the simulation ends earlier than here: step_ms >= the bound, whatever the communication
 * model. Where the communication is free (one replica, nothing sent, no collective) the two are
 * equal (tests/test_simbound.c checks both). */
#ifndef PF_SIMBOUND_H
#define PF_SIMBOUND_H

#include "planner/sim/simulate_types.h"

/* The bound on in's step in ms (the same input pf_simulate takes; not checked again: give it one
 * pf_simulate_check accepts). 0 when it gives none: the signal schedule (the simulator picks an
 * order), or out of memory. */
double pf_simbound_step_ms(const pf_simulate_input_t *in);

#endif
