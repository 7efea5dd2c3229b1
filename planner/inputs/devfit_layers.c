#include "planner/inputs/devfit_layers.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRID_POINTS 400
#define GOLDEN_STEPS 60
#define OPS_NAMED "layernorm*, qkv, attention_core, out_proj, residual_add, fc1, gelu, fc2"

int pf_devfit_layers_op_work(const char *name, double h, double t, double s, double mb,
                             pf_op_work_t *w)
{
    double rows = s * mb, act_bytes = rows * h * 2, hp = h / t;
    memset(w, 0, sizeof *w);
    w->gemm_batch = 1;
    if (!strcmp(name, "qkv"))
        w->gemm_m = (int64_t)rows, w->gemm_n = (int64_t)(3 * hp), w->gemm_k = (int64_t)h;
    else if (!strcmp(name, "out_proj"))
        w->gemm_m = (int64_t)rows, w->gemm_n = (int64_t)h, w->gemm_k = (int64_t)hp;
    else if (!strcmp(name, "fc1"))
        w->gemm_m = (int64_t)rows, w->gemm_n = (int64_t)(4 * hp), w->gemm_k = (int64_t)h;
    else if (!strcmp(name, "fc2"))
        w->gemm_m = (int64_t)rows, w->gemm_n = (int64_t)h, w->gemm_k = (int64_t)(4 * hp);
    else if (!strncmp(name, "layernorm", 9))
        w->bytes_read = act_bytes, w->bytes_written = act_bytes;
    else if (!strcmp(name, "residual_add"))
        w->bytes_read = 2 * act_bytes, w->bytes_written = act_bytes;
    else if (!strcmp(name, "gelu"))
        w->bytes_read = 4 * act_bytes / t, w->bytes_written = 4 * act_bytes / t;
    else if (!strcmp(name, "attention_core")) {
        w->fwd_flops = 4 * s * s * hp * mb * 0.5;
        w->bwd_flops = 2.5 * w->fwd_flops;
        w->bytes_read = 3 * act_bytes / t, w->bytes_written = act_bytes / t;
    } else
        return -1;
    return 0;
}

/* One op of one layer, in one direction: its kernel time on the base model and its measure. */
typedef struct {
    double kernel_ms, meas_ms;
    int layer, bwd;
} op_rec_t;

typedef struct {
    const pf_devmodel_t *base;
    pf_devmodel_t *kernel; /* base without its op overheads: what the ops' kernels take */
    double base_overhead_ms_fwd, base_overhead_ms_bwd;
    pf_devmodel_t **out;
    pf_devfit_layers_report_t *rep;
    op_rec_t *op;
    size_t cap;
    int nop;
} fit_t;

static int read_shape(json_t *l, const char *path, pf_devfit_layer_t *ly, char *err, size_t errlen)
{
    static const char *keys[4] = {"hidden", "seq", "microbatch", "tp"};
    double *at[4] = {&ly->hidden, &ly->seq, &ly->microbatch, &ly->tp};
    for (int i = 0; i < 4; i++) {
        int rc = pf_json_get_number(l, path, keys[i], (i < 3 ? PF_JSON_GET_REQUIRED : 0) |
                                    PF_JSON_GET_POSITIVE, 1, at[i], err, errlen);
        if (rc)
            return rc;
        if (*at[i] > 1e7 || *at[i] != floor(*at[i]))
            return pf_fail(err, errlen, PF_EINPUT, "%s.%s: %g is not a whole number up to 1e7",
                           path, keys[i], *at[i]);
    }
    return PF_OK;
}

static int read_op(const fit_t *f, json_t *o, const char *path, int li, op_rec_t rec[2],
                   char *err, size_t errlen)
{
    const pf_devfit_layer_t *ly = &f->rep->layer[li];
    const char *name;
    double fwd_ms, bwd_ms, kf = 0, kb = 0;
    pf_op_work_t w;
    int rc;
    if ((rc = pf_json_get_string(o, path, "op", PF_JSON_GET_REQUIRED, NULL, &name, err,
                                 errlen)) ||
        (rc = pf_json_get_number(o, path, "fwd_ms", PF_JSON_GET_REQUIRED | PF_JSON_GET_POSITIVE,
                                 0, &fwd_ms, err, errlen)) ||
        (rc = pf_json_get_number(o, path, "bwd_ms", PF_JSON_GET_REQUIRED | PF_JSON_GET_POSITIVE,
                                 0, &bwd_ms, err, errlen)))
        return rc;
    if (pf_devfit_layers_op_work(name, ly->hidden, ly->tp, ly->seq, ly->microbatch, &w))
        return pf_fail(err, errlen, PF_EINPUT, "%s.op: '%s' is not a GPT layer op (" OPS_NAMED ")",
                       path, name);
    pf_devmodel_op_ms(f->kernel, PF_PREC_BF16, &w, &kf, &kb);
    rec[0] = (op_rec_t){kf, fwd_ms, li, 0};
    rec[1] = (op_rec_t){kb, bwd_ms, li, 1};
    return PF_OK;
}

static int read_layer(fit_t *f, json_t *l, int li, char *err, size_t errlen)
{
    char path[48], opath[96];
    json_t *ops;
    int rc;
    snprintf(path, sizeof path, "gpt_layers[%d]", li);
    if ((rc = read_shape(l, path, &f->rep->layer[li], err, errlen)) ||
        (rc = pf_json_get_array(l, path, "ops", PF_JSON_GET_REQUIRED, &ops, err, errlen)))
        return rc;
    if (pf_grow((void **)&f->op, &f->cap, (size_t)f->nop + 2 * json_array_size(ops), sizeof *f->op))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (size_t i = 0; i < json_array_size(ops); i++) {
        snprintf(opath, sizeof opath, "%s.ops[%zu]", path, i);
        if ((rc = read_op(f, json_array_get(ops, i), opath, li, f->op + f->nop, err, errlen)))
            return rc;
        f->nop += 2;
    }
    return PF_OK;
}

static int read_layers(json_t *root, fit_t *f, char *err, size_t errlen)
{
    json_t *la;
    int rc = pf_json_get_array(root, "profile", "gpt_layers", PF_JSON_GET_REQUIRED, &la, err,
                               errlen);
    if (rc)
        return rc;
    size_t n = json_array_size(la);
    if (n == 0 || n > PF_DEVFIT_LAYERS_MAX)
        return pf_fail(err, errlen, PF_EINPUT, "gpt_layers: %zu layers, expected 1 .. %d", n,
                       PF_DEVFIT_LAYERS_MAX);
    f->rep->nlayers = (int)n;
    for (size_t i = 0; i < n; i++)
        if ((rc = read_layer(f, json_array_get(la, i), (int)i, err, errlen)))
            return rc;
    return PF_OK;
}

/* sum over one direction's ops of log((kernel + o) / measured)^2 */
static double loss(const fit_t *f, int bwd, double o_ms)
{
    double sum = 0;
    for (int i = 0; i < f->nop; i++) {
        const op_rec_t *r = &f->op[i];
        if (r->bwd == bwd && r->kernel_ms + o_ms > 0) {
            double l = log((r->kernel_ms + o_ms) / r->meas_ms);
            sum += l * l;
        }
    }
    return sum;
}

static double fit_overhead_ms(const fit_t *f, int bwd)
{
    double hi = 0;
    for (int i = 0; i < f->nop; i++)
        hi = f->op[i].bwd == bwd ? fmax(hi, f->op[i].meas_ms) : hi;
    double step = hi / GRID_POINTS, best = 0, best_loss = loss(f, bwd, 0);
    for (int g = 1; g <= GRID_POINTS; g++) {
        double l = loss(f, bwd, g * step);
        if (l < best_loss)
            best_loss = l, best = g * step;
    }
    double a = fmax(best - step, 0), b = best + step, phi = (sqrt(5) - 1) / 2;
    for (int it = 0; it < GOLDEN_STEPS; it++) {
        double c = b - phi * (b - a), d = a + phi * (b - a);
        if (loss(f, bwd, c) < loss(f, bwd, d))
            b = d;
        else
            a = c;
    }
    double o = (a + b) / 2;
    return loss(f, bwd, o) < best_loss ? o : best;
}

/* exp(rms of ln(predicted / measured)) - 1: the typical factor an op is off by, what the fit
 * minimises (a linear rms is ruled by the one op predicted 30x too slow) */
static double rms(const fit_t *f, const double o_ms[2])
{
    double sum = 0;
    for (int i = 0; i < f->nop; i++) {
        double e = log((f->op[i].kernel_ms + o_ms[f->op[i].bwd]) / f->op[i].meas_ms);
        sum += e * e;
    }
    return f->nop ? exp(sqrt(sum / f->nop)) - 1 : 0;
}

static void tally(fit_t *f, const double o_ms[2])
{
    pf_devfit_layers_report_t *rep = f->rep;
    for (int i = 0; i < f->nop; i++) {
        const op_rec_t *r = &f->op[i];
        pf_devfit_layer_t *ly = &rep->layer[r->layer];
        ly->meas_ms += r->meas_ms;
        ly->base_ms += r->kernel_ms + (r->bwd ? f->base_overhead_ms_bwd : f->base_overhead_ms_fwd);
        ly->fitted_ms += r->kernel_ms + o_ms[r->bwd];
    }
}

static int convert_layers(json_t *root, void *ctx, char *err, size_t errlen)
{
    fit_t *f = ctx;
    pf_devmodel_spec_t s = *pf_devmodel_spec(f->base);
    f->base_overhead_ms_fwd = s.op_overhead_us_fwd / 1000;
    f->base_overhead_ms_bwd = s.op_overhead_us_bwd / 1000;
    s.op_overhead_us_fwd = s.op_overhead_us_bwd = 0;
    if (!(f->kernel = pf_devmodel_copy(f->base)))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    pf_devmodel_set_spec(f->kernel, &s);
    int rc = read_layers(root, f, err, errlen);
    if (rc)
        return rc;
    double base_ms[2] = {f->base_overhead_ms_fwd, f->base_overhead_ms_bwd};
    double o_ms[2] = {fit_overhead_ms(f, 0), fit_overhead_ms(f, 1)};
    tally(f, o_ms);
    f->rep->nops = f->nop / 2;
    f->rep->overhead_us_fwd = o_ms[0] * 1000, f->rep->overhead_us_bwd = o_ms[1] * 1000;
    f->rep->op_rms_base = rms(f, base_ms), f->rep->op_rms_fitted = rms(f, o_ms);
    s.op_overhead_us_fwd = o_ms[0] * 1000, s.op_overhead_us_bwd = o_ms[1] * 1000;
    if (!(*f->out = pf_devmodel_copy(f->base)))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    pf_devmodel_set_spec(*f->out, &s);
    return PF_OK;
}

static int finish(fit_t *f, int rc)
{
    pf_devmodel_destroy(&f->kernel);
    free(f->op);
    if (rc != PF_OK)
        pf_devmodel_destroy(f->out);
    return rc;
}

int pf_devfit_layers_json(json_t *root, const char *label, const pf_devmodel_t *base,
                          pf_devmodel_t **out, pf_devfit_layers_report_t *rep, char *err,
                          size_t errlen)
{
    fit_t f = {.base = base, .out = out, .rep = rep};
    *out = NULL;
    memset(rep, 0, sizeof *rep);
    return finish(&f, pf_json_convert(root, label, convert_layers, &f, err, errlen));
}

int pf_devfit_layers_file(const char *path, const pf_devmodel_t *base, pf_devmodel_t **out,
                          pf_devfit_layers_report_t *rep, char *err, size_t errlen)
{
    fit_t f = {.base = base, .out = out, .rep = rep};
    *out = NULL;
    memset(rep, 0, sizeof *rep);
    return finish(&f, pf_json_read_file(path, convert_layers, &f, err, errlen));
}
