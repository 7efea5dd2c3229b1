/* partition_stagedeg: the DP_PARTITION job with a data-parallel degree per stage (issue 24;
 * partition_stagedeg.h). */
#include "planner/partition/partition_stagedeg.h"
#include "planner/partition/coarsen.h"
#include "planner/partition/stagedeg.h"
#include "planner/partition/stagedeg_tp.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The hyper-op graph the DP runs on: the caller's groups, else a coarsening to K hyper-ops
 * where the ops' own downsets are too many (pf_partition_default_k at one stage), else g. */
static int coarse_graph(const pf_graph_t *g, const pf_partition_opts_t *o,
                        const pf_cost_model_t *cm, int *group, int *ngroups, pf_graph_t **h,
                        char *err, size_t errlen)
{
    int n = pf_graph_nops(g), rc;
    int K = o->coarsen_k == 0 ? pf_partition_default_k(g, 1, o->max_downsets) : o->coarsen_k;
    *h = NULL;
    if (o->group) {
        memcpy(group, o->group, (size_t)n * sizeof *group);
        *ngroups = o->ngroups;
    } else if (o->coarsen_k >= 0 && K < n) {
        pf_coarsen_opts_t co = {.k = K, .alpha = o->alpha};
        if ((rc = pf_coarsen_run(g, cm, &co, group, ngroups, err, errlen)) != PF_OK)
            return rc;
    } else {
        for (int v = 0; v < n; v++)
            group[v] = v;
        *ngroups = n;
        return PF_OK;
    }
    return pf_coarsen_hyper_graph(g, group, *ngroups, h, err, errlen);
}

/* The DP over the downsets of h (topological prefixes past the cap): stagedeg.h's, or with
 * configurations per op and t stagedeg_tp.h's. */
static int solve(const pf_graph_t *h, const pf_cost_model_t *cm, const pf_partition_opts_t *o,
                 int D, const pf_stagedeg_tmpcs_t *tab, const pf_stagedeg_opcost_t *full,
                 pf_stagedeg_result_t **res, pf_plan_t *stats, char *err, size_t errlen)
{
    int capped = 0;
    pf_downsets_t *ds = pf_downsets_enumerate(h, o->max_downsets, &capped);
    int exact = ds != NULL;
    if (!ds && !capped)
        return pf_fail(err, errlen, PF_ERR, "partition: out of memory enumerating downsets");
    if (!ds && !(ds = pf_downsets_topo_prefixes(h)))
        return pf_fail(err, errlen, PF_ERR, "partition: out of memory");
    pf_stagedeg_opts_t so;
    pf_stagedeg_opts_init(&so);
    so.devices = D;
    so.threads = o->threads;
    so.stash_inputs = 1; /* the pipeline the simulator runs: relayed tensors, stashed inputs */
    so.edge_factor = 2;  /* each boundary byte forward as an activation, back as a gradient */
    so.full = full;      /* each stage none or full recomputation, where given */
    stats->partition_search.downsets = pf_downsets_size(ds);
    stats->partition_search.exact = exact;
    int rc = tab ? pf_stagedeg_tp_run(h, ds, cm, &so, tab, res, err, errlen)
                 : pf_stagedeg_run(h, ds, cm, &so, res, err, errlen);
    pf_downsets_destroy(&ds);
    return rc;
}

/* The result's stages (hyper-op h of op v: group[v]) into p, ops in g's topological order, with
 * each stage's compute, time (t(H, d), per micro-batch of the pipeline) and memory. */
static int fill_stages(pf_plan_t *p, const pf_graph_t *g, const int *group,
                       const pf_stagedeg_result_t *r, int *scratch)
{
    int n = pf_graph_nops(g);
    const int *topo = pf_graph_topo(g);
    for (int s = 0; s < r->stages; s++) {
        int k = 0;
        double cu = 0;
        for (int i = 0; i < n; i++)
            if (r->op_stage[group[topo[i]]] == s) {
                scratch[k++] = topo[i];
                cu += pf_graph_op(g, topo[i])->fwd_ms + pf_graph_op(g, topo[i])->bwd_ms;
            }
        if (pf_plan_set_stage_ops(p, s, scratch, k) != PF_OK)
            return PF_ERR;
        p->stage_list[s].compute_ms = cu;
        p->stage_list[s].time_ms = r->time_ms[s];
        p->stage_list[s].has_recompute = 1; /* stagedeg.h's r_s: 0 none, 1 full (stagedeg_tp.h's
                                             * 2, configurations swapped, recomputes nothing) */
        p->stage_list[s].recompute = r->recompute[s] == 1 ? PF_RECOMPUTE_FULL : PF_RECOMPUTE_NONE;
        p->stage_list[s].peak_mem_bytes = r->mem_bytes[s];
    }
    return PF_OK;
}

/* The plan of result r: its stages, degrees (t_s: stagedeg.h's are 1; on a group cluster a
 * group is a device) and objective. */
static int plan_of(const pf_graph_t *g, const pf_cluster_t *c, const int *group,
                   const pf_stagedeg_result_t *r, int n_micro, pf_plan_t **out)
{
    int S = r->stages;
    int *scratch = malloc((size_t)pf_graph_nops(g) * sizeof *scratch);
    pf_plan_t *p = pf_plan_new(S, 1);
    int rc = PF_ERR;
    if (!scratch || !p)
        goto fail;
    if (pf_plan_degrees_set(p, r->degree, r->tensor, n_micro) != PF_OK ||
        fill_stages(p, g, group, r, scratch) != PF_OK)
        goto fail;
    p->devices = pf_cluster_ndevices(c);
    p->partition_objective_ms = r->objective_ms;
    pf_plan_set_names(p, pf_graph_name(g), pf_cluster_name(c));
    *out = p;
    p = NULL;
    rc = PF_OK;
fail:
    free(scratch);
    pf_plan_destroy(&p);
    return rc;
}

/* Each hyper-op's configuration at each t: the sums over its ops in that t's graph (time =
 * fwd + bwd with the op's tensor-parallel collectives, parameters, activations per device);
 * t's missing where some op of the graph has no counterpart (op counts differ). */
static int hyper_tmpcs(const pf_graph_t *g, const int *group, int nh,
                       const pf_partition_stagedeg_tp_t *tps, int ntp, pf_stagedeg_tmpc_t **opt,
                       int **first)
{
    int n = pf_graph_nops(g);
    *opt = calloc((size_t)nh * (ntp ? ntp : 1), sizeof **opt);
    *first = malloc(((size_t)nh + 1) * sizeof **first);
    if (!*opt || !*first)
        return PF_ERR;
    for (int h = 0; h <= nh; h++)
        (*first)[h] = h * ntp;
    for (int h = 0; h < nh; h++)
        for (int i = 0; i < ntp; i++)
            (*opt)[h * ntp + i].t = tps[i].t;
    for (int i = 0; i < ntp; i++) {
        if (pf_graph_nops(tps[i].g) != n)
            return PF_EINPUT;
        for (int v = 0; v < n; v++) {
            const pf_op_t *op = pf_graph_op(tps[i].g, v);
            pf_stagedeg_tmpc_t *x = &(*opt)[group[v] * ntp + i];
            x->time_ms += op->fwd_ms + op->bwd_ms;
            x->param_bytes += op->param_bytes;
            x->act_bytes += op->mem_fwd_bytes;
        }
    }
    return PF_OK;
}

static int run(const pf_graph_t *g, const pf_cluster_t *c, const pf_partition_opts_t *o,
               const pf_partition_stagedeg_tp_t *tps, int ntp, pf_plan_t **out, char *err,
               size_t errlen);

/* Each hyper-op's costs under full recomputation ([Piper]'s per-stage choice, stagedeg.h's r_s):
 * the sums over its ops of training.h's view of g at full (the recomputed forward in bwd_ms,
 * what each op stores for backward); *reserve the view's transient (the largest block's
 * activations), which the DP holds on every stage. NULL with *err when it cannot be made. */
static pf_stagedeg_opcost_t *full_costs(const pf_graph_t *g, const int *group, int nh,
                                        double *reserve, char *err, size_t errlen)
{
    pf_training_t t;
    pf_training_init(&t);
    t.recompute = PF_RECOMPUTE_FULL;
    pf_graph_t *view = pf_training_view(g, &t, reserve, err, errlen);
    pf_stagedeg_opcost_t *c = view ? calloc((size_t)nh, sizeof *c) : NULL;
    for (int v = 0; c && v < pf_graph_nops(g); v++) {
        const pf_op_t *op = pf_graph_op(view, v);
        c[group[v]].cu_ms += op->fwd_ms + op->bwd_ms;
        c[group[v]].act_bytes += op->mem_fwd_bytes;
    }
    if (view && !c)
        pf_fail(err, errlen, PF_ERR, "partition: out of memory");
    pf_graph_destroy(&view);
    return c;
}

int pf_partition_stagedeg_run(const pf_graph_t *g, const pf_cluster_t *c,
                              const pf_partition_opts_t *o, pf_plan_t **out, char *err,
                              size_t errlen)
{
    return run(g, c, o, NULL, 0, out, err, errlen);
}

int pf_partition_stagedeg_run_tp(const pf_graph_t *g, const pf_cluster_t *c,
                                 const pf_partition_opts_t *o,
                                 const pf_partition_stagedeg_tp_t *tps, int ntp, pf_plan_t **out,
                                 char *err, size_t errlen)
{
    if (ntp < 1 || ntp > 64)
        return pf_fail(err, errlen, PF_EINPUT, "per-stage tensor parallelism: %d degrees", ntp);
    return run(g, c, o, tps, ntp, out, err, errlen);
}

static int run(const pf_graph_t *g, const pf_cluster_t *c, const pf_partition_opts_t *o,
               const pf_partition_stagedeg_tp_t *tps, int ntp, pf_plan_t **out, char *err,
               size_t errlen)
{
    int n = pf_graph_nops(g), D = pf_cluster_ndevices(c), ngroups = 0, rc;
    *out = NULL;
    int R_unused;
    if ((rc = pf_partition_opts_check(g, c, o, &R_unused, err, errlen)) != PF_OK)
        return rc;
    if (o->microbatches < 1)
        return pf_fail(err, errlen, PF_EINPUT, "microbatches: %d; per-stage degrees need the "
                       "step's micro-batches in all (>= 1)", o->microbatches);
    int M = o->stage_hosts > 1 ? o->stage_hosts : 1;
    if (D % M || o->microbatches % M)
        return pf_fail(err, errlen, PF_EINPUT, "stage_hosts: %d does not divide the %d devices "
                       "and the %d micro-batches", M, D, o->microbatches);
    pf_cost_model_t cm;
    pf_cost_model_init(&cm, c, 1, o->microbatches / M, o->flat_gbps);
    pf_cost_model_set_training(&cm, &o->train, 1, o->reserve_bytes);
    cm.mem_limit_bytes *= 1 - o->mem_headroom;
    if ((rc = pf_cost_check_ops_fit(g, &cm, err, errlen)) != PF_OK)
        return rc;
    int *group = malloc((size_t)n * sizeof *group);
    pf_graph_t *h = NULL;
    pf_stagedeg_result_t *res = NULL;
    pf_stagedeg_tmpc_t *opt = NULL;
    pf_stagedeg_opcost_t *full = NULL;
    int *first = NULL;
    pf_plan_t stats = {0};
    double t0 = pf_now_s(), t1 = t0;
    if (!group) {
        rc = pf_fail(err, errlen, PF_ERR, "partition: out of memory");
        goto fail;
    }
    if ((rc = coarse_graph(g, o, &cm, group, &ngroups, &h, err, errlen)) != PF_OK)
        goto fail;
    t1 = pf_now_s();
    if (tps && (rc = hyper_tmpcs(g, group, ngroups, tps, ntp, &opt, &first)) != PF_OK) {
        rc = pf_fail(err, errlen, rc, rc == PF_ERR ? "partition: out of memory"
                                                   : "per-stage tensor parallelism: a degree's "
                                                     "graph has other ops than graph %s",
                     pf_graph_name(g));
        goto fail;
    }
    /* without tensor parallelism and unless the request fixed it, each stage recomputes or not
     * (the reserve of full recomputation held on every stage: a bound for the others) */
    if (!tps && o->stage_recompute && o->train.recompute == PF_RECOMPUTE_NONE) {
        double reserve = 0;
        if (!(full = full_costs(g, group, ngroups, &reserve, err, errlen))) {
            rc = PF_ERR;
            goto fail;
        }
        cm.reserve_bytes = fmax(cm.reserve_bytes, reserve);
    }
    pf_stagedeg_tmpcs_t tab = {opt, first};
    if ((rc = solve(h ? h : g, &cm, o, D / M, tps ? &tab : NULL, full, &res, &stats, err,
                    errlen)) != PF_OK)
        goto fail;
    for (int s = 0; s < res->stages && M > 1; s++) { /* one pipeline per host's share */
        res->degree[s] *= M;
        res->time_ms[s] /= M;
    }
    res->objective_ms /= M;
    if (res->stages == 0 || !isfinite(res->objective_ms)) {
        rc = pf_fail(err, errlen, PF_EINFEASIBLE, "no chain of stages fits "
                     "%d devices of cluster %s under %d micro-batches per step", D,
                     pf_cluster_name(c), o->microbatches);
        goto fail;
    }
    if (plan_of(g, c, group, res, o->microbatches, out) != PF_OK) {
        rc = pf_fail(err, errlen, PF_ERR, "partition: out of memory");
        goto fail;
    }
    (*out)->partition_search = stats.partition_search;
    (*out)->partition_search.present = 1;
    (*out)->partition_search.ops = n;
    (*out)->partition_search.hyper_ops = ngroups;
    (*out)->partition_search.alpha = ngroups < n ? o->alpha : NAN;
    (*out)->partition_search.flat_gbps = cm.flat_gbps;
    (*out)->partition_search.coarsen_s = t1 - t0;
    (*out)->partition_search.dp_s = pf_now_s() - t1;
    (*out)->partition_search.objective_before_refine_ms = res->objective_ms;
fail:
    free(group);
    free(full);
    free(opt);
    free(first);
    pf_graph_destroy(&h);
    pf_stagedeg_result_destroy(&res);
    return rc;
}
