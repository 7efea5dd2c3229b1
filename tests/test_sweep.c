/* sweep: the device-model sweep over a fake GPU (the real one runs in make test-gpu): the
 * grid's size, each record's shape and times as the probe gave them, a failure named. */
#include "profiler/sweep.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <string.h>

static int calls, fail_at;
static int reps_asked[4]; /* the last four op_time calls' reps, latest last */

static int fake_info(int dev, pf_gpu_info_t *out, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "fake %d", dev);
    out->sm_count = 132;
    return PF_OK;
}

/* A GEMM runs at 1 PFLOP/s (2mnk flop take 2mnk / 1e12 ms); anything else 1 ms. */
static int fake_op(int dev, const pf_op_probe_t *p, int reps, double *fwd, double *bwd,
                   char *err, size_t errlen)
{
    (void)dev;
    memmove(reps_asked, reps_asked + 1, sizeof reps_asked - sizeof reps_asked[0]);
    reps_asked[3] = reps;
    if (++calls == fail_at)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    *fwd = p->kind == PF_CUDA_OP_GEMM ? 2.0 * p->m * p->n * p->k * p->batch / 1e12 : 1;
    *bwd = 2 * *fwd;
    return PF_OK;
}

static int fake_hbm(int dev, double bytes, int reps, double *ms, char *err, size_t errlen)
{
    (void)dev, (void)reps, (void)err, (void)errlen;
    calls++;
    *ms = 2 * bytes / 3e9; /* 3 TB/s read + write */
    return PF_OK;
}

static const pf_cuda_api_t fake = {.build = "fake", .device_info = fake_info,
                                   .op_time = fake_op, .hbm_copy = fake_hbm};

static size_t records(const json_t *root)
{
    static const char *const keys[] = {"gemm", "attention", "elementwise", "layernorm",
                                       "softmax", "hbm_copy"};
    size_t n = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        n += json_array_size(json_object_get(root, keys[i]));
    return n;
}

static void test_grid(void)
{
    char err[256];
    pf_sweep_opts_t full = {.device = 0, .reps = 3}, quick = {.device = 0, .reps = 3, .quick = 1};
    /* 7 x 6 x 6 bf16 GEMMs + 5 x 2 fp16/fp32 squares + 5 x 3 x 2 attention + 7 x 2 elementwise
     * + 3 x 4 x 2 layernorm/softmax + 7 HBM copies */
    CU_ASSERT_EQUAL(pf_sweep_count(&full), 252 + 10 + 30 + 14 + 24 + 7);
    CU_ASSERT_EQUAL(pf_sweep_count(&quick), 8 + 4 + 8 + 4 + 8 + 2);
    calls = 0, fail_at = -1;
    json_t *r = pf_sweep_run(&fake, &full, NULL, NULL, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(calls, pf_sweep_count(&full));
    CU_ASSERT_EQUAL(records(r), (size_t)pf_sweep_count(&full));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r, "format")),
                           "planfarm-device-sweep");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(r, "gpu"), "name")),
                           "fake 0");
    /* the last bf16 GEMM is 16384 x 16384 x 16384: 2 * 2^42 / 1e12 ms */
    json_t *g = json_array_get(json_object_get(r, "gemm"), 251);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(g, "m")), 16384);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(g, "k")), 16384);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(g, "fwd_ms")), 8.796093022208, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(g, "bwd_ms")), 17.592186044416, 1e-9);
    json_t *h = json_array_get(json_object_get(r, "hbm_copy"), 0); /* 1 MiB */
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(h, "gbps_read_plus_write")), 3000, 1e-6);
    json_decref(r);
}

static void test_failure_named(void)
{
    char err[256] = "";
    pf_sweep_opts_t quick = {.device = 0, .reps = 1, .quick = 1};
    calls = 0, fail_at = 3; /* two HBM copies, then the first GEMM */
    CU_ASSERT_PTR_NULL(pf_sweep_run(&fake, &quick, NULL, NULL, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "gemm bf16 256x512x512"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "out of memory"));
}

/* Each op probe: one untimed run sizes the soak, the soak runs ceil(soak / (fwd + bwd)) reps,
 * then the timed run; the HBM copies are not soaked. */
static void test_soak(void)
{
    char err[256];
    pf_sweep_opts_t o = {.device = 0, .reps = 7, .soak_ms = 100};
    calls = 0, fail_at = -1;
    json_t *r = pf_sweep_run(&fake, &o, NULL, NULL, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    int copies = (int)json_array_size(json_object_get(r, "hbm_copy"));
    CU_ASSERT_EQUAL(copies, 7);
    CU_ASSERT_EQUAL(calls, copies + 3 * (pf_sweep_count(&o) - copies));
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(r, "soak_ms")), 100, 0);
    json_decref(r);
    /* the sweep ends on the memory-bound kernels (1 + 2 ms a rep: 34 reps of soak) */
    CU_ASSERT_EQUAL(reps_asked[1], 1);
    CU_ASSERT_EQUAL(reps_asked[2], 34);
    CU_ASSERT_EQUAL(reps_asked[3], 7);
    pf_sweep_opts_t quick = {.device = 0, .reps = 5, .quick = 1, .soak_ms = 100};
    calls = 0, fail_at = 2 + 8 * 3; /* two copies, then the last GEMM's timed run */
    CU_ASSERT_PTR_NULL(pf_sweep_run(&fake, &quick, NULL, NULL, err, sizeof err));
    CU_ASSERT_EQUAL(reps_asked[1], 1);
    CU_ASSERT_EQUAL(reps_asked[2], 31045); /* quick's last GEMM, 512 x 1024 x 1024: 3.2 us */
    CU_ASSERT_EQUAL(reps_asked[3], 5);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "gemm bf16 512x1024x1024"));
}

void pf_suite_sweep(void)
{
    CU_pSuite s = CU_add_suite("sweep", NULL, NULL);
    CU_add_test(s, "the grid, every record as the probe timed it", test_grid);
    CU_add_test(s, "a failing probe is named and nothing is returned", test_failure_named);
    CU_add_test(s, "each op probe is soaked for its own time before it is timed", test_soak);
}
