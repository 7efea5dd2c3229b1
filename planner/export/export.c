#include "planner/export/export.h"
#include "planner/export/export_megatron.h"
#include "planner/ir/training.h"
#include "planner/core/util.h"

#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

struct pf_export {
    const pf_plan_t *p;
    const pf_graph_t *g;
    const pf_cluster_t *c;
    int S, R, T, world;
    int layers;
    int *stage_layers, *stage_first; /* S entries */
    int *plan_dev, *run_dev;         /* world entries: rank -> device */
    int nnodes;
    pf_export_node_t *nodes;
    int exact;
    char reason[512];
};

static const char *const kind_names[] = {"megatron", "deepspeed", "torchrun"};

int pf_export_parse_kind(const char *s, pf_export_kind_t *kind)
{
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, kind_names[i])) {
            *kind = (pf_export_kind_t)i;
            return PF_OK;
        }
    return PF_EINPUT;
}

const char *pf_export_kind_name(pf_export_kind_t kind)
{
    return (unsigned)kind < 3 ? kind_names[kind] : "?";
}

int pf_export_device(const pf_plan_t *p, int s, int r, int k)
{
    const int *d = p->stage_list[s].devices;
    return d ? d[r * p->tensor_parallel + k] : -1;
}

int pf_export_rank(const pf_plan_t *p, int s, int r, int k)
{
    return s * p->replicas * p->tensor_parallel + r * p->tensor_parallel + k;
}

/* ---- layer alignment ---- */

typedef struct {
    const char *name;
    size_t len; /* block prefix length */
    int pos;    /* topological position */
    int v;
} block_op_t;

static int cmp_block_name(const block_op_t *x, const block_op_t *y)
{
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

/* by block name, then topological position */
static int cmp_block_op(const void *a, const void *b)
{
    const block_op_t *x = a, *y = b;
    int c = cmp_block_name(x, y);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

static int cmp_int_pair(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* block_of[v]: the ordinal of op v's block (named like layers.N.*) in topological order of
 * the blocks' first ops, -1 outside any; returns the number of blocks, -1 out of memory. */
static int number_blocks(const pf_graph_t *g, int *block_of)
{
    int n = pf_graph_nops(g), nb = 0, nbo = 0;
    const int *pos = pf_graph_topo_pos(g);
    block_op_t *bo = malloc((size_t)(n ? n : 1) * sizeof *bo);
    int *first = malloc((size_t)(n ? n : 1) * 2 * sizeof *first); /* (first pos, block) pairs */
    int *ordinal = malloc((size_t)(n ? n : 1) * sizeof *ordinal);
    if (!bo || !first || !ordinal) {
        nb = -1;
        goto done;
    }
    for (int v = 0; v < n; v++) {
        block_of[v] = -1;
        const char *name = pf_graph_op(g, v)->name;
        size_t len = name ? pf_training_block_len(name) : 0;
        if (len)
            bo[nbo++] = (block_op_t){name, len, pos[v], v};
    }
    /* group ops by block name; a block's first op (topologically) orders the blocks */
    qsort(bo, (size_t)nbo, sizeof *bo, cmp_block_op);
    for (int i = 0; i < nbo; i++) {
        if (i == 0 || cmp_block_name(&bo[i - 1], &bo[i]) != 0) {
            first[2 * nb] = bo[i].pos;
            first[2 * nb + 1] = nb;
            nb++;
        }
        block_of[bo[i].v] = nb - 1;
    }
    qsort(first, (size_t)nb, 2 * sizeof *first, cmp_int_pair);
    for (int i = 0; i < nb; i++)
        ordinal[first[2 * i + 1]] = i;
    for (int v = 0; v < n; v++)
        if (block_of[v] >= 0)
            block_of[v] = ordinal[block_of[v]];
done:
    free(bo);
    free(first);
    free(ordinal);
    return nb;
}

/* bstage[b]: the one stage block b is in (bfirst[b] its first op); ops outside blocks only in
 * the first or last stage. */
static int block_stages(const pf_export_t *x, const int *op_stage, const int *block_of,
                        int *bstage, int *bfirst, char *err, size_t errlen)
{
    const pf_graph_t *g = x->g;
    const int *topo = pf_graph_topo(g);
    for (int i = 0; i < pf_graph_nops(g); i++) {
        int v = topo[i], s = op_stage[v], b = block_of[v];
        const char *name = pf_graph_op(g, v)->name;
        if (b < 0) {
            if (s != 0 && s != x->S - 1)
                return pf_fail(err, errlen, PF_EINPUT, "op %s is in no block and in stage %d: "
                               "only the first and the last stage may hold ops outside the "
                               "layers (embedding, head)", name, s);
        } else if (bstage[b] < 0) {
            bstage[b] = s;
            bfirst[b] = v;
        } else if (bstage[b] != s) {
            int a = bstage[b], later = s > a ? s : a, earlier = s > a ? a : s;
            const char *w = pf_graph_op(g, bfirst[b])->name;
            return pf_fail(err, errlen, PF_EINPUT, "stage %d cuts block %.*s: ops %s .. in "
                           "stage %d, %s .. in stage %d", later,
                           (int)pf_training_block_len(name), name, s > a ? name : w, later,
                           s > a ? w : name, earlier);
        }
    }
    return PF_OK;
}

/* Blocks in consecutive stages, every stage at least one: stage_layers and stage_first. */
static int place_blocks(pf_export_t *x, int nb, const int *bstage, const int *bfirst, char *err,
                        size_t errlen)
{
    const pf_graph_t *g = x->g;
    for (int b = 1; b < nb; b++)
        if (bstage[b] < bstage[b - 1]) {
            const char *u = pf_graph_op(g, bfirst[b - 1])->name, *w = pf_graph_op(g, bfirst[b])->name;
            return pf_fail(err, errlen, PF_EINPUT, "block %.*s (stage %d) comes after block %.*s "
                           "(stage %d): stages must hold consecutive blocks",
                           (int)pf_training_block_len(w), w, bstage[b],
                           (int)pf_training_block_len(u), u, bstage[b - 1]);
        }
    for (int b = 0; b < nb; b++)
        x->stage_layers[bstage[b]]++;
    for (int s = 0, at = 0; s < x->S; s++) {
        if (x->stage_layers[s] == 0)
            return pf_fail(err, errlen, PF_EINPUT, "stage %d holds no block: Megatron-LM and "
                           "DeepSpeed give every pipeline stage whole layers", s);
        x->stage_first[s] = at;
        at += x->stage_layers[s];
    }
    return PF_OK;
}

static int find_layers(pf_export_t *x, char *err, size_t errlen)
{
    int n = pf_graph_nops(x->g), rc = PF_ERR, nb;
    int *op_stage = pf_plan_op_stage(x->p, n);
    int *block_of = malloc((size_t)(n ? n : 1) * sizeof *block_of);
    int *bstage = malloc((size_t)(n ? n : 1) * sizeof *bstage);
    int *bfirst = malloc((size_t)(n ? n : 1) * sizeof *bfirst);
    if (!op_stage || !block_of || !bstage || !bfirst ||
        (nb = number_blocks(x->g, block_of)) < 0) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    if (nb == 0) {
        rc = pf_fail(err, errlen, PF_EINPUT, "the graph has no repeated blocks (ops named like "
                     "layers.N.*): nothing to split into layers");
        goto fail;
    }
    for (int b = 0; b < nb; b++)
        bstage[b] = -1;
    if ((rc = block_stages(x, op_stage, block_of, bstage, bfirst, err, errlen)) ||
        (rc = place_blocks(x, nb, bstage, bfirst, err, errlen)))
        goto fail;
    x->layers = nb;
    rc = PF_OK;
fail:
    free(op_stage);
    free(block_of);
    free(bstage);
    free(bfirst);
    return rc;
}

/* ---- launch layout ---- */

/* Host name: the device name's prefix before '/', when it is a plain hostname. */
static void host_name(const pf_device_t *d, char *out, size_t len)
{
    const char *slash = d->name ? strchr(d->name, '/') : NULL;
    size_t n = slash ? (size_t)(slash - d->name) : 0;
    int ok = n > 0 && n < len;
    for (size_t i = 0; ok && i < n; i++) {
        unsigned char ch = (unsigned char)d->name[i];
        ok = isalnum(ch) || ch == '.' || ch == '_' || ch == '-';
    }
    if (ok)
        snprintf(out, len, "%.*s", (int)n, d->name);
    else
        snprintf(out, len, "host%d", d->host);
}

/* K of "<host>/gpuK", or -1. */
static int gpu_suffix(const char *name)
{
    const char *slash = name ? strrchr(name, '/') : NULL;
    if (!slash || strncmp(slash + 1, "gpu", 3) || !isdigit((unsigned char)slash[4]))
        return -1;
    char *end;
    long k = strtol(slash + 4, &end, 10);
    return *end || k > 1 << 20 ? -1 : (int)k;
}

/* local[d] for every device of `host`: its gpuK suffix when all of the host's are distinct,
 * else its position among the host's devices. */
static void local_indices(const pf_cluster_t *c, int host, int *local)
{
    int D = pf_cluster_ndevices(c), named = 1, at = 0;
    for (int d = 0; d < D && named; d++) {
        if (pf_cluster_device(c, d)->host != host)
            continue;
        int k = gpu_suffix(pf_cluster_device(c, d)->name);
        for (int e = 0; e < d && k >= 0; e++)
            if (pf_cluster_device(c, e)->host == host && local[e] == k)
                k = -1;
        local[d] = k;
        named = k >= 0;
    }
    for (int d = 0; d < D; d++)
        if (pf_cluster_device(c, d)->host == host)
            local[d] = named ? local[d] : at++;
}

/* The hosts in use, in order of their first rank (x->nodes), node_of[rank]; returns a node
 * whose ranks are not one block (-1: none), -2 out of memory. */
static int gather_nodes(pf_export_t *x, int *node_of)
{
    const pf_cluster_t *c = x->c;
    size_t cap = 0;
    int bad = -1;
    for (int gr = 0; gr < x->world; gr++) {
        int h = pf_cluster_device(c, x->plan_dev[gr])->host, n = 0;
        while (n < x->nnodes && x->nodes[n].host != h)
            n++;
        if (n == x->nnodes) {
            if (pf_grow((void **)&x->nodes, &cap, (size_t)n + 1, sizeof *x->nodes))
                return -2;
            memset(&x->nodes[n], 0, sizeof x->nodes[n]);
            x->nodes[n].host = h;
            x->nodes[n].first_rank = gr;
            x->nnodes++;
        }
        x->nodes[n].nproc++;
        node_of[gr] = n;
    }
    for (int gr = 0; gr < x->world; gr++) {
        const pf_export_node_t *nd = &x->nodes[node_of[gr]];
        if (gr >= nd->first_rank + nd->nproc && bad < 0)
            bad = node_of[gr];
    }
    return bad;
}

/* Node n's ranks (one block from at) and their devices: ranks whose planned device is on the
 * node keep it, the others take the node's remaining planned devices in rank order. */
static int node_devices(pf_export_t *x, int n, int at, const int *node_of, int *local, int *taken)
{
    const pf_cluster_t *c = x->c;
    pf_export_node_t *nd = &x->nodes[n];
    nd->node_rank = n;
    nd->first_rank = at;
    for (int d = 0; d < pf_cluster_ndevices(c); d++)
        if (pf_cluster_device(c, d)->host == nd->host) {
            host_name(pf_cluster_device(c, d), nd->name, sizeof nd->name);
            break;
        }
    local_indices(c, nd->host, local);
    if (!(nd->gpus = malloc((size_t)nd->nproc * sizeof *nd->gpus)))
        return PF_ERR;
    for (int l = 0; l < nd->nproc; l++) {
        int gr = nd->first_rank + l;
        x->run_dev[gr] = node_of[gr] == n ? x->plan_dev[gr] : -1;
        if (x->run_dev[gr] >= 0)
            taken[x->run_dev[gr]] = 1;
    }
    for (int l = 0, gr2 = 0; l < nd->nproc; l++) {
        int gr = nd->first_rank + l;
        if (x->run_dev[gr] < 0) {
            while (node_of[gr2] != n || taken[x->plan_dev[gr2]])
                gr2++;
            x->run_dev[gr] = x->plan_dev[gr2];
            taken[x->plan_dev[gr2]] = 1;
        }
        nd->gpus[l] = local[x->run_dev[gr]];
    }
    return PF_OK;
}

/* Why the layout is not the plan's: node `bad`'s ranks are not one block. */
static void explain_inexact(pf_export_t *x, const int *node_of, int bad)
{
    int kept = 0, len = 0, listed = 0, W = x->world;
    for (int gr = 0; gr < W; gr++)
        kept += x->run_dev[gr] == x->plan_dev[gr];
    char ranks[160] = "";
    for (int gr = 0; gr < W && len < (int)sizeof ranks - 1; gr++)
        if (node_of[gr] == bad) {
            len += snprintf(ranks + len, sizeof ranks - (size_t)len, "%s%d",
                            listed ? ", " : "", gr);
            if (++listed == 8 && x->nodes[bad].nproc > 8) {
                snprintf(ranks + len, sizeof ranks - (size_t)len, ", ...");
                break;
            }
        }
    snprintf(x->reason, sizeof x->reason,
             "torchrun gives each node one contiguous block of ranks, but the plan puts ranks "
             "%s on %s; this layout keeps %d of %d ranks on their planned devices", ranks,
             x->nodes[bad].name, kept, W);
}

static int build_layout(pf_export_t *x, char *err, size_t errlen)
{
    int D = pf_cluster_ndevices(x->c), W = x->world, rc = PF_ERR, bad;
    int *node_of = malloc((size_t)W * sizeof *node_of), *local = malloc((size_t)D * sizeof *local);
    int *taken = calloc((size_t)D, sizeof *taken);
    if (!node_of || !local || !taken || (bad = gather_nodes(x, node_of)) == -2)
        goto oom;
    x->exact = bad < 0;
    for (int n = 0, at = 0; n < x->nnodes; at += x->nodes[n].nproc, n++)
        if (node_devices(x, n, at, node_of, local, taken))
            goto oom;
    /* two hosts with one prefix: fall back to host<H> for both */
    for (int a = 0; a < x->nnodes; a++)
        for (int b = a + 1; b < x->nnodes; b++)
            if (!strcmp(x->nodes[a].name, x->nodes[b].name)) {
                snprintf(x->nodes[a].name, sizeof x->nodes[a].name, "host%d", x->nodes[a].host);
                snprintf(x->nodes[b].name, sizeof x->nodes[b].name, "host%d", x->nodes[b].host);
            }
    if (bad >= 0)
        explain_inexact(x, node_of, bad);
    rc = PF_OK;
    goto done;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "out of memory");
done:
    free(node_of);
    free(local);
    free(taken);
    return rc;
}

/* ---- construction ---- */

static int check_devices(const pf_export_t *x, char *err, size_t errlen)
{
    int D = pf_cluster_ndevices(x->c);
    char *used = calloc((size_t)D, 1);
    if (!used)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    int rc = PF_OK;
    for (int s = 0; s < x->S && rc == PF_OK; s++) {
        if (!x->p->stage_list[s].devices) {
            rc = pf_fail(err, errlen, PF_EINPUT, "stage %d has no devices: export needs a mapped "
                         "plan (planfarm map or plan)", s);
            break;
        }
        for (int r = 0; r < x->R && rc == PF_OK; r++)
            for (int k = 0; k < x->T && rc == PF_OK; k++) {
                int d = pf_export_device(x->p, s, r, k);
                if (d < 0 || d >= D)
                    rc = pf_fail(err, errlen, PF_EINPUT, "stage %d replica %d tensor-parallel "
                                 "rank %d: no device", s, r, k);
                else if (used[d]++)
                    rc = pf_fail(err, errlen, PF_EINPUT, "stage %d replica %d tensor-parallel "
                                 "rank %d: device %s is used twice", s, r, k,
                                 pf_cluster_device(x->c, d)->name);
            }
    }
    free(used);
    return rc;
}

/* A plan whose stages differ (issue 24) has no Megatron-LM or DeepSpeed form: both (and the rank
 * order above) give every stage R x T ranks. PF_EINFEASIBLE naming each run of stages alike. */
static int check_uniform(const pf_plan_t *p, char *err, size_t errlen)
{
    if (!pf_plan_degrees_mixed(p))
        return PF_OK;
    char runs[512] = "";
    size_t at = 0;
    for (int s = 0, e; s < p->stages && at < sizeof runs; s = e + 1) {
        int d = pf_plan_degrees_replicas(p, s), t = pf_plan_degrees_tp(p, s);
        for (e = s; e + 1 < p->stages && pf_plan_degrees_replicas(p, e + 1) == d &&
                    pf_plan_degrees_tp(p, e + 1) == t;
             e++)
            ;
        int n = e > s ? snprintf(runs + at, sizeof runs - at, "%sstages %d-%d run %d x %d",
                                 s ? ", " : "", s, e, d, t)
                      : snprintf(runs + at, sizeof runs - at, "%sstage %d runs %d x %d%s",
                                 s ? ", " : "", s, d, t, s ? "" : " devices");
        at += n > 0 ? (size_t)n : 0;
    }
    return pf_fail(err, errlen, PF_EINFEASIBLE,
                   "%s: Megatron-LM and DeepSpeed run one data- and tensor-parallel degree for "
                   "every stage; this plan needs a runtime with heterogeneous stages such as "
                   "PipeDream's or Piper's", runs);
}

pf_export_t *pf_export_new(const pf_plan_t *p, const pf_graph_t *g, const pf_cluster_t *c,
                           int *rcp, char *err, size_t errlen)
{
    int rc = PF_EINPUT;
    pf_export_t *x = calloc(1, sizeof *x);
    if (!x) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    x->p = p;
    x->g = g;
    x->c = c;
    x->S = p->stages;
    x->R = p->replicas;
    x->T = p->tensor_parallel;
    if (x->S < 1 || x->R < 1 || x->T < 1 || p->microbatches < 1) {
        pf_fail(err, errlen, rc, "plan: stages %d, replicas %d, tensor_parallel %d, microbatches "
                "%d must all be >= 1", x->S, x->R, x->T, p->microbatches);
        goto fail;
    }
    if ((rc = check_uniform(p, err, errlen)) != PF_OK)
        goto fail;
    rc = PF_EINPUT;
    if ((long long)x->S * x->R * x->T > pf_cluster_ndevices(c)) {
        pf_fail(err, errlen, rc, "plan: %d stages x %d replicas x %d tensor-parallel ranks exceed "
                "the cluster's %d devices", x->S, x->R, x->T, pf_cluster_ndevices(c));
        goto fail;
    }
    x->world = x->S * x->R * x->T;
    if ((rc = check_devices(x, err, errlen)) != PF_OK ||
        (rc = pf_plan_validate(p, g, c, err, errlen)) != PF_OK ||
        (rc = pf_training_check(&p->train, err, errlen)) != PF_OK)
        goto fail;
    rc = PF_ERR;
    size_t nstages = (unsigned)x->S, world = (unsigned)x->world;
    x->stage_layers = calloc(nstages, sizeof *x->stage_layers);
    x->stage_first = calloc(nstages, sizeof *x->stage_first);
    x->plan_dev = malloc(world * sizeof *x->plan_dev);
    x->run_dev = malloc(world * sizeof *x->run_dev);
    if (!x->stage_layers || !x->stage_first || !x->plan_dev || !x->run_dev) {
        pf_fail(err, errlen, rc, "out of memory");
        goto fail;
    }
    for (int s = 0; s < x->S; s++)
        for (int r = 0; r < x->R; r++)
            for (int k = 0; k < x->T; k++)
                x->plan_dev[pf_export_rank(p, s, r, k)] = pf_export_device(p, s, r, k);
    if ((rc = find_layers(x, err, errlen)) != PF_OK || (rc = build_layout(x, err, errlen)) != PF_OK)
        goto fail;
    if (rcp)
        *rcp = PF_OK;
    return x;
fail:
    pf_export_destroy(&x);
    if (rcp)
        *rcp = rc;
    return NULL;
}

void pf_export_destroy(pf_export_t **xp)
{
    if (!xp || !*xp)
        return;
    pf_export_t *x = *xp;
    for (int n = 0; n < x->nnodes; n++)
        free(x->nodes[n].gpus);
    free(x->nodes);
    free(x->stage_layers);
    free(x->stage_first);
    free(x->plan_dev);
    free(x->run_dev);
    free(x);
    *xp = NULL;
}

const pf_plan_t *pf_export_plan(const pf_export_t *x) { return x->p; }
int pf_export_layers(const pf_export_t *x) { return x->layers; }
int pf_export_stage_layers(const pf_export_t *x, int s) { return x->stage_layers[s]; }
int pf_export_stage_first_layer(const pf_export_t *x, int s) { return x->stage_first[s]; }
int pf_export_world(const pf_export_t *x) { return x->world; }
int pf_export_plan_rank_device(const pf_export_t *x, int g) { return x->plan_dev[g]; }
int pf_export_layout_rank_device(const pf_export_t *x, int g) { return x->run_dev[g]; }
int pf_export_nnodes(const pf_export_t *x) { return x->nnodes; }
const pf_export_node_t *pf_export_node(const pf_export_t *x, int n) { return &x->nodes[n]; }
int pf_export_exact(const pf_export_t *x) { return x->exact; }
const char *pf_export_reason(const pf_export_t *x) { return x->reason; }

/* The block search's choices when the plan has them (plan.h "blocks"), else the graph's
 * micro-batch, one virtual stage, and sequence parallelism with tensor parallelism (Megatron-LM's
 * advice; the plan did not count its memory savings). */
int pf_export_microbatch(const pf_export_t *x)
{
    const pf_plan_t *p = x->p;
    return p->blocks.present && p->blocks.microbatch_size > 0 ? p->blocks.microbatch_size
                                                              : pf_graph_microbatch(x->g);
}

int pf_export_virtual_stages(const pf_export_t *x)
{
    return x->p->blocks.present && x->p->blocks.virtual_stages > 1 ? x->p->blocks.virtual_stages
                                                                    : 1;
}

int pf_export_sequence_parallel(const pf_export_t *x)
{
    return x->T > 1 && (x->p->blocks.present ? x->p->blocks.sequence_parallel : 1);
}

/* One step trains microbatch x MB x R samples (DESIGN.md "Cost definitions"); under context
 * parallelism C the R = d x C replicas share each sequence C ways. */
int pf_export_global_batch(const pf_export_t *x)
{
    return pf_export_microbatch(x) * x->p->microbatches * x->R / pf_plan_context_parallel(x->p);
}

int pf_export_context_parallel(const pf_export_t *x) { return pf_plan_context_parallel(x->p); }

int pf_export_expert_parallel(const pf_export_t *x)
{
    return pf_plan_expert_parallel(x->p);
}

/* --context-parallel-size C and --expert-model-parallel-size E (_add_distributed_args), when
 * above 1. Megatron-LM orders ranks tp, cp, ep, dp, pp: the plan's replica r = dp x C + cp, so
 * its rank order (pp, replica, tp) is Megatron-LM's. */
static void megatron_cpep(const pf_export_t *x, FILE *f)
{
    int C = pf_export_context_parallel(x), E = pf_export_expert_parallel(x);
    if (C > 1)
        fprintf(f, "    # context parallelism: the %d replicas are %d data-parallel x %d "
                "context-parallel\n    --context-parallel-size %d\n", x->R, x->R / C, C, C);
    if (E > 1)
        fprintf(f, "    --expert-model-parallel-size %d\n", E);
}

/* ---- writers ---- */

static int finish(FILE *f, char *err, size_t errlen)
{
    if (fflush(f) != 0 || ferror(f))
        return pf_fail(err, errlen, PF_ERR, "write failed");
    return PF_OK;
}

/* Text from files (model, cluster and device names) inside comments: one line, printable. */
static void put_comment_text(FILE *f, const char *s)
{
    for (; s && *s; s++)
        fputc(isprint((unsigned char)*s) ? *s : '?', f);
}

static void put_header(const pf_export_t *x, FILE *f, const char *what, const char *lead)
{
    fprintf(f, "%s%s for plan ", lead, what);
    put_comment_text(f, x->p->model ? x->p->model : pf_graph_name(x->g));
    fprintf(f, " on ");
    put_comment_text(f, x->p->cluster ? x->p->cluster : pf_cluster_name(x->c));
    fprintf(f, " (planfarm export)\n");
}

/* Megatron-LM's names, from megatron/training/arguments.py (_add_distributed_args:
 * --decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers,
 * --num-layers-per-virtual-pipeline-stage, --account-for-embedding-in-pipeline-split,
 * --account-for-loss-in-pipeline-split, --use-distributed-optimizer; _add_training_args:
 * --micro-batch-size, --global-batch-size, --recompute-granularity, --recompute-method,
 * --recompute-num-layers, --sequence-parallel, --tp-comm-overlap (which Megatron-LM accepts only
 * with --sequence-parallel); _add_distributed_args also --context-parallel-size,
 * --expert-model-parallel-size); tests/data/megatron_args.txt lists them. */

/* The recomputation flags (export_megatron.h: per-stage plans have no exact form). */
static void megatron_recompute(const pf_export_t *x, FILE *f)
{
    const pf_plan_t *p = x->p;
    pf_training_recompute_t *rc = malloc((size_t)(x->S > 0 ? x->S : 1) * sizeof *rc);
    pf_export_recompute_t r = {pf_plan_recompute_max(p), 0, 1};
    for (int s = 0; rc && s < x->S; s++)
        rc[s] = pf_plan_recompute_stage(p, s);
    if (rc) /* out of memory: every stage at the heaviest, full's uniform form (safe) */
        pf_export_megatron_recompute(x->S, rc, x->stage_layers, pf_export_virtual_stages(x), &r);
    free(rc);
    if (!r.exact) {
        char runs[128];
        pf_plan_recompute_describe(p, runs, sizeof runs);
        fprintf(f, "    # the plan recomputes per stage (%s); Megatron-LM's flags hold for\n"
                "    # every stage, so not exact: the nearest form at least as memory-safe, the\n"
                "    # stages planned lighter recompute more (more time, less memory)\n", runs);
    }
    if (r.granularity == PF_RECOMPUTE_SELECTIVE)
        fprintf(f, "    --recompute-granularity selective\n");
    else if (r.granularity == PF_RECOMPUTE_FULL && !r.block_layers)
        fprintf(f, "    --recompute-granularity full\n    --recompute-method uniform\n"
                "    --recompute-num-layers 1\n");
    else if (r.granularity == PF_RECOMPUTE_FULL)
        fprintf(f, "    # each stage recomputes its first %d blocks (per model chunk) in full\n"
                "    --recompute-granularity full\n    --recompute-method block\n"
                "    --recompute-num-layers %d\n", r.block_layers, r.block_layers);
}

/* How each rank trains: batch, precision, optimizer, ZeRO, recomputation, sequence parallelism. */
static void megatron_training(const pf_export_t *x, FILE *f)
{
    const pf_plan_t *p = x->p;
    const pf_training_t *t = &p->train;
    fprintf(f, "    # global batch = micro-batch %d x %d micro-batches x %d replica%s%s\n",
            pf_export_microbatch(x), p->microbatches, x->R, x->R == 1 ? "" : "s",
            pf_export_context_parallel(x) > 1 ? " / context parallelism" : "");
    fprintf(f, "    --micro-batch-size %d\n", pf_export_microbatch(x));
    fprintf(f, "    --global-batch-size %d\n", pf_export_global_batch(x));
    if (t->precision_bytes == 2)
        fprintf(f, "    --bf16\n");
    else
        fprintf(f, "    # fp32: no mixed-precision flag\n");
    fprintf(f, "    --optimizer %s\n", t->optimizer == PF_OPTIMIZER_SGD ? "sgd" : "adam");
    if (t->zero >= 1) {
        if (t->zero >= 2)
            fprintf(f, "    # ZeRO %d planned: Megatron-LM's distributed optimizer shards the "
                    "optimizer state only\n    # (ZeRO 1); gradients and weights stay whole, "
                    "so GPUs hold more than the plan counted\n", t->zero);
        fprintf(f, "    --use-distributed-optimizer\n");
    }
    megatron_recompute(x, f);
    if (pf_export_sequence_parallel(x))
        fprintf(f, "%s    --sequence-parallel\n", p->blocks.present ? "" : "    # tensor parallel > "
                "1: Megatron-LM recommends sequence parallelism with it\n");
    if (pf_export_sequence_parallel(x) && p->blocks.present && p->blocks.tp_comm_overlap)
        fprintf(f, "    # the sequence-parallel all-gathers and reduce-scatters overlapped with the "
                "GEMMs\n    --tp-comm-overlap\n");
}

int pf_export_write_megatron(const pf_export_t *x, FILE *f, char *err, size_t errlen)
{
    const pf_plan_t *p = x->p;
    int S = x->S, rc = pf_export_megatron_check(pf_graph_arch(x->g), x->layers, x->T, err, errlen);
    if (rc != PF_OK)
        return rc;
    put_header(x, f, "Megatron-LM arguments", "# ");
    pf_export_megatron_model(pf_graph_arch(x->g), f);
    fprintf(f, "# %d pipeline stages x %d data-parallel replicas x %d tensor-parallel ranks = %d "
            "ranks.\n# The data-parallel size is implied: world / (pipeline x tensor). Ranks "
            "follow Megatron-LM's\n# order rank = pp x %d + dp x %d + tp; launch.sh puts each on "
            "the plan's device.\n# layers per stage:",
            S, x->R, x->T, x->world, x->R * x->T, x->T);
    for (int s = 0; s < S; s++)
        fprintf(f, " %d", x->stage_layers[s]);
    fprintf(f, "\nMEGATRON_PARALLEL_ARGS=(\n");
    fprintf(f, "    --tensor-model-parallel-size %d\n", x->T);
    fprintf(f, "    --pipeline-model-parallel-size %d\n", S);
    fprintf(f, "    --num-layers %d\n", x->layers);
    megatron_cpep(x, f);
    pf_export_split_t split = {x->S, x->layers, x->stage_layers, pf_export_virtual_stages(x)};
    rc = pf_export_megatron_layers(&split, f, err, errlen);
    if (rc != PF_OK)
        return rc;
    megatron_training(x, f);
    if (p->train.schedule == PF_SCHEDULE_GPIPE)
        fprintf(f, "    # the plan assumed GPipe; Megatron-LM runs 1F1B (fewer micro-batches in "
                "flight)\n");
    fprintf(f, ")\nMEGATRON_ARGS=(\"${MEGATRON_MODEL_ARGS[@]}\" \"${MEGATRON_PARALLEL_ARGS[@]}\")\n");
    return finish(f, err, errlen);
}

/* ---- DeepSpeed ----
 * What DeepSpeed reads from its config (deepspeed.ai "DeepSpeed Configuration JSON"): the batch
 * triple (train_batch_size = micro x accumulation x data-parallel size, which with a
 * PipeModelDataParallelTopology is R), zero_optimization.stage, bf16, activation_checkpointing,
 * and of the "pipeline" section only activation_checkpoint_interval (the PipelineEngine copies a
 * positive one onto its PipelineModule). The stage count and the partition method are
 * PipelineModule's constructor arguments: pipeline_module.py carries them. */

static int ds_stages_even(const pf_export_t *x)
{
    for (int s = 1; s < x->S; s++)
        if (x->stage_layers[s] != x->stage_layers[0])
            return 0;
    return 1;
}

/* DeepSpeed checkpoints whole layers only: selective recomputation is exported as full. */
static int ds_checkpoint_interval(const pf_export_t *x)
{
    /* one interval for every stage: any stage that recomputes makes all of them (the nearest
     * form at least as memory-safe as a per-stage plan; export_warnings.c says so) */
    return pf_plan_recompute_max(x->p) != PF_RECOMPUTE_NONE;
}

static const char *ds_recompute_name(const pf_plan_t *p, char *buf, size_t len)
{
    pf_plan_recompute_describe(p, buf, len);
    return buf;
}

static int ds_check(const pf_export_t *x, char *err, size_t errlen)
{
    if (x->S > 1 && x->p->train.zero >= 2)
        return pf_fail(err, errlen, PF_EINPUT, "ZeRO %d with %d pipeline stages: DeepSpeed's "
                       "pipeline engine supports ZeRO stage 0 or 1 only", x->p->train.zero, x->S);
    return PF_OK;
}

static int ds_set(json_t *o, const char *key, json_t *v)
{
    return v ? json_object_set_new(o, key, v) : -1;
}

int pf_export_write_deepspeed(const pf_export_t *x, FILE *f, char *err, size_t errlen)
{
    const pf_training_t *t = &x->p->train;
    int rc = ds_check(x, err, errlen);
    if (rc != PF_OK)
        return rc;
    json_t *root = json_object(), *zero = json_object();
    int bad = !root || !zero;
    bad |= ds_set(root, "train_batch_size", json_integer(pf_export_global_batch(x)));
    bad |= ds_set(root, "train_micro_batch_size_per_gpu", json_integer(pf_export_microbatch(x)));
    bad |= ds_set(root, "gradient_accumulation_steps", json_integer(x->p->microbatches));
    bad |= ds_set(zero, "stage", json_integer(t->zero));
    bad |= ds_set(root, "zero_optimization", json_incref(zero));
    if (t->precision_bytes == 2)
        bad |= ds_set(root, "bf16", json_pack("{s:b}", "enabled", 1));
    if (ds_checkpoint_interval(x)) {
        /* the plan keeps each checkpointed layer input whole on every tensor-parallel rank, on
         * the GPU (DESIGN.md "Memory per device"): no partitioning, no CPU copies */
        bad |= ds_set(root, "activation_checkpointing",
                      json_pack("{s:b,s:b,s:b}", "partition_activations", 0,
                                "contiguous_memory_optimization", 0, "cpu_checkpointing", 0));
        bad |= ds_set(root, "pipeline", json_pack("{s:i}", "activation_checkpoint_interval",
                                                  ds_checkpoint_interval(x)));
    }
    if (!bad && json_dumpf(root, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0)
        fputc('\n', f);
    else
        rc = pf_fail(err, errlen, PF_ERR, "out of memory or write failed");
    json_decref(zero);
    json_decref(root);
    return rc == PF_OK ? finish(f, err, errlen) : rc;
}

int pf_export_write_deepspeed_pipe(const pf_export_t *x, FILE *f, char *err, size_t errlen)
{
    int rc = ds_check(x, err, errlen);
    if (rc != PF_OK)
        return rc;
    char runs[128];
    put_header(x, f, "DeepSpeed PipelineModule arguments", "# ");
    fprintf(f, "# The pipeline's stage count, topology, partition and activation checkpointing are\n"
            "# PipelineModule's constructor arguments, not ds_config.json keys. Build the model\n"
            "# with pipeline_module(layers, block_type): layers = the embedding, then the %d\n"
            "# transformer blocks (their class name matches the regex block_type), then the head.\n"
            "# Ranks: DeepSpeed's axes pipe, data, model (model fastest) = the plan's rank\n"
            "# pp x %d + dp x %d + tp, the order launch.sh places.\n",
            x->layers, x->R * x->T, x->T);
    fprintf(f, "from deepspeed.pipe import PipelineModule\n"
            "from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology\n\n");
    fprintf(f, "PIPELINE_STAGES = %d\nDATA_PARALLEL = %d\nTENSOR_PARALLEL = %d\n", x->S, x->R,
            x->T);
    fprintf(f, "# the plan's blocks per stage%s\nLAYERS_PER_STAGE = [", ds_stages_even(x) ? "" :
            " (uneven: partition_method balances the counts instead)");
    for (int s = 0; s < x->S; s++)
        fprintf(f, "%s%d", s ? ", " : "", x->stage_layers[s]);
    fprintf(f, "]\n# 1: every layer's forward runs again in backward; 0: none (%s recomputation "
            "planned)\nACTIVATION_CHECKPOINT_INTERVAL = %d\n",
            ds_recompute_name(x->p, runs, sizeof runs), ds_checkpoint_interval(x));
    fprintf(f, "\n\ndef pipeline_module(layers, block_type, loss_fn=None):\n"
            "    # \"type:REGEX\" balances the layers whose class matches: equal blocks per stage,\n"
            "    # the embedding with the first and the head with the last\n"
            "    topology = PipeModelDataParallelTopology(num_pp=PIPELINE_STAGES,\n"
            "                                             num_mp=TENSOR_PARALLEL,\n"
            "                                             num_dp=DATA_PARALLEL)\n"
            "    return PipelineModule(layers=layers, topology=topology, loss_fn=loss_fn,\n"
            "                          partition_method=\"type:\" + block_type,\n"
            "                          activation_checkpoint_interval=ACTIVATION_CHECKPOINT_INTERVAL)\n");
    return finish(f, err, errlen);
}

int pf_export_write_hostfile(const pf_export_t *x, FILE *f, char *err, size_t errlen)
{
    for (int n = 0; n < x->nnodes; n++)
        fprintf(f, "%s slots=%d\n", x->nodes[n].name, x->nodes[n].nproc);
    return finish(f, err, errlen);
}

static const pf_export_node_t *node_of_rank(const pf_export_t *x, int gr)
{
    int n = 0;
    while (gr >= x->nodes[n].first_rank + x->nodes[n].nproc)
        n++;
    return &x->nodes[n];
}

int pf_export_write_launch(const pf_export_t *x, FILE *f, char *err, size_t errlen)
{
    int RT = x->R * x->T;
    fprintf(f, "#!/bin/sh\n");
    put_header(x, f, "torchrun launch", "# ");
    fprintf(f, "# Run on every host: launch.sh HOST TRAIN_SCRIPT [ARGS...]  (MASTER_ADDR "
            "defaults to the first\n# host's name: set it where that name does not resolve; "
            "MASTER_PORT defaults to 29500)\n"
            "# torchrun gives node n the global ranks [first, first + nproc); local rank l runs "
            "on the\n# l-th GPU of CUDA_VISIBLE_DEVICES. Rank = pp x %d + dp x %d + tp "
            "(Megatron-LM's order).\n",
            RT, x->T);
    if (!x->exact) {
        fprintf(f, "# NOT EXACT: ");
        put_comment_text(f, x->reason);
        fprintf(f, "\n");
    }
    for (int n = 1; n < x->nnodes; n++)
        if (x->nodes[n].nproc != x->nodes[0].nproc) {
            fprintf(f, "# Hosts run different numbers of ranks: a script that picks its GPU as "
                    "rank %% GPUs (older\n# Megatron-LM) needs every host to run the same "
                    "number; use LOCAL_RANK.\n");
            break;
        }
    fprintf(f, "# rank  pp  dp  tp  node  local  device\n");
    for (int gr = 0; gr < x->world; gr++) {
        const pf_export_node_t *nd = node_of_rank(x, gr);
        int l = gr - nd->first_rank;
        fprintf(f, "# %4d %3d %3d %3d %5d %6d  ", gr, gr / RT, gr % RT / x->T, gr % x->T,
                nd->node_rank, nd->gpus[l]);
        put_comment_text(f, pf_cluster_device(x->c, x->run_dev[gr])->name);
        if (x->run_dev[gr] != x->plan_dev[gr]) {
            fprintf(f, " (planned ");
            put_comment_text(f, pf_cluster_device(x->c, x->plan_dev[gr])->name);
            fprintf(f, ")");
        }
        fprintf(f, "\n");
    }
    fprintf(f, "host=${1:?usage: launch.sh HOST TRAIN_SCRIPT [ARGS...]}\nshift\ncase \"$host\" "
            "in\n");
    for (int n = 0; n < x->nnodes; n++) {
        const pf_export_node_t *nd = &x->nodes[n];
        fprintf(f, "%s) node_rank=%d; nproc=%d; gpus=", nd->name, nd->node_rank, nd->nproc);
        for (int l = 0; l < nd->nproc; l++)
            fprintf(f, "%s%d", l ? "," : "", nd->gpus[l]);
        fprintf(f, " ;;\n");
    }
    fprintf(f, "*) echo \"launch.sh: '$host' is not a host of this plan:");
    for (int n = 0; n < x->nnodes; n++)
        fprintf(f, " %s", x->nodes[n].name);
    fprintf(f, "\" >&2; exit 2 ;;\nesac\nexport CUDA_VISIBLE_DEVICES=\"$gpus\"\n");
    /* Megatron-LM's validate_args requires one CUDA connection per device when tensor
     * parallelism overlaps its communication with compute (TP > 1 on Ampere and Hopper). */
    if (x->T > 1)
        fprintf(f, "export CUDA_DEVICE_MAX_CONNECTIONS=1\n");
    /* The underscore spellings: every torchrun accepts them; the dashed ones only newer
     * releases (Debian's torch 1.13 refuses --nproc-per-node). */
    fprintf(f, "exec torchrun --nnodes %d --nproc_per_node \"$nproc\" --node_rank \"$node_rank\" "
            "--master_addr \"${MASTER_ADDR:-%s}\" --master_port \"${MASTER_PORT:-29500}\" "
            "\"$@\"\n",
            x->nnodes, x->nodes[0].name);
    return finish(f, err, errlen);
}
