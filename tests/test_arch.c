/* arch: the graph's "model" object: what is read, what is refused, and that a generated graph
 * keeps it through a file and through graphs derived from it. */
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/ir/arch.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <string.h>

static int parse(const char *text, pf_arch_t *a, char *err, size_t errlen)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    int rc = pf_arch_from_json(o, "graph.model", a, err, errlen);
    json_decref(o);
    return rc;
}

static void test_read(void)
{
    pf_arch_t a;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(parse("{\"kind\": \"llama\", \"layers\": 80, \"hidden\": 8192, "
                                "\"heads\": 64, \"kv_heads\": 8, \"ffn_hidden\": 28672, "
                                "\"seq\": 4096, \"vocab\": 32000, \"activation\": \"swiglu\", "
                                "\"norm\": \"rmsnorm\", \"positions\": \"rope\", "
                                "\"tied_embeddings\": false, \"bias\": false, \"later\": 1}",
                                &a, err, sizeof err), PF_OK);
    CU_ASSERT_STRING_EQUAL(a.kind, "llama");
    CU_ASSERT_EQUAL(a.layers, 80);
    CU_ASSERT_EQUAL(a.kv_heads, 8);
    CU_ASSERT_EQUAL(a.ffn_hidden, 28672);
    CU_ASSERT_STRING_EQUAL(a.norm, "rmsnorm");
    CU_ASSERT_EQUAL(a.tied_embeddings, 0);
    CU_ASSERT_EQUAL(a.bias, 0);
    CU_ASSERT_EQUAL(a.experts, 0);
    /* a head size apart from hidden / heads: 40 heads need not divide 5140 */
    CU_ASSERT_EQUAL_FATAL(parse("{\"kind\": \"gpt\", \"hidden\": 5140, \"heads\": 40, "
                                "\"head_dim\": 128}", &a, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(a.head_dim, 128);
    /* only the kind: everything else unsaid */
    CU_ASSERT_EQUAL_FATAL(parse("{\"kind\": \"traced\"}", &a, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(a.heads, 0);
    CU_ASSERT_STRING_EQUAL(a.activation, "");
    CU_ASSERT_EQUAL(a.tied_embeddings, -1);
    const struct {
        const char *text, *msg;
    } bad[] = {
        {"{\"layers\": 2}", "graph.model.kind: missing"},
        {"{\"kind\": \"\"}", "graph.model.kind: empty"},
        {"{\"kind\": \"gpt\", \"layers\": 0}", "graph.model.layers"},
        {"{\"kind\": \"gpt\", \"hidden\": -64}", "graph.model.hidden"},
        {"{\"kind\": \"gpt\", \"heads\": \"4\"}", "graph.model.heads"},
        {"{\"kind\": \"gpt\", \"norm\": \"batchnorm\"}",
         "graph.model.norm: 'batchnorm' is not layernorm or rmsnorm"},
        {"{\"kind\": \"gpt\", \"activation\": \"relu\"}", "graph.model.activation: 'relu'"},
        {"{\"kind\": \"gpt\", \"bias\": 1}", "graph.model.bias: not true or false"},
        {"{\"kind\": \"gpt\", \"hidden\": 100, \"heads\": 3}",
         "graph.model.heads: hidden 100 is not divisible by 3 heads"},
        {"{\"kind\": \"gpt\", \"hidden\": 96, \"heads\": 12, \"kv_heads\": 5}",
         "graph.model.kv_heads: 5 does not divide the 12 heads"},
        {"{\"kind\": \"moe\", \"experts\": 2, \"top_k\": 3}", "graph.model.top_k: 3, more than"},
        {"[1]", "graph.model: not an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int rc = parse(bad[i].text, &a, err, sizeof err);
        if (rc != PF_EINPUT || !strstr(err, bad[i].msg))
            fprintf(stderr, "\n  case %zu: rc %d, '%s'\n", i, rc, err);
        CU_ASSERT_EQUAL(rc, PF_EINPUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].msg));
    }
}

/* A generated Llama keeps its object through pf_graph_save / pf_graph_load and
 * pf_graph_new_like; a ResNet has none, and a file without one loads with none. */
static void test_graph_file(void)
{
    pf_model_opts_t o;
    pf_model_opts_init(&o, PF_MODEL_LLAMA);
    o.layers = 2, o.hidden = 256, o.heads = 8, o.kv_heads = 2, o.seq = 64, o.vocab = 500, o.ffn = 0;
    pf_graph_t *g = NULL, *back = NULL;
    char err[256], path[600];
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&o, &g, err, sizeof err), PF_OK);
    const pf_arch_t *a = pf_graph_arch(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(a->ffn_hidden, 1024); /* 4 x hidden when --ffn is not given */
    CU_ASSERT_EQUAL(a->kv_heads, 2);
    snprintf(path, sizeof path, "%s/arch-llama.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(pf_graph_save(g, path, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_graph_load(path, &back, err, sizeof err), PF_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pf_graph_arch(back));
    CU_ASSERT_EQUAL(memcmp(pf_graph_arch(back), a, sizeof *a), 0);
    pf_graph_destroy(&back);
    back = pf_graph_new_like(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pf_graph_arch(back));
    CU_ASSERT_EQUAL(pf_graph_arch(back)->layers, 2);
    pf_graph_destroy(&back);
    pf_graph_destroy(&g);
    pf_model_opts_init(&o, PF_MODEL_RESNET);
    o.depth = 18, o.image = 32, o.microbatch = 2;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&o, &g, err, sizeof err), PF_OK);
    CU_ASSERT_PTR_NULL(pf_graph_arch(g));
    pf_graph_destroy(&g);
    /* a bad object is the file's error, with its path */
    char *bad = pf_test_write("arch-bad.json", "{\"model\": {\"kind\": \"gpt\", \"layers\": -1}, "
                              "\"ops\": [], \"edges\": []}");
    CU_ASSERT_NOT_EQUAL(pf_graph_load(bad, &g, err, sizeof err), PF_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "graph.model.layers"));
}

void pf_suite_arch(void)
{
    CU_pSuite s = CU_add_suite("arch", NULL, NULL);
    CU_add_test(s, "the model object: every key, and what is refused", test_read);
    CU_add_test(s, "a generated graph keeps it through a file and a derived graph",
                test_graph_file);
}
