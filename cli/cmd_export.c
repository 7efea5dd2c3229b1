/* planfarm export megatron|deepspeed|torchrun GRAPH CLUSTER PLAN: a mapped, layer-aligned plan
 * as the launch settings of a training framework (planner/export/export.h). */
#include "cli/cli.h"
#include "planner/ir/cluster.h"
#include "planner/export/export_warnings.h"
#include "planner/ir/graph.h"
#include "planner/ir/plan.h"
#include "planner/core/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: planfarm export megatron|deepspeed|torchrun GRAPH CLUSTER PLAN [-o DIR|-]\n\n"
            "Writes what a training framework needs to run PLAN (mapped and layer-aligned: every\n"
            "layers.N block whole in one stage, consecutive blocks per stage):\n"
            "  megatron   megatron_args.sh: MEGATRON_PARALLEL_ARGS, a bash array of Megatron-LM\n"
            "             flags (tensor/pipeline sizes, layers and an uneven split, virtual\n"
            "             stages, micro and global batch, precision, distributed optimizer,\n"
            "             recomputation, sequence parallel: the plan's block-search choices\n"
            "             when it has them), MEGATRON_MODEL_ARGS (hidden size, heads, GQA,\n"
            "             sequence, SwiGLU, RMSNorm, rope, ... from the graph's \"model\"\n"
            "             object) and MEGATRON_ARGS, both: add data, tokenizer and optimizer\n"
            "             settings\n"
            "  deepspeed  ds_config.json: batch sizes, ZeRO stage, bf16, activation\n"
            "             checkpointing (only keys DeepSpeed reads), and pipeline_module.py:\n"
            "             PipelineModule's stages, topology and partition method; to stdout\n"
            "             ds_config.json alone (one JSON document)\n"
            "  torchrun   only the two files below\n"
            "and for every kind hostfile (HOST slots=N) and launch.sh: `launch.sh HOST SCRIPT\n"
            "[ARGS...]` on every host sets CUDA_VISIBLE_DEVICES and runs torchrun with that\n"
            "host's --node-rank, so that global rank pp x (R x T) + dp x T + tp (Megatron-LM's\n"
            "order) runs on the device the plan chose. When torchrun cannot realise the plan's\n"
            "placement (a host's ranks are not one contiguous block) the closest layout is\n"
            "written and a warning says why; so does a warning line (stderr) for every plan\n"
            "property the framework cannot express (DeepSpeed: selective recomputation,\n"
            "tensor parallelism, sequence parallelism, virtual stages, uneven stages;\n"
            "Megatron-LM: ZeRO 2 or 3; both: a schedule other than 1F1B).\n\n"
            "  -o DIR   write the files into DIR (created if missing); - or none: to stdout\n\n"
            "Exit status 2 on bad usage or input, including a plan that is not layer-aligned or\n"
            "that the framework cannot express (the message says why); 3 for a plan whose\n"
            "stages differ in data- or tensor-parallel degree (none of these runs it).\n");
}

typedef int (*writer_fn)(const pf_export_t *, FILE *, char *, size_t);

typedef struct {
    const char *file;
    writer_fn write;
} output_t;

/* Write one output to DIR/file (removed again if its writer refuses) or to stdout (under a
 * "# ==> FILE <==" line unless bare). */
static int write_output(const pf_export_t *x, const output_t *o, const char *dir, int bare,
                        int first, char *err, size_t errlen)
{
    if (!dir) {
        if (!first)
            printf("\n");
        if (!bare)
            printf("# ==> %s <==\n", o->file);
        return o->write(x, stdout, err, errlen);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, o->file);
    FILE *f = fopen(path, "w");
    if (!f)
        return pf_fail(err, errlen, PF_ERR, "%s: cannot write: %s", path, strerror(errno));
    int rc = o->write(x, f, err, errlen);
    if (fclose(f) != 0 && rc == PF_OK)
        rc = pf_fail(err, errlen, PF_ERR, "%s: write failed", path);
    if (rc != PF_OK)
        remove(path);
    else if (!strcmp(o->file, "launch.sh"))
        chmod(path, 0755);
    return rc;
}

static void print_warnings(const pf_export_t *x, pf_export_kind_t kind)
{
    char lines[8][PF_EXPORT_WARN_LEN];
    int n = pf_export_warnings(x, kind, lines, 8);
    for (int i = 0; i < n && i < 8; i++)
        fprintf(stderr, "planfarm export: warning: %s: %s\n", pf_export_kind_name(kind), lines[i]);
    if (!pf_export_exact(x))
        fprintf(stderr, "planfarm export: warning: the layout is not the plan's: %s\n",
                pf_export_reason(x));
}

/* The framework's own files first: when they refuse the plan, nothing else is written. To
 * stdout DeepSpeed writes ds_config.json alone, so that stdout is one JSON document. */
static int write_outputs(const pf_export_t *x, pf_export_kind_t kind, const char *dir, char *err,
                         size_t errlen)
{
    const output_t own[3][2] = {{{"megatron_args.sh", pf_export_write_megatron}, {NULL, NULL}},
                                {{"ds_config.json", pf_export_write_deepspeed},
                                 {"pipeline_module.py", pf_export_write_deepspeed_pipe}},
                                {{NULL, NULL}, {NULL, NULL}}};
    const output_t outputs[] = {own[kind][0], own[kind][1], {"hostfile", pf_export_write_hostfile},
                                {"launch.sh", pf_export_write_launch}};
    size_t nout = kind == PF_EXPORT_DEEPSPEED && !dir ? 1 : sizeof outputs / sizeof outputs[0];
    int rc = PF_OK, written = 0;
    char names[256] = "";
    for (size_t i = 0; i < nout && rc == PF_OK; i++) {
        if (!outputs[i].file)
            continue;
        rc = write_output(x, &outputs[i], dir, kind == PF_EXPORT_DEEPSPEED, written++ == 0, err,
                          errlen);
        if (rc != PF_OK && i < 2)
            pf_err_prefix(err, errlen, pf_export_kind_name(kind));
        size_t at = strlen(names);
        snprintf(names + at, sizeof names - at, "%s%s", at ? ", " : "", outputs[i].file);
    }
    if (rc != PF_OK)
        return rc;
    print_warnings(x, kind);
    if (dir)
        fprintf(stderr, "planfarm export: wrote %s to %s\n", names, dir);
    else if (kind == PF_EXPORT_DEEPSPEED)
        fprintf(stderr, "planfarm export: stdout holds ds_config.json only; -o DIR also writes "
                        "pipeline_module.py, hostfile and launch.sh\n");
    return PF_OK;
}

int cmd_export(int argc, char **argv)
{
    const char *out = NULL;
    const cli_options_t spec = {"export", help, NULL, NULL,
                                {{cli_options_output, &out, NULL}, {NULL, NULL, NULL}}};
    char err[CLI_ERRLEN] = "";
    int rc, first = cli_options_parse(&spec, argc, argv, &rc);
    if (first < 0)
        return rc;
    if (argc - first != 4)
        return cli_usage_error("export", "expected KIND GRAPH CLUSTER PLAN (see --help)");
    pf_export_kind_t kind;
    if (pf_export_parse_kind(argv[first], &kind) != PF_OK)
        return cli_usage_error("export", "'%s' is not megatron, deepspeed or torchrun",
                               argv[first]);
    const char *gpath = argv[first + 1], *cpath = argv[first + 2], *ppath = argv[first + 3];
    if ((!strcmp(gpath, "-")) + (!strcmp(cpath, "-")) + (!strcmp(ppath, "-")) > 1)
        return cli_usage_error("export", "only one of GRAPH, CLUSTER, PLAN can be - (stdin)");
    const char *dir = out && strcmp(out, "-") ? out : NULL;
    if (dir && mkdir(dir, 0777) != 0 && errno != EEXIST)
        return cli_usage_error("export", "-o %s: cannot create: %s", dir, strerror(errno));

    pf_graph_t *g = NULL;
    pf_cluster_t *cl = NULL;
    pf_plan_t *p = NULL;
    pf_export_t *x = NULL;
    if ((rc = pf_graph_load(gpath, &g, err, sizeof err)) != PF_OK ||
        (rc = pf_cluster_load(cpath, &cl, err, sizeof err)) != PF_OK ||
        (rc = pf_plan_load(ppath, g, cl, &p, err, sizeof err)) != PF_OK)
        goto done;
    if (!(x = pf_export_new(p, g, cl, &rc, err, sizeof err))) {
        pf_err_prefix(err, sizeof err, strcmp(ppath, "-") ? ppath : "<stdin>");
        goto done;
    }
    rc = write_outputs(x, kind, dir, err, sizeof err);
done:
    pf_export_destroy(&x);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&cl);
    pf_graph_destroy(&g);
    return rc == PF_OK ? CLI_OK : cli_report("export", rc, err);
}
