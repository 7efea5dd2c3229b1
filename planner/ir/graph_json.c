#include "planner/ir/graph_json.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

#include <string.h>

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

static int read_device(json_t *root, const char *device_model, pf_devmodel_t **out, char *err,
                       size_t errlen)
{
    json_t *d = json_object_get(root, "device");
    int rc;
    *out = NULL;
    if (!d)
        return PF_OK;
    if (!json_is_object(d))
        return pf_fail(err, errlen, PF_EINPUT, "graph.device: not an object (a device model "
                       "file's)");
    if ((rc = pf_devmodel_from_json(d, "graph.device", out, err, errlen)) != PF_OK)
        return rc;
    const char *name = pf_devmodel_spec(*out)->name;
    if (device_model && !strcmp(name, device_model))
        return PF_OK;
    rc = pf_fail(err, errlen, PF_EINPUT, "graph.device: its name '%s' is not the graph's "
                 "device_model ('%s')", name, device_model ? device_model : "none");
    pf_devmodel_destroy(out);
    return rc;
}

int pf_graph_json_extras(json_t *root, const char *device_model, pf_arch_t *arch, int *has_arch,
                         pf_devmodel_t **device, char *err, size_t errlen)
{
    json_t *m = json_object_get(root, "model");
    int rc;
    *has_arch = m != NULL;
    *device = NULL;
    if (m && (rc = pf_arch_from_json(m, "graph.model", arch, err, errlen)) != PF_OK)
        return rc;
    return read_device(root, device_model, device, err, errlen);
}

static void write_shape(pf_json_writer_t *w, const char *key, const pf_shape_t *s)
{
    if (s->ndim == 0)
        return;
    pf_json_writer_key(w, key);
    pf_json_writer_arr_begin_inline(w);
    for (int i = 0; i < s->ndim; i++)
        pf_json_writer_int(w, s->dim[i]);
    pf_json_writer_arr_end(w);
}

static void write_work(pf_json_writer_t *w, const pf_op_work_t *k)
{
    const struct {
        const char *key;
        double v;
    } f[] = {{"fwd_flops", k->fwd_flops},
             {"bwd_flops", k->bwd_flops},
             {"bytes_read", k->bytes_read},
             {"bytes_written", k->bytes_written}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].v > 0) {
            pf_json_writer_key(w, f[i].key);
            pf_json_writer_num(w, f[i].v);
        }
    }
    if (k->gemm_m <= 0)
        return;
    pf_json_writer_key(w, "gemm");
    pf_json_writer_obj_begin_inline(w);
    pf_json_writer_key(w, "m"); pf_json_writer_int(w, k->gemm_m);
    pf_json_writer_key(w, "n"); pf_json_writer_int(w, k->gemm_n);
    pf_json_writer_key(w, "k"); pf_json_writer_int(w, k->gemm_k);
    pf_json_writer_key(w, "batch"); pf_json_writer_int(w, k->gemm_batch);
    pf_json_writer_obj_end(w);
}

void pf_graph_json_write_op(pf_json_writer_t *w, const pf_op_t *o)
{
    pf_json_writer_obj_begin_inline(w);
    pf_json_writer_key(w, "id"); pf_json_writer_int(w, o->id);
    pf_json_writer_key(w, "name"); pf_json_writer_str(w, o->name);
    pf_json_writer_key(w, "type"); pf_json_writer_str(w, o->type);
    pf_json_writer_key(w, "fwd_ms"); pf_json_writer_num(w, o->fwd_ms);
    pf_json_writer_key(w, "bwd_ms"); pf_json_writer_num(w, o->bwd_ms);
    pf_json_writer_key(w, "param_bytes"); pf_json_writer_num(w, o->param_bytes);
    pf_json_writer_key(w, "mem_fwd_bytes"); pf_json_writer_num(w, o->mem_fwd_bytes);
    pf_json_writer_key(w, "mem_bwd_bytes"); pf_json_writer_num(w, o->mem_bwd_bytes);
    write_shape(w, "weight", &o->weight);
    write_shape(w, "input", &o->input);
    write_shape(w, "output", &o->output);
    write_work(w, &o->work);
    pf_json_writer_obj_end(w);
}
