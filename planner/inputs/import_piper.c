/* import_piper: Piper's (NeurIPS'21) planner input JSON -> graph, the single-device "vanilla"
 * configuration (format and errors: import.h). */
#include "planner/inputs/import.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

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

/* 1 when `name` is "node" + digits: Piper's copy of a PipeDream profile, which keeps no class. */
static int is_pipedream_node_name(const char *name)
{
    return !strncmp(name, "node", 4) && name[4] &&
           strspn(name + 4, "0123456789") == strlen(name + 4);
}

static int piper_build(json_t *root, int microbatch, const char *stem,
                       pf_graph_t **out, char *err, size_t errlen)
{
    json_t *nodes, *edges;
    pf_graph_t *g = NULL;
    pf_import_key_t *keys = NULL, *ekeys = NULL;
    const char **names = NULL, **sorted = NULL;
    int *seen = NULL;
    char path[64];
    int rc;

    if (!json_is_object(root))
        return pf_fail(err, errlen, PF_EINPUT, "top level: not an object");
    if ((rc = pf_json_get_array(root, "piper", "nodes", PF_JSON_GET_REQUIRED, &nodes, err, errlen)) ||
        (rc = pf_json_get_array(root, "piper", "edges", PF_JSON_GET_REQUIRED, &edges, err, errlen)))
        return rc;
    size_t n = json_array_size(nodes), m = json_array_size(edges);
    if (n == 0)
        return pf_fail(err, errlen, PF_EINPUT, "piper.nodes: empty");
    if (n > (1u << 26) || m > (1u << 28))
        return pf_fail(err, errlen, PF_EINPUT, "piper: too many nodes or edges");
    keys = malloc(n * sizeof *keys);
    names = malloc(n * sizeof *names);
    sorted = malloc(n * sizeof *sorted);
    seen = calloc(n, sizeof *seen);
    g = pf_graph_new(stem, pf_import_resolve_microbatch("piper", stem, (int)n, microbatch));
    if (!keys || !names || !sorted || !seen || !g) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }

    /* names shared by several nodes get ".k" in file order */
    for (size_t i = 0; i < n; i++) {
        json_t *node = json_array_get(nodes, i);
        snprintf(path, sizeof path, "nodes[%zu]", i);
        if (!json_is_object(node)) {
            rc = pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
            goto fail;
        }
        if ((rc = pf_json_get_int(node, path, "id", PF_JSON_GET_REQUIRED, 0, &keys[i].id, err, errlen)) ||
            (rc = pf_json_get_string(node, path, "name", 0, "", &names[i], err, errlen)))
            goto fail;
        keys[i].order = (long)i;
        keys[i].index = (int)i;
        sorted[i] = names[i];
    }
    qsort(sorted, n, sizeof *sorted, cmp_str_ptr);
    qsort(keys, n, sizeof *keys, pf_import_key_cmp);
    for (size_t i = 1; i < n; i++)
        if (keys[i].id == keys[i - 1].id) {
            rc = pf_fail(err, errlen, PF_EINPUT,
                         "nodes[%d].id: duplicate id %lld (also nodes[%d])",
                         keys[i].index, (long long)keys[i].id, keys[i - 1].index);
            goto fail;
        }

    for (size_t i = 0; i < n; i++) {
        json_t *node = json_array_get(nodes, i), *cfg;
        const char *name = names[i];
        char namebuf[256], tbuf[PF_IMPORT_MAX_CLASS_CHARS + 1];
        double time_ms, param_bytes, act_bytes;
        int64_t id;
        snprintf(path, sizeof path, "nodes[%zu]", i);
        pf_json_get_int(node, path, "id", PF_JSON_GET_REQUIRED, 0, &id, NULL, 0);
        size_t vi = 0;
        if ((rc = piper_vanilla(node, path, &cfg, &vi, err, errlen)) != PF_OK)
            goto fail;
        char cpath[128];
        snprintf(cpath, sizeof cpath, "%s.TMPCs[\"1\"][%zu]", path, vi);
        if ((rc = pf_json_get_number(cfg, cpath, "timePerSample", PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, 0,
                               &time_ms, err, errlen)) ||
            (rc = pf_json_get_number(cfg, cpath, "parameterSize", PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, 0,
                               &param_bytes, err, errlen)) ||
            (rc = pf_json_get_number(cfg, cpath, "memoryUsageA", PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, 0,
                               &act_bytes, err, errlen)))
            goto fail;

        /* how many nodes share this name, and which of them is this one */
        const char **lo = sorted, **hi = sorted + n;
        while (lo < hi) {
            const char **mid = lo + (hi - lo) / 2;
            if (strcmp(*mid, name) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t first = (size_t)(lo - sorted), same = 0;
        while (first + same < n && !strcmp(sorted[first + same], name))
            same++;
        if (!name[0])
            snprintf(namebuf, sizeof namebuf, "node%lld", (long long)id);
        else if (same > 1)
            snprintf(namebuf, sizeof namebuf, "%.*s.%d", (int)pf_utf8_fit(name, 200), name,
                     seen[first]++);
        else
            snprintf(namebuf, sizeof namebuf, "%.*s", (int)pf_utf8_fit(name, 200), name);

        pf_op_t op = {.id = id,
                      .name = namebuf,
                      .type = name[0] && !is_pipedream_node_name(name)
                                  ? pf_import_type_of(name, tbuf, sizeof tbuf)
                                  : "",
                      .fwd_ms = time_ms / 3.0,
                      .bwd_ms = time_ms - time_ms / 3.0,
                      .param_bytes = param_bytes,
                      .mem_fwd_bytes = act_bytes,
                      .mem_bwd_bytes = act_bytes};
        if (pf_graph_add_op(g, &op) < 0) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }

    ekeys = malloc((m + 1) * sizeof *ekeys);
    if (!ekeys) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    for (size_t j = 0; j < m; j++) {
        json_t *e = json_array_get(edges, j);
        int64_t src, dst;
        double bytes;
        snprintf(path, sizeof path, "edges[%zu]", j);
        if (!json_is_object(e)) {
            rc = pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
            goto fail;
        }
        if ((rc = pf_json_get_int(e, path, "sourceId", PF_JSON_GET_REQUIRED, 0, &src, err, errlen)) ||
            (rc = pf_json_get_int(e, path, "destId", PF_JSON_GET_REQUIRED, 0, &dst, err, errlen)) ||
            (rc = pf_json_get_number(e, path, "communicationCost", PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, 0,
                               &bytes, err, errlen)))
            goto fail;
        /* ops were added in file order: an op's index is its node's position in nodes[] */
        int si = pf_import_key_find(keys, n, src), di = pf_import_key_find(keys, n, dst);
        if (si < 0) {
            rc = pf_fail(err, errlen, PF_EINPUT, "%s.sourceId: %lld is not a node id", path,
                         (long long)src);
            goto fail;
        }
        if (di < 0) {
            rc = pf_fail(err, errlen, PF_EINPUT, "%s.destId: %lld is not a node id", path,
                         (long long)dst);
            goto fail;
        }
        if (si == di) {
            rc = pf_fail(err, errlen, PF_EINPUT, "%s: self-loop on node %lld", path,
                         (long long)src);
            goto fail;
        }
        ekeys[j] = (pf_import_key_t){(int64_t)si * (int64_t)n + di, (long)j, (int)j};
        if (pf_graph_add_edge(g, si, di, bytes) < 0) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    qsort(ekeys, m, sizeof *ekeys, pf_import_key_cmp);
    for (size_t j = 1; j < m; j++)
        if (ekeys[j].id == ekeys[j - 1].id) {
            rc = pf_fail(err, errlen, PF_EINPUT, "edges[%d]: repeats edges[%d]", ekeys[j].index,
                         ekeys[j - 1].index);
            goto fail;
        }
    if ((rc = pf_graph_finalize(g, err, errlen)) != PF_OK)
        goto fail;
    *out = g;
    g = NULL;
fail:
    pf_graph_destroy(&g);
    free(keys);
    free(ekeys);
    free(names);
    free(sorted);
    free(seen);
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
