/* The broker's dispatch core without sockets: credits, least-loaded choice, re-queueing on worker
 * death, deadlines, attempts and poisoning, duplicate and late answers. Times are passed in, so
 * every scenario is worked out by hand below. */
#include "broker/dispatch.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <string.h>

#define ALL_KINDS 7u

typedef struct {
    int ncancel, npoison, ndead;
    void *cancel_worker[16];
    uint64_t cancel_job[16];
    void *poison_owner;
    uint64_t poison_owner_job, poison_job;
    char poison_error[256];
    void *dead[4];
} events_t;

static void ev_cancel(void *ctx, void *worker_user, uint64_t job_id)
{
    events_t *e = ctx;
    if (e->ncancel < 16) {
        e->cancel_worker[e->ncancel] = worker_user;
        e->cancel_job[e->ncancel] = job_id;
    }
    e->ncancel++;
}

static void ev_poison(void *ctx, void *owner, uint64_t owner_job, uint64_t job_id,
                      const char *error)
{
    events_t *e = ctx;
    e->npoison++;
    e->poison_owner = owner;
    e->poison_owner_job = owner_job;
    e->poison_job = job_id;
    snprintf(e->poison_error, sizeof e->poison_error, "%s", error);
}

static void ev_dead(void *ctx, void *worker_user)
{
    events_t *e = ctx;
    if (e->ndead < 4)
        e->dead[e->ndead] = worker_user;
    e->ndead++;
}

static pf_dispatch_t *make(events_t *e, int max_attempts, int liveness)
{
    memset(e, 0, sizeof *e);
    pf_dispatch_opts_t o;
    pf_dispatch_opts_init(&o);
    o.max_attempts = max_attempts;
    o.liveness = liveness;
    pf_dispatch_events_t ev = {e, ev_cancel, ev_poison, ev_dead};
    return pf_dispatch_new(&o, &ev);
}

static int owner_tag; /* any address: the owner is opaque to the dispatch core */

/* A: 2 credits, B: 1 credit, 5 jobs. Least-loaded with round-robin ties: job 1 -> A (both empty,
 * A first), job 2 -> B (tie 0/0 starts after A), job 3 -> A (B is full); then no credit is free:
 * 3 running, 2 queued, 0 of 3 credits free. */
static void test_credits(void)
{
    events_t e;
    pf_dispatch_t *d = make(&e, 3, 10);
    char A, B;
    int a = pf_dispatch_worker_add(d, 2, ALL_KINDS, &A);
    int b = pf_dispatch_worker_add(d, 1, ALL_KINDS, &B);
    CU_ASSERT(a >= 0 && b >= 0 && a != b);
    for (uint64_t id = 1; id <= 5; id++)
        CU_ASSERT_EQUAL(pf_dispatch_submit(d, id, PF_JOB_NOOP, 60, &owner_tag, 100 + id), PF_OK);
    CU_ASSERT_EQUAL(pf_dispatch_submit(d, 3, PF_JOB_NOOP, 60, NULL, 0), PF_ERR); /* duplicate */
    pf_dispatch_assign_t as[3];
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(pf_dispatch_next(d, 1, &as[i]), 1);
    pf_dispatch_assign_t none;
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 1, &none), 0);
    CU_ASSERT_EQUAL(as[0].job_id, 1);
    CU_ASSERT_PTR_EQUAL(as[0].worker_user, &A);
    CU_ASSERT_EQUAL(as[1].job_id, 2);
    CU_ASSERT_PTR_EQUAL(as[1].worker_user, &B);
    CU_ASSERT_EQUAL(as[2].job_id, 3);
    CU_ASSERT_PTR_EQUAL(as[2].worker_user, &A);
    CU_ASSERT_EQUAL(as[0].attempt, 0);
    CU_ASSERT_PTR_EQUAL(as[0].owner, &owner_tag);
    CU_ASSERT_EQUAL(as[0].owner_job, 101);
    pf_dispatch_stats_t st;
    pf_dispatch_get_stats(d, &st);
    CU_ASSERT_EQUAL(st.queued, 2);
    CU_ASSERT_EQUAL(st.running, 3);
    CU_ASSERT_EQUAL(st.credits, 3);
    CU_ASSERT_EQUAL(st.credits_free, 0);
    CU_ASSERT_EQUAL(pf_dispatch_worker_held(d, a), 2);
    long long q, r;
    pf_dispatch_owner_counts(d, &owner_tag, &q, &r);
    CU_ASSERT_EQUAL(q, 2);
    CU_ASSERT_EQUAL(r, 3);

    /* A answers job 1: its credit comes back and job 4 goes to A. */
    CU_ASSERT_EQUAL(pf_dispatch_result(d, a, 1), 1);
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 2, &as[0]), 1);
    CU_ASSERT_EQUAL(as[0].job_id, 4);
    CU_ASSERT_EQUAL(as[0].worker, a);
    /* The same answer again is ignored and frees nothing: A holds 3 and 4. */
    CU_ASSERT_EQUAL(pf_dispatch_result(d, a, 1), 0);
    pf_dispatch_get_stats(d, &st);
    CU_ASSERT_EQUAL(st.credits_free, 0);
    CU_ASSERT_EQUAL(st.answered, 1);
    CU_ASSERT_EQUAL(st.ignored, 1);
    CU_ASSERT_EQUAL(pf_dispatch_worker_held(d, a), 2);
    /* An answer from a worker that does not hold the job is not taken from anyone's credit. */
    CU_ASSERT_EQUAL(pf_dispatch_result(d, b, 4), 1); /* late-style accept: A's copy is cancelled */
    CU_ASSERT_EQUAL(e.ncancel, 1);
    CU_ASSERT_PTR_EQUAL(e.cancel_worker[0], &A);
    CU_ASSERT_EQUAL(e.cancel_job[0], 4);
    CU_ASSERT_EQUAL(pf_dispatch_worker_held(d, b), 1); /* B still holds job 2 */
    CU_ASSERT_EQUAL(pf_dispatch_worker_held(d, a), 2); /* 3 and the cancelled copy of 4 */
    pf_dispatch_destroy(&d);
    CU_ASSERT_PTR_NULL(d);
    pf_dispatch_destroy(&d);
}

/* B goes silent: with liveness 2, the third tick without a message from it (silent through two
 * whole intervals) removes it and puts its job 2 at the front of the queue with one attempt
 * counted; it goes out next, as attempt 1. A, heard from between the ticks, stays. */
static void test_worker_death(void)
{
    events_t e;
    pf_dispatch_t *d = make(&e, 3, 2);
    char A, B;
    int a = pf_dispatch_worker_add(d, 1, ALL_KINDS, &A);
    int b = pf_dispatch_worker_add(d, 1, ALL_KINDS, &B);
    for (uint64_t id = 1; id <= 3; id++)
        pf_dispatch_submit(d, id, PF_JOB_DP_PARTITION, 600, NULL, id);
    pf_dispatch_assign_t x, y;
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 0, &x), 1);
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 0, &y), 1);
    CU_ASSERT_EQUAL(x.worker, a);
    CU_ASSERT_EQUAL(y.worker, b);
    pf_dispatch_tick(d, 1);
    pf_dispatch_worker_seen(d, a);
    pf_dispatch_tick(d, 2);
    CU_ASSERT_EQUAL(e.ndead, 0); /* B silent through one interval: not yet */
    pf_dispatch_worker_seen(d, a);
    pf_dispatch_tick(d, 3);
    CU_ASSERT_EQUAL(e.ndead, 1);
    CU_ASSERT_PTR_EQUAL(e.dead[0], &B);
    CU_ASSERT_EQUAL(pf_dispatch_workers(d), 1);
    pf_dispatch_stats_t st;
    pf_dispatch_get_stats(d, &st);
    CU_ASSERT_EQUAL(st.queued, 2); /* 2 (again) and 3 */
    CU_ASSERT_EQUAL(st.requeued, 1);
    CU_ASSERT_EQUAL(st.credits, 1);
    CU_ASSERT_EQUAL(st.credits_free, 0);
    /* A finishes job 1; job 2 comes before job 3. */
    CU_ASSERT_EQUAL(pf_dispatch_result(d, a, 1), 1);
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 11, &x), 1);
    CU_ASSERT_EQUAL(x.job_id, 2);
    CU_ASSERT_EQUAL(x.attempt, 1);
    CU_ASSERT_EQUAL(x.worker, a);
    /* A late answer from the dead worker's peer (handle -1) is still used. */
    CU_ASSERT_EQUAL(pf_dispatch_result(d, -1, 2), 1);
    CU_ASSERT_EQUAL(e.ncancel, 1); /* A's live copy of 2 is cancelled */
    /* An explicit removal (BYE) re-queues too. */
    int c = pf_dispatch_worker_add(d, 4, ALL_KINDS, &B);
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 12, &x), 1);
    CU_ASSERT_EQUAL(x.job_id, 3);
    CU_ASSERT_EQUAL(x.worker, c);
    pf_dispatch_worker_remove(d, c, "worker left");
    pf_dispatch_get_stats(d, &st);
    CU_ASSERT_EQUAL(st.queued, 1);
    CU_ASSERT_EQUAL(st.credits, 1);
    pf_dispatch_destroy(&d);
}

/* max_attempts = 3: three FAILED answers poison the job; the owner hears it once, with the last
 * error, and the job is gone (a fourth FAILED is ignored). */
static void test_poison(void)
{
    events_t e;
    pf_dispatch_t *d = make(&e, 3, 10);
    char A;
    int a = pf_dispatch_worker_add(d, 1, ALL_KINDS, &A);
    pf_dispatch_submit(d, 42, PF_JOB_MAP_PROBE, 60, &owner_tag, 7);
    pf_dispatch_assign_t x;
    const char *errs[] = {"blob lost", "decode error", "out of memory"};
    for (int k = 0; k < 3; k++) {
        CU_ASSERT_EQUAL(pf_dispatch_next(d, k, &x), 1);
        CU_ASSERT_EQUAL(x.attempt, (uint32_t)k);
        CU_ASSERT_EQUAL(e.npoison, 0);
        CU_ASSERT_EQUAL(pf_dispatch_failed(d, a, 42, errs[k]), 1);
    }
    CU_ASSERT_EQUAL(e.npoison, 1);
    CU_ASSERT_PTR_EQUAL(e.poison_owner, &owner_tag);
    CU_ASSERT_EQUAL(e.poison_owner_job, 7);
    CU_ASSERT_EQUAL(e.poison_job, 42);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.poison_error, "out of memory"));
    /* one worker ran it three times: counted as one worker */
    CU_ASSERT_PTR_NOT_NULL(strstr(e.poison_error, "failed 3 times on 1 worker;"));
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 4, &x), 0);
    CU_ASSERT_EQUAL(pf_dispatch_failed(d, a, 42, "again"), 0);
    pf_dispatch_stats_t st;
    pf_dispatch_get_stats(d, &st);
    CU_ASSERT_EQUAL(st.poisoned, 1);
    CU_ASSERT_EQUAL(st.credits_free, 1);
    CU_ASSERT_EQUAL(st.queued + st.running, 0);
    pf_dispatch_destroy(&d);
}

/* A fails every attempt (FAILED, out of memory), B is healthy: the retry goes to B, never back
 * to A, and the job is answered; nothing is poisoned. When B is busy the retry waits for B's
 * credit rather than going back to A. */
static void test_retry_elsewhere(void)
{
    events_t e;
    pf_dispatch_t *d = make(&e, 3, 1000);
    char A, B;
    int a = pf_dispatch_worker_add(d, 1, ALL_KINDS, &A);
    int b = pf_dispatch_worker_add(d, 1, ALL_KINDS, &B);
    pf_dispatch_assign_t x, y;
    /* job 1 goes to A (round-robin from the first), job 2 to B */
    pf_dispatch_submit(d, 1, PF_JOB_MAP_PROBE, 60, &owner_tag, 1);
    pf_dispatch_submit(d, 2, PF_JOB_MAP_PROBE, 60, &owner_tag, 2);
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 0, &x), 1);
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 0, &y), 1);
    CU_ASSERT_EQUAL(x.worker, a);
    CU_ASSERT_EQUAL(y.worker, b);
    CU_ASSERT_EQUAL(pf_dispatch_failed(d, a, 1, "A: out of memory"), 1);
    /* A has a free credit, B none: job 1 waits for B */
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 1, &x), 0);
    CU_ASSERT_EQUAL(pf_dispatch_result(d, b, 2), 1);
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 2, &x), 1); /* B's credit is back: job 1 goes there */
    CU_ASSERT_EQUAL(x.job_id, 1);
    CU_ASSERT_EQUAL(x.worker, b);
    CU_ASSERT_EQUAL(x.attempt, 1);
    CU_ASSERT_EQUAL(pf_dispatch_result(d, b, 1), 1);
    /* a job A fails every time it gets one: B answers it each time */
    for (uint64_t id = 10; id < 20; id++) {
        pf_dispatch_submit(d, id, PF_JOB_MAP_PROBE, 60, &owner_tag, id);
        CU_ASSERT_EQUAL(pf_dispatch_next(d, 10, &x), 1);
        if (x.worker == a) {
            CU_ASSERT_EQUAL(pf_dispatch_failed(d, a, id, "A: out of memory"), 1);
            CU_ASSERT_EQUAL(pf_dispatch_next(d, 10, &x), 1);
        }
        CU_ASSERT_EQUAL(x.worker, b);
        CU_ASSERT_EQUAL(pf_dispatch_result(d, b, id), 1);
    }
    CU_ASSERT_EQUAL(e.npoison, 0);
    pf_dispatch_stats_t st;
    pf_dispatch_get_stats(d, &st);
    CU_ASSERT_EQUAL(st.poisoned, 0);
    CU_ASSERT_EQUAL(st.answered, 12);
    CU_ASSERT_EQUAL(st.credits_free, 2);
    pf_dispatch_destroy(&d);
}

/* Distinct workers: with A and B both failing, a job is poisoned after three failures (A, B, then
 * A again: no worker it has not failed on is left) and the message counts 2 workers; with a
 * third worker C connected after that, a fresh job fails on A and B and then goes to C. */
static void test_poison_counts_workers(void)
{
    events_t e;
    pf_dispatch_t *d = make(&e, 3, 1000);
    char A, B, C;
    int a = pf_dispatch_worker_add(d, 1, ALL_KINDS, &A);
    int b = pf_dispatch_worker_add(d, 1, ALL_KINDS, &B);
    pf_dispatch_submit(d, 5, PF_JOB_MAP_PROBE, 60, &owner_tag, 5);
    pf_dispatch_assign_t x;
    int order[3];
    for (int k = 0; k < 3; k++) {
        CU_ASSERT_EQUAL(pf_dispatch_next(d, k, &x), 1);
        order[k] = x.worker;
        pf_dispatch_failed(d, x.worker, 5, "bad");
    }
    CU_ASSERT(order[0] != order[1]);
    CU_ASSERT_EQUAL(e.npoison, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.poison_error, "failed 3 times on 2 workers;"));
    int c = pf_dispatch_worker_add(d, 1, ALL_KINDS, &C);
    pf_dispatch_submit(d, 6, PF_JOB_MAP_PROBE, 60, &owner_tag, 6);
    bool used[3] = {false, false, false};
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(pf_dispatch_next(d, 10 + k, &x), 1);
        CU_ASSERT(x.worker == a || x.worker == b || x.worker == c);
        CU_ASSERT_FALSE(used[x.worker]);
        used[x.worker] = true;
        if (x.worker == c)
            break;
        pf_dispatch_failed(d, x.worker, 6, "bad");
    }
    if (!used[c]) {
        CU_ASSERT_EQUAL(pf_dispatch_next(d, 12, &x), 1);
        CU_ASSERT_EQUAL(x.worker, c);
    }
    CU_ASSERT_EQUAL(pf_dispatch_result(d, c, 6), 1);
    CU_ASSERT_EQUAL(e.npoison, 1);
    pf_dispatch_destroy(&d);
}

/* Job 9 (deadline 30 s) goes to A at t = 0. At t = 31 the tick cancels A's copy and queues it
 * again (attempt 1). A still holds the cancelled copy, so the job waits for B rather than going
 * back to A; A's late RESULT is still used, B's copy is cancelled, B's own answer is then
 * ignored, and every credit comes back. */
static void test_deadline(void)
{
    events_t e;
    pf_dispatch_t *d = make(&e, 3, 1000);
    char A, B;
    int a = pf_dispatch_worker_add(d, 2, ALL_KINDS, &A);
    pf_dispatch_submit(d, 9, PF_JOB_MAP_PROBE, 30, NULL, 9);
    pf_dispatch_assign_t x;
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 0, &x), 1);
    pf_dispatch_tick(d, 29);
    CU_ASSERT_EQUAL(e.ncancel, 0);
    pf_dispatch_tick(d, 31);
    CU_ASSERT_EQUAL(e.ncancel, 1);
    CU_ASSERT_PTR_EQUAL(e.cancel_worker[0], &A);
    CU_ASSERT_EQUAL(e.cancel_job[0], 9);
    /* A has a free credit but holds a copy of job 9: nothing goes out. */
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 31, &x), 0);
    CU_ASSERT_EQUAL(pf_dispatch_worker_held(d, a), 1);
    int b = pf_dispatch_worker_add(d, 1, ALL_KINDS, &B);
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 31, &x), 1);
    CU_ASSERT_EQUAL(x.worker, b);
    CU_ASSERT_EQUAL(x.attempt, 1);
    CU_ASSERT_EQUAL(pf_dispatch_result(d, a, 9), 1); /* the late answer */
    CU_ASSERT_EQUAL(e.ncancel, 2);
    CU_ASSERT_PTR_EQUAL(e.cancel_worker[1], &B);
    CU_ASSERT_EQUAL(pf_dispatch_result(d, b, 9), 0);
    pf_dispatch_stats_t st;
    pf_dispatch_get_stats(d, &st);
    CU_ASSERT_EQUAL(st.credits_free, 3);
    CU_ASSERT_EQUAL(st.late_accepted, 1);
    CU_ASSERT_EQUAL(st.answered, 1);
    /* Three deadlines in a row poison the job. */
    pf_dispatch_submit(d, 10, PF_JOB_MAP_PROBE, 30, &owner_tag, 10);
    for (int k = 0; k < 3; k++) {
        double t = 100 + 40 * k;
        CU_ASSERT_EQUAL(pf_dispatch_next(d, t, &x), 1);
        CU_ASSERT_EQUAL(x.attempt, (uint32_t)k);
        pf_dispatch_tick(d, t + 31);
        /* the worker answers for its cancelled copy, freeing its credit */
        CU_ASSERT_EQUAL(pf_dispatch_failed(d, x.worker, 10, "cancelled"), 0);
    }
    CU_ASSERT_EQUAL(e.npoison, 1);
    CU_ASSERT_EQUAL(e.poison_job, 10);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.poison_error, "deadline"));
    pf_dispatch_destroy(&d);
}

/* Cancel: a queued job disappears silently; a running one is cancelled at its worker, whose
 * credit comes back when it answers for it. The head job waits for a worker that runs its kind. */
static void test_cancel_and_kinds(void)
{
    events_t e;
    pf_dispatch_t *d = make(&e, 3, 1000);
    char A;
    int a = pf_dispatch_worker_add(d, 1, 1u << PF_JOB_NOOP, &A);
    pf_dispatch_submit(d, 1, PF_JOB_DP_PARTITION, 60, NULL, 1);
    pf_dispatch_submit(d, 2, PF_JOB_NOOP, 60, NULL, 2);
    pf_dispatch_assign_t x;
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 0, &x), 0); /* head-of-line: job 1 needs a DP worker */
    pf_dispatch_cancel(d, 1);
    CU_ASSERT_EQUAL(e.ncancel, 0);
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 0, &x), 1);
    CU_ASSERT_EQUAL(x.job_id, 2);
    pf_dispatch_cancel(d, 2);
    CU_ASSERT_EQUAL(e.ncancel, 1);
    pf_dispatch_stats_t st;
    pf_dispatch_get_stats(d, &st);
    CU_ASSERT_EQUAL(st.credits_free, 0);
    CU_ASSERT_EQUAL(pf_dispatch_failed(d, a, 2, "cancelled"), 0);
    pf_dispatch_get_stats(d, &st);
    CU_ASSERT_EQUAL(st.credits_free, 1);
    /* cancel_owner takes every job of one owner and nothing else */
    int other;
    pf_dispatch_submit(d, 3, PF_JOB_NOOP, 60, &owner_tag, 3);
    pf_dispatch_submit(d, 4, PF_JOB_NOOP, 60, &other, 4);
    pf_dispatch_submit(d, 5, PF_JOB_NOOP, 60, &owner_tag, 5);
    pf_dispatch_cancel_owner(d, &owner_tag);
    long long q, r;
    pf_dispatch_owner_counts(d, &owner_tag, &q, &r);
    CU_ASSERT_EQUAL(q + r, 0);
    pf_dispatch_owner_counts(d, &other, &q, &r);
    CU_ASSERT_EQUAL(q, 1);
    pf_dispatch_destroy(&d);
}

/* One worker with one credit; jobs 1 (dp_partition), 2 and 3 (map_probe). At t = 5 job 1 goes
 * out: queued {probe 2}, running {dp 1}; job 1 was sent at 5 to that worker, job 2 is not out.
 * Its answer counts one dp_partition answered; at t = 7 job 2 goes, sent at 7. */
static void test_kind_counts(void)
{
    events_t e;
    pf_dispatch_t *d = make(&e, 3, 10);
    char A;
    int a = pf_dispatch_worker_add(d, 1, ALL_KINDS, &A);
    CU_ASSERT_EQUAL(pf_dispatch_submit(d, 1, PF_JOB_DP_PARTITION, 60, &owner_tag, 1), PF_OK);
    CU_ASSERT_EQUAL(pf_dispatch_submit(d, 2, PF_JOB_MAP_PROBE, 60, &owner_tag, 2), PF_OK);
    CU_ASSERT_EQUAL(pf_dispatch_submit(d, 3, PF_JOB_MAP_PROBE, 60, &owner_tag, 3), PF_OK);
    pf_dispatch_assign_t as;
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 5, &as), 1);
    CU_ASSERT_EQUAL(as.job_id, 1);
    pf_dispatch_kind_counts_t k;
    pf_dispatch_kind_counts(d, &k);
    CU_ASSERT_EQUAL(k.queued[PF_JOB_DP_PARTITION], 0);
    CU_ASSERT_EQUAL(k.queued[PF_JOB_MAP_PROBE], 2);
    CU_ASSERT_EQUAL(k.running[PF_JOB_DP_PARTITION], 1);
    CU_ASSERT_EQUAL(k.running[PF_JOB_MAP_PROBE], 0);
    CU_ASSERT_EQUAL(k.answered[PF_JOB_DP_PARTITION], 0);
    pf_job_kind_t kind = PF_JOB_NOOP;
    double sent = 0;
    int holder = -1;
    CU_ASSERT_EQUAL(pf_dispatch_job_sent(d, 1, &kind, &sent, &holder), 1);
    CU_ASSERT_EQUAL(kind, PF_JOB_DP_PARTITION);
    CU_ASSERT_DOUBLE_EQUAL(sent, 5, 0);
    CU_ASSERT_EQUAL(holder, a);
    CU_ASSERT_EQUAL(pf_dispatch_job_sent(d, 2, &kind, &sent, &holder), 0);
    CU_ASSERT_EQUAL(pf_dispatch_result(d, a, 1), 1);
    CU_ASSERT_EQUAL(pf_dispatch_job_sent(d, 1, &kind, &sent, &holder), 0);
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 7, &as), 1);
    CU_ASSERT_EQUAL(as.job_id, 2);
    CU_ASSERT_EQUAL(pf_dispatch_job_sent(d, 2, &kind, &sent, &holder), 1);
    CU_ASSERT_EQUAL(kind, PF_JOB_MAP_PROBE);
    CU_ASSERT_DOUBLE_EQUAL(sent, 7, 0);
    pf_dispatch_kind_counts(d, &k);
    CU_ASSERT_EQUAL(k.answered[PF_JOB_DP_PARTITION], 1);
    CU_ASSERT_EQUAL(k.running[PF_JOB_MAP_PROBE], 1);
    CU_ASSERT_EQUAL(k.queued[PF_JOB_MAP_PROBE], 1);
    CU_ASSERT_EQUAL(k.running[PF_JOB_DP_PARTITION], 0);
    pf_dispatch_destroy(&d);
}

/* Who holds what (the broker accepts an answer only from a holder). A: 1 credit, B: 1
 * credit; job 1 -> A, job 2 -> B. A holds 1 live, not 2; after a deadline at t = 12 (timeout 10,
 * sent at t = 1) A's copy of 1 is cancelled but still held (0) until A answers, and job 1 goes
 * nowhere else (B is full): A's answer releases it (-1 after). An invalid handle holds nothing. */
static void test_holds(void)
{
    events_t e;
    pf_dispatch_t *d = make(&e, 3, 10);
    char A, B;
    int a = pf_dispatch_worker_add(d, 1, ALL_KINDS, &A);
    int b = pf_dispatch_worker_add(d, 1, ALL_KINDS, &B);
    CU_ASSERT_EQUAL(pf_dispatch_submit(d, 1, PF_JOB_NOOP, 10, &owner_tag, 1), PF_OK);
    CU_ASSERT_EQUAL(pf_dispatch_submit(d, 2, PF_JOB_NOOP, 10, &owner_tag, 2), PF_OK);
    pf_dispatch_assign_t as;
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 1, &as), 1);
    CU_ASSERT_EQUAL(as.worker, a);
    CU_ASSERT_EQUAL(pf_dispatch_next(d, 1, &as), 1);
    CU_ASSERT_EQUAL(as.worker, b);
    CU_ASSERT_EQUAL(pf_dispatch_holds(d, a, 1), 1);
    CU_ASSERT_EQUAL(pf_dispatch_holds(d, a, 2), -1);
    CU_ASSERT_EQUAL(pf_dispatch_holds(d, b, 2), 1);
    CU_ASSERT_EQUAL(pf_dispatch_holds(d, -1, 1), -1);
    CU_ASSERT_EQUAL(pf_dispatch_holds(d, 7, 1), -1);
    uint64_t ids[4];
    CU_ASSERT_EQUAL(pf_dispatch_worker_jobs(d, a, ids, 4), 1);
    CU_ASSERT_EQUAL(ids[0], 1);
    pf_dispatch_tick(d, 12); /* both deadlines (t = 11) passed: cancelled, queued again */
    CU_ASSERT_EQUAL(pf_dispatch_holds(d, a, 1), 0);
    CU_ASSERT_EQUAL(pf_dispatch_worker_jobs(d, a, ids, 4), 1);
    CU_ASSERT_EQUAL(pf_dispatch_result(d, a, 1), 1); /* the cancelled copy's answer is used */
    CU_ASSERT_EQUAL(pf_dispatch_holds(d, a, 1), -1);
    CU_ASSERT_EQUAL(pf_dispatch_worker_jobs(d, a, ids, 4), 0);
    pf_dispatch_destroy(&d);
}

void pf_suite_dispatch(void)
{
    CU_pSuite s = CU_add_suite("dispatch", NULL, NULL);
    CU_add_test(s, "credits and least-loaded choice", test_credits);
    CU_add_test(s, "worker death re-queues its jobs", test_worker_death);
    CU_add_test(s, "attempts poison a job", test_poison);
    CU_add_test(s, "a failed job is retried on another worker", test_retry_elsewhere);
    CU_add_test(s, "poisoning counts distinct workers", test_poison_counts_workers);
    CU_add_test(s, "deadline re-send and late answers", test_deadline);
    CU_add_test(s, "cancel and job kinds", test_cancel_and_kinds);
    CU_add_test(s, "counts by kind and send times", test_kind_counts);
    CU_add_test(s, "which worker holds a job", test_holds);
}
