#include "planner/ir/devkinds.h"
#include "planner/ir/devmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct pf_devkinds {
    int K, n, D;
    bool uniform;
    int *kind_of;       /* D */
    const char **name;  /* K, borrowed from the cluster's devices */
    double *fwd, *bwd;  /* n x K, NULL when uniform */
};

void pf_devkinds_destroy(pf_devkinds_t **dkp)
{
    if (!dkp || !*dkp)
        return;
    pf_devkinds_t *dk = *dkp;
    free(dk->kind_of);
    free(dk->name);
    free(dk->fwd);
    free(dk->bwd);
    free(dk);
    *dkp = NULL;
}

static bool same_name(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* kind_of and name from the devices' model strings, numbered as pf_devkinds_number does. */
static void number_kinds(pf_devkinds_t *dk, const pf_cluster_t *c)
{
    dk->K = pf_devkinds_number(c, dk->kind_of);
    for (int d = 0; d < dk->D; d++)
        dk->name[dk->kind_of[d]] = pf_cluster_device(c, d)->device_model;
}

/* x / y, 1 when either side is unknown. */
static double ratio(double x, double y, int ok)
{
    return ok && y > 0 && x > 0 ? x / y : 1.0;
}

/* Kind k's model: the graph's own (its carried one: graph.h) for the kind of its name, so that
 * those devices keep the graph's times; else the preset of the kind's name. */
static const pf_devmodel_t *kind_model(const pf_devkinds_t *dk, int k, const pf_graph_t *g,
                                       const pf_devmodel_t *gm)
{
    const char *gname = pf_graph_device_model(g);
    if (!dk->name[k])
        return NULL;
    return gname && !strcmp(dk->name[k], gname) ? gm : pf_devmodel_preset(dk->name[k]);
}

static void price_ops(pf_devkinds_t *dk, const pf_graph_t *g, const pf_devmodel_t *gm)
{
    for (int k = 0; k < dk->K; k++) {
        const pf_devmodel_t *km = kind_model(dk, k, g, gm);
        for (int v = 0; v < dk->n; v++) {
            size_t i = (size_t)v * dk->K + k;
            double f0 = 0, b0 = 0, f1 = 0, b1 = 0;
            const pf_op_work_t *w = &pf_graph_op(g, v)->work;
            int ok = gm && km && km != gm && pf_devmodel_op_ms(gm, PF_PREC_BF16, w, &f0, &b0) &&
                     pf_devmodel_op_ms(km, PF_PREC_BF16, w, &f1, &b1);
            dk->fwd[i] = ratio(f1, f0, ok);
            dk->bwd[i] = ratio(b1, b0, ok);
            dk->uniform = dk->uniform && dk->fwd[i] == 1.0 && dk->bwd[i] == 1.0;
        }
    }
}

int pf_devkinds_number(const pf_cluster_t *c, int *kind_of)
{
    int D = pf_cluster_ndevices(c), K = 0;
    for (int d = 0; d < D; d++) {
        const char *m = pf_cluster_device(c, d)->device_model;
        int e = 0;
        while (e < d && !same_name(pf_cluster_device(c, e)->device_model, m))
            e++;
        kind_of[d] = e < d ? kind_of[e] : K++;
    }
    return K;
}

bool pf_devkinds_one(const pf_cluster_t *c)
{
    const char *m = pf_cluster_device(c, 0)->device_model;
    for (int d = 1; d < pf_cluster_ndevices(c); d++)
        if (!same_name(pf_cluster_device(c, d)->device_model, m))
            return false;
    return true;
}

int pf_devkinds_number_of(const pf_cluster_t *c, int d)
{
    enum { SEEN = 64 };
    const char *seen[SEEN];
    const char *m = pf_cluster_device(c, d)->device_model;
    int K = 0;
    for (int e = 0; e <= d; e++) {
        const char *x = pf_cluster_device(c, e)->device_model;
        int k = 0;
        while (k < K && !same_name(seen[k], x))
            k++;
        if (same_name(x, m))
            return k;
        if (k == K && K < SEEN)
            seen[K++] = x;
    }
    return K;
}

pf_devkinds_t *pf_devkinds_new(const pf_graph_t *g, const pf_cluster_t *c)
{
    pf_devkinds_t *dk = calloc(1, sizeof *dk);
    if (!dk)
        return NULL;
    dk->D = pf_cluster_ndevices(c);
    dk->n = pf_graph_nops(g);
    dk->uniform = true;
    dk->kind_of = calloc((size_t)dk->D + 1, sizeof *dk->kind_of);
    dk->name = calloc((size_t)dk->D + 1, sizeof *dk->name);
    if (!dk->kind_of || !dk->name)
        goto fail;
    number_kinds(dk, c);
    const pf_devmodel_t *gm = pf_graph_device(g);
    if (dk->K < 2 || !gm)
        return dk; /* one kind: the graph's times; an unknown graph model: nothing to scale */
    dk->fwd = malloc(((size_t)dk->n * dk->K + 1) * sizeof *dk->fwd);
    dk->bwd = malloc(((size_t)dk->n * dk->K + 1) * sizeof *dk->bwd);
    if (!dk->fwd || !dk->bwd)
        goto fail;
    price_ops(dk, g, gm);
    return dk;
fail:
    pf_devkinds_destroy(&dk);
    return NULL;
}

int pf_devkinds_count(const pf_devkinds_t *dk) { return dk->K; }
int pf_devkinds_of(const pf_devkinds_t *dk, int device) { return dk->kind_of[device]; }
const char *pf_devkinds_name(const pf_devkinds_t *dk, int kind) { return dk->name[kind]; }
bool pf_devkinds_uniform(const pf_devkinds_t *dk) { return dk->uniform; }

double pf_devkinds_fwd_ratio(const pf_devkinds_t *dk, int v, int kind)
{
    return dk->uniform ? 1.0 : dk->fwd[(size_t)v * dk->K + kind];
}

double pf_devkinds_bwd_ratio(const pf_devkinds_t *dk, int v, int kind)
{
    return dk->uniform ? 1.0 : dk->bwd[(size_t)v * dk->K + kind];
}

double pf_devkinds_cu_ms(const pf_devkinds_t *dk, const pf_graph_t *g, int v, int kind)
{
    if (dk->uniform)
        return pf_graph_cu_ms(g, v);
    const pf_op_t *op = pf_graph_op(g, v);
    double cf = fmin(op->comm_fwd_ms, op->fwd_ms), cb = fmin(op->comm_bwd_ms, op->bwd_ms);
    return (op->fwd_ms - cf) * pf_devkinds_fwd_ratio(dk, v, kind) + cf +
           (op->bwd_ms - cb) * pf_devkinds_bwd_ratio(dk, v, kind) + cb;
}

double pf_devkinds_graph_ratio(const pf_devkinds_t *dk, const pf_graph_t *g, int kind)
{
    if (dk->uniform)
        return 1.0;
    double on_k = 0, base = 0;
    for (int v = 0; v < dk->n; v++) {
        on_k += pf_devkinds_cu_ms(dk, g, v, kind);
        base += pf_graph_cu_ms(g, v);
    }
    return base > 0 ? on_k / base : 1.0;
}
