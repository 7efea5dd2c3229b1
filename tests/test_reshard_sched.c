/* reshard_sched: Zhuang et al. (Sec. 3.2) schedulers against hand-worked schedules and brute force. */
#include "planner/sim/reshard_sched.h"
#include "planner/core/rng.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdlib.h>

/* Hosts 0, 1 send; 2, 3 receive. Tasks (receiver, candidates with ms):
 *  t0 -> {2}, from 0 (4 ms) or 1 (4 ms);  t1 -> {2}, from 0 (3) or 1 (3);
 *  t2 -> {3}, from 0 (2) or 1 (2);        t3 -> {3}, only from 0 (1).
 * Naive: all from host 0 in index order: host 0 is busy 4 + 3 + 2 + 1 = 10 ms.
 * LPT (eq. 4): order t0 (4), t1 (3), t2 (2), t3 (1); t0 -> host 0 (tie: lower candidate),
 * t1 -> host 1 (load 0 < 4), t2 -> host 1 (3 < 4), t3 -> host 0 (its only one).
 * List schedule: t0 [0,4) on 0,2; t1 waits for host 2: [4,7) on 1,2; t2 waits for host 1:
 * [7,9) on 1,3; t3 waits for host 0 (4) and host 3 (9): [9,10). Makespan 10.
 * Optimum: host 2 must receive 4 + 3 = 7 ms; t0 from 0 [0,4), t2 from 1 [0,2), t3 from 0
 * [4,5), t1 from 1 [4,7): 7 ms, which the DFS and the greedy find. */
static pf_reshard_sched_t *small_case(void)
{
    pf_reshard_sched_t *s = pf_reshard_sched_new(4, NULL, 0);
    int r2 = 2, r3 = 3, c01[] = {0, 1}, c0[] = {0};
    double m4[] = {4, 4}, m3[] = {3, 3}, m2[] = {2, 2}, m1[] = {1};
    pf_reshard_sched_add_task(s, 1, &r2, 2, c01, m4, NULL, 0);
    pf_reshard_sched_add_task(s, 1, &r2, 2, c01, m3, NULL, 0);
    pf_reshard_sched_add_task(s, 1, &r3, 2, c01, m2, NULL, 0);
    pf_reshard_sched_add_task(s, 1, &r3, 1, c0, m1, NULL, 0);
    return s;
}

static void test_hand_worked(void)
{
    pf_reshard_sched_t *s = small_case();
    pf_reshard_sched_opts_t o;
    pf_reshard_sched_opts_default(&o);
    o.dfs_budget_s = 0;
    pf_reshard_sched_result_t r;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(pf_reshard_sched_solve(s, PF_RESHARD_SCHED_BEST, &o, &r, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(r.algo_ms[PF_RESHARD_SCHED_NAIVE], 10.0, 1e-12);
    PF_ASSERT_CLOSE(r.algo_ms[PF_RESHARD_SCHED_LPT], 10.0, 1e-12);
    PF_ASSERT_CLOSE(r.algo_ms[PF_RESHARD_SCHED_DFS], 7.0, 1e-12);
    PF_ASSERT_CLOSE(r.algo_ms[PF_RESHARD_SCHED_GREEDY], 7.0, 1e-12);
    PF_ASSERT_CLOSE(r.makespan_ms, 7.0, 1e-12);
    CU_ASSERT(r.dfs_complete);
    int order[] = {0, 1, 2, 3}, cand[] = {0, 1, 1, 0};
    double start[4];
    PF_ASSERT_CLOSE(pf_reshard_sched_eval(s, order, cand, start), 10.0, 1e-12);
    PF_ASSERT_CLOSE(start[1], 4.0, 1e-12);
    PF_ASSERT_CLOSE(start[2], 7.0, 1e-12);
    PF_ASSERT_CLOSE(start[3], 9.0, 1e-12);
    pf_reshard_sched_result_free(&r);
    pf_reshard_sched_result_free(&r); /* idempotent */
    pf_reshard_sched_destroy(&s);
    CU_ASSERT_PTR_NULL(s);
    pf_reshard_sched_destroy(&s);
}

/* Every order x every sender assignment, by pf_reshard_sched_eval. */
static double brute(const pf_reshard_sched_t *s, int n, const int *ncand, int *perm, int depth,
                    int *cand)
{
    if (depth == n) {
        int idx[8] = {0};
        double best = INFINITY;
        for (;;) {
            for (int t = 0; t < n; t++)
                cand[t] = idx[t];
            best = fmin(best, pf_reshard_sched_eval(s, perm, cand, NULL));
            int t = 0;
            while (t < n && ++idx[t] == ncand[t])
                idx[t++] = 0;
            if (t == n)
                return best;
        }
    }
    double best = INFINITY;
    for (int i = depth; i < n; i++) {
        int tmp = perm[depth];
        perm[depth] = perm[i];
        perm[i] = tmp;
        best = fmin(best, brute(s, n, ncand, perm, depth + 1, cand));
        perm[i] = perm[depth];
        perm[depth] = tmp;
    }
    return best;
}

/* Random instances of up to 6 tasks on 4 hosts, durations drawn from a few values so that
 * identical tasks (the DFS's class pruning) occur. */
static void test_dfs_equals_brute_force(void)
{
    pf_rng_t rng;
    pf_rng_seed(&rng, 3);
    int checked = 0;
    for (int inst = 0; inst < 60; inst++) {
        int nhosts = 3 + (int)pf_rng_below(&rng, 2), n = 2 + (int)pf_rng_below(&rng, 5);
        pf_reshard_sched_t *s = pf_reshard_sched_new(nhosts, NULL, 0);
        int ncand[8], perm[8], cand[8];
        for (int t = 0; t < n; t++) {
            int hs[4] = {0, 1, 2, 3};
            for (int i = nhosts - 1; i > 0; i--) {
                int j = (int)pf_rng_below(&rng, (uint64_t)i + 1), x = hs[i];
                hs[i] = hs[j];
                hs[j] = x;
            }
            int nr = 1 + (int)pf_rng_below(&rng, 2);
            ncand[t] = 1 + (int)pf_rng_below(&rng, (uint64_t)(nhosts - nr));
            double ms[4];
            for (int k = 0; k < ncand[t]; k++)
                ms[k] = 1 + (double)pf_rng_below(&rng, 3);
            CU_ASSERT_EQUAL(pf_reshard_sched_add_task(s, nr, hs, ncand[t], hs + nr, ms, NULL, 0), t);
            perm[t] = t;
        }
        double want = brute(s, n, ncand, perm, 0, cand);
        pf_reshard_sched_opts_t o;
        pf_reshard_sched_opts_default(&o);
        o.dfs_budget_s = 0;
        o.dfs_node_cap = 0;
        pf_reshard_sched_result_t r;
        CU_ASSERT_EQUAL_FATAL(pf_reshard_sched_solve(s, PF_RESHARD_SCHED_DFS, &o, &r, NULL, 0), PF_OK);
        CU_ASSERT(r.dfs_complete);
        PF_ASSERT_CLOSE(r.makespan_ms, want, 1e-12);
        checked += r.makespan_ms == want;
        pf_reshard_sched_result_free(&r);
        pf_reshard_sched_destroy(&s);
    }
    CU_ASSERT_EQUAL(checked, 60);
}

static void test_bad_input(void)
{
    char err[256];
    CU_ASSERT_PTR_NULL(pf_reshard_sched_new(0, err, sizeof err));
    pf_reshard_sched_t *s = pf_reshard_sched_new(2, err, sizeof err);
    int h0 = 0, h5 = 5, dup[] = {1, 1};
    double ms = 1, bad = -1, two[] = {1, 1};
    CU_ASSERT_EQUAL(pf_reshard_sched_add_task(s, 1, &h5, 1, &h0, &ms, err, sizeof err), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_reshard_sched_add_task(s, 1, &h0, 2, dup, two, err, sizeof err), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_reshard_sched_add_task(s, 1, &h0, 1, &h0, &bad, err, sizeof err), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_reshard_sched_add_task(s, 0, &h0, 1, &h0, &ms, err, sizeof err), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_reshard_sched_ntasks(s), 0);
    pf_reshard_sched_algo_t a;
    CU_ASSERT_EQUAL(pf_reshard_sched_algo_parse("lpt", &a, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(a, PF_RESHARD_SCHED_LPT);
    CU_ASSERT_EQUAL(pf_reshard_sched_algo_parse("fast", &a, err, sizeof err), PF_EINPUT);
    pf_reshard_sched_destroy(&s);
}

void pf_suite_reshard_sched(void)
{
    CU_pSuite s = CU_add_suite("reshard_sched", NULL, NULL);
    CU_add_test(s, "naive, LPT (eq. 4), DFS and greedy on a hand-worked case", test_hand_worked);
    CU_add_test(s, "DFS equals brute force on 60 tiny instances", test_dfs_equals_brute_force);
    CU_add_test(s, "bad tasks and names are refused", test_bad_input);
}
