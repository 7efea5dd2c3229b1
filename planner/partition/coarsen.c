/* coarsen: operator clustering (Parmesan IV-B, eq. 4) with a priority queue.
 *
 * Every adjacent pair sits in a binary heap keyed by its eq. 4 cost. A fusion changes the cost
 * of the pairs that touch the fused hyper-op only, so instead of updating the heap we stamp each
 * hyper-op with a version and push the fused one's pairs again; a popped entry whose versions are
 * stale is dropped (lazy invalidation). A popped pair that is illegal (non-convex or too big) is
 * dropped for good: while neither end changes, fusions elsewhere only add paths, never remove
 * them, and its memory stays the same.
 *
 * Convexity of u -> v (Def. 4): no other path u ~> v. Every vertex of such a path lies strictly
 * between u and v in any topological order, so a DFS from u's other successors that never leaves
 * the window (pos(u), pos(v)) decides it. The order itself is kept valid across fusions the way
 * Pearce and Kelly's dynamic topological sort does: A = what u reaches inside the window (found
 * by that DFS), B = what reaches v inside the window; A and B are disjoint when the fusion is
 * legal, so writing B, then the fused op, then A into the window's old positions is again a
 * topological order. Both searches touch only the window, which for the fusions eq. 4 prefers
 * (neighbours in a chain) holds a handful of ops. */
#include "planner/partition/coarsen.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int pf_coarsen_default_k(int stages, int nops)
{
    long long k = 8LL * (stages > 0 ? stages : 1);
    if (k < 48)
        k = 48;
    if (k > nops)
        k = nops;
    return (int)k;
}

typedef struct {
    int nbr;
    double bytes;
} link_t;

typedef struct {
    link_t *a;
    int n;
    size_t cap;
} links_t;

typedef struct {
    double cost;
    int tail, head; /* an edge tail -> head of the hyper-op graph */
    unsigned ver_tail, ver_head;
} cand_t;

typedef struct {
    const pf_cost_model_t *cm;
    double alpha;
    int n;
    links_t *out, *in; /* per hyper-op, one entry per neighbour (parallel edges summed) */
    double *cu, *mem;
    unsigned *ver;
    unsigned char *alive;
    int *parent; /* union-find over ops; a live hyper-op is named by its root op */
    int *pos, *ord; /* topological position of a hyper-op; hyper-op at a position or -1 */
    int *seen, stamp;
    int *stack, *list_a, *list_b, *pool, *idx;
    cand_t *heap;
    size_t nheap, capheap;
} state_t;

static int links_push(links_t *l, int nbr, double bytes)
{
    if (pf_grow((void **)&l->a, &l->cap, (size_t)l->n + 1, sizeof *l->a))
        return -1;
    l->a[l->n].nbr = nbr;
    l->a[l->n++].bytes = bytes;
    return 0;
}

static bool cand_less(const cand_t *x, const cand_t *y)
{
    if (x->cost != y->cost)
        return x->cost < y->cost;
    if (x->tail != y->tail)
        return x->tail < y->tail;
    return x->head < y->head;
}

static int heap_push(state_t *st, int tail, int head, double bytes)
{
    if (pf_grow((void **)&st->heap, &st->capheap, st->nheap + 1, sizeof *st->heap))
        return -1;
    /* eq. 4 */
    cand_t c = {st->cu[tail] + st->cu[head] - st->alpha * pf_bytes_ms(bytes, st->cm->flat_gbps),
                tail, head, st->ver[tail], st->ver[head]};
    size_t i = st->nheap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &st->heap[p]))
            break;
        st->heap[i] = st->heap[p];
        i = p;
    }
    st->heap[i] = c;
    return 0;
}

static cand_t heap_pop(state_t *st)
{
    cand_t top = st->heap[0], last = st->heap[--st->nheap];
    size_t i = 0, n = st->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && cand_less(&st->heap[c + 1], &st->heap[c]))
            c++;
        if (!cand_less(&st->heap[c], &last))
            break;
        st->heap[i] = st->heap[c];
        i = c;
    }
    if (n)
        st->heap[i] = last;
    return top;
}

/* Is u -> v the only path from u to v? Leaves A (what u reaches inside the window) in list_a. */
static bool convex_pair(state_t *st, int u, int v, int *na)
{
    int sp = 0, n = 0, pv = st->pos[v];
    st->stamp++;
    for (int i = 0; i < st->out[u].n; i++) {
        int x = st->out[u].a[i].nbr;
        if (x != v && st->pos[x] < pv && st->seen[x] != st->stamp) {
            st->seen[x] = st->stamp;
            st->stack[sp++] = st->list_a[n++] = x;
        }
    }
    while (sp > 0) {
        int x = st->stack[--sp];
        for (int i = 0; i < st->out[x].n; i++) {
            int y = st->out[x].a[i].nbr;
            if (y == v)
                return false;
            if (st->pos[y] < pv && st->seen[y] != st->stamp) {
                st->seen[y] = st->stamp;
                st->stack[sp++] = st->list_a[n++] = y;
            }
        }
    }
    *na = n;
    return true;
}

/* B: what reaches v inside the window (pos(u), pos(v)), u excluded. */
static int reach_back(state_t *st, int u, int v)
{
    int sp = 0, n = 0, pu = st->pos[u];
    st->stamp++;
    for (int i = 0; i < st->in[v].n; i++) {
        int x = st->in[v].a[i].nbr;
        if (x != u && st->pos[x] > pu && st->seen[x] != st->stamp) {
            st->seen[x] = st->stamp;
            st->stack[sp++] = st->list_b[n++] = x;
        }
    }
    while (sp > 0) {
        int x = st->stack[--sp];
        for (int i = 0; i < st->in[x].n; i++) {
            int y = st->in[x].a[i].nbr;
            if (st->pos[y] > pu && st->seen[y] != st->stamp) {
                st->seen[y] = st->stamp;
                st->stack[sp++] = st->list_b[n++] = y;
            }
        }
    }
    return n;
}

/* Positions of `list` sorted, then the ops at them in that order (list rewritten). */
static void sort_by_pos(state_t *st, int *list, int n, int *scratch)
{
    for (int i = 0; i < n; i++)
        scratch[i] = st->pos[list[i]];
    qsort(scratch, (size_t)n, sizeof *scratch, pf_cmp_int);
    for (int i = 0; i < n; i++)
        list[i] = st->ord[scratch[i]];
}

/* Pearce-Kelly style reorder of the window for the fusion of u -> v into w. */
static void reorder(state_t *st, int u, int v, int w, int na, int nb)
{
    int np = 0;
    sort_by_pos(st, st->list_a, na, st->pool);
    sort_by_pos(st, st->list_b, nb, st->pool);
    st->pool[np++] = st->pos[u];
    st->pool[np++] = st->pos[v];
    for (int i = 0; i < na; i++)
        st->pool[np++] = st->pos[st->list_a[i]];
    for (int i = 0; i < nb; i++)
        st->pool[np++] = st->pos[st->list_b[i]];
    qsort(st->pool, (size_t)np, sizeof *st->pool, pf_cmp_int);
    for (int i = 0; i < np; i++)
        st->ord[st->pool[i]] = -1;
    int k = 0;
    for (int i = 0; i < nb; i++) {
        st->ord[st->pool[k]] = st->list_b[i];
        st->pos[st->list_b[i]] = st->pool[k++];
    }
    st->ord[st->pool[k]] = w;
    st->pos[w] = st->pool[k++];
    for (int i = 0; i < na; i++) {
        st->ord[st->pool[k]] = st->list_a[i];
        st->pos[st->list_a[i]] = st->pool[k++];
    }
}

/* Add src's entries to dst (summing bytes per neighbour), dropping the entries of w and a. */
static int merge_links(state_t *st, links_t *dst, const links_t *src, int w, int a)
{
    int rc = 0;
    for (int i = 0; i < dst->n; i++)
        st->idx[dst->a[i].nbr] = i;
    for (int i = 0; i < src->n && rc == 0; i++) {
        int x = src->a[i].nbr;
        if (x == w || x == a)
            continue;
        if (st->idx[x] >= 0) {
            dst->a[st->idx[x]].bytes += src->a[i].bytes;
        } else {
            st->idx[x] = dst->n;
            rc = links_push(dst, x, src->a[i].bytes);
        }
    }
    for (int i = 0; i < dst->n; i++)
        st->idx[dst->a[i].nbr] = -1;
    for (int i = 0; i < dst->n;) {
        if (dst->a[i].nbr == a || dst->a[i].nbr == w)
            dst->a[i] = dst->a[--dst->n];
        else
            i++;
    }
    return rc;
}

/* In a neighbour's list: the entry for a now means w (summed into w's entry if it has one). */
static void relink(links_t *l, int a, int w)
{
    int ia = -1, iw = -1;
    for (int i = 0; i < l->n; i++) {
        if (l->a[i].nbr == a)
            ia = i;
        else if (l->a[i].nbr == w)
            iw = i;
    }
    if (ia < 0)
        return;
    if (iw < 0) {
        l->a[ia].nbr = w;
    } else {
        l->a[iw].bytes += l->a[ia].bytes;
        l->a[ia] = l->a[--l->n];
    }
}

/* Fuse a into w (w survives). */
static int fuse(state_t *st, int w, int a)
{
    for (int i = 0; i < st->out[a].n; i++)
        if (st->out[a].a[i].nbr != w)
            relink(&st->in[st->out[a].a[i].nbr], a, w);
    for (int i = 0; i < st->in[a].n; i++)
        if (st->in[a].a[i].nbr != w)
            relink(&st->out[st->in[a].a[i].nbr], a, w);
    if (merge_links(st, &st->out[w], &st->out[a], w, a) != 0 ||
        merge_links(st, &st->in[w], &st->in[a], w, a) != 0)
        return -1;
    free(st->out[a].a);
    free(st->in[a].a);
    memset(&st->out[a], 0, sizeof st->out[a]);
    memset(&st->in[a], 0, sizeof st->in[a]);
    st->cu[w] += st->cu[a];
    st->mem[w] += st->mem[a];
    st->alive[a] = 0;
    st->parent[a] = w;
    st->ver[w]++;
    st->ver[a]++;
    for (int i = 0; i < st->out[w].n; i++)
        if (heap_push(st, w, st->out[w].a[i].nbr, st->out[w].a[i].bytes) != 0)
            return -1;
    for (int i = 0; i < st->in[w].n; i++)
        if (heap_push(st, st->in[w].a[i].nbr, w, st->in[w].a[i].bytes) != 0)
            return -1;
    return 0;
}

static int find_root(int *parent, int v)
{
    int r = v;
    while (parent[r] != r)
        r = parent[r];
    while (parent[v] != r) {
        int next = parent[v];
        parent[v] = r;
        v = next;
    }
    return r;
}

static void state_free(state_t *st)
{
    for (int v = 0; st->out && v < st->n; v++)
        free(st->out[v].a);
    for (int v = 0; st->in && v < st->n; v++)
        free(st->in[v].a);
    free(st->out);
    free(st->in);
    free(st->cu);
    free(st->mem);
    free(st->ver);
    free(st->alive);
    free(st->parent);
    free(st->pos);
    free(st->ord);
    free(st->seen);
    free(st->stack);
    free(st->list_a);
    free(st->list_b);
    free(st->pool);
    free(st->idx);
    free(st->heap);
}

/* false when out of memory (state_free releases what was allocated). */
static bool state_alloc(state_t *st, int n)
{
    size_t un = (size_t)n;
    st->n = n;
    st->out = calloc(un, sizeof *st->out);
    st->in = calloc(un, sizeof *st->in);
    st->cu = malloc(un * sizeof *st->cu);
    st->mem = malloc(un * sizeof *st->mem);
    st->ver = calloc(un, sizeof *st->ver);
    st->alive = malloc(un);
    st->parent = malloc(un * sizeof *st->parent);
    st->pos = malloc(un * sizeof *st->pos);
    st->ord = malloc(un * sizeof *st->ord);
    st->seen = calloc(un, sizeof *st->seen);
    st->stack = malloc(un * sizeof *st->stack);
    st->list_a = malloc(un * sizeof *st->list_a);
    st->list_b = malloc(un * sizeof *st->list_b);
    st->pool = malloc((un + 2) * sizeof *st->pool);
    st->idx = malloc(un * sizeof *st->idx);
    return st->out && st->in && st->cu && st->mem && st->ver && st->alive && st->parent &&
           st->pos && st->ord && st->seen && st->stack && st->list_a && st->list_b && st->pool &&
           st->idx;
}

/* Every op its own hyper-op, in the graph's topological order. */
static void state_init_ops(state_t *st, const pf_graph_t *g)
{
    const int *topo = pf_graph_topo(g);
    for (int v = 0; v < st->n; v++) {
        st->cu[v] = pf_graph_cu_ms(g, v);
        st->mem[v] = pf_cost_op_mem_bytes(g, v, st->cm) - st->cm->reserve_bytes; /* once per stage */
        st->alive[v] = 1;
        st->parent[v] = v;
        st->idx[v] = -1;
        st->ord[v] = topo[v];
        st->pos[topo[v]] = v;
    }
}

/* Hyper-op adjacency, one entry per neighbour (parallel edges' bytes summed), and every adjacent
 * pair in the heap. 0 or -1 (out of memory). */
static int state_init_links(state_t *st, const pf_graph_t *g)
{
    for (int v = 0; v < st->n; v++) {
        int cnt;
        const int *e = pf_graph_out(g, v, &cnt);
        for (int i = 0; i < cnt; i++) {
            const pf_edge_t *ed = pf_graph_edge(g, e[i]);
            if (st->idx[ed->dst] >= 0) {
                st->out[v].a[st->idx[ed->dst]].bytes += ed->bytes;
            } else {
                st->idx[ed->dst] = st->out[v].n;
                if (links_push(&st->out[v], ed->dst, ed->bytes) != 0)
                    return -1;
            }
        }
        for (int i = 0; i < st->out[v].n; i++) {
            st->idx[st->out[v].a[i].nbr] = -1;
            if (links_push(&st->in[st->out[v].a[i].nbr], v, st->out[v].a[i].bytes) != 0)
                return -1;
            if (heap_push(st, v, st->out[v].a[i].nbr, st->out[v].a[i].bytes) != 0)
                return -1;
        }
    }
    return 0;
}

/* Fuses the cheapest legal pair (eq. 4) until K hyper-ops remain or no pair is left. 0 or -1
 * (out of memory). */
static int fuse_to_k(state_t *st, const pf_coarsen_opts_t *o)
{
    const pf_cost_model_t *cm = st->cm;
    int remaining = st->n;
    while (remaining > o->k && st->nheap > 0) {
        cand_t c = heap_pop(st);
        int u = c.tail, v = c.head, na;
        if (!st->alive[u] || !st->alive[v] || st->ver[u] != c.ver_tail ||
            st->ver[v] != c.ver_head)
            continue; /* stale: a newer entry for this pair is (or was) in the heap */
        if (st->mem[u] + st->mem[v] + cm->reserve_bytes > cm->mem_limit_bytes)
            continue;
        if (!convex_pair(st, u, v, &na))
            continue;
        int nb = reach_back(st, u, v);
        /* Keep the hyper-op with more neighbours: fewer lists to rewrite. */
        int du = st->out[u].n + st->in[u].n, dv = st->out[v].n + st->in[v].n;
        int w = du >= dv ? u : v, a = du >= dv ? v : u;
        reorder(st, u, v, w, na, nb);
        if (fuse(st, w, a) != 0)
            return -1;
        remaining--;
        if (o->on_fuse)
            o->on_fuse(o->ctx, w, a);
    }
    return 0;
}

int pf_coarsen_run(const pf_graph_t *g, const pf_cost_model_t *cm, const pf_coarsen_opts_t *o,
                   int *group, int *ngroups, char *err, size_t errlen)
{
    int n = pf_graph_nops(g), rc = PF_ERR;
    state_t st = {0};
    if (o->k < 1 || !(o->alpha >= 0) || !isfinite(o->alpha))
        return pf_fail(err, errlen, PF_EINPUT, "coarsen: K must be >= 1 and alpha >= 0");
    st.cm = cm;
    st.alpha = o->alpha;
    if (!state_alloc(&st, n))
        goto oom;
    state_init_ops(&st, g);
    if (state_init_links(&st, g) != 0 || fuse_to_k(&st, o) != 0)
        goto oom;
    /* Number hyper-ops in topological order. */
    int k = 0;
    for (int p = 0; p < n; p++)
        if (st.ord[p] >= 0)
            st.idx[st.ord[p]] = k++;
    for (int v = 0; v < n; v++)
        group[v] = st.idx[find_root(st.parent, v)];
    *ngroups = k;
    rc = PF_OK;
    goto done;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "coarsen: out of memory");
done:
    state_free(&st);
    return rc;
}

int pf_coarsen_hyper_graph(const pf_graph_t *g, const int *group, int ngroups, pf_graph_t **out,
                           char *err, size_t errlen)
{
    int n = pf_graph_nops(g), rc = PF_ERR;
    int *start = NULL, *members = NULL, *mark = NULL, *targets = NULL;
    double *acc = NULL;
    pf_graph_t *h = NULL;
    *out = NULL;
    if (ngroups < 1 || ngroups > n)
        return pf_fail(err, errlen, PF_EINPUT, "grouping: %d groups for %d ops", ngroups, n);
    for (int v = 0; v < n; v++)
        if (group[v] < 0 || group[v] >= ngroups)
            return pf_fail(err, errlen, PF_EINPUT, "grouping: op %d in group %d, not in [0, %d)",
                           v, group[v], ngroups);
    start = calloc((size_t)ngroups + 1, sizeof *start);
    members = malloc((size_t)n * sizeof *members);
    mark = malloc((size_t)ngroups * sizeof *mark);
    targets = malloc((size_t)ngroups * sizeof *targets);
    acc = malloc((size_t)ngroups * sizeof *acc);
    h = pf_graph_new_like(g);
    if (!start || !members || !mark || !targets || !acc || !h)
        goto oom;
    /* Members of each group in g's topological order (counting sort). */
    const int *topo = pf_graph_topo(g);
    for (int v = 0; v < n; v++)
        start[group[v] + 1]++;
    for (int k = 0; k < ngroups; k++) {
        if (start[k + 1] == 0) {
            rc = pf_fail(err, errlen, PF_EINPUT, "grouping: group %d is empty", k);
            goto fail;
        }
        start[k + 1] += start[k];
    }
    for (int i = 0; i < n; i++)
        members[start[group[topo[i]]]++] = topo[i];
    for (int k = ngroups; k > 0; k--)
        start[k] = start[k - 1];
    start[0] = 0;

    for (int k = 0; k < ngroups; k++) {
        const pf_op_t *first = pf_graph_op(g, members[start[k]]);
        pf_op_t op = {.id = k, .name = first->name, .type = "hyper"};
        for (int i = start[k]; i < start[k + 1]; i++) {
            const pf_op_t *x = pf_graph_op(g, members[i]);
            op.fwd_ms += x->fwd_ms;
            op.bwd_ms += x->bwd_ms;
            op.comm_fwd_ms += x->comm_fwd_ms;
            op.comm_bwd_ms += x->comm_bwd_ms;
            op.param_bytes += x->param_bytes;
            op.mem_fwd_bytes += x->mem_fwd_bytes; /* stored activations add up (cost.h) */
            op.mem_bwd_bytes = fmax(op.mem_bwd_bytes, x->mem_bwd_bytes);
        }
        if (pf_graph_add_op(h, &op) < 0)
            goto oom;
    }
    for (int k = 0; k < ngroups; k++)
        mark[k] = -1;
    for (int k = 0; k < ngroups; k++) {
        int nt = 0;
        for (int i = start[k]; i < start[k + 1]; i++) {
            int cnt;
            const int *e = pf_graph_out(g, members[i], &cnt);
            for (int j = 0; j < cnt; j++) {
                const pf_edge_t *ed = pf_graph_edge(g, e[j]);
                int b = group[ed->dst];
                if (b == k)
                    continue;
                if (mark[b] != k) {
                    mark[b] = k;
                    acc[b] = 0;
                    targets[nt++] = b;
                }
                acc[b] += ed->bytes;
            }
        }
        for (int j = 0; j < nt; j++)
            if (pf_graph_add_edge(h, k, targets[j], acc[targets[j]]) < 0)
                goto oom;
    }
    if ((rc = pf_graph_finalize(h, err, errlen)) != PF_OK) {
        pf_err_prefix(err, errlen, "grouping is not convex (hyper-op graph)");
        goto fail;
    }
    *out = h;
    h = NULL;
    rc = PF_OK;
    goto fail;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "hyper-op graph: out of memory");
fail:
    pf_graph_destroy(&h);
    free(start);
    free(members);
    free(mark);
    free(targets);
    free(acc);
    return rc;
}
