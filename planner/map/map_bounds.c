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

static int uf_find(int *parent, int a)
{
    while (parent[a] != a)
        a = parent[a] = parent[parent[a]];
    return a;
}

/* Prim, O(D^2), maximising w(a, b) = the faster direction of the link. The tree's n = D - 1 edges
 * go to mst_a / mst_b in the order they join, edges[i] = (-w, i) for the sort that follows. */
static int max_spanning_tree(pf_map_bounds_t *b, double *key, int *from, int *in,
                             pf_map_bounds_keyed_t *edges)
{
    int D = b->in.D, n = 0;
    const pf_map_links_t *lk = &b->in.links;
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
            b->mst_a[n] = from[u];
            b->mst_b[n] = u;
            edges[n].key = -key[u]; /* ascending sort of -w = descending w */
            edges[n].d = n;
            n++;
        }
        for (int d = 0; d < D; d++) {
            if (in[d])
                continue;
            double w = fmax(pf_map_links_bw_bpms(lk, u, d), pf_map_links_bw_bpms(lk, d, u));
            if (w > key[d]) {
                key[d] = w;
                from[d] = u;
            }
        }
    }
    return n;
}

/* Whether a regular hierarchy's links slow down going up (inside a host fastest): then the
 * components of the links with w >= b are the units of one level, and the chains below span
 * them. */
static bool hier_monotone(const pf_cluster_hier_t *h)
{
    pf_cluster_hier_reach_t r[PF_CLUSTER_HIER_MAX_LEVELS];
    int L = pf_cluster_hier_reach(h, 0, r);
    double above = r[0].bw_gbps;
    for (int l = 1; l < L; l++) {
        if (pf_cluster_hier_span(h, l) == pf_cluster_hier_span(h, l - 1))
            continue; /* no pair meets at l */
        if (r[l].bw_gbps > above)
            return false;
        above = r[l].bw_gbps;
    }
    return true;
}

/* A maximum spanning tree of a regular, monotone hierarchy without looking at pairs: each host's
 * devices chained, and at every level the first devices of consecutive child units in one unit
 * chained. Every tree edge is a link of its level, and for every b the edges with w >= b join
 * exactly the units of the highest level whose links are that fast: the components of G(b),
 * which is all that ring_bpms and the ring components read (any maximum spanning tree gives
 * them). Returns the edges (D - 1), edges[i] = (-w, i) as max_spanning_tree gives them. */
static int hier_spanning_tree(pf_map_bounds_t *b, pf_map_bounds_keyed_t *edges)
{
    const pf_cluster_hier_t *h = b->regular;
    pf_cluster_hier_reach_t r[PF_CLUSTER_HIER_MAX_LEVELS];
    int L = pf_cluster_hier_reach(h, 0, r), H = pf_cluster_hier_hosts(h), n = 0;
    int G = (int)(r[0].devices + 1);
    for (int l = 0; l < L; l++) {
        int64_t child = l ? pf_cluster_hier_span(h, l - 1) : 0, span = pf_cluster_hier_span(h, l);
        for (int64_t lo = 0; lo < H; lo += span) {
            int64_t hi = lo + span < H ? lo + span : H;
            int first = (int)(lo * G), step = l ? (int)(child * G) : 1;
            int last = l ? (int)(hi * G) : first + G; /* one past the unit's devices */
            for (int a = first; a + step < last; a += step) {
                b->mst_a[n] = a;
                b->mst_b[n] = a + step;
                edges[n].key = -(r[l].bw_gbps * 1e6);
                edges[n].d = n;
                n++;
            }
        }
    }
    return n;
}

/* The tree's edges by decreasing w (ties: joining order), through scratch a and b. */
static void sort_tree(pf_map_bounds_t *b, pf_map_bounds_keyed_t *edges, int n, int *sa, int *sb)
{
    qsort(edges, (size_t)n, sizeof *edges, pf_map_bounds_keyed_cmp);
    for (int i = 0; i < n; i++) {
        sa[i] = b->mst_a[edges[i].d];
        sb[i] = b->mst_b[edges[i].d];
    }
    for (int i = 0; i < n; i++) {
        b->mst_a[i] = sa[i];
        b->mst_b[i] = sb[i];
        b->mst_w[i] = -edges[i].key;
    }
}

/* Kruskal over the sorted tree; member lists (next, last) so that a component is walked once,
 * when it first reaches R devices, setting ring_bpms of its devices to the edge's w. */
static void ring_bpms_by_kruskal(pf_map_bounds_t *b, int n, int *parent, int *size, int *next,
                                 int *last)
{
    int D = b->in.D, R = b->in.R;
    for (int d = 0; d < D; d++) {
        parent[d] = d;
        size[d] = 1;
        next[d] = -1;
        last[d] = d;
        b->ring_bpms[d] = R <= 1 ? INFINITY : 0;
    }
    for (int i = 0; i < n && R > 1; i++) {
        int ra = uf_find(parent, b->mst_a[i]), rb = uf_find(parent, b->mst_b[i]);
        if (size[ra] < size[rb]) {
            int t = ra;
            ra = rb;
            rb = t;
        }
        if (size[ra] + size[rb] >= R) {
            if (size[ra] < R)
                for (int d = ra; d >= 0; d = next[d])
                    b->ring_bpms[d] = b->mst_w[i];
            if (size[rb] < R)
                for (int d = rb; d >= 0; d = next[d])
                    b->ring_bpms[d] = b->mst_w[i];
        }
        parent[rb] = ra;
        size[ra] += size[rb];
        next[last[ra]] = rb;
        last[ra] = last[rb];
    }
}

/* Ring connectivity bound. All R replicas of a stage sit on one all-reduce ring, so if every ring
 * link has bandwidth >= b, the R devices are connected by links with w >= b: they lie in one
 * component of the graph G(b) of those links. Components of G(b) are those of the maximum
 * spanning tree's edges with w >= b (Kruskal), so one pass over the tree's edges by decreasing w
 * gives, for every device d, the largest b at which d's component reaches R devices: a ring
 * through d has a link no faster than that. This is what eq. 11 misses on hierarchical systems:
 * a ring larger than a machine must cross the slow network, whatever the best two links of d. */
static int ring_connectivity(pf_map_bounds_t *b)
{
    int D = b->in.D, rc = PF_ERR;
    double *key = malloc((size_t)D * sizeof *key);
    int *from = malloc((size_t)D * sizeof *from), *in = calloc((size_t)D, sizeof *in);
    int *parent = malloc((size_t)D * sizeof *parent), *size = malloc((size_t)D * sizeof *size);
    int *next = malloc((size_t)D * sizeof *next), *last = malloc((size_t)D * sizeof *last);
    pf_map_bounds_keyed_t *edges = malloc((size_t)D * sizeof *edges);
    if (!key || !from || !in || !parent || !size || !next || !last || !edges)
        goto done;
    int n = b->regular && hier_monotone(b->regular) ? hier_spanning_tree(b, edges)
                                                    : max_spanning_tree(b, key, from, in, edges);
    sort_tree(b, edges, n, from, in); /* from and in are free again: scratch */
    ring_bpms_by_kruskal(b, n, parent, size, next, last);
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
 * placement's). Fills static_m's column d; row_bw, row_lat (D) and msgs (max_deg + 1) are
 * scratch. */
/* d's row on a regular hierarchy: the k fastest links out of d into row_bw (descending) and the
 * k smallest latencies into row_lat (ascending), k = min(cap, D - 1), from its host's levels;
 * the same values, with the same multiplicities, as sorting the row. Returns k. */
static int hier_row(const pf_map_bounds_t *b, int d, int cap, double *row_bw, double *row_lat)
{
    pf_cluster_hier_reach_t r[PF_CLUSTER_HIER_MAX_LEVELS];
    int L = pf_cluster_hier_reach(b->regular, pf_cluster_device(b->in.links.c, d)->host, r);
    int nb = 0, nl = 0;
    char used_bw[PF_CLUSTER_HIER_MAX_LEVELS] = {0}, used_lat[PF_CLUSTER_HIER_MAX_LEVELS] = {0};
    while (nb < cap) { /* the fastest level not taken yet, its devices in a row */
        int best = -1;
        for (int l = 0; l < L; l++)
            if (!used_bw[l] && r[l].devices > 0 && (best < 0 || r[l].bw_gbps > r[best].bw_gbps))
                best = l;
        if (best < 0)
            break;
        used_bw[best] = 1;
        for (int64_t i = 0; i < r[best].devices && nb < cap; i++)
            row_bw[nb++] = r[best].bw_gbps * 1e6;
    }
    while (nl < cap) {
        int best = -1;
        for (int l = 0; l < L; l++)
            if (!used_lat[l] && r[l].devices > 0 && (best < 0 || r[l].lat_us < r[best].lat_us))
                best = l;
        if (best < 0)
            break;
        used_lat[best] = 1;
        for (int64_t i = 0; i < r[best].devices && nl < cap; i++)
            row_lat[nl++] = r[best].lat_us * 1e-3;
    }
    return nb;
}

/* v into the best *n (at most cap) values kept in a[], sorted (descending when desc, else
 * ascending): after a whole row, the first min(cap, row) entries of the sorted row. */
static void keep_best(double *a, int *n, int cap, double v, int desc)
{
    if (*n == cap && (cap == 0 || (desc ? !(v > a[cap - 1]) : !(v < a[cap - 1]))))
        return;
    int i = *n < cap ? (*n)++ : cap - 1;
    for (; i > 0 && (desc ? a[i - 1] < v : a[i - 1] > v); i--)
        a[i] = a[i - 1];
    a[i] = v;
}

/* Eq. 10 by sorting (Proposition 1). For stage s on device d, its k neighbours' messages sorted
 * descending pair with d's k fastest outgoing links (rearrangement inequality: sum M_i / B_i over
 * distinct links is least when the largest message takes the fastest link), plus the k smallest
 * latencies out of d (chosen independently, so the sum can only be smaller than any real
 * placement's). Fills static_m's column d; row_bw, row_lat (D) and msgs (max_deg + 1) are
 * scratch. */
static void static_m_at(pf_map_bounds_t *b, int d, double *row_bw, double *row_lat, double *msgs)
{
    const pf_map_bounds_input_t *in = &b->in;
    int S = in->S, D = in->D, n = 0;
    if (b->regular) {
        n = hier_row(b, d, in->max_deg, row_bw, row_lat);
    } else { /* only the first max_deg of the sorted row are used: select them, O(D max_deg) */
        int nl = 0;
        for (int e = 0; e < D; e++) {
            if (e == d)
                continue;
            keep_best(row_bw, &n, in->max_deg, pf_map_links_bw_bpms(&in->links, d, e), 1);
            keep_best(row_lat, &nl, in->max_deg, pf_map_links_lat_ms(&in->links, d, e), 0);
        }
    }
    for (int s = 0; s < S; s++) {
        int k = in->adj_off[s + 1] - in->adj_off[s];
        memcpy(msgs, in->adj_bytes + in->adj_off[s], (size_t)k * sizeof *msgs);
        qsort(msgs, (size_t)k, sizeof *msgs, cmp_desc);
        double sum = 0;
        for (int i = 0; i < k && i < n; i++)
            sum += row_lat[i] + msgs[i] / row_bw[i];
        b->static_m[(size_t)s * D + d] = sum;
    }
}

/* The two fastest links into d (from in[0], in[1]) and out of d (to out[0], out[1]); -1 where
 * there are fewer. */
static void two_fastest(const pf_map_links_t *lk, int D, int d, int in[2], int out[2])
{
    in[0] = in[1] = out[0] = out[1] = -1;
    double bin[2] = {0, 0}, bout[2] = {0, 0};
    for (int e = 0; e < D; e++) {
        if (e == d)
            continue;
        double bi = pf_map_links_bw_bpms(lk, e, d), bo = pf_map_links_bw_bpms(lk, d, e);
        if (in[0] < 0 || bi > bin[0]) {
            in[1] = in[0];
            bin[1] = bin[0];
            in[0] = e;
            bin[0] = bi;
        } else if (in[1] < 0 || bi > bin[1]) {
            in[1] = e;
            bin[1] = bi;
        }
        if (out[0] < 0 || bo > bout[0]) {
            out[1] = out[0];
            bout[1] = bout[0];
            out[0] = e;
            bout[0] = bo;
        } else if (out[1] < 0 || bo > bout[1]) {
            out[1] = e;
            bout[1] = bo;
        }
    }
}

/* Eq. 11's ring pair at d: the ring pairs that touch x = (s, r) are (prev -> x) and (x -> next),
 * on two distinct other devices when R >= 3 (one device, both directions, when R = 2); the best
 * pair is among the two fastest links in and the two fastest out of d, so trying those 4
 * combinations gives the exact minimum of max(T / B(e, d), T / B(d, f)). Returns the slower link
 * of the best (prev, next) choice, capped by the ring connectivity bound, another lower bound of
 * the same term (the larger bound is kept). On a regular hierarchy links are symmetric, so the
 * two fastest in and out are the same devices: the best pair is the second fastest link (R >= 3)
 * or the fastest (R = 2). */
static double best_ring_pair_bpms(const pf_map_bounds_t *b, int d)
{
    const pf_map_links_t *lk = &b->in.links;
    int D = b->in.D, R = b->in.R;
    double best_pair = INFINITY;
    if (b->regular && R >= 2) {
        double row_bw[2], row_lat[2];
        int n = hier_row(b, d, 2, row_bw, row_lat);
        best_pair = R == 2 ? (n > 0 ? row_bw[0] : 0) : (n > 1 ? row_bw[1] : 0);
    } else if (R == 2) {
        best_pair = 0;
        for (int e = 0; e < D; e++)
            if (e != d)
                best_pair = fmax(best_pair, fmin(pf_map_links_bw_bpms(lk, e, d),
                                                 pf_map_links_bw_bpms(lk, d, e)));
    } else if (R >= 3) {
        int in[2], out[2];
        two_fastest(lk, D, d, in, out);
        best_pair = 0;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                if (in[i] >= 0 && out[j] >= 0 && in[i] != out[j])
                    best_pair = fmax(best_pair, fmin(pf_map_links_bw_bpms(lk, in[i], d),
                                                     pf_map_links_bw_bpms(lk, d, out[j])));
    }
    return fmin(best_pair, b->ring_bpms[d]);
}

/* static_lb adds the terms in the order the exact evaluation does: c_u + m + ar. For full it is
 * the joint bound c_u(s) + static_m(s, d) + static_ar(s, d), valid because a replica x of s on d
 * pays at least static_m in eq. 8 and its stage's ring max includes the two pairs touching x,
 * each at least static_ar, so full(x) = c_u + eq. 8 + eq. 9 >= the sum; it dominates max(m bound,
 * ar bound) since both terms are >= 0. Proposition 1's argument then carries over: min over d of
 * it, max over s, is <= the optimum of eq. 5 under full. */
static void joint_bounds(pf_map_bounds_t *b)
{
    const pf_map_bounds_input_t *in = &b->in;
    int S = in->S, D = in->D;
    b->lower_ms = 0;
    for (int s = 0; s < S; s++) {
        double best = INFINITY;
        for (int d = 0; d < D; d++) {
            size_t k = (size_t)s * D + d;
            double v = in->cu[s];
            if (in->use_m)
                v += b->static_m[k];
            if (in->use_ar)
                v += b->static_ar[k];
            b->static_lb[k] = v;
            best = fmin(best, v);
        }
        b->lower_ms = fmax(b->lower_ms, best);
    }
}

/* rank: the devices by static_lb per stage, ties by canonical position (the probe's candidate
 * order must agree with its symmetry rules). */
static void rank_devices(pf_map_bounds_t *b, pf_map_bounds_keyed_t *ranked)
{
    int S = b->in.S, D = b->in.D;
    const pf_map_symmetry_t *sym = b->in.sym;
    for (int s = 0; s < S; s++) {
        for (int d = 0; d < D; d++) {
            ranked[d].key = b->static_lb[(size_t)s * D + d];
            ranked[d].d = sym->canon_pos[d];
        }
        qsort(ranked, (size_t)D, sizeof *ranked, pf_map_bounds_keyed_cmp);
        for (int i = 0; i < D; i++)
            b->rank[(size_t)s * D + sym->canon[ranked[i].d]] = i;
    }
}

/* static_m, static_ar, static_lb, lower_ms and rank; needs ring_bpms. */
static int static_bounds(pf_map_bounds_t *b)
{
    int S = b->in.S, D = b->in.D, R = b->in.R, rc = PF_ERR;
    double *row_bw = malloc((size_t)D * sizeof *row_bw);
    double *row_lat = malloc((size_t)D * sizeof *row_lat);
    double *msgs = malloc((size_t)(b->in.max_deg + 1) * sizeof *msgs);
    pf_map_bounds_keyed_t *ranked = malloc((size_t)D * sizeof *ranked);
    if (!row_bw || !row_lat || !msgs || !ranked)
        goto done;
    for (int d = 0; d < D; d++) {
        static_m_at(b, d, row_bw, row_lat, msgs);
        double best_pair = best_ring_pair_bpms(b, d);
        for (int s = 0; s < S; s++)
            b->static_ar[(size_t)s * D + d] = R > 1 ? b->in.ar_bytes[s] / best_pair : 0.0;
    }
    joint_bounds(b);
    rank_devices(b, ranked);
    rc = PF_OK;
done:
    free(row_bw);
    free(row_lat);
    free(msgs);
    free(ranked);
    return rc;
}

void pf_map_bounds_free(pf_map_bounds_t *b)
{
    if (!b)
        return;
    free(b->static_m);
    free(b->static_ar);
    free(b->static_lb);
    free(b->rank);
    free(b->mst_a);
    free(b->mst_b);
    free(b->mst_w);
    free(b->ring_bpms);
    memset(b, 0, sizeof *b);
}

int pf_map_bounds_init(pf_map_bounds_t *b, const pf_map_bounds_input_t *in)
{
    size_t SD = (size_t)in->S * in->D, D = (size_t)in->D;
    memset(b, 0, sizeof *b);
    b->in = *in;
    const pf_cluster_hier_t *h = pf_cluster_hierarchy(in->links.c);
    if (!in->links.bw_bpms && h && pf_cluster_hier_regular(h))
        b->regular = h;
    b->static_m = malloc(SD * sizeof *b->static_m);
    b->static_ar = malloc(SD * sizeof *b->static_ar);
    b->static_lb = malloc(SD * sizeof *b->static_lb);
    b->rank = malloc(SD * sizeof *b->rank);
    b->mst_a = malloc(D * sizeof *b->mst_a);
    b->mst_b = malloc(D * sizeof *b->mst_b);
    b->mst_w = malloc(D * sizeof *b->mst_w);
    b->ring_bpms = malloc(D * sizeof *b->ring_bpms);
    if (!b->static_m || !b->static_ar || !b->static_lb || !b->rank || !b->mst_a || !b->mst_b ||
        !b->mst_w || !b->ring_bpms)
        goto fail;
    if (ring_connectivity(b) != PF_OK || static_bounds(b) != PF_OK)
        goto fail;
    return PF_OK;
fail:
    pf_map_bounds_free(b);
    return PF_ERR;
}

int pf_map_bounds_ring_components(const pf_map_bounds_t *b, double t_ms, int **comp_out,
                                  int **comp_devices_out)
{
    int S = b->in.S, D = b->in.D;
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
        double room = t_ms - b->in.cu[s], T = b->in.ar_bytes[s];
        /* the slowest ring link allowed; T = 0: any; no room: none */
        double need = T == 0 ? 0 : room > 0 ? T / room : INFINITY;
        for (int d = 0; d < D; d++)
            parent[d] = d;
        for (int i = 0; i < D - 1 && b->mst_w[i] >= need; i++)
            parent[uf_find(parent, b->mst_a[i])] = uf_find(parent, b->mst_b[i]);
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
