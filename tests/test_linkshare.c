/* linkshare: tiers from hosts, the lengthening of a transfer while the other queue uses its link
 * worked by hand, and against fair sharing computed step by step on random pairs. */
#include "planner/sim/linkshare.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdlib.h>

/* Devices 0, 1 on host 0, 2, 3 on host 1. */
static void test_tiers(void)
{
    pf_cluster_t *c = pf_cluster_new("2x2", 4);
    for (int i = 0; i < 4; i++) {
        pf_device_t d = {.id = i, .host = i / 2, .mem_bytes = 80e9};
        pf_cluster_set_device(c, i, &d);
    }
    CU_ASSERT_EQUAL(pf_linkshare_tier(c, 0, 1), PF_LINK_NVLINK);
    CU_ASSERT_EQUAL(pf_linkshare_tier(c, 1, 2), PF_LINK_NIC);
    CU_ASSERT_EQUAL(pf_linkshare_tier(c, 3, 0), PF_LINK_NIC);
    int devs[6] = {0, 2, 1, 3, 1, 2}; /* stride 2: {0, 1, 1}, {2, 3, 2}; stride 1: {0, 2} */
    CU_ASSERT_EQUAL(pf_linkshare_group_tier(c, devs, 3, 2), PF_LINK_NVLINK);
    CU_ASSERT_EQUAL(pf_linkshare_group_tier(c, devs + 1, 3, 2), PF_LINK_NVLINK);
    CU_ASSERT_EQUAL(pf_linkshare_group_tier(c, devs, 2, 1), PF_LINK_NIC);
    CU_ASSERT_EQUAL(pf_linkshare_group_tier(c, devs + 2, 2, 1), PF_LINK_NIC); /* {1, 3} */
    CU_ASSERT_EQUAL(pf_linkshare_group_tier(c, devs, 1, 1), PF_LINK_NVLINK);
    pf_cluster_destroy(&c);
}

/* A transfer of queue 0 on slot `slot` from start, dur alone: its time as committed (the times
 * below are exact in binary). */
static double commit1(pf_linkshare_t *ls, int slot, pf_link_tier_t tier, double start, double dur)
{
    CU_ASSERT_EQUAL(pf_linkshare_commit(ls, &slot, 1, 0, tier, start, &dur), PF_OK);
    return dur;
}

/* Slot 0's queue 1 (the buckets) holds [0, 10] on the NIC, one slot each case:
 *   a send at 2 of 3 ms: both at half rate, it ends at 2 + 2 x 3 = 8: 6 ms;
 *   a send at 2 of 10 ms: both at half rate until the bucket's last 8 ms are through (at 18),
 *     the send's last 2 ms alone: it ends at 20, 18 ms (the link carries the 10 + 10 ms without
 *     a pause); the bucket keeps its end, 10, where fair sharing ends it at 18;
 *   the same send on NVLink: 10 ms, nothing shared;
 *   a bucket committed before but starting later, [5, 9], and a send at 2 of 5: alone until 5
 *     (3 ms done), then 2 ms at half rate: ends 9, 7 ms (the window's overlap [5, 7]);
 *   buckets [0, 4] and [4, 6] on the NIC, [6, 20] on NVLink, a NIC send at 3 of 4 ms: overlap
 *     1 + 2 of its window [3, 7]: 7 ms. */
static void test_by_hand(void)
{
    pf_linkshare_t *ls = pf_linkshare_new(5, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ls);
    int q1[5] = {0, 1, 2, 3, 4};
    double d = 10;
    for (int i = 0; i < 3; i++) {
        d = 10;
        CU_ASSERT_EQUAL(pf_linkshare_commit(ls, q1 + i, 1, 1, PF_LINK_NIC, 0, &d), PF_OK);
        CU_ASSERT_EQUAL(d, 10); /* nothing on queue 0 yet */
    }
    CU_ASSERT_EQUAL(commit1(ls, 0, PF_LINK_NIC, 2, 3), 6);
    CU_ASSERT_EQUAL(commit1(ls, 1, PF_LINK_NIC, 2, 10), 18);
    CU_ASSERT_EQUAL(commit1(ls, 2, PF_LINK_NVLINK, 2, 10), 10);
    d = 4;
    CU_ASSERT_EQUAL(pf_linkshare_commit(ls, q1 + 3, 1, 1, PF_LINK_NIC, 5, &d), PF_OK);
    CU_ASSERT_EQUAL(commit1(ls, 3, PF_LINK_NIC, 2, 5), 7);
    double b[3][3] = {{0, 4, PF_LINK_NIC}, {4, 2, PF_LINK_NIC}, {6, 14, PF_LINK_NVLINK}};
    for (int i = 0; i < 3; i++) {
        d = b[i][1];
        CU_ASSERT_EQUAL(pf_linkshare_commit(ls, q1 + 4, 1, 1, (pf_link_tier_t)b[i][2], b[i][0], &d),
                        PF_OK);
    }
    CU_ASSERT_EQUAL(commit1(ls, 4, PF_LINK_NIC, 3, 4), 7);
    /* what is recorded: slot 0's send [2, 8] on queue 0; slot 4's buckets on both tiers */
    PF_ASSERT_CLOSE(pf_linkshare_busy_ms(ls, 0, 0, PF_LINK_NIC, 0, 100), 6, 1e-12);
    PF_ASSERT_CLOSE(pf_linkshare_busy_ms(ls, 0, 0, PF_LINK_NIC, 5, 7), 2, 1e-12);
    PF_ASSERT_CLOSE(pf_linkshare_busy_ms(ls, 0, 0, PF_LINK_NVLINK, 0, 100), 0, 1e-12);
    PF_ASSERT_CLOSE(pf_linkshare_busy_ms(ls, 4, 1, PF_LINK_NIC, 0, 100), 6, 1e-12);
    PF_ASSERT_CLOSE(pf_linkshare_busy_ms(ls, 4, 1, PF_LINK_NVLINK, 10, 100), 10, 1e-12);
    /* a transfer on two slots takes the longer: slot 2's queue 1 is free on the NIC, slot 0's
     * holds [0, 10]: a send at 9 of 2 ms overlaps 1 there */
    int two[2] = {2, 0};
    d = 2;
    CU_ASSERT_EQUAL(pf_linkshare_commit(ls, two, 2, 0, PF_LINK_NIC, 9, &d), PF_OK);
    PF_ASSERT_CLOSE(d, 3, 1e-12);
    pf_linkshare_destroy(&ls);
    pf_linkshare_destroy(&ls);
    CU_ASSERT_PTR_NULL(ls);
}

/* Fair sharing of one link by two transfers, event by event (each at full rate alone, at half
 * while both run): the end of the second. */
static double fair_end_b(double sa, double da, double sb, double db)
{
    double st[2] = {sa, sb}, rem[2] = {da, db}, t = fmin(sa, sb);
    while (rem[1] > 1e-12) {
        int on[2], n = 0;
        for (int j = 0; j < 2; j++)
            n += on[j] = t >= st[j] && rem[j] > 1e-12;
        double rate = n == 2 ? 0.5 : 1.0, next = INFINITY;
        for (int j = 0; j < 2; j++)
            next = fmin(next, on[j] ? t + rem[j] / rate : st[j] > t ? st[j] : INFINITY);
        for (int j = 0; j < 2; j++)
            rem[j] -= on[j] ? (next - t) * rate : 0;
        t = next;
    }
    return t;
}

/* Random pairs: a committed first (its window alone), then b, whichever starts first: b's end is
 * fair sharing's. */
static void test_fair_pairs(void)
{
    srand(21);
    for (int i = 0; i < 2000; i++) {
        double sa = rand() % 100 / 10.0, da = 0.1 + rand() % 100 / 10.0;
        double sb = rand() % 100 / 10.0, db = 0.1 + rand() % 100 / 10.0;
        pf_linkshare_t *ls = pf_linkshare_new(1, 2);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ls);
        int slot = 0;
        double a = da, b = db;
        CU_ASSERT_EQUAL(pf_linkshare_commit(ls, &slot, 1, 1, PF_LINK_NIC, sa, &a), PF_OK);
        CU_ASSERT_EQUAL(a, da);
        CU_ASSERT_EQUAL(pf_linkshare_commit(ls, &slot, 1, 0, PF_LINK_NIC, sb, &b), PF_OK);
        PF_ASSERT_CLOSE(sb + b, fair_end_b(sa, da, sb, db), 1e-9);
        CU_ASSERT(b <= 2 * db + 1e-12);
        pf_linkshare_destroy(&ls);
    }
}

/* One device's three queues (pf_linkshare_new_devices): a send [0, 4] and a receive [2, 6] on
 * the NIC take its two directions and do not slow each other; a collective at 0 of 10 ms there
 * is slowed by their union [0, 6], 6 ms (not their sum, 8): 16 ms; on NVLink by nothing. */
static void test_full_duplex(void)
{
    pf_linkshare_t *ls = pf_linkshare_new_devices(1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ls);
    int slot = 0, q = PF_LINKSHARE_SEND;
    double d = 4;
    CU_ASSERT_EQUAL(pf_linkshare_commit_lanes(ls, &slot, &q, 1, PF_LINK_NIC, 0, &d), PF_OK);
    CU_ASSERT_EQUAL(d, 4);
    q = PF_LINKSHARE_RECV;
    CU_ASSERT_EQUAL(pf_linkshare_commit_lanes(ls, &slot, &q, 1, PF_LINK_NIC, 2, &d), PF_OK);
    CU_ASSERT_EQUAL(d, 4);
    d = 10;
    CU_ASSERT_EQUAL(pf_linkshare_commit(ls, &slot, 1, PF_LINKSHARE_COLL, PF_LINK_NIC, 0, &d), PF_OK);
    CU_ASSERT_EQUAL(d, 16);
    d = 10;
    CU_ASSERT_EQUAL(pf_linkshare_commit(ls, &slot, 1, PF_LINKSHARE_COLL, PF_LINK_NVLINK, 20, &d),
                    PF_OK);
    CU_ASSERT_EQUAL(d, 10);
    /* a send after the collective [0, 16] overlaps it by 2 */
    q = PF_LINKSHARE_SEND;
    d = 4;
    CU_ASSERT_EQUAL(pf_linkshare_commit_lanes(ls, &slot, &q, 1, PF_LINK_NIC, 14, &d), PF_OK);
    CU_ASSERT_EQUAL(d, 6);
    pf_linkshare_destroy(&ls);
}

void pf_suite_linkshare(void)
{
    CU_pSuite s = CU_add_suite("linkshare", NULL, NULL);
    CU_add_test(s, "tiers: NVLink inside a host, the NIC across", test_tiers);
    CU_add_test(s, "a transfer lengthened by the other queue's use of its link, by hand",
                test_by_hand);
    CU_add_test(s, "the later-committed transfer of a pair ends as fair sharing ends it",
                test_fair_pairs);
    CU_add_test(s, "a send and a receive share nothing, a collective their union, by hand",
                test_full_duplex);
}
