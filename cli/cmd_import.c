/* planfarm import pipedream|piper FILE: turn a real profile into a graph file. */
#include "cli/cli.h"
#include "planner/ir/graph.h"
#include "planner/inputs/import.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: planfarm import pipedream|piper FILE [--microbatch N] [-o GRAPH]\n\n"
            "Converts a PipeDream layer profile (text) or a Piper planner input (JSON, its\n"
            "single-device \"vanilla\" configuration) into a graph file. FILE may be - for\n"
            "stdin.\n\n"
            "  --microbatch N  the batch size the profile was measured at, recorded in the graph\n"
            "                  (default: known for the shipped profiles, alexnet 256, vgg16 and\n"
            "                  resnet50 128, resnet101 64, Piper resnet 128; otherwise 1)\n"
            "  -o, --output GRAPH  output file (default or -: stdout)\n\n"
            "A one-line summary goes to stderr. Exit status 2 when the profile is invalid; the\n"
            "message names the file and the line (PipeDream) or the JSON path (Piper).\n");
}

typedef struct {
    long long microbatch;
    const char *out;
} import_args_t;

static const cli_option_t import_options[] = {
    {"microbatch", 0, CLI_OPT_LLONG, .offset = offsetof(import_args_t, microbatch), .lo = 1,
     .hi = 1 << 30},
    {"output", 'o', CLI_OPT_STRING, .offset = offsetof(import_args_t, out)},
    CLI_OPTION_HELP,
    CLI_OPTION_END,
};

int cmd_import(int argc, char **argv)
{
    import_args_t a = {0, NULL};
    const cli_options_t spec = {"import", help, NULL, NULL,
                                {{import_options, &a, NULL}, {NULL, NULL, NULL}}};
    char err[CLI_ERRLEN] = "";
    int rc, first = cli_options_parse(&spec, argc, argv, &rc);
    if (first < 0)
        return rc;
    if (argc - first != 2)
        return cli_usage_error("import", "expected a format (pipedream or piper) and one FILE");
    const char *format = argv[first], *path = argv[first + 1];
    int (*import)(const char *, int, pf_graph_t **, char *, size_t);
    if (!strcmp(format, "pipedream"))
        import = pf_import_pipedream;
    else if (!strcmp(format, "piper"))
        import = pf_import_piper;
    else
        return cli_usage_error("import", "unknown format '%s' (pipedream or piper)", format);

    pf_graph_t *g;
    if ((rc = import(path, (int)a.microbatch, &g, err, sizeof err)) != PF_OK)
        return cli_report("import", rc, err);
    rc = pf_graph_save(g, a.out, err, sizeof err);
    if (rc == PF_OK)
        fprintf(stderr, "imported %s: %d ops, %d edges, micro-batch %d%s\n", pf_graph_name(g),
                pf_graph_nops(g), pf_graph_nedges(g), pf_graph_microbatch(g),
                a.microbatch ? "" : pf_graph_microbatch(g) > 1 ? " (the profiled batch)" :
                " (not known for this profile; see --microbatch)");
    pf_graph_destroy(&g);
    return rc == PF_OK ? CLI_OK : cli_report("import", rc, err);
}
