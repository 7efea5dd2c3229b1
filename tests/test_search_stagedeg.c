/* search_stagedeg: --stage-degrees in the whole search, in process (pf_test_search), on
 * PipeDream's VGG-16 profile and Parmesan's hier system of one machine of 8 GPUs. */
#include "planner/inputs/import.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/topology.h"
#include "planner/search/search_stagedeg.h"
#include "planner/search/search_state.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static pf_cluster_t *hier_1x8(void)
{
    char err[256];
    pf_topology_opts_t o;
    pf_topology_opts_init(&o, PF_TOPOLOGY_HIER);
    o.machines = 1, o.gpus_per_machine = 8;
    pf_cluster_t *c = NULL;
    return pf_topology_build(&o, &c, err, sizeof err) == PF_OK ? c : NULL;
}

static pf_graph_t *vgg(void)
{
    char err[256], path[512];
    pf_graph_t *g = NULL;
    pf_test_data("pipedream/vgg16.txt", path, sizeof path);
    return pf_import_pipedream(path, 0, &g, err, sizeof err) == PF_OK ? g : NULL;
}

/* The plain search and the one with --stage-degrees at global batch gb: both plan; the record's
 * uniform figure is the plain plan's step per sample, and the flag's plan is never slower per
 * sample than it (the uniform plan is one point of the space). Both plans stay for the caller. */
static void plan_both(const pf_graph_t *g, const pf_cluster_t *c, long long gb, pf_plan_t **uni,
                      pf_plan_t **deg)
{
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.global_batch = gb;
    *uni = pf_test_search(g, c, &o, NULL);
    o.stage_degrees = 1;
    *deg = pf_test_search(g, c, &o, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(*uni);
    CU_ASSERT_PTR_NOT_NULL_FATAL(*deg);
    CU_ASSERT_FALSE((*uni)->stagedeg.present);
    CU_ASSERT_FATAL((*deg)->stagedeg.present);
    double uni_ms = (*uni)->simulated_step_ms / gb, deg_ms = (*deg)->simulated_step_ms / gb;
    PF_ASSERT_CLOSE((*deg)->stagedeg.uniform_ms_per_sample, uni_ms, 1e-9);
    CU_ASSERT(deg_ms <= uni_ms * (1 + 1e-12));
}

/* The per-stage plan wins there (tests/integration/stage_degrees.sh says by how much): its
 * stages differ, use at most the 8 GPUs and share the step's 32 micro-batches (4096 / 128). */
static void test_vgg_on_one_machine(void)
{
    pf_graph_t *g = vgg();
    pf_cluster_t *c = hier_1x8();
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    pf_plan_t *uni, *deg;
    plan_both(g, c, 4096, &uni, &deg);
    CU_ASSERT(deg->stagedeg.chosen);
    CU_ASSERT(pf_plan_degrees_mixed(deg));
    CU_ASSERT(pf_plan_degrees_total_devices(deg) <= 8);
    CU_ASSERT_EQUAL(pf_plan_degrees_step_microbatches(deg), 32);
    double uni_ms = uni->simulated_step_ms / 4096, deg_ms = deg->simulated_step_ms / 4096;
    PF_ASSERT_CLOSE(deg->stagedeg.stagedeg_ms_per_sample, deg_ms, 1e-9);
    CU_ASSERT(deg_ms < uni_ms);
    pf_plan_destroy(&deg);
    pf_plan_destroy(&uni);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* The flag without a global batch is bad input, named. */
static void test_needs_global_batch(void)
{
    char err[256];
    pf_graph_t *g = vgg();
    pf_cluster_t *c = hier_1x8();
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.stage_degrees = 1;
    CU_ASSERT_EQUAL(pf_search_validate(g, c, &o, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "stage_degrees: needs global_batch"));
    o.global_batch = 4096 + 1;
    CU_ASSERT_EQUAL(pf_search_validate(g, c, &o, err, sizeof err), PF_EINPUT);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* A 2-layer GPT (hidden 4096) on one machine of 4 GPUs of 8 GiB: the per-stage DP's plan comes
 * out with every stage at one degree T = 4 (its SIMULATE job runs in the setting of T = 1, which
 * simulate.c refuses: it goes to simstages, as a mixed plan does; the review found this failed
 * the whole search). The flag's search succeeds and is no slower than the plain one. */
static void test_uniform_per_stage_plan_with_tp(void)
{
    char err[256];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 2, mo.hidden = 4096, mo.heads = 32, mo.seq = 1024;
    pf_graph_t *g = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_NVSWITCH);
    to.machines = 1, to.gpus_per_machine = 4, to.mem_bytes = 8.0 * (1 << 30);
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    pf_plan_t *uni, *deg;
    plan_both(g, c, 8, &uni, &deg);
    /* the case this test is for: one stage on one group of 4, simulated (a finite figure) */
    CU_ASSERT_STRING_EQUAL(deg->stagedeg.degrees, "1x4");
    CU_ASSERT(isfinite(deg->stagedeg.stagedeg_ms_per_sample));
    pf_plan_destroy(&deg);
    pf_plan_destroy(&uni);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Under the block search each degree trains as its best candidate (search_blocks.c); the
 * per-stage plan runs on the smallest degree's setting, so it must say that setting's training
 * (what its DP and SIMULATE jobs ran), not the search-wide best candidate's. GPT-3 13B on 8
 * A100, ZeRO 0, micro-batch 1: the best candidate is t 2 with sequence parallelism and no recomputation, the
 * per-stage plan's degree t 1 with selective recomputation. */
static void test_training_of_its_degree(void)
{
    char err[512], why[256] = "";
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_test_gpt13b_dgx_a100(1, 22.5, &g, &c), 0);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.global_batch = 64, o.block_search = 1, o.zero_auto = 0, o.train.zero = 0;
    o.stage_degrees = 1, o.microbatch_size = pf_graph_microbatch(g); /* the graph's: 1 */
    pf_search_t *s = pf_search_new(g, c, &o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    pf_test_search_drive(s, NULL);
    pf_plan_t *p = pf_search_stagedeg_plan(s, 0, why, sizeof why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const pf_training_t *own = &s->tap.tp[pf_search_stagedeg_tp(s)].opts.train;
    CU_ASSERT_NOT_EQUAL(own->sequence_parallel, s->o.train.sequence_parallel); /* the case */
    CU_ASSERT_EQUAL((int)p->train.recompute, (int)own->recompute);
    CU_ASSERT_EQUAL(p->train.sequence_parallel, own->sequence_parallel);
    CU_ASSERT_EQUAL(p->train.zero, own->zero);
    pf_plan_destroy(&p);
    pf_search_destroy(&s);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
}

void pf_suite_search_stagedeg(void)
{
    CU_pSuite s = CU_add_suite("search_stagedeg", NULL, NULL);
    CU_add_test(s, "VGG-16 on one machine of 8: the per-stage plan, against the uniform one",
                test_vgg_on_one_machine);
    CU_add_test(s, "the flag needs a global batch", test_needs_global_batch);
    CU_add_test(s, "a per-stage plan of one degree T > 1 is simulated, not refused",
                test_uniform_per_stage_plan_with_tp);
    CU_add_test(s, "the per-stage plan trains as its degree's setting",
                test_training_of_its_degree);
}
