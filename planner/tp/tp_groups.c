#include "planner/tp/tp_groups.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PF_TP_MAX_EXACT 8 /* hosts up to this many devices are grouped exhaustively */

struct pf_tp_groups {
    const pf_cluster_t *c;
    int T, n;            /* degree, groups */
    int *members;        /* n x T */
    pf_cluster_t *gc;    /* NULL when T = 1 */
    double link_gbps, link_lat_us;
};

int pf_tp_groups_degrees(const pf_cluster_t *c, int across_hosts, int *out, int cap)
{
    int D = pf_cluster_ndevices(c), k = 0;
    int *count = calloc((size_t)D + 1, sizeof *count);
    if (!count)
        return 0;
    /* devices per host: hosts are arbitrary non-negative ints, so count by first appearance */
    int *hosts = malloc((size_t)D * sizeof *hosts), nh = 0;
    if (!hosts) {
        free(count);
        return 0;
    }
    for (int i = 0; i < D; i++) {
        int h = pf_cluster_device(c, i)->host, j = 0;
        while (j < nh && hosts[j] != h)
            j++;
        if (j == nh)
            hosts[nh++] = h;
        count[j]++;
    }
    for (int T = 1; T <= D && k < cap; T++) {
        if (D % T)
            continue;
        int ok = 1;
        for (int j = 0; j < nh && ok && !across_hosts; j++)
            ok = count[j] % T == 0;
        if (ok)
            out[k++] = T;
    }
    free(hosts);
    free(count);
    return k;
}

/* slowest link between x and the members m[0..n), both directions */
static double slowest_to(const pf_cluster_t *c, const int *m, int n, int x)
{
    double w = INFINITY;
    for (int i = 0; i < n; i++)
        w = fmin(w, fmin(pf_cluster_bw_gbps(c, m[i], x), pf_cluster_bw_gbps(c, x, m[i])));
    return w;
}

static double group_slowest(const pf_cluster_t *c, const int *m, int T)
{
    double w = INFINITY;
    for (int i = 1; i < T; i++)
        w = fmin(w, slowest_to(c, m, i, m[i]));
    return w;
}

typedef struct {
    const pf_cluster_t *c;
    int T, n;          /* degree, devices of this host */
    const int *dev;    /* the host's devices */
    int *cur, *best;   /* positions into dev, grouped T at a time */
    char *used;
    double best_min, best_sum;
} exact_t;

static void exact_rec(exact_t *x, int filled, double cur_min, double cur_sum);

/* Members k.. of the group opened at cur[filled], chosen in increasing position order. */
static void choose_rest(exact_t *x, int filled, int k, int from, double cur_min, double cur_sum)
{
    if (k == x->T) {
        int m[PF_TP_MAX_EXACT];
        for (int i = 0; i < x->T; i++)
            m[i] = x->dev[x->cur[filled + i]];
        double w = group_slowest(x->c, m, x->T);
        exact_rec(x, filled + x->T, fmin(cur_min, w), cur_sum + w);
        return;
    }
    for (int j = from; j < x->n; j++) {
        if (x->used[j])
            continue;
        x->used[j] = 1;
        x->cur[filled + k] = j;
        choose_rest(x, filled, k + 1, j + 1, cur_min, cur_sum);
        x->used[j] = 0;
    }
}

/* Every partition of the host's devices into groups of T, each once: the lowest unused device
 * opens the next group. Branch and bound on the bottleneck, which only falls as groups close. */
static void exact_rec(exact_t *x, int filled, double cur_min, double cur_sum)
{
    if (cur_min < x->best_min)
        return;
    if (filled == x->n) {
        if (cur_min > x->best_min || cur_sum > x->best_sum) {
            x->best_min = cur_min;
            x->best_sum = cur_sum;
            memcpy(x->best, x->cur, (size_t)x->n * sizeof *x->best);
        }
        return;
    }
    int first = 0;
    while (x->used[first])
        first++;
    x->used[first] = 1;
    x->cur[filled] = first;
    choose_rest(x, filled, 1, first + 1, cur_min, cur_sum);
    x->used[first] = 0;
}

static int cmp_int(const void *a, const void *b)
{
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* Groups of the n devices dev[] of one host into out (n / T groups of T, rank order). */
static int group_host(const pf_cluster_t *c, const int *dev, int n, int T, int *out)
{
    if (n <= PF_TP_MAX_EXACT) {
        int cur[PF_TP_MAX_EXACT], best[PF_TP_MAX_EXACT];
        char used[PF_TP_MAX_EXACT] = {0};
        exact_t x = {.c = c, .T = T, .n = n, .dev = dev, .cur = cur, .best = best, .used = used,
                     .best_min = -1, .best_sum = -1};
        exact_rec(&x, 0, INFINITY, 0);
        for (int i = 0; i < n; i++)
            out[i] = dev[best[i]];
        return PF_OK;
    }
    /* greedy: each group grows by the device with the fastest slowest link to its members */
    char *used = calloc((size_t)n, 1);
    if (!used)
        return PF_ERR;
    for (int g = 0; g < n / T; g++) {
        int *m = out + (size_t)g * T, first = 0;
        while (used[first])
            first++;
        used[first] = 1;
        m[0] = dev[first];
        for (int k = 1; k < T; k++) {
            int arg = -1;
            double best = -1;
            for (int j = 0; j < n; j++) {
                if (used[j])
                    continue;
                double w = slowest_to(c, m, k, dev[j]);
                if (w > best) {
                    best = w;
                    arg = j;
                }
            }
            used[arg] = 1;
            m[k] = dev[arg];
        }
    }
    free(used);
    return PF_OK;
}

/* base + suffix in out[PF_NAME_MAX + 1], base cut on a UTF-8 character boundary so that the
 * result stays a valid name however long base is. */
static void derived_name(char *out, const char *base, const char *suffix)
{
    size_t keep = pf_utf8_fit(base, PF_NAME_MAX - strlen(suffix));
    snprintf(out, PF_NAME_MAX + 1, "%.*s%s", (int)keep, base, suffix);
}


pf_tp_groups_t *pf_tp_groups_new(const pf_cluster_t *c, int T, int across_hosts, char *err,
                                 size_t errlen)
{
    int D = pf_cluster_ndevices(c);
    int *dev = NULL;
    pf_tp_groups_t *g = NULL;
    if (T < 1 || D % T) {
        pf_fail(err, errlen, PF_EINPUT, "tensor-parallel degree %d does not divide the %d "
                "devices of cluster %s", T, D, pf_cluster_name(c));
        return NULL;
    }
    if (!(g = calloc(1, sizeof *g)) || !(g->members = malloc((size_t)D * sizeof *g->members)) ||
        !(dev = malloc((size_t)D * sizeof *dev)))
        goto oom;
    g->c = c;
    g->T = T;
    g->n = D / T;
    /* hosts in order of their first device; each host's devices grouped on their own */
    int filled = 0;
    char *done = calloc((size_t)D, 1);
    if (!done)
        goto oom;
    for (int i = 0; i < D; i++) {
        if (done[i])
            continue;
        int n = 0, h = pf_cluster_device(c, i)->host;
        for (int j = i; j < D; j++)
            if (!done[j] && (across_hosts || pf_cluster_device(c, j)->host == h)) {
                done[j] = 1;
                dev[n++] = j;
            }
        if (n % T) {
            free(done);
            pf_fail(err, errlen, PF_EINPUT, "tensor-parallel degree %d does not divide the %d "
                    "devices of host %d (groups stay inside a host unless they may span hosts)",
                    T, n, h);
            goto fail;
        }
        if (group_host(c, dev, n, T, g->members + filled) != PF_OK) {
            free(done);
            goto oom;
        }
        filled += n;
    }
    free(done);
    for (int k = 0; k < g->n; k++)
        qsort(g->members + (size_t)k * T, (size_t)T, sizeof *g->members, cmp_int);
    if (T == 1) {
        free(dev);
        return g;
    }
    g->link_gbps = INFINITY;
    for (int k = 0; k < g->n; k++) {
        const int *m = g->members + (size_t)k * T;
        g->link_gbps = fmin(g->link_gbps, group_slowest(c, m, T));
        for (int a = 0; a < T; a++)
            for (int b = 0; b < T; b++)
                if (a != b)
                    g->link_lat_us = fmax(g->link_lat_us, pf_cluster_lat_us(c, m[a], m[b]));
    }
    char name[PF_NAME_MAX + 1], suffix[24];
    snprintf(suffix, sizeof suffix, "/tp%d", T);
    derived_name(name, pf_cluster_name(c), suffix);
    if (!(g->gc = pf_cluster_new(name, g->n)))
        goto oom;
    for (int k = 0; k < g->n; k++) {
        const int *m = g->members + (size_t)k * T;
        const pf_device_t *d0 = pf_cluster_device(c, m[0]);
        pf_device_t d = {.id = k, .host = d0->host, .mem_bytes = d0->mem_bytes,
                         .tflops = d0->tflops, .device_model = d0->device_model};
        for (int i = 1; i < T; i++) {
            const pf_device_t *di = pf_cluster_device(c, m[i]);
            d.mem_bytes = fmin(d.mem_bytes, di->mem_bytes);
            if (di->tflops < d.tflops) /* a group runs at its slowest member's pace */
                d.device_model = di->device_model;
            d.tflops = fmin(d.tflops, di->tflops);
        }
        d.tflops *= T;
        snprintf(suffix, sizeof suffix, "+%d", T - 1);
        derived_name(name, d0->name ? d0->name : "dev", suffix);
        d.name = name;
        if (pf_cluster_set_device(g->gc, k, &d) != PF_OK)
            goto oom;
        for (int l = 0; l < g->n; l++) {
            if (l == k)
                continue;
            const int *o = g->members + (size_t)l * T;
            double bw = INFINITY, lat = 0;
            for (int i = 0; i < T; i++) {
                bw = fmin(bw, pf_cluster_bw_gbps(c, m[i], o[i]));
                lat = fmax(lat, pf_cluster_lat_us(c, m[i], o[i]));
            }
            pf_cluster_set_bw(g->gc, k, l, bw);
            pf_cluster_set_lat(g->gc, k, l, lat);
        }
    }
    free(dev);
    return g;
oom:
    pf_fail(err, errlen, PF_ERR, "out of memory");
fail:
    free(dev);
    pf_tp_groups_destroy(&g);
    return NULL;
}

void pf_tp_groups_destroy(pf_tp_groups_t **gp)
{
    pf_tp_groups_t *g = gp ? *gp : NULL;
    if (!g)
        return;
    free(g->members);
    pf_cluster_destroy(&g->gc);
    free(g);
    *gp = NULL;
}

int pf_tp_groups_degree(const pf_tp_groups_t *g) { return g->T; }
int pf_tp_groups_count(const pf_tp_groups_t *g) { return g->n; }
const int *pf_tp_groups_members(const pf_tp_groups_t *g, int i)
{
    return i >= 0 && i < g->n ? g->members + (size_t)i * g->T : NULL;
}
const pf_cluster_t *pf_tp_groups_cluster(const pf_tp_groups_t *g) { return g->gc ? g->gc : g->c; }
double pf_tp_groups_link_gbps(const pf_tp_groups_t *g) { return g->T > 1 ? g->link_gbps : 0; }
double pf_tp_groups_link_lat_us(const pf_tp_groups_t *g) { return g->link_lat_us; }
