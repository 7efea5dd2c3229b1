#include "planner/ir/plan_blocks.h"
#include "planner/ir/training.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Repeated blocks (training.h: layers.7) against the stages: of[v] = op v's block (-1 outside
 * any), lo[b] .. hi[b] the stages holding block b's ops, stamp[b] scratch of write_blocks. */
struct pf_plan_blocks {
    int *of, *lo, *hi, *stamp;
};

void pf_plan_blocks_destroy(pf_plan_blocks_t **bp)
{
    if (!bp || !*bp)
        return;
    pf_plan_blocks_t *b = *bp;
    free(b->of);
    free(b->lo);
    free(b->hi);
    free(b->stamp);
    free(b);
    *bp = NULL;
}

/* Ops with the same block name share a block, wherever they sit in the graph. */
pf_plan_blocks_t *pf_plan_blocks_new(const pf_graph_t *g, int stages, const int *const *ops_of,
                                     const int *nops)
{
    pf_plan_blocks_t *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    int n = pf_graph_nops(g), k = 0, nb = 0;
    size_t sz = (size_t)(n ? n : 1) * sizeof(int);
    int *ops = malloc(sz);
    b->of = malloc(sz);
    b->lo = malloc(sz);
    b->hi = malloc(sz);
    b->stamp = malloc(sz);
    if (!ops || !b->of || !b->lo || !b->hi || !b->stamp) {
        free(ops);
        pf_plan_blocks_destroy(&b);
        return NULL;
    }
    for (int v = 0; v < n; v++) {
        b->of[v] = -1;
        if (pf_training_block_len(pf_graph_op(g, v)->name))
            ops[k++] = v;
    }
    qsort_r(ops, (size_t)k, sizeof *ops, pf_training_cmp_block_name, (void *)g);
    for (int i = 0; i < k; i++) {
        if (i > 0 && pf_training_cmp_block_name(&ops[i - 1], &ops[i], (void *)g))
            nb++;
        b->of[ops[i]] = nb;
    }
    for (int x = 0; x < n; x++) {
        b->lo[x] = INT_MAX;
        b->hi[x] = b->stamp[x] = -1;
    }
    for (int st = 0; st < stages; st++)
        for (int i = 0; i < nops[st]; i++) {
            int v = ops_of[st][i], x = v >= 0 && v < n ? b->of[v] : -1;
            if (x >= 0 && st < b->lo[x])
                b->lo[x] = st;
            if (x >= 0 && st > b->hi[x])
                b->hi[x] = st;
        }
    free(ops);
    return b;
}

/* The block part of an op's name ("layers.7" of "layers.7.mlp"), cut to 255 characters. */
static void block_name(char out[256], const char *name)
{
    size_t len = pf_training_block_len(name);
    snprintf(out, 256, "%.*s", (int)(len < 255 ? len : 255), name);
}

/* Stage s's cut blocks (some of their ops in another stage) as "cut_blocks": every block is
 * listed once per stage holding part of it. */
static void write_cut_blocks(pf_json_writer_t *w, const pf_graph_t *g, const int *ops, int nops,
                             int s, pf_plan_blocks_t *b)
{
    int any = 0;
    for (int i = 0; i < nops; i++) {
        int x = b->of[ops[i]];
        if (x < 0 || b->lo[x] == b->hi[x] || b->stamp[x] == -2 - s)
            continue;
        b->stamp[x] = -2 - s;
        if (!any++) {
            pf_json_writer_key(w, "cut_blocks");
            pf_json_writer_arr_begin_inline(w);
        }
        char a[256];
        block_name(a, pf_graph_op(g, ops[i])->name);
        pf_json_writer_str(w, a);
    }
    if (any)
        pf_json_writer_arr_end(w);
}

/* The repeated blocks stage s holds whole (layers.3 .. layers.7: what Megatron and DeepSpeed
 * count), so no block is in two stages' "blocks" (a block split by a boundary is each stage's
 * "cut_blocks"), and its op names. */
void pf_plan_blocks_write(pf_plan_blocks_t *b, pf_json_writer_t *w, const pf_graph_t *g,
                          const int *ops, int nops, int s)
{
    const char *first = NULL, *last = NULL;
    int count = 0;
    for (int i = 0; i < nops; i++) {
        const char *name = pf_graph_op(g, ops[i])->name;
        int x = b->of[ops[i]];
        if (x < 0 || b->lo[x] != b->hi[x] || b->stamp[x] == s)
            continue;
        b->stamp[x] = s; /* ops come in topological order: first and last are the outer ones */
        count++;
        if (!first)
            first = name;
        last = name;
    }
    if (count) {
        char fa[256], la[256];
        block_name(fa, first);
        block_name(la, last);
        pf_json_writer_key(w, "blocks");
        pf_json_writer_obj_begin_inline(w);
        pf_json_writer_key(w, "first"); pf_json_writer_str(w, fa);
        pf_json_writer_key(w, "last"); pf_json_writer_str(w, la);
        pf_json_writer_key(w, "count"); pf_json_writer_int(w, count);
        pf_json_writer_obj_end(w);
    }
    write_cut_blocks(w, g, ops, nops, s, b);
    pf_json_writer_key(w, "op_names");
    pf_json_writer_arr_begin_inline(w);
    for (int i = 0; i < nops; i++)
        pf_json_writer_str(w, pf_graph_op(g, ops[i])->name);
    pf_json_writer_arr_end(w);
}

