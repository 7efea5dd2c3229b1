/* stage_rc: a plan whose stages recompute differently, on a tiny GPT (4 layers, h 64, 4 heads,
 * s 16) over two stages on two GPUs: the simulator's stage costs are each stage's level's
 * (the same numbers a plan recomputing alike at that level gives), and the fit moves a stage
 * that does not fit to the next heavier level, no further. */
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/topology.h"
#include "planner/sim/simulate.h"
#include "planner/sim/stage_rc.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    pf_graph_t *g;
    pf_cluster_t *c;
    pf_plan_t *p;
} fixture_t;

static void fixture_close(fixture_t *f)
{
    pf_plan_destroy(&f->p);
    pf_cluster_destroy(&f->c);
    pf_graph_destroy(&f->g);
}

/* Stage 0: the first half of the ops (the generator adds them in topological order), stage 1 the
 * rest; one replica each on devices 0 and 1. */
static int fixture_open(fixture_t *f)
{
    char err[256];
    memset(f, 0, sizeof *f);
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 4, mo.hidden = 64, mo.heads = 4, mo.seq = 16, mo.vocab = 100, mo.microbatch = 2;
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_HIER);
    to.machines = 1, to.gpus_per_machine = 2;
    if (pf_model_build(&mo, &f->g, err, sizeof err) || pf_topology_build(&to, &f->c, err, sizeof err) ||
        !(f->p = pf_plan_new(2, 1)))
        return -1;
    int n = pf_graph_nops(f->g), half = n / 2, *ops = malloc((size_t)n * sizeof *ops);
    if (!ops)
        return -1;
    for (int v = 0; v < n; v++)
        ops[v] = v;
    pf_plan_set_stage_ops(f->p, 0, ops, half);
    pf_plan_set_stage_ops(f->p, 1, ops + half, n - half);
    free(ops);
    pf_plan_stage_devices(f->p, 0)[0] = 0;
    pf_plan_stage_devices(f->p, 1)[0] = 1;
    f->p->microbatches = 4;
    return pf_plan_validate(f->p, f->g, f->c, err, sizeof err);
}

static void set_levels(pf_plan_t *p, pf_training_recompute_t all, int r0, int r1)
{
    p->train.recompute = all;
    p->stage_list[0].has_recompute = r0 >= 0, p->stage_list[0].recompute = r0 < 0 ? 0 : r0;
    p->stage_list[1].has_recompute = r1 >= 0, p->stage_list[1].recompute = r1 < 0 ? 0 : r1;
}

static int inputs(fixture_t *f, pf_simulate_input_t *in)
{
    char err[256];
    return pf_simulate_input_from_plan(f->g, f->c, f->p, in, err, sizeof err);
}

static void same_stage(const pf_simulate_stage_t *a, const pf_simulate_stage_t *b)
{
    PF_ASSERT_CLOSE(a->fwd_ms, b->fwd_ms, 1e-12);
    PF_ASSERT_CLOSE(a->bwd_ms, b->bwd_ms, 1e-12);
    PF_ASSERT_CLOSE(a->act_bytes, b->act_bytes, 1e-12);
    PF_ASSERT_CLOSE(a->static_bytes, b->static_bytes, 1e-12);
}

static void test_simulator_stage_costs(void)
{
    fixture_t f;
    CU_ASSERT_EQUAL_FATAL(fixture_open(&f), PF_OK);
    pf_simulate_input_t none, full, sel, mixed, back;
    set_levels(f.p, PF_RECOMPUTE_NONE, -1, -1);
    CU_ASSERT_EQUAL_FATAL(inputs(&f, &none), PF_OK);
    set_levels(f.p, PF_RECOMPUTE_FULL, -1, -1);
    CU_ASSERT_EQUAL_FATAL(inputs(&f, &full), PF_OK);
    set_levels(f.p, PF_RECOMPUTE_SELECTIVE, -1, -1);
    CU_ASSERT_EQUAL_FATAL(inputs(&f, &sel), PF_OK);
    /* stage 0 full, stage 1 none: each as the plan recomputing alike at its level */
    set_levels(f.p, PF_RECOMPUTE_FULL, PF_RECOMPUTE_FULL, PF_RECOMPUTE_NONE);
    CU_ASSERT_EQUAL_FATAL(inputs(&f, &mixed), PF_OK);
    same_stage(&mixed.stage[0], &full.stage[0]);
    same_stage(&mixed.stage[1], &none.stage[1]);
    /* the other way round, under a training that names the lighter level (a plan edited by
     * hand): the full stage is viewed here, not by the setting */
    set_levels(f.p, PF_RECOMPUTE_SELECTIVE, PF_RECOMPUTE_SELECTIVE, PF_RECOMPUTE_FULL);
    CU_ASSERT_EQUAL_FATAL(inputs(&f, &back), PF_OK);
    same_stage(&back.stage[0], &sel.stage[0]);
    same_stage(&back.stage[1], &full.stage[1]);
    /* not vacuous: full recomputes the forward and stores less */
    CU_ASSERT_TRUE(full.stage[0].bwd_ms > none.stage[0].bwd_ms + 0.5 * none.stage[0].fwd_ms);
    CU_ASSERT_TRUE(full.stage[1].act_bytes < sel.stage[1].act_bytes);
    CU_ASSERT_TRUE(sel.stage[1].act_bytes < none.stage[1].act_bytes);
    pf_simulate_input_clear(&none);
    pf_simulate_input_clear(&full);
    pf_simulate_input_clear(&sel);
    pf_simulate_input_clear(&mixed);
    pf_simulate_input_clear(&back);
    fixture_close(&f);
}

/* Stage 0 holds 2 micro-batches in flight and stage 1 one: with the limit between stage 0's
 * selective and full memory, stage 0 moves from none to full (selective does not fit either),
 * stage 1 stays at selective. */
static void test_fit(void)
{
    char err[256];
    fixture_t f;
    CU_ASSERT_EQUAL_FATAL(fixture_open(&f), PF_OK);
    pf_tp_setting_opts_t so;
    pf_tp_setting_opts_init(&so);
    so.train.recompute = PF_RECOMPUTE_FULL;
    pf_tp_setting_t *set = pf_tp_setting_new(f.g, f.c, &so, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(set);
    set_levels(f.p, PF_RECOMPUTE_FULL, PF_RECOMPUTE_NONE, PF_RECOMPUTE_SELECTIVE);
    pf_stage_rc_t x;
    CU_ASSERT_EQUAL_FATAL(pf_stage_rc_init(&x, f.g, set, f.p, 1, err, sizeof err), PF_OK);
    for (int r = 0; r < 3; r++)
        CU_ASSERT_PTR_NOT_NULL(x.g[r]);
    CU_ASSERT_TRUE(x.reserve_bytes[PF_RECOMPUTE_FULL] > 0);
    CU_ASSERT_EQUAL(x.reserve_bytes[PF_RECOMPUTE_SELECTIVE], 0);
    pf_cost_model_t cm;
    pf_cost_model_init(&cm, f.c, 2, f.p->microbatches, 0);
    pf_cost_model_set_training(&cm, &f.p->train, 1, 0);
    int *op_stage = pf_plan_op_stage(f.p, pf_graph_nops(f.g));
    double mem0[3], mem1[3];
    for (int r = 0; r < 3; r++) {
        cm.reserve_bytes = x.reserve_bytes[r];
        mem0[r] = pf_cost_stage_mem_bytes(x.g[r], op_stage, 0, &cm);
        mem1[r] = pf_cost_stage_mem_bytes(x.g[r], op_stage, 1, &cm);
    }
    free(op_stage);
    CU_ASSERT_TRUE_FATAL(mem0[2] < mem0[1] && mem0[1] < mem0[0]);
    double limit = (mem0[1] + mem0[2]) / 2;
    CU_ASSERT_TRUE_FATAL(mem1[1] < limit); /* stage 1 at selective fits */
    double headroom = 1 - limit / pf_cluster_min_mem_bytes(f.c);
    CU_ASSERT_EQUAL_FATAL(pf_stage_rc_fit(&x, f.p, f.c, &cm, headroom), PF_OK);
    CU_ASSERT_EQUAL(pf_plan_recompute_stage(f.p, 0), PF_RECOMPUTE_FULL);
    CU_ASSERT_EQUAL(pf_plan_recompute_stage(f.p, 1), PF_RECOMPUTE_SELECTIVE);
    PF_ASSERT_CLOSE(f.p->stage_list[0].peak_mem_bytes, mem0[2], 1e-12);
    PF_ASSERT_CLOSE(f.p->stage_list[1].peak_mem_bytes, mem1[1], 1e-12);
    PF_ASSERT_CLOSE(f.p->stage_list[0].mem_reserve_bytes, x.reserve_bytes[2], 1e-12);
    /* nothing fits: each stage at the setting's level, no further */
    set_levels(f.p, PF_RECOMPUTE_FULL, PF_RECOMPUTE_NONE, PF_RECOMPUTE_SELECTIVE);
    CU_ASSERT_EQUAL_FATAL(pf_stage_rc_fit(&x, f.p, f.c, &cm, 1 - 1e-9), PF_OK);
    CU_ASSERT_EQUAL(pf_plan_recompute_stage(f.p, 0), PF_RECOMPUTE_FULL);
    CU_ASSERT_EQUAL(pf_plan_recompute_stage(f.p, 1), PF_RECOMPUTE_FULL);
    pf_stage_rc_clear(&x);
    pf_tp_setting_destroy(&set);
    fixture_close(&f);
}

void pf_suite_stage_rc(void)
{
    CU_pSuite s = CU_add_suite("stage_rc", NULL, NULL);
    CU_add_test(s, "simulator: each stage at its own recomputation", test_simulator_stage_costs);
    CU_add_test(s, "fit: a stage that does not fit moves heavier, no further",
                test_fit);
}
