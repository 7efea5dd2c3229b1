#include "broker/id_table.h"

#include <stdint.h>

/* Fibonacci hashing of a 64-bit id. */
static size_t id_hash(const void *key)
{
    uint64_t x = *(const uint64_t *)key;
    return (size_t)((x * 0x9E3779B97F4A7C15ULL) >> 17);
}

static int id_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

zhashx_t *pf_id_table_new(void)
{
    zhashx_t *t = zhashx_new();
    if (!t)
        return NULL;
    zhashx_set_key_hasher(t, id_hash);
    zhashx_set_key_comparator(t, id_cmp);
    zhashx_set_key_duplicator(t, NULL);
    zhashx_set_key_destructor(t, NULL);
    return t;
}
