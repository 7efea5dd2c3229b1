/* refine: iterative refinement (Parmesan IV-C); the rules are in refine.h.
 *
 * Per stage we keep c_u, its parameter state and stored activations (cost.h's memory), and the
 * bytes of edges crossing its boundary; per op the number of its edges that cross
 * a stage boundary (> 0 = boundary op). A move of v from s to t changes these for s and t only
 * (an edge from v to a third stage crosses before and after), so one candidate costs
 * O(deg(v) + S) and a step O(n + m + candidates x (deg + S)). */
#include "planner/partition/refine.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Undirected adjacency with parallel edges merged: CSR (start, nbr). */
static int undirected(const pf_graph_t *g, int **start_out, int **nbr_out, int *mark)
{
    int n = pf_graph_nops(g), m = pf_graph_nedges(g);
    int *start = calloc((size_t)n + 1, sizeof *start);
    int *nbr = malloc((size_t)(2 * m + 1) * sizeof *nbr);
    if (!start || !nbr) {
        free(start);
        free(nbr);
        return -1;
    }
    int k = 0;
    for (int v = 0; v < n; v++)
        mark[v] = -1;
    for (int v = 0; v < n; v++) {
        start[v] = k;
        mark[v] = v;
        for (int dir = 0; dir < 2; dir++) {
            int cnt;
            const int *e = dir ? pf_graph_in(g, v, &cnt) : pf_graph_out(g, v, &cnt);
            for (int i = 0; i < cnt; i++) {
                const pf_edge_t *ed = pf_graph_edge(g, e[i]);
                int x = dir ? ed->src : ed->dst;
                if (mark[x] != v) {
                    mark[x] = v;
                    nbr[k++] = x;
                }
            }
        }
    }
    start[n] = k;
    *start_out = start;
    *nbr_out = nbr;
    return 0;
}

static int distinct_ends(const pf_graph_t *g, int v, int in, int *mark, int stamp)
{
    int cnt, d = 0;
    const int *e = in ? pf_graph_in(g, v, &cnt) : pf_graph_out(g, v, &cnt);
    for (int i = 0; i < cnt; i++) {
        const pf_edge_t *ed = pf_graph_edge(g, e[i]);
        int x = in ? ed->src : ed->dst;
        if (mark[x] != stamp) {
            mark[x] = stamp;
            d++;
        }
    }
    return d;
}

/* Hopcroft-Tarjan's articulation points over the undirected CSR (start, nbr), iteratively
 * (depth can reach n). */
typedef struct {
    const int *start, *nbr;
    int *disc, *low, *parent, *it, *stack;
    int timer;
    unsigned char *cut; /* cut[v] = 1: v is an articulation point */
} artic_t;

/* The DFS tree from root r: marks the articulation points in it. */
static void articulation_from(artic_t *a, int r)
{
    int sp = 0, root_children = 0;
    a->disc[r] = a->low[r] = a->timer++;
    a->parent[r] = -1;
    a->it[r] = a->start[r];
    a->stack[sp++] = r;
    while (sp > 0) {
        int v = a->stack[sp - 1];
        if (a->it[v] < a->start[v + 1]) {
            int w = a->nbr[a->it[v]++];
            if (w == a->parent[v])
                continue; /* parallel edges were merged: the tree edge back */
            if (a->disc[w] < 0) {
                a->parent[w] = v;
                a->disc[w] = a->low[w] = a->timer++;
                a->it[w] = a->start[w];
                a->stack[sp++] = w;
                if (v == r)
                    root_children++;
            } else if (a->disc[w] < a->low[v]) {
                a->low[v] = a->disc[w];
            }
        } else {
            sp--;
            int p = a->parent[v];
            if (p >= 0) {
                if (a->low[v] < a->low[p])
                    a->low[p] = a->low[v];
                if (p != r && a->low[v] >= a->disc[p])
                    a->cut[p] = 1;
            }
        }
    }
    if (root_children >= 2)
        a->cut[r] = 1;
}

/* Of the articulation points, keeps those with more than one distinct predecessor or successor;
 * returns whether any is left. */
static bool keep_reconverging(const pf_graph_t *g, int n, unsigned char *reconv, int *mark)
{
    bool any = false;
    for (int v = 0; v < n; v++)
        mark[v] = -1;
    for (int v = 0; v < n; v++) {
        if (!reconv[v])
            continue;
        int din = distinct_ends(g, v, 1, mark, 2 * v);
        int dout = distinct_ends(g, v, 0, mark, 2 * v + 1);
        reconv[v] = din > 1 || dout > 1;
        any |= reconv[v];
    }
    return any;
}

/* Undirected hop distance to the nearest reconverging op, by multi-source BFS (n where none is
 * reachable; 0 everywhere when there is none). */
static void distances(int n, const int *start, const int *nbr, const unsigned char *reconv,
                      bool any, int *dist, int *queue)
{
    int head = 0, tail = 0;
    for (int v = 0; v < n; v++) {
        dist[v] = any ? -1 : 0;
        if (reconv[v]) {
            dist[v] = 0;
            queue[tail++] = v;
        }
    }
    while (head < tail) {
        int v = queue[head++];
        for (int i = start[v]; i < start[v + 1]; i++)
            if (dist[nbr[i]] < 0) {
                dist[nbr[i]] = dist[v] + 1;
                queue[tail++] = nbr[i];
            }
    }
    for (int v = 0; v < n; v++)
        if (dist[v] < 0)
            dist[v] = n;
}

int pf_refine_reconverging(const pf_graph_t *g, unsigned char *reconv, int *dist)
{
    int n = pf_graph_nops(g), rc = PF_ERR;
    int *start = NULL, *nbr = NULL;
    int *mark = malloc((size_t)n * sizeof *mark), *disc = malloc((size_t)n * sizeof *disc);
    int *low = malloc((size_t)n * sizeof *low), *parent = malloc((size_t)n * sizeof *parent);
    int *it = malloc((size_t)n * sizeof *it), *stack = malloc((size_t)n * sizeof *stack);
    if (!mark || !disc || !low || !parent || !it || !stack || undirected(g, &start, &nbr, mark))
        goto done;
    memset(reconv, 0, (size_t)n);
    artic_t a = {.start = start, .nbr = nbr, .disc = disc, .low = low, .parent = parent,
                 .it = it, .stack = stack, .cut = reconv};
    for (int v = 0; v < n; v++)
        disc[v] = -1;
    for (int r = 0; r < n; r++)
        if (disc[r] < 0)
            articulation_from(&a, r);
    bool any = keep_reconverging(g, n, reconv, mark);
    distances(n, start, nbr, reconv, any, dist, stack); /* stack reused as the queue */
    rc = PF_OK;
done:
    free(start);
    free(nbr);
    free(mark);
    free(disc);
    free(low);
    free(parent);
    free(it);
    free(stack);
    return rc;
}

typedef struct {
    const pf_graph_t *g;
    const pf_cost_model_t *cm;
    int n, S;
    int *stage, *cnt, *cross, *dist;
    double *cu, *fix, *act, *cutb; /* fix: parameter state; act: stored activations */
    long long D;
    double comm;
    /* scratch for one candidate */
    double *dcut;
    int *dcross, *touched, *tmark, tstamp;
} ref_t;

typedef struct {
    long long g1;
    double g2, g3, objective;
} gain_t;

/* Stage a's eq. 3 time (its compute scaled by the cost model's stage multiplier, if any). */
static double stage_time(const ref_t *r, int a, double cu, double cut)
{
    if (r->cm->stage_mult)
        cu *= r->cm->stage_mult[a];
    return cu + pf_bytes_ms(cut, r->cm->flat_gbps); /* eq. 3 */
}

static double objective(const ref_t *r)
{
    double worst = 0;
    for (int a = 0; a < r->S; a++)
        worst = fmax(worst, stage_time(r, a, r->cu[a], r->cutb[a]));
    return worst;
}

static double max_compute(const ref_t *r)
{
    double worst = 0;
    for (int a = 0; a < r->S; a++)
        worst = fmax(worst, r->cu[a]);
    return worst;
}

/* The deltas of moving v to t into dcut, dcross (touched lists the neighbours); false when the
 * move breaks the pipeline order or empties a stage. */
static bool deltas(ref_t *r, int v, int t, double *dcomm, long long *dD, int *ntouched)
{
    int s = r->stage[v], nt = 0;
    *ntouched = 0;
    if (r->cnt[s] <= 1)
        return false;
    r->tstamp++;
    for (int a = 0; a < r->S; a++)
        r->dcut[a] = 0;
    *dcomm = 0;
    int cross_after = 0;
    for (int dir = 0; dir < 2; dir++) {
        int cnt;
        const int *e = dir ? pf_graph_in(r->g, v, &cnt) : pf_graph_out(r->g, v, &cnt);
        for (int i = 0; i < cnt; i++) {
            const pf_edge_t *ed = pf_graph_edge(r->g, e[i]);
            int x = dir ? ed->src : ed->dst, q = r->stage[x];
            if ((dir == 0 && q < t) || (dir == 1 && q > t)) {
                *ntouched = nt; /* a successor before v, or a predecessor after it */
                return false;
            }
            int before = q != s, after = q != t;
            double b = ed->bytes;
            *dcomm += b * (after - before);
            if (before) {
                r->dcut[s] -= b;
                r->dcut[q] -= b;
            }
            if (after) {
                r->dcut[t] += b;
                r->dcut[q] += b;
            }
            cross_after += after;
            if (before != after) {
                if (r->tmark[x] != r->tstamp) {
                    r->tmark[x] = r->tstamp;
                    r->touched[nt++] = x;
                }
                r->dcross[x] += after - before;
            }
        }
    }
    long long d = ((cross_after > 0) - (r->cross[v] > 0)) * (long long)r->dist[v];
    for (int i = 0; i < nt; i++) {
        int x = r->touched[i];
        d += ((r->cross[x] + r->dcross[x] > 0) - (r->cross[x] > 0)) * (long long)r->dist[x];
    }
    *dD = d;
    *ntouched = nt;
    return true;
}

static void clear_touched(ref_t *r, int nt)
{
    for (int i = 0; i < nt; i++)
        r->dcross[r->touched[i]] = 0;
}

/* Evaluate moving v to t; false when invalid (order, memory, emptiness, objective). */
static bool evaluate(ref_t *r, int v, int t, double obj, double maxcu, gain_t *gain)
{
    double dcomm;
    long long dD;
    int nt = 0, s = r->stage[v];
    bool ok = deltas(r, v, t, &dcomm, &dD, &nt);
    clear_touched(r, nt);
    if (!ok)
        return false;
    const pf_op_t *op = pf_graph_op(r->g, v);
    double c = pf_graph_cu_ms(r->g, v);
    double p = op->param_bytes, a = op->mem_fwd_bytes, limit = r->cm->mem_limit_bytes;
    if (pf_cost_mem_bytes(r->cm, s, r->fix[s] - p, r->act[s] - a) > limit ||
        pf_cost_mem_bytes(r->cm, t, r->fix[t] + p, r->act[t] + a) > limit)
        return false;
    double newobj = 0, newmax = 0;
    for (int a = 0; a < r->S; a++) {
        double cu = r->cu[a] + (a == t ? c : 0) - (a == s ? c : 0);
        newobj = fmax(newobj, stage_time(r, a, cu, r->cutb[a] + r->dcut[a]));
        newmax = fmax(newmax, cu);
    }
    if (newobj > obj + 1e-12 * fmax(1.0, obj))
        return false;
    gain->g1 = -dD;
    gain->g2 = -dcomm;
    gain->g3 = maxcu - newmax;
    gain->objective = newobj;
    return true;
}

/* Lexicographic comparison with tolerances for the two floating gains: > 0, 0 or < 0. */
static int gain_cmp(const gain_t *a, const gain_t *b, double eps2, double eps3)
{
    if (a->g1 != b->g1)
        return a->g1 > b->g1 ? 1 : -1;
    if (fabs(a->g2 - b->g2) > eps2)
        return a->g2 > b->g2 ? 1 : -1;
    if (fabs(a->g3 - b->g3) > eps3)
        return a->g3 > b->g3 ? 1 : -1;
    return 0;
}

static void apply(ref_t *r, int v, int t)
{
    double dcomm;
    long long dD;
    int nt = 0, s = r->stage[v];
    deltas(r, v, t, &dcomm, &dD, &nt);
    const pf_op_t *op = pf_graph_op(r->g, v);
    double c = pf_graph_cu_ms(r->g, v);
    for (int a = 0; a < r->S; a++)
        r->cutb[a] += r->dcut[a];
    r->cu[s] -= c;
    r->cu[t] += c;
    r->fix[s] -= op->param_bytes;
    r->fix[t] += op->param_bytes;
    r->act[s] -= op->mem_fwd_bytes;
    r->act[t] += op->mem_fwd_bytes;
    r->cnt[s]--;
    r->cnt[t]++;
    r->comm += dcomm;
    r->D += dD;
    for (int i = 0; i < nt; i++) {
        int x = r->touched[i];
        r->cross[x] += r->dcross[x];
        r->dcross[x] = 0;
    }
    r->stage[v] = t;
    int cross = 0;
    for (int dir = 0; dir < 2; dir++) {
        int cnt;
        const int *e = dir ? pf_graph_in(r->g, v, &cnt) : pf_graph_out(r->g, v, &cnt);
        for (int i = 0; i < cnt; i++) {
            const pf_edge_t *ed = pf_graph_edge(r->g, e[i]);
            cross += r->stage[dir ? ed->src : ed->dst] != t;
        }
    }
    r->cross[v] = cross;
}

static void ref_free(ref_t *r)
{
    free(r->cnt);
    free(r->cross);
    free(r->dist);
    free(r->cu);
    free(r->fix);
    free(r->act);
    free(r->cutb);
    free(r->dcut);
    free(r->dcross);
    free(r->touched);
    free(r->tmark);
}

/* false when out of memory (ref_free releases what was allocated). */
static bool ref_alloc(ref_t *r, int n, int m, int S)
{
    r->cnt = calloc((size_t)S + 1, sizeof *r->cnt);
    r->cross = calloc((size_t)n, sizeof *r->cross);
    r->dist = malloc((size_t)n * sizeof *r->dist);
    r->cu = calloc((size_t)S + 1, sizeof *r->cu);
    r->fix = calloc((size_t)S + 1, sizeof *r->fix);
    r->act = calloc((size_t)S + 1, sizeof *r->act);
    r->cutb = calloc((size_t)S + 1, sizeof *r->cutb);
    r->dcut = calloc((size_t)S + 1, sizeof *r->dcut);
    r->dcross = calloc((size_t)n, sizeof *r->dcross);
    r->touched = malloc((size_t)(2 * m + 1) * sizeof *r->touched);
    r->tmark = calloc((size_t)n, sizeof *r->tmark);
    return r->tmark && r->cnt && r->cross && r->dist && r->cu && r->fix && r->act && r->cutb &&
           r->dcut && r->dcross && r->touched;
}

/* Per stage: ops, c_u, parameter state and activations, from the ops' stages (checked). */
static int load_ops(ref_t *r, char *err, size_t errlen)
{
    for (int v = 0; v < r->n; v++) {
        int s = r->stage[v];
        if (s < 0 || s >= r->S)
            return pf_fail(err, errlen, PF_EINPUT, "refine: op %d in stage %d of %d", v, s, r->S);
        const pf_op_t *op = pf_graph_op(r->g, v);
        r->cnt[s]++;
        r->cu[s] += pf_graph_cu_ms(r->g, v);
        r->fix[s] += op->param_bytes;
        r->act[s] += op->mem_fwd_bytes;
    }
    return PF_OK;
}

/* Per stage the bytes crossing its boundary, per op its crossing edges, the total cut; no edge
 * may go back a stage. *total_bytes gets the bytes of all edges. */
static int load_edges(ref_t *r, double *total_bytes, char *err, size_t errlen)
{
    int m = pf_graph_nedges(r->g);
    *total_bytes = 0;
    for (int e = 0; e < m; e++) {
        const pf_edge_t *ed = pf_graph_edge(r->g, e);
        int a = r->stage[ed->src], b = r->stage[ed->dst];
        *total_bytes += ed->bytes;
        if (a > b)
            return pf_fail(err, errlen, PF_EINPUT, "refine: edge %d goes from stage %d back to %d",
                           e, a, b);
        if (a != b) {
            r->cutb[a] += ed->bytes;
            r->cutb[b] += ed->bytes;
            r->comm += ed->bytes;
            r->cross[ed->src]++;
            r->cross[ed->dst]++;
        }
    }
    return PF_OK;
}

/* One step's choice: of the boundary ops v and the stages t of their neighbours in other stages,
 * the valid move of greatest gain (gain_cmp); false when none has a positive gain.
 * seen_stage[t] == v: target t already tried for v in this step (reset every step, or a pair
 * tried in the previous step would be skipped). */
static bool best_move(ref_t *r, int *seen_stage, double eps2, double eps3, int *best_v,
                      int *best_t)
{
    const pf_graph_t *g = r->g;
    double obj = objective(r), maxcu = max_compute(r);
    for (int a = 0; a < r->S; a++)
        seen_stage[a] = -1;
    gain_t best = {0, 0, 0, 0};
    *best_v = *best_t = -1;
    for (int v = 0; v < r->n; v++) {
        if (r->cross[v] == 0)
            continue;
        int s = r->stage[v];
        for (int dir = 0; dir < 2; dir++) {
            int cnt;
            const int *e = dir ? pf_graph_in(g, v, &cnt) : pf_graph_out(g, v, &cnt);
            for (int i = 0; i < cnt; i++) {
                const pf_edge_t *ed = pf_graph_edge(g, e[i]);
                int t = r->stage[dir ? ed->src : ed->dst];
                if (t == s || seen_stage[t] == v)
                    continue;
                seen_stage[t] = v;
                gain_t gn;
                if (!evaluate(r, v, t, obj, maxcu, &gn))
                    continue;
                if (gain_cmp(&gn, &best, eps2, eps3) > 0) {
                    best = gn;
                    *best_v = v;
                    *best_t = t;
                }
            }
        }
    }
    return *best_v >= 0;
}

int pf_refine_run(const pf_graph_t *g, const pf_cost_model_t *cm, int stages, int max_moves,
                  int *op_stage, pf_refine_stats_t *stats, char *err, size_t errlen)
{
    int n = pf_graph_nops(g), m = pf_graph_nedges(g), S = stages, rc = PF_ERR;
    ref_t r = {.g = g, .cm = cm, .n = n, .S = S, .stage = op_stage};
    unsigned char *reconv = malloc((size_t)n);
    int *seen_stage = malloc((size_t)(S > 0 ? S : 1) * sizeof *seen_stage);
    memset(stats, 0, sizeof *stats);
    if (!ref_alloc(&r, n, m, S) || !reconv || !seen_stage) {
        rc = pf_fail(err, errlen, PF_ERR, "refine: out of memory");
        goto done;
    }
    if (S < 1) {
        rc = pf_fail(err, errlen, PF_EINPUT, "refine: %d stages", S);
        goto done;
    }
    double total_bytes;
    if ((rc = load_ops(&r, err, errlen)) != PF_OK ||
        (rc = load_edges(&r, &total_bytes, err, errlen)) != PF_OK)
        goto done;
    if (pf_refine_reconverging(g, reconv, r.dist) != PF_OK) {
        rc = pf_fail(err, errlen, PF_ERR, "refine: out of memory");
        goto done;
    }
    for (int v = 0; v < n; v++)
        if (r.cross[v] > 0)
            r.D += r.dist[v];
    stats->objective_before_ms = objective(&r);
    stats->distance_before = r.D;
    stats->cut_bytes_before = r.comm;
    double eps2 = 1e-12 * fmax(1.0, total_bytes);
    double eps3 = 1e-12 * fmax(1.0, pf_graph_total_cu_ms(g));
    int best_v, best_t;
    while (S > 1 && stats->moves < max_moves && best_move(&r, seen_stage, eps2, eps3, &best_v,
                                                          &best_t)) {
        apply(&r, best_v, best_t);
        stats->moves++;
    }
    stats->objective_after_ms = objective(&r);
    stats->distance_after = r.D;
    stats->cut_bytes_after = r.comm;
    rc = PF_OK;
done:
    free(reconv);
    free(seen_stage);
    ref_free(&r);
    return rc;
}
