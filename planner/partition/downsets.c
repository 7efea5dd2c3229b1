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
    const int *pos_of; /* per op: its topological position */
    int *missing;      /* per op: predecessors not yet in the current set */
    uint64_t *ready;   /* per topological position: bit set when missing is 0 */
    uint64_t *summary; /* per word of ready: bit set when that word is not 0 */
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

static void set_ready(walk_t *w, int pos, int on)
{
    int word = pos >> 6;
    if (on) {
        w->ready[word] |= 1ULL << (pos & 63);
        w->summary[word >> 6] |= 1ULL << (word & 63);
    } else {
        w->ready[word] &= ~(1ULL << (pos & 63));
        if (!w->ready[word])
            w->summary[word >> 6] &= ~(1ULL << (word & 63));
    }
}

/* The first position >= pos whose op has no missing predecessor, or n: two bitmap levels, so
 * backing out of a long chain costs O(n / 4096) per step instead of O(n). */
static int next_ready(const walk_t *w, int pos)
{
    if (pos >= w->n)
        return w->n;
    int word = pos >> 6;
    uint64_t m = w->ready[word] & (~0ULL << (pos & 63));
    if (m)
        return (word << 6) + __builtin_ctzll(m);
    int sw = (word + 1) >> 6, nsum = (w->words + 63) >> 6;
    if (sw >= nsum)
        return w->n;
    uint64_t s = (word + 1) & 63 ? w->summary[sw] & (~0ULL << ((word + 1) & 63)) : w->summary[sw];
    for (;;) {
        if (s) {
            int wd = (sw << 6) + __builtin_ctzll(s);
            return (wd << 6) + __builtin_ctzll(w->ready[wd]);
        }
        if (++sw >= nsum)
            return w->n;
        s = w->summary[sw];
    }
}

static void add_op(walk_t *w, int v, int delta)
{
    int cnt;
    const int *out = pf_graph_out(w->g, v, &cnt);
    if (delta < 0)
        pf_bit_set(w->cur, v);
    else
        pf_bit_clear(w->cur, v);
    for (int k = 0; k < cnt; k++) {
        int dst = pf_graph_edge(w->g, out[k])->dst;
        int was = w->missing[dst];
        w->missing[dst] += delta;
        if ((was == 0) != (w->missing[dst] == 0))
            set_ready(w, w->pos_of[dst], w->missing[dst] == 0);
    }
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
        int pos = next_ready(w, w->next[depth]);
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
    w.pos_of = pf_graph_topo_pos(g);
    w.missing = calloc((size_t)w.n, sizeof *w.missing);
    w.ready = calloc((size_t)w.words + 1, sizeof *w.ready);
    w.summary = calloc((size_t)(w.words + 63) / 64 + 1, sizeof *w.summary);
    w.cur = calloc((size_t)w.words, sizeof *w.cur);
    w.next = malloc(((size_t)w.n + 1) * sizeof *w.next);
    w.chosen = malloc(((size_t)w.n + 1) * sizeof *w.chosen);
    if (!w.missing || !w.ready || !w.summary || !w.cur || !w.next || !w.chosen) {
        *oom = 1;
        goto done;
    }
    for (int v = 0; v < w.n; v++) {
        pf_graph_in(g, v, &w.missing[v]);
        if (w.missing[v] == 0)
            set_ready(&w, w.pos_of[v], 1);
    }
    walk(&w);
    *oom = w.oom;
done:
    free(w.missing);
    free(w.ready);
    free(w.summary);
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
