/* id_table: a CZMQ hash table keyed by the 64-bit job id that each item holds itself (the key
 * pointer points at the item's id; nothing is copied): the dispatch core's jobs and the client
 * lanes' (broker/dispatch.c, broker/fair.c). Apart so that neither header needs CZMQ. */
#ifndef PF_ID_TABLE_H
#define PF_ID_TABLE_H

#include <czmq.h>

zhashx_t *pf_id_table_new(void);

#endif
