/* codec: round trips of every planner object through protobuf, and rejection of malformed
 * messages (truncated bytes, out-of-range indices, wrong sizes). */
#include "planner/core/util.h"
#include "proto/job_codec.h"
#include "proto/plan_options_codec.h"
#include "planner/ir/devmodel.h"
#include "tests/testutil.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pf_cluster_t *small_cluster(int with_latency)
{
    pf_cluster_t *c = pf_cluster_new("c3", 3);
    for (int i = 0; i < 3; i++) {
        pf_device_t d = {.id = 40 + i, .host = i / 2, .name = NULL, .mem_bytes = 1e9 * (i + 1),
                         .tflops = 100};
        pf_cluster_set_device(c, i, &d);
    }
    pf_cluster_set_link(c, 0, 1, 10.5, with_latency ? 2.5 : 0);
    pf_cluster_set_link(c, 0, 2, 20, with_latency ? 3 : 0);
    pf_cluster_set_link(c, 1, 2, 1.25, with_latency ? 4 : 0);
    pf_cluster_set_bw(c, 2, 1, 1.5); /* asymmetric on purpose */
    return c;
}

static void test_graph_round_trip(void)
{
    char err[256];
    pf_graph_t *g = pf_test_random_dag(3, 9, 0.3);
    uint8_t *buf;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_encode_graph(g, &buf, &len), PF_OK);
    pf_graph_t *h;
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_decode_graph(buf, len, &h, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_graph_nops(h), pf_graph_nops(g));
    CU_ASSERT_EQUAL(pf_graph_nedges(h), pf_graph_nedges(g));
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const pf_op_t *a = pf_graph_op(g, v), *b = pf_graph_op(h, v);
        CU_ASSERT(a->id == b->id && a->fwd_ms == b->fwd_ms && a->bwd_ms == b->bwd_ms);
        CU_ASSERT(a->param_bytes == b->param_bytes && a->mem_bwd_bytes == b->mem_bwd_bytes);
        CU_ASSERT_STRING_EQUAL(a->name, b->name);
    }
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        CU_ASSERT_EQUAL(pf_graph_edge(g, e)->src, pf_graph_edge(h, e)->src);
        CU_ASSERT(pf_graph_edge(g, e)->bytes == pf_graph_edge(h, e)->bytes);
    }
    /* every strict prefix of the bytes is rejected or decodes to a valid graph: never a crash */
    for (size_t cut = 0; cut < len; cut += 1 + len / 50) {
        pf_graph_t *x = NULL;
        int rc = pf_model_codec_decode_graph(buf, cut, &x, err, sizeof err);
        CU_ASSERT(rc == PF_OK || rc == PF_EINPUT);
        pf_graph_destroy(&x);
    }
    free(buf);
    pf_graph_destroy(&h);
    pf_graph_destroy(&g);
}

static void test_graph_bad_messages(void)
{
    char err[256];
    pf_arena_t *a = pf_arena_new();
    pf_graph_t *g = pf_test_random_dag(4, 5, 0.2), *x;
    Planfarm__Graph *m = pf_model_codec_graph_to_pb(a, g);
    m->edges[0]->dst = 77;
    CU_ASSERT_EQUAL(pf_model_codec_graph_from_pb(m, &x, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "graph.edges[0]: op index out of range");
    m->edges[0]->dst = m->edges[0]->src; /* self-loop: caught by the graph's own validation */
    CU_ASSERT_EQUAL(pf_model_codec_graph_from_pb(m, &x, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "self-loop"));
    m->edges[0]->dst = 4;
    m->ops[1]->fwd_ms = -1;
    CU_ASSERT_EQUAL(pf_model_codec_graph_from_pb(m, &x, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "graph: ops[1].fwd_ms: negative (-1)");
    m->ops[1]->fwd_ms = 1;
    m->microbatch = 0;
    CU_ASSERT_EQUAL(pf_model_codec_graph_from_pb(m, &x, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NULL(x);
    uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
    CU_ASSERT_EQUAL(pf_model_codec_decode_graph(junk, sizeof junk, &x, err, sizeof err), PF_EINPUT);
    pf_arena_destroy(&a);
    pf_graph_destroy(&g);
}

/* Graph version 2's work (FLOPs, bytes, GEMM shape) crosses the wire bit for bit; an op
 * without it stays without it; a GEMM shape with a zero dimension is refused by finalize. */
static void test_graph_work_round_trip(void)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("w", 2), *h = NULL;
    pf_op_t a = {.id = 7, .name = "fc", .type = "linear", .fwd_ms = 1, .bwd_ms = 2,
                 .work = {.fwd_flops = 3.25e12, .bwd_flops = 6.5e12, .bytes_read = 1.5e9,
                          .bytes_written = 0.1 + 0.2, .gemm_m = 8192, .gemm_n = 6400,
                          .gemm_k = 1600, .gemm_batch = 3}};
    pf_op_t b = {.id = 9, .name = "relu", .type = "relu", .fwd_ms = 0.5, .bwd_ms = 1};
    CU_ASSERT_EQUAL(pf_graph_add_op(g, &a), 0);
    CU_ASSERT_EQUAL(pf_graph_add_op(g, &b), 1);
    CU_ASSERT_EQUAL(pf_graph_add_edge(g, 0, 1, 100), 0);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    uint8_t *buf;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_encode_graph(g, &buf, &len), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_decode_graph(buf, len, &h, err, sizeof err), PF_OK);
    CU_ASSERT(memcmp(&pf_graph_op(h, 0)->work, &a.work, sizeof a.work) == 0);
    const pf_op_work_t *w = &pf_graph_op(h, 1)->work;
    CU_ASSERT(w->fwd_flops == 0 && w->bwd_flops == 0 && w->bytes_read == 0 &&
              w->bytes_written == 0 && w->gemm_m == 0 && w->gemm_batch == 0);
    free(buf);
    pf_arena_t *ar = pf_arena_new();
    Planfarm__Graph *m = pf_model_codec_graph_to_pb(ar, g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_PTR_NULL(m->ops[1]->gemm);
    m->ops[0]->gemm->k = 0;
    pf_graph_t *x = NULL;
    CU_ASSERT_EQUAL(pf_model_codec_graph_from_pb(m, &x, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "graph: ops[0].gemm.k: 0 is not a dimension"));
    m->ops[0]->gemm->k = 1600;
    m->ops[0]->bytes_read = -1;
    CU_ASSERT_EQUAL(pf_model_codec_graph_from_pb(m, &x, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "graph: ops[0].bytes_read: negative (-1)");
    CU_ASSERT_PTR_NULL(x);
    pf_arena_destroy(&ar);
    pf_graph_destroy(&h);
    pf_graph_destroy(&g);
}

static void test_cluster_round_trip(void)
{
    char err[256];
    for (int lat = 0; lat <= 1; lat++) {
        pf_cluster_t *c = small_cluster(lat), *d;
        uint8_t *buf;
        size_t len;
        CU_ASSERT_EQUAL_FATAL(pf_model_codec_encode_cluster(c, &buf, &len), PF_OK);
        CU_ASSERT_EQUAL_FATAL(pf_model_codec_decode_cluster(buf, len, &d, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL(memcmp(pf_cluster_bw_matrix(c), pf_cluster_bw_matrix(d), 9 * sizeof(double)),
                        0);
        CU_ASSERT_EQUAL(memcmp(pf_cluster_lat_matrix(c), pf_cluster_lat_matrix(d),
                               9 * sizeof(double)),
                        0);
        CU_ASSERT_EQUAL(pf_cluster_has_latency(d), lat);
        CU_ASSERT_EQUAL(pf_cluster_device(d, 2)->id, 42);
        CU_ASSERT_EQUAL(pf_cluster_device(d, 2)->host, 1);
        free(buf);
        pf_cluster_destroy(&d);
        pf_cluster_destroy(&c);
    }
    pf_arena_t *a = pf_arena_new();
    pf_cluster_t *c = small_cluster(0), *d;
    Planfarm__Cluster *m = pf_model_codec_cluster_to_pb(a, c);
    m->n_bandwidth_gbps = 8;
    CU_ASSERT_EQUAL(pf_model_codec_cluster_from_pb(m, &d, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "cluster.bandwidth_gbps: 8 entries, expected 9");
    m->n_bandwidth_gbps = 9;
    double zero[9] = {0};
    m->bandwidth_gbps = zero;
    CU_ASSERT_EQUAL(pf_model_codec_cluster_from_pb(m, &d, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cluster: bandwidth_gbps[0][1]: zero"));
    pf_arena_destroy(&a);
    pf_cluster_destroy(&c);
}

static pf_plan_t *mapped_plan(void)
{
    pf_plan_t *p = pf_plan_new(2, 1);
    int a[] = {0, 1, 2}, b[] = {3, 4};
    pf_plan_set_stage_ops(p, 0, a, 3);
    pf_plan_set_stage_ops(p, 1, b, 2);
    pf_plan_stage_devices(p, 0)[0] = 2;
    pf_plan_stage_devices(p, 1)[0] = 0;
    pf_plan_set_names(p, "m", "c3");
    p->devices = 3;
    p->partition_objective_ms = 12.25;
    p->objective_ms = 13.5;
    p->stage_list[1].peak_mem_bytes = 1e9;
    p->mapping.present = 1;
    snprintf(p->mapping.instantiation, sizeof p->mapping.instantiation, "ar");
    p->mapping.probes = 7;
    p->mapping.symmetric_pruned = 123456789012LL;
    p->cs_map = (pf_baseline_t){1, 20, 90, 1};
    p->mapping.searched_step_ms = 120;
    p->partition_search.present = 1;
    p->partition_search.downsets = 42;
    p->partition_search.exact = 1;
    return p;
}

static void test_plan_and_results(void)
{
    char err[256];
    pf_arena_t *a = pf_arena_new();
    pf_plan_t *p = mapped_plan(), *q;
    Planfarm__Plan *m = pf_model_codec_plan_to_pb(a, p);
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_plan_from_pb(m, 5, 3, &q, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(q->stages, 2);
    CU_ASSERT_EQUAL(q->stage_list[0].nops, 3);
    CU_ASSERT_EQUAL(q->stage_list[1].ops[1], 4);
    CU_ASSERT_EQUAL(q->stage_list[0].devices[0], 2);
    CU_ASSERT(q->partition_objective_ms == 12.25 && q->objective_ms == 13.5);
    CU_ASSERT(isnan(q->simulated_step_ms)); /* absent stays absent */
    CU_ASSERT_STRING_EQUAL(q->mapping.instantiation, "ar");
    CU_ASSERT_EQUAL(q->mapping.symmetric_pruned, 123456789012LL);
    CU_ASSERT(q->cs_map.present && !q->p2p_map.present && q->cs_map.simulated_step_ms == 90);
    CU_ASSERT(q->cs_map.adopted && q->mapping.searched_step_ms == 120);
    CU_ASSERT(q->partition_search.present && q->partition_search.downsets == 42);
    CU_ASSERT(!q->search.present);
    CU_ASSERT(!q->blocks.present);
    pf_plan_destroy(&q);
    /* a SIMULATE job's worker interleaves the plan's virtual stages (planner/sim/chunks.h) */
    p->blocks.present = 1, p->blocks.virtual_stages = 3;
    m = pf_model_codec_plan_to_pb(a, p);
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_plan_from_pb(m, 5, 3, &q, err, sizeof err), PF_OK);
    CU_ASSERT(q->blocks.present && q->blocks.virtual_stages == 3);
    CU_ASSERT_FALSE(q->blocks.tp_comm_overlap);
    pf_plan_destroy(&q);
    /* and its tensor-parallel overlap, with one virtual stage too */
    p->blocks.virtual_stages = 1, p->blocks.tp_comm_overlap = 1;
    m = pf_model_codec_plan_to_pb(a, p);
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_plan_from_pb(m, 5, 3, &q, err, sizeof err), PF_OK);
    CU_ASSERT(q->blocks.present && q->blocks.tp_comm_overlap && q->blocks.virtual_stages == 1);
    pf_plan_destroy(&q);
    p->blocks.present = 0, p->blocks.virtual_stages = 0, p->blocks.tp_comm_overlap = 0;
    /* each stage's recomputation where they differ (field 22); none sent when they agree */
    CU_ASSERT_EQUAL(m->n_stage_recompute, 0);
    p->stage_list[0].has_recompute = 1, p->stage_list[0].recompute = PF_RECOMPUTE_FULL;
    p->stage_list[1].has_recompute = 1, p->stage_list[1].recompute = PF_RECOMPUTE_NONE;
    Planfarm__Plan *mr = pf_model_codec_plan_to_pb(a, p);
    CU_ASSERT_EQUAL_FATAL(mr->n_stage_recompute, 2);
    CU_ASSERT(mr->stage_recompute[0] == 2 && mr->stage_recompute[1] == 0);
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_plan_from_pb(mr, 5, 3, &q, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_plan_recompute_stage(q, 0), PF_RECOMPUTE_FULL);
    CU_ASSERT_EQUAL(pf_plan_recompute_stage(q, 1), PF_RECOMPUTE_NONE);
    pf_plan_destroy(&q);
    mr->stage_recompute[1] = 3;
    CU_ASSERT_EQUAL(pf_model_codec_plan_from_pb(mr, 5, 3, &q, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "plan.stage_recompute[1]: 3 is not 0, 1 or 2");
    mr->n_stage_recompute = 1;
    CU_ASSERT_EQUAL(pf_model_codec_plan_from_pb(mr, 5, 3, &q, err, sizeof err), PF_EINPUT);
    p->stage_list[0].has_recompute = p->stage_list[1].has_recompute = 0;
    /* indices must lie inside the graph and the cluster the job named */
    CU_ASSERT_EQUAL(pf_model_codec_plan_from_pb(m, 4, 3, &q, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "plan.stage_list[1].ops[1]: index out of range");
    CU_ASSERT_EQUAL(pf_model_codec_plan_from_pb(m, 5, 2, &q, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "plan.stage_list[0].devices[0]: out of range");

    /* results: a partition and a probe */
    pf_job_result_t r = {.kind = PF_JOB_DP_PARTITION, .status = PF_OK, .plan = p, .seconds = 1.5};
    Planfarm__JobResult *rm = pf_job_codec_result_to_pb(a, 77, &r);
    pf_job_result_t back;
    CU_ASSERT_EQUAL_FATAL(pf_job_codec_result_from_pb(rm, 5, 3, &back, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(rm->id, 77u);
    CU_ASSERT(back.plan && back.plan->stage_list[1].nops == 2 && back.seconds == 1.5);
    pf_job_result_clear(&back);
    int dev[3] = {2, 0, 1};
    pf_job_result_t pr = {.kind = PF_JOB_MAP_PROBE, .status = PF_OK, .devices = dev,
                          .ndevices = 3};
    pr.probe = (pf_probe_result_t){.found = 1, .objective_ms = 4.5, .nodes = 99};
    rm = pf_job_codec_result_to_pb(a, 78, &pr);
    CU_ASSERT_EQUAL_FATAL(pf_job_codec_result_from_pb(rm, 5, 3, &back, err, sizeof err), PF_OK);
    CU_ASSERT(back.probe.found && back.probe.objective_ms == 4.5 && back.probe.nodes == 99);
    CU_ASSERT(back.ndevices == 3 && back.devices[0] == 2 && back.devices[2] == 1);
    pf_job_result_clear(&back);
    rm->probe->devices[1] = 2; /* a device used twice */
    CU_ASSERT_EQUAL(pf_job_codec_result_from_pb(rm, 5, 3, &back, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "result.probe.devices[1]: out of range or repeated");
    rm->status = 5;
    CU_ASSERT_EQUAL(pf_job_codec_result_from_pb(rm, 5, 3, &back, err, sizeof err), PF_EINPUT);
    pf_plan_destroy(&p);
    pf_arena_destroy(&a);
}

/* A plan whose stages differ (Stage fields 6, 7): stage 0 on 2 replicas, stage 1 on one, a step
 * of 2 micro-batches; the degrees and the devices come back. Degrees on some stages only, or a
 * degree that does not divide the step, are refused. */
static void test_plan_stage_degrees(void)
{
    char err[256];
    pf_arena_t *a = pf_arena_new();
    pf_plan_t *p = mapped_plan(), *q = NULL;
    int d[] = {2, 1}, t[] = {1, 1};
    CU_ASSERT_EQUAL_FATAL(pf_plan_degrees_set(p, d, t, 2), PF_OK);
    pf_plan_stage_devices(p, 0)[0] = 2, pf_plan_stage_devices(p, 0)[1] = 1;
    pf_plan_stage_devices(p, 1)[0] = 0;
    Planfarm__Plan *m = pf_model_codec_plan_to_pb(a, p);
    CU_ASSERT(m->stage_list[0]->replicas == 2 && m->stage_list[1]->tp == 1);
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_plan_from_pb(m, 5, 3, &q, err, sizeof err), PF_OK);
    CU_ASSERT(pf_plan_degrees_mixed(q) && pf_plan_degrees_replicas(q, 0) == 2);
    CU_ASSERT(q->replicas == 2 && q->microbatches == 1);
    CU_ASSERT(q->stage_list[0].devices[1] == 1 && q->stage_list[1].devices[0] == 0);
    pf_plan_destroy(&q);
    m->stage_list[1]->replicas = 0, m->stage_list[1]->tp = 0;
    CU_ASSERT_EQUAL(pf_model_codec_plan_from_pb(m, 5, 3, &q, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "plan.stage_list: 1 of 2 stages give their degrees (all or none)");
    m->stage_list[1]->replicas = 1, m->stage_list[1]->tp = 1;
    /* a step of 1 x 3 = 3 micro-batches that stage 1's 2 replicas cannot share out (8 devices:
     * the degrees' check, not the cluster's size, refuses it) */
    m->microbatches = 1, m->replicas = 3;
    m->stage_list[0]->replicas = 3, m->stage_list[1]->replicas = 2;
    CU_ASSERT_EQUAL(pf_model_codec_plan_from_pb(m, 5, 8, &q, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "stage_list[1].replicas: 2 does not divide the step's 3 "
                                "micro-batches (microbatches x replicas)");
    CU_ASSERT_PTR_NULL(q);
    pf_plan_destroy(&p);
    pf_arena_destroy(&a);
}

static void test_jobs(void)
{
    char err[256];
    pf_arena_t *a = pf_arena_new();
    pf_graph_t *g = pf_test_random_dag(8, 6, 0.2);
    pf_cluster_t *c = small_cluster(1);
    pf_blob_ref_t gr = {.hash = {1, 2, 3}, .hash_len = 20, .size = 100};
    pf_blob_ref_t cr = {.hash = {9}, .hash_len = 20, .size = 50};
    int group[6] = {0, 0, 1, 1, 2, 2};
    pf_job_t job;
    pf_job_init(&job, PF_JOB_DP_PARTITION);
    job.graph = g;
    job.cluster = c;
    job.partition.stages = 2;
    job.partition.replicas = 1;
    job.partition.alpha = 100;
    job.partition.group = group;
    job.partition.ngroups = 3;
    job.partition.group_whole = 1; /* --layer-aligned: the worker must not cut a group */
    job.partition.stage_degrees = 1, job.partition.stage_tp_mask = 0x16; /* --stage-degrees */
    job.partition.stage_hosts = 4, job.partition.stage_recompute = 1;
    job.setting.tp = 2, job.setting.train.sequence_parallel = 1; /* seqpar.h's memory */
    Planfarm__Job *m = pf_job_codec_to_pb(a, 5, 2, &job, &gr, &cr);
    pf_wire_job_t w;
    CU_ASSERT_EQUAL_FATAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_OK);
    CU_ASSERT(w.id == 5 && w.attempt == 2 && w.kind == PF_JOB_DP_PARTITION);
    CU_ASSERT(w.graph.hash_len == 20 && w.graph.hash[2] == 3 && w.cluster.size == 50);
    CU_ASSERT(w.partition.stages == 2 && w.partition.alpha == 100 && w.partition.ngroups == 3);
    CU_ASSERT(w.partition.group && w.partition.group[4] == 2 && w.partition.group_whole == 1);
    CU_ASSERT(w.partition.stage_degrees == 1 && w.partition.stage_tp_mask == 0x16);
    CU_ASSERT(w.partition.stage_hosts == 4 && w.partition.stage_recompute == 1);
    CU_ASSERT(w.setting.tp == 2 && w.setting.train.sequence_parallel == 1);
    pf_job_codec_clear(&w);
    m->partition->group[3] = 3; /* >= ngroups */
    CU_ASSERT_EQUAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "job.partition.group[3]: out of range");
    m->graph = NULL;
    CU_ASSERT_EQUAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "job.graph: missing");

    double cu[2] = {3, 4}, par[2] = {1e6, 2e6}, msg[4] = {0, 5e5, 5e5, 0};
    pf_stage_graph_t *sg = pf_stage_graph_new(2, 1, cu, par, msg);
    pf_job_t probe = {.kind = PF_JOB_MAP_PROBE, .cluster = c, .stage_graph = sg,
                      .inst = PF_MAP_INST_AR, .target_ms = 7.5, .budget_s = 2, .symmetry = 1};
    m = pf_job_codec_to_pb(a, 6, 0, &probe, NULL, &cr);
    CU_ASSERT_EQUAL_FATAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_OK);
    CU_ASSERT(w.inst == PF_MAP_INST_AR && w.target_ms == 7.5 && w.budget_s == 2 && w.symmetry);
    CU_ASSERT_EQUAL(pf_stage_graph_stages(w.stage_graph), 2);
    CU_ASSERT(pf_stage_graph_msg_bytes(w.stage_graph, 0, 1) == 5e5);
    CU_ASSERT(pf_stage_graph_cu_ms(w.stage_graph, 1) == 4);
    pf_job_t bound;
    pf_job_codec_bind(&w, NULL, c, &bound);
    CU_ASSERT(bound.cluster == c && bound.stage_graph == w.stage_graph && bound.target_ms == 7.5);
    pf_job_codec_clear(&w);
    m->probe->stage_graph->msg_bytes[1] = 1; /* asymmetric M */
    CU_ASSERT_EQUAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_EINPUT);
    m->probe->stage_graph->msg_bytes[1] = 5e5;
    m->probe->instantiation = 9;
    CU_ASSERT_EQUAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_EINPUT);
    m->kind = 42;
    CU_ASSERT_EQUAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "job.kind: unknown (42)");
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
    pf_arena_destroy(&a);
}

/* SIMULATE and RESHARD: job -> wire -> job runs to the same answer as the original; answers
 * round trip; malformed fields are refused by name. */
static void test_sim_and_reshard_jobs(void)
{
    char err[256];
    pf_arena_t *a = pf_arena_new();
    pf_graph_t *g = pf_test_random_dag(8, 5, 0.2);
    pf_cluster_t *c = small_cluster(1);
    pf_blob_ref_t gr = {.hash = {1}, .hash_len = 20, .size = 100};
    pf_blob_ref_t cr = {.hash = {9}, .hash_len = 20, .size = 50};
    pf_plan_t *p = mapped_plan();
    for (int i = 0; i < 3; i++) { /* random DAG ops have params up to 1e8 B: room for them */
        pf_device_t d = {.id = 40 + i, .host = i / 2, .mem_bytes = 1e12, .tflops = 100};
        pf_cluster_set_device(c, i, &d);
    }

    pf_job_t job;
    pf_job_init(&job, PF_JOB_SIMULATE);
    job.graph = g;
    job.cluster = c;
    job.plan = p;
    job.schedule = PF_SCHEDULE_GPIPE;
    double xfer[1] = {2.5};
    job.xfer_ms = xfer;
    job.nxfer = 1;
    Planfarm__Job *m = pf_job_codec_to_pb(a, 11, 0, &job, &gr, &cr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    pf_wire_job_t w;
    CU_ASSERT_EQUAL_FATAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_OK);
    CU_ASSERT(w.kind == PF_JOB_SIMULATE && w.schedule == PF_SCHEDULE_GPIPE && w.nxfer == 1 &&
              w.xfer_ms[0] == 2.5);
    CU_ASSERT_EQUAL(pf_job_codec_check(&w, g, c, err, sizeof err), PF_OK);
    CU_ASSERT(w.plan->stages == 2 && w.plan->stage_list[0].devices[0] == 2);
    pf_job_t bound;
    pf_job_codec_bind(&w, g, c, &bound);
    pf_job_result_t r1, r2, back;
    CU_ASSERT_EQUAL(pf_job_run(&job, &r1), PF_OK);
    CU_ASSERT_EQUAL(pf_job_run(&bound, &r2), PF_OK);
    CU_ASSERT(r1.sim.step_ms > 0 && r1.sim.step_ms == r2.sim.step_ms);
    CU_ASSERT(r1.sim.fits == 1 && r1.sim.mem_bytes == r2.sim.mem_bytes);
    CU_ASSERT_EQUAL(pf_job_check_answer(&job, &r1, err, sizeof err), PF_OK);
    Planfarm__JobResult *rm = pf_job_codec_result_to_pb(a, 11, &r1);
    CU_ASSERT_EQUAL_FATAL(pf_job_codec_result_from_pb(rm, 5, 3, &back, err, sizeof err), PF_OK);
    CU_ASSERT(back.sim.step_ms == r1.sim.step_ms && back.sim.fits == 1 &&
              back.sim.bubble_fraction == r1.sim.bubble_fraction);
    back.sim.fits = 0; /* a verdict its own numbers contradict */
    CU_ASSERT_EQUAL(pf_job_check_answer(&job, &back, err, sizeof err), PF_EINPUT);
    pf_job_result_clear(&back);
    pf_job_result_clear(&r1);
    pf_job_result_clear(&r2);
    pf_job_codec_clear(&w);
    m->simulate->n_xfer_ms = 0; /* absent: timed inside */
    CU_ASSERT_EQUAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_OK);
    CU_ASSERT_PTR_NULL(w.xfer_ms);
    pf_job_codec_clear(&w);
    m->simulate->schedule = PF_SCHEDULE_SIGNAL;
    CU_ASSERT_EQUAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "job.simulate.schedule: 3 is not 1f1b, gpipe or eager-1f1b");
    m->simulate->schedule = 0;
    m->simulate->plan->stage_list[1]->devices[0] = 2; /* the device of stage 0 again */
    CU_ASSERT_EQUAL_FATAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_job_codec_check(&w, g, c, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "job.simulate.plan: "));
    pf_job_codec_clear(&w);
    m->simulate = NULL;
    CU_ASSERT_EQUAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "job.simulate: missing");

    /* RESHARD: [64, 8] bf16 replicated on device 0 to S0-sharded on devices 1 and 2 */
    int64_t shape[2] = {64, 8};
    pf_mesh_shard_t src_spec[2] = {PF_SHARDING_R, PF_SHARDING_R}, dst_spec[2] = {PF_SHARDING_S1, PF_SHARDING_R};
    int src[1] = {0}, dst[2] = {1, 2};
    pf_job_t rj;
    pf_job_init(&rj, PF_JOB_RESHARD);
    rj.cluster = c;
    rj.reshard = (pf_reshard_problem_t){.ndims = 2, .shape = shape, .dtype_bytes = 2,
                                        .src_mesh = {1, 1, src}, .dst_mesh = {1, 2, dst},
                                        .src_spec = src_spec, .dst_spec = dst_spec};
    rj.reshard_opts.sched.dfs_budget_s = 0;
    m = pf_job_codec_to_pb(a, 12, 1, &rj, NULL, &cr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL_FATAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_OK);
    CU_ASSERT(w.kind == PF_JOB_RESHARD && w.reshard.ndims == 2 && w.reshard.shape[0] == 64 &&
              w.reshard.dst_mesh.cols == 2 && w.reshard.dst_mesh.devices[1] == 2 &&
              w.reshard.dst_spec[0] == PF_SHARDING_S1 && w.reshard_opts.sched.dfs_budget_s == 0);
    pf_job_codec_bind(&w, NULL, c, &bound);
    CU_ASSERT_EQUAL(pf_job_run(&rj, &r1), PF_OK);
    CU_ASSERT_EQUAL(pf_job_run(&bound, &r2), PF_OK);
    /* two unit tasks of 64 x 4 x 2 B = 512 B each, one to each receiver */
    CU_ASSERT(r1.reshard.ntasks == 2 && r2.reshard.ntasks == 2);
    CU_ASSERT(r1.reshard.time_ms > 0 && r1.reshard.time_ms == r2.reshard.time_ms);
    CU_ASSERT_EQUAL(pf_job_check_answer(&rj, &r1, err, sizeof err), PF_OK);
    rm = pf_job_codec_result_to_pb(a, 12, &r1);
    CU_ASSERT_EQUAL_FATAL(pf_job_codec_result_from_pb(rm, 5, 3, &back, err, sizeof err), PF_OK);
    CU_ASSERT(back.reshard.time_ms == r1.reshard.time_ms && back.reshard.algo == r1.reshard.algo &&
              back.reshard.ntasks == 2);
    back.reshard.time_ms *= 2; /* slower than what an algorithm found */
    CU_ASSERT_EQUAL(pf_job_check_answer(&rj, &back, err, sizeof err), PF_EINPUT);
    pf_job_result_clear(&back);
    pf_job_result_clear(&r1);
    pf_job_result_clear(&r2);
    pf_job_codec_clear(&w);
    m->reshard->dst_mesh->cols = 3; /* 1 x 3 with two devices */
    CU_ASSERT_EQUAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "job.reshard.dst_mesh: 1 x 3 with 2 devices");
    m->reshard->dst_mesh->cols = 2;
    m->reshard->dst_spec[1] = 7;
    CU_ASSERT_EQUAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "job.reshard: spec of dim 1 out of range");
    m->reshard->dst_spec[1] = 0;
    m->reshard->n_shape = 9;
    CU_ASSERT_EQUAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_EINPUT);
    m->reshard->n_shape = 2;
    m->reshard->dst_mesh->devices[1] = 0; /* source and destination overlap */
    CU_ASSERT_EQUAL_FATAL(pf_job_codec_from_pb(m, &w, err, sizeof err), PF_OK);
    pf_job_codec_bind(&w, NULL, c, &bound);
    CU_ASSERT_EQUAL(pf_job_run(&bound, &r1), PF_EINPUT);
    pf_job_result_clear(&r1);
    pf_job_codec_clear(&w);

    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
    pf_arena_destroy(&a);
}

/* A TP plan travels with its R x T devices per stage. */
static void test_tp_plan(void)
{
    char err[256];
    pf_arena_t *a = pf_arena_new();
    pf_plan_t *p = pf_plan_new(1, 1), *q = NULL;
    int ops[] = {0, 1};
    pf_plan_set_stage_ops(p, 0, ops, 2);
    pf_plan_set_tensor_parallel(p, 2);
    int *d = pf_plan_stage_devices(p, 0);
    d[0] = 2;
    d[1] = 1;
    Planfarm__Plan *m = pf_model_codec_plan_to_pb(a, p);
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_plan_from_pb(m, 2, 3, &q, err, sizeof err), PF_OK);
    CU_ASSERT(q->tensor_parallel == 2 && q->stage_list[0].devices[0] == 2 &&
              q->stage_list[0].devices[1] == 1);
    pf_plan_destroy(&q);
    m->stage_list[0]->n_devices = 1;
    CU_ASSERT_EQUAL(pf_model_codec_plan_from_pb(m, 2, 3, &q, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "plan.stage_list[0].devices: 1 entries, replicas x "
                           "tensor_parallel = 1 x 2");
    pf_plan_destroy(&p);
    pf_arena_destroy(&a);
}

static void test_header_and_options(void)
{
    char err[128];
    uint8_t h[4];
    pf_wire_msg_t k;
    pf_wire_header(PF_MSG_SUBMIT, h);
    CU_ASSERT_EQUAL(pf_wire_parse_header(h, 4, &k, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(k, PF_MSG_SUBMIT);
    CU_ASSERT_EQUAL(pf_wire_parse_header(h, 3, &k, err, sizeof err), PF_EINPUT);
    h[2] = 7;
    CU_ASSERT_EQUAL(pf_wire_parse_header(h, 4, &k, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "protocol version 7, expected 1");
    h[2] = PF_WIRE_VERSION;
    h[3] = 99;
    CU_ASSERT_EQUAL(pf_wire_parse_header(h, 4, &k, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "unknown message kind 99");
    h[0] = 'X';
    CU_ASSERT_EQUAL(pf_wire_parse_header(h, 4, &k, err, sizeof err), PF_EINPUT);

    pf_arena_t *a = pf_arena_new();
    pf_search_opts_t o, back;
    pf_search_opts_init(&o);
    o.stages = 4;
    o.microbatches = 8;
    o.refine = 0;
    o.auto_inst = 0;
    o.inst = PF_MAP_INST_M;
    o.rel_eps = 1e-4;
    o.seed = 99;
    o.stage_degrees = 1;
    Planfarm__PlanOptions *m = pf_plan_options_codec_to_pb(a, &o);
    CU_ASSERT_EQUAL_FATAL(pf_plan_options_codec_from_pb(m, &back, err, sizeof err), PF_OK);
    CU_ASSERT(back.stages == 4 && back.microbatches == 8 && !back.refine && !back.auto_inst);
    CU_ASSERT(back.inst == PF_MAP_INST_M && back.rel_eps == 1e-4 && back.seed == 99);
    CU_ASSERT_EQUAL(back.stage_degrees, 1);
    CU_ASSERT(back.symmetry && back.nalphas == 3 && back.candidates == o.candidates);
    CU_ASSERT_EQUAL(back.probe_timeouts, 2); /* the default travels as a value */
    o.probe_timeouts = 0;                     /* 0 = no limit, not "unset" */
    m = pf_plan_options_codec_to_pb(a, &o);
    CU_ASSERT_EQUAL_FATAL(pf_plan_options_codec_from_pb(m, &back, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(back.probe_timeouts, 0);
    m->probe_timeouts_set = 0; /* an older client: the default */
    CU_ASSERT_EQUAL_FATAL(pf_plan_options_codec_from_pb(m, &back, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(back.probe_timeouts, 2);
    m->probe_timeouts_set = 1;
    m->probe_timeouts = 2000000;
    CU_ASSERT_EQUAL(pf_plan_options_codec_from_pb(m, &back, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "probe_timeouts"));
    m->probe_timeouts = 0;
    /* the block search's three states travel; neither flag set (a request that says nothing)
     * leaves it to the search, as the command line does */
    for (int bs = -1; bs <= 1; bs++) {
        o.block_search = bs;
        Planfarm__PlanOptions *mb = pf_plan_options_codec_to_pb(a, &o);
        CU_ASSERT_EQUAL_FATAL(pf_plan_options_codec_from_pb(mb, &back, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL(back.block_search, bs);
        CU_ASSERT_EQUAL(mb->block_search + 2 * mb->block_search_off, bs < 0 ? 0 : bs ? 1 : 2);
    }
    m->instantiation = "bogus";
    CU_ASSERT_EQUAL(pf_plan_options_codec_from_pb(m, &back, err, sizeof err), PF_EINPUT);
    m->instantiation = "auto";
    m->rel_eps = 2;
    CU_ASSERT_EQUAL(pf_plan_options_codec_from_pb(m, &back, err, sizeof err), PF_EINPUT);
    pf_arena_destroy(&a);
}

/* Every state of the .proto's enum (its descriptor, so a state added later is covered): its own
 * name, and which ones end a request - a client polls through all the others. */
static void test_request_states(void)
{
    const ProtobufCEnumDescriptor *d = &planfarm__request_state__descriptor;
    CU_ASSERT_EQUAL(d->n_values, 6);
    int ended = 0;
    for (unsigned i = 0; i < d->n_values; i++) {
        Planfarm__RequestState s = (Planfarm__RequestState)d->values[i].value;
        const char *want = strchr(d->values[i].name, '_') + 1; /* "REQ_DONE" -> "DONE" */
        CU_ASSERT_EQUAL(strcasecmp(pf_wire_request_state_name(s), want), 0);
        ended += pf_wire_request_state_ended(s);
    }
    CU_ASSERT_EQUAL(ended, 3);
    CU_ASSERT(pf_wire_request_state_ended(PLANFARM__REQUEST_STATE__REQ_DONE));
    CU_ASSERT(pf_wire_request_state_ended(PLANFARM__REQUEST_STATE__REQ_FAILED));
    CU_ASSERT(pf_wire_request_state_ended(PLANFARM__REQUEST_STATE__REQ_CANCELLED));
    CU_ASSERT(!pf_wire_request_state_ended(PLANFARM__REQUEST_STATE__REQ_PREPARING));
}

/* A graph priced on a model that is no preset carries it across the wire (its text equal), a
 * preset's name alone travels as before, and a carried model under another name is refused. */
static void test_graph_carried_model(void)
{
    char err[256];
    const pf_devmodel_t *p = pf_devmodel_preset("a100-80g");
    pf_devmodel_spec_t spec = *pf_devmodel_spec(p);
    int nm, nn, nk;
    const double *gm, *gn, *gk, *eff;
    pf_devmodel_table(p, &nm, &gm, &nn, &gn, &nk, &gk, &eff);
    spec.hbm_gbps = 1234.5;
    pf_devmodel_t *m = pf_devmodel_new(&spec, nm, gm, nn, gn, nk, gk, eff, NULL, 0);
    pf_graph_t *g = pf_test_random_dag(4, 5, 0.2), *h = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL_FATAL(pf_graph_set_device(g, m), PF_OK);
    uint8_t *buf = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_encode_graph(g, &buf, &len), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_model_codec_decode_graph(buf, len, &h, err, sizeof err), PF_OK);
    char *a = pf_devmodel_to_text(m), *b = pf_devmodel_to_text(pf_graph_device(h));
    CU_ASSERT(a && b && !strcmp(a, b));
    CU_ASSERT_STRING_EQUAL(pf_graph_device_model(h), "a100-80g");
    free(a);
    free(b);
    free(buf);
    pf_graph_destroy(&h);
    pf_arena_t *ar = pf_arena_new();
    Planfarm__Graph *msg = pf_model_codec_graph_to_pb(ar, g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
    msg->device_model = "h100-sxm";
    CU_ASSERT_EQUAL(pf_model_codec_graph_from_pb(msg, &h, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "graph.device_json: its name 'a100-80g' is not the "
                                       "graph's device_model"));
    CU_ASSERT_EQUAL(pf_graph_set_device(g, p), PF_OK);
    msg = pf_model_codec_graph_to_pb(ar, g);
    CU_ASSERT(msg && !*msg->device_json && !strcmp(msg->device_model, "a100-80g"));
    pf_arena_destroy(&ar);
    pf_graph_destroy(&g);
    pf_devmodel_destroy(&m);
}

void pf_suite_codec(void)
{
    CU_pSuite s = CU_add_suite("codec", NULL, NULL);
    CU_add_test(s, "graph round trip; truncated bytes never crash", test_graph_round_trip);
    CU_add_test(s, "graph messages with bad indices and numbers", test_graph_bad_messages);
    CU_add_test(s, "graph work (FLOPs, bytes, GEMM shape) round trip", test_graph_work_round_trip);
    CU_add_test(s, "a graph's model that is no preset crosses the wire", test_graph_carried_model);
    CU_add_test(s, "cluster round trip; bad sizes and zero bandwidth", test_cluster_round_trip);
    CU_add_test(s, "plan and job results round trip; out-of-range indices", test_plan_and_results);
    CU_add_test(s, "partition and probe jobs round trip; bad fields", test_jobs);
    CU_add_test(s, "a plan whose stages differ round trips; partial degrees refused",
                test_plan_stage_degrees);
    CU_add_test(s, "frame header and plan options", test_header_and_options);
    CU_add_test(s, "simulate and reshard jobs round trip and run alike; bad fields",
                test_sim_and_reshard_jobs);
    CU_add_test(s, "a tensor-parallel plan keeps its R x T devices", test_tp_plan);
    CU_add_test(s, "request states: names, and which end a request", test_request_states);
}
