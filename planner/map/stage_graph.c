#include "planner/map/stage_graph.h"
#include "planner/ir/cost.h"
#include "planner/ir/devkinds.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STAGE_REPLICAS (1 << 20)

struct pf_stage_graph {
    int stages, replicas;
    double *cu_ms;       /* S */
    double *param_bytes; /* S */
    double *msg_bytes;   /* S x S, symmetric, zero diagonal */
    int *adj_off, *adj;  /* CSR over stages: neighbours with M > 0, ascending */
    int nkinds;          /* 0: one cost per stage */
    double *cu_kind_ms;  /* S x nkinds */
};

void pf_stage_graph_destroy(pf_stage_graph_t **sgp)
{
    if (!sgp || !*sgp)
        return;
    pf_stage_graph_t *sg = *sgp;
    free(sg->cu_ms);
    free(sg->param_bytes);
    free(sg->msg_bytes);
    free(sg->adj_off);
    free(sg->adj);
    free(sg->cu_kind_ms);
    free(sg);
    *sgp = NULL;
}

/* Allocates everything but the adjacency, zero-filled. */
static pf_stage_graph_t *alloc_graph(int stages, int replicas)
{
    if (stages <= 0 || replicas <= 0 || (long long)stages * replicas > MAX_STAGE_REPLICAS)
        return NULL;
    pf_stage_graph_t *sg = calloc(1, sizeof *sg);
    if (!sg)
        return NULL;
    size_t S = (size_t)stages;
    sg->stages = stages;
    sg->replicas = replicas;
    sg->cu_ms = calloc(S, sizeof *sg->cu_ms);
    sg->param_bytes = calloc(S, sizeof *sg->param_bytes);
    sg->msg_bytes = calloc(S * S, sizeof *sg->msg_bytes);
    sg->adj_off = calloc(S + 1, sizeof *sg->adj_off);
    if (!sg->cu_ms || !sg->param_bytes || !sg->msg_bytes || !sg->adj_off)
        pf_stage_graph_destroy(&sg);
    return sg;
}

static int build_adjacency(pf_stage_graph_t *sg)
{
    int S = sg->stages, n = 0;
    for (int s = 0; s < S; s++)
        for (int t = 0; t < S; t++)
            n += t != s && sg->msg_bytes[(size_t)s * S + t] > 0;
    sg->adj = malloc((size_t)(n ? n : 1) * sizeof *sg->adj);
    if (!sg->adj)
        return PF_ERR;
    n = 0;
    for (int s = 0; s < S; s++) {
        sg->adj_off[s] = n;
        for (int t = 0; t < S; t++)
            if (t != s && sg->msg_bytes[(size_t)s * S + t] > 0)
                sg->adj[n++] = t;
    }
    sg->adj_off[S] = n;
    return PF_OK;
}

pf_stage_graph_t *pf_stage_graph_new(int stages, int replicas, const double *cu_ms,
                                     const double *param_bytes, const double *msg_bytes)
{
    if (!cu_ms || !param_bytes || !msg_bytes)
        return NULL;
    pf_stage_graph_t *sg = alloc_graph(stages, replicas);
    if (!sg)
        return NULL;
    size_t S = (size_t)stages;
    for (size_t s = 0; s < S; s++) {
        if (!pf_is_finite_nonneg(cu_ms[s]) || !pf_is_finite_nonneg(param_bytes[s]))
            goto fail;
        sg->cu_ms[s] = cu_ms[s];
        sg->param_bytes[s] = param_bytes[s];
        for (size_t t = 0; t < S; t++) {
            double m = msg_bytes[s * S + t];
            if (s == t)
                continue;
            if (!pf_is_finite_nonneg(m) || m != msg_bytes[t * S + s])
                goto fail;
            sg->msg_bytes[s * S + t] = m;
        }
    }
    if (build_adjacency(sg) != PF_OK)
        goto fail;
    return sg;
fail:
    pf_stage_graph_destroy(&sg);
    return NULL;
}

pf_stage_graph_t *pf_stage_graph_from_plan(const pf_graph_t *g, const pf_plan_t *p)
{
    int n = pf_graph_nops(g), S = p->stages;
    int *owner = NULL;
    pf_stage_graph_t *sg = alloc_graph(S, p->replicas);
    if (!sg)
        return NULL;
    owner = pf_plan_op_stage(p, n);
    if (!owner)
        goto fail;
    for (int s = 0; s < S; s++) {
        const pf_stage_t *st = &p->stage_list[s];
        for (int i = 0; i < st->nops; i++) {
            int v = st->ops[i];
            if (v < 0 || v >= n)
                goto fail;
            sg->cu_ms[s] += pf_graph_cu_ms(g, v);
            sg->param_bytes[s] += pf_graph_op(g, v)->param_bytes;
        }
    }
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        int a = owner[ed->src], b = owner[ed->dst];
        if (a < 0 || b < 0 || a == b)
            continue;
        sg->msg_bytes[(size_t)a * S + b] += ed->bytes;
        sg->msg_bytes[(size_t)b * S + a] += ed->bytes;
    }
    if (build_adjacency(sg) != PF_OK)
        goto fail;
    free(owner);
    return sg;
fail:
    free(owner);
    pf_stage_graph_destroy(&sg);
    return NULL;
}

int pf_stage_graph_stages(const pf_stage_graph_t *sg) { return sg->stages; }
int pf_stage_graph_replicas(const pf_stage_graph_t *sg) { return sg->replicas; }
double pf_stage_graph_cu_ms(const pf_stage_graph_t *sg, int s) { return sg->cu_ms[s]; }
double pf_stage_graph_param_bytes(const pf_stage_graph_t *sg, int s) { return sg->param_bytes[s]; }

double pf_stage_graph_msg_bytes(const pf_stage_graph_t *sg, int s, int t)
{
    return s == t ? 0.0 : sg->msg_bytes[(size_t)s * sg->stages + t];
}

const int *pf_stage_graph_neighbors(const pf_stage_graph_t *sg, int s, int *count)
{
    *count = sg->adj_off[s + 1] - sg->adj_off[s];
    return sg->adj + sg->adj_off[s];
}

double pf_stage_graph_allreduce_bytes(const pf_stage_graph_t *sg, int s)
{
    return pf_cost_ring_allreduce_bytes(sg->param_bytes[s], sg->replicas); /* eq. 7 */
}

double pf_stage_graph_total_allreduce_bytes(const pf_stage_graph_t *sg)
{
    double sum = 0;
    for (int s = 0; s < sg->stages; s++)
        sum += pf_stage_graph_allreduce_bytes(sg, s);
    return sum;
}

double pf_stage_graph_total_p2p_bytes(const pf_stage_graph_t *sg)
{
    double sum = 0;
    int S = sg->stages;
    for (int s = 0; s < S; s++)
        for (int t = s + 1; t < S; t++)
            sum += sg->msg_bytes[(size_t)s * S + t];
    return sum;
}

int pf_stage_graph_set_kind_cu(pf_stage_graph_t *sg, int K, const double *cu_sk)
{
    free(sg->cu_kind_ms);
    sg->cu_kind_ms = NULL;
    sg->nkinds = 0;
    if (K <= 0)
        return PF_OK;
    size_t n = (size_t)sg->stages * K;
    for (size_t i = 0; i < n; i++)
        if (!pf_is_finite_nonneg(cu_sk[i]))
            return PF_EINPUT;
    if (!(sg->cu_kind_ms = malloc(n * sizeof *sg->cu_kind_ms)))
        return PF_ERR;
    memcpy(sg->cu_kind_ms, cu_sk, n * sizeof *cu_sk);
    sg->nkinds = K;
    return PF_OK;
}

int pf_stage_graph_nkinds(const pf_stage_graph_t *sg) { return sg->nkinds; }

double pf_stage_graph_cu_kind_ms(const pf_stage_graph_t *sg, int s, int k)
{
    return sg->cu_kind_ms[(size_t)s * sg->nkinds + k];
}

int pf_stage_graph_price_kinds(pf_stage_graph_t *sg, const pf_graph_t *g, const pf_plan_t *p,
                               const pf_cluster_t *c)
{
    pf_devkinds_t *dk = pf_devkinds_new(g, c);
    if (!dk)
        return PF_ERR;
    int rc = PF_OK, K = pf_devkinds_count(dk), S = sg->stages;
    if (!pf_devkinds_uniform(dk)) {
        double *cu = calloc((size_t)S * K, sizeof *cu);
        for (int s = 0; cu && s < S; s++)
            for (int i = 0; i < p->stage_list[s].nops; i++)
                for (int k = 0; k < K; k++)
                    cu[(size_t)s * K + k] += pf_devkinds_cu_ms(dk, g, p->stage_list[s].ops[i], k);
        rc = cu ? pf_stage_graph_set_kind_cu(sg, K, cu) : PF_ERR;
        free(cu);
    }
    pf_devkinds_destroy(&dk);
    return rc;
}
