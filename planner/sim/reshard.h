/* reshard: one cross-mesh resharding task (Zhuang et al., "On Optimizing the Communication of
 * Model Parallelism"): a tensor sharded by one spec on a source 2D device mesh must arrive
 * sharded by another spec on a destination mesh.
 *
 *  1. unit communication tasks (§2.2): the slices of the tensor that one set of source devices
 *     holds and one set of destination devices needs;
 *  2. per unit task and candidate sender, the fastest strategy among send/recv, send/recv with
 *     local all-gather, with global all-gather, and pipelined (ring) broadcast (§3.1, Fig. 3);
 *  3. host-level load balance and order of the unit tasks (§3.2, planner/sim/reshard_sched.h).
 *
 * pf_reshard_new is the RESHARD job: a pure function of its inputs (the DFS is deterministic
 * under its node cap; its wall-clock budget is the only thing that may cut it shorter). */
#ifndef PF_RESHARD_H
#define PF_RESHARD_H

#include "planner/ir/cluster.h"
#include "planner/sim/reshard_sched.h"

#include <stddef.h>
#include <stdint.h>

#define PF_RESHARD_MAX_DIMS 8

/* Sharding of one tensor dimension (§2.2 "Sharding spec", GSPMD/Alpa notation): R replicated,
 * S^0 / S^1 sharded over mesh axis 0 / 1, S^01 sharded over both (axis 0 major). */
typedef enum { PF_SHARDING_R = 0, PF_SHARDING_S0, PF_SHARDING_S1, PF_SHARDING_S01 } pf_mesh_shard_t;

/* A 2D device mesh (§2.2 "Device mesh"): devices[r * cols + c] is the device index (into the
 * network: the cluster's device index) at row r (axis 0), column c (axis 1). */
typedef struct {
    int rows, cols;
    const int *devices;
} pf_mesh_t;

typedef struct {
    int ndims;                 /* 1 .. PF_RESHARD_MAX_DIMS */
    const int64_t *shape;      /* elements per dimension, each > 0 */
    double dtype_bytes;        /* bytes per element, > 0 */
    pf_mesh_t src_mesh, dst_mesh;         /* disjoint device sets */
    const pf_mesh_shard_t *src_spec, *dst_spec; /* ndims each; a mesh axis shards one dim at most */
} pf_reshard_problem_t;

typedef enum {
    PF_XFER_SEND_RECV = 0,    /* Fig. 3(a): the sender sends the slice to every receiver */
    PF_XFER_LOCAL_ALLGATHER,  /* Fig. 3(b): 1/m of it to each device of a host, all-gather there */
    PF_XFER_GLOBAL_ALLGATHER, /* Fig. 3(c): 1/(nm) to every receiver, one ring all-gather */
    PF_XFER_BROADCAST,        /* Fig. 3(d): ring broadcast pipelined in k chunks */
    PF_XFER_NSTRATEGIES
} pf_reshard_strategy_t;

#define PF_XFER_ALL ((1u << PF_XFER_NSTRATEGIES) - 1)

typedef struct {
    pf_reshard_sched_algo_t algo;  /* default PF_RESHARD_SCHED_BEST */
    unsigned strategies;    /* mask of 1u << pf_reshard_strategy_t allowed; default PF_XFER_ALL */
    int max_chunks;         /* broadcast pipeline depth k tried in 1..max_chunks; default 64 */
    pf_reshard_sched_opts_t sched;
} pf_reshard_opts_t;

/* The network the models read: a device's host and the postal-model time between two devices. */
typedef struct pf_reshard_net pf_reshard_net_t;

/* Borrows c (it must outlive the net): per-pair bandwidth and latency from its matrices. */
pf_reshard_net_t *pf_reshard_net_from_cluster(const pf_cluster_t *c, char *err, size_t errlen);
/* Devices 0..ndevices-1 on host_of[i] (>= 0, copied); one link class within a host, one across. */
pf_reshard_net_t *pf_reshard_net_from_hosts(int ndevices, const int *host_of, double intra_gbps,
                                            double intra_lat_us, double inter_gbps,
                                            double inter_lat_us, char *err, size_t errlen);
void pf_reshard_net_destroy(pf_reshard_net_t **n);
int pf_reshard_net_ndevices(const pf_reshard_net_t *n);
int pf_reshard_net_host(const pf_reshard_net_t *n, int device);
double pf_reshard_net_xfer_ms(const pf_reshard_net_t *n, int a, int b, double bytes);

void pf_reshard_opts_default(pf_reshard_opts_t *o);
const char *pf_reshard_strategy_name(pf_reshard_strategy_t s);
/* A spec in the seed's notation, one token per dimension: R, S0, S1, S01, optionally separated
 * by commas or spaces ("S0R", "S01,R", "S1 S0"). PF_EINPUT names the offending position. */
int pf_reshard_spec_parse(const char *text, pf_mesh_shard_t *spec, int max_dims, int *ndims,
                          char *err, size_t errlen);

/* §3.1: ms for `sender` to deliver `bytes` to the receivers by one strategy. recv must be grouped
 * by host (all devices of a host adjacent): that is also the ring order. For the broadcast the
 * depth k in 1..max_chunks with the least time is used and written to *chunks (1 otherwise). */
double pf_reshard_strategy_ms(const pf_reshard_net_t *n, pf_reshard_strategy_t s, int sender,
                              int nrecv, const int *recv, double bytes, int max_chunks,
                              int *chunks);

/* One unit communication task and its place in the schedule. */
typedef struct {
    int64_t lo[PF_RESHARD_MAX_DIMS], hi[PF_RESHARD_MAX_DIMS]; /* the slice: [lo, hi) per dim */
    double bytes;
    int nsrc, ndst;
    const int *src;  /* devices holding the slice, ascending */
    const int *dst;  /* devices needing it, by (host, device): the ring order */
    int sender;      /* chosen sending device: the lowest-indexed holder on the chosen host */
    int sender_host; /* the network's host number */
    pf_reshard_strategy_t strategy;
    int chunks;      /* broadcast pipeline depth; 1 for the other strategies */
    double ms;       /* its duration from that sender */
    double start_ms; /* when it starts (eq. 1-3) */
} pf_reshard_task_t;

typedef struct pf_reshard pf_reshard_t;

/* The RESHARD job. NULL with the reason on bad input (names the field) or out of memory. */
pf_reshard_t *pf_reshard_new(const pf_reshard_problem_t *p, const pf_reshard_net_t *net,
                             const pf_reshard_opts_t *o, char *err, size_t errlen);
void pf_reshard_destroy(pf_reshard_t **r);

int pf_reshard_ntasks(const pf_reshard_t *r);
const pf_reshard_task_t *pf_reshard_task(const pf_reshard_t *r, int i);
const int *pf_reshard_order(const pf_reshard_t *r); /* task indices in execution order */
double pf_reshard_time_ms(const pf_reshard_t *r);    /* predicted completion (eq. 1) */
/* The scheduler's full answer: winning algorithm, each algorithm's makespan, DFS nodes. */
const pf_reshard_sched_result_t *pf_reshard_schedule(const pf_reshard_t *r);

#endif
