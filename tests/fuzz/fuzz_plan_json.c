/* Plan files (pf_plan_load), read against the fixed graph and cluster of fuzz.h; a plan that
 * loads is also validated, as `planfarm show` would. */
#include "planner/ir/plan.h"
#include "tests/fuzz/fuzz.h"

#include <stddef.h>
#include <stdint.h>

static pf_graph_t *graph;
static pf_cluster_t *cluster;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512], path[64];
    if (!graph) {
        graph = pf_fuzz_graph();
        cluster = pf_fuzz_cluster();
    }
    int fd = pf_fuzz_memfile(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    pf_plan_t *p = NULL;
    if (pf_plan_load(path, graph, cluster, &p, err, sizeof err) == 0)
        pf_plan_validate(p, graph, cluster, err, sizeof err);
    pf_plan_destroy(&p);
    close(fd);
    return 0;
}
