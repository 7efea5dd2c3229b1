/* seqpar: sequence parallelism's activations against Korthikanti et al. 2022's formula, and
 * its split of the replicated ops' compute. */
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/topology.h"
#include "planner/tp/seqpar.h"
#include "planner/tp/tp_setting.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static double layer_bytes(const pf_graph_t *g, const char *prefix)
{
    double sum = 0;
    for (int v = 0; v < pf_graph_nops(g); v++)
        if (!strncmp(pf_graph_op(g, v)->name, prefix, strlen(prefix)))
            sum += pf_graph_op(g, v)->mem_fwd_bytes;
    return sum;
}

/* A 2-layer GPT (vocab 1024) of hidden h, a heads, sequence seq, micro-batch b, and its
 * per-device graphs at tensor-parallel degree T with and without sequence parallelism: on one
 * 4-GPU host of 100 GB/s for T <= 4, else on one DGX A100. 0 or -1. */
typedef struct {
    pf_graph_t *g;
    pf_cluster_t *c;
    pf_tp_setting_t *off, *on;
} pair_t;

static int pair_open(pair_t *x, int h, int a, int seq, int b, int T)
{
    char err[256];
    memset(x, 0, sizeof *x);
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 2, mo.hidden = h, mo.heads = a, mo.seq = seq, mo.microbatch = b;
    mo.vocab = 1024;
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, T <= 4 ? PF_TOPOLOGY_HIER : PF_TOPOLOGY_DGX_A100);
    to.machines = 1;
    if (T <= 4)
        to.gpus_per_machine = 4, to.intra_gbps = 100, to.inter_gbps = 12.5;
    if (pf_model_build(&mo, &x->g, err, sizeof err) != PF_OK ||
        pf_topology_build(&to, &x->c, err, sizeof err) != PF_OK)
        return -1;
    pf_tp_setting_opts_t so;
    pf_tp_setting_opts_init(&so);
    so.tp = T;
    x->off = pf_tp_setting_new(x->g, x->c, &so, err, sizeof err);
    so.train.sequence_parallel = 1;
    x->on = pf_tp_setting_new(x->g, x->c, &so, err, sizeof err);
    return x->off && x->on ? 0 : -1;
}

static void pair_close(pair_t *x)
{
    pf_tp_setting_destroy(&x->off);
    pf_tp_setting_destroy(&x->on);
    pf_cluster_destroy(&x->c);
    pf_graph_destroy(&x->g);
}

/* GPT, h = 1024, 16 heads, s = 512, b = 8, bf16, T = 2 on one 4-GPU host. Korthikanti et al.:
 * a layer stores s b h (10 + 24/t + 5 a s/(h t)) = 42 s b h under tensor parallelism and s b h
 * (34/t + 5 a s/(h t)) = 37 s b h with sequence parallelism as well. TAP's per-device graph of
 * this layer stores the 42 s b h (in units of s b h, per op at t 1: ln1 2, attn.q 2, scores 4,
 * softmax 16, attention dropout 24, context 2, attn.out 2, its dropout 1, ln2 2, fc1 2, gelu 8,
 * fc2 8, mlp dropout 1; TAP halves the ops that read a split tensor); the ops it left whole
 * (ln1, attn.q's and fc1's whole inputs, the two dropout masks, ln2: 10) halve under sequence
 * parallelism: 37 s b h, Korthikanti's figure. (TAP once took the first bytes of a row-parallel
 * linear's stored input for its whole output: 38 s b h here, and 43% over at micro-batch 14.)
 * Every op TAP split keeps its bytes. */
static void test_korthikanti(void)
{
    pair_t x;
    CU_ASSERT_EQUAL_FATAL(pair_open(&x, 1024, 16, 512, 8, 2), 0);
    const pf_graph_t *g = x.g, *a = pf_tp_setting_graph(x.off), *b = pf_tp_setting_graph(x.on);
    double sbh = 512.0 * 8 * 1024;
    char layer[32];
    snprintf(layer, sizeof layer, "%s", pf_graph_op(g, pf_graph_nops(g) / 2)->name);
    char *dot = strchr(layer, '.');
    CU_ASSERT_PTR_NOT_NULL_FATAL(dot); /* "layers.N.": one layer's ops by name */
    dot = strchr(dot + 1, '.');
    CU_ASSERT_PTR_NOT_NULL_FATAL(dot);
    dot[1] = '\0';
    PF_ASSERT_CLOSE(layer_bytes(a, layer), 42 * sbh, 1e-9);
    double korthikanti = sbh * (34.0 / 2 + 5.0 * 16 * 512 / (1024 * 2)); /* 37 s b h */
    PF_ASSERT_CLOSE(layer_bytes(b, layer), korthikanti, 1e-9);
    int halved = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        double x = pf_graph_op(a, v)->mem_fwd_bytes, y = pf_graph_op(b, v)->mem_fwd_bytes;
        int whole = x >= pf_graph_op(g, v)->mem_fwd_bytes;
        CU_ASSERT(whole ? y == x / 2 : y == x);
        halved += whole && x > 0;
    }
    CU_ASSERT(halved > 0);
    pair_close(&x);
}

/* The same GPT at T = 2: the ops TAP left whole (layer norms, dropouts, residual adds: split 0
 * in its result, no GEMM) compute half their forward and backward under sequence parallelism, their
 * collectives (the reduce-scatters and all-gathers charged to them) keep their time; the ops TAP
 * split keep theirs. Korthikanti et al. §4.2.2: those ops are independent along the sequence. */
static void test_compute_split(void)
{
    pair_t x;
    CU_ASSERT_EQUAL_FATAL(pair_open(&x, 1024, 16, 512, 8, 2), 0);
    const pf_graph_t *g = x.g, *a = pf_tp_setting_graph(x.off), *b = pf_tp_setting_graph(x.on);
    const pf_tap_result_t *tap = pf_tp_setting_tap(x.on);
    char err[256];
    int halved = 0, kept = 0, with_comm = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const pf_op_t *x = pf_graph_op(a, v), *y = pf_graph_op(b, v);
        double f = x->fwd_ms - x->comm_fwd_ms, bw = x->bwd_ms - x->comm_bwd_ms;
        int whole = !tap->ops[v].split && tap->ops[v].weight.kind != PF_SHARDING_S &&
                    pf_graph_op(g, v)->work.gemm_m <= 0;
        PF_ASSERT_CLOSE(y->fwd_ms - y->comm_fwd_ms, whole ? f / 2 : f, 1e-12);
        PF_ASSERT_CLOSE(y->bwd_ms - y->comm_bwd_ms, whole ? bw / 2 : bw, 1e-12);
        CU_ASSERT_EQUAL(y->comm_fwd_ms, x->comm_fwd_ms);
        CU_ASSERT_EQUAL(y->comm_bwd_ms, x->comm_bwd_ms);
        halved += whole && f > 0;
        kept += !whole && f > 0;
        with_comm += whole && x->comm_fwd_ms + x->comm_bwd_ms > 0;
        if (strstr(pf_graph_op(g, v)->name, ".ln1") || strstr(pf_graph_op(g, v)->name, "residual"))
            CU_ASSERT_TRUE(whole);
        if (strstr(pf_graph_op(g, v)->name, "mlp.fc1"))
            CU_ASSERT_FALSE(whole);
    }
    CU_ASSERT_TRUE(halved > 0 && kept > 0 && with_comm > 0);
    /* a result that is not the graph's: refused, with the reason */
    pf_tap_result_t short_tap = *tap;
    short_tap.nops = tap->nops - 1;
    pf_graph_t *bad = pf_seqpar_graph(g, a, &short_tap, 2, err, sizeof err);
    CU_ASSERT_PTR_NULL(bad);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "TAP's result"));
    pair_close(&x);
}

/* A unit TAP leaves whole runs replicated, without tensor parallelism, so without sequence
 * parallelism either: a small GPT (h 256, 8 heads, s 128) at T = 8 on one DGX A100,
 * where TAP splits nothing, computes and stores the same with the flag as without. */
static void test_replicated_unit(void)
{
    pair_t x;
    CU_ASSERT_EQUAL_FATAL(pair_open(&x, 256, 8, 128, 2, 8), 0);
    const pf_graph_t *g = x.g;
    const pf_tap_result_t *tap = pf_tp_setting_tap(x.on);
    int any_split = 0;
    for (int v = 0; v < tap->nops; v++)
        any_split |= tap->ops[v].split;
    CU_ASSERT_FALSE(any_split); /* the case this test is for */
    const pf_graph_t *a = pf_tp_setting_graph(x.off), *b = pf_tp_setting_graph(x.on);
    for (int v = 0; v < pf_graph_nops(g); v++) {
        CU_ASSERT_EQUAL(pf_graph_op(b, v)->fwd_ms, pf_graph_op(a, v)->fwd_ms);
        CU_ASSERT_EQUAL(pf_graph_op(b, v)->bwd_ms, pf_graph_op(a, v)->bwd_ms);
        CU_ASSERT_EQUAL(pf_graph_op(b, v)->mem_fwd_bytes, pf_graph_op(a, v)->mem_fwd_bytes);
    }
    pair_close(&x);
}

void pf_suite_seqpar(void)
{
    CU_pSuite s = CU_add_suite("seqpar", NULL, NULL);
    CU_add_test(s, "a GPT layer stores 10 s b h (1 - 1/t) less (Korthikanti et al.)",
                test_korthikanti);
    CU_add_test(s, "the ops TAP leaves whole compute 1/t, their collectives unchanged",
                test_compute_split);
    CU_add_test(s, "a unit TAP leaves whole: the flag changes nothing", test_replicated_unit);
}
