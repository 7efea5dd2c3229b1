#include "planner/sim/simulate_xfer.h"
#include "planner/ir/collective.h"
#include "planner/core/util.h"

#include <math.h>
#include <string.h>

void pf_simulate_xfer_problem(const int *src, const int *dst, int T, double bytes,
                              pf_simulate_xfer_problem_t *x)
{
    memset(x, 0, sizeof *x);
    x->shape[0] = bytes > 0 ? (int64_t)ceil(bytes) : 0;
    x->spec[0] = PF_SHARDING_R;
    x->problem = (pf_reshard_problem_t){
        .ndims = 1, .shape = x->shape, .dtype_bytes = 1,
        .src_mesh = {1, T, src}, .dst_mesh = {1, T, dst},
        .src_spec = x->spec, .dst_spec = x->spec};
}

double pf_simulate_xfer_scatter_gather_ms(const pf_cluster_t *c, const int *src, const int *dst,
                                          int T, double bytes, double nvls_busbw_gbps)
{
    if (bytes <= 0)
        return 0;
    double scatter = 0;
    for (int k = 0; k < T; k++)
        scatter = fmax(scatter, pf_cluster_xfer_ms(c, src[k], dst[k], bytes / T));
    if (T <= 1)
        return scatter;
    pf_collective_group_t g;
    if (pf_collective_group_from_cluster(c, dst, T, nvls_busbw_gbps, &g) != PF_OK)
        return INFINITY; /* out of memory: the caller's other price stands */
    return scatter + pf_collective_best_ms(&g, PF_COLL_ALLGATHER, bytes);
}

int pf_simulate_xfer_ms_on(const pf_cluster_t *c, const pf_reshard_net_t *net,
                           const pf_simulate_xfer_problem_t *x, double *ms, double *reshard_ms,
                           char *err, size_t errlen)
{
    *ms = 0;
    if (x->shape[0] <= 0)
        return PF_OK;
    const pf_reshard_problem_t *p = &x->problem;
    double sg = pf_simulate_xfer_scatter_gather_ms(c, p->src_mesh.devices, p->dst_mesh.devices,
                                                   p->src_mesh.cols, (double)x->shape[0], 0);
    if (isnan(*reshard_ms)) {
        pf_reshard_opts_t o;
        pf_reshard_opts_default(&o);
        o.sched.dfs_budget_s = 0; /* the node cap alone: the same answer on every machine */
        pf_reshard_t *r = pf_reshard_new(&x->problem, net, &o, err, errlen);
        if (!r)
            return PF_EINPUT;
        *reshard_ms = pf_reshard_time_ms(r);
        pf_reshard_destroy(&r);
    }
    *ms = fmin(*reshard_ms, sg);
    return PF_OK;
}

int pf_simulate_xfer_ms(const pf_cluster_t *c, const pf_simulate_xfer_problem_t *x, double *ms,
                        char *err, size_t errlen)
{
    *ms = 0;
    if (x->shape[0] <= 0)
        return PF_OK;
    pf_reshard_net_t *net = pf_reshard_net_from_cluster(c, err, errlen);
    if (!net)
        return PF_ERR;
    double reshard_ms = NAN;
    int rc = pf_simulate_xfer_ms_on(c, net, x, ms, &reshard_ms, err, errlen);
    pf_reshard_net_destroy(&net);
    return rc;
}

