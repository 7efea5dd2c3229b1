/* planfarm broker: serve plan requests to clients and jobs to workers until SIGINT/SIGTERM. */
#include "broker/broker.h"
#include "cli/cli.h"
#include "planner/util.h"

#include <stdio.h>

/* Where the shared flags (cli/netopts.c) go in the broker's options. */
static cli_netopts_t net_of(pf_broker_opts_t *o)
{
    return (cli_netopts_t){&o->heartbeat_ms, &o->liveness, &o->verbose, &o->max_msg_bytes};
}

static void help(FILE *f)
{
    pf_broker_opts_t d;
    pf_broker_opts_init(&d);
    fprintf(f,
            "usage: planfarm broker [--bind ENDPOINT] [--heartbeat-ms N] [--liveness N]\n"
            "                       [--max-attempts N] [--max-msg-mb N] [--dp-timeout S]\n"
            "                       [--probe-margin S] [--max-requests N] [--verbose]\n\n"
            "Serves plan requests (planfarm submit/status/result/cancel/list, planfarm plan\n"
            "--broker) and hands their jobs to workers (planfarm worker). Runs until SIGINT or\n"
            "SIGTERM, then tells its workers BYE.\n\n"
            "  --bind ENDPOINT     ZeroMQ endpoint (default %s; plain TCP: loopback\n"
            "                      or a trusted network only)\n"
            "  --max-attempts N    workers a job may outlive before its request fails (default "
            "%d)\n"
            "  --dp-timeout S      deadline of one partition job on one worker (default %g)\n"
            "  --probe-margin S    a mapping probe's deadline is its budget + S (default %g)\n"
            "  --max-requests N    unfinished requests at once; more are refused (default %d)\n",
            d.endpoint, d.max_attempts, d.limits.solve_s, d.limits.margin_s, d.max_running);
    cli_netopts_t net = net_of(&d);
    cli_netopts_help(f, &net);
}

int cmd_broker(int argc, char **argv)
{
    enum { O_BIND = 1, O_ATTEMPTS, O_DPT, O_PM, O_MAXREQ };
    static const struct option opts[] = {{"bind", required_argument, 0, O_BIND},
                                         {"max-attempts", required_argument, 0, O_ATTEMPTS},
                                         {"dp-timeout", required_argument, 0, O_DPT},
                                         {"probe-margin", required_argument, 0, O_PM},
                                         {"max-requests", required_argument, 0, O_MAXREQ},
                                         CLI_NET_OPTIONS,
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    cli_netopts_t net = net_of(&o);
    long long v;
    double x;
    int c, shared;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if ((shared = cli_netopt("broker", c, optarg, &net)) != 0) {
            if (shared < 0)
                return CLI_USAGE;
            continue;
        }
        switch (c) {
        case O_BIND: o.endpoint = optarg; break;
        case O_ATTEMPTS:
            if (cli_int("broker", "--max-attempts", optarg, 1, 1000, &v))
                return CLI_USAGE;
            o.max_attempts = (int)v;
            break;
        case O_DPT:
            if (cli_double("broker", "--dp-timeout", optarg, 0.01, 1e7, &x))
                return CLI_USAGE;
            o.limits.solve_s = x;
            break;
        case O_PM:
            if (cli_double("broker", "--probe-margin", optarg, 0, 1e7, &x))
                return CLI_USAGE;
            o.limits.margin_s = x;
            break;
        case O_MAXREQ:
            if (cli_int("broker", "--max-requests", optarg, 1, 1000000, &v))
                return CLI_USAGE;
            o.max_running = (int)v;
            break;
        case 'h': help(stdout); return CLI_OK;
        default: return cli_usage_error("broker", "unknown option");
        }
    }
    int rc = cli_net_args_done("broker", argc, argv, "--bind", o.endpoint);
    if (rc != CLI_OK)
        return rc;
    char err[CLI_ERRLEN];
    pf_broker_t *b = pf_broker_new(&o, err, sizeof err);
    if (!b)
        return cli_report("broker", PF_ERR, err);
    rc = pf_broker_run(b);
    pf_broker_destroy(&b);
    return rc == PF_OK ? CLI_OK : CLI_FAIL;
}
