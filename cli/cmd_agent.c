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
            "                      [--heartbeat-ms N] [--liveness N]\n"
            "                      [--cert FILE --broker-key FILE] [--insecure]\n\n"
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
    cli_keyopts_help(f);
}

int cmd_agent(int argc, char **argv)
{
#define O(field) offsetof(pf_agent_opts_t, field)
    static const cli_option_t options[] = {
        {"connect", 0, CLI_OPT_STRING, .offset = O(endpoint)},
        {"name", 0, CLI_OPT_STRING, .offset = O(name)},
        {"host", 0, CLI_OPT_STRING, .offset = O(host)},
        {"echo-bind", 0, CLI_OPT_STRING, .offset = O(echo_bind)},
        {"advertise", 0, CLI_OPT_STRING, .offset = O(advertise)},
        {"no-cuda", 0, CLI_OPT_SET_INT, .offset = O(no_cuda), .lo = 1},
        {"heartbeat-ms", 0, CLI_OPT_INT, .offset = O(heartbeat_ms), .lo = 10, .hi = 3600000},
        {"liveness", 0, CLI_OPT_INT, .offset = O(liveness), .lo = 1, .hi = 1000},
        {"reconnect-max-ms", 0, CLI_OPT_INT, .offset = O(reconnect_max_ms), .lo = 10,
         .hi = 3600000},
        CLI_OPTION_HELP,
        CLI_OPTION_END,
    };
#undef O
    pf_agent_opts_t o;
    pf_agent_opts_init(&o);
    const cli_options_t spec = {"agent", help, NULL, NULL,
                                {{options, &o, NULL}, {cli_keyopts_table, &o.curve, NULL}}};
    int status, first = cli_options_parse(&spec, argc, argv, &status);
    if (first < 0)
        return status;
    if (first != argc)
        return cli_usage_error("agent", "unexpected argument '%s'", argv[first]);
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
