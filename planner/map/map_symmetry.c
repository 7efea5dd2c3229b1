/* map_symmetry: automorphisms of the cluster's matrices that the DFS probe (map_probe.c,
 * Algorithm 2) uses to skip mirrored subtrees, and why its rules combine exactly:
 *
 *  - Device symmetry. If swapping devices a and b is an automorphism of the bandwidth and latency
 *    matrices and neither is used by the partial mapping, the subtrees below x -> a and x -> b
 *    mirror each other (swap a and b in every mapping), so of each class only the first free
 *    member in the canonical order (below) that passes the replica and block rules is tried.
 *  - Host blocks (pf_map_symmetry_host_blocks). Blocks of one class trade places wholesale:
 *    i-th device of one <-> i-th of the other is an automorphism. A candidate in a block that no placed device
 *    uses is tried only when that block is the first unused one of its class (blocks in order of
 *    their lowest device), so the used blocks of a class are always its first ones. The partial
 *    mapping p uses none of the unused blocks, so permuting them fixes p; swapping the candidate's
 *    block B with the first unused block F maps every completion of p + (x -> B[i]) to one of
 *    p + (x -> F[i]) with the same stage times. 4 x DGX-1: no device classes, 4! block orders.
 *  - Units of a regular hierarchy (pf_map_symmetry_hier_units): the quotient of its symmetry.
 *    Two full units U, V of level l under one parent unit trade places wholesale (i-th host of
 *    U <-> i-th of V, devices by position): a device outside both meets them at the parent's
 *    level or above, pairs inside U meet at the levels pairs inside V do, and U-V pairs meet at
 *    the parent's level either way; a regular hierarchy's links depend on that level alone
 *    (levels between a unit and its parent that have the parent's link are merged into it:
 *    pairs meeting there see one link whichever level it is). So
 *    every level below the top is a layer of blocks (hosts under a leaf, leaves under a spine,
 *    ...), each layer's rule the host-block rule above; the canonical order is the index order
 *    (devices host by host), in which a unit and its siblings are intervals. A candidate thus
 *    opens at most the first unused child of each unit in use, recursively: the DFS branches
 *    over "a free device of a host in use / the first host of a leaf in use / the first leaf of
 *    a spine in use / ...", not over D devices, and skips an unused unit whole.
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
 *    device every rule keeps. With nested layers (units) the same step is taken in the first
 *    layer whose rule skips d: F and B are siblings under one parent unit, an interval in the
 *    canonical order whose used children are its first ones, so no placed device lies between
 *    F and B either; every step moves d to an earlier canonical position, so the steps end at
 *    a device that every layer's rule and the class rule keep. Hence the block rule runs before the class rule (the class
 *    representative must be a device it keeps), the class representative is taken in canonical
 *    order, and ties are broken canonically, not by index (interleaved blocks, tested: an index
 *    tie-break lets a swap carry a free device below a placed one).
 *
 */
#include "planner/map/map_symmetry.h"
#include "planner/ir/cluster_hier.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Transposition (a b) is an automorphism of both matrices. Being one is an equivalence relation
 * ((a c) = (a b)(b c)(a b)), so comparing a device with each class's first member suffices. */
static bool swappable(const double *bw, const double *lat, int D, int a, int b)
{
    size_t A = (size_t)a * D, B = (size_t)b * D;
    if (bw[A + b] != bw[B + a] || lat[A + b] != lat[B + a])
        return false;
    for (int k = 0; k < D; k++) {
        if (k == a || k == b)
            continue;
        if (bw[A + k] != bw[B + k] || lat[A + k] != lat[B + k] ||
            bw[(size_t)k * D + a] != bw[(size_t)k * D + b] ||
            lat[(size_t)k * D + a] != lat[(size_t)k * D + b])
            return false;
    }
    return true;
}

int pf_map_symmetry_device_classes(const pf_cluster_t *c, int *cls)
{
    int D = pf_cluster_ndevices(c), n = 0;
    const double *bw = pf_cluster_bw_matrix(c), *lat = pf_cluster_lat_matrix(c);
    int *first = malloc((size_t)D * sizeof *first);
    if (!first)
        return -1;
    for (int d = 0; d < D; d++) {
        cls[d] = -1;
        for (int k = 0; k < n && cls[d] < 0; k++)
            if (swappable(bw, lat, D, first[k], d))
                cls[d] = k;
        if (cls[d] < 0) {
            first[n] = d;
            cls[d] = n++;
        }
    }
    free(first);
    return n;
}

/* Whether the used links of a regular hierarchy are pairwise distinct (bandwidth or latency):
 * level 0 when a host holds 2 or more devices, a level above when some unit of it holds two
 * units of the level below. */
static bool hier_distinct(const pf_cluster_hier_t *h, const pf_cluster_hier_reach_t *r, int L)
{
    bool used[PF_CLUSTER_HIER_MAX_LEVELS];
    for (int l = 0; l < L; l++)
        used[l] = l == 0 ? r[0].devices > 0
                         : pf_cluster_hier_span(h, l) > pf_cluster_hier_span(h, l - 1);
    for (int l = 0; l < L; l++)
        for (int k = 0; k < l; k++)
            if (used[l] && used[k] && r[l].bw_gbps == r[k].bw_gbps && r[l].lat_us == r[k].lat_us)
                return false;
    return true;
}

/* One device per host: host A's class is (u, A's unit at u), u = the lowest level whose unit
 * of A holds another host. Two such hosts in one unit at u meet at u, and the units below u
 * hold only themselves, so every device sees them alike (the swap is an automorphism); any
 * other pair meets at a level where one of them has a neighbour the other sees one level up.
 * Classes numbered by lowest device. */
static int single_device_classes(const pf_cluster_hier_t *h, int L, int *cls)
{
    int H = pf_cluster_hier_hosts(h), n = 0;
    int *id = malloc((size_t)L * H * sizeof *id);
    if (!id)
        return -1;
    for (size_t i = 0; i < (size_t)L * H; i++)
        id[i] = -1;
    for (int a = 0; a < H; a++) {
        pf_cluster_hier_reach_t r[PF_CLUSTER_HIER_MAX_LEVELS];
        pf_cluster_hier_reach(h, a, r);
        int u = 1;
        while (u < L - 1 && r[u].devices == 0)
            u++;
        size_t k = (size_t)u * H + (size_t)(a / pf_cluster_hier_span(h, u));
        if (id[k] < 0)
            id[k] = n++;
        cls[a] = id[k];
    }
    free(id);
    return n;
}

int pf_map_symmetry_hier_classes(const pf_cluster_t *c, int *cls)
{
    const pf_cluster_hier_t *h = pf_cluster_hierarchy(c);
    if (!h || !pf_cluster_hier_regular(h))
        return -2;
    pf_cluster_hier_reach_t r[PF_CLUSTER_HIER_MAX_LEVELS];
    int L = pf_cluster_hier_reach(h, 0, r), D = pf_cluster_ndevices(c);
    if (!hier_distinct(h, r, L))
        return -2;
    if (D == 1 || L == 1) { /* one host: every device alike */
        for (int d = 0; d < D; d++)
            cls[d] = 0;
        return 1;
    }
    if (r[0].devices > 0) { /* devices host by host (cluster.h) */
        for (int d = 0; d < D; d++)
            cls[d] = pf_cluster_device(c, d)->host;
        return pf_cluster_hier_hosts(h);
    }
    return single_device_classes(h, L, cls);
}

/* ---------------------------------------------------------------- host blocks */

/* Whether a_i <-> b_i (i < m), every other device fixed, is an automorphism of W off the
 * diagonal: W(a_i, a_j) = W(b_i, b_j) for i != j (inside the blocks), W(a_i, b_j) = W(b_i, a_j)
 * (between them), and rows and columns equal towards every device k outside (pair[k] == 0).
 * *work counts the pairs of entries compared. */
static bool swap_is_automorphism(const double *W, int D, const int *A, const int *B, int m,
                                const unsigned char *pair, long long *work)
{
    for (int i = 0; i < m; i++) {
        size_t ai = (size_t)A[i] * D, bi = (size_t)B[i] * D;
        for (int j = 0; j < m; j++)
            if ((i != j && W[ai + A[j]] != W[bi + B[j]]) || W[ai + B[j]] != W[bi + A[j]]) {
                *work += j + 1;
                return false;
            }
        for (int k = 0; k < D; k++)
            if (!pair[k] && (W[ai + k] != W[bi + k] ||
                             W[(size_t)k * D + A[i]] != W[(size_t)k * D + B[i]])) {
                *work += m + k + 1;
                return false;
            }
        *work += m + D;
    }
    return true;
}

/* Classes of the groups of one proposal (gid[d]: group of d, groups numbered in order of their
 * lowest device). Writes block / block_class as pf_map_symmetry_host_blocks documents; returns
 * the number of blocks, -1 when out of memory. */
/* The class of group g among the classes found so far (first[k]: class k's first group), or -1:
 * the first class of g's size whose first group trades places with g (an automorphism of both
 * matrices); -1 too when the comparison budget runs out (*capped set). pair is scratch (D,
 * zero). */
static int group_class(const pf_cluster_t *c, const int *off, const int *mem, const int *first,
                       int nclass, int g, unsigned char *pair, long long *work, bool *capped)
{
    int D = pf_cluster_ndevices(c), m = off[g + 1] - off[g];
    const double *bw = pf_cluster_bw_matrix(c), *lat = pf_cluster_lat_matrix(c);
    for (int k = 0; k < nclass; k++) {
        int f = first[k];
        if (off[f + 1] - off[f] != m)
            continue;
        if (*work > PF_MAP_BLOCK_BUDGET) {
            *capped = true;
            return -1;
        }
        for (int i = 0; i < m; i++)
            pair[mem[off[f] + i]] = pair[mem[off[g] + i]] = 1;
        bool same = swap_is_automorphism(bw, D, mem + off[f], mem + off[g], m, pair, work) &&
                    swap_is_automorphism(lat, D, mem + off[f], mem + off[g], m, pair, work);
        for (int i = 0; i < m; i++)
            pair[mem[off[f] + i]] = pair[mem[off[g] + i]] = 0;
        if (same)
            return k;
    }
    return -1;
}

/* Keeps the classes of two or more blocks, renumbered by first block: block[d] and block_class
 * as pf_map_symmetry_host_blocks documents them. members and renum are scratch. Returns the
 * number of blocks. */
static int keep_classes(int D, int ngrp, int nclass, const int *off, const int *mem,
                        const int *gclass, int *members, int *renum, int *block, int *block_class)
{
    int nkept = 0, nblk = 0;
    memset(members, 0, (size_t)ngrp * sizeof *members);
    for (int g = 0; g < ngrp; g++)
        if (gclass[g] >= 0)
            members[gclass[g]]++;
    for (int k = 0; k < nclass; k++)
        renum[k] = -1;
    for (int d = 0; d < D; d++)
        block[d] = -1;
    for (int g = 0; g < ngrp; g++) {
        int k = gclass[g];
        if (k < 0 || members[k] < 2)
            continue;
        if (renum[k] < 0)
            renum[k] = nkept++;
        block_class[nblk] = renum[k];
        for (int i = off[g]; i < off[g + 1]; i++)
            block[mem[i]] = nblk;
        nblk++;
    }
    return nblk;
}

static int blocks_of_groups(const pf_cluster_t *c, const int *gid, int ngrp, int *block,
                            int *block_class, long long *work, bool *capped)
{
    int D = pf_cluster_ndevices(c), nclass = 0, rc = -1;
    size_t G = (size_t)ngrp; /* >= 1: D >= 2 here */
    int *off = calloc(G + 1, sizeof *off), *mem = malloc((size_t)D * sizeof *mem);
    int *gclass = malloc(G * sizeof *gclass), *first = malloc(G * sizeof *first);
    int *members = calloc(G, sizeof *members), *renum = malloc(G * sizeof *renum);
    unsigned char *pair = calloc((size_t)D, 1);
    if (!off || !mem || !gclass || !first || !members || !renum || !pair)
        goto done;
    for (int d = 0; d < D; d++)
        off[gid[d] + 1]++;
    for (int g = 0; g < ngrp; g++)
        off[g + 1] += off[g];
    for (int d = 0; d < D; d++) /* members by index: a device's position = its rank inside */
        mem[off[gid[d]] + members[gid[d]]++] = d;
    for (int g = 0; g < ngrp; g++) {
        gclass[g] = -1;
        if (off[g + 1] - off[g] < 2 || *capped)
            continue;
        gclass[g] = group_class(c, off, mem, first, nclass, g, pair, work, capped);
        if (gclass[g] < 0 && !*capped)
            first[gclass[g] = nclass++] = g;
    }
    rc = keep_classes(D, ngrp, nclass, off, mem, gclass, members, renum, block, block_class);
done:
    free(off);
    free(mem);
    free(gclass);
    free(first);
    free(members);
    free(renum);
    free(pair);
    return rc;
}

typedef struct {
    int host, d;
} host_dev_t;

static int cmp_host_dev(const void *a, const void *b)
{
    const host_dev_t *p = a, *q = b;
    if (p->host != q->host)
        return p->host < q->host ? -1 : 1;
    return (p->d > q->d) - (p->d < q->d);
}

static int root_of(int *parent, int a)
{
    while (parent[a] != a)
        a = parent[a] = parent[parent[a]];
    return a;
}

/* Proposal 1, the host field: gid[d] = d's group, groups numbered in order of their lowest device
 * (parent[h]: the group of the h-th distinct host in sorted order, -1 until its lowest device is
 * met). Returns the number of groups. */
static int host_groups(const pf_cluster_t *c, int *gid, int *parent, host_dev_t *hd)
{
    int D = pf_cluster_ndevices(c), ngrp = 0;
    for (int d = 0; d < D; d++)
        hd[d] = (host_dev_t){pf_cluster_device(c, d)->host, d};
    qsort(hd, (size_t)D, sizeof *hd, cmp_host_dev);
    for (int i = 0, h = -1; i < D; i++) {
        if (i == 0 || hd[i].host != hd[i - 1].host)
            parent[++h] = -1;
        gid[hd[i].d] = h;
    }
    for (int d = 0; d < D; d++) {
        int h = gid[d];
        if (parent[h] < 0)
            parent[h] = ngrp++;
    }
    for (int d = 0; d < D; d++)
        gid[d] = parent[gid[d]];
    return ngrp;
}

/* Proposal 2: the components of the links faster (either direction) than the slowest link,
 * numbered by lowest device. Returns the number of groups. */
static int link_groups(const pf_cluster_t *c, int *gid, int *parent)
{
    int D = pf_cluster_ndevices(c), ngrp = 0;
    const double *bw = pf_cluster_bw_matrix(c);
    double slowest = INFINITY;
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++)
            if (a != b)
                slowest = fmin(slowest, bw[(size_t)a * D + b]);
    for (int d = 0; d < D; d++)
        parent[d] = d;
    for (int a = 0; a < D; a++)
        for (int b = a + 1; b < D; b++)
            if (fmax(bw[(size_t)a * D + b], bw[(size_t)b * D + a]) > slowest) {
                int ra = root_of(parent, a), rb = root_of(parent, b);
                if (ra != rb) /* the root stays the component's lowest device */
                    parent[ra > rb ? ra : rb] = ra < rb ? ra : rb;
            }
    for (int d = 0; d < D; d++) {
        int r = root_of(parent, d);
        gid[d] = r == d ? ngrp++ : gid[r];
    }
    return ngrp;
}

int pf_map_symmetry_host_blocks(const pf_cluster_t *c, int *block, int *block_class,
                                bool *capped)
{
    int D = pf_cluster_ndevices(c), n = -1;
    bool cap = false;
    long long work = 0;
    if (capped)
        *capped = false;
    if (D < 2) {
        for (int d = 0; d < D; d++)
            block[d] = -1;
        return 0;
    }
    int *gid = malloc((size_t)D * sizeof *gid), *parent = malloc((size_t)D * sizeof *parent);
    host_dev_t *hd = malloc((size_t)D * sizeof *hd);
    if (!gid || !parent || !hd)
        goto done;
    int ngrp = host_groups(c, gid, parent, hd);
    n = blocks_of_groups(c, gid, ngrp, block, block_class, &work, &cap);
    if (n != 0)
        goto done;
    ngrp = link_groups(c, gid, parent);
    n = blocks_of_groups(c, gid, ngrp, block, block_class, &work, &cap);
done:
    if (capped)
        *capped = cap;
    free(gid);
    free(parent);
    free(hd);
    return n;
}

/* ---------------------------------------------------------------- hierarchy units */

static void layer_free(pf_map_sym_layer_t *ly)
{
    free(ly->blk);
    free(ly->blk_class);
    free(ly->blk_kpos);
    free(ly->blk_end);
    memset(ly, 0, sizeof *ly);
}

/* The layer of level-l units (devices G per host, host by host): a full unit whose parent (its
 * unit of level `parent` > l) holds another full one is a block of the parent's class. Only the last
 * unit of a level can be partial (host slots fill units in order), so the full children of a
 * parent come first and a block's place in its class is its place among the parent's children.
 * Returns the number of blocks, -1 out of memory. */
static int unit_layer(pf_map_sym_layer_t *ly, const pf_cluster_hier_t *h, int l, int parent,
                      int G)
{
    int64_t H = pf_cluster_hier_hosts(h), sp = pf_cluster_hier_span(h, l);
    int64_t up = pf_cluster_hier_span(h, parent);
    int nu = (int)((H + sp - 1) / sp), np = (int)((H + up - 1) / up);
    int *full_kids = calloc((size_t)np, sizeof *full_kids), *pclass = malloc(np * sizeof *pclass);
    ly->blk = malloc((size_t)(H * G) * sizeof *ly->blk);
    ly->blk_class = malloc((size_t)nu * sizeof *ly->blk_class);
    ly->blk_kpos = malloc((size_t)nu * sizeof *ly->blk_kpos);
    ly->blk_end = malloc((size_t)nu * sizeof *ly->blk_end);
    if (!full_kids || !pclass || !ly->blk || !ly->blk_class || !ly->blk_kpos || !ly->blk_end) {
        free(full_kids);
        free(pclass);
        return -1;
    }
    for (int u = 0; u < nu; u++)
        if ((u + 1) * sp <= H)
            full_kids[u * sp / up]++;
    for (int p = 0; p < np; p++)
        pclass[p] = -1;
    for (int u = 0; u < nu; u++) {
        int p = (int)(u * sp / up), b = -1;
        int d0 = (int)(u * sp * G), d1 = (int)((u + 1) * sp < H ? (u + 1) * sp : H) * G;
        if ((u + 1) * sp <= H && full_kids[p] >= 2) {
            if (pclass[p] < 0)
                pclass[p] = ly->nbcls++;
            b = ly->nblk++;
            ly->blk_class[b] = pclass[p];
            ly->blk_kpos[b] = u - (int)(p * up / sp); /* p >= 1: up is a multiple of sp */
            ly->blk_end[b] = d1;
        }
        for (int d = d0; d < d1; d++)
            ly->blk[d] = b;
    }
    free(full_kids);
    free(pclass);
    return ly->nblk;
}

static void identity_canon(pf_map_symmetry_t *sy, int D)
{
    for (int d = 0; d < D; d++)
        sy->canon[d] = sy->canon_pos[d] = d;
}

int pf_map_symmetry_hier_units(pf_map_symmetry_t *sy, const pf_cluster_t *c)
{
    const pf_cluster_hier_t *h = pf_cluster_hierarchy(c);
    int D = pf_cluster_ndevices(c);
    if (!h || !pf_cluster_hier_regular(h) || D < 2 || D % pf_cluster_hier_hosts(h))
        return 0;
    int G = D / pf_cluster_hier_hosts(h), L = pf_cluster_hier_nlevels(h);
    for (int d = 0; d < D; d++)
        if (pf_cluster_device(c, d)->host != d / G)
            return 0;
    /* A level whose link equals the one above it is merged into it: units under one parent
     * meet at any level between, all of them one link, so the swap is still an automorphism
     * (a full-bisection leaf and spine: every host under the spine alike). */
    pf_cluster_hier_reach_t r[PF_CLUSTER_HIER_MAX_LEVELS];
    pf_cluster_hier_reach(h, 0, r);
    sy->nlay = 0;
    for (int l = L - 2, parent = L - 1; l >= 0; l--) { /* coarsest first: the probe skips */
        if (l > 0 && r[l].bw_gbps == r[parent].bw_gbps && r[l].lat_us == r[parent].lat_us)
            continue;
        pf_map_sym_layer_t *ly = &sy->lay[sy->nlay];
        int n = unit_layer(ly, h, l, parent, G);
        parent = l;
        if (n < 0) {
            layer_free(ly);
            return -1;
        }
        if (n == 0)
            layer_free(ly);
        else
            sy->nlay++;
    }
    return sy->nlay;
}

/* ---------------------------------------------------------------- canonical order */

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

/* Host blocks of the matrices (one layer) and the canonical order (see the top of this file):
 * the blocks of a class one after another in block order, each block's devices by position, the
 * class placed where its first device is; other devices by index. Where blocks are index
 * intervals in class order (hosts numbered machine by machine, as DGX-1 x 4), this is the index
 * order. */
static int host_blocks(pf_map_symmetry_t *sy, const pf_cluster_t *c)
{
    int D = pf_cluster_ndevices(c);
    pf_map_sym_layer_t *ly = &sy->lay[0];
    ly->blk = malloc((size_t)D * sizeof *ly->blk);
    ly->blk_class = malloc((size_t)D * sizeof *ly->blk_class);
    ly->blk_kpos = malloc((size_t)D * sizeof *ly->blk_kpos);
    int *count = calloc((size_t)D, sizeof *count); /* per class, then per block */
    int *anchor = malloc((size_t)D * sizeof *anchor); /* per class */
    canon_key_t *key = malloc((size_t)D * sizeof *key);
    int rc = PF_ERR;
    if (!ly->blk || !ly->blk_class || !ly->blk_kpos || !count || !anchor || !key ||
        (ly->nblk = pf_map_symmetry_host_blocks(c, ly->blk, ly->blk_class, NULL)) < 0)
        goto done;
    for (int b = 0; b < ly->nblk; b++) {
        int k = ly->blk_class[b];
        ly->blk_kpos[b] = count[k]++;
        ly->nbcls = k + 1 > ly->nbcls ? k + 1 : ly->nbcls;
    }
    for (int k = 0; k < ly->nbcls; k++)
        anchor[k] = -1;
    memset(count, 0, (size_t)D * sizeof *count);
    for (int d = 0; d < D; d++) { /* blocks are numbered by lowest device, positions by index */
        int b = ly->blk[d];
        if (b < 0) {
            key[d] = (canon_key_t){d, 0, 0, d};
            continue;
        }
        int k = ly->blk_class[b];
        if (anchor[k] < 0)
            anchor[k] = d;
        key[d] = (canon_key_t){anchor[k], ly->blk_kpos[b], count[b]++, d};
    }
    qsort(key, (size_t)D, sizeof *key, cmp_canon);
    for (int i = 0; i < D; i++) {
        sy->canon[i] = key[i].d;
        sy->canon_pos[key[i].d] = i;
    }
    sy->nlay = ly->nblk > 0;
    if (!sy->nlay)
        layer_free(ly);
    rc = PF_OK;
done:
    free(count);
    free(anchor);
    free(key);
    return rc;
}

void pf_map_symmetry_free(pf_map_symmetry_t *sy)
{
    if (!sy)
        return;
    free(sy->cls);
    for (int l = 0; l < PF_MAP_SYM_MAX_LAYERS; l++)
        layer_free(&sy->lay[l]);
    free(sy->canon);
    free(sy->canon_pos);
    memset(sy, 0, sizeof *sy);
}

/* The devices of one host as a class on a regular hierarchy numbered host by host (swapping two
 * of them is an automorphism: their links are alike); -2 on any other cluster. */
static int host_classes(const pf_cluster_t *c, int *cls)
{
    const pf_cluster_hier_t *h = pf_cluster_hierarchy(c);
    int D = pf_cluster_ndevices(c);
    if (!h || !pf_cluster_hier_regular(h) || D % pf_cluster_hier_hosts(h))
        return -2;
    int G = D / pf_cluster_hier_hosts(h);
    for (int d = 0; d < D; d++) {
        if (pf_cluster_device(c, d)->host != d / G)
            return -2;
        cls[d] = d / G;
    }
    return pf_cluster_hier_hosts(h);
}

/* Blocks and the canonical order under symmetry: a regular hierarchy's units, else the matrices'
 * host blocks (not above PF_MAP_TABLES_MAX_DEVICES on a hierarchy: no matrices there), else none
 * and the index order. */
static int blocks(pf_map_symmetry_t *sy, const pf_cluster_t *c, int symmetry, bool big)
{
    int D = pf_cluster_ndevices(c), n = 0;
    if (symmetry == PF_MAP_SYM_ALL && (n = pf_map_symmetry_hier_units(sy, c)) < 0)
        return PF_ERR;
    if (symmetry == PF_MAP_SYM_ALL && n == 0 && !big)
        return host_blocks(sy, c);
    identity_canon(sy, D);
    return PF_OK;
}

int pf_map_symmetry_init(pf_map_symmetry_t *sy, const pf_cluster_t *c, int symmetry)
{
    int D = pf_cluster_ndevices(c);
    memset(sy, 0, sizeof *sy);
    /* The symmetry is found on the D x D matrix, except on a hierarchy: device classes from its
     * levels where they say them, blocks from its units where it is regular; the matrix where
     * they do not, up to PF_MAP_TABLES_MAX_DEVICES; above it no such pruning (the same
     * optimum). */
    bool big = pf_cluster_hierarchy(c) && D > PF_MAP_TABLES_MAX_DEVICES;
    if (symmetry != PF_MAP_SYM_OFF && !big &&
        (!pf_cluster_bw_matrix(c) || !pf_cluster_lat_matrix(c)))
        symmetry = PF_MAP_SYM_OFF;
    sy->cls = malloc((size_t)D * sizeof *sy->cls);
    sy->canon = malloc((size_t)D * sizeof *sy->canon);
    sy->canon_pos = malloc((size_t)D * sizeof *sy->canon_pos);
    if (!sy->cls || !sy->canon || !sy->canon_pos)
        goto fail;
    /* a hierarchy's classes equal the matrix's where it says them (tests), in O(D), not
     * O(D^2) per class; on a regular one that does not (two levels alike), the devices of one
     * host, and its units do the rest */
    if (symmetry && pf_cluster_hierarchy(c))
        sy->ncls = pf_map_symmetry_hier_classes(c, sy->cls);
    if (symmetry && sy->ncls == -2 && symmetry == PF_MAP_SYM_ALL)
        sy->ncls = host_classes(c, sy->cls);
    if (symmetry && !big && (!pf_cluster_hierarchy(c) || sy->ncls == -2))
        sy->ncls = pf_map_symmetry_device_classes(c, sy->cls);
    if (symmetry && sy->ncls == -1)
        goto fail;
    if (!symmetry || sy->ncls < 0) {
        for (int d = 0; d < D; d++)
            sy->cls[d] = d;
        sy->ncls = D;
    }
    if (blocks(sy, c, symmetry, big) != PF_OK)
        goto fail;
    return PF_OK;
fail:
    pf_map_symmetry_free(sy);
    return PF_ERR;
}
