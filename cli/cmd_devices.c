/* planfarm devices: the device model presets (planner/ir/devmodel.h, docs/DEVICES.md). */
#include "cli/cli.h"
#include "planner/ir/devmodel.h"

#include <stdio.h>

static void help(FILE *f)
{
    fprintf(f, "usage: planfarm devices\n\n"
               "Lists the device model presets that `planfarm model --device` and\n"
               "`planfarm calibrate --base` take: name, dense bf16 TFLOP/s (fp16 where the GPU\n"
               "has no bf16), achievable HBM GB/s, memory GiB, NVLink GB/s per GPU and\n"
               "direction, NVLS (in-switch reduction). docs/DEVICES.md gives their sources.\n");
}

int cmd_devices(int argc, char **argv)
{
    const cli_options_t spec = {"devices", help, NULL, NULL,
                                {{cli_options_help, NULL, NULL}, {NULL, NULL, NULL}}};
    int status, first = cli_options_parse(&spec, argc, argv, &status);
    if (first < 0)
        return status;
    if (first != argc)
        return cli_usage_error("devices", "takes no operand");
    printf("%-10s %10s %9s %8s %8s %5s\n", "name", "bf16 TF/s", "HBM GB/s", "mem GiB",
           "NVLink", "NVLS");
    /* NVLS: the all-reduce bus bandwidth inside a host, GB/s, or "no" */
    for (int i = 0; i < pf_devmodel_count(); i++) {
        const pf_devmodel_t *dm = pf_devmodel_at(i);
        const pf_devmodel_spec_t *s = pf_devmodel_spec(dm);
        char nvls[16] = "no";
        if (s->nvls)
            snprintf(nvls, sizeof nvls, "%.0f", pf_devmodel_nvls_busbw_gbps(dm));
        printf("%-10s %10.1f %9.0f %8.1f %8.0f %5s\n", s->name,
               pf_devmodel_peak_tflops(dm, PF_PREC_BF16), s->hbm_gbps, s->mem_bytes / 1073741824.0,
               s->nvlink_gbps, nvls);
    }
    return CLI_OK;
}
