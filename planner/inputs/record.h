/* record: what one profiler agent measured, in plain structs with fixed-size fields so that a
 * MEASUREMENT message can carry them field by field (no pointers to follow).
 *
 * A device record describes one GPU (source "gpu") or, on a host with no GPU, the host itself
 * as one device (source "cpu"). A link record is one size sweep from a sender to a receiver:
 * between two GPUs of one host (peer copies), between a host's memory and a GPU, or between
 * two hosts (network ping-pong, index -1 on both ends: it stands for every device pair across
 * those two hosts). Times are per message, milliseconds; the median of the repetitions. */
#ifndef PF_PLANNER_RECORD_H
#define PF_PLANNER_RECORD_H

#include "planner/inputs/postal.h"

#define PF_REC_NAME 64

typedef enum { PF_SRC_CPU = 0, PF_SRC_GPU = 1 } pf_record_source_t;
const char *pf_record_source_name(pf_record_source_t s); /* "cpu", "gpu" */

typedef struct {
    char host[PF_REC_NAME];        /* the agent's host name: devices group by it */
    int index;                     /* device index within the host (CUDA ordinal; 0 for cpu) */
    char name[PF_REC_NAME];        /* "NVIDIA H100 80GB HBM3", "cpu" */
    pf_record_source_t source;
    double mem_bytes;              /* device memory (host RAM for a cpu device) */
    double tflops;                 /* measured dense GEMM TFLOP/s (bf16 for gpu); 0 = unknown */
    double mem_gbps;               /* measured copy bandwidth, read + write; 0 = unknown */
    int sm_count;                  /* 0 for cpu */
    double clock_mhz;              /* SM clock; 0 = unknown */
    char measured_by[PF_REC_NAME]; /* agent that took the measurement */
    double when_unix_s;            /* wall-clock time of the measurement */
} pf_record_device_t;

/* Link ends: index >= 0 a device of that host, PF_END_HOST the host's memory / NIC. */
#define PF_END_HOST (-1)

typedef struct {
    char src_host[PF_REC_NAME];
    int src_index;
    char dst_host[PF_REC_NAME];
    int dst_index;
    pf_record_source_t source;     /* gpu: CUDA copies; cpu: network / memory probes */
    char method[PF_REC_NAME];      /* "cuda_peer_copy", "cuda_copy_no_p2p", "zmq_tcp_pingpong" */
    char measured_by[PF_REC_NAME];
    double when_unix_s;
    int topo_level;                /* GPU pairs: NVML common ancestor (0 board, 10 one switch,
                                    * 20 several, 30 host bridge, 40 NUMA node, 50 system);
                                    * -1 unknown (no NVML, or not a GPU pair) */
    int nvlinks;                   /* NVLinks from src to dst; 0 when none or unknown */
    int nsizes;                    /* <= PF_SWEEP_MAX */
    double bytes[PF_SWEEP_MAX];
    double ms[PF_SWEEP_MAX];
} pf_record_link_t;

/* Bounded copy into a PF_REC_NAME field. */
void pf_record_name(char dst[PF_REC_NAME], const char *src);

/* Every field of a record that may have come off the wire: names NUL-terminated (host
 * non-empty), indices and enums in range, numbers finite and non-negative, a sweep of 2 ..
 * PF_SWEEP_MAX sizes with positive times. PF_EINPUT names the record and the field. What the
 * records mean together (a device given twice, a sweep that fits no line) is the assembly's to
 * say. */
int pf_record_check_device(const pf_record_device_t *d, char *err, size_t errlen);
int pf_record_check_link(const pf_record_link_t *l, char *err, size_t errlen);

#endif
