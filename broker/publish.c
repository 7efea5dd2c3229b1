#include "broker/publish.h"
#include "planner/sim/draw.h"
#include "planner/core/util.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void pf_publish_status(pf_broker_t *b, request_t *r, Planfarm__RequestStatus *m)
{
    planfarm__request_status__init(m);
    pf_search_status_t st = r->last;
    long long queued = 0, running = 0;
    if (r->search) {
        pf_search_get_status(r->search, &st);
        pf_dispatch_owner_counts(b->dispatch, r, &queued, &running);
        queued += pf_fair_owner_queued(b->fair, r); /* waiting for its client's turn */
    }
    m->request_id = r->id;
    m->state = r->state;
    m->phase =
        (char *)(r->search ? pf_search_phase_name(st.phase) : pf_wire_request_state_name(r->state));
    bool live = r->search || r->preparing;
    m->jobs_issued = st.jobs_issued;
    m->jobs_answered = st.jobs_answered;
    m->jobs_outstanding = st.jobs_outstanding;
    m->jobs_queued = queued;
    m->best_objective_ms = st.best_objective_ms;
    m->status = r->status;
    m->error = r->error;
    m->label = r->label;
    m->wall_s = (live ? b->now : r->t_end) - r->t_start;
    m->workers = (uint32_t)pf_dispatch_workers(b->dispatch);
}

static void collect(pf_broker_t *b, const pf_broker_stats_t *st, int agents, pf_metrics_t *m)
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
    pf_dispatch_stats_t ds;
    pf_dispatch_get_stats(b->dispatch, &ds);
    m->dispatched = ds.dispatched;
    m->requeued = ds.requeued;
    m->poisoned = ds.poisoned;
    m->workers = ds.workers;
    m->agents = agents;
    m->journal_bytes = 0;
    struct stat jst; /* the database file (its WAL is checkpointed into it) */
    if (b->journal && b->o.journal_path && stat(b->o.journal_path, &jst) == 0)
        m->journal_bytes = (double)jst.st_size;
    m->msgs_in = st->msgs_in;
    m->msgs_out = st->msgs_out;
    m->malformed = st->malformed;
    m->handshakes_refused = pf_auth_refused(b->auth);
    m->busy_s = st->busy_s;
    m->uptime_s = st->wall_s;
}

static char *render_metrics(pf_broker_t *b, const pf_broker_stats_t *st, int agents)
{
    pf_metrics_t m;
    collect(b, st, agents, &m);
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
static char *render_status(pf_broker_t *b, const pf_broker_stats_t *bs, int agents,
                           const char **ids, size_t *nids)
{
    json_t *list = json_array(), *root = json_object();
    char *text = NULL;
    *nids = 0;
    if (!list || !root)
        goto done;
    for (request_t *r = zlistx_first(b->order); r; r = zlistx_next(b->order)) {
        Planfarm__RequestStatus st;
        pf_publish_status(b, r, &st);
        int has_plan = r->plan_json != NULL;
        if (has_plan)
            ids[(*nids)++] = r->id;
        json_t *o = json_pack(
            "{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:o, s:f, s:s, s:o, s:o}", "id", r->id,
            "owner", r->owner, "label",
            r->label, "state", pf_wire_request_state_name(r->state), "phase", st.phase,
            "jobs_issued", (json_int_t)st.jobs_issued, "jobs_answered",
            (json_int_t)st.jobs_answered, "jobs_queued", (json_int_t)st.jobs_queued,
            "best_objective_ms",
            isfinite(st.best_objective_ms) ? json_real(st.best_objective_ms) : json_null(),
            "wall_s", st.wall_s, "error", r->error, "plan",
            has_plan ? url_or_null("/api/plan/%s", r->id) : json_null(), "mapping_svg",
            has_plan && r->has_mapping_svg ? url_or_null("/api/plan/%s/mapping.svg", r->id)
                                           : json_null());
        if (!o || json_array_append_new(list, o) != 0)
            goto done;
    }
    if (json_object_set_new(root, "workers", json_integer(bs->workers)) ||
        json_object_set_new(root, "agents", json_integer(agents)) ||
        json_object_set_new(root, "uptime_s", json_real(bs->wall_s)) ||
        json_object_set(root, "requests", list))
        goto done;
    text = json_dumps(root, JSON_COMPACT);
done:
    json_decref(list);
    json_decref(root);
    return text;
}

void pf_publish_pages(pf_broker_t *b, const pf_broker_stats_t *st, int agents)
{
    if (!b->http)
        return;
    size_t n = zlistx_size(b->order), nids = 0;
    const char **ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        zsys_warning("broker: out of memory publishing the status page");
        return;
    }
    pf_http_publish(b->http, render_metrics(b, st, agents),
                    render_status(b, st, agents, ids, &nids));
    pf_http_keep_plans(b->http, ids, nids);
    free(ids);
}

void pf_publish_plan(pf_broker_t *b, request_t *r, const pf_plan_t *plan)
{
    if (!b->http || !r->plan_json)
        return;
    char *svg = NULL, err[256];
    size_t svg_len = 0;
    FILE *f = open_memstream(&svg, &svg_len);
    /* An unmapped plan has no picture (PF_EINPUT): the page then links the JSON only. */
    bool drawn = f && pf_draw_mapping_svg(plan, r->c, r->g, f, err, sizeof err) == PF_OK;
    if (f && fclose(f) != 0)
        drawn = false;
    r->has_mapping_svg = drawn;
    if (pf_http_add_plan(b->http, r->id, r->owner, r->plan_json, r->plan_len, drawn ? svg : NULL,
                         svg_len) != PF_OK)
        zsys_warning("broker: out of memory keeping the plan of %s for the status page", r->id);
    free(svg);
}
