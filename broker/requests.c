#include "broker/broker_int.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A job's dispatch id: the request's number in the high half, the search's job id below. */
static uint64_t job_id_of(const request_t *r, uint64_t search_id)
{
    return ((uint64_t)r->seq << 32) | (search_id & 0xffffffffu);
}

void pf_broker_request_free(request_t **rp)
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

void pf_broker_request_release(pf_broker_t *b, request_t *r)
{
    pf_blobstore_release(b->blobs, &r->gref);
    pf_blobstore_release(b->blobs, &r->cref);
    memset(&r->gref, 0, sizeof r->gref);
    memset(&r->cref, 0, sizeof r->cref);
    pf_graph_destroy(&r->g);
    pf_cluster_destroy(&r->c);
}

/* The request is over: keep its plan text (or its error) and its counters, free the rest. */
static void finish(pf_broker_t *b, request_t *r)
{
    char err[512] = "";
    pf_plan_t *plan = NULL;
    pf_search_get_status(r->search, &r->last);
    int rc = pf_search_result(r->search, &plan, err, sizeof err);
    r->t_end = b->now;
    if (rc == PF_OK) {
        plan->search.present = 1;
        plan->search.wall_s = r->t_end - r->t_start;
        plan->search.workers = r->workers_max;
        r->last.best_objective_ms = plan->objective_ms; /* the plan's, once there is one */
        FILE *f = open_memstream(&r->plan_json, &r->plan_len);
        if (!f) {
            rc = pf_fail(err, sizeof err, PF_ERR, "out of memory writing the plan");
        } else {
            rc = pf_plan_write(plan, r->g, r->c, f, err, sizeof err);
            if (fclose(f) != 0 && rc == PF_OK)
                rc = pf_fail(err, sizeof err, PF_ERR, "out of memory writing the plan");
        }
        if (rc == PF_OK)
            pf_broker_publish_plan(b, r, plan);
        pf_plan_destroy(&plan);
    }
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
    pf_broker_cancel_jobs(b, r);
    pf_search_destroy(&r->search);
    pf_broker_journal_end(b, r);
    pf_broker_request_release(b, r);
    pf_peer_info(b->o.quiet, "broker: request %s %s after %.2f s, %lld jobs%s%s", r->id, pf_request_state_name(r->state),
              r->t_end - r->t_start, r->last.jobs_issued, r->error[0] ? ": " : "", r->error);
}

void pf_broker_request_advance(pf_broker_t *b, request_t *r)
{
    if (!r->search)
        return;
    uint64_t ids[64];
    int n;
    while ((n = pf_search_take_cancelled(r->search, ids, 64)) > 0)
        for (int i = 0; i < n; i++)
            pf_broker_cancel_job(b, job_id_of(r, ids[i]));
    uint64_t sid;
    pf_job_t job;
    while (r->search && pf_search_next_job(r->search, &sid, &job)) {
        if (pf_broker_queue_job(b, r, sid, &job) != PF_OK) {
            pf_search_cancel(r->search, "broker: out of memory queueing a job");
            break;
        }
    }
    if (r->search && pf_search_done(r->search))
        finish(b, r);
}

void pf_broker_request_status(pf_broker_t *b, request_t *r, Planfarm__RequestStatus *m)
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
    m->phase = (char *)(r->search ? pf_search_phase_name(st.phase) : pf_request_state_name(r->state));
    int live = r->search || r->preparing;
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

request_t *pf_broker_request_find(pf_broker_t *b, const char *id)
{
    return id ? zhashx_lookup(b->requests, id) : NULL;
}

void pf_broker_requests_evict(pf_broker_t *b)
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

int pf_broker_request_new_id(pf_broker_t *b, char *out, size_t len)
{
    char err[128];
    /* 128 bits from the CSPRNG: an id cannot be guessed, so it names a request to its owner
     * only (and to admins); a clash is as likely as guessing one */
    for (int tries = 0; tries < 4; tries++) {
        if (pf_random_hex("r", 16, out, len, err, sizeof err) != PF_OK) {
            zsys_error("broker: %s", err);
            return PF_ERR;
        }
        if (!pf_broker_request_find(b, out))
            return PF_OK;
    }
    return PF_ERR;
}

/* Random, not counted up: job ids are not guessable from one another's request, and a worker
 * that outlived a broker sends the answers it finished meanwhile to the next broker on that
 * endpoint, which must not take them for its own jobs. */
int pf_broker_request_new_seq(pf_broker_t *b, uint32_t *seq)
{
    for (int tries = 0; tries < 100; tries++) {
        if (pf_random_u32(seq) != PF_OK)
            return PF_ERR;
        int used = 0;
        for (request_t *r = zlistx_first(b->order); r && !used; r = zlistx_next(b->order))
            used = r->seq == *seq; /* finished ones too: workers may hold cancelled copies */
        if (!used)
            return PF_OK;
    }
    return PF_ERR;
}


void pf_broker_request_item_free(void **item)
{
    request_t *r = *item;
    pf_broker_request_free(&r);
    *item = NULL;
}


void pf_broker_on_poisoned(void *ctx, void *owner, uint64_t owner_job, uint64_t job_id,
                        const char *error)
{
    pf_broker_t *b = ctx;
    request_t *r = owner;
    zsys_warning("broker: %s", error);
    pf_fair_done(b->fair, job_id);
    if (!r) { /* a benchmark job */
        if (b->noop_left > 0)
            b->noop_left--;
        return;
    }
    if (!r->search)
        return;
    pf_search_job_failed(r->search, owner_job, error);
    pf_broker_request_advance(b, r);
}

