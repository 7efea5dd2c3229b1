#include "profiler/sweep.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The grids. GEMM sides span what a tensor-parallel split of a 1B..1T transformer runs: tokens
 * of a micro-batch (m) from 256 to 16k, hidden and FFN slices (n, k) from 512 to 16k. fp32 is
 * swept on the smaller square diagonal only: its big GEMMs take seconds each. */
static const int64_t gemm_m[] = {256, 512, 1024, 2048, 4096, 8192, 16384};
static const int64_t gemm_nk[] = {512, 1024, 2048, 4096, 8192, 16384};
static const int64_t square_fp32[] = {512, 1024, 2048, 4096, 8192};
static const int64_t attn_seq[] = {512, 1024, 2048, 4096, 8192};
static const int64_t attn_heads[] = {8, 32, 64};
static const int64_t elem_log2[] = {16, 18, 20, 22, 24, 26, 28};
static const int64_t rows_m[] = {2048, 8192, 32768};
static const int64_t rows_n[] = {1024, 4096, 8192, 16384};
static const double hbm_log2[] = {20, 22, 24, 26, 28, 30, 32};

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define QUICK 2 /* entries per axis of a --quick grid */
/* A soak's reps at most: 200 ms of the smallest probe (about 3 us a rep) is 70,000; op_time
 * keeps one double per rep. */
#define SOAK_MAX_REPS 100000

typedef struct {
    const pf_cuda_api_t *api;
    const pf_sweep_opts_t *o;
    pf_sweep_progress_fn progress;
    void *ctx;
    int done, total;
    json_t *root;
    char *err;
    size_t errlen;
} sweep_t;

static int axis(const pf_sweep_opts_t *o, int n)
{
    return o->quick && n > QUICK ? QUICK : n;
}

static const char *dtype_name(int dtype)
{
    return dtype == PF_DT_BF16 ? "bf16" : dtype == PF_DT_FP16 ? "fp16" : "fp32";
}

static const char *kind_name(int kind)
{
    static const char *const names[] = {"gemm", "layernorm", "softmax", "elementwise",
                                        "attention"};
    return kind >= 0 && kind < N(names) ? names[kind] : "?";
}

static void tick(sweep_t *s, const char *what)
{
    s->done++;
    if (s->progress)
        s->progress(s->ctx, s->done, s->total, what);
}

/* A GPU's SM clock follows its power draw: a large GEMM timed right after small ones runs at
 * a clock it does not hold once GEMMs run back to back under the power limit, as they do in a
 * training step (an H100 at 700 W: 1980 MHz rested, 1245-1410 MHz sustained on the sweep's
 * largest GEMMs, bench/results/gpu-2026-11-26b.md). Without a soak a record is whatever state
 * the previous probes left, which rises with the grid's order: the table then reads larger
 * GEMMs as less efficient than smaller ones where it should read the clock. One untimed run
 * sizes the soak (op_time runs its warm-ups and reps forward, then backward), so a probe runs
 * untimed for at least soak_ms. The soak is its own op_time call: the GPU idles while the
 * timed call sets up its buffers (milliseconds), and each rep waits for its event, so the
 * smallest probes soak at less than full load; the soaked sweeps still reproduced soaked GEMM
 * times (gpu-2026-11-26b.md). */
static int soak(sweep_t *s, const pf_op_probe_t *p, char *why, size_t whylen)
{
    double fwd = 0, bwd = 0;
    if (!(s->o->soak_ms > 0))
        return PF_OK;
    int rc = s->api->op_time(s->o->device, p, 1, &fwd, &bwd, why, whylen);
    if (rc != PF_OK)
        return rc;
    double one_ms = fwd + bwd; /* > 0: the ceiling of a positive quotient is at least 1 */
    int reps = one_ms > 0 ? (int)fmin(ceil(s->o->soak_ms / one_ms), SOAK_MAX_REPS) : 1;
    return s->api->op_time(s->o->device, p, reps, &fwd, &bwd, why, whylen);
}

/* One op probe timed (after its soak) and appended to the array named by its kind. */
static int probe(sweep_t *s, const pf_op_probe_t *p)
{
    double fwd, bwd;
    char what[96];
    snprintf(what, sizeof what, "%s %s %lldx%lldx%lld x%lld", kind_name(p->kind),
             dtype_name(p->dtype), (long long)p->m, (long long)p->n, (long long)p->k,
             (long long)p->batch);
    char why[256] = "";
    int rc = soak(s, p, why, sizeof why);
    if (rc == PF_OK)
        rc = s->api->op_time(s->o->device, p, s->o->reps, &fwd, &bwd, why, sizeof why);
    if (rc != PF_OK)
        return pf_fail(s->err, s->errlen, rc, "%s: %s", what, why);
    json_t *rec = json_pack("{s:s, s:I, s:I, s:I, s:I, s:i, s:b, s:f, s:f}", "dtype",
                            dtype_name(p->dtype), "m", (json_int_t)p->m, "n", (json_int_t)p->n,
                            "k", (json_int_t)p->k, "batch", (json_int_t)p->batch, "inputs",
                            p->inputs, "causal", p->causal, "fwd_ms", fwd, "bwd_ms", bwd);
    json_t *arr = json_object_get(s->root, kind_name(p->kind));
    if (!rec || json_array_append_new(arr, rec))
        return pf_fail(s->err, s->errlen, PF_ERR, "%s: out of memory", what);
    tick(s, what);
    return PF_OK;
}

static int gemms(sweep_t *s)
{
    const pf_sweep_opts_t *o = s->o;
    int rc = PF_OK;
    for (int a = 0; rc == PF_OK && a < axis(o, N(gemm_m)); a++)
        for (int b = 0; rc == PF_OK && b < axis(o, N(gemm_nk)); b++)
            for (int c = 0; rc == PF_OK && c < axis(o, N(gemm_nk)); c++) {
                pf_op_probe_t p = {.kind = PF_CUDA_OP_GEMM, .dtype = PF_DT_BF16,
                                   .m = gemm_m[a], .n = gemm_nk[b], .k = gemm_nk[c], .batch = 1};
                rc = probe(s, &p);
            }
    for (int a = 0; rc == PF_OK && a < axis(o, N(square_fp32)); a++)
        for (int dt = PF_DT_FP16; rc == PF_OK && dt <= PF_DT_FP32; dt++) {
            int64_t side = square_fp32[a];
            pf_op_probe_t p = {.kind = PF_CUDA_OP_GEMM, .dtype = dt, .m = side, .n = side,
                               .k = side, .batch = 1};
            rc = probe(s, &p);
        }
    return rc;
}

/* Attention's batched GEMMs (scores: seq x seq x head_dim per head) and the unfused operator. */
static int attention(sweep_t *s)
{
    const pf_sweep_opts_t *o = s->o;
    int rc = PF_OK;
    for (int a = 0; rc == PF_OK && a < axis(o, N(attn_seq)); a++)
        for (int b = 0; rc == PF_OK && b < axis(o, N(attn_heads)); b++) {
            int64_t seq = attn_seq[a], heads = attn_heads[b];
            pf_op_probe_t g = {.kind = PF_CUDA_OP_GEMM, .dtype = PF_DT_BF16, .m = seq, .n = seq,
                               .k = 128, .batch = heads};
            pf_op_probe_t t = {.kind = PF_CUDA_OP_ATTENTION, .dtype = PF_DT_BF16, .m = heads,
                               .n = seq, .k = 128, .batch = 1, .causal = 1};
            rc = probe(s, &g);
            if (rc == PF_OK)
                rc = probe(s, &t);
        }
    return rc;
}

static int memory_bound(sweep_t *s)
{
    const pf_sweep_opts_t *o = s->o;
    int rc = PF_OK;
    for (int a = 0; rc == PF_OK && a < axis(o, N(elem_log2)); a++)
        for (int in = 1; rc == PF_OK && in <= 2; in++) {
            pf_op_probe_t p = {.kind = PF_CUDA_OP_ELEMENTWISE, .dtype = PF_DT_BF16,
                               .m = (int64_t)1 << elem_log2[a], .batch = 1, .inputs = in};
            rc = probe(s, &p);
        }
    for (int a = 0; rc == PF_OK && a < axis(o, N(rows_m)); a++)
        for (int b = 0; rc == PF_OK && b < axis(o, N(rows_n)); b++)
            for (int kind = PF_CUDA_OP_LAYERNORM; rc == PF_OK && kind <= PF_CUDA_OP_SOFTMAX;
                 kind++) {
                pf_op_probe_t p = {.kind = kind, .dtype = PF_DT_BF16, .m = rows_m[a],
                                   .n = rows_n[b], .batch = 1, .causal = 0};
                rc = probe(s, &p);
            }
    return rc;
}

static int hbm(sweep_t *s)
{
    json_t *arr = json_object_get(s->root, "hbm_copy");
    for (int a = 0; a < axis(s->o, N(hbm_log2)); a++) {
        double bytes = (double)((int64_t)1 << (int)hbm_log2[a]), ms;
        char what[64], why[256] = "";
        snprintf(what, sizeof what, "hbm copy 2^%d B", (int)hbm_log2[a]);
        int rc = s->api->hbm_copy(s->o->device, bytes, s->o->reps, &ms, why, sizeof why);
        if (rc != PF_OK)
            return pf_fail(s->err, s->errlen, rc, "%s: %s", what, why);
        if (json_array_append_new(arr, json_pack("{s:f, s:f, s:f}", "bytes", bytes, "ms", ms,
                                                 "gbps_read_plus_write", 2 * bytes / (ms * 1e6))))
            return pf_fail(s->err, s->errlen, PF_ERR, "%s: out of memory", what);
        tick(s, what);
    }
    return PF_OK;
}

int pf_sweep_count(const pf_sweep_opts_t *o)
{
    return axis(o, N(gemm_m)) * axis(o, N(gemm_nk)) * axis(o, N(gemm_nk)) +
           2 * axis(o, N(square_fp32)) + 2 * axis(o, N(attn_seq)) * axis(o, N(attn_heads)) +
           2 * axis(o, N(elem_log2)) + 2 * axis(o, N(rows_m)) * axis(o, N(rows_n)) +
           axis(o, N(hbm_log2));
}

static json_t *header(const pf_cuda_api_t *api, const pf_sweep_opts_t *o, char *err,
                      size_t errlen)
{
    pf_gpu_info_t gi;
    if (api->device_info(o->device, &gi, err, errlen) != PF_OK)
        return NULL;
    return json_pack("{s:s, s:i, s:{s:s, s:i, s:i, s:i, s:f, s:f}, s:s, s:i, s:f, s:s, s:[],"
                     " s:[], s:[], s:[], s:[], s:[]}",
                     "format", "planfarm-device-sweep", "version", 1, "gpu", "name", gi.name,
                     "sm_count", gi.sm_count, "cc_major", gi.cc_major, "cc_minor", gi.cc_minor,
                     "sm_clock_mhz", gi.sm_clock_mhz, "mem_bytes", gi.mem_bytes, "probes",
                     api->build, "reps", o->reps, "soak_ms", o->soak_ms, "method",
                     "median of timed runs after warm-up (the CUDA probes' op_time/hbm_copy); "
                     "each op probe first run untimed for soak_ms",
                     "gemm", "attention", "elementwise", "layernorm", "softmax", "hbm_copy");
}

json_t *pf_sweep_run(const pf_cuda_api_t *api, const pf_sweep_opts_t *o,
                     pf_sweep_progress_fn progress, void *ctx, char *err, size_t errlen)
{
    sweep_t s = {api, o, progress, ctx, 0, pf_sweep_count(o), NULL, err, errlen};
    if (!(s.root = header(api, o, err, errlen)))
        goto fail;
    if (hbm(&s) || gemms(&s) || attention(&s) || memory_bound(&s))
        goto fail;
    return s.root;
fail:
    json_decref(s.root);
    return NULL;
}
