/* import: the shipped PipeDream and Piper profiles against numbers taken from the raw files by a
 * second, deliberately naive reader (and by hand), bad inputs with their exact messages, garbage
 * that must not crash, and import -> save -> load round trips. */
#include "planner/partition/downsets.h"
#include "planner/ir/graph.h"
#include "planner/inputs/import.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const pipedream_models[] = {
    "alexnet",   "densenet121", "gnmt",     "gnmt_large", "inception_v3",  "nasnetalarge",
    "nasnetamobile", "resnet101", "resnet18", "resnet50", "resnext101", "resnext50",
    "squeezenet1_0", "vgg16"};
#define NPIPEDREAM (sizeof pipedream_models / sizeof pipedream_models[0])

/* ---- a second reader: counts lines and adds up fields with strstr + strtod ---- */

typedef struct {
    int nodes, edges;
    double fwd_ms, bwd_ms, param_bytes;
} raw_totals_t;

static double field_after(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

static int raw_totals(const char *path, raw_totals_t *t)
{
    FILE *f = fopen(path, "r");
    char line[8192];
    memset(t, 0, sizeof *t);
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '\t') {
            t->edges++;
        } else if (!strncmp(line, "node", 4)) {
            t->nodes++;
            t->fwd_ms += field_after(line, "forward_compute_time=");
            t->bwd_ms += field_after(line, "backward_compute_time=");
            t->param_bytes += field_after(line, "parameter_size=");
        }
    }
    fclose(f);
    return 0;
}

static pf_graph_t *import_data(const char *format, const char *rel, int microbatch)
{
    char path[600], err[512];
    pf_graph_t *g = NULL;
    pf_test_data(rel, path, sizeof path);
    int rc = !strcmp(format, "piper") ? pf_import_piper(path, microbatch, &g, err, sizeof err)
                                      : pf_import_pipedream(path, microbatch, &g, err, sizeof err);
    if (rc != PF_OK)
        fprintf(stderr, "\n  import %s: %s\n", rel, err);
    return g;
}

static double sum_fwd(const pf_graph_t *g)
{
    double s = 0;
    for (int v = 0; v < pf_graph_nops(g); v++)
        s += pf_graph_op(g, v)->fwd_ms;
    return s;
}

static double sum_bwd(const pf_graph_t *g)
{
    double s = 0;
    for (int v = 0; v < pf_graph_nops(g); v++)
        s += pf_graph_op(g, v)->bwd_ms;
    return s;
}

static double sum_edge_bytes(const pf_graph_t *g)
{
    double s = 0;
    for (int e = 0; e < pf_graph_nedges(g); e++)
        s += pf_graph_edge(g, e)->bytes;
    return s;
}

static const pf_op_t *op_by_id(const pf_graph_t *g, int64_t id)
{
    int v = pf_graph_find(g, id);
    return v >= 0 ? pf_graph_op(g, v) : NULL;
}

/* bytes of the edge src -> dst (file ids), or -1 */
static double edge_bytes(const pf_graph_t *g, int64_t src, int64_t dst)
{
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (pf_graph_op(g, ed->src)->id == src && pf_graph_op(g, ed->dst)->id == dst)
            return ed->bytes;
    }
    return -1;
}

/* ---- PipeDream ---- */

static void test_pipedream_all_files(void)
{
    for (size_t i = 0; i < NPIPEDREAM; i++) {
        char rel[128], path[600];
        raw_totals_t t;
        snprintf(rel, sizeof rel, "pipedream/%s.txt", pipedream_models[i]);
        CU_ASSERT_EQUAL_FATAL(raw_totals(pf_test_data(rel, path, sizeof path), &t), 0);
        pf_graph_t *g = import_data("pipedream", rel, 0);
        CU_ASSERT_PTR_NOT_NULL(g);
        if (!g)
            continue;
        CU_ASSERT_EQUAL(pf_graph_nops(g), t.nodes);
        CU_ASSERT_EQUAL(pf_graph_nedges(g), t.edges);
        PF_ASSERT_CLOSE(sum_fwd(g), t.fwd_ms, 1e-12);
        PF_ASSERT_CLOSE(sum_bwd(g), t.bwd_ms, 1e-12);
        PF_ASSERT_CLOSE(pf_graph_total_param_bytes(g), t.param_bytes, 1e-12);
        CU_ASSERT_STRING_EQUAL(pf_graph_name(g), pipedream_models[i]);
        /* every op keeps "nodeN" as the head of its name */
        for (int v = 0; v < pf_graph_nops(g); v++) {
            char head[32];
            snprintf(head, sizeof head, "node%lld", (long long)pf_graph_op(g, v)->id);
            CU_ASSERT_EQUAL(strncmp(pf_graph_op(g, v)->name, head, strlen(head)), 0);
        }
        pf_graph_destroy(&g);
    }
}

static void test_pipedream_hard_numbers(void)
{
    /* Totals written down from a one-off script over the raw lines (python, float sums). */
    pf_graph_t *g = import_data("pipedream", "pipedream/vgg16.txt", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(pf_graph_nops(g), 41);
    CU_ASSERT_EQUAL(pf_graph_nedges(g), 41);
    CU_ASSERT_EQUAL(pf_graph_microbatch(g), 128);
    PF_ASSERT_CLOSE(sum_fwd(g), 251.874, 1e-12);
    PF_ASSERT_CLOSE(sum_bwd(g), 438.633, 1e-12);
    PF_ASSERT_CLOSE(pf_graph_total_param_bytes(g), 553430176.0, 1e-15);
    /* each edge carries its producer's activation */
    PF_ASSERT_CLOSE(sum_edge_bytes(g), 14771552260.0, 1e-15);
    /* line "node12 -- Conv2d(128, 256, ...) -- forward_compute_time=10.814,
     * backward_compute_time=18.335, activation_size=411041792.000, parameter_size=1180672.000" */
    const pf_op_t *o = op_by_id(g, 12);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_STRING_EQUAL(o->name, "node12.Conv2d");
    CU_ASSERT_STRING_EQUAL(o->type, "conv");
    CU_ASSERT(o->fwd_ms == 10.814 && o->bwd_ms == 18.335);
    CU_ASSERT(o->param_bytes == 1180672.0);
    CU_ASSERT(o->mem_fwd_bytes == 411041792.0 && o->mem_bwd_bytes == 411041792.0);
    CU_ASSERT(edge_bytes(g, 12, 13) == 411041792.0); /* node12 -> node13 (ReLU) */
    /* work: the weights read and the activation written, as measured; no FLOPs, no GEMM
     * shape (the profile has none) */
    CU_ASSERT(o->work.bytes_read == 1180672.0 && o->work.bytes_written == 411041792.0);
    CU_ASSERT(o->work.fwd_flops == 0 && o->work.bwd_flops == 0 && o->work.gemm_m == 0);
    CU_ASSERT_STRING_EQUAL(op_by_id(g, 13)->type, "relu");
    CU_ASSERT_STRING_EQUAL(op_by_id(g, 1)->type, "input");
    CU_ASSERT_STRING_EQUAL(op_by_id(g, 11)->type, "pool");
    CU_ASSERT_STRING_EQUAL(op_by_id(g, 35)->type, "linear");
    CU_ASSERT_STRING_EQUAL(op_by_id(g, 37)->type, "dropout");
    pf_graph_destroy(&g);

    g = import_data("pipedream", "pipedream/resnet50.txt", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(pf_graph_nops(g), 177);
    CU_ASSERT_EQUAL(pf_graph_nedges(g), 193);
    CU_ASSERT_EQUAL(pf_graph_microbatch(g), 128);
    PF_ASSERT_CLOSE(sum_fwd(g), 201.45, 1e-12);
    PF_ASSERT_CLOSE(sum_bwd(g), 260.931, 1e-12);
    PF_ASSERT_CLOSE(pf_graph_total_param_bytes(g), 102228128.0, 1e-15);
    PF_ASSERT_CLOSE(sum_edge_bytes(g), 22186557444.0, 1e-15);
    /* 16 bottleneck blocks: 16 residual Adds */
    int adds = 0, bns = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        adds += strstr(pf_graph_op(g, v)->name, ".Add") != NULL;
        bns += !strcmp(pf_graph_op(g, v)->type, "batchnorm");
    }
    CU_ASSERT_EQUAL(adds, 16);
    CU_ASSERT_EQUAL(bns, 53); /* 1 stem + 16 x 3 + 4 downsample */
    pf_graph_destroy(&g);

    g = import_data("pipedream", "pipedream/alexnet.txt", 0);
    CU_ASSERT(g && pf_graph_microbatch(g) == 256);
    pf_graph_destroy(&g);
    g = import_data("pipedream", "pipedream/resnet101.txt", 0);
    CU_ASSERT(g && pf_graph_microbatch(g) == 64);
    pf_graph_destroy(&g);
    g = import_data("pipedream", "pipedream/resnet18.txt", 0); /* not known: 1 */
    CU_ASSERT(g && pf_graph_microbatch(g) == 1);
    pf_graph_destroy(&g);
    g = import_data("pipedream", "pipedream/vgg16.txt", 32); /* explicit wins */
    CU_ASSERT(g && pf_graph_microbatch(g) == 32);
    pf_graph_destroy(&g);
}

static void test_pipedream_multi_output(void)
{
    /* gnmt node7: LSTM(2048, 1024), activation_size=[6291456.0; 131072.0; 131072.0];
     * its consumers are node8 = __getitem__(0) and node9 = __getitem__(1). */
    pf_graph_t *g = import_data("pipedream", "pipedream/gnmt.txt", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const pf_op_t *o = op_by_id(g, 7);
    CU_ASSERT_STRING_EQUAL(o->name, "node7.LSTM");
    CU_ASSERT_STRING_EQUAL(o->type, "lstm");
    CU_ASSERT(o->mem_fwd_bytes == 6291456.0 + 131072.0 + 131072.0);
    CU_ASSERT(edge_bytes(g, 7, 8) == 6291456.0);
    CU_ASSERT(edge_bytes(g, 7, 9) == 131072.0);
    /* node23 RecurrentAttention: [6160384; 131072; 131072; 6160384; ...], node27 = getitem(3) */
    CU_ASSERT(edge_bytes(g, 23, 27) == 6160384.0);
    CU_ASSERT(edge_bytes(g, 23, 26) == 131072.0);
    CU_ASSERT_STRING_EQUAL(op_by_id(g, 23)->type, "attention");
    CU_ASSERT_STRING_EQUAL(op_by_id(g, 20)->type, "input"); /* "hidden" */
    CU_ASSERT_STRING_EQUAL(op_by_id(g, 14)->type, "elementwise"); /* Add */
    CU_ASSERT_STRING_EQUAL(op_by_id(g, 29)->type, "elementwise"); /* Concat(2) */
    CU_ASSERT_STRING_EQUAL(op_by_id(g, 48)->type, "linear");      /* Classifier */
    /* one-off script over the raw lines: getitem(k) takes element k, everything else the sum */
    PF_ASSERT_CLOSE(sum_edge_bytes(g), 231735296.0, 1e-15);
    pf_graph_destroy(&g);

    /* In both gnmt profiles every edge into a __getitem__ carries that node's own activation:
     * the index mapping agrees with what the profiler measured at the consumer. */
    const char *files[] = {"pipedream/gnmt.txt", "pipedream/gnmt_large.txt"};
    for (int f = 0; f < 2; f++) {
        g = import_data("pipedream", files[f], 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        int checked = 0;
        for (int e = 0; e < pf_graph_nedges(g); e++) {
            const pf_edge_t *ed = pf_graph_edge(g, e);
            const pf_op_t *dst = pf_graph_op(g, ed->dst);
            if (!strcmp(dst->type, "getitem") && pf_graph_op(g, ed->src)->fwd_ms > 0) {
                CU_ASSERT(ed->bytes == dst->mem_fwd_bytes);
                checked++;
            }
        }
        CU_ASSERT(checked >= 10);
        pf_graph_destroy(&g);
    }
    g = import_data("pipedream", "pipedream/gnmt_large.txt", 0);
    PF_ASSERT_CLOSE(sum_edge_bytes(g), 1073741824.0, 1e-15);
    pf_graph_destroy(&g);
}

static void test_pipedream_lines_in_any_order(void)
{
    /* ids not contiguous, edges before nodes, blank lines, CRLF, trailing blanks */
    const char *text = "\tnode7 -- node40\r\n"
                       "\n"
                       "node7 -- Input0 -- forward_compute_time=0.5, backward_compute_time=0.000, "
                       "activation_size=100.0, parameter_size=0.000   \r\n"
                       "node40 -- Linear(in_features=2, out_features=3) -- "
                       "parameter_size=24, activation_size=[8; 4], forward_compute_time=1.25, "
                       "backward_compute_time=2.5, extra_field=zzz\n"
                       "node41 -- __getitem__(1) -- forward_compute_time=0, "
                       "backward_compute_time=0, activation_size=4, parameter_size=0\n"
                       "node42 -- ReLU -- forward_compute_time=0, backward_compute_time=0, "
                       "activation_size=8, parameter_size=0\n"
                       "\tnode40 -- node41\n"
                       "\tnode40 -- node42\n";
    char err[512];
    pf_graph_t *g;
    int rc = pf_import_pipedream(pf_test_write("order.txt", text), 0, &g, err, sizeof err);
    CU_ASSERT_EQUAL_FATAL(rc, PF_OK);
    CU_ASSERT_EQUAL(pf_graph_nops(g), 4);
    CU_ASSERT_EQUAL(pf_graph_nedges(g), 3);
    CU_ASSERT_EQUAL(pf_graph_op(g, 0)->id, 7); /* ops in id order */
    CU_ASSERT_STRING_EQUAL(pf_graph_op(g, 0)->name, "node7.Input0");
    CU_ASSERT_STRING_EQUAL(pf_graph_name(g), "order");
    CU_ASSERT_EQUAL(pf_graph_microbatch(g), 1);
    const pf_op_t *lin = op_by_id(g, 40);
    CU_ASSERT(lin->fwd_ms == 1.25 && lin->bwd_ms == 2.5 && lin->param_bytes == 24);
    CU_ASSERT(lin->mem_fwd_bytes == 12 && lin->mem_bwd_bytes == 12); /* 8 + 4 */
    CU_ASSERT(edge_bytes(g, 7, 40) == 100);
    CU_ASSERT(edge_bytes(g, 40, 41) == 4);  /* __getitem__(1): element 1 */
    CU_ASSERT(edge_bytes(g, 40, 42) == 12); /* not a getitem: the sum */
    pf_graph_destroy(&g);

    /* a 100 KiB description is no problem; the class in the name is cut at 64 characters */
    size_t big = 100 * 1024;
    char *line = malloc(big + 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(line);
    strcpy(line, "node1 -- ");
    memset(line + 9, 'A', big);
    strcpy(line + 9 + big, " -- forward_compute_time=1, backward_compute_time=2, "
                           "activation_size=3, parameter_size=4\n");
    rc = pf_import_pipedream(pf_test_write("long.txt", line), 0, &g, err, sizeof err);
    CU_ASSERT_EQUAL_FATAL(rc, PF_OK);
    CU_ASSERT_EQUAL(strlen(pf_graph_op(g, 0)->name), strlen("node1.") + 64);
    CU_ASSERT_EQUAL(pf_graph_op(g, 0)->bwd_ms, 2);
    pf_graph_destroy(&g);
    free(line);
}

/* Each bad profile and the exact message it must produce (after the file's directory). */
static const struct {
    const char *text, *expect;
} bad_pipedream[] = {
#define N1 "node1 -- Input -- "
#define OK1                                                                                        \
    N1 "forward_compute_time=1, backward_compute_time=2, activation_size=3, parameter_size=4\n"
#define N2 "node2 -- ReLU -- forward_compute_time=0, backward_compute_time=0, activation_size=0, " \
           "parameter_size=0\n"
#define N3 "node3 -- ReLU -- forward_compute_time=0, backward_compute_time=0, activation_size=0, " \
           "parameter_size=0\n"
    {"", "bad.txt: no node lines (not a PipeDream profile?)"},
    {"\n  \n", "bad.txt: no node lines (not a PipeDream profile?)"},
    {N1 "forward_compute_time=abc, backward_compute_time=2, activation_size=3, parameter_size=4",
     "bad.txt:1: forward_compute_time: 'abc' is not a number"},
    {OK1 N2 "node3 -- X -- forward_compute_time=1, backward_compute_time=-1.5, "
            "activation_size=3, parameter_size=4\n",
     "bad.txt:3: backward_compute_time: negative (-1.5)"},
    {N1 "forward_compute_time=inf, backward_compute_time=2, activation_size=3, parameter_size=4",
     "bad.txt:1: forward_compute_time: 'inf' is not a number"},
    {N1 "forward_compute_time=nan, backward_compute_time=2, activation_size=3, parameter_size=4",
     "bad.txt:1: forward_compute_time: 'nan' is not a number"},
    {N1 "forward_compute_time=0x10, backward_compute_time=2, activation_size=3, parameter_size=4",
     "bad.txt:1: forward_compute_time: '0x10' is not a number"},
    {N1 "forward_compute_time=1e999, backward_compute_time=2, activation_size=3, parameter_size=4",
     "bad.txt:1: forward_compute_time: 1e999 is out of range"},
    {N1 "forward_compute_time=1.5.2, backward_compute_time=2, activation_size=3, parameter_size=4",
     "bad.txt:1: forward_compute_time: '1.5.2' is not a number"},
    {N1 "forward_compute_time=1, backward_compute_time=2, activation_size=3",
     "bad.txt:1: node1: missing field parameter_size"},
    {N1 "forward_compute_time=1, forward_compute_time=2, activation_size=3, parameter_size=4",
     "bad.txt:1: node1: forward_compute_time given twice"},
    {OK1 "node12 -- Conv2d(128, 2",
     "bad.txt:2: node12: no ' -- ' before its fields (truncated line?)"},
    {OK1 N1 "forward_compute_time=1.0, backw",
     "bad.txt:2: node1: 'backw' is not key=value (truncated line?)"},
    {N1 "forward_compute_time=1.0, 7, backward_compute_time=2, activation_size=3, "
        "parameter_size=4",
     "bad.txt:1: node1: '7' is not key=value"},
    {N1 "forward_compute_time=1, backward_compute_time=2, activation_size=3, parameter_size=",
     "bad.txt:1: parameter_size: '' is not a number"},
    {N1 "forward_compute_time=1, backward_compute_time=2, activation_size=[3; ; 4], "
        "parameter_size=4",
     "bad.txt:1: activation_size: '' is not a number"},
    {N1 "forward_compute_time=1, backward_compute_time=2, activation_size=[3; 4, parameter_size=4",
     "bad.txt:1: activation_size: list without a closing ']'"},
    {N1 "forward_compute_time=1, backward_compute_time=2, activation_size=[], parameter_size=4",
     "bad.txt:1: activation_size: empty list"},
    {OK1 N2 "\tnode1 -- node2\n\tnode2 -- node9\n",
     "bad.txt:4: edge node2 -- node9: node9 is not defined"},
    {"\tnode5 -- node1\n" OK1, "bad.txt:1: edge node5 -- node1: node5 is not defined"},
    {OK1 N2 OK1, "bad.txt:3: node1 defined again (first on line 1)"},
    {OK1 N2 "\tnode1 -- node2\n\tnode1 -- node2\n",
     "bad.txt:4: edge node1 -- node2 repeated (first on line 3)"},
    {OK1 "\tnode1 -- node1\n", "bad.txt:2: edge node1 -- node1 is a self-loop"},
    /* 1 -> 2 -> 3 -> 2: line 6 closes it */
    {OK1 N2 N3 "\tnode1 -- node2\n\tnode2 -- node3\n\tnode3 -- node2\n",
     "bad.txt:6: edge node3 -- node2 closes a cycle (node2 <- node3 <- node2)"},
    {"hello world\n", "bad.txt:1: expected a node 'nodeN -- ...' or an edge '<tab>nodeA -- "
                      "nodeB', got 'hello world'"},
    {OK1 "\tnode1 -> node2\n",
     "bad.txt:2: expected an edge '<tab>nodeA -- nodeB', got 'node1 -> node2'"},
    {OK1 "\tnode1 -- node2 -- node3\n",
     "bad.txt:2: expected an edge '<tab>nodeA -- nodeB', got 'node1 -- node2 -- node3'"},
    {"node99999999999999999999 -- X -- forward_compute_time=1\n",
     "bad.txt:1: expected a node 'nodeN -- description -- fields', got 'node99999999999999999999 "
     "-- X -- forward...'"},
    {"nodeX -- X\n",
     "bad.txt:1: expected a node 'nodeN -- description -- fields', got 'nodeX -- X'"},
    {N1 "forward_compute_time=1, backward_compute_time=2, activation_size=3, parameter_size=4, "
        "backward_compute_time=2",
     "bad.txt:1: node1: backward_compute_time given twice"},
    {N1 "forward_compute_time=1e308, backward_compute_time=2, activation_size=3, "
        "parameter_size=4",
     "bad.txt: ops[0].fwd_ms: 1e+308 is above the limit of 1e+09 ms"},
    {N1 "forward_compute_time=1, backward_compute_time=2, activation_size=3, "
        "parameter_size=5e18",
     "bad.txt: ops[0].param_bytes: 5e+18 is above the limit of 1e+18 bytes"},
};

static void check_message(const char *err, const char *name, const char *expect, size_t i)
{
    const char *base = strstr(err, name);
    int ok = base && !strcmp(base, expect);
    if (!ok)
        fprintf(stderr, "\n  case %zu: got '%s', want '%s'\n", i, err, expect);
    CU_ASSERT(ok);
}

static void test_pipedream_bad_inputs(void)
{
    for (size_t i = 0; i < sizeof bad_pipedream / sizeof bad_pipedream[0]; i++) {
        char err[512] = "";
        pf_graph_t *g = (pf_graph_t *)1;
        int rc = pf_import_pipedream(pf_test_write("bad.txt", bad_pipedream[i].text), 0, &g, err,
                                     sizeof err);
        CU_ASSERT_EQUAL(rc, PF_EINPUT);
        CU_ASSERT_PTR_NULL(g);
        check_message(err, "bad.txt", bad_pipedream[i].expect, i);
    }
    char err[512];
    pf_graph_t *g;
    CU_ASSERT_EQUAL(pf_import_pipedream("/nonexistent/p.txt", 0, &g, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "/nonexistent/p.txt: No such file or directory");
    CU_ASSERT_EQUAL(pf_import_pipedream(pf_test_write("ok.txt", OK1), -1, &g, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "microbatch: negative (-1)");
}

static char *write_bytes(const char *name, const char *data, size_t n)
{
    static char path[700];
    snprintf(path, sizeof path, "%s/%s", pf_test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
    return path;
}

static void test_pipedream_garbage(void)
{
    char err[512], path[600];
    pf_graph_t *g;

    /* NUL bytes */
    const char nul[] = "node1 -- X\0Y -- forward_compute_time=1\n";
    CU_ASSERT_EQUAL(pf_import_pipedream(write_bytes("nul.txt", nul, sizeof nul - 1), 0, &g, err,
                                        sizeof err),
                    PF_EINPUT);
    check_message(err, "nul.txt", "nul.txt:1: NUL byte (binary data, not a PipeDream profile)", 0);

    /* 64 KiB of binary junk (xorshift bytes): an input error, never a crash */
    size_t n = 64 * 1024;
    char *junk = malloc(2u << 20);
    CU_ASSERT_PTR_NOT_NULL_FATAL(junk);
    uint64_t x = 88172645463325252ull;
    for (int round = 0; round < 8; round++) {
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            junk[i] = (char)(x & 0xff);
            if (round & 1 && junk[i] == 0) /* odd rounds: no NUL, so the line parser runs */
                junk[i] = 'n';
        }
        int rc = pf_import_pipedream(write_bytes("junk.txt", junk, n), 0, &g, err, sizeof err);
        CU_ASSERT_EQUAL(rc, PF_EINPUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "junk.txt"));
    }

    /* one line over the 1 MiB cap */
    memset(junk, 'x', 2u << 20);
    CU_ASSERT_EQUAL(pf_import_pipedream(write_bytes("huge.txt", junk, 2u << 20), 0, &g, err,
                                        sizeof err),
                    PF_EINPUT);
    check_message(err, "huge.txt", "huge.txt:1: line longer than 1048576 bytes", 0);
    free(junk);

    /* vgg16 cut at 200 places: each prefix either imports (a subgraph of at most 41 ops) or is
     * an input error that names the file and a line */
    FILE *f = fopen(pf_test_data("pipedream/vgg16.txt", path, sizeof path), "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char *text = malloc(1 << 16);
    size_t len = fread(text, 1, 1 << 16, f);
    fclose(f);
    int ok = 0, bad = 0;
    for (size_t cut = 0; cut < len; cut += len / 200 + 1) {
        int rc = pf_import_pipedream(write_bytes("cut.txt", text, cut), 0, &g, err, sizeof err);
        if (rc == PF_OK) {
            CU_ASSERT(pf_graph_nops(g) <= 41);
            ok++;
            pf_graph_destroy(&g);
        } else {
            CU_ASSERT_EQUAL(rc, PF_EINPUT);
            CU_ASSERT_PTR_NOT_NULL(strstr(err, "cut.txt"));
            bad++;
        }
    }
    CU_ASSERT(ok > 0 && bad > 0);
    free(text);
}

/* ---- Piper ---- */

static void test_piper_files(void)
{
    /* counts, and totals from a one-off script over the JSON (sum of vanilla timePerSample,
     * parameterSize, communicationCost); downsets: Piper's own enumeration found 43, 242 and
     * 17,914 (tests/data/README.md) */
    const struct {
        const char *rel;
        int nops, nedges, microbatch;
        double time_ms, param_bytes, edge_bytes;
        long long downsets;
    } files[] = {
        {"piper/bert32a100.json", 37, 67, 1, 0.9728639999999998, 5879481600.0, 1574977536.0, 43},
        {"piper/gnmt.json", 78, 104, 1, 520.4530000000001, 1110870272.0, 1108984832.0, 17914},
        {"piper/resnet.json", 177, 193, 128, 462.38100000000003, 102228128.0, 22186557444.0, 242},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        pf_graph_t *g = import_data("piper", files[i].rel, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        CU_ASSERT_EQUAL(pf_graph_nops(g), files[i].nops);
        CU_ASSERT_EQUAL(pf_graph_nedges(g), files[i].nedges);
        CU_ASSERT_EQUAL(pf_graph_microbatch(g), files[i].microbatch);
        PF_ASSERT_CLOSE(pf_graph_total_cu_ms(g), files[i].time_ms, 1e-12);
        PF_ASSERT_CLOSE(sum_fwd(g), files[i].time_ms / 3, 1e-12); /* fwd = 1/3 */
        PF_ASSERT_CLOSE(pf_graph_total_param_bytes(g), files[i].param_bytes, 1e-15);
        PF_ASSERT_CLOSE(sum_edge_bytes(g), files[i].edge_bytes, 1e-15);
        CU_ASSERT_EQUAL(pf_downsets_count(g, 1000000), files[i].downsets);
        pf_graph_destroy(&g);
    }

    pf_graph_t *g = import_data("piper", "piper/bert32a100.json", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    /* nodes[3]: ParallelTransformerLayer, vanilla timePerSample 0.030492, parameterSize
     * 176997120, memoryUsageA 606478336; the first of 32 such layers */
    const pf_op_t *o = op_by_id(g, 3);
    CU_ASSERT_STRING_EQUAL(o->name, "ParallelTransformerLayer.0");
    CU_ASSERT_STRING_EQUAL(o->type, "transformer_layer");
    PF_ASSERT_CLOSE(o->fwd_ms, 0.030492 / 3, 1e-15);
    PF_ASSERT_CLOSE(o->bwd_ms, 0.030492 * 2 / 3, 1e-15);
    CU_ASSERT(o->param_bytes == 176997120.0 && o->mem_fwd_bytes == 606478336.0);
    CU_ASSERT(o->work.bytes_read == 176997120.0 && o->work.bytes_written == 606478336.0);
    CU_ASSERT(o->work.fwd_flops == 0 && o->work.bwd_flops == 0 && o->work.gemm_m == 0);
    CU_ASSERT_STRING_EQUAL(op_by_id(g, 36)->name, "Pooler"); /* unique name: no suffix */
    CU_ASSERT_STRING_EQUAL(op_by_id(g, 1)->type, "embedding");
    CU_ASSERT_STRING_EQUAL(op_by_id(g, 4)->name, "tensor.2");
    int layers = 0;
    for (int v = 0; v < pf_graph_nops(g); v++)
        layers += !strncmp(pf_graph_op(g, v)->name, "ParallelTransformerLayer.", 25);
    CU_ASSERT_EQUAL(layers, 32);
    CU_ASSERT_STRING_EQUAL(pf_graph_op(g, 35)->name, "ParallelTransformerLayer.31");
    pf_graph_destroy(&g);
}

/* Piper's resnet.json is PipeDream's resnet50 profile: the two imports must be the same graph
 * up to the fwd/bwd split and the op ids (Piper renumbers, but keeps "nodeN" as the name). */
static void test_piper_matches_pipedream(void)
{
    pf_graph_t *pi = import_data("piper", "piper/resnet.json", 0);
    pf_graph_t *pd = import_data("pipedream", "pipedream/resnet50.txt", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pi);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pd);
    CU_ASSERT_EQUAL_FATAL(pf_graph_nops(pi), pf_graph_nops(pd));
    CU_ASSERT_EQUAL_FATAL(pf_graph_nedges(pi), pf_graph_nedges(pd));
    int n = pf_graph_nops(pi);
    int64_t *pd_id = malloc((size_t)n * sizeof *pd_id); /* piper op index -> pipedream id */
    CU_ASSERT_PTR_NOT_NULL_FATAL(pd_id);
    for (int v = 0; v < n; v++) {
        const pf_op_t *a = pf_graph_op(pi, v);
        CU_ASSERT_EQUAL(a->type[0], '\0');
        pd_id[v] = strtoll(a->name + 4, NULL, 10);
        const pf_op_t *b = op_by_id(pd, pd_id[v]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        PF_ASSERT_CLOSE(a->fwd_ms + a->bwd_ms, b->fwd_ms + b->bwd_ms, 1e-12);
        CU_ASSERT(a->param_bytes == b->param_bytes);
        CU_ASSERT(a->mem_fwd_bytes == b->mem_fwd_bytes && a->mem_bwd_bytes == b->mem_bwd_bytes);
    }
    for (int e = 0; e < pf_graph_nedges(pi); e++) {
        const pf_edge_t *ed = pf_graph_edge(pi, e);
        CU_ASSERT(edge_bytes(pd, pd_id[ed->src], pd_id[ed->dst]) == ed->bytes);
    }
    free(pd_id);
    pf_graph_destroy(&pi);
    pf_graph_destroy(&pd);
}

#define PNODE(id, extra)                                                                           \
    "{\"id\": " #id ", \"name\": \"n\", \"TMPCs\": {\"1\": [{\"id\": \"vanilla\", "                \
    "\"timePerSample\": 3, \"parameterSize\": 4, \"memoryUsageA\": 5" extra "}]}}"

static const struct {
    const char *text, *expect;
} bad_piper[] = {
    {"{\"nodes\": [", "bad.json:1:"},
    {"[1]", "bad.json: top level: not an object"},
    {"{\"edges\": []}", "bad.json: piper.nodes: missing"},
    {"{\"nodes\": []}", "bad.json: piper.edges: missing"},
    {"{\"nodes\": [], \"edges\": []}", "bad.json: piper.nodes: empty"},
    {"{\"nodes\": [7], \"edges\": []}", "bad.json: nodes[0]: not an object"},
    {"{\"nodes\": [{\"name\": \"a\"}], \"edges\": []}", "bad.json: nodes[0].id: missing"},
    {"{\"nodes\": [" PNODE(0, "") ", {\"id\": 1, \"TMPCs\": {}}], \"edges\": []}",
     "bad.json: nodes[1].TMPCs: no \"1\" vanilla configuration"},
    {"{\"nodes\": [{\"id\": 0}], \"edges\": []}", "bad.json: nodes[0].TMPCs: missing"},
    {"{\"nodes\": [{\"id\": 0, \"TMPCs\": {\"1\": {}}}], \"edges\": []}",
     "bad.json: nodes[0].TMPCs[\"1\"]: not an array"},
    {"{\"nodes\": [{\"id\": 0, \"TMPCs\": {\"1\": [{\"id\": \"activation recomp\"}]}}], "
     "\"edges\": []}",
     "bad.json: nodes[0].TMPCs[\"1\"]: no \"vanilla\" configuration"},
    {"{\"nodes\": [{\"id\": 0, \"TMPCs\": {\"1\": [{\"id\": \"x\"}, {\"id\": \"vanilla\"}]}}], "
     "\"edges\": []}",
     "bad.json: nodes[0].TMPCs[\"1\"][1].timePerSample: missing"},
    {"{\"nodes\": [{\"id\": 0, \"TMPCs\": {\"1\": [{\"id\": \"vanilla\", \"timePerSample\": 1, "
     "\"parameterSize\": 0, \"memoryUsageA\": -1}]}}], \"edges\": []}",
     "bad.json: nodes[0].TMPCs[\"1\"][0].memoryUsageA: negative (-1)"},
    {"{\"nodes\": [{\"id\": 0, \"TMPCs\": {\"1\": [{\"id\": \"vanilla\", \"timePerSample\": "
     "\"1\", \"parameterSize\": 0, \"memoryUsageA\": 1}]}}], \"edges\": []}",
     "bad.json: nodes[0].TMPCs[\"1\"][0].timePerSample: not a number"},
    {"{\"nodes\": [" PNODE(0, "") ", " PNODE(0, "") "], \"edges\": []}",
     "bad.json: nodes[1].id: duplicate id 0 (also nodes[0])"},
    {"{\"nodes\": [" PNODE(0, "") "], \"edges\": [{\"sourceId\": 0, \"destId\": 7, "
     "\"communicationCost\": 1}]}",
     "bad.json: edges[0].destId: 7 is not a node id"},
    {"{\"nodes\": [" PNODE(0, "") "], \"edges\": [{\"sourceId\": 3, \"destId\": 0, "
     "\"communicationCost\": 1}]}",
     "bad.json: edges[0].sourceId: 3 is not a node id"},
    {"{\"nodes\": [" PNODE(0, "") "], \"edges\": [{\"sourceId\": 0, \"destId\": 0, "
     "\"communicationCost\": 1}]}",
     "bad.json: edges[0]: self-loop on node 0"},
    {"{\"nodes\": [" PNODE(0, "") ", " PNODE(1, "") "], \"edges\": [{\"sourceId\": 0, "
     "\"destId\": 1}]}",
     "bad.json: edges[0].communicationCost: missing"},
    {"{\"nodes\": [" PNODE(0, "") ", " PNODE(1, "") "], \"edges\": [{\"sourceId\": 0, "
     "\"destId\": 1, \"communicationCost\": 1}, {\"sourceId\": 0, \"destId\": 1, "
     "\"communicationCost\": 1}]}",
     "bad.json: edges[1]: repeats edges[0]"},
    {"{\"nodes\": [" PNODE(0, "") ", " PNODE(1, "") "], \"edges\": [{\"sourceId\": 0, "
     "\"destId\": 1, \"communicationCost\": 1}, {\"sourceId\": 1, \"destId\": 0, "
     "\"communicationCost\": 1}]}",
     "bad.json: graph has a cycle: op 0 (n.0) -> op 1 (n.1) -> op 0"},
    /* 3e9 ms per sample: fwd = 1e9 (at the limit), bwd = 2e9 (above it) */
    {"{\"nodes\": [{\"id\": 0, \"name\": \"n\", \"TMPCs\": {\"1\": [{\"id\": \"vanilla\", "
     "\"timePerSample\": 3e9, \"parameterSize\": 4, \"memoryUsageA\": 5}]}}], \"edges\": []}",
     "bad.json: ops[0].bwd_ms: 2e+09 is above the limit of 1e+09 ms"},
};

static void test_piper_bad_inputs(void)
{
    for (size_t i = 0; i < sizeof bad_piper / sizeof bad_piper[0]; i++) {
        char err[512] = "";
        pf_graph_t *g = (pf_graph_t *)1;
        int rc = pf_import_piper(pf_test_write("bad.json", bad_piper[i].text), 0, &g, err,
                                 sizeof err);
        CU_ASSERT_EQUAL(rc, PF_EINPUT);
        CU_ASSERT_PTR_NULL(g);
        const char *want = bad_piper[i].expect;
        const char *base = strstr(err, "bad.json");
        /* syntax errors: only the "file:line:" prefix is ours, the rest is jansson's */
        int ok = base && (want[strlen(want) - 1] == ':' ? !strncmp(base, want, strlen(want))
                                                         : !strcmp(base, want));
        if (!ok)
            fprintf(stderr, "\n  case %zu: got '%s', want '%s'\n", i, err, want);
        CU_ASSERT(ok);
    }
    /* a PipeDream profile handed to the Piper reader (and back) is an input error */
    char err[512], path[600];
    pf_graph_t *g;
    CU_ASSERT_EQUAL(pf_import_piper(pf_test_data("pipedream/vgg16.txt", path, sizeof path), 0, &g,
                                    err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_EQUAL(pf_import_pipedream(pf_test_data("piper/gnmt.json", path, sizeof path), 0,
                                        &g, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "gnmt.json:1: expected a node"));
}

/* Names that come from outside JSON or are shortened stay valid UTF-8: PipeDream descriptions
 * are raw bytes (non-printable ones become '?'); Piper names are cut to 200 bytes and types to
 * 64, never inside a character. */
static void test_names_stay_utf8(void)
{
    char err[512];
    pf_graph_t *g = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_import_pipedream(pf_test_write("u.txt", "node1 -- \xff\xc3(x) -- "
                                                            "forward_compute_time=1, "
                                                            "backward_compute_time=2, "
                                                            "activation_size=3, "
                                                            "parameter_size=4\n"),
                                              0, &g, err, sizeof err),
                          PF_OK);
    CU_ASSERT_STRING_EQUAL(pf_graph_op(g, 0)->name, "node1.??");
    pf_graph_destroy(&g);

    char a199[200], text[1024], a63[64];
    memset(a199, 'a', 199);
    a199[199] = '\0';
    memcpy(a63, a199, 63);
    a63[63] = '\0';
#define PIPER_NODE(id, name)                                                                       \
    "{\"id\": " #id ", \"name\": \"" name "\", \"TMPCs\": {\"1\": [{\"id\": \"vanilla\", "       \
    "\"timePerSample\": 3, \"parameterSize\": 4, \"memoryUsageA\": 5}]}}"
    snprintf(text, sizeof text,
             "{\"nodes\": [" PIPER_NODE(0, "%s\xc3\xa9z") ", " PIPER_NODE(1, "%s\xc3\xa9") "], "
             "\"edges\": []}",
             a199, a63);
    CU_ASSERT_EQUAL_FATAL(pf_import_piper(pf_test_write("u.json", text), 0, &g, err, sizeof err),
                          PF_OK);
    /* 199 + 2 bytes of U+00E9 > 200: the e-acute goes whole */
    CU_ASSERT_STRING_EQUAL(pf_graph_op(g, 0)->name, a199);
    /* the type: 63 + 2 > 64 bytes, so 63 a's; the name (65 bytes) is whole */
    CU_ASSERT_STRING_EQUAL(pf_graph_op(g, 1)->type, a63);
    CU_ASSERT_EQUAL(strlen(pf_graph_op(g, 1)->name), 65);
    pf_graph_destroy(&g);
}

/* ---- round trip and helpers ---- */

static void assert_same_graph(const pf_graph_t *a, const pf_graph_t *b)
{
    CU_ASSERT_STRING_EQUAL(pf_graph_name(a), pf_graph_name(b));
    CU_ASSERT_EQUAL(pf_graph_microbatch(a), pf_graph_microbatch(b));
    CU_ASSERT_EQUAL_FATAL(pf_graph_nops(a), pf_graph_nops(b));
    CU_ASSERT_EQUAL_FATAL(pf_graph_nedges(a), pf_graph_nedges(b));
    for (int v = 0; v < pf_graph_nops(a); v++) {
        const pf_op_t *x = pf_graph_op(a, v), *y = pf_graph_op(b, v);
        CU_ASSERT(x->id == y->id && !strcmp(x->name, y->name) && !strcmp(x->type, y->type));
        CU_ASSERT(x->fwd_ms == y->fwd_ms && x->bwd_ms == y->bwd_ms);
        CU_ASSERT(x->param_bytes == y->param_bytes && x->mem_fwd_bytes == y->mem_fwd_bytes &&
                  x->mem_bwd_bytes == y->mem_bwd_bytes);
    }
    for (int e = 0; e < pf_graph_nedges(a); e++) {
        const pf_edge_t *x = pf_graph_edge(a, e), *y = pf_graph_edge(b, e);
        CU_ASSERT(x->src == y->src && x->dst == y->dst && x->bytes == y->bytes);
    }
}

static void test_round_trip(void)
{
    const char *cases[][2] = {{"pipedream", "pipedream/vgg16.txt"},
                              {"pipedream", "pipedream/gnmt_large.txt"},
                              {"pipedream", "pipedream/nasnetalarge.txt"},
                              {"piper", "piper/bert32a100.json"},
                              {"piper", "piper/gnmt.json"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512], path[700];
        pf_graph_t *g = import_data(cases[i][0], cases[i][1], 0), *h = NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        snprintf(path, sizeof path, "%s/rt.json", pf_test_tmpdir());
        CU_ASSERT_EQUAL_FATAL(pf_graph_save(g, path, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL_FATAL(pf_graph_load(path, &h, err, sizeof err), PF_OK);
        assert_same_graph(g, h);
        pf_graph_destroy(&g);
        pf_graph_destroy(&h);
    }
}

static void test_known_microbatch_and_types(void)
{
    CU_ASSERT_EQUAL(pf_import_known_microbatch("pipedream", "vgg16", 41), 128);
    CU_ASSERT_EQUAL(pf_import_known_microbatch("pipedream", "vgg16", 40), 0); /* not the file */
    CU_ASSERT_EQUAL(pf_import_known_microbatch("piper", "vgg16", 41), 0);
    CU_ASSERT_EQUAL(pf_import_known_microbatch("piper", "resnet", 177), 128);
    char buf[32];
    CU_ASSERT_STRING_EQUAL(pf_import_type_of("Conv2d", buf, sizeof buf), "conv");
    CU_ASSERT_STRING_EQUAL(pf_import_type_of("Input12", buf, sizeof buf), "input");
    CU_ASSERT_STRING_EQUAL(pf_import_type_of("InputX", buf, sizeof buf), "inputx");
    CU_ASSERT_STRING_EQUAL(pf_import_type_of("BatchNorm2d", buf, sizeof buf), "batchnorm");
    CU_ASSERT_STRING_EQUAL(pf_import_type_of("MyBlock", buf, sizeof buf), "myblock");
    CU_ASSERT_STRING_EQUAL(pf_import_type_of("MyBlock", NULL, 0), "");
}

static void test_cli(void)
{
    char cmd[2048], out[4096], data[600], path[700];
    snprintf(path, sizeof path, "%s/cli_vgg16.json", pf_test_tmpdir());
    pf_test_data("pipedream/vgg16.txt", data, sizeof data);
    snprintf(cmd, sizeof cmd, "%s import pipedream %s -o %s && %s check %s", pf_test_bin(), data,
             path, pf_test_bin(), path);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "graph vgg16: 41 ops, 41 edges, micro-batch 128"));
    /* forward 251.874 + backward 438.633 = 690.507 */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "690.507 ms per micro-batch (forward 251.874 + backward "
                                       "438.633)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "downsets:     42"));

    snprintf(cmd, sizeof cmd, "%s import piper %s --microbatch 16 | %s check -", pf_test_bin(),
             pf_test_data("piper/resnet.json", data, sizeof data), pf_test_bin());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "graph resnet: 177 ops, 193 edges, micro-batch 16"));

    /* the widest DAG: check caps its downset count instead of hanging */
    snprintf(cmd, sizeof cmd, "%s import pipedream %s | %s check -", pf_test_bin(),
             pf_test_data("pipedream/nasnetalarge.txt", data, sizeof data), pf_test_bin());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "1251 ops, 1468 edges"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "downsets:     more than 1000000"));

    snprintf(cmd, sizeof cmd, "%s import caffe x.txt", pf_test_bin());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown format 'caffe'"));
    snprintf(cmd, sizeof cmd, "%s import pipedream %s --microbatch 0", pf_test_bin(), data);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "%s import pipedream %s", pf_test_bin(),
             pf_test_write("cli_bad.txt", OK1 "\tnode1 -- node4\n"));
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "cli_bad.txt:2: edge node1 -- node4: node4 is not defined"));
    snprintf(cmd, sizeof cmd, "%s import --help", pf_test_bin());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: planfarm import"));
}

void pf_suite_import(void)
{
    CU_pSuite s = CU_add_suite("import", NULL, NULL);
    CU_add_test(s, "pipedream: every file matches a naive line count and sums",
                test_pipedream_all_files);
    CU_add_test(s, "pipedream: vgg16, resnet50 by hand; micro-batches",
                test_pipedream_hard_numbers);
    CU_add_test(s, "pipedream: multi-output nodes (gnmt)", test_pipedream_multi_output);
    CU_add_test(s, "pipedream: lines in any order, long lines", test_pipedream_lines_in_any_order);
    CU_add_test(s, "pipedream: bad inputs and their messages", test_pipedream_bad_inputs);
    CU_add_test(s, "pipedream: binary junk, huge lines, truncated files", test_pipedream_garbage);
    CU_add_test(s, "piper: counts, totals, Piper's downset counts", test_piper_files);
    CU_add_test(s, "piper resnet = pipedream resnet50", test_piper_matches_pipedream);
    CU_add_test(s, "piper: bad inputs and their messages", test_piper_bad_inputs);
    CU_add_test(s, "names stay valid UTF-8 (raw bytes, shortened names)", test_names_stay_utf8);
    CU_add_test(s, "import -> save -> load is the same graph", test_round_trip);
    CU_add_test(s, "known micro-batches, type table", test_known_microbatch_and_types);
    CU_add_test(s, "planfarm import | check", test_cli);
}
