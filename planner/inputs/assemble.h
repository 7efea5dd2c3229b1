/* assemble: measurement records of one or many hosts -> a cluster (planner/ir/cluster.h) with the
 * measurements' provenance.
 *
 * Devices are numbered host by host (hosts in the order their first device record arrived),
 * by CUDA ordinal inside a host. Matrix entry (a, b), a != b, comes from the postal fit of:
 *   - same host: the link record a -> b; with several (peer access on and off), the one with
 *     the highest fitted bandwidth, since that is what a training run gets; else b -> a;
 *   - different hosts: the host -> host record (index PF_END_HOST on both ends); else the
 *     reverse one. Every device pair of two hosts shares the hosts' network link.
 * A pair with no record is an error that names it: a cluster file never gets an invented link. */
#ifndef PF_ASSEMBLE_H
#define PF_ASSEMBLE_H

#include "planner/ir/cluster.h"
#include "planner/inputs/record.h"

#include <stddef.h>

typedef struct pf_assembly pf_assemble_t;

/* One link record and its fit, as kept by the assembly. */
typedef struct {
    pf_record_link_t rec;
    pf_postal_t fit;
    int used; /* matrix entries taken from it by the last build */
} pf_link_fit_t;

pf_assemble_t *pf_assemble_new(const char *cluster_name, char *err, size_t errlen);
void pf_assemble_destroy(pf_assemble_t **a);

/* Validate and keep a copy. PF_EINPUT names the problem ("device gpu-a:3: mem_bytes is 0",
 * "device gpu-a:3 given twice", "link gpu-a:0 -> gpu-a:1: point 2 (...)"). Links are fitted here
 * (pf_postal_fit with PF_POSTAL_TOL). */
int pf_assemble_add_device(pf_assemble_t *a, const pf_record_device_t *d, char *err, size_t errlen);
int pf_assemble_add_link(pf_assemble_t *a, const pf_record_link_t *l, char *err, size_t errlen);

int pf_assemble_ndevices(const pf_assemble_t *a);
int pf_assemble_nlinks(const pf_assemble_t *a);
const pf_record_device_t *pf_assemble_device(const pf_assemble_t *a, int i); /* cluster order */
const pf_link_fit_t *pf_assemble_link(const pf_assemble_t *a, int i);     /* arrival order */
/* Index of the link record matrix entry (src, dst) came from in the last build; -1 before. */
int pf_assemble_origin(const pf_assemble_t *a, int src, int dst);

/* The cluster: devices (host = host position, name, mem_bytes, tflops measured), bandwidth
 * (GB/s) and latency (us) from the fits. Validated before it is returned. */
int pf_assemble_build(pf_assemble_t *a, pf_cluster_t **out, char *err, size_t errlen);

/* The hierarchy (format 2, cluster_hier.h) a built matrix cluster fits, when it fits one: every
 * host holds the same number of GPUs of one memory, their peaks, the in-host bandwidths and the
 * between-host bandwidths are each within `tol` (a fraction, 0.1 = 10%) of their median; then a
 * host level at the in-host medians and one network level at the between-host ones, devices
 * named node<h>/gpu<g> in the same order (the provenance keeps the measured names). PF_OK with
 * *out, PF_EINFEASIBLE with what does not fit in `why`, PF_ERR out of memory. O(D^2): a
 * measured cluster is small. */
#define PF_ASSEMBLE_HIER_TOL 0.10
int pf_assemble_hierarchy(const pf_cluster_t *c, double tol, pf_cluster_t **out, char *why,
                          size_t whylen);
/* *c replaced by its hierarchy at PF_ASSEMBLE_HIER_TOL when it fits one (else, or out of
 * memory, left as it is): what a profiling round writes. */
void pf_assemble_prefer_hierarchy(pf_cluster_t **c);

/* Write the cluster with a "provenance" section: the tool, every device record (source,
 * measured_by, when, memory bandwidth, SMs, clock) and every link record with its fit
 * (lat_us, gbps, fit_rel_rms, crossover_bytes, the look-up table below the crossover) and the
 * matrix entries it was used for. `c` must come from pf_assemble_build on `a`. */
int pf_assemble_save(const pf_assemble_t *a, const pf_cluster_t *c, const char *path, char *err,
                     size_t errlen);
/* The same into a malloc'd NUL-terminated string (*json, *len without the NUL). */
int pf_assemble_json(const pf_assemble_t *a, const pf_cluster_t *c, char **json, size_t *len,
                     char *err, size_t errlen);

#endif
