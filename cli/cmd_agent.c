/* planfarm agent --connect ENDPOINT: a profiler agent for a broker until SIGINT/SIGTERM. */
#include "cli/cli.h"
#include "planner/core/util.h"
#include "profiler/agent.h"

#include <stdio.h>

static void help(FILE *f)
{
    pf_agent_opts_t d;
    pf_agent_opts_init(&d);
    fprintf(f,
            "usage: planfarm agent --connect ENDPOINT [--name NAME] [--host HOST]\n"
            "                      [--echo-bind EP] [--advertise ADDR] [--no-cuda]\n"
            "                      [--heartbeat-ms N] [--liveness N]\n\n"
            "Registers this host (and its GPUs, when libpfcuda.so loads and finds one) with a\n"
            "broker and measures what the broker asks when a client runs\n"
            "`planfarm profile --broker`: its own devices and links, and the network to the\n"
            "agents of other hosts (a ZeroMQ echo on one end, the ping-pong sweep on the\n"
            "other). Without a GPU every record says \"cpu\". Reconnects with a growing\n"
            "back-off when the broker goes silent; on SIGINT or SIGTERM it says BYE and exits.\n\n"
            "  --connect ENDPOINT  the broker, e.g. tcp://127.0.0.1:5710\n"
            "  --name NAME         shown in the broker's log (default host:pid)\n"
            "  --host HOST         host name in its records (default this machine's); devices\n"
            "                      group by it\n"
            "  --echo-bind EP      where the echo for other hosts binds (default %s)\n"
            "  --advertise ADDR    the address other hosts reach the echo at (default HOST)\n"
            "  --no-cuda           CPU probes only\n"
            "  --heartbeat-ms N    as the broker's (default %d)\n"
            "  --liveness N        broker heartbeats missed before reconnecting (default %d)\n",
            d.echo_bind, d.heartbeat_ms, d.liveness);
}

int cmd_agent(int argc, char **argv)
{
    enum { O_CONNECT = 1, O_NAME, O_HOST, O_BIND, O_ADV, O_NOCUDA, O_HB, O_LIVE, O_RECONNECT };
    static const struct option opts[] = {{"connect", required_argument, 0, O_CONNECT},
                                         {"name", required_argument, 0, O_NAME},
                                         {"host", required_argument, 0, O_HOST},
                                         {"echo-bind", required_argument, 0, O_BIND},
                                         {"advertise", required_argument, 0, O_ADV},
                                         {"no-cuda", no_argument, 0, O_NOCUDA},
                                         {"heartbeat-ms", required_argument, 0, O_HB},
                                         {"liveness", required_argument, 0, O_LIVE},
                                         {"reconnect-max-ms", required_argument, 0, O_RECONNECT},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    pf_agent_opts_t o;
    pf_agent_opts_init(&o);
    long long v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_CONNECT: o.endpoint = optarg; break;
        case O_NAME: o.name = optarg; break;
        case O_HOST: o.host = optarg; break;
        case O_BIND: o.echo_bind = optarg; break;
        case O_ADV: o.advertise = optarg; break;
        case O_NOCUDA: o.no_cuda = 1; break;
        case O_HB:
            if (cli_int("agent", "--heartbeat-ms", optarg, 10, 3600000, &v))
                return CLI_USAGE;
            o.heartbeat_ms = (int)v;
            break;
        case O_LIVE:
            if (cli_int("agent", "--liveness", optarg, 1, 1000, &v))
                return CLI_USAGE;
            o.liveness = (int)v;
            break;
        case O_RECONNECT:
            if (cli_int("agent", "--reconnect-max-ms", optarg, 10, 3600000, &v))
                return CLI_USAGE;
            o.reconnect_max_ms = (int)v;
            break;
        case 'h': help(stdout); return CLI_OK;
        default: return cli_usage_error("agent", "unknown option");
        }
    }
    if (optind != argc)
        return cli_usage_error("agent", "unexpected argument '%s'", argv[optind]);
    if (!o.endpoint)
        return cli_usage_error("agent", "--connect ENDPOINT is required");
    if (cli_check_endpoint("agent", "--connect", o.endpoint))
        return CLI_USAGE;
    char err[CLI_ERRLEN];
    pf_agent_t *a = pf_agent_new(&o, err, sizeof err);
    if (!a)
        return cli_report("agent", PF_EINPUT, err);
    int rc = pf_agent_run(a);
    pf_agent_destroy(&a);
    return rc == PF_OK ? CLI_OK : CLI_FAIL;
}
