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
    enum { O_BROKER = 1, O_TIMEOUT, O_QUIET };
    static const struct option opts[] = {{"broker", required_argument, 0, O_BROKER},
                                         {"timeout", required_argument, 0, O_TIMEOUT},
                                         {"quiet", no_argument, 0, O_QUIET},
                                         {"output", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         CLI_KEY_OPTIONS,
                                         {0, 0, 0, 0}};
    pf_curve_opts_t keys = {0};
    const char *broker = PF_BROKER_DEFAULT_ENDPOINT, *out = NULL;
    double timeout_s = CLI_DEFAULT_TIMEOUT_S;
    int quiet = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (cli_keyopt(c, optarg, &keys))
            continue;
        switch (c) {
        case 'o': out = optarg; break;
        case O_BROKER: broker = optarg; break;
        case O_TIMEOUT:
            if (cli_double("result", "--timeout", optarg, 0.01, 86400, &timeout_s))
                return CLI_USAGE;
            break;
        case O_QUIET: quiet = 1; break;
        case 'h': help(stdout); return CLI_OK;
        default: return cli_usage_error("result", "unknown option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("result", "expected one request ID");
    pf_client_t *client = cli_client_new("result", broker, timeout_s, &keys);
    if (!client)
        return CLI_USAGE;
    int rc = cli_fetch_plan("result", client, argv[optind], out, quiet);
    pf_client_destroy(&client);
    return rc;
}
