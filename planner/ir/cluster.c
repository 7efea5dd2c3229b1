#include "planner/ir/cluster.h"
#include "planner/ir/cluster_hier.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct pf_cluster {
    char *name;
    int n;
    pf_device_t *dev;
    /* n x n (GB/s, us): the file's matrices, or for a hierarchy NULL until someone asks for
     * the matrix (materialize(), under lock: clusters are shared by a worker's threads) */
    double *bw, *lat;
    int has_lat;
    pf_cluster_hier_t *hier; /* format 2 (cluster_hier.h), NULL for a matrix */
    pthread_mutex_t lock;    /* the lazily computed parts below and the matrices of a hierarchy */
    int stats_ok;
    double stat_min, stat_median, stat_max;
};

static pf_cluster_t *cluster_alloc(const char *name, int ndevices, int matrices)
{
    pf_cluster_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    size_t nn = (size_t)ndevices * (size_t)ndevices;
    c->n = ndevices;
    c->stat_min = c->stat_median = c->stat_max = NAN;
    pthread_mutex_init(&c->lock, NULL);
    c->name = pf_strdup(name ? name : "cluster");
    c->dev = calloc((size_t)ndevices, sizeof *c->dev);
    if (matrices) {
        c->bw = calloc(nn, sizeof *c->bw);
        c->lat = calloc(nn, sizeof *c->lat);
    }
    if (!c->name || !c->dev || (matrices && (!c->bw || !c->lat))) {
        pf_cluster_destroy(&c);
        return NULL;
    }
    for (int i = 0; i < ndevices; i++)
        c->dev[i].id = i;
    return c;
}

pf_cluster_t *pf_cluster_new(const char *name, int ndevices)
{
    if (ndevices <= 0 || ndevices > (1 << 15))
        return NULL;
    return cluster_alloc(name, ndevices, 1);
}

/* Devices numbered host by host: node<h>/gpu<g>, the generators' names. */
pf_cluster_t *pf_cluster_new_hier(const char *name, pf_cluster_hier_t *h)
{
    int n = pf_cluster_hier_ndevices(h), i = 0;
    pf_cluster_t *c = n > 0 ? cluster_alloc(name, n, 0) : NULL;
    if (!c)
        return NULL;
    for (int host = 0; host < pf_cluster_hier_hosts(h); host++) {
        int k = pf_cluster_hier_host_kind(h, host);
        const pf_cluster_host_kind_t *x = k >= 0 ? pf_cluster_hier_kind(h, k) : NULL;
        for (int g = 0; x && g < x->gpus; g++, i++) {
            char nm[48];
            snprintf(nm, sizeof nm, "node%d/gpu%d", host, g);
            pf_device_t d = {.id = i, .host = host, .name = nm, .mem_bytes = x->mem_bytes,
                             .tflops = x->tflops, .device_model = x->device_model};
            if (pf_cluster_set_device(c, i, &d) != PF_OK) {
                pf_cluster_destroy(&c);
                return NULL;
            }
        }
    }
    c->hier = h;
    c->has_lat = pf_cluster_hier_has_latency(h);
    return c;
}

void pf_cluster_destroy(pf_cluster_t **cp)
{
    if (!cp || !*cp)
        return;
    pf_cluster_t *c = *cp;
    if (c->dev) {
        for (int i = 0; i < c->n; i++) {
            free((char *)c->dev[i].name);
            free((char *)c->dev[i].device_model);
        }
    }
    free(c->dev);
    free(c->bw);
    free(c->lat);
    free(c->name);
    pf_cluster_hier_destroy(&c->hier);
    pthread_mutex_destroy(&c->lock);
    free(c);
    *cp = NULL;
}

int pf_cluster_set_device(pf_cluster_t *c, int i, const pf_device_t *d)
{
    if (i < 0 || i >= c->n)
        return PF_ERR;
    char fallback[32];
    const char *name = d->name;
    if (!name) {
        snprintf(fallback, sizeof fallback, "dev%lld", (long long)d->id);
        name = fallback;
    }
    char *copy = pf_strdup(name);
    char *model = d->device_model ? pf_strdup(d->device_model) : NULL;
    if (!copy || (d->device_model && !model)) {
        free(copy);
        free(model);
        return PF_ERR;
    }
    free((char *)c->dev[i].name);
    free((char *)c->dev[i].device_model);
    c->dev[i] = *d;
    c->dev[i].name = copy;
    c->dev[i].device_model = model;
    return PF_OK;
}

void pf_cluster_set_bw(pf_cluster_t *c, int a, int b, double gbps)
{
    if (c->hier)
        return; /* a hierarchy's links are its levels' */
    c->bw[(size_t)a * c->n + b] = gbps;
    c->stats_ok = 0;
}

void pf_cluster_set_lat(pf_cluster_t *c, int a, int b, double us)
{
    if (c->hier)
        return;
    c->lat[(size_t)a * c->n + b] = us;
    if (us != 0)
        c->has_lat = 1;
}

void pf_cluster_set_link(pf_cluster_t *c, int a, int b, double gbps, double lat_us)
{
    pf_cluster_set_bw(c, a, b, gbps);
    pf_cluster_set_bw(c, b, a, gbps);
    pf_cluster_set_lat(c, a, b, lat_us);
    pf_cluster_set_lat(c, b, a, lat_us);
}

static int validate_matrices(const pf_cluster_t *c, char *err, size_t errlen);


static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int pf_cluster_validate(const pf_cluster_t *c, char *err, size_t errlen)
{
    char where[64];
    int rc;
    if ((rc = pf_check_name(c->name, "cluster.name", err, errlen)) != PF_OK)
        return rc;
    for (int i = 0; i < c->n; i++) {
        const pf_device_t *d = &c->dev[i];
        if (d->id < 0)
            return pf_fail(err, errlen, PF_EINPUT, "devices[%d].id: negative (%lld)", i,
                           (long long)d->id);
        snprintf(where, sizeof where, "devices[%d].name", i);
        if ((rc = pf_check_name(d->name, where, err, errlen)) != PF_OK)
            return rc;
        if (!isfinite(d->mem_bytes) || d->mem_bytes <= 0)
            return pf_fail(err, errlen, PF_EINPUT, "devices[%d].mem_bytes: must be positive", i);
        snprintf(where, sizeof where, "devices[%d].mem_bytes", i);
        if ((rc = pf_check_range(d->mem_bytes, PF_MAX_BYTES, "bytes", where, err, errlen)))
            return rc;
        if (!isfinite(d->tflops) || d->tflops < 0)
            return pf_fail(err, errlen, PF_EINPUT, "devices[%d].tflops: negative", i);
        snprintf(where, sizeof where, "devices[%d].tflops", i);
        if ((rc = pf_check_range(d->tflops, PF_MAX_TFLOPS, "TFLOPs", where, err, errlen)))
            return rc;
        if (d->host < 0)
            return pf_fail(err, errlen, PF_EINPUT, "devices[%d].host: negative", i);
        snprintf(where, sizeof where, "devices[%d].device_model", i);
        if ((rc = pf_cluster_hier_check_model(d->device_model, where, err, errlen)) != PF_OK)
            return rc;
    }
    int64_t *ids = malloc((size_t)c->n * sizeof *ids);
    if (!ids)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (int i = 0; i < c->n; i++)
        ids[i] = c->dev[i].id;
    qsort(ids, (size_t)c->n, sizeof *ids, cmp_i64);
    for (int i = 1; i < c->n; i++) {
        if (ids[i] == ids[i - 1]) {
            int64_t dup = ids[i];
            free(ids);
            return pf_fail(err, errlen, PF_EINPUT, "devices: duplicate id %lld", (long long)dup);
        }
    }
    free(ids);
    if (c->hier) /* O(hosts): nothing is stored per pair */
        return pf_cluster_hier_validate(c->hier, err, errlen);
    return validate_matrices(c, err, errlen);
}

/* Every entry of the D x D matrices: O(D^2), so at load only (issue 23). */
static int validate_matrices(const pf_cluster_t *c, char *err, size_t errlen)
{
    for (int a = 0; a < c->n; a++) {
        for (int b = 0; b < c->n; b++) {
            double bw = c->bw[(size_t)a * c->n + b], lat = c->lat[(size_t)a * c->n + b];
            if (!isfinite(lat) || lat < 0)
                return pf_fail(err, errlen, PF_EINPUT, "latency_us[%d][%d]: %s", a, b,
                               isfinite(lat) ? "negative" : "not finite");
            if (lat > PF_MAX_US)
                return pf_fail(err, errlen, PF_EINPUT,
                               "latency_us[%d][%d]: %g is above the limit of %g us", a, b, lat,
                               PF_MAX_US);
            if (a == b)
                continue;
            if (!isfinite(bw))
                return pf_fail(err, errlen, PF_EINPUT, "bandwidth_gbps[%d][%d]: not finite", a, b);
            if (bw < 0)
                return pf_fail(err, errlen, PF_EINPUT, "bandwidth_gbps[%d][%d]: negative", a, b);
            if (bw > PF_MAX_GBPS)
                return pf_fail(err, errlen, PF_EINPUT,
                               "bandwidth_gbps[%d][%d]: %g is above the limit of %g GB/s", a, b,
                               bw, PF_MAX_GBPS);
            if (bw == 0)
                return pf_fail(err, errlen, PF_EINPUT,
                               "bandwidth_gbps[%d][%d]: zero (devices %d and %d cannot talk)", a,
                               b, a, b);
        }
    }
    return PF_OK;
}

const char *pf_cluster_name(const pf_cluster_t *c) { return c->name; }
int pf_cluster_ndevices(const pf_cluster_t *c) { return c->n; }
const pf_device_t *pf_cluster_device(const pf_cluster_t *c, int i) { return &c->dev[i]; }
int pf_cluster_has_latency(const pf_cluster_t *c) { return c->has_lat; }
const pf_cluster_hier_t *pf_cluster_hierarchy(const pf_cluster_t *c) { return c->hier; }

/* A hierarchy's D x D matrices, once, for the paths that still work on the matrix
 * (map_symmetry.c). Refused above PF_CLUSTER_MATRIX_MAX_DEVICES. */
static int materialize(pf_cluster_t *c)
{
    int ok;
    pthread_mutex_lock(&c->lock);
    if (!c->bw && c->n <= PF_CLUSTER_MATRIX_MAX_DEVICES) {
        size_t nn = (size_t)c->n * (size_t)c->n;
        double *bw = malloc(nn * sizeof *bw), *lat = malloc(nn * sizeof *lat);
        if (bw && lat) {
            for (int a = 0; a < c->n; a++)
                for (int b = 0; b < c->n; b++) {
                    bw[(size_t)a * c->n + b] = pf_cluster_bw_gbps(c, a, b);
                    lat[(size_t)a * c->n + b] = pf_cluster_lat_us(c, a, b);
                }
            c->bw = bw;
            c->lat = lat;
        } else {
            free(bw);
            free(lat);
        }
    }
    ok = c->bw != NULL;
    pthread_mutex_unlock(&c->lock);
    return ok ? PF_OK : PF_ERR;
}

const double *pf_cluster_bw_matrix(const pf_cluster_t *c)
{
    /* a matrix's never changes; a hierarchy's is made (and its pointer set) under the lock */
    if (!c->hier)
        return c->bw;
    return materialize((pf_cluster_t *)c) == PF_OK ? c->bw : NULL;
}

const double *pf_cluster_lat_matrix(const pf_cluster_t *c)
{
    if (!c->hier)
        return c->lat;
    return materialize((pf_cluster_t *)c) == PF_OK ? c->lat : NULL;
}

double pf_cluster_bw_gbps(const pf_cluster_t *c, int a, int b)
{
    if (c->hier)
        return a == b ? 0 : pf_cluster_hier_bw_gbps(c->hier, c->dev[a].host, c->dev[b].host);
    return c->bw[(size_t)a * c->n + b];
}

double pf_cluster_lat_us(const pf_cluster_t *c, int a, int b)
{
    if (c->hier)
        return a == b ? 0 : pf_cluster_hier_lat_us(c->hier, c->dev[a].host, c->dev[b].host);
    return c->lat[(size_t)a * c->n + b];
}

double pf_cluster_xfer_ms(const pf_cluster_t *c, int a, int b, double bytes)
{
    if (a == b)
        return 0;
    return pf_cluster_lat_us(c, a, b) * 1e-3 + pf_bytes_ms(bytes, pf_cluster_bw_gbps(c, a, b));
}

/* O(D log D): the host values sorted (the pairwise scan it replaces was O(D x hosts)). */
int pf_cluster_nhosts(const pf_cluster_t *c)
{
    if (c->hier)
        return pf_cluster_hier_present_hosts(c->hier);
    int *h = malloc((size_t)c->n * sizeof *h), count = 0;
    if (!h)
        return -1;
    for (int i = 0; i < c->n; i++)
        h[i] = c->dev[i].host;
    qsort(h, (size_t)c->n, sizeof *h, pf_cmp_int);
    for (int i = 0; i < c->n; i++)
        count += i == 0 || h[i] != h[i - 1];
    free(h);
    return count;
}

/* The k-th smallest of v[0..n) (Hoare's selection; v is reordered), in O(n) expected: the
 * search asks for the median bandwidth once per job, and sorting D^2 values for it cost 20% of
 * a BERT-48 plan on 512 devices. Middle-of-three pivots keep it linear on sorted matrices. */
static double select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        double a = v[lo], b = v[mid], c = v[hi];
        double pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

/* which < 0: the least off-diagonal bandwidth, > 0: the largest, 0: the median (the mean of
 * the two middle values for an even count). NAN when D = 1 or out of memory. */
static double bw_quantile(const pf_cluster_t *c, int which)
{
    size_t n = (size_t)c->n * (size_t)(c->n - 1), k = 0;
    if (n == 0)
        return NAN;
    if (which != 0) {
        double r = which < 0 ? INFINITY : -INFINITY;
        for (int a = 0; a < c->n; a++)
            for (int b = 0; b < c->n; b++)
                if (a != b)
                    r = which < 0 ? fmin(r, c->bw[(size_t)a * c->n + b])
                                  : fmax(r, c->bw[(size_t)a * c->n + b]);
        return r;
    }
    double *v = malloc(n * sizeof *v);
    if (!v)
        return NAN;
    for (int a = 0; a < c->n; a++)
        for (int b = 0; b < c->n; b++)
            if (a != b)
                v[k++] = c->bw[(size_t)a * c->n + b];
    double r = select_kth(v, n, n / 2);
    if (n % 2 == 0) { /* the lower middle is the largest of what selection left below n / 2 */
        double low = v[0];
        for (size_t i = 1; i < n / 2; i++)
            low = fmax(low, v[i]);
        r = 0.5 * (low + r);
    }
    free(v);
    return r;
}

/* Computed once per cluster: the search asks for the median on every job's cost model, and on
 * 3,072 devices one selection over D^2 values took 0.1 s and 75 MB (issue 23). */
static void bw_stats(const pf_cluster_t *cc, double *min, double *median, double *max)
{
    pf_cluster_t *c = (pf_cluster_t *)cc; /* the cache is not part of the value */
    pthread_mutex_lock(&c->lock);
    if (!c->stats_ok) {
        int ok = PF_OK;
        if (c->hier)
            ok = pf_cluster_hier_bw_stats(c->hier, &c->stat_min, &c->stat_median, &c->stat_max);
        else {
            c->stat_min = bw_quantile(c, -1);
            c->stat_max = bw_quantile(c, 1);
            c->stat_median = bw_quantile(c, 0);
            ok = c->n < 2 || !isnan(c->stat_median) ? PF_OK : PF_ERR;
        }
        c->stats_ok = ok == PF_OK; /* out of memory: NAN now, tried again next time */
    }
    *min = c->stat_min;
    *median = c->stat_median;
    *max = c->stat_max;
    pthread_mutex_unlock(&c->lock);
}

double pf_cluster_bw_min(const pf_cluster_t *c)
{
    double a, b, x;
    bw_stats(c, &a, &b, &x);
    return a;
}

double pf_cluster_bw_median(const pf_cluster_t *c)
{
    double a, b, x;
    bw_stats(c, &a, &b, &x);
    return b;
}

double pf_cluster_bw_max(const pf_cluster_t *c)
{
    double a, b, x;
    bw_stats(c, &a, &b, &x);
    return x;
}

double pf_cluster_min_mem_bytes(const pf_cluster_t *c)
{
    double m = INFINITY;
    for (int i = 0; i < c->n; i++)
        if (c->dev[i].mem_bytes < m)
            m = c->dev[i].mem_bytes;
    return m;
}

int pf_cluster_is_symmetric(const pf_cluster_t *c)
{
    if (c->hier) /* a level's links go both ways */
        return 1;
    for (int a = 0; a < c->n; a++)
        for (int b = a + 1; b < c->n; b++)
            if (c->bw[(size_t)a * c->n + b] != c->bw[(size_t)b * c->n + a] ||
                c->lat[(size_t)a * c->n + b] != c->lat[(size_t)b * c->n + a])
                return 0;
    return 1;
}

/* ---- files ---- */

static int read_matrix(json_t *root, const char *key, int required, int n, double *m,
                       char *err, size_t errlen)
{
    json_t *rows;
    int rc = pf_json_get_array(root, "cluster", key, required ? PF_JSON_GET_REQUIRED : 0, &rows, err, errlen);
    if (rc != PF_OK || !rows)
        return rc;
    if (json_array_size(rows) != (size_t)n)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %zu rows, expected %d (one per device)", key,
                       json_array_size(rows), n);
    for (int a = 0; a < n; a++) {
        json_t *row = json_array_get(rows, (size_t)a);
        if (!json_is_array(row))
            return pf_fail(err, errlen, PF_EINPUT, "%s[%d]: not an array", key, a);
        if (json_array_size(row) != (size_t)n)
            return pf_fail(err, errlen, PF_EINPUT, "%s[%d]: %zu columns, expected %d", key, a,
                           json_array_size(row), n);
        for (int b = 0; b < n; b++) {
            json_t *v = json_array_get(row, (size_t)b);
            if (!json_is_number(v))
                return pf_fail(err, errlen, PF_EINPUT, "%s[%d][%d]: not a number", key, a, b);
            m[(size_t)a * n + b] = json_number_value(v);
        }
    }
    return PF_OK;
}

/* Format 2: the "hierarchy" object instead of devices and matrices. */
static int hier_from_json(json_t *root, const char *name, pf_cluster_t **out, char *err,
                          size_t errlen)
{
    pf_cluster_hier_t *h;
    int rc;
    if (json_object_get(root, "devices") || json_object_get(root, "bandwidth_gbps"))
        return pf_fail(err, errlen, PF_EINPUT, "cluster: \"hierarchy\" and \"%s\": give one "
                       "(a hierarchy lists no devices and no matrix)",
                       json_object_get(root, "devices") ? "devices" : "bandwidth_gbps");
    if ((rc = pf_cluster_hier_from_json(json_object_get(root, "hierarchy"), &h, err, errlen)))
        return rc;
    if (!(*out = pf_cluster_new_hier(name, h))) {
        pf_cluster_hier_destroy(&h);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    if ((rc = pf_cluster_validate(*out, err, errlen)) != PF_OK)
        pf_cluster_destroy(out);
    return rc;
}

static int check_format(json_t *root, int *format, char *err, size_t errlen)
{
    int64_t f;
    int hier = json_object_get(root, "hierarchy") != NULL;
    int rc = pf_json_get_int(root, "cluster", "format", 0, hier ? 2 : 1, &f, err, errlen);
    if (rc != PF_OK)
        return rc;
    if (f != 1 && f != 2)
        return pf_fail(err, errlen, PF_EINPUT, "cluster.format: %lld, this reader knows 1 "
                       "(matrix) and 2 (hierarchy)", (long long)f);
    if ((f == 2) != hier)
        return pf_fail(err, errlen, PF_EINPUT, "cluster.format: %lld, but %s", (long long)f,
                       hier ? "the file has a \"hierarchy\" (format 2)"
                            : "the file has no \"hierarchy\" (format 2 needs one)");
    *format = (int)f;
    return PF_OK;
}

static int from_json(json_t *root, pf_cluster_t **out, char *err, size_t errlen)
{
    json_t *devs;
    const char *name;
    char path[48];
    int rc;
    *out = NULL;
    if (!json_is_object(root))
        return pf_fail(err, errlen, PF_EINPUT, "top level: not an object");
    int format = 1;
    if ((rc = pf_json_get_string(root, "cluster", "name", 0, "cluster", &name, err, errlen)) ||
        (rc = check_format(root, &format, err, errlen)))
        return rc;
    if (format == 2)
        return hier_from_json(root, name, out, err, errlen);
    if ((rc = pf_json_get_array(root, "cluster", "devices", PF_JSON_GET_REQUIRED, &devs, err,
                                errlen)))
        return rc;
    size_t n = json_array_size(devs);
    if (n == 0)
        return pf_fail(err, errlen, PF_EINPUT, "cluster.devices: empty");
    if (n > (1 << 15))
        return pf_fail(err, errlen, PF_EINPUT, "cluster.devices: more than %d", 1 << 15);
    pf_cluster_t *c = pf_cluster_new(name, (int)n);
    if (!c)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(devs, i);
        pf_device_t d = {0};
        int64_t host;
        snprintf(path, sizeof path, "devices[%zu]", i);
        if (!json_is_object(o)) {
            rc = pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
            goto fail;
        }
        if ((rc = pf_json_get_int(o, path, "id", PF_JSON_GET_REQUIRED, 0, &d.id, err, errlen)) ||
            (rc = pf_json_get_int(o, path, "host", PF_JSON_GET_NONNEG, 0, &host, err, errlen)) ||
            (rc = pf_json_get_string(o, path, "name", 0, NULL, &d.name, err, errlen)) ||
            (rc = pf_json_get_number(o, path, "mem_bytes", PF_JSON_GET_REQUIRED | PF_JSON_GET_POSITIVE, 0,
                               &d.mem_bytes, err, errlen)) ||
            (rc = pf_json_get_number(o, path, "tflops", PF_JSON_GET_NONNEG, 0, &d.tflops, err, errlen)) ||
            (rc = pf_json_get_string(o, path, "device_model", 0, NULL, &d.device_model, err,
                                     errlen)))
            goto fail;
        if (host > (1 << 30)) {
            rc = pf_fail(err, errlen, PF_EINPUT, "%s.host: too large", path);
            goto fail;
        }
        d.host = (int)host;
        if (pf_cluster_set_device(c, (int)i, &d) != PF_OK) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    if ((rc = read_matrix(root, "bandwidth_gbps", 1, (int)n, c->bw, err, errlen)) ||
        (rc = read_matrix(root, "latency_us", 0, (int)n, c->lat, err, errlen)))
        goto fail;
    for (size_t k = 0; k < n * n && !c->has_lat; k++)
        c->has_lat = c->lat[k] != 0;
    if ((rc = pf_cluster_validate(c, err, errlen)) != PF_OK)
        goto fail;
    *out = c;
    return PF_OK;
fail:
    pf_cluster_destroy(&c);
    return rc;
}

static int convert_cluster(json_t *root, void *out, char *err, size_t errlen)
{
    return from_json(root, out, err, errlen);
}

int pf_cluster_from_json(json_t *root, const char *label, pf_cluster_t **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    return pf_json_convert(root, label, convert_cluster, out, err, errlen);
}

int pf_cluster_load_buffer(const char *text, size_t len, const char *label, pf_cluster_t **out,
                           char *err, size_t errlen)
{
    *out = NULL;
    return pf_json_read_buffer(text, len, label, convert_cluster, out, err, errlen);
}

int pf_cluster_load(const char *path, pf_cluster_t **out, char *err, size_t errlen)
{
    *out = NULL;
    return pf_json_read_file(path, convert_cluster, out, err, errlen);
}

static void write_matrix(pf_json_writer_t *w, const char *key, const double *m, int n)
{
    pf_json_writer_key(w, key);
    pf_json_writer_arr_begin(w);
    for (int a = 0; a < n; a++) {
        pf_json_writer_arr_begin_inline(w);
        for (int b = 0; b < n; b++)
            pf_json_writer_num(w, m[(size_t)a * n + b]);
        pf_json_writer_arr_end(w);
    }
    pf_json_writer_arr_end(w);
}

typedef struct {
    const pf_cluster_t *c;
    void (*extra)(pf_json_writer_t *w, const void *ctx);
    const void *extra_ctx;
} emit_ctx_t;

static void emit_cluster(pf_json_writer_t *w, const void *ctx)
{
    const emit_ctx_t *e = ctx;
    const pf_cluster_t *c = e->c;
    pf_json_writer_obj_begin(w);
    pf_json_writer_key(w, "name");
    pf_json_writer_str(w, c->name);
    if (c->hier) {
        pf_json_writer_key(w, "format");
        pf_json_writer_int(w, 2);
        pf_json_writer_key(w, "hierarchy");
        pf_cluster_hier_write(c->hier, w);
        if (e->extra)
            e->extra(w, e->extra_ctx);
        pf_json_writer_obj_end(w);
        return;
    }
    pf_json_writer_key(w, "devices");
    pf_json_writer_arr_begin(w);
    for (int i = 0; i < c->n; i++) {
        const pf_device_t *d = &c->dev[i];
        pf_json_writer_obj_begin_inline(w);
        pf_json_writer_key(w, "id"); pf_json_writer_int(w, d->id);
        pf_json_writer_key(w, "host"); pf_json_writer_int(w, d->host);
        pf_json_writer_key(w, "name"); pf_json_writer_str(w, d->name);
        pf_json_writer_key(w, "mem_bytes"); pf_json_writer_num(w, d->mem_bytes);
        pf_json_writer_key(w, "tflops"); pf_json_writer_num(w, d->tflops);
        if (d->device_model) {
            pf_json_writer_key(w, "device_model"); pf_json_writer_str(w, d->device_model);
        }
        pf_json_writer_obj_end(w);
    }
    pf_json_writer_arr_end(w);
    write_matrix(w, "bandwidth_gbps", c->bw, c->n);
    if (c->has_lat)
        write_matrix(w, "latency_us", c->lat, c->n);
    if (e->extra)
        e->extra(w, e->extra_ctx);
    pf_json_writer_obj_end(w);
}

int pf_cluster_save(const pf_cluster_t *c, const char *path, char *err, size_t errlen)
{
    return pf_cluster_save_extra(c, path, NULL, NULL, err, errlen);
}

int pf_cluster_save_extra(const pf_cluster_t *c, const char *path,
                          void (*extra)(pf_json_writer_t *w, const void *ctx), const void *extra_ctx,
                          char *err, size_t errlen)
{
    emit_ctx_t e = {c, extra, extra_ctx};
    return pf_json_save(path, emit_cluster, &e, err, errlen);
}

int pf_cluster_write_extra(const pf_cluster_t *c, FILE *f,
                           void (*extra)(pf_json_writer_t *w, const void *ctx), const void *extra_ctx,
                           char *err, size_t errlen)
{
    emit_ctx_t e = {c, extra, extra_ctx};
    return pf_json_write(f, emit_cluster, &e, err, errlen);
}
