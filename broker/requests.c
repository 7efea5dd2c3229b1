#include "broker/requests.h"
#include "broker/lanes.h"
#include "broker/publish.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the table ---- */

static bool seq_used(pf_broker_t *b, uint32_t seq)
{
    for (request_t *r = zlistx_first(b->order); r; r = zlistx_next(b->order))
        if (r->seq == seq) /* finished ones too: workers may hold cancelled copies */
            return true;
    return false;
}

/* Random, not counted up: job ids are not guessable from one another's request, and a worker
 * that outlived a broker sends the answers it finished meanwhile to the next broker on that
 * endpoint, which must not take them for its own jobs. */
static int new_seq(pf_broker_t *b, uint32_t *seq)
{
    for (int tries = 0; tries < 100; tries++) {
        if (pf_auth_random_u32(seq) != PF_OK)
            return PF_ERR;
        if (!seq_used(b, *seq))
            return PF_OK;
    }
    return PF_ERR;
}

static int new_id(pf_broker_t *b, char *out, size_t len)
{
    char err[128];
    /* 128 bits from the CSPRNG: an id cannot be guessed, so it names a request to its owner
     * only (and to admins); a clash is as likely as guessing one */
    for (int tries = 0; tries < 4; tries++) {
        if (pf_auth_random_hex("r", 16, out, len, err, sizeof err) != PF_OK) {
            zsys_error("broker: %s", err);
            return PF_ERR;
        }
        if (!pf_requests_find(b, out))
            return PF_OK;
    }
    return PF_ERR;
}

request_t *pf_requests_new(pf_broker_t *b, const char *id, const char *label)
{
    char fresh[sizeof ((request_t *)0)->id];
    if (!id) {
        if (new_id(b, fresh, sizeof fresh) != PF_OK)
            return NULL;
        id = fresh;
    }
    request_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    snprintf(r->id, sizeof r->id, "%s", id);
    snprintf(r->label, sizeof r->label, "%s", label ? label : "");
    r->last.best_objective_ms = NAN;
    if (new_seq(b, &r->seq) != PF_OK) { /* random high half of job ids */
        free(r);
        return NULL;
    }
    r->t_start = r->t_end = b->now;
    r->workers_max = pf_dispatch_workers(b->dispatch);
    r->preparing = true;
    r->state = PLANFARM__REQUEST_STATE__REQ_PREPARING;
    return r;
}

static int copy_plan(request_t *r, const char *json, size_t len)
{
    if (!json)
        return PF_OK;
    if (!(r->plan_json = malloc(len + 1)))
        return PF_ERR;
    memcpy(r->plan_json, json, len);
    r->plan_json[len] = '\0';
    r->plan_len = len;
    return PF_OK;
}

request_t *pf_requests_from_journal(pf_broker_t *b, const pf_journal_row_t *row)
{
    request_t *r = pf_requests_new(b, row->id, row->label);
    if (!r)
        return NULL;
    snprintf(r->key, sizeof r->key, "%s", row->key);
    snprintf(r->client, sizeof r->client, "%s", row->client);
    snprintf(r->owner, sizeof r->owner, "%s", b->auth ? row->client : "");
    r->priority = row->priority;
    if (!row->finished) { /* prepared again; its journaled answers are replayed then */
        r->restored = true;
        return r;
    }
    r->preparing = false;
    r->state = (Planfarm__RequestState)row->end.state;
    r->status = row->end.status;
    snprintf(r->error, sizeof r->error, "%s", row->end.error ? row->end.error : "");
    r->t_start = 0;
    r->t_end = row->end.wall_s;
    r->last.phase = r->state == PLANFARM__REQUEST_STATE__REQ_DONE ? PF_PHASE_DONE
                                                                   : PF_PHASE_FAILED;
    r->last.jobs_issued = row->end.jobs_issued;
    r->last.jobs_answered = row->end.jobs_answered;
    r->last.best_objective_ms = row->end.best_objective_ms;
    if (copy_plan(r, row->end.plan_json, row->end.plan_len) != PF_OK)
        pf_requests_free(&r);
    return r;
}

void pf_requests_free(request_t **rp)
{
    request_t *r = *rp;
    if (!r)
        return;
    pf_search_destroy(&r->search);
    pf_graph_destroy(&r->g);
    pf_cluster_destroy(&r->c);
    free(r->plan_json);
    free(r);
    *rp = NULL;
}

void pf_requests_item_free(void **item)
{
    request_t *r = *item;
    pf_requests_free(&r);
    *item = NULL;
}

int pf_requests_insert(pf_broker_t *b, request_t *r)
{
    if (zhashx_insert(b->requests, r->id, r) != 0) {
        pf_requests_free(&r);
        return PF_ERR;
    }
    if (!zlistx_add_end(b->order, r)) {
        zhashx_delete(b->requests, r->id); /* frees r */
        return PF_ERR;
    }
    b->nrequests++;
    return PF_OK;
}

request_t *pf_requests_find(pf_broker_t *b, const char *id)
{
    return id ? zhashx_lookup(b->requests, id) : NULL;
}

request_t *pf_requests_find_key(pf_broker_t *b, const char *key)
{
    for (request_t *r = zlistx_last(b->order); r; r = zlistx_prev(b->order))
        if (!strcmp(r->key, key) &&
            (r->preparing || r->search || r->state == PLANFARM__REQUEST_STATE__REQ_DONE))
            return r;
    return pf_requests_recall(b, NULL, key);
}

typedef struct {
    pf_broker_t *b;
    request_t *r;
} recall_t;

static int recall_row(void *ctx, const pf_journal_row_t *row)
{
    recall_t *c = ctx;
    /* unfinished requests are all in memory; only finished ones are evicted */
    if (row->finished && !pf_requests_find(c->b, row->id))
        c->r = pf_requests_from_journal(c->b, row);
    return PF_OK;
}

request_t *pf_requests_recall(pf_broker_t *b, const char *id, const char *key)
{
    char err[256];
    recall_t ctx = {b, NULL};
    if (!b->journal ||
        pf_journal_find(b->journal, id, key, recall_row, &ctx, err, sizeof err) != PF_OK ||
        !ctx.r)
        return NULL;
    request_t *r = ctx.r;
    if (pf_requests_insert(b, r) != PF_OK)
        return NULL;
    pf_requests_evict(b);
    return pf_requests_find(b, id ? id : r->id);
}

int pf_requests_running(pf_broker_t *b, const char *client)
{
    int n = 0;
    for (request_t *r = zlistx_first(b->order); r; r = zlistx_next(b->order))
        /* a request cancelled while it is prepared ends when its setup does: not running */
        n += (r->search != NULL || (r->preparing && !r->cancelled)) &&
             (!client || !strcmp(r->client, client));
    return n;
}

void pf_requests_evict(pf_broker_t *b)
{
    size_t finished = 0;
    for (request_t *r = zlistx_first(b->order); r; r = zlistx_next(b->order))
        finished += r->search == NULL && !r->preparing;
    void *h = zlistx_first(b->order) ? zlistx_cursor(b->order) : NULL;
    while (h && finished > (size_t)b->o.max_finished) {
        request_t *r = zlistx_handle_item(h);
        void *next = zlistx_next(b->order) ? zlistx_cursor(b->order) : NULL;
        if (!r->search && !r->preparing) {
            zlistx_delete(b->order, h);
            zhashx_delete(b->requests, r->id); /* the table's destructor frees it */
            finished--;
        }
        h = next;
    }
}

/* ---- its journal ---- */

static void journal_warn(pf_broker_t *b, const char *err)
{
    b->journal_errors++;
    zsys_error("broker: %s", err);
}

static void journal_end(pf_broker_t *b, request_t *r)
{
    if (!b->journal)
        return;
    char err[512];
    pf_journal_end_t e = {
        .state = r->state,
        .status = r->status,
        .error = r->error,
        .plan_json = r->plan_json,
        .plan_len = r->plan_len,
        .wall_s = r->t_end - r->t_start,
        .best_objective_ms = r->last.best_objective_ms,
        .jobs_issued = r->last.jobs_issued,
        .jobs_answered = r->last.jobs_answered,
    };
    if (pf_journal_end(b->journal, r->id, &e, err, sizeof err) != PF_OK)
        journal_warn(b, err);
}

static void journal_answer(pf_broker_t *b, request_t *r, uint64_t sid, const uint8_t *data,
                           size_t len)
{
    char err[512];
    if (b->journal &&
        pf_journal_answer(b->journal, r->id, sid, data, len, err, sizeof err) != PF_OK)
        journal_warn(b, err);
}

/* ---- its life ---- */

/* Blobs, graph and cluster of a request that no longer runs; safe to call twice. */
static void release(pf_broker_t *b, request_t *r)
{
    pf_blobstore_release(b->blobs, &r->gref);
    pf_blobstore_release(b->blobs, &r->cref);
    memset(&r->gref, 0, sizeof r->gref);
    memset(&r->cref, 0, sizeof r->cref);
    pf_graph_destroy(&r->g);
    pf_cluster_destroy(&r->c);
}

void pf_requests_fail_unprepared(pf_broker_t *b, request_t *r, int rc, const char *err)
{
    r->preparing = false;
    r->t_end = b->now;
    r->state = r->cancelled ? PLANFARM__REQUEST_STATE__REQ_CANCELLED
                            : PLANFARM__REQUEST_STATE__REQ_FAILED;
    r->status = r->cancelled ? PF_ERR : rc;
    snprintf(r->error, sizeof r->error, "%s", r->cancelled ? "cancelled by a client" : err);
    journal_end(b, r);
    pf_peer_io_info(b->o.quiet, "broker: request %s %s: %s", r->id,
                    pf_wire_request_state_name(r->state), r->error);
    pf_requests_evict(b);
}

bool pf_requests_start(pf_broker_t *b, request_t *r, pf_prep_task_t *t)
{
    if (r->cancelled || t->rc != PF_OK) {
        pf_requests_fail_unprepared(b, r, t->rc, t->err);
        return false;
    }
    if (pf_blobstore_put(b->blobs, PLANFARM__BLOB_KIND__BLOB_GRAPH, &t->graph, t->graph_len,
                         &r->gref) != PF_OK ||
        pf_blobstore_put(b->blobs, PLANFARM__BLOB_KIND__BLOB_CLUSTER, &t->cluster,
                         t->cluster_len, &r->cref) != PF_OK) {
        release(b, r);
        pf_requests_fail_unprepared(b, r, PF_ERR, "broker: out of memory");
        return false;
    }
    r->g = t->g;
    r->c = t->c;
    r->search = t->search;
    t->g = NULL;
    t->c = NULL;
    t->search = NULL;
    r->preparing = false;
    r->state = PLANFARM__REQUEST_STATE__REQ_QUEUED;
    pf_peer_io_info(b->o.quiet, "broker: request %s prepared in %.2f s: %d ops on %d devices",
                    r->id, t->prep_s, pf_graph_nops(r->g), pf_cluster_ndevices(r->c));
    return true;
}

/* The plan of a search that is done, as JSON in r (and to the HTTP face). */
static int write_plan(pf_broker_t *b, request_t *r, char *err, size_t errlen)
{
    pf_plan_t *plan = NULL;
    int rc = pf_search_result(r->search, &plan, err, errlen);
    if (rc != PF_OK)
        return rc;
    plan->search.present = 1;
    plan->search.wall_s = r->t_end - r->t_start;
    plan->search.workers = r->workers_max;
    r->last.best_objective_ms = plan->objective_ms; /* the plan's, once there is one */
    FILE *f = open_memstream(&r->plan_json, &r->plan_len);
    if (!f) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory writing the plan");
    } else {
        rc = pf_plan_write(plan, r->g, r->c, f, err, errlen);
        if (fclose(f) != 0 && rc == PF_OK)
            rc = pf_fail(err, errlen, PF_ERR, "out of memory writing the plan");
    }
    if (rc == PF_OK)
        pf_publish_plan(b, r, plan);
    pf_plan_destroy(&plan);
    return rc;
}

/* The request is over: keep its plan text (or its error) and its counters, free the rest. */
static void finish(pf_broker_t *b, request_t *r)
{
    char err[512] = "";
    pf_search_get_status(r->search, &r->last);
    r->t_end = b->now;
    int rc = write_plan(b, r, err, sizeof err);
    if (rc == PF_OK) {
        r->state = PLANFARM__REQUEST_STATE__REQ_DONE;
    } else {
        free(r->plan_json);
        r->plan_json = NULL;
        r->state = r->cancelled ? PLANFARM__REQUEST_STATE__REQ_CANCELLED
                                : PLANFARM__REQUEST_STATE__REQ_FAILED;
        r->status = rc;
        snprintf(r->error, sizeof r->error, "%s", err);
    }
    pf_lanes_cancel_owner(b, r);
    pf_search_destroy(&r->search);
    journal_end(b, r);
    release(b, r);
    pf_peer_io_info(b->o.quiet, "broker: request %s %s after %.2f s, %lld jobs%s%s", r->id,
                    pf_wire_request_state_name(r->state), r->t_end - r->t_start,
                    r->last.jobs_issued, r->error[0] ? ": " : "", r->error);
}

void pf_requests_advance(pf_broker_t *b, request_t *r)
{
    if (!r->search)
        return;
    uint64_t ids[64];
    int n;
    while ((n = pf_search_take_cancelled(r->search, ids, 64)) > 0)
        for (int i = 0; i < n; i++)
            pf_lanes_cancel(b, pf_lanes_job_id(r, ids[i]));
    uint64_t sid;
    pf_job_t job;
    while (r->search && pf_search_next_job(r->search, &sid, &job)) {
        if (pf_lanes_queue(b, r, sid, &job) != PF_OK) {
            pf_search_cancel(r->search, "broker: out of memory queueing a job");
            break;
        }
    }
    if (r->search && pf_search_done(r->search) && r->reruns == 0)
        finish(b, r);
}

bool pf_requests_job_out(request_t *r, uint64_t sid, pf_job_t *job)
{
    if (!r->search || !pf_search_job(r->search, sid, job))
        return false;
    r->state = PLANFARM__REQUEST_STATE__REQ_RUNNING; /* queued until a job goes out */
    return true;
}

bool pf_requests_wants(const request_t *r, uint64_t sid)
{
    pf_job_t job;
    return r->search && pf_search_job(r->search, sid, &job);
}

void pf_requests_answer(pf_broker_t *b, request_t *r, uint64_t sid, const pf_job_result_t *res,
                        const uint8_t *data, size_t len)
{
    if (pf_search_answer(r->search, sid, res)) /* in the order used: replayed so */
        journal_answer(b, r, sid, data, len);
    pf_requests_advance(b, r);
}

void pf_requests_job_poisoned(pf_broker_t *b, request_t *r, uint64_t sid, const char *error)
{
    if (!r->search)
        return;
    pf_search_job_failed(r->search, sid, error);
    pf_requests_advance(b, r);
}

void pf_requests_cancel(pf_broker_t *b, request_t *r)
{
    if (r->preparing) /* ends when the helper thread hands it back */
        r->cancelled = true;
    if (r->search) {
        r->cancelled = true;
        pf_search_cancel(r->search, "cancelled by a client");
        pf_requests_advance(b, r);
    }
}

void pf_requests_note_workers(pf_broker_t *b, int live)
{
    for (request_t *r = zlistx_first(b->order); r; r = zlistx_next(b->order))
        if ((r->search || r->preparing) && live > r->workers_max)
            r->workers_max = live;
}
