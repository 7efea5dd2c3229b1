#include "planner/partition/downsets.h"
#include "planner/core/util.h"

#include <stdlib.h>
#include <string.h>

struct pf_downsets {
    long long count;
    size_t cap_bits, cap_pop; /* allocated entries of bits (in sets) and pop */
    int words;
    uint64_t *bits; /* count x words */
    int *pop;
};

typedef struct {
    const pf_graph_t *g;
    int n, words;
    const int *topo;
    int *missing;      /* per op: predecessors not yet in the current set */
    int *next, *chosen; /* per depth 0..n (see walk) */
    uint64_t *cur;
    long long found, cap;
    pf_downsets_t *out; /* NULL when only counting */
    int oom;
} walk_t;

static int store(walk_t *w, int pop)
{
    pf_downsets_t *ds = w->out;
    size_t need = (size_t)ds->count + 1;
    if (pf_grow((void **)&ds->bits, &ds->cap_bits, need, (size_t)ds->words * sizeof *ds->bits) ||
        pf_grow((void **)&ds->pop, &ds->cap_pop, need, sizeof *ds->pop))
        return -1;
    memcpy(ds->bits + (size_t)ds->count * ds->words, w->cur, (size_t)ds->words * sizeof(uint64_t));
    ds->pop[ds->count++] = pop;
    return 0;
}

/* Count (and store) the current set of `pop` ops; 0 when the walk must stop (past the cap, or
 * out of memory). found ends at cap + 1 when there are more than cap downsets. */
static int visit(walk_t *w, int pop)
{
    if (w->found >= w->cap || w->oom) {
        w->found++;
        return 0;
    }
    w->found++;
    if (w->out && store(w, pop) != 0) {
        w->oom = 1;
        return 0;
    }
    return 1;
}

static void add_op(walk_t *w, int v, int delta)
{
    int cnt;
    const int *out = pf_graph_out(w->g, v, &cnt);
    if (delta < 0)
        pf_bit_set(w->cur, v);
    else
        pf_bit_clear(w->cur, v);
    for (int k = 0; k < cnt; k++)
        w->missing[pf_graph_edge(w->g, out[k])->dst] += delta;
}

/* Depth-first from the empty set, children in increasing topological position. Iterative: the
 * depth reaches the size of the largest downset visited (n for a chain), and solver threads may
 * have small stacks. next[d] = the next position to try below the set of depth d; chosen[d] = the
 * op that depth d added. */
static void walk(walk_t *w)
{
    int depth = 0;
    if (!visit(w, 0))
        return;
    w->next[0] = 0;
    for (;;) {
        int pos = w->next[depth];
        while (pos < w->n && w->missing[w->topo[pos]] != 0)
            pos++;
        if (pos >= w->n) { /* no child left: back to the parent */
            if (depth == 0)
                return;
            add_op(w, w->chosen[depth], +1);
            depth--;
            continue;
        }
        w->next[depth] = pos + 1;
        int v = w->topo[pos];
        add_op(w, v, -1);
        depth++;
        w->chosen[depth] = v;
        w->next[depth] = pos + 1; /* a child's op lies after every op of the set */
        if (!visit(w, depth))
            return;
    }
}

static long long run(const pf_graph_t *g, long long cap, pf_downsets_t *out, int *oom)
{
    walk_t w = {0};
    w.g = g;
    w.n = pf_graph_nops(g);
    w.words = (w.n + 63) / 64;
    w.topo = pf_graph_topo(g);
    w.cap = cap;
    w.out = out;
    w.missing = calloc((size_t)w.n, sizeof *w.missing);
    w.cur = calloc((size_t)w.words, sizeof *w.cur);
    w.next = malloc(((size_t)w.n + 1) * sizeof *w.next);
    w.chosen = malloc(((size_t)w.n + 1) * sizeof *w.chosen);
    if (!w.missing || !w.cur || !w.next || !w.chosen) {
        *oom = 1;
        goto done;
    }
    for (int v = 0; v < w.n; v++)
        pf_graph_in(g, v, &w.missing[v]);
    walk(&w);
    *oom = w.oom;
done:
    free(w.missing);
    free(w.cur);
    free(w.next);
    free(w.chosen);
    return w.found;
}

long long pf_downsets_count(const pf_graph_t *g, long long cap)
{
    int oom = 0;
    long long n = run(g, cap, NULL, &oom);
    return n > cap ? -1 : n;
}


/* Reorder by size with a counting sort (sizes are 0..n): stable, O(count). */
static int sort_by_size(pf_downsets_t *ds, int n)
{
    long long *start = calloc((size_t)n + 2, sizeof *start);
    uint64_t *bits = malloc((size_t)ds->count * (size_t)ds->words * sizeof *bits);
    int *pop = malloc((size_t)ds->count * sizeof *pop);
    if (!start || !bits || !pop) {
        free(start);
        free(bits);
        free(pop);
        return -1;
    }
    for (long long i = 0; i < ds->count; i++)
        start[ds->pop[i] + 1]++;
    for (int k = 0; k <= n; k++)
        start[k + 1] += start[k];
    for (long long i = 0; i < ds->count; i++) {
        long long j = start[ds->pop[i]]++;
        memcpy(bits + (size_t)j * ds->words, ds->bits + (size_t)i * ds->words,
               (size_t)ds->words * sizeof *bits);
        pop[j] = ds->pop[i];
    }
    free(start);
    free(ds->bits);
    free(ds->pop);
    ds->bits = bits;
    ds->pop = pop;
    ds->cap_bits = ds->cap_pop = (size_t)ds->count;
    return 0;
}

pf_downsets_t *pf_downsets_enumerate(const pf_graph_t *g, long long cap, int *capped)
{
    int oom = 0;
    *capped = 0;
    pf_downsets_t *ds = calloc(1, sizeof *ds);
    if (!ds)
        return NULL;
    ds->words = (pf_graph_nops(g) + 63) / 64;
    long long found = run(g, cap, ds, &oom);
    if (oom || found > cap) {
        *capped = !oom;
        pf_downsets_destroy(&ds);
        return NULL;
    }
    if (sort_by_size(ds, pf_graph_nops(g)) != 0)
        pf_downsets_destroy(&ds);
    return ds;
}

pf_downsets_t *pf_downsets_topo_prefixes(const pf_graph_t *g)
{
    int n = pf_graph_nops(g);
    pf_downsets_t *ds = calloc(1, sizeof *ds);
    if (!ds)
        return NULL;
    ds->words = (n + 63) / 64;
    ds->count = n + 1;
    ds->cap_bits = ds->cap_pop = (size_t)n + 1;
    ds->bits = calloc((size_t)(n + 1) * (size_t)ds->words, sizeof *ds->bits);
    ds->pop = malloc((size_t)(n + 1) * sizeof *ds->pop);
    if (!ds->bits || !ds->pop) {
        pf_downsets_destroy(&ds);
        return NULL;
    }
    const int *topo = pf_graph_topo(g);
    for (int i = 0; i <= n; i++) {
        uint64_t *b = ds->bits + (size_t)i * ds->words;
        if (i > 0) {
            memcpy(b, b - ds->words, (size_t)ds->words * sizeof *b);
            pf_bit_set(b, topo[i - 1]);
        }
        ds->pop[i] = i;
    }
    return ds;
}

void pf_downsets_destroy(pf_downsets_t **dsp)
{
    if (!dsp || !*dsp)
        return;
    free((*dsp)->bits);
    free((*dsp)->pop);
    free(*dsp);
    *dsp = NULL;
}

long long pf_downsets_size(const pf_downsets_t *ds) { return ds->count; }
int pf_downsets_words(const pf_downsets_t *ds) { return ds->words; }
int pf_downsets_popcount(const pf_downsets_t *ds, long long i) { return ds->pop[i]; }

const uint64_t *pf_downsets_get(const pf_downsets_t *ds, long long i)
{
    return ds->bits + (size_t)i * ds->words;
}
