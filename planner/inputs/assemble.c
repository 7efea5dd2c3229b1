#include "planner/inputs/assemble.h"
#include "planner/core/json.h"
#include "planner/core/util.h"
#include "planner/ir/cluster_hier.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct pf_assembly {
    char *name;
    pf_record_device_t *dev; /* sorted into cluster order by build */
    size_t ndev, devcap;
    pf_link_fit_t *link;
    size_t nlink, linkcap;
    int *origin; /* ndev x ndev, link index per matrix entry, from the last build */
    int norigin;
};

pf_assemble_t *pf_assemble_new(const char *cluster_name, char *err, size_t errlen)
{
    pf_assemble_t *a = calloc(1, sizeof *a);
    if (!a || !(a->name = pf_strdup(cluster_name ? cluster_name : "profiled"))) {
        free(a);
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    return a;
}

void pf_assemble_destroy(pf_assemble_t **ap)
{
    if (!ap || !*ap)
        return;
    free((*ap)->name);
    free((*ap)->dev);
    free((*ap)->link);
    free((*ap)->origin);
    free(*ap);
    *ap = NULL;
}

static int find_host(const pf_assemble_t *a, const char *host)
{
    for (size_t i = 0; i < a->ndev; i++)
        if (!strcmp(a->dev[i].host, host))
            return (int)i;
    return -1;
}

int pf_assemble_add_device(pf_assemble_t *a, const pf_record_device_t *d, char *err, size_t errlen)
{
    int rc = pf_record_check_device(d, err, errlen);
    if (rc != PF_OK)
        return rc;
    for (size_t i = 0; i < a->ndev; i++)
        if (!strcmp(a->dev[i].host, d->host) && a->dev[i].index == d->index)
            return pf_fail(err, errlen, PF_EINPUT, "device %s:%d given twice", d->host,
                           d->index);
    if (pf_grow((void **)&a->dev, &a->devcap, a->ndev + 1, sizeof *a->dev))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    a->dev[a->ndev++] = *d;
    return PF_OK;
}

int pf_assemble_add_link(pf_assemble_t *a, const pf_record_link_t *l, char *err, size_t errlen)
{
    char where[2 * PF_REC_NAME + 64];
    pf_link_fit_t lf = {.rec = *l};
    int rc;
    if ((rc = pf_record_check_link(l, err, errlen)) != PF_OK)
        return rc;
    snprintf(where, sizeof where, "link %s:%d -> %s:%d", l->src_host, l->src_index, l->dst_host,
             l->dst_index);
    if ((rc = pf_postal_fit(l->bytes, l->ms, l->nsizes, PF_POSTAL_TOL, &lf.fit, err, errlen))) {
        pf_err_prefix(err, errlen, where);
        return rc;
    }
    if (pf_grow((void **)&a->link, &a->linkcap, a->nlink + 1, sizeof *a->link))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    a->link[a->nlink++] = lf;
    return PF_OK;
}

int pf_assemble_ndevices(const pf_assemble_t *a) { return (int)a->ndev; }
int pf_assemble_nlinks(const pf_assemble_t *a) { return (int)a->nlink; }
const pf_record_device_t *pf_assemble_device(const pf_assemble_t *a, int i) { return &a->dev[i]; }
const pf_link_fit_t *pf_assemble_link(const pf_assemble_t *a, int i) { return &a->link[i]; }

int pf_assemble_origin(const pf_assemble_t *a, int src, int dst)
{
    if (!a->origin || src < 0 || dst < 0 || src >= a->norigin || dst >= a->norigin)
        return -1;
    return a->origin[(size_t)src * a->norigin + dst];
}

/* Host position = order of the host's first device record; computed before sorting. */
static int *host_positions(const pf_assemble_t *a)
{
    int *pos = malloc(a->ndev * sizeof *pos);
    int nhosts = 0;
    if (!pos)
        return NULL;
    for (size_t i = 0; i < a->ndev; i++) {
        int first = find_host(a, a->dev[i].host);
        pos[i] = (size_t)first == i ? nhosts++ : pos[first];
    }
    return pos;
}

typedef struct {
    pf_record_device_t d;
    int host;
} keyed_dev_t;

static int cmp_keyed(const void *x, const void *y)
{
    const keyed_dev_t *a = x, *b = y;
    if (a->host != b->host)
        return a->host - b->host;
    return a->d.index - b->d.index;
}

/* The best record from (sh, si) to (dh, di): highest fitted bandwidth; -1 when none. */
static int best_link(const pf_assemble_t *a, const char *sh, int si, const char *dh, int di)
{
    int best = -1;
    for (size_t k = 0; k < a->nlink; k++) {
        const pf_record_link_t *r = &a->link[k].rec;
        if (r->src_index != si || r->dst_index != di || strcmp(r->src_host, sh) ||
            strcmp(r->dst_host, dh))
            continue;
        if (best < 0 || a->link[k].fit.gbps > a->link[best].fit.gbps)
            best = (int)k;
    }
    return best;
}

int pf_assemble_build(pf_assemble_t *a, pf_cluster_t **out, char *err, size_t errlen)
{
    pf_cluster_t *c = NULL;
    keyed_dev_t *kd = NULL;
    int *hostpos = NULL, rc;
    *out = NULL;
    if (a->ndev == 0)
        return pf_fail(err, errlen, PF_EINPUT, "no device records");
    int n = (int)a->ndev;
    if (!(hostpos = host_positions(a)) || !(kd = malloc(a->ndev * sizeof *kd)) ||
        !(c = pf_cluster_new(a->name, n))) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    for (int i = 0; i < n; i++)
        kd[i] = (keyed_dev_t){a->dev[i], hostpos[i]};
    qsort(kd, a->ndev, sizeof *kd, cmp_keyed);
    free(a->origin);
    a->norigin = 0;
    if (!(a->origin = malloc((size_t)n * n * sizeof *a->origin))) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    a->norigin = n;
    for (int i = 0; i < n; i++) {
        a->dev[i] = kd[i].d;
        pf_device_t d = {.id = i, .host = kd[i].host, .name = kd[i].d.name,
                         .mem_bytes = kd[i].d.mem_bytes, .tflops = kd[i].d.tflops};
        if (pf_cluster_set_device(c, i, &d) != PF_OK) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    for (size_t k = 0; k < a->nlink; k++)
        a->link[k].used = 0;
    for (int s = 0; s < n; s++) {
        for (int t = 0; t < n; t++) {
            const pf_record_device_t *x = &a->dev[s], *y = &a->dev[t];
            int k;
            a->origin[(size_t)s * n + t] = -1;
            if (s == t)
                continue;
            if (kd[s].host == kd[t].host) {
                k = best_link(a, x->host, x->index, y->host, y->index);
                if (k < 0)
                    k = best_link(a, y->host, y->index, x->host, x->index);
            } else {
                k = best_link(a, x->host, PF_END_HOST, y->host, PF_END_HOST);
                if (k < 0)
                    k = best_link(a, y->host, PF_END_HOST, x->host, PF_END_HOST);
            }
            if (k < 0) {
                rc = pf_fail(err, errlen, PF_EINPUT,
                             "no link measured between %s:%d and %s:%d (devices %d and %d)%s",
                             x->host, x->index, y->host, y->index, s, t,
                             kd[s].host == kd[t].host ? "" : ": the hosts were never paired");
                goto fail;
            }
            a->origin[(size_t)s * n + t] = k;
            a->link[k].used++;
            pf_cluster_set_bw(c, s, t, a->link[k].fit.gbps);
            pf_cluster_set_lat(c, s, t, a->link[k].fit.lat_ms * 1e3);
        }
    }
    if ((rc = pf_cluster_validate(c, err, errlen)) != PF_OK)
        goto fail;
    free(hostpos);
    free(kd);
    *out = c;
    return PF_OK;
fail:
    free(hostpos);
    free(kd);
    pf_cluster_destroy(&c);
    return rc;
}

static void write_when(pf_json_writer_t *w, double unix_s)
{
    char buf[32];
    time_t t = (time_t)unix_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    pf_json_writer_key(w, "when");
    pf_json_writer_str(w, buf);
}

static void emit_provenance(pf_json_writer_t *w, const void *ctx)
{
    const pf_assemble_t *a = ctx;
    int n = a->norigin;
    pf_json_writer_key(w, "provenance");
    pf_json_writer_obj_begin(w);
    pf_json_writer_key(w, "tool");
    pf_json_writer_str(w, "planfarm profile");
    pf_json_writer_key(w, "model");
    pf_json_writer_str(w, "postal: ms(bytes) = lat_us / 1000 + bytes / (gbps * 1e6); look-up table "
                 "(lut: [bytes, ms]) below crossover_bytes");
    pf_json_writer_key(w, "devices");
    pf_json_writer_arr_begin(w);
    for (size_t i = 0; i < a->ndev; i++) {
        const pf_record_device_t *d = &a->dev[i];
        pf_json_writer_obj_begin_inline(w);
        pf_json_writer_key(w, "device"); pf_json_writer_int(w, (int64_t)i);
        pf_json_writer_key(w, "host"); pf_json_writer_str(w, d->host);
        pf_json_writer_key(w, "index"); pf_json_writer_int(w, d->index);
        pf_json_writer_key(w, "source");
        pf_json_writer_str(w, pf_record_source_name(d->source));
        pf_json_writer_key(w, "measured_by"); pf_json_writer_str(w, d->measured_by);
        write_when(w, d->when_unix_s);
        pf_json_writer_key(w, "tflops"); pf_json_writer_num(w, d->tflops);
        pf_json_writer_key(w, "mem_gbps"); pf_json_writer_num(w, d->mem_gbps);
        pf_json_writer_key(w, "sm_count"); pf_json_writer_int(w, d->sm_count);
        pf_json_writer_key(w, "clock_mhz"); pf_json_writer_num(w, d->clock_mhz);
        pf_json_writer_obj_end(w);
    }
    pf_json_writer_arr_end(w);
    pf_json_writer_key(w, "links");
    pf_json_writer_arr_begin(w);
    for (size_t k = 0; k < a->nlink; k++) {
        const pf_link_fit_t *l = &a->link[k];
        pf_json_writer_obj_begin(w);
        pf_json_writer_key(w, "src_host"); pf_json_writer_str(w, l->rec.src_host);
        pf_json_writer_key(w, "src_index"); pf_json_writer_int(w, l->rec.src_index);
        pf_json_writer_key(w, "dst_host"); pf_json_writer_str(w, l->rec.dst_host);
        pf_json_writer_key(w, "dst_index"); pf_json_writer_int(w, l->rec.dst_index);
        pf_json_writer_key(w, "source");
        pf_json_writer_str(w, pf_record_source_name(l->rec.source));
        pf_json_writer_key(w, "method"); pf_json_writer_str(w, l->rec.method);
        pf_json_writer_key(w, "measured_by"); pf_json_writer_str(w, l->rec.measured_by);
        write_when(w, l->rec.when_unix_s);
        if (l->rec.topo_level >= 0) {
            pf_json_writer_key(w, "nvml_topology"); pf_json_writer_int(w, l->rec.topo_level);
            pf_json_writer_key(w, "nvlinks"); pf_json_writer_int(w, l->rec.nvlinks);
        }
        pf_json_writer_key(w, "lat_us"); pf_json_writer_num(w, l->fit.lat_ms * 1e3);
        pf_json_writer_key(w, "gbps"); pf_json_writer_num(w, l->fit.gbps);
        pf_json_writer_key(w, "fit_rel_rms"); pf_json_writer_num(w, l->fit.fit_rel_rms);
        pf_json_writer_key(w, "crossover_bytes"); pf_json_writer_num(w, l->fit.crossover_bytes);
        pf_json_writer_key(w, "lut");
        pf_json_writer_arr_begin_inline(w);
        for (int i = 0; i < l->fit.nlut; i++) {
            pf_json_writer_arr_begin_inline(w);
            pf_json_writer_num(w, l->fit.lut_bytes[i]);
            pf_json_writer_num(w, l->fit.lut_ms[i]);
            pf_json_writer_arr_end(w);
        }
        pf_json_writer_arr_end(w);
        pf_json_writer_key(w, "used_for");
        pf_json_writer_arr_begin_inline(w);
        for (int s = 0; s < n; s++)
            for (int t = 0; t < n; t++)
                if (a->origin[(size_t)s * n + t] == (int)k) {
                    pf_json_writer_arr_begin_inline(w);
                    pf_json_writer_int(w, s);
                    pf_json_writer_int(w, t);
                    pf_json_writer_arr_end(w);
                }
        pf_json_writer_arr_end(w);
        pf_json_writer_obj_end(w);
    }
    pf_json_writer_arr_end(w);
    pf_json_writer_obj_end(w);
}

int pf_assemble_save(const pf_assemble_t *a, const pf_cluster_t *c, const char *path, char *err,
                     size_t errlen)
{
    if (!a->origin || a->norigin != pf_cluster_ndevices(c))
        return pf_fail(err, errlen, PF_ERR, "assembly: save before build");
    return pf_cluster_save_extra(c, path, emit_provenance, a, err, errlen);
}

int pf_assemble_json(const pf_assemble_t *a, const pf_cluster_t *c, char **json, size_t *len,
                     char *err, size_t errlen)
{
    *json = NULL;
    *len = 0;
    if (!a->origin || a->norigin != pf_cluster_ndevices(c))
        return pf_fail(err, errlen, PF_ERR, "assembly: write before build");
    FILE *f = open_memstream(json, len);
    if (!f)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    int rc = pf_cluster_write_extra(c, f, emit_provenance, a, err, errlen);
    if (fclose(f) != 0 && rc == PF_OK)
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
    if (rc != PF_OK) {
        free(*json);
        *json = NULL;
        *len = 0;
    }
    return rc;
}

/* ---- the hierarchy a measured matrix fits (issue 23 item 1) ---- */

/* The median of v[0..n) (sorted in place), and whether every value is within tol of it. */
static int uniform(double *v, size_t n, double tol, double *median)
{
    *median = pf_median_sort(v, n);
    return v[0] >= *median * (1 - tol) && v[n - 1] <= *median * (1 + tol);
}

/* Bandwidth and latency of the pairs inside one host (inside = 1) or across hosts, over G-GPU
 * hosts numbered host-major: PF_OK with their medians, PF_EINFEASIBLE naming the spread. */
static int pair_medians(const pf_cluster_t *c, int G, int inside, double tol, double *bw,
                        double *lat, char *why, size_t whylen)
{
    int n = pf_cluster_ndevices(c);
    size_t m = 0, cap = inside ? (size_t)n * (G - 1) : (size_t)n * (n - G);
    double *b = malloc(2 * cap * sizeof *b), *l = b + cap;
    if (!b)
        return pf_fail(why, whylen, PF_ERR, "out of memory");
    for (int s = 0; s < n; s++)
        for (int t = 0; t < n; t++)
            if (s != t && (s / G == t / G) == inside) {
                b[m] = pf_cluster_bw_gbps(c, s, t);
                l[m++] = pf_cluster_lat_us(c, s, t);
            }
    int ok = uniform(b, m, tol, bw);
    uniform(l, m, INFINITY, lat);
    int rc = ok ? PF_OK
                : pf_fail(why, whylen, PF_EINFEASIBLE, "%s bandwidths %.3g to %.3g GB/s differ "
                          "from their median %.3g by more than %.0f%%", inside ? "in-host" :
                          "between-host", b[0], b[m - 1], *bw, tol * 100);
    free(b);
    return rc;
}

/* Every host holds G devices, host-major, of one memory and (within tol) one peak. */
static int one_kind(const pf_cluster_t *c, double tol, int *G, pf_cluster_host_kind_t *kind,
                    char *why, size_t whylen)
{
    int n = pf_cluster_ndevices(c), H = pf_cluster_nhosts(c);
    double *tf = malloc((size_t)n * sizeof *tf), mem = INFINITY;
    if (!tf)
        return pf_fail(why, whylen, PF_ERR, "out of memory");
    *G = n / H;
    int rc = PF_OK;
    for (int i = 0; i < n && rc == PF_OK; i++) {
        const pf_device_t *d = pf_cluster_device(c, i);
        if (n % H || d->host != i / *G)
            rc = pf_fail(why, whylen, PF_EINFEASIBLE, "hosts hold different GPU counts");
        else if (i > 0 && d->mem_bytes != pf_cluster_device(c, 0)->mem_bytes)
            rc = pf_fail(why, whylen, PF_EINFEASIBLE, "GPUs of different memory (devices 0 "
                         "and %d)", i);
        mem = fmin(mem, d->mem_bytes);
        tf[i] = d->tflops;
    }
    *kind = (pf_cluster_host_kind_t){.name = "measured", .gpus = *G, .mem_bytes = mem,
                                     .lat_us = -1};
    if (rc == PF_OK && !uniform(tf, (size_t)n, tol, &kind->tflops))
        rc = pf_fail(why, whylen, PF_EINFEASIBLE, "measured peaks %.3g to %.3g TFLOP/s differ "
                     "by more than %.0f%%", tf[0], tf[n - 1], tol * 100);
    free(tf);
    return rc;
}

int pf_assemble_hierarchy(const pf_cluster_t *c, double tol, pf_cluster_t **out, char *why,
                          size_t whylen)
{
    pf_cluster_host_kind_t kind;
    pf_cluster_level_t lv[2] = {{.name = "host", .oversub = 1},
                                {.name = "network", .count = 0, .oversub = 1}};
    int G = 1, H = pf_cluster_nhosts(c), rc;
    *out = NULL;
    if (pf_cluster_ndevices(c) < 2)
        return pf_fail(why, whylen, PF_EINFEASIBLE, "one device: no link to describe");
    if ((rc = one_kind(c, tol, &G, &kind, why, whylen)) != PF_OK ||
        (G > 1 && (rc = pair_medians(c, G, 1, tol, &lv[0].bw_gbps, &lv[0].lat_us, why,
                                     whylen)) != PF_OK) ||
        (H > 1 && (rc = pair_medians(c, G, 0, tol, &lv[1].bw_gbps, &lv[1].lat_us, why,
                                     whylen)) != PF_OK))
        return rc;
    lv[0].count = G;
    if (G == 1) /* no pair inside a host: the level's link is never used */
        lv[0].bw_gbps = lv[1].bw_gbps, lv[0].lat_us = lv[1].lat_us;
    if (H == 1)
        lv[1].bw_gbps = lv[0].bw_gbps, lv[1].lat_us = lv[0].lat_us;
    pf_cluster_hier_t *h = pf_cluster_hier_new(H, lv, 2, &kind, 1);
    if (!h || pf_cluster_hier_validate(h, why, whylen) != PF_OK) {
        rc = h ? PF_EINFEASIBLE : pf_fail(why, whylen, PF_ERR, "out of memory");
        pf_cluster_hier_destroy(&h);
        return rc;
    }
    if (!(*out = pf_cluster_new_hier(pf_cluster_name(c), h))) {
        pf_cluster_hier_destroy(&h);
        return pf_fail(why, whylen, PF_ERR, "out of memory");
    }
    return PF_OK;
}

void pf_assemble_prefer_hierarchy(pf_cluster_t **c)
{
    pf_cluster_t *h;
    char why[256];
    if (pf_assemble_hierarchy(*c, PF_ASSEMBLE_HIER_TOL, &h, why, sizeof why) == PF_OK) {
        pf_cluster_destroy(c);
        *c = h;
    }
}
