/* partition_layout: which device kind the partition assumes for each stage on a cluster that
 * mixes GPUs (DESIGN.md "Cost definitions", mixed clusters; devkinds.h).
 *
 * Stages are laid over the devices host by host, D / S devices a stage, and stage s's compute
 * is multiplied by the largest graph ratio (pf_devkinds_graph_ratio) among its devices. Two
 * host orders are tried: fastest hosts first and slowest first. */
#ifndef PF_PARTITION_LAYOUT_H
#define PF_PARTITION_LAYOUT_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"

/* mult: 2 x S entries; *nl (0, 1 or 2) layouts written, S multipliers each: 0 on a uniform
 * cluster, 1 when both orders give the same multipliers. PF_OK or PF_ERR (out of memory). */
int pf_partition_layout_mult(const pf_graph_t *g, const pf_cluster_t *c, int S, double *mult,
                             int *nl);

#endif
