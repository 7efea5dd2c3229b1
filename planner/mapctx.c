/* mapctx: precomputation and the DFS probe (Parmesan V-A, Algorithm 2).
 *
 * The probe answers "is there a one-to-one p: stage replicas -> devices with max_x c_stage(x, p)
 * <= t?" exactly, by depth-first search over a fixed mapping order. What it adds to Algorithm 2,
 * all of it exact (a branch is cut only when no completion of it can meet the target):
 *
 *  - Partial lower bounds. Every term of eq. 6 is >= 0 and eq. 7 is a max, so a stage replica's
 *    time is bounded below before all its neighbours are placed: placed neighbours contribute
 *    their exact transfer, an unplaced one at least min latency + M / max bandwidth out of the
 *    device (lbterm), and a ring pair with one end placed at least the transfer over that
 *    device's fastest link. The static eq. 10 / eq. 11 bound of (stage, device) is a floor under
 *    all of it. A candidate is rejected when the bound of any stage it touches exceeds t; the
 *    paper's checking scheme (exact times of the stage replicas that become complete) runs too
 *    and is what decides acceptance.
 *  - Ring capacity (ar, full). At target t a ring link of stage s must carry at least
 *    T(s) / (t - c_u(s)), so the replicas of s share one component of the graph of such links
 *    (ring_components); a placement that leaves a started stage's component with fewer free
 *    devices than its unplaced replicas is cut (ring_ok).
 *  - Device symmetry. If swapping devices a and b is an automorphism of the bandwidth and latency
 *    matrices and neither is used by the partial mapping, the subtrees below x -> a and x -> b
 *    mirror each other (swap a and b in every mapping), so of each class only the first free
 *    member in the canonical order (below) that passes the replica and block rules is tried.
 *  - Host blocks (pf_map_host_blocks). Blocks of one class trade places wholesale: i-th device of
 *    one <-> i-th of the other is an automorphism. A candidate in a block that no placed device
 *    uses is tried only when that block is the first unused one of its class (blocks in order of
 *    their lowest device), so the used blocks of a class are always its first ones. The partial
 *    mapping p uses none of the unused blocks, so permuting them fixes p; swapping the candidate's
 *    block B with the first unused block F maps every completion of p + (x -> B[i]) to one of
 *    p + (x -> F[i]) with the same stage times. 4 x DGX-1: no device classes, 4! block orders.
 *  - Replica symmetry. Devices are ranked per stage s by (static bound of s on d, canonical
 *    position of d): "a <_s b". m is invariant under permuting whole replicas: we keep only
 *    mappings whose first stage s0 (in the mapping order) has devices increasing in <_s0 with the
 *    replica index. ar is invariant under rotating one stage's ring: replica 0 of every stage s
 *    holds its <_s-least device. full is invariant under rotating all stages' replicas together:
 *    replica 0 of the first stage holds its least device (only with the stage-major order, see
 *    below). Ranking by the static bound, not the index, keeps the rule in step with the greedy
 *    candidate order (an index order made m probes thrash: replica 0 takes the best device, and
 *    replica 1 is then confined to higher indices).
 *  - Canonical order: the blocks of a class one after another in block order, each by position,
 *    the class where its lowest device is; other devices by index. With hosts numbered machine by
 *    machine (DGX-1 x 4) it is the index order, and without blocks it is.
 *  - Why the rules combine, exactly. Claim: if a mapping sigma meeting t extends the partial
 *    mapping p and obeys the replica rules, some child that the rules keep has such a mapping
 *    too. d = sigma(x) passes the replica rule. If the block rule skips d = B[i], let h swap B and
 *    F; if the class rule skips d, let h swap d and the class's representative a. h is an
 *    automorphism that fixes p, so h(sigma) meets t and extends p + (x -> h(d)), and after
 *    re-sorting (m) or re-rotating (ar) the replicas not yet placed it obeys the replica rules
 *    again, provided that in every <_s h keeps each free device above every placed device it was
 *    above, and above h(d) when it was above d. It does: static bounds are invariant under
 *    automorphisms (sorted rows, best links, ring connectivity); a is the least of its class
 *    (equal bounds, first in canonical order); F precedes B, and the used blocks of the class
 *    precede both, so the swap moves no free device across a placed one or across F[i], B[i].
 *    F[i] passes the block rule; if the class rule skips it, one class step more ends at a
 *    device every rule keeps. Hence the block rule runs before the class rule (the class
 *    representative must be a device it keeps), the class representative is taken in canonical
 *    order, and ties are broken canonically, not by index (interleaved blocks, tested: an index
 *    tie-break lets a swap carry a free device below a placed one).
 *
 * Mapping order (why): m couples only stage replicas of one replica, so replica by replica makes
 * every stage replica's time known within S placements; inside a replica, stages go in
 * maximum-cardinality order (next = the stage with most placed neighbours) starting at the stage
 * with the largest static bound, so neighbourhoods close early and the likely bottleneck is
 * placed first. ar couples only the replicas of one stage, so stage by stage, replicas in ring
 * order (each placement closes a ring pair), stages by decreasing static bound. full needs both;
 * it goes stage-major when all-reduce bytes dominate (ratio > 1) and replica-major otherwise.
 * Candidates at a node are tried in increasing order of their own new bound (ties: device index),
 * the greedy choice that finds a feasible mapping early when one exists.
 *
 * Parallelism: the first one or two levels of the tree are cut into branches (in the sequential
 * order) that OpenMP threads take dynamically. A thread that finds a mapping in branch i publishes
 * i; threads in branches > i stop at once, those in branches < i go on, and the lowest branch
 * wins. So the probe returns the mapping a sequential DFS would, whatever the thread count. */
#include "planner/mapctx.h"
#include "planner/util.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Pruning by a partial bound uses t (1 + PRUNE_SLACK): the bounds add the same terms in another
 * order than the exact evaluation, so they may exceed the exact value by a few ulps. The exact
 * checks compare with t itself. */
#define PRUNE_SLACK 1e-12
#define DEADLINE_CHECK_MASK 255

struct pf_mapctx {
    int S, R, N, D;
    pf_inst_t inst;
    int use_m, use_ar, symmetry;
    double *cu, *ar_bytes;          /* S */
    int *adj_off, *adj, max_deg;    /* stage adjacency (CSR), as the stage graph has it */
    double *adj_bytes;              /* M of each adjacency entry */
    double *lat_ms, *bw_bpms;       /* D x D: latency ms, bandwidth bytes per ms */
    double *min_lat_out;            /* D: smallest latency out of d */
    double *max_bw_out, *max_bw_in; /* D: fastest link out of / into d */
    int *cls, ncls;                 /* device classes */
    /* Host blocks (pf_map_host_blocks; none unless symmetry is PF_MAP_SYM_ALL): blk[d] = d's
     * block or -1, blk_class[b] = b's class, blk_kpos[b] = b's place among its class's blocks
     * (block order); canon = the devices in canonical order, canon_pos its inverse. */
    int *blk, nblk, *blk_class, *blk_kpos, nbcls;
    int *canon, *canon_pos;
    double *static_m, *static_ar;   /* S x D: eq. 10 / eq. 11 terms at device d */
    double *static_lb;              /* S x D: c_u + the terms the instantiation uses */
    double lower_ms;
    int stage_major;
    int *order, *pos; /* depth -> stage replica, stage replica -> depth */
    int *chk_off, *chk; /* CSR by depth: stage replicas whose time is complete there */
    int *low_ref;       /* by depth: stage replica whose device bounds the candidates, or -1 */
    int *rank;          /* S x D: rank of d among the devices by (static_lb of s, index) */
    /* Ring connectivity: a maximum spanning tree of the devices under w(a, b) = the faster
     * direction of the link, its D - 1 edges by decreasing w, and ring_bpms[d] = the largest b
     * such that d's component in {links with w >= b} holds at least R devices. */
    int *mst_a, *mst_b;
    double *mst_w, *ring_bpms;
};

/* ---------------------------------------------------------------- precomputation */

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x > y ? -1 : x < y;
}

static int cmp_asc(const void *a, const void *b)
{
    return -cmp_desc(a, b);
}

typedef struct {
    double key;
    int d;
} keyed_t;

/* By key, then device index: a total order, so qsort's result does not depend on its algorithm. */
static int cmp_keyed(const void *a, const void *b)
{
    const keyed_t *p = a, *q = b;
    if (p->key != q->key)
        return p->key < q->key ? -1 : 1;
    return (p->d > q->d) - (p->d < q->d);
}

void pf_mapctx_destroy(pf_mapctx_t **cxp)
{
    if (!cxp || !*cxp)
        return;
    pf_mapctx_t *cx = *cxp;
    free(cx->cu);
    free(cx->ar_bytes);
    free(cx->adj_off);
    free(cx->adj);
    free(cx->adj_bytes);
    free(cx->lat_ms);
    free(cx->bw_bpms);
    free(cx->min_lat_out);
    free(cx->max_bw_out);
    free(cx->max_bw_in);
    free(cx->cls);
    free(cx->blk);
    free(cx->blk_class);
    free(cx->blk_kpos);
    free(cx->canon);
    free(cx->canon_pos);
    free(cx->static_m);
    free(cx->static_ar);
    free(cx->static_lb);
    free(cx->order);
    free(cx->pos);
    free(cx->chk_off);
    free(cx->chk);
    free(cx->low_ref);
    free(cx->rank);
    free(cx->mst_a);
    free(cx->mst_b);
    free(cx->mst_w);
    free(cx->ring_bpms);
    free(cx);
    *cxp = NULL;
}

static double lbterm(const pf_mapctx_t *cx, int d, double bytes)
{
    return cx->min_lat_out[d] + bytes / cx->max_bw_out[d];
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
static int ring_connectivity(pf_mapctx_t *cx)
{
    int D = cx->D, R = cx->R, n = 0, rc = PF_ERR;
    double *key = malloc((size_t)D * sizeof *key);
    int *from = malloc((size_t)D * sizeof *from), *in = calloc((size_t)D, sizeof *in);
    int *parent = malloc((size_t)D * sizeof *parent), *size = malloc((size_t)D * sizeof *size);
    int *next = malloc((size_t)D * sizeof *next), *last = malloc((size_t)D * sizeof *last);
    keyed_t *edges = malloc((size_t)D * sizeof *edges);
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
    qsort(edges, (size_t)n, sizeof *edges, cmp_keyed);
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
static int static_bounds(pf_mapctx_t *cx)
{
    int S = cx->S, D = cx->D, R = cx->R, rc = PF_ERR;
    double *row_bw = malloc((size_t)D * sizeof *row_bw);
    double *row_lat = malloc((size_t)D * sizeof *row_lat);
    double *msgs = malloc((size_t)(cx->max_deg + 1) * sizeof *msgs);
    keyed_t *ranked = malloc((size_t)D * sizeof *ranked);
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
        /* the ring connectivity bound (ring_connectivity) can only raise it */
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
            ranked[d].d = cx->canon_pos[d];
        }
        qsort(ranked, (size_t)D, sizeof *ranked, cmp_keyed);
        for (int i = 0; i < D; i++)
            cx->rank[(size_t)s * D + cx->canon[ranked[i].d]] = i;
    }
    rc = PF_OK;
done:
    free(row_bw);
    free(row_lat);
    free(msgs);
    free(ranked);
    return rc;
}

/* Canonical position of a device: (anchor, place of its block in its class, position in the
 * block); the anchor of a block device is the lowest device of its class's first block, of any
 * other device the device itself. */
typedef struct {
    int anchor, kpos, pos, d;
} canon_key_t;

static int cmp_canon(const void *a, const void *b)
{
    const canon_key_t *p = a, *q = b;
    if (p->anchor != q->anchor)
        return p->anchor < q->anchor ? -1 : 1;
    if (p->kpos != q->kpos)
        return p->kpos < q->kpos ? -1 : 1;
    return (p->pos > q->pos) - (p->pos < q->pos);
}

/* Host blocks and the canonical order (see the top of the file): the blocks of a class one after
 * another in block order, each block's devices by position, the class placed where its first
 * device is; other devices by index. Where blocks are index intervals in class order (hosts
 * numbered machine by machine, as DGX-1 x 4), this is the index order. */
static int host_blocks(pf_mapctx_t *cx, const pf_cluster_t *c)
{
    int D = cx->D;
    cx->nblk = cx->nbcls = 0;
    if (cx->symmetry == PF_MAP_SYM_ALL && (cx->nblk = pf_map_host_blocks(c, cx->blk,
                                                                        cx->blk_class, NULL)) < 0)
        return PF_ERR;
    if (cx->symmetry != PF_MAP_SYM_ALL)
        for (int d = 0; d < D; d++)
            cx->blk[d] = -1;
    int *count = calloc((size_t)D, sizeof *count); /* per class, then per block */
    int *anchor = malloc((size_t)D * sizeof *anchor); /* per class */
    canon_key_t *key = malloc((size_t)D * sizeof *key);
    if (!count || !anchor || !key) {
        free(count);
        free(anchor);
        free(key);
        return PF_ERR;
    }
    for (int b = 0; b < cx->nblk; b++) {
        int k = cx->blk_class[b];
        cx->blk_kpos[b] = count[k]++;
        cx->nbcls = k + 1 > cx->nbcls ? k + 1 : cx->nbcls;
    }
    for (int k = 0; k < cx->nbcls; k++)
        anchor[k] = -1;
    memset(count, 0, (size_t)D * sizeof *count);
    for (int d = 0; d < D; d++) { /* blocks are numbered by lowest device, positions by index */
        int b = cx->blk[d];
        if (b < 0) {
            key[d] = (canon_key_t){d, 0, 0, d};
            continue;
        }
        int k = cx->blk_class[b];
        if (anchor[k] < 0)
            anchor[k] = d;
        key[d] = (canon_key_t){anchor[k], cx->blk_kpos[b], count[b]++, d};
    }
    qsort(key, (size_t)D, sizeof *key, cmp_canon);
    for (int i = 0; i < D; i++) {
        cx->canon[i] = key[i].d;
        cx->canon_pos[key[i].d] = i;
    }
    free(count);
    free(anchor);
    free(key);
    return PF_OK;
}

/* Stage order: ar by decreasing static bound; m and full in maximum-cardinality order. */
static int stage_order(const pf_mapctx_t *cx, int *sorder)
{
    int S = cx->S, D = cx->D;
    double *key = malloc((size_t)S * sizeof *key);
    int *placed = calloc((size_t)S, sizeof *placed);
    if (!key || !placed) {
        free(key);
        free(placed);
        return PF_ERR;
    }
    for (int s = 0; s < S; s++) {
        key[s] = INFINITY;
        for (int d = 0; d < D; d++)
            key[s] = fmin(key[s], cx->static_lb[(size_t)s * D + d]);
    }
    for (int i = 0; i < S; i++) {
        int best = -1, best_cnt = -1;
        double best_bytes = -1;
        for (int s = 0; s < S; s++) {
            if (placed[s])
                continue;
            int cnt = 0;
            double bytes = 0;
            if (cx->use_m) {
                for (int k = cx->adj_off[s]; k < cx->adj_off[s + 1]; k++)
                    if (placed[cx->adj[k]]) {
                        cnt++;
                        bytes += cx->adj_bytes[k];
                    }
            }
            if (best < 0 || cnt > best_cnt || (cnt == best_cnt && bytes > best_bytes) ||
                (cnt == best_cnt && bytes == best_bytes && key[s] > key[best])) {
                best = s;
                best_cnt = cnt;
                best_bytes = bytes;
            }
        }
        placed[best] = 1;
        sorder[i] = best;
    }
    free(key);
    free(placed);
    return PF_OK;
}

static int build_order(pf_mapctx_t *cx)
{
    int S = cx->S, R = cx->R, N = cx->N, rc = PF_ERR;
    int *sorder = malloc((size_t)S * sizeof *sorder);
    int *known = malloc((size_t)N * sizeof *known);
    if (!sorder || !known || stage_order(cx, sorder) != PF_OK)
        goto done;
    int k = 0;
    if (cx->stage_major) {
        for (int i = 0; i < S; i++)
            for (int r = 0; r < R; r++)
                cx->order[k++] = sorder[i] * R + r;
    } else {
        for (int r = 0; r < R; r++)
            for (int i = 0; i < S; i++)
                cx->order[k++] = sorder[i] * R + r;
    }
    for (k = 0; k < N; k++)
        cx->pos[cx->order[k]] = k;

    /* Checking scheme: x's time is complete at the depth where the last of x, its neighbours in
     * its replica (m) and the other replicas of its stage (ar) is placed. */
    for (int x = 0; x < N; x++) {
        int s = x / R, r = x % R, kd = cx->pos[x];
        if (cx->use_m)
            for (int j = cx->adj_off[s]; j < cx->adj_off[s + 1]; j++)
                kd = kd > cx->pos[cx->adj[j] * R + r] ? kd : cx->pos[cx->adj[j] * R + r];
        if (cx->use_ar)
            for (int q = 0; q < R; q++)
                kd = kd > cx->pos[s * R + q] ? kd : cx->pos[s * R + q];
        known[x] = kd;
    }
    memset(cx->chk_off, 0, (size_t)(N + 1) * sizeof *cx->chk_off);
    for (int x = 0; x < N; x++)
        cx->chk_off[known[x] + 1]++;
    for (k = 0; k < N; k++)
        cx->chk_off[k + 1] += cx->chk_off[k];
    {
        int *fill = known; /* reuse: next free slot per depth */
        int *slot = malloc((size_t)N * sizeof *slot);
        if (!slot)
            goto done;
        for (k = 0; k < N; k++)
            slot[k] = cx->chk_off[k];
        for (int x = 0; x < N; x++)
            cx->chk[slot[fill[x]]++] = x;
        free(slot);
    }

    /* Replica symmetry (see the top of the file). */
    for (k = 0; k < N; k++) {
        int x = cx->order[k], s = x / R, r = x % R;
        cx->low_ref[k] = -1;
        if (!cx->symmetry || r == 0)
            continue;
        if (cx->inst == PF_INST_M && s == sorder[0])
            cx->low_ref[k] = s * R + r - 1;
        else if (cx->inst == PF_INST_AR)
            cx->low_ref[k] = s * R;
        else if (cx->inst == PF_INST_FULL && cx->stage_major && s == sorder[0])
            cx->low_ref[k] = s * R;
    }
    rc = PF_OK;
done:
    free(sorder);
    free(known);
    return rc;
}

pf_mapctx_t *pf_mapctx_new(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_inst_t inst,
                           int symmetry)
{
    int S = pf_stage_graph_stages(sg), R = pf_stage_graph_replicas(sg), D = pf_cluster_ndevices(c);
    if ((long long)S * R > D)
        return NULL;
    pf_mapctx_t *cx = calloc(1, sizeof *cx);
    if (!cx)
        return NULL;
    size_t DD = (size_t)D * D, SD = (size_t)S * D;
    int N = S * R;
    cx->S = S;
    cx->R = R;
    cx->N = N;
    cx->D = D;
    cx->inst = inst;
    cx->use_m = inst != PF_INST_AR;
    cx->use_ar = inst != PF_INST_M && R > 1;
    cx->symmetry = symmetry;
    cx->cu = malloc((size_t)S * sizeof *cx->cu);
    cx->ar_bytes = malloc((size_t)S * sizeof *cx->ar_bytes);
    cx->adj_off = malloc((size_t)(S + 1) * sizeof *cx->adj_off);
    cx->lat_ms = malloc(DD * sizeof *cx->lat_ms);
    cx->bw_bpms = malloc(DD * sizeof *cx->bw_bpms);
    cx->min_lat_out = malloc((size_t)D * sizeof(double));
    cx->max_bw_out = malloc((size_t)D * sizeof(double));
    cx->max_bw_in = malloc((size_t)D * sizeof(double));
    cx->cls = malloc((size_t)D * sizeof *cx->cls);
    cx->blk = malloc((size_t)D * sizeof(int));
    cx->blk_class = malloc((size_t)D * sizeof(int));
    cx->blk_kpos = malloc((size_t)D * sizeof(int));
    cx->canon = malloc((size_t)D * sizeof(int));
    cx->canon_pos = malloc((size_t)D * sizeof(int));
    cx->static_m = malloc(SD * sizeof(double));
    cx->static_ar = malloc(SD * sizeof(double));
    cx->static_lb = malloc(SD * sizeof(double));
    cx->order = malloc((size_t)N * sizeof(int));
    cx->pos = malloc((size_t)N * sizeof(int));
    cx->chk_off = malloc((size_t)(N + 1) * sizeof(int));
    cx->chk = malloc((size_t)N * sizeof(int));
    cx->low_ref = malloc((size_t)N * sizeof(int));
    cx->rank = malloc(SD * sizeof(int));
    cx->mst_a = malloc((size_t)D * sizeof(int));
    cx->mst_b = malloc((size_t)D * sizeof(int));
    cx->mst_w = malloc((size_t)D * sizeof(double));
    cx->ring_bpms = malloc((size_t)D * sizeof(double));
    if (!cx->cu || !cx->ar_bytes || !cx->adj_off || !cx->lat_ms || !cx->bw_bpms ||
        !cx->min_lat_out || !cx->max_bw_out || !cx->max_bw_in || !cx->cls || !cx->blk ||
        !cx->blk_class || !cx->blk_kpos || !cx->canon || !cx->canon_pos || !cx->static_m ||
        !cx->static_ar || !cx->static_lb || !cx->order || !cx->pos || !cx->chk_off ||
        !cx->chk || !cx->low_ref || !cx->rank || !cx->mst_a || !cx->mst_b || !cx->mst_w ||
        !cx->ring_bpms)
        goto fail;

    int nadj = 0;
    for (int s = 0; s < S; s++) {
        int k;
        pf_stage_graph_neighbors(sg, s, &k);
        cx->adj_off[s] = nadj;
        nadj += k;
        cx->max_deg = k > cx->max_deg ? k : cx->max_deg;
        cx->cu[s] = pf_stage_graph_cu_ms(sg, s);
        cx->ar_bytes[s] = pf_stage_graph_allreduce_bytes(sg, s);
    }
    cx->adj_off[S] = nadj;
    cx->adj = malloc((size_t)(nadj ? nadj : 1) * sizeof *cx->adj);
    cx->adj_bytes = malloc((size_t)(nadj ? nadj : 1) * sizeof *cx->adj_bytes);
    if (!cx->adj || !cx->adj_bytes)
        goto fail;
    for (int s = 0; s < S; s++) {
        int k;
        const int *nb = pf_stage_graph_neighbors(sg, s, &k);
        for (int i = 0; i < k; i++) {
            cx->adj[cx->adj_off[s] + i] = nb[i];
            cx->adj_bytes[cx->adj_off[s] + i] = pf_stage_graph_msg_bytes(sg, s, nb[i]);
        }
    }

    /* The same operations as pf_cluster_xfer_ms (lat_us * 1e-3 + bytes / (gbps * 1e6)), so that
     * times computed here equal pf_map_objective_ms's bit for bit. */
    for (int a = 0; a < D; a++) {
        cx->min_lat_out[a] = INFINITY;
        cx->max_bw_out[a] = cx->max_bw_in[a] = 0;
        for (int b = 0; b < D; b++) {
            size_t k = (size_t)a * D + b;
            cx->lat_ms[k] = pf_cluster_lat_us(c, a, b) * 1e-3;
            cx->bw_bpms[k] = pf_cluster_bw_gbps(c, a, b) * 1e6;
        }
    }
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++) {
            if (a == b)
                continue;
            size_t k = (size_t)a * D + b;
            cx->min_lat_out[a] = fmin(cx->min_lat_out[a], cx->lat_ms[k]);
            cx->max_bw_out[a] = fmax(cx->max_bw_out[a], cx->bw_bpms[k]);
            cx->max_bw_in[b] = fmax(cx->max_bw_in[b], cx->bw_bpms[k]);
        }
    if (D == 1) {
        cx->min_lat_out[0] = 0;
        cx->max_bw_out[0] = cx->max_bw_in[0] = INFINITY;
    }
    if (symmetry) {
        if ((cx->ncls = pf_map_device_classes(c, cx->cls)) < 0)
            goto fail;
    } else {
        for (int d = 0; d < D; d++)
            cx->cls[d] = d;
        cx->ncls = D;
    }
    if (host_blocks(cx, c) != PF_OK || ring_connectivity(cx) != PF_OK ||
        static_bounds(cx) != PF_OK)
        goto fail;
    /* ar: stage-major; m: replica-major; full: stage-major when all-reduce dominates (the auto
     * selection's ratio). */
    cx->stage_major = inst == PF_INST_AR ||
                      (inst == PF_INST_FULL && pf_map_auto_instantiation(sg) == PF_INST_AR);
    if (build_order(cx) != PF_OK)
        goto fail;
    return cx;
fail:
    pf_mapctx_destroy(&cx);
    return NULL;
}

double pf_mapctx_lower_bound_ms(const pf_mapctx_t *cx)
{
    return cx->lower_ms;
}

const int *pf_mapctx_order(const pf_mapctx_t *cx, int *stage_major)
{
    if (stage_major)
        *stage_major = cx->stage_major;
    return cx->order;
}

/* c_stage(x, p), summed in the order pf_map_stage_time_ms uses: c_u + (eq. 8 over neighbours
 * ascending) + (eq. 9 max over ring pairs). */
static double exact_time(const pf_mapctx_t *cx, const int *dev, int x)
{
    int R = cx->R, D = cx->D, s = x / R, r = x % R, d = dev[x];
    double m = 0, ar = 0;
    if (cx->use_m)
        for (int k = cx->adj_off[s]; k < cx->adj_off[s + 1]; k++) {
            int e = dev[cx->adj[k] * R + r];
            size_t i = (size_t)d * D + e;
            m += cx->lat_ms[i] + cx->adj_bytes[k] / cx->bw_bpms[i];
        }
    if (cx->use_ar)
        for (int q = 0; q < R; q++) {
            int a = dev[s * R + q], b = dev[s * R + (q + 1) % R];
            ar = fmax(ar, cx->ar_bytes[s] / cx->bw_bpms[(size_t)a * D + b]);
        }
    return cx->cu[s] + m + ar;
}

double pf_mapctx_objective_ms(const pf_mapctx_t *cx, const int *dev)
{
    double t = 0;
    for (int x = 0; x < cx->N; x++)
        t = fmax(t, exact_time(cx, dev, x));
    return t;
}

/* ---------------------------------------------------------------- the DFS */

typedef struct {
    atomic_int best_branch; /* lowest branch that found a mapping; INT_MAX = none */
    atomic_int stop;        /* deadline passed or cancelled */
    atomic_int failed;      /* out of memory in a thread */
    const atomic_int *cancel;
    double deadline_s;
    int *dev_out;
    double objective_ms;
    /* Ring components at this target (ar, full; NULL otherwise): comp[s * D + d] = the component
     * of d in the graph of links fast enough for stage s's ring (w >= T(s) / (t - c_u(s))),
     * comp_devices[s * D + c] = devices in component c. */
    int *comp, *comp_devices;
} shared_t;

typedef struct {
    double *slot;
    double old;
} undo_t;

typedef keyed_t cand_t; /* key = the candidate's score */

typedef struct {
    const pf_mapctx_t *cx;
    shared_t *sh;
    double target, t_prune;
    int *dev, *used;
    double *acc;  /* N: exact transfers to placed neighbours (eq. 8 so far) */
    double *rem;  /* N: lbterm of the neighbours not yet placed */
    double *mmax; /* S: max over placed replicas of their eq. 8 bound */
    double *arlb; /* S: eq. 9 bound from the placed ring pairs (and half-placed ones) */
    double *tp;   /* N + 1: max exact time checked above each depth (t_p of Algorithm 2) */
    undo_t *log;
    int nlog, log_cap;
    cand_t *cand;
    int ncand, cand_cap;
    int *cls_stamp, stamp;
    int *blk_used;  /* nblk: placed devices per block */
    int *blk_open;  /* nbcls: blocks in use per class (always the first ones in block order) */
    long long nodes, sym_pruned, block_pruned, bound_pruned;
    int branch;
    int *comp_free;  /* S x D: free devices per ring component (ar, full) */
    int *placed;     /* S: replicas of each stage placed */
    int *stage_comp; /* S: the component of a stage's placed replicas, -1 = none yet */
} dfs_t;

static void dfs_free(dfs_t *st)
{
    free(st->dev);
    free(st->used);
    free(st->acc);
    free(st->rem);
    free(st->mmax);
    free(st->arlb);
    free(st->tp);
    free(st->log);
    free(st->cand);
    free(st->cls_stamp);
    free(st->blk_used);
    free(st->blk_open);
    free(st->comp_free);
    free(st->placed);
    free(st->stage_comp);
}

static int dfs_init(dfs_t *st, const pf_mapctx_t *cx, shared_t *sh, double target)
{
    int N = cx->N, S = cx->S, D = cx->D;
    memset(st, 0, sizeof *st);
    st->cx = cx;
    st->sh = sh;
    st->target = target;
    st->t_prune = target + fabs(target) * PRUNE_SLACK;
    st->log_cap = N * (6 + 3 * cx->max_deg) + 8;
    st->cand_cap = 4 * D + 16;
    st->dev = malloc((size_t)N * sizeof *st->dev);
    st->used = calloc((size_t)D, sizeof *st->used);
    st->acc = calloc((size_t)N, sizeof *st->acc);
    st->rem = calloc((size_t)N, sizeof *st->rem);
    st->mmax = calloc((size_t)S, sizeof *st->mmax);
    st->arlb = calloc((size_t)S, sizeof *st->arlb);
    st->tp = calloc((size_t)N + 1, sizeof *st->tp);
    st->log = malloc((size_t)st->log_cap * sizeof *st->log);
    st->cand = malloc((size_t)st->cand_cap * sizeof *st->cand);
    st->cls_stamp = calloc((size_t)cx->ncls, sizeof *st->cls_stamp);
    st->blk_used = calloc((size_t)(cx->nblk ? cx->nblk : 1), sizeof *st->blk_used);
    st->blk_open = calloc((size_t)(cx->nbcls ? cx->nbcls : 1), sizeof *st->blk_open);
    if (!st->dev || !st->used || !st->acc || !st->rem || !st->mmax || !st->arlb || !st->tp ||
        !st->log || !st->cand || !st->cls_stamp || !st->blk_used || !st->blk_open) {
        dfs_free(st);
        return PF_ERR;
    }
    if (sh->comp) {
        st->comp_free = malloc((size_t)S * D * sizeof *st->comp_free);
        st->placed = calloc((size_t)S, sizeof *st->placed);
        st->stage_comp = malloc((size_t)S * sizeof *st->stage_comp);
        if (!st->comp_free || !st->placed || !st->stage_comp) {
            dfs_free(st);
            return PF_ERR;
        }
        memcpy(st->comp_free, sh->comp_devices, (size_t)S * D * sizeof *st->comp_free);
        for (int s = 0; s < S; s++)
            st->stage_comp[s] = -1;
    }
    for (int x = 0; x < N; x++)
        st->dev[x] = -1;
    return PF_OK;
}

static inline void set_logged(dfs_t *st, double *slot, double v)
{
    st->log[st->nlog].slot = slot;
    st->log[st->nlog++].old = *slot;
    *slot = v;
}

static void undo_to(dfs_t *st, int mark)
{
    while (st->nlog > mark) {
        st->nlog--;
        *st->log[st->nlog].slot = st->log[st->nlog].old;
    }
}

/* Bounds after placing x on d. Returns 0 when a stage it touches is bound to exceed the target.
 * commit = 1 applies the new partial sums (logged; the caller undoes on failure). *score: the
 * largest new bound of x or of a neighbour (used to order candidates). */
static int place(dfs_t *st, int x, int d, int commit, double *score)
{
    const pf_mapctx_t *cx = st->cx;
    int R = cx->R, D = cx->D, s = x / R, r = x % R, ok = 1;
    double sc = 0, mx = 0, pairv = 0;
    if (cx->use_m) {
        double a = 0, rm = 0;
        for (int k = cx->adj_off[s]; k < cx->adj_off[s + 1]; k++) {
            int s2 = cx->adj[k], x2 = s2 * R + r, e = st->dev[x2];
            double M = cx->adj_bytes[k];
            if (e < 0) {
                rm += lbterm(cx, d, M);
                continue;
            }
            size_t de = (size_t)d * D + e, ed = (size_t)e * D + d;
            a += cx->lat_ms[de] + M / cx->bw_bpms[de];
            double acc2 = st->acc[x2] + (cx->lat_ms[ed] + M / cx->bw_bpms[ed]);
            double rem2 = st->rem[x2] - lbterm(cx, e, M);
            double mb2 = fmax(acc2 + fmax(rem2, 0.0), cx->static_m[(size_t)s2 * D + e]);
            double mmax2 = fmax(st->mmax[s2], mb2);
            double ar2 = cx->use_ar ? st->arlb[s2] : 0.0;
            if (cx->cu[s2] + mmax2 + ar2 > st->t_prune) {
                ok = 0;
                if (!commit)
                    return 0;
            }
            sc = fmax(sc, cx->cu[s2] + mb2);
            if (commit) {
                set_logged(st, &st->acc[x2], acc2);
                set_logged(st, &st->rem[x2], rem2);
                set_logged(st, &st->mmax[s2], mmax2);
            }
        }
        mx = fmax(a + rm, cx->static_m[(size_t)s * D + d]);
        if (commit) {
            set_logged(st, &st->acc[x], a);
            set_logged(st, &st->rem[x], rm);
        }
    }
    double arv = 0;
    if (cx->use_ar) {
        double T = cx->ar_bytes[s];
        int xp = s * R + (r + R - 1) % R, xn = s * R + (r + 1) % R;
        pairv = cx->static_ar[(size_t)s * D + d];
        if (st->dev[xp] >= 0)
            pairv = fmax(pairv, T / cx->bw_bpms[(size_t)st->dev[xp] * D + d]);
        else
            pairv = fmax(pairv, T / cx->max_bw_in[d]);
        if (st->dev[xn] >= 0)
            pairv = fmax(pairv, T / cx->bw_bpms[(size_t)d * D + st->dev[xn]]);
        else
            pairv = fmax(pairv, T / cx->max_bw_out[d]);
        arv = fmax(st->arlb[s], pairv);
        if (commit)
            set_logged(st, &st->arlb[s], arv);
    }
    double mm = cx->use_m ? fmax(st->mmax[s], mx) : 0.0;
    if (cx->cu[s] + mm + arv > st->t_prune)
        ok = 0;
    if (commit && cx->use_m)
        set_logged(st, &st->mmax[s], mm);
    *score = fmax(sc, cx->cu[s] + mx + pairv);
    return ok;
}

/* Ring capacity (exact): all replicas of a stage must share one ring component (else a ring link
 * is too slow for the target), so placing x on d needs d in the component the stage already uses,
 * enough free devices left there for the stage's unplaced replicas, and enough left in every
 * other started stage's component for its own. */
static int ring_ok(const dfs_t *st, int x, int d)
{
    const pf_mapctx_t *cx = st->cx;
    const int *comp = st->sh->comp;
    int S = cx->S, D = cx->D, R = cx->R, s = x / R;
    if (!comp)
        return 1;
    int c = comp[(size_t)s * D + d];
    if (st->stage_comp[s] >= 0 && st->stage_comp[s] != c)
        return 0;
    if (st->comp_free[(size_t)s * D + c] - 1 < R - st->placed[s] - 1)
        return 0;
    for (int s2 = 0; s2 < S; s2++) {
        int c2 = st->stage_comp[s2];
        if (s2 == s || c2 < 0 || comp[(size_t)s2 * D + d] != c2)
            continue;
        if (st->comp_free[(size_t)s2 * D + c2] - 1 < R - st->placed[s2])
            return 0;
    }
    return 1;
}

static void ring_take(dfs_t *st, int x, int d)
{
    const pf_mapctx_t *cx = st->cx;
    const int *comp = st->sh->comp;
    int S = cx->S, D = cx->D, s = x / cx->R;
    if (!comp)
        return;
    for (int s2 = 0; s2 < S; s2++)
        st->comp_free[(size_t)s2 * D + comp[(size_t)s2 * D + d]]--;
    if (st->placed[s]++ == 0)
        st->stage_comp[s] = comp[(size_t)s * D + d];
}

static void ring_release(dfs_t *st, int x, int d)
{
    const pf_mapctx_t *cx = st->cx;
    const int *comp = st->sh->comp;
    int S = cx->S, D = cx->D, s = x / cx->R;
    if (!comp)
        return;
    for (int s2 = 0; s2 < S; s2++)
        st->comp_free[(size_t)s2 * D + comp[(size_t)s2 * D + d]]++;
    if (--st->placed[s] == 0)
        st->stage_comp[s] = -1;
}

/* Place order[depth] on d and run the checking scheme. Returns 0 (state to be undone by the
 * caller with undo_to and unassign) when a bound or an exact stage time exceeds the target. */
static int commit(dfs_t *st, int depth, int d)
{
    const pf_mapctx_t *cx = st->cx;
    int x = cx->order[depth];
    double score;
    int ring = ring_ok(st, x, d), b = cx->blk[d];
    st->dev[x] = d;
    st->used[d] = 1;
    if (b >= 0 && st->blk_used[b]++ == 0)
        st->blk_open[cx->blk_class[b]]++;
    ring_take(st, x, d);
    if (!ring || !place(st, x, d, 1, &score))
        return 0;
    double tp = st->tp[depth];
    for (int i = cx->chk_off[depth]; i < cx->chk_off[depth + 1]; i++) {
        double t = exact_time(cx, st->dev, cx->chk[i]);
        if (t > st->target)
            return 0;
        tp = fmax(tp, t);
    }
    st->tp[depth + 1] = tp;
    return 1;
}

static void unassign(dfs_t *st, int depth)
{
    const pf_mapctx_t *cx = st->cx;
    int x = cx->order[depth], d = st->dev[x], b = cx->blk[d];
    ring_release(st, x, d);
    st->used[d] = 0;
    if (b >= 0 && --st->blk_used[b] == 0)
        st->blk_open[cx->blk_class[b]]--;
    st->dev[x] = -1;
}

/* Pushes the candidates of depth onto the candidate stack, best first; returns how many. */
static int gen_candidates(dfs_t *st, int depth)
{
    const pf_mapctx_t *cx = st->cx;
    int D = cx->D, x = cx->order[depth], s = x / cx->R, base = st->ncand;
    const int *rank = cx->rank + (size_t)s * D;
    int low = cx->low_ref[depth] >= 0 ? rank[st->dev[cx->low_ref[depth]]] : -1;
    if (st->ncand + D > st->cand_cap) {
        int cap = 2 * (st->ncand + D);
        cand_t *c = realloc(st->cand, (size_t)cap * sizeof *c);
        if (!c) {
            atomic_store(&st->sh->failed, 1);
            return 0;
        }
        st->cand = c;
        st->cand_cap = cap;
    }
    st->stamp++;
    for (int i = 0; i < D; i++) { /* canonical order: a class's first member is its least */
        int d = cx->canon[i], b = cx->blk[d];
        if (st->used[d])
            continue;
        if (rank[d] <= low) { /* excluded by the replica order */
            st->sym_pruned++;
            continue;
        }
        /* a block not in use opens only as its class's first unused one; before the class
         * rule, whose representative must be a device that this rule keeps */
        if (b >= 0 && st->blk_used[b] == 0 && cx->blk_kpos[b] != st->blk_open[cx->blk_class[b]]) {
            st->sym_pruned++;
            st->block_pruned++;
            continue;
        }
        if (cx->symmetry) {
            int c = cx->cls[d];
            if (st->cls_stamp[c] == st->stamp) {
                st->sym_pruned++;
                continue;
            }
            st->cls_stamp[c] = st->stamp;
        }
        double score;
        if (cx->static_lb[(size_t)s * D + d] > st->t_prune || !ring_ok(st, x, d) ||
            !place(st, x, d, 0, &score)) {
            st->bound_pruned++;
            continue;
        }
        st->cand[st->ncand].key = score;
        st->cand[st->ncand++].d = d;
    }
    int n = st->ncand - base;
    qsort(st->cand + base, (size_t)n, sizeof *st->cand, cmp_keyed);
    return n;
}

static int should_stop(dfs_t *st)
{
    shared_t *sh = st->sh;
    if (atomic_load_explicit(&sh->best_branch, memory_order_relaxed) < st->branch ||
        atomic_load_explicit(&sh->stop, memory_order_relaxed) ||
        atomic_load_explicit(&sh->failed, memory_order_relaxed))
        return 1;
    if (sh->cancel && atomic_load_explicit(sh->cancel, memory_order_relaxed)) {
        atomic_store(&sh->stop, 1);
        return 1;
    }
    if ((st->nodes & DEADLINE_CHECK_MASK) == 0 && sh->deadline_s > 0 &&
        pf_now_s() > sh->deadline_s) {
        atomic_store(&sh->stop, 1);
        return 1;
    }
    return 0;
}

static void found(dfs_t *st)
{
    shared_t *sh = st->sh;
#pragma omp critical(pf_mapctx_found)
    {
        if (st->branch < atomic_load(&sh->best_branch)) {
            memcpy(sh->dev_out, st->dev, (size_t)st->cx->N * sizeof *st->dev);
            sh->objective_ms = pf_mapctx_objective_ms(st->cx, st->dev);
            atomic_store(&sh->best_branch, st->branch);
        }
    }
}

static int dfs(dfs_t *st, int depth)
{
    const pf_mapctx_t *cx = st->cx;
    if (depth == cx->N) {
        found(st);
        return 1;
    }
    st->nodes++;
    if (should_stop(st))
        return 0;
    int base = st->ncand, n = gen_candidates(st, depth);
    for (int i = 0; i < n; i++) {
        int mark = st->nlog;
        int ok = commit(st, depth, st->cand[base + i].d);
        if (ok && dfs(st, depth + 1)) {
            st->ncand = base;
            return 1;
        }
        if (!ok)
            st->bound_pruned++;
        undo_to(st, mark);
        unassign(st, depth);
        if (should_stop(st))
            break;
    }
    st->ncand = base;
    return 0;
}

/* The ring components of every stage at target t (see ring_ok). */
static int ring_components(const pf_mapctx_t *cx, double t_prune, shared_t *sh)
{
    int S = cx->S, D = cx->D;
    int *parent = malloc((size_t)D * sizeof *parent);
    sh->comp = malloc((size_t)S * D * sizeof *sh->comp);
    sh->comp_devices = calloc((size_t)S * D, sizeof *sh->comp_devices);
    if (!parent || !sh->comp || !sh->comp_devices) {
        free(parent);
        free(sh->comp);
        free(sh->comp_devices);
        sh->comp = sh->comp_devices = NULL;
        return PF_ERR;
    }
    for (int s = 0; s < S; s++) {
        double room = t_prune - cx->cu[s], T = cx->ar_bytes[s];
        /* the slowest ring link allowed; T = 0: any; no room: none */
        double need = T == 0 ? 0 : room > 0 ? T / room : INFINITY;
        for (int d = 0; d < D; d++)
            parent[d] = d;
        for (int i = 0; i < D - 1 && cx->mst_w[i] >= need; i++)
            parent[uf_find(parent, cx->mst_a[i])] = uf_find(parent, cx->mst_b[i]);
        for (int d = 0; d < D; d++) {
            int c = uf_find(parent, d);
            sh->comp[(size_t)s * D + d] = c;
            sh->comp_devices[(size_t)s * D + c]++;
        }
    }
    free(parent);
    return PF_OK;
}

/* A top-level branch: the devices of the first len stage replicas in the mapping order. */
typedef struct {
    int len;
    int d[2];
} branch_t;

int pf_mapctx_probe(const pf_mapctx_t *cx, double target_ms, double deadline_s, int threads,
                    const atomic_int *cancel, int *dev, pf_probe_result_t *res, int *cancelled)
{
    shared_t sh;
    dfs_t st0;
    branch_t *br = NULL;
    int nbr = 0, rc = PF_ERR;
    memset(res, 0, sizeof *res);
    res->objective_ms = NAN;
    if (cancelled)
        *cancelled = 0;
    atomic_init(&sh.best_branch, INT_MAX);
    atomic_init(&sh.stop, 0);
    atomic_init(&sh.failed, 0);
    sh.cancel = cancel;
    sh.deadline_s = deadline_s;
    sh.dev_out = dev;
    sh.objective_ms = NAN;
    sh.comp = sh.comp_devices = NULL;
    if (threads <= 0)
        threads = omp_get_max_threads();
    if (cx->use_ar && ring_components(cx, target_ms + fabs(target_ms) * PRUNE_SLACK, &sh) != PF_OK)
        return PF_ERR;
    if (dfs_init(&st0, cx, &sh, target_ms) != PF_OK) {
        free(sh.comp);
        free(sh.comp_devices);
        return PF_ERR;
    }
    if (cx->lower_ms > st0.t_prune) { /* eq. 10 / 11 already rule the target out */
        rc = PF_OK;
        goto done;
    }

    /* Branches in sequential DFS order: level 1, or levels 1 and 2 when level 1 alone would
     * leave threads idle. */
    st0.nodes = 1;
    int n0 = gen_candidates(&st0, 0), cap = n0 ? n0 : 1;
    int two = threads > 1 && cx->N > 1 && n0 < 4 * threads;
    br = malloc((size_t)cap * sizeof *br);
    if (!br)
        goto done;
    for (int i = 0; i < n0; i++) {
        int d0 = st0.cand[i].d;
        if (!two) {
            br[nbr++] = (branch_t){1, {d0, -1}};
            continue;
        }
        int mark = st0.nlog;
        if (commit(&st0, 0, d0)) {
            st0.nodes++;
            int base = st0.ncand, n1 = gen_candidates(&st0, 1);
            if (nbr + n1 > cap) {
                cap = 2 * (nbr + n1);
                branch_t *b = realloc(br, (size_t)cap * sizeof *b);
                if (!b)
                    goto done;
                br = b;
            }
            for (int j = 0; j < n1; j++)
                br[nbr++] = (branch_t){2, {d0, st0.cand[base + j].d}};
            st0.ncand = base;
        } else {
            st0.bound_pruned++;
        }
        undo_to(&st0, mark);
        unassign(&st0, 0);
    }
    if (atomic_load(&sh.failed))
        goto done;
    res->nodes = st0.nodes;
    res->symmetric_pruned = st0.sym_pruned;
    res->block_pruned = st0.block_pruned;
    res->bound_pruned = st0.bound_pruned;

    long long nodes = 0, symp = 0, blockp = 0, boundp = 0;
#pragma omp parallel num_threads(threads) reduction(+ : nodes, symp, blockp, boundp)
    {
        dfs_t st;
        int ok = dfs_init(&st, cx, &sh, target_ms) == PF_OK;
        if (!ok)
            atomic_store(&sh.failed, 1);
#pragma omp for schedule(dynamic, 1)
        for (int i = 0; i < nbr; i++) {
            if (!ok)
                continue;
            st.branch = i;
            if (should_stop(&st))
                continue;
            /* The prefix's nodes were counted when the branches were made. */
            int placed = 0, good = 1;
            for (int k = 0; k < br[i].len && good; k++) {
                placed++;
                good = commit(&st, k, br[i].d[k]);
            }
            if (good)
                dfs(&st, br[i].len);
            else
                st.bound_pruned++;
            undo_to(&st, 0);
            for (int k = 0; k < placed; k++)
                unassign(&st, k);
        }
        if (ok) {
            nodes += st.nodes;
            symp += st.sym_pruned;
            blockp += st.block_pruned;
            boundp += st.bound_pruned;
            dfs_free(&st);
        }
    }
    res->nodes += nodes;
    res->symmetric_pruned += symp;
    res->block_pruned += blockp;
    res->bound_pruned += boundp;
    if (atomic_load(&sh.failed))
        goto done;
    if (atomic_load(&sh.best_branch) != INT_MAX) {
        res->found = 1;
        res->objective_ms = sh.objective_ms;
    } else if (atomic_load(&sh.stop)) {
        if (cancel && atomic_load(cancel)) {
            if (cancelled)
                *cancelled = 1;
        } else {
            res->timed_out = 1;
        }
    }
    rc = PF_OK;
done:
    free(br);
    dfs_free(&st0);
    free(sh.comp);
    free(sh.comp_devices);
    return rc;
}
