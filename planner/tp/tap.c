/* tap: TAP (seed 001) over DistPar (seed 002); the model is described in tap.h. */
#include "planner/tp/tap.h"
#include "planner/core/util.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DONE 8     /* distinct conversions remembered per tensor */
#define MAX_WEIGHTS 39 /* 3^39 < 2^63 */

void pf_tap_opts_init(pf_tap_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->min_duplicate = 2;
    o->max_unit_weights = 12;
    o->param_state_factor = 1;
}

typedef struct {
    char *name;
    uint64_t hash;
    int ninst, nops, nweights;
    int *ops; /* ninst x nops, each instance in topological order */
} unit_t;

struct pf_tap_units {
    int nunits;
    size_t cap;
    unit_t *units;
    int *unit_of;
};

/* ---- PRUNEGRAPH (Algorithm 1) ---- */

/* One numeric component of an op's dotted name: name[0, fam_len) is the family ("layers."),
 * name[0, inst_len) the instance ("layers.7"). */
typedef struct {
    const char *name;
    int fam_len, inst_len, v, pos, count;
} name_rec_t;

static int rec_cmp(const void *pa, const void *pb)
{
    const name_rec_t *a = pa, *b = pb;
    int c;
    if (a->fam_len != b->fam_len)
        return a->fam_len - b->fam_len;
    if ((c = memcmp(a->name, b->name, (size_t)a->fam_len)))
        return c;
    if (a->inst_len != b->inst_len)
        return a->inst_len - b->inst_len;
    if ((c = memcmp(a->name + a->fam_len, b->name + b->fam_len,
                    (size_t)(a->inst_len - a->fam_len))))
        return c;
    return a->pos - b->pos;
}

static int same_family(const name_rec_t *a, const name_rec_t *b)
{
    return a->fam_len == b->fam_len && !memcmp(a->name, b->name, (size_t)a->fam_len);
}

static int same_instance(const name_rec_t *a, const name_rec_t *b)
{
    return same_family(a, b) && a->inst_len == b->inst_len &&
           !memcmp(a->name, b->name, (size_t)a->inst_len);
}

static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

#define FNV_SEED 14695981039346656037ULL

static int add_token(uint64_t **sig, size_t *cap, size_t *len, uint64_t t)
{
    if (pf_grow((void **)sig, cap, *len + 1, sizeof **sig))
        return -1;
    (*sig)[(*len)++] = t;
    return 0;
}

/* The structure of one instance as tokens: per op in order its type, whether it holds weights,
 * its three shapes, its inputs (relative position, or outside) and whether it feeds the outside.
 * rel[] maps graph ops to positions (-1 elsewhere) and is reset before returning. */
static int instance_tokens(const pf_graph_t *g, const int *ops, int n, int *rel, uint64_t **sig,
                           size_t *cap, size_t *len)
{
    int rc = 0;
    *len = 0;
    for (int j = 0; j < n; j++)
        rel[ops[j]] = j;
    rc |= add_token(sig, cap, len, (uint64_t)n);
    for (int j = 0; j < n && !rc; j++) {
        const pf_op_t *op = pf_graph_op(g, ops[j]);
        const char *type = op->type ? op->type : "";
        rc |= add_token(sig, cap, len, fnv(FNV_SEED, type, strlen(type)));
        rc |= add_token(sig, cap, len, op->param_bytes > 0);
        const pf_shape_t *shapes[3] = {&op->weight, &op->input, &op->output};
        for (int s = 0; s < 3; s++) {
            rc |= add_token(sig, cap, len, (uint64_t)shapes[s]->ndim);
            for (int d = 0; d < shapes[s]->ndim; d++)
                rc |= add_token(sig, cap, len, (uint64_t)shapes[s]->dim[d]);
        }
        int nin, nout, ext_out = 0;
        const int *in = pf_graph_in(g, ops[j], &nin), *out = pf_graph_out(g, ops[j], &nout);
        rc |= add_token(sig, cap, len, (uint64_t)nin);
        for (int k = 0; k < nin; k++)
            rc |= add_token(sig, cap, len, (uint64_t)(int64_t)rel[pf_graph_edge(g, in[k])->src]);
        for (int k = 0; k < nout; k++)
            ext_out |= rel[pf_graph_edge(g, out[k])->dst] < 0;
        rc |= add_token(sig, cap, len, (uint64_t)(ext_out || nout == 0));
    }
    for (int j = 0; j < n; j++)
        rel[ops[j]] = -1;
    return rc ? PF_ERR : PF_OK;
}

static int same_types(const pf_graph_t *g, const int *a, const int *b, int n)
{
    for (int j = 0; j < n; j++) {
        const char *x = pf_graph_op(g, a[j])->type, *y = pf_graph_op(g, b[j])->type;
        if (strcmp(x ? x : "", y ? y : ""))
            return 0;
    }
    return 1;
}

static int count_weights(const pf_graph_t *g, const int *ops, int n)
{
    int w = 0;
    for (int j = 0; j < n; j++)
        w += pf_graph_op(g, ops[j])->param_bytes > 0;
    return w;
}

static int add_unit(pf_tap_units_t *u, const char *name, uint64_t hash, int ninst, int nops,
                    int nweights, int **ops)
{
    if (pf_grow((void **)&u->units, &u->cap, (size_t)u->nunits + 1, sizeof *u->units))
        return PF_ERR;
    char *copy = pf_strdup(name);
    if (!copy)
        return PF_ERR;
    u->units[u->nunits++] = (unit_t){copy, hash, ninst, nops, nweights, *ops};
    *ops = NULL;
    return PF_OK;
}

/* A unit (of any number of instances) per op: for units whose 3^N is too large. */
static int add_units_per_op(pf_tap_units_t *u, const pf_graph_t *g, const int *ops, int ninst,
                            int nops)
{
    for (int j = 0; j < nops; j++) {
        int *one = malloc(sizeof *one * (size_t)ninst);
        if (!one)
            return PF_ERR;
        for (int i = 0; i < ninst; i++)
            one[i] = ops[(size_t)i * nops + j];
        int w = pf_graph_op(g, one[0])->param_bytes > 0;
        if (add_unit(u, pf_graph_op(g, one[0])->name, 0, ninst, 1, w, &one)) {
            free(one);
            return PF_ERR;
        }
    }
    return PF_OK;
}

static int add_checked(pf_tap_units_t *u, const pf_graph_t *g, const pf_tap_opts_t *o,
                       const char *name, uint64_t hash, int ninst, int nops, int **ops)
{
    int w = count_weights(g, *ops, nops), rc;
    int limit = o->max_unit_weights < MAX_WEIGHTS ? o->max_unit_weights : MAX_WEIGHTS;
    if (w <= limit)
        return add_unit(u, name, hash, ninst, nops, w, ops);
    rc = add_units_per_op(u, g, *ops, ninst, nops);
    free(*ops);
    *ops = NULL;
    return rc;
}

/* One family's instances (recs[first..last), sorted by instance then position): group them
 * into classes of identical structure, one unit per class. */
static int family_units(pf_tap_units_t *u, const pf_graph_t *g, const pf_tap_opts_t *o,
                        const name_rec_t *recs, int first, int last, int *rel)
{
    int rc = PF_ERR, ninst = 0, *start = NULL, *ends = NULL, *done = NULL, *ops = NULL;
    uint64_t *sa = NULL, *sb = NULL;
    size_t ca = 0, cb = 0, la = 0, lb = 0, m = (size_t)(last - first);
    char name[256];
    if (!(start = malloc(sizeof *start * m)) || !(ends = malloc(sizeof *ends * m)) ||
        !(done = calloc(m, sizeof *done)))
        goto fail;
    for (int r = first; r < last; r++) {
        if (r == first || !same_instance(&recs[r - 1], &recs[r]))
            start[ninst++] = r;
        ends[ninst - 1] = r + 1;
    }
    /* instances by the position of their first op, so the representative comes first */
    for (int a = 1; a < ninst; a++)
        for (int b = a; b > 0 && recs[start[b]].pos < recs[start[b - 1]].pos; b--) {
            int t = start[b], e = ends[b];
            start[b] = start[b - 1], ends[b] = ends[b - 1];
            start[b - 1] = t, ends[b - 1] = e;
        }
    snprintf(name, sizeof name, "%.*s#", recs[first].fam_len, recs[first].name);
    for (int a = 0; a < ninst; a++) {
        if (done[a])
            continue;
        int n = ends[a] - start[a], count = 0;
        if (!(ops = malloc(sizeof *ops * (size_t)n * (size_t)ninst)))
            goto fail;
        for (int b = a; b < ninst; b++) {
            if (done[b] || ends[b] - start[b] != n)
                continue;
            int *ib = ops + (size_t)count * n;
            for (int j = 0; j < n; j++)
                ib[j] = recs[start[b] + j].v;
            if (instance_tokens(g, ib, n, rel, b == a ? &sa : &sb, b == a ? &ca : &cb,
                                b == a ? &la : &lb))
                goto fail;
            if (b != a && (la != lb || memcmp(sa, sb, la * sizeof *sa) ||
                           !same_types(g, ops, ib, n)))
                continue; /* another structure: a class of its own */
            done[b] = 1;
            count++;
        }
        if (add_checked(u, g, o, name, fnv(FNV_SEED, sa, la * sizeof *sa), count, n, &ops))
            goto fail;
    }
    rc = PF_OK;
fail:
    free(ops);
    free(start);
    free(ends);
    free(done);
    free(sa);
    free(sb);
    return rc;
}

static int find_root(int *parent, int x)
{
    while (parent[x] != x)
        x = parent[x] = parent[parent[x]];
    return x;
}

/* Ops in no repeated block: one unit per connected component, ops in topological order. */
static int rest_units(pf_tap_units_t *u, const pf_graph_t *g, const pf_tap_opts_t *o,
                      const int *in_block)
{
    int n = pf_graph_nops(g), rc = PF_ERR, *parent = malloc(sizeof *parent * (size_t)n);
    int *ops = NULL, *taken = calloc((size_t)n, sizeof *taken);
    const int *topo = pf_graph_topo(g);
    if (!parent || !taken)
        goto fail;
    for (int v = 0; v < n; v++)
        parent[v] = v;
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (!in_block[ed->src] && !in_block[ed->dst])
            parent[find_root(parent, ed->src)] = find_root(parent, ed->dst);
    }
    for (int t = 0; t < n; t++) {
        int root = find_root(parent, topo[t]), count = 0;
        if (in_block[topo[t]] || taken[root])
            continue;
        taken[root] = 1;
        if (!(ops = malloc(sizeof *ops * (size_t)n)))
            goto fail;
        for (int s = t; s < n; s++)
            if (!in_block[topo[s]] && find_root(parent, topo[s]) == root)
                ops[count++] = topo[s];
        if (add_checked(u, g, o, pf_graph_op(g, topo[t])->name, 0, 1, count, &ops))
            goto fail;
    }
    rc = PF_OK;
fail:
    free(ops);
    free(parent);
    free(taken);
    return rc;
}

static int unit_pos_cmp(const void *pa, const void *pb, void *ctx)
{
    const int *pos = ctx;
    const unit_t *a = pa, *b = pb;
    return pos[a->ops[0]] - pos[b->ops[0]];
}

pf_tap_units_t *pf_tap_units_new(const pf_graph_t *g, const pf_tap_opts_t *o, char *err,
                                 size_t errlen)
{
    int n = pf_graph_nops(g), nrec = 0;
    size_t rcap = 0;
    name_rec_t *recs = NULL;
    int *best = NULL, *rel = NULL, *in_block = NULL;
    const int *pos = pf_graph_topo_pos(g);
    pf_tap_units_t *u = calloc(1, sizeof *u);
    if (o->min_duplicate < 2) {
        pf_fail(err, errlen, PF_EINPUT, "tap: min_duplicate %d is below 2", o->min_duplicate);
        free(u);
        return NULL;
    }
    if (!u || !(best = malloc(sizeof *best * (size_t)n)) ||
        !(rel = malloc(sizeof *rel * (size_t)n)) ||
        !(in_block = calloc((size_t)n, sizeof *in_block)) ||
        !(u->unit_of = malloc(sizeof *u->unit_of * (size_t)n)))
        goto oom;
    /* every numeric component of every name is a candidate block level */
    for (int v = 0; v < n; v++) {
        const char *s = pf_graph_op(g, v)->name;
        rel[v] = best[v] = -1;
        for (int b = 0; s[b];) {
            int e = b;
            while (s[e] && s[e] != '.')
                e++;
            int numeric = e > b;
            for (int i = b; i < e; i++)
                numeric &= isdigit((unsigned char)s[i]) != 0;
            if (numeric && b > 0) {
                if (pf_grow((void **)&recs, &rcap, (size_t)nrec + 1, sizeof *recs))
                    goto oom;
                recs[nrec++] = (name_rec_t){s, b, e, v, pos[v], 0};
            }
            b = s[e] ? e + 1 : e;
        }
    }
    qsort(recs, (size_t)nrec, sizeof *recs, rec_cmp);
    /* findSimilarBlk: instances per family; an op joins its coarsest family repeated at least
     * minDuplicate times */
    for (int f = 0, l; f < nrec; f = l) {
        int count = 1;
        for (l = f + 1; l < nrec && same_family(&recs[f], &recs[l]); l++)
            count += !same_instance(&recs[l - 1], &recs[l]);
        for (int r = f; r < l; r++) {
            recs[r].count = count;
            int v = recs[r].v;
            if (count >= o->min_duplicate &&
                (best[v] < 0 || recs[r].fam_len < recs[best[v]].fam_len))
                best[v] = r;
        }
    }
    int nb = 0;
    for (int r = 0; r < nrec; r++)
        if (best[recs[r].v] == r)
            recs[nb++] = recs[r], in_block[recs[r].v] = 1;
    qsort(recs, (size_t)nb, sizeof *recs, rec_cmp);
    for (int f = 0, l; f < nb; f = l) {
        for (l = f + 1; l < nb && same_family(&recs[f], &recs[l]); l++)
            ;
        if (family_units(u, g, o, recs, f, l, rel))
            goto oom;
    }
    if (rest_units(u, g, o, in_block))
        goto oom;
    qsort_r(u->units, (size_t)u->nunits, sizeof *u->units, unit_pos_cmp, (void *)pos);
    for (int k = 0; k < u->nunits; k++)
        for (int i = 0; i < u->units[k].ninst * u->units[k].nops; i++)
            u->unit_of[u->units[k].ops[i]] = k;
    free(recs);
    free(best);
    free(rel);
    free(in_block);
    return u;
oom:
    pf_fail(err, errlen, PF_ERR, "tap: out of memory finding repeated blocks");
    free(recs);
    free(best);
    free(rel);
    free(in_block);
    pf_tap_units_destroy(&u);
    return NULL;
}

void pf_tap_units_destroy(pf_tap_units_t **pu)
{
    if (!pu || !*pu)
        return;
    for (int k = 0; k < (*pu)->nunits; k++) {
        free((*pu)->units[k].name);
        free((*pu)->units[k].ops);
    }
    free((*pu)->units);
    free((*pu)->unit_of);
    free(*pu);
    *pu = NULL;
}

int pf_tap_units_count(const pf_tap_units_t *u) { return u->nunits; }

static uint64_t pow3(int n)
{
    uint64_t p = 1;
    while (n-- > 0)
        p *= 3;
    return p;
}

int pf_tap_unit_info(const pf_tap_units_t *u, int k, pf_tap_unit_info_t *info)
{
    if (k < 0 || k >= u->nunits)
        return PF_EINPUT;
    const unit_t *t = &u->units[k];
    *info = (pf_tap_unit_info_t){t->name, t->hash, t->ninst, t->nops, t->nweights,
                                 pow3(t->nweights)};
    return PF_OK;
}

const int *pf_tap_unit_instance(const pf_tap_units_t *u, int k, int i)
{
    if (k < 0 || k >= u->nunits || i < 0 || i >= u->units[k].ninst)
        return NULL;
    return u->units[k].ops + (size_t)i * u->units[k].nops;
}

int pf_tap_unit_of(const pf_tap_units_t *u, int v) { return u->unit_of[v]; }


/* ---- one instance of a unit, ready to price plans on ---- */

typedef struct {
    int nops, ntens, T;
    const pf_graph_t *g;
    const int *ops;           /* graph op of each position */
    const pf_tap_opts_t *o;
    const pf_sharding_link_t *link;
    int *in_start, *in_tens, *in_edge; /* inputs of position j: [in_start[j], in_start[j+1]) */
    int *widx;                /* digit of position j's weight, -1 without one */
    int *ext_out;             /* position j's output must end as B */
    int *tens_edge;           /* tensors: 0..nops-1 the ops' outputs, then outside producers;
                                 an outside tensor's first input position */
    double *tens_bytes;
    int *nsig;                /* [j * 3 + weight option] */
    pf_sharding_sig_t *sig;      /* [(j * 3 + option) * PF_SHARDING_MAX_SIGS + s] */
} inst_t;

/* Per-evaluation state. */
typedef struct {
    pf_sharding_t *prop, *fwd_done, *grad_done; /* per tensor; MAX_DONE conversions each */
    int *nfwd, *ngrad, *choice;
} scratch_t;

/* Collects what a plan does when asked to (apply). */
typedef struct {
    pf_tap_coll_t *colls;
    size_t ncolls, cap;
    int failed;
} record_t;

static const pf_sharding_t weight_option[3] = {{PF_SHARDING_B, -1}, {PF_SHARDING_S, 0}, {PF_SHARDING_S, 1}};

static void inst_free(inst_t *t)
{
    free(t->in_start), free(t->in_tens), free(t->in_edge), free(t->widx), free(t->ext_out);
    free(t->tens_edge), free(t->tens_bytes), free(t->nsig), free(t->sig);
    memset(t, 0, sizeof *t);
}

static double shape_elems(const pf_shape_t *s)
{
    double n = s->ndim ? 1 : 0;
    for (int i = 0; i < s->ndim; i++)
        n *= (double)s->dim[i];
    return n;
}

/* The bytes of op v's output: what its out-edges carry; for a graph output (the head's logits),
 * its output shape at the bytes per element of its first input that has a shape. */
static double output_bytes(const pf_graph_t *g, int v)
{
    int n;
    const int *out = pf_graph_out(g, v, &n), *in;
    double b = 0;
    for (int k = 0; k < n; k++)
        b = fmax(b, pf_graph_edge(g, out[k])->bytes);
    if (n > 0)
        return b;
    in = pf_graph_in(g, v, &n);
    for (int k = 0; k < n; k++) {
        const pf_edge_t *e = pf_graph_edge(g, in[k]);
        double elems = shape_elems(&pf_graph_op(g, e->src)->output);
        if (elems > 0)
            return e->bytes / elems * shape_elems(&pf_graph_op(g, v)->output);
    }
    return 0;
}

/* Tensor parallelism splits features: the last dimension, or dimension 1 (heads, channels) of a
 * 4-D tensor. Any other split (batch, sequence, space) is data or sequence parallelism. */
static int feature_dim(pf_sharding_t p, int rank)
{
    return p.kind != PF_SHARDING_S || p.dim == rank - 1 || (rank == 4 && p.dim == 1);
}

static int splits_tokens(const pf_sharding_sig_t *s, const pf_sharding_op_t *d)
{
    int hit = !feature_dim(s->out, d->output.ndim);
    for (int k = 0; k < d->nin; k++)
        hit |= !feature_dim(s->in[k], d->in[k].ndim);
    return hit;
}

static int inst_build(inst_t *t, const pf_graph_t *g, const int *ops, int nops, int T,
                      const pf_sharding_link_t *link, const pf_tap_opts_t *o)
{
    int ne = 0, nw = 0;
    memset(t, 0, sizeof *t);
    *t = (inst_t){.nops = nops, .T = T, .g = g, .ops = ops, .o = o, .link = link};
    for (int j = 0; j < nops; j++) {
        int n;
        pf_graph_in(g, ops[j], &n);
        ne += n;
    }
    size_t nt = (size_t)nops + (size_t)ne;
    if (!(t->in_start = malloc(sizeof(int) * (size_t)(nops + 1))) ||
        !(t->in_tens = malloc(sizeof(int) * (size_t)(ne + 1))) ||
        !(t->in_edge = malloc(sizeof(int) * (size_t)(ne + 1))) ||
        !(t->widx = malloc(sizeof(int) * (size_t)nops)) ||
        !(t->ext_out = malloc(sizeof(int) * (size_t)nops)) ||
        !(t->tens_edge = malloc(sizeof(int) * nt)) ||
        !(t->tens_bytes = malloc(sizeof(double) * nt)) ||
        !(t->nsig = calloc((size_t)nops * 3, sizeof(int))) ||
        !(t->sig = malloc(sizeof *t->sig * (size_t)nops * 3 * PF_SHARDING_MAX_SIGS)))
        goto fail;
    t->ntens = nops;
    for (int j = 0; j < nops; j++) {
        const pf_op_t *op = pf_graph_op(g, ops[j]);
        t->tens_edge[j] = -1;
        t->tens_bytes[j] = output_bytes(g, ops[j]);
        t->widx[j] = op->param_bytes > 0 ? nw++ : -1;
        int nout;
        const int *out = pf_graph_out(g, ops[j], &nout);
        t->ext_out[j] = nout == 0;
        for (int k = 0; k < nout; k++) {
            int d = pf_graph_edge(g, out[k])->dst, inside = 0;
            for (int i = 0; i < nops; i++)
                inside |= ops[i] == d;
            t->ext_out[j] |= !inside;
        }
    }
    int at = 0;
    for (int j = 0; j < nops; j++) {
        const pf_op_t *op = pf_graph_op(g, ops[j]);
        int nin;
        const int *in = pf_graph_in(g, ops[j], &nin);
        pf_sharding_op_t d = {.type = op->type, .has_weight = op->param_bytes > 0,
                           .weight = op->weight, .output = op->output,
                           .nin = nin <= PF_SHARDING_MAX_IN ? nin : 0};
        if (nin > PF_SHARDING_MAX_IN)
            d.type = NULL, d.output.ndim = 0; /* too many inputs for the rules: replicated */
        t->in_start[j] = at;
        for (int k = 0; k < nin; k++, at++) {
            const pf_edge_t *e = pf_graph_edge(g, in[k]);
            int tens = -1;
            for (int i = 0; i < j && tens < 0; i++)
                if (ops[i] == e->src)
                    tens = i;
            for (int x = nops; x < t->ntens && tens < 0; x++) /* an outside producer seen */
                if (pf_graph_edge(g, t->in_edge[t->tens_edge[x]])->src == e->src)
                    tens = x;
            if (tens < 0) { /* a new outside tensor */
                tens = t->ntens++;
                t->tens_bytes[tens] = e->bytes;
                t->tens_edge[tens] = at;
            }
            t->in_tens[at] = tens;
            t->in_edge[at] = in[k];
            const pf_shape_t *src_out = &pf_graph_op(g, e->src)->output;
            if (k < d.nin)
                d.in[k] = src_out->ndim ? *src_out : op->input;
        }
        for (int w = 0; w < (d.has_weight ? 3 : 1); w++) {
            pf_sharding_sig_t *s = t->sig + (size_t)(j * 3 + w) * PF_SHARDING_MAX_SIGS;
            int c = pf_sharding_op_rules(&d, weight_option[w], T, s, PF_SHARDING_MAX_SIGS), kept = 0;
            if (nin > PF_SHARDING_MAX_IN && w == 0) { /* all B, whatever the count */
                memset(s, 0, sizeof *s);
                c = 1;
            }
            for (int i = 0; i < c; i++)
                if (o->allow_token_split || !splits_tokens(&s[i], &d))
                    s[kept++] = s[i];
            t->nsig[j * 3 + w] = kept;
        }
    }
    t->in_start[nops] = at;
    return PF_OK;
fail:
    inst_free(t);
    return PF_ERR;
}

/* ---- pricing one plan ---- */

static void scratch_free(scratch_t *sc)
{
    free(sc->prop), free(sc->fwd_done), free(sc->grad_done);
    free(sc->nfwd), free(sc->ngrad), free(sc->choice);
    memset(sc, 0, sizeof *sc);
}

static int scratch_new(scratch_t *sc, const inst_t *t)
{
    size_t nt = (size_t)t->ntens;
    memset(sc, 0, sizeof *sc);
    if (!(sc->prop = malloc(sizeof *sc->prop * nt)) ||
        !(sc->fwd_done = malloc(sizeof *sc->fwd_done * nt * MAX_DONE)) ||
        !(sc->grad_done = malloc(sizeof *sc->grad_done * nt * MAX_DONE)) ||
        !(sc->nfwd = malloc(sizeof *sc->nfwd * nt)) ||
        !(sc->ngrad = malloc(sizeof *sc->ngrad * nt)) ||
        !(sc->choice = malloc(sizeof *sc->choice * (size_t)(t->nops + 1)))) {
        scratch_free(sc);
        return PF_ERR;
    }
    return PF_OK;
}

static pf_sharding_t required(const pf_sharding_sig_t *s, int k, int grad)
{
    return k >= PF_SHARDING_MAX_IN ? pf_sharding_b() : grad ? s->in_grad[k] : s->in[k];
}

static int done_has(const pf_sharding_t *list, int n, pf_sharding_t p)
{
    for (int i = 0; i < n; i++)
        if (pf_sharding_equal(list[i], p))
            return 1;
    return 0;
}

static double conv_ms(const inst_t *t, int x, pf_sharding_t from, pf_sharding_t to, pf_sharding_conv_t *c)
{
    c->nsteps = 0;
    c->ms = 0;
    if (pf_sharding_equal(from, to))
        return 0;
    if (pf_sharding_convert(from, to, PF_SHAPE_MAX, t->T, t->tens_bytes[x], t->link, c, NULL, 0))
        return INFINITY;
    return c->ms;
}

static double compute_ms(const pf_op_t *op, int split, int T)
{
    return split ? (op->fwd_ms + op->bwd_ms) / T : op->fwd_ms + op->bwd_ms;
}

/* What running position j by s costs now: its compute, a partial weight gradient's all-reduce,
 * and the conversions its inputs (forward) and their gradients (backward) need that no earlier
 * consumer has paid for. */
static double sig_cost(const inst_t *t, const scratch_t *sc, int j, const pf_sharding_sig_t *s)
{
    const pf_op_t *op = pf_graph_op(t->g, t->ops[j]);
    double c = compute_ms(op, s->split, t->T);
    pf_sharding_conv_t cv;
    if (s->weight_grad_partial)
        c += pf_conv_ms(PF_CONV_ALLREDUCE, t->T, op->param_bytes, t->link);
    for (int a = t->in_start[j]; a < t->in_start[j + 1]; a++) {
        int k = a - t->in_start[j], x = t->in_tens[a], dup_f = 0, dup_g = 0;
        pf_sharding_t need = required(s, k, 0), grad = required(s, k, 1);
        for (int b = t->in_start[j]; b < a; b++)
            if (t->in_tens[b] == x) {
                dup_f |= pf_sharding_equal(required(s, b - t->in_start[j], 0), need);
                dup_g |= pf_sharding_equal(required(s, b - t->in_start[j], 1), grad);
            }
        if (!dup_f && !done_has(sc->fwd_done + (size_t)x * MAX_DONE, sc->nfwd[x], need))
            c += conv_ms(t, x, sc->prop[x], need, &cv);
        if (!dup_g && !done_has(sc->grad_done + (size_t)x * MAX_DONE, sc->ngrad[x], grad))
            c += conv_ms(t, x, grad, pf_sharding_grad_expected(sc->prop[x]), &cv);
    }
    return c;
}

static void record(record_t *rec, pf_conv_kind_t kind, int backward, int op, int wgrad,
                   double bytes, double ms)
{
    if (!rec || rec->failed || ms == 0)
        return;
    if (pf_grow((void **)&rec->colls, &rec->cap, rec->ncolls + 1, sizeof *rec->colls)) {
        rec->failed = 1;
        return;
    }
    rec->colls[rec->ncolls++] = (pf_tap_coll_t){kind, backward, op, wgrad, bytes, ms};
}

/* Converts tensor x forward to `to`, or its gradient `grad` backward to what its producer
 * expects, unless done already; returns the time. `charge` is the position that pays. */
static double pay(const inst_t *t, scratch_t *sc, record_t *rec, int x, pf_sharding_t p,
                  int backward, int charge)
{
    pf_sharding_t *list = (backward ? sc->grad_done : sc->fwd_done) + (size_t)x * MAX_DONE;
    int *n = backward ? &sc->ngrad[x] : &sc->nfwd[x];
    pf_sharding_conv_t cv;
    if (done_has(list, *n, p))
        return 0;
    if (*n < MAX_DONE)
        list[(*n)++] = p;
    double ms = backward ? conv_ms(t, x, p, pf_sharding_grad_expected(sc->prop[x]), &cv)
                         : conv_ms(t, x, sc->prop[x], p, &cv);
    for (int i = 0; i < cv.nsteps; i++)
        record(rec, cv.step[i], backward, charge, 0, t->tens_bytes[x],
               pf_conv_ms(cv.step[i], t->T, t->tens_bytes[x], t->link));
    return ms;
}

static double scaled_mem(double mem, double out_bytes, int out_split, double in_bytes,
                         double in_split_bytes, int T)
{
    double out_part = fmin(out_bytes, mem), saved = mem - out_part, cut = 0;
    if (out_split)
        cut += out_part * (1 - 1.0 / T);
    if (in_bytes > 0 && in_split_bytes > 0)
        cut += saved * (in_split_bytes / in_bytes) * (1 - 1.0 / T);
    return mem - cut;
}

/* Per device: [0] mem_fwd, [1] mem_bwd of position j run by s (an op's saved activation is its
 * input: the share of it that arrives split is divided by T; so is a split output). */
static void op_mem(const inst_t *t, int j, const pf_sharding_sig_t *s, double mem[2])
{
    const pf_op_t *op = pf_graph_op(t->g, t->ops[j]);
    double in_all = 0, in_split = 0;
    for (int a = t->in_start[j]; a < t->in_start[j + 1]; a++) {
        double b = t->tens_bytes[t->in_tens[a]];
        in_all += b;
        if (required(s, a - t->in_start[j], 0).kind == PF_SHARDING_S)
            in_split += b;
    }
    int out_split = s->out.kind == PF_SHARDING_S;
    mem[0] = scaled_mem(op->mem_fwd_bytes, t->tens_bytes[j], out_split, in_all, in_split, t->T);
    mem[1] = scaled_mem(op->mem_bwd_bytes, t->tens_bytes[j], out_split, in_all, in_split, t->T);
}

static int weight_digit(uint64_t plan, int widx)
{
    while (widx-- > 0)
        plan /= 3;
    return (int)(plan % 3);
}

/* Prices plan `plan` on one instance: each op greedily takes its cheapest signature (or
 * forced[j]); the unit's outputs end as B. 0 with the time and memory, -1 when infeasible. */
static int eval_plan(const inst_t *t, uint64_t plan, const int *forced, scratch_t *sc,
                     record_t *rec, double *time_ms, double *mem_bytes)
{
    double time = 0, mem = 0;
    uint64_t rest = plan;
    for (int x = 0; x < t->ntens; x++)
        sc->prop[x] = pf_sharding_b(), sc->nfwd[x] = sc->ngrad[x] = 0;
    for (int j = 0; j < t->nops; j++) {
        const pf_op_t *op = pf_graph_op(t->g, t->ops[j]);
        int w = 0;
        if (t->widx[j] >= 0)
            w = (int)(rest % 3), rest /= 3;
        const pf_sharding_sig_t *s = t->sig + (size_t)(j * 3 + w) * PF_SHARDING_MAX_SIGS;
        int ns = t->nsig[j * 3 + w], pick = forced ? forced[j] : 0;
        if (ns == 0 || pick >= ns)
            return -1;
        double best = sig_cost(t, sc, j, &s[pick]);
        for (int i = 1; !forced && i < ns; i++) {
            double c = sig_cost(t, sc, j, &s[i]);
            if (c < best)
                best = c, pick = i;
        }
        s += pick;
        time += compute_ms(op, s->split, t->T);
        if (s->weight_grad_partial) {
            double ms = pf_conv_ms(PF_CONV_ALLREDUCE, t->T, op->param_bytes, t->link);
            time += ms;
            record(rec, PF_CONV_ALLREDUCE, 1, j, 1, op->param_bytes, ms);
        }
        for (int a = t->in_start[j]; a < t->in_start[j + 1]; a++) {
            int k = a - t->in_start[j], x = t->in_tens[a], charge = x < t->nops ? x : j;
            time += pay(t, sc, rec, x, required(s, k, 0), 0, charge);
            time += pay(t, sc, rec, x, required(s, k, 1), 1, charge);
        }
        sc->prop[j] = s->out;
        sc->choice[j] = pick;
        double m[2];
        op_mem(t, j, s, m);
        mem += m[0] + op->param_bytes * (w ? 1.0 / t->T : 1.0) * t->o->param_state_factor;
    }
    for (int j = 0; j < t->nops; j++)
        if (t->ext_out[j]) {
            time += pay(t, sc, rec, j, pf_sharding_b(), 0, j);
            time += pay(t, sc, rec, j, pf_sharding_b(), 1, j);
        }
    *time_ms = time;
    *mem_bytes = mem;
    return t->o->mem_limit_bytes > 0 && mem > t->o->mem_limit_bytes ? -1 : 0;
}

/* ---- enumeration ---- */

static int check_args(const pf_tap_units_t *u, int unit, int T, const pf_sharding_link_t *link,
                      char *err, size_t errlen)
{
    if (T < 1)
        return pf_fail(err, errlen, PF_EINPUT, "tap: tensor-parallel degree %d is below 1", T);
    if (!link || !(link->gbps > 0) || !isfinite(link->gbps) ||
        !pf_is_finite_nonneg(link->latency_us))
        return pf_fail(err, errlen, PF_EINPUT,
                       "tap: the TP group's link needs gbps > 0 and latency_us >= 0");
    if (u && (unit < 0 || unit >= u->nunits))
        return pf_fail(err, errlen, PF_EINPUT, "tap: unit %d is not in 0..%d", unit, u->nunits - 1);
    return PF_OK;
}

/* Time, then memory, then the lower index: a total order, so any split of the work into
 * slices or threads keeps the same winners. */
static int cand_before(const pf_tap_cand_t *a, const pf_tap_cand_t *b)
{
    if (a->time_ms != b->time_ms)
        return a->time_ms < b->time_ms;
    if (a->mem_bytes != b->mem_bytes)
        return a->mem_bytes < b->mem_bytes;
    return a->plan < b->plan;
}

static void keep(pf_tap_slice_t *s, pf_tap_cand_t c)
{
    int i = s->nbest < PF_TAP_KEEP ? s->nbest++ : PF_TAP_KEEP;
    if (i == PF_TAP_KEEP) {
        if (!cand_before(&c, &s->best[PF_TAP_KEEP - 1]))
            return;
        i = PF_TAP_KEEP - 1;
    }
    for (; i > 0 && cand_before(&c, &s->best[i - 1]); i--)
        s->best[i] = s->best[i - 1];
    s->best[i] = c;
}

int pf_tap_enum_slice(const pf_graph_t *g, const pf_tap_units_t *u, int unit, int T,
                      const pf_sharding_link_t *link, const pf_tap_opts_t *o, uint64_t lo,
                      uint64_t hi, pf_tap_slice_t *out, char *err, size_t errlen)
{
    int rc = check_args(u, unit, T, link, err, errlen), failed = 0;
    if (rc)
        return rc;
    const unit_t *un = &u->units[unit];
    if (lo > hi || hi > pow3(un->nweights))
        return pf_fail(err, errlen, PF_EINPUT,
                       "tap: slice [%llu, %llu) is outside unit %s's %llu plans",
                       (unsigned long long)lo, (unsigned long long)hi, un->name,
                       (unsigned long long)pow3(un->nweights));
    memset(out, 0, sizeof *out);
    *out = (pf_tap_slice_t){.unit = unit, .T = T, .lo = lo, .hi = hi};
    inst_t t;
    if (inst_build(&t, g, un->ops, un->nops, T, link, o))
        return pf_fail(err, errlen, PF_ERR, "tap: out of memory");
#pragma omp parallel
    {
        scratch_t sc;
        pf_tap_slice_t local = {0};
        int ok = scratch_new(&sc, &t) == PF_OK;
#pragma omp for schedule(dynamic, 64)
        for (uint64_t p = lo; p < hi; p++) {
            double time, mem;
            if (ok && eval_plan(&t, p, NULL, &sc, NULL, &time, &mem) == 0) {
                local.feasible++;
                keep(&local, (pf_tap_cand_t){p, time, mem});
            }
        }
#pragma omp critical(pf_tap_merge)
        {
            failed |= !ok;
            out->feasible += local.feasible;
            for (int i = 0; i < local.nbest; i++)
                keep(out, local.best[i]);
        }
        scratch_free(&sc);
    }
    inst_free(&t);
    if (failed)
        return pf_fail(err, errlen, PF_ERR, "tap: out of memory");
    return PF_OK;
}

int pf_tap_merge(const pf_tap_slice_t *slices, int n, pf_tap_slice_t *out, char *err,
                 size_t errlen)
{
    if (n < 1)
        return pf_fail(err, errlen, PF_EINPUT, "tap: nothing to merge");
    pf_tap_slice_t m = {.unit = slices[0].unit, .T = slices[0].T, .lo = slices[0].lo,
                        .hi = slices[0].hi};
    for (int i = 0; i < n; i++) {
        if (slices[i].unit != m.unit || slices[i].T != m.T)
            return pf_fail(err, errlen, PF_EINPUT,
                           "tap: slice %d is of unit %d, T %d; slice 0 of unit %d, T %d", i,
                           slices[i].unit, slices[i].T, m.unit, m.T);
        m.lo = slices[i].lo < m.lo ? slices[i].lo : m.lo;
        m.hi = slices[i].hi > m.hi ? slices[i].hi : m.hi;
        m.feasible += slices[i].feasible;
        for (int k = 0; k < slices[i].nbest && k < PF_TAP_KEEP; k++)
            keep(&m, slices[i].best[k]);
    }
    *out = m;
    return PF_OK;
}

/* ---- rewrite onto every instance ---- */

void pf_tap_result_free(pf_tap_result_t *res)
{
    if (!res)
        return;
    for (int k = 0; res->units && k < res->nunits; k++) {
        free((char *)res->units[k].name);
        free(res->units[k].colls);
    }
    free(res->units);
    free(res->ops);
    free(res->edge_bytes);
    memset(res, 0, sizeof *res);
}

/* One instance under the representative's choices (or, for the representative, its own
 * greedy ones): fills res->ops and edge_bytes of its ops; rec gets its collectives. */
static int apply_instance(const inst_t *t, uint64_t plan, int unit, const int *forced,
                          scratch_t *sc, record_t *rec, pf_tap_result_t *res, double *time_ms)
{
    double mem;
    if (eval_plan(t, plan, forced, sc, rec, time_ms, &mem))
        return PF_EINFEASIBLE;
    if (rec->failed)
        return PF_ERR;
    for (int j = 0; j < t->nops; j++) {
        int v = t->ops[j], w = t->widx[j] >= 0 ? weight_digit(plan, t->widx[j]) : 0;
        const pf_op_t *op = pf_graph_op(t->g, v);
        const pf_sharding_sig_t *s = t->sig + (size_t)(j * 3 + w) * PF_SHARDING_MAX_SIGS + sc->choice[j];
        pf_tap_op_t *r = &res->ops[v];
        double comm[2] = {0, 0}, m[2];
        for (size_t c = 0; c < rec->ncolls; c++)
            if (rec->colls[c].op == j)
                comm[rec->colls[c].backward] += rec->colls[c].ms;
        op_mem(t, j, s, m);
        *r = (pf_tap_op_t){.fwd_ms = s->split ? op->fwd_ms / t->T : op->fwd_ms,
                           .bwd_ms = s->split ? op->bwd_ms / t->T : op->bwd_ms,
                           .fwd_comm_ms = comm[0], .bwd_comm_ms = comm[1],
                           .param_bytes = w ? op->param_bytes / t->T : op->param_bytes,
                           .mem_fwd_bytes = m[0], .mem_bwd_bytes = m[1],
                           .weight = weight_option[w], .output = s->out, .split = s->split,
                           .unit = unit};
        r->fwd_ms += comm[0];
        r->bwd_ms += comm[1];
        for (int a = t->in_start[j]; a < t->in_start[j + 1]; a++) {
            double b = pf_graph_edge(t->g, t->in_edge[a])->bytes;
            int split = required(s, a - t->in_start[j], 0).kind == PF_SHARDING_S;
            res->edge_bytes[t->in_edge[a]] = split ? b / t->T : b;
        }
    }
    return PF_OK;
}

int pf_tap_apply(const pf_graph_t *g, const pf_tap_units_t *u, int T,
                 const pf_sharding_link_t *link, const pf_tap_opts_t *o, const uint64_t *plans,
                 pf_tap_result_t *res, char *err, size_t errlen)
{
    int rc = check_args(NULL, 0, T, link, err, errlen), *choice = NULL;
    pf_sharding_t *props = NULL;
    inst_t t = {0};
    scratch_t sc = {0};
    record_t rec = {0};
    memset(res, 0, sizeof *res);
    if (rc)
        return rc;
    res->T = T;
    res->nops = pf_graph_nops(g);
    res->nunits = u->nunits;
    if (!(res->ops = calloc((size_t)res->nops, sizeof *res->ops)) ||
        !(res->units = calloc((size_t)u->nunits, sizeof *res->units)) ||
        !(res->edge_bytes = calloc((size_t)pf_graph_nedges(g) + 1, sizeof *res->edge_bytes)))
        goto oom;
    for (int k = 0; k < u->nunits; k++) {
        const unit_t *un = &u->units[k];
        pf_tap_unit_plan_t *up = &res->units[k];
        if (plans[k] >= pow3(un->nweights)) {
            rc = pf_fail(err, errlen, PF_EINPUT, "tap: plan %llu of unit %s is not below 3^%d",
                         (unsigned long long)plans[k], un->name, un->nweights);
            goto fail;
        }
        *up = (pf_tap_unit_plan_t){.name = pf_strdup(un->name), .ninstances = un->ninst,
                                   .nops = un->nops, .nweights = un->nweights, .plan = plans[k]};
        free(choice), free(props);
        if (!up->name || !(choice = malloc(sizeof *choice * (size_t)un->nops)) ||
            !(props = malloc(sizeof *props * (size_t)un->nops)))
            goto oom;
        for (int i = 0; i < un->ninst; i++) {
            const int *ops = un->ops + (size_t)i * un->nops;
            double time;
            if (inst_build(&t, g, ops, un->nops, T, link, o) || scratch_new(&sc, &t))
                goto oom;
            rc = apply_instance(&t, plans[k], k, i ? choice : NULL, &sc, &rec, res, &time);
            if (rc == PF_ERR)
                goto oom;
            if (rc) {
                rc = pf_fail(err, errlen, PF_EINFEASIBLE, "tap: plan %llu of unit %s cannot run "
                             "on its instance %d (op %s)", (unsigned long long)plans[k], un->name,
                             i, pf_graph_op(g, ops[0])->name);
                goto fail;
            }
            for (int j = 0; j < un->nops; j++) {
                if (i == 0) {
                    choice[j] = sc.choice[j], props[j] = sc.prop[j];
                } else if (!pf_sharding_equal(props[j], sc.prop[j])) {
                    rc = pf_fail(err, errlen, PF_ERR, "tap: unit %s: instance %d gives op %s "
                                 "another property than instance 0", un->name, i,
                                 pf_graph_op(g, ops[j])->name);
                    goto fail;
                }
            }
            if (i == 0) { /* the representative's collectives, by graph op */
                for (size_t c = 0; c < rec.ncolls; c++)
                    rec.colls[c].op = ops[rec.colls[c].op];
                up->time_ms = time;
                up->colls = rec.colls;
                up->ncolls = (int)rec.ncolls;
                rec = (record_t){0};
            }
            free(rec.colls);
            rec = (record_t){0};
            inst_free(&t);
            scratch_free(&sc);
        }
    }
    free(choice);
    free(props);
    return PF_OK;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "tap: out of memory");
fail:
    free(choice);
    free(props);
    free(rec.colls);
    inst_free(&t);
    scratch_free(&sc);
    pf_tap_result_free(res);
    return rc;
}

int pf_tap_plan(const pf_graph_t *g, int T, const pf_sharding_link_t *link, const pf_tap_opts_t *o,
                pf_tap_result_t *res, char *err, size_t errlen)
{
    int rc = check_args(NULL, 0, T, link, err, errlen);
    uint64_t *plans = NULL;
    memset(res, 0, sizeof *res);
    if (rc)
        return rc;
    pf_tap_units_t *u = pf_tap_units_new(g, o, err, errlen);
    if (!u)
        return PF_ERR;
    if (!(plans = malloc(sizeof *plans * (size_t)(u->nunits + 1)))) {
        rc = pf_fail(err, errlen, PF_ERR, "tap: out of memory");
        goto done;
    }
    for (int k = 0; k < u->nunits; k++) {
        pf_tap_slice_t s;
        if ((rc = pf_tap_enum_slice(g, u, k, T, link, o, 0, pow3(u->units[k].nweights), &s, err,
                                    errlen)))
            goto done;
        if (s.nbest == 0) {
            rc = pf_fail(err, errlen, PF_EINFEASIBLE,
                         "tap: no tensor-parallel plan of degree %d for unit %s", T,
                         u->units[k].name);
            goto done;
        }
        plans[k] = s.best[0].plan;
    }
    rc = pf_tap_apply(g, u, T, link, o, plans, res, err, errlen);
done:
    free(plans);
    pf_tap_units_destroy(&u);
    return rc;
}

int pf_tap_graph(const pf_graph_t *g, const pf_tap_result_t *res, pf_graph_t **out, char *err,
                 size_t errlen)
{
    *out = NULL;
    if (res->nops != pf_graph_nops(g))
        return pf_fail(err, errlen, PF_EINPUT, "tap: the result has %d ops, the graph %d",
                       res->nops, pf_graph_nops(g));
    pf_graph_t *t = pf_graph_new(pf_graph_name(g), pf_graph_microbatch(g));
    int rc = t ? PF_OK : PF_ERR;
    for (int v = 0; v < res->nops && !rc; v++) {
        pf_op_t op = *pf_graph_op(g, v);
        const pf_tap_op_t *r = &res->ops[v];
        op.fwd_ms = r->fwd_ms, op.bwd_ms = r->bwd_ms, op.param_bytes = r->param_bytes;
        op.mem_fwd_bytes = r->mem_fwd_bytes, op.mem_bwd_bytes = r->mem_bwd_bytes;
        if (pf_graph_add_op(t, &op) < 0)
            rc = PF_ERR;
    }
    for (int e = 0; e < pf_graph_nedges(g) && !rc; e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (pf_graph_add_edge(t, ed->src, ed->dst, res->edge_bytes[e]) < 0)
            rc = PF_ERR;
    }
    if (rc) {
        pf_graph_destroy(&t);
        return pf_fail(err, errlen, PF_ERR, "tap: out of memory");
    }
    if ((rc = pf_graph_finalize(t, err, errlen))) {
        pf_graph_destroy(&t);
        return rc;
    }
    *out = t;
    return PF_OK;
}
