/* cuda_abi: the C interface between planfarm and libpfcuda.so (profiler/cuda/), the only place
 * that knows CUDA. planfarm never links CUDA: it dlopens the library (profiler/cuda_loader.c)
 * and asks its one exported symbol, pf_cuda_api(version), for this table. The table only grows
 * at the end; a library that cannot serve the version asked for returns NULL.
 *
 * Functions return 0 (PF_OK), -1 (PF_ERR: CUDA failed, the message says where) or -2
 * (PF_EINPUT: bad argument) and write the reason into err. Times are CUDA-event milliseconds,
 * the median of `reps` timed runs after warm-up runs. */
#ifndef PF_CUDA_ABI_H
#define PF_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PF_CUDA_ABI_VERSION 1u
#define PF_CUDA_ENTRY "pf_cuda_api"
#define PF_CUDA_HOST (-1) /* a copy end in pinned host memory */

typedef struct {
    char name[96];
    char pci_bus_id[32];
    double mem_bytes;
    int sm_count;
    int cc_major, cc_minor;
    double sm_clock_mhz;  /* maximum SM clock */
    double mem_clock_mhz; /* 0 when the runtime no longer reports it */
} pf_gpu_info_t;

enum { PF_DT_BF16 = 0, PF_DT_FP16 = 1, PF_DT_FP32 = 2 };

/* What to time. Shapes are the graph's: row-major, the last dimension contiguous.
 *   GEMM:        (m x k) @ (k x n), `batch` independent ones. bwd = dX (m x n)(n x k) +
 *                dW (k x m)(m x n): the two GEMMs of a linear layer's backward.
 *   LAYERNORM:   m rows of n; bwd computes dx (and dgamma, dbeta per row block).
 *   SOFTMAX:     m rows of n, `causal` masks j > i % n.
 *   ELEMENTWISE: m elements, `inputs` = 1 (gelu-like: bwd reads x and dy) or 2 (add: bwd
 *                writes both input gradients).
 *   ATTENTION:   `batch` x heads in m, sequence n, head dimension k: Q K^T, softmax (causal when
 *                set), P V; bwd the four GEMMs and the softmax backward. Not fused: it times
 *                what the unfused operator costs, an upper bound on a flash kernel. */
enum { PF_CUDA_OP_GEMM = 0, PF_CUDA_OP_LAYERNORM, PF_CUDA_OP_SOFTMAX, PF_CUDA_OP_ELEMENTWISE, PF_CUDA_OP_ATTENTION };

typedef struct {
    int kind;
    int dtype;
    int64_t m, n, k;
    int64_t batch;
    int inputs;
    int causal;
} pf_op_probe_t;

enum { PF_NCCL_ALL_REDUCE = 0, PF_NCCL_ALL_GATHER = 1 };

typedef struct {
    uint32_t abi_version;
    uint32_t struct_size;
    const char *build; /* "CUDA 13.0", what the library was compiled against */
    int (*device_count)(int *n, char *err, size_t errlen);
    int (*device_info)(int dev, pf_gpu_info_t *out, char *err, size_t errlen);
    /* NVML common ancestor of two GPUs (0 same board, 10 single switch, 20 multiple switches,
     * 30 host bridge, 40 NUMA node, 50 system) and NVLink count between them; PF_ERR when
     * libnvidia-ml cannot be loaded. */
    int (*topology)(int a, int b, int *level, int *nvlinks, char *err, size_t errlen);
    /* Copy sweep from src to dst (device ordinals or PF_CUDA_HOST, pinned). `peer` turns peer
     * access on for a device pair (off: the driver stages through host memory). */
    int (*copy_sweep)(int src, int dst, int peer, const double *bytes, int nsizes, int reps,
                      double *ms, char *err, size_t errlen);
    /* Device-to-device copy of `bytes` inside one GPU: HBM bandwidth = 2 bytes / time. */
    int (*hbm_copy)(int dev, double bytes, int reps, double *ms, char *err, size_t errlen);
    int (*op_time)(int dev, const pf_op_probe_t *op, int reps, double *fwd_ms, double *bwd_ms,
                   char *err, size_t errlen);
    /* nccl-tests' bus bandwidth over all GPUs of the node (all-reduce: algbw 2(n-1)/n,
     * all-gather: algbw (n-1)/n); PF_ERR when libnccl cannot be loaded or there is one GPU. */
    int (*nccl_bus_gbps)(int collective, double bytes, int reps, double *gbps, char *err,
                         size_t errlen);
} pf_cuda_api_t;

typedef const pf_cuda_api_t *(*pf_cuda_api_fn)(uint32_t abi_version);

#ifdef __cplusplus
}
#endif
#endif
