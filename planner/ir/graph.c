#include "planner/ir/graph.h"
#include "planner/core/json.h"
#include "planner/core/json_stream.h"
#include "planner/ir/arch.h"
#include "planner/ir/devmodel.h"
#include "planner/ir/graph_json.h"
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
    pf_devmodel_t *device; /* that model when it is no preset; NULL: the preset of the name */
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
    if (h && pf_graph_copy_device(h, g) != PF_OK)
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

int pf_graph_set_device_model(pf_graph_t *g, const char *name)
{
    char *copy = NULL;
    if (name && !(copy = pf_strdup(name)))
        return PF_ERR;
    free(g->device_model);
    g->device_model = copy;
    pf_devmodel_destroy(&g->device);
    return PF_OK;
}

const char *pf_graph_device_model(const pf_graph_t *g) { return g->device_model; }

int pf_graph_set_device(pf_graph_t *g, const pf_devmodel_t *dm)
{
    int carried = dm && !pf_devmodel_as_preset(dm);
    pf_devmodel_t *copy = carried ? pf_devmodel_copy(dm) : NULL;
    if ((carried && !copy) ||
        pf_graph_set_device_model(g, dm ? pf_devmodel_spec(dm)->name : NULL) != PF_OK) {
        pf_devmodel_destroy(&copy);
        return PF_ERR;
    }
    g->device = copy;
    return PF_OK;
}

const pf_devmodel_t *pf_graph_device(const pf_graph_t *g)
{
    return g->device ? g->device : g->device_model ? pf_devmodel_preset(g->device_model) : NULL;
}

/* A carried model is never a preset's equal (set_device): copied without comparing again. */
int pf_graph_copy_device(pf_graph_t *h, const pf_graph_t *g)
{
    pf_devmodel_t *copy = g->device ? pf_devmodel_copy(g->device) : NULL;
    if ((g->device && !copy) || pf_graph_set_device_model(h, g->device_model) != PF_OK) {
        pf_devmodel_destroy(&copy);
        return PF_ERR;
    }
    h->device = copy;
    return PF_OK;
}

void pf_graph_destroy(pf_graph_t **gp)
{
    if (!gp || !*gp)
        return;
    pf_graph_t *g = *gp;
    free(g->device_model);
    pf_devmodel_destroy(&g->device);
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

/* pf_check_range on ops[i].key (edges[i].key), the place written only for a value out of range:
 * a 200,000-op graph has two million values to check and printing each place was a tenth of
 * reading it (issue 26 item 7). */
static int check_value(double v, double max, const char *unit, const char *array, int i,
                       const char *key, char *err, size_t errlen)
{
    char where[80];
    if (isfinite(v) && v >= 0 && v <= max)
        return PF_OK;
    snprintf(where, sizeof where, "%s[%d].%s", array, i, key);
    return pf_check_range(v, max, unit, where, err, errlen);
}

/* pf_check_name on ops[i].key, the same way. */
static int check_op_name(const char *name, int i, const char *key, char *err, size_t errlen)
{
    char where[64];
    if (pf_check_name(name, "", NULL, 0) == PF_OK)
        return PF_OK;
    snprintf(where, sizeof where, "ops[%d].%s", i, key);
    return pf_check_name(name, where, err, errlen);
}

/* A GEMM shape's dimensions are counts: up to 2^53, where doubles still count them exactly. */
#define GEMM_DIM_MAX ((int64_t)1 << 53)

/* ops[i]'s work (graph.h): FLOPs and bytes within util.h's bounds; a GEMM shape is all four
 * dimensions positive, or none (gemm_m = ... = 0: not a GEMM). */
static int check_work(const pf_op_work_t *w, int i, char *err, size_t errlen)
{
    int rc;
    const struct {
        const char *key, *unit;
        double v, max;
    } f[] = {{"fwd_flops", "FLOPs", w->fwd_flops, PF_MAX_FLOPS},
             {"bwd_flops", "FLOPs", w->bwd_flops, PF_MAX_FLOPS},
             {"bytes_read", "bytes", w->bytes_read, PF_MAX_BYTES},
             {"bytes_written", "bytes", w->bytes_written, PF_MAX_BYTES}};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
        if ((rc = check_value(f[k].v, f[k].max, f[k].unit, "ops", i, f[k].key, err, errlen)))
            return rc;
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
    int rc;
    if ((rc = pf_check_name(g->name, "graph.name", err, errlen)) != PF_OK)
        return rc;
    for (int i = 0; i < g->nops; i++) {
        const pf_op_t *o = &g->ops[i];
        if (o->id < 0)
            return pf_fail(err, errlen, PF_EINPUT, "ops[%d].id: negative (%lld)", i,
                           (long long)o->id);
        if ((rc = check_op_name(o->name, i, "name", err, errlen)) ||
            (rc = check_op_name(o->type, i, "type", err, errlen)))
            return rc;
        const struct {
            const char *key, *unit;
            double v, max;
        } f[] = {{"fwd_ms", "ms", o->fwd_ms, PF_MAX_MS},
                 {"bwd_ms", "ms", o->bwd_ms, PF_MAX_MS},
                 {"param_bytes", "bytes", o->param_bytes, PF_MAX_BYTES},
                 {"mem_fwd_bytes", "bytes", o->mem_fwd_bytes, PF_MAX_BYTES},
                 {"mem_bwd_bytes", "bytes", o->mem_bwd_bytes, PF_MAX_BYTES}};
        for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
            if ((rc = check_value(f[k].v, f[k].max, f[k].unit, "ops", i, f[k].key, err, errlen)))
                return rc;
        if ((rc = check_work(&o->work, i, err, errlen)) != PF_OK)
            return rc;
    }
    for (int e = 0; e < g->nedges; e++) {
        const pf_edge_t *ed = &g->edges[e];
        if ((rc = check_value(ed->bytes, PF_MAX_BYTES, "bytes", "edges", e, "bytes", err,
                              errlen)))
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

/* Reading a graph file, shared by the tree reader (pf_graph_from_json: a parsed root) and the
 * streaming one (pf_graph_load, pf_graph_load_buffer: json_stream.h, no tree of the whole file):
 * both take the ops and edges one element at a time, keep the first bad one, and report it
 * after the top level's keys in the order the checks below run, so that the two give the same
 * graph and the same message for the same text whatever the order of the keys in the file. */
typedef pf_graph_json_edge_t raw_edge_t; /* endpoints are file ids until all ops are read */

#define READ_ERRLEN 1024

typedef struct {
    pf_graph_t *g;      /* the ops read so far; name and micro-batch set by check_header */
    raw_edge_t *edges;  /* the edges read before the first bad one */
    size_t nedges, edges_cap;
    size_t nops_seen, nedges_seen; /* elements of the file's "ops" and "edges" */
    int op_rc, edge_rc;            /* the first bad op and edge (PF_OK: none yet) */
    char op_err[READ_ERRLEN], edge_err[READ_ERRLEN];
} reading_t;

static int reading_init(reading_t *r)
{
    memset(r, 0, sizeof *r);
    r->g = pf_graph_new(NULL, 1);
    return r->g ? PF_OK : PF_ERR;
}

static void reading_free(reading_t *r)
{
    pf_graph_destroy(&r->g);
    free(r->edges);
}

/* ops[i], the next element of "ops" (i counted here). */
static void take_op(reading_t *r, json_t *o)
{
    size_t i = r->nops_seen++;
    char path[48];
    pf_op_t op = {0};
    if (r->op_rc != PF_OK || i >= PF_GRAPH_JSON_MAX_OPS)
        return;
    snprintf(path, sizeof path, "ops[%zu]", i);
    r->op_rc = pf_graph_json_op(o, path, &op, r->op_err, sizeof r->op_err);
    if (r->op_rc == PF_OK && pf_graph_add_op(r->g, &op) < 0)
        r->op_rc = pf_fail(r->op_err, sizeof r->op_err, PF_ERR, "out of memory");
}

/* edges[j], the next element of "edges": its endpoints are file ids, looked up later. */
static void take_edge(reading_t *r, json_t *e)
{
    size_t j = r->nedges_seen++;
    char path[48];
    raw_edge_t x;
    if (r->edge_rc != PF_OK || j >= PF_GRAPH_JSON_MAX_EDGES)
        return;
    snprintf(path, sizeof path, "edges[%zu]", j);
    r->edge_rc = pf_graph_json_edge(e, path, &x, r->edge_err, sizeof r->edge_err);
    if (r->edge_rc == PF_OK &&
        pf_grow((void **)&r->edges, &r->edges_cap, r->nedges + 1, sizeof *r->edges) != 0)
        r->edge_rc = pf_fail(r->edge_err, sizeof r->edge_err, PF_ERR, "out of memory");
    else if (r->edge_rc == PF_OK)
        r->edges[r->nedges++] = x;
}

/* The edges read, by op index; the graph's own id index is built by finalize. */
static int resolve_edges(reading_t *r, char *err, size_t errlen)
{
    int n = r->g->nops, rc = PF_OK;
    id_index_t *ids = id_index_new(r->g);
    if (!ids)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (size_t j = 0; j < r->nedges && rc == PF_OK; j++) {
        const raw_edge_t *x = &r->edges[j];
        int s = lookup_id(ids, n, x->src), d = lookup_id(ids, n, x->dst);
        if (s < 0 || d < 0)
            rc = pf_fail(err, errlen, PF_EINPUT, "edges[%zu]: %s %lld is not an op", j,
                         s < 0 ? "src" : "dst", (long long)(s < 0 ? x->src : x->dst));
        else if (pf_graph_add_edge(r->g, s, d, x->bytes) < 0)
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    free(ids);
    return rc;
}

/* The top level's keys ("ops" and "edges" need only be arrays here: their elements went
 * through take_op and take_edge), then the graph's name, micro-batch and device model. */
static int check_header(reading_t *r, json_t *root, char *err, size_t errlen)
{
    json_t *ops, *edges;
    const char *name, *device_model = NULL;
    int64_t mb, version;
    int rc;
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
    if (r->nops_seen > PF_GRAPH_JSON_MAX_OPS || r->nedges_seen > PF_GRAPH_JSON_MAX_EDGES)
        return pf_fail(err, errlen, PF_EINPUT, "graph: too many ops or edges");
    if ((rc = pf_json_get_string(root, "graph", "device_model", 0, NULL, &device_model, err,
                                 errlen)))
        return rc;
    if (device_model && (!*device_model || strlen(device_model) > PF_GRAPH_DEVICE_MODEL_MAX))
        return pf_fail(err, errlen, PF_EINPUT, "graph.device_model: empty or longer than %d bytes",
                       PF_GRAPH_DEVICE_MODEL_MAX);
    char *copy = pf_strdup(name);
    if (!copy || pf_graph_set_device_model(r->g, device_model) != PF_OK) {
        free(copy);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    free(r->g->name);
    r->g->name = copy;
    r->g->microbatch = (int)mb;
    pf_arch_t arch;
    pf_devmodel_t *device = NULL;
    int has_arch;
    if ((rc = pf_graph_json_extras(root, device_model, &arch, &has_arch, &device, err, errlen)))
        return rc;
    if ((has_arch && pf_graph_set_arch(r->g, &arch) != PF_OK) ||
        (device && pf_graph_set_device(r->g, device) != PF_OK))
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
    pf_devmodel_destroy(&device);
    return rc;
}

/* After the last element: the checks in the tree reader's order, then the graph's own. */
static int finish(reading_t *r, json_t *root, pf_graph_t **out, char *err, size_t errlen)
{
    int rc;
    if ((rc = check_header(r, root, err, errlen)) != PF_OK)
        return rc;
    if (r->op_rc != PF_OK)
        return pf_fail(err, errlen, r->op_rc, "%s", r->op_err);
    if ((rc = resolve_edges(r, err, errlen)) != PF_OK)
        return rc;
    if (r->edge_rc != PF_OK)
        return pf_fail(err, errlen, r->edge_rc, "%s", r->edge_err);
    if ((rc = check_repeated_edges(r->g, err, errlen)) ||
        (rc = pf_graph_finalize(r->g, err, errlen)))
        return rc;
    *out = r->g;
    r->g = NULL;
    return PF_OK;
}

static int convert_graph(json_t *root, void *out, char *err, size_t errlen)
{
    reading_t r;
    if (reading_init(&r) != PF_OK)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    json_t *ops = json_object_get(root, "ops"), *edges = json_object_get(root, "edges");
    for (size_t i = 0; i < json_array_size(ops); i++)
        take_op(&r, json_array_get(ops, i));
    for (size_t j = 0; j < json_array_size(edges); j++)
        take_edge(&r, json_array_get(edges, j));
    int rc = finish(&r, root, out, err, errlen);
    reading_free(&r);
    return rc;
}

int pf_graph_from_json(json_t *root, const char *label, pf_graph_t **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    return pf_json_convert(root, label, convert_graph, out, err, errlen);
}

/* The rest of a member's array, element by element. */
static int stream_array(pf_json_stream_t *s, reading_t *r, int is_ops, char *err, size_t errlen)
{
    json_t *e;
    int rc;
    while ((rc = pf_json_stream_element(s, &e, err, errlen)) == 1) {
        if (is_ops)
            take_op(r, e);
        else
            take_edge(r, e);
        json_decref(e);
    }
    return rc;
}

/* The top level's members: "ops" and "edges" streamed (an empty array stands in for each in
 * `top`), the others parsed whole into `top`. */
static int stream_members(pf_json_stream_t *s, reading_t *r, json_t *top, char *err,
                          size_t errlen)
{
    const char *key;
    int rc;
    while ((rc = pf_json_stream_next(s, &key, err, errlen)) == 1) {
        int is_ops = strcmp(key, "ops") == 0;
        json_t *v = NULL;
        if ((is_ops || strcmp(key, "edges") == 0) && pf_json_stream_at_array(s)) {
            rc = stream_array(s, r, is_ops, err, errlen);
            v = json_array();
        } else {
            rc = pf_json_stream_value(s, &v, err, errlen);
        }
        if (rc != PF_OK) {
            json_decref(v);
            return rc;
        }
        if (!v || json_object_set_new(top, key, v) != 0)
            return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    return rc;
}

int pf_graph_load_buffer(const char *text, size_t len, const char *label, pf_graph_t **out,
                         char *err, size_t errlen)
{
    pf_json_stream_t *s = NULL;
    json_t *top = NULL;
    reading_t r = {0};
    *out = NULL;
    int rc = pf_json_stream_open(text, len, label, &s, err, errlen);
    if (rc != PF_OK)
        return rc;
    if (!(top = json_object()) || reading_init(&r) != PF_OK) {
        rc = pf_fail(err, errlen, PF_ERR, "%s: out of memory", label);
        goto done;
    }
    rc = stream_members(s, &r, top, err, errlen);
    if (rc == PF_JSON_STREAM_TREE) { /* what the stream does not follow: one tree */
        json_t *root = pf_json_stream_tree(s);
        rc = pf_graph_from_json(root, label, out, err, errlen);
        json_decref(root);
    } else if (rc == PF_OK && (rc = finish(&r, top, out, err, errlen)) != PF_OK) {
        pf_err_prefix(err, errlen, label);
    }
done:
    reading_free(&r);
    json_decref(top);
    pf_json_stream_destroy(&s);
    return rc;
}

int pf_graph_load(const char *path, pf_graph_t **out, char *err, size_t errlen)
{
    char *text;
    size_t len;
    *out = NULL;
    int rc = pf_json_stream_read_file(path, &text, &len, err, errlen);
    if (rc != PF_OK)
        return rc;
    rc = pf_graph_load_buffer(text, len, path && strcmp(path, "-") ? path : "<stdin>", out, err,
                              errlen);
    free(text);
    return rc;
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
    if (g->device) {
        pf_json_writer_key(w, "device");
        pf_devmodel_write(g->device, w);
    }
    if (g->arch) {
        pf_json_writer_key(w, "model");
        pf_arch_write(g->arch, w);
    }
    pf_json_writer_key(w, "ops");
    pf_json_writer_arr_begin(w);
    for (int i = 0; i < g->nops; i++)
        pf_graph_json_write_op(w, &g->ops[i]);
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
