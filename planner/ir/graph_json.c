#include "planner/ir/graph_json.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

#include <stddef.h>

static int read_shape(json_t *o, const char *path, const char *key, pf_shape_t *s, char *err,
                      size_t errlen)
{
    return pf_json_get_int_array(o, path, key, s->dim, PF_SHAPE_MAX, &s->ndim, err, errlen);
}

/* An op's numbers, read in this order (the first bad one is the error). */
static const struct {
    const char *key;
    int flags;
    size_t offset;
} op_numbers[] = {
    {"fwd_ms", PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, offsetof(pf_op_t, fwd_ms)},
    {"bwd_ms", PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, offsetof(pf_op_t, bwd_ms)},
    {"param_bytes", PF_JSON_GET_NONNEG, offsetof(pf_op_t, param_bytes)},
    {"mem_fwd_bytes", PF_JSON_GET_NONNEG, offsetof(pf_op_t, mem_fwd_bytes)},
    {"mem_bwd_bytes", PF_JSON_GET_NONNEG, offsetof(pf_op_t, mem_bwd_bytes)},
};

/* Version 2's work keys (DESIGN.md "Files"): all optional, 0 = unknown. A "gemm" object gives
 * all four dimensions; the ranges are check_work's, run by finalize. */
static int work_from_json(json_t *o, const char *path, pf_op_work_t *w, char *err, size_t errlen)
{
    const struct {
        const char *key;
        double *out;
    } f[] = {{"fwd_flops", &w->fwd_flops},
             {"bwd_flops", &w->bwd_flops},
             {"bytes_read", &w->bytes_read},
             {"bytes_written", &w->bytes_written}};
    int rc;
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
        if ((rc = pf_json_get_number(o, path, f[k].key, PF_JSON_GET_NONNEG, 0, f[k].out, err,
                                     errlen)))
            return rc;
    json_t *gm = json_object_get(o, "gemm");
    if (!gm)
        return PF_OK;
    char gpath[64];
    snprintf(gpath, sizeof gpath, "%s.gemm", path);
    if (!json_is_object(gm))
        return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", gpath);
    const int req = PF_JSON_GET_REQUIRED | PF_JSON_GET_POSITIVE;
    if ((rc = pf_json_get_int(gm, gpath, "m", req, 0, &w->gemm_m, err, errlen)) ||
        (rc = pf_json_get_int(gm, gpath, "n", req, 0, &w->gemm_n, err, errlen)) ||
        (rc = pf_json_get_int(gm, gpath, "k", req, 0, &w->gemm_k, err, errlen)) ||
        (rc = pf_json_get_int(gm, gpath, "batch", req, 0, &w->gemm_batch, err, errlen)))
        return rc;
    return PF_OK;
}

int pf_graph_json_op(json_t *o, const char *path, pf_op_t *op, char *err, size_t errlen)
{
    int rc;
    if (!json_is_object(o))
        return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
    if ((rc = pf_json_get_int(o, path, "id", PF_JSON_GET_REQUIRED, 0, &op->id, err, errlen)) ||
        (rc = pf_json_get_string(o, path, "name", 0, NULL, &op->name, err, errlen)) ||
        (rc = pf_json_get_string(o, path, "type", 0, "", &op->type, err, errlen)))
        return rc;
    for (size_t k = 0; k < sizeof op_numbers / sizeof op_numbers[0]; k++)
        if ((rc = pf_json_get_number(o, path, op_numbers[k].key, op_numbers[k].flags, 0,
                                     (double *)((char *)op + op_numbers[k].offset), err, errlen)))
            return rc;
    if ((rc = read_shape(o, path, "weight", &op->weight, err, errlen)) ||
        (rc = read_shape(o, path, "input", &op->input, err, errlen)) ||
        (rc = read_shape(o, path, "output", &op->output, err, errlen)) ||
        (rc = work_from_json(o, path, &op->work, err, errlen)))
        return rc;
    return PF_OK;
}

int pf_graph_json_edge(json_t *e, const char *path, pf_graph_json_edge_t *x, char *err,
                       size_t errlen)
{
    int rc;
    if (!json_is_object(e))
        return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
    if ((rc = pf_json_get_int(e, path, "src", PF_JSON_GET_REQUIRED, 0, &x->src, err, errlen)) ||
        (rc = pf_json_get_int(e, path, "dst", PF_JSON_GET_REQUIRED, 0, &x->dst, err, errlen)) ||
        (rc = pf_json_get_number(e, path, "bytes", PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, 0,
                                 &x->bytes, err, errlen)))
        return rc;
    return PF_OK;
}
