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
            "  --timeout S         seconds to wait for each broker reply (default %g;\n"
            "                      an embedded broker is waited for without limit)\n"
            "  --quiet             no summary, no progress line\n\n",
            PF_BROKER_DEFAULT_ENDPOINT, CLI_DEFAULT_TIMEOUT_S);
    cli_planopts_help(f);
    cli_keyopts_help(f);
    fprintf(f, "\nA progress line (phase, jobs, best objective) is shown on stderr when it is a\n"
               "terminal. Exit status: 0 plan written, 2 bad input, 3 no feasible plan (the\n"
               "message names the constraint), 1 run-time failure.\n");
}

/* "Without limit" for the client's reply wait, in what its int milliseconds hold: 24 days. */
#define EMBEDDED_TIMEOUT_S 2e6

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
    bo.own_workers_only = 1; /* inproc: no other process can connect */
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

/* The flags of plan alone; the rest are the remote flags, the search's and the keys'. */
typedef struct {
    int workers, threads; /* threads 0: cores / workers */
} plan_args_t;

static const cli_option_t plan_options[] = {
    {"workers", 0, CLI_OPT_INT, .offset = offsetof(plan_args_t, workers), .lo = 1,
     .hi = MAX_EMBEDDED_WORKERS},
    {"threads", 0, CLI_OPT_INT, .offset = offsetof(plan_args_t, threads), .lo = 1, .hi = 4096},
    CLI_OPTION_END,
};

/* The search on the broker, or on an embedded one started here (broker NULL). */
static int plan_run(const plan_args_t *a, const cli_remote_args_t *r, const pf_curve_opts_t *keys,
                    const pf_search_opts_t *so, const char *gpath, const char *cpath)
{
    char err[CLI_ERRLEN] = "", *id = NULL;
    embedded_t e = {0};
    pf_client_t *client = NULL;
    pf_graph_t *g = NULL;
    pf_cluster_t *cl = NULL;
    const char *broker = r->broker;
    int rc, threads = a->threads;
    if ((rc = cli_remote_load_inputs("plan", gpath, cpath, &g, &cl)) != CLI_OK)
        return rc;
    if (!broker) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (threads == 0)
            threads = cores / a->workers > 1 ? (int)(cores / a->workers) : 1;
        if (embedded_start(&e, a->workers, threads, err, sizeof err) != PF_OK) {
            rc = cli_report("plan", PF_ERR, err);
            goto done;
        }
        broker = e.endpoint;
    }
    /* The embedded broker is in this process: it is alive while it works (a large request's
     * setup or answers may keep it from replying for more than the 5 s a remote broker gets),
     * so its replies are waited for without that limit unless --timeout says otherwise. */
    double timeout_s = r->timeout_s; /* 0: not given; a typed 5 is kept */
    if (!(timeout_s > 0))
        timeout_s = e.broker ? EMBEDDED_TIMEOUT_S : CLI_DEFAULT_TIMEOUT_S;
    if (!(client = cli_remote_client_new("plan", broker, timeout_s, keys))) {
        rc = CLI_USAGE;
        goto done;
    }
    if ((rc = cli_remote_submit("plan", client, g, cl, gpath, cpath, so, &id)) == CLI_OK) {
        if (!r->quiet && e.broker)
            fprintf(stderr, "planfarm plan: embedded broker, %d worker%s x %d thread%s\n",
                    a->workers, a->workers > 1 ? "s" : "", threads, threads > 1 ? "s" : "");
        /* in process a STATUS costs microseconds: poll often enough to end on time */
        rc = cli_remote_wait_and_fetch("plan", client, id, r->out, !r->quiet, r->quiet,
                                       e.broker ? 50 : 500);
        /* without a batch every (S, R, T) runs MB micro-batches per replica: its global batch
         * then follows R, which a reader of "global batch 4" would not guess */
        if (rc == CLI_OK && !r->quiet && so->global_batch == 0)
            fprintf(stderr, "  note: no --global-batch, so every candidate ran %d micro-batches "
                    "per replica and its global batch followed its replica count; give "
                    "--global-batch N to plan for your training batch (the block search then "
                    "also chooses the micro-batch, interleaving, sequence parallelism, "
                    "recomputation and ZeRO)\n",
                    so->microbatches > 0 ? so->microbatches : PF_DEFAULT_MICROBATCHES);
    }
done:
    free(id);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
    pf_client_destroy(&client);
    embedded_stop(&e);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    plan_args_t a = {1, 0};
    cli_remote_args_t r = {NULL, NULL, 0, false}; /* timeout 0: not given (plan_run) */
    pf_curve_opts_t keys = {0};
    pf_search_opts_t so;
    cli_planopts_init(&so);
    const cli_options_t spec = {"plan", help, NULL, NULL,
                                {{plan_options, &a, NULL},
                                 {cli_remote_broker_options, &r, NULL},
                                 {cli_remote_output_options, &r, NULL},
                                 {cli_options_help, NULL, NULL},
                                 {cli_planopts_table, &so, NULL},
                                 {cli_keyopts_table, &keys, NULL}}};
    int status, first = cli_options_parse(&spec, argc, argv, &status);
    if (first < 0)
        return status;
    if (argc - first != 2)
        return cli_usage_error("plan", "expected GRAPH and CLUSTER");
    if (cli_check_output("plan", r.out) ||
        (r.broker && cli_check_endpoint("plan", "--broker", r.broker)))
        return CLI_USAGE;
    return plan_run(&a, &r, &keys, &so, argv[first], argv[first + 1]);
}
