/* journal: the SQLite store round trip (requests, answers in order, ends, keys, expiry, a file
 * reopened), the claim restarts rest on (a fresh search fed the journaled answers in their order
 * issues the same job ids and ends with the same plan, from any point), and the broker actor
 * restarted on its journal. */
#include "broker/broker.h"
#include "client/client.h"
#include "broker/journal.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/core/rng.h"
#include "planner/search/search.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"
#include "proto/job_codec.h"
#include "tests/testutil.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *journal_path(const char *name)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", pf_test_tmpdir(), name);
    return path;
}

typedef struct {
    int n, finished;
    char ids[8][64];
    size_t graph_len;
    char first_graph[16];
    char plan[64];
    double best_ms;
} seen_t;

static int collect(void *ctx, const pf_journal_row_t *row)
{
    seen_t *s = ctx;
    if (s->n < 8)
        snprintf(s->ids[s->n], sizeof s->ids[0], "%s", row->id);
    s->n++;
    if (row->finished) {
        s->finished++;
        snprintf(s->plan, sizeof s->plan, "%.*s", (int)row->end.plan_len,
                 row->end.plan_json ? row->end.plan_json : "");
        s->best_ms = row->end.best_objective_ms;
    } else {
        s->graph_len = row->graph_len;
        snprintf(s->first_graph, sizeof s->first_graph, "%.*s", (int)row->graph_len,
                 (const char *)row->graph);
    }
    return PF_OK;
}

typedef struct {
    int n;
    uint64_t jobs[8];
    char text[8][8];
} answers_t;

static int collect_answer(void *ctx, uint64_t job, const uint8_t *res, size_t len)
{
    answers_t *a = ctx;
    if (a->n < 8) {
        a->jobs[a->n] = job;
        snprintf(a->text[a->n], sizeof a->text[0], "%.*s", (int)len, (const char *)res);
    }
    a->n++;
    return PF_OK;
}

/* Two requests; answers of the first in the order 7, 3, 9; the second ends with a plan; the file
 * is closed and opened again: the first comes back unfinished with its bytes and its answers in
 * that order, the second finished with its plan, and only the second expires. */
static void test_store_round_trip(void)
{
    char err[512];
    const char *path = journal_path("nested/dir/j.db"); /* its directories are made */
    pf_journal_t *j = pf_journal_open(path, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    char k1[PF_JOURNAL_KEY_LEN], k2[PF_JOURNAL_KEY_LEN];
    pf_journal_key((const uint8_t *)"graph", 5, (const uint8_t *)"cl", 2, NULL, 0, k1);
    /* the lengths are hashed too: "grap" + "hcl" is another key than "graph" + "cl" */
    pf_journal_key((const uint8_t *)"grap", 4, (const uint8_t *)"hcl", 3, NULL, 0, k2);
    CU_ASSERT_EQUAL(strlen(k1), 40);
    CU_ASSERT(strcmp(k1, k2) != 0);
    pf_journal_request_t r1 = {.id = "ra", .key = k1, .label = "one", .submitted_s = 100,
                               .graph = (const uint8_t *)"graph", .graph_len = 5,
                               .cluster = (const uint8_t *)"cl", .cluster_len = 2};
    pf_journal_request_t r2 = r1;
    r2.id = "rb";
    r2.key = k2;
    r2.submitted_s = 1e9;
    CU_ASSERT_EQUAL(pf_journal_add(j, &r1, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_journal_add(j, &r2, err, sizeof err), PF_OK);
    CU_ASSERT_NOT_EQUAL(pf_journal_add(j, &r1, err, sizeof err), PF_OK); /* ids are unique */
    const uint64_t order[3] = {7, 3, 9};
    for (int i = 0; i < 3; i++) {
        char res[4];
        snprintf(res, sizeof res, "a%d", (int)order[i]);
        CU_ASSERT_EQUAL(pf_journal_answer(j, "ra", order[i], (const uint8_t *)res, 2, err,
                                          sizeof err),
                        PF_OK);
    }
    CU_ASSERT_EQUAL(pf_journal_answer(j, "rb", 1, (const uint8_t *)"x", 1, err, sizeof err),
                    PF_OK);
    pf_journal_end_t e = {.state = 2, .plan_json = "{\"plan\":1}", .plan_len = 10,
                          .best_objective_ms = 12.5, .jobs_issued = 4, .jobs_answered = 3};
    CU_ASSERT_EQUAL(pf_journal_end(j, "rb", &e, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_journal_commit(j, err, sizeof err), PF_OK);
    pf_journal_close(&j);
    CU_ASSERT_PTR_NULL(j);
    pf_journal_close(&j); /* idempotent */

    j = pf_journal_open(path, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    seen_t s = {0};
    CU_ASSERT_EQUAL(pf_journal_load(j, 10, collect, &s, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(s.n, 2);
    CU_ASSERT_EQUAL(s.finished, 1);
    CU_ASSERT_STRING_EQUAL(s.ids[0], "ra"); /* oldest first */
    CU_ASSERT_STRING_EQUAL(s.ids[1], "rb");
    CU_ASSERT_EQUAL(s.graph_len, 5);
    CU_ASSERT_STRING_EQUAL(s.first_graph, "graph");
    CU_ASSERT_STRING_EQUAL(s.plan, "{\"plan\":1}");
    CU_ASSERT_EQUAL(s.best_ms, 12.5);
    answers_t a = {0};
    CU_ASSERT_EQUAL(pf_journal_answers(j, "ra", collect_answer, &a, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(a.n, 3);
    for (int i = 0; i < 3 && i < a.n; i++)
        CU_ASSERT_EQUAL(a.jobs[i], order[i]);
    CU_ASSERT_STRING_EQUAL(a.text[0], "a7");
    answers_t none = {0}; /* a finished request's answers are gone */
    CU_ASSERT_EQUAL(pf_journal_answers(j, "rb", collect_answer, &none, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(none.n, 0);
    /* max_finished = 0: the unfinished one only */
    seen_t s0 = {0};
    CU_ASSERT_EQUAL(pf_journal_load(j, 0, collect, &s0, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(s0.n, 1);
    /* by key: only a request that finished done */
    seen_t byk = {0};
    CU_ASSERT_EQUAL(pf_journal_find(j, NULL, k2, collect, &byk, err, sizeof err), PF_OK);
    CU_ASSERT_STRING_EQUAL(byk.ids[0], "rb");
    CU_ASSERT_EQUAL(pf_journal_find(j, NULL, k1, collect, &byk, err, sizeof err), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_journal_find(j, "nope", NULL, collect, &byk, err, sizeof err), PF_EINPUT);
    long long all, unfinished, removed;
    CU_ASSERT_EQUAL(pf_journal_count(j, &all, &unfinished, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(all, 2);
    CU_ASSERT_EQUAL(unfinished, 1);
    /* expiry takes finished requests submitted before the bound: rb (1e9 < 2e9), never ra */
    CU_ASSERT_EQUAL(pf_journal_expire(j, 2e9, &removed, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(removed, 1);
    CU_ASSERT_EQUAL(pf_journal_compact(j, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_journal_count(j, &all, &unfinished, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(all, 1);
    pf_journal_close(&j);

    /* a file that is not a database is refused with its name */
    char *bad = pf_test_write("notadb.db", "this is not SQLite, it is text long enough to see");
    j = pf_journal_open(bad, err, sizeof err);
    CU_ASSERT_PTR_NULL(j);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "notadb.db"));
    pf_journal_close(&j);
}

static void test_default_path(void)
{
    char p[256];
    CU_ASSERT_EQUAL(pf_journal_default_path(p, sizeof p, "/xdg", "/home/u"), PF_OK);
    CU_ASSERT_STRING_EQUAL(p, "/xdg/planfarm/journal.db");
    CU_ASSERT_EQUAL(pf_journal_default_path(p, sizeof p, NULL, "/home/u"), PF_OK);
    CU_ASSERT_STRING_EQUAL(p, "/home/u/.local/state/planfarm/journal.db");
    /* the XDG spec ignores a relative path */
    CU_ASSERT_EQUAL(pf_journal_default_path(p, sizeof p, "rel", "/home/u"), PF_OK);
    CU_ASSERT_STRING_EQUAL(p, "/home/u/.local/state/planfarm/journal.db");
    CU_ASSERT_EQUAL(pf_journal_default_path(p, sizeof p, NULL, NULL), PF_ERR);
}

/* ---- replay ---- */

typedef struct {
    uint64_t sid;
    uint8_t *bytes; /* packed JobResult, as a worker sends it and the journal keeps it */
    size_t len;
} rec_t;

typedef struct {
    uint64_t *issued;
    size_t nissued, cap;
} ids_t;

static void drain(pf_search_t *s, ids_t *ids, pf_job_t *jobs, size_t jobs_cap)
{
    uint64_t sid, gone[64];
    pf_job_t job;
    while (pf_search_next_job(s, &sid, &job)) {
        CU_ASSERT_EQUAL_FATAL(pf_grow((void **)&ids->issued, &ids->cap, ids->nissued + 1,
                                      sizeof *ids->issued),
                              PF_OK);
        ids->issued[ids->nissued++] = sid;
        if (jobs && sid < jobs_cap)
            jobs[sid] = job;
    }
    while (pf_search_take_cancelled(s, gone, 64) > 0)
        ;
}

static int decode_answer(const pf_search_t *s, const pf_graph_t *g, const pf_cluster_t *c,
                         const rec_t *r, pf_job_result_t *res)
{
    char err[256];
    Planfarm__JobResult *m = planfarm__job_result__unpack(NULL, r->len, r->bytes);
    if (!m)
        return PF_ERR;
    int rc = pf_job_codec_result_from_pb(m, pf_graph_nops(g), pf_cluster_ndevices(c), res, err,
                                     sizeof err);
    planfarm__job_result__free_unpacked(m, NULL);
    if (rc == PF_OK && pf_search_check_answer(s, r->sid, res, err, sizeof err) != PF_OK) {
        pf_job_result_clear(res);
        rc = PF_ERR;
    }
    return rc;
}

static char *plan_text(pf_search_t *s, const pf_graph_t *g, const pf_cluster_t *c)
{
    char err[256], *text = NULL;
    size_t len;
    pf_plan_t *plan = NULL;
    if (pf_search_result(s, &plan, err, sizeof err) != PF_OK)
        return NULL;
    FILE *f = open_memstream(&text, &len);
    pf_plan_write(plan, g, c, f, err, sizeof err);
    fclose(f);
    pf_plan_destroy(&plan);
    return text;
}

#define MAX_JOBS 4096

/* Run A: the search answered in a random order (a pool of issued jobs, one picked at random:
 * several workers finishing out of order), each used answer recorded as the broker journals it.
 * Run B, for a cut k of 0, a third, two thirds and all of the record: a fresh search fed the
 * first k recorded answers, draining new jobs after each (as the broker replays), must have
 * issued exactly A's ids up to that point; fed the rest, it must issue all of A's ids and end
 * with A's plan, byte for byte. */
static void test_replay_is_deterministic(void)
{
    char err[512];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 2;
    pf_graph_t *g = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_UNIFORM);
    to.devices = 8;
    to.seed = 3;
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.probe_seconds = 10; /* probes end by exhausting their search, never by the clock */

    pf_search_t *a = pf_search_new(g, c, &o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    static pf_job_t jobs[MAX_JOBS];
    ids_t ia = {0};
    size_t *issued_at = calloc(MAX_JOBS + 1, sizeof *issued_at); /* ids issued before answer i */
    rec_t *rec = calloc(MAX_JOBS, sizeof *rec);
    uint64_t *pool = calloc(MAX_JOBS, sizeof *pool);
    size_t nrec = 0, npool = 0, seen = 0;
    pf_rng_t rng;
    pf_rng_seed(&rng, 42);
    drain(a, &ia, jobs, MAX_JOBS);
    for (;;) {
        for (; seen < ia.nissued; seen++)
            pool[npool++] = ia.issued[seen];
        size_t live = 0; /* cancelled jobs leave the pool */
        for (size_t i = 0; i < npool; i++) {
            pf_job_t again;
            if (pf_search_job(a, pool[i], &again))
                pool[live++] = pool[i];
        }
        npool = live;
        if (npool == 0 || pf_search_done(a))
            break;
        size_t pick = (size_t)pf_rng_below(&rng, npool);
        uint64_t sid = pool[pick];
        pool[pick] = pool[--npool];
        CU_ASSERT_FATAL(sid < MAX_JOBS);
        pf_job_result_t res;
        pf_job_run(&jobs[sid], &res);
        pf_arena_t *arena = pf_arena_new();
        Planfarm__JobResult *m = pf_job_codec_result_to_pb(arena, sid, &res);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        if (pf_search_answer(a, sid, &res)) {
            rec[nrec].sid = sid;
            CU_ASSERT_EQUAL(pf_wire_pack(&m->base, &rec[nrec].bytes, &rec[nrec].len), PF_OK);
            issued_at[nrec] = ia.nissued;
            nrec++;
        }
        pf_arena_destroy(&arena);
        pf_job_result_clear(&res);
        drain(a, &ia, jobs, MAX_JOBS);
    }
    CU_ASSERT_FATAL(pf_search_done(a));
    CU_ASSERT(nrec > 10);
    char *want = plan_text(a, g, c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);

    size_t cuts[4] = {0, nrec / 3, 2 * nrec / 3, nrec};
    for (int ci = 0; ci < 4; ci++) {
        size_t k = cuts[ci];
        pf_search_t *b = pf_search_new(g, c, &o, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        ids_t ib = {0};
        drain(b, &ib, NULL, 0);
        for (size_t i = 0; i < nrec; i++) {
            if (i == k) { /* the restart point: the same ids issued so far */
                CU_ASSERT_EQUAL(ib.nissued, issued_at[k]);
                CU_ASSERT(ib.nissued <= ia.nissued &&
                          memcmp(ib.issued, ia.issued, ib.nissued * sizeof *ib.issued) == 0);
            }
            pf_job_result_t res;
            CU_ASSERT_EQUAL_FATAL(decode_answer(b, g, c, &rec[i], &res), PF_OK);
            CU_ASSERT_EQUAL(pf_search_answer(b, rec[i].sid, &res), 1);
            pf_job_result_clear(&res);
            drain(b, &ib, NULL, 0);
        }
        CU_ASSERT(pf_search_done(b));
        CU_ASSERT_EQUAL(ib.nissued, ia.nissued);
        char *got = plan_text(b, g, c);
        CU_ASSERT_PTR_NOT_NULL(got);
        if (got)
            CU_ASSERT_STRING_EQUAL(got, want);
        free(got);
        free(ib.issued);
        pf_search_destroy(&b);
    }
    for (size_t i = 0; i < nrec; i++)
        free(rec[i].bytes);
    free(rec);
    free(pool);
    free(issued_at);
    free(ia.issued);
    free(want);
    pf_search_destroy(&a);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* ---- the broker on its journal ---- */

static zactor_t *start_broker(pf_broker_opts_t *o, char *endpoint, size_t len)
{
    zactor_t *b = zactor_new(pf_broker_actor, o);
    char *ok = zstr_recv(b), *ep = zstr_recv(b);
    CU_ASSERT_STRING_EQUAL(ok, "OK");
    snprintf(endpoint, len, "%s", ep ? ep : "");
    free(ok);
    free(ep);
    return b;
}

static Planfarm__RequestStatus *status_until(pf_client_t *c, const char *id,
                                             Planfarm__RequestState not_state)
{
    char err[512];
    Planfarm__RequestStatus *st = NULL;
    for (int i = 0; i < 2000; i++) {
        if (st)
            planfarm__request_status__free_unpacked(st, NULL);
        st = NULL;
        if (pf_client_status(c, id, &st, err, sizeof err) != PF_OK)
            return NULL;
        if (st->state != not_state)
            break;
        zclock_sleep(5);
    }
    return st;
}

/* Submit a request (no worker: it stays queued) and a request that fails (an op fits no
 * device); stop the broker; a new broker on the same journal knows both by their ids: the
 * first queued again with the same jobs, the second failed with the same message; the same
 * inputs submitted again are the same request. With --journal none nothing survives. */
static void test_broker_restart(void)
{
    char err[512], ep[256], id[64], failed_id[64];
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:0";
    o.quiet = 1;
    o.journal_path = journal_path("restart.db");
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 1;
    pf_graph_t *g = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_UNIFORM);
    to.devices = 4;
    pf_cluster_t *cl = NULL, *tiny = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &cl, err, sizeof err), PF_OK);
    to.mem_bytes = 1e6; /* 1 MB: no op of GPT fits */
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &tiny, err, sizeof err), PF_OK);
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    so.stages = 2;

    zactor_t *b = start_broker(&o, ep, sizeof ep);
    pf_client_t *c = pf_client_new(ep, 5000, err, sizeof err);
    Planfarm__RequestStatus *st;
    CU_ASSERT_EQUAL_FATAL(pf_client_submit(c, g, cl, &so, "kept", &st, err, sizeof err), PF_OK);
    snprintf(id, sizeof id, "%s", st->request_id);
    planfarm__request_status__free_unpacked(st, NULL);
    CU_ASSERT_EQUAL_FATAL(pf_client_submit(c, g, tiny, &so, "no room", &st, err, sizeof err),
                          PF_OK);
    snprintf(failed_id, sizeof failed_id, "%s", st->request_id);
    planfarm__request_status__free_unpacked(st, NULL);
    st = status_until(c, id, PLANFARM__REQUEST_STATE__REQ_PREPARING);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    long long jobs_before = st->jobs_queued;
    CU_ASSERT(jobs_before > 0);
    planfarm__request_status__free_unpacked(st, NULL);
    st = status_until(c, failed_id, PLANFARM__REQUEST_STATE__REQ_PREPARING);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_FAILED);
    char failed_error[512];
    snprintf(failed_error, sizeof failed_error, "%s", st->error);
    planfarm__request_status__free_unpacked(st, NULL);
    pf_client_destroy(&c);
    zactor_destroy(&b);

    b = start_broker(&o, ep, sizeof ep);
    c = pf_client_new(ep, 5000, err, sizeof err);
    st = status_until(c, id, PLANFARM__REQUEST_STATE__REQ_PREPARING);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_QUEUED);
    CU_ASSERT_EQUAL(st->jobs_queued, jobs_before);
    CU_ASSERT_STRING_EQUAL(st->label, "kept");
    planfarm__request_status__free_unpacked(st, NULL);
    st = status_until(c, failed_id, PLANFARM__REQUEST_STATE__REQ_PREPARING);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_FAILED);
    CU_ASSERT_STRING_EQUAL(st->error, failed_error);
    planfarm__request_status__free_unpacked(st, NULL);
    /* the same inputs and options again: the same request, not a second one */
    CU_ASSERT_EQUAL(pf_client_submit(c, g, cl, &so, "again", &st, err, sizeof err), PF_OK);
    CU_ASSERT_STRING_EQUAL(st->request_id, id);
    planfarm__request_status__free_unpacked(st, NULL);
    Planfarm__ListReply *l;
    CU_ASSERT_EQUAL(pf_client_list(c, &l, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(l->n_requests, 2);
    planfarm__list_reply__free_unpacked(l, NULL);
    pf_client_destroy(&c);
    zactor_destroy(&b);

    o.journal_path = NULL;
    b = start_broker(&o, ep, sizeof ep);
    c = pf_client_new(ep, 5000, err, sizeof err);
    CU_ASSERT_EQUAL(pf_client_status(c, id, &st, err, sizeof err), PF_EINPUT);
    pf_client_destroy(&c);
    zactor_destroy(&b);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
    pf_cluster_destroy(&tiny);
}

/* The loop is never the one that prepares: with the helper thread held up for 1.5 s by the test
 * hook, a SUBMIT is answered "preparing" and STATUS keeps being answered meanwhile. The loop's
 * longest turn (a stat the loop keeps itself, not a wall-clock race in the test) stays far below
 * the setup's time: 1 s is a bound no loaded machine needs, and the old loop, which prepared in
 * the turn that received the SUBMIT, could not meet it. */
static void test_loop_never_prepares(void)
{
    char err[512], ep[256], id[64];
    pf_broker_opts_t o;
    pf_broker_opts_init(&o);
    o.endpoint = "tcp://127.0.0.1:0";
    o.quiet = 1;
    o.prep_delay_ms = 1500;
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 1;
    pf_graph_t *g = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_UNIFORM);
    to.devices = 2;
    pf_cluster_t *cl = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &cl, err, sizeof err), PF_OK);
    pf_search_opts_t so;
    pf_search_opts_init(&so);
    zactor_t *b = start_broker(&o, ep, sizeof ep);
    pf_client_t *c = pf_client_new(ep, 5000, err, sizeof err);
    Planfarm__RequestStatus *st;
    CU_ASSERT_EQUAL_FATAL(pf_client_submit(c, g, cl, &so, "slow", &st, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_PREPARING);
    snprintf(id, sizeof id, "%s", st->request_id);
    planfarm__request_status__free_unpacked(st, NULL);
    int answered_preparing = 0;
    for (int i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL_FATAL(pf_client_status(c, id, &st, err, sizeof err), PF_OK);
        answered_preparing += st->state == PLANFARM__REQUEST_STATE__REQ_PREPARING;
        planfarm__request_status__free_unpacked(st, NULL);
    }
    CU_ASSERT(answered_preparing >= 1); /* the first at least: the thread sleeps 1.5 s */
    st = status_until(c, id, PLANFARM__REQUEST_STATE__REQ_PREPARING);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    CU_ASSERT_EQUAL(st->state, PLANFARM__REQUEST_STATE__REQ_QUEUED);
    planfarm__request_status__free_unpacked(st, NULL);
    zstr_send(b, "STATS");
    char *stats = zstr_recv(b);
    double wall, busy, stall = 1e9;
    long long in, out, bad, disp;
    int workers, preparing = -1;
    CU_ASSERT_EQUAL(sscanf(stats ? stats : "", "STATS %lf %lf %lld %lld %lld %lld %d %lf %d",
                           &wall, &busy, &in, &out, &bad, &disp, &workers, &stall, &preparing),
                    9);
    CU_ASSERT(stall < 1.0);
    CU_ASSERT_EQUAL(preparing, 0);
    free(stats);
    pf_client_destroy(&c);
    zactor_destroy(&b);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&cl);
}

void pf_suite_journal(void)
{
    CU_pSuite s = CU_add_suite("journal", NULL, NULL);
    CU_add_test(s, "store: requests, answers in order, ends, keys, expiry", test_store_round_trip);
    CU_add_test(s, "default path from XDG_STATE_HOME or HOME", test_default_path);
    CU_add_test(s, "replayed answers give the same job ids and plan", test_replay_is_deterministic);
    CU_add_test(s, "broker restarted on its journal", test_broker_restart);
    CU_add_test(s, "the loop answers STATUS while a request is prepared", test_loop_never_prepares);
}
