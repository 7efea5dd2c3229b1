/* reshard: Zhuang et al.'s unit tasks (§2.2, Fig. 2), strategy models (§3.1, Fig. 3), and the load
 * balancers on generated cases (§3.2). */
#include "planner/sim/reshard.h"
#include "planner/core/rng.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdlib.h>
#include <string.h>

/* Devices 0-3 on host 0, 4-7 on host 1 (Fig. 2's two meshes). */
static pf_reshard_net_t *two_hosts(void)
{
    int host_of[] = {0, 0, 0, 0, 1, 1, 1, 1};
    return pf_reshard_net_from_hosts(8, host_of, 100, 0, 10, 0, NULL, 0);
}

static pf_reshard_t *run(const pf_reshard_net_t *net, int64_t rows, int64_t cols,
                         pf_mesh_t src, const char *src_spec, pf_mesh_t dst, const char *dst_spec)
{
    pf_mesh_shard_t ss[PF_RESHARD_MAX_DIMS], ds[PF_RESHARD_MAX_DIMS];
    int nd = 0, nd2 = 0;
    char err[256];
    CU_ASSERT_EQUAL(pf_reshard_spec_parse(src_spec, ss, PF_RESHARD_MAX_DIMS, &nd, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_reshard_spec_parse(dst_spec, ds, PF_RESHARD_MAX_DIMS, &nd2, err, sizeof err), PF_OK);
    int64_t shape[] = {rows, cols};
    pf_reshard_problem_t p = {.ndims = 2, .shape = shape, .dtype_bytes = 4, .src_mesh = src,
                              .dst_mesh = dst, .src_spec = ss, .dst_spec = ds};
    pf_reshard_opts_t o;
    pf_reshard_opts_default(&o);
    o.sched.dfs_budget_s = 0;
    o.sched.dfs_node_cap = 100000;
    pf_reshard_t *r = pf_reshard_new(&p, net, &o, err, sizeof err);
    if (!r)
        fprintf(stderr, "reshard: %s\n", err);
    return r;
}

/* Fig. 2 / §2.2 (the figure's specs, read from the text): a 4 x 4 tensor (elements 0..15).
 * Task 1: S0S1 on mesh [[0,1],[2,3]] (each device a unique quarter) -> S0R on [[4,5],[6,7]]
 * (devices 4, 5 hold the top half, elements 0..7): four unit tasks, the first sends the
 * top-left quarter to devices 4 and 5. Task 2: S0R on [[4,5],[6,7]] -> S0R on [[0,1],[2,3]]:
 * two unit tasks, the first sends the top half to devices 0 and 1. */
static void test_seed_unit_tasks(void)
{
    pf_reshard_net_t *net = two_hosts();
    int a[] = {0, 1, 2, 3}, b[] = {4, 5, 6, 7};
    pf_mesh_t ma = {2, 2, a}, mb = {2, 2, b};
    pf_reshard_t *r = run(net, 4, 4, ma, "S0S1", mb, "S0R");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(pf_reshard_ntasks(r), 4);
    const pf_reshard_task_t *t = pf_reshard_task(r, 0);
    CU_ASSERT(t->lo[0] == 0 && t->hi[0] == 2 && t->lo[1] == 0 && t->hi[1] == 2);
    CU_ASSERT(t->nsrc == 1 && t->src[0] == 0);
    CU_ASSERT(t->ndst == 2 && t->dst[0] == 4 && t->dst[1] == 5);
    PF_ASSERT_CLOSE(t->bytes, 4 * 4, 1e-12); /* 2 x 2 elements x 4 bytes */
    t = pf_reshard_task(r, 3); /* bottom-right quarter: device 3 -> 6, 7 */
    CU_ASSERT(t->lo[0] == 2 && t->lo[1] == 2 && t->src[0] == 3 && t->dst[0] == 6 && t->dst[1] == 7);
    pf_reshard_destroy(&r);

    r = run(net, 4, 4, mb, "S0R", ma, "S0R");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(pf_reshard_ntasks(r), 2);
    t = pf_reshard_task(r, 0);
    CU_ASSERT(t->lo[0] == 0 && t->hi[0] == 2 && t->lo[1] == 0 && t->hi[1] == 4);
    CU_ASSERT(t->nsrc == 2 && t->src[0] == 4 && t->src[1] == 5);
    CU_ASSERT(t->ndst == 2 && t->dst[0] == 0 && t->dst[1] == 1);
    pf_reshard_destroy(&r);

    /* uneven: 5 rows over 2 blocks (rows 0-1 and 2-4) against 4 blocks (0, 1, 2-3, 4): cuts
     * {0, 1, 2, 3, 5} and the 5 = 2 x 2 + 1 odd row: 4 cells, holders by the block rule */
    r = run(net, 5, 4, mb, "S0R", ma, "S01R");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(pf_reshard_ntasks(r), 4);
    CU_ASSERT(pf_reshard_task(r, 2)->lo[0] == 2 && pf_reshard_task(r, 2)->hi[0] == 3);
    CU_ASSERT(pf_reshard_task(r, 2)->src[0] == 6 && pf_reshard_task(r, 2)->dst[0] == 2);
    double total = 0;
    for (int i = 0; i < pf_reshard_ntasks(r); i++)
        total += pf_reshard_task(r, i)->bytes;
    PF_ASSERT_CLOSE(total, 5 * 4 * 4, 1e-12);
    pf_reshard_destroy(&r);
    pf_reshard_net_destroy(&net);
}

/* Sender 0 on host 0; receivers 1, 2 on host 1 and 3, 4 on host 2. Inter-host 10 GB/s, intra
 * 100 GB/s, no latency; 1e9 bytes: T = 100 ms across hosts, 10 ms within one.
 *  send/recv (Fig. 3a): 4 x 100 = 400.
 *  local all-gather (3b): host 1 gets 2 x 0.5e9 (2 x 50 = 100), then a 2-ring all-gather of
 *    0.5e9 pieces (1 step x 5 ms): 105; host 2's pieces arrive at 200, + 5 = 205.
 *  global all-gather (3c): 4 x 0.25e9 = 4 x 25 = 100, then 3 ring steps at the slowest edge
 *    (2 -> 3, 25 ms): 175 (the seed's 2T for many devices).
 *  broadcast (3d), k chunks: hops 0->1 100/k, 1->2 10/k, 2->3 100/k, 3->4 10/k: 220/k first
 *    chunk + (k - 1) 100/k = 100 + 120/k; best k = 64 of 1..64: 101.875 (the seed's
 *    (k + n - 1) T / k = 101.5625 plus the two intra hops, 20/64). */
static void test_strategy_models(void)
{
    int host_of[] = {0, 1, 1, 2, 2};
    pf_reshard_net_t *net = pf_reshard_net_from_hosts(5, host_of, 100, 0, 10, 0, NULL, 0);
    int recv[] = {1, 2, 3, 4}, k = 0;
    PF_ASSERT_CLOSE(pf_reshard_strategy_ms(net, PF_XFER_SEND_RECV, 0, 4, recv, 1e9, 64, &k), 400, 1e-12);
    CU_ASSERT_EQUAL(k, 1);
    PF_ASSERT_CLOSE(pf_reshard_strategy_ms(net, PF_XFER_LOCAL_ALLGATHER, 0, 4, recv, 1e9, 64, &k), 205, 1e-12);
    PF_ASSERT_CLOSE(pf_reshard_strategy_ms(net, PF_XFER_GLOBAL_ALLGATHER, 0, 4, recv, 1e9, 64, &k), 175, 1e-12);
    PF_ASSERT_CLOSE(pf_reshard_strategy_ms(net, PF_XFER_BROADCAST, 0, 4, recv, 1e9, 64, &k), 101.875, 1e-12);
    CU_ASSERT_EQUAL(k, 64);
    PF_ASSERT_CLOSE(pf_reshard_strategy_ms(net, PF_XFER_BROADCAST, 0, 4, recv, 1e9, 1, &k), 220, 1e-12);
    pf_reshard_net_destroy(&net);

    /* latency: inter 10 GB/s + 50 us per message. send/recv of 1e8 bytes to two devices of
     * another host: 2 x (0.05 + 10) = 20.1 ms; broadcast in k = 4 chunks (intra free of latency,
     * 100 GB/s): hops 0.05 + 2.5 and 0.25: 2.8 + 3 x 2.55 = 10.45 ms */
    net = pf_reshard_net_from_hosts(5, host_of, 100, 0, 10, 50, NULL, 0);
    PF_ASSERT_CLOSE(pf_reshard_strategy_ms(net, PF_XFER_SEND_RECV, 0, 2, recv, 1e8, 1, NULL), 20.1, 1e-12);
    PF_ASSERT_CLOSE(pf_reshard_strategy_ms(net, PF_XFER_BROADCAST, 0, 2, recv, 1e8, 4, &k), 10.45, 1e-12);
    pf_reshard_net_destroy(&net);
}

/* §5.1.1 / Fig. 5 setting, 1D source mesh -> 2D destination mesh: devices 0, 1 on host 0 hold
 * the replicated tensor (a 1 x 2 mesh, spec RR); the destination is a 2 x 2 mesh over hosts 1 and
 * 2 (devices 2, 3 | 4, 5), spec RR. One unit task to 4 devices on 2 hosts. The seed's reasoning
 * (§3.1): send/recv costs n m T = 4T, local all-gather n T = 2T, global all-gather about 2T,
 * broadcast (k + n - 1) T / k, about T: broadcast is chosen. With 1e9 bytes (250e6 floats) the
 * times are those of test_strategy_models: 400, 205, 175, 101.875 ms.
 * When the destination is a single device every strategy costs T and the simplest, send/recv,
 * is kept (§5.3.1: cases with one receiver are plain point-to-point). */
static void test_1d_to_2d(void)
{
    int host_of[] = {0, 0, 1, 1, 2, 2};
    pf_reshard_net_t *net = pf_reshard_net_from_hosts(6, host_of, 100, 0, 10, 0, NULL, 0);
    int a[] = {0, 1}, b[] = {2, 3, 4, 5}, c[] = {2};
    pf_mesh_t src = {1, 2, a}, dst = {2, 2, b}, one = {1, 1, c};
    pf_reshard_t *r = run(net, 1000, 250000, src, "RR", dst, "RR");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(pf_reshard_ntasks(r), 1);
    const pf_reshard_task_t *t = pf_reshard_task(r, 0);
    CU_ASSERT_EQUAL(t->strategy, PF_XFER_BROADCAST);
    CU_ASSERT_EQUAL(t->chunks, 64);
    CU_ASSERT_EQUAL(t->sender, 0);
    CU_ASSERT(t->dst[0] == 2 && t->dst[1] == 3 && t->dst[2] == 4 && t->dst[3] == 5);
    PF_ASSERT_CLOSE(pf_reshard_time_ms(r), 101.875, 1e-12);
    pf_reshard_destroy(&r);

    /* the destination shards rows over axis 0 (one host each): 2 tasks of 0.5e9 bytes, each to
     * the 2 devices of one host: broadcast 50 + 5.5/k... k = 64: hops 50/64 and 5/64, so
     * 55/64 + 63 x 50/64 = 50.078125 (local all-gather: 50 + 2.5). The two tasks share the
     * sender host: one after the other, 100.15625 ms. */
    r = run(net, 1000, 250000, src, "RR", dst, "S0R");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(pf_reshard_ntasks(r), 2);
    CU_ASSERT_EQUAL(pf_reshard_task(r, 1)->strategy, PF_XFER_BROADCAST);
    PF_ASSERT_CLOSE(pf_reshard_task(r, 1)->ms, 50.078125, 1e-12);
    PF_ASSERT_CLOSE(pf_reshard_time_ms(r), 100.15625, 1e-12);
    pf_reshard_destroy(&r);

    r = run(net, 1000, 250000, src, "RR", one, "RR");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(pf_reshard_task(r, 0)->strategy, PF_XFER_SEND_RECV);
    PF_ASSERT_CLOSE(pf_reshard_time_ms(r), 100, 1e-12);
    pf_reshard_destroy(&r);
    pf_reshard_net_destroy(&net);
}

static const char *const specs[] = {"RR", "S0R", "RS0", "S1R", "RS1", "S0S1", "S1S0", "S01R",
                                    "RS01"};

/* Generated cases (§5.1.2 style): 2 x 4 host layouts, random mesh shapes over disjoint hosts,
 * random specs, a (64, 48) float tensor. Each algorithm alone: greedy and DFS (node cap 20000)
 * never worse than LPT, LPT never worse than naive; the ensemble is the minimum of all. */
static void test_generated_cases(void)
{
    enum { HOSTS = 4, PER_HOST = 4 };
    int host_of[HOSTS * PER_HOST];
    for (int i = 0; i < HOSTS * PER_HOST; i++)
        host_of[i] = i / PER_HOST;
    pf_reshard_net_t *net = pf_reshard_net_from_hosts(HOSTS * PER_HOST, host_of, 100, 1, 10, 5,
                                                      NULL, 0);
    pf_rng_t rng;
    pf_rng_seed(&rng, 11);
    int cases = 0, lpt_better = 0, ours_better = 0, worse = 0;
    for (int c = 0; c < 40; c++) {
        /* source on hosts 0-1, destination on hosts 2-3; shapes 1x2 .. 2x4 */
        int sr = 1 + (int)pf_rng_below(&rng, 2), sc = 2 << pf_rng_below(&rng, 2);
        int dr = 1 + (int)pf_rng_below(&rng, 2), dc = 2 << pf_rng_below(&rng, 2);
        int a[8], b[8];
        for (int i = 0; i < sr * sc; i++)
            a[i] = (i / sc) * PER_HOST + i % sc % PER_HOST;
        for (int i = 0; i < dr * dc; i++)
            b[i] = 2 * PER_HOST + (i / dc) * PER_HOST + i % dc % PER_HOST;
        pf_mesh_t src = {sr, sc, a}, dst = {dr, dc, b};
        const char *ss = specs[pf_rng_below(&rng, 9)], *ds = specs[pf_rng_below(&rng, 9)];
        pf_mesh_shard_t s1[2], s2[2];
        int nd;
        pf_reshard_spec_parse(ss, s1, 2, &nd, NULL, 0);
        pf_reshard_spec_parse(ds, s2, 2, &nd, NULL, 0);
        int64_t shape[] = {64, 48};
        pf_reshard_problem_t p = {2, shape, 4, src, dst, s1, s2};
        double ms[PF_RESHARD_SCHED_NALGOS];
        for (int al = 0; al < PF_RESHARD_SCHED_NALGOS; al++) {
            pf_reshard_opts_t o;
            pf_reshard_opts_default(&o);
            o.algo = (pf_reshard_sched_algo_t)al;
            o.sched.dfs_budget_s = 0;
            o.sched.dfs_node_cap = 20000;
            o.sched.seed = (uint64_t)c;
            char err[256];
            pf_reshard_t *r = pf_reshard_new(&p, net, &o, err, sizeof err);
            CU_ASSERT_PTR_NOT_NULL_FATAL(r);
            ms[al] = pf_reshard_time_ms(r);
            pf_reshard_destroy(&r);
        }
        cases++;
        CU_ASSERT(ms[PF_RESHARD_SCHED_LPT] <= ms[PF_RESHARD_SCHED_NAIVE] + 1e-9);
        CU_ASSERT(ms[PF_RESHARD_SCHED_DFS] <= ms[PF_RESHARD_SCHED_LPT] + 1e-9);
        CU_ASSERT(ms[PF_RESHARD_SCHED_GREEDY] <= ms[PF_RESHARD_SCHED_LPT] + 1e-9);
        double m = fmin(fmin(ms[0], ms[1]), fmin(ms[2], ms[3]));
        PF_ASSERT_CLOSE(ms[PF_RESHARD_SCHED_BEST], m, 1e-12);
        lpt_better += ms[PF_RESHARD_SCHED_LPT] < ms[PF_RESHARD_SCHED_NAIVE] - 1e-9;
        ours_better += ms[PF_RESHARD_SCHED_BEST] < ms[PF_RESHARD_SCHED_LPT] - 1e-9;
        worse += ms[PF_RESHARD_SCHED_GREEDY] > ms[PF_RESHARD_SCHED_LPT] + 1e-9 ||
                 ms[PF_RESHARD_SCHED_LPT] > ms[PF_RESHARD_SCHED_NAIVE] + 1e-9;
    }
    fprintf(stderr, "\n  reshard generated: %d cases, LPT < naive in %d, best < LPT in %d, "
            "violations %d\n", cases, lpt_better, ours_better, worse);
    CU_ASSERT(lpt_better > 0); /* the comparisons are not all ties */
    pf_reshard_net_destroy(&net);
}

static void test_bad_input(void)
{
    char err[256];
    pf_mesh_shard_t sp[PF_RESHARD_MAX_DIMS];
    int nd;
    CU_ASSERT_EQUAL(pf_reshard_spec_parse("S01,R", sp, 8, &nd, err, sizeof err), PF_OK);
    CU_ASSERT(nd == 2 && sp[0] == PF_SHARDING_S01 && sp[1] == PF_SHARDING_R);
    CU_ASSERT_EQUAL(pf_reshard_spec_parse("S2R", sp, 8, &nd, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "position 0"));
    int host_of[] = {0, 0, 1, -1};
    CU_ASSERT_PTR_NULL(pf_reshard_net_from_hosts(4, host_of, 100, 0, 10, 0, err, sizeof err));
    pf_reshard_net_t *net = two_hosts();
    int a[] = {0, 1, 2, 3}, b[] = {3, 5, 6, 7}, c[] = {4, 5, 6, 9};
    pf_mesh_t ma = {2, 2, a}, mb = {2, 2, b}, mc = {2, 2, c};
    pf_mesh_shard_t s0s0[] = {PF_SHARDING_S0, PF_SHARDING_S0}, rr[] = {PF_SHARDING_R, PF_SHARDING_R};
    int64_t shape[] = {4, 4};
    pf_reshard_opts_t o;
    pf_reshard_opts_default(&o);
    pf_reshard_problem_t p = {2, shape, 4, ma, mb, rr, rr};
    CU_ASSERT_PTR_NULL(pf_reshard_new(&p, net, &o, err, sizeof err)); /* device 3 in both */
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "device 3"));
    p.dst_mesh = mc;
    CU_ASSERT_PTR_NULL(pf_reshard_new(&p, net, &o, err, sizeof err)); /* device 9 */
    p.dst_mesh = (pf_mesh_t){2, 2, b + 0};
    p.dst_mesh.devices = (int[]){4, 5, 6, 7};
    p.src_spec = s0s0; /* axis 0 twice */
    CU_ASSERT_PTR_NULL(pf_reshard_new(&p, net, &o, err, sizeof err));
    p.src_spec = rr;
    p.dtype_bytes = 0;
    CU_ASSERT_PTR_NULL(pf_reshard_new(&p, net, &o, err, sizeof err));
    p.dtype_bytes = 4;
    pf_reshard_t *r = pf_reshard_new(&p, net, &o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(r);
    pf_reshard_destroy(&r);
    pf_reshard_destroy(&r);
    pf_reshard_net_destroy(&net);
}

void pf_suite_reshard(void)
{
    CU_pSuite s = CU_add_suite("reshard", NULL, NULL);
    CU_add_test(s, "the seed's unit tasks (Fig. 2) and an uneven split", test_seed_unit_tasks);
    CU_add_test(s, "strategy latencies worked by hand (Fig. 3)", test_strategy_models);
    CU_add_test(s, "1D -> 2D mesh picks the broadcast, one receiver send/recv", test_1d_to_2d);
    CU_add_test(s, "greedy, DFS >= LPT >= naive on 40 generated cases", test_generated_cases);
    CU_add_test(s, "bad specs, meshes and networks are refused", test_bad_input);
}
