/* devkinds: the device kinds of a cluster that mixes GPUs, and what each op costs on each
 * (DESIGN.md "Cost definitions", mixed clusters; issue 21 item 2, issue 24 item 2).
 *
 * A kind is one device_model string of the cluster's devices (NULL counts as one). With one
 * kind the graph's times are the truth, whatever model priced them: nothing is re-priced. With
 * several, op v on a device of kind k costs its graph time x ratio(v, k), where
 *   ratio = op_ms(model(k), work(v)) / op_ms(model(graph), work(v))
 * forward and backward apart (devmodel.h pf_devmodel_op_ms, bf16), when both models are known
 * (model(graph) the graph's own, carried or a preset: graph.h pf_graph_device; model(k) that
 * same model for the kind of the graph's name, else the preset of k's name) and the op has work
 * with a positive time on the graph's model; else 1 (an unknown model, a device naming none, an
 * op without work). Ratios are computed once per op and kind. */
#ifndef PF_DEVKINDS_H
#define PF_DEVKINDS_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"

#include <stdbool.h>

typedef struct pf_devkinds pf_devkinds_t;

/* NULL when out of memory. */
pf_devkinds_t *pf_devkinds_new(const pf_graph_t *g, const pf_cluster_t *c);
void pf_devkinds_destroy(pf_devkinds_t **dk);

/* The kinds of c's devices alone: kind_of[d] (D entries) numbered by first device; returns
 * their count. pf_devkinds_new numbers them the same way. */
int pf_devkinds_number(const pf_cluster_t *c, int *kind_of);
/* Is every device of c one kind (pf_devkinds_number's count 1, in O(D))? */
bool pf_devkinds_one(const pf_cluster_t *c);
/* Device d's kind in that numbering alone (O(d x kinds)). */
int pf_devkinds_number_of(const pf_cluster_t *c, int d);

/* Distinct kinds (>= 1) and device d's kind in [0, count), kinds numbered by first device. */
int pf_devkinds_count(const pf_devkinds_t *dk);
int pf_devkinds_of(const pf_devkinds_t *dk, int device);
/* The kind's device_model (NULL: none named). */
const char *pf_devkinds_name(const pf_devkinds_t *dk, int kind);
/* True when every ratio is 1: plans are what they are on a uniform cluster. */
bool pf_devkinds_uniform(const pf_devkinds_t *dk);
/* Op v's ratios on kind k. */
double pf_devkinds_fwd_ratio(const pf_devkinds_t *dk, int v, int kind);
double pf_devkinds_bwd_ratio(const pf_devkinds_t *dk, int v, int kind);
/* c_u(v) on kind k: fwd_ms x fwd ratio + bwd_ms x bwd ratio, their communication share
 * (comm_fwd_ms, comm_bwd_ms) kept as it is (pf_graph_cu_ms when uniform). */
double pf_devkinds_cu_ms(const pf_devkinds_t *dk, const pf_graph_t *g, int v, int kind);
/* sum over the graph of c_u on kind k / sum of c_u (1 when uniform or the sum is 0): one number
 * per kind for the partition's stage multipliers (partition.c). */
double pf_devkinds_graph_ratio(const pf_devkinds_t *dk, const pf_graph_t *g, int kind);

#endif
