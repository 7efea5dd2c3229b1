/* devfit_layers: a GPT layer op's work worked by hand, the fit recovering the overheads a
 * profile was made with, a base model's own overheads left out of the kernel times, and rejected
 * profiles with their messages. */
#include "planner/core/util.h"
#include "planner/inputs/devfit_layers.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const OPS[] = {"layernorm1", "qkv",      "attention_core", "out_proj",
                                  "residual_add", "layernorm2", "fc1", "gelu", "fc2"};
#define NOPS 9

static void test_op_work(void)
{
    pf_op_work_t w;
    /* h 1024, t 2, s 128, mb 2: 256 token rows, 512 columns per slice */
    CU_ASSERT_EQUAL(pf_devfit_layers_op_work("qkv", 1024, 2, 128, 2, &w), 0);
    CU_ASSERT(w.gemm_m == 256 && w.gemm_n == 1536 && w.gemm_k == 1024 && w.gemm_batch == 1);
    CU_ASSERT_EQUAL(pf_devfit_layers_op_work("fc2", 1024, 2, 128, 2, &w), 0);
    CU_ASSERT(w.gemm_m == 256 && w.gemm_n == 1024 && w.gemm_k == 2048);
    CU_ASSERT_EQUAL(pf_devfit_layers_op_work("out_proj", 1024, 2, 128, 2, &w), 0);
    CU_ASSERT(w.gemm_m == 256 && w.gemm_n == 1024 && w.gemm_k == 512);
    /* one bf16 activation: 256 x 1024 x 2 = 524288 bytes */
    CU_ASSERT_EQUAL(pf_devfit_layers_op_work("layernorm2", 1024, 2, 128, 2, &w), 0);
    CU_ASSERT(w.bytes_read == 524288 && w.bytes_written == 524288 && w.gemm_m == 0);
    CU_ASSERT_EQUAL(pf_devfit_layers_op_work("residual_add", 1024, 2, 128, 2, &w), 0);
    CU_ASSERT(w.bytes_read == 2 * 524288.0 && w.bytes_written == 524288);
    CU_ASSERT_EQUAL(pf_devfit_layers_op_work("gelu", 1024, 2, 128, 2, &w), 0);
    CU_ASSERT(w.bytes_read == 4 * 524288.0 / 2 && w.bytes_written == 4 * 524288.0 / 2);
    /* 4 s^2 (h/t) mb / 2 = 4 x 16384 x 512 x 2 / 2 = 33554432 */
    CU_ASSERT_EQUAL(pf_devfit_layers_op_work("attention_core", 1024, 2, 128, 2, &w), 0);
    CU_ASSERT(w.fwd_flops == 33554432.0 && w.bwd_flops == 2.5 * 33554432.0);
    CU_ASSERT_EQUAL(pf_devfit_layers_op_work("softmax", 1024, 2, 128, 2, &w), -1);
}

/* A profile of two layers whose every op took what `truth` prices it at. */
static json_t *profile_of(const pf_devmodel_t *truth)
{
    static const double shape[2][4] = {{1024, 512, 1, 1}, {2048, 1024, 2, 4}};
    json_t *layers = json_array();
    for (int l = 0; l < 2; l++) {
        json_t *ops = json_array();
        for (int i = 0; i < NOPS; i++) {
            pf_op_work_t w;
            double f = 0, b = 0;
            pf_devfit_layers_op_work(OPS[i], shape[l][0], shape[l][3], shape[l][1], shape[l][2],
                                     &w);
            pf_devmodel_op_ms(truth, PF_PREC_BF16, &w, &f, &b);
            json_array_append_new(ops, json_pack("{s:s, s:f, s:f}", "op", OPS[i], "fwd_ms", f,
                                                 "bwd_ms", b));
        }
        json_array_append_new(layers, json_pack("{s:f, s:f, s:f, s:f, s:o}", "hidden",
                                                 shape[l][0], "seq", shape[l][1], "microbatch",
                                                 shape[l][2], "tp", shape[l][3], "ops", ops));
    }
    return json_pack("{s:o}", "gpt_layers", layers);
}

static pf_devmodel_t *with_overheads(const char *preset, double fwd_us, double bwd_us)
{
    pf_devmodel_t *dm = pf_devmodel_copy(pf_devmodel_preset(preset));
    pf_devmodel_spec_t s = *pf_devmodel_spec(dm);
    s.op_overhead_us_fwd = fwd_us, s.op_overhead_us_bwd = bwd_us;
    pf_devmodel_set_spec(dm, &s);
    return dm;
}

static void test_fit_recovers(void)
{
    pf_devmodel_t *truth = with_overheads("h100-sxm", 20, 55), *out = NULL;
    json_t *root = profile_of(truth);
    pf_devfit_layers_report_t rep;
    char err[256];
    /* the base's own overheads (7, 300) are not part of the kernel times the fit starts from */
    pf_devmodel_t *base = with_overheads("h100-sxm", 7, 300);
    CU_ASSERT_EQUAL_FATAL(pf_devfit_layers_json(root, "p.json", base, &out, &rep, err,
                                                sizeof err), PF_OK);
    CU_ASSERT(fabs(rep.overhead_us_fwd - 20) < 1e-3 && fabs(rep.overhead_us_bwd - 55) < 1e-3);
    CU_ASSERT(fabs(pf_devmodel_spec(out)->op_overhead_us_fwd - 20) < 1e-3);
    CU_ASSERT(rep.nlayers == 2 && rep.nops == 2 * NOPS);
    CU_ASSERT(rep.op_rms_fitted < 1e-6 && rep.op_rms_base > 0.1);
    for (int l = 0; l < 2; l++)
        CU_ASSERT(fabs(rep.layer[l].fitted_ms / rep.layer[l].meas_ms - 1) < 1e-6);
    /* the layer's base prediction carries the base's overheads: 9 x (7 + 300) us over the fit's
     * 9 x (20 + 55) */
    PF_ASSERT_CLOSE(rep.layer[0].base_ms - rep.layer[0].fitted_ms, 9 * (7 + 300 - 20 - 55) / 1e3,
                    1e-6);
    /* everything else is the base's */
    CU_ASSERT_EQUAL(pf_devmodel_spec(out)->hbm_gbps, pf_devmodel_spec(base)->hbm_gbps);
    CU_ASSERT_STRING_EQUAL(pf_devmodel_spec(out)->name, "h100-sxm");
    json_decref(root);
    pf_devmodel_destroy(&out);
    pf_devmodel_destroy(&base);
    pf_devmodel_destroy(&truth);
}

static const char *good = "{\"gpt_layers\": [{\"hidden\": 1024, \"seq\": 512, "
                          "\"microbatch\": 1, \"ops\": [{\"op\": \"qkv\", \"fwd_ms\": 0.1, "
                          "\"bwd_ms\": 0.2}, {\"op\": \"gelu\", \"fwd_ms\": 0.01, \"bwd_ms\": "
                          "0.02}]}]}";

/* The valid two-op profile above with one substitution, and the message its fit must give. */
static void rejects(const char *from, const char *to, const char *msg)
{
    char text[1024], err[512];
    const char *at = strstr(good, from);
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    pf_devmodel_t *out = NULL;
    pf_devfit_layers_report_t rep;
    int rc = pf_devfit_layers_json(root, "p.json", pf_devmodel_preset("h100-sxm"), &out, &rep,
                                   err, sizeof err);
    CU_ASSERT_EQUAL(rc, PF_EINPUT);
    CU_ASSERT_PTR_NULL(out);
    if (!strstr(err, msg))
        fprintf(stderr, "\nexpected '%s', got '%s'\n", msg, err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, msg));
    json_decref(root);
}

static void test_rejects_each(void)
{
    json_t *root = json_loads(good, 0, NULL);
    pf_devmodel_t *out = NULL;
    pf_devfit_layers_report_t rep;
    char err[256];
    CU_ASSERT_EQUAL(pf_devfit_layers_json(root, "p.json", pf_devmodel_preset("h100-sxm"), &out,
                                          &rep, err, sizeof err), PF_OK);
    CU_ASSERT(rep.nlayers == 1 && rep.nops == 2 && rep.layer[0].tp == 1);
    json_decref(root);
    pf_devmodel_destroy(&out);
    rejects("\"gpt_layers\"", "\"layers\"", "p.json: profile.gpt_layers: missing");
    rejects("\"op\": \"gelu\"", "\"op\": \"softmax\"",
            "p.json: gpt_layers[0].ops[1].op: 'softmax' is not a GPT layer op");
    rejects("\"hidden\": 1024", "\"hidden\": 0", "p.json: gpt_layers[0].hidden: zero");
    rejects("\"microbatch\": 1", "\"microbatch\": 1.5", "gpt_layers[0].microbatch: 1.5 is not a "
            "whole number");
    rejects("\"fwd_ms\": 0.1", "\"fwd_ms\": -0.1", "gpt_layers[0].ops[0].fwd_ms: negative");
    rejects("\"bwd_ms\": 0.02", "\"bwd_ms\": \"x\"", "gpt_layers[0].ops[1].bwd_ms: not a number");
    rejects("\"microbatch\": 1,", "\"microbatch\": 1, \"tp\": 0,", "gpt_layers[0].tp: zero");
    rejects("[{\"hidden\"", "[], \"x\": [{\"hidden\"", "p.json: gpt_layers: 0 layers");
}

void pf_suite_devfit_layers(void)
{
    CU_pSuite s = CU_add_suite("devfit_layers", NULL, NULL);
    CU_add_test(s, "GPT layer ops' work worked by hand", test_op_work);
    CU_add_test(s, "the fit recovers the overheads a profile was made with", test_fit_recovers);
    CU_add_test(s, "rejected profiles name the file, the place and the problem",
                test_rejects_each);
}
