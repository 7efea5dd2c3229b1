/* What the sub-commands that talk to a broker share: their flags, submitting files, following a
 * request to its end, writing its plan and a one-paragraph summary. */
#include "client/client.h"
#include "cli/cli.h"
#include "planner/core/util.h"

#include <czmq.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R(field) offsetof(cli_remote_args_t, field)
const cli_option_t cli_remote_broker_options[] = {
    {"broker", 0, CLI_OPT_STRING, .offset = R(broker)},
    {"timeout", 0, CLI_OPT_DOUBLE, .offset = R(timeout_s), .dlo = 0.01, .dhi = 86400},
    CLI_OPTION_END,
};

const cli_option_t cli_remote_output_options[] = {
    {"quiet", 0, CLI_OPT_FLAG, .offset = R(quiet)},
    {"output", 'o', CLI_OPT_STRING, .offset = R(out)},
    CLI_OPTION_END,
};
#undef R

pf_client_t *cli_remote_client_new(const char *cmd, const char *endpoint, double timeout_s,
                                   const pf_curve_opts_t *k)
{
    char err[CLI_ERRLEN];
    pf_client_t *c = pf_client_new_secure(endpoint, (int)(timeout_s * 1000), k, err, sizeof err);
    if (!c)
        cli_report(cmd, PF_EINPUT, err);
    return c;
}

static const char *basename_of(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int cli_remote_load_inputs(const char *cmd, const char *graph_path, const char *cluster_path,
                           pf_graph_t **g, pf_cluster_t **c)
{
    char err[CLI_ERRLEN] = "";
    int rc;
    *g = NULL;
    *c = NULL;
    if ((rc = pf_graph_load(graph_path, g, err, sizeof err)) != PF_OK ||
        (rc = pf_cluster_load(cluster_path, c, err, sizeof err)) != PF_OK) {
        pf_graph_destroy(g);
        return cli_report(cmd, rc, err);
    }
    return CLI_OK;
}

int cli_remote_submit(const char *cmd, pf_client_t *client, const pf_graph_t *g,
                      const pf_cluster_t *c, const char *graph_path, const char *cluster_path,
                      const pf_search_opts_t *o, char **id)
{
    char err[CLI_ERRLEN] = "", label[256];
    Planfarm__RequestStatus *st = NULL;
    *id = NULL;
    snprintf(label, sizeof label, "%s on %s", basename_of(graph_path), basename_of(cluster_path));
    /* a --microbatch-size other than the graph's is re-priced by the broker's search, and its
     * workers get that graph (broker/prep.c) */
    int rc = pf_client_submit(client, g, c, o, label, &st, err, sizeof err);
    if (rc == PF_OK && st->state == PLANFARM__REQUEST_STATE__REQ_FAILED) {
        rc = pf_fail(err, sizeof err, st->status ? st->status : PF_ERR, "%s (request %s)",
                     st->error, st->request_id);
        cli_flag_names(err, sizeof err, cli_planopts_flags);
    }
    else if (rc == PF_OK && !(*id = pf_strdup(st->request_id)))
        rc = pf_fail(err, sizeof err, PF_ERR, "out of memory");
    if (st)
        planfarm__request_status__free_unpacked(st, NULL);
    return rc == PF_OK ? CLI_OK : cli_report(cmd, rc, err);
}

static void progress_line(const Planfarm__RequestStatus *st)
{
    char best[48];
    cli_fmt_ms(best, sizeof best, st->best_objective_ms);
    long long cancelled = st->jobs_issued - st->jobs_answered - st->jobs_outstanding;
    fprintf(stderr,
            "\r\033[K%s: %-9s jobs: %lld answered, %lld running, %lld queued, %lld cancelled; "
            "best %s; %u worker%s; %.1f s",
            st->request_id, st->phase, (long long)st->jobs_answered,
            (long long)(st->jobs_outstanding - st->jobs_queued), (long long)st->jobs_queued,
            cancelled > 0 ? cancelled : 0, best, st->workers, st->workers == 1 ? "" : "s",
            st->wall_s);
    fflush(stderr);
}

static double jnum(json_t *o, const char *key)
{
    json_t *v = o ? json_object_get(o, key) : NULL;
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The stages' recomputation as the plan writes it: training.recompute, or where the stages
 * differ each stage_list entry's own, printed in runs ("selective x7+none x1"). */
static void stage_recompute(json_t *p, const char *all, char *buf, size_t len)
{
    json_t *list = json_object_get(p, "stage_list");
    size_t n = json_array_size(list), at = 0, run = 0, own = 0;
    all = all ? all : "none";
    snprintf(buf, len, "%s", all);
    for (size_t s = 0; s < n; s++)
        own += json_object_get(json_array_get(list, s), "recompute") != NULL;
    for (size_t s = 0; own && s < n && at < len; s++) {
        const char *r = json_string_value(json_object_get(json_array_get(list, s), "recompute"));
        const char *nx = s + 1 < n ? json_string_value(
                                         json_object_get(json_array_get(list, s + 1), "recompute"))
                                   : NULL;
        r = r ? r : all;
        run++;
        if (s + 1 < n && !strcmp(nx ? nx : all, r))
            continue;
        int k = snprintf(buf + at, len - at, "%s%s x%zu", at ? "+" : "", r, run);
        at += k > 0 ? (size_t)k : 0;
        run = 0;
    }
}

/* The block search's choices (DESIGN.md "Plan"); the replicas R are d x C under context
 * parallelism. */
static void summarize_blocks(json_t *p, double R)
{
    if (!json_object_get(p, "microbatch_size"))
        return;
    double C = jnum(p, "context_parallel"), E = jnum(p, "expert_parallel");
    C = isfinite(C) && C > 1 ? C : 1, E = isfinite(E) && E > 1 ? E : 1;
    json_t *tr = json_object_get(p, "training");
    char rc[128];
    stage_recompute(p, json_string_value(json_object_get(tr, "recompute")), rc, sizeof rc);
    fprintf(stderr, "  block search: micro-batch %g, virtual stages %g, sequence parallel %s, "
            "context parallel %g (data parallel %g), expert parallel %g\n",
            jnum(p, "microbatch_size"), jnum(p, "virtual_stages"),
            json_is_true(json_object_get(p, "sequence_parallel")) ? "on" : "off", C, R / C, E);
    fprintf(stderr, "                recomputation %s, ZeRO %g, TP communication overlap %s\n",
            rc, isfinite(jnum(tr, "zero")) ? jnum(tr, "zero") : 0,
            json_is_true(json_object_get(p, "tp_comm_overlap")) ? "on" : "off");
}

/* --stage-degrees' comparison of the per-stage plan with the best uniform one. */
static void summarize_stagedeg(json_t *p)
{
    json_t *rec = json_object_get(json_object_get(p, "search"), "stage_degrees");
    const char *why = json_string_value(json_object_get(rec, "why"));
    const char *deg = json_string_value(json_object_get(rec, "degrees"));
    if (!rec)
        return;
    fprintf(stderr, "  per-stage degrees: %s", json_is_true(json_object_get(rec, "chosen")) ? "chosen" : "not chosen");
    if (deg)
        fprintf(stderr, ", DP x TP per stage %s", deg);
    double a = jnum(rec, "per_stage_ms_per_sample"), b = jnum(rec, "uniform_ms_per_sample");
    if (isfinite(a))
        fprintf(stderr, " (%.4g ms per sample%s", a, isfinite(b) ? "" : ")");
    if (isfinite(a) && isfinite(b))
        fprintf(stderr, "; the best uniform plan %.4g)", b);
    fprintf(stderr, "%s%s\n", why ? ": " : "", why ? why : "");
}

/* A plan whose stages have their own degrees (stage_list[i].replicas, .tp): each stage's
 * DP x TP. false when the stages share one degree (the caller prints PP x DP x TP). */
static bool summarize_degrees(json_t *p, const char *model, const char *cluster)
{
    json_t *list = json_object_get(p, "stage_list");
    bool own = json_object_get(json_array_get(list, 0), "replicas") != NULL;
    if (own) {
        char buf[256];
        size_t at = 0;
        double used = 0;
        for (size_t s = 0; s < json_array_size(list); s++) { /* every stage counts */
            json_t *st = json_array_get(list, s);
            int k = at < sizeof buf ? snprintf(buf + at, sizeof buf - at, "%s%gx%g",
                                               s ? " | " : "", jnum(st, "replicas"),
                                               jnum(st, "tp"))
                                    : 0;
            at += k > 0 ? (size_t)k : 0;
            used += jnum(st, "replicas") * jnum(st, "tp");
        }
        fprintf(stderr, "plan for %s on %s: PP %zu, each stage its own DP x TP (%s) = %g of %g "
                "GPUs, %g micro-batches per step (global batch %g)\n", model ? model : "?",
                cluster ? cluster : "?", json_array_size(list), buf, used, jnum(p, "devices"),
                jnum(p, "microbatches") * jnum(p, "replicas"), jnum(p, "global_batch"));
    }
    return own;
}

/* The baselines' simulated steps against the plan's, and a baseline's devices the plan took for
 * simulating faster than the mapping search's (planner/search/search_sim.c). */
static void summarize_baselines(json_t *p, double step)
{
    json_t *base = json_object_get(p, "baselines");
    json_t *cs = json_object_get(base, "cs_map"), *p2p = json_object_get(base, "p2p_map");
    if (!isfinite(jnum(cs, "simulated_step_ms")) || !(step > 0))
        return;
    fprintf(stderr, "\n  baselines' simulated steps: CS map %.3gx ours, p2p map %.3gx ours",
            jnum(cs, "simulated_step_ms") / step, jnum(p2p, "simulated_step_ms") / step);
    int cs_adopted = json_is_true(json_object_get(cs, "adopted"));
    if (!cs_adopted && !json_is_true(json_object_get(p2p, "adopted")))
        return;
    fprintf(stderr, "\n  devices: the %s map's, faster than the mapping search's",
            cs_adopted ? "CS" : "p2p");
    double searched = jnum(json_object_get(p, "mapping"), "simulated_step_ms");
    if (isfinite(searched))
        fprintf(stderr, " (%.3gx ours)", searched / step);
}

/* One paragraph a person reads: shape of the plan, objective, step estimate, throughput and
 * MFU, the baselines, and what the search cost. */
static void summarize(const char *plan_json)
{
    json_error_t je;
    json_t *p = json_loads(plan_json, 0, &je);
    if (!p)
        return;
    json_t *search = json_object_get(p, "search");
    const char *model = json_string_value(json_object_get(p, "model"));
    const char *cluster = json_string_value(json_object_get(p, "cluster"));
    double step = jnum(p, "simulated_step_ms");
    double S = jnum(p, "stages"), R = jnum(p, "replicas"), T = jnum(p, "tensor_parallel");
    if (!isfinite(T))
        T = 1;
    if (!summarize_degrees(p, model, cluster))
        fprintf(stderr, "plan for %s on %s: PP %g x DP %g x TP %g = %g of %g GPUs, %g "
                "micro-batches (global batch %g)\n", model ? model : "?", cluster ? cluster : "?",
                S, R, T, S * R * T, jnum(p, "devices"), jnum(p, "microbatches"),
                jnum(p, "global_batch"));
    summarize_blocks(p, R);
    summarize_stagedeg(p);
    /* the fullest stage against the device's memory (DESIGN.md "Memory per device") */
    json_t *stages = json_object_get(p, "stage_list"), *worst = NULL;
    double peak = -1, cap = jnum(p, "device_mem_bytes");
    for (size_t i = 0; i < json_array_size(stages); i++) {
        json_t *st = json_array_get(stages, i);
        if (jnum(st, "peak_mem_bytes") > peak) {
            peak = jnum(st, "peak_mem_bytes");
            worst = st;
        }
    }
    json_t *mem = worst ? json_object_get(worst, "memory") : NULL;
    if (worst && isfinite(cap)) {
        char a[32], b[32];
        pf_fmt_bytes(a, sizeof a, peak);
        pf_fmt_bytes(b, sizeof b, cap);
        fprintf(stderr, "  memory per GPU: %s of %s (stage %g", a, b, jnum(worst, "id"));
        if (mem) {
            static const char *const part[] = {"weights", "gradients", "optimizer",
                                               "activations"};
            for (int k = 0; k < 4; k++) {
                char key[32];
                snprintf(key, sizeof key, "%s_bytes", part[k]);
                pf_fmt_bytes(a, sizeof a, jnum(mem, key));
                fprintf(stderr, "%s %s %s", k ? "," : ":", part[k], a);
            }
        }
        fprintf(stderr, ")\n");
    }
    json_t *comm = json_object_get(p, "communication_ms_per_step");
    char t1[32], t2[32], t3[32];
    if (comm)
        fprintf(stderr, "  communication per step: TP %s, PP %s, DP %s\n",
                cli_fmt_ms(t1, sizeof t1, jnum(comm, "tp")),
                cli_fmt_ms(t2, sizeof t2, jnum(comm, "pp")),
                cli_fmt_ms(t3, sizeof t3, jnum(comm, "dp")));
    const char *sched = json_string_value(json_object_get(p, "schedule"));
    fprintf(stderr, "  objective %s, simulated step %s (%s)",
            cli_fmt_ms(t1, sizeof t1, jnum(p, "objective_ms")), cli_fmt_ms(t2, sizeof t2, step),
            sched ? sched : "1f1b");
    double sps = jnum(p, "throughput_samples_per_s"), tps = jnum(p, "tokens_per_s");
    if (isfinite(sps)) {
        /* whole numbers from 1000 up: 72537 tokens/s, not 7.254e+04 */
        fprintf(stderr, sps < 1e3 ? "\n  throughput: %.4g samples/s" : "\n  throughput: %.0f samples/s",
                sps);
        if (isfinite(tps))
            fprintf(stderr, tps < 1e3 ? ", %.4g tokens/s" : ", %.0f tokens/s", tps);
        /* only with the graph's FLOPs and the devices' peaks (planner/ir/plan_rates.h) */
        if (isfinite(jnum(p, "mfu")))
            fprintf(stderr, ", MFU %.1f %%", 100 * jnum(p, "mfu"));
    }
    summarize_baselines(p, step);
    double nw = jnum(search, "workers");
    fprintf(stderr, "\n  search: %g jobs, %.2f s wall, %g worker%s\n", jnum(search, "jobs"),
            jnum(search, "wall_s"), nw, nw == 1 ? "" : "s");
    json_decref(p);
}

static int write_text(const char *cmd, const char *path, const char *text, size_t len)
{
    char err[CLI_ERRLEN];
    bool to_stdout = !path || !strcmp(path, "-");
    FILE *f = to_stdout ? stdout : fopen(path, "w");
    if (!f) {
        snprintf(err, sizeof err, "%s: cannot write", path);
        return cli_report(cmd, PF_ERR, err);
    }
    bool bad = fwrite(text, 1, len, f) != len;
    bad |= to_stdout ? fflush(f) != 0 : fclose(f) != 0;
    if (bad) {
        snprintf(err, sizeof err, "%s: write error", to_stdout ? "stdout" : path);
        return cli_report(cmd, PF_ERR, err);
    }
    return CLI_OK;
}

/* Exit status of a request that ended without a plan. */
static int report_end(const char *cmd, const Planfarm__RequestStatus *st)
{
    char msg[CLI_ERRLEN];
    if (st->state == PLANFARM__REQUEST_STATE__REQ_CANCELLED) {
        snprintf(msg, sizeof msg, "request %s was cancelled", st->request_id);
        return cli_report(cmd, PF_ERR, msg);
    }
    snprintf(msg, sizeof msg, "%s", st->error && st->error[0] ? st->error : "request failed");
    return cli_report(cmd, st->status < 0 ? st->status : PF_ERR, msg);
}

int cli_remote_fetch_plan(const char *cmd, pf_client_t *c, const char *id, const char *out_path,
                          bool quiet)
{
    char err[CLI_ERRLEN];
    Planfarm__ResultReply *r;
    int rc = pf_client_result(c, id, &r, err, sizeof err);
    if (rc != PF_OK)
        return cli_report(cmd, rc, err);
    const Planfarm__RequestStatus *st = r->status;
    if (st->state == PLANFARM__REQUEST_STATE__REQ_DONE) {
        size_t len = r->plan_json ? strlen(r->plan_json) : 0;
        rc = write_text(cmd, out_path, r->plan_json ? r->plan_json : "", len);
        if (rc == CLI_OK && !quiet)
            summarize(r->plan_json);
    } else if (!pf_wire_request_state_ended(st->state)) {
        fprintf(stderr, "planfarm %s: request %s is still running (%s, %lld of %lld jobs "
                        "answered)\n",
                cmd, st->request_id, st->phase, (long long)st->jobs_answered,
                (long long)st->jobs_issued);
        rc = CLI_FAIL;
    } else {
        rc = report_end(cmd, st);
    }
    planfarm__result_reply__free_unpacked(r, NULL);
    return rc;
}

int cli_remote_wait_and_fetch(const char *cmd, pf_client_t *c, const char *id,
                              const char *out_path, bool progress, bool quiet, int max_poll_ms)
{
    char err[CLI_ERRLEN];
    /* Geometric polling: a small plan ends in a few ms (a first sleep of 20 ms was most of
     * `planfarm plan`'s time on Piper's inputs), a long one is seen at most a third late. */
    int delay_ms = 1, rc;
    bool shown = false;
    progress = progress && cli_stderr_tty();
    for (;;) {
        Planfarm__RequestStatus *st;
        if ((rc = pf_client_status(c, id, &st, err, sizeof err)) != PF_OK) {
            if (shown)
                fputc('\n', stderr);
            return cli_report(cmd, rc, err);
        }
        bool done = pf_wire_request_state_ended(st->state);
        if (progress) {
            progress_line(st);
            shown = true;
        }
        planfarm__request_status__free_unpacked(st, NULL);
        if (done)
            break;
        zclock_sleep(delay_ms);
        if (zsys_interrupted) {
            Planfarm__RequestStatus *cst;
            if (shown)
                fputc('\n', stderr);
            if (pf_client_cancel(c, id, &cst, err, sizeof err) == PF_OK)
                planfarm__request_status__free_unpacked(cst, NULL);
            fprintf(stderr, "planfarm %s: interrupted; request %s cancelled\n", cmd, id);
            return CLI_FAIL;
        }
        delay_ms = delay_ms * 3 / 2 + 1 > max_poll_ms ? max_poll_ms : delay_ms * 3 / 2 + 1;
    }
    if (shown)
        fputc('\n', stderr);
    return cli_remote_fetch_plan(cmd, c, id, out_path, quiet);
}
