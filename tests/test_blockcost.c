/* blockcost: the analytic model on the tiny GPT of test_blocks (2 layers, h 64, 4 heads, s 16,
 * vocab 100, graph micro-batch 4, fp16) under exact unit prices, worked by hand; the Korthikanti
 * activation formulas at every (t, sp, recompute); the default roofline's prices. */
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/topology.h"
#include "planner/partition/blockcost.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>
#include <string.h>

/* Unit prices: 1 ms per MFLOP, 1 ms per MB moved, ring collectives and p2p at 1 MB/ms, no
 * latency: numbers a hand can follow. */
static double u_gemm(void *ctx, int64_t m, int64_t n, int64_t k, int64_t batch)
{
    (void)ctx;
    return 2e-6 * (double)m * (double)n * (double)k * (double)batch;
}
static double u_mem(void *ctx, double bytes) { (void)ctx; return bytes * 1e-6; }
static double u_ar(void *ctx, pf_blockcost_group_t g, double bytes)
{
    (void)ctx;
    return 2.0 * (g.size - 1) / g.size * bytes * 1e-6;
}
static double u_half(void *ctx, pf_blockcost_group_t g, double bytes)
{
    (void)ctx;
    return (double)(g.size - 1) / g.size * bytes * 1e-6;
}
static double u_p2p(void *ctx, int a, int b, double bytes) { (void)ctx, (void)a, (void)b; return bytes * 1e-6; }
static const pf_blockcost_env_t unit_env = {NULL, u_gemm, u_mem, u_ar, u_half, u_half, u_p2p};

static pf_graph_t *tiny_gpt(int layers)
{
    char err[256];
    pf_model_opts_t mo;
    pf_graph_t *g = NULL;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = layers, mo.hidden = 64, mo.heads = 4, mo.seq = 16, mo.vocab = 100;
    mo.microbatch = 4;
    if (pf_model_build(&mo, &g, err, sizeof err))
        fprintf(stderr, "\n  model: %s\n", err);
    return g;
}

static void problem(pf_blockcost_problem_t *pr, const pf_blocks_t *b, int gpus, int64_t batch)
{
    memset(pr, 0, sizeof *pr);
    pr->blocks = b;
    pr->env = &unit_env;
    pf_training_init(&pr->training);
    pr->global_batch = batch;
    pr->ngpus = gpus;
    pr->gpus_per_host = 8;
    pr->mem_bytes = 1e12;
}

/* The tiny GPT of `layers` layers, its blocks and a problem on gpus GPUs at global batch batch. */
typedef struct {
    pf_graph_t *g;
    pf_blocks_t *b;
    pf_blockcost_problem_t pr;
} fixture_t;

static void fixture_close(fixture_t *f)
{
    pf_blocks_destroy(&f->b);
    pf_graph_destroy(&f->g);
}

static int fixture_open(fixture_t *f, int layers, int gpus, int64_t batch)
{
    char err[256];
    memset(f, 0, sizeof *f);
    f->g = tiny_gpt(layers);
    f->b = f->g ? pf_blocks_new(f->g, 2, err, sizeof err) : NULL;
    if (!f->b) {
        fixture_close(f);
        return -1;
    }
    problem(&f->pr, f->b, gpus, batch);
    return 0;
}

/* s b h = 16 x 4 x 64 = 4096 elements: Korthikanti's bytes per layer at b = 4 are sbh x
 * (34 + 5 a s / h) = 4096 x 39 (a s / h = 1); t = 2: 4096 x (10 + 12 + 2.5); sp: 4096 x (17 +
 * 2.5); selective drops 5 a s/(h t); full keeps the input 2 s b h (/ t with sp). */
static void test_activations(void)
{
    fixture_t f;
    CU_ASSERT_EQUAL_FATAL(fixture_open(&f, 2, 8, 8), 0);
    pf_blockcost_problem_t *pr = &f.pr;
    const pf_blocks_part_t *blk = pf_blocks_block(f.b);
    pf_blockcost_part_t x;
    struct { int t, sp; pf_training_recompute_t rc; double sbh; } rows[] = {
        {1, 0, PF_RECOMPUTE_NONE, 39},      {2, 0, PF_RECOMPUTE_NONE, 24.5},
        {2, 1, PF_RECOMPUTE_NONE, 19.5},    {2, 0, PF_RECOMPUTE_SELECTIVE, 22},
        {2, 1, PF_RECOMPUTE_SELECTIVE, 17}, {4, 1, PF_RECOMPUTE_SELECTIVE, 8.5},
        {2, 0, PF_RECOMPUTE_FULL, 2},       {2, 1, PF_RECOMPUTE_FULL, 1}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        pf_blockcost_part(pr, blk, rows[i].t, 4, rows[i].sp, rows[i].rc, &x);
        PF_ASSERT_CLOSE(x.act_bytes, rows[i].sbh * 4096, 1e-12);
    }
    /* full: one layer's working set reserved (t = 2, no sp: 24.5 sbh); b = 2 halves it */
    pf_blockcost_part(pr, blk, 2, 2, 0, PF_RECOMPUTE_FULL, &x);
    PF_ASSERT_CLOSE(x.reserve_bytes, 24.5 * 2048, 1e-12);
    PF_ASSERT_CLOSE(x.act_bytes, 2 * 2048, 1e-12);
    fixture_close(&f);
}

/* t 1, p 2, d 1, b 4, global batch 8 (m = 2), no recomputation.
 * Block forward: GEMMs q k v 3 x 2 x 64 x 64 x 64 = 1572864 FLOPs, scores + context 2 x 2 x 16^4
 * = 262144, out 524288, fc1 + fc2 2 x 2097152: 6553600 -> 6.5536 ms; backward 2x: 13.1072;
 * memory-bound ops, the bytes their work moves (read + written): ln1 and ln2 16640 (input 8192,
 * weights 256, output 8192), softmax 16384, the three dropouts 20480 (+ a 1-B mask of 4096),
 * the two residual adds 24576 (two inputs), gelu 65536: 225792 -> 0.225792, backward 0.451584.
 * One layer 20.338176 ms. Prologue (embed's work: 25088 B) 0.025088 + 0.050176 = 0.075264;
 * epilogue: final_ln 0.01664 + 0.03328, head 2 x 64 x 100 x 64 = 819200 -> 0.8192 + 1.6384:
 * 2.50752. p2p: 2 x 8192 B = 0.016384 per stage.
 * Layers 1 + 1 (0 + 2 or 2 + 0 are slower): stage 0 = 0.075264 + 20.338176 + 0.016384 =
 * 20.429824, stage 1 = 20.338176 + 2.50752 + 0.016384 = 22.86208; pipeline (m + p - 1) x max
 * = 3 x 22.86208 = 68.58624. Optimizer: 14 B moved per parameter byte (grads read, master and
 * moments read and written, weights written): stage 0's 99968 + 14848 B -> 1.607424 ms.
 * Step 70.193664 ms. Memory of stage 0: 114816 x 8 (16 B per 2-B parameter) + 2 in flight x
 * (39 sbh + embed's 512) = 918528 + 2 x 160256 = 1239040 B. */
static void test_pipeline_step(void)
{
    fixture_t f;
    CU_ASSERT_EQUAL_FATAL(fixture_open(&f, 2, 2, 8), 0);
    pf_blockcost_problem_t *pr = &f.pr;
    pf_blockcost_part_t parts[3];
    pf_blockcost_parts(pr, 1, 4, 0, PF_RECOMPUTE_NONE, parts);
    PF_ASSERT_CLOSE(parts[1].fwd_ms, 6.779392, 1e-12);
    PF_ASSERT_CLOSE(parts[1].bwd_ms, 13.558784, 1e-12);
    PF_ASSERT_CLOSE(parts[2].fwd_ms + parts[2].bwd_ms, 2.50752, 1e-12);
    pf_blockcost_cand_t c = {.t = 1, .p = 2, .d = 1, .b = 4, .v = 1};
    pf_blockcost_eval_t ev;
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_split(pr, &c, parts, &ev), PF_OK);
    CU_ASSERT_EQUAL(c.first_layers, 1);
    CU_ASSERT_EQUAL(c.last_layers, 1);
    CU_ASSERT_EQUAL(ev.microbatches, 2);
    PF_ASSERT_CLOSE(ev.stage_ms[0], 20.429824, 1e-12);
    PF_ASSERT_CLOSE(ev.stage_ms[2], 22.86208, 1e-12);
    PF_ASSERT_CLOSE(ev.pipeline_ms, 68.58624, 1e-12);
    PF_ASSERT_CLOSE(ev.optimizer_ms, 1.607424, 1e-12);
    PF_ASSERT_CLOSE(ev.step_ms, 70.193664, 1e-12);
    PF_ASSERT_CLOSE(ev.mem_bytes[0], 1239040, 1e-12);
    CU_ASSERT_TRUE(ev.fits);
    /* 1.2 MB: 1 + 1 needs 1239040 on stage 0; 0 + 2 needs (2 x 99968 + 13056) x 8 = 1703936
     * on the last stage, 2 + 0 more on stage 0: none fits, the least memory (1 + 1) is said */
    pr->mem_bytes = 1200000;
    CU_ASSERT_EQUAL(pf_blockcost_split(pr, &c, parts, &ev), PF_OK);
    CU_ASSERT_EQUAL(c.first_layers, 1);
    CU_ASSERT_FALSE(ev.fits);
    PF_ASSERT_CLOSE(ev.mem_max_bytes, 1239040, 1e-12);
    /* ill-formed: b does not divide the batch, layers that do not add up */
    c.b = 3;
    CU_ASSERT_EQUAL(pf_blockcost_eval(pr, &c, parts, &ev), PF_EINPUT);
    c.b = 4, c.first_layers = 2;
    CU_ASSERT_EQUAL(pf_blockcost_eval(pr, &c, parts, &ev), PF_EINPUT);
    fixture_close(&f);
}

/* t 2 with sequence parallelism, selective recomputation, p 1, d 2, ZeRO 1, b 2, batch 8 (m 2).
 * b = 2 scales the graph's micro-batch by 0.5 and t divides: GEMMs 6.5536 / 4 = 1.6384 ms,
 * backward 3.2768; memory-bound ops 225792 x 0.25 -> 0.056448, backward 0.112896; the core
 * (softmax 16384, its dropout 20480) 36864 x 0.25 -> 0.009216 recomputed; 2 x (reduce-scatter +
 * all-gather) of 4096 B over 2 = 2 x 2 x 0.002048 = 0.008192 forward and the same backward. One
 * layer 5.110144. Prologue: 25088 x 0.25 -> 0.006272 + 0.012544 and its all-reduce as RS + AG
 * 0.004096: 0.022912. Epilogue: final_ln 16640 x 0.25 -> 0.00416 + 0.00832, head 2 x 32 x 50 x
 * 64 -> 0.2048 + 0.4096, the head's input all-reduce backward 0.004096: 0.630976. Stage 2 x
 * 5.110144 + 0.022912 + 0.630976 = 10.874176, pipeline 2 x that = 21.748352. Parameters per
 * GPU: 2 x (512 + 99456 / 2) + 14848 / 2 + 256 + 12800 / 2 = 114560 B; their RS + AG over d = 2
 * (0.11456) hide under the backward; the optimizer works on half: 114560 / 2 x 14 -> 0.80192.
 * Step 22.550272. Memory: ZeRO-1 over 2: 1 + 1 + 6 / 2 = 5 B per parameter byte: 572800; one
 * micro-batch in flight: 2 x 17 sbh at b 2 (34816) + embed 512 / 4 + (final_ln 8192 + head
 * 20992) / 4 = 77056. */
static void test_tp_sp_zero(void)
{
    fixture_t f;
    CU_ASSERT_EQUAL_FATAL(fixture_open(&f, 2, 4, 8), 0);
    pf_blockcost_problem_t *pr = &f.pr;
    pf_blockcost_part_t parts[3];
    pf_blockcost_parts(pr, 2, 2, 1, PF_RECOMPUTE_SELECTIVE, parts);
    PF_ASSERT_CLOSE(parts[1].recompute_ms, 0.009216, 1e-12);
    PF_ASSERT_CLOSE(parts[1].tp_fwd_ms, 0.008192, 1e-12);
    PF_ASSERT_CLOSE(parts[1].tp_bwd_ms, 0.008192, 1e-12);
    PF_ASSERT_CLOSE(parts[0].tp_fwd_ms, 0.004096, 1e-12);
    PF_ASSERT_CLOSE(parts[2].tp_bwd_ms, 0.004096, 1e-12);
    pf_blockcost_cand_t c = {.t = 2, .p = 1, .d = 2, .b = 2, .v = 1, .sp = 1, .zero = 1,
                             .recompute = PF_RECOMPUTE_SELECTIVE};
    pf_blockcost_eval_t ev;
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_split(pr, &c, parts, &ev), PF_OK);
    CU_ASSERT_EQUAL(c.first_layers, 2);
    PF_ASSERT_CLOSE(ev.stage_max_ms, 10.874176, 1e-12);
    PF_ASSERT_CLOSE(ev.pipeline_ms, 21.748352, 1e-12);
    PF_ASSERT_CLOSE(ev.dp_exposed_ms, 0, 1e-12);
    PF_ASSERT_CLOSE(ev.optimizer_ms, 0.80192, 1e-12);
    PF_ASSERT_CLOSE(ev.step_ms, 22.550272, 1e-12);
    PF_ASSERT_CLOSE(ev.mem_max_bytes, 572800 + 77056, 1e-12);
    fixture_close(&f);
}

/* Tensor-parallel overlap on test_tp_sp_zero's candidate: the column- and row-parallel GEMMs of
 * a layer at b 2 (32 tokens, t 2): QKV 2 x 32 x 96 x 64 -> 0.393216 ms, projection 2 x 32 x 64 x
 * 32 -> 0.131072, fc1 and fc2 2 x 32 x 128 x 64 -> 0.524288 each: 1.572864 forward, 3.145728
 * backward (the core's batched GEMMs are not paired); the head 2 x 32 x 50 x 64 -> 0.2048 and
 * 0.4096; the embedding none. Each collective sum is shorter than (t - 1)/t of its GEMMs, so
 * it is hidden (max(0, C - G / 2) = 0): the layer's 0.008192 + 0.008192 and the head's backward
 * 0.004096 go, the embedding's 0.004096 (no GEMM beside it) stays. Stage 10.874176 - 2 x
 * 0.016384 - 0.004096 = 10.837312; memory unchanged. */
static void test_tp_overlap(void)
{
    fixture_t f;
    CU_ASSERT_EQUAL_FATAL(fixture_open(&f, 2, 4, 8), 0);
    pf_blockcost_problem_t *pr = &f.pr;
    pf_blockcost_part_t parts[3];
    pf_blockcost_parts(pr, 2, 2, 1, PF_RECOMPUTE_SELECTIVE, parts);
    PF_ASSERT_CLOSE(parts[1].tp_gemm_fwd_ms, 1.572864, 1e-12);
    PF_ASSERT_CLOSE(parts[1].tp_gemm_bwd_ms, 3.145728, 1e-12);
    PF_ASSERT_CLOSE(parts[2].tp_gemm_fwd_ms, 0.2048, 1e-12);
    PF_ASSERT_CLOSE(parts[0].tp_gemm_fwd_ms, 0, 1e-12);
    pf_blockcost_cand_t c = {.t = 2, .p = 1, .d = 2, .b = 2, .v = 1, .sp = 1, .zero = 1,
                             .recompute = PF_RECOMPUTE_SELECTIVE},
                        o = c;
    o.tpo = 1;
    pf_blockcost_eval_t ev, eo;
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_split(pr, &c, parts, &ev), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_split(pr, &o, parts, &eo), PF_OK);
    PF_ASSERT_CLOSE(eo.stage_max_ms, 10.837312, 1e-12);
    PF_ASSERT_CLOSE(ev.stage_max_ms - eo.stage_max_ms, 0.036864, 1e-9);
    PF_ASSERT_CLOSE(eo.mem_max_bytes, ev.mem_max_bytes, 1e-12);
    /* without sequence parallelism the key does nothing (Megatron-LM needs both) */
    pf_blockcost_parts(pr, 2, 2, 0, PF_RECOMPUTE_SELECTIVE, parts);
    c.sp = o.sp = 0;
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_split(pr, &c, parts, &ev), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_split(pr, &o, parts, &eo), PF_OK);
    PF_ASSERT_CLOSE(eo.step_ms, ev.step_ms, 1e-12);
    fixture_close(&f);
}

/* Interleaving: v = 2 on p = 2 needs L % 4 == 0; with 4 layers, batch 8, b 1 (m = 8): the bubble
 * (p - 1)/v = 0.5 stage times, p2p twice as often but overlapped with the chunks' compute; stage 0 holds (2 - 1) x 2 + (2 - 1) x 2 + 1
 * = 5 chunks of one layer, 2.5 stage layer-sets: L (1 + (p - 1)/(p v)) = 4 x 1.25 = 5 layers. */
static void test_interleaved(void)
{
    fixture_t f;
    CU_ASSERT_EQUAL_FATAL(fixture_open(&f, 4, 2, 8), 0);
    pf_blockcost_problem_t *pr = &f.pr;
    pf_blockcost_part_t parts[3];
    pf_blockcost_parts(pr, 1, 1, 0, PF_RECOMPUTE_NONE, parts);
    pf_blockcost_cand_t c1 = {.t = 1, .p = 2, .d = 1, .b = 1, .v = 1}, c2 = c1;
    c2.v = 2;
    pf_blockcost_eval_t e1, e2;
    c1.first_layers = c1.last_layers = 2;
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_eval(pr, &c1, parts, &e1), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_split(pr, &c2, parts, &e2), PF_OK);
    CU_ASSERT_EQUAL(c2.first_layers, 2);
    /* p2p at b = 1: 2048 B -> 0.002048 ms, twice per stage with v = 1; 4 times with v = 2,
     * each hidden behind a chunk's compute (overlap_p2p_comm): none exposed */
    PF_ASSERT_CLOSE(e2.stage_ms[0] - e1.stage_ms[0], -2 * 0.002048, 1e-9);
    PF_ASSERT_CLOSE(e1.pipeline_ms, 9 * e1.stage_max_ms, 1e-12);
    PF_ASSERT_CLOSE(e2.pipeline_ms, 8.5 * e2.stage_max_ms, 1e-12);
    /* stage 0's activations: 2 layer-sets (p) under 1F1B, 2.5 interleaved */
    double state = e1.mem_bytes[0] - 2 * (2 * parts[1].act_bytes + parts[0].act_bytes);
    PF_ASSERT_CLOSE(e2.mem_bytes[0], state + 2.5 * (2 * parts[1].act_bytes + parts[0].act_bytes),
                    1e-12);
    c2.p = 2, c2.v = 4; /* 4 % (2 x 4) */
    CU_ASSERT_EQUAL(pf_blockcost_split(pr, &c2, parts, &e2), PF_EINPUT);
    /* m = p = 2 (batch 2): Megatron-LM runs all m v = 4 forwards first, so the last stage holds
     * 4 chunks, 2 layer-sets, as stage 0 does; the warm-up rule alone would give it (v - 1) p + 1
     * = 3 chunks, 1.5. Its state: what 1F1B's last stage holds less its 1 layer-set (p - s). */
    pr->global_batch = 2;
    c1.p = c2.p = 2, c2.v = 2;
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_eval(pr, &c1, parts, &e1), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_split(pr, &c2, parts, &e2), PF_OK);
    double last = 2 * parts[1].act_bytes + parts[2].act_bytes;
    PF_ASSERT_CLOSE(e2.mem_bytes[2], e1.mem_bytes[2] - last + 2 * last, 1e-12);
    fixture_close(&f);
}

/* Uneven interleaving: 6 layers on p 2 with v 2 (6 % 4 != 0, 8 % 4 = 0): chunks of 2 places,
 * the embedding in the first of stage 0 and the head in the last of stage 1, so stage 0's
 * chunks hold 1 and 2 layers, stage 1's 2 and 1, each stage 3. Llama 3's 126 layers on p 16,
 * v 8: 128 places of 1, stages 7, 8 ... 8, 7; chunk 0 of stage 0 and chunk 7 of stage 15 hold
 * none. 4 layers on p 2, v 3: 6 % 6 = 0, stages 2 and 2, chunks (0 1 1) and (1 1 0); v 4:
 * neither 4 nor 6 divides by 8. */
static void test_interleave_uneven(void)
{
    int f, m, l;
    CU_ASSERT_EQUAL(pf_blockcost_interleave_split(6, 2, 2, &f, &m, &l), 1);
    CU_ASSERT_EQUAL(f, 3);
    CU_ASSERT_EQUAL(l, 3);
    const int want[2][2] = {{1, 2}, {2, 1}};
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 2; c++)
            CU_ASSERT_EQUAL(pf_blockcost_chunk_layers(6, 2, 2, r, c), want[r][c]);
    CU_ASSERT_EQUAL(pf_blockcost_interleave_split(126, 16, 8, &f, &m, &l), 1);
    CU_ASSERT_EQUAL(f, 7);
    CU_ASSERT_EQUAL(m, 8);
    CU_ASSERT_EQUAL(l, 7);
    int total = 0;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 8; c++)
            total += pf_blockcost_chunk_layers(126, 16, 8, r, c);
    CU_ASSERT_EQUAL(total, 126);
    CU_ASSERT_EQUAL(pf_blockcost_chunk_layers(126, 16, 8, 0, 0), 0);
    CU_ASSERT_EQUAL(pf_blockcost_chunk_layers(126, 16, 8, 15, 7), 0);
    CU_ASSERT_EQUAL(pf_blockcost_chunk_layers(126, 16, 8, 15, 0), 1);
    CU_ASSERT_EQUAL(pf_blockcost_interleave_split(4, 2, 3, &f, &m, &l), 1);
    CU_ASSERT_EQUAL(pf_blockcost_chunk_layers(4, 2, 3, 0, 0), 0);
    CU_ASSERT_EQUAL(pf_blockcost_chunk_layers(4, 2, 3, 1, 2), 0);
    CU_ASSERT_EQUAL(pf_blockcost_interleave_split(4, 2, 4, &f, &m, &l), -1);
    CU_ASSERT_EQUAL(pf_blockcost_interleave_split(8, 2, 2, &f, &m, &l), 0); /* even: 4, 4 */
    CU_ASSERT_EQUAL(f, 4);
    CU_ASSERT_EQUAL(pf_blockcost_chunk_layers(8, 2, 2, 1, 1), 2);

    /* the model takes it: 6 layers, p 2, v 2, batch 8 at b 1 (m 8): stage times as 3 + 3 whole
     * layers under 1F1B less its 2 p2p hops (hidden when interleaved), the bubble (p - 1)/v */
    fixture_t fx;
    CU_ASSERT_EQUAL_FATAL(fixture_open(&fx, 6, 2, 8), 0);
    pf_blockcost_part_t parts[3];
    pf_blockcost_parts(&fx.pr, 1, 1, 0, PF_RECOMPUTE_NONE, parts);
    pf_blockcost_cand_t c1 = {.t = 1, .p = 2, .d = 1, .b = 1, .v = 1}, c2 = c1;
    c1.first_layers = c1.last_layers = 3;
    c2.v = 2;
    pf_blockcost_eval_t e1, e2;
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_eval(&fx.pr, &c1, parts, &e1), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_split(&fx.pr, &c2, parts, &e2), PF_OK);
    CU_ASSERT_EQUAL(c2.first_layers, 3);
    CU_ASSERT_EQUAL(c2.last_layers, 3);
    PF_ASSERT_CLOSE(e2.stage_ms[0] - e1.stage_ms[0], -2 * 0.002048, 1e-9);
    PF_ASSERT_CLOSE(e2.pipeline_ms, 8.5 * e2.stage_max_ms, 1e-12);
    c2.v = 5; /* neither 6 nor 8 divides by 10 */
    CU_ASSERT_EQUAL(pf_blockcost_split(&fx.pr, &c2, parts, &e2), PF_EINPUT);
    fixture_close(&fx);
}

/* The roofline: GEMM at 70% of device 0's peak, collective.h's ring (DGX A100: 250 GB/s inside a
 * machine, 25 between per GPU, one NIC per GPU). */
static void test_roofline(void)
{
    char err[256];
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX_A100);
    to.machines = 2;
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    pf_blockcost_roofline_t r;
    pf_blockcost_env_t env;
    pf_blockcost_roofline_init(&r, c, &env);
    /* 2 x 1024^3 FLOPs at 312e12 x 0.7 */
    PF_ASSERT_CLOSE(env.gemm_ms(env.ctx, 1024, 1024, 1024, 1), 2.0 * 1073741824 / 218.4e12 * 1e3,
                    1e-12);
    /* 8 GPUs of one machine: 2 x 7/8 x 1 GB / 250 GB/s = 7 ms, plus 14 x 2.5 us */
    pf_blockcost_group_t in = {0, 8, 1}, across = {0, 2, 8};
    PF_ASSERT_CLOSE(env.allreduce_ms(env.ctx, in, 1e9), 7.0 + 14 * 2.5e-3, 1e-12);
    /* two machines (stride 8): 2 x 1/2 x 1 GB / 25 GB/s = 40 ms + 2 x 5 us; cached next time */
    PF_ASSERT_CLOSE(env.allreduce_ms(env.ctx, across, 1e9), 40.0 + 2 * 5e-3, 1e-12);
    PF_ASSERT_CLOSE(env.all_gather_ms(env.ctx, across, 1e9), 20.0 + 5e-3, 1e-12);
    /* 16 GPUs on two machines: one ring channel per NIC, min(250, 8 x 25) = 200 GB/s,
     * 2 x 15/16 x 1 GB / 200 GB/s = 9.375 ms, plus 30 x 5 us */
    pf_blockcost_group_t both = {0, 16, 1};
    PF_ASSERT_CLOSE(env.allreduce_ms(env.ctx, both, 1e9), 9.375 + 30 * 5e-3, 1e-12);
    CU_ASSERT_EQUAL(r.groups.ncache, 3);
    pf_cluster_destroy(&c);
}

/* The measured prices are the device model's and the collective model's own. */
static void test_priced(void)
{
    char err[256];
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX_A100);
    to.machines = 2;
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    const pf_devmodel_t *dm = pf_devmodel_preset("a100-80g");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm);
    pf_blockcost_priced_t r;
    pf_blockcost_env_t env;
    pf_blockcost_priced_init(&r, c, dm, 2, &env);
    PF_ASSERT_CLOSE(env.gemm_ms(env.ctx, 4096, 1536, 12288, 1),
                    pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 4096, 1536, 12288, 1), 1e-12);
    PF_ASSERT_CLOSE(env.memory_ms(env.ctx, 1e9), pf_devmodel_memory_ms(dm, 1e9), 1e-12);
    /* the data-parallel group of t = 8: devices 0 and 8, one per machine */
    int devs[2] = {0, 8};
    pf_collective_group_t g;
    CU_ASSERT_EQUAL_FATAL(pf_collective_group_from_cluster(c, devs, 2, 0, &g), PF_OK);
    pf_blockcost_group_t across = {0, 2, 8};
    PF_ASSERT_CLOSE(env.allreduce_ms(env.ctx, across, 1e9),
                    pf_collective_best_ms(&g, PF_COLL_ALLREDUCE, 1e9), 1e-12);
    PF_ASSERT_CLOSE(env.all_gather_ms(env.ctx, across, 1e9),
                    pf_collective_best_ms(&g, PF_COLL_ALLGATHER, 1e9), 1e-12);
    CU_ASSERT_EQUAL(r.groups.ncache, 1);
    CU_ASSERT_EQUAL(env.allreduce_ms(env.ctx, (pf_blockcost_group_t){0, 1, 1}, 1e9), 0);
    pf_cluster_destroy(&c);
}

/* --recompute auto by hand: test_pipeline_step's t 1, p 2, d 1, b 4, m 2, layers 1 + 1, in 1.15 MB.
 * Parts at b 4 (sbh = 4096): a layer stores 39 sbh = 159744 B (none), 34 sbh = 139264
 * (selective: the core's 5 a s / h = 5 sbh dropped, its 0.036864 ms recomputed), 2 sbh = 8192
 * (full: its input) and reserves its 159744 once per stage; the embedding stores 512 B (full:
 * its 512 reserved instead), the final norm + head 29184 (full: 8192, 29184 reserved).
 * Stage 0 (embedding + 1 layer, 2 micro-batches in flight, state 114816 x 8 = 918528):
 *   none 918528 + 2 x (159744 + 512) = 1239040, selective 918528 + 2 x (139264 + 512) = 1198080:
 *   both above 1.15e6; full 918528 + 2 x (8192 + 0) + 159744 = 1094656 fits.
 * Stage 1 (1 layer + head, 1 in flight, state (99968 + 13056) x 8 = 904192): none 904192 +
 *   159744 + 29184 = 1093120 fits.
 * So stage 0 full, stage 1 none. Times: stage 0 = 20.429824 (test_pipeline_step) + the layer's
 * forward 6.779392 + the embedding's 0.025088 recomputed = 27.234304; stage 1 none 22.86208;
 * pipeline 3 x 27.234304 = 81.702912, + the optimizer 1.607424: step 83.310336. Every stage full
 * (the best one level for all, selective does not fit stage 0) runs stage 1 at 22.86208 +
 * 6.779392 + 0.83584 = 30.477312: pipeline 3 x 30.477312 = 91.431936. */
static void test_auto_by_hand(void)
{
    fixture_t f;
    CU_ASSERT_EQUAL_FATAL(fixture_open(&f, 2, 2, 8), 0);
    pf_blockcost_problem_t *pr = &f.pr;
    pr->mem_bytes = 1.15e6;
    pf_blockcost_part_t set[3][3];
    pf_blockcost_parts_all(pr, 1, 4, 0, set);
    pf_blockcost_cand_t c = {.t = 1, .p = 2, .d = 1, .b = 4, .v = 1};
    pf_blockcost_eval_t ev;
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_split_auto(pr, &c, set, &ev), PF_OK);
    CU_ASSERT_EQUAL(c.first_layers, 1);
    CU_ASSERT_EQUAL(c.last_layers, 1);
    CU_ASSERT_EQUAL(pf_blockcost_stage_recompute(&c, 0), PF_RECOMPUTE_FULL);
    CU_ASSERT_EQUAL(pf_blockcost_stage_recompute(&c, 1), PF_RECOMPUTE_NONE);
    CU_ASSERT_EQUAL(c.recompute, PF_RECOMPUTE_FULL); /* the heaviest, for the later phases */
    PF_ASSERT_CLOSE(pf_blockcost_stage_mem_bytes(pr, &c, set[PF_RECOMPUTE_NONE], 0, 1), 1239040,
                    1e-12);
    PF_ASSERT_CLOSE(pf_blockcost_stage_mem_bytes(pr, &c, set[PF_RECOMPUTE_SELECTIVE], 0, 1),
                    1198080, 1e-12);
    PF_ASSERT_CLOSE(ev.mem_bytes[0], 1094656, 1e-12);
    PF_ASSERT_CLOSE(ev.mem_bytes[2], 1093120, 1e-12);
    PF_ASSERT_CLOSE(ev.stage_ms[0], 27.234304, 1e-12);
    PF_ASSERT_CLOSE(ev.stage_ms[2], 22.86208, 1e-12);
    PF_ASSERT_CLOSE(ev.pipeline_ms, 81.702912, 1e-12);
    PF_ASSERT_CLOSE(ev.step_ms, 83.310336, 1e-12);
    CU_ASSERT_TRUE(ev.fits);
    /* every stage full: stage 1 is the slower */
    pf_blockcost_cand_t u = {.t = 1, .p = 2, .d = 1, .b = 4, .v = 1,
                             .recompute = PF_RECOMPUTE_FULL};
    CU_ASSERT_EQUAL_FATAL(pf_blockcost_split(pr, &u, set[PF_RECOMPUTE_FULL], &ev), PF_OK);
    PF_ASSERT_CLOSE(ev.pipeline_ms, 91.431936, 1e-12);
    CU_ASSERT_EQUAL(pf_blockcost_stage_recompute(&u, 1), PF_RECOMPUTE_FULL);
    fixture_close(&f);
}

/* Brute force over every assignment of a level to each of the p stages at the layer counts auto
 * chose: among those whose every stage fits, the least slowest-stage time is auto's, auto's
 * assignment fits, and each of its stages is at the lightest level any fitting assignment gives
 * that stage (a stage's memory depends on its level alone). Returns 1 when auto's stages
 * differ. */
static int brute_force_levels(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                              const pf_blockcost_part_t set[3][3], const pf_blockcost_eval_t *ev)
{
    int P = c->p, layers[8], mixed = 0, combos = 1;
    for (int s = 0; s < P; s++) {
        layers[s] = s == 0 ? c->first_layers : s == P - 1 ? c->last_layers : c->mid_layers;
        combos *= 3;
        mixed |= pf_blockcost_stage_recompute(c, s) != pf_blockcost_stage_recompute(c, 0);
    }
    double best = 1e300;
    int lightest[8] = {3, 3, 3, 3, 3, 3, 3, 3};
    for (int code = 0; code < combos; code++) {
        double worst = 0;
        int fits = 1, lv[8];
        for (int s = 0, x = code; s < P; s++, x /= 3) {
            lv[s] = x % 3;
            fits &= pf_blockcost_stage_mem_bytes(pr, c, set[lv[s]], s, layers[s]) <= pr->mem_bytes;
            worst = fmax(worst, pf_blockcost_stage_ms(pr, c, set[lv[s]], s, layers[s]));
        }
        if (!fits)
            continue;
        best = fmin(best, worst);
        for (int s = 0; s < P; s++)
            lightest[s] = lv[s] < lightest[s] ? lv[s] : lightest[s];
    }
    PF_ASSERT_CLOSE(ev->stage_max_ms, best, 1e-12);
    for (int s = 0; s < P; s++) {
        int r = pf_blockcost_stage_recompute(c, s);
        CU_ASSERT_EQUAL(r, lightest[s]);
        CU_ASSERT_TRUE(pf_blockcost_stage_mem_bytes(pr, c, set[r], s, layers[s]) <= pr->mem_bytes);
    }
    return mixed;
}

/* 8 layers over p 4 (and 2), 1F1B and interleaved (v 2), memory from loose to tight. */
static void test_auto_brute_force(void)
{
    int compared = 0, mixed = 0;
    for (int batch = 8; batch <= 32; batch *= 2)
        for (int p = 2; p <= 4; p += 2)
            for (int v = 1; v <= 2; v++)
                for (double mem = 1e6; mem <= 6e6; mem += 0.05e6) {
                    fixture_t f;
                    CU_ASSERT_EQUAL_FATAL(fixture_open(&f, 8, p, batch), 0);
                    f.pr.mem_bytes = mem;
                    pf_blockcost_part_t set[3][3];
                    pf_blockcost_parts_all(&f.pr, 1, 4, 0, set);
                    pf_blockcost_cand_t c = {.t = 1, .p = p, .d = 1, .b = 4, .v = v};
                    pf_blockcost_eval_t ev;
                    if (pf_blockcost_split_auto(&f.pr, &c, set, &ev) == PF_OK && ev.fits) {
                        mixed += brute_force_levels(&f.pr, &c, set, &ev);
                        compared++;
                    }
                    fixture_close(&f);
                }
    CU_ASSERT_TRUE(compared >= 40);
    CU_ASSERT_TRUE(mixed >= 10); /* the comparison covers stages that differ */
}

void pf_suite_blockcost(void)
{
    CU_pSuite s = CU_add_suite("blockcost", NULL, NULL);
    CU_add_test(s, "Korthikanti activations", test_activations);
    CU_add_test(s, "1F1B step worked by hand", test_pipeline_step);
    CU_add_test(s, "t, sp, selective, ZeRO-1 by hand", test_tp_sp_zero);
    CU_add_test(s, "interleaved bubble and memory", test_interleaved);
    CU_add_test(s, "interleaving with uneven ends, by hand", test_interleave_uneven);
    CU_add_test(s, "tensor-parallel overlap, by hand", test_tp_overlap);
    CU_add_test(s, "roofline prices", test_roofline);
    CU_add_test(s, "device-model and collective prices", test_priced);
    CU_add_test(s, "recompute auto: stage 0 full, the last none, by hand", test_auto_by_hand);
    CU_add_test(s, "recompute auto = brute force over every stage's level",
                test_auto_brute_force);
}
