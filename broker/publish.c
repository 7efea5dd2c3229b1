/* publish: the loop's side of the HTTP face. Once per heartbeat the loop renders its metrics
 * and its requests into texts and hands them to the server (broker/http.h); a finished request's
 * plan and its mapping picture are handed over once, when it finishes. Everything here runs on
 * the loop's thread. */
#include "broker/broker_int.h"
#include "planner/sim/draw.h"
#include "planner/core/util.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void pf_broker_time_answer(pf_broker_t *b, int w, uint64_t job_id)
{
    pf_job_kind_t kind;
    double sent_at;
    int holder;
    /* Only the live copy's answer: a cancelled copy's was sent at some earlier time. */
    if (w < 0 || !pf_dispatch_job_sent(b->dispatch, job_id, &kind, &sent_at, &holder) ||
        holder != w || (unsigned)kind >= PF_JOB_KIND_COUNT)
        return;
    pf_latency_hist_observe(&b->latency[kind], b->now - sent_at);
}

static void collect(pf_broker_t *b, pf_metrics_t *m)
{
    memset(m, 0, sizeof *m);
    for (request_t *r = zlistx_first(b->order); r; r = zlistx_next(b->order))
        if ((unsigned)r->state < PF_METRICS_NSTATES)
            m->requests[r->state]++;
    m->requests_submitted = b->nrequests;
    pf_dispatch_kind_counts_t k;
    pf_dispatch_kind_counts(b->dispatch, &k);
    memcpy(m->jobs_queued, k.queued, sizeof m->jobs_queued);
    memcpy(m->jobs_running, k.running, sizeof m->jobs_running);
    memcpy(m->jobs_answered, k.answered, sizeof m->jobs_answered);
    memcpy(m->latency, b->latency, sizeof m->latency);
    pf_broker_stats_t st;
    pf_broker_get_stats(b, &st);
    pf_dispatch_stats_t ds;
    pf_dispatch_get_stats(b->dispatch, &ds);
    m->dispatched = ds.dispatched;
    m->requeued = ds.requeued;
    m->poisoned = ds.poisoned;
    m->workers = ds.workers;
    m->agents = pf_broker_agents_count(b);
    m->journal_bytes = 0;
    struct stat jst; /* the database file (its WAL is checkpointed into it) */
    if (b->journal && b->o.journal_path && stat(b->o.journal_path, &jst) == 0)
        m->journal_bytes = (double)jst.st_size;
    m->msgs_in = st.msgs_in;
    m->msgs_out = st.msgs_out;
    m->malformed = st.malformed;
    m->busy_s = st.busy_s;
    m->uptime_s = st.wall_s;
}

static char *render_metrics(pf_broker_t *b)
{
    pf_metrics_t m;
    collect(b, &m);
    char *text = NULL, err[128];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    int rc = pf_metrics_render(&m, f, err, sizeof err);
    if (fclose(f) != 0 || rc != PF_OK) {
        free(text);
        return NULL;
    }
    return text;
}

static json_t *url_or_null(const char *fmt, const char *id)
{
    char url[128];
    snprintf(url, sizeof url, fmt, id);
    return json_string(url);
}

/* The requests as /api/status serves them, oldest first; ids[] gets the requests that have a
 * plan (for pf_http_keep_plans). */
static char *render_status(pf_broker_t *b, const char **ids, size_t *nids)
{
    json_t *list = json_array(), *root = json_object();
    char *text = NULL;
    *nids = 0;
    if (!list || !root)
        goto done;
    for (request_t *r = zlistx_first(b->order); r; r = zlistx_next(b->order)) {
        Planfarm__RequestStatus st;
        pf_broker_request_status(b, r, &st);
        int has_plan = r->plan_json != NULL;
        if (has_plan)
            ids[(*nids)++] = r->id;
        json_t *o = json_pack(
            "{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:o, s:f, s:s, s:o, s:o}", "id", r->id, "label",
            r->label, "state", pf_request_state_name(r->state), "phase", st.phase, "jobs_issued",
            (json_int_t)st.jobs_issued, "jobs_answered", (json_int_t)st.jobs_answered,
            "jobs_queued", (json_int_t)st.jobs_queued, "best_objective_ms",
            isfinite(st.best_objective_ms) ? json_real(st.best_objective_ms) : json_null(),
            "wall_s", st.wall_s, "error", r->error, "plan",
            has_plan ? url_or_null("/api/plan/%s", r->id) : json_null(), "mapping_svg",
            has_plan && r->has_mapping_svg ? url_or_null("/api/plan/%s/mapping.svg", r->id)
                                           : json_null());
        if (!o || json_array_append_new(list, o) != 0)
            goto done;
    }
    pf_broker_stats_t bs;
    pf_broker_get_stats(b, &bs);
    if (json_object_set_new(root, "workers", json_integer(bs.workers)) ||
        json_object_set_new(root, "agents", json_integer(pf_broker_agents_count(b))) ||
        json_object_set_new(root, "uptime_s", json_real(bs.wall_s)) ||
        json_object_set(root, "requests", list))
        goto done;
    text = json_dumps(root, JSON_COMPACT);
done:
    json_decref(list);
    json_decref(root);
    return text;
}

void pf_broker_publish(pf_broker_t *b)
{
    if (!b->http)
        return;
    size_t n = zlistx_size(b->order), nids = 0;
    const char **ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        zsys_warning("broker: out of memory publishing the status page");
        return;
    }
    pf_http_publish(b->http, render_metrics(b), render_status(b, ids, &nids));
    pf_http_keep_plans(b->http, ids, nids);
    free(ids);
}

void pf_broker_publish_plan(pf_broker_t *b, request_t *r, const pf_plan_t *plan)
{
    if (!b->http || !r->plan_json)
        return;
    char *svg = NULL, err[256];
    size_t svg_len = 0;
    FILE *f = open_memstream(&svg, &svg_len);
    /* An unmapped plan has no picture (PF_EINPUT): the page then links the JSON only. */
    int drawn = f && pf_draw_mapping_svg(plan, r->c, r->g, f, err, sizeof err) == PF_OK;
    if (f && fclose(f) != 0)
        drawn = 0;
    r->has_mapping_svg = drawn;
    if (pf_http_add_plan(b->http, r->id, r->plan_json, r->plan_len, drawn ? svg : NULL,
                         svg_len) != PF_OK)
        zsys_warning("broker: out of memory keeping the plan of %s for the status page", r->id);
    free(svg);
}
