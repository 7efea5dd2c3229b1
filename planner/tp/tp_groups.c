#include "planner/tp/tp_groups.h"
#include "planner/ir/cluster_hier.h"
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

/* The gcd of every host's device count: T divides each host's devices iff it divides this.
 * O(D log D) (hosts are arbitrary non-negative ints: counted on the sorted host values). -1
 * when out of memory. */
static int host_gcd(const pf_cluster_t *c)
{
    int D = pf_cluster_ndevices(c), g = 0;
    int *hosts = malloc((size_t)D * sizeof *hosts);
    if (!hosts)
        return -1;
    for (int i = 0; i < D; i++)
        hosts[i] = pf_cluster_device(c, i)->host;
    qsort(hosts, (size_t)D, sizeof *hosts, pf_cmp_int);
    for (int i = 0, run = 1; i < D; i++, run++)
        if (i + 1 == D || hosts[i + 1] != hosts[i]) {
            g = pf_gcd(g, run);
            run = 0;
        }
    free(hosts);
    return g;
}

int pf_tp_groups_degrees(const pf_cluster_t *c, int across_hosts, int *out, int cap)
{
    int D = pf_cluster_ndevices(c), k = 0;
    int g = across_hosts ? D : host_gcd(c);
    if (g < 0)
        return 0;
    for (int T = 1; T <= D && k < cap; T++)
        if (D % T == 0 && g % T == 0)
            out[k++] = T;
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


/* Host by host (hosts in order of their first device), each host's devices grouped on their
 * own. A new host's devices are found by a scan from its first device: O(D x hosts), for the
 * matrix clusters this path serves (at most 32,768 devices). */
static int group_hosts(pf_tp_groups_t *g, int across_hosts, char *err, size_t errlen)
{
    const pf_cluster_t *c = g->c;
    int D = pf_cluster_ndevices(c), T = g->T, filled = 0, rc = PF_OK;
    int *dev = malloc((size_t)D * sizeof *dev);
    char *done = calloc((size_t)D, 1);
    if (!dev || !done) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto done;
    }
    for (int i = 0; i < D && rc == PF_OK; i++) {
        if (done[i])
            continue;
        int n = 0, h = pf_cluster_device(c, i)->host;
        for (int j = i; j < D; j++)
            if (!done[j] && (across_hosts || pf_cluster_device(c, j)->host == h)) {
                done[j] = 1;
                dev[n++] = j;
            }
        if (n % T)
            rc = pf_fail(err, errlen, PF_EINPUT, "tensor-parallel degree %d does not divide the "
                         "%d devices of host %d (groups stay inside a host unless they may span "
                         "hosts)", T, n, h);
        else if (group_host(c, dev, n, T, g->members + filled) != PF_OK)
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        filled += n;
    }
done:
    free(dev);
    free(done);
    return rc;
}

/* The group cluster as a matrix: each entry from T device pairs, O(G^2 T^2). */
static pf_cluster_t *dense_cluster(const pf_tp_groups_t *g, const char *name)
{
    const pf_cluster_t *c = g->c;
    int T = g->T;
    char dname[PF_NAME_MAX + 1], suffix[24];
    pf_cluster_t *gc = pf_cluster_new(name, g->n);
    if (!gc)
        return NULL;
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
        derived_name(dname, d0->name ? d0->name : "dev", suffix);
        d.name = dname;
        if (pf_cluster_set_device(gc, k, &d) != PF_OK) {
            pf_cluster_destroy(&gc);
            return NULL;
        }
        for (int l = 0; l < g->n; l++) {
            if (l == k)
                continue;
            const int *o = g->members + (size_t)l * T;
            double bw = INFINITY, lat = 0;
            for (int i = 0; i < T; i++) {
                bw = fmin(bw, pf_cluster_bw_gbps(c, m[i], o[i]));
                lat = fmax(lat, pf_cluster_lat_us(c, m[i], o[i]));
            }
            pf_cluster_set_bw(gc, k, l, bw);
            pf_cluster_set_lat(gc, k, l, lat);
        }
    }
    return gc;
}

/* On a hierarchy whose hosts T divides, every link inside a host is the same, so the exhaustive
 * grouping keeps the first partition it meets (T consecutive devices, which is what the members
 * are here), and the group cluster is the hierarchy of groups (pf_cluster_hier_grouped): O(D),
 * nothing per pair. Devices keep the matrix path's names. NULL when out of memory. */
static pf_cluster_t *hier_cluster(pf_tp_groups_t *g, pf_cluster_hier_t *gh, const char *name)
{
    const pf_cluster_t *c = g->c;
    int T = g->T;
    char dname[PF_NAME_MAX + 1], suffix[24];
    for (int i = 0; i < pf_cluster_ndevices(c); i++)
        g->members[i] = i;
    pf_cluster_t *gc = pf_cluster_new_hier(name, gh);
    if (!gc) {
        pf_cluster_hier_destroy(&gh);
        return NULL;
    }
    snprintf(suffix, sizeof suffix, "+%d", T - 1);
    for (int k = 0; k < g->n; k++) {
        const pf_device_t *d0 = pf_cluster_device(c, k * T);
        pf_device_t d = *pf_cluster_device(gc, k);
        derived_name(dname, d0->name ? d0->name : "dev", suffix);
        d.name = dname;
        if (pf_cluster_set_device(gc, k, &d) != PF_OK) {
            pf_cluster_destroy(&gc);
            return NULL;
        }
    }
    return gc;
}

/* The slowest link inside any group and the largest latency there: O(D T). */
static void group_links(pf_tp_groups_t *g)
{
    int T = g->T;
    g->link_gbps = INFINITY;
    for (int k = 0; k < g->n; k++) {
        const int *m = g->members + (size_t)k * T;
        g->link_gbps = fmin(g->link_gbps, group_slowest(g->c, m, T));
        for (int a = 0; a < T; a++)
            for (int b = 0; b < T; b++)
                if (a != b)
                    g->link_lat_us = fmax(g->link_lat_us, pf_cluster_lat_us(g->c, m[a], m[b]));
    }
}

pf_tp_groups_t *pf_tp_groups_new(const pf_cluster_t *c, int T, int across_hosts, char *err,
                                 size_t errlen)
{
    int D = pf_cluster_ndevices(c);
    pf_tp_groups_t *g = NULL;
    const pf_cluster_hier_t *h = pf_cluster_hierarchy(c);
    pf_cluster_hier_t *gh = NULL;
    if (T < 1 || D % T) {
        pf_fail(err, errlen, PF_EINPUT, "tensor-parallel degree %d does not divide the %d "
                "devices of cluster %s", T, D, pf_cluster_name(c));
        return NULL;
    }
    if (!(g = calloc(1, sizeof *g)) || !(g->members = malloc((size_t)D * sizeof *g->members)))
        goto oom;
    g->c = c;
    g->T = T;
    g->n = D / T;
    if (h && T > 1 && !across_hosts && !(gh = pf_cluster_hier_grouped(h, T)) &&
        pf_cluster_hier_divides(h, T))
        goto oom;
    if (!gh) {
        if (group_hosts(g, across_hosts, err, errlen) != PF_OK)
            goto fail;
        for (int k = 0; k < g->n; k++)
            qsort(g->members + (size_t)k * T, (size_t)T, sizeof *g->members, pf_cmp_int);
    }
    if (T == 1)
        return g;
    char name[PF_NAME_MAX + 1], suffix[24];
    snprintf(suffix, sizeof suffix, "/tp%d", T);
    derived_name(name, pf_cluster_name(c), suffix);
    if (!(g->gc = gh ? hier_cluster(g, gh, name) : dense_cluster(g, name)))
        goto oom;
    group_links(g);
    return g;
oom:
    pf_fail(err, errlen, PF_ERR, "out of memory");
fail:
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
