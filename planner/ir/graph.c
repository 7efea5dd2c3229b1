#include "planner/ir/graph.h"
#include "planner/core/json.h"
#include "planner/ir/arch.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t id;
    int index;
} id_index_t;

struct pf_graph {
    char *name;
    char *device_model; /* the device model the op times were priced on; NULL = not said */
    pf_arch_t *arch;    /* the file's "model" object (arch.h); NULL = not said */
    int microbatch;
    int nops;
    size_t ops_cap;
    pf_op_t *ops;
    int nedges;
    size_t edges_cap;
    pf_edge_t *edges;
    int finalized;
    /* CSR: out_start[v]..out_start[v+1] index out_list (edge indices); same for in. */
    int *out_start, *out_list, *in_start, *in_list;
    int *topo, *topo_pos;
    id_index_t *by_id; /* sorted by id */
};

pf_graph_t *pf_graph_new(const char *name, int microbatch)
{
    pf_graph_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->name = pf_strdup(name ? name : "graph");
    g->microbatch = microbatch > 0 ? microbatch : 1;
    if (!g->name) {
        free(g);
        return NULL;
    }
    return g;
}

pf_graph_t *pf_graph_new_like(const pf_graph_t *g)
{
    pf_graph_t *h = pf_graph_new(g->name, g->microbatch);
    if (h && g->device_model && pf_graph_set_device_model(h, g->device_model) != PF_OK)
        pf_graph_destroy(&h);
    if (h && pf_graph_set_arch(h, g->arch) != PF_OK)
        pf_graph_destroy(&h);
    return h;
}

/* The "model" metadata (arch.h): kept apart from the ops, read and written as one object. */
int pf_graph_set_arch(pf_graph_t *g, const pf_arch_t *a)
{
    pf_arch_t *copy = NULL;
    if (a && !(copy = malloc(sizeof *copy)))
        return PF_ERR;
    if (a)
        *copy = *a;
    free(g->arch);
    g->arch = copy;
    return PF_OK;
}

const pf_arch_t *pf_graph_arch(const pf_graph_t *g) { return g->arch; }

static int read_arch(json_t *root, pf_graph_t *g, char *err, size_t errlen)
{
    json_t *m = json_object_get(root, "model");
    pf_arch_t a;
    int rc;
    if (!m)
        return PF_OK;
    if ((rc = pf_arch_from_json(m, "graph.model", &a, err, errlen)) != PF_OK)
        return rc;
    if (pf_graph_set_arch(g, &a) != PF_OK)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    return PF_OK;
}

static void write_arch(pf_json_writer_t *w, const pf_graph_t *g)
{
    if (!g->arch)
        return;
    pf_json_writer_key(w, "model");
    pf_arch_write(g->arch, w);
}

int pf_graph_set_device_model(pf_graph_t *g, const char *name)
{
    char *copy = NULL;
    if (name && !(copy = pf_strdup(name)))
        return PF_ERR;
    free(g->device_model);
    g->device_model = copy;
    return PF_OK;
}

const char *pf_graph_device_model(const pf_graph_t *g) { return g->device_model; }

void pf_graph_destroy(pf_graph_t **gp)
{
    if (!gp || !*gp)
        return;
    pf_graph_t *g = *gp;
    free(g->device_model);
    free(g->arch);
    for (int i = 0; i < g->nops; i++) {
        free((char *)g->ops[i].name);
        free((char *)g->ops[i].type);
    }
    free(g->ops);
    free(g->edges);
    free(g->out_start);
    free(g->out_list);
    free(g->in_start);
    free(g->in_list);
    free(g->topo);
    free(g->topo_pos);
    free(g->by_id);
    free(g->name);
    free(g);
    *gp = NULL;
}

int pf_graph_add_op(pf_graph_t *g, const pf_op_t *op)
{
    if (g->finalized || pf_grow((void **)&g->ops, &g->ops_cap, (size_t)g->nops + 1, sizeof *g->ops))
        return -1;
    pf_op_t o = *op;
    char fallback[32];
    if (!o.name) {
        snprintf(fallback, sizeof fallback, "op%lld", (long long)o.id);
        o.name = fallback;
    }
    o.name = pf_strdup(o.name);
    o.type = pf_strdup(o.type ? o.type : "");
    if (!o.name || !o.type) {
        free((char *)o.name);
        free((char *)o.type);
        return -1;
    }
    g->ops[g->nops] = o;
    return g->nops++;
}

int pf_graph_add_edge(pf_graph_t *g, int src, int dst, double bytes)
{
    if (g->finalized || src < 0 || dst < 0 || src >= g->nops || dst >= g->nops)
        return -1;
    if (pf_grow((void **)&g->edges, &g->edges_cap, (size_t)g->nedges + 1, sizeof *g->edges))
        return -1;
    g->edges[g->nedges] = (pf_edge_t){src, dst, bytes};
    return g->nedges++;
}

static int cmp_id(const void *a, const void *b)
{
    const id_index_t *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->index - y->index;
}

/* The ops' file ids with their indices, sorted by cmp_id (caller frees); NULL: out of memory. */
static id_index_t *id_index_new(const pf_graph_t *g)
{
    id_index_t *ids = malloc((size_t)(g->nops ? g->nops : 1) * sizeof *ids);
    if (!ids)
        return NULL;
    for (int i = 0; i < g->nops; i++)
        ids[i] = (id_index_t){g->ops[i].id, i};
    qsort(ids, (size_t)g->nops, sizeof *ids, cmp_id);
    return ids;
}

/* Index of the op with file id `id` in an array sorted by cmp_id, or -1. */
static int lookup_id(const id_index_t *ids, int n, int64_t id)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (ids[mid].id == id)
            return ids[mid].index;
        if (ids[mid].id < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* A GEMM shape's dimensions are counts: up to 2^53, where doubles still count them exactly. */
#define GEMM_DIM_MAX ((int64_t)1 << 53)

/* ops[i]'s work (graph.h): FLOPs and bytes within util.h's bounds; a GEMM shape is all four
 * dimensions positive, or none (gemm_m = ... = 0: not a GEMM). */
static int check_work(const pf_op_work_t *w, int i, char *err, size_t errlen)
{
    char where[64];
    int rc;
    const struct {
        const char *key, *unit;
        double v, max;
    } f[] = {{"fwd_flops", "FLOPs", w->fwd_flops, PF_MAX_FLOPS},
             {"bwd_flops", "FLOPs", w->bwd_flops, PF_MAX_FLOPS},
             {"bytes_read", "bytes", w->bytes_read, PF_MAX_BYTES},
             {"bytes_written", "bytes", w->bytes_written, PF_MAX_BYTES}};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
        snprintf(where, sizeof where, "ops[%d].%s", i, f[k].key);
        if ((rc = pf_check_range(f[k].v, f[k].max, f[k].unit, where, err, errlen)) != PF_OK)
            return rc;
    }
    const struct {
        const char *key;
        int64_t v;
    } d[] = {{"m", w->gemm_m}, {"n", w->gemm_n}, {"k", w->gemm_k}, {"batch", w->gemm_batch}};
    if (!w->gemm_m && !w->gemm_n && !w->gemm_k && !w->gemm_batch)
        return PF_OK;
    for (size_t k = 0; k < sizeof d / sizeof d[0]; k++)
        if (d[k].v <= 0 || d[k].v > GEMM_DIM_MAX)
            return pf_fail(err, errlen, PF_EINPUT,
                           "ops[%d].gemm.%s: %lld is not a dimension (1 to 2^53; a GEMM shape "
                           "gives all of m, n, k, batch)",
                           i, d[k].key, (long long)d[k].v);
    return PF_OK;
}

/* What every graph must satisfy whatever built it (file, import, wire, generator): ids not
 * negative, names and types valid UTF-8 (they are written back into JSON), numbers finite and
 * within the bounds of util.h. */
static int check_ops(const pf_graph_t *g, char *err, size_t errlen)
{
    char where[64];
    int rc;
    if ((rc = pf_check_name(g->name, "graph.name", err, errlen)) != PF_OK)
        return rc;
    for (int i = 0; i < g->nops; i++) {
        const pf_op_t *o = &g->ops[i];
        if (o->id < 0)
            return pf_fail(err, errlen, PF_EINPUT, "ops[%d].id: negative (%lld)", i,
                           (long long)o->id);
        snprintf(where, sizeof where, "ops[%d].name", i);
        if ((rc = pf_check_name(o->name, where, err, errlen)) != PF_OK)
            return rc;
        snprintf(where, sizeof where, "ops[%d].type", i);
        if ((rc = pf_check_name(o->type, where, err, errlen)) != PF_OK)
            return rc;
        const struct {
            const char *key, *unit;
            double v, max;
        } f[] = {{"fwd_ms", "ms", o->fwd_ms, PF_MAX_MS},
                 {"bwd_ms", "ms", o->bwd_ms, PF_MAX_MS},
                 {"param_bytes", "bytes", o->param_bytes, PF_MAX_BYTES},
                 {"mem_fwd_bytes", "bytes", o->mem_fwd_bytes, PF_MAX_BYTES},
                 {"mem_bwd_bytes", "bytes", o->mem_bwd_bytes, PF_MAX_BYTES}};
        for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
            snprintf(where, sizeof where, "ops[%d].%s", i, f[k].key);
            if ((rc = pf_check_range(f[k].v, f[k].max, f[k].unit, where, err, errlen)) != PF_OK)
                return rc;
        }
        if ((rc = check_work(&o->work, i, err, errlen)) != PF_OK)
            return rc;
    }
    for (int e = 0; e < g->nedges; e++) {
        const pf_edge_t *ed = &g->edges[e];
        snprintf(where, sizeof where, "edges[%d].bytes", e);
        if ((rc = pf_check_range(ed->bytes, PF_MAX_BYTES, "bytes", where, err, errlen)) != PF_OK)
            return rc;
        if (ed->src == ed->dst)
            return pf_fail(err, errlen, PF_EINPUT, "edges[%d]: self-loop on op %lld", e,
                           (long long)g->ops[ed->src].id);
    }
    return PF_OK;
}

static int cmp_edge_index(const void *a, const void *b, void *ctx)
{
    const pf_edge_t *edges = ctx;
    const pf_edge_t *x = &edges[*(const int *)a], *y = &edges[*(const int *)b];
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

/* Files list each edge once: a second src -> dst is a mistake (the builder would add the
 * bytes up), so name both places. */
static int check_repeated_edges(const pf_graph_t *g, char *err, size_t errlen)
{
    if (g->nedges < 2)
        return PF_OK;
    int *order = malloc((size_t)g->nedges * sizeof *order), rc = PF_OK;
    if (!order)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (int e = 0; e < g->nedges; e++)
        order[e] = e;
    qsort_r(order, (size_t)g->nedges, sizeof *order, cmp_edge_index, g->edges);
    for (int k = 1; k < g->nedges && rc == PF_OK; k++) {
        const pf_edge_t *a = &g->edges[order[k - 1]], *b = &g->edges[order[k]];
        if (a->src == b->src && a->dst == b->dst)
            rc = pf_fail(err, errlen, PF_EINPUT, "edges[%d] repeats edges[%d] (op %lld -> op %lld)",
                         order[k], order[k - 1], (long long)g->ops[a->src].id,
                         (long long)g->ops[a->dst].id);
    }
    free(order);
    return rc;
}

/* "graph has a cycle: op 1 (a) -> op 2 (b) -> op 1": the cycle through `start`, found by
 * following pred[] (pred[v] = an op before v, on the cycle) back to start. Long cycles show
 * their first 8 ops and the count. */
static int cycle_error(const pf_graph_t *g, int start, const int *pred, char *err, size_t errlen)
{
    enum { SHOW = 8 };
    int ring[SHOW], len = 0;
    /* pred leads backwards; collect the ring forwards starting at start */
    int v = start;
    do {
        len++;
        v = pred[v];
    } while (v != start);
    /* forward order: start, then the op whose pred is start, ...: walk backwards and place
     * each op at its forward position */
    v = start;
    for (int k = 0; k < len; k++) {
        int pos = k == 0 ? 0 : len - k;
        if (pos < SHOW)
            ring[pos] = v;
        v = pred[v];
    }
    char msg[1024];
    size_t n = (size_t)snprintf(msg, sizeof msg, "graph has a cycle:");
    for (int k = 0; k < len && k < SHOW && n < sizeof msg; k++) {
        const pf_op_t *o = &g->ops[ring[k]];
        n += (size_t)snprintf(msg + n, sizeof msg - n, "%s op %lld (%.60s)", k ? " ->" : "",
                              (long long)o->id, o->name);
    }
    if (len > SHOW && n < sizeof msg)
        n += (size_t)snprintf(msg + n, sizeof msg - n, " -> ... (%d ops on the cycle)", len);
    if (n < sizeof msg)
        snprintf(msg + n, sizeof msg - n, " -> op %lld", (long long)g->ops[start].id);
    return pf_fail(err, errlen, PF_EINPUT, "%s", msg);
}

/* Kahn's algorithm with a min-heap on op index, so equal inputs give equal orders. */
static int topo_sort(pf_graph_t *g, char *err, size_t errlen)
{
    int n = g->nops;
    int *indeg = calloc((size_t)n, sizeof *indeg);
    int *heap = malloc((size_t)n * sizeof *heap);
    int rc = PF_ERR, hn = 0, done = 0;
    if (!indeg || !heap)
        goto fail;
    for (int e = 0; e < g->nedges; e++)
        indeg[g->edges[e].dst]++;
    for (int v = 0; v < n; v++) {
        if (indeg[v] == 0)
            heap[hn++] = v; /* increasing v: already a valid min-heap */
    }
    while (hn > 0) {
        int v = heap[0];
        heap[0] = heap[--hn];
        for (int i = 0;;) { /* sift down */
            int l = 2 * i + 1, r = l + 1, m = i;
            if (l < hn && heap[l] < heap[m]) m = l;
            if (r < hn && heap[r] < heap[m]) m = r;
            if (m == i) break;
            int t = heap[i]; heap[i] = heap[m]; heap[m] = t;
            i = m;
        }
        g->topo_pos[v] = done;
        g->topo[done++] = v;
        for (int k = g->out_start[v]; k < g->out_start[v + 1]; k++) {
            int w = g->edges[g->out_list[k]].dst;
            if (--indeg[w] == 0) {
                int i = hn++;
                heap[i] = w;
                while (i > 0 && heap[(i - 1) / 2] > heap[i]) { /* sift up */
                    int p = (i - 1) / 2, t = heap[p];
                    heap[p] = heap[i]; heap[i] = t;
                    i = p;
                }
            }
        }
    }
    if (done < n) {
        /* Every op left has a predecessor that is also left: walking predecessors must
         * revisit an op, and the first revisited one lies on a cycle. */
        int *seen = heap, *pred = g->topo_pos; /* reuse: topo_pos is refilled on success */
        memset(seen, 0, (size_t)n * sizeof *seen);
        int v = 0;
        while (indeg[v] == 0) v++;
        while (!seen[v]) {
            seen[v] = 1;
            for (int k = g->in_start[v]; k < g->in_start[v + 1]; k++) {
                int u = g->edges[g->in_list[k]].src;
                if (indeg[u] > 0) { pred[v] = u; v = u; break; }
            }
        }
        rc = cycle_error(g, v, pred, err, errlen);
        goto fail;
    }
    rc = PF_OK;
fail:
    free(indeg);
    free(heap);
    return rc;
}

static int build_csr(pf_graph_t *g)
{
    int n = g->nops, m = g->nedges;
    g->out_start = calloc((size_t)n + 1, sizeof(int));
    g->in_start = calloc((size_t)n + 1, sizeof(int));
    g->out_list = malloc((size_t)(m ? m : 1) * sizeof(int));
    g->in_list = malloc((size_t)(m ? m : 1) * sizeof(int));
    if (!g->out_start || !g->in_start || !g->out_list || !g->in_list)
        return PF_ERR;
    for (int e = 0; e < m; e++) {
        g->out_start[g->edges[e].src + 1]++;
        g->in_start[g->edges[e].dst + 1]++;
    }
    for (int v = 0; v < n; v++) {
        g->out_start[v + 1] += g->out_start[v];
        g->in_start[v + 1] += g->in_start[v];
    }
    int *oc = malloc((size_t)n * sizeof(int)), *ic = malloc((size_t)n * sizeof(int));
    if (!oc || !ic) {
        free(oc);
        free(ic);
        return PF_ERR;
    }
    memcpy(oc, g->out_start, (size_t)n * sizeof(int));
    memcpy(ic, g->in_start, (size_t)n * sizeof(int));
    for (int e = 0; e < m; e++) {
        g->out_list[oc[g->edges[e].src]++] = e;
        g->in_list[ic[g->edges[e].dst]++] = e;
    }
    free(oc);
    free(ic);
    return PF_OK;
}

int pf_graph_finalize(pf_graph_t *g, char *err, size_t errlen)
{
    if (g->finalized)
        return PF_OK;
    int rc;
    if (g->nops == 0)
        return pf_fail(err, errlen, PF_EINPUT, "graph has no ops");
    if ((rc = check_ops(g, err, errlen)) != PF_OK)
        return rc;
    g->by_id = id_index_new(g);
    g->topo = malloc((size_t)g->nops * sizeof(int));
    g->topo_pos = malloc((size_t)g->nops * sizeof(int));
    if (!g->by_id || !g->topo || !g->topo_pos || build_csr(g) != PF_OK)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (int i = 1; i < g->nops; i++) {
        if (g->by_id[i].id == g->by_id[i - 1].id)
            return pf_fail(err, errlen, PF_EINPUT, "ops[%d].id: duplicate id %lld (also ops[%d])",
                           g->by_id[i].index, (long long)g->by_id[i].id, g->by_id[i - 1].index);
    }
    if ((rc = topo_sort(g, err, errlen)) != PF_OK)
        return rc;
    g->finalized = 1;
    return PF_OK;
}

const char *pf_graph_name(const pf_graph_t *g) { return g->name; }
int pf_graph_microbatch(const pf_graph_t *g) { return g->microbatch; }
int pf_graph_nops(const pf_graph_t *g) { return g->nops; }
int pf_graph_nedges(const pf_graph_t *g) { return g->nedges; }
const pf_op_t *pf_graph_op(const pf_graph_t *g, int v) { return &g->ops[v]; }
const pf_edge_t *pf_graph_edge(const pf_graph_t *g, int e) { return &g->edges[e]; }
const int *pf_graph_topo(const pf_graph_t *g) { return g->topo; }
const int *pf_graph_topo_pos(const pf_graph_t *g) { return g->topo_pos; }

const int *pf_graph_out(const pf_graph_t *g, int v, int *count)
{
    *count = g->out_start[v + 1] - g->out_start[v];
    return g->out_list + g->out_start[v];
}

const int *pf_graph_in(const pf_graph_t *g, int v, int *count)
{
    *count = g->in_start[v + 1] - g->in_start[v];
    return g->in_list + g->in_start[v];
}

int pf_graph_find(const pf_graph_t *g, int64_t id)
{
    return lookup_id(g->by_id, g->nops, id);
}

double pf_graph_cu_ms(const pf_graph_t *g, int v)
{
    return g->ops[v].fwd_ms + g->ops[v].bwd_ms;
}

double pf_graph_total_cu_ms(const pf_graph_t *g)
{
    double s = 0;
    for (int v = 0; v < g->nops; v++)
        s += pf_graph_cu_ms(g, v);
    return s;
}

double pf_graph_total_param_bytes(const pf_graph_t *g)
{
    double s = 0;
    for (int v = 0; v < g->nops; v++)
        s += g->ops[v].param_bytes;
    return s;
}

double pf_graph_longest_path_ms(const pf_graph_t *g)
{
    double *dist = malloc((size_t)g->nops * sizeof *dist), best = 0;
    if (!dist)
        return NAN;
    for (int i = 0; i < g->nops; i++) {
        int v = g->topo[i], n;
        const int *in = pf_graph_in(g, v, &n);
        double d = 0;
        for (int k = 0; k < n; k++) {
            double du = dist[g->edges[in[k]].src];
            if (du > d)
                d = du;
        }
        dist[v] = d + pf_graph_cu_ms(g, v);
        if (dist[v] > best)
            best = dist[v];
    }
    free(dist);
    return best;
}

/* ---- files ---- */

static int read_shape(json_t *o, const char *path, const char *key, pf_shape_t *s, char *err,
                      size_t errlen)
{
    return pf_json_get_int_array(o, path, key, s->dim, PF_SHAPE_MAX, &s->ndim, err, errlen);
}

/* An op's numbers, read in this order (the first bad one is the error). */
static const struct {
    const char *key;
    int flags;
    size_t offset;
} op_numbers[] = {
    {"fwd_ms", PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, offsetof(pf_op_t, fwd_ms)},
    {"bwd_ms", PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG, offsetof(pf_op_t, bwd_ms)},
    {"param_bytes", PF_JSON_GET_NONNEG, offsetof(pf_op_t, param_bytes)},
    {"mem_fwd_bytes", PF_JSON_GET_NONNEG, offsetof(pf_op_t, mem_fwd_bytes)},
    {"mem_bwd_bytes", PF_JSON_GET_NONNEG, offsetof(pf_op_t, mem_bwd_bytes)},
};

/* Version 2's work keys (DESIGN.md "Files"): all optional, 0 = unknown. A "gemm" object gives
 * all four dimensions; the ranges are check_work's, run by finalize. */
static int work_from_json(json_t *o, const char *path, pf_op_work_t *w, char *err, size_t errlen)
{
    const struct {
        const char *key;
        double *out;
    } f[] = {{"fwd_flops", &w->fwd_flops},
             {"bwd_flops", &w->bwd_flops},
             {"bytes_read", &w->bytes_read},
             {"bytes_written", &w->bytes_written}};
    int rc;
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
        if ((rc = pf_json_get_number(o, path, f[k].key, PF_JSON_GET_NONNEG, 0, f[k].out, err,
                                     errlen)))
            return rc;
    json_t *gm = json_object_get(o, "gemm");
    if (!gm)
        return PF_OK;
    char gpath[64];
    snprintf(gpath, sizeof gpath, "%s.gemm", path);
    if (!json_is_object(gm))
        return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", gpath);
    const int req = PF_JSON_GET_REQUIRED | PF_JSON_GET_POSITIVE;
    if ((rc = pf_json_get_int(gm, gpath, "m", req, 0, &w->gemm_m, err, errlen)) ||
        (rc = pf_json_get_int(gm, gpath, "n", req, 0, &w->gemm_n, err, errlen)) ||
        (rc = pf_json_get_int(gm, gpath, "k", req, 0, &w->gemm_k, err, errlen)) ||
        (rc = pf_json_get_int(gm, gpath, "batch", req, 0, &w->gemm_batch, err, errlen)))
        return rc;
    return PF_OK;
}

/* ops[i] into op (its strings point into the JSON). */
static int op_from_json(json_t *o, const char *path, pf_op_t *op, char *err, size_t errlen)
{
    int rc;
    if (!json_is_object(o))
        return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
    if ((rc = pf_json_get_int(o, path, "id", PF_JSON_GET_REQUIRED, 0, &op->id, err, errlen)) ||
        (rc = pf_json_get_string(o, path, "name", 0, NULL, &op->name, err, errlen)) ||
        (rc = pf_json_get_string(o, path, "type", 0, "", &op->type, err, errlen)))
        return rc;
    for (size_t k = 0; k < sizeof op_numbers / sizeof op_numbers[0]; k++)
        if ((rc = pf_json_get_number(o, path, op_numbers[k].key, op_numbers[k].flags, 0,
                                     (double *)((char *)op + op_numbers[k].offset), err, errlen)))
            return rc;
    if ((rc = read_shape(o, path, "weight", &op->weight, err, errlen)) ||
        (rc = read_shape(o, path, "input", &op->input, err, errlen)) ||
        (rc = read_shape(o, path, "output", &op->output, err, errlen)) ||
        (rc = work_from_json(o, path, &op->work, err, errlen)))
        return rc;
    return PF_OK;
}

/* Edge endpoints are file ids; the graph's own id index is built by finalize. */
static int edges_from_json(pf_graph_t *g, json_t *edges, char *err, size_t errlen)
{
    int n = g->nops, rc = PF_OK;
    char path[48];
    id_index_t *ids = id_index_new(g);
    if (!ids)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (size_t j = 0; j < json_array_size(edges) && rc == PF_OK; j++) {
        json_t *e = json_array_get(edges, j);
        int64_t src, dst;
        double bytes;
        snprintf(path, sizeof path, "edges[%zu]", j);
        if (!json_is_object(e)) {
            rc = pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
            break;
        }
        if ((rc = pf_json_get_int(e, path, "src", PF_JSON_GET_REQUIRED, 0, &src, err, errlen)) ||
            (rc = pf_json_get_int(e, path, "dst", PF_JSON_GET_REQUIRED, 0, &dst, err, errlen)) ||
            (rc = pf_json_get_number(e, path, "bytes", PF_JSON_GET_REQUIRED | PF_JSON_GET_NONNEG,
                                     0, &bytes, err, errlen)))
            break;
        int s = lookup_id(ids, n, src), d = lookup_id(ids, n, dst);
        if (s < 0 || d < 0)
            rc = pf_fail(err, errlen, PF_EINPUT, "%s: %s %lld is not an op", path,
                         s < 0 ? "src" : "dst", (long long)(s < 0 ? src : dst));
        else if (pf_graph_add_edge(g, s, d, bytes) < 0)
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    free(ids);
    return rc;
}

static int from_json(json_t *root, pf_graph_t **out, char *err, size_t errlen)
{
    pf_graph_t *g = NULL;
    json_t *ops, *edges;
    const char *name;
    int64_t mb, version;
    int rc;
    char path[48];

    *out = NULL;
    if (!json_is_object(root))
        return pf_fail(err, errlen, PF_EINPUT, "top level: not an object");
    if ((rc = pf_json_get_int(root, "graph", "version", PF_JSON_GET_POSITIVE, 1, &version, err,
                              errlen)))
        return rc;
    if (version > PF_GRAPH_VERSION)
        return pf_fail(err, errlen, PF_EINPUT,
                       "graph.version: %lld is newer than this planfarm reads (1 to %d)",
                       (long long)version, PF_GRAPH_VERSION);
    if ((rc = pf_json_get_string(root, "graph", "name", 0, "graph", &name, err, errlen)) ||
        (rc = pf_json_get_int(root, "graph", "microbatch", PF_JSON_GET_POSITIVE, 1, &mb, err, errlen)) ||
        (rc = pf_json_get_array(root, "graph", "ops", PF_JSON_GET_REQUIRED, &ops, err, errlen)) ||
        (rc = pf_json_get_array(root, "graph", "edges", PF_JSON_GET_REQUIRED, &edges, err, errlen)))
        return rc;
    if (mb > 1 << 30)
        return pf_fail(err, errlen, PF_EINPUT, "graph.microbatch: too large");
    if (json_array_size(ops) > (1u << 26) || json_array_size(edges) > (1u << 28))
        return pf_fail(err, errlen, PF_EINPUT, "graph: too many ops or edges");
    const char *device_model = NULL;
    if ((rc = pf_json_get_string(root, "graph", "device_model", 0, NULL, &device_model, err,
                                 errlen)))
        return rc;
    if (device_model && (!*device_model || strlen(device_model) > PF_GRAPH_DEVICE_MODEL_MAX))
        return pf_fail(err, errlen, PF_EINPUT, "graph.device_model: empty or longer than %d bytes",
                       PF_GRAPH_DEVICE_MODEL_MAX);
    g = pf_graph_new(name, (int)mb);
    if (!g || pf_graph_set_device_model(g, device_model) != PF_OK) {
        pf_graph_destroy(&g);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    if ((rc = read_arch(root, g, err, errlen)) != PF_OK)
        goto fail;
    for (size_t i = 0; i < json_array_size(ops); i++) {
        pf_op_t op = {0};
        snprintf(path, sizeof path, "ops[%zu]", i);
        if ((rc = op_from_json(json_array_get(ops, i), path, &op, err, errlen)))
            goto fail;
        if (pf_graph_add_op(g, &op) < 0) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    if ((rc = edges_from_json(g, edges, err, errlen)) ||
        (rc = check_repeated_edges(g, err, errlen)) || (rc = pf_graph_finalize(g, err, errlen)))
        goto fail;
    *out = g;
    return PF_OK;
fail:
    pf_graph_destroy(&g);
    return rc;
}

static int convert_graph(json_t *root, void *out, char *err, size_t errlen)
{
    return from_json(root, out, err, errlen);
}

int pf_graph_from_json(json_t *root, const char *label, pf_graph_t **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    return pf_json_convert(root, label, convert_graph, out, err, errlen);
}

int pf_graph_load_buffer(const char *text, size_t len, const char *label, pf_graph_t **out,
                         char *err, size_t errlen)
{
    *out = NULL;
    return pf_json_read_buffer(text, len, label, convert_graph, out, err, errlen);
}

int pf_graph_load(const char *path, pf_graph_t **out, char *err, size_t errlen)
{
    *out = NULL;
    return pf_json_read_file(path, convert_graph, out, err, errlen);
}

static void write_shape(pf_json_writer_t *w, const char *key, const pf_shape_t *s)
{
    if (s->ndim == 0)
        return;
    pf_json_writer_key(w, key);
    pf_json_writer_arr_begin_inline(w);
    for (int i = 0; i < s->ndim; i++)
        pf_json_writer_int(w, s->dim[i]);
    pf_json_writer_arr_end(w);
}

/* Only what is known: 0 (unknown) is left out, as in a version 1 file. */
static void write_work(pf_json_writer_t *w, const pf_op_work_t *k)
{
    const struct {
        const char *key;
        double v;
    } f[] = {{"fwd_flops", k->fwd_flops},
             {"bwd_flops", k->bwd_flops},
             {"bytes_read", k->bytes_read},
             {"bytes_written", k->bytes_written}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].v > 0) {
            pf_json_writer_key(w, f[i].key);
            pf_json_writer_num(w, f[i].v);
        }
    }
    if (k->gemm_m <= 0)
        return;
    pf_json_writer_key(w, "gemm");
    pf_json_writer_obj_begin_inline(w);
    pf_json_writer_key(w, "m"); pf_json_writer_int(w, k->gemm_m);
    pf_json_writer_key(w, "n"); pf_json_writer_int(w, k->gemm_n);
    pf_json_writer_key(w, "k"); pf_json_writer_int(w, k->gemm_k);
    pf_json_writer_key(w, "batch"); pf_json_writer_int(w, k->gemm_batch);
    pf_json_writer_obj_end(w);
}

static void emit_graph(pf_json_writer_t *w, const void *ctx)
{
    const pf_graph_t *g = ctx;
    pf_json_writer_obj_begin(w);
    pf_json_writer_key(w, "version");
    pf_json_writer_int(w, PF_GRAPH_VERSION);
    pf_json_writer_key(w, "name");
    pf_json_writer_str(w, g->name);
    pf_json_writer_key(w, "microbatch");
    pf_json_writer_int(w, g->microbatch);
    if (g->device_model) {
        pf_json_writer_key(w, "device_model");
        pf_json_writer_str(w, g->device_model);
    }
    write_arch(w, g);
    pf_json_writer_key(w, "ops");
    pf_json_writer_arr_begin(w);
    for (int i = 0; i < g->nops; i++) {
        const pf_op_t *o = &g->ops[i];
        pf_json_writer_obj_begin_inline(w);
        pf_json_writer_key(w, "id"); pf_json_writer_int(w, o->id);
        pf_json_writer_key(w, "name"); pf_json_writer_str(w, o->name);
        pf_json_writer_key(w, "type"); pf_json_writer_str(w, o->type);
        pf_json_writer_key(w, "fwd_ms"); pf_json_writer_num(w, o->fwd_ms);
        pf_json_writer_key(w, "bwd_ms"); pf_json_writer_num(w, o->bwd_ms);
        pf_json_writer_key(w, "param_bytes"); pf_json_writer_num(w, o->param_bytes);
        pf_json_writer_key(w, "mem_fwd_bytes"); pf_json_writer_num(w, o->mem_fwd_bytes);
        pf_json_writer_key(w, "mem_bwd_bytes"); pf_json_writer_num(w, o->mem_bwd_bytes);
        write_shape(w, "weight", &o->weight);
        write_shape(w, "input", &o->input);
        write_shape(w, "output", &o->output);
        write_work(w, &o->work);
        pf_json_writer_obj_end(w);
    }
    pf_json_writer_arr_end(w);
    pf_json_writer_key(w, "edges");
    pf_json_writer_arr_begin(w);
    for (int e = 0; e < g->nedges; e++) {
        pf_json_writer_obj_begin_inline(w);
        pf_json_writer_key(w, "src"); pf_json_writer_int(w, g->ops[g->edges[e].src].id);
        pf_json_writer_key(w, "dst"); pf_json_writer_int(w, g->ops[g->edges[e].dst].id);
        pf_json_writer_key(w, "bytes"); pf_json_writer_num(w, g->edges[e].bytes);
        pf_json_writer_obj_end(w);
    }
    pf_json_writer_arr_end(w);
    pf_json_writer_obj_end(w);
}

int pf_graph_save(const pf_graph_t *g, const char *path, char *err, size_t errlen)
{
    return pf_json_save(path, emit_graph, g, err, errlen);
}
