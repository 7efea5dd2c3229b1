/* planfarm plan GRAPH CLUSTER: the whole search. Without --broker, an embedded broker and worker
 * threads in this process over inproc:// (the same broker, worker and client code as the
 * distributed mode); with --broker, `submit --wait` to that broker. */
#include "broker/broker.h"
#include "client/client.h"
#include "cli/cli.h"
#include "planner/core/util.h"
#include "worker/worker.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_EMBEDDED_WORKERS 256

static void help(FILE *f)
{
    fprintf(f,
            "usage: planfarm plan GRAPH CLUSTER [-o PLAN] [--workers N] [--threads T]\n"
            "                     [--broker ENDPOINT] [--quiet] [search options]\n\n"
            "Finds stages, replicas and the device of every stage replica, and writes the plan\n"
            "(JSON, DESIGN.md \"Plan\") to PLAN (default stdout) and a summary on stderr.\n\n"
            "Without --broker the search runs here: an embedded broker and N worker threads\n"
            "talk over inproc://, the same code paths as `planfarm broker` and `planfarm\n"
            "worker`. With --broker the request goes to that broker (submit --wait).\n\n"
            "  -o PLAN             output file (- = stdout)\n"
            "  --workers N         embedded workers (default 1, using every core)\n"
            "  --threads T         OpenMP threads per embedded worker (default cores / N)\n"
            "  --broker ENDPOINT   use a running broker, e.g. %s\n"
            "  --timeout S         seconds to wait for each broker reply (default %g)\n"
            "  --quiet             no summary, no progress line\n\n",
            PF_BROKER_DEFAULT_ENDPOINT, CLI_DEFAULT_TIMEOUT_S);
    cli_planopts_help(f);
    cli_keyopts_help(f);
    fprintf(f, "\nA progress line (phase, jobs, best objective) is shown on stderr when it is a\n"
               "terminal. Exit status: 0 plan written, 2 bad input, 3 no feasible plan (the\n"
               "message names the constraint), 1 run-time failure.\n");
}

typedef struct {
    zactor_t *broker;
    zactor_t *workers[MAX_EMBEDDED_WORKERS];
    int nworkers;
    char endpoint[128];
} embedded_t;

static void embedded_stop(embedded_t *e)
{
    for (int i = 0; i < e->nworkers; i++)
        zactor_destroy(&e->workers[i]);
    zactor_destroy(&e->broker);
}

/* "OK" ... or "ERROR" <message> from an actor that just started. */
static int actor_started(zactor_t *a, char *endpoint, size_t len, char *err, size_t errlen)
{
    char *status = NULL, *text = NULL;
    zstr_recvx(a, &status, &text, NULL);
    int ok = status && streq(status, "OK");
    if (ok && endpoint && text)
        snprintf(endpoint, len, "%s", text);
    if (!ok)
        pf_fail(err, errlen, PF_ERR, "%s", text ? text : "actor failed to start");
    free(status);
    free(text);
    return ok ? PF_OK : PF_ERR;
}

static int embedded_start(embedded_t *e, int nworkers, int threads, char *err, size_t errlen)
{
    pf_broker_opts_t bo;
    pf_worker_opts_t wo;
    char name[64];
    memset(e, 0, sizeof *e);
    pf_broker_opts_init(&bo);
    snprintf(e->endpoint, sizeof e->endpoint, "inproc://planfarm-plan-%d", (int)getpid());
    bo.endpoint = e->endpoint;
    bo.quiet = 1;
    if (!(e->broker = zactor_new(pf_broker_actor, &bo)) ||
        actor_started(e->broker, e->endpoint, sizeof e->endpoint, err, errlen) != PF_OK)
        return PF_ERR;
    pf_worker_opts_init(&wo);
    wo.endpoint = e->endpoint;
    wo.threads = threads;
    wo.name = name;
    wo.quiet = 1;
    for (int i = 0; i < nworkers; i++) {
        snprintf(name, sizeof name, "embedded-%d", i + 1);
        if (!(e->workers[i] = zactor_new(pf_worker_actor, &wo)))
            return pf_fail(err, errlen, PF_ERR, "cannot start worker %d", i + 1);
        e->nworkers++;
        if (actor_started(e->workers[i], NULL, 0, err, errlen) != PF_OK)
            return PF_ERR;
    }
    return PF_OK;
}

int cmd_plan(int argc, char **argv)
{
    enum { O_WORKERS = 1, O_THREADS, O_BROKER, O_TIMEOUT, O_QUIET };
    static const struct option opts[] = {{"workers", required_argument, 0, O_WORKERS},
                                         {"threads", required_argument, 0, O_THREADS},
                                         {"broker", required_argument, 0, O_BROKER},
                                         {"timeout", required_argument, 0, O_TIMEOUT},
                                         {"quiet", no_argument, 0, O_QUIET},
                                         {"output", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         CLI_PLAN_OPTIONS,
                                         CLI_KEY_OPTIONS,
                                         {0, 0, 0, 0}};
    pf_curve_opts_t keys = {0};
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    const char *out = NULL, *broker = NULL;
    long long workers = 1, threads = 0;
    double timeout_s = CLI_DEFAULT_TIMEOUT_S;
    int quiet = 0, c, r;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if ((r = cli_planopt("plan", c, optarg, &so)) != 0) {
            if (r < 0)
                return CLI_USAGE;
            continue;
        }
        if (cli_keyopt(c, optarg, &keys))
            continue;
        switch (c) {
        case 'o': out = optarg; break;
        case O_WORKERS:
            if (cli_int("plan", "--workers", optarg, 1, MAX_EMBEDDED_WORKERS, &workers))
                return CLI_USAGE;
            break;
        case O_THREADS:
            if (cli_int("plan", "--threads", optarg, 1, 4096, &threads))
                return CLI_USAGE;
            break;
        case O_BROKER: broker = optarg; break;
        case O_TIMEOUT:
            if (cli_double("plan", "--timeout", optarg, 0.01, 86400, &timeout_s))
                return CLI_USAGE;
            break;
        case O_QUIET: quiet = 1; break;
        case 'h': help(stdout); return CLI_OK;
        default: return cli_usage_error("plan", "unknown option");
        }
    }
    if (argc - optind != 2)
        return cli_usage_error("plan", "expected GRAPH and CLUSTER");
    if (cli_check_output("plan", out) || (broker && cli_check_endpoint("plan", "--broker", broker)))
        return CLI_USAGE;

    char err[CLI_ERRLEN] = "";
    embedded_t e = {0};
    pf_client_t *client = NULL;
    pf_graph_t *g = NULL;
    pf_cluster_t *cl = NULL;
    char *id = NULL;
    int rc;
    const char *gpath = argv[optind], *cpath = argv[optind + 1];
    if ((rc = cli_load_inputs("plan", gpath, cpath, &g, &cl)) != CLI_OK)
        return rc;
    if (!broker) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (threads == 0)
            threads = cores / workers > 1 ? cores / workers : 1;
        if (embedded_start(&e, (int)workers, (int)threads, err, sizeof err) != PF_OK) {
            rc = cli_report("plan", PF_ERR, err);
            goto done;
        }
        broker = e.endpoint;
    }
    if (!(client = cli_client_new("plan", broker, timeout_s, &keys))) {
        rc = CLI_USAGE;
        goto done;
    }
    if ((rc = cli_submit("plan", client, g, cl, gpath, cpath, &so, &id)) == CLI_OK) {
        if (!quiet && e.broker)
            fprintf(stderr, "planfarm plan: embedded broker, %lld worker%s x %lld thread%s\n",
                    workers, workers > 1 ? "s" : "", threads, threads > 1 ? "s" : "");
        /* in process a STATUS costs microseconds: poll often enough to end on time */
        rc = cli_wait_and_fetch("plan", client, id, out, !quiet, quiet, e.broker ? 50 : 500);
    }
done:
    free(id);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
    pf_client_destroy(&client);
    embedded_stop(&e);
    return rc;
}
