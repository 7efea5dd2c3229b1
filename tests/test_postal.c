/* postal: the fit on synthetic sweeps with known latency and bandwidth, the look-up table below
 * the crossover, and the H100's measured host -> device sweep. */
#include "planner/core/rng.h"
#include "planner/core/util.h"
#include "planner/inputs/postal.h"
#include "tests/testutil.h"

#include <jansson.h>

/* 4 B .. 256 MiB by x4: 14 sizes. */
static int sweep(double *bytes)
{
    int n = 0;
    for (double b = 4; b <= 268435456.0; b *= 4)
        bytes[n++] = b;
    return n;
}

static void test_exact(void)
{
    double x[PF_SWEEP_MAX], y[PF_SWEEP_MAX];
    int n = sweep(x);
    pf_postal_t p;
    char err[256];
    CU_ASSERT_EQUAL(n, 14);
    /* 20 us + bytes / 50 GB/s: 1 MB takes 0.02 + 1e6 / 5e7 = 0.04 ms */
    for (int i = 0; i < n; i++)
        y[i] = 0.02 + x[i] / 5e7;
    CU_ASSERT_EQUAL_FATAL(pf_postal_fit(x, y, n, PF_POSTAL_TOL, &p, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(p.lat_ms, 0.02, 1e-9);
    PF_ASSERT_CLOSE(p.gbps, 50.0, 1e-9);
    CU_ASSERT(p.fit_rel_rms < 1e-9);
    CU_ASSERT_EQUAL(p.nlut, 0);
    CU_ASSERT_EQUAL(p.crossover_bytes, 0);
    PF_ASSERT_CLOSE(pf_postal_ms(&p, 1e6), 0.04, 1e-9);
    PF_ASSERT_CLOSE(pf_postal_ms(&p, 0), 0.02, 1e-9);
}

/* Multiplicative noise, uniform in +-3%, seeded: the fit recovers 20 us and 50 GB/s within a
 * few percent and reports an error of the noise's size (the RMS of U(-3%, 3%) is 1.73%). */
static void test_noise(void)
{
    double x[PF_SWEEP_MAX], y[PF_SWEEP_MAX];
    int n = 0;
    for (double b = 4; b <= 268435456.0; b *= 2)
        x[n++] = b; /* 27 sizes */
    pf_rng_t rng;
    pf_rng_seed(&rng, 13);
    for (int i = 0; i < n; i++)
        y[i] = (0.02 + x[i] / 5e7) * pf_rng_range(&rng, 0.97, 1.03);
    pf_postal_t p;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(pf_postal_fit(x, y, n, PF_POSTAL_TOL, &p, err, sizeof err), PF_OK);
    CU_ASSERT(fabs(p.lat_ms / 0.02 - 1) < 0.03);
    CU_ASSERT(fabs(p.gbps / 50 - 1) < 0.05);
    CU_ASSERT(p.fit_rel_rms > 0.005 && p.fit_rel_rms < 0.03);
    CU_ASSERT_EQUAL(p.nlut, 0); /* every point within 10% */
}

/* A launch floor the straight line cannot follow: 0.03 ms up to 64 KiB, then 0.02 ms + bytes /
 * 20 GB/s (262144 B: 0.02 + 262144 / 2e7 = 0.0331 ms). From 256 KiB on the sweep is exactly that
 * line; with 64 KiB added the line would have to pass 0.03 ms where it gives 0.0233 (29% off),
 * so the crossover is 256 KiB and the table holds 4 B .. 256 KiB (9 points). */
static void test_lut_crossover(void)
{
    double x[PF_SWEEP_MAX], y[PF_SWEEP_MAX];
    int n = sweep(x);
    for (int i = 0; i < n; i++)
        y[i] = x[i] <= 65536 ? 0.03 : 0.02 + x[i] / 2e7;
    pf_postal_t p;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(pf_postal_fit(x, y, n, PF_POSTAL_TOL, &p, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(p.crossover_bytes, 262144);
    CU_ASSERT_EQUAL(p.nlut, 9);
    PF_ASSERT_CLOSE(p.lat_ms, 0.02, 1e-9);
    PF_ASSERT_CLOSE(p.gbps, 20, 1e-9);
    PF_ASSERT_CLOSE(p.lat_floor_ms, 0.03, 1e-12);
    CU_ASSERT(p.fit_rel_rms < 1e-9);
    for (int i = 0; i < 8; i++)
        PF_ASSERT_CLOSE(pf_postal_ms(&p, x[i]), y[i], 1e-12);
    PF_ASSERT_CLOSE(pf_postal_ms(&p, 10), 0.03, 1e-12); /* between two 0.03 points */
    PF_ASSERT_CLOSE(pf_postal_ms(&p, 1), 0.03, 1e-12);  /* clamped below the first size */
    /* halfway between 64 KiB (0.03) and 256 KiB (0.0331072): 163840 B -> 0.0315536 */
    PF_ASSERT_CLOSE(pf_postal_ms(&p, 163840), 0.5 * (0.03 + 0.02 + 262144 / 2e7), 1e-12);
    /* above: the line; 1e8 B = 0.02 + 5 = 5.02 ms */
    PF_ASSERT_CLOSE(pf_postal_ms(&p, 1e8), 5.02, 1e-12);
}

/* The H100's pinned host -> device sweep (tests/data/h100): a 22 us floor to 256 KiB, then
 * 256 MiB in 4.90 ms, about 268435456 / 4.88e-3 s = 55 GB/s. */
static void test_h100_h2d(void)
{
    char path[1024], err[256];
    json_error_t je;
    json_t *root = json_load_file(pf_test_data("h100/h100_reference.json", path, sizeof path), 0,
                                  &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    json_t *sw = json_object_get(root, "host_device_link");
    double x[PF_SWEEP_MAX], y[PF_SWEEP_MAX];
    int n = (int)json_array_size(sw);
    CU_ASSERT_FATAL(n == 14);
    for (int i = 0; i < n; i++) {
        x[i] = json_number_value(json_object_get(json_array_get(sw, (size_t)i), "bytes"));
        y[i] = json_number_value(json_object_get(json_array_get(sw, (size_t)i), "h2d_ms"));
    }
    json_decref(root);
    pf_postal_t p;
    CU_ASSERT_EQUAL_FATAL(pf_postal_fit(x, y, n, PF_POSTAL_TOL, &p, err, sizeof err), PF_OK);
    CU_ASSERT(fabs(p.gbps / 55 - 1) < 0.05);
    CU_ASSERT(p.lat_ms >= 0 && p.lat_ms < 0.026);
    PF_ASSERT_CLOSE(p.lat_floor_ms, 0.022336000576615334, 1e-12);
    CU_ASSERT(p.fit_rel_rms < PF_POSTAL_TOL);
    /* from 1 MiB (29.8 us) up the sweep is a line (10.6 us + bytes / 54.4 GB/s); 256 KiB
     * (22.8 us) would be 15.4 us on it, 32% off: the table holds 4 B .. 1 MiB */
    CU_ASSERT_EQUAL(p.crossover_bytes, 1048576);
    CU_ASSERT_EQUAL(p.nlut, 10);
    PF_ASSERT_CLOSE(pf_postal_ms(&p, 4), y[0], 1e-12);
    PF_ASSERT_CLOSE(pf_postal_ms(&p, 262144), y[8], 1e-12);
}

static void test_bad_input(void)
{
    double x[3] = {4, 16, 16}, y[3] = {1, 2, 3}, yd[3] = {3, 2, 1};
    pf_postal_t p;
    char err[256];
    CU_ASSERT_EQUAL(pf_postal_fit(x, y, 1, PF_POSTAL_TOL, &p, err, sizeof err), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_postal_fit(x, y, 3, PF_POSTAL_TOL, &p, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "given twice"));
    x[2] = 64;
    CU_ASSERT_EQUAL(pf_postal_fit(x, yd, 3, PF_POSTAL_TOL, &p, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no bandwidth"));
    y[1] = -1;
    CU_ASSERT_EQUAL(pf_postal_fit(x, y, 3, PF_POSTAL_TOL, &p, err, sizeof err), PF_EINPUT);
    y[1] = NAN;
    CU_ASSERT_EQUAL(pf_postal_fit(x, y, 3, PF_POSTAL_TOL, &p, err, sizeof err), PF_EINPUT);
}

void pf_suite_postal(void)
{
    CU_pSuite s = CU_add_suite("postal", NULL, NULL);
    CU_add_test(s, "exact sweep: 20 us, 50 GB/s recovered", test_exact);
    CU_add_test(s, "3% seeded noise: fit within 3%/5%, error of the noise's size", test_noise);
    CU_add_test(s, "launch floor: table below the crossover, fit above", test_lut_crossover);
    CU_add_test(s, "H100 host -> device sweep: 55 GB/s, 22 us floor", test_h100_h2d);
    CU_add_test(s, "bad sweeps are refused", test_bad_input);
}
