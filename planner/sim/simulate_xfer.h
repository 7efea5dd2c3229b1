/* simulate_xfer: the time of one cross-stage transfer of a tensor-parallel group, the better of
 * the resharding planner/reshard finds and Megatron-LM's scatter/gather (DESIGN.md "Simulator",
 * transfers). */
#ifndef PF_SIMULATE_XFER_H
#define PF_SIMULATE_XFER_H

#include "planner/ir/cluster.h"
#include "planner/sim/reshard.h"

/* The resharding of one cross-stage transfer: `bytes` replicated on src[0..T) and needed
 * replicated on dst[0..T), each a 1 x T mesh, one dimension of `bytes` 1-byte elements. The
 * problem points into *x: do not copy x. */
typedef struct {
    pf_reshard_problem_t problem;
    int64_t shape[1];
    pf_mesh_shard_t spec[1];
} pf_simulate_xfer_problem_t;
void pf_simulate_xfer_problem(const int *src, const int *dst, int T, double bytes,
                              pf_simulate_xfer_problem_t *x);
/* Its time: the better of the resharding by the default options (every strategy, best of the
 * schedulers) and Megatron's scatter/gather (pf_simulate_xfer_scatter_gather_ms, no NVLS); a problem
 * of 0 bytes takes 0 ms. */
int pf_simulate_xfer_ms(const pf_cluster_t *c, const pf_simulate_xfer_problem_t *x, double *ms,
                        char *err, size_t errlen);

/* Megatron-LM's scatter/gather of a tensor-parallel group's activation ([Megatron] Sec. 4.1):
 * rank k of src sends bytes / T to rank k of dst, all T at once, then dst all-gathers the T
 * slices: max_k postal(src[k], dst[k], bytes / T) + the cheapest all-gather of bytes over dst
 * (collective.h). T = 1: the postal time of bytes. */
double pf_simulate_xfer_scatter_gather_ms(const pf_cluster_t *c, const int *src, const int *dst,
                                          int T, double bytes, double nvls_busbw_gbps);

/* pf_simulate_xfer_ms on a network built once by the caller (O(D) each: a plan's (S - 1) x R
 * transfers share one); *reshard_ms in: the resharding's time when already solved for a transfer
 * the solver sees alike (replica_groups.h), NAN to solve it; out: that time. */
int pf_simulate_xfer_ms_on(const pf_cluster_t *c, const pf_reshard_net_t *net,
                           const pf_simulate_xfer_problem_t *x, double *ms, double *reshard_ms,
                           char *err, size_t errlen);

#endif
