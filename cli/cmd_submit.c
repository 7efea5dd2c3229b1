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

/* The flags of submit alone; the rest are the remote flags, the search's and the keys'. */
typedef struct {
    bool wait;
    int priority;
} submit_args_t;

static const cli_option_t submit_options[] = {
    {"wait", 0, CLI_OPT_FLAG, .offset = offsetof(submit_args_t, wait)},
    {"priority", 0, CLI_OPT_INT, .offset = offsetof(submit_args_t, priority), .lo = -1000000,
     .hi = 1000000},
    CLI_OPTION_HELP,
    CLI_OPTION_END,
};

/* The request to the broker; its id on stdout, or with --wait its plan. */
static int submit_run(const submit_args_t *a, const cli_remote_args_t *r,
                      const pf_curve_opts_t *keys, const pf_search_opts_t *so, const char *gpath,
                      const char *cpath)
{
    char *id = NULL;
    pf_graph_t *g;
    pf_cluster_t *cl;
    int rc = cli_remote_load_inputs("submit", gpath, cpath, &g, &cl);
    if (rc != CLI_OK)
        return rc;
    pf_client_t *client = cli_remote_client_new("submit", r->broker, r->timeout_s, keys);
    if (!client) {
        pf_graph_destroy(&g);
        pf_cluster_destroy(&cl);
        return CLI_USAGE;
    }
    pf_client_set_priority(client, a->priority);
    rc = cli_remote_submit("submit", client, g, cl, gpath, cpath, so, &id);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
    if (rc == CLI_OK && !a->wait) {
        printf("%s\n", id);
    } else if (rc == CLI_OK) {
        if (!r->quiet)
            fprintf(stderr, "planfarm submit: request %s\n", id);
        rc = cli_remote_wait_and_fetch("submit", client, id, r->out, !r->quiet, r->quiet, 500);
    }
    free(id);
    pf_client_destroy(&client);
    return rc;
}

int cmd_submit(int argc, char **argv)
{
    submit_args_t a = {false, 0};
    cli_remote_args_t r = {PF_BROKER_DEFAULT_ENDPOINT, NULL, CLI_DEFAULT_TIMEOUT_S, false};
    pf_curve_opts_t keys = {0};
    pf_search_opts_t so;
    cli_planopts_init(&so);
    const cli_options_t spec = {"submit", help, NULL, NULL,
                                {{cli_remote_broker_options, &r, NULL},
                                 {cli_remote_output_options, &r, NULL},
                                 {submit_options, &a, NULL},
                                 {cli_planopts_table, &so, NULL},
                                 {cli_keyopts_table, &keys, NULL}}};
    int status, first = cli_options_parse(&spec, argc, argv, &status);
    if (first < 0)
        return status;
    if (argc - first != 2)
        return cli_usage_error("submit", "expected GRAPH and CLUSTER");
    if (r.out && !a.wait)
        return cli_usage_error("submit", "-o needs --wait (or use `planfarm result ID -o PLAN`)");
    if (cli_check_output("submit", r.out) ||
        (r.broker && cli_check_endpoint("submit", "--broker", r.broker)))
        return CLI_USAGE;
    return submit_run(&a, &r, &keys, &so, argv[first], argv[first + 1]);
}
