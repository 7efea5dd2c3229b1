/* linkshare: which link of a device a transfer uses, and how the simulator's transfer queues of
 * one device (its pipeline sends, its pipeline receives, its gradient buckets) share that link
 * when they use it at the same time (DESIGN.md "Simulator", sharing; issue 21 item 4).
 *
 * A device has two links to the others, its tiers: its NVLink / NVSwitch port inside its host
 * and its own NIC across hosts (rail-optimised hosts, one NIC per GPU, as the cluster file's
 * per-pair bandwidths assume; every level of a hierarchy above the host reaches it through that
 * NIC). A transfer between two devices uses the NIC at both ends when their hosts differ, NVLink
 * otherwise; a collective uses the NIC when its group spans hosts (its phases inside a host are
 * charged to the NIC too), NVLink otherwise.
 *
 * The simulator is not preemptive: a task's times are final when it is taken from the ready
 * queue (its successors are released then). The rule: a transfer committed at start_ms with
 * its time alone dur_ms is lengthened, at each of its devices, by the time the queues its own
 * conflicts with (pf_linkshare_set_conflicts: by default every other queue of the device) are
 * busy on the same tier within [start_ms, start_ms + dur_ms], the union of their windows
 * (transfers committed before it), and by the most over its devices. For two transfers on one link this is exactly
 * the end fair sharing gives the one committed second, whichever started first (each of the
 * pair is slowed by the overlap of their windows at full rate); the one committed first keeps
 * its end, which fair sharing would delay by as much. So a pair's delay is counted once where
 * fair sharing charges it to both: half the contention, never more than the later transfer's
 * own time. */
#ifndef PF_LINKSHARE_H
#define PF_LINKSHARE_H

#include "planner/ir/cluster.h"

typedef enum { PF_LINK_NVLINK = 0, PF_LINK_NIC = 1 } pf_link_tier_t;

/* Between devices a and b: PF_LINK_NIC when their hosts differ. */
pf_link_tier_t pf_linkshare_tier(const pf_cluster_t *c, int a, int b);
/* A collective over devs[i x stride], i < n: PF_LINK_NIC when they span hosts. */
pf_link_tier_t pf_linkshare_group_tier(const pf_cluster_t *c, const int *devs, int n, int stride);

typedef struct pf_linkshare pf_linkshare_t;

/* nslots devices (the caller numbers them 0..nslots-1), each with nqueues (1..8) queues, each
 * slowed by every other queue of its device until pf_linkshare_set_conflicts says otherwise.
 * NULL when out of memory. */
pf_linkshare_t *pf_linkshare_new(int nslots, int nqueues);
/* The queues (bit j: queue j) whose use of a link slows a transfer of queue q: a device's send
 * and receive queues use the two directions of a full-duplex link and do not slow each other,
 * a collective's queue moves data both ways and is slowed by either; several queues busy at
 * once count once (the union of their windows). */
void pf_linkshare_set_conflicts(pf_linkshare_t *ls, int q, unsigned queues);
void pf_linkshare_destroy(pf_linkshare_t **ls);

/* The time within [from_ms, to_ms] that queue q of slot is busy on tier. */
double pf_linkshare_busy_ms(const pf_linkshare_t *ls, int slot, int q, pf_link_tier_t tier,
                            double from_ms, double to_ms);

/* A transfer of queue q on slots[0..n) from start_ms, *dur_ms alone: *dur_ms lengthened by the
 * rule above, then recorded on each slot's queue q. A queue's transfers must come in start
 * order and not overlap (each starts at or after the previous one's end). PF_OK, PF_ERR when
 * out of memory. */
int pf_linkshare_commit(pf_linkshare_t *ls, const int *slots, int n, int q, pf_link_tier_t tier,
                        double start_ms, double *dur_ms);
/* The simulator's queues of a device: its pipeline sends, its collectives, its pipeline
 * receives. */
enum { PF_LINKSHARE_SEND, PF_LINKSHARE_COLL, PF_LINKSHARE_RECV, PF_LINKSHARE_QUEUES };
/* nslots devices with those queues: a send and a receive take the two directions of a
 * full-duplex link (NVLink, InfiniBand) and do not slow each other, a collective moves data
 * both ways and is slowed by either. NULL when out of memory. */
pf_linkshare_t *pf_linkshare_new_devices(int nslots);

/* The same with each slot on its own queue (slots[i] on queues[i]): a transfer between two
 * devices, one sending, the other receiving. */
int pf_linkshare_commit_lanes(pf_linkshare_t *ls, const int *slots, const int *queues, int n,
                              pf_link_tier_t tier, double start_ms, double *dur_ms);

#endif
