/* interleave: the compute order of one pipeline rank's device group (DESIGN.md "simulate",
 * interleaved 1F1B). A rank holds V model chunks (V = 1: one stage); the order lists its
 * forwards and backwards over all of them, since they share the group's compute stream.
 * Entry e encodes chunk c and micro-batch m as c MB + m for a forward, -1 - (c MB + m) for a
 * backward; 2 MB V entries. */
#ifndef PF_INTERLEAVE_H
#define PF_INTERLEAVE_H

#include "planner/ir/training.h"

#include <stddef.h>

/* The order of rank `rank` of P ranks with V chunks each over MB micro-batches.
 * V = 1: the schedule's own order (GPipe, 1F1B or eager-1F1B; training.h).
 * V > 1: Megatron-LM's interleaved 1F1B whatever the schedule ([Narayanan21] Sec. 2.2). */
void pf_interleave_order(pf_training_schedule_t order, int P, int V, int MB, int rank, int *out);

/* Interleaved 1F1B's warm-up on rank `rank`: (P - rank - 1) x 2 + (V - 1) x P forwards of
 * micro-batch-chunks, all MB V of them when MB == P, at most MB V. */
int pf_interleave_warmup(int P, int V, int MB, int rank);

/* The k-th forward (backward: bwd = 1) of a rank under interleaved 1F1B: its chunk and its
 * micro-batch. */
void pf_interleave_kth(int P, int V, int k, int bwd, int *chunk, int *microbatch);

/* A pipeline input's chunks: V >= 0 chunks per rank (0, 1: none), `stages` a multiple of V,
 * giving *P = stages / V ranks; with V > 1 the micro-batches MB a multiple of P (Megatron-LM asks
 * it). PF_EINPUT otherwise. */
int pf_interleave_check(int stages, int V, int MB, int *P, char *err, size_t errlen);

/* Stage s (chunk s / P of rank s mod P) runs on its rank's devices: its n devices `dev` are
 * those of stage s - P (`first`); PF_EINPUT otherwise. */
int pf_interleave_same_devices(const int *dev, const int *first, int n, int s, int P, char *err,
                               size_t errlen);

#endif
