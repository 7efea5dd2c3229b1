/* planfarm submit GRAPH CLUSTER --broker ENDPOINT: queue a plan request; print its id, or with
 * --wait follow it and write the plan. */
#include "broker/broker.h"
#include "client/client.h"
#include "cli/cli.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <stdlib.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: planfarm submit GRAPH CLUSTER [--broker ENDPOINT] [--wait] [-o PLAN]\n"
            "                       [--timeout S] [--priority N] [--quiet] [search options]\n\n"
            "Sends a plan request to a broker and prints its id (e.g. r1a2b3c4d) on stdout.\n"
            "Fetch the plan later with `planfarm result ID`. With --wait it follows the request\n"
            "(a progress line on stderr when it is a terminal), then writes the plan to PLAN\n"
            "(default stdout) and prints the id on stderr.\n\n"
            "  --broker ENDPOINT   default %s\n"
            "  --wait              wait for the plan\n"
            "  -o PLAN             with --wait: output file (- = stdout)\n"
            "  --timeout S         seconds to wait for each broker reply (default %g)\n"
            "  --priority N        among your requests, higher ones get workers first\n"
            "                      (default 0; clients take turns whatever their priorities)\n"
            "  --quiet             no summary, no progress line\n\n",
            PF_BROKER_DEFAULT_ENDPOINT, CLI_DEFAULT_TIMEOUT_S);
    cli_planopts_help(f);
    cli_keyopts_help(f);
    fprintf(f, "\nExit status: 0 submitted (or, with --wait, plan written), 2 bad input,\n"
               "3 no feasible plan, 1 no broker or a run-time failure.\n");
}

int cmd_submit(int argc, char **argv)
{
    enum { O_BROKER = 1, O_WAIT, O_TIMEOUT, O_QUIET, O_PRIORITY };
    static const struct option opts[] = {{"broker", required_argument, 0, O_BROKER},
                                         {"wait", no_argument, 0, O_WAIT},
                                         {"timeout", required_argument, 0, O_TIMEOUT},
                                         {"quiet", no_argument, 0, O_QUIET},
                                         {"priority", required_argument, 0, O_PRIORITY},
                                         {"output", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         CLI_PLAN_OPTIONS,
                                         CLI_KEY_OPTIONS,
                                         {0, 0, 0, 0}};
    pf_curve_opts_t keys = {0};
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    const char *out = NULL, *broker = PF_BROKER_DEFAULT_ENDPOINT;
    double timeout_s = CLI_DEFAULT_TIMEOUT_S;
    int wait = 0, quiet = 0, c, r;
    long long priority = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if ((r = cli_planopt("submit", c, optarg, &so)) != 0) {
            if (r < 0)
                return CLI_USAGE;
            continue;
        }
        if (cli_keyopt(c, optarg, &keys))
            continue;
        switch (c) {
        case 'o': out = optarg; break;
        case O_BROKER: broker = optarg; break;
        case O_WAIT: wait = 1; break;
        case O_TIMEOUT:
            if (cli_double("submit", "--timeout", optarg, 0.01, 86400, &timeout_s))
                return CLI_USAGE;
            break;
        case O_QUIET: quiet = 1; break;
        case O_PRIORITY:
            if (cli_int("submit", "--priority", optarg, -1000000, 1000000, &priority))
                return CLI_USAGE;
            break;
        case 'h': help(stdout); return CLI_OK;
        default: return cli_usage_error("submit", "unknown option");
        }
    }
    if (argc - optind != 2)
        return cli_usage_error("submit", "expected GRAPH and CLUSTER");
    if (out && !wait)
        return cli_usage_error("submit", "-o needs --wait (or use `planfarm result ID -o PLAN`)");
    if (cli_check_output("submit", out) ||
        (broker && cli_check_endpoint("submit", "--broker", broker)))
        return CLI_USAGE;
    char *id = NULL;
    const char *gpath = argv[optind], *cpath = argv[optind + 1];
    pf_graph_t *g;
    pf_cluster_t *cl;
    int rc = cli_load_inputs("submit", gpath, cpath, &g, &cl);
    if (rc != CLI_OK)
        return rc;
    pf_client_t *client = cli_client_new("submit", broker, timeout_s, &keys);
    if (!client) {
        pf_graph_destroy(&g);
        pf_cluster_destroy(&cl);
        return CLI_USAGE;
    }
    pf_client_set_priority(client, (int)priority);
    rc = cli_submit("submit", client, g, cl, gpath, cpath, &so, &id);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
    if (rc == CLI_OK && !wait) {
        printf("%s\n", id);
    } else if (rc == CLI_OK) {
        if (!quiet)
            fprintf(stderr, "planfarm submit: request %s\n", id);
        rc = cli_wait_and_fetch("submit", client, id, out, !quiet, quiet, 500);
    }
    free(id);
    pf_client_destroy(&client);
    return rc;
}
