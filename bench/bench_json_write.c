/* Writing a graph file: planfarm's streaming writer (planner/core/json.c, pf_graph_save) against
 * jansson's (a json_t tree of the same graph, then json_dump_file), on a 200,000-op chain (the
 * size of issue 26's big inputs), in the same run: wall time of each, and the heap the jansson
 * tree holds at its peak (mallinfo2), which the streaming writer never allocates. Why the
 * writer is planfarm's own (issue 25 finding 9: use jansson's unless a benchmark shows it
 * matters). PF_BENCH_JSON_OPS sets the op count. */
#include "planner/ir/graph.h"
#include "planner/core/util.h"

#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pf_graph_t *chain(int n)
{
    char err[256], name[32];
    pf_graph_t *g = pf_graph_new("chain", 1);
    for (int i = 0; g && i < n; i++) {
        snprintf(name, sizeof name, "op%d", i);
        pf_op_t op = {.id = i, .name = name, .type = "linear", .fwd_ms = 0.1 + (i % 7) * 0.01,
                      .bwd_ms = 0.2, .param_bytes = 1024, .mem_fwd_bytes = 65536,
                      .mem_bwd_bytes = 1048576};
        if (pf_graph_add_op(g, &op) < 0 || (i > 0 && pf_graph_add_edge(g, i - 1, i, 1048576) < 0))
            pf_graph_destroy(&g);
    }
    if (g && pf_graph_finalize(g, err, sizeof err) != PF_OK)
        pf_graph_destroy(&g);
    return g;
}

static json_t *as_tree(const pf_graph_t *g)
{
    json_t *ops = json_array(), *edges = json_array();
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const pf_op_t *o = pf_graph_op(g, v);
        json_array_append_new(ops, json_pack("{s:I, s:s, s:s, s:f, s:f, s:f, s:f, s:f}", "id",
                                             (json_int_t)o->id, "name", o->name, "type", o->type,
                                             "fwd_ms", o->fwd_ms, "bwd_ms", o->bwd_ms,
                                             "param_bytes", o->param_bytes, "mem_fwd_bytes",
                                             o->mem_fwd_bytes, "mem_bwd_bytes", o->mem_bwd_bytes));
    }
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *x = pf_graph_edge(g, e);
        json_array_append_new(edges, json_pack("{s:i, s:i, s:f}", "src", x->src, "dst", x->dst,
                                               "bytes", x->bytes));
    }
    return json_pack("{s:i, s:s, s:i, s:o, s:o}", "version", 2, "name", pf_graph_name(g),
                     "microbatch", 1, "ops", ops, "edges", edges);
}

int pf_bench_json_write(void)
{
    int n = getenv("PF_BENCH_JSON_OPS") ? atoi(getenv("PF_BENCH_JSON_OPS")) : 200000;
    char path[] = "/tmp/pf_bench_json.XXXXXX", err[256];
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("bench json_write: mkstemp");
        return 1;
    }
    close(fd);
    pf_graph_t *g = chain(n);
    if (!g) {
        fprintf(stderr, "bench json_write: could not build a chain of %d ops\n", n);
        unlink(path);
        return 1;
    }
    double t0 = pf_now_s();
    int rc = pf_graph_save(g, path, err, sizeof err);
    double own_s = pf_now_s() - t0;
    if (rc)
        fprintf(stderr, "bench json_write: pf_graph_save: %s\n", err);
    size_t heap0 = mallinfo2().uordblks;
    t0 = pf_now_s();
    json_t *tree = as_tree(g);
    size_t tree_bytes = mallinfo2().uordblks - heap0;
    if (!tree || json_dump_file(tree, path, JSON_INDENT(1) | JSON_REAL_PRECISION(17))) {
        fprintf(stderr, "bench json_write: jansson could not write the tree\n");
        rc = -1;
    }
    double jansson_s = pf_now_s() - t0;
    json_decref(tree);
    unlink(path);
    printf("graph of %d ops: planfarm's writer %.3f s, no tree; jansson's %.3f s with a %.0f MB "
           "tree (%.2fx the time)\n", n, own_s, jansson_s, tree_bytes / 1e6, jansson_s / own_s);
    pf_graph_destroy(&g);
    return rc ? 1 : 0;
}
