/* collective: the time of a collective over a group of GPUs, per algorithm, and the cheapest
 * algorithm as NCCL's tuner picks it (DESIGN.md "Cost definitions", "Collectives").
 *
 * A group is n members on `hosts` hosts, at most `per_host` on one host. Inside a host every pair
 * talks at intra_gbps (an NVSwitch or NVLink fabric: each GPU sends at that rate to any peer);
 * between hosts each GPU has its own NIC at inter_gbps (rail-optimised: local rank j of one host
 * reaches local rank j of another). `bytes` is the buffer each member holds before an all-reduce,
 * reduce-scatter (input), broadcast or all-to-all, and after an all-gather (output). Every time
 * is in ms: steps x latency + volume / bandwidth. The algorithms:
 *
 *   ring     [NCCL] one ring per channel, one channel per NIC of a host, so that across hosts the
 *            ring's bottleneck is min(intra, N x inter), N = the NICs a host's members use
 *            (nics_per_host, at most per_host; default per_host):
 *              all-reduce  2 (n-1) steps, 2 (n-1)/n x bytes / bw
 *              RS, AG      (n-1) steps,   (n-1)/n x bytes / bw
 *            a step's latency is the slowest link's (inter when hosts > 1).
 *   tree     [DBTree] double binary tree over the hosts, a chain inside each: all-reduce only,
 *              2 (ceil log2 per_host x lat_intra + ceil log2 hosts x lat_inter) + 2 bytes / bw
 *            (a reduce up and a broadcast down: every GPU sends and receives ~bytes each way).
 *   nvls     [NVLS] one host with NVSwitch SHARP: the switch reduces and multicasts, so the bus
 *            bandwidth is the host's nvls_busbw_gbps instead of intra_gbps (ring's formula with
 *            that bandwidth, 2 steps for all-reduce, 1 for RS and AG).
 *   hier     hosts > 1: reduce-scatter inside each host (ring, or NVLS), all-reduce of the
 *            1/per_host shard across hosts over the NICs in parallel (one ring per local rank;
 *            per_host / N rings share a NIC and take that many times longer), all-gather inside;
 *            RS and AG likewise with the inter-host phase a RS or AG.
 *            The phases run one after the other (no pipelining between them).
 *   direct   all-to-all: every member sends bytes/n to each other member at once; the members
 *            on its host over NVLink, the others through its NIC, in parallel:
 *              one latency + max((per_host-1)/n x bytes / intra,
 *                                (n-per_host)/n x bytes / inter x per_host / N)
 *            broadcast: a pipelined chain, (n-1) latencies + bytes / bw; p2p: latency + bytes/bw.
 * pf_collective_ms with PF_COLL_ALGO_BEST takes the cheapest algorithm the group allows, the
 * choice NCCL's tuner makes from the same kind of model; ties go to the lower enum value. */
#ifndef PF_COLLECTIVE_H
#define PF_COLLECTIVE_H

#include "planner/ir/cluster.h"

typedef enum {
    PF_COLL_ALLREDUCE,
    PF_COLL_REDUCE_SCATTER,
    PF_COLL_ALLGATHER,
    PF_COLL_ALLTOALL,
    PF_COLL_BROADCAST,
    PF_COLL_P2P
} pf_collective_op_t;

typedef enum {
    PF_COLL_ALGO_RING,
    PF_COLL_ALGO_TREE,
    PF_COLL_ALGO_NVLS,
    PF_COLL_ALGO_HIER,
    PF_COLL_ALGO_DIRECT, /* all-to-all, broadcast (chain), p2p */
    PF_COLL_ALGO_BEST,
    PF_COLL_NALGOS = PF_COLL_ALGO_BEST
} pf_collective_algo_t;

typedef struct {
    int n;                  /* members (>= 1) */
    int hosts;              /* distinct hosts among them (>= 1) */
    int per_host;           /* the most members on one host (>= 1) */
    double intra_gbps;      /* slowest member pair inside a host (0 when per_host == 1) */
    double intra_lat_us;
    double inter_gbps;      /* per GPU between hosts (0 when hosts == 1) */
    double inter_lat_us;
    double nvls_busbw_gbps; /* > 0: the hosts have NVSwitch SHARP (NVLS), this bus bandwidth */
    int nics_per_host;      /* NICs the members of one host use between hosts, each at
                               inter_gbps; 0: one per member (rail-optimised, DGX) */
} pf_collective_group_t;

/* The time in ms of `op` on `bytes` by `algo`; INFINITY when the algorithm does not apply (tree
 * for anything but all-reduce, NVLS without NVLS or across hosts, hier on one host, direct for
 * a reduction). n == 1 or bytes <= 0: 0. PF_COLL_ALGO_BEST: the minimum over the algorithms,
 * and *chosen (when not NULL) names it. */
double pf_collective_ms(const pf_collective_group_t *g, pf_collective_op_t op, double bytes,
                        pf_collective_algo_t algo, pf_collective_algo_t *chosen);
/* The cheapest algorithm's time (pf_collective_ms with PF_COLL_ALGO_BEST). */
double pf_collective_best_ms(const pf_collective_group_t *g, pf_collective_op_t op, double bytes);

/* The group of cluster devices devs[0..n) (n >= 1): hosts from pf_device_t.host; intra_gbps the
 * slowest (and intra_lat_us the largest) between members on one host, over the pairs of each
 * host's members in order and its last to its first (a ring's links); inter the slowest between
 * the j-th members of consecutive hosts (in order of first appearance, the last to the first),
 * j < the smaller of the two hosts' counts (rails). nvls_busbw_gbps > 0 as given; 0: what the
 * members' device models say (pf_devmodel_nvls_busbw_gbps, the slowest; 0 when one names no
 * preset): the cluster file does not say whether a host has NVSwitch SHARP. PF_OK, or
 * PF_ERR when out of memory (*g then describes n members on one host with no links). */
int pf_collective_group_from_cluster(const pf_cluster_t *c, const int *devs, int n,
                                     double nvls_busbw_gbps, pf_collective_group_t *g);

const char *pf_collective_algo_name(pf_collective_algo_t a); /* "ring", "tree", ... */

#endif
