/* Graph files (pf_graph_load_buffer): JSON text -> validated graph, or an error naming the place. */
#include "planner/ir/graph.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    pf_graph_t *g = NULL;
    if (pf_graph_load_buffer((const char *)data, size, "fuzz.json", &g, err, sizeof err) == 0)
        pf_graph_longest_path_ms(g);
    pf_graph_destroy(&g);
    return 0;
}
