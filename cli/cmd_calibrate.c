/* planfarm calibrate SWEEP [--base PRESET] [-o MODEL]: a device model fitted to a measured
 * sweep (planner/inputs/devfit.h), with the fit's error per family of records; with --layers,
 * the per-op framework overhead fitted to measured GPT layer times (devfit_layers.h). */
#include "cli/cli.h"
#include "planner/core/util.h"
#include "planner/inputs/devfit.h"
#include "planner/inputs/devfit_layers.h"
#include "planner/ir/devmodel.h"

#include <stddef.h>
#include <stdio.h>

#define CMD "calibrate"

typedef struct {
    const char *base, *out;
    int quiet, layers;
} calibrate_args_t;

static void help(FILE *f)
{
    char names[256];
    fprintf(f,
            "usage: planfarm calibrate SWEEP [--base DEVICE] [-o MODEL]\n"
            "       planfarm calibrate --layers PROFILE [--base DEVICE] [-o MODEL]\n\n"
            "Fits a device model (format planfarm-device-model) to a GPU's measured sweep\n"
            "(`planfarm profile --local --sweep`): the bf16 GEMM efficiency table over the\n"
            "sweep's (m, n, k) grid, each other precision's scale, the HBM copy roofline\n"
            "(bandwidth of the largest copy, a launch cost) and the memory the GPU reported.\n"
            "Peaks, the fused-kernel (flash attention) efficiency and the NVLink facts come\n"
            "from --base. Prints, per family of records, how far the fitted model's times\n"
            "are from the measured ones (rms and worst of predicted / measured - 1).\n\n"
            "With --layers, PROFILE holds per-op GPT layer times (its \"gpt_layers\", as in\n"
            "../shared/data/h100): every op is priced on --base, and a framework's fixed\n"
            "cost per op (forward, backward) is fitted to them and written as the model's\n"
            "op_overhead_us; prints each layer measured, predicted before and after.\n\n"
            "  --base DEVICE     a preset (%s) or a model file\n"
            "                    (default h100-sxm)\n"
            "  --layers          PROFILE is GPT layer times, not a sweep\n"
            "  -o, --output FILE the model (default or -: stdout); the table goes to stderr\n"
            "  -q, --quiet       no table\n",
            pf_devmodel_names(names, sizeof names));
}

#define A(field) offsetof(calibrate_args_t, field)
static const cli_option_t options[] = {
    {"base", 0, CLI_OPT_STRING, .offset = A(base)},
    {"output", 'o', CLI_OPT_STRING, .offset = A(out)},
    {"quiet", 'q', CLI_OPT_SET_INT, .offset = A(quiet), .lo = 1},
    {"layers", 0, CLI_OPT_SET_INT, .offset = A(layers), .lo = 1},
    CLI_OPTION_HELP,
    CLI_OPTION_END,
};
#undef A

static void print_report(const pf_devfit_report_t *rep, const pf_devmodel_t *dm)
{
    const pf_devmodel_spec_t *s = pf_devmodel_spec(dm);
    fprintf(stderr, "%s: %d GEMM and %d copy records; HBM %.1f GB/s, launch %.2f us\n", s->name,
            rep->ngemm, rep->ncopy, s->hbm_gbps, s->launch_us);
    fprintf(stderr, "%-20s %5s %9s %9s\n", "family", "n", "rms", "worst");
    for (int i = 0; i < rep->nfamilies; i++) {
        const pf_devfit_family_t *f = &rep->family[i];
        fprintf(stderr, "%-20s %5d %8.1f%% %+8.1f%%\n", f->name, f->n, 100 * f->rms,
                100 * f->worst);
    }
}

static void print_layers(const pf_devfit_layers_report_t *rep)
{
    fprintf(stderr, "%d layers, %d ops; op overhead fitted: fwd %.1f us, bwd %.1f us; "
            "ops off by %.1f%% before, %.1f%% after (rms of log ratio)\n", rep->nlayers, rep->nops,
            rep->overhead_us_fwd, rep->overhead_us_bwd, 100 * rep->op_rms_base,
            100 * rep->op_rms_fitted);
    fprintf(stderr, "%7s %5s %4s %4s %9s %9s %6s %9s %6s\n", "hidden", "seq", "mb", "tp",
            "meas ms", "base ms", "ratio", "fit ms", "ratio");
    for (int i = 0; i < rep->nlayers; i++) {
        const pf_devfit_layer_t *l = &rep->layer[i];
        fprintf(stderr, "%7.0f %5.0f %4.0f %4.0f %9.3f %9.3f %6.3f %9.3f %6.3f\n", l->hidden,
                l->seq, l->microbatch, l->tp, l->meas_ms, l->base_ms, l->base_ms / l->meas_ms,
                l->fitted_ms, l->fitted_ms / l->meas_ms);
    }
}

static int fit(const calibrate_args_t *a, const char *path, const pf_devmodel_t *base,
               pf_devmodel_t **dm, char *err, size_t errlen)
{
    if (a->layers) {
        pf_devfit_layers_report_t rep;
        int rc = pf_devfit_layers_file(path, base, dm, &rep, err, errlen);
        if (rc == PF_OK && !a->quiet)
            print_layers(&rep);
        return rc;
    }
    pf_devfit_report_t rep;
    int rc = pf_devfit_sweep_file(path, base, dm, &rep, err, errlen);
    if (rc == PF_OK && !a->quiet)
        print_report(&rep, *dm);
    return rc;
}

int cmd_calibrate(int argc, char **argv)
{
    calibrate_args_t a = {.base = "h100-sxm"};
    const cli_options_t spec = {CMD, help, NULL, NULL, {{options, &a, NULL}, {NULL, NULL, NULL}}};
    int status, first = cli_options_parse(&spec, argc, argv, &status);
    if (first < 0)
        return status;
    if (argc - first != 1)
        return cli_usage_error(CMD, a.layers ? "expected one profile of GPT layer times"
                                              : "expected one sweep file (planfarm profile "
                                                "--local --sweep)");
    if (cli_check_output(CMD, a.out))
        return CLI_USAGE;
    char err[CLI_ERRLEN] = "";
    pf_devmodel_t *base = NULL, *dm = NULL;
    int rc = pf_devmodel_resolve(a.base, &base, err, sizeof err);
    if (rc != PF_OK) {
        pf_err_prefix(err, sizeof err, "--base");
        return cli_report(CMD, rc, err);
    }
    rc = fit(&a, argv[first], base, &dm, err, sizeof err);
    if (rc == PF_OK)
        rc = pf_devmodel_save(dm, a.out, err, sizeof err);
    pf_devmodel_destroy(&base);
    pf_devmodel_destroy(&dm);
    return rc == PF_OK ? CLI_OK : cli_report(CMD, rc, err);
}
