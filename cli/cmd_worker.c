/* planfarm worker --connect ENDPOINT: run jobs for a broker until SIGINT/SIGTERM. */
#include "cli/cli.h"
#include "planner/core/util.h"
#include "worker/worker.h"

#include <stdio.h>

/* Where the shared flags (cli/netopts.c) go in the worker's options. */
static cli_netopts_t net_of(pf_worker_opts_t *o)
{
    return (cli_netopts_t){&o->heartbeat_ms, &o->liveness, &o->verbose, &o->max_msg_bytes};
}

static void help(FILE *f)
{
    pf_worker_opts_t d;
    pf_worker_opts_init(&d);
    fprintf(f,
            "usage: planfarm worker --connect ENDPOINT [--threads N] [--credits C]\n"
            "                       [--heartbeat-ms N] [--liveness N] [--cache-mb N]\n"
            "                       [--max-msg-mb N] [--name NAME] [--verbose]\n\n"
            "Runs partition and mapping jobs for a broker (one process per machine; OpenMP\n"
            "inside each job). Reconnects with a growing back-off when the broker goes silent;\n"
            "on SIGINT or SIGTERM it says BYE and exits.\n\n"
            "  --connect ENDPOINT  the broker, e.g. tcp://127.0.0.1:5710\n"
            "  --threads N         OpenMP threads per job (default: all cores)\n"
            "  --credits C         jobs held at once, running or queued here (default %d,\n"
            "                      at most 1000; more hides the round trip to the broker)\n"
            "  --cache-mb N        decoded graphs and clusters kept, by blob size (default %zu)\n"
            "  --name NAME         shown in the broker's log (default host:pid)\n",
            d.credits, d.cache_bytes >> 20);
    cli_netopts_t net = net_of(&d);
    cli_netopts_help(f, &net);
    cli_keyopts_help(f);
}

int cmd_worker(int argc, char **argv)
{
    enum { O_CONNECT = 1, O_THREADS, O_CREDITS, O_CACHE, O_NAME, O_TEST_HANG, O_TEST_DELAY };
    static const struct option opts[] = {{"connect", required_argument, 0, O_CONNECT},
                                         {"threads", required_argument, 0, O_THREADS},
                                         {"credits", required_argument, 0, O_CREDITS},
                                         {"cache-mb", required_argument, 0, O_CACHE},
                                         {"name", required_argument, 0, O_NAME},
                                         CLI_NET_OPTIONS,
                                         CLI_KEY_OPTIONS,
                                         /* hidden: tests/integration's hooks (worker.h) */
                                         {"test-hang-kind", required_argument, 0, O_TEST_HANG},
                                         {"test-delay-ms", required_argument, 0, O_TEST_DELAY},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    pf_worker_opts_t o;
    pf_worker_opts_init(&o);
    cli_netopts_t net = net_of(&o);
    long long v;
    int c, shared;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if ((shared = cli_netopt("worker", c, optarg, &net)) != 0) {
            if (shared < 0)
                return CLI_USAGE;
            continue;
        }
        if (cli_keyopt(c, optarg, &o.curve))
            continue;
        switch (c) {
        case O_CONNECT: o.endpoint = optarg; break;
        case O_THREADS:
            if (cli_int("worker", "--threads", optarg, 1, 4096, &v))
                return CLI_USAGE;
            o.threads = (int)v;
            break;
        case O_CREDITS:
            if (cli_int("worker", "--credits", optarg, 1, 1000, &v))
                return CLI_USAGE;
            o.credits = (int)v;
            break;
        case O_CACHE:
            if (cli_int("worker", "--cache-mb", optarg, 1, 1 << 24, &v))
                return CLI_USAGE;
            o.cache_bytes = (size_t)v << 20;
            break;
        case O_NAME: o.name = optarg; break;
        case O_TEST_HANG: o.test_hang_kind = optarg; break;
        case O_TEST_DELAY:
            if (cli_int("worker", "--test-delay-ms", optarg, 0, 3600000, &v))
                return CLI_USAGE;
            o.test_delay_ms = (int)v;
            break;
        case 'h': help(stdout); return CLI_OK;
        default: return cli_usage_error("worker", "unknown option");
        }
    }
    if (optind == argc && !o.endpoint)
        return cli_usage_error("worker", "--connect ENDPOINT is required");
    int rc = cli_net_args_done("worker", argc, argv, "--connect", o.endpoint);
    if (rc != CLI_OK)
        return rc;
    char err[CLI_ERRLEN];
    pf_worker_t *w = pf_worker_new(&o, err, sizeof err);
    if (!w)
        return cli_report("worker", PF_EINPUT, err);
    rc = pf_worker_run(w);
    pf_worker_destroy(&w);
    return rc == PF_OK ? CLI_OK : CLI_FAIL;
}
