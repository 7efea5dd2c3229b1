/* devmodel: the table's interpolation worked by hand on a 2 x 2 x 2 grid, GEMM and roofline
 * times, the backward's two GEMMs, precision fallbacks, the presets, the file round trip and
 * rejected files with their messages. */
#include "planner/core/util.h"
#include "planner/ir/devmodel.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const double G2[2] = {256, 1024};
/* eff[(im * 2 + in) * 2 + ik] = 0.1 (c + 1) */
static const double EFF[8] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8};

static pf_devmodel_spec_t tiny_spec(void)
{
    pf_devmodel_spec_t s = {"tiny", {100, 100, 10, 50, 200}, {1, 1, 1, 1, 1}, 1000, 5, 80e9,
                            0.5, 0.25, 300, 1, 8, 0, 0, 0, 0};
    return s;
}

static pf_devmodel_t *tiny(void)
{
    pf_devmodel_spec_t s = tiny_spec();
    char err[256];
    pf_devmodel_t *dm = pf_devmodel_new(&s, 2, G2, 2, G2, 2, G2, EFF, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm);
    return dm;
}

static void test_interpolation(void)
{
    pf_devmodel_t *dm = tiny();
    /* grid points: exact */
    PF_ASSERT_CLOSE(pf_devmodel_gemm_eff(dm, 256, 256, 256), 0.1, 1e-12);
    PF_ASSERT_CLOSE(pf_devmodel_gemm_eff(dm, 1024, 256, 1024), 0.6, 1e-12);
    PF_ASSERT_CLOSE(pf_devmodel_gemm_eff(dm, 1024, 1024, 1024), 0.8, 1e-12);
    /* m = 512 is half way in log2 (8 -> 9 -> 10): (0.1 + 0.5) / 2 */
    PF_ASSERT_CLOSE(pf_devmodel_gemm_eff(dm, 512, 256, 256), 0.3, 1e-12);
    /* a quarter of the way on k (log2 256 = 8, 2^8.5 = 362.04): 0.1 + (0.2 - 0.1) / 4 */
    PF_ASSERT_CLOSE(pf_devmodel_gemm_eff(dm, 256, 256, 256 * pow(2, 0.5)), 0.125, 1e-12);
    /* the centre of the cube: the mean of the eight corners */
    PF_ASSERT_CLOSE(pf_devmodel_gemm_eff(dm, 512, 512, 512), 0.45, 1e-12);
    /* clamped outside: m below, n above, k below -> corner (0, 1, 0) = 0.3 */
    PF_ASSERT_CLOSE(pf_devmodel_gemm_eff(dm, 16, 1e6, 1), 0.3, 1e-12);
    pf_devmodel_destroy(&dm);
    pf_devmodel_destroy(&dm); /* idempotent */
    CU_ASSERT_PTR_NULL(dm);
}

static void test_gemm_time(void)
{
    pf_devmodel_t *dm = tiny();
    double f = 2.0 * 1024 * 1024 * 1024;
    /* at a grid point: 2mnk / (peak x eff) */
    PF_ASSERT_CLOSE(pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 1024, 1024, 1024, 1),
                    f / (100e12 * 0.8) * 1e3, 1e-12);
    /* batch 4 of 256 x 256 x 256: the table at m = 1024 (corner (1, 0, 0) = 0.5), 4x the FLOPs */
    PF_ASSERT_CLOSE(pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 256, 256, 256, 4),
                    4 * 2.0 * 256 * 256 * 256 / (100e12 * 0.5) * 1e3, 1e-12);
    /* fp32 runs at its own peak (10) */
    PF_ASSERT_CLOSE(pf_devmodel_gemm_ms(dm, PF_PREC_FP32, 1024, 1024, 1024, 1),
                    f / (10e12 * 0.8) * 1e3, 1e-12);
    /* backward of (m, n, k) = (256, 1024, 256): dX = gemm(256, 256, 1024), corner (0, 0, 1) =
     * 0.2; dW = gemm(256, 1024, 256), corner (0, 1, 0) = 0.3; each 2 x 256 x 1024 x 256 FLOPs */
    pf_op_work_t w = {.gemm_m = 256, .gemm_n = 1024, .gemm_k = 256, .gemm_batch = 1};
    double fwd = -1, bwd = -1, g = 2.0 * 256 * 1024 * 256;
    CU_ASSERT_EQUAL(pf_devmodel_op_ms(dm, PF_PREC_BF16, &w, &fwd, &bwd), 1);
    PF_ASSERT_CLOSE(fwd, g / (100e12 * 0.3) * 1e3, 1e-12);
    PF_ASSERT_CLOSE(bwd, g / (100e12 * 0.2) * 1e3 + g / (100e12 * 0.3) * 1e3, 1e-12);
    pf_devmodel_destroy(&dm);
}

static void test_roofline(void)
{
    pf_devmodel_t *dm = tiny();
    double fwd = -1, bwd = -1;
    /* memory-bound: 3e9 read + 1e9 written at 1000 GB/s, + 5 us; backward 2 x 3e9 + 1e9 */
    pf_op_work_t mem = {.fwd_flops = 1e6, .bytes_read = 3e9, .bytes_written = 1e9};
    CU_ASSERT_EQUAL(pf_devmodel_op_ms(dm, PF_PREC_BF16, &mem, &fwd, &bwd), 1);
    PF_ASSERT_CLOSE(fwd, 4.0 + 0.005, 1e-12);
    PF_ASSERT_CLOSE(bwd, 7.0 + 0.005, 1e-12);
    PF_ASSERT_CLOSE(pf_devmodel_memory_ms(dm, 2e9), 2.005, 1e-12);
    /* compute-bound fused kernel: 1e12 FLOPs at 0.5 of 100 TFLOP/s = 20 ms, backward 2e12 at
     * 0.25 = 80 ms; its 1e6 bytes are 0.001 ms */
    pf_op_work_t att = {.fwd_flops = 1e12, .bwd_flops = 2e12, .bytes_read = 1e6};
    pf_devmodel_op_ms(dm, PF_PREC_BF16, &att, &fwd, &bwd);
    PF_ASSERT_CLOSE(fwd, 20.005, 1e-12);
    PF_ASSERT_CLOSE(bwd, 80.005, 1e-12);
    /* no work: untouched */
    pf_op_work_t none = {0};
    fwd = bwd = -1;
    CU_ASSERT_EQUAL(pf_devmodel_op_ms(dm, PF_PREC_BF16, &none, &fwd, &bwd), 0);
    CU_ASSERT_EQUAL(fwd, -1);
    pf_devmodel_destroy(&dm);
}

static void test_presets(void)
{
    char names[256];
    CU_ASSERT_EQUAL(pf_devmodel_count(), 6);
    CU_ASSERT_STRING_EQUAL(pf_devmodel_names(names, sizeof names),
                           "v100, a100-40g, a100-80g, h100-sxm, h200, b200");
    for (int i = 0; i < pf_devmodel_count(); i++) {
        const pf_devmodel_t *p = pf_devmodel_at(i);
        CU_ASSERT_PTR_EQUAL(pf_devmodel_preset(pf_devmodel_spec(p)->name), p);
        pf_devmodel_t *c = pf_devmodel_copy(p); /* a copy validates like a file */
        CU_ASSERT_PTR_NOT_NULL(c);
        pf_devmodel_destroy(&c);
        pf_devmodel_t *q = (pf_devmodel_t *)p;
        pf_devmodel_destroy(&q); /* a preset is not freed */
        CU_ASSERT_PTR_NOT_NULL(pf_devmodel_at(i));
    }
    CU_ASSERT_PTR_NULL(pf_devmodel_preset("h100"));
    /* V100 has no bf16: it runs at the fp16 peak; tf32 falls back to bf16 -> fp16 */
    const pf_devmodel_t *v = pf_devmodel_preset("v100");
    CU_ASSERT_EQUAL(pf_devmodel_peak_tflops(v, PF_PREC_BF16),
                    pf_devmodel_spec(v)->peak_tflops[PF_PREC_FP16]);
    CU_ASSERT_EQUAL(pf_devmodel_peak_tflops(v, PF_PREC_TF32),
                    pf_devmodel_spec(v)->peak_tflops[PF_PREC_FP16]);
    CU_ASSERT_EQUAL(pf_devmodel_prec_parse("fp8"), PF_PREC_FP8);
    CU_ASSERT_EQUAL(pf_devmodel_prec_parse("int4"), -1);
    /* NVLS: measured on H100 and H200 hosts (480 GB/s), the line rate where unmeasured (B200's
     * 900), none on V100 and A100 */
    CU_ASSERT_EQUAL(pf_devmodel_nvls_busbw_gbps(pf_devmodel_preset("h100-sxm")), 480);
    CU_ASSERT_EQUAL(pf_devmodel_nvls_busbw_gbps(pf_devmodel_preset("h200")), 480);
    CU_ASSERT_EQUAL(pf_devmodel_nvls_busbw_gbps(pf_devmodel_preset("b200")), 900);
    CU_ASSERT_EQUAL(pf_devmodel_nvls_busbw_gbps(pf_devmodel_preset("a100-80g")), 0);
    CU_ASSERT_EQUAL(pf_devmodel_nvls_busbw_gbps(v), 0);
}

/* A table measured on a GPU of twice this one's peak: there the GEMM took (its efficiency on
 * this peak) / 2; less the fixed 5 us, the rest runs twice as long here. */
static void test_borrowed_table(void)
{
    pf_devmodel_spec_t s = tiny_spec();
    s.table_peak_tflops = 200;
    char err[256];
    pf_devmodel_t *dm = pf_devmodel_new(&s, 2, G2, 2, G2, 2, G2, EFF, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm);
    double own_ms = 2.0 * 1024 * 1024 * 1024 / (100e12 * 0.8) * 1e3; /* 0.026844 */
    PF_ASSERT_CLOSE(pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 1024, 1024, 1024, 1),
                    0.005 + (own_ms / 2 - 0.005) * 2, 1e-12);
    /* 256^3 at 0.1: 0.0034 ms here, 0.0017 there, under the fixed cost: the fixed cost */
    PF_ASSERT_CLOSE(pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 256, 256, 256, 1), 0.005, 1e-12);
    /* the table's own GPU: as before */
    s.table_peak_tflops = 100;
    pf_devmodel_set_spec(dm, &s);
    PF_ASSERT_CLOSE(pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 1024, 1024, 1024, 1), own_ms, 1e-12);
    pf_devmodel_destroy(&dm);
    /* the A100 presets borrow the H100's table: a large GEMM scales by the peaks (the fixed cost
     * is 0.2% of it), a small one by less */
    const pf_devmodel_t *a = pf_devmodel_preset("a100-80g"), *h = pf_devmodel_preset("h100-sxm");
    double big = pf_devmodel_gemm_ms(a, PF_PREC_BF16, 8192, 8192, 8192, 1) /
                 pf_devmodel_gemm_ms(h, PF_PREC_BF16, 8192, 8192, 8192, 1);
    double small = pf_devmodel_gemm_ms(a, PF_PREC_BF16, 1024, 1024, 1024, 1) /
                   pf_devmodel_gemm_ms(h, PF_PREC_BF16, 1024, 1024, 1024, 1);
    CU_ASSERT(fabs(big / (989.4 / 312) - 1) < 0.01);
    CU_ASSERT(small < big * 0.95);
}

/* A framework's fixed cost per op is added to each side an op prices, GEMM or not; an op
 * without work stays without a price. */
static void test_op_overhead(void)
{
    pf_devmodel_t *dm = tiny();
    pf_op_work_t g = {.gemm_m = 1024, .gemm_n = 1024, .gemm_k = 1024, .gemm_batch = 1};
    pf_op_work_t m = {.bytes_read = 1e6, .bytes_written = 1e6}, none = {0};
    double f0, b0, f1, b1, mf0, mb0, mf1, mb1, nf = -1, nb = -1;
    pf_devmodel_op_ms(dm, PF_PREC_BF16, &g, &f0, &b0);
    pf_devmodel_op_ms(dm, PF_PREC_BF16, &m, &mf0, &mb0);
    pf_devmodel_spec_t s = tiny_spec();
    s.op_overhead_us_fwd = 20, s.op_overhead_us_bwd = 70;
    pf_devmodel_set_spec(dm, &s);
    pf_devmodel_op_ms(dm, PF_PREC_BF16, &g, &f1, &b1);
    pf_devmodel_op_ms(dm, PF_PREC_BF16, &m, &mf1, &mb1);
    PF_ASSERT_CLOSE(f1 - f0, 0.020, 1e-12);
    PF_ASSERT_CLOSE(b1 - b0, 0.070, 1e-12);
    PF_ASSERT_CLOSE(mf1 - mf0, 0.020, 1e-12);
    PF_ASSERT_CLOSE(mb1 - mb0, 0.070, 1e-12);
    CU_ASSERT_EQUAL(pf_devmodel_op_ms(dm, PF_PREC_BF16, &none, &nf, &nb), 0);
    CU_ASSERT(nf == -1 && nb == -1);
    pf_devmodel_destroy(&dm);
}

static void test_file_round_trip(void)
{
    char err[512], path[512];
    pf_devmodel_t *dm = tiny(), *back = NULL;
    pf_devmodel_spec_t borrowed = tiny_spec();
    borrowed.table_peak_tflops = 250; /* kept through the file (gemm.peak_tflops) */
    borrowed.op_overhead_us_fwd = 12.5, borrowed.op_overhead_us_bwd = 40; /* op_overhead_us */
    pf_devmodel_set_spec(dm, &borrowed);
    snprintf(path, sizeof path, "%s/tiny.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(pf_devmodel_save(dm, path, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_devmodel_load(path, &back, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(memcmp(pf_devmodel_spec(dm), pf_devmodel_spec(back),
                           sizeof(pf_devmodel_spec_t)), 0);
    int nm, nn, nk;
    const double *gm, *gn, *gk, *eff;
    pf_devmodel_table(back, &nm, &gm, &nn, &gn, &nk, &gk, &eff);
    CU_ASSERT(nm == 2 && nn == 2 && nk == 2 && gm[1] == 1024 && gk[0] == 256);
    CU_ASSERT_EQUAL(memcmp(eff, EFF, sizeof EFF), 0);
    /* nvls without its bus bandwidth: the line rate; with it, kept through the file */
    CU_ASSERT_EQUAL(pf_devmodel_nvls_busbw_gbps(back), 300);
    pf_devmodel_spec_t spec = *pf_devmodel_spec(dm);
    spec.nvls_busbw_gbps = 420;
    pf_devmodel_set_spec(dm, &spec);
    pf_devmodel_destroy(&back);
    CU_ASSERT_EQUAL_FATAL(pf_devmodel_save(dm, path, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_devmodel_load(path, &back, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_devmodel_nvls_busbw_gbps(back), 420);
    pf_devmodel_t *r = NULL;
    CU_ASSERT_EQUAL(pf_devmodel_resolve(path, &r, err, sizeof err), PF_OK);
    pf_devmodel_destroy(&r);
    CU_ASSERT_EQUAL(pf_devmodel_resolve("h200", &r, err, sizeof err), PF_OK);
    CU_ASSERT_STRING_EQUAL(pf_devmodel_spec(r)->name, "h200");
    pf_devmodel_destroy(&r);
    CU_ASSERT_EQUAL(pf_devmodel_resolve("nope", &r, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "'nope' is neither a device preset (v100, "));
    pf_devmodel_destroy(&dm);
    pf_devmodel_destroy(&back);
}

/* A valid file with one substitution, and the message its load must give. */
static void rejects(const char *from, const char *to, const char *msg)
{
    static const char *good =
        "{\"format\": \"planfarm-device-model\", \"version\": 1, \"name\": \"x\",\n"
        " \"peak_tflops\": {\"bf16\": 100}, \"hbm_gbps\": 1000, \"memory_bytes\": 8e10,\n"
        " \"fused_efficiency\": {\"fwd\": 0.5, \"bwd\": 0.4},\n"
        " \"gemm\": {\"m\": [256, 1024], \"n\": [256], \"k\": [512],\n"
        "          \"efficiency\": [0.25, 0.75]}}";
    char text[2048], err[512];
    const char *at = strstr(good, from);
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
    pf_devmodel_t *dm = NULL;
    int rc = pf_devmodel_load_buffer(text, strlen(text), "m.json", &dm, err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_EINPUT);
    CU_ASSERT_PTR_NULL(dm);
    if (!strstr(err, msg))
        fprintf(stderr, "\nexpected '%s', got '%s'\n", msg, err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, msg));
    pf_devmodel_destroy(&dm);
}

static void test_file_rejects(void)
{
    char err[256];
    pf_devmodel_t *dm = NULL;
    const char *ok = "{\"format\": \"planfarm-device-model\", \"version\": 1, \"name\": \"x\", "
                     "\"peak_tflops\": {\"bf16\": 100}, \"hbm_gbps\": 1000, \"memory_bytes\": "
                     "8e10, \"fused_efficiency\": {\"fwd\": 0.5, \"bwd\": 0.4}, \"gemm\": "
                     "{\"m\": [256], \"n\": [256], \"k\": [512], \"efficiency\": [0.5]}}";
    CU_ASSERT_EQUAL(pf_devmodel_load_buffer(ok, strlen(ok), "ok.json", &dm, err, sizeof err),
                    PF_OK);
    CU_ASSERT_PTR_NOT_NULL(dm);
    pf_devmodel_destroy(&dm);
    rejects("\"version\": 1", "\"version\": 2", "m.json: device.version: 2, this planfarm reads 1");
    rejects("planfarm-device-model", "planfarm-graph",
            "m.json: device.format: 'planfarm-graph' is not planfarm-device-model");
    rejects("\"hbm_gbps\": 1000,", "", "m.json: device.hbm_gbps: missing");
    rejects("\"hbm_gbps\": 1000", "\"hbm_gbps\": 0", "m.json: device.hbm_gbps: 0 is not in (0,");
    rejects("0.25, 0.75", "0.25, 1.5", "m.json: device.gemm.efficiency[1]: 1.5 is not in (0, 1]");
    rejects("\"hbm_gbps\"", "\"op_overhead_us\": {\"bwd\": -3}, \"hbm_gbps\"",
            "m.json: device.op_overhead_us.bwd: negative");
    rejects("\"hbm_gbps\"", "\"op_overhead_us\": 3, \"hbm_gbps\"",
            "m.json: device.op_overhead_us: not an object");
    rejects("\"efficiency\"", "\"peak_tflops\": -1, \"efficiency\"",
            "m.json: device.gemm.peak_tflops: negative");
    rejects("0.25, 0.75", "0.25", "m.json: device.gemm.efficiency: 1 values, expected 2 "
                                  "(m 2 x n 1 x k 1)");
    rejects("[256, 1024]", "[1024, 256]", "m.json: device.gemm.m[1]: 256 is not above 1024");
    rejects("\"bf16\": 100", "\"bf16\": -1", "m.json: device.peak_tflops.bf16: negative");
    rejects("\"bwd\": 0.4", "\"bwd\": 2", "m.json: device.fused_efficiency: 0.5, 2: each must be");
    rejects("\"k\": [512]", "\"k\": \"512\"", "m.json: device.gemm.k: ");
    rejects("\"name\": \"x\"", "\"name\": 7", "m.json: device.name: ");
    rejects("\"hbm_gbps\": 1000", "\"hbm_gbps\": 1000, \"nvls\": true, \"nvls_busbw_gbps\": -4",
            "m.json: device.nvls_busbw_gbps: negative (-4)");
}

void pf_suite_devmodel(void)
{
    CU_pSuite s = CU_add_suite("devmodel", NULL, NULL);
    CU_add_test(s, "efficiency table: exact at grid points, log-linear, clamped",
                test_interpolation);
    CU_add_test(s, "GEMM time 2mnk / (peak x eff), batch, fp32, backward's dX and dW",
                test_gemm_time);
    CU_add_test(s, "roofline of memory-bound and fused ops; no work = untouched", test_roofline);
    CU_add_test(s, "presets: names, copies validate, precision fallbacks", test_presets);
    CU_add_test(s, "a table borrowed from another GPU: fixed cost kept, the rest scaled",
                test_borrowed_table);
    CU_add_test(s, "op overhead added to each priced side", test_op_overhead);
    CU_add_test(s, "file round trip and resolve", test_file_round_trip);
    CU_add_test(s, "rejected files name file, JSON path and problem", test_file_rejects);
}
