#include "broker/blobstore.h"
#include "planner/core/util.h"

#include <czmq.h>
#include <stdlib.h>
#include <string.h>

#define HEX_MAX (2 * PF_HASH_MAX + 1)

typedef struct {
    int kind, refs;
    uint8_t *data;
    size_t len;
} blob_t;

struct pf_blobstore {
    zhashx_t *blobs; /* hex hash -> blob_t */
    size_t bytes;
};

static void blob_free(void **item)
{
    blob_t *b = *item;
    if (b) {
        free(b->data);
        free(b);
    }
    *item = NULL;
}

pf_blobstore_t *pf_blobstore_new(void)
{
    pf_blobstore_t *s = calloc(1, sizeof *s);
    if (!s || !(s->blobs = zhashx_new())) {
        free(s);
        return NULL;
    }
    zhashx_set_destructor(s->blobs, blob_free);
    return s;
}

void pf_blobstore_destroy(pf_blobstore_t **sp)
{
    if (!sp || !*sp)
        return;
    zhashx_destroy(&(*sp)->blobs);
    free(*sp);
    *sp = NULL;
}

int pf_blobstore_put(pf_blobstore_t *s, int kind, uint8_t **data, size_t len, pf_blob_ref_t *ref)
{
    char key[HEX_MAX];
    zdigest_t *dg = zdigest_new();
    if (!dg)
        return PF_ERR;
    zdigest_update(dg, *data, len);
    memset(ref, 0, sizeof *ref);
    ref->hash_len = zdigest_size(dg);
    memcpy(ref->hash, zdigest_data(dg), ref->hash_len);
    ref->size = len;
    zdigest_destroy(&dg);
    pf_wire_hex(ref->hash, ref->hash_len, key);

    blob_t *b = zhashx_lookup(s->blobs, key);
    if (b) {
        b->refs++;
        free(*data);
        *data = NULL;
        return PF_OK;
    }
    if (!(b = calloc(1, sizeof *b)))
        return PF_ERR;
    b->kind = kind;
    b->refs = 1;
    b->data = *data;
    b->len = len;
    if (zhashx_insert(s->blobs, key, b) != 0) {
        free(b);
        return PF_ERR;
    }
    *data = NULL;
    s->bytes += len;
    return PF_OK;
}

int pf_blobstore_get(pf_blobstore_t *s, const uint8_t *hash, size_t hash_len, int *kind,
                     const uint8_t **data, size_t *len)
{
    char key[HEX_MAX];
    if (hash_len == 0 || hash_len > PF_HASH_MAX)
        return PF_EINPUT;
    pf_wire_hex(hash, hash_len, key);
    blob_t *b = zhashx_lookup(s->blobs, key);
    if (!b)
        return PF_EINPUT;
    *kind = b->kind;
    *data = b->data;
    *len = b->len;
    return PF_OK;
}

void pf_blobstore_release(pf_blobstore_t *s, const pf_blob_ref_t *ref)
{
    char key[HEX_MAX];
    if (!ref || ref->hash_len == 0 || ref->hash_len > PF_HASH_MAX)
        return;
    pf_wire_hex(ref->hash, ref->hash_len, key);
    blob_t *b = zhashx_lookup(s->blobs, key);
    if (b && --b->refs == 0) {
        s->bytes -= b->len;
        zhashx_delete(s->blobs, key);
    }
}

int pf_blobstore_refs(pf_blobstore_t *s, const pf_blob_ref_t *ref)
{
    char key[HEX_MAX];
    if (!ref || ref->hash_len == 0 || ref->hash_len > PF_HASH_MAX)
        return 0;
    pf_wire_hex(ref->hash, ref->hash_len, key);
    blob_t *b = zhashx_lookup(s->blobs, key);
    return b ? b->refs : 0;
}

size_t pf_blobstore_count(const pf_blobstore_t *s)
{
    return zhashx_size(s->blobs);
}

size_t pf_blobstore_bytes(const pf_blobstore_t *s)
{
    return s->bytes;
}
