/* planfarm map GRAPH CLUSTER PLAN: map a partition's stage replicas onto devices (Parmesan V). */
#include "cli/cli.h"
#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/map/map_stages_search.h"
#include "planner/map/mapping.h"
#include "planner/ir/plan.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(
        f,
        "usage: planfarm map GRAPH CLUSTER PLAN [options]\n\n"
        "Maps every stage replica of PLAN (a plan whose stages have ops, as 'planfarm\n"
        "partition' writes it; devices may be absent) onto one device of CLUSTER, minimising\n"
        "the largest stage time (Parmesan's binary search over a target with an exact DFS\n"
        "probe per target). Writes the plan with devices, objective_ms (full: c_u + eq. 6 +\n"
        "eq. 7 terms), the mapping section, the CS map and p2p map baselines and\n"
        "simulated_step_ms (the analytic estimate (MB + S - 1) x max(c_u + p2p) +\n"
        "max all-reduce, until a simulator exists). PLAN may be - (stdin).\n"
        "A plan whose stages differ (each its own replicas x tp) is placed group by group\n"
        "instead (every replica's devices inside one host, the heaviest stage on the fastest\n"
        "devices; exact on small clusters, else greedy with swaps; DESIGN.md): its objective\n"
        "is per micro-batch of the step, and the options below do not apply.\n\n"
        "  --instantiation I  m (eq. 6), ar (eq. 7), full (both) or auto (default): auto\n"
        "                     picks m or ar by all-reduce / inter-stage bytes, runs the other\n"
        "                     too, keeps the better mapping under full and refines it with a\n"
        "                     full search\n"
        "  --probe-seconds X  deadline of one probe (default %g; 0 = none, exact but\n"
        "                     possibly slow); a probe past it counts as 'not found'\n"
        "  --eps E            stop when t_r - t_l <= E x t_r (default %g)\n"
        "  --batch K          K probes per round at targets splitting [t_l, t_r] evenly, run\n"
        "                     side by side, one thread each (default 1: bisection, each probe\n"
        "                     on every thread)\n"
        "  --no-symmetry      do not prune interchangeable devices, machines (host blocks)\n"
        "                     or replica orderings\n"
        "  --threads N        OpenMP threads (default: OMP_NUM_THREADS or all cores)\n"
        "  --seed N           seed of the random mapping in the initial upper bound (default 1)\n"
        "  -o OUT             output plan (default -: stdout)\n\n"
        "Exit status 2 on bad usage or input (more stage replicas than devices, ...).\n",
        PF_MAPPING_DEFAULT_PROBE_SECONDS, PF_MAPPING_DEFAULT_REL_EPS);
}

static void summary(const pf_plan_t *p)
{
    fprintf(stderr,
            "planfarm map: %d x %d stage replicas on %d devices: objective %.4g ms (full; %s "
            "%.4g ms), CS map %.4g ms (%.2fx), p2p map %.4g ms (%.2fx); %d probes (%d timed out) "
            "in %.2f s\n",
            p->stages, p->replicas, p->devices, p->objective_ms, p->mapping.instantiation,
            p->mapping.objective_ms, p->cs_map.objective_ms,
            p->cs_map.objective_ms / p->objective_ms, p->p2p_map.objective_ms,
            p->p2p_map.objective_ms / p->objective_ms, p->mapping.probes,
            p->mapping.probes_timed_out, p->mapping.seconds);
}

static void summary_stages(const pf_plan_t *p, const pf_map_stages_search_stats_t *st)
{
    char deg[256];
    pf_plan_degrees_describe(p, deg, sizeof deg);
    fprintf(stderr,
            "planfarm map: stages %s on %d devices: objective %.4g ms per micro-batch (%s, "
            "%d group(s) across hosts) in %.2f s\n",
            deg, p->devices, p->objective_ms, st->exact ? "exact" : "greedy and swaps",
            st->split_groups, st->seconds);
}

static int parse_instantiation(const char *cmd, const char *arg, void *base)
{
    pf_mapping_opts_t *o = base;
    if (!strcmp(arg, "auto")) {
        o->auto_inst = 1;
    } else if (pf_map_inst_parse(arg, &o->inst) == PF_OK) {
        o->auto_inst = 0;
    } else {
        cli_usage_error(cmd, "--instantiation: '%s' is not m, ar, full or auto", arg);
        return -1;
    }
    return 0;
}

#define O(field) offsetof(pf_mapping_opts_t, field)
static const cli_option_t map_options[] = {
    {"instantiation", 0, CLI_OPT_CUSTOM, .parse = parse_instantiation},
    {"probe-seconds", 0, CLI_OPT_DOUBLE, .offset = O(probe_seconds), .dlo = 0, .dhi = 1e9},
    {"eps", 0, CLI_OPT_DOUBLE, .offset = O(rel_eps), .dlo = 0, .dhi = 1},
    {"batch", 0, CLI_OPT_INT, .offset = O(batch), .lo = 1, .hi = 1024},
    {"no-symmetry", 0, CLI_OPT_SET_INT, .offset = O(symmetry), .lo = 0},
    {"threads", 0, CLI_OPT_INT, .offset = O(threads), .lo = 1, .hi = 4096},
    {"seed", 0, CLI_OPT_U64, .offset = O(seed), .lo = 0, .hi = 1LL << 62},
    CLI_OPTION_END,
};
#undef O

int cmd_map(int argc, char **argv)
{
    pf_mapping_opts_t o;
    const char *out = "-";
    pf_mapping_opts_init(&o);
    o.auto_inst = 1;
    const cli_options_t spec = {"map", help, NULL, NULL,
                                {{map_options, &o, NULL},
                                 {cli_options_output, &out, NULL},
                                 {NULL, NULL, NULL}}};
    char err[CLI_ERRLEN] = "";
    int rc, first = cli_options_parse(&spec, argc, argv, &rc);
    if (first < 0)
        return rc;
    if (argc - first != 3)
        return cli_usage_error("map", "expected GRAPH CLUSTER PLAN");
    const char *gpath = argv[first], *cpath = argv[first + 1], *ppath = argv[first + 2];
    if ((!strcmp(gpath, "-")) + (!strcmp(cpath, "-")) + (!strcmp(ppath, "-")) > 1)
        return cli_usage_error("map", "only one of GRAPH, CLUSTER, PLAN can be - (stdin)");

    pf_graph_t *g = NULL;
    pf_cluster_t *cl = NULL;
    pf_plan_t *p = NULL;
    if ((rc = pf_graph_load(gpath, &g, err, sizeof err)) != PF_OK ||
        (rc = pf_cluster_load(cpath, &cl, err, sizeof err)) != PF_OK ||
        (rc = pf_plan_load(ppath, g, cl, &p, err, sizeof err)) != PF_OK)
        goto done;
    pf_map_stages_search_opts_t so;
    pf_map_stages_search_stats_t sst;
    pf_map_stages_search_opts_init(&so);
    int mixed = pf_plan_degrees_mixed(p);
    rc = mixed ? pf_map_stages_search_plan(g, cl, p, &so, &sst, err, sizeof err)
               : pf_mapping_plan(g, cl, p, &o, err, sizeof err);
    if (rc != PF_OK) {
        pf_err_prefix(err, sizeof err, strcmp(ppath, "-") ? ppath : "<stdin>");
        goto done;
    }
    if ((rc = pf_plan_save(p, g, cl, out, err, sizeof err)) != PF_OK)
        goto done;
    if (cli_stderr_tty() && mixed)
        summary_stages(p, &sst);
    else if (cli_stderr_tty())
        summary(p);
done:
    pf_plan_destroy(&p);
    pf_cluster_destroy(&cl);
    pf_graph_destroy(&g);
    return rc == PF_OK ? CLI_OK : cli_report("map", rc, err);
}
