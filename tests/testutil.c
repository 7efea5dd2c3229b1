#include "tests/testutil.h"
#include "planner/core/rng.h"

#include <stdio.h>

pf_graph_t *pf_test_random_dag(uint64_t seed, int n, double p_edge)
{
    pf_rng_t rng;
    char err[256], name[32];
    pf_rng_seed(&rng, seed);
    pf_graph_t *g = pf_graph_new("random", 1);
    if (!g)
        return NULL;
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "op%d", i);
        pf_op_t op = {.id = i, .name = name, .type = "x"};
        op.fwd_ms = pf_rng_range(&rng, 0.5, 10);
        op.bwd_ms = pf_rng_range(&rng, 0.5, 10);
        op.param_bytes = pf_rng_range(&rng, 0, 1e8);
        op.mem_fwd_bytes = pf_rng_range(&rng, 0, 1e8);
        op.mem_bwd_bytes = pf_rng_range(&rng, 0, 1e8);
        pf_graph_add_op(g, &op);
    }
    for (int j = 1; j < n; j++) {
        int first = (int)pf_rng_below(&rng, (uint64_t)j);
        pf_graph_add_edge(g, first, j, pf_rng_range(&rng, 1e5, 1e8));
        for (int i = 0; i < j; i++)
            if (i != first && pf_rng_uniform(&rng) < p_edge)
                pf_graph_add_edge(g, i, j, pf_rng_range(&rng, 1e5, 1e8));
    }
    if (pf_graph_finalize(g, err, sizeof err) != 0) {
        fprintf(stderr, "random dag: %s\n", err);
        pf_graph_destroy(&g);
    }
    return g;
}
