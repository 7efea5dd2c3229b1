/* arena: the memory a decoded or to-be-encoded protobuf message is built in. Every nested
 * allocation goes away with the arena, so a codec that fails half-way frees nothing by hand. */
#ifndef PF_ARENA_H
#define PF_ARENA_H

#include <stddef.h>

typedef struct pf_arena pf_arena_t;
pf_arena_t *pf_arena_new(void);
void pf_arena_destroy(pf_arena_t **a);
void *pf_arena_alloc(pf_arena_t *a, size_t size); /* zeroed; NULL when out of memory */

/* Zeroed arena storage for n objects of a type. */
#define PF_ANEW(a, type, n) ((type *)pf_arena_alloc((a), sizeof(type) * (size_t)(n)))

#endif
