/* downsets: the reverse-search enumeration against a scan of all 2^n subsets. */
#include "planner/partition/downsets.h"
#include "tests/testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_brute_force(void)
{
    for (uint64_t seed = 1; seed <= 60; seed++) {
        int n = 2 + (int)(seed % 13); /* 2..14 ops */
        double p = (seed % 4) * 0.1;  /* from a tree to dense */
        pf_graph_t *g = pf_test_random_dag(seed, n, p);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        char *want = calloc((size_t)1 << n, 1);
        long long count = 0;
        for (uint32_t s = 0; s < (1u << n); s++)
            if ((want[s] = (char)pf_test_is_downset(g, s)))
                count++;
        int capped;
        pf_downsets_t *ds = pf_downsets_enumerate(g, 1 << 20, &capped);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
        CU_ASSERT_EQUAL(pf_downsets_size(ds), count);
        CU_ASSERT_EQUAL(pf_downsets_count(g, 1 << 20), count);
        char *seen = calloc((size_t)1 << n, 1);
        int prev_pop = 0, ok = 1;
        for (long long i = 0; i < pf_downsets_size(ds); i++) {
            uint32_t s = (uint32_t)pf_downsets_get(ds, i)[0];
            ok &= want[s] && !seen[s];
            seen[s] = 1;
            ok &= __builtin_popcount(s) == pf_downsets_popcount(ds, i);
            ok &= pf_downsets_popcount(ds, i) >= prev_pop; /* sorted by size */
            prev_pop = pf_downsets_popcount(ds, i);
        }
        CU_ASSERT(ok);
        /* the cap: exactly `count` fits, one less does not */
        CU_ASSERT_EQUAL(pf_downsets_count(g, count), count);
        CU_ASSERT_EQUAL(pf_downsets_count(g, count - 1), -1);
        CU_ASSERT_PTR_NULL(pf_downsets_enumerate(g, count - 1, &capped));
        CU_ASSERT_EQUAL(capped, 1);
        free(want);
        free(seen);
        pf_downsets_destroy(&ds);
        pf_graph_destroy(&g);
    }
}

static void test_chain_and_antichain(void)
{
    char err[128];
    /* A chain of n ops has n + 1 downsets (Theorem 2 plus the empty set); n independent ops
     * have 2^n. */
    pf_graph_t *chain = pf_graph_new("chain", 1), *flat = pf_graph_new("flat", 1);
    for (int i = 0; i < 20; i++) {
        pf_op_t op = {.id = i};
        pf_graph_add_op(chain, &op);
        pf_graph_add_op(flat, &op);
        if (i)
            pf_graph_add_edge(chain, i - 1, i, 1);
    }
    pf_graph_finalize(chain, err, sizeof err);
    pf_graph_finalize(flat, err, sizeof err);
    CU_ASSERT_EQUAL(pf_downsets_count(chain, 1000), 21);
    CU_ASSERT_EQUAL(pf_downsets_count(flat, 1 << 21), 1 << 20);
    CU_ASSERT_EQUAL(pf_downsets_count(flat, 1000), -1);
    pf_downsets_t *pre = pf_downsets_topo_prefixes(flat);
    CU_ASSERT_EQUAL(pf_downsets_size(pre), 21);
    CU_ASSERT_EQUAL(pf_downsets_popcount(pre, 20), 20);
    CU_ASSERT_EQUAL(pf_downsets_get(pre, 3)[0], 7u); /* ops 0, 1, 2 */
    pf_downsets_destroy(&pre);
    pf_graph_destroy(&chain);
    pf_graph_destroy(&flat);
}

/* The walk goes as deep as the largest downset it reaches before the cap: a chain of n ops is
 * walked n deep. Solver threads (workers, OpenMP) may have small stacks, so the depth must not
 * cost stack: count and enumerate a 10,000-op chain (cap 8,000: the walk reaches depth 8,000 and
 * stops; cap 20,000: every prefix, 10,001 downsets) in a thread with a 512 KiB stack (a recursive
 * walk needs ~100 bytes a level). */
typedef struct {
    const pf_graph_t *g;
    long long over, all, enumerated;
} deep_t;

static void *deep_walk(void *arg)
{
    deep_t *d = arg;
    int capped;
    d->over = pf_downsets_count(d->g, 8000);
    d->all = pf_downsets_count(d->g, 20000);
    pf_downsets_t *ds = pf_downsets_enumerate(d->g, 20000, &capped);
    d->enumerated = ds ? pf_downsets_size(ds) : -2;
    pf_downsets_destroy(&ds);
    return NULL;
}

static void test_deep_chain(void)
{
    enum { N = 10000 };
    char err[128];
    pf_graph_t *g = pf_graph_new("chain", 1);
    for (int i = 0; i < N; i++) {
        pf_op_t op = {.id = i, .name = "op"};
        pf_graph_add_op(g, &op);
        if (i > 0)
            pf_graph_add_edge(g, i - 1, i, 1);
    }
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), 0);
    deep_t d = {g, 0, 0, 0};
    pthread_attr_t attr;
    pthread_t th;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 19);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, &attr, deep_walk, &d), 0);
    pthread_join(th, NULL);
    pthread_attr_destroy(&attr);
    CU_ASSERT_EQUAL(d.over, -1);
    CU_ASSERT_EQUAL(d.all, N + 1);
    CU_ASSERT_EQUAL(d.enumerated, N + 1);
    pf_graph_destroy(&g);
}

void pf_suite_downsets(void)
{
    CU_pSuite s = CU_add_suite("downsets", NULL, NULL);
    CU_add_test(s, "enumeration equals a scan of all subsets (60 random DAGs)", test_brute_force);
    CU_add_test(s, "chain, antichain, cap, topological prefixes", test_chain_and_antichain);
    CU_add_test(s, "a 10,000-op chain on a 512 KiB stack", test_deep_chain);
}
