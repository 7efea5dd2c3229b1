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

int cmd_partition(int argc, char **argv)
{
    enum { OPT_ALPHA = 256, OPT_NO_REFINE, OPT_FLAT, OPT_MAXDS };
    static const struct option opts[] = {{"stages", required_argument, 0, 's'},
                                         {"replicas", required_argument, 0, 'r'},
                                         {"microbatches", required_argument, 0, 'm'},
                                         {"coarsen", required_argument, 0, 'k'},
                                         {"alpha", required_argument, 0, OPT_ALPHA},
                                         {"no-refine", no_argument, 0, OPT_NO_REFINE},
                                         {"flat-gbps", required_argument, 0, OPT_FLAT},
                                         {"max-downsets", required_argument, 0, OPT_MAXDS},
                                         {"threads", required_argument, 0, 't'},
                                         {"output", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "partition", *outpath = "-";
    pf_partition_opts_t po;
    long long x;
    double d;
    int c, rc, have_stages = 0;
    char err[CLI_ERRLEN] = "";
    pf_partition_opts_init(&po);
    optind = 1;
    while ((c = getopt_long(argc, argv, "s:r:m:k:t:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (cli_int(cmd, "--stages", optarg, 1, 1 << 20, &x))
                return CLI_USAGE;
            po.stages = (int)x;
            have_stages = 1;
            break;
        case 'r':
            if (cli_int(cmd, "--replicas", optarg, 1, 1 << 20, &x))
                return CLI_USAGE;
            po.replicas = (int)x;
            break;
        case 'm':
            if (cli_int(cmd, "--microbatches", optarg, 1, 1 << 20, &x))
                return CLI_USAGE;
            po.microbatches = (int)x;
            break;
        case 'k':
            if (cli_int(cmd, "--coarsen", optarg, -1, 1 << 30, &x))
                return CLI_USAGE;
            po.coarsen_k = (int)x;
            break;
        case OPT_ALPHA:
            if (cli_double(cmd, "--alpha", optarg, 0, 1e300, &d))
                return CLI_USAGE;
            po.alpha = d;
            break;
        case OPT_NO_REFINE:
            po.refine = 0;
            break;
        case OPT_FLAT:
            if (cli_double(cmd, "--flat-gbps", optarg, 1e-9, 1e300, &d))
                return CLI_USAGE;
            po.flat_gbps = d;
            break;
        case OPT_MAXDS:
            if (cli_int(cmd, "--max-downsets", optarg, 1, 1LL << 40, &x))
                return CLI_USAGE;
            po.max_downsets = x;
            break;
        case 't':
            if (cli_int(cmd, "--threads", optarg, 1, 4096, &x))
                return CLI_USAGE;
            po.threads = (int)x;
            break;
        case 'o':
            outpath = optarg;
            break;
        case 'h':
            help(stdout);
            return CLI_OK;
        default:
            return cli_usage_error(cmd, "unknown option");
        }
    }
    if (argc - optind != 2)
        return cli_usage_error(cmd, "expected GRAPH and CLUSTER");
    if (!have_stages)
        return cli_usage_error(cmd, "--stages S is required");

    pf_graph_t *g = NULL;
    pf_cluster_t *cl = NULL;
    pf_plan_t *p = NULL;
    if ((rc = pf_graph_load(argv[optind], &g, err, sizeof err)) != PF_OK ||
        (rc = pf_cluster_load(argv[optind + 1], &cl, err, sizeof err)) != PF_OK ||
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
