#include "planner/inputs/devfit.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int prec;
    double m, n, k, batch, fwd_ms, bwd_ms;
} gemm_rec_t;

typedef struct {
    double bytes, ms;
} copy_rec_t;

typedef struct {
    const pf_devmodel_t *base;
    pf_devmodel_t **out;
    pf_devfit_report_t *rep;
    gemm_rec_t *g;
    copy_rec_t *c;
    int ng, nc;
} fit_t;

static int read_gemm(json_t *r, int i, gemm_rec_t *g, char *err, size_t errlen)
{
    char path[48];
    const char *dt;
    int64_t v[4];
    static const char *dims[4] = {"m", "n", "k", "batch"};
    int rc;
    snprintf(path, sizeof path, "gemm[%d]", i);
    if ((rc = pf_json_get_string(r, path, "dtype", PF_JSON_GET_REQUIRED, NULL, &dt, err,
                                 errlen)))
        return rc;
    if ((g->prec = pf_devmodel_prec_parse(dt)) < 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s.dtype: '%s' is not bf16, fp16, fp32, tf32 or "
                       "fp8", path, dt);
    for (int d = 0; d < 4; d++) {
        if ((rc = pf_json_get_int(r, path, dims[d], d == 3 ? 0 : PF_JSON_GET_REQUIRED, 1, &v[d],
                                  err, errlen)))
            return rc;
        if (v[d] < 1 || v[d] > 1000000000)
            return pf_fail(err, errlen, PF_EINPUT, "%s.%s: %lld is not in 1 .. 1e9", path,
                           dims[d], (long long)v[d]);
    }
    g->m = (double)v[0], g->n = (double)v[1], g->k = (double)v[2], g->batch = (double)v[3];
    if ((rc = pf_json_get_number(r, path, "fwd_ms", PF_JSON_GET_REQUIRED | PF_JSON_GET_POSITIVE,
                                 0, &g->fwd_ms, err, errlen)) ||
        (rc = pf_json_get_number(r, path, "bwd_ms", PF_JSON_GET_REQUIRED | PF_JSON_GET_POSITIVE,
                                 0, &g->bwd_ms, err, errlen)))
        return rc;
    return PF_OK;
}

static int read_records(json_t *root, fit_t *f, char *err, size_t errlen)
{
    const char *fmt;
    json_t *ga, *ca;
    int rc;
    if ((rc = pf_json_get_string(root, "sweep", "format", PF_JSON_GET_REQUIRED, NULL, &fmt, err,
                                 errlen)))
        return rc;
    if (strcmp(fmt, "planfarm-device-sweep"))
        return pf_fail(err, errlen, PF_EINPUT, "sweep.format: '%s' is not planfarm-device-sweep",
                       fmt);
    if ((rc = pf_json_get_array(root, "sweep", "gemm", PF_JSON_GET_REQUIRED, &ga, err, errlen)) ||
        (rc = pf_json_get_array(root, "sweep", "hbm_copy", PF_JSON_GET_REQUIRED, &ca, err,
                                errlen)))
        return rc;
    f->g = calloc(json_array_size(ga) + 1, sizeof *f->g);
    f->c = calloc(json_array_size(ca) + 1, sizeof *f->c);
    if (!f->g || !f->c)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (size_t i = 0; i < json_array_size(ga); i++)
        if ((rc = read_gemm(json_array_get(ga, i), (int)i, &f->g[f->ng++], err, errlen)))
            return rc;
    for (size_t i = 0; i < json_array_size(ca); i++) {
        char path[48];
        json_t *r = json_array_get(ca, i);
        snprintf(path, sizeof path, "hbm_copy[%zu]", i);
        copy_rec_t *c = &f->c[f->nc++];
        if ((rc = pf_json_get_number(r, path, "bytes", PF_JSON_GET_REQUIRED |
                                     PF_JSON_GET_POSITIVE, 0, &c->bytes, err, errlen)) ||
            (rc = pf_json_get_number(r, path, "ms", PF_JSON_GET_REQUIRED | PF_JSON_GET_POSITIVE,
                                     0, &c->ms, err, errlen)))
            return rc;
    }
    if (f->nc == 0)
        return pf_fail(err, errlen, PF_EINPUT, "sweep.hbm_copy: no records");
    return PF_OK;
}

/* The record's forward efficiency: 2 m n k over its time at peak TFLOP/s. */
static double measured_eff(const gemm_rec_t *g, double peak_tflops)
{
    return 2 * g->m * g->n * g->k / (g->fwd_ms * 1e-3 * peak_tflops * 1e12);
}

/* Insert x into the sorted set g[0..*n); -1 when it would pass the grid's limit. */
static int grid_add(double *g, int *n, double x)
{
    int i = 0;
    while (i < *n && g[i] < x)
        i++;
    if (i < *n && g[i] == x)
        return 0;
    if (*n == PF_DEVMODEL_GRID_MAX)
        return -1;
    memmove(g + i + 1, g + i, (size_t)(*n - i) * sizeof *g);
    g[i] = x;
    (*n)++;
    return 0;
}

static int grid_at(const double *g, int n, double x)
{
    for (int i = 0; i < n; i++)
        if (g[i] == x)
            return i;
    return -1;
}

/* The table: the grid of the table precision's batch-1 records and each cell's mean efficiency
 * against peak. */
static int fit_table(const fit_t *f, int prec, double peak, pf_devmodel_spec_t *s,
                     pf_devmodel_t **dm, char *err, size_t errlen)
{
    double gm[PF_DEVMODEL_GRID_MAX], gn[PF_DEVMODEL_GRID_MAX], gk[PF_DEVMODEL_GRID_MAX];
    int nm = 0, nn = 0, nk = 0, rc = PF_OK;
    for (int i = 0; i < f->ng; i++) {
        const gemm_rec_t *g = &f->g[i];
        if (g->prec == prec && g->batch == 1 &&
            (grid_add(gm, &nm, g->m) || grid_add(gn, &nn, g->n) || grid_add(gk, &nk, g->k)))
            return pf_fail(err, errlen, PF_EINPUT, "gemm[%d]: more than %d distinct sizes on an "
                           "axis of the %s grid", i, PF_DEVMODEL_GRID_MAX, pf_devmodel_prec_name(prec));
    }
    if (nm == 0)
        return pf_fail(err, errlen, PF_EINPUT, "gemm: no %s record with batch 1",
                       pf_devmodel_prec_name(prec));
    size_t cells = (size_t)nm * nn * nk;
    double *sum = calloc(cells, sizeof *sum), *cnt = calloc(cells, sizeof *cnt);
    if (!sum || !cnt) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    for (int i = 0; i < f->ng; i++) {
        const gemm_rec_t *g = &f->g[i];
        if (g->prec != prec || g->batch != 1)
            continue;
        size_t c = ((size_t)grid_at(gm, nm, g->m) * nn + grid_at(gn, nn, g->n)) * nk +
                   grid_at(gk, nk, g->k);
        sum[c] += measured_eff(g, peak);
        cnt[c] += 1;
    }
    for (size_t c = 0; c < cells; c++) {
        if (cnt[c] == 0) {
            rc = pf_fail(err, errlen, PF_EINPUT, "gemm: no %s record at m %g, n %g, k %g (the "
                         "grid needs every combination)", pf_devmodel_prec_name(prec),
                         gm[c / nk / nn], gn[c / nk % nn], gk[c % nk]);
            goto fail;
        }
        sum[c] = fmin(sum[c] / cnt[c], 1);
    }
    if (!(*dm = pf_devmodel_new(s, nm, gm, nn, gn, nk, gk, sum, err, errlen)))
        rc = PF_EINPUT;
fail:
    free(sum);
    free(cnt);
    return rc;
}

/* hbm_gbps the slope between the two largest copies (the largest alone when there is one, or
 * when the slope is not positive), launch_us the median excess over bytes / hbm_gbps. */
static int fit_copy(const fit_t *f, pf_devmodel_spec_t *s, char *err, size_t errlen)
{
    int big = 0, next = -1;
    for (int i = 1; i < f->nc; i++)
        if (f->c[i].bytes > f->c[big].bytes)
            big = i;
    for (int i = 0; i < f->nc; i++)
        if (f->c[i].bytes < f->c[big].bytes && (next < 0 || f->c[i].bytes > f->c[next].bytes))
            next = i;
    s->hbm_gbps = 2 * f->c[big].bytes / (f->c[big].ms * 1e6);
    if (next >= 0 && f->c[big].ms > f->c[next].ms)
        s->hbm_gbps = 2 * (f->c[big].bytes - f->c[next].bytes) /
                      ((f->c[big].ms - f->c[next].ms) * 1e6);
    double *ex = malloc((size_t)f->nc * sizeof *ex);
    if (!ex)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (int i = 0; i < f->nc; i++)
        ex[i] = fmax(0, f->c[i].ms - pf_bytes_ms(2 * f->c[i].bytes, s->hbm_gbps)) * 1000;
    s->launch_us = pf_median_sort(ex, (size_t)f->nc);
    free(ex);
    return PF_OK;
}

/* Each other precision's scale: its largest batch-1 GEMM's efficiency over the table's. */
static void fit_scales(const fit_t *f, int table_prec, pf_devmodel_t *dm)
{
    pf_devmodel_spec_t s = *pf_devmodel_spec(dm);
    for (int p = 0; p < PF_PREC_COUNT; p++) {
        int best = -1;
        double peak = pf_devmodel_peak_tflops(dm, (pf_prec_t)p);
        for (int i = 0; i < f->ng; i++)
            if (f->g[i].prec == p && f->g[i].batch == 1 &&
                (best < 0 || f->g[i].m * f->g[i].n * f->g[i].k >
                                 f->g[best].m * f->g[best].n * f->g[best].k))
                best = i;
        if (p == table_prec || best < 0 || !(s.peak_tflops[p] > 0))
            continue;
        const gemm_rec_t *g = &f->g[best];
        double scale = measured_eff(g, peak) / pf_devmodel_gemm_eff(dm, g->m, g->n, g->k);
        s.prec_scale[p] = fmin(fmax(scale, 1e-3), 10);
    }
    pf_devmodel_set_spec(dm, &s);
}

/* One relative error into the family of that name (made on first use). */
static void book(pf_devfit_report_t *rep, const char *name, double err)
{
    int i = 0;
    while (i < rep->nfamilies && strcmp(rep->family[i].name, name))
        i++;
    if (i == rep->nfamilies) {
        if (i == PF_DEVFIT_FAMILIES)
            return;
        rep->nfamilies++;
        memset(&rep->family[i], 0, sizeof rep->family[i]);
        snprintf(rep->family[i].name, sizeof rep->family[i].name, "%s", name);
    }
    pf_devfit_family_t *f = &rep->family[i];
    f->n++;
    f->rms += err * err; /* a sum until report() ends */
    if (fabs(err) > fabs(f->worst))
        f->worst = err;
}

static void report(const fit_t *f, const pf_devmodel_t *dm, pf_devfit_report_t *rep)
{
    memset(rep, 0, sizeof *rep);
    for (int i = 0; i < f->ng; i++) {
        const gemm_rec_t *g = &f->g[i];
        pf_op_work_t w = {.gemm_m = (int64_t)g->m, .gemm_n = (int64_t)g->n,
                          .gemm_k = (int64_t)g->k, .gemm_batch = (int64_t)g->batch};
        double fwd, bwd;
        char name[40];
        pf_devmodel_op_ms(dm, (pf_prec_t)g->prec, &w, &fwd, &bwd);
        snprintf(name, sizeof name, "%s%s fwd", pf_devmodel_prec_name(g->prec),
                 g->batch > 1 ? " batched" : "");
        book(rep, name, fwd / g->fwd_ms - 1);
        snprintf(name, sizeof name, "%s%s bwd", pf_devmodel_prec_name(g->prec),
                 g->batch > 1 ? " batched" : "");
        book(rep, name, bwd / g->bwd_ms - 1);
    }
    for (int i = 0; i < f->nc; i++)
        book(rep, "hbm copy", pf_devmodel_memory_ms(dm, 2 * f->c[i].bytes) / f->c[i].ms - 1);
    for (int i = 0; i < rep->nfamilies; i++)
        rep->family[i].rms = sqrt(rep->family[i].rms / rep->family[i].n);
    rep->ngemm = f->ng, rep->ncopy = f->nc;
}

static int convert_sweep(json_t *root, void *ctx, char *err, size_t errlen)
{
    fit_t *f = ctx;
    pf_devmodel_spec_t s = *pf_devmodel_spec(f->base);
    pf_devmodel_t *dm = NULL;
    int rc, prec = PF_PREC_BF16;
    double mem;
    if ((rc = read_records(root, f, err, errlen)) ||
        (rc = pf_json_get_number(json_object_get(root, "gpu"), "sweep.gpu", "mem_bytes",
                                 PF_JSON_GET_POSITIVE, s.mem_bytes, &mem, err, errlen)) ||
        (rc = fit_copy(f, &s, err, errlen)))
        return rc;
    s.mem_bytes = fmin(mem, PF_MAX_BYTES);
    for (int p = 0; p < PF_PREC_COUNT; p++)
        s.prec_scale[p] = 1;
    if (!(s.peak_tflops[prec] > 0))
        prec = PF_PREC_FP16; /* a GPU without bf16 (V100): the table is fp16's */
    if ((rc = fit_table(f, prec, s.peak_tflops[prec], &s, &dm, err, errlen)))
        return rc;
    fit_scales(f, prec, dm);
    report(f, dm, f->rep);
    *f->out = dm;
    return PF_OK;
}

int pf_devfit_sweep_json(json_t *root, const char *label, const pf_devmodel_t *base,
                         pf_devmodel_t **out, pf_devfit_report_t *rep, char *err,
                         size_t errlen)
{
    fit_t f = {.base = base, .out = out, .rep = rep};
    *out = NULL;
    int rc = pf_json_convert(root, label, convert_sweep, &f, err, errlen);
    free(f.g);
    free(f.c);
    return rc;
}

int pf_devfit_sweep_file(const char *path, const pf_devmodel_t *base, pf_devmodel_t **out,
                         pf_devfit_report_t *rep, char *err, size_t errlen)
{
    fit_t f = {.base = base, .out = out, .rep = rep};
    *out = NULL;
    int rc = pf_json_read_file(path, convert_sweep, &f, err, errlen);
    free(f.g);
    free(f.c);
    return rc;
}
