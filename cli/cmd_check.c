/* planfarm check FILE: validate a graph or cluster file and summarise it. */
#include "cli/cli.h"
#include "planner/ir/cluster.h"
#include "planner/ir/cluster_hier.h"
#include "planner/ir/devmodel.h"
#include "planner/partition/downsets.h"
#include "planner/ir/graph.h"
#include "planner/core/json.h"
#include "planner/core/json_stream.h"
#include "planner/core/util.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_DOWNSETS 1000000LL

static void help(FILE *f)
{
    fprintf(f,
            "usage: planfarm check FILE [--max-downsets N]\n\n"
            "Validates a graph or cluster file (which one is told by its keys: \"ops\" or\n"
            "\"devices\" or \"hierarchy\") and prints a summary. FILE may be - for stdin.\n\n"
            "  --max-downsets N  stop counting downsets past N (default %lld)\n\n"
            "Exit status 2 when the file is invalid; the message names the place.\n",
            DEFAULT_MAX_DOWNSETS);
}

static void summarize_graph(const pf_graph_t *g, long long max_downsets)
{
    char pb[32];
    double fwd = 0, bwd = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        fwd += pf_graph_op(g, v)->fwd_ms;
        bwd += pf_graph_op(g, v)->bwd_ms;
    }
    pf_fmt_bytes(pb, sizeof pb, pf_graph_total_param_bytes(g));
    printf("graph %s: %d op%s, %d edge%s, micro-batch %d\n", pf_graph_name(g), pf_graph_nops(g),
           pf_graph_nops(g) == 1 ? "" : "s", pf_graph_nedges(g), pf_graph_nedges(g) == 1 ? "" : "s",
           pf_graph_microbatch(g));
    printf("  compute:      %.3f ms per micro-batch (forward %.3f + backward %.3f)\n", fwd + bwd,
           fwd, bwd);
    printf("  parameters:   %.0f bytes (%s)\n", pf_graph_total_param_bytes(g), pb);
    printf("  longest path: %.3f ms\n", pf_graph_longest_path_ms(g));
    const pf_devmodel_t *dm = pf_graph_device(g);
    if (pf_graph_device_model(g))
        printf("  priced on:    %s (%s)\n", pf_graph_device_model(g),
               !dm ? "no such preset: re-priced linearly"
               : pf_devmodel_as_preset(dm) ? "the preset"
                                           : "a model of its own under that name, in the file");
    long long nd = pf_downsets_count(g, max_downsets);
    if (nd < 0)
        printf("  downsets:     more than %lld\n", max_downsets);
    else
        printf("  downsets:     %lld\n", nd);
}

/* The least and largest latency between two devices: over the levels some pair uses. */
static void hierarchy_latency(const pf_cluster_hier_t *h)
{
    int L = pf_cluster_hier_nlevels(h);
    double lat_lo = INFINITY, lat_hi = -INFINITY;
    for (int l = 0; l < L; l++) {
        if (!pf_cluster_hier_level_used(h, l))
            continue;
        for (int k = 0; l == 0 && k < pf_cluster_hier_nkinds(h); k++) { /* inside: per kind */
            if (pf_cluster_hier_kind(h, k)->gpus < 2)
                continue;
            lat_lo = fmin(lat_lo, pf_cluster_hier_kind(h, k)->lat_us);
            lat_hi = fmax(lat_hi, pf_cluster_hier_kind(h, k)->lat_us);
        }
        if (l > 0) {
            lat_lo = fmin(lat_lo, pf_cluster_hier_level(h, l)->lat_us);
            lat_hi = fmax(lat_hi, pf_cluster_hier_level(h, l)->lat_us);
        }
    }
    if (pf_cluster_hier_has_latency(h) && lat_lo <= lat_hi)
        printf("  latency:      %g .. %g us\n", lat_lo, lat_hi);
    else
        printf("  latency:      none given (0)\n");
}

/* Format 2: the levels, host kinds and exceptions, bottom up. */
static void summarize_hierarchy(const pf_cluster_hier_t *h)
{
    int L = pf_cluster_hier_nlevels(h);
    hierarchy_latency(h);
    printf("  hierarchy:    %d level%s, %d host slot%s, %d exception%s (format 2)\n", L,
           L == 1 ? "" : "s", pf_cluster_hier_hosts(h), pf_cluster_hier_hosts(h) == 1 ? "" : "s",
           pf_cluster_hier_nexceptions(h), pf_cluster_hier_nexceptions(h) == 1 ? "" : "s");
    for (int l = 0; l < L; l++) {
        const pf_cluster_level_t *v = pf_cluster_hier_level(h, l);
        char count[48];
        if (l == 0)
            snprintf(count, sizeof count, "%d GPUs", v->count);
        else if (v->count == 0)
            snprintf(count, sizeof count, "all below");
        else
            snprintf(count, sizeof count, "%d x %s", v->count, pf_cluster_hier_level(h, l - 1)->name);
        printf("    %-8s %-14s %g GB/s per GPU (%g between two GPUs), %g us", v->name, count,
               v->bw_gbps, pf_cluster_hier_level_pair_gbps(h, l), v->lat_us);
        if (l > 0 && v->oversub != 1)
            printf(", oversubscribed %g:1", v->oversub);
        printf("\n");
    }
    for (int k = 0; k < pf_cluster_hier_nkinds(h); k++) {
        const pf_cluster_host_kind_t *x = pf_cluster_hier_kind(h, k);
        char mem[32];
        pf_fmt_bytes(mem, sizeof mem, x->mem_bytes);
        printf("    kind %s: %d GPUs of %s, %g TFLOPs%s%s, %g GB/s and %g us inside\n", x->name,
               x->gpus, mem, x->tflops, x->device_model ? ", model " : "",
               x->device_model ? x->device_model : "", x->bw_gbps, x->lat_us);
    }
    int shown = 0;
    for (int i = 0; i < pf_cluster_hier_hosts(h) && shown < 8; i++) {
        int k = pf_cluster_hier_host_kind(h, i);
        double nic = pf_cluster_hier_host_nic_gbps(h, i);
        if (k == 0 && nic == 0)
            continue;
        printf("    host %d: %s", i, k < 0 ? "missing" : pf_cluster_hier_kind(h, k)->name);
        if (nic > 0)
            printf(", NIC %g GB/s", nic);
        printf("\n");
        shown++;
    }
    if (shown < pf_cluster_hier_nexceptions(h))
        printf("    ... %d more exceptions\n", pf_cluster_hier_nexceptions(h) - shown);
}

/* "a100-80g x 8, h100-sxm x 8": the devices per device model, in device order ("none" for
 * devices that name none); nothing when no device names one. */
static void summarize_models(const pf_cluster_t *c)
{
    enum { SHOWN = 8 };
    const char *name[SHOWN];
    int count[SHOWN], k = 0, n = pf_cluster_ndevices(c), any = 0, rest = 0;
    for (int i = 0; i < n; i++) {
        const char *m = pf_cluster_device(c, i)->device_model;
        any |= m != NULL;
        m = m ? m : "none";
        int j = 0;
        while (j < k && strcmp(name[j], m) != 0)
            j++;
        if (j == k && k == SHOWN) {
            rest++;
            continue;
        }
        if (j == k) {
            name[k] = m;
            count[k++] = 0;
        }
        count[j]++;
    }
    if (!any)
        return;
    printf("  models:      ");
    for (int j = 0; j < k; j++)
        printf("%s %s x %d", j ? "," : "", name[j], count[j]);
    if (rest)
        printf(", %d more devices", rest);
    printf("\n");
}

static void summarize_cluster(const pf_cluster_t *c)
{
    int n = pf_cluster_ndevices(c);
    double lo = pf_cluster_min_mem_bytes(c), hi = 0, lat_lo = -1, lat_hi = 0;
    char a[32], b[32];
    for (int i = 0; i < n; i++)
        if (pf_cluster_device(c, i)->mem_bytes > hi)
            hi = pf_cluster_device(c, i)->mem_bytes;
    pf_fmt_bytes(a, sizeof a, lo);
    pf_fmt_bytes(b, sizeof b, hi);
    int hosts = pf_cluster_nhosts(c);
    printf("cluster %s: %d device%s on %d host%s\n", pf_cluster_name(c), n, n == 1 ? "" : "s",
           hosts, hosts == 1 ? "" : "s");
    printf("  memory:       %s .. %s per device\n", a, b);
    summarize_models(c);
    if (n > 1)
        printf("  bandwidth:    min %g, median %g, max %g GB/s (%s)\n", pf_cluster_bw_min(c),
               pf_cluster_bw_median(c), pf_cluster_bw_max(c),
               pf_cluster_is_symmetric(c) ? "symmetric" : "asymmetric");
    if (pf_cluster_hierarchy(c)) {
        summarize_hierarchy(pf_cluster_hierarchy(c));
        return;
    }
    if (pf_cluster_has_latency(c)) {
        for (int x = 0; x < n; x++)
            for (int y = 0; y < n; y++) {
                if (x == y)
                    continue;
                double l = pf_cluster_lat_us(c, x, y);
                if (lat_lo < 0 || l < lat_lo)
                    lat_lo = l;
                if (l > lat_hi)
                    lat_hi = l;
            }
        printf("  latency:      %g .. %g us\n", lat_lo, lat_hi);
    } else {
        printf("  latency:      none given (0)\n");
    }
}

/* Bound to the long long max_downsets. */
static const cli_option_t check_options[] = {
    {"max-downsets", 0, CLI_OPT_LLONG, .offset = 0, .lo = 1, .hi = 1LL << 40},
    CLI_OPTION_HELP,
    CLI_OPTION_END,
};

/* A graph, read element by element (pf_graph_load_buffer: no tree of the whole file, issue 26
 * item 7). Frees buf. */
static int check_graph(char *buf, size_t len, const char *label, long long max_downsets)
{
    char err[CLI_ERRLEN] = "";
    pf_graph_t *g;
    int rc = pf_graph_load_buffer(buf, len, label, &g, err, sizeof err);
    free(buf);
    if (rc != PF_OK)
        return cli_report("check", rc, err);
    summarize_graph(g, max_downsets);
    pf_graph_destroy(&g);
    return CLI_OK;
}

/* Anything else (a cluster, or text whose top level the key scan could not follow: jansson
 * names the error), parsed once into the tree its reader converts. Frees buf. */
static int check_tree(char *buf, size_t len, const char *label, long long max_downsets)
{
    char err[CLI_ERRLEN] = "";
    json_t *root;
    int rc = pf_json_load_buffer(buf, len, label, &root, err, sizeof err);
    free(buf);
    if (rc != PF_OK)
        return cli_report("check", rc, err);
    int is_graph = json_object_get(root, "ops") != NULL;
    int is_cluster = json_object_get(root, "devices") || json_object_get(root, "hierarchy");
    int is_plan = json_object_get(root, "stage_list") != NULL;
    if (is_plan && !is_graph) {
        json_decref(root);
        snprintf(err, sizeof err,
                 "%s: a plan file (it has \"stage_list\"): check reads graphs and clusters; a "
                 "plan is read against its graph and cluster by 'planfarm map'",
                 label);
        return cli_report("check", PF_EINPUT, err);
    }
    if (!is_graph && !is_cluster) {
        json_decref(root);
        snprintf(err, sizeof err, "%s: neither a graph (no \"ops\") nor a cluster (no \"devices\" or \"hierarchy\")",
                 label);
        return cli_report("check", PF_EINPUT, err);
    }
    if (is_cluster && !is_graph) {
        pf_cluster_t *cl;
        rc = pf_cluster_from_json(root, label, &cl, err, sizeof err);
        json_decref(root);
        if (rc != PF_OK)
            return cli_report("check", rc, err);
        summarize_cluster(cl);
        pf_cluster_destroy(&cl);
        return CLI_OK;
    }
    pf_graph_t *g;
    rc = pf_graph_from_json(root, label, &g, err, sizeof err);
    json_decref(root);
    if (rc != PF_OK)
        return cli_report("check", rc, err);
    summarize_graph(g, max_downsets);
    pf_graph_destroy(&g);
    return CLI_OK;
}

int cmd_check(int argc, char **argv)
{
    long long max_downsets = DEFAULT_MAX_DOWNSETS;
    const cli_options_t spec = {"check", help, NULL, NULL,
                                {{check_options, &max_downsets, NULL}, {NULL, NULL, NULL}}};
    char err[CLI_ERRLEN] = "";
    int rc, first = cli_options_parse(&spec, argc, argv, &rc);
    if (first < 0)
        return rc;
    if (argc - first != 1)
        return cli_usage_error("check", "expected one FILE");
    const char *path = argv[first];
    const char *label = strcmp(path, "-") ? path : "<stdin>";
    char *buf;
    size_t len;
    if ((rc = cli_read_file(path, &buf, &len, err, sizeof err)) != 0)
        return cli_report("check", rc, err);
    /* The kind by the top-level keys, found without parsing the values; one read either way. */
    static const char *const keys[] = {"ops", "devices", "hierarchy", "stage_list"};
    int found[4];
    if (pf_json_stream_find_keys(buf, len, keys, 4, found) == PF_OK && found[0])
        return check_graph(buf, len, label, max_downsets);
    return check_tree(buf, len, label, max_downsets);
}
