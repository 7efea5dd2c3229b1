#include "broker/intake.h"
#include "broker/access.h"
#include "broker/lanes.h"
#include "broker/peers.h"
#include "broker/publish.h"
#include "broker/requests.h"
#include "broker/worker_proto.h"
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

static void reply_status(pf_broker_t *b, peer_t *p, request_t *r)
{
    Planfarm__RequestStatus st;
    pf_publish_status(b, r, &st);
    pf_peers_send(b, p, PF_MSG_SUBMIT_REPLY, &st.base);
}

/* Past max_running, or past the client's quota: refused with a reply (false). */
static bool may_start(pf_broker_t *b, peer_t *p, const char *client)
{
    char err[256];
    int running = pf_requests_running(b, NULL);
    if (running >= b->o.max_running) {
        snprintf(err, sizeof err, "broker busy: %d requests are running; try again later",
                 running);
        pf_peers_send_error(b, p, PF_ERR, err);
        return false;
    }
    int mine = b->o.client_max_requests > 0 ? pf_requests_running(b, client) : 0;
    if (b->o.client_max_requests > 0 && mine >= b->o.client_max_requests) {
        snprintf(err, sizeof err,
                 "broker busy: %d of your requests are unfinished (the quota per client is %d); "
                 "try again later",
                 mine, b->o.client_max_requests);
        pf_peers_send_error(b, p, PF_ERR, err);
        return false;
    }
    return true;
}

/* The request and its inputs into the journal before the reply; PF_OK without a journal. */
static int journal_submit(pf_broker_t *b, const request_t *r, const submit_t *in)
{
    char err[512];
    if (!b->journal)
        return PF_OK;
    pf_journal_request_t jr = {
        .id = r->id, .key = r->key, .label = r->label, .client = r->client,
        .priority = r->priority, .submitted_s = wall_now_s(),
        .graph = in->graph, .graph_len = in->graph_len,
        .cluster = in->cluster, .cluster_len = in->cluster_len,
        .options = in->options, .options_len = in->options_len,
    };
    if (pf_journal_add(b->journal, &jr, err, sizeof err) == PF_OK)
        return PF_OK;
    journal_warn(b, err);
    return PF_ERR;
}

/* A new request for in: journaled, in the table, answered, handed to the helper thread (true),
 * or refused with a reply (false). */
static bool accept_request(pf_broker_t *b, peer_t *p, const submit_t *in, const char *key,
                   const char *client)
{
    request_t *r = pf_requests_new(b, NULL, in->label);
    if (!r) {
        pf_peers_send_error(b, p, PF_ERR, "broker: out of memory");
        return false;
    }
    snprintf(r->key, sizeof r->key, "%s", key);
    snprintf(r->client, sizeof r->client, "%s", client);
    snprintf(r->owner, sizeof r->owner, "%s", p->user);
    r->priority = in->priority;
    if (journal_submit(b, r, in) != PF_OK) {
        pf_peers_send_error(b, p, PF_ERR, "broker: cannot journal the request; not accepted");
        pf_requests_free(&r);
        return false;
    }
    pf_prep_task_t *t = pf_prep_task_new(r->id, in->graph, in->graph_len, in->cluster,
                                         in->cluster_len, in->options, in->options_len);
    if (pf_requests_insert(b, r) != PF_OK) {
        pf_prep_task_free(&t);
        pf_peers_send_error(b, p, PF_ERR, "broker: out of memory");
        return false;
    }
    pf_peer_io_info(b->o.quiet, "broker: request %s (%s): %zu + %zu bytes, preparing", r->id,
                    r->label, in->graph_len, in->cluster_len);
    reply_status(b, p, r);
    if (t)
        pf_prep_push(b->prep, t);
    else
        pf_requests_fail_unprepared(b, r, PF_ERR, "broker: out of memory"); /* may evict r */
    return true;
}

void pf_intake_submit(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len)
{
    char err[512] = "";
    submit_t in;
    if (split_submit(data, len, &in, err, sizeof err) != PF_OK) {
        pf_peers_malformed(b, p, "SUBMIT: not a valid Submit message: %s", err);
        return;
    }
    if (!in.graph || !in.cluster) {
        pf_peers_send_error(b, p, PF_EINPUT, "SUBMIT: needs a graph and a cluster");
        return;
    }
    char key[PF_JOURNAL_KEY_LEN];
    pf_journal_key(in.graph, in.graph_len, in.cluster, in.cluster_len, in.options, in.options_len,
                   key);
    request_t *same = pf_requests_find_key(b, key);
    if (same && pf_access_may_see(p, same)) { /* another's request stays another's */
        pf_peer_io_info(b->o.quiet, "broker: request %s again (same inputs and options)", same->id);
        reply_status(b, p, same);
        return;
    }
    /* the client: its CURVE key, else its connection */
    const char *client = p->user[0] ? p->user : p->key;
    if (!may_start(b, p, client))
        return;
    if (accept_request(b, p, &in, key, client))
        pf_requests_evict(b);
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
            pf_lanes_queue(b, r, rp.issued[i], &job) != PF_OK)
            pf_search_cancel(r->search, "broker: out of memory queueing a job");
    }
    free(rp.issued);
    b->replayed_answers += rp.replayed;
    pf_peer_io_info(b->o.quiet, "broker: request %s restored: %lld journaled answers replayed%s",
                    r->id, rp.replayed, rp.skipped ? " (some skipped)" : "");
}

static void prepared(pf_broker_t *b, pf_prep_task_t *t)
{
    request_t *r = pf_requests_find(b, t->id);
    if (t->prep_s > b->prep_max_s)
        b->prep_max_s = t->prep_s;
    if (!r || !r->preparing || !pf_requests_start(b, r, t))
        return;
    if (r->restored && b->journal)
        replay(b, r);
    pf_requests_advance(b, r);
}

void pf_intake_prepared(pf_broker_t *b)
{
    pf_prep_task_t *t;
    while ((t = pf_prep_take(b->prep)) != NULL) {
        if (t->kind == PF_PREP_RERUN)
            pf_worker_proto_rerun_back(b, t);
        else
            prepared(b, t);
        pf_prep_task_free(&t);
    }
}

/* ---- restart ---- */

static int restore_row(void *ctx, const pf_journal_row_t *row)
{
    pf_broker_t *b = ctx;
    if (pf_requests_find(b, row->id))
        return PF_OK;
    request_t *r = pf_requests_from_journal(b, row);
    if (!r)
        return PF_ERR;
    if (row->finished)
        return pf_requests_insert(b, r);
    pf_prep_task_t *t = pf_prep_task_new(r->id, row->graph, row->graph_len, row->cluster,
                                         row->cluster_len, row->options, row->options_len);
    if (!t) {
        pf_requests_free(&r);
        return PF_ERR;
    }
    if (pf_requests_insert(b, r) != PF_OK) {
        pf_prep_task_free(&t);
        return PF_ERR;
    }
    pf_prep_push(b->prep, t);
    b->restored++;
    return PF_OK;
}

int pf_intake_restore(pf_broker_t *b, char *err, size_t errlen)
{
    if (!b->journal)
        return PF_OK;
    return pf_journal_load(b->journal, b->o.max_finished, restore_row, b, err, errlen);
}
