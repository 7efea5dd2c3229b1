/* planfarm status|cancel|list: ask a broker about requests. status and cancel print one
 * request, list prints a table of all of them. */
#include "broker/broker.h"
#include "client/client.h"
#include "cli/cli.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void print_status(const Planfarm__RequestStatus *st)
{
    printf("request %s (%s): %s\n", st->request_id, st->label,
           pf_wire_request_state_name(st->state));
    printf("  phase:    %s\n", st->phase);
    long long cancelled = st->jobs_issued - st->jobs_answered - st->jobs_outstanding;
    printf("  jobs:     %lld issued: %lld answered, %lld outstanding (%lld queued), %lld "
           "cancelled\n",
           (long long)st->jobs_issued, (long long)st->jobs_answered,
           (long long)st->jobs_outstanding, (long long)st->jobs_queued,
           cancelled > 0 ? cancelled : 0);
    if (isfinite(st->best_objective_ms))
        printf("  %s %.6g ms\n",
               st->state == PLANFARM__REQUEST_STATE__REQ_DONE ? "plan:    " : "best:    ",
               st->best_objective_ms);
    else /* no mapping found yet: the wire says NaN */
        printf("  best:     -\n");
    printf("  wall:     %.2f s, %u worker%s connected\n", st->wall_s, st->workers,
           st->workers == 1 ? "" : "s");
    if (st->error && st->error[0])
        printf("  error:    %s\n", st->error);
}

typedef enum { ONE_STATUS, ONE_CANCEL, ALL_LIST } what_t;

static void help(FILE *f, what_t what)
{
    static const char *usage[] = {"status ID", "cancel ID", "list"};
    static const char *text[] = {
        "Prints a request's state, phase, job counts, the best mapping objective found so far\n"
        "(the plan's objective once it is done) and wall time.\n",
        "Stops a request: its queued jobs are dropped and its running jobs cancelled at the\n"
        "workers. A finished request is left as it is.\n",
        "Prints every request the broker remembers (the last 1000 finished ones and all\n"
        "unfinished ones), oldest first.\n"};
    fprintf(f,
            "usage: planfarm %s [--broker ENDPOINT] [--timeout S]\n\n%s\n"
            "  --broker ENDPOINT   default %s\n"
            "  --timeout S         seconds to wait for the reply (default %g)\n",
            usage[what], text[what], PF_BROKER_DEFAULT_ENDPOINT, CLI_DEFAULT_TIMEOUT_S);
    if (what == ALL_LIST)
        fprintf(f, "  --http-token        print this key's token for the broker's status page\n"
                   "                      (--http: open it as http://HOST:PORT/?token=TOKEN)\n"
                   "                      instead; needs --cert and --broker-key, asks nothing\n");
    cli_keyopts_help(f);
    fprintf(f, "\nWith keys a client sees its own requests only (an admin key: all).\n"
               "Exit status: 0 answered, %s1 no broker.\n",
            what == ALL_LIST ? "" : "2 unknown request id, ");
}

static void help_status(FILE *f)
{
    help(f, ONE_STATUS);
}

static void help_cancel(FILE *f)
{
    help(f, ONE_CANCEL);
}

static void help_list(FILE *f)
{
    help(f, ALL_LIST);
}

static int run(int argc, char **argv, what_t what)
{
    static const char *names[] = {"status", "cancel", "list"};
    const char *cmd = names[what];
    static void (*const helps[])(FILE *) = {help_status, help_cancel, help_list};
    cli_remote_args_t r = {PF_BROKER_DEFAULT_ENDPOINT, NULL, CLI_DEFAULT_TIMEOUT_S, false};
    pf_curve_opts_t keys = {0};
    int token = 0;
    static const cli_option_t list_options[] = {
        {"http-token", 0, CLI_OPT_SET_INT, .offset = 0, .lo = 1}, CLI_OPTION_END};
    const cli_options_t spec = {cmd, helps[what], NULL, NULL,
                                {{cli_remote_broker_options, &r, NULL},
                                 {cli_options_help, NULL, NULL},
                                 {cli_keyopts_table, &keys, NULL},
                                 {what == ALL_LIST ? list_options : NULL, &token, NULL}}};
    int status, first = cli_options_parse(&spec, argc, argv, &status);
    if (first < 0)
        return status;
    int want = what == ALL_LIST ? 0 : 1;
    if (argc - first != want)
        return cli_usage_error(cmd, want ? "expected one request ID" : "expected no argument");
    char err[CLI_ERRLEN];
    pf_client_t *client = cli_remote_client_new(cmd, r.broker, r.timeout_s, &keys);
    if (!client)
        return CLI_USAGE;
    int rc;
    char tok[PF_CURVE_TOKEN_TXT];
    if (token) {
        if ((rc = pf_client_http_token(client, tok, err, sizeof err)) == PF_OK)
            printf("%s\n", tok);
    } else if (what == ALL_LIST) {
        Planfarm__ListReply *l;
        if ((rc = pf_client_list(client, &l, err, sizeof err)) == PF_OK) {
            printf("%-33s %-9s %-9s %9s %10s %9s  %s\n", "id", "state", "phase", "jobs",
                   "best_ms", "wall_s", "label");
            for (size_t i = 0; i < l->n_requests; i++) {
                const Planfarm__RequestStatus *st = l->requests[i];
                char jobs[32], best[32] = "-"; /* "-": no mapping found yet (NaN on the wire) */
                snprintf(jobs, sizeof jobs, "%lld/%lld", (long long)st->jobs_answered,
                         (long long)st->jobs_issued);
                if (isfinite(st->best_objective_ms))
                    snprintf(best, sizeof best, "%.4g", st->best_objective_ms);
                printf("%-33s %-9s %-9s %9s %10s %9.2f  %s\n", st->request_id,
                       pf_wire_request_state_name(st->state), st->phase, jobs, best, st->wall_s,
                       st->label);
            }
            planfarm__list_reply__free_unpacked(l, NULL);
        }
    } else {
        Planfarm__RequestStatus *st;
        rc = what == ONE_STATUS ? pf_client_status(client, argv[first], &st, err, sizeof err)
                                : pf_client_cancel(client, argv[first], &st, err, sizeof err);
        if (rc == PF_OK) {
            print_status(st);
            planfarm__request_status__free_unpacked(st, NULL);
        }
    }
    pf_client_destroy(&client);
    return rc == PF_OK ? CLI_OK : cli_report(cmd, rc, err);
}

int cmd_status(int argc, char **argv)
{
    return run(argc, argv, ONE_STATUS);
}

int cmd_cancel(int argc, char **argv)
{
    return run(argc, argv, ONE_CANCEL);
}

int cmd_list(int argc, char **argv)
{
    return run(argc, argv, ALL_LIST);
}
