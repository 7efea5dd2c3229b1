/* readyheap: the simulators' ready queue (taskrun.c): a binary min-heap of tasks
 * by (ready time, task index), each entry carrying its ready time so that comparisons read no
 * task. Every push carries a ready time no earlier than the last one popped, so tasks pop in
 * time order, ties in index order: the same order on every machine. */
#ifndef PF_READYHEAP_H
#define PF_READYHEAP_H

#include <stddef.h>

typedef struct {
    double ready_ms;
    int id;
} pf_readyheap_ent_t;

/* Task id, ready at ready_ms, into the heap h of *n entries (room for one more). */
void pf_readyheap_push(pf_readyheap_ent_t *h, size_t *n, double ready_ms, int id);
/* The first task out of the heap (*n > 0): the least ready time, then the least index. */
int pf_readyheap_pop(pf_readyheap_ent_t *h, size_t *n);

#endif
