#include "tests/testutil.h"
#include "planner/core/rng.h"
#include "planner/core/util.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/price.h"
#include "planner/inputs/topology.h"

#include <stdio.h>
#include <string.h>

pf_graph_t *pf_test_chain(int n, const double *cu, const double *param, const double *act)
{
    char err[256], name[32];
    pf_graph_t *g = pf_graph_new("hand", 1);
    for (int i = 0; g && i < n; i++) {
        snprintf(name, sizeof name, "op%d", i);
        pf_op_t op = {.id = i, .name = name, .fwd_ms = cu[i], .param_bytes = param[i],
                      .mem_fwd_bytes = act ? act[i] : 0};
        pf_graph_add_op(g, &op);
    }
    for (int i = 1; g && i < n; i++)
        pf_graph_add_edge(g, i - 1, i, 0);
    if (g && pf_graph_finalize(g, err, sizeof err) != PF_OK)
        pf_graph_destroy(&g);
    return g;
}

pf_cluster_t *pf_test_flat_cluster(int D, double gbps, double lat_us)
{
    pf_cluster_t *c = pf_cluster_new("flat", D);
    for (int i = 0; c && i < D; i++) {
        pf_device_t d = {.id = i, .host = i / 2, .mem_bytes = 80e9};
        pf_cluster_set_device(c, i, &d);
        for (int j = 0; j < i; j++)
            pf_cluster_set_link(c, i, j, gbps, lat_us);
    }
    return c;
}

pf_graph_t *pf_test_random_dag(uint64_t seed, int n, double p_edge)
{
    pf_rng_t rng;
    char err[256], name[32];
    pf_rng_seed(&rng, seed);
    pf_graph_t *g = pf_graph_new("random", 1);
    if (!g)
        return NULL;
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "op%d", i);
        pf_op_t op = {.id = i, .name = name, .type = "x"};
        op.fwd_ms = pf_rng_range(&rng, 0.5, 10);
        op.bwd_ms = pf_rng_range(&rng, 0.5, 10);
        op.param_bytes = pf_rng_range(&rng, 0, 1e8);
        op.mem_fwd_bytes = pf_rng_range(&rng, 0, 1e8);
        op.mem_bwd_bytes = pf_rng_range(&rng, 0, 1e8);
        pf_graph_add_op(g, &op);
    }
    for (int j = 1; j < n; j++) {
        int first = (int)pf_rng_below(&rng, (uint64_t)j);
        pf_graph_add_edge(g, first, j, pf_rng_range(&rng, 1e5, 1e8));
        for (int i = 0; i < j; i++)
            if (i != first && pf_rng_uniform(&rng) < p_edge)
                pf_graph_add_edge(g, i, j, pf_rng_range(&rng, 1e5, 1e8));
    }
    if (pf_graph_finalize(g, err, sizeof err) != 0) {
        fprintf(stderr, "random dag: %s\n", err);
        pf_graph_destroy(&g);
    }
    return g;
}

void pf_test_search_drive(pf_search_t *s, pf_test_search_t *seen)
{
    char err[512];
    uint64_t id;
    pf_job_t job;
    while (pf_search_next_job(s, &id, &job)) {
        pf_job_result_t res;
        if (seen && (unsigned)job.kind < PF_JOB_KIND_COUNT)
            seen->jobs[job.kind]++;
        CU_ASSERT_PTR_EQUAL(job.graph ? job.graph : pf_search_graph(s), pf_search_graph(s));
        pf_job_run(&job, &res);
        CU_ASSERT(pf_search_check_answer(s, id, &res, err, sizeof err) == PF_OK);
        CU_ASSERT_EQUAL(pf_search_answer(s, id, &res), 1);
        pf_job_result_clear(&res);
    }
    CU_ASSERT(pf_search_done(s));
}

pf_plan_t *pf_test_search(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                          pf_test_search_t *seen)
{
    char err[512];
    pf_test_search_t local;
    seen = seen ? seen : &local;
    memset(seen, 0, sizeof *seen);
    pf_search_t *s = pf_search_new(g, c, o, err, sizeof err);
    if (!s) {
        fprintf(stderr, "\n  search: %s\n", err);
        return NULL;
    }
    pf_test_search_drive(s, seen);
    pf_search_get_status(s, &seen->status);
    seen->graph_is_input = pf_search_graph(s) == g;
    pf_plan_t *p = NULL;
    if (pf_search_result(s, &p, err, sizeof err) != PF_OK)
        fprintf(stderr, "\n  search result: %s\n", err);
    pf_search_destroy(&s);
    return p;
}

int pf_test_err_from(const char *err, const char *file, const char *expect, size_t i)
{
    const char *base = strstr(err, file);
    int ok = base && strncmp(base, expect, strlen(expect)) == 0;
    if (!ok)
        fprintf(stderr, "\n  case %zu: got '%s', want '%s'\n", i, err, expect);
    return ok;
}

int pf_test_is_downset(const pf_graph_t *g, uint32_t set)
{
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (((set >> ed->dst) & 1) && !((set >> ed->src) & 1))
            return 0;
    }
    return 1;
}

void pf_test_cost_model(pf_cost_model_t *cm, double gbps, int mb, double limit_bytes)
{
    memset(cm, 0, sizeof *cm);
    pf_training_t t;
    pf_training_init(&t);
    cm->flat_gbps = gbps;
    cm->microbatches = mb;
    cm->stages = 1;
    cm->mem_limit_bytes = limit_bytes;
    pf_cost_model_set_training(cm, &t, 1, 0);
}

int pf_test_gpt13b_dgx_a100(int machines, double inter_gbps, pf_graph_t **g, pf_cluster_t **c)
{
    char err[256];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 40, mo.hidden = 5140, mo.heads = 20, mo.ffn = 20560, mo.seq = 2048;
    mo.vocab = 51200, mo.microbatch = 1, mo.precision_bytes = 2;
    pf_graph_t *raw = NULL;
    *g = NULL, *c = NULL;
    if (pf_model_build(&mo, &raw, err, sizeof err) != PF_OK)
        return -1;
    int rc = pf_price_graph(raw, pf_devmodel_preset("a100-80g"), PF_PREC_FP16, g, NULL, err,
                            sizeof err);
    pf_graph_destroy(&raw);
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX_A100);
    to.machines = machines, to.intra_gbps = 195, to.inter_gbps = inter_gbps;
    to.latency_us = 10, to.inter_latency_us = 20;
    if (rc != PF_OK || pf_topology_build(&to, c, err, sizeof err) != PF_OK) {
        pf_graph_destroy(g);
        return -1;
    }
    return 0;
}
