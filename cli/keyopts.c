/* Key options of the commands that talk to a broker (clients and workers): --cert,
 * --broker-key, --insecure (README "Security"). */
#include "client/client.h"
#include "cli/cli.h"
#include "planner/core/util.h"

#define K(field) offsetof(pf_curve_opts_t, field)
const cli_option_t cli_keyopts_table[] = {
    {"cert", 0, CLI_OPT_STRING, .offset = K(cert)},
    {"broker-key", 0, CLI_OPT_STRING, .offset = K(broker_key)},
    {"insecure", 0, CLI_OPT_SET_INT, .offset = K(insecure), .lo = 1},
    CLI_OPTION_END,
};
#undef K

void cli_keyopts_help(FILE *f)
{
    fprintf(f, "  --cert FILE         own secret cert (NAME_secret from `planfarm keygen`); with\n"
               "                      --broker-key: CurveZMQ, encrypted and authenticated\n"
               "  --broker-key FILE   the broker's public cert\n"
               "  --insecure          allow plain TCP to a broker off this machine (a warning)\n");
}
