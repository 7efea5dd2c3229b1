#include "planner/ir/cluster_hier.h"
#include "planner/ir/graph.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pf_cluster_hier {
    int hosts, nlevels, nkinds;
    pf_cluster_level_t level[PF_CLUSTER_HIER_MAX_LEVELS];
    pf_cluster_host_kind_t kind[PF_CLUSTER_HIER_MAX_KINDS];
    int64_t span[PF_CLUSTER_HIER_MAX_LEVELS]; /* hosts in one unit of each level */
    double above_gbps[PF_CLUSTER_HIER_MAX_LEVELS]; /* level bandwidth / oversubscription below */
    signed char *host_kind; /* per slot: kind, -1 missing */
    double *host_nic;       /* per slot: cap above the host, 0 none */
};

static char *dup_or_null(const char *s)
{
    return s ? pf_strdup(s) : NULL;
}

/* The spans and the bandwidth above the host level, from the counts and oversubscription. */
static void derive(pf_cluster_hier_t *h)
{
    double over = 1;
    h->span[0] = 1;
    h->above_gbps[0] = h->level[0].bw_gbps;
    for (int l = 1; l < h->nlevels; l++) {
        int64_t c = h->level[l].count;
        h->span[l] = c <= 0 || h->span[l - 1] * c > h->hosts ? h->hosts : h->span[l - 1] * c;
        h->above_gbps[l] = h->level[l].bw_gbps / over;
        over *= h->level[l].oversub >= 1 ? h->level[l].oversub : 1;
    }
}

pf_cluster_hier_t *pf_cluster_hier_new(int hosts, const pf_cluster_level_t *levels, int nlevels,
                                       const pf_cluster_host_kind_t *kinds, int nkinds)
{
    if (hosts < 1 || hosts > PF_CLUSTER_HIER_MAX_HOSTS || nlevels < 1 ||
        nlevels > PF_CLUSTER_HIER_MAX_LEVELS || nkinds < 1 || nkinds > PF_CLUSTER_HIER_MAX_KINDS)
        return NULL;
    pf_cluster_hier_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->hosts = hosts;
    h->host_kind = calloc((size_t)hosts, sizeof *h->host_kind);
    h->host_nic = calloc((size_t)hosts, sizeof *h->host_nic);
    bool ok = h->host_kind && h->host_nic;
    for (int l = 0; l < nlevels; l++, h->nlevels++) {
        h->level[l] = levels[l];
        ok = ok && (h->level[l].name = pf_strdup(levels[l].name ? levels[l].name : "level"));
    }
    for (int k = 0; k < nkinds; k++, h->nkinds++) {
        pf_cluster_host_kind_t *x = &h->kind[k];
        *x = kinds[k];
        x->name = dup_or_null(kinds[k].name ? kinds[k].name : "host");
        x->device_model = dup_or_null(kinds[k].device_model);
        ok = ok && x->name && (!kinds[k].device_model || x->device_model);
        if (x->gpus <= 0)
            x->gpus = levels[0].count;
        if (x->bw_gbps <= 0)
            x->bw_gbps = levels[0].bw_gbps;
        if (x->lat_us < 0)
            x->lat_us = levels[0].lat_us;
    }
    if (!ok) {
        pf_cluster_hier_destroy(&h);
        return NULL;
    }
    derive(h);
    return h;
}

void pf_cluster_hier_destroy(pf_cluster_hier_t **hp)
{
    if (!hp || !*hp)
        return;
    pf_cluster_hier_t *h = *hp;
    for (int l = 0; l < h->nlevels; l++)
        free((char *)h->level[l].name);
    for (int k = 0; k < h->nkinds; k++) {
        free((char *)h->kind[k].name);
        free((char *)h->kind[k].device_model);
    }
    free(h->host_kind);
    free(h->host_nic);
    free(h);
    *hp = NULL;
}

pf_cluster_hier_t *pf_cluster_hier_clone(const pf_cluster_hier_t *h)
{
    pf_cluster_hier_t *x = pf_cluster_hier_new(h->hosts, h->level, h->nlevels, h->kind, h->nkinds);
    if (!x)
        return NULL;
    memcpy(x->host_kind, h->host_kind, (size_t)h->hosts * sizeof *h->host_kind);
    memcpy(x->host_nic, h->host_nic, (size_t)h->hosts * sizeof *h->host_nic);
    return x;
}

int pf_cluster_hier_divides(const pf_cluster_hier_t *h, int T)
{
    if (T < 1 || h->level[0].count % T)
        return 0;
    for (int k = 0; k < h->nkinds; k++)
        if (h->kind[k].gpus % T)
            return 0;
    return 1;
}

pf_cluster_hier_t *pf_cluster_hier_grouped(const pf_cluster_hier_t *h, int T)
{
    if (!pf_cluster_hier_divides(h, T))
        return NULL;
    pf_cluster_hier_t *x = pf_cluster_hier_clone(h);
    if (!x)
        return NULL;
    x->level[0].count /= T;
    for (int k = 0; k < x->nkinds; k++) {
        x->kind[k].gpus /= T;
        x->kind[k].tflops *= T;
    }
    return x;
}

int pf_cluster_hier_set_host(pf_cluster_hier_t *h, int host, int kind, double nic_gbps)
{
    if (host < 0 || host >= h->hosts || kind < -1 || kind >= h->nkinds || !(nic_gbps >= 0))
        return PF_EINPUT;
    h->host_kind[host] = (signed char)kind;
    h->host_nic[host] = nic_gbps;
    return PF_OK;
}

int pf_cluster_hier_hosts(const pf_cluster_hier_t *h) { return h->hosts; }
int pf_cluster_hier_nlevels(const pf_cluster_hier_t *h) { return h->nlevels; }
int pf_cluster_hier_nkinds(const pf_cluster_hier_t *h) { return h->nkinds; }
int pf_cluster_hier_host_kind(const pf_cluster_hier_t *h, int host) { return h->host_kind[host]; }

const pf_cluster_level_t *pf_cluster_hier_level(const pf_cluster_hier_t *h, int level)
{
    return &h->level[level];
}

const pf_cluster_host_kind_t *pf_cluster_hier_kind(const pf_cluster_hier_t *h, int k)
{
    return &h->kind[k];
}

double pf_cluster_hier_host_nic_gbps(const pf_cluster_hier_t *h, int host)
{
    return h->host_nic[host];
}

int pf_cluster_hier_present_hosts(const pf_cluster_hier_t *h)
{
    int n = 0;
    for (int i = 0; i < h->hosts; i++)
        n += h->host_kind[i] >= 0;
    return n;
}

int pf_cluster_hier_ndevices(const pf_cluster_hier_t *h)
{
    int64_t n = 0;
    for (int i = 0; i < h->hosts; i++)
        n += h->host_kind[i] >= 0 ? h->kind[h->host_kind[i]].gpus : 0;
    return n > PF_CLUSTER_HIER_MAX_DEVICES ? -1 : (int)n;
}

int pf_cluster_hier_nexceptions(const pf_cluster_hier_t *h)
{
    int n = 0;
    for (int i = 0; i < h->hosts; i++)
        n += h->host_kind[i] != 0 || h->host_nic[i] > 0;
    return n;
}

int pf_cluster_hier_common_level(const pf_cluster_hier_t *h, int a, int b)
{
    if (a == b)
        return 0;
    for (int l = 1; l < h->nlevels; l++)
        if (a / h->span[l] == b / h->span[l])
            return l;
    return h->nlevels - 1; /* validate rules this out: the top level holds every host */
}

/* Level l's bandwidth (l > 0) between hosts whose NICs cap at nic_a and nic_b (0 = no cap). */
static double above_gbps(const pf_cluster_hier_t *h, int l, double nic_a, double nic_b)
{
    double bw = h->above_gbps[l];
    bw = nic_a > 0 ? fmin(bw, nic_a) : bw;
    return nic_b > 0 ? fmin(bw, nic_b) : bw;
}

double pf_cluster_hier_level_pair_gbps(const pf_cluster_hier_t *h, int level)
{
    return h->above_gbps[level];
}

double pf_cluster_hier_bw_gbps(const pf_cluster_hier_t *h, int a, int b)
{
    int l = pf_cluster_hier_common_level(h, a, b);
    if (l == 0)
        return h->kind[h->host_kind[a] >= 0 ? h->host_kind[a] : 0].bw_gbps;
    return above_gbps(h, l, h->host_nic[a], h->host_nic[b]);
}

double pf_cluster_hier_lat_us(const pf_cluster_hier_t *h, int a, int b)
{
    int l = pf_cluster_hier_common_level(h, a, b);
    if (l == 0)
        return h->kind[h->host_kind[a] >= 0 ? h->host_kind[a] : 0].lat_us;
    return h->level[l].lat_us;
}

int pf_cluster_hier_regular(const pf_cluster_hier_t *h)
{
    return pf_cluster_hier_nexceptions(h) == 0;
}

int64_t pf_cluster_hier_span(const pf_cluster_hier_t *h, int level) { return h->span[level]; }

int pf_cluster_hier_reach(const pf_cluster_hier_t *h, int host, pf_cluster_hier_reach_t *out)
{
    const pf_cluster_host_kind_t *k = &h->kind[0];
    int64_t below = 1; /* hosts in host's unit one level down */
    out[0] = (pf_cluster_hier_reach_t){k->bw_gbps, k->lat_us, k->gpus - 1};
    for (int l = 1; l < h->nlevels; l++) {
        int64_t lo = host / h->span[l] * h->span[l];
        int64_t n = (lo + h->span[l] < h->hosts ? lo + h->span[l] : h->hosts) - lo;
        out[l] = (pf_cluster_hier_reach_t){above_gbps(h, l, 0, 0), h->level[l].lat_us,
                                           (int64_t)k->gpus * (n - below)};
        below = n;
    }
    return h->nlevels;
}

int pf_cluster_hier_has_latency(const pf_cluster_hier_t *h)
{
    for (int l = 1; l < h->nlevels; l++)
        if (h->level[l].lat_us != 0)
            return 1;
    for (int k = 0; k < h->nkinds; k++)
        if (h->kind[k].lat_us != 0)
            return 1;
    return 0;
}

int pf_cluster_hier_level_used(const pf_cluster_hier_t *h, int level)
{
    int64_t unit = -1, child = -1;
    for (int i = 0; i < h->hosts; i++) {
        if (h->host_kind[i] < 0)
            continue;
        if (level == 0) {
            if (h->kind[h->host_kind[i]].gpus > 1)
                return 1;
            continue;
        }
        int64_t u = i / h->span[level], c = i / h->span[level - 1];
        if (u == unit && c != child)
            return 1;
        unit = u;
        child = c;
    }
    return 0;
}

/* ---- validation ---- */

static int check_link(double bw, double lat, const char *where, char *err, size_t errlen)
{
    if (!isfinite(bw) || bw <= 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s.bw_gbps: must be positive and finite", where);
    if (bw > PF_MAX_GBPS)
        return pf_fail(err, errlen, PF_EINPUT, "%s.bw_gbps: %g is above the limit of %g GB/s",
                       where, bw, PF_MAX_GBPS);
    if (!isfinite(lat) || lat < 0 || lat > PF_MAX_US)
        return pf_fail(err, errlen, PF_EINPUT, "%s.latency_us: must be in [0, %g]", where,
                       PF_MAX_US);
    return PF_OK;
}

static int validate_levels(const pf_cluster_hier_t *h, char *err, size_t errlen)
{
    char where[64];
    int rc;
    int64_t cover = 1;
    for (int l = 0; l < h->nlevels; l++) {
        const pf_cluster_level_t *v = &h->level[l];
        bool top = l == h->nlevels - 1;
        snprintf(where, sizeof where, "hierarchy.levels[%d]", l);
        if ((rc = pf_check_name(v->name, where, err, errlen)) != PF_OK ||
            (rc = check_link(v->bw_gbps, v->lat_us, where, err, errlen)) != PF_OK)
            return rc;
        if (v->count < (top && l > 0 ? 0 : 1))
            return pf_fail(err, errlen, PF_EINPUT, "%s.count: %d, must be >= %d", where,
                           v->count, top && l > 0 ? 0 : 1);
        if (l > 0 && (!isfinite(v->oversub) || v->oversub < 1 || v->oversub > 1e6))
            return pf_fail(err, errlen, PF_EINPUT,
                           "%s.oversubscription: %g, must be in [1, 1e6]", where, v->oversub);
        if (l > 0)
            cover = v->count == 0 || cover * v->count > h->hosts ? h->hosts : cover * v->count;
    }
    if (h->nlevels < 2 && h->hosts > 1)
        return pf_fail(err, errlen, PF_EINPUT,
                       "hierarchy.levels: %d hosts need a level above the host", h->hosts);
    if (h->nlevels > 1 && cover < h->hosts)
        return pf_fail(err, errlen, PF_EINPUT,
                       "hierarchy.levels: the top level holds %lld hosts, but hierarchy.hosts "
                       "is %d (give the top level count 0: every host)",
                       (long long)cover, h->hosts);
    return PF_OK;
}

int pf_cluster_hier_check_model(const char *name, const char *where, char *err, size_t errlen)
{
    if (!name)
        return PF_OK;
    if (!*name || strlen(name) > PF_GRAPH_DEVICE_MODEL_MAX)
        return pf_fail(err, errlen, PF_EINPUT, "%s: empty or longer than %d bytes", where,
                       PF_GRAPH_DEVICE_MODEL_MAX);
    return pf_check_utf8(name, where, err, errlen);
}

static int validate_kinds(const pf_cluster_hier_t *h, char *err, size_t errlen)
{
    char where[64];
    int rc;
    for (int k = 0; k < h->nkinds; k++) {
        const pf_cluster_host_kind_t *x = &h->kind[k];
        snprintf(where, sizeof where, "hierarchy.host_kinds[%d]", k);
        if ((rc = pf_check_name(x->name, where, err, errlen)) != PF_OK ||
            (rc = check_link(x->bw_gbps, x->lat_us, where, err, errlen)) != PF_OK)
            return rc;
        char mw[96];
        snprintf(mw, sizeof mw, "%s.device_model", where);
        if ((rc = pf_cluster_hier_check_model(x->device_model, mw, err, errlen)) != PF_OK)
            return rc;
        if (x->gpus < 1 || x->gpus > 4096)
            return pf_fail(err, errlen, PF_EINPUT, "%s.gpus: %d, must be in [1, 4096]", where,
                           x->gpus);
        if (!isfinite(x->mem_bytes) || x->mem_bytes <= 0 || x->mem_bytes > PF_MAX_BYTES)
            return pf_fail(err, errlen, PF_EINPUT, "%s.mem_bytes: must be in (0, %g]", where,
                           PF_MAX_BYTES);
        if (!isfinite(x->tflops) || x->tflops < 0 || x->tflops > PF_MAX_TFLOPS)
            return pf_fail(err, errlen, PF_EINPUT, "%s.tflops: must be in [0, %g]", where,
                           PF_MAX_TFLOPS);
        for (int j = 0; j < k; j++)
            if (strcmp(h->kind[j].name, x->name) == 0)
                return pf_fail(err, errlen, PF_EINPUT, "%s.name: '%s' is also host_kinds[%d]",
                               where, x->name, j);
    }
    return PF_OK;
}

int pf_cluster_hier_validate(const pf_cluster_hier_t *h, char *err, size_t errlen)
{
    int rc;
    if ((rc = validate_levels(h, err, errlen)) != PF_OK ||
        (rc = validate_kinds(h, err, errlen)) != PF_OK)
        return rc;
    for (int i = 0; i < h->hosts; i++)
        if (h->host_nic[i] < 0 || !isfinite(h->host_nic[i]) || h->host_nic[i] > PF_MAX_GBPS)
            return pf_fail(err, errlen, PF_EINPUT, "hierarchy: host %d: NIC bandwidth %g", i,
                           h->host_nic[i]);
    int n = pf_cluster_hier_ndevices(h);
    if (n < 0)
        return pf_fail(err, errlen, PF_EINPUT, "hierarchy: more than %d devices",
                       PF_CLUSTER_HIER_MAX_DEVICES);
    if (n == 0)
        return pf_fail(err, errlen, PF_EINPUT, "hierarchy: every host is missing");
    return PF_OK;
}

/* ---- bandwidth statistics ---- */

typedef struct {
    double gbps;
    int64_t pairs;
} bw_class_t;

static int cmp_class(const void *a, const void *b)
{
    double x = ((const bw_class_t *)a)->gbps, y = ((const bw_class_t *)b)->gbps;
    return x < y ? -1 : x > y;
}

/* Signatures: the distinct (kind, NIC cap) of present hosts; sig[host] (-1 missing). */
static int signatures(const pf_cluster_hier_t *h, int *sig, int *skind, double *snic, int cap)
{
    int n = 0;
    for (int i = 0; i < h->hosts; i++) {
        sig[i] = -1;
        if (h->host_kind[i] < 0)
            continue;
        for (int s = 0; s < n && sig[i] < 0; s++)
            if (skind[s] == h->host_kind[i] && snic[s] == h->host_nic[i])
                sig[i] = s;
        if (sig[i] < 0) {
            if (n == cap)
                return -1;
            skind[n] = h->host_kind[i];
            snic[n] = h->host_nic[i];
            sig[i] = n++;
        }
    }
    return n;
}

/* within[s1 * S + s2] += ordered pairs of distinct devices, signatures s1 and s2, sharing a
 * unit of `span` hosts. */
static void count_within(const pf_cluster_hier_t *h, const int *sig, const int *skind, int S,
                         int64_t span, int64_t *within, int64_t *cnt)
{
    for (int64_t u0 = 0; u0 < h->hosts; u0 += span) {
        memset(cnt, 0, (size_t)S * sizeof *cnt);
        for (int64_t i = u0; i < u0 + span && i < h->hosts; i++)
            if (sig[i] >= 0)
                cnt[sig[i]] += h->kind[skind[sig[i]]].gpus;
        for (int a = 0; a < S; a++)
            for (int b = 0; b < S; b++)
                within[a * S + b] += cnt[a] * cnt[b] - (a == b ? cnt[a] : 0);
    }
}

/* The classes (bandwidth, ordered pairs) of every level and signature pair; *n of them. */
static bw_class_t *bw_classes(const pf_cluster_hier_t *h, int *n)
{
    enum { MAXSIG = 256 };
    int skind[MAXSIG], S, L = h->nlevels;
    double snic[MAXSIG];
    int *sig = malloc((size_t)h->hosts * sizeof *sig);
    int64_t *prev = calloc(MAXSIG * MAXSIG, sizeof *prev), *cur = calloc(MAXSIG * MAXSIG, sizeof *cur);
    int64_t cnt[MAXSIG];
    bw_class_t *cls = NULL;
    *n = 0;
    if (!sig || !prev || !cur || (S = signatures(h, sig, skind, snic, MAXSIG)) < 0 ||
        !(cls = malloc((size_t)L * S * S * sizeof *cls)))
        goto done;
    for (int l = 0; l < L; l++) {
        memset(cur, 0, (size_t)S * S * sizeof *cur);
        count_within(h, sig, skind, S, h->span[l], cur, cnt);
        for (int a = 0; a < S; a++)
            for (int b = 0; b < S; b++) {
                int64_t exact = cur[a * S + b] - prev[a * S + b];
                if (exact <= 0)
                    continue;
                double bw = l > 0 ? above_gbps(h, l, snic[a], snic[b])
                                  : h->kind[skind[a]].bw_gbps;
                cls[(*n)++] = (bw_class_t){bw, exact};
            }
        int64_t *t = prev;
        prev = cur;
        cur = t;
    }
done:
    free(sig);
    free(prev);
    free(cur);
    return cls;
}

/* The k-th (0-based) smallest of the classes sorted by bandwidth. */
static double kth(const bw_class_t *cls, int n, int64_t k)
{
    for (int i = 0; i < n; i++) {
        if (k < cls[i].pairs)
            return cls[i].gbps;
        k -= cls[i].pairs;
    }
    return NAN;
}

int pf_cluster_hier_bw_stats(const pf_cluster_hier_t *h, double *min, double *median, double *max)
{
    int n;
    *min = *median = *max = NAN;
    bw_class_t *cls = bw_classes(h, &n);
    if (!cls)
        return PF_ERR;
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += cls[i].pairs;
    if (total > 0) {
        qsort(cls, (size_t)n, sizeof *cls, cmp_class);
        *min = cls[0].gbps;
        *max = cls[n - 1].gbps;
        *median = kth(cls, n, total / 2);
        if (total % 2 == 0) /* the mean of the two middle values, as the matrix's median */
            *median = 0.5 * (*median + kth(cls, n, total / 2 - 1));
    }
    free(cls);
    return PF_OK;
}

/* ---- JSON ---- */

static int read_level(json_t *o, int l, pf_cluster_level_t *v, char *err, size_t errlen)
{
    char path[48];
    int64_t count;
    int rc;
    snprintf(path, sizeof path, "hierarchy.levels[%d]", l);
    if (!json_is_object(o))
        return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
    if ((rc = pf_json_get_string(o, path, "name", 0, l == 0 ? "host" : "level", &v->name, err,
                                 errlen)) ||
        (rc = pf_json_get_int(o, path, "count", PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, 0,
                              &count, err, errlen)) ||
        (rc = pf_json_get_number(o, path, "bw_gbps", PF_JSON_GET_REQUIRED | PF_JSON_GET_POSITIVE,
                                 0, &v->bw_gbps, err, errlen)) ||
        (rc = pf_json_get_number(o, path, "latency_us", PF_JSON_GET_NONNEG, 0, &v->lat_us, err,
                                 errlen)) ||
        (rc = pf_json_get_number(o, path, "oversubscription", PF_JSON_GET_POSITIVE, 1,
                                 &v->oversub, err, errlen)))
        return rc;
    if (count > PF_CLUSTER_HIER_MAX_HOSTS)
        return pf_fail(err, errlen, PF_EINPUT, "%s.count: %lld is too large", path,
                       (long long)count);
    if (l == 0 && v->oversub != 1)
        return pf_fail(err, errlen, PF_EINPUT, "%s.oversubscription: the host level has none "
                       "(give it to the levels above)", path);
    v->count = (int)count;
    return PF_OK;
}

static int read_kind(json_t *o, int k, pf_cluster_host_kind_t *x, char *err, size_t errlen)
{
    char path[48];
    int64_t gpus;
    int rc;
    snprintf(path, sizeof path, "hierarchy.host_kinds[%d]", k);
    if (!json_is_object(o))
        return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
    if ((rc = pf_json_get_string(o, path, "name", PF_JSON_GET_REQUIRED, NULL, &x->name, err,
                                 errlen)) ||
        (rc = pf_json_get_string(o, path, "device_model", 0, NULL, &x->device_model, err,
                                 errlen)) ||
        (rc = pf_json_get_int(o, path, "gpus", PF_JSON_GET_POSITIVE, 0, &gpus, err, errlen)) ||
        (rc = pf_json_get_number(o, path, "mem_bytes", PF_JSON_GET_REQUIRED | PF_JSON_GET_POSITIVE,
                                 0, &x->mem_bytes, err, errlen)) ||
        (rc = pf_json_get_number(o, path, "tflops", PF_JSON_GET_NONNEG, 0, &x->tflops, err,
                                 errlen)) ||
        (rc = pf_json_get_number(o, path, "bw_gbps", PF_JSON_GET_POSITIVE, 0, &x->bw_gbps, err,
                                 errlen)) ||
        (rc = pf_json_get_number(o, path, "latency_us", PF_JSON_GET_NONNEG, -1, &x->lat_us, err,
                                 errlen)))
        return rc; /* the defaults (0, -1: "the host level's") are not checked by the flags */
    if (gpus > 4096)
        return pf_fail(err, errlen, PF_EINPUT, "%s.gpus: %lld, must be in [1, 4096]", path,
                       (long long)gpus);
    x->gpus = (int)gpus;
    return PF_OK;
}

static int kind_index(const pf_cluster_hier_t *h, const char *name)
{
    for (int k = 0; k < h->nkinds; k++)
        if (strcmp(h->kind[k].name, name) == 0)
            return k;
    return -1;
}

static int read_exception(pf_cluster_hier_t *h, json_t *o, int i, char *err, size_t errlen)
{
    char path[48];
    int64_t host;
    const char *kname;
    double nic;
    int rc, missing = json_is_true(json_object_get(o, "missing"));
    snprintf(path, sizeof path, "hierarchy.exceptions[%d]", i);
    if (!json_is_object(o))
        return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
    if ((rc = pf_json_get_int(o, path, "host", PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, 0,
                              &host, err, errlen)) ||
        (rc = pf_json_get_string(o, path, "kind", 0, NULL, &kname, err, errlen)) ||
        (rc = pf_json_get_number(o, path, "nic_gbps", PF_JSON_GET_POSITIVE, 0, &nic, err,
                                 errlen)))
        return rc;
    json_t *m = json_object_get(o, "missing");
    if (m && !json_is_boolean(m))
        return pf_fail(err, errlen, PF_EINPUT, "%s.missing: not a boolean", path);
    if (host >= h->hosts)
        return pf_fail(err, errlen, PF_EINPUT, "%s.host: %lld, but there are %d hosts", path,
                       (long long)host, h->hosts);
    int k = kname ? kind_index(h, kname) : h->host_kind[host];
    if (kname && k < 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s.kind: '%s' is not a host kind", path, kname);
    if (missing && (kname || nic > 0))
        return pf_fail(err, errlen, PF_EINPUT, "%s: a missing host has no kind or nic_gbps",
                       path);
    if (!missing && !kname && !(nic > 0))
        return pf_fail(err, errlen, PF_EINPUT, "%s: says nothing (give missing, kind or "
                       "nic_gbps)", path);
    return pf_cluster_hier_set_host(h, (int)host, missing ? -1 : k, nic);
}

/* The levels and kinds arrays into v / x (names borrowed from the tree). */
static int read_arrays(json_t *obj, pf_cluster_level_t *v, int *nl, pf_cluster_host_kind_t *x,
                       int *nk, char *err, size_t errlen)
{
    json_t *levels, *kinds;
    int rc;
    if ((rc = pf_json_get_array(obj, "hierarchy", "levels", PF_JSON_GET_REQUIRED, &levels, err,
                                errlen)) ||
        (rc = pf_json_get_array(obj, "hierarchy", "host_kinds", PF_JSON_GET_REQUIRED, &kinds,
                                err, errlen)))
        return rc;
    size_t L = json_array_size(levels), K = json_array_size(kinds);
    if (L < 1 || L > PF_CLUSTER_HIER_MAX_LEVELS)
        return pf_fail(err, errlen, PF_EINPUT, "hierarchy.levels: %zu levels, expected 1 to %d "
                       "(the host level first)", L, PF_CLUSTER_HIER_MAX_LEVELS);
    if (K < 1 || K > PF_CLUSTER_HIER_MAX_KINDS)
        return pf_fail(err, errlen, PF_EINPUT, "hierarchy.host_kinds: %zu kinds, expected 1 to "
                       "%d", K, PF_CLUSTER_HIER_MAX_KINDS);
    for (size_t l = 0; l < L; l++)
        if ((rc = read_level(json_array_get(levels, l), (int)l, &v[l], err, errlen)))
            return rc;
    for (size_t k = 0; k < K; k++)
        if ((rc = read_kind(json_array_get(kinds, k), (int)k, &x[k], err, errlen)))
            return rc;
    *nl = (int)L;
    *nk = (int)K;
    return PF_OK;
}

int pf_cluster_hier_from_json(json_t *obj, pf_cluster_hier_t **out, char *err, size_t errlen)
{
    pf_cluster_level_t v[PF_CLUSTER_HIER_MAX_LEVELS];
    pf_cluster_host_kind_t x[PF_CLUSTER_HIER_MAX_KINDS];
    int64_t hosts;
    int nl = 0, nk = 0, rc;
    json_t *exc;
    *out = NULL;
    if (!json_is_object(obj))
        return pf_fail(err, errlen, PF_EINPUT, "hierarchy: not an object");
    if ((rc = pf_json_get_int(obj, "hierarchy", "hosts", PF_JSON_GET_REQUIRED, 0, &hosts, err,
                              errlen)))
        return rc;
    if (hosts < 1 || hosts > PF_CLUSTER_HIER_MAX_HOSTS)
        return pf_fail(err, errlen, PF_EINPUT, "hierarchy.hosts: %lld, must be in [1, %d]",
                       (long long)hosts, PF_CLUSTER_HIER_MAX_HOSTS);
    if ((rc = read_arrays(obj, v, &nl, x, &nk, err, errlen)) ||
        (rc = pf_json_get_array(obj, "hierarchy", "exceptions", 0, &exc, err, errlen)))
        return rc; /* no "exceptions": exc NULL */
    pf_cluster_hier_t *h = pf_cluster_hier_new((int)hosts, v, nl, x, nk);
    if (!h)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (size_t i = 0; exc && i < json_array_size(exc); i++)
        if ((rc = read_exception(h, json_array_get(exc, i), (int)i, err, errlen)))
            goto fail;
    if ((rc = pf_cluster_hier_validate(h, err, errlen)) != PF_OK)
        goto fail;
    *out = h;
    return PF_OK;
fail:
    pf_cluster_hier_destroy(&h);
    return rc;
}

static void write_kind(const pf_cluster_hier_t *h, const pf_cluster_host_kind_t *x,
                       pf_json_writer_t *w)
{
    pf_json_writer_obj_begin_inline(w);
    pf_json_writer_key(w, "name");
    pf_json_writer_str(w, x->name);
    if (x->device_model) {
        pf_json_writer_key(w, "device_model");
        pf_json_writer_str(w, x->device_model);
    }
    pf_json_writer_key(w, "gpus");
    pf_json_writer_int(w, x->gpus);
    pf_json_writer_key(w, "mem_bytes");
    pf_json_writer_num(w, x->mem_bytes);
    pf_json_writer_key(w, "tflops");
    pf_json_writer_num(w, x->tflops);
    if (x->bw_gbps != h->level[0].bw_gbps) {
        pf_json_writer_key(w, "bw_gbps");
        pf_json_writer_num(w, x->bw_gbps);
    }
    if (x->lat_us != h->level[0].lat_us) {
        pf_json_writer_key(w, "latency_us");
        pf_json_writer_num(w, x->lat_us);
    }
    pf_json_writer_obj_end(w);
}

static void write_exceptions(const pf_cluster_hier_t *h, pf_json_writer_t *w)
{
    pf_json_writer_key(w, "exceptions");
    pf_json_writer_arr_begin(w);
    for (int i = 0; i < h->hosts; i++) {
        if (h->host_kind[i] == 0 && h->host_nic[i] == 0)
            continue;
        pf_json_writer_obj_begin_inline(w);
        pf_json_writer_key(w, "host");
        pf_json_writer_int(w, i);
        if (h->host_kind[i] < 0) {
            pf_json_writer_key(w, "missing");
            pf_json_writer_bool(w, 1);
        } else if (h->host_kind[i] > 0) {
            pf_json_writer_key(w, "kind");
            pf_json_writer_str(w, h->kind[h->host_kind[i]].name);
        }
        if (h->host_nic[i] > 0) {
            pf_json_writer_key(w, "nic_gbps");
            pf_json_writer_num(w, h->host_nic[i]);
        }
        pf_json_writer_obj_end(w);
    }
    pf_json_writer_arr_end(w);
}

void pf_cluster_hier_write(const pf_cluster_hier_t *h, pf_json_writer_t *w)
{
    pf_json_writer_obj_begin(w);
    pf_json_writer_key(w, "hosts");
    pf_json_writer_int(w, h->hosts);
    pf_json_writer_key(w, "levels");
    pf_json_writer_arr_begin(w);
    for (int l = 0; l < h->nlevels; l++) {
        const pf_cluster_level_t *v = &h->level[l];
        pf_json_writer_obj_begin_inline(w);
        pf_json_writer_key(w, "name");
        pf_json_writer_str(w, v->name);
        pf_json_writer_key(w, "count");
        pf_json_writer_int(w, v->count);
        pf_json_writer_key(w, "bw_gbps");
        pf_json_writer_num(w, v->bw_gbps);
        pf_json_writer_key(w, "latency_us");
        pf_json_writer_num(w, v->lat_us);
        if (l > 0) {
            pf_json_writer_key(w, "oversubscription");
            pf_json_writer_num(w, v->oversub);
        }
        pf_json_writer_obj_end(w);
    }
    pf_json_writer_arr_end(w);
    pf_json_writer_key(w, "host_kinds");
    pf_json_writer_arr_begin(w);
    for (int k = 0; k < h->nkinds; k++)
        write_kind(h, &h->kind[k], w);
    pf_json_writer_arr_end(w);
    if (pf_cluster_hier_nexceptions(h) > 0)
        write_exceptions(h, w);
    pf_json_writer_obj_end(w);
}
