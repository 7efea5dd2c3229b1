/* readyheap: the simulators' ready queue (readyheap.h). */
#include "planner/sim/readyheap.h"

#include <stdbool.h>

static bool less(pf_readyheap_ent_t a, pf_readyheap_ent_t b)
{
    return a.ready_ms < b.ready_ms || (a.ready_ms == b.ready_ms && a.id < b.id);
}

void pf_readyheap_push(pf_readyheap_ent_t *h, size_t *n, double ready_ms, int id)
{
    pf_readyheap_ent_t e = {ready_ms, id};
    size_t i = (*n)++;
    while (i > 0 && less(e, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

int pf_readyheap_pop(pf_readyheap_ent_t *h, size_t *n)
{
    int top = h[0].id;
    pf_readyheap_ent_t e = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= *n)
            break;
        if (l + 1 < *n && less(h[l + 1], h[l]))
            m = l + 1;
        if (!less(h[m], e))
            break;
        h[i] = h[m];
        i = m;
    }
    h[i] = e;
    return top;
}
