/* downsets: the fronted subgraphs of Parmesan Def. 2 (sets closed under predecessors), as
 * bitsets over op indices.
 *
 * Enumeration is a reverse search with no hash set: the parent of a non-empty downset I is
 * I minus its op of highest topological position (always a sink of I, so the parent is a
 * downset). The children of I are therefore I + {v} for every v whose predecessors all lie in I
 * and whose topological position exceeds every position in I; a depth-first walk from the empty
 * set meets each downset exactly once, in O(n) work per downset. */
#ifndef PF_DOWNSETS_H
#define PF_DOWNSETS_H

#include "planner/ir/graph.h"

#include <stdint.h>

typedef struct pf_downsets pf_downsets_t;

/* All downsets of g, the empty set and V included, sorted by size (so every downset comes
 * after all of its subsets). Stops when more than `cap` exist: then *capped = 1 and NULL is
 * returned. NULL with *capped = 0 means out of memory. */
pf_downsets_t *pf_downsets_enumerate(const pf_graph_t *g, long long cap, int *capped);
/* The n + 1 prefixes of g's topological order: what Alpa and PipeDream search. */
pf_downsets_t *pf_downsets_topo_prefixes(const pf_graph_t *g);
void pf_downsets_destroy(pf_downsets_t **ds);

/* Number of downsets, or -1 when there are more than cap. */
long long pf_downsets_count(const pf_graph_t *g, long long cap);

long long pf_downsets_size(const pf_downsets_t *ds);
int pf_downsets_words(const pf_downsets_t *ds); /* uint64_t words per bitset */
const uint64_t *pf_downsets_get(const pf_downsets_t *ds, long long i);
int pf_downsets_popcount(const pf_downsets_t *ds, long long i);

static inline int pf_bit_test(const uint64_t *b, int v)
{
    return (int)((b[v >> 6] >> (v & 63)) & 1u);
}

static inline void pf_bit_set(uint64_t *b, int v)
{
    b[v >> 6] |= (uint64_t)1 << (v & 63);
}

static inline void pf_bit_clear(uint64_t *b, int v)
{
    b[v >> 6] &= ~((uint64_t)1 << (v & 63));
}

#endif
