/* planfarm draw PLAN CLUSTER [GRAPH] -o OUT.svg: the picture of a mapping (planner/sim/draw.h). */
#include "cli/cli.h"
#include "planner/ir/cluster.h"
#include "planner/sim/draw.h"
#include "planner/ir/graph.h"
#include "planner/core/json.h"
#include "planner/ir/plan.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: planfarm draw PLAN CLUSTER [GRAPH] -o OUT.svg\n\n"
            "Draws a mapped plan on its cluster as SVG: every host a box, every GPU a square\n"
            "coloured by its stage, lines between GPUs as wide as their traffic per step (p2p\n"
            "bytes between consecutive stages of a replica, ring all-reduce bytes between the\n"
            "replicas of a stage). Without GRAPH the traffic is unknown and every used link is\n"
            "drawn at one width.\n\n"
            "  -o OUT.svg   the picture (default -: stdout)\n\n"
            "Exit status 2 on bad usage or input (an unmapped plan, ...).\n");
}

/* The plan file names ops by their graph ids. Without the graph, a stand-in with those ids (no
 * costs, no edges) lets the plan reader check the plan as usual. */
static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int stand_in_graph(const char *ppath, pf_graph_t **out, char *err, size_t errlen)
{
    json_t *root = NULL, *stages, *st, *op;
    int64_t *ids = NULL;
    size_t i, j, n = 0, cap = 0;
    pf_graph_t *g = NULL;
    int rc = pf_json_load_file(ppath, &root, err, errlen);
    if (rc != PF_OK)
        return rc;
    if ((rc = pf_json_get_array(root, "plan", "stage_list", PF_JSON_GET_REQUIRED, &stages, err, errlen)))
        goto done;
    json_array_foreach(stages, i, st)
    {
        json_array_foreach(json_object_get(st, "ops"), j, op)
        {
            if (!json_is_integer(op))
                continue; /* the plan reader names it */
            if (pf_grow((void **)&ids, &cap, n + 1, sizeof *ids))
                goto oom;
            ids[n++] = json_integer_value(op);
        }
    }
    if (n)
        qsort(ids, n, sizeof *ids, cmp_id);
    if (!(g = pf_graph_new("plan", 1)))
        goto oom;
    for (i = 0; i < n; i++) {
        pf_op_t o = {.id = ids[i]};
        if ((i == 0 || ids[i] != ids[i - 1]) && pf_graph_add_op(g, &o) < 0)
            goto oom;
    }
    rc = pf_graph_finalize(g, err, errlen);
    goto done;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "out of memory");
done:
    free(ids);
    json_decref(root);
    if (rc != PF_OK)
        pf_graph_destroy(&g);
    *out = g;
    return rc;
}

int cmd_draw(int argc, char **argv)
{
    const char *out = "-";
    const cli_options_t spec = {"draw", help, NULL, NULL,
                                {{cli_options_output, &out, NULL}, {NULL, NULL, NULL}}};
    char err[CLI_ERRLEN] = "";
    int rc, first = cli_options_parse(&spec, argc, argv, &rc);
    if (first < 0)
        return rc;
    int npos = argc - first;
    if (npos != 2 && npos != 3)
        return cli_usage_error("draw", "expected PLAN CLUSTER [GRAPH]");
    const char *ppath = argv[first], *cpath = argv[first + 1];
    const char *gpath = npos == 3 ? argv[first + 2] : NULL;
    if (!strcmp(ppath, "-") || !strcmp(cpath, "-") || (gpath && !strcmp(gpath, "-")))
        return cli_usage_error("draw", "PLAN, CLUSTER and GRAPH must be files");
    if (cli_check_output("draw", out))
        return CLI_USAGE;

    pf_graph_t *g = NULL;
    pf_cluster_t *cl = NULL;
    pf_plan_t *p = NULL;
    FILE *f = NULL;
    if ((rc = gpath ? pf_graph_load(gpath, &g, err, sizeof err)
                    : stand_in_graph(ppath, &g, err, sizeof err)) != PF_OK ||
        (rc = pf_cluster_load(cpath, &cl, err, sizeof err)) != PF_OK ||
        (rc = pf_plan_load(ppath, g, cl, &p, err, sizeof err)) != PF_OK)
        goto done;
    f = strcmp(out, "-") ? fopen(out, "w") : stdout;
    if (!f) {
        rc = pf_fail(err, sizeof err, PF_ERR, "%s: cannot write", out);
        goto done;
    }
    if ((rc = pf_draw_mapping_svg(p, cl, gpath ? g : NULL, f, err, sizeof err)) != PF_OK)
        pf_err_prefix(err, sizeof err, ppath);
    if (f != stdout && fclose(f) != 0 && rc == PF_OK)
        rc = pf_fail(err, sizeof err, PF_ERR, "%s: write failed", out);
done:
    pf_plan_destroy(&p);
    pf_cluster_destroy(&cl);
    pf_graph_destroy(&g);
    return rc == PF_OK ? CLI_OK : cli_report("draw", rc, err);
}
