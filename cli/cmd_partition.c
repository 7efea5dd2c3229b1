/* planfarm partition GRAPH CLUSTER --stages S ...: one (S, R) partition (Parmesan IV), written as
 * a plan whose stages have no devices yet. */
#include "cli/cli.h"
#include "planner/ir/cluster.h"
#include "planner/ir/cost.h"
#include "planner/ir/graph.h"
#include "planner/partition/partition.h"
#include "planner/ir/plan.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: planfarm partition GRAPH CLUSTER --stages S [--replicas R]\n"
            "         [--microbatches MB] [--coarsen K] [--alpha A] [--no-refine]\n"
            "         [--flat-gbps X] [--max-downsets N] [--threads N] [-o OUT]\n\n"
            "Cuts the graph into S pipeline stages minimising the slowest stage time t(H)\n"
            "(compute + boundary traffic over the flat bandwidth, eq. 3) with every stage\n"
            "fitting the smallest device (eq. 14 + parameter state): operator coarsening\n"
            "(IV-B), an exact DP over the downsets of the coarsened graph (eq. 13), then\n"
            "refinement on the original ops (IV-C). Writes a plan without devices.\n\n"
            "  -s, --stages S        pipeline stages (required, <= devices)\n"
            "  -r, --replicas R      replicas per stage (default devices / S)\n"
            "  -m, --microbatches MB micro-batches per step (default %d); eq. 14 stashes\n"
            "                        min(MB, S) stage inputs\n"
            "  -k, --coarsen K       hyper-ops to keep (default: none when the ops' downsets\n"
            "                        fit --max-downsets, else clamp(8 S, 48, ops)); -1 = no\n"
            "                        coarsening (DP on the ops themselves), 0 = default\n"
            "      --alpha A         eq. 4 weight of communication when coarsening (default 1)\n"
            "      --no-refine       skip the refinement\n"
            "      --flat-gbps X     bandwidth for stage traffic (default: the cluster's median)\n"
            "      --max-downsets N  past N downsets, search the prefixes of one topological\n"
            "                        order instead (inexact; default %lld)\n"
            "  -t, --threads N       OpenMP threads for the DP (default: all)\n"
            "  -o, --output OUT      plan file (default or '-': stdout)\n\n"
            "Exit status: 2 bad options or input, 3 no partition fits memory (the message names\n"
            "the op or the stage count).\n",
            PF_DEFAULT_MICROBATCHES, PF_PARTITION_DEFAULT_MAX_DOWNSETS);
}

static void summary(const pf_plan_t *p)
{
    fprintf(stderr,
            "partition: %d stages x %d replicas, objective %.4g ms (%.4g before refinement, "
            "%d moves); %d ops -> %d hyper-ops, %lld downsets%s; coarsen %.3f s, DP %.3f s, "
            "refine %.3f s\n",
            p->stages, p->replicas, p->partition_objective_ms,
            p->partition_search.objective_before_refine_ms, p->partition_search.refine_moves,
            p->partition_search.ops, p->partition_search.hyper_ops, p->partition_search.downsets,
            p->partition_search.exact ? "" : " (topological prefixes: inexact)",
            p->partition_search.coarsen_s, p->partition_search.dp_s,
            p->partition_search.refine_s);
}

/* pf_partition_opts_t fields as the planner's messages name them, and their flags. */
static const cli_flag_t partition_flags[] = {
    {"stages", "--stages"},         {"replicas", "--replicas"},
    {"microbatches", "--microbatches"}, {"coarsen_k", "--coarsen"},
    {"alpha", "--alpha"},           {"flat_gbps", "--flat-gbps"},
    {"max_downsets", "--max-downsets"}, {"threads", "--threads"},
    {NULL, NULL},
};

#define O(field) offsetof(pf_partition_opts_t, field)
static const cli_option_t partition_options[] = {
    {"stages", 's', CLI_OPT_INT, .offset = O(stages), .lo = 1, .hi = 1 << 20},
    {"replicas", 'r', CLI_OPT_INT, .offset = O(replicas), .lo = 1, .hi = 1 << 20},
    {"microbatches", 'm', CLI_OPT_INT, .offset = O(microbatches), .lo = 1, .hi = 1 << 20},
    {"coarsen", 'k', CLI_OPT_INT, .offset = O(coarsen_k), .lo = -1, .hi = 1 << 30},
    {"alpha", 0, CLI_OPT_DOUBLE, .offset = O(alpha), .dlo = 0, .dhi = 1e300},
    {"no-refine", 0, CLI_OPT_SET_INT, .offset = O(refine), .lo = 0},
    {"flat-gbps", 0, CLI_OPT_DOUBLE, .offset = O(flat_gbps), .dlo = 1e-9, .dhi = 1e300},
    {"max-downsets", 0, CLI_OPT_LLONG, .offset = O(max_downsets), .lo = 1, .hi = 1LL << 40},
    {"threads", 't', CLI_OPT_INT, .offset = O(threads), .lo = 1, .hi = 4096},
    CLI_OPTION_END,
};
#undef O

int cmd_partition(int argc, char **argv)
{
    const char *cmd = "partition", *outpath = "-";
    pf_partition_opts_t po;
    bool given[sizeof partition_options / sizeof partition_options[0]] = {false};
    pf_partition_opts_init(&po);
    const cli_options_t spec = {cmd, help, NULL, NULL,
                                {{partition_options, &po, given},
                                 {cli_options_output, &outpath, NULL},
                                 {NULL, NULL, NULL}}};
    char err[CLI_ERRLEN] = "";
    int rc, first = cli_options_parse(&spec, argc, argv, &rc);
    if (first < 0)
        return rc;
    if (argc - first != 2)
        return cli_usage_error(cmd, "expected GRAPH and CLUSTER");
    if (!given[0]) /* --stages */
        return cli_usage_error(cmd, "--stages S is required");

    pf_graph_t *g = NULL;
    pf_cluster_t *cl = NULL;
    pf_plan_t *p = NULL;
    if ((rc = pf_graph_load(argv[first], &g, err, sizeof err)) != PF_OK ||
        (rc = pf_cluster_load(argv[first + 1], &cl, err, sizeof err)) != PF_OK ||
        (rc = pf_partition_run(g, cl, &po, &p, err, sizeof err)) != PF_OK ||
        (rc = pf_plan_save(p, g, cl, outpath, err, sizeof err)) != PF_OK) {
        pf_plan_destroy(&p);
        pf_graph_destroy(&g);
        pf_cluster_destroy(&cl);
        cli_flag_names(err, sizeof err, partition_flags);
        return cli_report(cmd, rc, err);
    }
    if (cli_stderr_tty())
        summary(p);
    pf_plan_destroy(&p);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
    return CLI_OK;
}
