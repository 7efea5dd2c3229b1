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

#define O(field) offsetof(pf_worker_opts_t, field)
static const cli_option_t worker_options[] = {
    {"connect", 0, CLI_OPT_STRING, .offset = O(endpoint)},
    {"threads", 0, CLI_OPT_INT, .offset = O(threads), .lo = 1, .hi = 4096},
    {"credits", 0, CLI_OPT_INT, .offset = O(credits), .lo = 1, .hi = 1000},
    {"cache-mb", 0, CLI_OPT_MIB_SIZE, .offset = O(cache_bytes), .lo = 1, .hi = 1 << 24},
    {"name", 0, CLI_OPT_STRING, .offset = O(name)},
    CLI_OPTION_END,
};

/* Hidden: tests/integration's hooks (worker.h). */
static const cli_option_t worker_test_options[] = {
    {"test-hang-kind", 0, CLI_OPT_STRING, .offset = O(test_hang_kind)},
    {"test-delay-ms", 0, CLI_OPT_INT, .offset = O(test_delay_ms), .lo = 0, .hi = 3600000},
    CLI_OPTION_HELP,
    CLI_OPTION_END,
};
#undef O

int cmd_worker(int argc, char **argv)
{
    pf_worker_opts_t o;
    pf_worker_opts_init(&o);
    cli_netopts_t net = net_of(&o);
    const cli_options_t spec = {"worker", help, NULL, NULL,
                                {{worker_options, &o, NULL},
                                 {cli_netopts_table, &net, NULL},
                                 {cli_keyopts_table, &o.curve, NULL},
                                 {worker_test_options, &o, NULL}}};
    int rc, first = cli_options_parse(&spec, argc, argv, &rc);
    if (first < 0)
        return rc;
    if (first == argc && !o.endpoint)
        return cli_usage_error("worker", "--connect ENDPOINT is required");
    rc = cli_netopts_args_done("worker", argc, argv, first, "--connect", o.endpoint);
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
