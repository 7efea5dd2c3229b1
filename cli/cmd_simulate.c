/* planfarm simulate GRAPH CLUSTER PLAN: one training step of a mapped plan in the task-graph
 * simulator (planner/sim/simulate.h); figures on stdout, the timeline as SVG on request. */
#include "cli/cli.h"
#include "planner/ir/cluster.h"
#include "planner/sim/chunks.h"
#include "planner/sim/draw.h"
#include "planner/ir/graph.h"
#include "planner/ir/plan.h"
#include "planner/sim/simulate.h"
#include "planner/sim/simstages_plan.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: planfarm simulate GRAPH CLUSTER PLAN [options]\n\n"
            "Simulates one training step of PLAN (a mapped plan: every stage replica has a\n"
            "device) on CLUSTER: per device a compute and a communication stream; forward and\n"
            "backward of every stage replica per micro-batch, p2p transfers between consecutive\n"
            "stages (latency + bytes / bandwidth; a device sends while it receives), the ring\n"
            "all-reduce of each stage's gradients (eq. 7) and the optimizer. Prints the step time, the\n"
            "bubble, and per device its busy time and peak memory. PLAN may be - (stdin).\n\n"
            "  --schedule S        gpipe, 1f1b, eager-1f1b or signal (free communication: a lower\n"
            "                      bound); default: the plan's schedule\n"
            "  --microbatches MB   micro-batches per step (default: the plan's)\n"
            "  --buckets N         gradient all-reduce buckets per stage (default: Megatron-LM's\n"
            "                      bucket of max(4e7, 1e6 x replicas) parameters)\n"
            "  --timeline OUT.svg  write the timeline: one row per device, bubbles visible\n\n"
            "Exit status 2 on bad usage or input (an unmapped plan, a bad schedule, ...).\n");
}

/* Row i's stage and replica: rank-major rows of R x T each, or the plan's own d_s x t_s when its
 * stages differ (simstages.h). */
static void row_place(const pf_simulate_result_t *r, const pf_plan_t *p, int i, int *s, int *rep)
{
    int k, per_stage = r->replicas * r->tp;
    if (pf_plan_degrees_mixed(p)) {
        pf_simstages_plan_row(p, i, s, rep, &k);
        return;
    }
    *s = i / per_stage;
    *rep = i % per_stage / r->tp;
}

static void print_figures(const pf_simulate_result_t *r, const pf_cluster_t *c, const pf_plan_t *p)
{
    printf("step %.2f ms (%s, %d micro-batches, bubble %.0f%%)\n", r->step_ms,
           pf_training_schedule_name(r->schedule), r->microbatches, 100 * r->bubble_fraction);
    if (r->schedule == PF_SCHEDULE_SIGNAL)
        printf("  (communication free; best compute order: %s)\n",
               pf_training_schedule_name(r->order));
    printf("%-6s %-20s %5s %7s %10s %10s %12s\n", "device", "name", "stage", "replica", "busy_ms",
           "comm_ms", "peak_mem");
    for (int i = 0; i < r->ndevices; i++) {
        char mem[32];
        int s, rep;
        row_place(r, p, i, &s, &rep);
        pf_fmt_bytes(mem, sizeof mem, r->peak_mem_bytes[i]);
        printf("%-6d %-20s %5d %7d %10.3f %10.3f %12s\n",
               (int)pf_cluster_device(c, r->device[i])->id,
               pf_cluster_device(c, r->device[i])->name, s, rep, r->busy_ms[i],
               r->comm_busy_ms[i], mem);
    }
}

/* What the flags ask for; 0 and false: the plan's. */
typedef struct {
    pf_training_schedule_t sched;
    bool have_sched;
    int microbatches, buckets;
    const char *timeline;
} simulate_args_t;

static int parse_schedule(const char *cmd, const char *arg, void *base)
{
    simulate_args_t *a = base;
    if ((int)(a->sched = pf_training_schedule_parse(arg)) < 0) {
        cli_usage_error(cmd, "--schedule: '%s' is not gpipe, 1f1b, eager-1f1b or signal", arg);
        return -1;
    }
    a->have_sched = true;
    return 0;
}

/* A uniform plan: simulate.h's input (interleaving's chunks included) with the flags'
 * overrides, and one run; `label` prefixes an input error. */
static int simulate_uniform(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p,
                            const simulate_args_t *a, const char *label,
                            pf_simulate_result_t **r, char *err, size_t errlen)
{
    pf_simulate_input_t in;
    int rc = pf_chunks_input_from_setting(g, c, NULL, p, NULL, &in, err, errlen);
    if (rc != PF_OK) {
        pf_err_prefix(err, errlen, label);
        return rc;
    }
    if (a->have_sched)
        in.schedule = a->sched;
    if (a->microbatches)
        in.microbatches = a->microbatches;
    if (a->buckets)
        in.buckets = a->buckets;
    in.timeline = a->timeline != NULL;
    rc = pf_simulate(&in, r, err, errlen);
    pf_simulate_input_clear(&in);
    return rc;
}

/* A plan whose stages differ: simstages.h's input and run, the same overrides
 * (--microbatches per replica of the widest stage, as the plan's). */
static int simulate_mixed(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p,
                          const simulate_args_t *a, const char *label, pf_simulate_result_t **r,
                          char *err, size_t errlen)
{
    pf_simstages_input_t in;
    int rc = pf_simstages_plan_input(g, c, p, &in, err, errlen);
    if (rc != PF_OK) {
        pf_err_prefix(err, errlen, label);
        return rc;
    }
    if (a->have_sched)
        in.schedule = a->sched;
    if (a->microbatches && (long long)a->microbatches * p->replicas > 1 << 24) {
        pf_simstages_input_clear(&in);
        return pf_fail(err, errlen, PF_EINPUT, "%s: --microbatches %d x %d replicas: too many "
                       "micro-batches", label, a->microbatches, p->replicas);
    }
    if (a->microbatches)
        in.microbatches = a->microbatches * p->replicas;
    if (a->buckets)
        in.buckets = a->buckets;
    in.timeline = a->timeline != NULL;
    rc = pf_simstages_run(&in, r, err, errlen);
    pf_simstages_input_clear(&in);
    return rc;
}

#define A(field) offsetof(simulate_args_t, field)
static const cli_option_t simulate_options[] = {
    {"schedule", 0, CLI_OPT_CUSTOM, .parse = parse_schedule},
    {"microbatches", 0, CLI_OPT_INT, .offset = A(microbatches), .lo = 1, .hi = 1 << 16},
    {"buckets", 0, CLI_OPT_INT, .offset = A(buckets), .lo = 1, .hi = 1 << 16},
    {"timeline", 0, CLI_OPT_STRING, .offset = A(timeline)},
    CLI_OPTION_HELP,
    CLI_OPTION_END,
};
#undef A

int cmd_simulate(int argc, char **argv)
{
    simulate_args_t a = {PF_SCHEDULE_1F1B, false, 0, 0, NULL};
    const cli_options_t spec = {"simulate", help, NULL, NULL,
                                {{simulate_options, &a, NULL}, {NULL, NULL, NULL}}};
    char err[CLI_ERRLEN] = "";
    int rc, first = cli_options_parse(&spec, argc, argv, &rc);
    if (first < 0)
        return rc;
    const char *timeline = a.timeline;
    if (argc - first != 3)
        return cli_usage_error("simulate", "expected GRAPH CLUSTER PLAN");
    const char *gpath = argv[first], *cpath = argv[first + 1], *ppath = argv[first + 2];
    if ((!strcmp(gpath, "-")) + (!strcmp(cpath, "-")) + (!strcmp(ppath, "-")) > 1)
        return cli_usage_error("simulate", "only one of GRAPH, CLUSTER, PLAN can be - (stdin)");
    if (timeline && !strcmp(timeline, "-"))
        return cli_usage_error("simulate", "--timeline: give a file name, not -");
    if (timeline && cli_check_output("simulate", timeline))
        return CLI_USAGE;

    pf_graph_t *g = NULL;
    pf_cluster_t *cl = NULL;
    pf_plan_t *p = NULL;
    pf_simulate_result_t *r = NULL;
    FILE *f = NULL;
    if ((rc = pf_graph_load(gpath, &g, err, sizeof err)) != PF_OK ||
        (rc = pf_cluster_load(cpath, &cl, err, sizeof err)) != PF_OK ||
        (rc = pf_plan_load(ppath, g, cl, &p, err, sizeof err)) != PF_OK)
        goto done;
    const char *label = strcmp(ppath, "-") ? ppath : "<stdin>";
    if ((rc = (pf_plan_degrees_mixed(p) ? simulate_mixed : simulate_uniform)(
             g, cl, p, &a, label, &r, err, sizeof err)) != PF_OK)
        goto done;
    print_figures(r, cl, p);
    if (timeline) {
        if (!(f = fopen(timeline, "w"))) {
            rc = pf_fail(err, sizeof err, PF_ERR, "%s: cannot write", timeline);
            goto done;
        }
        rc = pf_draw_timeline_svg(r, cl, p->model, f, err, sizeof err);
        if (fclose(f) != 0 && rc == PF_OK)
            rc = pf_fail(err, sizeof err, PF_ERR, "%s: write failed", timeline);
    }
done:
    pf_simulate_result_destroy(&r);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&cl);
    pf_graph_destroy(&g);
    return rc == PF_OK ? CLI_OK : cli_report("simulate", rc, err);
}
