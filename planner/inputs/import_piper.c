/* import_piper: Piper's (NeurIPS'21) planner input JSON -> graph, the single-device "vanilla"
 * configuration (format and errors: import.h). */
#include "planner/inputs/import.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The "vanilla" entry of nodes[i].TMPCs["1"] and its index there. */
static int piper_vanilla(json_t *node, const char *path, json_t **out, size_t *index, char *err,
                         size_t errlen)
{
    char sub[160];
    json_t *tmpcs = json_object_get(node, "TMPCs");
    *out = NULL;
    if (!tmpcs || json_is_null(tmpcs))
        return pf_fail(err, errlen, PF_EINPUT, "%s.TMPCs: missing", path);
    if (!json_is_object(tmpcs))
        return pf_fail(err, errlen, PF_EINPUT, "%s.TMPCs: not an object", path);
    json_t *one = json_object_get(tmpcs, "1");
    if (!one)
        return pf_fail(err, errlen, PF_EINPUT, "%s.TMPCs: no \"1\" vanilla configuration", path);
    if (!json_is_array(one))
        return pf_fail(err, errlen, PF_EINPUT, "%s.TMPCs[\"1\"]: not an array", path);
    for (size_t j = 0; j < json_array_size(one); j++) {
        json_t *c = json_array_get(one, j);
        const char *id;
        snprintf(sub, sizeof sub, "%s.TMPCs[\"1\"][%zu]", path, j);
        if (!json_is_object(c))
            return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", sub);
        int rc = pf_json_get_string(c, sub, "id", PF_JSON_GET_REQUIRED, NULL, &id, err, errlen);
        if (rc != PF_OK)
            return rc;
        if (!strcmp(id, "vanilla")) {
            *out = c;
            *index = j;
            return PF_OK;
        }
    }
    return pf_fail(err, errlen, PF_EINPUT, "%s.TMPCs[\"1\"]: no \"vanilla\" configuration", path);
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* `name` is "node" + digits: Piper's copy of a PipeDream profile, which keeps no class. */
static bool is_pipedream_node_name(const char *name)
{
    return !strncmp(name, "node", 4) && name[4] &&
           strspn(name + 4, "0123456789") == strlen(name + 4);
}

/* What the passes over nodes[] and edges[] share. */
typedef struct {
    json_t *nodes, *edges;
    size_t n, m;
    pf_graph_t *g;
    pf_import_key_t *keys;   /* node ids, sorted */
    const char **names;      /* by node */
    const char **sorted;     /* the names, sorted */
    int *seen;               /* by first position in sorted: copies of a shared name so far */
} piper_t;

/* Ids and names of every node, in file order; ids must be unique. */
static int piper_ids(piper_t *p, char *err, size_t errlen)
{
    char path[64];
    int rc;
    for (size_t i = 0; i < p->n; i++) {
        json_t *node = json_array_get(p->nodes, i);
        snprintf(path, sizeof path, "nodes[%zu]", i);
        if (!json_is_object(node))
            return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
        if ((rc = pf_json_get_int(node, path, "id", PF_JSON_GET_REQUIRED, 0, &p->keys[i].id, err,
                                  errlen)) ||
            (rc = pf_json_get_string(node, path, "name", 0, "", &p->names[i], err, errlen)))
            return rc;
        p->keys[i].order = (long)i;
        p->keys[i].index = (int)i;
        p->sorted[i] = p->names[i];
    }
    qsort(p->sorted, p->n, sizeof *p->sorted, cmp_str_ptr);
    qsort(p->keys, p->n, sizeof *p->keys, pf_import_key_cmp);
    for (size_t i = 1; i < p->n; i++)
        if (p->keys[i].id == p->keys[i - 1].id)
            return pf_fail(err, errlen, PF_EINPUT,
                           "nodes[%d].id: duplicate id %lld (also nodes[%d])",
                           p->keys[i].index, (long long)p->keys[i].id, p->keys[i - 1].index);
    return PF_OK;
}

/* The op's name: "node<id>" without one; names shared by several nodes get ".k" in file
 * order. */
static void piper_op_name(piper_t *p, const char *name, int64_t id, char *buf, size_t len)
{
    const char **lo = p->sorted, **hi = p->sorted + p->n;
    while (lo < hi) {
        const char **mid = lo + (hi - lo) / 2;
        if (strcmp(*mid, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t first = (size_t)(lo - p->sorted), same = 0;
    while (first + same < p->n && !strcmp(p->sorted[first + same], name))
        same++;
    if (!name[0])
        snprintf(buf, len, "node%lld", (long long)id);
    else if (same > 1)
        snprintf(buf, len, "%.*s.%d", (int)pf_utf8_fit(name, 200), name, p->seen[first]++);
    else
        snprintf(buf, len, "%.*s", (int)pf_utf8_fit(name, 200), name);
}

/* nodes[i] as an op, from its vanilla configuration: a third of the time forward. */
static int piper_op(piper_t *p, size_t i, char *err, size_t errlen)
{
    json_t *node = json_array_get(p->nodes, i), *cfg;
    const char *name = p->names[i];
    char path[64], cpath[128], namebuf[256], tbuf[PF_IMPORT_MAX_CLASS_CHARS + 1];
    double time_ms, param_bytes, act_bytes;
    int64_t id;
    size_t vi = 0;
    int rc;
    snprintf(path, sizeof path, "nodes[%zu]", i);
    pf_json_get_int(node, path, "id", PF_JSON_GET_REQUIRED, 0, &id, NULL, 0);
    if ((rc = piper_vanilla(node, path, &cfg, &vi, err, errlen)) != PF_OK)
        return rc;
    snprintf(cpath, sizeof cpath, "%s.TMPCs[\"1\"][%zu]", path, vi);
    if ((rc = pf_json_get_number(cfg, cpath, "timePerSample",
                                 PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, 0, &time_ms, err,
                                 errlen)) ||
        (rc = pf_json_get_number(cfg, cpath, "parameterSize",
                                 PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, 0, &param_bytes, err,
                                 errlen)) ||
        (rc = pf_json_get_number(cfg, cpath, "memoryUsageA",
                                 PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, 0, &act_bytes, err,
                                 errlen)))
        return rc;
    piper_op_name(p, name, id, namebuf, sizeof namebuf);
    pf_op_t op = {.id = id,
                  .name = namebuf,
                  .type = name[0] && !is_pipedream_node_name(name)
                              ? pf_import_type_of(name, tbuf, sizeof tbuf)
                              : "",
                  .fwd_ms = time_ms / 3.0,
                  .bwd_ms = time_ms - time_ms / 3.0,
                  .param_bytes = param_bytes,
                  .mem_fwd_bytes = act_bytes,
                  .mem_bwd_bytes = act_bytes,
                  .work = {.bytes_read = param_bytes, .bytes_written = act_bytes}};
    if (pf_graph_add_op(p->g, &op) < 0)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    return PF_OK;
}

/* edges[j] between two known, distinct nodes; its key for the repeat check in ekey. */
static int piper_edge(piper_t *p, size_t j, pf_import_key_t *ekey, char *err, size_t errlen)
{
    json_t *e = json_array_get(p->edges, j);
    int64_t src, dst;
    double bytes;
    char path[64];
    int rc;
    snprintf(path, sizeof path, "edges[%zu]", j);
    if (!json_is_object(e))
        return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
    if ((rc = pf_json_get_int(e, path, "sourceId", PF_JSON_GET_REQUIRED, 0, &src, err, errlen)) ||
        (rc = pf_json_get_int(e, path, "destId", PF_JSON_GET_REQUIRED, 0, &dst, err, errlen)) ||
        (rc = pf_json_get_number(e, path, "communicationCost",
                                 PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, 0, &bytes, err,
                                 errlen)))
        return rc;
    /* ops were added in file order: an op's index is its node's position in nodes[] */
    int si = pf_import_key_find(p->keys, p->n, src), di = pf_import_key_find(p->keys, p->n, dst);
    if (si < 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s.sourceId: %lld is not a node id", path,
                       (long long)src);
    if (di < 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s.destId: %lld is not a node id", path,
                       (long long)dst);
    if (si == di)
        return pf_fail(err, errlen, PF_EINPUT, "%s: self-loop on node %lld", path,
                       (long long)src);
    *ekey = (pf_import_key_t){(int64_t)si * (int64_t)p->n + di, (long)j, (int)j};
    if (pf_graph_add_edge(p->g, si, di, bytes) < 0)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    return PF_OK;
}

/* Every edge, then no edge twice. */
static int piper_edges(piper_t *p, char *err, size_t errlen)
{
    int rc = PF_OK;
    pf_import_key_t *ekeys = malloc((p->m + 1) * sizeof *ekeys);
    if (!ekeys)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (size_t j = 0; j < p->m && rc == PF_OK; j++)
        rc = piper_edge(p, j, &ekeys[j], err, errlen);
    if (rc == PF_OK) {
        qsort(ekeys, p->m, sizeof *ekeys, pf_import_key_cmp);
        for (size_t j = 1; j < p->m; j++)
            if (ekeys[j].id == ekeys[j - 1].id) {
                rc = pf_fail(err, errlen, PF_EINPUT, "edges[%d]: repeats edges[%d]",
                             ekeys[j].index, ekeys[j - 1].index);
                break;
            }
    }
    free(ekeys);
    return rc;
}

static int piper_build(json_t *root, int microbatch, const char *stem,
                       pf_graph_t **out, char *err, size_t errlen)
{
    piper_t p = {0};
    int rc;
    if (!json_is_object(root))
        return pf_fail(err, errlen, PF_EINPUT, "top level: not an object");
    if ((rc = pf_json_get_array(root, "piper", "nodes", PF_JSON_GET_REQUIRED, &p.nodes, err,
                                errlen)) ||
        (rc = pf_json_get_array(root, "piper", "edges", PF_JSON_GET_REQUIRED, &p.edges, err,
                                errlen)))
        return rc;
    p.n = json_array_size(p.nodes), p.m = json_array_size(p.edges);
    if (p.n == 0)
        return pf_fail(err, errlen, PF_EINPUT, "piper.nodes: empty");
    if (p.n > (1u << 26) || p.m > (1u << 28))
        return pf_fail(err, errlen, PF_EINPUT, "piper: too many nodes or edges");
    p.keys = malloc(p.n * sizeof *p.keys);
    p.names = malloc(p.n * sizeof *p.names);
    p.sorted = malloc(p.n * sizeof *p.sorted);
    p.seen = calloc(p.n, sizeof *p.seen);
    p.g = pf_graph_new(stem, pf_import_resolve_microbatch("piper", stem, (int)p.n, microbatch));
    if (!p.keys || !p.names || !p.sorted || !p.seen || !p.g) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    if ((rc = piper_ids(&p, err, errlen)))
        goto fail;
    for (size_t i = 0; i < p.n; i++)
        if ((rc = piper_op(&p, i, err, errlen)))
            goto fail;
    if ((rc = piper_edges(&p, err, errlen)) || (rc = pf_graph_finalize(p.g, err, errlen)))
        goto fail;
    *out = p.g;
    p.g = NULL;
fail:
    pf_graph_destroy(&p.g);
    free(p.keys);
    free(p.names);
    free(p.sorted);
    free(p.seen);
    return rc;
}

int pf_import_piper(const char *path, int microbatch, pf_graph_t **out, char *err, size_t errlen)
{
    json_t *root;
    char stem[256];
    *out = NULL;
    if (microbatch < 0)
        return pf_fail(err, errlen, PF_EINPUT, "microbatch: negative (%d)", microbatch);
    int rc = pf_json_load_file(path, &root, err, errlen);
    if (rc != PF_OK)
        return rc;
    pf_import_file_stem(path, stem, sizeof stem);
    rc = piper_build(root, microbatch, stem, out, err, errlen);
    json_decref(root);
    if (rc != PF_OK)
        pf_err_prefix(err, errlen, pf_import_label(path));
    return rc;
}
