/* arch: the graph's "model" object (arch.h). */
#include "planner/ir/arch.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <string.h>

/* Counts are at most 2^40: far past any model, and exact in a double. */
#define ARCH_COUNT_MAX ((int64_t)1 << 40)

static const char *const activations[] = {"gelu", "swiglu", NULL};
static const char *const norms[] = {"layernorm", "rmsnorm", NULL};
static const char *const positions[] = {"learned", "rope", NULL};

void pf_arch_init(pf_arch_t *a)
{
    memset(a, 0, sizeof *a);
    a->tied_embeddings = -1;
    a->bias = -1;
}

typedef struct {
    const char *key;
    size_t off;
} count_field_t;

static const count_field_t counts[] = {
    {"layers", offsetof(pf_arch_t, layers)},         {"hidden", offsetof(pf_arch_t, hidden)},
    {"heads", offsetof(pf_arch_t, heads)},           {"kv_heads", offsetof(pf_arch_t, kv_heads)},
    {"ffn_hidden", offsetof(pf_arch_t, ffn_hidden)}, {"seq", offsetof(pf_arch_t, seq)},
    {"vocab", offsetof(pf_arch_t, vocab)},           {"experts", offsetof(pf_arch_t, experts)},
    {"top_k", offsetof(pf_arch_t, top_k)},           {"head_dim", offsetof(pf_arch_t, head_dim)},
};
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* A string key: absent = "", else one of `allowed` (NULL-terminated; NULL = any short name). */
static int read_name(json_t *obj, const char *path, const char *key, const char *const *allowed,
                     char out[PF_ARCH_NAME_MAX], char *err, size_t errlen)
{
    const char *s;
    int rc = pf_json_get_string(obj, path, key, 0, "", &s, err, errlen);
    if (rc != PF_OK)
        return rc;
    if (strlen(s) >= PF_ARCH_NAME_MAX)
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: longer than %d bytes", path, key,
                       PF_ARCH_NAME_MAX - 1);
    for (int i = 0; *s && allowed && allowed[i]; i++)
        if (!strcmp(s, allowed[i]))
            allowed = NULL;
    if (*s && allowed)
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: '%s' is not %s or %s", path, key, s,
                       allowed[0], allowed[1]);
    snprintf(out, PF_ARCH_NAME_MAX, "%s", s);
    return PF_OK;
}

static int read_flag(json_t *obj, const char *path, const char *key, int *out, char *err,
                     size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (v && !json_is_boolean(v))
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: not true or false", path, key);
    *out = v ? json_is_true(v) : -1;
    return PF_OK;
}

/* The shapes must be a model some framework can build. */
static int check_shape(const pf_arch_t *a, const char *path, char *err, size_t errlen)
{
    if (a->heads && !a->head_dim && a->hidden % a->heads)
        return pf_fail(err, errlen, PF_EINPUT, "%s.heads: hidden %lld is not divisible by %lld "
                       "heads (give head_dim)", path, (long long)a->hidden, (long long)a->heads);
    if (a->kv_heads && (!a->heads || a->kv_heads > a->heads || a->heads % a->kv_heads))
        return pf_fail(err, errlen, PF_EINPUT, "%s.kv_heads: %lld does not divide the %lld "
                       "heads", path, (long long)a->kv_heads, (long long)a->heads);
    if (a->top_k && (!a->experts || a->top_k > a->experts))
        return pf_fail(err, errlen, PF_EINPUT, "%s.top_k: %lld, more than the %lld experts",
                       path, (long long)a->top_k, (long long)a->experts);
    return PF_OK;
}

int pf_arch_from_json(json_t *obj, const char *path, pf_arch_t *a, char *err, size_t errlen)
{
    int rc;
    pf_arch_init(a);
    if (!json_is_object(obj))
        return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
    if (!json_object_get(obj, "kind"))
        return pf_fail(err, errlen, PF_EINPUT, "%s.kind: missing", path);
    if ((rc = read_name(obj, path, "kind", NULL, a->kind, err, errlen)))
        return rc;
    if (!a->kind[0])
        return pf_fail(err, errlen, PF_EINPUT, "%s.kind: empty", path);
    for (size_t i = 0; i < NCOUNTS; i++) {
        int64_t *v = (int64_t *)((char *)a + counts[i].off);
        if ((rc = pf_json_get_int(obj, path, counts[i].key, PF_JSON_GET_POSITIVE, 0, v, err,
                                  errlen)))
            return rc;
        if (*v > ARCH_COUNT_MAX)
            return pf_fail(err, errlen, PF_EINPUT, "%s.%s: %lld is too large", path,
                           counts[i].key, (long long)*v);
    }
    if ((rc = read_name(obj, path, "activation", activations, a->activation, err, errlen)) ||
        (rc = read_name(obj, path, "norm", norms, a->norm, err, errlen)) ||
        (rc = read_name(obj, path, "positions", positions, a->positions, err, errlen)) ||
        (rc = read_flag(obj, path, "tied_embeddings", &a->tied_embeddings, err, errlen)) ||
        (rc = read_flag(obj, path, "bias", &a->bias, err, errlen)))
        return rc;
    return check_shape(a, path, err, errlen);
}

static void write_name(pf_json_writer_t *w, const char *key, const char *v)
{
    if (!*v)
        return;
    pf_json_writer_key(w, key);
    pf_json_writer_str(w, v);
}

void pf_arch_write(const pf_arch_t *a, pf_json_writer_t *w)
{
    pf_json_writer_obj_begin_inline(w);
    write_name(w, "kind", a->kind);
    for (size_t i = 0; i < NCOUNTS; i++) {
        int64_t v = *(const int64_t *)((const char *)a + counts[i].off);
        if (v > 0) {
            pf_json_writer_key(w, counts[i].key);
            pf_json_writer_int(w, v);
        }
    }
    write_name(w, "activation", a->activation);
    write_name(w, "norm", a->norm);
    write_name(w, "positions", a->positions);
    if (a->tied_embeddings >= 0) {
        pf_json_writer_key(w, "tied_embeddings");
        pf_json_writer_bool(w, a->tied_embeddings);
    }
    if (a->bias >= 0) {
        pf_json_writer_key(w, "bias");
        pf_json_writer_bool(w, a->bias);
    }
    pf_json_writer_obj_end(w);
}
