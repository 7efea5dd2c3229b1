#include "worker/cache.h"
#include "proto/job_codec.h"

#include <czmq.h>
#include <stdlib.h>
#include <string.h>

struct pf_cache_entry {
    char key[2 * PF_HASH_MAX + 1];
    pf_graph_t *graph;
    pf_cluster_t *cluster;
    size_t bytes;
    int pins;
    void *lru; /* handle in the LRU list: head = least recently used */
};

struct pf_cache {
    size_t cap, bytes;
    zhashx_t *entries; /* key -> pf_cache_entry_t */
    zlistx_t *lru;
};

static void entry_free(pf_cache_entry_t **ep)
{
    pf_cache_entry_t *e = *ep;
    if (!e)
        return;
    pf_graph_destroy(&e->graph);
    pf_cluster_destroy(&e->cluster);
    free(e);
    *ep = NULL;
}

static void entry_destructor(void **item)
{
    entry_free((pf_cache_entry_t **)item);
}

pf_cache_t *pf_cache_new(size_t cap_bytes)
{
    pf_cache_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cap = cap_bytes;
    c->entries = zhashx_new();
    c->lru = zlistx_new();
    if (!c->entries || !c->lru) {
        pf_cache_destroy(&c);
        return NULL;
    }
    zhashx_set_destructor(c->entries, entry_destructor);
    return c;
}

void pf_cache_destroy(pf_cache_t **cp)
{
    if (!cp || !*cp)
        return;
    zlistx_destroy(&(*cp)->lru);
    zhashx_destroy(&(*cp)->entries);
    free(*cp);
    *cp = NULL;
}

static void evict(pf_cache_t *c)
{
    void *h = zlistx_first(c->lru) ? zlistx_cursor(c->lru) : NULL;
    while (h && c->bytes > c->cap) {
        pf_cache_entry_t *e = zlistx_handle_item(h);
        void *next = zlistx_next(c->lru) ? zlistx_cursor(c->lru) : NULL;
        if (e->pins == 0) {
            zlistx_delete(c->lru, h);
            c->bytes -= e->bytes;
            zhashx_delete(c->entries, e->key); /* frees e */
        }
        h = next;
    }
}

pf_cache_entry_t *pf_cache_lookup(pf_cache_t *c, const uint8_t *hash, size_t hash_len)
{
    char key[2 * PF_HASH_MAX + 1];
    if (hash_len == 0 || hash_len > PF_HASH_MAX)
        return NULL;
    pf_wire_hex(hash, hash_len, key);
    pf_cache_entry_t *e = zhashx_lookup(c->entries, key);
    if (e)
        zlistx_move_end(c->lru, e->lru);
    return e;
}

pf_cache_entry_t *pf_cache_insert(pf_cache_t *c, const uint8_t *hash, size_t hash_len,
                                  pf_graph_t *graph, pf_cluster_t *cluster, size_t bytes)
{
    pf_cache_entry_t *e = pf_cache_lookup(c, hash, hash_len);
    if (e || hash_len == 0 || hash_len > PF_HASH_MAX || !(graph || cluster) ||
        !(e = calloc(1, sizeof *e))) {
        pf_graph_destroy(&graph);
        pf_cluster_destroy(&cluster);
        return e;
    }
    pf_wire_hex(hash, hash_len, e->key);
    e->graph = graph;
    e->cluster = graph ? NULL : cluster;
    if (graph)
        pf_cluster_destroy(&cluster);
    e->bytes = bytes;
    if (!(e->lru = zlistx_add_end(c->lru, e))) {
        entry_free(&e);
        return NULL;
    }
    if (zhashx_insert(c->entries, e->key, e) != 0) {
        zlistx_delete(c->lru, e->lru);
        entry_free(&e);
        return NULL;
    }
    c->bytes += bytes;
    e->pins++; /* the new entry survives its own insertion */
    evict(c);
    e->pins--;
    return e;
}

void pf_cache_pin(pf_cache_entry_t *e)
{
    if (e)
        e->pins++;
}

void pf_cache_unpin(pf_cache_t *c, pf_cache_entry_t *e)
{
    if (!e || e->pins == 0)
        return;
    if (--e->pins == 0)
        evict(c);
}

const pf_graph_t *pf_cache_entry_graph(const pf_cache_entry_t *e)
{
    return e ? e->graph : NULL;
}

const pf_cluster_t *pf_cache_entry_cluster(const pf_cache_entry_t *e)
{
    return e ? e->cluster : NULL;
}

size_t pf_cache_bytes(const pf_cache_t *c)
{
    return c->bytes;
}

size_t pf_cache_count(const pf_cache_t *c)
{
    return zhashx_size(c->entries);
}
