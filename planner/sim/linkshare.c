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
    queue_t *q; /* slot-major: slot s queue j at s nqueues + j */
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
    if (!(ls->q = calloc(n ? n : 1, sizeof *ls->q)))
        pf_linkshare_destroy(&ls);
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
    free(ls);
    *lp = NULL;
}

double pf_linkshare_busy_ms(const pf_linkshare_t *ls, int slot, int q, pf_link_tier_t tier,
                            double from_ms, double to_ms)
{
    const queue_t *qu = &ls->q[(size_t)slot * ls->nqueues + q];
    /* the first that starts at or after the window's end (buckets may be queued far ahead) */
    size_t lo = 0, hi = qu->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (qu->iv[mid].start_ms < to_ms)
            lo = mid + 1;
        else
            hi = mid;
    }
    double busy = 0;
    /* ends grow with starts: walk back until one ends before the window */
    for (size_t i = lo; i-- > 0 && qu->iv[i].end_ms > from_ms;)
        if (qu->iv[i].tier == (int)tier)
            busy += fmax(0, fmin(qu->iv[i].end_ms, to_ms) - fmax(qu->iv[i].start_ms, from_ms));
    return busy;
}

int pf_linkshare_commit(pf_linkshare_t *ls, const int *slots, int n, int q, pf_link_tier_t tier,
                        double start_ms, double *dur_ms)
{
    double extra = 0;
    for (int i = 0; i < n; i++) {
        double busy = 0;
        for (int j = 0; j < ls->nqueues; j++)
            if (j != q)
                busy += pf_linkshare_busy_ms(ls, slots[i], j, tier, start_ms, start_ms + *dur_ms);
        extra = fmax(extra, busy);
    }
    *dur_ms += extra;
    for (int i = 0; i < n; i++) {
        queue_t *qu = &ls->q[(size_t)slots[i] * ls->nqueues + q];
        if (pf_grow((void **)&qu->iv, &qu->cap, qu->n + 1, sizeof *qu->iv))
            return PF_ERR;
        qu->iv[qu->n++] = (busy_t){start_ms, start_ms + *dur_ms, (int)tier};
    }
    return PF_OK;
}
