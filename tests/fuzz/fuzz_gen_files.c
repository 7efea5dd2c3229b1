/* Structure-aware graph and cluster files: the fuzzer's bytes are read as a list of choices that
 * build a well-formed JSON graph file and a JSON cluster file with hostile values in them (NaN,
 * Infinity, 1e308, 1e309, negative and huge numbers, duplicate and dangling ids, self loops and
 * cycles, duplicate keys, wrong matrix sizes, long and multi-byte names, escaped NUL, huge counts
 * and shapes), so that the mutations land past the JSON syntax, in the readers' value checks.
 * Each file goes through the real readers (pf_graph_load_buffer, pf_cluster_load_buffer), then
 * what `planfarm check` computes on a file that loads, and, when both load and are small, a
 * partition (pf_partition_run, one thread). PF_FUZZ_PRINT=1 prints the two files (to turn a
 * crash into a reproducer: the files `planfarm check` / `partition` read). */
#include "planner/core/util.h"
#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/ir/plan.h"
#include "planner/partition/downsets.h"
#include "planner/partition/partition.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t n, at;
} src_t;

/* The next choice in [0, mod); 0 once the bytes run out (the plainest file: 6 ops in a chain,
 * 4 devices, tame values). */
static unsigned pick(src_t *s, unsigned mod)
{
    if (mod <= 1 || s->at >= s->n)
        return 0;
    unsigned v = s->p[s->at++];
    if (mod > 256 && s->at < s->n)
        v = v << 8 | s->p[s->at++];
    return v % mod;
}

typedef struct {
    char *buf;
    size_t len, cap;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    if (o->len + (size_t)k + 1 > o->cap) {
        size_t cap = (o->cap ? o->cap * 2 : 4096) + (size_t)k;
        char *nb = realloc(o->buf, cap);
        if (!nb)
            abort();
        o->buf = nb;
        o->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    o->len += (size_t)k;
}

/* Numbers a reader must refuse or survive; the first few are the tame ones. */
static const char *const hostile[] = {
    "0", "1", "2", "0.5", "3", "-1", "-0", "-0.0", "1e308", "-1e308", "1e309", "-1e309",
    "1.7976931348623157e308", "4.9e-324", "1e-320", "NaN", "-NaN", "Infinity", "-Infinity", "nan",
    "2147483647", "2147483648", "-2147483649", "4294967296", "9007199254740993",
    "9223372036854775807", "9223372036854775808", "-9223372036854775809",
    "123456789012345678901234567890", "1e20", "1.5", "1E2", "0e0", "1e-7", "\"3\"", "null", "true",
    "[]", "{}", "0.1e1",
};
#define NHOSTILE (sizeof hostile / sizeof hostile[0])

/* A value: mostly the tame one given (so that a file gets past its first number), else one of
 * hostile[]. */
static void num(out_t *o, src_t *s, double tame)
{
    if (pick(s, 12) == 1)
        put(o, "%s", hostile[pick(s, NHOSTILE)]);
    else
        put(o, "%.17g", tame);
}

static void name(out_t *o, src_t *s, const char *tame, int i)
{
    switch (pick(s, 32)) {
    case 1: put(o, "\"\""); break;
    case 2: put(o, "\"%s\\u0000x\"", tame); break;
    case 3: /* long, multi-byte: cut where a buffer ends, it splits a character */
        put(o, "\"");
        for (int k = 0, n = 20 + (int)pick(s, 200); k < n; k++)
            put(o, "\xc3\xa9\xe2\x82\xac");
        put(o, "\"");
        break;
    case 4: put(o, "\"%s/%s\\\"%%s%%n\\n\"", tame, tame); break;
    case 5: put(o, "%s", hostile[pick(s, NHOSTILE)]); break;
    default: put(o, "\"%s%d\"", tame, i); break;
    }
}

/* An id: i, a duplicate, a dangling or a hostile one. */
static void id(out_t *o, src_t *s, int i, int n)
{
    switch (pick(s, 24)) {
    case 1: put(o, "%d", i > 0 ? i - 1 : 0); break;
    case 2: put(o, "%d", n + (int)pick(s, 5)); break;
    case 3: put(o, "%s", hostile[pick(s, NHOSTILE)]); break;
    default: put(o, "%d", i); break;
    }
}

static void shape(out_t *o, src_t *s, const char *key)
{
    unsigned c = pick(s, 6);
    if (c == 0)
        return;
    put(o, ", \"%s\": [", key);
    for (int k = 0, n = (int)pick(s, c == 5 ? 12 : 4); k < n; k++) {
        put(o, "%s", k ? ", " : "");
        num(o, s, 4 + k * 60);
    }
    put(o, "]");
}

static const char *const op_keys[] = {"fwd_ms", "bwd_ms", "param_bytes", "mem_fwd_bytes",
                                      "mem_bwd_bytes"};

static void graph_ops(out_t *o, src_t *s, int nops)
{
    static const char *const types[] = {"linear", "embedding", "layernorm", "attention", "", "?",
                                        "conv2d", "moe"};
    put(o, "  \"ops\": [\n");
    for (int i = 0; i < nops; i++) {
        put(o, "    {\"id\": ");
        id(o, s, i, nops);
        put(o, ", \"name\": ");
        name(o, s, "op", i);
        put(o, ", \"type\": \"%s\"", types[pick(s, 8)]);
        for (int k = 0; k < 5; k++) {
            if (pick(s, 48) == 1) /* left out: required ones must be named */
                continue;
            put(o, ", \"%s\": ", op_keys[k]);
            num(o, s, k < 2 ? 0.5 + i % 3 : 1e6 * (1 + i % 4));
            if (pick(s, 96) == 1) { /* the key twice */
                put(o, ", \"%s\": ", op_keys[k]);
                num(o, s, 1);
            }
        }
        shape(o, s, "weight");
        shape(o, s, "input");
        shape(o, s, "output");
        if (pick(s, 16) == 1)
            put(o, ", \"extra\": {\"nested\": [1, 2, {\"x\": null}]}");
        put(o, "}%s\n", i + 1 < nops ? "," : "");
    }
    put(o, "  ],\n");
}

/* An end of an edge: a forward one (a DAG), backwards (a cycle), itself, dangling, hostile. */
static void endpoint(out_t *o, src_t *s, int from, int nops, int forward)
{
    unsigned c = pick(s, 24);
    int v = forward ? from + 1 + (int)pick(s, 3) : from;
    if (v >= nops)
        v = nops - 1;
    switch (c) {
    case 1: put(o, "%d", from > 0 ? from - 1 - (int)pick(s, (unsigned)from) : 0); break;
    case 2: put(o, "%d", from); break;
    case 3: put(o, "%d", nops + (int)pick(s, 100)); break;
    case 4: put(o, "%s", hostile[pick(s, NHOSTILE)]); break;
    default: put(o, "%d", v); break;
    }
}

static void graph_edges(out_t *o, src_t *s, int nops)
{
    put(o, "  \"edges\": [\n");
    int nedges = nops > 1 ? nops - 1 + (int)pick(s, (unsigned)nops + 1) : (int)pick(s, 2);
    for (int e = 0; e < nedges; e++) {
        int from = e < nops - 1 ? e : (int)pick(s, (unsigned)nops);
        put(o, "    {\"src\": ");
        endpoint(o, s, from, nops, 0);
        put(o, ", \"dst\": ");
        endpoint(o, s, from, nops, 1);
        if (pick(s, 16) != 1) {
            put(o, ", \"bytes\": ");
            num(o, s, 1e5 * (1 + e % 5));
        }
        put(o, "}%s\n", e + 1 < nedges ? "," : "");
    }
    put(o, "  ]\n");
}

static int gen_graph(out_t *o, src_t *s)
{
    /* mostly small; sometimes a few hundred ops (huge counts are the numbers' job) */
    int nops = pick(s, 8) == 7 ? 1 + (int)pick(s, 400) : ((int)pick(s, 13) + 6) % 13;
    put(o, "{\n  \"name\": ");
    name(o, s, "g", 0);
    put(o, ",\n  \"microbatch\": ");
    num(o, s, 4);
    put(o, ",\n");
    if (pick(s, 24) == 1)
        put(o, "  \"ops\": null,\n");
    graph_ops(o, s, nops);
    graph_edges(o, s, nops);
    put(o, "}\n");
    return nops;
}

/* n x n, or a wrong size, a ragged row, a non-zero diagonal, hostile entries. */
static void matrix(out_t *o, src_t *s, const char *key, int n, double tame)
{
    unsigned shape_c = pick(s, 12);
    int rows = shape_c == 1 ? n + 1 : shape_c == 2 && n > 0 ? n - 1 : n;
    put(o, ",\n  \"%s\": [\n", key);
    for (int a = 0; a < rows; a++) {
        int cols = pick(s, 24) == 1 ? (int)pick(s, (unsigned)n + 2) : n;
        put(o, "    [");
        for (int b = 0; b < cols; b++) {
            put(o, "%s", b ? ", " : "");
            if (a == b && pick(s, 8) != 1)
                put(o, "0");
            else
                num(o, s, a / 2 == b / 2 ? tame * 10 : tame);
        }
        put(o, "]%s\n", a + 1 < rows ? "," : "");
    }
    put(o, "  ]");
}

static int gen_cluster(out_t *o, src_t *s)
{
    int n = pick(s, 10) == 9 ? (int)pick(s, 130) : ((int)pick(s, 9) + 4) % 9;
    put(o, "{\n  \"name\": ");
    name(o, s, "c", 0);
    put(o, ",\n  \"devices\": [\n");
    for (int i = 0; i < n; i++) {
        put(o, "    {\"id\": ");
        id(o, s, i, n);
        put(o, ", \"host\": ");
        if (pick(s, 6) == 1)
            put(o, "%s", hostile[pick(s, NHOSTILE)]);
        else
            put(o, "%d", i / 2);
        put(o, ", \"name\": ");
        name(o, s, "gpu", i);
        put(o, ", \"mem_bytes\": ");
        num(o, s, 16e9);
        put(o, ", \"tflops\": ");
        num(o, s, 100);
        put(o, "}%s\n", i + 1 < n ? "," : "");
    }
    put(o, "  ]");
    if (pick(s, 16) != 1)
        matrix(o, s, "bandwidth_gbps", n, 10);
    if (pick(s, 3) == 1)
        matrix(o, s, "latency_us", n, 5);
    put(o, "\n}\n");
    return n;
}

/* What `planfarm check` computes on a file that loads. */
static void check_graph(const pf_graph_t *g)
{
    volatile double sink = pf_graph_total_cu_ms(g) + pf_graph_total_param_bytes(g) +
                           pf_graph_longest_path_ms(g);
    for (int v = 0; v < pf_graph_nops(g); v++)
        sink += pf_graph_cu_ms(g, v);
    (void)sink;
    pf_downsets_count(g, 2000);
}

static void check_cluster(const pf_cluster_t *c)
{
    volatile double sink = pf_cluster_min_mem_bytes(c) + pf_cluster_nhosts(c);
    if (pf_cluster_ndevices(c) > 1)
        sink += pf_cluster_bw_min(c) + pf_cluster_bw_median(c) + pf_cluster_bw_max(c) +
                pf_cluster_is_symmetric(c) + pf_cluster_xfer_ms(c, 0, 1, 1e6);
    (void)sink;
}

static void partition(const pf_graph_t *g, const pf_cluster_t *c, src_t *s, int print)
{
    int n = pf_cluster_ndevices(c);
    if (pf_graph_nops(g) > 16 || n < 1 || n > 8)
        return;
    pf_partition_opts_t po;
    pf_partition_opts_init(&po);
    po.stages = 1 + (int)pick(s, (unsigned)(n < pf_graph_nops(g) ? n : pf_graph_nops(g)));
    po.threads = 1;
    po.max_downsets = 2000;
    char err[512];
    pf_plan_t *p = NULL;
    int rc = pf_partition_run(g, c, &po, &p, err, sizeof err);
    if (rc == PF_OK && !p)
        abort(); /* PF_OK means a plan */
    if (print)
        printf("---- partition into %d stages: %s\n", po.stages, rc == PF_OK ? "a plan" : err);
    pf_plan_destroy(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    src_t s = {.p = data, .n = size};
    out_t gj = {0}, cj = {0};
    gen_graph(&gj, &s);
    gen_cluster(&cj, &s);
    if (getenv("PF_FUZZ_PRINT"))
        printf("---- graph.json\n%s---- cluster.json\n%s", gj.buf, cj.buf);
    char err[512] = "";
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    int print = getenv("PF_FUZZ_PRINT") != NULL;
    if (pf_graph_load_buffer(gj.buf, gj.len, "graph.json", &g, err, sizeof err) == PF_OK)
        check_graph(g);
    else if (!err[0])
        abort(); /* a refused file says why */
    if (print)
        printf("---- graph: %s\n", g ? "loads" : err);
    err[0] = 0;
    if (pf_cluster_load_buffer(cj.buf, cj.len, "cluster.json", &c, err, sizeof err) == PF_OK)
        check_cluster(c);
    else if (!err[0])
        abort();
    if (print)
        printf("---- cluster: %s\n", c ? "loads" : err);
    if (g && c)
        partition(g, c, &s, print);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
    free(gj.buf);
    free(cj.buf);
    return 0;
}
