/* Graph files (pf_graph_load_buffer): JSON text -> validated graph, or an error naming the place.
 * The reader streams the text element by element (json_stream.c); the tree reader (the whole
 * text parsed, then pf_graph_from_json) must say the same: same code, same message, same sizes,
 * or the target aborts. */
#include "planner/core/json.h"
#include "planner/ir/graph.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512] = "", tree_err[512] = "";
    pf_graph_t *g = NULL, *t = NULL;
    json_t *root;
    int rc = pf_graph_load_buffer((const char *)data, size, "fuzz.json", &g, err, sizeof err);
    int trc = pf_json_load_buffer((const char *)data, size, "fuzz.json", &root, tree_err,
                                  sizeof tree_err);
    if (trc == 0) {
        trc = pf_graph_from_json(root, "fuzz.json", &t, tree_err, sizeof tree_err);
        json_decref(root);
    }
    if (rc != trc || (rc != 0 && strcmp(err, tree_err) != 0) ||
        (rc == 0 && (pf_graph_nops(g) != pf_graph_nops(t) ||
                     pf_graph_nedges(g) != pf_graph_nedges(t))))
        abort();
    if (rc == 0)
        pf_graph_longest_path_ms(g);
    pf_graph_destroy(&g);
    pf_graph_destroy(&t);
    return 0;
}
