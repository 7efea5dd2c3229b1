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

int cmd_broker(int argc, char **argv)
{
    enum {
        O_BIND = 1, O_ATTEMPTS, O_DPT, O_PM, O_MAXREQ, O_HTTP,
        O_JOURNAL, O_EXPIRE, O_COMPACT, O_PREP_DELAY, O_CLIENT_REQ, O_CLIENT_JOBS, O_MAXCRED,
        O_CERT, O_INSECURE, O_DIR /* O_DIR + r: the allow-list of role bit r */
    };
    static const struct option opts[] = {{"bind", required_argument, 0, O_BIND},
                                         {"max-attempts", required_argument, 0, O_ATTEMPTS},
                                         {"dp-timeout", required_argument, 0, O_DPT},
                                         {"probe-margin", required_argument, 0, O_PM},
                                         {"max-requests", required_argument, 0, O_MAXREQ},
                                         {"http", required_argument, 0, O_HTTP},
                                         {"journal", required_argument, 0, O_JOURNAL},
                                         {"expire-days", required_argument, 0, O_EXPIRE},
                                         {"compact", no_argument, 0, O_COMPACT},
                                         {"client-requests", required_argument, 0, O_CLIENT_REQ},
                                         {"client-jobs", required_argument, 0, O_CLIENT_JOBS},
                                         /* hidden test hook: slow request setup down */
                                         {"test-prep-delay-ms", required_argument, 0, O_PREP_DELAY},
                                         {"max-credits", required_argument, 0, O_MAXCRED},
                                         {"cert", required_argument, 0, O_CERT},
                                         {"insecure", no_argument, 0, O_INSECURE},
                                         {"clients", required_argument, 0, O_DIR + 0},
                                         {"workers", required_argument, 0, O_DIR + 1},
                                         {"agents", required_argument, 0, O_DIR + 2},
                                         {"admins", required_argument, 0, O_DIR + 3},
                                         CLI_NET_OPTIONS,
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    cli_netopts_t net = net_of(&o);
    long long v;
    double x, expire_days = 7;
    int compact = 0;
    const char *journal = NULL;
    char journal_default[1024];
    int c, shared;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if ((shared = cli_netopt("broker", c, optarg, &net)) != 0) {
            if (shared < 0)
                return CLI_USAGE;
            continue;
        }
        switch (c) {
        case O_BIND: o.endpoint = optarg; break;
        case O_ATTEMPTS:
            if (cli_int("broker", "--max-attempts", optarg, 1, 1000, &v))
                return CLI_USAGE;
            o.max_attempts = (int)v;
            break;
        case O_DPT:
            if (cli_double("broker", "--dp-timeout", optarg, 0.01, 1e7, &x))
                return CLI_USAGE;
            o.limits.solve_s = x;
            break;
        case O_PM:
            if (cli_double("broker", "--probe-margin", optarg, 0, 1e7, &x))
                return CLI_USAGE;
            o.limits.margin_s = x;
            break;
        case O_MAXREQ:
            if (cli_int("broker", "--max-requests", optarg, 1, 1000000, &v))
                return CLI_USAGE;
            o.max_running = (int)v;
            break;
        case O_HTTP: o.http_addr = optarg; break;
        case O_JOURNAL: journal = optarg; break;
        case O_EXPIRE:
            if (cli_double("broker", "--expire-days", optarg, 0, 1e6, &expire_days))
                return CLI_USAGE;
            break;
        case O_COMPACT: compact = 1; break;
        case O_CLIENT_REQ:
            if (cli_int("broker", "--client-requests", optarg, 1, 1000000, &v))
                return CLI_USAGE;
            o.client_max_requests = (int)v;
            break;
        case O_CLIENT_JOBS:
            if (cli_int("broker", "--client-jobs", optarg, 1, 100000000, &v))
                return CLI_USAGE;
            o.client_max_jobs = (int)v;
            break;
        case O_PREP_DELAY:
            if (cli_int("broker", "--test-prep-delay-ms", optarg, 0, 3600000, &v))
                return CLI_USAGE;
            o.prep_delay_ms = (int)v;
            break;
        case O_MAXCRED:
            if (cli_int("broker", "--max-credits", optarg, 1, 1000, &v))
                return CLI_USAGE;
            o.max_credits = (int)v;
            break;
        case O_CERT: o.auth.cert = optarg; break;
        case O_INSECURE: o.auth.insecure = 1; break;
        case O_DIR + 0:
        case O_DIR + 1:
        case O_DIR + 2:
        case O_DIR + 3: o.auth.dirs[c - O_DIR] = optarg; break;
        case 'h': help(stdout); return CLI_OK;
        default: return cli_usage_error("broker", "unknown option");
        }
    }
    int done = cli_net_args_done("broker", argc, argv, "--bind", o.endpoint);
    if (done != CLI_OK)
        return done;
    char err[CLI_ERRLEN];
    static const char *const dir_flags[] = {"--clients", "--workers", "--agents", "--admins"};
    for (int r = 0; r < 4; r++)
        if (o.auth.dirs[r] && !o.auth.cert)
            return cli_usage_error("broker", "%s needs --cert (the broker's secret cert)",
                                   dir_flags[r]);
    /* a refused endpoint is bad usage (2), not a failure to bind (1) */
    if (!pf_auth_wanted(&o.auth) && !o.auth.insecure && !pf_endpoint_is_local(o.endpoint)) {
        pf_curve_check_plain("broker", o.endpoint, 0, 0, err, sizeof err);
        return cli_report("broker", PF_EINPUT, err);
    }
    if (!journal) {
        if (pf_journal_default_path(journal_default, sizeof journal_default,
                                    getenv("XDG_STATE_HOME"), getenv("HOME")) != PF_OK)
            return cli_usage_error("broker", "no HOME or XDG_STATE_HOME: give --journal PATH "
                                             "or --journal none");
        journal = journal_default;
    }
    if (strcmp(journal, "none") != 0) {
        long long removed = 0;
        if (pf_broker_journal_compact_or_expire(journal, expire_days, compact, &removed, err,
                                                sizeof err) != PF_OK)
            return cli_report("broker", PF_ERR, err);
        if (compact) {
            printf("journal %s: %lld finished requests older than %g days removed, compacted\n",
                   journal, removed, expire_days);
            return CLI_OK;
        }
        o.journal_path = journal;
    } else if (compact) {
        return cli_usage_error("broker", "--compact needs a journal");
    }
    pf_broker_t *b = pf_broker_new(&o, err, sizeof err);
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
