#include "profiler/local.h"
#include "planner/core/util.h"
#include "profiler/cpu_probes.h"

#include <stdio.h>
#include <string.h>

#define GEMM_SIDE 8192          /* the square bf16 GEMM for a device's TFLOP/s */
#define HBM_BYTES 1073741824.0  /* HBM copy size, as in tests/data/h100 */
/* Default sweeps end at 256 MiB for GPU copies (as tests/data/h100) and 16 MiB for the
 * ping-pong, where one round trip of 256 MiB copies half a gigabyte through the TCP stack. */
#define PF_GPU_SWEEP_MAX_BYTES 268435456.0
#define PF_CPU_SWEEP_MAX_BYTES 16777216.0

void pf_local_opts_default(pf_local_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->reps = 10;
    o->cpu_stream_bytes = (size_t)256 << 20;
}

/* The default sweep: 4 B .. max_bytes by x4. */
static int sweep_sizes(const pf_local_opts_t *o, double max_bytes, double *sizes)
{
    if (o->nsizes > 0) {
        memcpy(sizes, o->sizes, (size_t)o->nsizes * sizeof *sizes);
        return o->nsizes;
    }
    int n = 0;
    for (double b = 4; b <= max_bytes; b *= 4)
        sizes[n++] = b;
    return n;
}

static void tick(pf_progress_fn f, void *ctx, int *done, int total, const char *what)
{
    if (f)
        f(ctx, *done, total, what);
    ++*done;
}

static int profile_cpu(const pf_local_opts_t *o, pf_progress_fn progress, void *pctx,
                       pf_assemble_t *into, pf_local_report_t *rep, char *err, size_t errlen)
{
    double sizes[PF_SWEEP_MAX], gbps;
    int n = sweep_sizes(o, PF_CPU_SWEEP_MAX_BYTES, sizes), done = 0, rc;
    pf_record_device_t d;
    pf_cpu_probes_echo_t *echo = NULL;
    tick(progress, pctx, &done, 2, "cpu memory bandwidth");
    if ((rc = pf_cpu_probes_mem_gbps(o->cpu_stream_bytes, o->reps, &gbps, err, errlen)))
        return rc;
    pf_cpu_probes_device_rec(&d, gbps);
    if ((rc = pf_assemble_add_device(into, &d, err, errlen)))
        return rc;
    tick(progress, pctx, &done, 2, "loopback tcp ping-pong");
    if (!(echo = pf_cpu_probes_echo_new("tcp://127.0.0.1:*", err, errlen)))
        return PF_ERR;
    pf_record_link_t *l = &rep->loopback.rec;
    rc = pf_cpu_probes_pingpong_rec(pf_cpu_probes_echo_endpoint(echo), d.host, d.host, sizes, n,
                                    o->reps, 10.0, l, err, errlen);
    pf_cpu_probes_echo_destroy(&echo);
    if (rc != PF_OK)
        return rc;
    /* Shown, not part of a one-device cluster: a sweep too noisy to fit (a loaded host) is
     * reported, not fatal. */
    if (pf_postal_fit(l->bytes, l->ms, l->nsizes, PF_POSTAL_TOL, &rep->loopback.fit,
                      rep->loopback_status, sizeof rep->loopback_status) == PF_OK)
        rep->has_loopback = 1;
    if (progress)
        progress(pctx, done, 2, "done");
    return PF_OK;
}

static void link_rec(pf_record_link_t *l, const char *host, int src, int dst, const char *method,
                     const double *sizes, int n)
{
    memset(l, 0, sizeof *l);
    pf_record_stamp(l->measured_by, &l->when_unix_s);
    pf_record_name(l->src_host, host);
    pf_record_name(l->dst_host, host);
    l->src_index = src;
    l->dst_index = dst;
    l->source = PF_SRC_GPU;
    l->topo_level = -1;
    pf_record_name(l->method, method);
    l->nsizes = n;
    memcpy(l->bytes, sizes, (size_t)n * sizeof *sizes);
}

/* What the GPU probes share: the API, where the records go, the progress count, the sweep. */
typedef struct {
    const pf_local_opts_t *o;
    const pf_cuda_api_t *api;
    pf_assemble_t *into;
    pf_progress_fn progress;
    void *pctx;
    int done, total, n;
    double sizes[PF_SWEEP_MAX];
    char host[PF_REC_NAME];
} gpu_run_t;

/* GPU g's record: a bf16 GEMM for its peak and a copy for its memory bandwidth. */
static int gpu_device(gpu_run_t *r, int g, char *err, size_t errlen)
{
    pf_gpu_info_t info;
    pf_record_device_t d = {.index = g, .source = PF_SRC_GPU};
    pf_op_probe_t gemm = {.kind = PF_CUDA_OP_GEMM, .dtype = PF_DT_BF16, .m = GEMM_SIDE,
                          .n = GEMM_SIDE, .k = GEMM_SIDE, .batch = 1};
    double fwd, bwd, hbm_ms;
    char what[96];
    int rc;
    if ((rc = r->api->device_info(g, &info, err, errlen)))
        return rc;
    snprintf(what, sizeof what, "GPU %d: bf16 GEMM %d^3", g, GEMM_SIDE);
    tick(r->progress, r->pctx, &r->done, r->total, what);
    if ((rc = r->api->op_time(g, &gemm, r->o->reps, &fwd, &bwd, err, errlen)))
        return rc;
    snprintf(what, sizeof what, "GPU %d: HBM copy", g);
    tick(r->progress, r->pctx, &r->done, r->total, what);
    if ((rc = r->api->hbm_copy(g, HBM_BYTES, r->o->reps, &hbm_ms, err, errlen)))
        return rc;
    pf_record_stamp(d.measured_by, &d.when_unix_s);
    pf_record_name(d.host, r->host);
    pf_record_name(d.name, info.name);
    d.mem_bytes = info.mem_bytes;
    d.sm_count = info.sm_count;
    d.clock_mhz = info.sm_clock_mhz;
    /* 2 m n k flops; ms -> s and flop -> Tflop: 2 s^3 / (ms 1e-3) / 1e12 */
    d.tflops = fwd > 0 ? 2.0 * GEMM_SIDE * GEMM_SIDE * (double)GEMM_SIDE / (fwd * 1e9) : 0;
    d.mem_gbps = hbm_ms > 0 ? 2.0 * HBM_BYTES / (hbm_ms * 1e6) : 0;
    return pf_assemble_add_device(r->into, &d, err, errlen);
}

/* The link a -> b, with peer access (pass 0) or without (pass 1). */
static int gpu_peer_link(gpu_run_t *r, int a, int b, int pass, char *err, size_t errlen)
{
    pf_record_link_t l;
    char what[96];
    snprintf(what, sizeof what, "GPU %d -> GPU %d, peer access %s", a, b, pass ? "off" : "on");
    tick(r->progress, r->pctx, &r->done, r->total, what);
    link_rec(&l, r->host, a, b, pass ? "cuda_copy_no_p2p" : "cuda_peer_copy", r->sizes, r->n);
    if (r->api->topology(a, b, &l.topo_level, &l.nvlinks, NULL, 0) != PF_OK) {
        l.topo_level = -1; /* no NVML: the sweep alone tells the link */
        l.nvlinks = 0;
    }
    int rc = r->api->copy_sweep(a, b, !pass, r->sizes, r->n, r->o->reps, l.ms, err, errlen);
    if (rc != PF_OK && !pass) { /* no peer access between them: the staged copy */
        pf_record_name(l.method, "cuda_copy_no_p2p");
        rc = r->api->copy_sweep(a, b, 0, r->sizes, r->n, r->o->reps, l.ms, err, errlen);
    }
    if (rc || (rc = pf_assemble_add_link(r->into, &l, err, errlen)))
        return rc;
    return PF_OK;
}

/* Pinned host memory to GPU g (dir 0) or back (dir 1). */
static int gpu_host_link(gpu_run_t *r, int g, int dir, char *err, size_t errlen)
{
    pf_record_link_t l;
    char what[96];
    int src = dir ? g : PF_CUDA_HOST, dst = dir ? PF_CUDA_HOST : g, rc;
    snprintf(what, sizeof what, "%s GPU %d (pinned)", dir ? "host <-" : "host ->", g);
    tick(r->progress, r->pctx, &r->done, r->total, what);
    link_rec(&l, r->host, src < 0 ? PF_END_HOST : src, dst < 0 ? PF_END_HOST : dst,
             "cuda_pinned_copy", r->sizes, r->n);
    if ((rc = r->api->copy_sweep(src, dst, 0, r->sizes, r->n, r->o->reps, l.ms, err, errlen)) ||
        (rc = pf_assemble_add_link(r->into, &l, err, errlen)))
        return rc;
    return PF_OK;
}

/* NCCL's bus bandwidth at the largest size (all-reduce, then all-gather), or why not. */
static void gpu_nccl(gpu_run_t *r, int ngpu, pf_local_report_t *rep)
{
    if (ngpu > 1) {
        char nerr[128] = "";
        double big = r->sizes[r->n - 1];
        tick(r->progress, r->pctx, &r->done, r->total, "NCCL all-reduce");
        if (r->api->nccl_bus_gbps(PF_NCCL_ALL_REDUCE, big, r->o->reps,
                                  &rep->nccl_all_reduce_gbps, nerr, sizeof nerr) == PF_OK) {
            tick(r->progress, r->pctx, &r->done, r->total, "NCCL all-gather");
            r->api->nccl_bus_gbps(PF_NCCL_ALL_GATHER, big, r->o->reps,
                                  &rep->nccl_all_gather_gbps, nerr, sizeof nerr);
        }
        snprintf(rep->nccl_status, sizeof rep->nccl_status, "%s", nerr);
    } else {
        snprintf(rep->nccl_status, sizeof rep->nccl_status, "one GPU: no collective");
    }
}

static int profile_gpu(const pf_local_opts_t *o, const pf_cuda_api_t *api, int ngpu,
                       pf_progress_fn progress, void *pctx, pf_assemble_t *into,
                       pf_local_report_t *rep, char *err, size_t errlen)
{
    gpu_run_t r = {.o = o, .api = api, .into = into, .progress = progress, .pctx = pctx};
    int npairs = ngpu * (ngpu - 1) * (o->peer_off ? 2 : 1), rc;
    double when;
    r.n = sweep_sizes(o, PF_GPU_SWEEP_MAX_BYTES, r.sizes);
    r.total = 2 * ngpu + npairs + 2 * ngpu + (ngpu > 1 ? 2 : 0);
    pf_record_stamp(r.host, &when);
    for (int g = 0; g < ngpu; g++)
        if ((rc = gpu_device(&r, g, err, errlen)))
            return rc;
    for (int pass = 0; pass < (o->peer_off ? 2 : 1); pass++)
        for (int a = 0; a < ngpu; a++)
            for (int b = 0; b < ngpu; b++)
                if (a != b && (rc = gpu_peer_link(&r, a, b, pass, err, errlen)))
                    return rc;
    for (int g = 0; g < ngpu; g++)
        for (int dir = 0; dir < 2; dir++)
            if ((rc = gpu_host_link(&r, g, dir, err, errlen)))
                return rc;
    gpu_nccl(&r, ngpu, rep);
    if (progress)
        progress(pctx, r.total, r.total, "done");
    return PF_OK;
}

int pf_local_profile(const pf_local_opts_t *o, const pf_cuda_loader_t *cuda,
                     const char *cuda_status, pf_progress_fn progress, void *progress_ctx,
                     pf_assemble_t *into, pf_local_report_t *rep, char *err, size_t errlen)
{
    int ngpu = 0, rc;
    memset(rep, 0, sizeof *rep);
    if (o->nsizes < 0 || o->nsizes > PF_SWEEP_MAX || o->nsizes == 1 || o->reps < 1)
        return pf_fail(err, errlen, PF_EINPUT, "profile: %d sizes, %d repetitions", o->nsizes,
                       o->reps);
    if (!cuda) {
        snprintf(rep->cuda_status, sizeof rep->cuda_status, "%s",
                 cuda_status ? cuda_status : PF_CUDA_NOT_BUILT);
        return profile_cpu(o, progress, progress_ctx, into, rep, err, errlen);
    }
    const pf_cuda_api_t *api = pf_cuda_loader_api(cuda);
    if ((rc = api->device_count(&ngpu, err, errlen)))
        return rc;
    if (ngpu == 0) {
        snprintf(rep->cuda_status, sizeof rep->cuda_status, "no GPU found");
        return profile_cpu(o, progress, progress_ctx, into, rep, err, errlen);
    }
    rep->ngpus = ngpu;
    return profile_gpu(o, api, ngpu, progress, progress_ctx, into, rep, err, errlen);
}

int pf_local_op_timer(void *ctx, const pf_op_probe_t *probe, double *fwd_ms, double *bwd_ms,
                      char *err, size_t errlen)
{
    const pf_local_gpu_t *g = ctx;
    return g->api->op_time(g->dev, probe, g->reps, fwd_ms, bwd_ms, err, errlen);
}
