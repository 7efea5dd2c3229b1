/* cluster_hier: a cluster described by its hierarchy (DESIGN.md "Cluster", format 2; issue 23):
 * GPUs in hosts (an NVLink/NVSwitch domain), hosts under leaf switches (a rail group / scalable
 * unit), leaves under spines, spines under a core or pod level. Every level has a count, a
 * per-GPU bandwidth, a latency and an oversubscription; hosts have a kind (GPUs, memory, peak,
 * device model, NVLink bandwidth and latency) and optional exceptions (another kind, a slower
 * NIC, a missing host).
 *
 * Two devices talk over the lowest level whose unit holds both their hosts: the host level when
 * they share a host, else level L >= 1, at levels[L].bw_gbps divided by the oversubscription of
 * every level from 1 to L - 1 (an oversubscribed leaf shares its uplinks, so everything above
 * it is slower), capped by either host's NIC exception; latency levels[L].latency_us. Nothing is
 * stored per pair: memory and validation grow with hosts, not with devices squared.
 *
 * Host slots are numbered 0..hosts-1 in the order of the hierarchy: host h is in level-L unit
 * h / span(L), span(L) = count(1) x ... x count(L); a top level of count 0 holds every host. A
 * missing host keeps its slot (its neighbours keep their switches) and has no devices. */
#ifndef PF_CLUSTER_HIER_H
#define PF_CLUSTER_HIER_H

#include <stddef.h>
#include <stdint.h>

typedef struct pf_cluster_hier pf_cluster_hier_t;

#define PF_CLUSTER_HIER_MAX_LEVELS 8
#define PF_CLUSTER_HIER_MAX_KINDS 64
#define PF_CLUSTER_HIER_MAX_HOSTS (1 << 20)
#define PF_CLUSTER_HIER_MAX_DEVICES (1 << 17) /* 131,072 GPUs */

typedef struct {
    const char *name; /* "host", "leaf", "spine", "pod" ... (copied) */
    /* level 0: GPUs per host (the default of the host kinds); level L >= 1: units of level
     * L - 1 in one unit of L; the top level may be 0: one unit holds every host */
    int count;
    double bw_gbps;  /* per GPU, > 0 */
    double lat_us;   /* >= 0 */
    double oversub;  /* >= 1, levels >= 1 (1 = full bisection); divides every level above */
} pf_cluster_level_t;

typedef struct {
    const char *name;         /* copied */
    const char *device_model; /* NULL or a device-model name (stored and written only) */
    int gpus;                 /* 0 = levels[0].count */
    double mem_bytes;         /* > 0 */
    double tflops;            /* >= 0 */
    double bw_gbps, lat_us;   /* inside the host; bw 0 / lat < 0 = levels[0]'s */
} pf_cluster_host_kind_t;

/* levels[0] is the host level; kinds[0] is every host's kind until set otherwise. Copies
 * everything; NULL when out of memory or when nlevels / nkinds / hosts are out of range (the
 * other fields are checked by pf_cluster_hier_validate). */
pf_cluster_hier_t *pf_cluster_hier_new(int hosts, const pf_cluster_level_t *levels, int nlevels,
                                       const pf_cluster_host_kind_t *kinds, int nkinds);
void pf_cluster_hier_destroy(pf_cluster_hier_t **h);
pf_cluster_hier_t *pf_cluster_hier_clone(const pf_cluster_hier_t *h);

/* An exception for host slot `host`: kind -1 = missing, else an index of kinds; nic_gbps > 0
 * caps the bandwidth of its GPUs above the host (a slower NIC), 0 = none. PF_EINPUT when out of
 * range. */
int pf_cluster_hier_set_host(pf_cluster_hier_t *h, int host, int kind, double nic_gbps);

/* The hierarchy of tensor-parallel groups (tp_groups.h): every host's GPUs cut into groups of T
 * consecutive ones, each group one "GPU" of the result with T times the peak, the same memory,
 * and the same links (rank k talks to rank k over the same level, so a group pair's slowest link
 * is its hosts' link). NULL when !pf_cluster_hier_divides(h, T) or out of memory. */
pf_cluster_hier_t *pf_cluster_hier_grouped(const pf_cluster_hier_t *h, int T);
/* T >= 1 divides levels[0].count and every kind's gpus. */
int pf_cluster_hier_divides(const pf_cluster_hier_t *h, int T);

/* A regular hierarchy: no exceptions (every host present, of kind 0, no NIC cap), so that a
 * device's links depend on its host's place only. O(hosts). */
int pf_cluster_hier_regular(const pf_cluster_hier_t *h);
/* Hosts in one unit of level l (the last unit of a level may hold fewer: h / span(l) numbers
 * it). */
int64_t pf_cluster_hier_span(const pf_cluster_hier_t *h, int level);
/* What a device on `host` of a regular hierarchy sees at each level l (out[l], nlevels entries,
 * returned): the other devices whose lowest common level with it is l (count may be 0), and the
 * link to them, the very values pf_cluster_hier_bw_gbps / _lat_us give for such a pair. */
typedef struct {
    double bw_gbps, lat_us;
    int64_t devices;
} pf_cluster_hier_reach_t;
int pf_cluster_hier_reach(const pf_cluster_hier_t *h, int host, pf_cluster_hier_reach_t *out);

/* Counts, bandwidths, latencies, oversubscription, kinds, that the levels hold every host, and
 * at most PF_CLUSTER_HIER_MAX_DEVICES devices; messages name the JSON path
 * ("hierarchy.levels[2].bw_gbps: zero"). O(hosts). */
int pf_cluster_hier_validate(const pf_cluster_hier_t *h, char *err, size_t errlen);
/* A device_model name as cluster files hold it, per device (format 1) or per host kind (NULL is
 * fine): non-empty, at most PF_GRAPH_DEVICE_MODEL_MAX bytes of UTF-8; "<where>: empty or longer
 * than 64 bytes". A name that is no preset is kept: ops on such a device keep the graph's times
 * (devkinds.h). */
int pf_cluster_hier_check_model(const char *name, const char *where, char *err, size_t errlen);

int pf_cluster_hier_hosts(const pf_cluster_hier_t *h);         /* slots, missing ones too */
int pf_cluster_hier_present_hosts(const pf_cluster_hier_t *h); /* slots with devices */
int pf_cluster_hier_ndevices(const pf_cluster_hier_t *h);
int pf_cluster_hier_nlevels(const pf_cluster_hier_t *h);
const pf_cluster_level_t *pf_cluster_hier_level(const pf_cluster_hier_t *h, int level);
int pf_cluster_hier_nkinds(const pf_cluster_hier_t *h);
/* A kind with its defaults filled in (gpus, bw_gbps, lat_us). */
const pf_cluster_host_kind_t *pf_cluster_hier_kind(const pf_cluster_hier_t *h, int k);
int pf_cluster_hier_host_kind(const pf_cluster_hier_t *h, int host); /* -1: missing */
double pf_cluster_hier_host_nic_gbps(const pf_cluster_hier_t *h, int host); /* 0: none */
int pf_cluster_hier_nexceptions(const pf_cluster_hier_t *h);

/* Between two GPUs whose lowest common level is l (no NIC exception): level l's bandwidth over
 * the oversubscription of every level from 1 to l - 1 (level 0: its own). */
double pf_cluster_hier_level_pair_gbps(const pf_cluster_hier_t *h, int level);
/* The lowest common level of two host slots (0 when equal). */
int pf_cluster_hier_common_level(const pf_cluster_hier_t *h, int host_a, int host_b);
/* Between two distinct devices on these hosts (equal hosts: inside the host). */
double pf_cluster_hier_bw_gbps(const pf_cluster_hier_t *h, int host_a, int host_b);
double pf_cluster_hier_lat_us(const pf_cluster_hier_t *h, int host_a, int host_b);
int pf_cluster_hier_has_latency(const pf_cluster_hier_t *h);
/* Whether some pair of devices talks over level L (a host with 2 GPUs for L = 0; two present
 * hosts under different units of L - 1 in one unit of L). O(hosts). */
int pf_cluster_hier_level_used(const pf_cluster_hier_t *h, int level);

/* Least, median and largest bandwidth over every ordered pair of distinct devices, exactly as
 * the dense matrix's statistics (cluster.h), without enumerating pairs: pairs are counted per
 * (common level, host signature pair). NAN when fewer than 2 devices; PF_ERR out of memory. */
int pf_cluster_hier_bw_stats(const pf_cluster_hier_t *h, double *min, double *median, double *max);

struct json_t;
typedef struct pf_jw pf_json_writer_t;
/* The "hierarchy" object of a cluster file; errors name "hierarchy.<path>". Validated. */
int pf_cluster_hier_from_json(struct json_t *obj, pf_cluster_hier_t **out, char *err,
                              size_t errlen);
/* Writes the "hierarchy" object (the key is the caller's). */
void pf_cluster_hier_write(const pf_cluster_hier_t *h, pf_json_writer_t *w);

#endif
