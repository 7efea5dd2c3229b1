/* blockenum: the pruned enumeration against a brute force that prices every candidate and
 * every layer split through pf_blockcost_eval, on a tiny GPT (8 or 6 layers, h 64, 4 heads) over 8
 * GPUs (2 machines of 4), at several memory limits and batches; fixed dimensions; no fit. */
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/topology.h"
#include "planner/partition/blockenum.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <float.h>
#include <string.h>

typedef struct {
    pf_graph_t *g;
    pf_cluster_t *c;
    pf_blocks_t *b;
    pf_blockcost_roofline_t roof;
    pf_blockcost_env_t env;
    pf_blockcost_problem_t pr;
} fixture_t;

static int setup_heads(fixture_t *f, int layers, int64_t batch, double mem, int heads)
{
    char err[256];
    memset(f, 0, sizeof *f);
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = layers, mo.hidden = 64, mo.heads = heads, mo.seq = 16, mo.vocab = 100;
    mo.microbatch = 2;
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_HIER);
    to.machines = 2, to.gpus_per_machine = 4;
    if (pf_model_build(&mo, &f->g, err, sizeof err) || pf_topology_build(&to, &f->c, err, sizeof err) ||
        !(f->b = pf_blocks_new(f->g, 2, err, sizeof err)))
        return -1;
    pf_blockcost_roofline_init(&f->roof, f->c, &f->env);
    f->pr = (pf_blockcost_problem_t){.blocks = f->b, .env = &f->env, .global_batch = batch,
                                     .ngpus = 8, .gpus_per_host = 4, .mem_bytes = mem};
    pf_training_init(&f->pr.training);
    return 0;
}

static int setup(fixture_t *f, int layers, int64_t batch, double mem)
{
    return setup_heads(f, layers, batch, mem, 4);
}

static void teardown(fixture_t *f)
{
    pf_blocks_destroy(&f->b);
    pf_graph_destroy(&f->g);
    pf_cluster_destroy(&f->c);
}

/* c's evaluation: at its one level (set[c.recompute]) or, auto, each stage at its own. */
static int eval_any(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                    const pf_blockcost_part_t set[3][3], int autorc, pf_blockcost_eval_t *ev)
{
    return autorc ? pf_blockcost_eval_auto(pr, c, set, ev)
                  : pf_blockcost_eval(pr, c, set[c->recompute], ev);
}

/* Every layer split of c (v = 1: first, middle, last with first, last <= middle; v > 1 or
 * p = 1: even), the fastest that fits. */
static double best_split(const pf_blockcost_problem_t *pr, pf_blockcost_cand_t c,
                         const pf_blockcost_part_t parts[3][3], int autorc)
{
    int L = pf_blocks_count(pr->blocks);
    double best = DBL_MAX;
    pf_blockcost_eval_t ev;
    if (c.p == 1 || c.v > 1) {
        c.first_layers = c.mid_layers = c.last_layers = L / c.p;
        if (c.v > 1 && L % (c.p * c.v)) /* the embedding and the head in a layer's place */
            c.mid_layers = (L + 2) / c.p, c.first_layers = c.last_layers = c.mid_layers - 1;
        return eval_any(pr, &c, parts, autorc, &ev) == PF_OK && ev.fits ? ev.step_ms : DBL_MAX;
    }
    for (int x = 0; x <= L; x++)
        for (int y = 0; x + y <= L; y++)
            for (int mid = 0; mid <= L; mid++) {
                if ((c.p == 2 && (mid || x + y != L)) ||
                    (c.p > 2 && (x > mid || y > mid || x + y + (c.p - 2) * mid != L)))
                    continue;
                c.first_layers = x, c.mid_layers = mid, c.last_layers = y;
                if (eval_any(pr, &c, parts, autorc, &ev) == PF_OK && ev.fits && ev.step_ms < best)
                    best = ev.step_ms;
            }
    return best;
}

/* The space of blockenum.h, enumerated with no pruning at all: recomputation fixed to one level
 * for every stage (fixrc >= 0) or auto (-1: each stage the lightest that fits it). */
static double brute_force(const pf_blockcost_problem_t *pr, int fixrc)
{
    int L = pf_blocks_count(pr->blocks);
    double best = DBL_MAX;
    for (int t = 1; t <= 4; t *= 2)
        for (int p = 1; p <= L && p <= 8 / t; p *= 2)
            for (int b = 1; b <= pr->global_batch; b++) {
                int d = 8 / (t * p);
                if (pr->global_batch % ((int64_t)d * b))
                    continue;
                int m = (int)(pr->global_batch / ((int64_t)d * b));
                for (int v = 1; v <= L; v++)
                    for (int sp = 0; sp <= (t > 1); sp++)
                        for (int o = 0; o <= sp; o++) /* TP overlap: with sp */
                        for (int rc = fixrc < 0 ? 0 : fixrc; rc <= (fixrc < 0 ? 0 : fixrc); rc++)
                            for (int z = 0; z <= (d == 1 ? 0 : p > 1 ? 1 : 3); z++) {
                                if (v > 1 && (p < 2 || (L % (p * v) && (L + 2) % (p * v)) ||
                                              m % p))
                                    continue;
                                pf_blockcost_cand_t c = {.t = t, .p = p, .d = d, .b = b, .v = v,
                                                         .sp = sp, .tpo = o, .zero = z,
                                                         .recompute = (pf_training_recompute_t)rc};
                                pf_blockcost_part_t set[3][3];
                                pf_blockcost_parts_all(pr, t, b, sp, set);
                                double s = best_split(pr, c, set, fixrc < 0);
                                if (s < best)
                                    best = s;
                            }
            }
    return best;
}

static void test_brute_force(void)
{
    /* memory limits from loose to tight (the tiny model's state is ~ 1 MB), three batches (24:
     * a replica's share of 3, 6, 12 or 24, whose divisors cross its square root) */
    const double mems[] = {1e9, 2.5e6, 1.6e6, 1.2e6};
    const int64_t batches[] = {8, 16, 24};
    char err[256];
    int compared = 0;
    for (int fixrc = -1; fixrc <= PF_RECOMPUTE_FULL; fixrc++) /* auto, then each level */
    for (int layers = 6; layers <= 8; layers += 2) /* 6: interleaving only with uneven ends */
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        for (size_t j = 0; j < sizeof batches / sizeof batches[0]; j++) {
            fixture_t f;
            CU_ASSERT_EQUAL_FATAL(setup(&f, layers, batches[j], mems[i]), 0);
            pf_blockenum_fix_t fix;
            pf_blockenum_fix_init(&fix);
            fix.recompute = fixrc;
            pf_blockenum_item_t pruned[4], full[4];
            pf_blockenum_stats_t sp, sf;
            int np, nf;
            int rp = pf_blockenum_run(&f.pr, &fix, 4, 1, pruned, &np, &sp, err, sizeof err);
            int rf = pf_blockenum_run(&f.pr, &fix, 4, 0, full, &nf, &sf, err, sizeof err);
            double bf = brute_force(&f.pr, fixrc);
            CU_ASSERT_EQUAL(rp, rf);
            if (bf == DBL_MAX) {
                CU_ASSERT_EQUAL(rp, PF_EINFEASIBLE);
            } else {
                CU_ASSERT_EQUAL_FATAL(rp, PF_OK);
                PF_ASSERT_CLOSE(pruned[0].eval.step_ms, bf, 1e-12);
                PF_ASSERT_CLOSE(full[0].eval.step_ms, bf, 1e-12);
                /* the full list is the true best K; the pruned one leaves out candidates a
                 * faster one dominates, so its k-th is never faster than the true k-th */
                for (int k = 0; k < np && k < nf; k++)
                    CU_ASSERT_TRUE(pruned[k].eval.step_ms >= full[k].eval.step_ms * (1 - 1e-12));
                CU_ASSERT_TRUE(sp.evaluated < sf.evaluated); /* pruning pruned */
                compared++;
            }
            teardown(&f);
        }
    CU_ASSERT_TRUE(compared >= 40); /* most settings have a plan: the comparison is not vacuous */
}

/* A batch of 2^34 on 8 GPUs: no candidate runs more micro-batches than the later phases plan
 * (2^20; a count past 2^31 once wrapped negative and ranked first with a negative step), and
 * the micro-batches of a replica's 2^31 or more samples are found divisor by divisor. */
static void test_huge_batch(void)
{
    char err[256];
    fixture_t f;
    CU_ASSERT_EQUAL_FATAL(setup(&f, 8, (int64_t)1 << 34, 1e15), 0);
    pf_blockenum_fix_t fix;
    pf_blockenum_fix_init(&fix);
    pf_blockenum_item_t out[8];
    int n = 0;
    CU_ASSERT_EQUAL_FATAL(pf_blockenum_run(&f.pr, &fix, 8, 1, out, &n, NULL, err, sizeof err), PF_OK);
    CU_ASSERT(n > 0);
    for (int i = 0; i < n; i++) {
        int64_t m = ((int64_t)1 << 34) / ((int64_t)out[i].cand.d * out[i].cand.b);
        CU_ASSERT(m >= 1 && m <= PF_BLOCKCOST_MAX_MICROBATCHES);
        CU_ASSERT(out[i].eval.step_ms > 0);
    }
    teardown(&f);
}

static void test_fixed_and_infeasible(void)
{
    char err[256];
    fixture_t f;
    CU_ASSERT_EQUAL_FATAL(setup(&f, 8, 16, 1e9), 0);
    pf_blockenum_fix_t fix;
    pf_blockenum_fix_init(&fix);
    fix.t = 2, fix.p = 2, fix.b = 1, fix.recompute = PF_RECOMPUTE_FULL, fix.sp = 1;
    pf_blockenum_item_t out[8];
    int n;
    CU_ASSERT_EQUAL_FATAL(pf_blockenum_run(&f.pr, &fix, 8, 1, out, &n, NULL, err, sizeof err), PF_OK);
    for (int i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(out[i].cand.t, 2);
        CU_ASSERT_EQUAL(out[i].cand.p, 2);
        CU_ASSERT_EQUAL(out[i].cand.d, 2);
        CU_ASSERT_EQUAL(out[i].cand.b, 1);
        CU_ASSERT_EQUAL(out[i].cand.recompute, PF_RECOMPUTE_FULL);
        CU_ASSERT_TRUE(out[i].cand.sp);
        CU_ASSERT_TRUE(out[i].cand.zero <= 1); /* ZeRO-2/3 only without a pipeline */
        if (i)
            CU_ASSERT_TRUE(out[i - 1].eval.step_ms <= out[i].eval.step_ms);
    }
    char d[128];
    pf_blockenum_describe(&out[0].cand, d, sizeof d);
    CU_ASSERT_PTR_NOT_NULL(strstr(d, "t 2 p 2 d 2 b 1 v "));
    f.pr.mem_bytes = 1000; /* nothing fits */
    CU_ASSERT_EQUAL(pf_blockenum_run(&f.pr, &fix, 8, 1, out, &n, NULL, err, sizeof err),
                    PF_EINFEASIBLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no configuration of the 8 blocks on 8 GPUs"));
    /* a fixed degree that cannot be met is named, not reported as memory (4 heads, hosts of 4,
     * 8 blocks) */
    f.pr.mem_bytes = 1e9;
    const struct {
        int t, p;
        const char *why;
    } bad[] = {{3, 0, "--tp 3 does not divide the 4 GPUs of a host"},
               {8, 0, "--tp 8 does not divide the 4 GPUs of a host"},
               {0, 9, "--stages 9: more stages than blocks"},
               {2, 3, "--stages 3: does not divide GPUs / --tp"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fix.t = bad[i].t, fix.p = bad[i].p;
        err[0] = 0;
        CU_ASSERT_EQUAL(pf_blockenum_run(&f.pr, &fix, 8, 1, out, &n, NULL, err, sizeof err),
                        PF_EINFEASIBLE);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].why));
    }
    teardown(&f);
    /* t 4 divides the width 64 but not 2 heads */
    CU_ASSERT_EQUAL_FATAL(setup_heads(&f, 8, 16, 1e9, 2), 0);
    fix.t = 4, fix.p = 0;
    CU_ASSERT_EQUAL(pf_blockenum_run(&f.pr, &fix, 8, 1, out, &n, NULL, err, sizeof err),
                    PF_EINFEASIBLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--tp 4 does not divide the block's 2 attention heads"));
    teardown(&f);
}

void pf_suite_blockenum(void)
{
    CU_pSuite s = CU_add_suite("blockenum", NULL, NULL);
    CU_add_test(s, "pruned = brute force", test_brute_force);
    CU_add_test(s, "fixed dimensions, nothing fits", test_fixed_and_infeasible);
    CU_add_test(s, "a batch of 2^34: at most 2^20 micro-batches", test_huge_batch);
}
