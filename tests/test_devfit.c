/* devfit: a sweep generated from a known model is fitted back exactly; the real H100 and H200
 * sweeps reproduce the presets' tables and fit within the errors docs/DEVICES.md states; bad
 * sweeps are rejected with their place. */
#include "planner/core/util.h"
#include "planner/inputs/devfit.h"
#include "planner/ir/devmodel.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double GM[3] = {256, 1024, 4096}, GN[2] = {512, 2048}, GK[2] = {512, 8192};

static pf_devmodel_t *known(void)
{
    pf_devmodel_spec_t s = {"known", {400, 400, 40, 200, 800}, {1, 1, 1, 1, 1}, 2000, 4, 40e9,
                            0.5, 0.4, 300, 0, 8, 0, 0, 0, 0};
    double eff[12];
    for (int i = 0; i < 12; i++)
        eff[i] = 0.05 + 0.07 * i;
    return pf_devmodel_new(&s, 3, GM, 2, GN, 2, GK, eff, NULL, 0);
}

static const pf_devfit_family_t *family(const pf_devfit_report_t *r, const char *name)
{
    for (int i = 0; i < r->nfamilies; i++)
        if (!strcmp(r->family[i].name, name))
            return &r->family[i];
    CU_FAIL("family missing");
    return &r->family[0];
}

/* Every grid GEMM priced by dm, and copies of 1 MiB .. 1 GiB priced by its roofline. */
static char *synthetic(const pf_devmodel_t *dm)
{
    size_t cap = 1 << 16, at = 0;
    char *t = malloc(cap);
    at += (size_t)snprintf(t + at, cap - at, "{\"format\": \"planfarm-device-sweep\", "
                           "\"gpu\": {\"mem_bytes\": 5e10}, \"gemm\": [");
    for (int c = 0; c < 12; c++) {
        pf_op_work_t w = {.gemm_m = (int64_t)GM[c / 4], .gemm_n = (int64_t)GN[c / 2 % 2],
                          .gemm_k = (int64_t)GK[c % 2], .gemm_batch = 1};
        double f, b;
        pf_devmodel_op_ms(dm, PF_PREC_BF16, &w, &f, &b);
        at += (size_t)snprintf(t + at, cap - at, "%s{\"dtype\": \"bf16\", \"m\": %lld, \"n\": "
                               "%lld, \"k\": %lld, \"batch\": 1, \"fwd_ms\": %.17g, "
                               "\"bwd_ms\": %.17g}", c ? ", " : "", (long long)w.gemm_m,
                               (long long)w.gemm_n, (long long)w.gemm_k, f, b);
    }
    at += (size_t)snprintf(t + at, cap - at, "], \"hbm_copy\": [");
    for (int i = 0; i < 6; i++) {
        double bytes = 1048576.0 * (1 << (2 * i));
        at += (size_t)snprintf(t + at, cap - at, "%s{\"bytes\": %.17g, \"ms\": %.17g}",
                               i ? ", " : "", bytes, pf_devmodel_memory_ms(dm, 2 * bytes));
    }
    snprintf(t + at, cap - at, "]}");
    return t;
}

static void test_synthetic_recovered(void)
{
    pf_devmodel_t *dm = known(), *fit = NULL;
    char *text = synthetic(dm), err[512];
    char *path = pf_test_write("synthetic-sweep.json", text);
    pf_devfit_report_t rep;
    CU_ASSERT_EQUAL_FATAL(pf_devfit_sweep_file(path, dm, &fit, &rep, err, sizeof err), PF_OK);
    int nm, nn, nk;
    const double *gm, *gn, *gk, *e1, *e2;
    pf_devmodel_table(fit, &nm, &gm, &nn, &gn, &nk, &gk, &e1);
    CU_ASSERT(nm == 3 && nn == 2 && nk == 2 && gm[2] == 4096 && gk[1] == 8192);
    pf_devmodel_table(dm, &nm, &gm, &nn, &gn, &nk, &gk, &e2);
    for (int c = 0; c < 12; c++)
        PF_ASSERT_CLOSE(e1[c], e2[c], 1e-12);
    PF_ASSERT_CLOSE(pf_devmodel_spec(fit)->hbm_gbps, 2000, 1e-12);
    PF_ASSERT_CLOSE(pf_devmodel_spec(fit)->launch_us, 4, 1e-9);
    CU_ASSERT_EQUAL(pf_devmodel_spec(fit)->mem_bytes, 5e10);
    CU_ASSERT_EQUAL(rep.ngemm, 12);
    CU_ASSERT_EQUAL(rep.ncopy, 6);
    CU_ASSERT(family(&rep, "bf16 fwd")->rms < 1e-12);
    CU_ASSERT(family(&rep, "bf16 bwd")->rms < 1e-12);
    CU_ASSERT(family(&rep, "hbm copy")->rms < 1e-12);
    CU_ASSERT_EQUAL(family(&rep, "bf16 fwd")->n, 12);
    free(text);
    pf_devmodel_destroy(&dm);
    pf_devmodel_destroy(&fit);
}

/* calibrate on the measured sweep gives the preset back (the preset's cells are the fit's,
 * rounded to 4 digits) within the fit errors docs/DEVICES.md states. */
static void real_sweep(const char *file, const char *preset, double bwd_rms)
{
    char path[512], err[512];
    pf_devmodel_t *fit = NULL;
    pf_devfit_report_t rep;
    const pf_devmodel_t *p = pf_devmodel_preset(preset);
    pf_test_data(file, path, sizeof path);
    CU_ASSERT_EQUAL_FATAL(pf_devfit_sweep_file(path, p, &fit, &rep, err, sizeof err), PF_OK);
    int nm, nn, nk, pm, pn, pk;
    const double *gm, *gn, *gk, *e1, *e2;
    pf_devmodel_table(fit, &nm, &gm, &nn, &gn, &nk, &gk, &e1);
    pf_devmodel_table(p, &pm, &gm, &pn, &gn, &pk, &gk, &e2);
    CU_ASSERT_FATAL(nm == pm && nn == pn && nk == pk);
    for (int c = 0; c < nm * nn * nk; c++)
        CU_ASSERT(fabs(e1[c] / e2[c] - 1) < 5e-4);
    const pf_devmodel_spec_t *a = pf_devmodel_spec(fit), *b = pf_devmodel_spec(p);
    CU_ASSERT(fabs(a->hbm_gbps / b->hbm_gbps - 1) < 1e-4);
    CU_ASSERT(fabs(a->launch_us - b->launch_us) < 0.01);
    CU_ASSERT(fabs(a->prec_scale[PF_PREC_FP16] - b->prec_scale[PF_PREC_FP16]) < 1e-3);
    CU_ASSERT_EQUAL(a->mem_bytes, b->mem_bytes);
    CU_ASSERT(family(&rep, "bf16 fwd")->rms < 1e-9);
    CU_ASSERT(family(&rep, "bf16 bwd")->rms < bwd_rms);
    CU_ASSERT(family(&rep, "fp16 fwd")->rms < 0.07);
    CU_ASSERT(family(&rep, "hbm copy")->rms < 0.2);
    pf_devmodel_destroy(&fit);
}

static void test_real_sweeps(void)
{
    real_sweep("devices/h100-sweep.json", "h100-sxm", 0.18);
    real_sweep("devices/h200-sweep.json", "h200", 0.14);
}

static void rejects(const char *text, const char *msg)
{
    char err[512];
    pf_devmodel_t *fit = NULL;
    pf_devfit_report_t rep;
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    CU_ASSERT_EQUAL(pf_devfit_sweep_json(root, "s.json", pf_devmodel_preset("h100-sxm"), &fit,
                                         &rep, err, sizeof err), PF_EINPUT);
    if (!strstr(err, msg))
        fprintf(stderr, "\nexpected '%s', got '%s'\n", msg, err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, msg));
    CU_ASSERT_PTR_NULL(fit);
    json_decref(root);
}

static void test_rejects(void)
{
    const char *copy = "\"hbm_copy\": [{\"bytes\": 1e9, \"ms\": 1}]";
    char t[1024];
    rejects("{\"format\": \"x\"}", "s.json: sweep.format: 'x' is not planfarm-device-sweep");
    snprintf(t, sizeof t, "{\"format\": \"planfarm-device-sweep\", \"gemm\": [{\"dtype\": "
             "\"int8\", \"m\": 1, \"n\": 1, \"k\": 1, \"fwd_ms\": 1, \"bwd_ms\": 1}], %s}", copy);
    rejects(t, "s.json: gemm[0].dtype: 'int8' is not bf16");
    snprintf(t, sizeof t, "{\"format\": \"planfarm-device-sweep\", \"gemm\": [{\"dtype\": "
             "\"bf16\", \"m\": 1, \"n\": 1, \"k\": 1, \"fwd_ms\": -1, \"bwd_ms\": 1}], %s}", copy);
    rejects(t, "s.json: gemm[0].fwd_ms: ");
    snprintf(t, sizeof t, "{\"format\": \"planfarm-device-sweep\", \"gemm\": [{\"dtype\": "
             "\"bf16\", \"m\": 1, \"n\": 1, \"k\": 1, \"fwd_ms\": 1, \"bwd_ms\": 1}, {\"dtype\": "
             "\"bf16\", \"m\": 2, \"n\": 2, \"k\": 1, \"fwd_ms\": 1, \"bwd_ms\": 1}], %s}", copy);
    rejects(t, "s.json: gemm: no bf16 record at m 1, n 2, k 1 (the grid needs every");
    rejects("{\"format\": \"planfarm-device-sweep\", \"gemm\": [], \"hbm_copy\": []}",
            "s.json: sweep.hbm_copy: no records");
}

void pf_suite_devfit(void)
{
    CU_pSuite s = CU_add_suite("devfit", NULL, NULL);
    CU_add_test(s, "a sweep made from a known model fits back exactly", test_synthetic_recovered);
    CU_add_test(s, "the H100 and H200 sweeps give the presets back, stated errors",
                test_real_sweeps);
    CU_add_test(s, "bad sweeps rejected with their place", test_rejects);
}
