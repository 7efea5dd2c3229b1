/* devkinds: per-op ratios on a cluster that mixes device kinds, worked by hand for a memory-bound
 * op and a GEMM; uniform clusters change nothing; the partition DP under stage multipliers
 * against brute force; and a two-host A100 + H100 cluster that puts more of a GPT on the H100
 * stage and steps faster than the same cluster all A100. */
#include "planner/core/util.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/price.h"
#include "planner/inputs/topology.h"
#include "planner/ir/cost.h"
#include "planner/ir/devkinds.h"
#include "planner/ir/devmodel.h"
#include "planner/map/mapping.h"
#include "planner/partition/downsets.h"
#include "planner/partition/partition.h"
#include "planner/sim/simulate.h"
#include "tests/testutil.h"

#include <stdlib.h>
#include <string.h>

/* Two devices on two hosts naming models a and b (NULL: none). */
static pf_cluster_t *pair(const char *a, const char *b)
{
    pf_cluster_t *c = pf_cluster_new("pair", 2);
    pf_device_t d0 = {.id = 0, .host = 0, .mem_bytes = 80e9, .device_model = a};
    pf_device_t d1 = {.id = 1, .host = 1, .mem_bytes = 80e9, .device_model = b};
    pf_cluster_set_device(c, 0, &d0);
    pf_cluster_set_device(c, 1, &d1);
    pf_cluster_set_link(c, 0, 1, 25, 0);
    return c;
}

/* A GEMM and a memory-bound op priced on a100-80g (their times then are the model's). */
static pf_graph_t *two_ops(const char *model)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("two", 1);
    pf_op_t ops[2] = {
        {.id = 0, .name = "fc", .type = "linear", .fwd_ms = 3, .bwd_ms = 6,
         .work = {.gemm_m = 8192, .gemm_n = 4096, .gemm_k = 1024, .gemm_batch = 1}},
        {.id = 1, .name = "gelu", .type = "gelu", .fwd_ms = 2, .bwd_ms = 3,
         .work = {.bytes_read = 1e9, .bytes_written = 1e9}},
    };
    pf_graph_add_op(g, &ops[0]);
    pf_graph_add_op(g, &ops[1]);
    pf_graph_add_edge(g, 0, 1, 1e6);
    if (model)
        pf_graph_set_device_model(g, model);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    return g;
}

static void test_devkinds_ratio(void)
{
    pf_graph_t *g = two_ops("a100-80g");
    pf_cluster_t *c = pair("a100-80g", "h100-sxm");
    pf_devkinds_t *dk = pf_devkinds_new(g, c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dk);
    CU_ASSERT_EQUAL(pf_devkinds_count(dk), 2);
    CU_ASSERT_EQUAL(pf_devkinds_of(dk, 1), 1);
    CU_ASSERT_STRING_EQUAL(pf_devkinds_name(dk, 1), "h100-sxm");
    CU_ASSERT(!pf_devkinds_uniform(dk));
    /* the graph's own kind: ratio 1 exactly */
    CU_ASSERT_EQUAL(pf_devkinds_fwd_ratio(dk, 0, 0), 1.0);
    CU_ASSERT_EQUAL(pf_devkinds_bwd_ratio(dk, 1, 0), 1.0);
    /* gelu by hand: forward moves 2e9 bytes, backward 2 x 1e9 read + 1e9 written = 3e9 bytes,
     * each launch_us / 1000 + bytes / (hbm_gbps x 1e6) ms on either model */
    const pf_devmodel_spec_t *a = pf_devmodel_spec(pf_devmodel_preset("a100-80g"));
    const pf_devmodel_spec_t *h = pf_devmodel_spec(pf_devmodel_preset("h100-sxm"));
    double fa = a->launch_us / 1000 + 2e9 / (a->hbm_gbps * 1e6);
    double fh = h->launch_us / 1000 + 2e9 / (h->hbm_gbps * 1e6);
    double ba = a->launch_us / 1000 + 3e9 / (a->hbm_gbps * 1e6);
    double bh = h->launch_us / 1000 + 3e9 / (h->hbm_gbps * 1e6);
    PF_ASSERT_CLOSE(pf_devkinds_fwd_ratio(dk, 1, 1), fh / fa, 1e-12);
    PF_ASSERT_CLOSE(pf_devkinds_bwd_ratio(dk, 1, 1), bh / ba, 1e-12);
    CU_ASSERT(fh / fa < 1); /* the H100's HBM3 is faster */
    /* fc: forward one GEMM (m, n, k), backward dX (m, k, n) + dW (k, n, m), per model */
    const pf_devmodel_t *A = pf_devmodel_preset("a100-80g"), *H = pf_devmodel_preset("h100-sxm");
    double gf = pf_devmodel_gemm_ms(H, PF_PREC_BF16, 8192, 4096, 1024, 1) /
                pf_devmodel_gemm_ms(A, PF_PREC_BF16, 8192, 4096, 1024, 1);
    double gb = (pf_devmodel_gemm_ms(H, PF_PREC_BF16, 8192, 1024, 4096, 1) +
                 pf_devmodel_gemm_ms(H, PF_PREC_BF16, 1024, 4096, 8192, 1)) /
                (pf_devmodel_gemm_ms(A, PF_PREC_BF16, 8192, 1024, 4096, 1) +
                 pf_devmodel_gemm_ms(A, PF_PREC_BF16, 1024, 4096, 8192, 1));
    PF_ASSERT_CLOSE(pf_devkinds_fwd_ratio(dk, 0, 1), gf, 1e-12);
    PF_ASSERT_CLOSE(pf_devkinds_bwd_ratio(dk, 0, 1), gb, 1e-12);
    /* c_u on the H100 and the graph ratio: (3 gf + 6 gb + 2 fh/fa + 3 bh/ba) / 14 */
    double cu_h = 3 * gf + 6 * gb + 2 * fh / fa + 3 * bh / ba;
    PF_ASSERT_CLOSE(pf_devkinds_cu_ms(dk, g, 0, 1) + pf_devkinds_cu_ms(dk, g, 1, 1), cu_h, 1e-12);
    PF_ASSERT_CLOSE(pf_devkinds_graph_ratio(dk, g, 1), cu_h / 14, 1e-12);
    pf_devkinds_destroy(&dk);
    pf_devkinds_destroy(&dk); /* idempotent */
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* A graph carrying its own model under a preset's name (a calibrated a100-80g: HBM halved): the
 * devices of that name keep the graph's times (ratio 1), and the other kind's ratio is its
 * preset over the carried model, worked for gelu as above. */
static void test_devkinds_carried_model(void)
{
    const pf_devmodel_t *a100 = pf_devmodel_preset("a100-80g");
    int nm, nn, nk;
    const double *gm, *gn, *gk, *eff;
    pf_devmodel_table(a100, &nm, &gm, &nn, &gn, &nk, &gk, &eff);
    pf_devmodel_spec_t spec = *pf_devmodel_spec(a100);
    spec.hbm_gbps /= 2;
    pf_devmodel_t *mine = pf_devmodel_new(&spec, nm, gm, nn, gn, nk, gk, eff, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mine);
    pf_graph_t *g = two_ops(NULL);
    CU_ASSERT_EQUAL_FATAL(pf_graph_set_device(g, mine), PF_OK);
    pf_cluster_t *c = pair("a100-80g", "h100-sxm");
    pf_devkinds_t *dk = pf_devkinds_new(g, c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dk);
    for (int v = 0; v < 2; v++) {
        CU_ASSERT_EQUAL(pf_devkinds_fwd_ratio(dk, v, 0), 1.0);
        CU_ASSERT_EQUAL(pf_devkinds_bwd_ratio(dk, v, 0), 1.0);
    }
    const pf_devmodel_spec_t *H = pf_devmodel_spec(pf_devmodel_preset("h100-sxm"));
    double fm = spec.launch_us / 1000 + 2e9 / (spec.hbm_gbps * 1e6);
    double fh = H->launch_us / 1000 + 2e9 / (H->hbm_gbps * 1e6);
    PF_ASSERT_CLOSE(pf_devkinds_fwd_ratio(dk, 1, 1), fh / fm, 1e-12);
    pf_devkinds_destroy(&dk);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
    pf_devmodel_destroy(&mine);
}

/* An op whose times hold communication (a tensor-parallel setting's collectives): only the rest
 * is re-priced on the other kind. fc's 3 / 6 ms with 1 / 2 ms of collectives on the H100:
 * 1 + 2 gf + 2 + 4 gb. */
static void test_devkinds_comm_share(void)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("one", 1);
    pf_op_t fc = {.id = 0, .name = "fc", .type = "linear", .fwd_ms = 3, .bwd_ms = 6,
                  .comm_fwd_ms = 1, .comm_bwd_ms = 2,
                  .work = {.gemm_m = 8192, .gemm_n = 4096, .gemm_k = 1024, .gemm_batch = 1}};
    pf_graph_add_op(g, &fc);
    pf_graph_set_device_model(g, "a100-80g");
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_cluster_t *c = pair("a100-80g", "h100-sxm");
    pf_devkinds_t *dk = pf_devkinds_new(g, c);
    double gf = pf_devkinds_fwd_ratio(dk, 0, 1), gb = pf_devkinds_bwd_ratio(dk, 0, 1);
    CU_ASSERT(gf < 0.5 && gb < 0.5);
    PF_ASSERT_CLOSE(pf_devkinds_cu_ms(dk, g, 0, 1), 1 + 2 * gf + 2 + 4 * gb, 1e-12);
    PF_ASSERT_CLOSE(pf_devkinds_cu_ms(dk, g, 0, 0), 9, 1e-12);
    PF_ASSERT_CLOSE(pf_devkinds_graph_ratio(dk, g, 1), (3 + 2 * gf + 4 * gb) / 9, 1e-12);
    pf_devkinds_destroy(&dk);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* One kind, an unknown model or a graph that names none: every ratio is 1. */
static void test_devkinds_uniform(void)
{
    const char *cases[][3] = {{"a100-80g", "h100-sxm", "h100-sxm"},
                              {"a100-80g", "a100-80g", "something-else"},
                              {NULL, "a100-80g", "h100-sxm"}};
    for (int i = 0; i < 3; i++) {
        pf_graph_t *g = two_ops(cases[i][0]);
        pf_cluster_t *c = pair(cases[i][1], cases[i][2]);
        pf_devkinds_t *dk = pf_devkinds_new(g, c);
        CU_ASSERT_PTR_NOT_NULL_FATAL(dk);
        CU_ASSERT(pf_devkinds_uniform(dk));
        CU_ASSERT_EQUAL(pf_devkinds_count(dk), i == 0 ? 1 : 2);
        int kind_of[2]; /* one kind exactly when the numbering finds one */
        CU_ASSERT_EQUAL(pf_devkinds_one(c), pf_devkinds_number(c, kind_of) == 1);
        CU_ASSERT_EQUAL(pf_devkinds_one(c), i == 0);
        CU_ASSERT_EQUAL(pf_devkinds_fwd_ratio(dk, 0, pf_devkinds_count(dk) - 1), 1.0);
        CU_ASSERT_EQUAL(pf_devkinds_cu_ms(dk, g, 0, 0), 9.0);
        pf_devkinds_destroy(&dk);
        pf_cluster_destroy(&c);
        pf_graph_destroy(&g);
    }
}

/* Brute force: every op -> stage map with edges going forward and no stage empty. */
static double brute(const pf_graph_t *g, const pf_cost_model_t *cm, int S, int *st, int v)
{
    int n = pf_graph_nops(g);
    if (v == n) {
        double worst = 0;
        for (int s = 0; s < S; s++) {
            int any = 0;
            for (int u = 0; u < n; u++)
                any |= st[u] == s;
            if (!any)
                return INFINITY;
            worst = fmax(worst, pf_cost_stage_time_ms(g, st, s, cm));
        }
        for (int e = 0; e < pf_graph_nedges(g); e++)
            if (st[pf_graph_edge(g, e)->src] > st[pf_graph_edge(g, e)->dst])
                return INFINITY;
        return worst;
    }
    double best = INFINITY;
    for (int s = 0; s < S; s++) {
        st[v] = s;
        best = fmin(best, brute(g, cm, S, st, v + 1));
    }
    return best;
}

static void test_devkinds_dp_multipliers(void)
{
    char err[256];
    static const double mult[3][3] = {{0.4, 1.0, 0.7}, {1.0, 1.0, 1.0}, {1.3, 0.5, 2.0}};
    for (uint64_t seed = 1; seed <= 4; seed++) {
        pf_graph_t *g = pf_test_random_dag(seed, 10, 0.25);
        pf_cluster_t *c = pair(NULL, NULL);
        int capped = 0, st[16], op_stage[16];
        pf_downsets_t *ds = pf_downsets_enumerate(g, 1 << 20, &capped);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
        for (int m = 0; m < 3; m++) {
            pf_cost_model_t cm;
            pf_cost_model_init(&cm, c, 3, 4, 0);
            cm.mem_limit_bytes = 1e30;
            cm.stage_mult = mult[m];
            double obj = NAN;
            CU_ASSERT_EQUAL_FATAL(pf_partition_dp(g, ds, 0, &cm, 3, 1, &obj, op_stage, err,
                                                  sizeof err), PF_OK);
            double want = brute(g, &cm, 3, st, 0);
            PF_ASSERT_CLOSE(obj, want, 1e-9);
            double worst = 0; /* the chain it returns has that value */
            for (int s = 0; s < 3; s++)
                worst = fmax(worst, pf_cost_stage_time_ms(g, op_stage, s, &cm));
            PF_ASSERT_CLOSE(worst, want, 1e-9);
        }
        pf_downsets_destroy(&ds);
        pf_cluster_destroy(&c);
        pf_graph_destroy(&g);
    }
}

/* A GPT of 8 layers priced on a100-80g, S = 2, R = 1: partition, mapping and simulation. */
typedef struct {
    int layers[2];  /* whole layers ending in each stage */
    int device[2];  /* each stage's device */
    double step_ms; /* simulated */
} gpt_plan_t;

static void plan_gpt(const pf_graph_t *g, const char *models, gpt_plan_t *out)
{
    char err[256];
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_NVSWITCH);
    to.machines = 2;
    to.gpus_per_machine = 1;
    to.models = models;
    pf_cluster_t *c = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    pf_partition_opts_t po;
    pf_partition_opts_init(&po);
    po.stages = 2;
    po.replicas = 1;
    pf_plan_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_partition_run(g, c, &po, &p, err, sizeof err), PF_OK);
    pf_mapping_opts_t mo;
    pf_mapping_opts_init(&mo);
    CU_ASSERT_EQUAL_FATAL(pf_mapping_plan(g, c, p, &mo, err, sizeof err), PF_OK);
    for (int s = 0; s < 2; s++) {
        out->layers[s] = 0;
        out->device[s] = p->stage_list[s].devices[0];
        for (int i = 0; i < p->stage_list[s].nops; i++) {
            const char *nm = pf_graph_op(g, p->stage_list[s].ops[i])->name;
            out->layers[s] += strstr(nm, ".mlp.residual") != NULL;
        }
    }
    pf_simulate_input_t in;
    pf_simulate_result_t *r = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_simulate_input_from_plan(g, c, p, &in, err, sizeof err), PF_OK);
    /* a stage replica's compute is its ops on its device's kind */
    pf_devkinds_t *dk = pf_devkinds_new(g, c);
    for (int s = 0; s < 2; s++) {
        const pf_simulate_stage_t *st = &in.stage[s];
        CU_ASSERT_EQUAL(st->rep_fwd_ms == NULL, pf_devkinds_uniform(dk));
        if (!st->rep_fwd_ms)
            continue;
        double f = 0;
        int k = pf_devkinds_of(dk, out->device[s]);
        for (int i = 0; i < p->stage_list[s].nops; i++) {
            int v = p->stage_list[s].ops[i];
            f += pf_graph_op(g, v)->fwd_ms * pf_devkinds_fwd_ratio(dk, v, k);
        }
        PF_ASSERT_CLOSE(st->rep_fwd_ms[0], f, 1e-12);
    }
    CU_ASSERT_EQUAL_FATAL(pf_simulate(&in, &r, err, sizeof err), PF_OK);
    out->step_ms = r->step_ms;
    pf_simulate_result_destroy(&r);
    pf_simulate_input_clear(&in);
    pf_devkinds_destroy(&dk);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
}

static void test_devkinds_a100_h100_gpt(void)
{
    char err[256];
    pf_model_opts_t mo;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 8;
    mo.hidden = 1024;
    mo.heads = 16;
    mo.seq = 1024;
    pf_graph_t *raw = NULL, *g = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &raw, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_price_graph(raw, pf_devmodel_preset("a100-80g"), PF_PREC_BF16, &g,
                                         NULL, err, sizeof err), PF_OK);
    gpt_plan_t mix, aa;
    plan_gpt(g, "a100-80g,h100-sxm", &mix); /* device 0 the A100, device 1 the H100 */
    plan_gpt(g, "a100-80g,a100-80g", &aa);
    int on_h100 = mix.device[0] == 1 ? 0 : 1;
    CU_ASSERT(mix.layers[on_h100] > mix.layers[1 - on_h100]);
    CU_ASSERT(mix.layers[0] + mix.layers[1] == 8 && aa.layers[0] + aa.layers[1] == 8);
    CU_ASSERT(abs(aa.layers[0] - aa.layers[1]) <= 1); /* all A100: balanced */
    CU_ASSERT(mix.step_ms < aa.step_ms);
    pf_graph_destroy(&raw);
    pf_graph_destroy(&g);
}

/* The file key: read, validated with its place, written back; a hierarchy's host kind names the
 * model of its devices. */
static void test_devkinds_cluster_files(void)
{
    char err[256];
    const char *dense = "{\"name\": \"m\", \"devices\": ["
                        "{\"id\": 0, \"host\": 0, \"mem_bytes\": 1e9, \"device_model\": \"a100-80g\"},"
                        "{\"id\": 1, \"host\": 1, \"mem_bytes\": 1e9, \"device_model\": \"%s\"}],"
                        "\"bandwidth_gbps\": [[0, 1], [1, 0]]}";
    char text[512];
    snprintf(text, sizeof text, dense, "h100-sxm");
    pf_cluster_t *c = NULL, *back = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_cluster_load_buffer(text, strlen(text), "m", &c, err, sizeof err),
                          PF_OK);
    CU_ASSERT_STRING_EQUAL(pf_cluster_device(c, 1)->device_model, "h100-sxm");
    char path[512];
    snprintf(path, sizeof path, "%s/mixed.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(pf_cluster_save(c, path, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_cluster_load(path, &back, err, sizeof err), PF_OK);
    CU_ASSERT_STRING_EQUAL(pf_cluster_device(back, 0)->device_model, "a100-80g");
    CU_ASSERT_STRING_EQUAL(pf_cluster_device(back, 1)->device_model, "h100-sxm");
    pf_cluster_destroy(&back);
    pf_cluster_destroy(&c);
    snprintf(text, sizeof text, dense, "");
    CU_ASSERT_EQUAL(pf_cluster_load_buffer(text, strlen(text), "m", &c, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "devices[1].device_model: empty"));
    pf_topology_opts_t to;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX_A100);
    to.machines = 4;
    to.models = "a100-80g,h100-sxm";
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_cluster_ndevices(c), 32);
    CU_ASSERT_STRING_EQUAL(pf_cluster_device(c, 15)->device_model, "a100-80g"); /* host 1 */
    CU_ASSERT_STRING_EQUAL(pf_cluster_device(c, 16)->device_model, "h100-sxm"); /* host 2 */
    pf_cluster_destroy(&c);
    to.models = "a100-80g,x";
    CU_ASSERT_EQUAL(pf_topology_build(&to, &c, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "'x' is not a device preset"));
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX_A100);
    to.tflops = 100; /* no longer an A100 80GB */
    CU_ASSERT_EQUAL_FATAL(pf_topology_build(&to, &c, err, sizeof err), PF_OK);
    CU_ASSERT_PTR_NULL(pf_cluster_device(c, 0)->device_model);
    pf_cluster_destroy(&c);
}

void pf_suite_devkinds(void)
{
    CU_pSuite s = CU_add_suite("devkinds", NULL, NULL);
    CU_add_test(s, "a carried model keeps its kind's times", test_devkinds_carried_model);
    CU_add_test(s, "communication inside an op's times is not re-priced",
                test_devkinds_comm_share);
    CU_add_test(s, "ratios by hand (HBM roofline, GEMM)", test_devkinds_ratio);
    CU_add_test(s, "one kind or unknown models: ratio 1", test_devkinds_uniform);
    CU_add_test(s, "DP with stage multipliers = brute force", test_devkinds_dp_multipliers);
    CU_add_test(s, "device_model in cluster files and generators", test_devkinds_cluster_files);
    CU_add_test(s, "A100 + H100: more layers on the H100, faster step",
                test_devkinds_a100_h100_gpt);
}
