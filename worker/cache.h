/* cache: a worker's decoded blobs (graphs and clusters named by the hash of their serialized
 * bytes), bounded by the bytes of those blobs and evicted least recently used first. A job pins
 * the entries it runs on; a pinned entry is never evicted, so the cache may exceed its bound
 * while more pinned bytes than that are in use. */
#ifndef PF_CACHE_H
#define PF_CACHE_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pf_cache pf_cache_t;
typedef struct pf_cache_entry pf_cache_entry_t;

pf_cache_t *pf_cache_new(size_t cap_bytes);
void pf_cache_destroy(pf_cache_t **c);

/* The entry for a hash (now the most recently used), or NULL. */
pf_cache_entry_t *pf_cache_lookup(pf_cache_t *c, const uint8_t *hash, size_t hash_len);
/* Insert a decoded graph or cluster (exactly one non-NULL; ownership taken, also on failure);
 * `bytes` is the size of its blob. Returns the entry, NULL when out of memory. An entry already
 * there for the hash is returned and the new object destroyed. Unpinned entries are evicted
 * while the total is above the bound. */
pf_cache_entry_t *pf_cache_insert(pf_cache_t *c, const uint8_t *hash, size_t hash_len,
                                  pf_graph_t *graph, pf_cluster_t *cluster, size_t bytes);

void pf_cache_pin(pf_cache_entry_t *e);
void pf_cache_unpin(pf_cache_t *c, pf_cache_entry_t *e);

const pf_graph_t *pf_cache_entry_graph(const pf_cache_entry_t *e);     /* NULL for a cluster */
const pf_cluster_t *pf_cache_entry_cluster(const pf_cache_entry_t *e); /* NULL for a graph */

size_t pf_cache_bytes(const pf_cache_t *c);
size_t pf_cache_count(const pf_cache_t *c);

#endif
