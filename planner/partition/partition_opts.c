/* partition_opts: the defaults and the checks of pf_partition_opts_t (partition.h). */
#include "planner/partition/partition.h"
#include "planner/core/util.h"

#include <math.h>
#include <string.h>

void pf_partition_opts_init(pf_partition_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->stages = 1;
    o->alpha = 1.0;
    o->refine = 1;
    o->refine_max_moves = 100;
    o->max_downsets = PF_PARTITION_DEFAULT_MAX_DOWNSETS;
    pf_training_init(&o->train);
}

int pf_partition_opts_check(const pf_graph_t *g, const pf_cluster_t *c, const pf_partition_opts_t *o,
                      int *replicas, char *err, size_t errlen)
{
    int D = pf_cluster_ndevices(c), S = o->stages;
    if (S < 1)
        return pf_fail(err, errlen, PF_EINPUT, "stages: %d, must be at least 1", S);
    if (S > D)
        return pf_fail(err, errlen, PF_EINPUT, "stages: %d exceeds the %d devices of cluster %s",
                       S, D, pf_cluster_name(c));
    if (o->replicas < 0)
        return pf_fail(err, errlen, PF_EINPUT, "replicas: %d is negative", o->replicas);
    int R = o->replicas > 0 ? o->replicas : D / S;
    if ((long long)S * R > D)
        return pf_fail(err, errlen, PF_EINPUT,
                       "stages x replicas = %d x %d exceeds the %d devices of cluster %s", S, R,
                       D, pf_cluster_name(c));
    if (o->microbatches < 0)
        return pf_fail(err, errlen, PF_EINPUT, "microbatches: %d is negative", o->microbatches);
    if (!isfinite(o->flat_gbps))
        return pf_fail(err, errlen, PF_EINPUT, "flat_gbps: not a finite number");
    if (!(o->alpha >= 0) || !isfinite(o->alpha))
        return pf_fail(err, errlen, PF_EINPUT, "alpha: %g, must be finite and >= 0", o->alpha);
    if (o->max_downsets < 1)
        return pf_fail(err, errlen, PF_EINPUT, "max_downsets: %lld, must be at least 1",
                       o->max_downsets);
    if (o->threads < 0 || o->refine_max_moves < 0)
        return pf_fail(err, errlen, PF_EINPUT, "threads / refine_max_moves: must be >= 0");
    if (!(o->mem_headroom >= 0 && o->mem_headroom < 1))
        return pf_fail(err, errlen, PF_EINPUT, "mem_headroom: %g is not in [0, 1)",
                       o->mem_headroom);
    if (!(o->reserve_bytes >= 0) || !isfinite(o->reserve_bytes))
        return pf_fail(err, errlen, PF_EINPUT, "reserve_bytes: %g", o->reserve_bytes);
    int rc = pf_training_check(&o->train, err, errlen);
    if (rc != PF_OK)
        return rc;
    if (!o->group && o->coarsen_k > 0 && o->coarsen_k < S)
        return pf_fail(err, errlen, PF_EINPUT,
                       "coarsen_k: K = %d hyper-ops cannot make %d stages (K must be >= S)",
                       o->coarsen_k, S);
    if (o->group ? o->ngroups < 1 || o->ngroups > pf_graph_nops(g) : o->group_whole)
        return pf_fail(err, errlen, PF_EINPUT, "group: %d groups for %d ops%s", o->ngroups,
                       pf_graph_nops(g), o->group ? "" : " (group_whole needs groups)");
    *replicas = R;
    return PF_OK;
}
