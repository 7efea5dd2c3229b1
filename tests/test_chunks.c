/* chunks: a pipeline's stages split into interleaved chunks, by hand. */
#include "planner/sim/chunks.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdlib.h>
#include <string.h>

static pf_cluster_t *flat_cluster(int D)
{
    pf_cluster_t *c = pf_cluster_new("flat", D);
    for (int i = 0; i < D; i++) {
        pf_device_t d = {.id = i, .host = i / 2, .mem_bytes = 80e9};
        pf_cluster_set_device(c, i, &d);
        for (int j = 0; j < i; j++)
            pf_cluster_set_link(c, i, j, 100, 0);
    }
    return c;
}

/* Two stages (T given, R = 1) on devices 0..T-1 and T..2T-1, heap-allocated as
 * pf_simulate_input_from_plan leaves them: fwd 2, bwd 2, optimizer 0.5, parameters 100 and
 * static 400 bytes each; stage 0 stores 20 activation bytes and sends 10, stage 1 stores 30
 * (its stashed input 10 included). */
static void two_stages(pf_simulate_input_t *in, const pf_cluster_t *c, int T, int MB)
{
    *in = (pf_simulate_input_t){.stages = 2, .replicas = 1, .tp = T, .microbatches = MB,
                                .buckets = 4, .schedule = PF_SCHEDULE_1F1B, .cluster = c};
    in->stage = calloc(2, sizeof *in->stage);
    for (int s = 0; s < 2; s++) {
        pf_simulate_stage_t *st = &in->stage[s];
        *st = (pf_simulate_stage_t){.fwd_ms = 2, .bwd_ms = 2, .optimizer_ms = 0.5,
                                    .param_bytes = 100, .static_bytes = 400,
                                    .act_bytes = s ? 30 : 20, .send_bytes = s ? 0 : 10};
        st->devices = malloc((size_t)T * sizeof *st->devices);
        for (int k = 0; k < T; k++)
            st->devices[k] = s * T + k;
        if (T > 1 && s == 0) {
            st->xfer_ms = malloc(sizeof *st->xfer_ms);
            st->xfer_ms[0] = 0.25;
        }
    }
}

/* V = 2: chunk j = c 2 + i. Times and parameter bytes halve (fwd 1, optimizer 0.25, parameters
 * 50, static 200); activations: chunk 0 (rank 0, first) 20 / 2 = 10; chunk 1 (rank 1) (30 - 10)
 * / 2 + 10 = 20; chunk 2 (rank 0 again) 20 / 2 + 10 = 20; chunk 3 20. Sends: 10, 10 (the wrap,
 * H = 10), 10, 0; buckets ceil(4 / 2) = 2. The links have no latency and 10 bytes at 100 Gb/s
 * take 8e-7 ms (inside the tolerance), so the step is test_interleave's hand-worked 18 (the
 * unsplit pipeline: (4 + 1)(2 + 2) = 20), plus the optimizer steps after the last backward. */
static void test_split_by_hand(void)
{
    pf_cluster_t *c = flat_cluster(4);
    pf_simulate_input_t in;
    char err[256];
    two_stages(&in, c, 1, 4);
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simulate(&in, &r, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(r->step_ms, 20 + 0.5, 1e-5); /* + the optimizer */
    pf_simulate_result_destroy(&r);
    CU_ASSERT_EQUAL_FATAL(pf_chunks_split(&in, 2, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(in.stages, 4);
    CU_ASSERT_EQUAL(in.virtual_stages, 2);
    CU_ASSERT_EQUAL(in.buckets, 2);
    double act[] = {10, 20, 20, 20}, send[] = {10, 10, 10, 0};
    for (int j = 0; j < 4; j++) {
        PF_ASSERT_CLOSE(in.stage[j].fwd_ms, 1, 1e-12);
        PF_ASSERT_CLOSE(in.stage[j].optimizer_ms, 0.25, 1e-12);
        PF_ASSERT_CLOSE(in.stage[j].param_bytes, 50, 1e-12);
        PF_ASSERT_CLOSE(in.stage[j].static_bytes, 200, 1e-12);
        PF_ASSERT_CLOSE(in.stage[j].act_bytes, act[j], 1e-12);
        PF_ASSERT_CLOSE(in.stage[j].send_bytes, send[j], 1e-12);
        CU_ASSERT_EQUAL(in.stage[j].devices[0], j % 2);
    }
    CU_ASSERT_EQUAL_FATAL(pf_simulate(&in, &r, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(r->step_ms, 18 + 0.5, 1e-5); /* the two optimizer halves one after another */
    CU_ASSERT_EQUAL(r->ndevices, 2);
    /* rank 0 holds 5 micro-batch-chunks at most (test_interleave), at most 70 bytes: after
     * F2c0 three of chunk 0 (10 each) and two of chunk 1 (20 each), again after F3c1; 1F1B's
     * 2 x (10 + 20) = 60. Rank 1 holds 3 (F0c0 F1c0 F0c1, 20 each: 60) against 1 x 40. */
    PF_ASSERT_CLOSE(pf_chunks_extra_bytes(&in, r, 0), 10, 1e-9);
    PF_ASSERT_CLOSE(pf_chunks_extra_bytes(&in, r, 1), 20, 1e-9);
    pf_simulate_result_destroy(&r);
    pf_simulate_input_clear(&in);
    pf_cluster_destroy(&c);
}

/* T = 2: the boundary transfers keep stage 0's resharding time (0.25 ms, given), and the wrap
 * from rank 1 to rank 0 is priced as a resharding of H = 10 bytes between the two groups; a
 * replica's own time (a mixed cluster's, 3 ms) is halved in each chunk, each its own copy. */
static void test_split_tp(void)
{
    pf_cluster_t *c = flat_cluster(4);
    pf_simulate_input_t in;
    char err[256];
    two_stages(&in, c, 2, 2);
    in.stage[1].rep_fwd_ms = malloc(sizeof(double)); /* a mixed cluster's replica time */
    in.stage[1].rep_fwd_ms[0] = 3;
    CU_ASSERT_EQUAL_FATAL(pf_chunks_split(&in, 2, err, sizeof err), PF_OK);
    CU_ASSERT_PTR_NULL(in.stage[0].rep_fwd_ms);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in.stage[3].rep_fwd_ms);
    PF_ASSERT_CLOSE(in.stage[1].rep_fwd_ms[0], 1.5, 1e-12);
    PF_ASSERT_CLOSE(in.stage[3].rep_fwd_ms[0], 1.5, 1e-12);
    pf_simulate_xfer_problem_t xp;
    int from[] = {2, 3}, to[] = {0, 1};
    pf_simulate_xfer_problem(from, to, 2, 10, &xp);
    double want;
    CU_ASSERT_EQUAL_FATAL(pf_simulate_xfer_ms(c, &xp, &want, err, sizeof err), PF_OK);
    CU_ASSERT(want > 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in.stage[0].xfer_ms);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in.stage[1].xfer_ms);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in.stage[2].xfer_ms);
    CU_ASSERT_PTR_NULL(in.stage[3].xfer_ms);
    PF_ASSERT_CLOSE(in.stage[0].xfer_ms[0], 0.25, 1e-12);
    PF_ASSERT_CLOSE(in.stage[1].xfer_ms[0], want, 1e-12);
    PF_ASSERT_CLOSE(in.stage[2].xfer_ms[0], 0.25, 1e-12);
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL(pf_simulate(&in, &r, err, sizeof err), PF_OK);
    pf_simulate_result_destroy(&r);
    pf_simulate_input_clear(&in);
    pf_cluster_destroy(&c);
}

/* Refused: micro-batches not a multiple of the stages, one stage, split twice; V = 1 leaves
 * the input alone. */
static void test_split_refused(void)
{
    pf_cluster_t *c = flat_cluster(4);
    pf_simulate_input_t in;
    char err[256];
    two_stages(&in, c, 1, 3);
    CU_ASSERT_EQUAL(pf_chunks_split(&in, 2, err, sizeof err), PF_EINPUT);
    CU_ASSERT_EQUAL(in.stages, 2);
    CU_ASSERT_EQUAL(pf_chunks_split(&in, 1, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(in.stages, 2);
    in.microbatches = 4;
    CU_ASSERT_EQUAL(pf_chunks_split(&in, 2, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_chunks_split(&in, 2, err, sizeof err), PF_EINPUT);
    pf_simulate_input_clear(&in);
    pf_plan_t p = {0};
    CU_ASSERT_EQUAL(pf_chunks_of_plan(&p), 1);
    p.blocks.present = 1;
    p.blocks.virtual_stages = 3;
    CU_ASSERT_EQUAL(pf_chunks_of_plan(&p), 3);
    pf_cluster_destroy(&c);
}

/* Under sequence parallelism a chunk's stashed input is H / T: T = 2, H = 10, so test_split's
 * activations 10, 20, 20, 20 become 10, 15, 15, 15 ((30 - 10) / 2 + 5, 20 / 2 + 5). */
static void test_split_sp(void)
{
    pf_cluster_t *c = flat_cluster(4);
    pf_simulate_input_t in;
    char err[256];
    two_stages(&in, c, 2, 2);
    CU_ASSERT_EQUAL_FATAL(pf_chunks_split_sp(&in, 2, 1, err, sizeof err), PF_OK);
    const double act[] = {10, 15, 15, 15};
    for (int j = 0; j < 4; j++)
        PF_ASSERT_CLOSE(in.stage[j].act_bytes, act[j], 1e-12);
    pf_simulate_input_clear(&in);
    pf_cluster_destroy(&c);
}

/* Tensor-parallel overlap on two stages at T = 2: stage 0 holds a linear (parameters, a GEMM
 * shape; fwd 8, bwd 16 whole: 4 and 8 split two ways without a device model), stage 1 an add.
 * Stage 0's collectives 3 (forward) and 10 (backward) become max(0, 3 - 1/2 x 4) = 1 and
 * 10 - 1/2 x 8 = 6; stage 1 has no GEMM to hide behind: its 3 stays. Without the plan's key,
 * or without sequence parallelism, nothing changes. */
static void test_tp_overlap(void)
{
    pf_cluster_t *c = flat_cluster(4);
    char err[256];
    pf_graph_t *g = pf_graph_new("two", 1);
    pf_op_t lin = {.id = 0, .name = "fc", .type = "linear", .fwd_ms = 8, .bwd_ms = 16,
                   .param_bytes = 64, .work = {.fwd_flops = 2e6, .gemm_m = 10, .gemm_n = 10,
                                               .gemm_k = 10, .gemm_batch = 1}};
    pf_op_t add = {.id = 1, .name = "add", .type = "add", .fwd_ms = 1, .bwd_ms = 1};
    pf_graph_add_op(g, &lin);
    pf_graph_add_op(g, &add);
    pf_graph_add_edge(g, 0, 1, 10);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    int ops0[] = {0}, ops1[] = {1};
    pf_stage_t st[2] = {{.nops = 1, .ops = ops0}, {.nops = 1, .ops = ops1}};
    pf_plan_t p = {.stages = 2, .stage_list = st};
    pf_simulate_input_t in;
    two_stages(&in, c, 2, 2);
    in.stage[0].tp_fwd_ms = 3, in.stage[0].tp_bwd_ms = 10, in.stage[1].tp_fwd_ms = 3;
    pf_chunks_tp_overlap(&in, g, &p); /* no key: unchanged */
    PF_ASSERT_CLOSE(in.stage[0].tp_fwd_ms, 3, 1e-12);
    p.blocks.present = 1, p.blocks.tp_comm_overlap = 1;
    pf_chunks_tp_overlap(&in, g, &p); /* no sequence parallelism: unchanged */
    PF_ASSERT_CLOSE(in.stage[0].tp_bwd_ms, 10, 1e-12);
    p.blocks.sequence_parallel = 1;
    pf_chunks_tp_overlap(&in, g, &p);
    PF_ASSERT_CLOSE(in.stage[0].tp_fwd_ms, 1, 1e-12);
    PF_ASSERT_CLOSE(in.stage[0].tp_bwd_ms, 6, 1e-12);
    PF_ASSERT_CLOSE(in.stage[1].tp_fwd_ms, 3, 1e-12);
    pf_simulate_input_clear(&in);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
}

void pf_suite_chunks(void)
{
    CU_pSuite s = CU_add_suite("chunks", NULL, NULL);
    CU_add_test(s, "two stages into four chunks, by hand; simulated 18 vs 20", test_split_by_hand);
    CU_add_test(s, "T = 2: boundary reshardings kept, the wrap priced", test_split_tp);
    CU_add_test(s, "bad splits refused", test_split_refused);
    CU_add_test(s, "sequence parallelism: stashed inputs / T", test_split_sp);
    CU_add_test(s, "tensor-parallel overlap of a stage's collectives, by hand", test_tp_overlap);
}
