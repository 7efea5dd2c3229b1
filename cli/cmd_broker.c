/* planfarm broker: serve plan requests to clients and jobs to workers until SIGINT/SIGTERM. */
#include "broker/broker.h"
#include "broker/journal.h"
#include "cli/cli.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the shared flags (cli/netopts.c) go in the broker's options. */
static cli_netopts_t net_of(pf_broker_opts_t *o)
{
    return (cli_netopts_t){&o->heartbeat_ms, &o->liveness, &o->verbose, &o->max_msg_bytes};
}

static void help(FILE *f)
{
    pf_broker_opts_t d;
    pf_broker_opts_init(&d);
    fprintf(f,
            "usage: planfarm broker [--bind ENDPOINT] [--heartbeat-ms N] [--liveness N]\n"
            "                       [--max-attempts N] [--max-msg-mb N] [--dp-timeout S]\n"
            "                       [--probe-margin S] [--max-requests N] [--max-credits N]\n"
            "                       [--http ADDR] [--journal PATH|none] [--expire-days N]\n"
            "                       [--compact] [--client-requests N] [--client-jobs N]\n"
            "                       [--cert FILE [--clients DIR] [--workers DIR] [--agents DIR]\n"
            "                       [--admins DIR]] [--insecure] [--verbose]\n\n"
            "Serves plan requests (planfarm submit/status/result/cancel/list, planfarm plan\n"
            "--broker) and hands their jobs to workers (planfarm worker). Runs until SIGINT or\n"
            "SIGTERM, then tells its workers BYE.\n\n"
            "  --bind ENDPOINT     ZeroMQ endpoint (default %s; plain TCP only on\n"
            "                      loopback, unless --insecure)\n"
            "  --max-attempts N    workers a job may outlive before its request fails (default "
            "%d)\n"
            "  --dp-timeout S      deadline of one partition job on one worker (default %g)\n"
            "  --probe-margin S    a mapping probe's deadline is its budget + S (default %g)\n"
            "  --max-requests N    unfinished requests at once; more are refused (default %d)\n"
            "  --http ADDR         serve /metrics (Prometheus) and a status page at / on\n"
            "                      HOST:PORT, [IPv6]:PORT or :PORT (every interface; plain\n"
            "                      HTTP, no authentication: loopback or a trusted network)\n"
            "  --journal PATH      SQLite journal of requests, answers and plans: a restarted\n"
            "                      broker goes on with what it had accepted (default\n"
            "                      $XDG_STATE_HOME/planfarm/journal.db, else\n"
            "                      ~/.local/state/planfarm/journal.db; none: memory only)\n"
            "  --expire-days N     finished requests older than N days leave the journal at\n"
            "                      start and on --compact (default 7)\n"
            "  --compact           expire, then shrink the journal file, and exit\n"
            "  --client-requests N unfinished requests one client may have (default: only\n"
            "                      --max-requests)\n"
            "  --client-jobs N     jobs of one client handed to workers at once (default: no\n"
            "                      quota; clients take turns for free workers either way)\n"
            "  --max-credits N     jobs one worker may hold; more asked are clamped (default %d)\n"
            "\n"
            "Security (README \"Security\"; keys from `planfarm keygen`):\n"
            "  --cert FILE         the broker's secret cert: CurveZMQ, every peer authenticated\n"
            "  --clients DIR       public certs of clients (their own requests only)\n"
            "  --workers DIR       public certs of workers\n"
            "  --agents DIR        public certs of profiler agents\n"
            "  --admins DIR        public certs of admins (clients that see every request)\n"
            "  --insecure          allow plain TCP off loopback (a warning)\n\n"
            "Shared with planfarm worker:\n",
            d.endpoint, d.max_attempts, d.limits.solve_s, d.limits.margin_s, d.max_running,
            d.max_credits);
    cli_netopts_t net = net_of(&d);
    cli_netopts_help(f, &net);
}

/* The flags of the broker that are not fields of pf_broker_opts_t. */
typedef struct {
    const char *journal; /* NULL: the default path; "none": memory only */
    double expire_days;
    bool compact;
} broker_args_t;

#define O(field) offsetof(pf_broker_opts_t, field)
#define A(field) offsetof(broker_args_t, field)
static const cli_option_t broker_options[] = {
    {"bind", 0, CLI_OPT_STRING, .offset = O(endpoint)},
    {"max-attempts", 0, CLI_OPT_INT, .offset = O(max_attempts), .lo = 1, .hi = 1000},
    {"dp-timeout", 0, CLI_OPT_DOUBLE, .offset = O(limits.solve_s), .dlo = 0.01, .dhi = 1e7},
    {"probe-margin", 0, CLI_OPT_DOUBLE, .offset = O(limits.margin_s), .dlo = 0, .dhi = 1e7},
    {"max-requests", 0, CLI_OPT_INT, .offset = O(max_running), .lo = 1, .hi = 1000000},
    {"http", 0, CLI_OPT_STRING, .offset = O(http_addr)},
    CLI_OPTION_END,
};

static const cli_option_t journal_options[] = {
    {"journal", 0, CLI_OPT_STRING, .offset = A(journal)},
    {"expire-days", 0, CLI_OPT_DOUBLE, .offset = A(expire_days), .dlo = 0, .dhi = 1e6},
    {"compact", 0, CLI_OPT_FLAG, .offset = A(compact)},
    CLI_OPTION_END,
};

static const cli_option_t limit_options[] = {
    {"client-requests", 0, CLI_OPT_INT, .offset = O(client_max_requests), .lo = 1,
     .hi = 1000000},
    {"client-jobs", 0, CLI_OPT_INT, .offset = O(client_max_jobs), .lo = 1, .hi = 100000000},
    /* hidden test hook: slow request setup down */
    {"test-prep-delay-ms", 0, CLI_OPT_INT, .offset = O(prep_delay_ms), .lo = 0, .hi = 3600000},
    {"max-credits", 0, CLI_OPT_INT, .offset = O(max_credits), .lo = 1, .hi = 1000},
    {"cert", 0, CLI_OPT_STRING, .offset = O(auth.cert)},
    {"insecure", 0, CLI_OPT_SET_INT, .offset = O(auth.insecure), .lo = 1},
    /* the allow-lists, in the order of pf_role_t's bits */
    {"clients", 0, CLI_OPT_STRING, .offset = O(auth.dirs[0])},
    {"workers", 0, CLI_OPT_STRING, .offset = O(auth.dirs[1])},
    {"agents", 0, CLI_OPT_STRING, .offset = O(auth.dirs[2])},
    {"admins", 0, CLI_OPT_STRING, .offset = O(auth.dirs[3])},
    CLI_OPTION_END,
};
#undef A
#undef O

/* What the flags say together: allow-lists need the broker's cert, plain TCP stays on loopback
 * (a refused endpoint is bad usage, 2, not a failure to bind, 1). */
static int check_security(const pf_broker_opts_t *o)
{
    static const char *const dir_flags[] = {"--clients", "--workers", "--agents", "--admins"};
    char err[CLI_ERRLEN];
    for (int r = 0; r < 4; r++)
        if (o->auth.dirs[r] && !o->auth.cert)
            return cli_usage_error("broker", "%s needs --cert (the broker's secret cert)",
                                   dir_flags[r]);
    if (!pf_auth_wanted(&o->auth) && !o->auth.insecure &&
        !pf_curve_endpoint_is_local(o->endpoint)) {
        pf_curve_check_plain("broker", o->endpoint, 0, 0, err, sizeof err);
        return cli_report("broker", PF_EINPUT, err);
    }
    /* the status page is plain HTTP whatever the broker's keys: the rule of plain TCP */
    char http[300];
    snprintf(http, sizeof http, "tcp://%s", o->http_addr ? o->http_addr : "");
    if (o->http_addr && !pf_curve_endpoint_is_local(http)) {
        if (!o->auth.insecure)
            return cli_usage_error("broker", "--http %s: plain HTTP off loopback is refused: "
                                   "anyone on the network could read the status page and the "
                                   "plans. Use 127.0.0.1:PORT (an SSH tunnel or a reverse proxy "
                                   "for others), or pass --insecure on a network you trust",
                                   o->http_addr);
        fprintf(stderr, "planfarm broker: --insecure: plain HTTP on %s: anyone who can reach "
                        "it can read the status page%s\n", o->http_addr,
                pf_auth_wanted(&o->auth) ? " (each client still needs its token)" : "");
    }
    return CLI_OK;
}

/* zmq binds to an interface or an address, not a name: tcp://localhost:PORT becomes
 * tcp://127.0.0.1:PORT (the README allows localhost wherever it allows loopback). */
static void resolve_localhost(pf_broker_opts_t *o, char *buf, size_t len)
{
    static const char prefix[] = "tcp://localhost:";
    if (o->endpoint && !strncmp(o->endpoint, prefix, sizeof prefix - 1)) {
        snprintf(buf, len, "tcp://127.0.0.1:%s", o->endpoint + sizeof prefix - 1);
        o->endpoint = buf;
    }
}

/* The journal: expired requests leave it, and with --compact it shrinks and the broker exits
 * (*done). Sets o->journal_path unless it is "none". Returns the exit status. */
static int open_journal(const broker_args_t *a, pf_broker_opts_t *o, char *path, size_t len,
                        bool *done)
{
    char err[CLI_ERRLEN];
    const char *journal = a->journal;
    long long removed = 0;
    *done = false;
    if (!journal) {
        if (pf_journal_default_path(path, len, getenv("XDG_STATE_HOME"), getenv("HOME")) != PF_OK)
            return cli_usage_error("broker", "no HOME or XDG_STATE_HOME: give --journal PATH "
                                             "or --journal none");
        journal = path;
    }
    if (strcmp(journal, "none") == 0) {
        *done = a->compact;
        return a->compact ? cli_usage_error("broker", "--compact needs a journal") : CLI_OK;
    }
    if (pf_broker_journal_compact_or_expire(journal, a->expire_days, a->compact, &removed, err,
                                            sizeof err) != PF_OK) {
        *done = true;
        return cli_report("broker", PF_ERR, err);
    }
    if (a->compact) {
        printf("journal %s: %lld finished requests older than %g days removed, compacted\n",
               journal, removed, a->expire_days);
        *done = true;
    }
    o->journal_path = journal;
    return CLI_OK;
}

/* Serve until SIGINT or SIGTERM. */
static int serve(const pf_broker_opts_t *o)
{
    char err[CLI_ERRLEN];
    pf_broker_t *b = pf_broker_new(o, err, sizeof err);
    if (!b)
        return cli_report("broker", PF_ERR, err);
    int rc = pf_broker_run(b);
    pf_broker_stats_t st;
    pf_broker_get_stats(b, &st);
    fprintf(stderr, "planfarm broker: stopped after %.1f s: %lld messages in, %lld malformed, "
                    "%lld answers from workers that did not hold the job\n",
            st.wall_s, st.msgs_in, st.malformed, st.foreign_answers);
    pf_broker_destroy(&b);
    return rc == PF_OK ? CLI_OK : CLI_FAIL;
}

int cmd_broker(int argc, char **argv)
{
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    cli_netopts_t net = net_of(&o);
    broker_args_t a = {NULL, 7, false};
    const cli_options_t spec = {"broker", help, NULL, NULL,
                                {{broker_options, &o, NULL},
                                 {journal_options, &a, NULL},
                                 {limit_options, &o, NULL},
                                 {cli_netopts_table, &net, NULL},
                                 {cli_options_help, NULL, NULL}}};
    int rc, first = cli_options_parse(&spec, argc, argv, &rc);
    if (first < 0)
        return rc;
    if ((rc = cli_netopts_args_done("broker", argc, argv, first, "--bind", o.endpoint)) != CLI_OK ||
        (rc = check_security(&o)) != CLI_OK)
        return rc;
    char bind[300];
    resolve_localhost(&o, bind, sizeof bind);
    char journal_default[1024];
    bool done;
    rc = open_journal(&a, &o, journal_default, sizeof journal_default, &done);
    if (rc != CLI_OK || done)
        return rc;
    return serve(&o);
}
