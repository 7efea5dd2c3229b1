/* The flags that `planfarm broker` and `planfarm worker` share: the two ends of one connection
 * must agree on the heartbeat interval and on how many may be missed, so both read them here. */
#include "cli/cli.h"

#define N(field) offsetof(cli_netopts_t, field)
const cli_option_t cli_netopts_table[] = {
    {"heartbeat-ms", 0, CLI_OPT_INT, .offset = N(heartbeat_ms), .lo = 10, .hi = 3600000,
     .flags = CLI_OPT_INDIRECT},
    {"liveness", 0, CLI_OPT_INT, .offset = N(liveness), .lo = 1, .hi = 1000,
     .flags = CLI_OPT_INDIRECT},
    {"max-msg-mb", 0, CLI_OPT_MIB, .offset = N(max_msg_bytes), .lo = 1, .hi = 1 << 20,
     .flags = CLI_OPT_INDIRECT},
    {"verbose", 0, CLI_OPT_SET_INT, .offset = N(verbose), .lo = 1, .flags = CLI_OPT_INDIRECT},
    CLI_OPTION_END,
};
#undef N

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

int cli_netopts_args_done(const char *cmd, int argc, char **argv, int first,
                          const char *endpoint_flag, const char *endpoint)
{
    if (first != argc)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[first]);
    if (endpoint && cli_check_endpoint(cmd, endpoint_flag, endpoint))
        return CLI_USAGE;
    return CLI_OK;
}
