/* readyheap: pops in (ready time, index) order against a sort of the same entries; interleaved
 * pushes and pops as the simulators make them (never earlier than the last pop). */
#include "planner/sim/readyheap.h"
#include "planner/core/rng.h"
#include "tests/testutil.h"

#include <stdlib.h>

static int cmp_ent(const void *pa, const void *pb)
{
    const pf_readyheap_ent_t *a = pa, *b = pb;
    if (a->ready_ms != b->ready_ms)
        return a->ready_ms < b->ready_ms ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* 2,000 entries, ready times from 50 values (many ties): the pops are the sorted order. */
static void test_against_sort(void)
{
    enum { N = 2000 };
    static pf_readyheap_ent_t h[N], want[N];
    pf_rng_t rng;
    pf_rng_seed(&rng, 7);
    size_t n = 0;
    for (int i = 0; i < N; i++) {
        want[i] = (pf_readyheap_ent_t){(double)pf_rng_below(&rng, 50), (int)pf_rng_below(&rng, 1 << 20)};
        pf_readyheap_push(h, &n, want[i].ready_ms, want[i].id);
    }
    qsort(want, N, sizeof *want, cmp_ent);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += pf_readyheap_pop(h, &n) != want[i].id;
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(n, 0);
}

/* A simulator's use: pop one, push its successors no earlier than it; the times popped never
 * fall and a tie pops the smaller index first. */
static void test_time_order(void)
{
    static pf_readyheap_ent_t h[4096];
    pf_rng_t rng;
    pf_rng_seed(&rng, 11);
    size_t n = 0;
    int next = 0, popped = 0, bad = 0;
    pf_readyheap_push(h, &n, 0, next++);
    double last = 0;
    int last_id = -1;
    while (n && popped < 3000) {
        double t = h[0].ready_ms;
        int id = pf_readyheap_pop(h, &n);
        bad += t < last || (t == last && id < last_id);
        last = t, last_id = id, popped++;
        for (int k = 1 + (int)pf_rng_below(&rng, 2); k > 0 && n < 4000; k--)
            pf_readyheap_push(h, &n, t + (double)pf_rng_below(&rng, 3), next++);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(popped, 3000);
}

void pf_suite_readyheap(void)
{
    CU_pSuite s = CU_add_suite("readyheap", NULL, NULL);
    CU_add_test(s, "pops in (ready, index) order: against qsort", test_against_sort);
    CU_add_test(s, "pushes no earlier than the last pop: times never fall", test_time_order);
}
