/* search: the request state machine driven by a fake executor that runs jobs inline, in order
 * and then in random order with duplicated and lost answers. The partition must not change and
 * the objective must stay within the binary search's epsilon of the in-order run. */
#include "planner/core/rng.h"
#include "planner/ir/collective.h"
#include "planner/search/search.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/sim/simulate.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t id;
    pf_job_t job;
} pending_t;

typedef struct {
    long long run, duplicates, lost, late_cancelled;
} chaos_stats_t;

/* In order: every job runs as soon as it is issued, its answer goes straight back
 * (pf_test_search); the status's "best" is the plan's objective, not the lowest of any
 * candidate. */
static pf_plan_t *run_in_order(const pf_graph_t *g, const pf_cluster_t *c,
                               const pf_search_opts_t *o)
{
    pf_test_search_t seen;
    pf_plan_t *p = pf_test_search(g, c, o, &seen);
    CU_ASSERT(p && seen.status.best_objective_ms == p->objective_ms);
    return p;
}

/* Random order: a pool of issued jobs; each step runs a random one and then loses its answer
 * (the job stays in the pool to be sent again, as the broker would after a worker death),
 * answers it twice, or answers it once. Cancelled jobs are sometimes answered anyway. */
static pf_plan_t *run_chaos(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                            uint64_t seed, chaos_stats_t *cs)
{
    char err[512];
    pf_search_t *s;
    pf_rng_t rng;
    pf_rng_seed(&rng, seed);
    if (!(s = pf_search_new(g, c, o, err, sizeof err)))
        return NULL;
    pending_t *pool = NULL;
    int n = 0, cap = 0;
    for (;;) {
        uint64_t id;
        pf_job_t job;
        while (pf_search_next_job(s, &id, &job)) {
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                pool = realloc(pool, (size_t)cap * sizeof *pool);
            }
            pool[n++] = (pending_t){id, job};
        }
        uint64_t gone[64];
        int k = pf_search_take_cancelled(s, gone, 64);
        for (int i = 0; i < k; i++)
            for (int j = 0; j < n; j++)
                if (pool[j].id == gone[i] && pf_rng_uniform(&rng) < 0.7) {
                    pool[j] = pool[--n]; /* most cancelled jobs are dropped, some still answer */
                    break;
                }
        if (n == 0)
            break;
        int pick = (int)pf_rng_below(&rng, (uint64_t)n);
        pending_t p = pool[pick];
        pf_job_result_t res;
        pf_job_run(&p.job, &res);
        cs->run++;
        double u = pf_rng_uniform(&rng);
        if (u < 0.2) {
            cs->lost++; /* answer lost: the job must be describable again and stays pending */
            pf_job_t again;
            if (pf_search_job(s, p.id, &again))
                pool[pick].job = again;
            else
                pool[pick] = pool[--n];
        } else {
            pool[pick] = pool[--n];
            int used = pf_search_answer(s, p.id, &res);
            cs->late_cancelled += !used;
            if (u < 0.35) {
                cs->duplicates++;
                CU_ASSERT_EQUAL(pf_search_answer(s, p.id, &res), 0); /* duplicates are ignored */
            }
        }
        pf_job_result_clear(&res);
    }
    free(pool);
    CU_ASSERT(pf_search_done(s));
    pf_plan_t *plan = NULL;
    if (pf_search_result(s, &plan, err, sizeof err) != PF_OK)
        fprintf(stderr, "chaos search result: %s\n", err);
    pf_search_destroy(&s);
    return plan;
}

static int same_partition(const pf_plan_t *a, const pf_plan_t *b)
{
    if (a->stages != b->stages || a->replicas != b->replicas)
        return 0;
    for (int s = 0; s < a->stages; s++) {
        if (a->stage_list[s].nops != b->stage_list[s].nops)
            return 0;
        if (memcmp(a->stage_list[s].ops, b->stage_list[s].ops,
                   (size_t)a->stage_list[s].nops * sizeof(int)))
            return 0;
    }
    return 1;
}

static void check_against_in_order(const pf_graph_t *g, const pf_cluster_t *c,
                                   const pf_search_opts_t *o, int seeds)
{
    pf_plan_t *ref = run_in_order(g, c, o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    CU_ASSERT(pf_plan_is_mapped(ref));
    CU_ASSERT(ref->mapping.present && ref->cs_map.present && ref->p2p_map.present);
    /* the plan's objective is "full" under its devices, never worse than the CS baseline's
     * candidate mapping by more than the search's epsilon */
    chaos_stats_t cs = {0};
    for (int seed = 1; seed <= seeds; seed++) {
        pf_plan_t *p = run_chaos(g, c, o, (uint64_t)seed, &cs);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT(same_partition(ref, p));
        PF_ASSERT_CLOSE(p->objective_ms, ref->objective_ms, 2 * o->rel_eps);
        pf_plan_destroy(&p);
    }
    /* the runs did exercise what they claim to: probes, losses, duplicates, late answers */
    CU_ASSERT(ref->mapping.probes > 0);
    CU_ASSERT(cs.lost > 0 && cs.duplicates > 0 && cs.late_cancelled > 0);
    if (getenv("PF_TEST_VERBOSE"))
        fprintf(stderr, "\n  jobs %lld (in order), probes %d; chaos: run %lld lost %lld dup %lld "
                "late %lld\n", ref->search.jobs, ref->mapping.probes, cs.run, cs.lost,
                cs.duplicates, cs.late_cancelled);
    pf_plan_destroy(&ref);
}

static void test_chaos_random_dag(void)
{
    char err[256];
    pf_graph_t *g = pf_test_random_dag(11, 14, 0.15);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_UNIFORM);
    to.devices = 8;
    to.seed = 3;
    pf_cluster_t *c;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.candidates = 2;
    o.probes_in_flight = 3;
    o.rel_eps = 1e-3;
    o.coarsen_k = -1;
    o.probe_seconds = 0; /* no probe deadline: a loaded machine must not change the answer */
    check_against_in_order(g, c, &o, 6);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* BERT-4 on an 8-device random_blk_2 cluster (seed 5): the chaos and hostile-worker cases. */
static void bert4_on_blk2(pf_graph_t **g, pf_cluster_t **c)
{
    char err[256];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_BERT);
    mo.layers = 4;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, g, err, sizeof err), PF_OK);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_RANDOM_BLK2);
    to.devices = 8;
    to.seed = 5;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, c, err, sizeof err), PF_OK);
}

static void test_chaos_bert(void)
{
    pf_graph_t *g;
    pf_cluster_t *c;
    bert4_on_blk2(&g, &c);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.probes_in_flight = 4;
    o.probe_seconds = 0; /* as above */
    check_against_in_order(g, c, &o, 4);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

static void test_job_bookkeeping(void)
{
    char err[256];
    pf_graph_t *g = pf_test_random_dag(5, 8, 0.2);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_HIER);
    to.machines = 2;
    to.gpus_per_machine = 2;
    pf_cluster_t *c;
    pf_topology_build(&to, &c, err, sizeof err);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    pf_search_t *s;
    /* 8 ops have few downsets: by default no coarsening, so alpha is moot and each S gets one
     * DP job (D = 4: S in {1, 2, 4}) */
    CU_ASSERT_PTR_NOT_NULL_FATAL(s = pf_search_new(g, c, &o, err, sizeof err));
    pf_search_status_t st;
    uint64_t id, ids[16];
    pf_job_t job;
    int n = 0;
    while (n < 16 && pf_search_next_job(s, &id, &job)) {
        CU_ASSERT_PTR_NULL(job.partition.group);
        n++;
    }
    CU_ASSERT_EQUAL(n, 3);
    pf_search_destroy(&s);
    /* coarsening to K = 4 hyper-ops: one grouping per alpha, three alphas per S: nine DP jobs,
     * ids 1..9 */
    o.coarsen_k = 4;
    CU_ASSERT_PTR_NOT_NULL_FATAL(s = pf_search_new(g, c, &o, err, sizeof err));
    n = 0;
    while (n < 16 && pf_search_next_job(s, &id, &job)) {
        CU_ASSERT_EQUAL(job.kind, PF_JOB_DP_PARTITION);
        CU_ASSERT(job.partition.group != NULL && job.partition.ngroups == 4);
        ids[n++] = id;
    }
    CU_ASSERT_EQUAL(n, 9);
    for (int i = 0; i < n; i++)
        CU_ASSERT_EQUAL(ids[i], (uint64_t)i + 1);
    pf_search_get_status(s, &st);
    CU_ASSERT_EQUAL(st.phase, PF_PHASE_PARTITION);
    CU_ASSERT_EQUAL(st.jobs_outstanding, 9);
    /* unknown ids and wrong kinds are ignored */
    pf_job_result_t res = {.kind = PF_JOB_DP_PARTITION, .status = PF_OK};
    CU_ASSERT_EQUAL(pf_search_answer(s, 99, &res), 0);
    res.kind = PF_JOB_MAP_PROBE;
    CU_ASSERT_EQUAL(pf_search_answer(s, 1, &res), 0);
    /* a poisoned job fails the whole request with its error */
    pf_search_job_failed(s, 3, "worker crashed");
    CU_ASSERT(pf_search_done(s));
    pf_plan_t *p;
    CU_ASSERT_EQUAL(pf_search_result(s, &p, err, sizeof err), PF_ERR);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "worker crashed"));
    CU_ASSERT_EQUAL(pf_search_take_cancelled(s, ids, 16), 8); /* the other outstanding jobs */
    pf_search_destroy(&s);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

static void test_infeasible_op(void)
{
    char err[256];
    pf_graph_t *g = pf_test_random_dag(5, 6, 0.2); /* params up to 1e8 bytes: x4 state */
    pf_cluster_t *c = pf_cluster_new("tiny", 2);
    for (int i = 0; i < 2; i++) {
        pf_device_t d = {.id = i, .mem_bytes = 1e6};
        pf_cluster_set_device(c, i, &d);
    }
    pf_cluster_set_link(c, 0, 1, 10, 0);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    CU_ASSERT_EQUAL(pf_search_validate(g, c, &o, err, sizeof err), PF_EINFEASIBLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "with its parameter state; devices have"));
    err[0] = '\0';
    CU_ASSERT_PTR_NULL(pf_search_new(g, c, &o, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "with its parameter state; devices have"));
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Two devices, one stage, global batch one micro-batch: only T 2 gives it (T 1 needs two
 * replicas). A
 * linear whose output's rank is not its input's has no tensor-parallel plan, so T 2 is dropped
 * in TAP: the search fails saying so and that no other degree gives the batch, where it said
 * only the first (the user read "no plan fits" and not why T 1 was not tried). */
static void test_degrees_why(void)
{
    char err[512];
    pf_graph_t *g = pf_graph_new("odd", 4);
    pf_op_t a = {.id = 0, .name = "a", .type = "linear", .fwd_ms = 1, .bwd_ms = 2,
                 .param_bytes = 128, .weight = {2, {8, 8}}, .input = {2, {4, 8}},
                 .output = {2, {4, 8}}};
    pf_op_t b = a;
    b.id = 1, b.name = "b", b.output = (pf_shape_t){3, {4, 8, 1}};
    CU_ASSERT_FATAL(g && pf_graph_add_op(g, &a) >= 0 && pf_graph_add_op(g, &b) >= 0);
    CU_ASSERT_FATAL(pf_graph_add_edge(g, 0, 1, 64) >= 0);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_cluster_t *c = pf_test_flat_cluster(2, 100, 0);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.global_batch = 4;
    o.stages = 1;
    pf_search_t *s = pf_search_new(g, c, &o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    pf_test_search_drive(s, NULL);
    pf_plan_t *p = NULL;
    CU_ASSERT_EQUAL(pf_search_result(s, &p, err, sizeof err), PF_EINFEASIBLE);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "tensor parallelism 2: no plan of unit"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no other tensor-parallel degree gives 4 samples per step"));
    pf_search_destroy(&s);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* The job door passes the cancel flag to the probe: a raised flag abandons even a probe whose
 * target any mapping meets, and the abandoned probe is no answer (PF_ERR "cancelled"), never
 * "no mapping at this target": a copy cancelled at its deadline is still answered, and a
 * not-found answer would move t_l up to a target that some mapping meets. */
static void test_cancelled_probe(void)
{
    char err[256];
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_UNIFORM);
    to.devices = 8;
    pf_cluster_t *c;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    double cu[4] = {1, 2, 3, 4}, par[4] = {1e6, 1e6, 1e6, 1e6}, msg[16] = {0};
    msg[1] = msg[4] = 1e6;
    pf_stage_graph_t *sg = pf_stage_graph_new(4, 2, cu, par, msg);
    atomic_int cancel;
    atomic_init(&cancel, 0);
    pf_job_t job = {.kind = PF_JOB_MAP_PROBE, .cluster = c, .stage_graph = sg,
                    .inst = PF_MAP_INST_FULL, .target_ms = 1e12, .symmetry = 1, .cancel = &cancel};
    pf_job_result_t res;
    CU_ASSERT_EQUAL(pf_job_run(&job, &res), PF_OK);
    CU_ASSERT(res.probe.found && res.ndevices == 8);
    pf_job_result_clear(&res);
    atomic_store(&cancel, 1);
    CU_ASSERT_EQUAL(pf_job_run(&job, &res), PF_ERR);
    CU_ASSERT_STRING_EQUAL(res.error, "cancelled");
    CU_ASSERT(!res.probe.found && res.devices == NULL);
    pf_job_result_clear(&res);
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&c);
}

/* Bounds that start as adjacent doubles. Two ops of c_u = 1000 ms, one edge of 1 byte, S = 2 on
 * two devices: B(0,1) = 1e7 GB/s (1 byte in 1e-13 ms), B(1,0) = 5e6 GB/s (2e-13 ms). The ulp of
 * 1000 is 2^-43 = 1.14e-13 ms, so a stage costs 1000 + 1 ulp when it sends over 0 -> 1 and
 * 1000 + 2 ulp over 1 -> 0. Eq. 10 gives t_l = 1000 + 1 ulp (each stage on its best device),
 * every mapping has one stage on the slow direction: t_r = 1000 + 2 ulp. With eps = 1e-300 the
 * interval is not converged, yet no target lies strictly inside it: the search must end there
 * (it used to wait for a probe it never issued). */
static void test_adjacent_bounds(void)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("two", 1);
    pf_op_t a = {.id = 0, .fwd_ms = 1000}, b = {.id = 1, .fwd_ms = 1000};
    pf_graph_add_op(g, &a);
    pf_graph_add_op(g, &b);
    pf_graph_add_edge(g, 0, 1, 1);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_cluster_t *c = pf_cluster_new("asym", 2);
    for (int i = 0; i < 2; i++) {
        pf_device_t d = {.id = i, .mem_bytes = 1e12};
        pf_cluster_set_device(c, i, &d);
    }
    pf_cluster_set_bw(c, 0, 1, 1e7);
    pf_cluster_set_bw(c, 1, 0, 5e6);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.stages = 2;
    o.rel_eps = 1e-300;
    pf_plan_t *p = run_in_order(g, c, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    double one = nextafter(1000.0, INFINITY), two = nextafter(one, INFINITY);
    CU_ASSERT_EQUAL(p->objective_ms, two);
    CU_ASSERT_EQUAL(p->mapping.lower_bound_ms, one);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Answers are checked against their jobs before they move anything: a partition of the wrong
 * shape, a "found" mapping that repeats a device or costs more than it claims. A rejected answer
 * leaves its job outstanding, and the right answer is then taken. */
static void test_bad_answers(void)
{
    char err[256];
    pf_graph_t *g = pf_test_random_dag(9, 10, 0.2);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_UNIFORM);
    to.devices = 4;
    to.seed = 7;
    pf_cluster_t *c;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.stages = 2; /* R = 2: one DP job, then m and ar probes */
    o.candidates = 1;
    o.probes_in_flight = 1;
    pf_search_t *s;
    CU_ASSERT_PTR_NOT_NULL_FATAL(s = pf_search_new(g, c, &o, err, sizeof err));
    uint64_t id;
    pf_job_t job;
    CU_ASSERT_FATAL(pf_search_next_job(s, &id, &job));
    pf_job_result_t res;
    CU_ASSERT_EQUAL_FATAL(pf_job_run(&job, &res), PF_OK);
    /* the plan the job asked for, but claiming 3 replicas */
    res.plan->replicas = 3;
    CU_ASSERT_EQUAL(pf_search_check_answer(s, id, &res, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "partition of 2 stages x 3 replicas"));
    CU_ASSERT_EQUAL(pf_search_answer(s, id, &res), 0);
    res.plan->replicas = 2;
    int *ops = res.plan->stage_list[1].ops; /* op in two stages */
    ops[0] = res.plan->stage_list[0].ops[0];
    CU_ASSERT_EQUAL(pf_search_check_answer(s, id, &res, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "is also in stage"));
    pf_job_result_clear(&res);
    pf_search_job(s, id, &job); /* still outstanding: run it again */
    CU_ASSERT_EQUAL_FATAL(pf_job_run(&job, &res), PF_OK);
    CU_ASSERT_EQUAL(pf_search_check_answer(s, id, &res, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_search_answer(s, id, &res), 1);
    pf_job_result_clear(&res);

    /* the first probe; answer "found" with forged mappings */
    int probed = 0;
    while (!probed && pf_search_next_job(s, &id, &job)) {
        if (job.kind != PF_JOB_MAP_PROBE)
            continue;
        probed = 1;
        pf_job_t easy = job;
        easy.target_ms = 1e30; /* any mapping meets it: a real mapping to forge from */
        CU_ASSERT_EQUAL_FATAL(pf_job_run(&easy, &res), PF_OK);
        CU_ASSERT_FATAL(res.probe.found && res.ndevices == 4);
        double real = res.probe.objective_ms;
        res.probe.objective_ms = real / 2; /* claims less than it costs */
        CU_ASSERT_EQUAL(pf_search_check_answer(s, id, &res, err, sizeof err), PF_EINPUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "it costs"));
        res.probe.objective_ms = real;
        if (real > job.target_ms) { /* honest about the cost, but above the target */
            CU_ASSERT_EQUAL(pf_search_check_answer(s, id, &res, err, sizeof err), PF_EINPUT);
        }
        res.devices[1] = res.devices[0];
        CU_ASSERT_EQUAL(pf_search_check_answer(s, id, &res, err, sizeof err), PF_EINPUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "out of range or taken"));
        CU_ASSERT_EQUAL(pf_search_answer(s, id, &res), 0);
        pf_job_result_clear(&res);
        /* the honest answer to the real probe is taken */
        CU_ASSERT_EQUAL(pf_job_run(&job, &res), PF_OK);
        CU_ASSERT_EQUAL(pf_search_check_answer(s, id, &res, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL(pf_search_answer(s, id, &res), 1);
        pf_job_result_clear(&res);
    }
    CU_ASSERT(probed);
    pf_search_destroy(&s);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Phase 4 by brute force: drive a search in order, keep every SIMULATE job's plan and schedule
 * and its answer; the plan must be the (candidate, schedule) of least simulated step per sample
 * among those that fit, and every answer must equal a simulation of that plan run here. */
typedef struct {
    pf_plan_t *plan;
    pf_training_schedule_t schedule;
    double step_ms;
    int fits;
} sim_seen_t;

static pf_plan_t *run_recording(const pf_graph_t *g, const pf_cluster_t *c,
                                const pf_search_opts_t *o, sim_seen_t *seen, int *nseen, int cap,
                                int *nreshard)
{
    char err[512];
    pf_search_t *s = pf_search_new(g, c, o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    uint64_t id;
    pf_job_t job;
    *nseen = *nreshard = 0;
    while (pf_search_next_job(s, &id, &job)) {
        pf_job_result_t res;
        pf_job_run(&job, &res);
        if (job.kind == PF_JOB_SIMULATE && *nseen < cap) {
            CU_ASSERT_EQUAL(res.status, PF_OK);
            seen[*nseen] = (sim_seen_t){pf_plan_clone(job.plan), job.schedule, res.sim.step_ms,
                                        res.sim.fits};
            ++*nseen;
        }
        if (job.kind == PF_JOB_RESHARD) {
            CU_ASSERT(res.status == PF_OK && res.reshard.time_ms > 0);
            ++*nreshard;
        }
        CU_ASSERT_EQUAL(pf_search_answer(s, id, &res), 1);
        pf_job_result_clear(&res);
    }
    CU_ASSERT(pf_search_done(s));
    pf_plan_t *p = NULL;
    if (pf_search_result(s, &p, err, sizeof err) != PF_OK)
        fprintf(stderr, "search result: %s\n", err);
    pf_search_destroy(&s);
    return p;
}

/* T = 1: the plan's communication per step is the simulator's pricing on its devices: pipeline
 * transfers to and from the neighbours by the postal model (x MB), the data-parallel all-reduce
 * of each stage's parameters by collective.h's cheapest algorithm over its replicas. */
static void check_comm(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p)
{
    pf_stage_graph_t *sg = pf_stage_graph_from_plan(g, p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sg);
    int S = p->stages, R = p->replicas, group[64];
    double pp = 0, dp = 0, cut[64];
    CU_ASSERT_FATAL(S <= 64 && pf_simulate_cut_bytes(g, p, cut) == PF_OK);
    for (int st = 0; st < S; st++) {
        const int *dev = p->stage_list[st].devices;
        for (int r = 0; r < R; r++) {
            double sum = 0; /* the tensors across the cut on each side, each once */
            if (st + 1 < S)
                sum += pf_cluster_xfer_ms(c, dev[r], p->stage_list[st + 1].devices[r], cut[st]);
            if (st > 0)
                sum += pf_cluster_xfer_ms(c, dev[r], p->stage_list[st - 1].devices[r],
                                          cut[st - 1]);
            pp = fmax(pp, p->microbatches * sum);
            group[r] = dev[r];
        }
        pf_collective_group_t grp;
        CU_ASSERT_EQUAL(pf_collective_group_from_cluster(c, group, R, 0, &grp), PF_OK);
        dp = fmax(dp, pf_collective_best_ms(&grp, PF_COLL_ALLREDUCE,
                                            pf_stage_graph_param_bytes(sg, st)));
    }
    CU_ASSERT(p->comm.present);
    PF_ASSERT_CLOSE(p->comm.pp_ms, pp, 1e-12);
    PF_ASSERT_CLOSE(p->comm.dp_ms, dp, 1e-12);
    CU_ASSERT(R == 1 || dp > 0);
    pf_stage_graph_destroy(&sg);
}

/* The plan's baselines are the SIMULATE jobs after the candidates' (CS first), or the winner's
 * step for one not simulated (on the winner's devices); the plan is the winner, or a baseline
 * that fits and simulates faster, adopted. */
static void check_baselines(const pf_plan_t *p, const sim_seen_t *seen, int want_sims, int n,
                            int best)
{
    double won = seen[best].step_ms, cs = p->cs_map.simulated_step_ms,
           p2p = p->p2p_map.simulated_step_ms, fastest = won;
    int nb = n - want_sims;
    /* the steps of the baselines simulated, in job order (one not simulated is the winner) */
    double ran[2] = {nb == 2 || p2p == won ? cs : p2p, p2p};
    for (int b = 0; b < nb; b++) {
        CU_ASSERT_EQUAL(seen[want_sims + b].step_ms, ran[b]);
        if (seen[want_sims + b].fits)
            fastest = fmin(fastest, seen[want_sims + b].step_ms);
    }
    CU_ASSERT(nb == 2 || cs == won || p2p == won);
    CU_ASSERT(nb >= 1 || (cs == won && p2p == won));
    CU_ASSERT_EQUAL(p->simulated_step_ms, fastest);
    CU_ASSERT_EQUAL(p->cs_map.adopted + p->p2p_map.adopted, fastest < won);
}

static void check_simulated_choice(const pf_graph_t *g, const pf_cluster_t *c,
                                   const pf_search_opts_t *o, int want_sims, int tp)
{
    char err[256];
    sim_seen_t seen[64];
    int n = 0, nreshard = 0;
    pf_plan_t *p = run_recording(g, c, o, seen, &n, 64, &nreshard);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    /* and last the winner's two baselines (CS map, p2p map), SIMULATE jobs too, but for one on
     * the winner's own devices (it is the winner) */
    CU_ASSERT_FATAL(n >= want_sims && n <= want_sims + 2);
    int best = -1;
    double best_per_sample = INFINITY;
    for (int i = 0; i < n; i++) {
        const pf_plan_t *q = seen[i].plan;
        /* the answer is the simulator's on the candidate's own plan */
        pf_simulate_input_t in;
        pf_simulate_result_t *r = NULL;
        pf_plan_t *mine = pf_plan_clone(q);
        mine->train.schedule = seen[i].schedule;
        snprintf(mine->schedule, sizeof mine->schedule, "%s", pf_training_schedule_name(seen[i].schedule));
        CU_ASSERT_EQUAL_FATAL(pf_simulate_input_from_plan(g, c, mine, &in, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL_FATAL(pf_simulate(&in, &r, err, sizeof err), PF_OK);
        PF_ASSERT_CLOSE(r->step_ms, seen[i].step_ms, 1e-9);
        pf_simulate_result_destroy(&r);
        pf_simulate_input_clear(&in);
        pf_plan_destroy(&mine);
        CU_ASSERT_EQUAL(q->tensor_parallel, tp);
        double per_sample = seen[i].step_ms / ((double)pf_graph_microbatch(g) *
                                               q->microbatches * q->replicas);
        if (i < want_sims && seen[i].fits && per_sample < best_per_sample) {
            best_per_sample = per_sample;
            best = i;
        }
    }
    CU_ASSERT_FATAL(best >= 0);
    check_baselines(p, seen, want_sims, n, best);
    for (int b = want_sims; b < n; b++) /* under the winner's schedule and shape */
        CU_ASSERT(seen[b].schedule == seen[best].schedule &&
                  seen[b].plan->stages == p->stages && seen[b].plan->replicas == p->replicas);
    CU_ASSERT_STRING_EQUAL(p->schedule, pf_training_schedule_name(seen[best].schedule));
    CU_ASSERT_EQUAL(p->train.schedule, seen[best].schedule);
    CU_ASSERT(p->stages == seen[best].plan->stages && p->replicas == seen[best].plan->replicas);
    if (tp > 1 && p->stages > 1)
        CU_ASSERT(nreshard > 0);
    if (tp == 1) {
        CU_ASSERT_EQUAL(nreshard, 0);
        CU_ASSERT_FATAL(p->replicas <= 64);
        check_comm(g, c, p);
    }
    if (getenv("PF_TEST_VERBOSE"))
        for (int i = 0; i < n; i++)
            fprintf(stderr, "  %d x %d x %d %-10s %.3f ms fits %d%s\n", seen[i].plan->stages,
                    seen[i].plan->replicas, seen[i].plan->tensor_parallel,
                    pf_training_schedule_name(seen[i].schedule), seen[i].step_ms, seen[i].fits,
                    i == best ? "  <-" : "");
    for (int i = 0; i < n; i++)
        pf_plan_destroy(&seen[i].plan);
    pf_plan_destroy(&p);
}

static void test_simulated_choice(void)
{
    pf_graph_t *g;
    pf_cluster_t *c;
    bert4_on_blk2(&g, &c);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.tp = 1;
    o.candidates = 3;
    /* three candidates (one per S), each under the three schedules */
    check_simulated_choice(g, c, &o, 9, 1);
    /* --schedule gpipe: one simulation per candidate, and the plan runs gpipe */
    o.schedules = 1u << PF_SCHEDULE_GPIPE;
    o.train.schedule = PF_SCHEDULE_GPIPE;
    check_simulated_choice(g, c, &o, 3, 1);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* T = 2 on two 4-GPU hosts: pipelines time their cross-stage transfers by RESHARD jobs, and the
 * simulated step the plan carries is the one `planfarm simulate` computes from the plan alone
 * (TAP rebuilt in-process). */
static void test_simulated_choice_tp(void)
{
    char err[256];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_BERT);
    mo.layers = 4;
    pf_graph_t *g;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_HIER);
    to.devices = 8;
    pf_cluster_t *c;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.tp = 2;
    o.stages = 2;
    o.candidates = 1;
    check_simulated_choice(g, c, &o, 3, 2);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Phase 4's pruning (search_sim.c): a (candidate, schedule) whose lower bound (simbound.h)
 * already loses to a simulated step is never simulated. Driven in order, every SIMULATE job the
 * search ever queued is described while still queued; those never issued are run here at the
 * end: each must lose to the plan's step per sample, so the plan is the best of all of them.
 * The random DAG of the chaos test prunes one. */
typedef struct {
    uint64_t id;
    pf_job_t job;
    int issued;
} queued_sim_t;

static int note_queued_sims(const pf_search_t *s, queued_sim_t *q, int n, int cap)
{
    for (uint64_t id = 1; id < 4096 && n < cap; id++) {
        pf_job_t job;
        int known = 0;
        for (int i = 0; i < n && !known; i++)
            known = q[i].id == id;
        if (!known && pf_search_job(s, id, &job) && job.kind == PF_JOB_SIMULATE)
            q[n++] = (queued_sim_t){id, job, 0};
    }
    return n;
}

static double per_sample(const pf_graph_t *g, const pf_plan_t *p, double step_ms)
{
    return step_ms / ((double)pf_graph_microbatch(g) * p->microbatches * p->replicas);
}

static void test_pruned_simulations_lose(void)
{
    char err[512];
    pf_graph_t *g = pf_test_random_dag(11, 14, 0.15);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_UNIFORM);
    to.devices = 8, to.seed = 3;
    pf_cluster_t *c;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.candidates = 2, o.rel_eps = 1e-3, o.coarsen_k = -1, o.probe_seconds = 0;
    pf_search_t *s = pf_search_new(g, c, &o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    queued_sim_t q[64];
    int n = 0;
    uint64_t id;
    pf_job_t job;
    while (pf_search_next_job(s, &id, &job)) {
        n = note_queued_sims(s, q, n, 64);
        for (int i = 0; i < n; i++)
            q[i].issued |= q[i].id == id;
        pf_job_result_t res;
        pf_job_run(&job, &res);
        CU_ASSERT_EQUAL(pf_search_answer(s, id, &res), 1);
        pf_job_result_clear(&res);
    }
    pf_plan_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_search_result(s, &p, err, sizeof err), PF_OK);
    int pruned = 0;
    for (int i = 0; i < n; i++) {
        if (q[i].issued)
            continue;
        pruned++;
        pf_job_result_t res;
        CU_ASSERT_EQUAL_FATAL(pf_job_run(&q[i].job, &res), PF_OK);
        double bound = pf_job_simulate_bound_ms(&q[i].job);
        CU_ASSERT(bound > 0 && bound <= res.sim.step_ms);
        CU_ASSERT(per_sample(g, q[i].job.plan, bound) > per_sample(g, p, p->simulated_step_ms));
        CU_ASSERT(per_sample(g, q[i].job.plan, res.sim.step_ms) >
                  per_sample(g, p, p->simulated_step_ms));
        pf_job_result_clear(&res);
    }
    CU_ASSERT(pruned >= 1);
    CU_ASSERT(n - pruned >= 3); /* the candidates' other pairs and the two baselines ran */
    pf_plan_destroy(&p);
    pf_search_destroy(&s);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* A hostile worker sees every job first; the driver does what the broker does with a worker's
 * answer: pf_search_check_answer, and on a rejection the job goes to a healthy worker (run here).
 * FAST_SIM answers every SIMULATE with a 0.001 ms step that fits; STATUS answers every job of a
 * kind whose errors are failures (TAP, probes, resharding, simulations) with status -3
 * (PF_EINFEASIBLE); FAST_RESHARD answers every RESHARD with a thousandth of its time (faster
 * transfers would favour a pipelined candidate). DP_PARTITION jobs are answered honestly: an infeasible partition is a
 * verdict the search takes (DESIGN.md "What a worker key is trusted with"). */
typedef enum { HOSTILE_FAST_SIM, HOSTILE_STATUS, HOSTILE_FAST_RESHARD } hostile_t;

static pf_plan_t *run_hostile(const pf_graph_t *g, const pf_cluster_t *c,
                              const pf_search_opts_t *o, hostile_t how, int *rejected)
{
    char err[512];
    pf_search_t *s = pf_search_new(g, c, o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    uint64_t id;
    pf_job_t job;
    *rejected = 0;
    while (pf_search_next_job(s, &id, &job)) {
        pf_job_result_t res;
        pf_job_run(&job, &res);
        if (how == HOSTILE_FAST_SIM && job.kind == PF_JOB_SIMULATE) {
            res.sim.step_ms = 0.001;
            res.sim.fits = 1;
            res.sim.mem_bytes = 0;
        } else if (how == HOSTILE_FAST_RESHARD && job.kind == PF_JOB_RESHARD) {
            res.reshard.time_ms *= 1e-3;
        } else if (how == HOSTILE_STATUS && job.kind != PF_JOB_DP_PARTITION) {
            pf_job_result_clear(&res);
            memset(&res, 0, sizeof res);
            res.kind = job.kind;
            res.status = PF_EINFEASIBLE;
            snprintf(res.error, sizeof res.error, "hostile");
        }
        int rc = pf_search_check_answer(s, id, &res, err, sizeof err);
        if (rc != PF_OK) { /* that attempt failed: the healthy worker runs the job */
            ++*rejected;
            CU_ASSERT_PTR_NOT_NULL(strstr(err, how == HOSTILE_FAST_SIM       ? "re-simulated here"
                                               : how == HOSTILE_FAST_RESHARD ? "re-solved here"
                                                                             : "failed at its worker"));
            pf_job_result_clear(&res);
            CU_ASSERT_FATAL(pf_search_job(s, id, &job));
            pf_job_run(&job, &res);
            CU_ASSERT_EQUAL(pf_search_check_answer(s, id, &res, err, sizeof err), PF_OK);
        }
        CU_ASSERT_EQUAL(pf_search_answer(s, id, &res), 1);
        pf_job_result_clear(&res);
    }
    CU_ASSERT(pf_search_done(s));
    pf_plan_t *p = NULL;
    if (pf_search_result(s, &p, err, sizeof err) != PF_OK)
        fprintf(stderr, "hostile search result: %s\n", err);
    pf_search_destroy(&s);
    return p;
}

static void check_hostile(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                          int with_reshard)
{
    pf_plan_t *ref = run_in_order(g, c, o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    for (int how = HOSTILE_FAST_SIM; how <= (with_reshard ? HOSTILE_FAST_RESHARD : HOSTILE_STATUS);
         how++) {
        int rejected;
        pf_plan_t *p = run_hostile(g, c, o, (hostile_t)how, &rejected);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT(rejected > 0);
        CU_ASSERT(same_partition(ref, p));
        CU_ASSERT_EQUAL(p->tensor_parallel, ref->tensor_parallel);
        CU_ASSERT_STRING_EQUAL(p->schedule, ref->schedule);
        CU_ASSERT_EQUAL(p->simulated_step_ms, ref->simulated_step_ms);
        CU_ASSERT(p->simulated_step_ms > 0.001);
        CU_ASSERT_EQUAL(p->objective_ms, ref->objective_ms);
        for (int st = 0; st < ref->stages; st++)
            CU_ASSERT_EQUAL(memcmp(p->stage_list[st].devices, ref->stage_list[st].devices,
                                   (size_t)ref->replicas * ref->tensor_parallel * sizeof(int)),
                            0);
        pf_plan_destroy(&p);
    }
    pf_plan_destroy(&ref);
}

/* Neither hostile worker changes the plan (BERT-4 on random_blk_2, 3 candidates, T = 1; and T = 2
 * on two hosts, with RESHARD jobs) nor fails the search. */
static void test_hostile_worker(void)
{
    char err[256];
    pf_graph_t *g;
    pf_cluster_t *c;
    bert4_on_blk2(&g, &c);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.tp = 1;
    o.candidates = 3;
    check_hostile(g, c, &o, 0);
    pf_cluster_destroy(&c);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_HIER);
    to.devices = 8;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    pf_search_opts_init(&o);
    o.tp = 2;
    o.stages = 2;
    o.candidates = 1;
    check_hostile(g, c, &o, 1);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* A SIMULATE job's memory verdict by hand. Random DAG of 6 ops, stages {0,1,2} and {3,4,5},
 * R = 1, MB = 4, bf16 Adam: 16 B of state per 2-byte parameter, 8 per byte of param_bytes
 * (training.h). Stage 0 holds k micro-batches of its ops' mem_fwd_bytes:
 *   1F1B   k = min(MB, S - 0) = 2      GPipe  k = MB = 4      eager-1F1B  k = min(4, 3) = 3
 *   m_k = 8 P0 + k A0 (P0, A0: stage 0's param and mem_fwd bytes; reserve 0).
 * With every device holding (m_2 + m_3) / 2, 1F1B fits and eager-1F1B and GPipe do not
 * (stage 1 holds 1 micro-batch under all three and its state must fit too: checked). */
static void test_simulate_job_memory(void)
{
    char err[256];
    pf_graph_t *g = NULL;
    double P[2], A[2], m2 = 0, m3 = 0, m4 = 0, mem = 0;
    /* the first draw that makes the case: stage 1 fits what stage 0 needs under 1F1B */
    for (uint64_t seed = 1; seed < 200; seed++) {
        pf_graph_destroy(&g);
        g = pf_test_random_dag(seed, 6, 0.3);
        P[0] = P[1] = A[0] = A[1] = 0;
        for (int v = 0; v < 6; v++) {
            P[v / 3] += pf_graph_op(g, v)->param_bytes;
            A[v / 3] += pf_graph_op(g, v)->mem_fwd_bytes;
        }
        m2 = 8 * P[0] + 2 * A[0];
        m3 = 8 * P[0] + 3 * A[0];
        m4 = 8 * P[0] + 4 * A[0];
        mem = 0.5 * (m2 + m3);
        if (A[0] > 0 && 8 * P[1] + A[1] < mem)
            break;
    }
    CU_ASSERT_FATAL(A[0] > 0 && 8 * P[1] + A[1] < mem);
    pf_cluster_t *c = pf_cluster_new("two", 2);
    for (int i = 0; i < 2; i++) {
        pf_device_t d = {.id = i, .host = 0, .mem_bytes = mem};
        pf_cluster_set_device(c, i, &d);
    }
    pf_cluster_set_link(c, 0, 1, 10, 1);
    pf_plan_t *p = pf_plan_new(2, 1);
    int a[] = {0, 1, 2}, b[] = {3, 4, 5};
    pf_plan_set_stage_ops(p, 0, a, 3);
    pf_plan_set_stage_ops(p, 1, b, 3);
    pf_plan_stage_devices(p, 0)[0] = 0;
    pf_plan_stage_devices(p, 1)[0] = 1;
    p->microbatches = 4;
    CU_ASSERT_EQUAL_FATAL(pf_plan_validate(p, g, c, err, sizeof err), PF_OK);
    static const pf_training_schedule_t sched[3] = {PF_SCHEDULE_1F1B, PF_SCHEDULE_EAGER_1F1B,
                                           PF_SCHEDULE_GPIPE};
    const double want[3] = {m2, m3, m4};
    for (int i = 0; i < 3; i++) {
        pf_job_t job;
        pf_job_result_t res;
        pf_job_init(&job, PF_JOB_SIMULATE);
        job.graph = g;
        job.cluster = c;
        job.plan = p;
        job.schedule = sched[i];
        CU_ASSERT_EQUAL_FATAL(pf_job_run(&job, &res), PF_OK);
        PF_ASSERT_CLOSE(res.sim.mem_bytes, want[i], 1e-12);
        CU_ASSERT_EQUAL(res.sim.mem_limit_bytes, mem);
        CU_ASSERT_EQUAL(res.sim.fits, i == 0);
        CU_ASSERT(res.sim.step_ms > 0);
        CU_ASSERT_EQUAL(pf_job_check_answer(&job, &res, err, sizeof err), PF_OK);
        /* its lower bound (simbound.h) is at most its step; set, the cancel flag stops it */
        double bound = pf_job_simulate_bound_ms(&job);
        CU_ASSERT(bound > 0 && bound <= res.sim.step_ms);
        pf_job_result_clear(&res);
        atomic_int stop = 1;
        job.cancel = &stop;
        CU_ASSERT_EQUAL(pf_job_run(&job, &res), PF_ERR);
        CU_ASSERT_PTR_NOT_NULL(strstr(res.error, "cancelled"));
        pf_job_result_clear(&res);
    }
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* ---- --layer-aligned over recomputation x stages x ZeRO ---- */

/* Two hosts of 4 GPUs with mem_bytes each (100 GB/s inside a host, 10 between). */
static pf_cluster_t *two_hosts(double mem_bytes)
{
    pf_cluster_t *c = pf_cluster_new("2x4", 8);
    for (int i = 0; i < 8; i++) {
        pf_device_t d = {.id = i, .host = i / 4, .mem_bytes = mem_bytes, .tflops = 100};
        pf_cluster_set_device(c, i, &d);
        for (int j = 0; j < i; j++)
            pf_cluster_set_link(c, i, j, i / 4 == j / 4 ? 100 : 10, 0);
    }
    return c;
}

/* The stage of every op of every block (layers.N) is the same, the blocks' stages never go
 * back, and the plan's JSON gives every block to one stage's "blocks" at most. */
static int aligned_plan(const pf_plan_t *p, const pf_graph_t *g, const pf_cluster_t *c)
{
    int n = pf_graph_nops(g), ok = 1, prev = 0;
    int *op_stage = pf_plan_op_stage(p, n);
    const int *topo = pf_graph_topo(g);
    for (int i = 0; i < n && op_stage; i++) {
        const char *a = pf_graph_op(g, topo[i])->name;
        size_t la = pf_training_block_len(a);
        for (int j = i + 1; la && j < n; j++) {
            const char *b = pf_graph_op(g, topo[j])->name;
            if (pf_training_block_len(b) == la && !strncmp(a, b, la))
                ok &= op_stage[topo[i]] == op_stage[topo[j]];
        }
        if (la) {
            ok &= op_stage[topo[i]] >= prev;
            prev = op_stage[topo[i]];
        }
    }
    free(op_stage);
    char *text = NULL, err[256];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int seen[64] = {0}, total = 0;
    if (!f || pf_plan_write(p, g, c, f, err, sizeof err) != PF_OK)
        return 0;
    fclose(f);
    ok &= !strstr(text, "cut_blocks");
    /* "first": "layers.F", "last": "layers.L": count the layers each stage claims */
    for (const char *q = text; (q = strstr(q, "\"blocks\"")); q++) {
        int lo = 0, hi = -1;
        const char *fst = strstr(q, "\"first\": \"layers."), *lst = strstr(q, "\"last\": \"layers.");
        if (!fst || !lst || sscanf(fst, "\"first\": \"layers.%d", &lo) != 1 ||
            sscanf(lst, "\"last\": \"layers.%d", &hi) != 1 || lo < 0 || hi >= 64)
            ok = 0;
        for (int k = lo; ok && k <= hi; k++)
            ok &= !seen[k]++;
    }
    for (int k = 0; k < 64; k++)
        total += seen[k];
    free(text);
    return ok && total == 6;
}

/* A 6-layer GPT on 8 GPUs at several memory sizes, for every recomputation, S in {2, 4} and
 * ZeRO 0, 1, 3: each search ends in a plan whose stages hold whole layers, or in
 * PF_EINFEASIBLE naming --layer-aligned. The memory sizes bracket where whole layers stop
 * fitting while op-level cuts still do (the partition's retry on single ops used to take
 * those). */
static void test_layer_aligned_grid(void)
{
    char err[512];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 6, mo.hidden = 512, mo.heads = 8, mo.seq = 512, mo.vocab = 1024;
    mo.microbatch = 2;
    pf_graph_t *g;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    const pf_training_recompute_t rec[] = {PF_RECOMPUTE_NONE, PF_RECOMPUTE_SELECTIVE,
                                           PF_RECOMPUTE_FULL};
    const int stages[] = {2, 4}, zero[] = {0, 1, 3};
    int plans = 0, refused = 0;
    const char *why = "--layer-aligned: no plan with whole layers per stage fits in memory; no "
                      "partition into ";
    for (int r = 0; r < 3; r++)
        for (int si = 0; si < 2; si++)
            for (int z = 0; z < 3; z++)
                for (double mb = 40; mb <= 400; mb *= 1.25) {
                    pf_cluster_t *c = two_hosts(mb * 1e6);
                    pf_search_opts_t o;
                    pf_search_opts_init(&o);
                    o.tp = 1 + (r == 1 && si == 0 && z == 1); /* T = 2 once: TAP's graph */
                    o.stages = stages[si];
                    o.candidates = 1;
                    o.probe_seconds = 0;
                    o.layer_aligned = 1;
                    o.train.recompute = rec[r];
                    o.train.zero = zero[z];
                    o.schedules = 1u << PF_SCHEDULE_1F1B;
                    o.train.schedule = PF_SCHEDULE_1F1B;
                    pf_search_t *s = pf_search_new(g, c, &o, err, sizeof err);
                    if (!s)
                        fprintf(stderr, "layer-aligned grid: %s\n", err);
                    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
                    pf_test_search_drive(s, NULL);
                    pf_plan_t *p = NULL;
                    int rc = pf_search_result(s, &p, err, sizeof err);
                    if (rc == PF_OK) {
                        plans++;
                        CU_ASSERT(aligned_plan(p, g, c));
                    } else {
                        refused++;
                        CU_ASSERT_EQUAL(rc, PF_EINFEASIBLE);
                        /* or one op fits no GPU, whatever the alignment */
                        CU_ASSERT(!strncmp(err, why, strlen(why)) ||
                                  (!strncmp(err, "op ", 3) && strstr(err, "parameter state")));
                    }
                    pf_plan_destroy(&p);
                    pf_search_destroy(&s);
                    pf_cluster_destroy(&c);
                }
    CU_ASSERT(plans > 0 && refused > 0);
    pf_graph_destroy(&g);
}

/* A block whose ops are not consecutive in graph order (layers.0.a -> layers.1.a -> layers.0.b)
 * cannot be one group of whole-layer stages: refused before any job, naming the op. */
static void test_layer_aligned_interleaved(void)
{
    char err[512];
    const char *names[] = {"layers.0.a", "layers.1.a", "layers.0.b"};
    pf_graph_t *g = pf_graph_new("interleaved", 1);
    for (int v = 0; v < 3; v++) {
        pf_op_t op = {.id = v, .name = names[v], .fwd_ms = 1};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 1);
    pf_graph_add_edge(g, 1, 2, 1);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_cluster_t *c = two_hosts(1e12);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.tp = 1;
    o.layer_aligned = 1;
    pf_search_t *s = pf_search_new(g, c, &o, err, sizeof err);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "block layers.0 are not consecutive in graph order "
                                       "(layers.0.b comes after"));
    pf_search_destroy(&s);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* A baseline that simulates faster than the searched devices gives the plan its devices: the
 * mapping objective (eq. 5-7: the ring of eq. 7 over the slowest pair) prices the data-parallel
 * reduction otherwise than the simulator (NCCL's cheapest algorithm) and prices no schedule.
 * ResNet-50 on 4 DGX-1 in 4 stages (`make run`'s examples, `--stages 4`; measured: the searched
 * devices simulate 417 ms, the p2p map 220): the plan is the p2p map's, on its devices (its
 * objective), no slower than either map, and records the searched devices' slower step. */
static void test_faster_baseline_adopted(void)
{
    char err[256];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_RESNET);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX1);
    to.machines = 4;
    pf_graph_t *g = NULL;
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    pf_search_opts_t o;
    pf_search_opts_init(&o);
    o.stages = 4;
    pf_plan_t *p = pf_test_search(g, c, &o, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_TRUE(p->p2p_map.adopted && !p->cs_map.adopted);
    CU_ASSERT_DOUBLE_EQUAL(p->simulated_step_ms, p->p2p_map.simulated_step_ms, 1e-9);
    CU_ASSERT(p->mapping.searched_step_ms > p->simulated_step_ms);
    CU_ASSERT(p->simulated_step_ms <= p->cs_map.simulated_step_ms);
    CU_ASSERT_DOUBLE_EQUAL(p->objective_ms, p->p2p_map.objective_ms, 1e-9); /* its devices */
    pf_plan_destroy(&p);
    pf_graph_destroy(&g);
    pf_cluster_destroy(&c);
}

void pf_suite_search(void)
{
    CU_pSuite s = CU_add_suite("search", NULL, NULL);
    CU_add_test(s, "job ids, status, ignored answers, poisoned job", test_job_bookkeeping);
    CU_add_test(s, "why every degree was dropped", test_degrees_why);
    CU_add_test(s, "an op too big for any device fails before any job", test_infeasible_op);
    CU_add_test(s, "answers are checked against their jobs; a rejected one is sent again",
                test_bad_answers);
    CU_add_test(s, "a hostile worker (0.001 ms simulations, status -3) changes no plan and "
                   "fails no search", test_hostile_worker);
    CU_add_test(s, "a cancelled probe job stops and is no answer (PF_ERR)", test_cancelled_probe);
    CU_add_test(s, "bounds that start as adjacent doubles end the search", test_adjacent_bounds);
    CU_add_test(s, "random order, duplicates, losses: random DAG on uniform_dist",
                test_chaos_random_dag);
    CU_add_test(s, "random order, duplicates, losses: BERT-4 on random_blk_2",
                test_chaos_bert);
    CU_add_test(s, "phase 4: the plan is the brute-force best of its candidates' simulations",
                test_simulated_choice);
    CU_add_test(s, "phase 4 with T = 2: RESHARD jobs, and the plan's step re-simulates equal",
                test_simulated_choice_tp);
    CU_add_test(s, "phase 4: a baseline simulating faster than the searched devices gives the "
                   "plan its devices", test_faster_baseline_adopted);
    CU_add_test(s, "phase 4: a simulation skipped by its lower bound could not have won",
                test_pruned_simulations_lose);
    CU_add_test(s, "--layer-aligned over recomputation x stages x ZeRO x memory: whole layers "
                   "per stage or exit 3 naming it", test_layer_aligned_grid);
    CU_add_test(s, "--layer-aligned refuses a block whose ops are not consecutive",
                test_layer_aligned_interleaved);
    CU_add_test(s, "a SIMULATE job's memory under 1f1b, eager-1f1b and gpipe, by hand; its "
                   "bound; cancelled, it stops",
                test_simulate_job_memory);
}
