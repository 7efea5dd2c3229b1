/* sharding: [DistPar] inference, conversions and their costs, worked by hand. */
#include "planner/tp/sharding.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <string.h>

static int same(pf_sharding_t a, pf_sharding_t b) { return pf_sharding_equal(a, b); }

/* Table 1, row by row, on X = [m, k] and W = [k, n]; then pairs the table does not derive. */
static void test_table1(void)
{
    pf_sharding_t B = pf_sharding_b(), P = pf_sharding_p(), S0 = pf_sharding_s(0), S1 = pf_sharding_s(1), y;
    struct {
        pf_sharding_t x, w, y;
    } rows[] = {{S0, B, S0}, {B, S1, S1}, {S1, S0, P}, {P, B, P}, {B, P, P}, {B, B, B}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        CU_ASSERT_EQUAL(pf_sharding_infer_matmul(rows[i].x, rows[i].w, 2, &y), 1);
        CU_ASSERT(same(y, rows[i].y));
    }
    CU_ASSERT_EQUAL(pf_sharding_infer_matmul(S0, S0, 2, &y), 0);
    CU_ASSERT_EQUAL(pf_sharding_infer_matmul(S1, B, 2, &y), 0); /* k split against a whole W */
    CU_ASSERT_EQUAL(pf_sharding_infer_matmul(B, S0, 2, &y), 0);
    CU_ASSERT_EQUAL(pf_sharding_infer_matmul(P, P, 2, &y), 0);
    /* batched X = [b, s, k]: the batch and sequence splits pass through, the k split is dim 2 */
    CU_ASSERT_EQUAL(pf_sharding_infer_matmul(pf_sharding_s(1), B, 3, &y), 1);
    CU_ASSERT(same(y, pf_sharding_s(1)));
    CU_ASSERT_EQUAL(pf_sharding_infer_matmul(B, S1, 3, &y), 1);
    CU_ASSERT(same(y, pf_sharding_s(2)));
    CU_ASSERT_EQUAL(pf_sharding_infer_matmul(pf_sharding_s(2), S0, 3, &y), 1);
    CU_ASSERT(same(y, P));
    char buf[16];
    CU_ASSERT_STRING_EQUAL(pf_sharding_str(pf_sharding_s(3), buf, sizeof buf), "S(3)");
    CU_ASSERT_STRING_EQUAL(pf_sharding_str(P, buf, sizeof buf), "P");
    CU_ASSERT(same(pf_sharding_grad_expected(P), B));
    CU_ASSERT(same(pf_sharding_grad_expected(S1), S1));
}

/* A.1.1 atomic ops and A.3 volumes for n = 2, |T| = 1e6 bytes: S_i2S_j |T| = 1e6; S2B n|T| =
 * 2e6; P2S n|T| = 2e6; P2B (p1 - 1 + p2)|T| = (2 - 1 + 2) 1e6 = 3e6. */
static void test_seed_volumes(void)
{
    pf_sharding_t B = pf_sharding_b(), P = pf_sharding_p(), S0 = pf_sharding_s(0), S1 = pf_sharding_s(1);
    CU_ASSERT_EQUAL(pf_sharding_conv_atomic(S0, S1), PF_CONV_ALL2ALL);
    CU_ASSERT_EQUAL(pf_sharding_conv_atomic(S1, B), PF_CONV_ALLGATHER);
    CU_ASSERT_EQUAL(pf_sharding_conv_atomic(P, S0), PF_CONV_REDUCESCATTER);
    CU_ASSERT_EQUAL(pf_sharding_conv_atomic(P, B), PF_CONV_ALLREDUCE);
    CU_ASSERT_EQUAL(pf_sharding_conv_atomic(S1, S1), PF_CONV_IDENTITY);
    CU_ASSERT_EQUAL(pf_sharding_conv_atomic(B, P), PF_CONV_I2P);
    CU_ASSERT_EQUAL(pf_sharding_conv_atomic(B, S1), PF_CONV_SPLIT);
    CU_ASSERT_EQUAL(pf_sharding_conv_atomic(S0, P), -1);
    PF_ASSERT_CLOSE(pf_sharding_conv_seed_volume_bytes(PF_CONV_ALL2ALL, 2, 1e6), 1e6, 1e-15);
    PF_ASSERT_CLOSE(pf_sharding_conv_seed_volume_bytes(PF_CONV_ALLGATHER, 2, 1e6), 2e6, 1e-15);
    PF_ASSERT_CLOSE(pf_sharding_conv_seed_volume_bytes(PF_CONV_REDUCESCATTER, 2, 1e6), 2e6, 1e-15);
    PF_ASSERT_CLOSE(pf_sharding_conv_seed_volume_bytes(PF_CONV_ALLREDUCE, 2, 1e6), 3e6, 1e-15);
    CU_ASSERT_EQUAL(pf_sharding_conv_seed_volume_bytes(PF_CONV_I2P, 2, 1e6), 0);
}

/* A.1.2, ring reduce-scatter with n = 4, |T| = 8e6 bytes, beta = 10 GB/s: each device sends
 * (n-1)|T|/n = 6e6 bytes, all of them (n-1)|T| = 2.4e7 = 4 x 6e6; the time (n-1)|T|/(n beta) =
 * 6e6 / 1e10 s = 0.6 ms, and stays below |T|/beta = 0.8 ms for any n. */
static void test_reduce_scatter_analysis(void)
{
    pf_sharding_link_t link = {10, 0, 0};
    PF_ASSERT_CLOSE(pf_sharding_conv_ring_bytes(PF_CONV_REDUCESCATTER, 4, 8e6), 6e6, 1e-15);
    PF_ASSERT_CLOSE(4 * pf_sharding_conv_ring_bytes(PF_CONV_REDUCESCATTER, 4, 8e6), 2.4e7, 1e-15);
    PF_ASSERT_CLOSE(pf_sharding_conv_ms(PF_CONV_REDUCESCATTER, 4, 8e6, &link), 0.6, 1e-12);
    for (int n = 2; n <= 1024; n *= 2)
        CU_ASSERT(pf_sharding_conv_ms(PF_CONV_REDUCESCATTER, n, 8e6, &link) < 0.8);
}

/* Collective costs (DESIGN.md), n = 4, |T| = 8e6 bytes, 10 GB/s, 5 us a step:
 *   all-reduce  2(3/4) 8e6 = 1.2e7 B = 1.2 ms + 2(n-1) = 6 steps x 0.005 = 1.23 ms
 *   all-gather  (3/4) 8e6 = 6e6 B = 0.6 ms + 3 x 0.005 = 0.615 ms; reduce-scatter the same
 *   all-to-all  3/16 x 8e6 = 1.5e6 B = 0.15 ms + one latency (every pair at once,
 *               planner/ir/collective.h) 0.005 = 0.155 ms
 * local kinds and n = 1 cost nothing. A small all-reduce is latency-bound and takes the double
 * binary tree (collective.h): 8e3 B, ring 6 x 0.005 + 1.2e4 B / 10 GB/s = 0.0312 ms, tree
 * 2 x log2(4) x 0.005 + 2 x 8e3 B / 10 GB/s = 0.0216 ms. */
static void test_ring_costs(void)
{
    pf_sharding_link_t link = {10, 5, 0};
    PF_ASSERT_CLOSE(pf_sharding_conv_ms(PF_CONV_ALLREDUCE, 4, 8e6, &link), 1.23, 1e-12);
    PF_ASSERT_CLOSE(pf_sharding_conv_ms(PF_CONV_ALLGATHER, 4, 8e6, &link), 0.615, 1e-12);
    PF_ASSERT_CLOSE(pf_sharding_conv_ms(PF_CONV_REDUCESCATTER, 4, 8e6, &link), 0.615, 1e-12);
    PF_ASSERT_CLOSE(pf_sharding_conv_ms(PF_CONV_ALL2ALL, 4, 8e6, &link), 0.155, 1e-12);
    PF_ASSERT_CLOSE(pf_sharding_conv_ms(PF_CONV_ALLREDUCE, 4, 8e3, &link), 0.0216, 1e-12);
    PF_ASSERT_CLOSE(pf_sharding_conv_ring_bytes(PF_CONV_ALL2ALL, 4, 8e6), 1.5e6, 1e-15);
    CU_ASSERT_EQUAL(pf_sharding_conv_ring_steps(PF_CONV_ALLREDUCE, 4), 6);
    CU_ASSERT_EQUAL(pf_sharding_conv_ms(PF_CONV_I2P, 4, 8e6, &link), 0);
    CU_ASSERT_EQUAL(pf_sharding_conv_ms(PF_CONV_SPLIT, 4, 8e6, &link), 0);
    CU_ASSERT_EQUAL(pf_sharding_conv_ms(PF_CONV_ALLREDUCE, 1, 8e6, &link), 0);
}

/* A group of 4 H100 on one host: the link keeps the given rate and gains the H100's NVLS bus
 * bandwidth (480 GB/s); the 8 MB all-reduce then costs 2 x 0.005 + 2 x 3/4 x 8e6 / 480e6 = 0.035
 * ms instead of test_ring_costs' 1.23, and the all-gather 0.005 + 3/4 x 8e6 / 480e6 = 0.0175
 * instead of 0.615. With one A100 among them, no NVLS. */
static void test_link_of_models(void)
{
    pf_cluster_t *c = pf_cluster_new("h", 4);
    for (int i = 0; i < 4; i++) {
        pf_device_t d = {.id = i, .host = 0, .name = "g", .mem_bytes = 8e10,
                         .device_model = "h100-sxm"};
        pf_cluster_set_device(c, i, &d);
    }
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++)
            pf_cluster_set_link(c, a, b, 10, 5);
    int devs[4] = {0, 1, 2, 3};
    pf_sharding_link_t link = pf_sharding_link_of(c, devs, 4, 10, 5);
    CU_ASSERT_EQUAL(link.gbps, 10);
    CU_ASSERT_EQUAL(link.latency_us, 5);
    CU_ASSERT_EQUAL(link.nvls_busbw_gbps, 480);
    PF_ASSERT_CLOSE(pf_sharding_conv_ms(PF_CONV_ALLREDUCE, 4, 8e6, &link), 0.035, 1e-12);
    PF_ASSERT_CLOSE(pf_sharding_conv_ms(PF_CONV_ALLGATHER, 4, 8e6, &link), 0.0175, 1e-12);
    pf_device_t d = *pf_cluster_device(c, 2);
    d.device_model = "a100-80g";
    pf_cluster_set_device(c, 2, &d);
    CU_ASSERT_EQUAL(pf_sharding_link_of(c, devs, 4, 10, 5).nvls_busbw_gbps, 0);
    pf_cluster_destroy(&c);
}

/* Division (eq. 1) and "or" (eq. 2) on the same link as test_ring_costs. */
static void test_division_and_or(void)
{
    pf_sharding_link_t link = {10, 5, 0};
    pf_sharding_t B = pf_sharding_b(), P = pf_sharding_p(), S0 = pf_sharding_s(0), S1 = pf_sharding_s(1);
    pf_sharding_conv_t c;
    char err[128];
    /* S(0) -> P has no atomic op: Division(S2B = all-gather, B2P = I2P), 0.615 ms */
    CU_ASSERT_EQUAL(pf_sharding_convert(S0, P, 2, 4, 8e6, &link, &c, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(c.nsteps, 2);
    CU_ASSERT_EQUAL(c.step[0], PF_CONV_ALLGATHER);
    CU_ASSERT_EQUAL(c.step[1], PF_CONV_I2P);
    CU_ASSERT(same(c.mid, B));
    PF_ASSERT_CLOSE(c.ms, 0.615, 1e-12);
    /* S(1) -> S(0): the all-to-all (0.155) beats all-gather + split (0.615) */
    CU_ASSERT_EQUAL(pf_sharding_convert(S1, S0, 2, 4, 8e6, &link, &c, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(c.nsteps, 1);
    CU_ASSERT_EQUAL(c.step[0], PF_CONV_ALL2ALL);
    /* P -> S(1): reduce-scatter (0.615) beats all-reduce + split (1.23) */
    CU_ASSERT_EQUAL(pf_sharding_convert(P, S1, 2, 4, 8e6, &link, &c, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(c.step[0], PF_CONV_REDUCESCATTER);
    PF_ASSERT_CLOSE(c.ring_bytes, 6e6, 1e-15);
    CU_ASSERT_EQUAL(pf_sharding_convert(S1, S1, 2, 4, 8e6, &link, &c, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(c.nsteps, 0);
    CU_ASSERT_EQUAL(pf_sharding_convert(pf_sharding_s(2), B, 2, 4, 8e6, &link, &c, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "S(0..1)"));

    /* Figure 2(b), X2B = B2B | P2B | S2B: from B the identity wins */
    pf_sharding_t to_b[3] = {B, P, S0};
    int k;
    CU_ASSERT_EQUAL(pf_sharding_convert_any(B, to_b, 3, 2, 4, 8e6, &link, &k, &c, err, sizeof err),
                    PF_OK);
    CU_ASSERT_EQUAL(k, 0);
    CU_ASSERT_EQUAL(c.ms, 0);
    /* S(0) to B (all-gather 0.615) or S(1) (all-to-all 0.155): S(1) */
    pf_sharding_t two[2] = {B, S1};
    CU_ASSERT_EQUAL(pf_sharding_convert_any(S0, two, 2, 2, 4, 8e6, &link, &k, &c, err, sizeof err),
                    PF_OK);
    CU_ASSERT_EQUAL(k, 1);
    PF_ASSERT_CLOSE(c.ms, 0.155, 1e-12);
    /* P to B (all-reduce 1.23) or S(1) (reduce-scatter 0.615): S(1) */
    CU_ASSERT_EQUAL(pf_sharding_convert_any(P, two, 2, 2, 4, 8e6, &link, &k, &c, err, sizeof err),
                    PF_OK);
    CU_ASSERT_EQUAL(k, 1);
    PF_ASSERT_CLOSE(c.ms, 0.615, 1e-12);
}

#define SH(...)                                                                                  \
    ((pf_shape_t){(int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}})

static int find_sig(const pf_sharding_sig_t *s, int n, pf_sharding_t out)
{
    for (int i = 0; i < n; i++)
        if (same(s[i].out, out))
            return i;
    return -1;
}

/* The rules on BERT-Large shapes: b = 8, s = 512, h = 1024, 16 heads, f = 4096. */
static void test_op_rules(void)
{
    pf_sharding_sig_t s[PF_SHARDING_MAX_SIGS];
    pf_sharding_t B = pf_sharding_b(), P = pf_sharding_p();
    pf_sharding_op_t fc1 = {.type = "linear", .has_weight = 1, .weight = SH(1024, 4096),
                         .output = SH(8, 512, 4096), .nin = 1, .in = {SH(8, 512, 1024)}};
    /* column-parallel: B in, S(2) out, work split, the input's gradient partial */
    CU_ASSERT_EQUAL(pf_sharding_op_rules(&fc1, pf_sharding_s(1), 4, s, PF_SHARDING_MAX_SIGS), 1);
    CU_ASSERT(same(s[0].in[0], B) && same(s[0].out, pf_sharding_s(2)) && s[0].split);
    CU_ASSERT(same(s[0].in_grad[0], P));
    CU_ASSERT_EQUAL(s[0].weight_grad_partial, 0);
    /* row-parallel: S(2) in, P out */
    CU_ASSERT_EQUAL(pf_sharding_op_rules(&fc1, pf_sharding_s(0), 4, s, PF_SHARDING_MAX_SIGS), 1);
    CU_ASSERT(same(s[0].in[0], pf_sharding_s(2)) && same(s[0].out, P));
    CU_ASSERT(same(s[0].in_grad[0], pf_sharding_s(2)));
    /* replicated weight: B -> B, and the row splits S(0), S(1) whose weight gradient is partial;
     * no P in (a bias would be added n times) */
    CU_ASSERT_EQUAL(pf_sharding_op_rules(&fc1, B, 4, s, PF_SHARDING_MAX_SIGS), 3);
    CU_ASSERT(same(s[0].out, B) && !s[0].split && same(s[0].in_grad[0], B));
    CU_ASSERT(s[find_sig(s, 3, pf_sharding_s(1))].weight_grad_partial);
    CU_ASSERT_EQUAL(find_sig(s, 3, P), -1);
    /* 4096 and 1024 do not divide by 3 */
    CU_ASSERT_EQUAL(pf_sharding_op_rules(&fc1, pf_sharding_s(1), 3, s, PF_SHARDING_MAX_SIGS), 0);

    /* attention scores [8,512,1024] x [8,512,1024] -> [8,16,512,512]: B, batch, heads */
    pf_sharding_op_t sc = {.type = "matmul", .output = SH(8, 16, 512, 512), .nin = 2,
                        .in = {SH(8, 512, 1024), SH(8, 512, 1024)}};
    CU_ASSERT_EQUAL(pf_sharding_classify(&sc), PF_OPK_MATMUL);
    CU_ASSERT_EQUAL(pf_sharding_op_rules(&sc, B, 4, s, PF_SHARDING_MAX_SIGS), 3);
    int h = find_sig(s, 3, pf_sharding_s(1));
    CU_ASSERT(h >= 0 && same(s[h].in[0], pf_sharding_s(2)) && same(s[h].in[1], pf_sharding_s(2)));
    /* 16 heads over 32 devices: only replicated (8 samples do not split 32 ways either) */
    CU_ASSERT_EQUAL(pf_sharding_op_rules(&sc, B, 32, s, PF_SHARDING_MAX_SIGS), 1);

    /* layernorm and softmax never split their last dimension; a norm's weight stays whole */
    pf_sharding_op_t ln = {.type = "LayerNorm", .has_weight = 1, .weight = SH(2, 1024),
                        .output = SH(8, 512, 1024), .nin = 1, .in = {SH(8, 512, 1024)}};
    CU_ASSERT_EQUAL(pf_sharding_op_rules(&ln, pf_sharding_s(1), 4, s, PF_SHARDING_MAX_SIGS), 0);
    CU_ASSERT_EQUAL(pf_sharding_op_rules(&ln, B, 4, s, PF_SHARDING_MAX_SIGS), 3);
    CU_ASSERT_EQUAL(find_sig(s, 3, pf_sharding_s(2)), -1);

    /* add: every split and P + P -> P; gelu: no P */
    pf_sharding_op_t add = {.type = "add", .output = SH(8, 512, 1024), .nin = 2,
                         .in = {SH(8, 512, 1024), SH(8, 512, 1024)}};
    CU_ASSERT_EQUAL(pf_sharding_op_rules(&add, B, 4, s, PF_SHARDING_MAX_SIGS), 5);
    CU_ASSERT(find_sig(s, 5, P) >= 0);
    pf_sharding_op_t gelu = {.type = "gelu", .output = SH(8, 512, 1024), .nin = 1,
                          .in = {SH(8, 512, 1024)}};
    CU_ASSERT_EQUAL(pf_sharding_op_rules(&gelu, B, 4, s, PF_SHARDING_MAX_SIGS), 4);
    CU_ASSERT_EQUAL(find_sig(s, 4, P), -1);

    /* vocabulary-parallel embedding: P out */
    pf_sharding_op_t emb = {.type = "embedding", .has_weight = 1, .weight = SH(30524, 1024),
                         .output = SH(8, 512, 1024), .nin = 0};
    CU_ASSERT_EQUAL(pf_sharding_op_rules(&emb, pf_sharding_s(0), 4, s, PF_SHARDING_MAX_SIGS), 1);
    CU_ASSERT(same(s[0].out, P) && s[0].split);

    /* unknown types: elementwise when shapes allow, else replicated */
    pf_sharding_op_t foo = {.type = "swish_v2", .output = SH(8, 4), .nin = 1, .in = {SH(8, 4)}};
    CU_ASSERT_EQUAL(pf_sharding_classify(&foo), PF_OPK_ELEMENTWISE);
    foo.in[0] = SH(8, 2);
    CU_ASSERT_EQUAL(pf_sharding_classify(&foo), PF_OPK_REPLICATED);
    CU_ASSERT_EQUAL(pf_sharding_op_rules(&foo, B, 2, s, PF_SHARDING_MAX_SIGS), 1);
    foo.output.ndim = 0; /* no shapes: replicated */
    CU_ASSERT_EQUAL(pf_sharding_classify(&foo), PF_OPK_REPLICATED);
}

void pf_suite_sharding(void)
{
    CU_pSuite s = CU_add_suite("sharding", NULL, NULL);
    CU_add_test(s, "Table 1 immediate inference for matmul", test_table1);
    CU_add_test(s, "atomic ops and the seed's A.3 volumes", test_seed_volumes);
    CU_add_test(s, "A.1.2 reduce-scatter analysis", test_reduce_scatter_analysis);
    CU_add_test(s, "collective costs on the slowest link (ring, tree, all-to-all), by hand",
                test_ring_costs);
    CU_add_test(s, "division (eq. 1) and or (eq. 2) expressions", test_division_and_or);
    CU_add_test(s, "a group's link gains NVLS from its device models", test_link_of_models);
    CU_add_test(s, "op rules on BERT-Large shapes", test_op_rules);
}
