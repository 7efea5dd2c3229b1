/* intake: how a request enters the broker and comes back after a restart.
 *
 *   SUBMIT   decode the envelope, pack its three inputs, key them (pf_journal_key); a request
 *            with the same key that runs or finished done is the answer (a batch run twice plans
 *            nothing twice); otherwise journal it (committed before the reply: Titanic), reply
 *            "preparing" and hand the setup to the helper thread (broker/prep.h)
 *   prepared the search exists: the blobs go to the store, a restored request gets its journaled
 *            answers back in their order, and the request runs
 *   restart  every unfinished request of the journal is prepared again; finished ones are there
 *            for STATUS and RESULT (and those evicted from memory are recalled from the journal) */
#include "broker/broker_int.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double wall_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void journal_warn(pf_broker_t *b, const char *err)
{
    b->journal_errors++;
    zsys_error("broker: %s", err);
}

static request_t *request_alloc(pf_broker_t *b, const char *id, const char *label)
{
    request_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    snprintf(r->id, sizeof r->id, "%s", id);
    snprintf(r->label, sizeof r->label, "%s", label ? label : "");
    r->last.best_objective_ms = NAN;
    if (pf_broker_request_new_seq(b, &r->seq) != PF_OK) { /* random high half of job ids */
        free(r);
        return NULL;
    }
    r->t_start = r->t_end = b->now;
    r->workers_max = pf_dispatch_workers(b->dispatch);
    return r;
}

/* Into the table and the order; on failure r is freed. */
static int request_insert(pf_broker_t *b, request_t *r)
{
    if (zhashx_insert(b->requests, r->id, r) != 0) {
        pf_broker_request_free(&r);
        return PF_ERR;
    }
    if (!zlistx_add_end(b->order, r)) {
        zhashx_delete(b->requests, r->id); /* frees r */
        return PF_ERR;
    }
    b->nrequests++;
    return PF_OK;
}

void pf_broker_journal_end(pf_broker_t *b, request_t *r)
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

void pf_broker_journal_answer(pf_broker_t *b, request_t *r, uint64_t sid, const uint8_t *data,
                              size_t len)
{
    char err[512];
    if (b->journal && pf_journal_answer(b->journal, r->id, sid, data, len, err, sizeof err) != PF_OK)
        journal_warn(b, err);
}

/* A request that ends before its search exists (bad input, cancelled while preparing). */
static void end_unprepared(pf_broker_t *b, request_t *r, int rc, const char *err)
{
    r->preparing = 0;
    r->t_end = b->now;
    r->state = r->cancelled ? PLANFARM__REQUEST_STATE__REQ_CANCELLED
                            : PLANFARM__REQUEST_STATE__REQ_FAILED;
    r->status = r->cancelled ? PF_ERR : rc;
    snprintf(r->error, sizeof r->error, "%s", r->cancelled ? "cancelled by a client" : err);
    pf_broker_journal_end(b, r);
    pf_peer_info(b->o.quiet, "broker: request %s %s: %s", r->id, pf_request_state_name(r->state),
                 r->error);
    pf_broker_requests_evict(b);
}

/* ---- SUBMIT ---- */

/* A SUBMIT's fields, as slices of the message (borrowed). */
typedef struct {
    const uint8_t *graph, *cluster, *options;
    size_t graph_len, cluster_len, options_len;
    char label[128];
    int priority;
} submit_t;

static int read_varint(const uint8_t *p, size_t len, size_t *at, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *at < len; shift += 7) {
        uint8_t byte = p[(*at)++];
        *v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80))
            return PF_OK;
    }
    return PF_ERR;
}

/* The top level of a Submit (proto/planfarm.proto) read by hand, without decoding the graph:
 * a 30,000-op graph takes the loop a tenth of a second to unpack and pack again, and the helper
 * thread decodes it anyway. The graph, cluster and options bytes are kept as sent: they are the
 * blobs workers fetch and what the key hashes. PF_EINPUT and the reason for a malformed one. */
static int split_submit(const uint8_t *p, size_t len, submit_t *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    int seen[6] = {0};
    size_t at = 0;
    while (at < len) {
        uint64_t key, n;
        if (read_varint(p, len, &at, &key) != PF_OK)
            return pf_fail(err, errlen, PF_EINPUT, "truncated field key at byte %zu", at);
        uint64_t field = key >> 3;
        int wire = (int)(key & 7);
        if (field >= 1 && field <= 5 && seen[field]++)
            return pf_fail(err, errlen, PF_EINPUT, "field %llu twice", (unsigned long long)field);
        if (wire == 0) {
            if (read_varint(p, len, &at, &n) != PF_OK)
                return pf_fail(err, errlen, PF_EINPUT, "truncated varint at byte %zu", at);
            if (field == 5)
                m->priority = (int)(int32_t)(uint32_t)n;
        } else if (wire == 2) {
            if (read_varint(p, len, &at, &n) != PF_OK || n > len - at)
                return pf_fail(err, errlen, PF_EINPUT, "field %llu runs past the message",
                               (unsigned long long)field);
            const uint8_t *v = p + at;
            at += (size_t)n;
            if (field == 1) {
                m->graph = v;
                m->graph_len = (size_t)n;
            } else if (field == 2) {
                m->cluster = v;
                m->cluster_len = (size_t)n;
            } else if (field == 3) {
                m->options = v;
                m->options_len = (size_t)n;
            } else if (field == 4) {
                size_t k = n < sizeof m->label - 1 ? (size_t)n : sizeof m->label - 1;
                memcpy(m->label, v, k);
                m->label[k] = '\0';
            }
        } else if (wire == 1 || wire == 5) {
            size_t skip = wire == 1 ? 8 : 4;
            if (skip > len - at)
                return pf_fail(err, errlen, PF_EINPUT, "truncated field %llu",
                               (unsigned long long)field);
            at += skip;
        } else {
            return pf_fail(err, errlen, PF_EINPUT, "field %llu has wire type %d",
                           (unsigned long long)field, wire);
        }
        if (field >= 1 && field <= 5 && ((field == 5) != (wire == 0)))
            return pf_fail(err, errlen, PF_EINPUT, "field %llu has wire type %d",
                           (unsigned long long)field, wire);
    }
    return PF_OK;
}

/* The request with this key that is preparing, running or done, in memory or (done) in the
 * journal; NULL when there is none. */
static request_t *find_key(pf_broker_t *b, const char *key);

static void reply_status(pf_broker_t *b, peer_t *p, request_t *r)
{
    Planfarm__RequestStatus st;
    pf_broker_request_status(b, r, &st);
    pf_broker_send(b, p, PF_MSG_SUBMIT_REPLY, &st.base);
}

void pf_broker_submit(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len)
{
    char err[512] = "", id[sizeof ((request_t *)0)->id];
    request_t *r = NULL;
    submit_t in;
    if (split_submit(data, len, &in, err, sizeof err) != PF_OK) {
        pf_broker_malformed(b, p, "SUBMIT: not a valid Submit message: %s", err);
        return;
    }
    if (!in.graph || !in.cluster) {
        pf_broker_send_error(b, p, PF_EINPUT, "SUBMIT: needs a graph and a cluster");
        return;
    }
    char key[PF_JOURNAL_KEY_LEN];
    pf_journal_key(in.graph, in.graph_len, in.cluster, in.cluster_len, in.options, in.options_len,
                   key);
    request_t *same = find_key(b, key);
    if (same && pf_broker_may_see(p, same)) { /* another's request stays another's */
        pf_peer_info(b->o.quiet, "broker: request %s again (same inputs and options)", same->id);
        reply_status(b, p, same);
        return;
    }
    int running = pf_broker_requests_running(b, NULL);
    if (running >= b->o.max_running) {
        snprintf(err, sizeof err, "broker busy: %d requests are running; try again later",
                 running);
        pf_broker_send_error(b, p, PF_ERR, err);
        return;
    }
    /* the client: its CURVE key, else its connection */
    const char *client = p->user[0] ? p->user : p->key;
    int mine = b->o.client_max_requests > 0 ? pf_broker_requests_running(b, client) : 0;
    if (b->o.client_max_requests > 0 && mine >= b->o.client_max_requests) {
        snprintf(err, sizeof err,
                 "broker busy: %d of your requests are unfinished (the quota per client is %d); "
                 "try again later",
                 mine, b->o.client_max_requests);
        pf_broker_send_error(b, p, PF_ERR, err);
        return;
    }
    if (pf_broker_request_new_id(b, id, sizeof id) != PF_OK ||
        !(r = request_alloc(b, id, in.label))) {
        pf_broker_send_error(b, p, PF_ERR, "broker: out of memory");
        return;
    }
    snprintf(r->key, sizeof r->key, "%s", key);
    snprintf(r->client, sizeof r->client, "%s", client);
    snprintf(r->owner, sizeof r->owner, "%s", p->user);
    r->priority = in.priority;
    if (b->journal) {
        pf_journal_request_t jr = {
            .id = r->id, .key = key, .label = r->label, .client = r->client,
            .priority = r->priority, .submitted_s = wall_now_s(),
            .graph = in.graph, .graph_len = in.graph_len,
            .cluster = in.cluster, .cluster_len = in.cluster_len,
            .options = in.options, .options_len = in.options_len,
        };
        if (pf_journal_add(b->journal, &jr, err, sizeof err) != PF_OK) {
            journal_warn(b, err);
            pf_broker_send_error(b, p, PF_ERR, "broker: cannot journal the request; not accepted");
            pf_broker_request_free(&r);
            return;
        }
    }
    pf_prep_task_t *t = pf_prep_task_new(r->id, in.graph, in.graph_len, in.cluster,
                                         in.cluster_len, in.options, in.options_len);
    r->preparing = 1;
    r->state = PLANFARM__REQUEST_STATE__REQ_PREPARING;
    if (request_insert(b, r) != PF_OK) {
        pf_prep_task_free(&t);
        pf_broker_send_error(b, p, PF_ERR, "broker: out of memory");
        return;
    }
    pf_peer_info(b->o.quiet, "broker: request %s (%s): %zu + %zu bytes, preparing", r->id,
                 r->label, in.graph_len, in.cluster_len);
    reply_status(b, p, r);
    if (t)
        pf_prep_push(b->prep, t);
    else
        end_unprepared(b, r, PF_ERR, "broker: out of memory"); /* may evict r */
    pf_broker_requests_evict(b);
}

/* ---- prepared ---- */

typedef struct {
    pf_broker_t *b;
    request_t *r;
    uint64_t *issued;
    size_t nissued, cap;
    long long replayed, skipped;
} replay_t;

/* Jobs the search issues during a replay are noted, not queued: most are answered further on. */
static int note_issued(replay_t *rp)
{
    uint64_t sid, ids[64];
    pf_job_t job;
    while (pf_search_next_job(rp->r->search, &sid, &job)) {
        if (pf_grow((void **)&rp->issued, &rp->cap, rp->nissued + 1, sizeof *rp->issued) != PF_OK)
            return PF_ERR;
        rp->issued[rp->nissued++] = sid;
    }
    while (pf_search_take_cancelled(rp->r->search, ids, 64) > 0)
        ;
    return PF_OK;
}

static int replay_one(void *ctx, uint64_t sid, const uint8_t *data, size_t len)
{
    replay_t *rp = ctx;
    request_t *r = rp->r;
    char err[256];
    Planfarm__JobResult *m = planfarm__job_result__unpack(NULL, len, data);
    pf_job_result_t res;
    int rc = m ? pf_job_codec_result_from_pb(m, pf_graph_nops(r->g), pf_cluster_ndevices(r->c), &res,
                                         err, sizeof err)
               : PF_EINPUT;
    if (rc == PF_OK) {
        /* the same checks as a worker's answer: a journal is input too */
        if (pf_search_check_answer(r->search, sid, &res, err, sizeof err) == PF_OK &&
            pf_search_answer(r->search, sid, &res))
            rp->replayed++;
        else
            rp->skipped++;
        pf_job_result_clear(&res);
    } else {
        rp->skipped++;
    }
    if (m)
        planfarm__job_result__free_unpacked(m, NULL);
    return note_issued(rp);
}

/* The journaled answers of a restored request, then its outstanding jobs to the dispatch core. */
static void replay(pf_broker_t *b, request_t *r)
{
    char err[512];
    replay_t rp = {.b = b, .r = r};
    if (note_issued(&rp) != PF_OK ||
        pf_journal_answers(b->journal, r->id, replay_one, &rp, err, sizeof err) != PF_OK) {
        journal_warn(b, "journal: cannot replay a request's answers; its jobs run again");
    }
    for (size_t i = 0; i < rp.nissued && r->search; i++) {
        pf_job_t job;
        if (pf_search_job(r->search, rp.issued[i], &job) &&
            pf_broker_queue_job(b, r, rp.issued[i], &job) != PF_OK)
            pf_search_cancel(r->search, "broker: out of memory queueing a job");
    }
    free(rp.issued);
    b->replayed_answers += rp.replayed;
    pf_peer_info(b->o.quiet, "broker: request %s restored: %lld journaled answers replayed%s",
                 r->id, rp.replayed, rp.skipped ? " (some skipped)" : "");
}

static void prepared(pf_broker_t *b, pf_prep_task_t *t)
{
    request_t *r = pf_broker_request_find(b, t->id);
    if (t->prep_s > b->prep_max_s)
        b->prep_max_s = t->prep_s;
    if (!r || !r->preparing)
        return;
    if (r->cancelled || t->rc != PF_OK) {
        end_unprepared(b, r, t->rc, t->err);
        return;
    }
    if (pf_blobstore_put(b->blobs, PLANFARM__BLOB_KIND__BLOB_GRAPH, &t->graph, t->graph_len,
                         &r->gref) != PF_OK ||
        pf_blobstore_put(b->blobs, PLANFARM__BLOB_KIND__BLOB_CLUSTER, &t->cluster,
                         t->cluster_len, &r->cref) != PF_OK) {
        pf_broker_request_release(b, r);
        end_unprepared(b, r, PF_ERR, "broker: out of memory");
        return;
    }
    r->g = t->g;
    r->c = t->c;
    r->search = t->search;
    t->g = NULL;
    t->c = NULL;
    t->search = NULL;
    r->preparing = 0;
    r->state = PLANFARM__REQUEST_STATE__REQ_QUEUED;
    pf_peer_info(b->o.quiet, "broker: request %s prepared in %.2f s: %d ops on %d devices", r->id,
                 t->prep_s, pf_graph_nops(r->g), pf_cluster_ndevices(r->c));
    if (r->restored && b->journal)
        replay(b, r);
    pf_broker_request_advance(b, r);
}

void pf_broker_prep_done(pf_broker_t *b)
{
    pf_prep_task_t *t;
    while ((t = pf_prep_take(b->prep)) != NULL) {
        prepared(b, t);
        pf_prep_task_free(&t);
    }
}

/* ---- restart ---- */

/* A journaled request's client: its lane, and with CURVE its owner (the key it came with). */
static void set_owner(pf_broker_t *b, request_t *r, const char *client)
{
    snprintf(r->client, sizeof r->client, "%s", client);
    snprintf(r->owner, sizeof r->owner, "%s", b->auth ? client : "");
}

static request_t *from_finished_row(pf_broker_t *b, const pf_journal_row_t *row)
{
    request_t *r = request_alloc(b, row->id, row->label);
    if (!r)
        return NULL;
    snprintf(r->key, sizeof r->key, "%s", row->key);
    set_owner(b, r, row->client);
    r->priority = row->priority;
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
    if (row->end.plan_json) {
        r->plan_json = malloc(row->end.plan_len + 1);
        if (!r->plan_json) {
            pf_broker_request_free(&r);
            return NULL;
        }
        memcpy(r->plan_json, row->end.plan_json, row->end.plan_len);
        r->plan_json[row->end.plan_len] = '\0';
        r->plan_len = row->end.plan_len;
    }
    return r;
}

static int restore_row(void *ctx, const pf_journal_row_t *row)
{
    pf_broker_t *b = ctx;
    if (pf_broker_request_find(b, row->id))
        return PF_OK;
    if (row->finished) {
        request_t *r = from_finished_row(b, row);
        return r ? request_insert(b, r) : PF_ERR;
    }
    request_t *r = request_alloc(b, row->id, row->label);
    if (!r)
        return PF_ERR;
    snprintf(r->key, sizeof r->key, "%s", row->key);
    set_owner(b, r, row->client);
    r->priority = row->priority;
    r->restored = 1;
    r->preparing = 1;
    r->state = PLANFARM__REQUEST_STATE__REQ_PREPARING;
    pf_prep_task_t *t = pf_prep_task_new(r->id, row->graph, row->graph_len, row->cluster,
                                         row->cluster_len, row->options, row->options_len);
    if (!t) {
        pf_broker_request_free(&r);
        return PF_ERR;
    }
    if (request_insert(b, r) != PF_OK) {
        pf_prep_task_free(&t);
        return PF_ERR;
    }
    pf_prep_push(b->prep, t);
    b->restored++;
    return PF_OK;
}

int pf_broker_restore(pf_broker_t *b, char *err, size_t errlen)
{
    if (!b->journal)
        return PF_OK;
    return pf_journal_load(b->journal, b->o.max_finished, restore_row, b, err, errlen);
}

typedef struct {
    pf_broker_t *b;
    request_t *r;
} recall_t;

static int recall_row(void *ctx, const pf_journal_row_t *row)
{
    recall_t *c = ctx;
    /* unfinished requests are all in memory; only finished ones are evicted */
    if (row->finished && !pf_broker_request_find(c->b, row->id))
        c->r = from_finished_row(c->b, row);
    return PF_OK;
}

request_t *pf_broker_request_recall(pf_broker_t *b, const char *id, const char *key)
{
    char err[256];
    recall_t ctx = {b, NULL};
    if (!b->journal ||
        pf_journal_find(b->journal, id, key, recall_row, &ctx, err, sizeof err) != PF_OK ||
        !ctx.r)
        return NULL;
    request_t *r = ctx.r;
    if (request_insert(b, r) != PF_OK)
        return NULL;
    pf_broker_requests_evict(b);
    return pf_broker_request_find(b, id ? id : r->id);
}

static request_t *find_key(pf_broker_t *b, const char *key)
{
    for (request_t *r = zlistx_last(b->order); r; r = zlistx_prev(b->order))
        if (!strcmp(r->key, key) &&
            (r->preparing || r->search || r->state == PLANFARM__REQUEST_STATE__REQ_DONE))
            return r;
    return pf_broker_request_recall(b, NULL, key);
}

int pf_broker_requests_running(pf_broker_t *b, const char *client)
{
    int n = 0;
    for (request_t *r = zlistx_first(b->order); r; r = zlistx_next(b->order))
        /* a request cancelled while it is prepared ends when its setup does: not running */
        n += (r->search != NULL || (r->preparing && !r->cancelled)) &&
             (!client || !strcmp(r->client, client));
    return n;
}

/* ---- jobs through the lanes ---- */

int pf_broker_queue_job(pf_broker_t *b, request_t *r, uint64_t sid, const pf_job_t *job)
{
    pf_fair_job_t j = {
        .id = ((uint64_t)r->seq << 32) | (sid & 0xffffffffu),
        .kind = job->kind,
        .timeout_s = pf_job_timeout_s(job, &b->o.limits),
        .owner = r,
        .owner_job = sid,
    };
    return pf_fair_push(b->fair, r->client, r->priority, &j);
}

void pf_broker_cancel_job(pf_broker_t *b, uint64_t job_id)
{
    if (!pf_fair_cancel(b->fair, job_id)) /* not waiting in a lane: the dispatch core has it */
        pf_dispatch_cancel(b->dispatch, job_id);
}

void pf_broker_cancel_jobs(pf_broker_t *b, request_t *r)
{
    pf_fair_cancel_owner(b->fair, r);
    pf_dispatch_cancel_owner(b->dispatch, r);
}

void pf_broker_job_left(pf_broker_t *b, uint64_t job_id)
{
    void *owner;
    uint64_t sid;
    if (!pf_dispatch_job_owner(b->dispatch, job_id, &owner, &sid))
        pf_fair_done(b->fair, job_id);
}
