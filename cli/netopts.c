/* The flags that `planfarm broker` and `planfarm worker` share: the two ends of one connection
 * must agree on the heartbeat interval and on how many may be missed, so both read them here. */
#include "cli/cli.h"

int cli_netopt(const char *cmd, int code, const char *arg, const cli_netopts_t *t)
{
    long long v;
    switch (code - CLI_NETOPT_BASE) {
    case 0:
        if (cli_int(cmd, "--heartbeat-ms", arg, 10, 3600000, &v))
            return -1;
        *t->heartbeat_ms = (int)v;
        return 1;
    case 1:
        if (cli_int(cmd, "--liveness", arg, 1, 1000, &v))
            return -1;
        *t->liveness = (int)v;
        return 1;
    case 2:
        if (cli_int(cmd, "--max-msg-mb", arg, 1, 1 << 20, &v))
            return -1;
        *t->max_msg_bytes = (int64_t)v << 20;
        return 1;
    case 3: *t->verbose = 1; return 1;
    default: return 0;
    }
}

void cli_netopts_help(FILE *f, const cli_netopts_t *defaults)
{
    fprintf(f,
            "  --heartbeat-ms N    heartbeat interval, both ways (default %d; the broker and its\n"
            "                      workers must use the same)\n"
            "  --liveness N        heartbeat intervals the other end may stay silent before it\n"
            "                      is presumed dead (default %d)\n"
            "  --max-msg-mb N      larger frames drop the connection (default %lld)\n"
            "  --verbose           log every job and every send error\n",
            *defaults->heartbeat_ms, *defaults->liveness,
            (long long)(*defaults->max_msg_bytes >> 20));
}

int cli_net_args_done(const char *cmd, int argc, char **argv, const char *endpoint_flag,
                      const char *endpoint)
{
    if (optind != argc)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (endpoint && cli_check_endpoint(cmd, endpoint_flag, endpoint))
        return CLI_USAGE;
    return CLI_OK;
}
