/* planfarm broker: serve plan requests to clients and jobs to workers until SIGINT/SIGTERM. */
#include "broker/broker.h"
#include "cli/cli.h"
#include "planner/util.h"

#include <stdio.h>

static void help(FILE *f)
{
    pf_broker_opts_t d;
    pf_broker_opts_init(&d);
    fprintf(f,
            "usage: planfarm broker [--bind ENDPOINT] [--heartbeat-ms N] [--liveness N]\n"
            "                       [--max-attempts N] [--max-msg-mb N] [--dp-timeout S]\n"
            "                       [--probe-margin S] [--max-requests N] [--http ADDR]\n"
            "                       [--verbose]\n\n"
            "Serves plan requests (planfarm submit/status/result/cancel/list, planfarm plan\n"
            "--broker) and hands their jobs to workers (planfarm worker). Runs until SIGINT or\n"
            "SIGTERM, then tells its workers BYE.\n\n"
            "  --bind ENDPOINT     ZeroMQ endpoint (default %s; plain TCP: loopback\n"
            "                      or a trusted network only)\n"
            "  --heartbeat-ms N    heartbeat interval, both ways (default %d; workers must use\n"
            "                      the same)\n"
            "  --liveness N        heartbeats a worker may miss before its jobs go elsewhere\n"
            "                      (default %d)\n"
            "  --max-attempts N    workers a job may outlive before its request fails (default "
            "%d)\n"
            "  --max-msg-mb N      larger frames drop the connection (default %lld)\n"
            "  --dp-timeout S      deadline of one partition job on one worker (default %g)\n"
            "  --probe-margin S    a mapping probe's deadline is its budget + S (default %g)\n"
            "  --max-requests N    unfinished requests at once; more are refused (default %d)\n"
            "  --http ADDR         serve /metrics (Prometheus) and a status page at / on\n"
            "                      HOST:PORT, [IPv6]:PORT or :PORT (every interface; plain\n"
            "                      HTTP, no authentication: loopback or a trusted network)\n"
            "  --verbose           log every job failure and send error\n",
            d.endpoint, d.heartbeat_ms, d.liveness, d.max_attempts,
            (long long)(d.max_msg_bytes >> 20), d.limits.solve_s, d.limits.margin_s, d.max_running);
}

int cmd_broker(int argc, char **argv)
{
    enum { O_BIND = 1, O_HB, O_LIVE, O_ATTEMPTS, O_MAXMSG, O_DPT, O_PM, O_MAXREQ, O_VERBOSE,
           O_HTTP };
    static const struct option opts[] = {{"bind", required_argument, 0, O_BIND},
                                         {"heartbeat-ms", required_argument, 0, O_HB},
                                         {"liveness", required_argument, 0, O_LIVE},
                                         {"max-attempts", required_argument, 0, O_ATTEMPTS},
                                         {"max-msg-mb", required_argument, 0, O_MAXMSG},
                                         {"dp-timeout", required_argument, 0, O_DPT},
                                         {"probe-margin", required_argument, 0, O_PM},
                                         {"max-requests", required_argument, 0, O_MAXREQ},
                                         {"verbose", no_argument, 0, O_VERBOSE},
                                         {"http", required_argument, 0, O_HTTP},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    long long v;
    double x;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_BIND: o.endpoint = optarg; break;
        case O_HB:
            if (cli_int("broker", "--heartbeat-ms", optarg, 10, 3600000, &v))
                return CLI_USAGE;
            o.heartbeat_ms = (int)v;
            break;
        case O_LIVE:
            if (cli_int("broker", "--liveness", optarg, 1, 1000, &v))
                return CLI_USAGE;
            o.liveness = (int)v;
            break;
        case O_ATTEMPTS:
            if (cli_int("broker", "--max-attempts", optarg, 1, 1000, &v))
                return CLI_USAGE;
            o.max_attempts = (int)v;
            break;
        case O_MAXMSG:
            if (cli_int("broker", "--max-msg-mb", optarg, 1, 1 << 20, &v))
                return CLI_USAGE;
            o.max_msg_bytes = v << 20;
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
        case O_VERBOSE: o.verbose = 1; break;
        case O_HTTP: o.http_addr = optarg; break;
        case 'h': help(stdout); return CLI_OK;
        default: return cli_usage_error("broker", "unknown option");
        }
    }
    if (optind != argc)
        return cli_usage_error("broker", "unexpected argument '%s'", argv[optind]);
    if (o.endpoint && cli_check_endpoint("broker", "--bind", o.endpoint))
        return CLI_USAGE;
    char err[CLI_ERRLEN];
    pf_broker_t *b = pf_broker_new(&o, err, sizeof err);
    if (!b)
        return cli_report("broker", PF_ERR, err);
    int rc = pf_broker_run(b);
    pf_broker_destroy(&b);
    return rc == PF_OK ? CLI_OK : CLI_FAIL;
}
