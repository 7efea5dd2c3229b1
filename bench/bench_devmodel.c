/* The h100-sxm device model against PyTorch's per-op GPT layer times on an H100 (bf16, seq
 * 2048): tests/data/h100/h100_reference.json (../shared/data/h100) and its rerun at TP slices
 * 1, 2, 4, 8, h100_torch_layers.json (bench/results/gpu-2026-11-26.md says why the rerun is the
 * better check). Each op is priced from its shapes as a generator would give its work: qkv,
 * out_proj, fc1, fc2 as GEMMs; layernorm, residual add and gelu as memory-bound (bytes of bf16
 * activations read and written); attention_core as a flash kernel of 4 s^2 (h / T) x 0.5
 * (causal) FLOPs forward, 2.5x that backward. Prints measured, predicted and their ratio per
 * op (forward and backward) and per layer (fwd + bwd summed); the target (issue 21): every
 * layer within 10%. */
#include "planner/core/util.h"
#include "planner/ir/devmodel.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The work of one op of a GPT layer at hidden h, T-way slice, seq s, micro-batch mb. */
static int layer_op_work(const char *op, double h, double t, double s, double mb,
                         pf_op_work_t *w)
{
    double M = s * mb, N = M * h * 2, hp = h / t; /* N: bytes of one bf16 activation */
    memset(w, 0, sizeof *w);
    w->gemm_batch = 1;
    if (!strcmp(op, "qkv"))
        w->gemm_m = (int64_t)M, w->gemm_n = (int64_t)(3 * hp), w->gemm_k = (int64_t)h;
    else if (!strcmp(op, "out_proj"))
        w->gemm_m = (int64_t)M, w->gemm_n = (int64_t)h, w->gemm_k = (int64_t)hp;
    else if (!strcmp(op, "fc1"))
        w->gemm_m = (int64_t)M, w->gemm_n = (int64_t)(4 * hp), w->gemm_k = (int64_t)h;
    else if (!strcmp(op, "fc2"))
        w->gemm_m = (int64_t)M, w->gemm_n = (int64_t)h, w->gemm_k = (int64_t)(4 * hp);
    else if (!strncmp(op, "layernorm", 9))
        w->bytes_read = N, w->bytes_written = N;
    else if (!strcmp(op, "residual_add"))
        w->bytes_read = 2 * N, w->bytes_written = N;
    else if (!strcmp(op, "gelu"))
        w->bytes_read = 4 * N / t, w->bytes_written = 4 * N / t;
    else if (!strcmp(op, "attention_core")) {
        w->fwd_flops = 4 * s * s * hp * mb * 0.5;
        w->bwd_flops = 2.5 * w->fwd_flops;
        w->bytes_read = 3 * N / t, w->bytes_written = N / t;
    } else
        return -1;
    return 0;
}

typedef struct {
    int layers, within;
    double worst; /* ratio farthest from 1 */
} tally_t;

static void one_layer(const pf_devmodel_t *dm, json_t *l, tally_t *tl)
{
    double h = json_number_value(json_object_get(l, "hidden")),
           s = json_number_value(json_object_get(l, "seq")),
           mb = json_number_value(json_object_get(l, "microbatch"));
    json_t *tj = json_object_get(l, "tp"), *ops = json_object_get(l, "ops"), *o;
    double t = tj ? json_number_value(tj) : 1, meas = 0, pred = 0;
    size_t i;
    char line[1024];
    int at = 0;
    json_array_foreach(ops, i, o) {
        const char *name = json_string_value(json_object_get(o, "op"));
        double mf = json_number_value(json_object_get(o, "fwd_ms")),
               mbw = json_number_value(json_object_get(o, "bwd_ms")), pf = 0, pb = 0;
        pf_op_work_t w;
        if (!name || layer_op_work(name, h, t, s, mb, &w))
            continue;
        pf_devmodel_op_ms(dm, PF_PREC_BF16, &w, &pf, &pb);
        meas += mf + mbw, pred += pf + pb;
        at += snprintf(line + at, sizeof line - (size_t)at, " %.4s %.2f/%.2f", name,
                       pf / mf, mbw > 0 ? pb / mbw : 0);
    }
    double r = pred / meas;
    tl->layers++;
    tl->within += fabs(r - 1) <= 0.10;
    if (fabs(r - 1) > fabs(tl->worst - 1))
        tl->worst = r;
    printf("%6.0f %3.0f %2.0f %9.3f %9.3f %6.3f %s |%s\n", h, mb, t, meas, pred, r,
           fabs(r - 1) <= 0.10 ? "ok " : "OUT", line);
}

static int check_file(const pf_devmodel_t *dm, const char *rel)
{
    char path[1024];
    const char *dir = getenv("PF_DATA");
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/data", rel);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je), *layers, *l;
    if (!root) {
        fprintf(stderr, "devmodel: %s: %s\n", path, je.text);
        return -1;
    }
    layers = json_object_get(root, "gpt_layers");
    tally_t tl = {0, 0, 1};
    size_t i;
    printf("\n%s on %s (ratios predicted / measured; per op fwd/bwd)\n", rel,
           pf_devmodel_spec(dm)->name);
    printf("%6s %3s %2s %9s %9s %6s %s\n", "hidden", "mb", "T", "meas ms", "pred ms", "ratio",
           "10%");
    json_array_foreach(layers, i, l) one_layer(dm, l, &tl);
    printf("%d of %d layers within 10%%; worst ratio %.3f\n", tl.within, tl.layers, tl.worst);
    json_decref(root);
    return 0;
}

int pf_bench_devmodel(void)
{
    const pf_devmodel_t *dm = pf_devmodel_preset("h100-sxm");
    if (check_file(dm, "h100/h100_reference.json") ||
        check_file(dm, "h100/h100_torch_layers.json"))
        return 1;
    return 0;
}
