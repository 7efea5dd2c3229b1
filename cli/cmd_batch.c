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
            "                      [--timeout S] [--priority N] [--quiet]\n\n"
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
            "  -o DIR              write the plans into DIR\n"
            "  --patience S        how long the broker may stay unreachable (a restart) before\n"
            "                      the batch gives up (default 300)\n"
            "  --timeout S         seconds to wait for each broker reply (default %g)\n"
            "  --priority N        of every request of the batch (default 0; see submit)\n"
            "  --quiet             no progress bar, no summary\n\n"
            "Exit status: 0 every plan written, 2 a bad list, 3 some request infeasible (the\n"
            "others written), 1 otherwise.\n",
            PF_BROKER_DEFAULT_ENDPOINT, CLI_DEFAULT_TIMEOUT_S);
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

static int file_exists(const char *path)
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
    static const struct option opts[] = {CLI_PLAN_OPTIONS, {0, 0, 0, 0}};
    pf_search_opts_init(o);
    int c, r;
    optind = 0; /* glibc: start over (this parser runs once per line) */
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == '?' || c == ':' || (r = cli_planopt("batch", c, optarg, o)) == 0) {
            fprintf(stderr, "planfarm batch: %s: unknown or incomplete option '%s'\n", where,
                    argv[optind - 1]);
            opterr = 1;
            return -1;
        }
        if (r < 0) {
            fprintf(stderr, "planfarm batch: (at %s)\n", where);
            opterr = 1;
            return -1;
        }
    }
    opterr = 1;
    if (optind != argc) {
        fprintf(stderr, "planfarm batch: %s: unexpected '%s' after the options\n", where,
                argv[optind]);
        return -1;
    }
    return 0;
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
        char *line = next, *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        next = nl ? nl + 1 : NULL;
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *argv[MAX_LINE_ARGS + 1], *tsave = NULL;
        int argc = 1;
        argv[0] = "batch";
        for (char *t = strtok_r(line, " \t\r", &tsave); t; t = strtok_r(NULL, " \t\r", &tsave)) {
            if (argc == MAX_LINE_ARGS) {
                fprintf(stderr, "planfarm batch: %s:%d: more than %d words\n", list, lineno,
                        MAX_LINE_ARGS - 1);
                rc = CLI_USAGE;
                break;
            }
            argv[argc++] = t;
        }
        argv[argc] = NULL;
        if (rc != CLI_OK || argc == 1)
            continue;
        if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-') {
            fprintf(stderr, "planfarm batch: %s:%d: expected GRAPH CLUSTER [plan options]\n",
                    list, lineno);
            rc = CLI_USAGE;
            break;
        }
        if (pf_grow((void **)&bt->e, &bt->cap, bt->n + 1, sizeof *bt->e) != PF_OK) {
            rc = CLI_FAIL;
            break;
        }
        entry_t *e = &bt->e[bt->n];
        memset(e, 0, sizeof *e);
        snprintf(e->where, sizeof e->where, "%s:%d", list, lineno);
        if (parse_options(e->where, argc - 2, argv + 2, &e->opts) != 0) {
            rc = CLI_USAGE;
            break;
        }
        char gs[128], cs[128], *dir = NULL;
        const char *slash = strrchr(list, '/');
        if (outdir)
            dir = pf_strdup(outdir);
        else if (slash)
            dir = strndup(list, (size_t)(slash - list));
        else
            dir = pf_strdup(".");
        e->graph = resolve(argv[1], list);
        e->cluster = resolve(argv[2], list);
        if (!dir || !e->graph || !e->cluster ||
            asprintf(&e->out, "%s/%s-on-%s-L%d.plan.json", dir, stem(argv[1], gs, sizeof gs),
                     stem(argv[2], cs, sizeof cs), lineno) < 0) {
            e->out = NULL;
            entry_free(e);
            free(dir);
            rc = CLI_FAIL;
            break;
        }
        free(dir);
        bt->n++;
    }
    free(text);
    return rc;
}

/* Broker unreachable (a timeout): worth waiting for. Anything else is the request's own fault. */
static int unreachable(const char *err)
{
    return strstr(err, "no broker at") != NULL;
}

static int submit_one(const char *cmd, pf_client_t *client, entry_t *e, char *err, size_t errlen)
{
    pf_graph_t *g;
    pf_cluster_t *cl;
    int rc = cli_load_inputs(cmd, e->graph, e->cluster, &g, &cl);
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
static int follow(pf_client_t *client, entry_t *e, int quiet, char *err, size_t errlen)
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
    if (!pf_request_state_ended(s))
        return PF_OK;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "batch: %s", e->where);
    int code = cli_fetch_plan(cmd, client, e->id, e->out, 1);
    if (code == CLI_OK) {
        e->state = E_DONE;
    } else {
        e->state = E_FAILED;
        e->exit_code = code;
    }
    (void)quiet;
    return PF_OK;
}

int cmd_batch(int argc, char **argv)
{
    enum { O_BROKER = 1, O_LIST, O_PATIENCE, O_TIMEOUT, O_QUIET, O_PRIORITY };
    static const struct option opts[] = {{"broker", required_argument, 0, O_BROKER},
                                         {"list", required_argument, 0, O_LIST},
                                         {"patience", required_argument, 0, O_PATIENCE},
                                         {"timeout", required_argument, 0, O_TIMEOUT},
                                         {"quiet", no_argument, 0, O_QUIET},
                                         {"priority", required_argument, 0, O_PRIORITY},
                                         {"output", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *broker = PF_BROKER_DEFAULT_ENDPOINT, *outdir = NULL;
    const char *lists[256];
    int nlists = 0, quiet = 0, c;
    long long priority = 0;
    double patience_s = 300, timeout_s = CLI_DEFAULT_TIMEOUT_S;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        switch (c) {
        case O_BROKER: broker = optarg; break;
        case O_LIST:
            if (nlists == 256)
                return cli_usage_error("batch", "more than 256 lists");
            lists[nlists++] = optarg;
            break;
        case O_PATIENCE:
            if (cli_double("batch", "--patience", optarg, 0, 1e7, &patience_s))
                return CLI_USAGE;
            break;
        case O_TIMEOUT:
            if (cli_double("batch", "--timeout", optarg, 0.01, 86400, &timeout_s))
                return CLI_USAGE;
            break;
        case O_QUIET: quiet = 1; break;
        case O_PRIORITY:
            if (cli_int("batch", "--priority", optarg, -1000000, 1000000, &priority))
                return CLI_USAGE;
            break;
        case 'o': outdir = optarg; break;
        case 'h': help(stdout); return CLI_OK;
        default: return cli_usage_error("batch", "unknown option");
        }
    }
    for (int i = optind; i < argc; i++) {
        if (nlists == 256)
            return cli_usage_error("batch", "more than 256 lists");
        lists[nlists++] = argv[i];
    }
    if (nlists == 0)
        return cli_usage_error("batch", "expected LIST files (or --list LIST)");
    if (cli_check_endpoint("batch", "--broker", broker))
        return CLI_USAGE;
    struct stat sd;
    if (outdir && (stat(outdir, &sd) != 0 || !S_ISDIR(sd.st_mode)))
        return cli_usage_error("batch", "-o %s: not a directory", outdir);

    batch_t bt = {0};
    int rc = CLI_OK;
    for (int i = 0; i < nlists && rc == CLI_OK; i++)
        rc = read_list(&bt, lists[i], outdir);
    if (rc == CLI_OK && bt.n == 0)
        rc = cli_usage_error("batch", "no request in the lists");
    char err[CLI_ERRLEN];
    pf_client_t *client = NULL;
    if (rc == CLI_OK && !(client = pf_client_new(broker, (int)(timeout_s * 1000), err, sizeof err)))
        rc = cli_report("batch", PF_EINPUT, err);
    if (rc != CLI_OK)
        goto done;
    pf_client_set_priority(client, (int)priority);

    int progress = !quiet && cli_stderr_tty();
    double t0 = zclock_mono() / 1e3, last_heard = t0;
    int delay_ms = 20;
    for (;;) {
        size_t open = 0;
        int heard = 0;
        for (size_t i = 0; i < bt.n && !zsys_interrupted; i++) {
            entry_t *e = &bt.e[i];
            int r = PF_OK;
            if (e->state == E_PENDING) {
                r = submit_one("batch", client, e, err, sizeof err);
                /* busy (the broker's cap on running requests): this one waits its turn */
                if (r != PF_OK && e->state == E_PENDING && !unreachable(err) &&
                    !strstr(err, "broker busy")) {
                    fprintf(stderr, "%splanfarm batch: %s: %s\n", progress ? "\n" : "", e->where,
                            err);
                    e->state = E_FAILED;
                    e->exit_code = cli_exit_code(r);
                }
            } else if (e->state == E_RUNNING) {
                r = follow(client, e, quiet, err, sizeof err);
            }
            if (r == PF_OK || !unreachable(err))
                heard = 1;
            else
                break; /* no broker: the others would time out too */
            open += e->state == E_PENDING || e->state == E_RUNNING;
        }
        double now = zclock_mono() / 1e3;
        if (heard)
            last_heard = now;
        if (progress)
            bar(&bt, t0);
        if (zsys_interrupted) {
            rc = CLI_FAIL;
            if (progress)
                fputc('\n', stderr);
            fprintf(stderr, "planfarm batch: interrupted; the requests go on at the broker (run "
                            "the batch again to collect them)\n");
            goto done;
        }
        if (!heard && now - last_heard > patience_s) {
            if (progress)
                fputc('\n', stderr);
            rc = cli_report("batch", PF_ERR, err);
            goto done;
        }
        if (heard && open == 0)
            break;
        zclock_sleep(delay_ms);
        delay_ms = delay_ms * 3 / 2 > 500 ? 500 : delay_ms * 3 / 2;
    }
    if (progress)
        fputc('\n', stderr);
    size_t done = 0;
    int worst = CLI_OK;
    for (size_t i = 0; i < bt.n; i++) {
        done += bt.e[i].state == E_DONE;
        if (bt.e[i].state == E_FAILED &&
            (worst == CLI_OK || (worst == CLI_INFEASIBLE && bt.e[i].exit_code != CLI_INFEASIBLE)))
            worst = bt.e[i].exit_code ? bt.e[i].exit_code : CLI_FAIL;
    }
    if (!quiet)
        fprintf(stderr, "planfarm batch: %zu of %zu plans written in %.1f s\n", done, bt.n,
                zclock_mono() / 1e3 - t0);
    rc = worst;
done:
    pf_client_destroy(&client);
    for (size_t i = 0; i < bt.n; i++)
        entry_free(&bt.e[i]);
    free(bt.e);
    return rc;
}
