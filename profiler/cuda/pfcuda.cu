/* libpfcuda.so: the CUDA probes behind profiler/cuda_abi.h. Built only where nvcc exists and
 * loaded by planfarm with dlopen; nothing else in planfarm includes a CUDA header.
 *
 * Timing follows the method of shared/data/h100 (and nvbandwidth / nccl-tests): warm-up runs,
 * then CUDA events around each timed run on one stream, the median reported. NVML and NCCL are
 * opened with dlopen too, so the library loads where only the CUDA runtime and cuBLAS exist. */
#include "profiler/cuda_abi.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <vector>

#define WARMUP 3

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

#define CK(call)                                                                                \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) {                                                                \
            rc = fail(err, errlen, -1, "%s: %s", #call, cudaGetErrorString(e_));                \
            goto out;                                                                           \
        }                                                                                       \
    } while (0)

static double median(std::vector<double> &v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- devices ---- */

static int device_count(int *n, char *err, size_t errlen)
{
    cudaError_t e = cudaGetDeviceCount(n);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
        *n = 0;
        return 0;
    }
    if (e != cudaSuccess) {
        *n = 0;
        return fail(err, errlen, -1, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
    }
    return 0;
}

static int device_info(int dev, pf_gpu_info_t *o, char *err, size_t errlen)
{
    cudaDeviceProp p;
    int rc = 0, clk = 0, mclk = 0;
    memset(o, 0, sizeof *o);
    CK(cudaGetDeviceProperties(&p, dev));
    snprintf(o->name, sizeof o->name, "%.95s", p.name);
    cudaDeviceGetPCIBusId(o->pci_bus_id, sizeof o->pci_bus_id, dev);
    o->mem_bytes = (double)p.totalGlobalMem;
    o->sm_count = p.multiProcessorCount;
    o->cc_major = p.major;
    o->cc_minor = p.minor;
    if (cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev) == cudaSuccess)
        o->sm_clock_mhz = clk / 1000.0;
    if (cudaDeviceGetAttribute(&mclk, cudaDevAttrMemoryClockRate, dev) == cudaSuccess)
        o->mem_clock_mhz = mclk / 1000.0;
    cudaGetLastError();
out:
    return rc;
}

/* NVML through dlopen: only the few calls needed, declared here. */
typedef void *nvml_dev_t;
static int topology(int a, int b, int *level, int *nvlinks, char *err, size_t errlen)
{
    void *dl = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    *level = -1;
    *nvlinks = 0;
    if (!dl)
        return fail(err, errlen, -1, "NVML: %s", dlerror());
    typedef int (*init_t)(void);
    typedef int (*by_bus_t)(const char *, nvml_dev_t *);
    typedef int (*anc_t)(nvml_dev_t, nvml_dev_t, int *);
    typedef int (*lstate_t)(nvml_dev_t, unsigned, int *);
    typedef int (*lremote_t)(nvml_dev_t, unsigned, void *);
    init_t init = (init_t)dlsym(dl, "nvmlInit_v2");
    init_t shut = (init_t)dlsym(dl, "nvmlShutdown");
    by_bus_t by_bus = (by_bus_t)dlsym(dl, "nvmlDeviceGetHandleByPciBusId_v2");
    anc_t anc = (anc_t)dlsym(dl, "nvmlDeviceGetTopologyCommonAncestor");
    lstate_t lstate = (lstate_t)dlsym(dl, "nvmlDeviceGetNvLinkState");
    lremote_t lremote = (lremote_t)dlsym(dl, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    char ba[32], bb[32];
    nvml_dev_t ha, hb;
    int rc = 0;
    if (!init || !shut || !by_bus || !anc || init() != 0) {
        dlclose(dl);
        return fail(err, errlen, -1, "NVML: cannot initialise");
    }
    if (cudaDeviceGetPCIBusId(ba, sizeof ba, a) != cudaSuccess ||
        cudaDeviceGetPCIBusId(bb, sizeof bb, b) != cudaSuccess || by_bus(ba, &ha) != 0 ||
        by_bus(bb, &hb) != 0 || anc(ha, hb, level) != 0) {
        rc = fail(err, errlen, -1, "NVML: no topology for GPUs %d and %d", a, b);
    } else if (lstate && lremote) {
        /* nvmlPciInfo_t: char busIdLegacy[16], then unsigned domain, bus, device, ...: compare
         * the remote end of each active link of a with b's domain:bus:device. */
        unsigned dom = 0, bus = 0, dv = 0, fn = 0;
        sscanf(bb, "%x:%x:%x.%x", &dom, &bus, &dv, &fn);
        for (unsigned l = 0; l < 18; l++) {
            int active = 0;
            unsigned pci[64];
            if (lstate(ha, l, &active) != 0 || !active || lremote(ha, l, pci) != 0)
                continue;
            if (pci[4] == dom && pci[5] == bus && pci[6] == dv)
                (*nvlinks)++;
        }
    }
    shut();
    dlclose(dl);
    return rc;
}

/* ---- copies ---- */

static int copy_sweep(int src, int dst, int peer, const double *bytes, int nsizes, int reps,
                      double *ms, char *err, size_t errlen)
{
    int rc = 0, ndev = 0;
    void *sbuf = NULL, *dbuf = NULL;
    cudaStream_t st = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    size_t maxb = 0;
    int timing_dev = src >= 0 ? src : dst;
    device_count(&ndev, NULL, 0);
    if (nsizes < 1 || reps < 1 || src < PF_CUDA_HOST || dst < PF_CUDA_HOST || src >= ndev ||
        dst >= ndev || (src < 0 && dst < 0))
        return fail(err, errlen, -2, "copy sweep %d -> %d: bad arguments", src, dst);
    for (int i = 0; i < nsizes; i++)
        maxb = std::max(maxb, (size_t)bytes[i]);
    if (src >= 0 && dst >= 0 && src != dst) {
        int can = 0;
        cudaDeviceCanAccessPeer(&can, src, dst);
        CK(cudaSetDevice(src));
        cudaError_t e = peer && can ? cudaDeviceEnablePeerAccess(dst, 0)
                                    : cudaDeviceDisablePeerAccess(dst);
        if (e != cudaErrorPeerAccessAlreadyEnabled && e != cudaErrorPeerAccessNotEnabled)
            CK(e);
        cudaGetLastError();
        if (peer && !can) {
            rc = fail(err, errlen, -1, "GPU %d cannot access GPU %d as a peer", src, dst);
            goto out;
        }
    }
    if (src < 0)
        CK(cudaMallocHost(&sbuf, maxb));
    else {
        CK(cudaSetDevice(src));
        CK(cudaMalloc(&sbuf, maxb));
    }
    if (dst < 0)
        CK(cudaMallocHost(&dbuf, maxb));
    else {
        CK(cudaSetDevice(dst));
        CK(cudaMalloc(&dbuf, maxb));
    }
    CK(cudaSetDevice(timing_dev));
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < nsizes; i++) {
        size_t n = (size_t)bytes[i];
        std::vector<double> t;
        for (int r = -WARMUP; r < reps; r++) {
            CK(cudaEventRecord(e0, st));
            if (src >= 0 && dst >= 0)
                CK(cudaMemcpyPeerAsync(dbuf, dst, sbuf, src, n, st));
            else
                CK(cudaMemcpyAsync(dbuf, sbuf, n, cudaMemcpyDefault, st));
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float f = 0;
            CK(cudaEventElapsedTime(&f, e0, e1));
            if (r >= 0)
                t.push_back(f);
        }
        ms[i] = median(t);
    }
out:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (st) cudaStreamDestroy(st);
    if (src < 0) cudaFreeHost(sbuf); else if (sbuf) { cudaSetDevice(src); cudaFree(sbuf); }
    if (dst < 0) cudaFreeHost(dbuf); else if (dbuf) { cudaSetDevice(dst); cudaFree(dbuf); }
    return rc;
}

static int hbm_copy(int dev, double bytes, int reps, double *ms, char *err, size_t errlen)
{
    int rc = 0;
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    std::vector<double> t;
    CK(cudaSetDevice(dev));
    CK(cudaMalloc(&a, (size_t)bytes));
    CK(cudaMalloc(&b, (size_t)bytes));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int r = -WARMUP; r < reps; r++) {
        float f = 0;
        CK(cudaEventRecord(e0, 0));
        CK(cudaMemcpyAsync(b, a, (size_t)bytes, cudaMemcpyDeviceToDevice, 0));
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&f, e0, e1));
        if (r >= 0)
            t.push_back(f);
    }
    *ms = median(t);
out:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return rc;
}

/* ---- operator kernels (bf16/fp16/fp32 storage, fp32 arithmetic) ---- */

template <typename T> __device__ __forceinline__ float ld(const T *p, int64_t i) { return (float)p[i]; }
template <> __device__ __forceinline__ float ld<__nv_bfloat16>(const __nv_bfloat16 *p, int64_t i) { return __bfloat162float(p[i]); }
template <> __device__ __forceinline__ float ld<__half>(const __half *p, int64_t i) { return __half2float(p[i]); }
template <typename T> __device__ __forceinline__ void st(T *p, int64_t i, float v) { p[i] = (T)v; }
template <> __device__ __forceinline__ void st<__nv_bfloat16>(__nv_bfloat16 *p, int64_t i, float v) { p[i] = __float2bfloat16(v); }
template <> __device__ __forceinline__ void st<__half>(__half *p, int64_t i, float v) { p[i] = __float2half(v); }

__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x))); }
__device__ __forceinline__ float gelu_grad(float x)
{
    float u = 0.7978845608f * (x + 0.044715f * x * x * x), th = tanhf(u);
    return 0.5f * (1.f + th) + 0.5f * x * (1.f - th * th) * 0.7978845608f * (1.f + 0.134145f * x * x);
}

/* Inputs hold values in [-1, 1) from an integer hash, not zeros: tensor cores draw less power
 * on zeros and would clock higher than on real activations. */
template <typename T> __global__ void k_fill(T *p, int64_t n, uint32_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        st(p, i, (float)(h & 0xffff) / 32768.f - 1.f);
    }
}

/* mode 0: y = gelu(a); 1: dx = dy * gelu'(a); 2: y = a + b; 3: da = db = dy */
template <typename T>
__global__ void k_elementwise(int mode, int64_t n, const T *a, const T *b, T *y, T *y2)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float x = ld(a, i);
        switch (mode) {
        case 0: st(y, i, gelu(x)); break;
        case 1: st(y, i, ld(b, i) * gelu_grad(x)); break;
        case 2: st(y, i, x + ld(b, i)); break;
        default: st(y, i, x); st(y2, i, x); break;
        }
    }
}

__device__ float block_sum(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    __syncthreads();
    if (l == 0)
        sh[w] = v;
    __syncthreads();
    float s = 0;
    for (int i = 0; i < (int)(blockDim.x / 32); i++)
        s += sh[i];
    return s;
}

__device__ float block_max(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    __syncthreads();
    if (l == 0)
        sh[w] = v;
    __syncthreads();
    float s = -INFINITY;
    for (int i = 0; i < (int)(blockDim.x / 32); i++)
        s = fmaxf(s, sh[i]);
    return s;
}

/* One block per row. Forward: y = (x - mean) / sd * g + b. Backward (dx only, the usual
 * formula): dx = (g dy - mean(g dy) - xhat mean(g dy xhat)) / sd. */
template <typename T>
__global__ void k_layernorm(int bwd, int64_t cols, const T *x, const T *dy, const float *g, T *y)
{
    __shared__ float sh[32];
    const T *xr = x + blockIdx.x * cols;
    float s = 0, s2 = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = ld(xr, j);
        s += v;
        s2 += v * v;
    }
    float mean = block_sum(s, sh) / cols;
    float var = block_sum(s2, sh) / cols - mean * mean;
    float rsd = rsqrtf(var + 1e-5f);
    if (!bwd) {
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            st(y + blockIdx.x * cols, j, (ld(xr, j) - mean) * rsd * g[j]);
        return;
    }
    const T *dr = dy + blockIdx.x * cols;
    float a = 0, b = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float gd = g[j] * ld(dr, j), xh = (ld(xr, j) - mean) * rsd;
        a += gd;
        b += gd * xh;
    }
    a = block_sum(a, sh) / cols;
    b = block_sum(b, sh) / cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float xh = (ld(xr, j) - mean) * rsd;
        st(y + blockIdx.x * cols, j, (g[j] * ld(dr, j) - a - xh * b) * rsd);
    }
}

/* One block per row; causal rows i keep columns j <= i % cols. Backward: dx = y (dy - sum(dy y)). */
template <typename T>
__global__ void k_softmax(int bwd, int causal, int64_t cols, const T *x, const T *dy, T *y)
{
    __shared__ float sh[32];
    int64_t row = blockIdx.x, lim = causal ? row % cols + 1 : cols;
    const T *xr = x + row * cols;
    T *yr = y + row * cols;
    if (bwd) {
        const T *dr = dy + row * cols;
        float s = 0;
        for (int64_t j = threadIdx.x; j < lim; j += blockDim.x)
            s += ld(dr, j) * ld(xr, j);
        s = block_sum(s, sh);
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            st(yr, j, j < lim ? ld(xr, j) * (ld(dr, j) - s) : 0.f);
        return;
    }
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < lim; j += blockDim.x)
        m = fmaxf(m, ld(xr, j));
    m = block_max(m, sh);
    float s = 0;
    for (int64_t j = threadIdx.x; j < lim; j += blockDim.x)
        s += __expf(ld(xr, j) - m);
    s = block_sum(s, sh);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        st(yr, j, j < lim ? __expf(ld(xr, j) - m) / s : 0.f);
}

/* ---- timing harness ---- */

struct ctx_t {
    cublasHandle_t h;
    cudaStream_t st;
    int dtype;
    size_t esize;
    cudaDataType_t ct;
};

/* Row-major C(m x n) = op(A) op(B), batched with strides; cuBLAS is column-major, so compute
 * C^T = op(B)^T op(A)^T by swapping the operands. ta/tb: A stored k x m / B stored n x k. */
static cublasStatus_t gemm(ctx_t &c, int ta, int tb, int64_t m, int64_t n, int64_t k,
                           const void *A, const void *B, void *C, int64_t batch)
{
    float one = 1, zero = 0;
    int64_t lda = ta ? m : k, ldb = tb ? k : n;
    return cublasGemmStridedBatchedEx(
        c.h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
        (int)k, &one, B, c.ct, (int)ldb, (long long)(k * n), A, c.ct, (int)lda,
        (long long)(m * k), &zero, C, c.ct, (int)n, (long long)(m * n), (int)batch,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

template <typename T>
static void launch(ctx_t &c, const pf_op_probe_t *op, int bwd, void **buf, float *g)
{
    int64_t m = op->m, n = op->n, k = op->k, b = op->batch > 0 ? op->batch : 1;
    T *x = (T *)buf[0], *dy = (T *)buf[1], *y = (T *)buf[2], *y2 = (T *)buf[3];
    int grid = 4 * 132, blk = 256;
    switch (op->kind) {
    case PF_CUDA_OP_GEMM:
        if (!bwd)
            gemm(c, 0, 0, m, n, k, x, dy, y, b);
        else {
            gemm(c, 0, 1, m, k, n, y, dy, x, b);  /* dX = dY W^T */
            gemm(c, 1, 0, k, n, m, x, y, y2, b);  /* dW = X^T dY */
        }
        break;
    case PF_CUDA_OP_LAYERNORM:
        k_layernorm<T><<<(unsigned)m, n >= 1024 ? 512 : 128, 0, c.st>>>(bwd, n, x, dy, g, y);
        break;
    case PF_CUDA_OP_SOFTMAX:
        k_softmax<T><<<(unsigned)m, n >= 1024 ? 512 : 128, 0, c.st>>>(bwd, op->causal, n, x, dy, y);
        break;
    case PF_CUDA_OP_ELEMENTWISE:
        k_elementwise<T><<<grid, blk, 0, c.st>>>((op->inputs == 2 ? 2 : 0) + bwd, m, x, dy, y, y2);
        break;
    case PF_CUDA_OP_ATTENTION: {
        /* m = batch x heads, n = sequence, k = head dim; Q, K, V, O are m x n x k; S is m x n x n */
        T *q = x, *kk = x + m * n * k, *v = x + 2 * m * n * k, *o = y, *s = (T *)buf[4];
        T *p = (T *)buf[5];
        if (!bwd) {
            gemm(c, 0, 1, n, n, k, q, kk, s, m);                                  /* S = Q K^T */
            k_softmax<T><<<(unsigned)(m * n), 256, 0, c.st>>>(0, op->causal, n, s, s, p);
            gemm(c, 0, 0, n, k, n, p, v, o, m);                                    /* O = P V */
        } else {
            T *dO = dy, *dq = y2, *dk = y2 + m * n * k, *dv = y2 + 2 * m * n * k;
            gemm(c, 0, 1, n, n, k, dO, v, s, m);                                   /* dP = dO V^T */
            gemm(c, 1, 0, n, k, n, p, dO, dv, m);                                  /* dV = P^T dO */
            k_softmax<T><<<(unsigned)(m * n), 256, 0, c.st>>>(1, op->causal, n, p, s, s);
            gemm(c, 0, 0, n, k, n, s, kk, dq, m);                                  /* dQ = dS K */
            gemm(c, 1, 0, n, k, n, s, q, dk, m);                                   /* dK = dS^T Q */
        }
        break;
    }
    }
}

static int op_time(int dev, const pf_op_probe_t *op, int reps, double *fwd_ms, double *bwd_ms,
                   char *err, size_t errlen)
{
    int rc = 0;
    ctx_t c = {};
    void *buf[6] = {};
    float *g = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int64_t m = op->m, n = op->n, k = op->k, b = op->batch > 0 ? op->batch : 1;
    size_t elems[6] = {};
    /* An elementwise op is m elements: its n and k are unused (0 from the graph's shapes). */
    if (op->kind == PF_CUDA_OP_ELEMENTWISE)
        n = 1;
    if (m < 1 || n < 1 || reps < 1 || op->dtype < 0 || op->dtype > 2 ||
        ((op->kind == PF_CUDA_OP_GEMM || op->kind == PF_CUDA_OP_ATTENTION) && k < 1))
        return fail(err, errlen, -2, "op probe: bad shape %lld x %lld x %lld", (long long)m,
                    (long long)n, (long long)k);
    c.dtype = op->dtype;
    c.esize = op->dtype == PF_DT_FP32 ? 4 : 2;
    c.ct = op->dtype == PF_DT_BF16 ? CUDA_R_16BF : op->dtype == PF_DT_FP16 ? CUDA_R_16F : CUDA_R_32F;
    switch (op->kind) {
    case PF_CUDA_OP_GEMM: /* x: A (m k), dy: B (k n) / dY (m n), y: C / dY, y2: dW (k n) */
        elems[0] = b * m * k; elems[1] = b * std::max(k * n, m * n);
        elems[2] = b * std::max(m * n, m * k); elems[3] = b * k * n;
        break;
    case PF_CUDA_OP_LAYERNORM: case PF_CUDA_OP_SOFTMAX:
        elems[0] = elems[1] = elems[2] = m * n;
        break;
    case PF_CUDA_OP_ELEMENTWISE:
        elems[0] = elems[1] = elems[2] = elems[3] = m;
        break;
    case PF_CUDA_OP_ATTENTION:
        elems[0] = 3 * m * n * k; elems[1] = elems[2] = m * n * k; elems[3] = 3 * m * n * k;
        elems[4] = elems[5] = m * n * n;
        break;
    default:
        return fail(err, errlen, -2, "op probe: unknown kind %d", op->kind);
    }
    CK(cudaSetDevice(dev));
    for (int i = 0; i < 6; i++)
        if (elems[i]) {
            CK(cudaMalloc(&buf[i], elems[i] * c.esize));
            if (c.dtype == PF_DT_BF16)
                k_fill<<<1024, 256>>>((__nv_bfloat16 *)buf[i], (int64_t)elems[i], 17u * i + 1);
            else if (c.dtype == PF_DT_FP16)
                k_fill<<<1024, 256>>>((__half *)buf[i], (int64_t)elems[i], 17u * i + 1);
            else
                k_fill<<<1024, 256>>>((float *)buf[i], (int64_t)elems[i], 17u * i + 1);
            CK(cudaGetLastError());
        }
    CK(cudaMalloc((void **)&g, (size_t)n * sizeof(float)));
    k_fill<<<64, 256>>>(g, n, 7u);
    CK(cudaDeviceSynchronize());
    CK(cudaStreamCreateWithFlags(&c.st, cudaStreamNonBlocking));
    if (cublasCreate(&c.h) != CUBLAS_STATUS_SUCCESS) {
        rc = fail(err, errlen, -1, "cublasCreate failed");
        goto out;
    }
    cublasSetStream(c.h, c.st);
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int bwd = 0; bwd < 2; bwd++) {
        std::vector<double> t;
        for (int r = -WARMUP; r < reps; r++) {
            float f = 0;
            CK(cudaEventRecord(e0, c.st));
            if (c.dtype == PF_DT_BF16) launch<__nv_bfloat16>(c, op, bwd, buf, g);
            else if (c.dtype == PF_DT_FP16) launch<__half>(c, op, bwd, buf, g);
            else launch<float>(c, op, bwd, buf, g);
            CK(cudaGetLastError());
            CK(cudaEventRecord(e1, c.st));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&f, e0, e1));
            if (r >= 0)
                t.push_back(f);
        }
        *(bwd ? bwd_ms : fwd_ms) = median(t);
    }
out:
    if (c.h) cublasDestroy(c.h);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (c.st) cudaStreamDestroy(c.st);
    for (int i = 0; i < 6; i++) cudaFree(buf[i]);
    cudaFree(g);
    return rc;
}

/* ---- NCCL through dlopen ---- */

static int nccl_bus_gbps(int coll, double bytes, int reps, double *gbps, char *err, size_t errlen)
{
    typedef void *comm_t;
    typedef int (*init_all_t)(comm_t *, int, const int *);
    typedef int (*destroy_t)(comm_t);
    typedef int (*group_t)(void);
    typedef int (*allreduce_t)(const void *, void *, size_t, int, int, comm_t, cudaStream_t);
    typedef int (*allgather_t)(const void *, void *, size_t, int, comm_t, cudaStream_t);
    int ndev = 0, rc = 0;
    *gbps = 0;
    device_count(&ndev, NULL, 0);
    if (ndev < 2)
        return fail(err, errlen, -1, "NCCL: needs 2 GPUs, found %d", ndev);
    void *dl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        return fail(err, errlen, -1, "NCCL: %s", dlerror());
    init_all_t init_all = (init_all_t)dlsym(dl, "ncclCommInitAll");
    destroy_t destroy = (destroy_t)dlsym(dl, "ncclCommDestroy");
    group_t gstart = (group_t)dlsym(dl, "ncclGroupStart"), gend = (group_t)dlsym(dl, "ncclGroupEnd");
    allreduce_t allreduce = (allreduce_t)dlsym(dl, "ncclAllReduce");
    allgather_t allgather = (allgather_t)dlsym(dl, "ncclAllGather");
    std::vector<comm_t> comms(ndev);
    std::vector<void *> sb(ndev), rb(ndev);
    std::vector<cudaStream_t> sts(ndev);
    size_t count = (size_t)bytes / 2; /* bf16 elements (ncclBfloat16 = 9) */
    size_t per = coll == PF_NCCL_ALL_GATHER ? count / ndev : count;
    std::vector<double> t;
    if (!init_all || !destroy || !gstart || !gend || !allreduce || !allgather ||
        init_all(comms.data(), ndev, NULL) != 0) {
        dlclose(dl);
        return fail(err, errlen, -1, "NCCL: cannot create communicators");
    }
    for (int d = 0; d < ndev; d++) {
        CK(cudaSetDevice(d));
        CK(cudaMalloc(&sb[d], count * 2));
        CK(cudaMalloc(&rb[d], count * 2));
        CK(cudaStreamCreateWithFlags(&sts[d], cudaStreamNonBlocking));
    }
    for (int r = -WARMUP; r < reps; r++) {
        struct timespec a, z;
        clock_gettime(CLOCK_MONOTONIC, &a);
        gstart();
        for (int d = 0; d < ndev; d++) {
            if (coll == PF_NCCL_ALL_GATHER)
                allgather(sb[d], rb[d], per, 9, comms[d], sts[d]);
            else
                allreduce(sb[d], rb[d], count, 9, 0, comms[d], sts[d]);
        }
        gend();
        for (int d = 0; d < ndev; d++) {
            CK(cudaSetDevice(d));
            CK(cudaStreamSynchronize(sts[d]));
        }
        clock_gettime(CLOCK_MONOTONIC, &z);
        if (r >= 0)
            t.push_back((z.tv_sec - a.tv_sec) + 1e-9 * (z.tv_nsec - a.tv_nsec));
    }
    {
        double algbw = bytes / median(t) / 1e9;
        *gbps = algbw * (coll == PF_NCCL_ALL_GATHER ? (ndev - 1.0) / ndev : 2.0 * (ndev - 1) / ndev);
    }
out:
    for (int d = 0; d < ndev; d++) {
        cudaSetDevice(d);
        if (sts[d]) cudaStreamDestroy(sts[d]);
        cudaFree(sb[d]);
        cudaFree(rb[d]);
        if (comms[d]) destroy(comms[d]);
    }
    dlclose(dl);
    return rc;
}

#define STR2(x) #x
#define STR(x) STR2(x)

static const pf_cuda_api_t api = {
    PF_CUDA_ABI_VERSION,
    sizeof(pf_cuda_api_t),
    "CUDA " STR(__CUDACC_VER_MAJOR__) "." STR(__CUDACC_VER_MINOR__),
    device_count,
    device_info,
    topology,
    copy_sweep,
    hbm_copy,
    op_time,
    nccl_bus_gbps,
};

extern "C" __attribute__((visibility("default"))) const pf_cuda_api_t *pf_cuda_api(uint32_t v)
{
    return v <= PF_CUDA_ABI_VERSION ? &api : NULL;
}
