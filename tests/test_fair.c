/* fair: the lanes' turn-taking, priorities within a lane, the in-flight quota, cancels and the
 * counts, each on a hand-worked sequence. */
#include "broker/fair.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdint.h>

static int owner_a, owner_b; /* two requests: only their addresses matter */

static void push(pf_fair_t *f, const char *client, int priority, uint64_t id, void *owner)
{
    pf_fair_job_t j = {.id = id, .kind = PF_JOB_DP_PARTITION, .timeout_s = 1, .owner = owner,
                       .owner_job = id};
    CU_ASSERT_EQUAL(pf_fair_push(f, client, priority, &j), PF_OK);
}

static uint64_t pop(pf_fair_t *f)
{
    pf_fair_job_t j;
    return pf_fair_pop(f, &j) ? j.id : 0;
}

/* A queues 1..6, then B queues 101, 102: B's jobs go 2nd and 4th, not 7th and 8th (the FIFO the
 * dispatch core alone would give). */
static void test_round_robin(void)
{
    pf_fair_t *f = pf_fair_new(0);
    for (uint64_t i = 1; i <= 6; i++)
        push(f, "A", 0, i, &owner_a);
    push(f, "B", 0, 101, &owner_b);
    push(f, "B", 0, 102, &owner_b);
    CU_ASSERT_EQUAL(pf_fair_queued(f), 8);
    CU_ASSERT_EQUAL(pf_fair_owner_queued(f, &owner_a), 6);
    CU_ASSERT_EQUAL(pf_fair_owner_queued(f, &owner_b), 2);
    const uint64_t want[8] = {1, 101, 2, 102, 3, 4, 5, 6};
    for (int i = 0; i < 8; i++)
        CU_ASSERT_EQUAL(pop(f), want[i]);
    CU_ASSERT_EQUAL(pop(f), 0);
    CU_ASSERT_EQUAL(pf_fair_queued(f), 0);
    CU_ASSERT_EQUAL(pf_fair_lane_in_flight(f, "A"), 6);
    CU_ASSERT_EQUAL(pf_fair_lane_in_flight(f, "B"), 2);
    /* A was served last and B has nothing queued: a third client, C, is next, then A */
    push(f, "C", 0, 201, &owner_b);
    push(f, "A", 0, 7, &owner_a);
    CU_ASSERT_EQUAL(pop(f), 201);
    CU_ASSERT_EQUAL(pop(f), 7);
    CU_ASSERT_EQUAL(pf_fair_push(f, "A", 0, &(pf_fair_job_t){.id = 7}), PF_ERR); /* duplicate */
    CU_ASSERT_EQUAL(pf_fair_push(f, "A", 0, &(pf_fair_job_t){.id = 0}), PF_ERR); /* id 0 */
    pf_fair_destroy(&f);
    CU_ASSERT_PTR_NULL(f);
    pf_fair_destroy(&f);
}

/* Within a lane: priority 5 before 0, then the order of issue; lanes still alternate. */
static void test_priority(void)
{
    pf_fair_t *f = pf_fair_new(0);
    push(f, "A", 0, 1, &owner_a);
    push(f, "A", 5, 2, &owner_a);
    push(f, "A", 0, 3, &owner_a);
    push(f, "A", 5, 4, &owner_a);
    push(f, "B", -1, 10, &owner_b);
    const uint64_t want[5] = {2, 10, 4, 1, 3};
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(pop(f), want[i]);
    pf_fair_destroy(&f);
}

/* Quota 2: A has 2 in flight and waits; B still gets its turns; one of A's ends (done), A goes
 * again. A cancelled job in flight frees its place too; a queued one just leaves. */
static void test_quota_and_cancel(void)
{
    pf_fair_t *f = pf_fair_new(2);
    for (uint64_t i = 1; i <= 5; i++)
        push(f, "A", 0, i, &owner_a);
    push(f, "B", 0, 100, &owner_b);
    CU_ASSERT_EQUAL(pop(f), 1);
    CU_ASSERT_EQUAL(pop(f), 100);
    CU_ASSERT_EQUAL(pop(f), 2);
    CU_ASSERT_EQUAL(pop(f), 0); /* A at its quota, B empty */
    pf_fair_done(f, 1);
    pf_fair_done(f, 1); /* twice: ignored */
    pf_fair_done(f, 999); /* unknown: ignored */
    CU_ASSERT_EQUAL(pf_fair_lane_in_flight(f, "A"), 1);
    CU_ASSERT_EQUAL(pop(f), 3);
    CU_ASSERT_EQUAL(pop(f), 0);
    CU_ASSERT_EQUAL(pf_fair_cancel(f, 3), 0); /* in flight: the dispatch core cancels it */
    CU_ASSERT_EQUAL(pf_fair_cancel(f, 4), 1); /* queued: dropped here */
    CU_ASSERT_EQUAL(pf_fair_queued(f), 1);
    CU_ASSERT_EQUAL(pop(f), 5);
    CU_ASSERT_EQUAL(pop(f), 0);
    /* B's lane is idle (its job done): forgotten */
    pf_fair_done(f, 100);
    CU_ASSERT_EQUAL(pf_fair_lane_in_flight(f, "B"), 0);
    /* the owner's every job goes, queued or in flight */
    push(f, "A", 0, 6, &owner_a);
    pf_fair_cancel_owner(f, &owner_a);
    CU_ASSERT_EQUAL(pf_fair_queued(f), 0);
    CU_ASSERT_EQUAL(pf_fair_owner_queued(f, &owner_a), 0);
    CU_ASSERT_EQUAL(pf_fair_lane_in_flight(f, "A"), 0);
    pf_fair_destroy(&f);
}

void pf_suite_fair(void)
{
    CU_pSuite s = CU_add_suite("fair", NULL, NULL);
    CU_add_test(s, "lanes take turns", test_round_robin);
    CU_add_test(s, "priority within a lane", test_priority);
    CU_add_test(s, "in-flight quota, done and cancel", test_quota_and_cancel);
}
