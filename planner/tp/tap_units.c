/* tap_units: TAP's units (Shi et al., "TAP: Efficient Derivation of Tensor Parallel Plans for
 * Large Neural Networks", Algorithm 1 PRUNEGRAPH) with a structural hash; tap.h describes them. */
#include "planner/tp/tap_units.h"
#include "planner/core/util.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WEIGHTS 39 /* 3^39 < 2^63 */

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

static bool same_family(const name_rec_t *a, const name_rec_t *b)
{
    return a->fam_len == b->fam_len && !memcmp(a->name, b->name, (size_t)a->fam_len);
}

static bool same_instance(const name_rec_t *a, const name_rec_t *b)
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

static bool same_types(const pf_graph_t *g, const int *a, const int *b, int n)
{
    for (int j = 0; j < n; j++) {
        const char *x = pf_graph_op(g, a[j])->type, *y = pf_graph_op(g, b[j])->type;
        if (strcmp(x ? x : "", y ? y : ""))
            return false;
    }
    return true;
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

static int weight_limit(const pf_tap_opts_t *o)
{
    if (o->whole_instances)
        return INT_MAX;
    return o->max_unit_weights < MAX_WEIGHTS ? o->max_unit_weights : MAX_WEIGHTS;
}

static int add_checked(pf_tap_units_t *u, const pf_graph_t *g, const pf_tap_opts_t *o,
                       const char *name, uint64_t hash, int ninst, int nops, int **ops)
{
    int w = count_weights(g, *ops, nops), rc;
    if (w <= weight_limit(o))
        return add_unit(u, name, hash, ninst, nops, w, ops);
    rc = add_units_per_op(u, g, *ops, ninst, nops);
    free(*ops);
    *ops = NULL;
    return rc;
}

/* The length of an op name's part below its instance: up to the end of the first numeric
 * component after name[0, inst_len) ("layers.3.moe.experts.5.gate" -> "layers.3.moe.experts.5"),
 * or inst_len when there is none (the op belongs to the instance's own rest). */
static int part_len(const char *name, int inst_len)
{
    for (int b = inst_len + (name[inst_len] == '.'); name[b];) {
        int e = b;
        bool numeric = true;
        for (; name[e] && name[e] != '.'; e++)
            numeric &= isdigit((unsigned char)name[e]) != 0;
        if (numeric && e > b)
            return e;
        b = name[e] ? e + 1 : e;
    }
    return inst_len;
}

/* The positions of one part (the ops of instance 0 whose names share name0[0, len)) over all
 * instances: a unit when its weights fit, op by op otherwise. */
static int add_part(pf_tap_units_t *u, const pf_graph_t *g, const pf_tap_opts_t *o,
                    const char *family, const int *ops, int ninst, int nops, const bool *in_part,
                    const char *name0, int inst_len, int len)
{
    int np = 0, k = 0, *part;
    for (int j = 0; j < nops; j++)
        np += in_part[j];
    if (!(part = malloc(sizeof *part * (size_t)np * (size_t)ninst)))
        return PF_ERR;
    for (int i = 0; i < ninst; i++)
        for (int j = 0; j < nops; j++)
            if (in_part[j])
                part[k++] = ops[(size_t)i * nops + j];
    size_t fl = strlen(family), sl = (size_t)(len - inst_len);
    char *name = malloc(fl + sl + 1);
    if (!name) {
        free(part);
        return PF_ERR;
    }
    memcpy(name, family, fl);
    memcpy(name + fl, name0 + inst_len, sl);
    name[fl + sl] = '\0';
    int rc = add_checked(u, g, o, name, 0, ninst, np, &part);
    free(name);
    free(part);
    return rc;
}

/* A family whose instance holds more weighted ops than a unit may (an MoE layer: attention, the
 * router and every expert's three linears): one unit per part below the instance (each expert,
 * whose column- then row-parallel pair TAP finds only within one unit) and one for the rest,
 * rather than a unit per op. Takes ops. */
static int add_family(pf_tap_units_t *u, const pf_graph_t *g, const pf_tap_opts_t *o,
                      const char *family, uint64_t hash, int inst_len, int ninst, int nops,
                      int **ops)
{
    if (count_weights(g, *ops, nops) <= weight_limit(o))
        return add_unit(u, family, hash, ninst, nops, count_weights(g, *ops, nops), ops);
    int rc = PF_OK;
    bool *in_part = calloc((size_t)nops, sizeof *in_part), *done = calloc((size_t)nops, 1);
    if (!in_part || !done)
        rc = PF_ERR;
    for (int j = 0; j < nops && rc == PF_OK; j++) {
        if (done[j])
            continue;
        const char *name0 = pf_graph_op(g, (*ops)[j])->name;
        int len = part_len(name0, inst_len);
        for (int x = j; x < nops; x++) {
            const char *nx = pf_graph_op(g, (*ops)[x])->name;
            in_part[x] = !done[x] && part_len(nx, inst_len) == len && !strncmp(nx, name0, len);
            done[x] |= in_part[x];
        }
        rc = add_part(u, g, o, family, *ops, ninst, nops, in_part, name0, inst_len, len);
        memset(in_part, 0, (size_t)nops * sizeof *in_part);
    }
    free(in_part);
    free(done);
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
        if (add_family(u, g, o, name, fnv(FNV_SEED, sa, la * sizeof *sa),
                       recs[start[a]].inst_len, count, n, &ops))
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

/* Every numeric component of every op's dotted name is a candidate block level: one record
 * per component ("layers.7.attn.q" gives "layers.7"). */
static int name_records(const pf_graph_t *g, name_rec_t **recs, int *nrec)
{
    size_t rcap = 0;
    const int *pos = pf_graph_topo_pos(g);
    *nrec = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const char *s = pf_graph_op(g, v)->name;
        for (int b = 0; s[b];) {
            int e = b;
            while (s[e] && s[e] != '.')
                e++;
            bool numeric = e > b;
            for (int i = b; i < e; i++)
                numeric &= isdigit((unsigned char)s[i]) != 0;
            if (numeric && b > 0) {
                if (pf_grow((void **)recs, &rcap, (size_t)*nrec + 1, sizeof **recs))
                    return PF_ERR;
                (*recs)[(*nrec)++] = (name_rec_t){s, b, e, v, pos[v], 0};
            }
            b = s[e] ? e + 1 : e;
        }
    }
    return PF_OK;
}

/* findSimilarBlk: instances per family; an op joins its coarsest family repeated at least
 * minDuplicate times. Keeps, sorted, only the records of the level each op joins, marks those
 * ops in_block and returns how many records are kept. */
static int coarsest_blocks(name_rec_t *recs, int nrec, int n, int min_duplicate, int *in_block)
{
    int *best = malloc(sizeof *best * (size_t)n), nb = 0;
    if (!best)
        return -1;
    for (int v = 0; v < n; v++)
        best[v] = -1;
    if (nrec > 0) /* no named op: recs may be NULL */
        qsort(recs, (size_t)nrec, sizeof *recs, rec_cmp);
    for (int f = 0, l; f < nrec; f = l) {
        int count = 1;
        for (l = f + 1; l < nrec && same_family(&recs[f], &recs[l]); l++)
            count += !same_instance(&recs[l - 1], &recs[l]);
        for (int r = f; r < l; r++) {
            recs[r].count = count;
            int v = recs[r].v;
            if (count >= min_duplicate &&
                (best[v] < 0 || recs[r].fam_len < recs[best[v]].fam_len))
                best[v] = r;
        }
    }
    for (int r = 0; r < nrec; r++)
        if (best[recs[r].v] == r)
            recs[nb++] = recs[r], in_block[recs[r].v] = 1;
    if (nb > 0)
        qsort(recs, (size_t)nb, sizeof *recs, rec_cmp);
    free(best);
    return nb;
}

/* The units of the repeated families, then of the ops outside them, in topological order of
 * their first op; unit_of from them. */
static int build_units(pf_tap_units_t *u, const pf_graph_t *g, const pf_tap_opts_t *o,
                       const name_rec_t *recs, int nb, const int *in_block)
{
    int n = pf_graph_nops(g), *rel = malloc(sizeof *rel * (size_t)n), rc = PF_ERR;
    if (!rel)
        return PF_ERR;
    for (int v = 0; v < n; v++)
        rel[v] = -1;
    for (int f = 0, l; f < nb; f = l) {
        for (l = f + 1; l < nb && same_family(&recs[f], &recs[l]); l++)
            ;
        if (family_units(u, g, o, recs, f, l, rel))
            goto fail;
    }
    if (rest_units(u, g, o, in_block))
        goto fail;
    qsort_r(u->units, (size_t)u->nunits, sizeof *u->units, unit_pos_cmp,
            (void *)pf_graph_topo_pos(g));
    for (int k = 0; k < u->nunits; k++)
        for (int i = 0; i < u->units[k].ninst * u->units[k].nops; i++)
            u->unit_of[u->units[k].ops[i]] = k;
    rc = PF_OK;
fail:
    free(rel);
    return rc;
}

pf_tap_units_t *pf_tap_units_new(const pf_graph_t *g, const pf_tap_opts_t *o, char *err,
                                 size_t errlen)
{
    int n = pf_graph_nops(g), nrec = 0, nb;
    name_rec_t *recs = NULL;
    int *in_block = NULL;
    if (o->min_duplicate < 2) {
        pf_fail(err, errlen, PF_EINPUT, "tap: min_duplicate %d is below 2", o->min_duplicate);
        return NULL;
    }
    pf_tap_units_t *u = calloc(1, sizeof *u);
    if (!u || !(in_block = calloc((size_t)n, sizeof *in_block)) ||
        !(u->unit_of = malloc(sizeof *u->unit_of * (size_t)n)))
        goto fail;
    if (name_records(g, &recs, &nrec) ||
        (nb = coarsest_blocks(recs, nrec, n, o->min_duplicate, in_block)) < 0 ||
        build_units(u, g, o, recs, nb, in_block))
        goto fail;
    free(recs);
    free(in_block);
    return u;
fail:
    pf_fail(err, errlen, PF_ERR, "tap: out of memory finding repeated blocks");
    free(recs);
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

static uint64_t pow3(int n) /* saturates past 3^40 (a whole instance's structure only) */
{
    uint64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (p > UINT64_MAX / 3)
            return UINT64_MAX;
        p *= 3;
    }
    return p;
}

int pf_tap_units_info(const pf_tap_units_t *u, int k, pf_tap_units_info_t *info)
{
    if (k < 0 || k >= u->nunits)
        return PF_EINPUT;
    const unit_t *t = &u->units[k];
    *info = (pf_tap_units_info_t){t->name, t->hash, t->ninst, t->nops, t->nweights,
                                  pow3(t->nweights)};
    return PF_OK;
}

const int *pf_tap_units_instance(const pf_tap_units_t *u, int k, int i)
{
    if (k < 0 || k >= u->nunits || i < 0 || i >= u->units[k].ninst)
        return NULL;
    return u->units[k].ops + (size_t)i * u->units[k].nops;
}

int pf_tap_units_of(const pf_tap_units_t *u, int v) { return u->unit_of[v]; }

