/* map_context: the precomputation shared by every probe of one mapping instantiation (see
 * map_context.h), the mapping order and the checking scheme of Algorithm 2.
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
 */
#include "planner/map/map_context.h"
#include "planner/core/util.h"
#include "planner/ir/cluster_hier.h"
#include "planner/ir/devkinds.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void pf_map_context_destroy(pf_map_context_t **cxp)
{
    if (!cxp || !*cxp)
        return;
    pf_map_context_t *cx = *cxp;
    free(cx->cu);
    free(cx->kind);
    free(cx->cu_kind);
    free(cx->ar_bytes);
    free(cx->adj_off);
    free(cx->adj);
    free(cx->adj_bytes);
    free(cx->lat_ms);
    free(cx->bw_bpms);
    free(cx->min_lat_out);
    free(cx->max_bw_out);
    free(cx->max_bw_in);
    pf_map_symmetry_free(&cx->sym);
    pf_map_bounds_free(&cx->bounds);
    free(cx->order);
    free(cx->pos);
    free(cx->chk_off);
    free(cx->chk);
    free(cx->low_ref);
    free(cx);
    *cxp = NULL;
}

/* Stage order: ar by decreasing static bound; m and full in maximum-cardinality order. */
static int stage_order(const pf_map_context_t *cx, int *sorder)
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
            key[s] = fmin(key[s], cx->bounds.static_lb[(size_t)s * D + d]);
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

/* order and pos: stage-major (stage by stage, replicas in ring order) or replica-major. */
static void order_replicas(pf_map_context_t *cx, const int *sorder)
{
    int S = cx->S, R = cx->R, N = cx->N, k = 0;
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
}

/* Checking scheme: x's time is complete at the depth where the last of x, its neighbours in its
 * replica (m) and the other replicas of its stage (ar) is placed. chk_off / chk list the stage
 * replicas by that depth; known (N) is scratch. */
static int checking_scheme(pf_map_context_t *cx, int *known)
{
    int R = cx->R, N = cx->N;
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
    for (int k = 0; k < N; k++)
        cx->chk_off[k + 1] += cx->chk_off[k];
    int *slot = malloc((size_t)N * sizeof *slot); /* next free slot per depth */
    if (!slot)
        return PF_ERR;
    for (int k = 0; k < N; k++)
        slot[k] = cx->chk_off[k];
    for (int x = 0; x < N; x++)
        cx->chk[slot[known[x]]++] = x;
    free(slot);
    return PF_OK;
}

/* Replica symmetry (map_symmetry.c, top): low_ref by depth. */
static void replica_symmetry(pf_map_context_t *cx, const int *sorder)
{
    int R = cx->R;
    for (int k = 0; k < cx->N; k++) {
        int x = cx->order[k], s = x / R, r = x % R;
        cx->low_ref[k] = -1;
        if (!cx->symmetry || r == 0)
            continue;
        if (cx->inst == PF_MAP_INST_M && s == sorder[0])
            cx->low_ref[k] = s * R + r - 1;
        else if (cx->inst == PF_MAP_INST_AR)
            cx->low_ref[k] = s * R;
        else if (cx->inst == PF_MAP_INST_FULL && cx->stage_major && s == sorder[0])
            cx->low_ref[k] = s * R;
    }
}

static int build_order(pf_map_context_t *cx)
{
    int rc = PF_ERR;
    int *sorder = malloc((size_t)cx->S * sizeof *sorder);
    int *known = malloc((size_t)cx->N * sizeof *known);
    if (!sorder || !known || stage_order(cx, sorder) != PF_OK)
        goto done;
    order_replicas(cx, sorder);
    if (checking_scheme(cx, known) != PF_OK)
        goto done;
    replica_symmetry(cx, sorder);
    rc = PF_OK;
done:
    free(sorder);
    free(known);
    return rc;
}

/* The arrays whose sizes S, R, D fix; false when out of memory. */
static bool alloc_tables(pf_map_context_t *cx, bool tables)
{
    int S = cx->S, N = cx->N, D = cx->D;
    size_t DD = (size_t)D * D;
    cx->cu = malloc((size_t)S * sizeof *cx->cu);
    cx->ar_bytes = malloc((size_t)S * sizeof *cx->ar_bytes);
    cx->adj_off = malloc((size_t)(S + 1) * sizeof *cx->adj_off);
    cx->lat_ms = tables ? malloc(DD * sizeof *cx->lat_ms) : NULL;
    cx->bw_bpms = tables ? malloc(DD * sizeof *cx->bw_bpms) : NULL;
    cx->min_lat_out = malloc((size_t)D * sizeof(double));
    cx->max_bw_out = malloc((size_t)D * sizeof(double));
    cx->max_bw_in = malloc((size_t)D * sizeof(double));
    cx->order = malloc((size_t)N * sizeof(int));
    cx->pos = malloc((size_t)N * sizeof(int));
    cx->chk_off = malloc((size_t)(N + 1) * sizeof(int));
    cx->chk = malloc((size_t)N * sizeof(int));
    cx->low_ref = malloc((size_t)N * sizeof(int));
    return cx->cu && cx->ar_bytes && cx->adj_off && (!tables || (cx->lat_ms && cx->bw_bpms)) &&
           cx->min_lat_out &&
           cx->max_bw_out && cx->max_bw_in && cx->order && cx->pos && cx->chk_off && cx->chk &&
           cx->low_ref;
}

/* A mixed cluster: c_u per (stage, kind) and each device's kind; cu = the least over kinds,
 * so the static bounds (map_bounds.h) stay lower bounds. */
static int kind_tables(pf_map_context_t *cx, const pf_stage_graph_t *sg)
{
    int S = cx->S, K = pf_stage_graph_nkinds(sg);
    if (K <= 0)
        return PF_OK;
    cx->kind = malloc((size_t)cx->D * sizeof *cx->kind);
    cx->cu_kind = malloc((size_t)S * K * sizeof *cx->cu_kind);
    if (!cx->kind || !cx->cu_kind)
        return PF_ERR;
    cx->nkinds = K;
    for (int s = 0; s < S; s++)
        for (int k = 0; k < K; k++) {
            cx->cu_kind[(size_t)s * K + k] = pf_stage_graph_cu_kind_ms(sg, s, k);
            cx->cu[s] = k ? fmin(cx->cu[s], cx->cu_kind[(size_t)s * K + k])
                          : cx->cu_kind[(size_t)s * K];
        }
    return PF_OK;
}

/* cu, ar_bytes and the stage adjacency with its message bytes, from the stage graph. */
static int stage_tables(pf_map_context_t *cx, const pf_stage_graph_t *sg)
{
    int S = cx->S, nadj = 0;
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
    if (kind_tables(cx, sg) != PF_OK)
        return PF_ERR;
    cx->adj = malloc((size_t)(nadj ? nadj : 1) * sizeof *cx->adj);
    cx->adj_bytes = malloc((size_t)(nadj ? nadj : 1) * sizeof *cx->adj_bytes);
    if (!cx->adj || !cx->adj_bytes)
        return PF_ERR;
    for (int s = 0; s < S; s++) {
        int k;
        const int *nb = pf_stage_graph_neighbors(sg, s, &k);
        for (int i = 0; i < k; i++) {
            cx->adj[cx->adj_off[s] + i] = nb[i];
            cx->adj_bytes[cx->adj_off[s] + i] = pf_stage_graph_msg_bytes(sg, s, nb[i]);
        }
    }
    return PF_OK;
}

/* The postal-model tables in ms and each device's best links. The same operations as
 * pf_cluster_xfer_ms (lat_us * 1e-3 + bytes / (gbps * 1e6)), so that times computed here equal
 * pf_mapping_objective_ms's bit for bit. */
static void link_tables(pf_map_context_t *cx, const pf_cluster_t *c)
{
    int D = cx->D;
    for (int a = 0; a < D && cx->lat_ms; a++)
        for (int b = 0; b < D; b++) {
            size_t k = (size_t)a * D + b;
            cx->lat_ms[k] = pf_cluster_lat_us(c, a, b) * 1e-3;
            cx->bw_bpms[k] = pf_cluster_bw_gbps(c, a, b) * 1e6;
        }
    cx->links = (pf_map_links_t){c, D, cx->lat_ms, cx->bw_bpms};
}

/* Each device's best links: from its host's levels on a regular hierarchy without tables (the
 * same values: every link of d is one of them), else by scanning its row and column. */
static void best_links(pf_map_context_t *cx)
{
    int D = cx->D;
    const pf_cluster_hier_t *h = pf_cluster_hierarchy(cx->links.c);
    bool regular = !cx->lat_ms && h && pf_cluster_hier_regular(h);
    for (int a = 0; a < D; a++) {
        cx->min_lat_out[a] = INFINITY;
        cx->max_bw_out[a] = cx->max_bw_in[a] = 0;
        if (!regular)
            continue;
        pf_cluster_hier_reach_t r[PF_CLUSTER_HIER_MAX_LEVELS];
        int L = pf_cluster_hier_reach(h, pf_cluster_device(cx->links.c, a)->host, r);
        for (int l = 0; l < L; l++)
            if (r[l].devices > 0) {
                cx->min_lat_out[a] = fmin(cx->min_lat_out[a], r[l].lat_us * 1e-3);
                cx->max_bw_out[a] = fmax(cx->max_bw_out[a], r[l].bw_gbps * 1e6);
                cx->max_bw_in[a] = cx->max_bw_out[a]; /* a level's links go both ways */
            }
    }
    for (int a = 0; a < D && !regular; a++)
        for (int b = 0; b < D; b++) {
            if (a == b)
                continue;
            double bw = pf_map_links_bw_bpms(&cx->links, a, b);
            cx->min_lat_out[a] = fmin(cx->min_lat_out[a], pf_map_links_lat_ms(&cx->links, a, b));
            cx->max_bw_out[a] = fmax(cx->max_bw_out[a], bw);
            cx->max_bw_in[b] = fmax(cx->max_bw_in[b], bw);
        }
    if (D == 1) {
        cx->min_lat_out[0] = 0;
        cx->max_bw_out[0] = cx->max_bw_in[0] = INFINITY;
    }
}

/* The bounds of map_bounds.h over the context's tables (the context outlives them). */
static int bounds(pf_map_context_t *cx)
{
    pf_map_bounds_input_t in = {
        .S = cx->S, .R = cx->R, .D = cx->D, .use_m = cx->use_m, .use_ar = cx->use_ar,
        .cu = cx->cu, .ar_bytes = cx->ar_bytes, .adj_off = cx->adj_off,
        .adj_bytes = cx->adj_bytes, .max_deg = cx->max_deg, .links = cx->links,
        .sym = &cx->sym,
    };
    return pf_map_bounds_init(&cx->bounds, &in);
}

pf_map_context_t *pf_map_context_new(const pf_stage_graph_t *sg, const pf_cluster_t *c,
                                     pf_map_inst_t inst, int symmetry, char *err, size_t errlen)
{
    int S = pf_stage_graph_stages(sg), R = pf_stage_graph_replicas(sg), D = pf_cluster_ndevices(c);
    if ((long long)S * R > D) {
        pf_fail(err, errlen, PF_EINPUT,
                "stages x replicas = %d x %d stage replicas, but cluster %s has %d devices", S, R,
                pf_cluster_name(c), D);
        return NULL;
    }
    pf_map_context_t *cx = calloc(1, sizeof *cx);
    if (!cx) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    cx->S = S;
    cx->R = R;
    cx->N = S * R;
    cx->D = D;
    cx->inst = inst;
    cx->use_m = inst != PF_MAP_INST_AR;
    cx->use_ar = inst != PF_MAP_INST_M && R > 1;
    cx->symmetry = symmetry;
    /* ar: stage-major; m: replica-major; full: stage-major when all-reduce dominates (the auto
     * selection's ratio). */
    cx->stage_major = inst == PF_MAP_INST_AR ||
                      (inst == PF_MAP_INST_FULL && pf_map_inst_auto(sg) == PF_MAP_INST_AR);
    /* a hierarchy's links are looked up above PF_MAP_TABLES_MAX_DEVICES: O(D) memory */
    bool tables = !pf_cluster_hierarchy(c) || D <= PF_MAP_TABLES_MAX_DEVICES;
    if (!alloc_tables(cx, tables) || stage_tables(cx, sg) != PF_OK)
        goto fail;
    link_tables(cx, c);
    best_links(cx);
    if (cx->kind && pf_devkinds_number(c, cx->kind) != cx->nkinds) {
        pf_fail(err, errlen, PF_EINPUT, "the stage graph prices %d device kinds, cluster %s has "
                "%d", cx->nkinds, pf_cluster_name(c), pf_devkinds_number(c, cx->kind));
        pf_map_context_destroy(&cx);
        return NULL;
    }
    /* devices of different kinds are not interchangeable: no device symmetry there */
    if (pf_map_symmetry_init(&cx->sym, c, cx->kind ? PF_MAP_SYM_OFF : symmetry) != PF_OK ||
        bounds(cx) != PF_OK ||
        build_order(cx) != PF_OK)
        goto fail;
    return cx;
fail:
    pf_map_context_destroy(&cx);
    pf_fail(err, errlen, PF_ERR, "out of memory");
    return NULL;
}

double pf_map_context_lower_bound_ms(const pf_map_context_t *cx)
{
    return cx->bounds.lower_ms;
}

const int *pf_map_context_order(const pf_map_context_t *cx, bool *stage_major)
{
    if (stage_major)
        *stage_major = cx->stage_major;
    return cx->order;
}

/* Each stage's ring once: O(N), not O(N R); the sum is stage_time's, term for term. */
double pf_map_context_objective_ms(const pf_map_context_t *cx, const int *dev)
{
    double t = 0, ar = 0;
    for (int x = 0; x < cx->N; x++) {
        int s = x / cx->R;
        if (x % cx->R == 0)
            ar = cx->use_ar ? pf_map_context_ar_ms(cx, dev, s) : 0.0;
        double m = cx->use_m ? pf_map_context_m_ms(cx, dev, x) : 0.0;
        t = fmax(t, pf_map_context_cu(cx, s, dev[x]) + m + ar);
    }
    return t;
}
