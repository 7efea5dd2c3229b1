/* Cluster files (pf_cluster_load_buffer). */
#include "planner/ir/cluster.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    pf_cluster_t *c = NULL;
    pf_cluster_load_buffer((const char *)data, size, "fuzz.json", &c, err, sizeof err);
    pf_cluster_destroy(&c);
    return 0;
}
