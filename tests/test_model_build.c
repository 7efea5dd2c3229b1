/* model_build: the work every generated op carries (graph.h pf_op_work_t: FLOPs, bytes, GEMM
 * shape), against the FLOP count of [Narayanan21] eq. 3, hand-worked bytes and shapes, and the
 * op times it must agree with. test_models checks the times, memory and parameters. */
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/core/util.h"
#include "planner/ir/arch.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static pf_graph_t *build(const pf_model_opts_t *o)
{
    char err[256] = "";
    pf_graph_t *g = NULL;
    int rc = pf_model_build(o, &g, err, sizeof err);
    if (rc != PF_OK)
        fprintf(stderr, "\n  build failed: %s\n", err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    return g;
}

static const pf_op_t *op(const pf_graph_t *g, const char *name)
{
    for (int v = 0; v < pf_graph_nops(g); v++)
        if (!strcmp(pf_graph_op(g, v)->name, name))
            return pf_graph_op(g, v);
    CU_FAIL("no such op");
    static const pf_op_t none;
    return &none;
}

static int is_gemm(const pf_op_t *o)
{
    return o->work.gemm_m > 0;
}

/* B = 2, s = 8, h = 16, a = 4, f = 4h, V = 32, l = 3, fp16. */
static void small_gpt(pf_model_opts_t *o)
{
    pf_model_opts_init(o, PF_MODEL_GPT);
    o->layers = 3, o->hidden = 16, o->heads = 4, o->seq = 8, o->vocab = 32, o->microbatch = 2;
}

/* [Narayanan21] eq. 3 counts a layer's matmuls: forward 24Bsh^2 + 4Bs^2h = 24Bsh^2(1 + s/6h),
 * backward twice that, the logit layer 2BshV forward. Compared here:
 *  - per layer, the GEMM ops' fwd + bwd = 3 x 24Bsh^2(1 + s/6h) = 72Bsh^2(1 + s/6h) (no
 *    recomputation) = 72*2*8*256*(1 + 8/96) = 319488;
 *  - with full recomputation (each layer's forward once more; the logits are not recomputed)
 *    the whole model's GEMM FLOPs, layers (2 fwd + bwd) + head (fwd + bwd), = eq. 3's
 *    96Bslh^2(1 + s/6h + V/16lh) = 96*2*8*3*256*(1 + 8/96 + 32/768) = 1327104;
 *  - the elementwise ops eq. 3 leaves out, hand-worked per layer (model.h's FLOPs per element;
 *    backward 2x for the layernorms, 1x for the others): layernorms 2 x 8Bsh x (1 + 2),
 *    softmax 5Bas^2 x 2, attention dropout 2Bas^2 x 2, two dropouts 2Bsh x 2 each, two residual
 *    adds Bsh x 2 each, gelu 8Bsf x 2 = 124Bsh + 14Bas^2 = 31744 + 7168 = 38912. */
static void test_narayanan_eq3(void)
{
    pf_model_opts_t o;
    small_gpt(&o);
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    double B = 2, s = 8, h = 16, a = 4, V = 32, l = 3;
    double gemm_recompute = 0;
    for (int i = 0; i < 3; i++) {
        char pre[32];
        snprintf(pre, sizeof pre, "layers.%d.", i);
        double gemm = 0, other = 0;
        for (int v = 0; v < pf_graph_nops(g); v++) {
            const pf_op_t *x = pf_graph_op(g, v);
            if (strncmp(x->name, pre, strlen(pre)))
                continue;
            *(is_gemm(x) ? &gemm : &other) += x->work.fwd_flops + x->work.bwd_flops;
            if (is_gemm(x))
                gemm_recompute += 2 * x->work.fwd_flops + x->work.bwd_flops;
        }
        CU_ASSERT_DOUBLE_EQUAL(gemm, 72 * B * s * h * h * (1 + s / (6 * h)), 1e-6);
        CU_ASSERT_DOUBLE_EQUAL(gemm, 319488, 0);
        CU_ASSERT_DOUBLE_EQUAL(other, 124 * B * s * h + 14 * B * a * s * s, 0);
        CU_ASSERT_DOUBLE_EQUAL(other, 38912, 0);
    }
    const pf_op_t *hd = op(g, "head");
    gemm_recompute += hd->work.fwd_flops + hd->work.bwd_flops;
    CU_ASSERT_DOUBLE_EQUAL(gemm_recompute,
                           96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)), 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(gemm_recompute, 1327104, 0);
    /* outside the layers: the embedding moves bytes only, final_ln 8Bsh forward */
    CU_ASSERT_DOUBLE_EQUAL(op(g, "embed")->work.fwd_flops, 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(op(g, "final_ln")->work.fwd_flops, 8 * B * s * h, 0);
    pf_graph_destroy(&g);
}

/* GEMM shapes and bytes by hand on the same model (p = 2 bytes). */
static void test_shapes_and_bytes(void)
{
    pf_model_opts_t o;
    small_gpt(&o);
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    static const struct {
        const char *name;
        int64_t m, n, k, batch;
        double read, written;
    } want[] = {
        /* tokens x in @ in x out: m = Bs = 16; reads the input 2Bsh = 512 and the weight and
         * bias (16 x 16 + 16) x 2 = 544, writes 512 */
        {"layers.1.attn.q", 16, 16, 16, 1, 512 + 544, 512},
        /* per (sample, head), B a = 8: (s x d) @ (d x s), d = h / a = 4; reads q and k */
        {"layers.1.attn.scores", 8, 8, 4, 8, 1024, 2 * 2 * 4 * 8 * 8},
        /* (s x s) @ (s x d): reads the probabilities 1024 and v 512 */
        {"layers.1.attn.context", 8, 4, 8, 8, 1024 + 512, 512},
        {"layers.1.mlp.fc1", 16, 64, 16, 1, 512 + (16 * 64 + 64) * 2, 2048},
        {"layers.1.mlp.fc2", 16, 16, 64, 1, 2048 + (64 * 16 + 16) * 2, 512},
        {"head", 16, 32, 16, 1, 512 + 16 * 32 * 2, 1024},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const pf_op_work_t *w = &op(g, want[i].name)->work;
        CU_ASSERT(w->gemm_m == want[i].m && w->gemm_n == want[i].n && w->gemm_k == want[i].k &&
                  w->gemm_batch == want[i].batch);
        CU_ASSERT_DOUBLE_EQUAL(w->bytes_read, want[i].read, 0);
        CU_ASSERT_DOUBLE_EQUAL(w->bytes_written, want[i].written, 0);
    }
    /* the attention dropout reads 2Bas^2 = 1024, writes as much and its 1-byte mask 512 */
    const pf_op_work_t *d = &op(g, "layers.1.attn.dropout")->work;
    CU_ASSERT(d->bytes_read == 1024 && d->bytes_written == 1536 && d->gemm_m == 0);
    /* the embedding reads the ids (8 bytes each, 128) and one row of 2 tables per token, 2 x 512,
     * writes 512 */
    const pf_op_work_t *e = &op(g, "embed")->work;
    CU_ASSERT(e->bytes_read == 128 + 1024 && e->bytes_written == 512);
    pf_graph_destroy(&g);
}

/* Every op of every kind (defaults, plus ResNet-18's basic blocks and a GQA Llama): work > 0;
 * a GEMM shape exactly on the compute-bound types, 2 m n k batch = its forward FLOPs and a 2x
 * backward; every backward 1x to 2x its forward; and the op times are the work priced as
 * model.h says (compute-bound: FLOPs at the peak; memory-bound: the roofline of FLOPs and
 * bytes read + written), so the work is what the times were made of. */
static void check_kind(const pf_model_opts_t *o)
{
    pf_graph_t *g = build(o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    double peak = o->tflops * 1e12 * o->efficiency;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const pf_op_t *x = pf_graph_op(g, v);
        const pf_op_work_t *w = &x->work;
        int compute = !strcmp(x->type, "linear") || !strcmp(x->type, "matmul") ||
                      !strcmp(x->type, "conv");
        int ok = (w->fwd_flops > 0 || w->bytes_read > 0) && w->bytes_written > 0 &&
                 is_gemm(x) == compute && w->bwd_flops >= w->fwd_flops &&
                 w->bwd_flops <= 2 * w->fwd_flops;
        double flops_ms = w->fwd_flops / peak * 1e3;
        if (compute) {
            double prod = 2.0 * w->gemm_batch * w->gemm_m * w->gemm_n * w->gemm_k;
            ok = ok && fabs(prod - w->fwd_flops) <= 1e-12 * prod &&
                 w->bwd_flops == 2 * w->fwd_flops && fabs(x->fwd_ms - flops_ms) <= 1e-12 * flops_ms;
        } else {
            double ms = fmax(flops_ms, pf_bytes_ms(w->bytes_read + w->bytes_written, o->hbm_gbps));
            ok = ok && fabs(x->fwd_ms - ms) <= 1e-12 * ms;
        }
        if (!ok) {
            fprintf(stderr, "\n  %s %s (%s): fwd %g bwd %g read %g written %g ms %g\n",
                    pf_model_kind_name(o->kind), x->name, x->type, w->fwd_flops, w->bwd_flops,
                    w->bytes_read, w->bytes_written, x->fwd_ms);
            CU_FAIL("op work");
            break;
        }
    }
    pf_graph_destroy(&g);
}

static void test_every_kind(void)
{
    for (int k = 0; k < PF_MODEL_NKINDS; k++) {
        pf_model_opts_t o;
        pf_model_opts_init(&o, (pf_model_kind_t)k);
        check_kind(&o);
    }
    pf_model_opts_t o;
    pf_model_opts_init(&o, PF_MODEL_RESNET);
    o.depth = 18;
    check_kind(&o);
    char err[128];
    pf_model_opts_init(&o, PF_MODEL_LLAMA);
    CU_ASSERT_EQUAL(pf_model_apply_preset(&o, "70b", err, sizeof err), PF_OK);
    o.layers = 2;
    check_kind(&o);
}

/* GQA (Llama 2 70B: 64 heads, 8 kv heads, d = 128) and an MoE expert (Mixtral: 2 of 8 experts,
 * so Bs x 2 / 8 rows), the shapes the device model prices. */
static void test_gqa_and_experts(void)
{
    char err[128];
    pf_model_opts_t o;
    pf_model_opts_init(&o, PF_MODEL_LLAMA);
    CU_ASSERT_EQUAL(pf_model_apply_preset(&o, "70b", err, sizeof err), PF_OK);
    o.layers = 1;
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const pf_op_work_t *k = &op(g, "layers.0.attn.k")->work, *sc = &op(g, "layers.0.attn.scores")->work;
    CU_ASSERT(k->gemm_m == 4096 && k->gemm_k == 8192 && k->gemm_n == 1024 && k->gemm_batch == 1);
    CU_ASSERT(sc->gemm_m == 4096 && sc->gemm_n == 4096 && sc->gemm_k == 128 && sc->gemm_batch == 64);
    pf_graph_destroy(&g);
    pf_model_opts_init(&o, PF_MODEL_MOE);
    o.layers = 1;
    g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const pf_op_work_t *up = &op(g, "layers.0.moe.experts.3.up")->work;
    CU_ASSERT(up->gemm_m == 1024 && up->gemm_k == 4096 && up->gemm_n == 14336);
    /* dispatch reads each token once per expert it goes to (2 x 4096 x 4096 x 2 bytes) and the
     * routing probabilities (4096 x 8 x 2), writes the 2 copies */
    const pf_op_work_t *ds = &op(g, "layers.0.moe.dispatch")->work;
    CU_ASSERT_DOUBLE_EQUAL(ds->bytes_read, 2.0 * 4096 * 4096 * 2 + 4096.0 * 8 * 2, 0);
    CU_ASSERT_DOUBLE_EQUAL(ds->bytes_written, 2.0 * 4096 * 4096 * 2, 0);
    pf_graph_destroy(&g);
}

/* A head size apart from hidden / heads (--head-dim): B = 2, s = 8, h = 18, a = 4 heads of
 * d = 5 (q, k, v 20 wide), f = 4h. Per layer the GEMMs' forward: q, k, v 3 x 2Bs h ad, out
 * 2Bs ad h, scores and context 2 x 2Bs^2 ad, fc1 and fc2 2 x 2Bs h f; = 2Bs(4h ad + 2s ad + 2hf)
 * = 32 (4*18*20 + 2*8*20 + 2*18*72) = 139264. Without --head-dim, h = 18 is refused (4 heads do
 * not divide it); the model object says the head size; llama's k and v are kv x d wide. */
static void test_head_dim(void)
{
    char err[256];
    pf_model_opts_t o;
    small_gpt(&o);
    o.hidden = 18, o.head_dim = 5;
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    double fwd = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const pf_op_t *x = pf_graph_op(g, v);
        if (!strncmp(x->name, "layers.1.", 9) && is_gemm(x))
            fwd += x->work.fwd_flops;
    }
    CU_ASSERT_DOUBLE_EQUAL(fwd, 139264, 0);
    const pf_op_work_t *q = &op(g, "layers.0.attn.q")->work, *sc = &op(g, "layers.0.attn.scores")->work;
    const pf_op_work_t *out = &op(g, "layers.0.attn.out")->work;
    CU_ASSERT(q->gemm_k == 18 && q->gemm_n == 20 && sc->gemm_k == 5 && sc->gemm_batch == 8);
    CU_ASSERT(out->gemm_k == 20 && out->gemm_n == 18);
    CU_ASSERT_EQUAL(pf_graph_arch(g)->head_dim, 5);
    pf_graph_destroy(&g);
    o.head_dim = 0;
    CU_ASSERT_EQUAL(pf_model_build(&o, &g, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "heads: hidden 18 is not divisible by 4 heads"));
    o.hidden = 16, o.head_dim = 4; /* the default's own size: the model object omits it */
    g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(pf_graph_arch(g)->head_dim, 0);
    pf_graph_destroy(&g);
    pf_model_opts_init(&o, PF_MODEL_LLAMA);
    o.layers = 1, o.hidden = 96, o.heads = 4, o.kv_heads = 2, o.head_dim = 32, o.ffn = 128;
    o.seq = 16, o.vocab = 64;
    g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(op(g, "layers.0.attn.q")->work.gemm_n, 128);
    CU_ASSERT_EQUAL(op(g, "layers.0.attn.k")->work.gemm_n, 64);
    CU_ASSERT_EQUAL(op(g, "layers.0.attn.out")->work.gemm_k, 128);
    pf_graph_destroy(&g);
}

void pf_suite_model_build(void)
{
    CU_pSuite s = CU_add_suite("model_build", NULL, NULL);
    CU_add_test(s, "GPT layer FLOPs = Narayanan et al. eq. 3, with and without recomputation",
                test_narayanan_eq3);
    CU_add_test(s, "GEMM shapes and bytes read / written by hand", test_shapes_and_bytes);
    CU_add_test(s, "every op of every kind carries work that prices to its time", test_every_kind);
    CU_add_test(s, "GQA and MoE expert GEMM shapes, dispatch bytes", test_gqa_and_experts);
    CU_add_test(s, "a head size apart from hidden / heads", test_head_dim);
}
