/* local: profile this host (planfarm profile --local; later the agent's answer to PROFILE).
 *
 * With libpfcuda.so and at least one GPU: one device record per GPU (memory, SMs, clock,
 * measured bf16 GEMM TFLOP/s at 8192^3 and HBM copy bandwidth), a copy sweep for every ordered
 * GPU pair (peer access on; also off when asked), pinned host <-> device sweeps per GPU, and
 * NCCL all-reduce / all-gather bus bandwidth over all GPUs when NCCL loads. Every record says
 * "gpu".
 * Without (no library, or no GPU): the host itself as one "cpu" device (RAM, STREAM copy
 * bandwidth) and a loopback TCP ping-pong sweep, reported but not part of a one-device cluster.
 * Either way the records go into an assembly, from which a cluster is built. */
#ifndef PF_LOCAL_H
#define PF_LOCAL_H

#include "planner/inputs/assemble.h"
#include "profiler/cuda_loader.h"

#include <stddef.h>

typedef struct {
    int nsizes;                  /* 0 = the default sweep by x4 from 4 B: to 256 MiB for GPU
                                  * copies (14 sizes), to 16 MiB for the ping-pong (12) */
    double sizes[PF_SWEEP_MAX];
    int reps;                    /* timed runs per size (GPU: median, ping-pong: fastest);
                                  * default 10 */
    int peer_off;                /* also sweep GPU pairs with peer access off */
    size_t cpu_stream_bytes;     /* STREAM array size; default 256 MiB */
} pf_local_opts_t;

void pf_local_opts_default(pf_local_opts_t *o);

typedef struct {
    char cuda_status[256];       /* "" when the CUDA probes ran; else why not (the loader's
                                  * message, or "no GPU found") */
    int ngpus;
    double nccl_all_reduce_gbps; /* bus bandwidth at the largest sweep size; 0 = not measured */
    double nccl_all_gather_gbps;
    char nccl_status[128];
    int has_loopback;            /* CPU mode: loopback ping-pong fitted */
    pf_link_fit_t loopback;      /* its record (always, in CPU mode) and fit */
    char loopback_status[128];   /* why it could not be fitted */
} pf_local_report_t;

/* Called before each probe: done of total probes finished, `what` the one starting. */
typedef void (*pf_progress_fn)(void *ctx, int done, int total, const char *what);

/* cuda may be NULL (CPU mode); cuda_status then says why (pass the loader's message). */
int pf_local_profile(const pf_local_opts_t *o, const pf_cuda_loader_t *cuda,
                     const char *cuda_status, pf_progress_fn progress, void *progress_ctx,
                     pf_assemble_t *into, pf_local_report_t *rep, char *err, size_t errlen);

/* The GPU timer for pf_calibrate_graph: ctx is a pf_local_gpu_t. */
typedef struct {
    const pf_cuda_api_t *api;
    int dev;
    int reps;
} pf_local_gpu_t;
int pf_local_op_timer(void *ctx, const pf_op_probe_t *probe, double *fwd_ms, double *bwd_ms,
                      char *err, size_t errlen);

#endif
