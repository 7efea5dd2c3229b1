/* calibrate: op -> probe rules worked by hand, and the rewrite of a graph with a fake timer
 * (the real one needs a GPU: make test-gpu). */
#include "planner/ir/graph.h"
#include "planner/core/util.h"
#include "profiler/calibrate.h"
#include "tests/testutil.h"

#include <string.h>

static pf_shape_t shape(int n, const int64_t *d)
{
    pf_shape_t s = {.ndim = n};
    memcpy(s.dim, d, (size_t)n * sizeof *d);
    return s;
}

/* One GPT-2 XL-like block slice, micro-batch 4, seq 1024, hidden 1600, 25 heads (head dim 64):
 * 0 embed, 1 ln, 2 q, 3 k (same class as q), 4 scores, 5 softmax, 6 context, 7 residual add,
 * 8 gelu, 9 fused causal attention, 10 conv (no probe), 11 linear without shapes. A chain. */
static pf_graph_t *block(void)
{
    static const int64_t tok[] = {4, 1024}, act[] = {4, 1024, 1600}, sc[] = {4, 25, 1024, 1024},
                         w[] = {1600, 1600}, big[] = {4, 1024, 6400};
    struct {
        const char *name, *type;
        pf_shape_t in, out, w;
    } ops[] = {
        {"embed", "embedding", shape(2, tok), shape(3, act), shape(2, w)},
        {"ln1", "layernorm", shape(3, act), shape(3, act), {0}},
        {"q", "linear", shape(3, act), shape(3, act), shape(2, w)},
        {"k", "linear", shape(3, act), shape(3, act), shape(2, w)},
        {"scores", "matmul", shape(3, act), shape(4, sc), {0}},
        {"softmax", "softmax", shape(4, sc), shape(4, sc), {0}},
        {"context", "matmul", shape(4, sc), shape(3, act), {0}},
        {"residual", "add", shape(3, act), shape(3, act), {0}},
        {"gelu", "gelu", shape(3, big), shape(3, big), {0}},
        {"attn", "causal_attention", shape(3, act), shape(3, act), {0}},
        {"conv", "conv", shape(3, act), shape(3, act), {0}},
        {"fc", "linear", {0}, {0}, {0}},
    };
    char err[256];
    pf_graph_t *g = pf_graph_new("block", 4);
    for (int i = 0; i < (int)(sizeof ops / sizeof ops[0]); i++) {
        pf_op_t op = {.id = 100 + i, .name = ops[i].name, .type = ops[i].type, .fwd_ms = 1,
                      .bwd_ms = 2, .input = ops[i].in, .output = ops[i].out,
                      .weight = ops[i].w};
        pf_graph_add_op(g, &op);
        if (i > 0)
            pf_graph_add_edge(g, i - 1, i, 1000 * i);
    }
    CU_ASSERT_EQUAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    return g;
}

static void test_probe_rules(void)
{
    pf_graph_t *g = block();
    pf_op_probe_t p;
    char why[96];
    /* linear: m = 4 x 1024 = 4096 rows, n = 1600, k = 1600 */
    CU_ASSERT_EQUAL(pf_calibrate_probe(pf_graph_op(g, 2), PF_DT_BF16, &p, why, sizeof why), PF_OK);
    CU_ASSERT(p.kind == PF_CUDA_OP_GEMM && p.m == 4096 && p.n == 1600 && p.k == 1600 && p.batch == 1);
    /* scores: batch 4 x 25 = 100 of (1024 x 64) (64 x 1024): head dim 1600 / 25 = 64 */
    CU_ASSERT_EQUAL(pf_calibrate_probe(pf_graph_op(g, 4), PF_DT_BF16, &p, why, sizeof why), PF_OK);
    CU_ASSERT(p.kind == PF_CUDA_OP_GEMM && p.batch == 100 && p.m == 1024 && p.n == 1024 && p.k == 64);
    /* context: batch 100 of (1024 x 1024) (1024 x 64) */
    CU_ASSERT_EQUAL(pf_calibrate_probe(pf_graph_op(g, 6), PF_DT_BF16, &p, why, sizeof why), PF_OK);
    CU_ASSERT(p.kind == PF_CUDA_OP_GEMM && p.batch == 100 && p.m == 1024 && p.k == 1024 && p.n == 64);
    /* softmax rows: 4 x 25 x 1024 = 102400 rows of 1024 */
    CU_ASSERT_EQUAL(pf_calibrate_probe(pf_graph_op(g, 5), PF_DT_BF16, &p, why, sizeof why), PF_OK);
    CU_ASSERT(p.kind == PF_CUDA_OP_SOFTMAX && p.m == 102400 && p.n == 1024);
    CU_ASSERT_EQUAL(pf_calibrate_probe(pf_graph_op(g, 1), PF_DT_BF16, &p, why, sizeof why), PF_OK);
    CU_ASSERT(p.kind == PF_CUDA_OP_LAYERNORM && p.m == 4096 && p.n == 1600);
    /* add: 4 x 1024 x 1600 = 6553600 elements, 2 inputs; gelu: 4 x 1024 x 6400, 1 input */
    CU_ASSERT_EQUAL(pf_calibrate_probe(pf_graph_op(g, 7), PF_DT_BF16, &p, why, sizeof why), PF_OK);
    CU_ASSERT(p.kind == PF_CUDA_OP_ELEMENTWISE && p.m == 6553600 && p.inputs == 2);
    CU_ASSERT_EQUAL(pf_calibrate_probe(pf_graph_op(g, 8), PF_DT_FP16, &p, why, sizeof why), PF_OK);
    CU_ASSERT(p.kind == PF_CUDA_OP_ELEMENTWISE && p.m == 26214400 && p.inputs == 1 &&
              p.dtype == PF_DT_FP16);
    /* fused attention: 1600 is not a multiple of 128 but of 64: 25 heads of 64, batch 100 */
    CU_ASSERT_EQUAL(pf_calibrate_probe(pf_graph_op(g, 9), PF_DT_BF16, &p, why, sizeof why), PF_OK);
    CU_ASSERT(p.kind == PF_CUDA_OP_ATTENTION && p.m == 100 && p.n == 1024 && p.k == 64 && p.causal);
    CU_ASSERT_EQUAL(pf_calibrate_probe(pf_graph_op(g, 0), PF_DT_BF16, &p, why, sizeof why),
                    PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(why, "type 'embedding' has no probe");
    CU_ASSERT_EQUAL(pf_calibrate_probe(pf_graph_op(g, 11), PF_DT_BF16, &p, why, sizeof why),
                    PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(why, "no output shape");
    pf_graph_destroy(&g);
}

/* Fake GPU: fwd = 1e-9 x (m n k batch) for GEMMs and 1e-9 x elements otherwise, bwd = 2 fwd
 * + kind; counts its calls. */
typedef struct {
    int calls;
    int fail_at;
} fake_t;

static int fake_timer(void *ctx, const pf_op_probe_t *p, double *fwd, double *bwd, char *err,
                      size_t errlen)
{
    fake_t *f = ctx;
    if (++f->calls == f->fail_at)
        return pf_fail(err, errlen, PF_ERR, "out of GPU memory");
    double work = p->kind == PF_CUDA_OP_GEMM || p->kind == PF_CUDA_OP_ATTENTION
                      ? (double)p->m * p->n * p->k * p->batch
                      : (double)p->m * (p->n ? p->n : 1);
    *fwd = 1e-9 * work;
    *bwd = 2 * *fwd + p->kind;
    return PF_OK;
}

static void test_rewrite(void)
{
    pf_graph_t *g = block(), *m;
    pf_calibrate_report_t rep;
    fake_t f = {0, 0};
    char err[256];
    CU_ASSERT_EQUAL_FATAL(
        pf_calibrate_graph(g, PF_DT_BF16, fake_timer, &f, &m, &rep, err, sizeof err), PF_OK);
    /* 12 ops: embed, conv, fc kept; 9 timed; q and k share one class: 8 timer calls */
    CU_ASSERT_EQUAL(rep.ntimed, 9);
    CU_ASSERT_EQUAL(rep.nskipped, 3);
    CU_ASSERT_EQUAL(rep.nclasses, 8);
    CU_ASSERT_EQUAL(f.calls, 8);
    CU_ASSERT_EQUAL(rep.skipped[0].op, 0);
    CU_ASSERT_EQUAL(rep.skipped[1].op, 10);
    CU_ASSERT_EQUAL(rep.skipped[2].op, 11);
    CU_ASSERT_EQUAL(pf_graph_nops(m), 12);
    CU_ASSERT_EQUAL(pf_graph_nedges(m), 11);
    /* q: 4096 x 1600 x 1600 = 1.048576e10 -> 10.48576 ms, bwd 2 x + 0 (GEMM) */
    PF_ASSERT_CLOSE(pf_graph_op(m, 2)->fwd_ms, 10.48576, 1e-12);
    PF_ASSERT_CLOSE(pf_graph_op(m, 3)->bwd_ms, 20.97152, 1e-12);
    /* gelu: 26214400 elements -> 0.0262144 ms, bwd 0.0524288 + 3 (ELEMENTWISE) */
    PF_ASSERT_CLOSE(pf_graph_op(m, 8)->bwd_ms, 3.0524288, 1e-12);
    /* kept: analytic 1 / 2 ms; everything else is unchanged */
    CU_ASSERT_EQUAL(pf_graph_op(m, 0)->fwd_ms, 1);
    CU_ASSERT_EQUAL(pf_graph_op(m, 10)->bwd_ms, 2);
    CU_ASSERT_EQUAL(pf_graph_op(m, 5)->id, 105);
    CU_ASSERT_STRING_EQUAL(pf_graph_op(m, 5)->name, "softmax");
    CU_ASSERT_EQUAL(pf_graph_op(m, 2)->weight.dim[1], 1600);
    CU_ASSERT_EQUAL(pf_graph_edge(m, 4)->bytes, 5000);
    pf_calibrate_report_clear(&rep);
    pf_graph_destroy(&m);

    f = (fake_t){0, 3}; /* the third class fails: nothing is returned */
    CU_ASSERT_EQUAL(pf_calibrate_graph(g, PF_DT_BF16, fake_timer, &f, &m, &rep, err, sizeof err),
                    PF_ERR);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "timing ops[4] (scores): out of GPU memory"));
    pf_graph_destroy(&g);
}

void pf_suite_calibrate(void)
{
    CU_pSuite s = CU_add_suite("calibrate", NULL, NULL);
    CU_add_test(s, "op shapes -> probes, worked by hand", test_probe_rules);
    CU_add_test(s, "graph rewritten by shape class with a fake timer", test_rewrite);
}
