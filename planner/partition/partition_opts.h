/* partition_opts: the defaults and the checks of pf_partition_opts_t (partition.h). */
#ifndef PF_PARTITION_OPTS_H
#define PF_PARTITION_OPTS_H

#include "planner/partition/partition.h"

/* PF_OK with *replicas (R, o->replicas or devices / S), or PF_EINPUT naming the option. */
int pf_partition_opts_check(const pf_graph_t *g, const pf_cluster_t *c,
                            const pf_partition_opts_t *o, int *replicas, char *err,
                            size_t errlen);

#endif
