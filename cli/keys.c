/* Key options of the commands that talk to a broker (clients and workers): --cert,
 * --broker-key, --insecure (README "Security"). */
#include "client/client.h"
#include "cli/cli.h"
#include "planner/core/util.h"

int cli_keyopt(int code, const char *arg, pf_curve_opts_t *k)
{
    switch (code) {
    case CLI_KEYOPT_BASE + 0: k->cert = arg; return 1;
    case CLI_KEYOPT_BASE + 1: k->broker_key = arg; return 1;
    case CLI_KEYOPT_BASE + 2: k->insecure = 1; return 1;
    default: return 0;
    }
}

void cli_keyopts_help(FILE *f)
{
    fprintf(f, "  --cert FILE         own secret cert (NAME_secret from `planfarm keygen`); with\n"
               "                      --broker-key: CurveZMQ, encrypted and authenticated\n"
               "  --broker-key FILE   the broker's public cert\n"
               "  --insecure          allow plain TCP to a broker off this machine (a warning)\n");
}

pf_client_t *cli_client_new(const char *cmd, const char *endpoint, double timeout_s,
                            const pf_curve_opts_t *k)
{
    char err[CLI_ERRLEN];
    pf_client_t *c = pf_client_new_secure(endpoint, (int)(timeout_s * 1000), k, err, sizeof err);
    if (!c)
        cli_report(cmd, PF_EINPUT, err);
    return c;
}
