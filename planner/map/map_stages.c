/* map_stages: the problem of placing stage replicas of different sizes (map_stages.h; issue 24):
 * its tables (hosts, kinds), its objective and the packing test; map_stages_search.c searches. */
#include "planner/map/map_stages.h"
#include "planner/core/util.h"
#include "planner/ir/devkinds.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void pf_map_stages_destroy(pf_map_stages_t **mp)
{
    if (!mp || !*mp)
        return;
    pf_map_stages_t *m = *mp;
    free(m->d);
    free(m->t);
    free(m->off);
    free(m->kind);
    free(m->host_of);
    free(m->host_off);
    free(m->host_dev);
    free(m->grp_stage);
    free(m->host_speed);
    free(m);
    *mp = NULL;
}

/* Hosts numbered 0..H-1 by first device; host_dev lists each host's devices ascending. */
static int index_hosts(pf_map_stages_t *m)
{
    int D = m->D, *id = malloc((size_t)D * sizeof *id);
    m->host_of = malloc((size_t)D * sizeof *m->host_of);
    m->host_off = calloc((size_t)D + 1, sizeof *m->host_off);
    m->host_dev = malloc((size_t)D * sizeof *m->host_dev);
    if (!id || !m->host_of || !m->host_off || !m->host_dev) {
        free(id);
        return PF_ERR;
    }
    m->H = 0;
    for (int v = 0; v < D; v++) {
        int h = pf_cluster_device(m->c, v)->host, k = 0;
        while (k < m->H && id[k] != h)
            k++;
        if (k == m->H)
            id[m->H++] = h;
        m->host_of[v] = k;
        m->host_off[k + 1]++;
    }
    free(id);
    for (int k = 0; k < m->H; k++)
        m->host_off[k + 1] += m->host_off[k];
    int *at = calloc((size_t)m->H, sizeof *at);
    if (!at)
        return PF_ERR;
    for (int v = 0; v < D; v++)
        m->host_dev[m->host_off[m->host_of[v]] + at[m->host_of[v]]++] = v;
    free(at);
    return PF_OK;
}

/* Device kinds (when sg prices them) and each host's speed: the sum over stages of c_u on its
 * slowest kind (smaller is faster). */
static int index_kinds(pf_map_stages_t *m)
{
    m->host_speed = calloc((size_t)m->H, sizeof *m->host_speed);
    if (!m->host_speed)
        return PF_ERR;
    m->nkinds = pf_stage_graph_nkinds(m->sg);
    if (m->nkinds > 0) {
        if (!(m->kind = malloc((size_t)m->D * sizeof *m->kind)))
            return PF_ERR;
        if (pf_devkinds_number(m->c, m->kind) != m->nkinds)
            m->nkinds = 0; /* priced for another cluster: every device costs c_u(s) */
    }
    for (int h = 0; h < m->H; h++)
        for (int s = 0; s < m->S; s++) {
            double worst = 0;
            for (int i = m->host_off[h]; i < m->host_off[h + 1]; i++)
                worst = fmax(worst, pf_map_stages_cu_ms(m, s, m->host_dev[i]));
            m->host_speed[h] += worst;
        }
    return PF_OK;
}

static int check_degrees(const int *d, const int *t, int S, long long n_micro, int D, char *err,
                         size_t errlen)
{
    long long n = 0;
    for (int s = 0; s < S; s++) {
        if (d[s] < 1 || t[s] < 1 || n_micro < 1 || n_micro % d[s])
            return pf_fail(err, errlen, PF_EINPUT, "stage %d: %d x %d devices do not divide a "
                           "step of %lld micro-batches", s, d[s], t[s], n_micro);
        n += (long long)d[s] * t[s];
    }
    if (n > D)
        return pf_fail(err, errlen, PF_EINPUT, "the stages need %lld devices, the cluster has %d",
                       n, D);
    return PF_OK;
}

pf_map_stages_t *pf_map_stages_new(const pf_stage_graph_t *sg, const int *d, const int *t,
                                   long long n_micro, const pf_cluster_t *c, char *err,
                                   size_t errlen)
{
    int S = pf_stage_graph_stages(sg), D = pf_cluster_ndevices(c);
    if (check_degrees(d, t, S, n_micro, D, err, errlen) != PF_OK)
        return NULL;
    pf_map_stages_t *m = calloc(1, sizeof *m);
    if (!m)
        goto oom;
    *m = (pf_map_stages_t){.sg = sg, .c = c, .S = S, .D = D, .n_micro = n_micro};
    m->d = malloc((size_t)S * sizeof *m->d);
    m->t = malloc((size_t)S * sizeof *m->t);
    m->off = malloc(((size_t)S + 1) * sizeof *m->off);
    if (!m->d || !m->t || !m->off)
        goto oom;
    m->off[0] = 0;
    for (int s = 0; s < S; s++) {
        m->d[s] = d[s];
        m->t[s] = t[s];
        m->off[s + 1] = m->off[s] + d[s] * t[s];
        m->G += d[s];
    }
    m->n = m->off[S];
    if (!(m->grp_stage = malloc((size_t)m->G * sizeof *m->grp_stage)))
        goto oom;
    for (int s = 0, j = 0; s < S; s++)
        for (int r = 0; r < d[s]; r++)
            m->grp_stage[j++] = s;
    if (index_hosts(m) != PF_OK || index_kinds(m) != PF_OK)
        goto oom;
    return m;
oom:
    pf_map_stages_destroy(&m);
    pf_fail(err, errlen, PF_ERR, "out of memory");
    return NULL;
}

/* ---------------------------------------------------------------- objective */

double pf_map_stages_cu_ms(const pf_map_stages_t *m, int s, int v)
{
    return m->nkinds > 0 ? pf_stage_graph_cu_kind_ms(m->sg, s, m->kind[v])
                         : pf_stage_graph_cu_ms(m->sg, s);
}

/* xfer(A, B): rank k of the larger group to rank k mod size of the other (header). */
static double xfer_ms(const pf_map_stages_t *m, const int *a, int ta, const int *b, int tb,
                      double bytes)
{
    double lat_us = 0, bw = INFINITY;
    for (int k = 0; k < (ta > tb ? ta : tb); k++) {
        int x = a[k % ta], y = b[k % tb];
        lat_us = fmax(lat_us, pf_cluster_lat_us(m->c, x, y));
        bw = fmin(bw, pf_cluster_bw_gbps(m->c, x, y));
    }
    return lat_us / 1000 + pf_bytes_ms(bytes, bw);
}

double pf_map_stages_ar_ms(const pf_map_stages_t *m, const int *dev, int s)
{
    int d = m->d[s], t = m->t[s];
    if (d < 2)
        return 0;
    double bw = INFINITY;
    for (int q = 0; q < d; q++)
        for (int k = 0; k < t; k++)
            bw = fmin(bw, pf_cluster_bw_gbps(m->c, dev[m->off[s] + q * t + k],
                                             dev[m->off[s] + ((q + 1) % d) * t + k]));
    double bytes = 2.0 * (d - 1) / d * pf_stage_graph_param_bytes(m->sg, s);
    return pf_bytes_ms(bytes, bw) / (double)m->n_micro;
}

/* time(s, r) without ar(s). */
static double replica_part_ms(const pf_map_stages_t *m, const int *dev, int s, int r)
{
    int t = m->t[s], cnt;
    const int *grp = dev + m->off[s] + r * t;
    double cu = 0, cm = 0;
    for (int k = 0; k < t; k++)
        cu = fmax(cu, pf_map_stages_cu_ms(m, s, grp[k]));
    const int *nb = pf_stage_graph_neighbors(m->sg, s, &cnt);
    for (int i = 0; i < cnt; i++) {
        int u = nb[i], g = pf_gcd(m->d[s], m->d[u]), n = 0;
        double sum = 0, bytes = pf_stage_graph_msg_bytes(m->sg, s, u);
        for (int q = r % g; q < m->d[u]; q += g, n++)
            sum += xfer_ms(m, grp, t, dev + m->off[u] + q * m->t[u], m->t[u], bytes);
        cm += sum / n;
    }
    return (cu + cm) / m->d[s];
}

double pf_map_stages_replica_ms(const pf_map_stages_t *m, const int *dev, int s, int r)
{
    return replica_part_ms(m, dev, s, r) + pf_map_stages_ar_ms(m, dev, s);
}

double pf_map_stages_stage_ms(const pf_map_stages_t *m, const int *dev, int s)
{
    double worst = 0;
    for (int r = 0; r < m->d[s]; r++)
        worst = fmax(worst, replica_part_ms(m, dev, s, r));
    return worst + pf_map_stages_ar_ms(m, dev, s);
}

double pf_map_stages_objective_ms(const pf_map_stages_t *m, const int *dev)
{
    double worst = 0;
    for (int s = 0; s < m->S; s++)
        worst = fmax(worst, pf_map_stages_stage_ms(m, dev, s));
    return worst;
}

int pf_map_stages_split_groups(const pf_map_stages_t *m, const int *dev)
{
    int n = 0;
    for (int s = 0; s < m->S; s++)
        for (int r = 0; r < m->d[s]; r++) {
            const int *grp = dev + m->off[s] + r * m->t[s];
            for (int k = 1; k < m->t[s]; k++)
                if (m->host_of[grp[k]] != m->host_of[grp[0]]) {
                    n++;
                    break;
                }
        }
    return n;
}

/* ---------------------------------------------------------------- packing */

static int cmp_desc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

bool pf_map_stages_ffd_packs(const int *sizes, int n, const int *free_in, int H, int *scratch)
{
    int *cap = scratch, *sz = scratch + H;
    memcpy(cap, free_in, (size_t)H * sizeof *cap);
    memcpy(sz, sizes, (size_t)n * sizeof *sz);
    qsort(sz, (size_t)n, sizeof *sz, cmp_desc);
    for (int i = 0; i < n; i++) {
        int h = 0;
        while (h < H && cap[h] < sz[i])
            h++;
        if (h == H)
            return false;
        cap[h] -= sz[i];
    }
    return true;
}

