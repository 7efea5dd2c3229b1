/* blobstore: the broker's large inputs (serialized Graph and Cluster messages) named by the SHA-1
 * of their bytes (CZMQ zdigest). One copy per hash, counted by the requests that use it: the
 * second request for the same model shares the first one's blob, and a worker that cached it
 * for the first never fetches it again. */
#ifndef PF_BLOBSTORE_H
#define PF_BLOBSTORE_H

#include "proto/job_codec.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pf_blobstore pf_blobstore_t;

pf_blobstore_t *pf_blobstore_new(void);
void pf_blobstore_destroy(pf_blobstore_t **s);

/* Store *data (malloc'd, len bytes; ownership taken, *data set to NULL) of a Planfarm__BlobKind,
 * or add a reference to the copy already stored under the same hash. *ref names it. */
int pf_blobstore_put(pf_blobstore_t *s, int kind, uint8_t **data, size_t len, pf_blob_ref_t *ref);
/* Borrowed bytes of a stored blob: PF_OK, or PF_EINPUT when no blob has that hash. */
int pf_blobstore_get(pf_blobstore_t *s, const uint8_t *hash, size_t hash_len, int *kind,
                     const uint8_t **data, size_t *len);
/* Drop one reference; the bytes go with the last. */
void pf_blobstore_release(pf_blobstore_t *s, const pf_blob_ref_t *ref);

int pf_blobstore_refs(pf_blobstore_t *s, const pf_blob_ref_t *ref); /* 0 when absent */
size_t pf_blobstore_count(const pf_blobstore_t *s);
size_t pf_blobstore_bytes(const pf_blobstore_t *s);

#endif
