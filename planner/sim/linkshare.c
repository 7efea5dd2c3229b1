#include "planner/sim/linkshare.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    double start_ms, end_ms;
    int tier;
} busy_t;

typedef struct {
    busy_t *iv; /* in start order, disjoint: a queue serves one transfer at a time */
    size_t n, cap;
} queue_t;

struct pf_linkshare {
    int nslots, nqueues;
    queue_t *q;          /* slot-major: slot s queue j at s nqueues + j */
    unsigned *conflicts; /* per queue: the queues whose busy time slows it (bit j: queue j) */
    busy_t *scratch;     /* the windows of several queues, for their union */
    size_t scratch_cap;
};

pf_link_tier_t pf_linkshare_tier(const pf_cluster_t *c, int a, int b)
{
    return pf_cluster_device(c, a)->host != pf_cluster_device(c, b)->host ? PF_LINK_NIC
                                                                           : PF_LINK_NVLINK;
}

pf_link_tier_t pf_linkshare_group_tier(const pf_cluster_t *c, const int *devs, int n, int stride)
{
    for (int i = 1; i < n; i++)
        if (pf_linkshare_tier(c, devs[0], devs[(size_t)i * stride]) == PF_LINK_NIC)
            return PF_LINK_NIC;
    return PF_LINK_NVLINK;
}

pf_linkshare_t *pf_linkshare_new(int nslots, int nqueues)
{
    pf_linkshare_t *ls = calloc(1, sizeof *ls);
    if (!ls)
        return NULL;
    ls->nslots = nslots;
    ls->nqueues = nqueues;
    size_t n = (size_t)nslots * nqueues;
    if (nqueues < 1 || nqueues > 8 || !(ls->q = calloc(n ? n : 1, sizeof *ls->q)) ||
        !(ls->conflicts = malloc((size_t)nqueues * sizeof *ls->conflicts))) {
        pf_linkshare_destroy(&ls);
        return NULL;
    }
    for (int j = 0; j < nqueues; j++)
        ls->conflicts[j] = ((1u << nqueues) - 1) & ~(1u << j);
    return ls;
}

void pf_linkshare_destroy(pf_linkshare_t **lp)
{
    if (!lp || !*lp)
        return;
    pf_linkshare_t *ls = *lp;
    for (size_t i = 0; ls->q && i < (size_t)ls->nslots * ls->nqueues; i++)
        free(ls->q[i].iv);
    free(ls->q);
    free(ls->conflicts);
    free(ls->scratch);
    free(ls);
    *lp = NULL;
}

/* The index of the first transfer of qu that starts at or after to_ms (buckets may be queued
 * far ahead); ends grow with starts, so the ones before it that overlap a window ending at
 * to_ms are found by walking back. */
static size_t first_after(const queue_t *qu, double to_ms)
{
    size_t lo = 0, hi = qu->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (qu->iv[mid].start_ms < to_ms)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

double pf_linkshare_busy_ms(const pf_linkshare_t *ls, int slot, int q, pf_link_tier_t tier,
                            double from_ms, double to_ms)
{
    const queue_t *qu = &ls->q[(size_t)slot * ls->nqueues + q];
    double busy = 0;
    for (size_t i = first_after(qu, to_ms); i-- > 0 && qu->iv[i].end_ms > from_ms;)
        if (qu->iv[i].tier == (int)tier)
            busy += fmax(0, fmin(qu->iv[i].end_ms, to_ms) - fmax(qu->iv[i].start_ms, from_ms));
    return busy;
}

pf_linkshare_t *pf_linkshare_new_devices(int nslots)
{
    pf_linkshare_t *ls = pf_linkshare_new(nslots, PF_LINKSHARE_QUEUES);
    if (!ls)
        return NULL;
    pf_linkshare_set_conflicts(ls, PF_LINKSHARE_SEND, 1u << PF_LINKSHARE_COLL);
    pf_linkshare_set_conflicts(ls, PF_LINKSHARE_RECV, 1u << PF_LINKSHARE_COLL);
    return ls;
}

void pf_linkshare_set_conflicts(pf_linkshare_t *ls, int q, unsigned queues)
{
    ls->conflicts[q] = queues & ((1u << ls->nqueues) - 1) & ~(1u << q);
}

static int by_start(const void *a, const void *b)
{
    double x = ((const busy_t *)a)->start_ms, y = ((const busy_t *)b)->start_ms;
    return (x > y) - (x < y);
}

/* The time within [from_ms, to_ms] that any queue of `mask` of slot is busy on tier: one
 * queue's sum (its transfers never overlap), or the union of several (a device's send and
 * receive queues overlap: a link is full duplex). -1 when out of memory. */
static double union_busy_ms(pf_linkshare_t *ls, int slot, unsigned mask, pf_link_tier_t tier,
                            double from_ms, double to_ms)
{
    if ((mask & (mask - 1)) == 0) /* one queue, or none */
        return mask ? pf_linkshare_busy_ms(ls, slot, __builtin_ctz(mask), tier, from_ms, to_ms) : 0;
    size_t n = 0;
    for (int j = 0; j < ls->nqueues; j++) {
        const queue_t *qu = &ls->q[(size_t)slot * ls->nqueues + j];
        if (!(mask >> j & 1))
            continue;
        for (size_t i = first_after(qu, to_ms); i-- > 0 && qu->iv[i].end_ms > from_ms;) {
            const busy_t *b = &qu->iv[i];
            if (b->tier != (int)tier)
                continue;
            if (pf_grow((void **)&ls->scratch, &ls->scratch_cap, n + 1, sizeof *ls->scratch))
                return -1;
            ls->scratch[n++] = (busy_t){fmax(b->start_ms, from_ms), fmin(b->end_ms, to_ms), 0};
        }
    }
    if (n > 1) /* qsort of nothing would take the NULL scratch */
        qsort(ls->scratch, n, sizeof *ls->scratch, by_start);
    double busy = 0, end = from_ms;
    for (size_t i = 0; i < n; i++) {
        busy += fmax(0, ls->scratch[i].end_ms - fmax(ls->scratch[i].start_ms, end));
        end = fmax(end, ls->scratch[i].end_ms);
    }
    return busy;
}

/* The commit of both entry points: slot slots[i] on queue queues[i] (queues NULL: q). */
static int commit(pf_linkshare_t *ls, const int *slots, const int *queues, int q, int n,
                  pf_link_tier_t tier, double start_ms, double *dur_ms)
{
    double extra = 0;
    for (int i = 0; i < n; i++) {
        double busy = union_busy_ms(ls, slots[i], ls->conflicts[queues ? queues[i] : q], tier,
                                    start_ms, start_ms + *dur_ms);
        if (busy < 0)
            return PF_ERR;
        extra = fmax(extra, busy);
    }
    *dur_ms += extra;
    for (int i = 0; i < n; i++) {
        queue_t *qu = &ls->q[(size_t)slots[i] * ls->nqueues + (queues ? queues[i] : q)];
        if (pf_grow((void **)&qu->iv, &qu->cap, qu->n + 1, sizeof *qu->iv))
            return PF_ERR;
        qu->iv[qu->n++] = (busy_t){start_ms, start_ms + *dur_ms, (int)tier};
    }
    return PF_OK;
}

int pf_linkshare_commit_lanes(pf_linkshare_t *ls, const int *slots, const int *queues, int n,
                              pf_link_tier_t tier, double start_ms, double *dur_ms)
{
    return commit(ls, slots, queues, 0, n, tier, start_ms, dur_ms);
}

int pf_linkshare_commit(pf_linkshare_t *ls, const int *slots, int n, int q, pf_link_tier_t tier,
                        double start_ms, double *dur_ms)
{
    return commit(ls, slots, NULL, q, n, tier, start_ms, dur_ms);
}
