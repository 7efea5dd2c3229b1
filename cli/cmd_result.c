/* planfarm result ID --broker ENDPOINT [-o PLAN]: write a finished request's plan. */
#include "broker/broker.h"
#include "client/client.h"
#include "cli/cli.h"
#include "planner/core/util.h"

#include <stdio.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: planfarm result ID [--broker ENDPOINT] [-o PLAN] [--timeout S] [--quiet]\n\n"
            "Writes the plan of a finished request to PLAN (default stdout) and a summary on\n"
            "stderr.\n\n"
            "  --broker ENDPOINT   default %s\n"
            "  -o PLAN             output file (- = stdout)\n"
            "  --timeout S         seconds to wait for the reply (default %g)\n"
            "  --quiet             no summary\n",
            PF_BROKER_DEFAULT_ENDPOINT, CLI_DEFAULT_TIMEOUT_S);
    cli_keyopts_help(f);
    fprintf(f, "\nExit status: 0 plan written, 1 still running (or failed at run time, or no\n"
            "broker), 3 no feasible plan, 2 unknown request id (or the request had bad input).\n");
}

int cmd_result(int argc, char **argv)
{
    cli_remote_args_t r = {PF_BROKER_DEFAULT_ENDPOINT, NULL, CLI_DEFAULT_TIMEOUT_S, false};
    pf_curve_opts_t keys = {0};
    const cli_options_t spec = {"result", help, NULL, NULL,
                                {{cli_remote_broker_options, &r, NULL},
                                 {cli_remote_output_options, &r, NULL},
                                 {cli_options_help, NULL, NULL},
                                 {cli_keyopts_table, &keys, NULL}}};
    int status, first = cli_options_parse(&spec, argc, argv, &status);
    if (first < 0)
        return status;
    if (argc - first != 1)
        return cli_usage_error("result", "expected one request ID");
    pf_client_t *client = cli_remote_client_new("result", r.broker, r.timeout_s, &keys);
    if (!client)
        return CLI_USAGE;
    int rc = cli_remote_fetch_plan("result", client, argv[first], r.out, r.quiet);
    pf_client_destroy(&client);
    return rc;
}
