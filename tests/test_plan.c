/* plan: validation and the file format. */
#include "planner/ir/plan.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pf_cluster_t *four_devices(void)
{
    pf_cluster_t *c = pf_cluster_new("four", 4);
    for (int i = 0; i < 4; i++) {
        pf_device_t d = {.id = 10 + i, .mem_bytes = 1e9};
        pf_cluster_set_device(c, i, &d);
        for (int j = 0; j < i; j++)
            pf_cluster_set_link(c, i, j, 10, 0);
    }
    return c;
}

static void test_round_trip_and_errors(void)
{
    char err[512], path[700];
    pf_graph_t *g = pf_test_random_dag(7, 6, 0.2);
    pf_cluster_t *c = four_devices();
    pf_plan_t *p = pf_plan_new(2, 2);
    int a[] = {0, 1, 2}, b[] = {3, 4, 5};
    pf_plan_set_stage_ops(p, 0, a, 3);
    pf_plan_set_stage_ops(p, 1, b, 3);
    int *d0 = pf_plan_stage_devices(p, 0), *d1 = pf_plan_stage_devices(p, 1);
    d0[0] = 3; d0[1] = 0; d1[0] = 1; d1[1] = 2;
    p->objective_ms = 12.5;
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_OK);
    CU_ASSERT(pf_plan_is_mapped(p));
    snprintf(path, sizeof path, "%s/plan.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(pf_plan_save(p, g, c, path, err, sizeof err), PF_OK);
    pf_plan_t *q;
    CU_ASSERT_EQUAL_FATAL(pf_plan_load(path, g, c, &q, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(q->stages, 2);
    CU_ASSERT_EQUAL(q->replicas, 2);
    CU_ASSERT_EQUAL(q->stage_list[1].nops, 3);
    CU_ASSERT_EQUAL(q->stage_list[0].devices[0], 3);
    CU_ASSERT_EQUAL(q->stage_list[1].devices[1], 2);
    CU_ASSERT_EQUAL(q->blocks.present, 0);
    pf_plan_destroy(&q);

    /* the block search's keys come back (the simulator interleaves by virtual_stages) */
    p->blocks.present = 1;
    p->blocks.microbatch_size = 2, p->blocks.virtual_stages = 3, p->blocks.sequence_parallel = 1;
    p->blocks.first_layers = 4, p->blocks.mid_layers = 5, p->blocks.last_layers = 6;
    p->blocks.candidates = 7, p->blocks.analytic_step_ms = 8.5, p->blocks.wall_s = 0.25;
    CU_ASSERT_EQUAL_FATAL(pf_plan_save(p, g, c, path, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_plan_load(path, g, c, &q, err, sizeof err), PF_OK);
    CU_ASSERT(q->blocks.present && q->blocks.microbatch_size == 2 &&
              q->blocks.virtual_stages == 3 && q->blocks.sequence_parallel == 1);
    CU_ASSERT(q->blocks.first_layers == 4 && q->blocks.mid_layers == 5 &&
              q->blocks.last_layers == 6 && q->blocks.candidates == 7);
    CU_ASSERT(q->blocks.analytic_step_ms == 8.5 && q->blocks.wall_s == 0.25);
    pf_plan_destroy(&q);
    p->blocks.present = 0;

    /* an op in no stage; a device used twice */
    pf_plan_set_stage_ops(p, 1, b, 2);
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "op 5 (op5) is in no stage"));
    pf_plan_set_stage_ops(p, 0, a, 3);
    pf_plan_set_stage_ops(p, 1, b, 3);
    d1[1] = 3;
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "device 13 used twice"));

    pf_plan_t *bad;
    const char *txt = "{\"stages\": 1, \"replicas\": 1, \"stage_list\": [{\"ops\": [0, 77]}]}";
    CU_ASSERT_EQUAL(pf_plan_load(pf_test_write("p.json", txt), g, c, &bad, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "p.json: stage_list[0].ops[1]: not an op id of graph"));
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* The chain 10 -> 11 -> ... -> 15 (ids; indices 0..5) cut into {10, 11, 12, 15} and {13, 14}:
 * edge 14 -> 15 runs from stage 1 back to stage 0, the only edge that does (10 -> 11 -> 12 stay
 * in stage 0, 12 -> 13 goes forward, 13 -> 14 stays in stage 1). The cut {10, 11, 12}, {13, 14,
 * 15} has no back edge and passes. */
static void test_back_edge_across_stages(void)
{
    char err[512] = "";
    pf_graph_t *g = pf_graph_new("chain", 1);
    for (int i = 0; i < 6; i++) {
        char name[16]; /* room for any int: -O1 cannot prove i < 6 */
        snprintf(name, sizeof name, "c%d", i);
        pf_op_t op = {.id = 10 + i, .name = name, .type = "linear", .fwd_ms = 1, .bwd_ms = 2};
        CU_ASSERT_EQUAL_FATAL(pf_graph_add_op(g, &op), i);
    }
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL_FATAL(pf_graph_add_edge(g, i, i + 1, 100), i);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_cluster_t *c = four_devices();
    pf_plan_t *p = pf_plan_new(2, 2);
    int fwd0[] = {0, 1, 2}, fwd1[] = {3, 4, 5}, back0[] = {0, 1, 2, 5}, back1[] = {3, 4};
    pf_plan_set_stage_ops(p, 0, fwd0, 3);
    pf_plan_set_stage_ops(p, 1, fwd1, 3);
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_OK);
    pf_plan_set_stage_ops(p, 0, back0, 4);
    pf_plan_set_stage_ops(p, 1, back1, 2);
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "stage_list[1]: op 14 feeds op 15 in earlier stage 0 (stages "
                                "must follow the graph's order)");
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* The plan's text for p (stdout-like buffer; NULL on failure). */
static char *plan_text(const pf_plan_t *p, const pf_graph_t *g, const pf_cluster_t *c)
{
    char *text = NULL, err[256];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    int rc = pf_plan_write(p, g, c, f, err, sizeof err);
    fclose(f);
    if (rc != PF_OK) {
        free(text);
        return NULL;
    }
    return text;
}

/* embed, layers.0.{a,b}, layers.1.{a,b}, layers.2.{a,b}, head in a chain. Cut after layers.1.a
 * (issue 22's overlap: stage 0 = layers 0-1, stage 1 = layers 1-2), each stage's "blocks" has
 * only what it holds whole and layers.1 is both stages' "cut_blocks"; cut after layers.1.b,
 * nothing is cut and the counts add up to 3. */
static void test_blocks_never_overlap(void)
{
    char err[256], name[32];
    pf_graph_t *g = pf_graph_new("blocks3", 1);
    for (int v = 0; v < 8; v++) {
        if (v >= 1 && v <= 6)
            snprintf(name, sizeof name, "layers.%d.%s", (v - 1) / 2, v % 2 ? "a" : "b");
        else
            snprintf(name, sizeof name, "%s", v == 0 ? "embed" : "head");
        pf_op_t op = {.id = v, .name = name, .fwd_ms = 1};
        pf_graph_add_op(g, &op);
    }
    for (int v = 0; v < 7; v++)
        pf_graph_add_edge(g, v, v + 1, 0);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_cluster_t *c = four_devices();
    pf_plan_t *p = pf_plan_new(2, 1);
    int a[] = {0, 1, 2, 3}, b[] = {4, 5, 6, 7};
    pf_plan_set_stage_ops(p, 0, a, 4);
    pf_plan_set_stage_ops(p, 1, b, 4);
    char *t = plan_text(p, g, c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    const char *cut = "\"cut_blocks\": [\"layers.1\"]", *at = strstr(t, cut);
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\"blocks\": {\"first\": \"layers.0\", \"last\": \"layers.0\", "
                                     "\"count\": 1}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\"blocks\": {\"first\": \"layers.2\", \"last\": \"layers.2\", "
                                     "\"count\": 1}"));
    CU_ASSERT(at && strstr(at + 1, cut) && !strstr(strstr(at + 1, cut) + 1, cut)); /* twice */
    CU_ASSERT_PTR_NULL(strstr(t, "\"last\": \"layers.1\""));
    free(t);
    int a2[] = {0, 1, 2, 3, 4}, b2[] = {5, 6, 7};
    pf_plan_set_stage_ops(p, 0, a2, 5);
    pf_plan_set_stage_ops(p, 1, b2, 3);
    t = plan_text(p, g, c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_PTR_NULL(strstr(t, "cut_blocks"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\"blocks\": {\"first\": \"layers.0\", \"last\": \"layers.1\", "
                                     "\"count\": 2}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\"blocks\": {\"first\": \"layers.2\", \"last\": \"layers.2\", "
                                     "\"count\": 1}"));
    free(t);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = f ? calloc(1, 1 << 20) : NULL;
    if (buf)
        fread(buf, 1, (1 << 20) - 1, f);
    if (f)
        fclose(f);
    return buf;
}

/* Recomputation per stage (DESIGN.md "Plan"): a plan whose stages differ writes one per stage and
 * the heaviest as training.recompute, reads back the same; one whose stages agree writes only
 * training.recompute; an old plan (one string, no stage keys) means every stage; a bad name is
 * refused. */
static void test_stage_recompute(void)
{
    char err[512], path[700];
    pf_graph_t *g = pf_test_random_dag(7, 6, 0.2);
    pf_cluster_t *c = four_devices();
    pf_plan_t *p = pf_plan_new(3, 1), *q = NULL;
    int a[] = {0, 1}, b[] = {2, 3}, e[] = {4, 5};
    pf_plan_set_stage_ops(p, 0, a, 2);
    pf_plan_set_stage_ops(p, 1, b, 2);
    pf_plan_set_stage_ops(p, 2, e, 2);
    p->train.recompute = PF_RECOMPUTE_FULL;
    p->stage_list[0].has_recompute = 1, p->stage_list[0].recompute = PF_RECOMPUTE_FULL;
    p->stage_list[1].has_recompute = 1, p->stage_list[1].recompute = PF_RECOMPUTE_SELECTIVE;
    p->stage_list[2].has_recompute = 1, p->stage_list[2].recompute = PF_RECOMPUTE_NONE;
    CU_ASSERT(pf_plan_recompute_mixed(p));
    char runs[96];
    pf_plan_recompute_describe(p, runs, sizeof runs);
    CU_ASSERT_STRING_EQUAL(runs, "full x1+selective x1+none x1");
    snprintf(path, sizeof path, "%s/plan-rc.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(pf_plan_save(p, g, c, path, err, sizeof err), PF_OK);
    char *txt = read_text(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
    CU_ASSERT_PTR_NOT_NULL(strstr(txt, "\"zero\": 0, \"recompute\": \"full\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(txt, "\"recompute\": \"selective\""));
    free(txt);
    CU_ASSERT_EQUAL_FATAL(pf_plan_load(path, g, c, &q, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(q->train.recompute, PF_RECOMPUTE_FULL);
    CU_ASSERT_EQUAL(pf_plan_recompute_stage(q, 0), PF_RECOMPUTE_FULL);
    CU_ASSERT_EQUAL(pf_plan_recompute_stage(q, 1), PF_RECOMPUTE_SELECTIVE);
    CU_ASSERT_EQUAL(pf_plan_recompute_stage(q, 2), PF_RECOMPUTE_NONE);
    CU_ASSERT_EQUAL(pf_plan_recompute_max(q), PF_RECOMPUTE_FULL);
    pf_plan_t *k = pf_plan_clone(q); /* the clone keeps them */
    CU_ASSERT_EQUAL(pf_plan_recompute_stage(k, 1), PF_RECOMPUTE_SELECTIVE);
    pf_plan_destroy(&k);
    pf_plan_destroy(&q);
    /* stages that agree: no stage key, training.recompute says it */
    p->stage_list[1].recompute = p->stage_list[2].recompute = PF_RECOMPUTE_FULL;
    CU_ASSERT_FALSE(pf_plan_recompute_mixed(p));
    CU_ASSERT_EQUAL_FATAL(pf_plan_save(p, g, c, path, err, sizeof err), PF_OK);
    txt = read_text(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
    char *first = strstr(txt, "\"recompute\"");
    CU_ASSERT_PTR_NOT_NULL(first);
    CU_ASSERT_PTR_NULL(first ? strstr(first + 1, "\"recompute\"") : NULL);
    free(txt);
    /* an old plan: one string, every stage */
    const char *old = "{\"stages\": 2, \"replicas\": 1, \"training\": {\"recompute\": "
                      "\"selective\"}, \"stage_list\": [{\"ops\": [0, 1, 2]}, {\"ops\": [3, 4, "
                      "5]}]}";
    CU_ASSERT_EQUAL_FATAL(pf_plan_load(pf_test_write("old.json", old), g, c, &q, err, sizeof err),
                          PF_OK);
    CU_ASSERT_FALSE(q->stage_list[0].has_recompute || q->stage_list[1].has_recompute);
    CU_ASSERT_EQUAL(pf_plan_recompute_stage(q, 0), PF_RECOMPUTE_SELECTIVE);
    CU_ASSERT_EQUAL(pf_plan_recompute_stage(q, 1), PF_RECOMPUTE_SELECTIVE);
    CU_ASSERT_FALSE(pf_plan_recompute_mixed(q));
    pf_plan_destroy(&q);
    const char *bad = "{\"stages\": 1, \"replicas\": 1, \"stage_list\": [{\"ops\": [0, 1, 2, 3, "
                      "4, 5], \"recompute\": \"partial\"}]}";
    CU_ASSERT_EQUAL(pf_plan_load(pf_test_write("bad.json", bad), g, c, &q, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "stage_list[0].recompute: 'partial' is not"));
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Per-stage degrees (issue 24): a plan whose stages run 2 x 1, 1 x 2 and 1 x 1 devices on a
 * step of 4 micro-batches (replicas = 2, microbatches = 2) is written with each stage's
 * replicas and tp and read back with its devices; a uniform plan writes no stage keys; a degree
 * that does not divide the step, a top-level value that is not the largest and more devices
 * than the cluster has are refused, each naming its place. */
static void test_stage_degrees(void)
{
    char err[512], path[700];
    pf_graph_t *g = pf_test_random_dag(7, 6, 0.2);
    pf_cluster_t *c = four_devices();
    pf_plan_t *p = pf_plan_new(3, 1);
    int a[] = {0, 1}, b[] = {2, 3}, z[] = {4, 5}, d[] = {2, 1, 1}, t[] = {1, 2, 1};
    pf_plan_set_stage_ops(p, 0, a, 2);
    pf_plan_set_stage_ops(p, 1, b, 2);
    pf_plan_set_stage_ops(p, 2, z, 2);
    CU_ASSERT_FALSE(pf_plan_degrees_mixed(p));
    CU_ASSERT_EQUAL(pf_plan_degrees_set(p, d, t, 3), PF_EINPUT); /* 2 does not divide 3 */
    CU_ASSERT_EQUAL_FATAL(pf_plan_degrees_set(p, d, t, 4), PF_OK);
    CU_ASSERT(pf_plan_degrees_mixed(p));
    CU_ASSERT(p->replicas == 2 && p->tensor_parallel == 2 && p->microbatches == 2);
    CU_ASSERT_EQUAL(pf_plan_degrees_step_microbatches(p), 4);
    CU_ASSERT_EQUAL(pf_plan_degrees_total_devices(p), 5); /* one more than the cluster */
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "add up to 5 devices, the cluster has 4"));
    int t2[] = {1, 1, 1};
    CU_ASSERT_EQUAL_FATAL(pf_plan_degrees_set(p, d, t2, 4), PF_OK);
    char desc[64];
    pf_plan_degrees_describe(p, desc, sizeof desc);
    CU_ASSERT_STRING_EQUAL(desc, "2x1 | 1x1 | 1x1");
    int *d0 = pf_plan_stage_devices(p, 0), *d1 = pf_plan_stage_devices(p, 1),
        *d2 = pf_plan_stage_devices(p, 2);
    d0[0] = 2, d0[1] = 0, d1[0] = 3, d2[0] = 1;
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_OK);
    /* --stage-degrees' record: a number it lacks is left out, not written as null */
    p->search.present = 1;
    p->stagedeg.present = 1, p->stagedeg.uniform_ms_per_sample = 2.5;
    p->stagedeg.stagedeg_ms_per_sample = p->stagedeg.stagedeg_step_ms = NAN;
    snprintf(p->stagedeg.why, sizeof p->stagedeg.why, "none fits");
    snprintf(path, sizeof path, "%s/degrees.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(pf_plan_save(p, g, c, path, err, sizeof err), PF_OK);
    char *txt = read_text(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
    CU_ASSERT_PTR_NOT_NULL(strstr(txt, "\"replicas\": 2,\n      \"tp\": 1,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(txt, "\"stage_degrees\": {\"chosen\": false, "
                                       "\"uniform_ms_per_sample\": 2.5, \"why\": \"none fits\"}"));
    free(txt);
    pf_plan_t *q = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_plan_load(path, g, c, &q, err, sizeof err), PF_OK);
    CU_ASSERT(pf_plan_degrees_replicas(q, 0) == 2 && pf_plan_degrees_replicas(q, 1) == 1);
    CU_ASSERT(q->stage_list[0].devices[1] == 0 && q->stage_list[2].devices[0] == 1);
    pf_plan_t *k = pf_plan_clone(q);
    CU_ASSERT(k && pf_plan_degrees_mixed(k) && k->stage_list[0].devices[1] == 0);
    pf_plan_destroy(&k);
    pf_plan_destroy(&q);
    /* the top level must be the largest: 3 replicas written where the largest stage has 2 */
    const char *bad = "{\"stages\": 2, \"replicas\": 3, \"microbatches\": 2, \"stage_list\": "
                      "[{\"ops\": [0, 1, 2], \"replicas\": 2, \"tp\": 1}, {\"ops\": [3, 4, 5], "
                      "\"replicas\": 1, \"tp\": 1}]}";
    CU_ASSERT_EQUAL(pf_plan_load(pf_test_write("deg.json", bad), g, c, &q, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not the largest of the stages' (2, 1)"));
    const char *odd = "{\"stages\": 2, \"replicas\": 2, \"microbatches\": 3, \"stage_list\": "
                      "[{\"ops\": [0, 1, 2], \"replicas\": 2, \"tp\": 1}, {\"ops\": [3, 4, 5], "
                      "\"replicas\": 1, \"tp\": 1}]}";
    CU_ASSERT_EQUAL(pf_plan_load(pf_test_write("deg.json", odd), g, c, &q, err, sizeof err),
                    PF_OK); /* 2 divides 2 x 3 */
    pf_plan_destroy(&q);
    /* stages that agree with each other but not with the top level: the uniform code would size
     * their devices R x T (the review found it read and wrote past them) */
    const char *agree = "{\"stages\": 2, \"replicas\": 2, \"stage_list\": [{\"ops\": [0, 1, 2], "
                        "\"replicas\": 1, \"tp\": 1, \"devices\": [10]}, {\"ops\": [3, 4, 5], "
                        "\"replicas\": 1, \"tp\": 1, \"devices\": [11]}]}";
    CU_ASSERT_EQUAL(pf_plan_load(pf_test_write("deg.json", agree), g, c, &q, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not the largest of the stages' (1, 1)"));
    /* d x t that would overflow the device array's size: refused before any list is read */
    const char *huge = "{\"stages\": 1, \"replicas\": 1, \"stage_list\": [{\"ops\": [0, 1, 2, "
                       "3, 4, 5], \"replicas\": 4096, \"tp\": 65536, \"devices\": [0]}]}";
    CU_ASSERT_EQUAL(pf_plan_load(pf_test_write("deg.json", huge), g, c, &q, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "stage_list[0]: replicas x tp = 268435456 exceeds"));
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

void pf_suite_plan(void)
{
    CU_pSuite s = CU_add_suite("plan", NULL, NULL);
    CU_add_test(s, "round trip, validation errors", test_round_trip_and_errors);
    CU_add_test(s, "recompute per stage: round trip, old plans, bad names", test_stage_recompute);
    CU_add_test(s, "degrees per stage: round trip, clone, refused files", test_stage_degrees);
    CU_add_test(s, "an edge back across stages is named", test_back_edge_across_stages);
    CU_add_test(s, "stage_list[i].blocks: whole blocks only, never in two stages; cut_blocks",
                test_blocks_never_overlap);
}
