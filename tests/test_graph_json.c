/* graph_json: one element of "ops" or "edges" into its record, or the message naming the key. */
#include "planner/ir/graph_json.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <string.h>

static json_t *parse(const char *text)
{
    return json_loads(text, 0, NULL);
}

static void test_op_fields(void)
{
    char err[256];
    pf_op_t op = {0};
    json_t *o = parse("{\"id\": 12, \"name\": \"l.0\", \"type\": \"linear\", \"fwd_ms\": 1.5, "
                      "\"bwd_ms\": 3, \"param_bytes\": 4096, \"mem_bwd_bytes\": 8, "
                      "\"weight\": [64, 64], \"fwd_flops\": 2e9, \"gemm\": {\"m\": 2, \"n\": 3, "
                      "\"k\": 4, \"batch\": 5}, \"unknown\": [1]}");
    CU_ASSERT_EQUAL_FATAL(pf_graph_json_op(o, "ops[4]", &op, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(op.id, 12);
    CU_ASSERT_STRING_EQUAL(op.name, "l.0");
    CU_ASSERT_STRING_EQUAL(op.type, "linear");
    CU_ASSERT_EQUAL(op.fwd_ms, 1.5);
    CU_ASSERT_EQUAL(op.bwd_ms, 3);
    CU_ASSERT_EQUAL(op.param_bytes, 4096);
    CU_ASSERT_EQUAL(op.mem_fwd_bytes, 0); /* absent: 0 */
    CU_ASSERT_EQUAL(op.mem_bwd_bytes, 8);
    CU_ASSERT_EQUAL(op.weight.ndim, 2);
    CU_ASSERT_EQUAL(op.weight.dim[1], 64);
    CU_ASSERT_EQUAL(op.input.ndim, 0);
    CU_ASSERT_EQUAL(op.work.fwd_flops, 2e9);
    CU_ASSERT_EQUAL(op.work.gemm_k, 4);
    CU_ASSERT_EQUAL(op.work.gemm_batch, 5);
    json_decref(o);
    o = parse("{\"id\": 1, \"fwd_ms\": 0, \"bwd_ms\": 0}");
    pf_op_t bare = {0};
    CU_ASSERT_EQUAL(pf_graph_json_op(o, "ops[0]", &bare, err, sizeof err), PF_OK);
    CU_ASSERT_PTR_NULL(bare.name); /* the graph names it op<id> */
    CU_ASSERT_STRING_EQUAL(bare.type, "");
    CU_ASSERT_EQUAL(bare.work.gemm_m, 0);
    json_decref(o);
}

static void test_op_errors(void)
{
    static const struct {
        const char *text, *expect;
    } cases[] = {
        {"[1]", "ops[3]: not an object"},
        {"{\"fwd_ms\": 1, \"bwd_ms\": 1}", "ops[3].id: missing"},
        {"{\"id\": 1.5, \"fwd_ms\": 1, \"bwd_ms\": 1}", "ops[3].id: not an integer"},
        {"{\"id\": 1, \"bwd_ms\": 1}", "ops[3].fwd_ms: missing"},
        {"{\"id\": 1, \"fwd_ms\": -2, \"bwd_ms\": 1}", "ops[3].fwd_ms: negative (-2)"},
        {"{\"id\": 1, \"fwd_ms\": 1, \"bwd_ms\": \"2\"}", "ops[3].bwd_ms: not a number"},
        {"{\"id\": 1, \"name\": 5, \"fwd_ms\": 1, \"bwd_ms\": 1}", "ops[3].name: not a string"},
        {"{\"id\": 1, \"fwd_ms\": 1, \"bwd_ms\": 1, \"input\": [2, -1]}",
         "ops[3].input[1]: not a non-negative integer"},
        {"{\"id\": 1, \"fwd_ms\": 1, \"bwd_ms\": 1, \"gemm\": 3}", "ops[3].gemm: not an object"},
        {"{\"id\": 1, \"fwd_ms\": 1, \"bwd_ms\": 1, \"gemm\": {\"m\": 1, \"n\": 1, \"k\": 1}}",
         "ops[3].gemm.batch: missing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "";
        pf_op_t op = {0};
        json_t *o = parse(cases[i].text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(o);
        CU_ASSERT_EQUAL(pf_graph_json_op(o, "ops[3]", &op, err, sizeof err), PF_EINPUT);
        CU_ASSERT_STRING_EQUAL(err, cases[i].expect);
        json_decref(o);
    }
}

static void test_edges(void)
{
    char err[256];
    pf_graph_json_edge_t x;
    json_t *e = parse("{\"src\": 3, \"dst\": -4, \"bytes\": 2.5}");
    CU_ASSERT_EQUAL_FATAL(pf_graph_json_edge(e, "edges[0]", &x, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(x.src, 3);
    CU_ASSERT_EQUAL(x.dst, -4); /* ids are looked up later: "is not an op" */
    CU_ASSERT_EQUAL(x.bytes, 2.5);
    json_decref(e);
    static const struct {
        const char *text, *expect;
    } cases[] = {
        {"7", "edges[9]: not an object"},
        {"{\"dst\": 1, \"bytes\": 1}", "edges[9].src: missing"},
        {"{\"src\": 1, \"dst\": 2}", "edges[9].bytes: missing"},
        {"{\"src\": 1, \"dst\": 2, \"bytes\": -1}", "edges[9].bytes: negative (-1)"},
        {"{\"src\": 1, \"dst\": 2.0, \"bytes\": 1}", "edges[9].dst: not an integer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        e = json_loads(cases[i].text, JSON_DECODE_ANY, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(e);
        CU_ASSERT_EQUAL(pf_graph_json_edge(e, "edges[9]", &x, err, sizeof err), PF_EINPUT);
        CU_ASSERT_STRING_EQUAL(err, cases[i].expect);
        json_decref(e);
    }
}

void pf_suite_graph_json(void)
{
    CU_pSuite s = CU_add_suite("graph_json", NULL, NULL);
    CU_add_test(s, "an op's every field, absent ones 0", test_op_fields);
    CU_add_test(s, "an op's bad fields name the key", test_op_errors);
    CU_add_test(s, "an edge's fields and errors", test_edges);
}
