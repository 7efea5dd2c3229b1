/* cpu_probes: what every host can measure without a GPU. Every record they fill says "cpu".
 *
 * Memory: a STREAM-like copy (McCalpin's "Copy" kernel, a[i] = b[i]) over all OpenMP threads,
 * counted read + write as STREAM counts it.
 * Network: a ZeroMQ ping-pong between two endpoints. One side runs an echo (a thread that
 * answers every message with itself), the other sends each size of a sweep and takes the
 * fastest round trip / 2 as the one-way time, which the postal fit then turns into latency and
 * bandwidth. Between agents on two hosts the broker pairs them and tells one to echo and the
 * other to send; on one host it is a loopback measurement of the TCP stack. */
#ifndef PF_CPU_PROBES_H
#define PF_CPU_PROBES_H

#include "profiler/record.h"

#include <stddef.h>

/* Copy `bytes` (per array) `reps` times; best repetition (STREAM reports the best). */
int pf_cpu_probes_mem_gbps(size_t bytes, int reps, double *gbps, char *err, size_t errlen);

/* This host as one device record: name "cpu", RAM as memory, the given measured bandwidth. */
void pf_cpu_probes_device_rec(pf_record_device_t *d, double mem_gbps);

typedef struct pf_cpu_probes_echo pf_cpu_probes_echo_t;
/* Bind (e.g. tcp://0.0.0.0:* or tcp://127.0.0.1:*) and start answering. */
pf_cpu_probes_echo_t *pf_cpu_probes_echo_new(const char *bind_endpoint, char *err, size_t errlen);
/* The bound endpoint with its port resolved ("tcp://127.0.0.1:41234"). */
const char *pf_cpu_probes_echo_endpoint(const pf_cpu_probes_echo_t *e);
void pf_cpu_probes_echo_destroy(pf_cpu_probes_echo_t **e);

/* Send each of `nsizes` sizes (bytes >= 1, <= 1 GiB) `reps` times (after one warm-up) to an
 * echo, ms_out[i] = fastest round trip / 2. PF_ERR "no answer from EP within T s" on timeout. */
int pf_cpu_probes_pingpong(const char *connect_endpoint, const double *bytes, int nsizes, int reps,
                           double timeout_s, double *ms_out, char *err, size_t errlen);

/* The same, filled into a link record between two hosts (index PF_END_HOST on both ends),
 * method "zmq_tcp_pingpong", stamped with this host and the time. */
int pf_cpu_probes_pingpong_rec(const char *connect_endpoint, const char *src_host,
                               const char *dst_host, const double *bytes, int nsizes, int reps,
                               double timeout_s, pf_record_link_t *rec, char *err, size_t errlen);

#endif
