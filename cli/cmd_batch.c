/* planfarm batch LIST... --broker ENDPOINT: submit every request of one or more list files, follow
 * them all with one progress bar, and write each plan as it finishes.
 *
 * A list has one request per line, "GRAPH CLUSTER [plan options]", '#' starting a comment. The
 * broker keys requests by their inputs and options, so running a batch again submits nothing new:
 * finished requests hand back their plans, running ones are followed. A broker that goes away
 * (restarted on its journal) is waited for, up to --patience seconds without an answer. */
#include "broker/broker.h"
#include "client/client.h"
#include "cli/cli.h"
#include "planner/core/util.h"

#include <czmq.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_LINE_ARGS 64
#define MAX_LISTS 256

typedef enum { E_PENDING, E_RUNNING, E_DONE, E_FAILED } entry_state_t;

typedef struct {
    char where[512]; /* LIST:LINE, for messages */
    char *graph, *cluster, *out;
    pf_search_opts_t opts;
    entry_state_t state;
    char id[64];
    int exit_code; /* of a failed entry */
    long long jobs_answered, jobs_issued;
} entry_t;

typedef struct {
    entry_t *e;
    size_t n, cap;
} batch_t;

static void help(FILE *f)
{
    fprintf(f,
            "usage: planfarm batch LIST... [--broker ENDPOINT] [-o DIR] [--patience S]\n"
            "                      [--timeout S] [--priority N] [--quiet]\n"
            "                      [--cert FILE --broker-key FILE] [--insecure]\n\n"
            "Submits every request of the LIST files (one per line: GRAPH CLUSTER [plan\n"
            "options]; '#' starts a comment; relative paths are tried from the current\n"
            "directory, then from the list's), follows them with one progress bar on stderr\n"
            "when it is a terminal, and writes each plan as\n"
            "<graph>-on-<cluster>-L<line>.plan.json next to its list (or into DIR).\n"
            "Running it again is safe: the broker knows requests by their inputs and options,\n"
            "so finished ones give their plans back and running ones are followed, never\n"
            "planned twice.\n\n"
            "  --list LIST         one more list file (the same as giving it as an argument)\n"
            "  --broker ENDPOINT   default %s\n"
            "  -o DIR              write the plans into DIR (it must exist)\n"
            "  --patience S        how long the broker may stay unreachable (a restart) before\n"
            "                      the batch gives up (default 300)\n"
            "  --timeout S         seconds to wait for each broker reply (default %g)\n"
            "  --priority N        of every request of the batch (default 0; see submit)\n"
            "  --quiet             no progress bar, no summary\n",
            PF_BROKER_DEFAULT_ENDPOINT, CLI_DEFAULT_TIMEOUT_S);
    cli_keyopts_help(f);
    fprintf(f, "\nExit status: 0 every plan written, 2 a bad list, 3 some request infeasible (the\n"
               "others written), 1 otherwise (any plan missing: the broker gone past --patience,\n"
               "a request failed, an interrupt).\n");
}

static const char *stem(const char *path, char *buf, size_t len)
{
    const char *s = strrchr(path, '/');
    snprintf(buf, len, "%s", s ? s + 1 : path);
    char *dot = strrchr(buf, '.');
    if (dot && dot != buf)
        *dot = '\0';
    return buf;
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* path as given when it exists from here, else relative to the list's directory. */
static char *resolve(const char *path, const char *list)
{
    const char *slash = strrchr(list, '/');
    if (path[0] == '/' || file_exists(path) || !slash)
        return pf_strdup(path);
    char *p = NULL;
    if (asprintf(&p, "%.*s/%s", (int)(slash - list), list, path) < 0)
        return NULL;
    if (!file_exists(p)) {
        free(p);
        return pf_strdup(path); /* the load names the path as written */
    }
    return p;
}

static void entry_free(entry_t *e)
{
    free(e->graph);
    free(e->cluster);
    free(e->out);
}

/* One line's plan options, through the same table `plan` and `submit` use. */
static int parse_options(const char *where, int argc, char **argv, pf_search_opts_t *o)
{
    cli_planopts_init(o);
    const cli_options_t spec = {"batch", NULL, NULL, where, {{cli_planopts_table, o, NULL}}};
    int status, first = cli_options_parse(&spec, argc, argv, &status);
    if (first < 0)
        return -1;
    if (first != argc) {
        fprintf(stderr, "planfarm batch: %s: unexpected '%s' after the options\n", where,
                argv[first]);
        return -1;
    }
    return 0;
}

/* The words of a line, '#' starting a comment, into argv[1..] (argv[0] is "batch"); argc, or -1
 * past MAX_LINE_ARGS words (message printed). */
static int split_line(char *line, char **argv, const char *list, int lineno)
{
    char *hash = strchr(line, '#'), *tsave = NULL;
    int argc = 1;
    if (hash)
        *hash = '\0';
    argv[0] = "batch";
    for (char *t = strtok_r(line, " \t\r", &tsave); t; t = strtok_r(NULL, " \t\r", &tsave)) {
        if (argc == MAX_LINE_ARGS) {
            fprintf(stderr, "planfarm batch: %s:%d: more than %d words\n", list, lineno,
                    MAX_LINE_ARGS - 1);
            return -1;
        }
        argv[argc++] = t;
    }
    argv[argc] = NULL;
    return argc;
}

/* Where an entry's inputs are and where its plan goes: <graph>-on-<cluster>-L<line>.plan.json
 * next to its list, or in outdir. */
static bool entry_paths(entry_t *e, const char *list, int lineno, const char *graph,
                        const char *cluster, const char *outdir)
{
    char gs[128], cs[128], *dir = NULL;
    const char *slash = strrchr(list, '/');
    if (outdir)
        dir = pf_strdup(outdir);
    else if (slash)
        dir = strndup(list, (size_t)(slash - list));
    else
        dir = pf_strdup(".");
    e->graph = resolve(graph, list);
    e->cluster = resolve(cluster, list);
    bool ok = dir && e->graph && e->cluster &&
              asprintf(&e->out, "%s/%s-on-%s-L%d.plan.json", dir, stem(graph, gs, sizeof gs),
                       stem(cluster, cs, sizeof cs), lineno) >= 0;
    if (!ok) {
        e->out = NULL;
        entry_free(e);
    }
    free(dir);
    return ok;
}

/* One request line (its words in argv[1..argc-1]) appended to bt; the exit status. */
static int add_entry(batch_t *bt, const char *list, int lineno, int argc, char **argv,
                     const char *outdir)
{
    if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-') {
        fprintf(stderr, "planfarm batch: %s:%d: expected GRAPH CLUSTER [plan options]\n", list,
                lineno);
        return CLI_USAGE;
    }
    if (pf_grow((void **)&bt->e, &bt->cap, bt->n + 1, sizeof *bt->e) != PF_OK)
        return CLI_FAIL;
    entry_t *e = &bt->e[bt->n];
    memset(e, 0, sizeof *e);
    snprintf(e->where, sizeof e->where, "%s:%d", list, lineno);
    if (parse_options(e->where, argc - 2, argv + 2, &e->opts) != 0)
        return CLI_USAGE;
    if (!entry_paths(e, list, lineno, argv[1], argv[2], outdir))
        return CLI_FAIL;
    bt->n++;
    return CLI_OK;
}

static int read_list(batch_t *bt, const char *list, const char *outdir)
{
    char *text = NULL, err[CLI_ERRLEN];
    size_t len;
    if (cli_read_file(list, &text, &len, err, sizeof err) != PF_OK) {
        fprintf(stderr, "planfarm batch: %s\n", err);
        return CLI_USAGE;
    }
    int rc = CLI_OK, lineno = 0;
    char *next = text;
    while (next && *next && rc == CLI_OK) {
        char *line = next, *nl = strchr(line, '\n'), *argv[MAX_LINE_ARGS + 1];
        if (nl)
            *nl = '\0';
        next = nl ? nl + 1 : NULL;
        lineno++;
        int argc = split_line(line, argv, list, lineno);
        if (argc < 0)
            rc = CLI_USAGE;
        else if (argc > 1)
            rc = add_entry(bt, list, lineno, argc, argv, outdir);
    }
    free(text);
    return rc;
}

/* Broker unreachable (a timeout): worth waiting for. Anything else is the request's own fault. */
static bool unreachable(const char *err)
{
    return strstr(err, "no broker at") != NULL;
}

static int submit_one(const char *cmd, pf_client_t *client, entry_t *e, char *err, size_t errlen)
{
    pf_graph_t *g;
    pf_cluster_t *cl;
    int rc = cli_remote_load_inputs(cmd, e->graph, e->cluster, &g, &cl);
    if (rc != CLI_OK) {
        e->state = E_FAILED;
        e->exit_code = rc;
        return PF_EINPUT;
    }
    char label[256], gs[128], cs[128];
    snprintf(label, sizeof label, "%s on %s", stem(e->graph, gs, sizeof gs),
             stem(e->cluster, cs, sizeof cs));
    Planfarm__RequestStatus *st = NULL;
    rc = pf_client_submit(client, g, cl, &e->opts, label, &st, err, errlen);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
    if (rc == PF_OK) {
        snprintf(e->id, sizeof e->id, "%s", st->request_id);
        e->state = E_RUNNING;
        planfarm__request_status__free_unpacked(st, NULL);
    }
    return rc;
}

static void bar(const batch_t *bt, double t0)
{
    size_t done = 0, failed = 0, running = 0, pending = 0;
    long long answered = 0, issued = 0;
    for (size_t i = 0; i < bt->n; i++) {
        done += bt->e[i].state == E_DONE;
        failed += bt->e[i].state == E_FAILED;
        running += bt->e[i].state == E_RUNNING;
        pending += bt->e[i].state == E_PENDING;
        answered += bt->e[i].jobs_answered;
        issued += bt->e[i].jobs_issued;
    }
    const int width = 30;
    int fill = bt->n ? (int)((done + failed) * (size_t)width / bt->n) : width;
    char b[64];
    for (int i = 0; i < width; i++)
        b[i] = i < fill ? '#' : '.';
    b[width] = '\0';
    fprintf(stderr,
            "\r\033[Kbatch [%s] %zu/%zu done, %zu failed, %zu running, %zu to submit; "
            "jobs %lld/%lld; %.0f s",
            b, done, bt->n, failed, running, pending, answered, issued, zclock_mono() / 1e3 - t0);
    fflush(stderr);
}

/* Follow one running entry: STATUS, and when it has ended its plan (cli_fetch_plan). */
static int follow(pf_client_t *client, entry_t *e, char *err, size_t errlen)
{
    Planfarm__RequestStatus *st;
    int rc = pf_client_status(client, e->id, &st, err, errlen);
    if (rc != PF_OK) {
        if (!unreachable(err)) /* the broker forgot it (no journal): submit it again */
            e->state = E_PENDING;
        return rc;
    }
    Planfarm__RequestState s = st->state;
    e->jobs_answered = st->jobs_answered;
    e->jobs_issued = st->jobs_issued;
    planfarm__request_status__free_unpacked(st, NULL);
    if (!pf_wire_request_state_ended(s))
        return PF_OK;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "batch: %s", e->where);
    int code = cli_remote_fetch_plan(cmd, client, e->id, e->out, true);
    if (code == CLI_OK) {
        e->state = E_DONE;
    } else {
        e->state = E_FAILED;
        e->exit_code = code;
    }
    return PF_OK;
}

/* Submit a pending entry; a refusal other than "busy" (the broker's cap on running requests:
 * the entry waits its turn) or no broker fails it. */
static int submit_pending(pf_client_t *client, entry_t *e, bool progress, char *err,
                          size_t errlen)
{
    int r = submit_one("batch", client, e, err, errlen);
    if (r != PF_OK && e->state == E_PENDING && !unreachable(err) &&
        !strstr(err, "broker busy")) {
        fprintf(stderr, "%splanfarm batch: %s: %s\n", progress ? "\n" : "", e->where, err);
        e->state = E_FAILED;
        e->exit_code = cli_exit_code(r);
    }
    return r;
}

/* One round over the entries: submit the pending ones, follow the running ones. Returns how
 * many are still open; *heard when the broker answered (a round stops at the first silence: the
 * others would time out too). */
static size_t round_over(batch_t *bt, pf_client_t *client, bool progress, char *err,
                         size_t errlen, bool *heard)
{
    size_t open = 0;
    *heard = false;
    for (size_t i = 0; i < bt->n && !zsys_interrupted; i++) {
        entry_t *e = &bt->e[i];
        int r;
        err[0] = '\0'; /* an input that fails to load sets none */
        if (e->state == E_PENDING)
            r = submit_pending(client, e, progress, err, errlen);
        else if (e->state == E_RUNNING)
            r = follow(client, e, err, errlen);
        else
            continue; /* ended: the broker was not asked, so it is no sign of life */
        if (r != PF_OK && unreachable(err)) {
            /* this entry and the ones after it were not asked: all still open */
            for (size_t j = i; j < bt->n; j++)
                open += bt->e[j].state == E_PENDING || bt->e[j].state == E_RUNNING;
            break;
        }
        *heard = true;
        open += e->state == E_PENDING || e->state == E_RUNNING;
    }
    return open;
}

/* The exit status of a finished batch: the first failure's, an infeasible one giving way to any
 * other; 1 whenever a plan is missing for another reason (never 0 with plans missing). */
static int batch_summary(const batch_t *bt, bool quiet, double t0)
{
    size_t done = 0;
    int worst = CLI_OK;
    for (size_t i = 0; i < bt->n; i++) {
        done += bt->e[i].state == E_DONE;
        if (bt->e[i].state == E_FAILED &&
            (worst == CLI_OK || (worst == CLI_INFEASIBLE && bt->e[i].exit_code != CLI_INFEASIBLE)))
            worst = bt->e[i].exit_code ? bt->e[i].exit_code : CLI_FAIL;
        if (bt->e[i].state != E_DONE && bt->e[i].state != E_FAILED)
            worst = CLI_FAIL;
    }
    if (!quiet)
        fprintf(stderr, "planfarm batch: %zu of %zu plans written in %.1f s\n", done, bt->n,
                zclock_mono() / 1e3 - t0);
    return worst;
}

/* Rounds until every entry has ended, the broker stays silent past patience_s, or SIGINT. */
static int run_batch(batch_t *bt, pf_client_t *client, double patience_s, bool quiet)
{
    char err[CLI_ERRLEN] = "";
    bool progress = !quiet && cli_stderr_tty(), heard;
    double t0 = zclock_mono() / 1e3, last_heard = t0;
    int delay_ms = 20;
    for (;;) {
        size_t open = round_over(bt, client, progress, err, sizeof err, &heard);
        double now = zclock_mono() / 1e3;
        if (heard)
            last_heard = now;
        if (progress)
            bar(bt, t0);
        if (progress && open && (zsys_interrupted || (!heard && now - last_heard > patience_s)))
            fputc('\n', stderr);
        if (zsys_interrupted) {
            fprintf(stderr, "planfarm batch: interrupted; the requests go on at the broker (run "
                            "the batch again to collect them)\n");
            return CLI_FAIL;
        }
        if (open == 0)
            break;
        if (!heard && now - last_heard > patience_s)
            return cli_report("batch", PF_ERR, err);
        zclock_sleep(delay_ms);
        delay_ms = delay_ms * 3 / 2 > 500 ? 500 : delay_ms * 3 / 2;
    }
    if (progress)
        fputc('\n', stderr);
    return batch_summary(bt, quiet, t0);
}

/* The flags of batch alone; the rest are the remote flags. */
typedef struct {
    const char *lists[MAX_LISTS];
    int nlists, priority;
    double patience_s;
} batch_args_t;

static int add_list(const char *cmd, const char *arg, void *base)
{
    batch_args_t *a = base;
    if (a->nlists == MAX_LISTS) {
        cli_usage_error(cmd, "more than %d lists", MAX_LISTS);
        return -1;
    }
    a->lists[a->nlists++] = arg;
    return 0;
}

static const cli_option_t batch_options[] = {
    {"list", 0, CLI_OPT_CUSTOM, .parse = add_list},
    {"patience", 0, CLI_OPT_DOUBLE, .offset = offsetof(batch_args_t, patience_s), .dlo = 0,
     .dhi = 1e7},
    {"priority", 0, CLI_OPT_INT, .offset = offsetof(batch_args_t, priority), .lo = -1000000,
     .hi = 1000000},
    CLI_OPTION_END,
};

/* The lists' requests, run on the broker. */
static int batch_lists(const batch_args_t *a, const cli_remote_args_t *r,
                       const pf_curve_opts_t *keys)
{
    batch_t bt = {0};
    pf_client_t *client = NULL;
    int rc = CLI_OK;
    for (int i = 0; i < a->nlists && rc == CLI_OK; i++)
        rc = read_list(&bt, a->lists[i], r->out);
    if (rc == CLI_OK && bt.n == 0)
        rc = cli_usage_error("batch", "no request in the lists");
    if (rc == CLI_OK &&
        !(client = cli_remote_client_new("batch", r->broker, r->timeout_s, keys)))
        rc = CLI_USAGE;
    if (rc == CLI_OK) {
        pf_client_set_priority(client, a->priority);
        rc = run_batch(&bt, client, a->patience_s, r->quiet);
    }
    pf_client_destroy(&client);
    for (size_t i = 0; i < bt.n; i++)
        entry_free(&bt.e[i]);
    free(bt.e);
    return rc;
}

int cmd_batch(int argc, char **argv)
{
    batch_args_t a = {.patience_s = 300};
    cli_remote_args_t r = {PF_BROKER_DEFAULT_ENDPOINT, NULL, CLI_DEFAULT_TIMEOUT_S, false};
    pf_curve_opts_t keys = {0};
    const cli_options_t spec = {"batch", help, NULL, NULL,
                                {{cli_remote_broker_options, &r, NULL},
                                 {batch_options, &a, NULL},
                                 {cli_remote_output_options, &r, NULL},
                                 {cli_options_help, NULL, NULL},
                                 {cli_keyopts_table, &keys, NULL}}};
    int status, first = cli_options_parse(&spec, argc, argv, &status);
    if (first < 0)
        return status;
    for (int i = first; i < argc; i++)
        if (add_list("batch", argv[i], &a) != 0)
            return CLI_USAGE;
    if (a.nlists == 0)
        return cli_usage_error("batch", "expected LIST files (or --list LIST)");
    if (cli_check_endpoint("batch", "--broker", r.broker))
        return CLI_USAGE;
    struct stat sd;
    if (r.out && stat(r.out, &sd) != 0)
        return cli_usage_error("batch", "-o %s: %s (create the directory first)", r.out,
                               strerror(errno));
    if (r.out && !S_ISDIR(sd.st_mode))
        return cli_usage_error("batch", "-o %s: not a directory", r.out);
    return batch_lists(&a, &r, &keys);
}
