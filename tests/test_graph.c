/* graph: building, validation, the file format's errors and round trips. */
#include "planner/ir/graph.h"
#include "planner/core/json.h"
#include "planner/core/json_stream.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pf_graph_t *diamond(void)
{
    /* 0 -> 1 -> 3, 0 -> 2 -> 3 */
    pf_graph_t *g = pf_graph_new("diamond", 2);
    for (int i = 0; i < 4; i++) {
        pf_op_t op = {.id = 10 + i, .fwd_ms = i + 1, .bwd_ms = 2 * (i + 1), .param_bytes = 100};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 8);
    pf_graph_add_edge(g, 0, 2, 16);
    pf_graph_add_edge(g, 1, 3, 8);
    pf_graph_add_edge(g, 2, 3, 16);
    return g;
}

static void test_build(void)
{
    char err[256];
    pf_graph_t *g = diamond();
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_graph_nops(g), 4);
    CU_ASSERT_EQUAL(pf_graph_nedges(g), 4);
    int n;
    const int *out = pf_graph_out(g, 0, &n);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(pf_graph_edge(g, out[0])->dst + pf_graph_edge(g, out[1])->dst, 3);
    pf_graph_in(g, 3, &n);
    CU_ASSERT_EQUAL(n, 2);
    const int *topo = pf_graph_topo(g);
    CU_ASSERT_EQUAL(topo[0], 0);
    CU_ASSERT_EQUAL(topo[1], 1); /* ties broken by lowest index */
    CU_ASSERT_EQUAL(topo[2], 2);
    CU_ASSERT_EQUAL(topo[3], 3);
    CU_ASSERT_EQUAL(pf_graph_find(g, 12), 2);
    CU_ASSERT_EQUAL(pf_graph_find(g, 99), -1);
    /* c_u = 3(i+1): 3 + 6 + 9 + 12 */
    PF_ASSERT_CLOSE(pf_graph_total_cu_ms(g), 30.0, 1e-12);
    /* longest path 0 -> 2 -> 3: 3 + 9 + 12 */
    PF_ASSERT_CLOSE(pf_graph_longest_path_ms(g), 24.0, 1e-12);
    PF_ASSERT_CLOSE(pf_graph_total_param_bytes(g), 400.0, 1e-12);
    pf_graph_destroy(&g);
    CU_ASSERT_PTR_NULL(g);
    pf_graph_destroy(&g); /* idempotent */
}

static void test_cycle_named(void)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("c", 1);
    for (int i = 0; i < 4; i++) {
        pf_op_t op = {.id = i, .name = NULL};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 1);
    pf_graph_add_edge(g, 1, 2, 1);
    pf_graph_add_edge(g, 2, 3, 1);
    pf_graph_add_edge(g, 3, 1, 1);
    CU_ASSERT_EQUAL(pf_graph_finalize(g, err, sizeof err), PF_EINPUT);
    /* op 0 is sorted away; the walk starts at the lowest op left (1) and goes forward */
    CU_ASSERT_STRING_EQUAL(err, "graph has a cycle: op 1 (op1) -> op 2 (op2) -> op 3 (op3) -> op 1");
    pf_graph_destroy(&g);

    /* a ring of 10: the first 8 ops shown, then the count */
    g = pf_graph_new("ring", 1);
    for (int i = 0; i < 10; i++) {
        pf_op_t op = {.id = 100 + i};
        pf_graph_add_op(g, &op);
    }
    for (int i = 0; i < 10; i++)
        pf_graph_add_edge(g, i, (i + 1) % 10, 1);
    CU_ASSERT_EQUAL(pf_graph_finalize(g, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "graph has a cycle: op 100 (op100) -> op 101 (op101) -> op 102 "
                                "(op102) -> op 103 (op103) -> op 104 (op104) -> op 105 (op105) "
                                "-> op 106 (op106) -> op 107 (op107) -> ... (10 ops on the "
                                "cycle) -> op 100");
    pf_graph_destroy(&g);
}

#define OP(id) "{\"id\": " #id ", \"fwd_ms\": 1, \"bwd_ms\": 1}"
#define EDGE(a, b) "{\"src\": " #a ", \"dst\": " #b ", \"bytes\": 1}"

/* Input gaps: each file and its whole message (after the directory). */
static const struct {
    const char *text, *expect;
} gaps[] = {
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1e308, \"bwd_ms\": 1}], \"edges\": []}",
     "bad.json: ops[0].fwd_ms: 1e+308 is above the limit of 1e+09 ms"},
    {"{\"ops\": [" OP(0) ", {\"id\": 1, \"fwd_ms\": 1, \"bwd_ms\": 1.5e9}], \"edges\": []}",
     "bad.json: ops[1].bwd_ms: 1.5e+09 is above the limit of 1e+09 ms"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1, \"param_bytes\": 2e18}], "
     "\"edges\": []}",
     "bad.json: ops[0].param_bytes: 2e+18 is above the limit of 1e+18 bytes"},
    {"{\"ops\": [" OP(0) ", " OP(1) "], \"edges\": [{\"src\": 0, \"dst\": 1, \"bytes\": 1e19}]}",
     "bad.json: edges[0].bytes: 1e+19 is above the limit of 1e+18 bytes"},
    {"{\"ops\": [" OP(-4) "], \"edges\": []}", "bad.json: ops[0].id: negative (-4)"},
    /* version 2's work keys */
    {"{\"version\": 3, \"ops\": [" OP(0) "], \"edges\": []}",
     "bad.json: graph.version: 3 is newer than this planfarm reads (1 to 2)"},
    {"{\"version\": 0, \"ops\": [" OP(0) "], \"edges\": []}", "bad.json: graph.version: zero"},
    {"{\"ops\": [" OP(0) ", {\"id\": 1, \"fwd_ms\": 1, \"bwd_ms\": 1, \"fwd_flops\": -5}], "
     "\"edges\": []}",
     "bad.json: ops[1].fwd_flops: negative (-5)"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1, \"bwd_flops\": 1e31}], \"edges\": []}",
     "bad.json: ops[0].bwd_flops: 1e+31 is above the limit of 1e+30 FLOPs"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1, \"bytes_read\": 2e18}], "
     "\"edges\": []}",
     "bad.json: ops[0].bytes_read: 2e+18 is above the limit of 1e+18 bytes"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1, \"bytes_written\": \"8\"}], "
     "\"edges\": []}",
     "bad.json: ops[0].bytes_written: not a number"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1, \"gemm\": [1, 2, 3, 4]}], "
     "\"edges\": []}",
     "bad.json: ops[0].gemm: not an object"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1, \"gemm\": {\"m\": 8, \"n\": 8, "
     "\"k\": 8}}], \"edges\": []}",
     "bad.json: ops[0].gemm.batch: missing"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1, \"gemm\": {\"m\": 8, \"n\": 0, "
     "\"k\": 8, \"batch\": 1}}], \"edges\": []}",
     "bad.json: ops[0].gemm.n: zero"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1, \"gemm\": {\"m\": 8, \"n\": 8, "
     "\"k\": 2.5, \"batch\": 1}}], \"edges\": []}",
     "bad.json: ops[0].gemm.k: not an integer"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1, \"gemm\": {\"m\": 8, \"n\": 8, "
     "\"k\": 8, \"batch\": 9007199254740993}}], \"edges\": []}",
     "bad.json: ops[0].gemm.batch: 9007199254740993 is not a dimension (1 to 2^53; a GEMM shape "
     "gives all of m, n, k, batch)"},
    {"{\"ops\": [" OP(2) ", " OP(3) ", " OP(4) "], \"edges\": [" EDGE(2, 3) ", " EDGE(3, 4) ", "
     EDGE(2, 4) ", " EDGE(3, 4) "]}",
     "bad.json: edges[3] repeats edges[1] (op 3 -> op 4)"},
    {"{\"ops\": [" OP(7) ", {\"id\": 8, \"name\": \"layers.3.b\", \"fwd_ms\": 1, \"bwd_ms\": "
     "1}], \"edges\": [" EDGE(7, 8) ", " EDGE(8, 7) "]}",
     "bad.json: graph has a cycle: op 7 (op7) -> op 8 (layers.3.b) -> op 7"},
    /* jansson itself rejects invalid UTF-8 and lone surrogates in JSON text */
    {"{\"ops\": [{\"id\": 0, \"name\": \"a\xff\", \"fwd_ms\": 1, \"bwd_ms\": 1}], \"edges\": []}",
     "bad.json:1:29: unable to decode byte 0xff near '\"a'"},
    {"{\"ops\": [{\"id\": 0, \"name\": \"\\ud800\", \"fwd_ms\": 1, \"bwd_ms\": 1}], "
     "\"edges\": []}",
     "bad.json:1:35: invalid Unicode '\\uD800' near '\"\\ud800\"'"},
};

static void test_input_gaps(void)
{
    for (size_t i = 0; i < sizeof gaps / sizeof gaps[0]; i++) {
        char err[512] = "", path[700];
        pf_graph_t *g = (pf_graph_t *)1;
        snprintf(path, sizeof path, "%s", pf_test_write("bad.json", gaps[i].text));
        CU_ASSERT_EQUAL(pf_graph_load(path, &g, err, sizeof err), PF_EINPUT);
        CU_ASSERT_PTR_NULL(g);
        const char *base = strstr(err, "bad.json");
        int ok = base && strcmp(base, gaps[i].expect) == 0;
        if (!ok)
            fprintf(stderr, "\n  case %zu: got '%s', want '%s'\n", i, err, gaps[i].expect);
        CU_ASSERT(ok);
    }
}

/* What JSON cannot carry but an import, a decoded message or a generator can: finalize checks
 * names, types and the graph's own name. */
static void test_bad_utf8_in_memory(void)
{
    static const struct {
        const char *graph, *name, *type, *expect;
    } cases[] = {
        {"g", "layers.0\xff", "", "ops[1].name: invalid UTF-8 at byte 8"},
        {"g", "ok", "mat\xed\xa0\x80", "ops[1].type: invalid UTF-8 at byte 3"}, /* U+D800 */
        {"g", "\xc0\xaf", "", "ops[1].name: invalid UTF-8 at byte 0"},      /* overlong '/' */
        {"g", "x\xf4\x90\x80\x80", "", "ops[1].name: invalid UTF-8 at byte 1"}, /* > U+10FFFF */
        {"g", "abc\xe2\x82", "", "ops[1].name: invalid UTF-8 at byte 3"},  /* truncated */
        {"bad\x80", "ok", "", "graph.name: invalid UTF-8 at byte 3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "";
        pf_graph_t *g = pf_graph_new(cases[i].graph, 1);
        pf_op_t a = {.id = 0, .name = "first.\xc3\xa9"}, b = {.id = 1, .name = cases[i].name,
                                                           .type = cases[i].type};
        pf_graph_add_op(g, &a);
        pf_graph_add_op(g, &b);
        CU_ASSERT_EQUAL(pf_graph_finalize(g, err, sizeof err), PF_EINPUT);
        CU_ASSERT_STRING_EQUAL(err, cases[i].expect);
        pf_graph_destroy(&g);
    }
    /* the builder keeps parallel edges (generated graphs): only files must not repeat one */
    char err[256];
    pf_graph_t *g = pf_graph_new("par", 1);
    for (int i = 0; i < 2; i++) {
        pf_op_t op = {.id = i};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 3);
    pf_graph_add_edge(g, 0, 1, 4);
    CU_ASSERT_EQUAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_graph_destroy(&g);
}

/* Each bad file and the exact message it must produce. */
static const struct {
    const char *text, *expect;
} bad[] = {
    {"{\"ops\": [", "bad.json:1:9: "},
    {"[1,2]", "bad.json: top level: not an object"},
    {"{\"edges\": []}", "bad.json: graph.ops: missing"},
    {"{\"ops\": []}", "bad.json: graph.edges: missing"},
    {"{\"ops\": [], \"edges\": []}", "bad.json: graph has no ops"},
    {"{\"ops\": [{\"id\": 0, \"bwd_ms\": 1}], \"edges\": []}", "bad.json: ops[0].fwd_ms: missing"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": \"1\", \"bwd_ms\": 1}], \"edges\": []}",
     "bad.json: ops[0].fwd_ms: not a number"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1},"
     " {\"id\": 1, \"fwd_ms\": -2, \"bwd_ms\": 1}], \"edges\": []}",
     "bad.json: ops[1].fwd_ms: negative (-2)"},
    {"{\"ops\": [{\"id\": 0.5, \"fwd_ms\": 1, \"bwd_ms\": 1}], \"edges\": []}",
     "bad.json: ops[0].id: not an integer"},
    {"{\"ops\": [{\"id\": 3, \"fwd_ms\": 1, \"bwd_ms\": 1}, {\"id\": 3, \"fwd_ms\": 1, "
     "\"bwd_ms\": 1}], \"edges\": []}",
     "bad.json: ops[1].id: duplicate id 3 (also ops[0])"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1}], \"edges\": [{\"src\": 0, \"dst\": 99, "
     "\"bytes\": 1}]}",
     "bad.json: edges[0]: dst 99 is not an op"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1}], \"edges\": [{\"src\": 0, \"dst\": 0, "
     "\"bytes\": 1}]}",
     "bad.json: edges[0]: self-loop on op 0"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1}, {\"id\": 1, \"fwd_ms\": 1, \"bwd_ms\": "
     "1}], \"edges\": [{\"src\": 0, \"dst\": 1}]}",
     "bad.json: edges[0].bytes: missing"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1, \"weight\": [2, -1]}], \"edges\": []}",
     "bad.json: ops[0].weight[1]: not a non-negative integer"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1e999, \"bwd_ms\": 1}], \"edges\": []}", "bad.json:"},
    {"{\"microbatch\": 0, \"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1}], \"edges\": []}",
     "bad.json: graph.microbatch: zero"},
    {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1}, {\"id\": 1, \"fwd_ms\": 1, \"bwd_ms\": "
     "1}], \"edges\": [{\"src\": 0, \"dst\": 1, \"bytes\": 1}, {\"src\": 1, \"dst\": 0, \"bytes\": "
     "1}]}",
     "bad.json: graph has a cycle: op 0 (op0) -> op 1 (op1) -> op 0"},
};

static void test_bad_files(void)
{
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[512] = "", path[700];
        pf_graph_t *g = (pf_graph_t *)1;
        snprintf(path, sizeof path, "%s", pf_test_write("bad.json", bad[i].text));
        int rc = pf_graph_load(path, &g, err, sizeof err);
        CU_ASSERT_EQUAL(rc, PF_EINPUT);
        CU_ASSERT_PTR_NULL(g);
        /* messages start with the full path; compare what follows the directory */
        CU_ASSERT(pf_test_err_from(err, "bad.json", bad[i].expect, i));
    }
}

static void test_missing_file(void)
{
    char err[256];
    pf_graph_t *g;
    CU_ASSERT_EQUAL(pf_graph_load("/nonexistent/x.json", &g, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/x.json: No such file"));
}

static void test_round_trip(void)
{
    char err[256], path[700];
    pf_graph_t *g = pf_graph_new("rt \"quoted\"", 8);
    pf_op_t a = {.id = 5, .name = "layers.0.attn.q", .type = "linear", .fwd_ms = 0.21,
                 .bwd_ms = 0.1 + 0.2, .param_bytes = 4194304, .mem_fwd_bytes = 1e9 / 3,
                 .mem_bwd_bytes = 7};
    a.weight = (pf_shape_t){2, {1024, 1024}};
    a.input = (pf_shape_t){3, {8, 512, 1024}};
    a.work = (pf_op_work_t){.fwd_flops = 2.0 * 4096 * 1024 * 1024, .bwd_flops = 1e30,
                            .bytes_read = 0.1 + 0.7, .bytes_written = 1e18, .gemm_m = 4096,
                            .gemm_n = 1024, .gemm_k = 1024, .gemm_batch = (int64_t)1 << 53};
    pf_op_t b = {.id = 7, .name = "tab\there", .fwd_ms = 1e-300, .bwd_ms = 123456789.125};
    b.work.bytes_written = 5e-324; /* only some keys: the others stay 0, unknown */
    pf_graph_add_op(g, &a);
    pf_graph_add_op(g, &b);
    pf_graph_add_edge(g, 0, 1, 8388608.5);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    snprintf(path, sizeof path, "%s/rt.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(pf_graph_save(g, path, err, sizeof err), PF_OK);
    pf_graph_t *h;
    CU_ASSERT_EQUAL_FATAL(pf_graph_load(path, &h, err, sizeof err), PF_OK);
    CU_ASSERT_STRING_EQUAL(pf_graph_name(h), pf_graph_name(g));
    CU_ASSERT_EQUAL(pf_graph_microbatch(h), 8);
    CU_ASSERT_EQUAL_FATAL(pf_graph_nops(h), 2);
    for (int v = 0; v < 2; v++) {
        const pf_op_t *x = pf_graph_op(g, v), *y = pf_graph_op(h, v);
        CU_ASSERT_EQUAL(x->id, y->id);
        CU_ASSERT_STRING_EQUAL(x->name, y->name);
        CU_ASSERT_STRING_EQUAL(x->type, y->type);
        /* bit-exact: the writer prints the shortest round-trip form */
        CU_ASSERT(x->fwd_ms == y->fwd_ms && x->bwd_ms == y->bwd_ms);
        CU_ASSERT(x->param_bytes == y->param_bytes && x->mem_fwd_bytes == y->mem_fwd_bytes);
        CU_ASSERT(x->mem_bwd_bytes == y->mem_bwd_bytes);
        CU_ASSERT_EQUAL(x->weight.ndim, y->weight.ndim);
        CU_ASSERT_EQUAL(x->input.ndim, y->input.ndim);
        CU_ASSERT_EQUAL(memcmp(x->input.dim, y->input.dim, sizeof x->input.dim), 0);
        CU_ASSERT_EQUAL(memcmp(&x->work, &y->work, sizeof x->work), 0);
    }
    CU_ASSERT_EQUAL(pf_graph_nedges(h), 1);
    CU_ASSERT(pf_graph_edge(h, 0)->bytes == 8388608.5);
    /* the writer names its version first */
    FILE *f = fopen(path, "r");
    char head[64] = "";
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT(fread(head, 1, sizeof head - 1, f) > 0);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(head, "\"version\": 2,"));
    pf_graph_destroy(&g);
    pf_graph_destroy(&h);
}

/* A version 1 file (no "version", no work keys; tests/data/graph-v1.json, in the format
 * pf_graph_save wrote before version 2) loads unchanged: every number as written, no work. */
static void test_version1_file(void)
{
    char err[256], path[512];
    pf_graph_t *g = NULL;
    CU_ASSERT_EQUAL_FATAL(
        pf_graph_load(pf_test_data("graph-v1.json", path, sizeof path), &g, err, sizeof err),
        PF_OK);
    CU_ASSERT_STRING_EQUAL(pf_graph_name(g), "two-layer-v1");
    CU_ASSERT_EQUAL(pf_graph_microbatch(g), 4);
    CU_ASSERT_EQUAL_FATAL(pf_graph_nops(g), 3);
    static const struct {
        int64_t id;
        const char *name, *type;
        double fwd_ms, bwd_ms, param_bytes, mem_fwd_bytes, mem_bwd_bytes;
        int wdim, idim, odim;
        int64_t w[2], in[3], out[3];
    } want[] = {
        {3, "embed", "embedding", 0.0625, 0.125, 103022592, 16384, 8388608, 2, 2, 3,
         {50304, 1024}, {4, 1024}, {4, 1024, 1024}},
        {5, "layers.0.fc1", "linear", 1.099511627776, 2.2, 8396800, 8388608, 41943040, 2, 3, 3,
         {1024, 4096}, {4, 1024, 1024}, {4, 1024, 4096}},
        {9, "head", "linear", 3.3e-05, 0, 0, 0, 0, 0, 3, 0, {0}, {4, 1024, 4096}, {0}},
    };
    for (int v = 0; v < 3; v++) {
        const pf_op_t *o = pf_graph_op(g, v);
        CU_ASSERT_EQUAL(o->id, want[v].id);
        CU_ASSERT_STRING_EQUAL(o->name, want[v].name);
        CU_ASSERT_STRING_EQUAL(o->type, want[v].type);
        CU_ASSERT(o->fwd_ms == want[v].fwd_ms && o->bwd_ms == want[v].bwd_ms);
        CU_ASSERT(o->param_bytes == want[v].param_bytes);
        CU_ASSERT(o->mem_fwd_bytes == want[v].mem_fwd_bytes);
        CU_ASSERT(o->mem_bwd_bytes == want[v].mem_bwd_bytes);
        CU_ASSERT_EQUAL(o->weight.ndim, want[v].wdim);
        CU_ASSERT_EQUAL(o->input.ndim, want[v].idim);
        CU_ASSERT_EQUAL(o->output.ndim, want[v].odim);
        for (int k = 0; k < o->weight.ndim; k++)
            CU_ASSERT_EQUAL(o->weight.dim[k], want[v].w[k]);
        for (int k = 0; k < o->input.ndim; k++)
            CU_ASSERT_EQUAL(o->input.dim[k], want[v].in[k]);
        for (int k = 0; k < o->output.ndim; k++)
            CU_ASSERT_EQUAL(o->output.dim[k], want[v].out[k]);
        static const pf_op_work_t none;
        CU_ASSERT_EQUAL(memcmp(&o->work, &none, sizeof none), 0);
    }
    CU_ASSERT_EQUAL_FATAL(pf_graph_nedges(g), 2);
    CU_ASSERT(pf_graph_edge(g, 0)->src == 0 && pf_graph_edge(g, 0)->dst == 1);
    CU_ASSERT(pf_graph_edge(g, 0)->bytes == 8388608);
    CU_ASSERT(pf_graph_edge(g, 1)->src == 1 && pf_graph_edge(g, 1)->dst == 2);
    CU_ASSERT(pf_graph_edge(g, 1)->bytes == 33554432.5);
    pf_graph_destroy(&g);
    /* "version": 1 said outright is the same format */
    const char *v1 = "{\"version\": 1, \"ops\": [" OP(0) "], \"edges\": []}";
    CU_ASSERT_EQUAL(pf_graph_load_buffer(v1, strlen(v1), "v1.json", &g, err, sizeof err), PF_OK);
    pf_graph_destroy(&g);
}

/* A NUL byte is not JSON: jansson took one after a number as the end of the text (the rest of
 * the file ignored, the graph accepted) and reported one before a key "near end of file". Every
 * reader (file, stdin, buffer) now names its line, column and byte offset. */
static void test_nul_bytes(void)
{
    static const struct {
        const char *text;
        size_t len;
        const char *expect;
    } cases[] = {
        {"{\"microbatch\": 1\0, \"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1}], "
         "\"edges\": []}",
         77, "nul.json:1:17: NUL byte at byte offset 16"},
        {"{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1}],\n \0\"edges\": []}", 61,
         "nul.json:2:2: NUL byte at byte offset 48"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512] = "", path[700];
        pf_graph_t *g = (pf_graph_t *)1;
        CU_ASSERT_EQUAL(pf_graph_load_buffer(cases[i].text, cases[i].len, "nul.json", &g, err,
                                             sizeof err),
                        PF_EINPUT);
        CU_ASSERT_PTR_NULL(g);
        CU_ASSERT_STRING_EQUAL(err, cases[i].expect);
        snprintf(path, sizeof path, "%s/nul.json", pf_test_tmpdir());
        FILE *f = fopen(path, "wb");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fwrite(cases[i].text, 1, cases[i].len, f);
        fclose(f);
        g = (pf_graph_t *)1;
        CU_ASSERT_EQUAL(pf_graph_load(path, &g, err, sizeof err), PF_EINPUT);
        CU_ASSERT_PTR_NULL(g);
        const char *base = strstr(err, "nul.json");
        CU_ASSERT(base && strcmp(base, cases[i].expect) == 0);
    }
}

/* Names over PF_NAME_MAX bytes are refused where they are read, with the place and the size. */
static void test_long_names(void)
{
    size_t n = 300;
    char *text = malloc(n + 200), err[512] = "";
    int k = snprintf(text, n + 200, "{\"name\": \"");
    memset(text + k, 'x', n);
    snprintf(text + k + n, 200, "\", \"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1}], "
                                "\"edges\": []}");
    pf_graph_t *g = (pf_graph_t *)1;
    CU_ASSERT_EQUAL(pf_graph_load_buffer(text, strlen(text), "long.json", &g, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "long.json: graph.name: 300 bytes, at most 256");
    /* an op name of exactly 256 bytes passes; 257 does not */
    k = snprintf(text, n + 200, "{\"ops\": [{\"id\": 0, \"fwd_ms\": 1, \"bwd_ms\": 1, \"name\": \"");
    memset(text + k, 'y', PF_NAME_MAX);
    snprintf(text + k + PF_NAME_MAX, 200, "\"}], \"edges\": []}");
    CU_ASSERT_EQUAL(pf_graph_load_buffer(text, strlen(text), "long.json", &g, err, sizeof err),
                    PF_OK);
    pf_graph_destroy(&g);
    memset(text + k, 'y', PF_NAME_MAX + 1);
    snprintf(text + k + PF_NAME_MAX + 1, 200, "\"}], \"edges\": []}");
    CU_ASSERT_EQUAL(pf_graph_load_buffer(text, strlen(text), "long.json", &g, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "long.json: ops[0].name: 257 bytes, at most 256");
    free(text);
}

/* "device_model": written when set, read back, kept by graphs derived with pf_graph_new_like,
 * refused when empty. */
static void test_device_model(void)
{
    char err[256], path[512];
    const char *text = "{\"name\":\"d\",\"device_model\":\"a100-80g\",\"ops\":[{\"id\":0,"
                       "\"fwd_ms\":1,\"bwd_ms\":2}],\"edges\":[]}";
    pf_graph_t *g = NULL, *h = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_graph_load_buffer(text, strlen(text), "d.json", &g, err, sizeof err),
                          PF_OK);
    CU_ASSERT_STRING_EQUAL(pf_graph_device_model(g), "a100-80g");
    snprintf(path, sizeof path, "%s/dm.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL(pf_graph_save(g, path, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_graph_load(path, &h, err, sizeof err), PF_OK);
    CU_ASSERT_STRING_EQUAL(pf_graph_device_model(h), "a100-80g");
    pf_graph_destroy(&h);
    h = pf_graph_new_like(g);
    CU_ASSERT_STRING_EQUAL(pf_graph_device_model(h), "a100-80g");
    CU_ASSERT_EQUAL(pf_graph_microbatch(h), 1);
    pf_graph_destroy(&h);
    pf_graph_destroy(&g);
    const char *empty = "{\"name\":\"d\",\"device_model\":\"\",\"ops\":[{\"id\":0}],\"edges\":[]}";
    CU_ASSERT_EQUAL(pf_graph_load_buffer(empty, strlen(empty), "e.json", &g, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "graph.device_model: empty"));
}

/* ---- the streaming reader (pf_graph_load_buffer) against the tree reader ---- */

/* The tree reader: the whole text parsed by jansson, then converted (pf_graph_from_json). */
static int load_tree(const char *text, size_t len, pf_graph_t **g, char *err, size_t errlen)
{
    json_t *root;
    *g = NULL;
    int rc = pf_json_load_buffer(text, len, "x.json", &root, err, errlen);
    if (rc != PF_OK)
        return rc;
    rc = pf_graph_from_json(root, "x.json", g, err, errlen);
    json_decref(root);
    return rc;
}

/* g as its file's text (caller frees). */
static char *graph_text(const pf_graph_t *g, const char *name)
{
    char path[512], err[256], *buf = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/%s", pf_test_tmpdir(), name);
    if (pf_graph_save(g, path, err, sizeof err) != PF_OK ||
        pf_json_stream_read_file(path, &buf, &len, err, sizeof err) != PF_OK)
        return NULL;
    return buf;
}

/* Every field of two graphs equal, numbers bit for bit. */
static int same_graph(const pf_graph_t *a, const pf_graph_t *b)
{
    const char *da = pf_graph_device_model(a), *db = pf_graph_device_model(b);
    if (strcmp(pf_graph_name(a), pf_graph_name(b)) ||
        pf_graph_microbatch(a) != pf_graph_microbatch(b) ||
        (da || db ? !da || !db || strcmp(da, db) : 0) || pf_graph_nops(a) != pf_graph_nops(b) ||
        pf_graph_nedges(a) != pf_graph_nedges(b))
        return 0;
    for (int v = 0; v < pf_graph_nops(a); v++) {
        const pf_op_t *x = pf_graph_op(a, v), *y = pf_graph_op(b, v);
        const double dx[] = {x->fwd_ms, x->bwd_ms, x->param_bytes, x->mem_fwd_bytes,
                             x->mem_bwd_bytes, x->work.fwd_flops, x->work.bwd_flops,
                             x->work.bytes_read, x->work.bytes_written};
        const double dy[] = {y->fwd_ms, y->bwd_ms, y->param_bytes, y->mem_fwd_bytes,
                             y->mem_bwd_bytes, y->work.fwd_flops, y->work.bwd_flops,
                             y->work.bytes_read, y->work.bytes_written};
        const pf_shape_t *sx[] = {&x->weight, &x->input, &x->output};
        const pf_shape_t *sy[] = {&y->weight, &y->input, &y->output};
        if (x->id != y->id || strcmp(x->name, y->name) || strcmp(x->type, y->type) ||
            memcmp(dx, dy, sizeof dx) != 0 || x->work.gemm_m != y->work.gemm_m ||
            x->work.gemm_n != y->work.gemm_n || x->work.gemm_k != y->work.gemm_k ||
            x->work.gemm_batch != y->work.gemm_batch)
            return 0;
        for (int k = 0; k < 3; k++)
            if (sx[k]->ndim != sy[k]->ndim ||
                memcmp(sx[k]->dim, sy[k]->dim, (size_t)sx[k]->ndim * sizeof sx[k]->dim[0]))
                return 0;
    }
    for (int e = 0; e < pf_graph_nedges(a); e++) {
        const pf_edge_t *x = pf_graph_edge(a, e), *y = pf_graph_edge(b, e);
        if (x->src != y->src || x->dst != y->dst || memcmp(&x->bytes, &y->bytes, sizeof x->bytes))
            return 0;
    }
    return 1;
}

/* Both readers on text: the same code, the same message, the same graph. */
static int same_both_ways(const char *text, size_t len, const char *what)
{
    char e1[1024] = "", e2[1024] = "";
    pf_graph_t *g1, *g2;
    int r1 = load_tree(text, len, &g1, e1, sizeof e1);
    int r2 = pf_graph_load_buffer(text, len, "x.json", &g2, e2, sizeof e2);
    int same = r1 == r2 && (r1 == PF_OK || strcmp(e1, e2) == 0);
    if (same && r1 == PF_OK)
        same = same_graph(g1, g2);
    if (!same)
        fprintf(stderr, "\n  %s: tree %d '%s', stream %d '%s'\n", what, r1, e1, r2, e2);
    pf_graph_destroy(&g1);
    pf_graph_destroy(&g2);
    return same;
}

/* Every file of a fuzz corpus folder (under tests/, next to PF_DATA); the count read. */
static int same_on_corpus(const char *folder)
{
    char dir[512], path[1024];
    int n = 0;
    snprintf(dir, sizeof dir, "%s/../fuzz/corpus/%s", pf_test_data("", path, sizeof path), folder);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char *buf = NULL;
        size_t len = 0;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (f && (buf = malloc(1 << 20)))
            len = fread(buf, 1, 1 << 20, f);
        if (f)
            fclose(f);
        CU_ASSERT(buf && same_both_ways(buf, len, path));
        free(buf);
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

static const char *const reordered =
    "{\"edges\": [{\"src\": 1, \"dst\": 2, \"bytes\": 1e3}, {\"src\": 2, \"dst\": 7, \"bytes\": 0}],\n"
    " \"version\": 2, \"device_model\": \"a100-80g\",\n"
    " \"ops\": [{\"id\": 1, \"name\": \"a\\\"b\\\\c\\u00e9\\n]\", \"type\": \"x[y]{z}\", \"fwd_ms\": 1,"
    " \"bwd_ms\": 2.5e-1, \"gemm\": {\"m\": 2, \"n\": 3, \"k\": 4, \"batch\": 1},"
    " \"extra\": [[1, [2]], {\"q\": \"]\"}]},\n"
    "  {\"id\": 2, \"name\": \"\xc3\xbc\xe6\x97\xa5\", \"fwd_ms\": 0, \"bwd_ms\": 0, \"weight\": [1, 2, 3]},\n"
    "  {\"id\": 7, \"fwd_ms\": 3, \"bwd_ms\": -0.0, \"fwd_flops\": 1e12}],\n"
    " \"name\": \"g2\", \"microbatch\": 2, \"junk\": {\"a\": [1, 2, {\"b\": null}]}\n}\n";

static void test_stream_same_graphs(void)
{
    char path[512], err[256], *text, *v1;
    size_t len;
    CU_ASSERT_TRUE(same_both_ways(reordered, strlen(reordered), "reordered"));
    pf_graph_t *g;
    CU_ASSERT_EQUAL_FATAL(pf_graph_load_buffer(reordered, strlen(reordered), "r.json", &g, err,
                                               sizeof err),
                          PF_OK);
    CU_ASSERT_STRING_EQUAL(pf_graph_name(g), "g2");
    CU_ASSERT_STRING_EQUAL(pf_graph_op(g, 0)->name, "a\"b\\c\xc3\xa9\n]");
    CU_ASSERT_EQUAL(pf_graph_op(g, 0)->work.gemm_k, 4);
    CU_ASSERT_EQUAL(pf_graph_edge(g, 1)->dst, 2); /* op 7 is index 2 */
    pf_graph_destroy(&g);
    /* a version 1 file, and a generated graph written by pf_graph_save */
    pf_test_data("graph-v1.json", path, sizeof path);
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_read_file(path, &v1, &len, err, sizeof err), PF_OK);
    CU_ASSERT_TRUE(same_both_ways(v1, len, "graph-v1.json"));
    free(v1);
    g = pf_test_random_dag(7, 300, 0.05);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    text = graph_text(g, "dag.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_TRUE(same_both_ways(text, strlen(text), "random dag"));
    free(text);
    pf_graph_destroy(&g);
    /* the fuzz corpora: mostly broken files, whose messages must match */
    CU_ASSERT(same_on_corpus("graph_json") > 0);
    same_on_corpus("gen_files");
}

/* Cut at every byte, and each byte replaced by, or preceded by, a character that breaks the
 * structure: both readers say the same. */
static void test_stream_mutations(void)
{
    char path[512], err[256], *text;
    size_t len;
    static const char subs[] = ",}]{\"\\x-\n";
    pf_test_data("graph-v1.json", path, sizeof path);
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_read_file(path, &text, &len, err, sizeof err), PF_OK);
    char *m = malloc(len + 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    int bad = 0;
    for (size_t k = 0; k <= len && bad < 5; k++)
        bad += !same_both_ways(text, k, "cut");
    for (size_t i = 0; i < len && bad < 5; i++) {
        for (size_t c = 0; c + 1 < sizeof subs; c++) {
            memcpy(m, text, len);
            m[i] = subs[c];
            bad += !same_both_ways(m, len, "replaced");
            memcpy(m, text, i);
            m[i] = subs[c];
            memcpy(m + i + 1, text + i, len - i);
            bad += !same_both_ways(m, len + 1, "inserted");
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(m);
    free(text);
}

/* Which error wins when a text has several: a syntax error anywhere, then the top level's keys,
 * then the ops, then the edges in order (dangling or malformed), whatever the keys' order. */
static void test_stream_error_order(void)
{
    static const struct {
        const char *text, *expect;
    } cases[] = {
        /* a bad op early, the text cut late: the cut (the tree reader never converted) */
        {"{\"ops\": [{\"id\": 0, \"fwd_ms\": -1, \"bwd_ms\": 1}],\n\"edges\": [",
         "x.json:2:10: ']' expected near end of file"},
        /* a bad edge and a bad op before the top level's bad key */
        {"{\"edges\": [{\"src\": 0}], \"ops\": [{\"id\": 0, \"fwd_ms\": -1, \"bwd_ms\": 1}], "
         "\"microbatch\": 0}",
         "x.json: graph.microbatch: zero"},
        {"{\"edges\": [{\"src\": 0}], \"ops\": [{\"id\": 0, \"fwd_ms\": -1, \"bwd_ms\": 1}]}",
         "x.json: ops[0].fwd_ms: negative (-1)"},
        /* an edge to no op before a malformed one, and the other way round */
        {"{\"edges\": [{\"src\": 0, \"dst\": 9, \"bytes\": 1}, {\"dst\": 0}], \"ops\": [{\"id\": 0, "
         "\"fwd_ms\": 1, \"bwd_ms\": 1}]}",
         "x.json: edges[0]: dst 9 is not an op"},
        {"{\"edges\": [{\"dst\": 0}, {\"src\": 0, \"dst\": 9, \"bytes\": 1}], \"ops\": [{\"id\": 0, "
         "\"fwd_ms\": 1, \"bwd_ms\": 1}]}",
         "x.json: edges[0].src: missing"},
        /* an element that is not an object: the whole text as one tree */
        {"{\"ops\": [1], \"edges\": []}", "x.json: ops[0]: not an object"},
        {"{\"ops\": {}, \"edges\": []}", "x.json: graph.ops: not an array"},
        {"{\"ops\": [{\"id\": 3, \"fwd_ms\": 1, \"bwd_ms\": 1}, {\"id\": 3, \"fwd_ms\": 1, "
         "\"bwd_ms\": 1}], \"edges\": []}",
         "x.json: ops[1].id: duplicate id 3 (also ops[0])"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512] = "";
        pf_graph_t *g;
        CU_ASSERT_EQUAL(pf_graph_load_buffer(cases[i].text, strlen(cases[i].text), "x.json", &g,
                                             err, sizeof err),
                        PF_EINPUT);
        CU_ASSERT_TRUE(pf_test_err_from(err, "x.json", cases[i].expect, i));
        CU_ASSERT_EQUAL(strlen(err), strlen(cases[i].expect));
        CU_ASSERT_TRUE(same_both_ways(cases[i].text, strlen(cases[i].text), "order"));
    }
    /* from a file: its name, the line and column in the whole file */
    char err[512];
    pf_graph_t *g;
    const char *path = pf_test_write("cut.json", "{\"ops\": [\n  {\"id\": 0, \"fwd_ms\": 1,\n");
    CU_ASSERT_EQUAL(pf_graph_load(path, &g, err, sizeof err), PF_EINPUT);
    CU_ASSERT_TRUE(pf_test_err_from(err, "cut.json", "cut.json:3:0: string or '}' expected near "
                                                     "end of file", 0));
}

void pf_suite_graph(void)
{
    CU_pSuite s = CU_add_suite("graph", NULL, NULL);
    CU_add_test(s, "build, CSR, topological order, sums", test_build);
    CU_add_test(s, "cycle names an op on it", test_cycle_named);
    CU_add_test(s, "bad files: each message names the place", test_bad_files);
    CU_add_test(s, "missing file", test_missing_file);
    CU_add_test(s, "write then read gives the same graph", test_round_trip);
    CU_add_test(s, "a version 1 file loads unchanged, every number", test_version1_file);
    CU_add_test(s, "absurd numbers, negative ids, repeated edges, cycles: exact messages",
                test_input_gaps);
    CU_add_test(s, "invalid UTF-8 in names and types built in memory", test_bad_utf8_in_memory);
    CU_add_test(s, "a NUL byte anywhere: line, column and byte offset", test_nul_bytes);
    CU_add_test(s, "names over 256 bytes refused with the place", test_long_names);
    CU_add_test(s, "device_model read, written and kept by derived graphs", test_device_model);
    CU_add_test(s, "streaming and tree readers: same graphs, same corpus messages",
                test_stream_same_graphs);
    CU_add_test(s, "streaming and tree readers: same messages on cut and broken texts",
                test_stream_mutations);
    CU_add_test(s, "which error wins: syntax, top level, ops, edges, whatever the key order",
                test_stream_error_order);
}
