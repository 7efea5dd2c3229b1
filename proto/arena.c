#include "proto/arena.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    alignas(max_align_t) unsigned char data[];
} chunk_t;

struct pf_arena {
    chunk_t *head;
};

pf_arena_t *pf_arena_new(void)
{
    return calloc(1, sizeof(pf_arena_t));
}

void pf_arena_destroy(pf_arena_t **ap)
{
    if (!ap || !*ap)
        return;
    for (chunk_t *c = (*ap)->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(*ap);
    *ap = NULL;
}

void *pf_arena_alloc(pf_arena_t *a, size_t size)
{
    size = (size + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
    if (size == 0)
        size = alignof(max_align_t);
    chunk_t *c = a->head;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > 65536 ? size : 65536;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}
