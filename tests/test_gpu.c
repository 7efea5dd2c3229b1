/* gpu: the CUDA probes on an H100 against tests/data/h100/h100_reference.json (bandwidths) and
 * h100_torch_layers.json (GEMMs, layer ops: bench/gpu/torch_layers.py, run on an H100 of the
 * same image on 2026-11-26), and a profiled cluster planned end to end.
 *
 * Both references were measured through PyTorch, so each class of probe is held to what it can
 * match (bench/results/gpu-2026-11-26.md has the runs these bounds come from):
 *   - bandwidths (HBM copy, host <-> device at 256 MiB): within 10%;
 *   - cuBLAS GEMMs, square and the layer's four: 0.75 .. 1.4 of the reference (torch's F.linear
 *     picks other kernels than a plain cublasGemmEx: out_proj's forward is 14% faster here; and
 *     the two harnesses run at whatever clock the GPU's power limit leaves: under back-to-back
 *     GEMMs an H100's SM clock fell from 1980 to 1245-1410 MHz, and the GEMMs of a GPT layer ran
 *     1.07-1.21x slower than rested, gpu-2026-11-26b.md; a second run of this suite read
 *     out_proj's backward 1.30x the reference where the first read 0.95). A wrong kernel, shape
 *     or transposition still shows (2x and more). The shared reference's own GEMM and backward
 *     times are not used: a rerun of its method gave 740 TFLOP/s at 4096^3 against its 651, and
 *     its backward times run up to 1.33x a rerun's;
 *   - the 4-byte copy's latency: at most the reference's (torch's copy adds its dispatch);
 *   - memory-bound kernels (layernorm, add, gelu): within 4x, the probes' plain kernels against
 *     PyTorch's tuned ones; attention: the probe is unfused (an upper bound on a flash kernel),
 *     from 0.8x to 8x.
 * Registered only when PF_GPU_TESTS is set (make test-gpu): no other run has a GPU. Every comparison is printed, passing or not, so the
 * run's output is the record bench/results/ keeps. */
#include "planner/core/util.h"
#include "profiler/cuda_loader.h"
#include "tests/testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ratio bounds (measured / reference) per probe class; see above. */
typedef struct {
    double lo, hi;
} bounds_t;
static const bounds_t BANDWIDTH = {0.9, 1.1}, CUBLAS = {0.75, 1.4}, AT_MOST = {0, 1.1},
                      KERNEL = {0.25, 4.0}, UNFUSED = {0.8, 8.0};

static pf_cuda_loader_t *cuda;
static const pf_cuda_api_t *api;
static json_t *ref, *torch_ref;
/* The reference is one H100's: on another GPU the ratios are printed, not asserted. */
static int same_gpu = 1;

static int setup(void)
{
    char err[512], path[1024];
    json_error_t je;
    if (!(cuda = pf_cuda_loader_open(err, sizeof err))) {
        fprintf(stderr, "gpu suite: %s\n", err);
        return 1;
    }
    api = pf_cuda_loader_api(cuda);
    ref = json_load_file(pf_test_data("h100/h100_reference.json", path, sizeof path), 0, &je);
    if (!ref)
        fprintf(stderr, "gpu suite: %s: %s\n", path, je.text);
    torch_ref = json_load_file(pf_test_data("h100/h100_torch_layers.json", path, sizeof path), 0,
                               &je);
    if (!torch_ref)
        fprintf(stderr, "gpu suite: %s: %s\n", path, je.text);
    return ref && torch_ref ? 0 : 1;
}

static int teardown(void)
{
    json_decref(ref);
    json_decref(torch_ref);
    pf_cuda_loader_close(&cuda);
    return 0;
}

static int within(const char *what, double measured, double reference, bounds_t b)
{
    double ratio = measured / reference;
    int ok = ratio >= b.lo && ratio <= b.hi;
    printf("\n  %-40s measured %10.4g  reference %10.4g  ratio %.3f in [%.2f, %.2f]%s", what,
           measured, reference, ratio, b.lo, b.hi,
           ok ? "" : same_gpu ? "  <-- out of bounds" : "  (another GPU: not asserted)");
    return ok || !same_gpu;
}

static void test_device(void)
{
    int n = 0;
    pf_gpu_info_t info;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(api->device_count(&n, err, sizeof err), PF_OK);
    CU_ASSERT_FATAL(n >= 1);
    CU_ASSERT_EQUAL_FATAL(api->device_info(0, &info, err, sizeof err), PF_OK);
    printf("\n  GPU 0: %s, %d SMs, %.0f MHz, %.1f GiB (%s)", info.name, info.sm_count,
           info.sm_clock_mhz, info.mem_bytes / 1073741824.0, api->build);
    const char *ref_name = json_string_value(json_object_get(ref, "device"));
    same_gpu = ref_name && !strcmp(info.name, ref_name);
    if (!same_gpu)
        printf("\n  the reference is an %s: the ratios below are shown, not asserted", ref_name);
    CU_ASSERT(!same_gpu || info.sm_count == json_integer_value(json_object_get(ref, "sm_count")));
}

static void test_gemm(void)
{
    json_t *g = json_object_get(torch_ref, "gemm_bf16_square");
    char err[256], what[64];
    for (size_t i = 0; i < json_array_size(g); i++) {
        json_t *e = json_array_get(g, i);
        int64_t s = json_integer_value(json_object_get(e, "m"));
        if (s != 4096 && s != 8192)
            continue;
        pf_op_probe_t p = {.kind = PF_CUDA_OP_GEMM, .dtype = PF_DT_BF16, .m = s, .n = s, .k = s,
                           .batch = 1};
        double fwd, bwd;
        CU_ASSERT_EQUAL_FATAL(api->op_time(0, &p, 20, &fwd, &bwd, err, sizeof err), PF_OK);
        snprintf(what, sizeof what, "bf16 GEMM %lld^3 TFLOP/s", (long long)s);
        /* 2 s^3 flop in fwd ms: TFLOP/s = 2 s^3 / (ms 1e-3) / 1e12 */
        CU_ASSERT(within(what, 2.0 * s * s * s / (fwd * 1e9),
                         json_number_value(json_object_get(e, "tflops")), CUBLAS));
    }
}

static void test_hbm(void)
{
    json_t *h = json_object_get(ref, "hbm_copy");
    double bytes = json_number_value(json_object_get(h, "bytes")), ms;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(api->hbm_copy(0, bytes, 20, &ms, err, sizeof err), PF_OK);
    CU_ASSERT(within("HBM copy GB/s (read + write)", 2 * bytes / (ms * 1e6),
                     json_number_value(json_object_get(h, "gbps_read_plus_write")), BANDWIDTH));
}

static void test_host_device(void)
{
    json_t *sw = json_object_get(ref, "host_device_link");
    size_t n = json_array_size(sw);
    json_t *first = json_array_get(sw, 0), *last = json_array_get(sw, n - 1);
    double sizes[2] = {json_number_value(json_object_get(first, "bytes")),
                       json_number_value(json_object_get(last, "bytes"))};
    double h2d[2], d2h[2];
    char err[256];
    CU_ASSERT_EQUAL_FATAL(api->copy_sweep(PF_CUDA_HOST, 0, 0, sizes, 2, 20, h2d, err, sizeof err),
                          PF_OK);
    CU_ASSERT_EQUAL_FATAL(api->copy_sweep(0, PF_CUDA_HOST, 0, sizes, 2, 20, d2h, err, sizeof err),
                          PF_OK);
    CU_ASSERT(within("host -> device 256 MiB ms", h2d[1],
                     json_number_value(json_object_get(last, "h2d_ms")), BANDWIDTH));
    CU_ASSERT(within("device -> host 256 MiB ms", d2h[1],
                     json_number_value(json_object_get(last, "d2h_ms")), BANDWIDTH));
    CU_ASSERT(within("host -> device 4 B ms (latency floor)", h2d[0],
                     json_number_value(json_object_get(first, "h2d_ms")), AT_MOST));
    CU_ASSERT(within("device -> host 4 B ms (latency floor)", d2h[0],
                     json_number_value(json_object_get(first, "d2h_ms")), AT_MOST));
}

/* One GPT layer, hidden 4096, 32 heads (head dim 128), sequence 2048, micro-batch 1: the
 * probes of each op, as calibrate.c would form them from the graph's shapes. */
static void test_gpt_layer(void)
{
    const int64_t h = 4096, s = 2048, heads = 32;
    struct {
        const char *op;
        pf_op_probe_t p;
    } ops[] = {
        {"layernorm1", {.kind = PF_CUDA_OP_LAYERNORM, .m = s, .n = h}},
        {"qkv", {.kind = PF_CUDA_OP_GEMM, .m = s, .n = 3 * h, .k = h, .batch = 1}},
        {"attention_core", {.kind = PF_CUDA_OP_ATTENTION, .m = heads, .n = s, .k = h / heads,
                            .causal = 1}},
        {"out_proj", {.kind = PF_CUDA_OP_GEMM, .m = s, .n = h, .k = h, .batch = 1}},
        {"residual_add", {.kind = PF_CUDA_OP_ELEMENTWISE, .m = s * h, .inputs = 2}},
        {"layernorm2", {.kind = PF_CUDA_OP_LAYERNORM, .m = s, .n = h}},
        {"fc1", {.kind = PF_CUDA_OP_GEMM, .m = s, .n = 4 * h, .k = h, .batch = 1}},
        {"gelu", {.kind = PF_CUDA_OP_ELEMENTWISE, .m = s * 4 * h, .inputs = 1}},
        {"fc2", {.kind = PF_CUDA_OP_GEMM, .m = s, .n = h, .k = 4 * h, .batch = 1}},
    };
    json_t *layer = NULL, *layers = json_object_get(torch_ref, "gpt_layers");
    for (size_t i = 0; i < json_array_size(layers); i++) {
        json_t *l = json_array_get(layers, i);
        if (json_integer_value(json_object_get(l, "hidden")) == h &&
            json_integer_value(json_object_get(l, "microbatch")) == 1 &&
            json_integer_value(json_object_get(l, "tp")) == 1)
            layer = l;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(layer);
    json_t *rops = json_object_get(layer, "ops");
    char err[256], what[64];
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        json_t *r = json_array_get(rops, i);
        double fwd, bwd;
        CU_ASSERT_STRING_EQUAL_FATAL(json_string_value(json_object_get(r, "op")), ops[i].op);
        ops[i].p.dtype = PF_DT_BF16;
        CU_ASSERT_EQUAL_FATAL(api->op_time(0, &ops[i].p, 20, &fwd, &bwd, err, sizeof err), PF_OK);
        snprintf(what, sizeof what, "%s fwd ms", ops[i].op);
        bounds_t b = ops[i].p.kind == PF_CUDA_OP_GEMM        ? CUBLAS
                     : ops[i].p.kind == PF_CUDA_OP_ATTENTION ? UNFUSED
                                                             : KERNEL;
        CU_ASSERT(within(what, fwd, json_number_value(json_object_get(r, "fwd_ms")), b));
        snprintf(what, sizeof what, "%s bwd ms", ops[i].op);
        CU_ASSERT(within(what, bwd, json_number_value(json_object_get(r, "bwd_ms")), b));
    }
}

/* planfarm profile --local on this GPU, then check and plan with the cluster it wrote. */
static void test_profile_plans(void)
{
    char cmd[4096], out[16384];
    const char *d = pf_test_tmpdir();
    snprintf(cmd, sizeof cmd,
             "'%s' profile --local -o '%s/gpu.json' && '%s' check '%s/gpu.json' && "
             "'%s' model gpt --layers 4 --hidden 1024 --heads 16 --seq 512 -o '%s/g.json' && "
             "'%s' profile --local --graph '%s/g.json' -o '%s/g.measured.json' && "
             "'%s' plan '%s/g.measured.json' '%s/gpu.json' -o '%s/plan.json'",
             pf_test_bin(), d, pf_test_bin(), d, pf_test_bin(), d, pf_test_bin(), d, d,
             pf_test_bin(), d, d, d);
    int rc = pf_test_run(cmd, out, sizeof out);
    printf("\n%s", out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NULL(strstr(out, "no CUDA probes"));
}

void pf_suite_gpu(void)
{
    if (!getenv("PF_GPU_TESTS"))
        return;
    CU_pSuite s = CU_add_suite("gpu", setup, teardown);
    CU_add_test(s, "GPU 0 is enumerated (H100: 132 SMs)", test_device);
    CU_add_test(s, "bf16 GEMM TFLOP/s at 4096 and 8192 within 20%", test_gemm);
    CU_add_test(s, "HBM copy bandwidth within 10%", test_hbm);
    CU_add_test(s, "host <-> device: 256 MiB within 10%, 4 B at most the reference", test_host_device);
    CU_add_test(s, "GPT layer ops at hidden 4096 within their class bounds", test_gpt_layer);
    CU_add_test(s, "profile --local and --graph on the GPU, then plan", test_profile_plans);
}
