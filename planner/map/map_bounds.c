/* map_bounds: eq. 10 / eq. 11 by sorting (Proposition 1), the ring connectivity bound and the
 * ring components at a target (see map_bounds.h).
 *
 *  - Ring capacity (ar, full). At target t a ring link of stage s must carry at least
 *    T(s) / (t - c_u(s)), so the replicas of s share one component of the graph of such links
 *    (pf_map_bounds_ring_components); a placement that leaves a started stage's component with
 *    fewer free devices than its unplaced replicas is cut (ring_ok in map_probe.c).
 */
#include "planner/map/map_bounds.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x > y ? -1 : x < y;
}

static int cmp_asc(const void *a, const void *b)
{
    return -cmp_desc(a, b);
}

static int uf_find(int *parent, int a)
{
    while (parent[a] != a)
        a = parent[a] = parent[parent[a]];
    return a;
}

/* Ring connectivity bound. All R replicas of a stage sit on one all-reduce ring, so if every ring
 * link has bandwidth >= b, the R devices are connected by links with w >= b: they lie in one
 * component of the graph G(b) of those links. Components of G(b) are those of the maximum
 * spanning tree's edges with w >= b (Kruskal), so one pass over the tree's edges by decreasing w
 * gives, for every device d, the largest b at which d's component reaches R devices: a ring
 * through d has a link no faster than that. This is what eq. 11 misses on hierarchical systems:
 * a ring larger than a machine must cross the slow network, whatever the best two links of d. */
int pf_map_bounds_ring_connectivity(pf_map_context_t *cx)
{
    int D = cx->D, R = cx->R, n = 0, rc = PF_ERR;
    double *key = malloc((size_t)D * sizeof *key);
    int *from = malloc((size_t)D * sizeof *from), *in = calloc((size_t)D, sizeof *in);
    int *parent = malloc((size_t)D * sizeof *parent), *size = malloc((size_t)D * sizeof *size);
    int *next = malloc((size_t)D * sizeof *next), *last = malloc((size_t)D * sizeof *last);
    pf_map_keyed_t *edges = malloc((size_t)D * sizeof *edges);
    if (!key || !from || !in || !parent || !size || !next || !last || !edges)
        goto done;
    /* Prim, O(D^2), maximising w */
    for (int d = 0; d < D; d++) {
        key[d] = -1;
        from[d] = -1;
    }
    key[0] = INFINITY;
    for (int it = 0; it < D; it++) {
        int u = -1;
        for (int d = 0; d < D; d++)
            if (!in[d] && (u < 0 || key[d] > key[u]))
                u = d;
        in[u] = 1;
        if (from[u] >= 0) {
            cx->mst_a[n] = from[u];
            cx->mst_b[n] = u;
            edges[n].key = -key[u]; /* ascending sort of -w = descending w */
            edges[n].d = n;
            n++;
        }
        for (int d = 0; d < D; d++) {
            if (in[d])
                continue;
            double w = fmax(cx->bw_bpms[(size_t)u * D + d], cx->bw_bpms[(size_t)d * D + u]);
            if (w > key[d]) {
                key[d] = w;
                from[d] = u;
            }
        }
    }
    qsort(edges, (size_t)n, sizeof *edges, pf_map_keyed_cmp);
    {
        int *a = from, *b = in; /* reuse as scratch: the tree sorted by decreasing w */
        for (int i = 0; i < n; i++) {
            a[i] = cx->mst_a[edges[i].d];
            b[i] = cx->mst_b[edges[i].d];
        }
        for (int i = 0; i < n; i++) {
            cx->mst_a[i] = a[i];
            cx->mst_b[i] = b[i];
            cx->mst_w[i] = -edges[i].key;
        }
    }
    /* Kruskal over the tree; member lists (next, last) so that a component is walked once, when
     * it first reaches R devices. */
    for (int d = 0; d < D; d++) {
        parent[d] = d;
        size[d] = 1;
        next[d] = -1;
        last[d] = d;
        cx->ring_bpms[d] = R <= 1 ? INFINITY : 0;
    }
    for (int i = 0; i < n && R > 1; i++) {
        int ra = uf_find(parent, cx->mst_a[i]), rb = uf_find(parent, cx->mst_b[i]);
        int small_a = size[ra] < R, small_b = size[rb] < R;
        if (size[ra] < size[rb]) {
            int t = ra;
            ra = rb;
            rb = t;
            t = small_a;
            small_a = small_b;
            small_b = t;
        }
        if (size[ra] + size[rb] >= R) {
            if (small_a)
                for (int d = ra; d >= 0; d = next[d])
                    cx->ring_bpms[d] = cx->mst_w[i];
            if (small_b)
                for (int d = rb; d >= 0; d = next[d])
                    cx->ring_bpms[d] = cx->mst_w[i];
        }
        parent[rb] = ra;
        size[ra] += size[rb];
        next[last[ra]] = rb;
        last[ra] = last[rb];
    }
    rc = PF_OK;
done:
    free(key);
    free(from);
    free(in);
    free(parent);
    free(size);
    free(next);
    free(last);
    free(edges);
    return rc;
}

/* Eq. 10 by sorting (Proposition 1). For stage s on device d, its k neighbours' messages sorted
 * descending pair with d's k fastest outgoing links (rearrangement inequality: sum M_i / B_i over
 * distinct links is least when the largest message takes the fastest link), plus the k smallest
 * latencies out of d (chosen independently, so the sum can only be smaller than any real
 * placement's). Eq. 11: the ring pairs that touch x = (s, r) are (prev -> x) and (x -> next), on
 * two distinct other devices when R >= 3 (one device, both directions, when R = 2); the best pair
 * is among the two fastest links in and the two fastest out of d, so trying those 4 combinations
 * gives the exact minimum of max(T / B(e, d), T / B(d, f)); the ring connectivity bound above
 * is another lower bound of the same term, and the larger of the two is kept. */
int pf_map_bounds_static_bounds(pf_map_context_t *cx)
{
    int S = cx->S, D = cx->D, R = cx->R, rc = PF_ERR;
    double *row_bw = malloc((size_t)D * sizeof *row_bw);
    double *row_lat = malloc((size_t)D * sizeof *row_lat);
    double *msgs = malloc((size_t)(cx->max_deg + 1) * sizeof *msgs);
    pf_map_keyed_t *ranked = malloc((size_t)D * sizeof *ranked);
    if (!row_bw || !row_lat || !msgs || !ranked)
        goto done;
    for (int d = 0; d < D; d++) {
        int n = 0;
        for (int e = 0; e < D; e++) {
            if (e == d)
                continue;
            row_bw[n] = cx->bw_bpms[(size_t)d * D + e];
            row_lat[n++] = cx->lat_ms[(size_t)d * D + e];
        }
        qsort(row_bw, (size_t)n, sizeof *row_bw, cmp_desc);
        qsort(row_lat, (size_t)n, sizeof *row_lat, cmp_asc);
        for (int s = 0; s < S; s++) {
            int k = cx->adj_off[s + 1] - cx->adj_off[s];
            memcpy(msgs, cx->adj_bytes + cx->adj_off[s], (size_t)k * sizeof *msgs);
            qsort(msgs, (size_t)k, sizeof *msgs, cmp_desc);
            double sum = 0;
            for (int i = 0; i < k && i < n; i++)
                sum += row_lat[i] + msgs[i] / row_bw[i];
            cx->static_m[(size_t)s * D + d] = sum;
        }
        /* two fastest links into and out of d */
        int in[2] = {-1, -1}, out[2] = {-1, -1};
        for (int e = 0; e < D; e++) {
            if (e == d)
                continue;
            double bi = cx->bw_bpms[(size_t)e * D + d], bo = cx->bw_bpms[(size_t)d * D + e];
            if (in[0] < 0 || bi > cx->bw_bpms[(size_t)in[0] * D + d]) {
                in[1] = in[0];
                in[0] = e;
            } else if (in[1] < 0 || bi > cx->bw_bpms[(size_t)in[1] * D + d]) {
                in[1] = e;
            }
            if (out[0] < 0 || bo > cx->bw_bpms[(size_t)d * D + out[0]]) {
                out[1] = out[0];
                out[0] = e;
            } else if (out[1] < 0 || bo > cx->bw_bpms[(size_t)d * D + out[1]]) {
                out[1] = e;
            }
        }
        double best_pair = INFINITY; /* the slower link of the best (prev, next) choice */
        if (R == 2) {
            best_pair = 0;
            for (int e = 0; e < D; e++)
                if (e != d)
                    best_pair = fmax(best_pair, fmin(cx->bw_bpms[(size_t)e * D + d],
                                                     cx->bw_bpms[(size_t)d * D + e]));
        } else if (R >= 3) {
            best_pair = 0;
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++)
                    if (in[i] >= 0 && out[j] >= 0 && in[i] != out[j])
                        best_pair = fmax(best_pair, fmin(cx->bw_bpms[(size_t)in[i] * D + d],
                                                         cx->bw_bpms[(size_t)d * D + out[j]]));
        }
        /* the ring connectivity bound (pf_map_bounds_ring_connectivity) can only raise it */
        best_pair = fmin(best_pair, cx->ring_bpms[d]);
        for (int s = 0; s < S; s++)
            cx->static_ar[(size_t)s * D + d] = R > 1 ? cx->ar_bytes[s] / best_pair : 0.0;
    }
    /* static_lb adds the terms in the order the exact evaluation does: c_u + m + ar. For full it
     * is the joint bound c_u(s) + static_m(s, d) + static_ar(s, d), valid because a replica x of
     * s on d pays at least static_m in eq. 8 (above) and its stage's ring max includes the two
     * pairs touching x, each at least static_ar, so full(x) = c_u + eq. 8 + eq. 9 >= the sum; it
     * dominates max(m bound, ar bound) since both terms are >= 0. Proposition 1's argument then
     * carries over: min over d of it, max over s, is <= the optimum of eq. 5 under full. */
    cx->lower_ms = 0;
    for (int s = 0; s < S; s++) {
        double best = INFINITY;
        for (int d = 0; d < D; d++) {
            size_t k = (size_t)s * D + d;
            double v = cx->cu[s];
            if (cx->use_m)
                v += cx->static_m[k];
            if (cx->use_ar)
                v += cx->static_ar[k];
            cx->static_lb[k] = v;
            best = fmin(best, v);
        }
        cx->lower_ms = fmax(cx->lower_ms, best);
    }
    for (int s = 0; s < S; s++) {
        for (int d = 0; d < D; d++) {
            ranked[d].key = cx->static_lb[(size_t)s * D + d];
            ranked[d].d = cx->sym.canon_pos[d];
        }
        qsort(ranked, (size_t)D, sizeof *ranked, pf_map_keyed_cmp);
        for (int i = 0; i < D; i++)
            cx->rank[(size_t)s * D + cx->sym.canon[ranked[i].d]] = i;
    }
    rc = PF_OK;
done:
    free(row_bw);
    free(row_lat);
    free(msgs);
    free(ranked);
    return rc;
}


int pf_map_bounds_ring_components(const pf_map_context_t *cx, double t_ms, int **comp_out,
                              int **comp_devices_out)
{
    int S = cx->S, D = cx->D;
    int *parent = malloc((size_t)D * sizeof *parent);
    int *comp = malloc((size_t)S * D * sizeof *comp);
    int *comp_devices = calloc((size_t)S * D, sizeof *comp_devices);
    *comp_out = *comp_devices_out = NULL;
    if (!parent || !comp || !comp_devices) {
        free(parent);
        free(comp);
        free(comp_devices);
        return PF_ERR;
    }
    for (int s = 0; s < S; s++) {
        double room = t_ms - cx->cu[s], T = cx->ar_bytes[s];
        /* the slowest ring link allowed; T = 0: any; no room: none */
        double need = T == 0 ? 0 : room > 0 ? T / room : INFINITY;
        for (int d = 0; d < D; d++)
            parent[d] = d;
        for (int i = 0; i < D - 1 && cx->mst_w[i] >= need; i++)
            parent[uf_find(parent, cx->mst_a[i])] = uf_find(parent, cx->mst_b[i]);
        for (int d = 0; d < D; d++) {
            int c = uf_find(parent, d);
            comp[(size_t)s * D + d] = c;
            comp_devices[(size_t)s * D + c]++;
        }
    }
    free(parent);
    *comp_out = comp;
    *comp_devices_out = comp_devices;
    return PF_OK;
}
