/* tp_groups: tensor-parallel groups and the cluster they make for the pipeline.
 *
 * With tensor-parallel degree T, every stage replica runs on T devices. planfarm places each
 * group on T devices of one host (unless told it may span hosts) with the best links inside, so
 * that the collectives TAP puts on every layer ride the fastest links (Megatron-LM's rule).
 * Once the groups are fixed, a group behaves as one device towards the rest of the pipeline:
 * rank k of one stage's group talks to rank k of the next stage's group, and the data-parallel
 * all-reduce runs one ring per rank. So the partitioner and the mapper work unchanged on a
 * "group cluster" of D / T devices in which
 *   bandwidth(A, B) = min_k bandwidth(A[k], B[k]),  latency(A, B) = max_k latency(A[k], B[k]),
 *   memory(A) = min_k memory(A[k]),
 * and a mapping onto groups expands into T devices per replica. T = 1 is the cluster itself. */
#ifndef PF_TP_GROUPS_H
#define PF_TP_GROUPS_H

#include "planner/ir/cluster.h"

#include <stddef.h>

typedef struct pf_tp_groups pf_tp_groups_t;

/* The degrees T the search may use: T divides the device count and, unless across_hosts, the
 * device count of every host. Ascending into out (at most cap); returns how many. */
int pf_tp_groups_degrees(const pf_cluster_t *c, int across_hosts, int *out, int cap);

/* Groups of T devices of c (borrowed: it must outlive the groups). Inside a host of at most 8
 * devices the grouping maximises the slowest link inside any group, then the sum of the groups'
 * slowest links (exhaustive); larger hosts are grouped greedily (each group grows by the device
 * whose slowest link to the members is fastest). across_hosts groups the whole cluster as one
 * host. NULL and the reason when T does not divide a host's devices. */
pf_tp_groups_t *pf_tp_groups_new(const pf_cluster_t *c, int T, int across_hosts, char *err,
                                 size_t errlen);
void pf_tp_groups_destroy(pf_tp_groups_t **g);

int pf_tp_groups_degree(const pf_tp_groups_t *g);
int pf_tp_groups_count(const pf_tp_groups_t *g); /* D / T */
/* The T devices of group i, rank order (ascending device index). */
const int *pf_tp_groups_members(const pf_tp_groups_t *g, int i);
/* The group cluster (see above); for T = 1 the cluster itself. */
const pf_cluster_t *pf_tp_groups_cluster(const pf_tp_groups_t *g);
/* The slowest link inside any group and the largest latency there: what a stage's
 * tensor-parallel collectives are priced on, wherever the stage lands. Both 0 when T = 1. */
double pf_tp_groups_link_gbps(const pf_tp_groups_t *g);
double pf_tp_groups_link_lat_us(const pf_tp_groups_t *g);

#endif
