/* cluster: the machines (DESIGN.md "Cluster"): devices, hosts, and the postal-model look-up
 * table (bandwidth and latency between every ordered pair of devices).
 *
 * Device i of the file is index i here; matrices are D x D, row = sender. Bandwidth need not be
 * symmetric (a profiler measures each direction), but every off-diagonal entry must be positive
 * and finite; the diagonal is ignored (a stage never talks to itself over the network). */
#ifndef PF_CLUSTER_H
#define PF_CLUSTER_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

typedef struct pf_cluster pf_cluster_t;

typedef struct {
    int64_t id;       /* id in the file; unique */
    int host;         /* machine index, >= 0 */
    const char *name; /* owned by the cluster once set */
    double mem_bytes; /* > 0 */
    double tflops;    /* peak, for analytic op costs; 0 = unknown */
    /* the device model (devmodel.h) that prices ops on it: a preset name such as "a100-80g",
     * owned by the cluster once set; NULL = not said (ops keep the graph's times) */
    const char *device_model;
} pf_device_t;

/* All bandwidths start at 0 (invalid off the diagonal) and latencies at 0. */
pf_cluster_t *pf_cluster_new(const char *name, int ndevices);
/* A cluster described by its hierarchy (cluster_hier.h, format 2; validate it first): devices
 * host slot by host slot, "node<h>/gpu<g>", memory and peak of their host's kind; nothing per
 * pair is stored. Takes h (on success only). NULL when out of memory. */
typedef struct pf_cluster_hier pf_cluster_hier_t;
pf_cluster_t *pf_cluster_new_hier(const char *name, pf_cluster_hier_t *h);
/* NULL for a matrix cluster. */
const pf_cluster_hier_t *pf_cluster_hierarchy(const pf_cluster_t *c);
void pf_cluster_destroy(pf_cluster_t **c);

int pf_cluster_set_device(pf_cluster_t *c, int i, const pf_device_t *d); /* copies name, model */
/* Matrix clusters only (a hierarchy ignores them). */
void pf_cluster_set_bw(pf_cluster_t *c, int a, int b, double gbps);
void pf_cluster_set_lat(pf_cluster_t *c, int a, int b, double us);
/* Set both directions. */
void pf_cluster_set_link(pf_cluster_t *c, int a, int b, double gbps, double lat_us);

/* Checks devices (unique ids, positive memory, host >= 0) and matrices (off-diagonal bandwidth
 * > 0 and finite, latency >= 0 and finite). PF_EINPUT with "bandwidth_gbps[2][5]: zero".
 * O(D^2) for a matrix, O(D log D + hosts) for a hierarchy: readers and builders call it once;
 * a cluster handed to the planner is taken as valid. */
int pf_cluster_validate(const pf_cluster_t *c, char *err, size_t errlen);

const char *pf_cluster_name(const pf_cluster_t *c);
int pf_cluster_ndevices(const pf_cluster_t *c);
int pf_cluster_nhosts(const pf_cluster_t *c); /* distinct host values */
const pf_device_t *pf_cluster_device(const pf_cluster_t *c, int i);
double pf_cluster_bw_gbps(const pf_cluster_t *c, int a, int b);
double pf_cluster_lat_us(const pf_cluster_t *c, int a, int b);
/* Row-major D x D arrays. A hierarchy (format 2) computes them on the first call (then they
 * live as long as the cluster); NULL above PF_CLUSTER_MATRIX_MAX_DEVICES or out of memory:
 * paths that need the matrix (planner/map/map_symmetry.c) must refuse such a cluster. */
#define PF_CLUSTER_MATRIX_MAX_DEVICES 16384
const double *pf_cluster_bw_matrix(const pf_cluster_t *c);
const double *pf_cluster_lat_matrix(const pf_cluster_t *c);
int pf_cluster_has_latency(const pf_cluster_t *c);

/* Postal model: ms to send `bytes` from a to b = latency + bytes / bandwidth. 0 when a == b. */
double pf_cluster_xfer_ms(const pf_cluster_t *c, int a, int b, double bytes);

/* Off-diagonal bandwidth statistics (the flat bandwidth B_flat defaults to the median). */
double pf_cluster_bw_min(const pf_cluster_t *c);
double pf_cluster_bw_median(const pf_cluster_t *c);
double pf_cluster_bw_max(const pf_cluster_t *c);
double pf_cluster_min_mem_bytes(const pf_cluster_t *c);
int pf_cluster_is_symmetric(const pf_cluster_t *c);

int pf_cluster_load(const char *path, pf_cluster_t **out, char *err, size_t errlen);
int pf_cluster_load_buffer(const char *text, size_t len, const char *label, pf_cluster_t **out,
                           char *err, size_t errlen);
/* The cluster of a JSON root already parsed (check parses once to tell the kind); the root stays
 * the caller's, errors start with label. */
struct json_t;
int pf_cluster_from_json(struct json_t *root, const char *label, pf_cluster_t **out, char *err,
                    size_t errlen);
int pf_cluster_save(const pf_cluster_t *c, const char *path, char *err, size_t errlen);
/* The same, and `extra` (when not NULL) writes more top-level key/value pairs after the matrices
 * with the json writer: the profiler's "provenance" section. Readers ignore unknown keys. */
typedef struct pf_jw pf_json_writer_t;
int pf_cluster_save_extra(const pf_cluster_t *c, const char *path,
                          void (*extra)(pf_json_writer_t *w, const void *ctx), const void *extra_ctx,
                          char *err, size_t errlen);
/* The same onto an open stream (not closed): a cluster sent over the wire as text. */
int pf_cluster_write_extra(const pf_cluster_t *c, FILE *f,
                           void (*extra)(pf_json_writer_t *w, const void *ctx), const void *extra_ctx,
                           char *err, size_t errlen);

#endif
