/* The h100-sxm device model against PyTorch's per-op GPT layer times on an H100 (bf16, seq
 * 2048): tests/data/h100/h100_reference.json (../shared/data/h100) and its rerun at TP slices
 * 1, 2, 4, 8, h100_torch_layers.json (bench/results/gpu-2026-11-26.md says why the rerun is the
 * better check). Each op is priced from its shapes as a generator would give its work: qkv,
 * out_proj, fc1, fc2 as GEMMs; layernorm, residual add and gelu as memory-bound (bytes of bf16
 * activations read and written); attention_core as a flash kernel of 4 s^2 (h / T) x 0.5
 * (causal) FLOPs forward, 2.5x that backward. Prints measured, predicted and their ratio per
 * op (forward and backward) and per layer (fwd + bwd summed); the target (issue 21): every
 * layer within 10%.
 *
 * Then the same files with a framework's fixed cost per op added (planfarm calibrate --layers,
 * planner/inputs/devfit_layers.h): fitted to the file itself, and fitted to the other file
 * (the honest check: the two measurements were taken by different harnesses). */
#include "planner/core/util.h"
#include "planner/inputs/devfit_layers.h"
#include "planner/ir/devmodel.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        if (!name || pf_devfit_layers_op_work(name, h, t, s, mb, &w))
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

static void data_path(const char *rel, char *path, size_t len)
{
    const char *dir = getenv("PF_DATA");
    snprintf(path, len, "%s/%s", dir ? dir : "tests/data", rel);
}

static int check_file(const pf_devmodel_t *dm, const char *rel)
{
    char path[1024];
    data_path(rel, path, sizeof path);
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

/* Layers of rel predicted by `fitted_on`'s fitted overhead (calibrate --layers on that file). */
static int overhead_rows(const pf_devmodel_t *preset, const char *rel, const char *fitted_on)
{
    char path[1024], err[512];
    pf_devmodel_t *fit = NULL, *unused = NULL;
    pf_devfit_layers_report_t rep;
    data_path(fitted_on, path, sizeof path);
    if (pf_devfit_layers_file(path, preset, &fit, &rep, err, sizeof err)) {
        fprintf(stderr, "devmodel: %s\n", err);
        return -1;
    }
    data_path(rel, path, sizeof path);
    int rc = pf_devfit_layers_file(path, fit, &unused, &rep, err, sizeof err);
    if (rc == PF_OK) {
        const pf_devmodel_spec_t *s = pf_devmodel_spec(fit);
        int within = 0;
        double worst = 1;
        for (int i = 0; i < rep.nlayers; i++) {
            double r = rep.layer[i].base_ms / rep.layer[i].meas_ms;
            within += fabs(r - 1) <= 0.10;
            worst = fabs(r - 1) > fabs(worst - 1) ? r : worst;
            printf("  %6.0f %3.0f %2.0f %9.3f %9.3f %6.3f %s\n", rep.layer[i].hidden,
                   rep.layer[i].microbatch, rep.layer[i].tp, rep.layer[i].meas_ms,
                   rep.layer[i].base_ms, r, fabs(r - 1) <= 0.10 ? "ok" : "OUT");
        }
        printf("%s, overhead fitted on %s (fwd %.1f us, bwd %.1f us per op): %d of %d layers "
               "within 10%%; worst ratio %.3f\n", rel, fitted_on, s->op_overhead_us_fwd,
               s->op_overhead_us_bwd, within, rep.nlayers, worst);
    } else
        fprintf(stderr, "devmodel: %s\n", err);
    pf_devmodel_destroy(&fit);
    pf_devmodel_destroy(&unused);
    return rc == PF_OK ? 0 : -1;
}

int pf_bench_devmodel(void)
{
    static const char *files[2] = {"h100/h100_reference.json", "h100/h100_torch_layers.json"};
    const pf_devmodel_t *dm = pf_devmodel_preset("h100-sxm");
    for (int i = 0; i < 2; i++)
        if (check_file(dm, files[i]))
            return 1;
    printf("\nwith a framework's fixed cost per op (planfarm calibrate --layers)\n");
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            printf("\n%s, overhead fitted on %s%s\n", files[i], files[(i + j) % 2],
                   j ? " (the other harness)" : " (itself)");
            if (overhead_rows(dm, files[i], files[(i + j) % 2]))
                return 1;
        }
    return 0;
}
