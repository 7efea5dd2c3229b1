/* target_search: Algorithm 1 against a fake probe oracle whose mappings have known objectives
 * {16, 12, 6, 5} (the optimum is 5): a probe at target t finds the mapping of the largest
 * objective <= t, or none. The targets of each policy and the converged result are worked out by
 * hand in the comments. */
#include "planner/map/target_search.h"
#include "tests/testutil.h"

#include <math.h>
#include <string.h>

static const double objectives[] = {12, 6, 5};

/* The oracle's answer at target t; its mapping is one int, the objective itself. */
static pf_target_answer_t oracle(double t, int *dev)
{
    pf_target_answer_t a = {PF_TARGET_NONE, 0, dev};
    for (size_t i = 0; i < sizeof objectives / sizeof objectives[0]; i++)
        if (objectives[i] <= t && a.verdict == PF_TARGET_NONE) {
            a.verdict = PF_TARGET_FOUND;
            a.objective_ms = objectives[i];
            *dev = (int)objectives[i];
        }
    return a;
}

static pf_target_search_t *new_search(pf_target_search_policy_t policy, int width, int timeouts)
{
    pf_target_search_opts_t o = {policy, width, 0.01, timeouts};
    int dev = 16;
    return pf_target_search_new(&o, 0, 16, &dev, 1);
}

/* W = 1 is plain bisection: 8 finds 6; 3, 4.5 find nothing; 5.25 finds 5; then 4.75, 4.875,
 * 4.9375, 4.96875 find nothing, and 5 - 4.96875 <= 0.01 x 5 ends it. */
static void test_stream_bisection(void)
{
    const double want[] = {8, 3, 4.5, 5.25, 4.75, 4.875, 4.9375, 4.96875};
    pf_target_search_t *ts = new_search(PF_TARGET_SEARCH_STREAM, 1, 0);
    int n = 0, dev;
    double t, again;
    CU_ASSERT_PTR_NOT_NULL_FATAL(ts);
    while (pf_target_search_propose(ts, &t)) {
        CU_ASSERT_FATAL(n < 8);
        CU_ASSERT_EQUAL(t, want[n]);
        CU_ASSERT(pf_target_search_propose(ts, &again) && again == t); /* until sent */
        pf_target_search_sent(ts, (uint64_t)n + 100);
        CU_ASSERT(!pf_target_search_propose(ts, &again)); /* W = 1 is out */
        pf_target_answer_t a = oracle(t, &dev);
        pf_target_search_absorb(ts, (uint64_t)n + 100, &a);
        n++;
    }
    CU_ASSERT_EQUAL(n, 8);
    CU_ASSERT(pf_target_search_done(ts));
    CU_ASSERT_EQUAL(pf_target_search_lower_ms(ts), 4.96875);
    CU_ASSERT_EQUAL(pf_target_search_upper_ms(ts), 5);
    CU_ASSERT_EQUAL(pf_target_search_best(ts)[0], 5);
    CU_ASSERT_EQUAL(pf_target_search_in_flight(ts), 0);
    pf_target_search_destroy(&ts);
    pf_target_search_destroy(&ts); /* idempotent */
}

/* W = 4: each new target halves the widest gap (the lowest of equal ones): 8, 4, 12, 2. The
 * answer at 8 (6) moves t_r to 6, which withdraws the probe at 12; the next target halves
 * [0, 2]: 1, and the one after [2, 4]: 3. */
static void test_stream_width(void)
{
    const double want[] = {8, 4, 12, 2};
    pf_target_search_t *ts = new_search(PF_TARGET_SEARCH_STREAM, 4, 0);
    double t;
    int dev;
    uint64_t gone[4];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ts);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_FATAL(pf_target_search_propose(ts, &t));
        CU_ASSERT_EQUAL(t, want[i]);
        pf_target_search_sent(ts, (uint64_t)i + 1);
    }
    CU_ASSERT(!pf_target_search_propose(ts, &t));
    pf_target_answer_t a = oracle(8, &dev);
    pf_target_search_absorb(ts, 1, &a);
    CU_ASSERT_EQUAL(pf_target_search_upper_ms(ts), 6);
    CU_ASSERT_EQUAL(pf_target_search_take_withdrawn(ts, gone, 4), 1);
    CU_ASSERT_EQUAL(gone[0], 3);
    CU_ASSERT_EQUAL(pf_target_search_take_withdrawn(ts, gone, 4), 0);
    CU_ASSERT(pf_target_search_propose(ts, &t));
    CU_ASSERT_EQUAL(t, 1);
    pf_target_search_sent(ts, 5);
    /* a withdrawn probe's late answer is ignored */
    a = oracle(12, &dev);
    pf_target_search_absorb(ts, 3, &a);
    CU_ASSERT_EQUAL(pf_target_search_upper_ms(ts), 6);
    CU_ASSERT_EQUAL(pf_target_search_in_flight(ts), 3); /* 2, 4 and 1 */
    CU_ASSERT(pf_target_search_propose(ts, &t)); /* gaps 1, 1, 2, 2 between 0, 1, 2, 4, 6 */
    CU_ASSERT_EQUAL(t, 3);
    pf_target_search_destroy(&ts);
}

/* Two timed-out probes end a search that allows two: the bounds moved as if nothing was found
 * (8, then 12), and every probe still out is withdrawn. */
static void test_stream_timeouts(void)
{
    pf_target_search_t *ts = new_search(PF_TARGET_SEARCH_STREAM, 2, 2);
    pf_target_answer_t out = {PF_TARGET_TIMED_OUT, 0, NULL};
    double t;
    uint64_t gone[2];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ts);
    CU_ASSERT(pf_target_search_propose(ts, &t) && t == 8);
    pf_target_search_sent(ts, 1);
    CU_ASSERT(pf_target_search_propose(ts, &t) && t == 4);
    pf_target_search_sent(ts, 2);
    pf_target_search_absorb(ts, 1, &out);
    CU_ASSERT_EQUAL(pf_target_search_lower_ms(ts), 8);
    CU_ASSERT_EQUAL(pf_target_search_take_withdrawn(ts, gone, 2), 1); /* 4 is below t_l */
    CU_ASSERT_EQUAL(gone[0], 2);
    CU_ASSERT(pf_target_search_propose(ts, &t) && t == 12);
    pf_target_search_sent(ts, 3);
    CU_ASSERT(pf_target_search_propose(ts, &t) && t == 10);
    pf_target_search_sent(ts, 4);
    pf_target_search_absorb(ts, 3, &out);
    CU_ASSERT(pf_target_search_done(ts));
    CU_ASSERT_EQUAL(pf_target_search_timeouts(ts), 2);
    CU_ASSERT_EQUAL(pf_target_search_lower_ms(ts), 12);
    CU_ASSERT_EQUAL(pf_target_search_upper_ms(ts), 16);
    CU_ASSERT_EQUAL(pf_target_search_take_withdrawn(ts, gone, 2), 1);
    CU_ASSERT_EQUAL(gone[0], 4);
    CU_ASSERT(!pf_target_search_propose(ts, &t));
    pf_target_search_destroy(&ts);
}

/* K = 3 rounds split the interval evenly and move the bounds once the round is in, whatever
 * order its answers come in: [0, 16] -> 4, 8, 12 (none, 6, 12) -> [4, 6] -> 4.5, 5, 5.5 (none,
 * 5, 5) -> [4.5, 5] -> 4.625, 4.75, 4.875 (none) -> [4.875, 5] -> 4.90625, 4.9375, 4.96875
 * (none) -> [4.96875, 5], converged. */
static void run_rounds(int reverse)
{
    const double want[4][3] = {{4, 8, 12}, {4.5, 5, 5.5}, {4.625, 4.75, 4.875},
                               {4.90625, 4.9375, 4.96875}};
    pf_target_search_t *ts = new_search(PF_TARGET_SEARCH_ROUNDS, 3, 0);
    int r = 0, devs[3];
    double t[3];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ts);
    for (;;) {
        int k = 0;
        while (k < 3 && pf_target_search_propose(ts, &t[k])) {
            pf_target_search_sent(ts, (uint64_t)k);
            k++;
        }
        if (k == 0)
            break;
        CU_ASSERT_FATAL(r < 4 && k == 3);
        CU_ASSERT(!pf_target_search_propose(ts, &t[0]) || k < 3); /* waiting for the round */
        for (int i = 0; i < 3; i++)
            CU_ASSERT_EQUAL(t[i], want[r][i]);
        for (int j = 0; j < 3; j++) {
            int i = reverse ? 2 - j : j;
            pf_target_answer_t a = oracle(t[i], &devs[i]);
            pf_target_search_absorb(ts, (uint64_t)i, &a);
            if (j < 2) /* bounds move only when the whole round is in */
                CU_ASSERT_EQUAL(pf_target_search_upper_ms(ts), r == 0 ? 16 : r == 1 ? 6 : 5);
        }
        r++;
    }
    CU_ASSERT_EQUAL(r, 4);
    CU_ASSERT(pf_target_search_done(ts));
    CU_ASSERT_EQUAL(pf_target_search_lower_ms(ts), 4.96875);
    CU_ASSERT_EQUAL(pf_target_search_upper_ms(ts), 5);
    CU_ASSERT_EQUAL(pf_target_search_best(ts)[0], 5);
    pf_target_search_destroy(&ts);
}

static void test_rounds(void)
{
    run_rounds(0);
    run_rounds(1);
}

/* A round that moves neither bound ends the search: its one probe was cancelled. */
static void test_rounds_no_progress(void)
{
    pf_target_search_t *ts = new_search(PF_TARGET_SEARCH_ROUNDS, 1, 0);
    pf_target_answer_t a = {PF_TARGET_CANCELLED, 0, NULL};
    double t;
    CU_ASSERT_PTR_NOT_NULL_FATAL(ts);
    CU_ASSERT(pf_target_search_propose(ts, &t) && t == 8);
    pf_target_search_sent(ts, 0);
    pf_target_search_absorb(ts, 0, &a);
    CU_ASSERT(pf_target_search_done(ts));
    CU_ASSERT(!pf_target_search_propose(ts, &t));
    CU_ASSERT_EQUAL(pf_target_search_lower_ms(ts), 0);
    CU_ASSERT_EQUAL(pf_target_search_upper_ms(ts), 16);
    pf_target_search_destroy(&ts);
}

/* Bounds that are adjacent doubles leave no target strictly inside: over at once, under both
 * policies, even with rel_eps 0. A lower bound above the upper one is converged. */
static void test_adjacent_bounds(void)
{
    int dev = 0;
    double t, lo = 1, hi = nextafter(1, 2);
    for (int p = 0; p < 2; p++) {
        pf_target_search_opts_t o = {(pf_target_search_policy_t)p, 2, 0, 0};
        pf_target_search_t *ts = pf_target_search_new(&o, lo, hi, &dev, 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ts);
        CU_ASSERT(!pf_target_search_propose(ts, &t));
        CU_ASSERT(pf_target_search_done(ts));
        pf_target_search_destroy(&ts);
        ts = pf_target_search_new(&o, hi, lo, &dev, 1);
        CU_ASSERT(!pf_target_search_propose(ts, &t));
        CU_ASSERT(pf_target_search_done(ts));
        CU_ASSERT_EQUAL(pf_target_search_lower_ms(ts), hi); /* not reordered */
        pf_target_search_destroy(&ts);
    }
    pf_target_search_opts_t bad = {PF_TARGET_SEARCH_STREAM, 0, 0, 0};
    CU_ASSERT_PTR_NULL(pf_target_search_new(&bad, lo, hi, &dev, 1));
}

void pf_suite_target_search(void)
{
    CU_pSuite s = CU_add_suite("target_search", NULL, NULL);
    CU_add_test(s, "STREAM, W = 1: bisection to the optimum", test_stream_bisection);
    CU_add_test(s, "STREAM, W = 4: widest gaps, withdrawals, late answers", test_stream_width);
    CU_add_test(s, "STREAM: a limit on timed-out probes ends the search", test_stream_timeouts);
    CU_add_test(s, "ROUNDS, K = 3: even splits, absorbed a round at a time", test_rounds);
    CU_add_test(s, "ROUNDS: a round that moves nothing ends the search", test_rounds_no_progress);
    CU_add_test(s, "adjacent bounds, reversed bounds, bad options", test_adjacent_bounds);
}
