/* stagedeg on [PipeDream]'s profiles under [PipeDream]'s model of replicated stages: the
 * problem optimizer_graph_hierarchical.py solves with -n N -b BW and no --straight_pipeline (one
 * level of N workers, no memory constraint, no activation compression, exactly N workers used).
 * stagedeg.h's options that make its objective PipeDream's (section 3.1's cost model, as the
 * optimizer's compute_partitioning computes it):
 *   allreduce_per_microbatch = 1, allreduce_factor = 4: a stage on m replicas takes
 *     (C + 4 (m - 1) P / (B m)) / m  (C its forward + backward, P its parameter bytes);
 *   edge_factor = 0: the transfers between stages enter PipeDream's recurrence only under
 *     --activation_compression_ratio;
 *   degrees ANY, exact_devices = 1, memory unlimited, flat bandwidth B = BW bytes/s.
 * PipeDream's view of the profile, as its main() makes it: Input sources and unused __getitem__
 * sinks cost nothing (their compute is zeroed here; they hold no parameters in any shipped
 * profile). PipeDream's DP runs over the downsets its antichain DAG reaches; this one over every
 * downset, so its optimum is PipeDream's or better.
 *
 * Prints per profile and N the optimum in PipeDream's units (seconds per sample of its
 * "Time per stage in pipeline"), the stages' degrees, and the wall seconds of import + downsets +
 * DP in this process. With PF_STAGEDEG_PD_PLANS=DIR it also prices PipeDream's own plan, read
 * from DIR/pd-PROFILE-N.stages ("degrees r0 r1 ..." then "NODE_ID STAGE" lines, written by
 * bench/stagedeg_pipedream.sh from PipeDream's output), under the same model: it should equal the
 * time PipeDream reports, which checks the mapping above on real profiles.
 * Environment: PF_PEER_DATA (../shared/data), PF_PIPEDREAM_PROFILES (default "vgg16 resnet50
 * alexnet gnmt resnext50"), PF_STAGEDEG_DEVICES ("4 8"), PF_PIPEDREAM_BW_BYTES (1e10, PipeDream's
 * -b as bench/peers.sh passes it), PF_STAGEDEG_THREADS (OpenMP threads, default 1),
 * PF_STAGEDEG_MAX_DOWNSETS (65536: a graph with more runs on the n + 1 prefixes of one
 * topological order instead, marked 'p': gnmt_large has 3.3 million downsets, inception_v3
 * 221,566, the nasnets over 10^8). SKIP without the data. */
#include "planner/core/util.h"
#include "planner/inputs/import.h"
#include "planner/partition/stagedeg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Does PipeDream's main() drop op v (an Input source or a __getitem__ sink)? */
static int pd_dropped(const pf_graph_t *g, int v)
{
    const char *dot = strchr(pf_graph_op(g, v)->name, '.');
    int nin, nout;
    pf_graph_in(g, v, &nin);
    pf_graph_out(g, v, &nout);
    if (!dot)
        return 0;
    return (nin == 0 && !strncmp(dot + 1, "Input", 5)) ||
           (nout == 0 && !strncmp(dot + 1, "__getitem__", 11));
}

/* PipeDream's plan from path into r (a result for the graph's ops): the stage of every node it
 * names, its producer's stage for the ops it dropped, the degrees from the first line. */
static pf_stagedeg_result_t *pd_plan_load(const char *path, const pf_graph_t *g)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char line[1024], *p = line, *end;
    int n = pf_graph_nops(g), deg[64], S = 0;
    if (fgets(line, sizeof line, f) && !strncmp(line, "degrees", 7))
        for (p += 7; S < 64 && (deg[S] = (int)strtol(p, &end, 10)) > 0 && end != p; p = end)
            S++;
    pf_stagedeg_result_t *r = S ? pf_stagedeg_result_new(n, S) : NULL;
    for (int v = 0; r && v < n; v++)
        r->op_stage[v] = -1;
    long long id;
    int st;
    while (r && fscanf(f, " %lld %d", &id, &st) == 2)
        for (int v = 0; v < n; v++)
            if (pf_graph_op(g, v)->id == id && st >= 0 && st < S)
                r->op_stage[v] = st;
    fclose(f);
    for (int s = 0; r && s < S; s++)
        r->degree[s] = deg[s];
    for (int v = 0; r && v < n; v++) { /* topological order: producers first */
        int nin;
        const int *in = pf_graph_in(g, v, &nin);
        if (r->op_stage[v] < 0)
            r->op_stage[v] = nin ? r->op_stage[pf_graph_edge(g, in[0])->src] : 0;
        if (r->op_stage[v] < 0)
            pf_stagedeg_result_destroy(&r);
    }
    return r;
}

static void print_pd_plan(const char *dir, const char *name, int D, const pf_graph_t *g,
                          const pf_cost_model_t *cm, const pf_stagedeg_opts_t *o)
{
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/pd-%s-%d.stages", dir, name, D);
    pf_stagedeg_result_t *r = pd_plan_load(path, g);
    if (!r || pf_stagedeg_eval(g, cm, o, r, err, sizeof err) != PF_OK)
        printf(" pd_plan -");
    else
        printf(" pd_plan %.12g", r->objective_ms / 1e3);
    pf_stagedeg_result_destroy(&r);
}

static int run_one(const char *data, const char *name, int D, double bw_bytes, long long cap)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/pipedream/%s.txt", data, name);
    double t0 = pf_now_s();
    pf_graph_t *g = NULL;
    if (pf_import_pipedream(path, 0, &g, err, sizeof err) != PF_OK) {
        fprintf(stderr, "stagedeg_pd: %s\n", err);
        return -1;
    }
    int n = pf_graph_nops(g), capped = 0, rc = -1;
    pf_stagedeg_opcost_t *none = malloc((size_t)n * sizeof *none);
    pf_downsets_t *ds = NULL;
    pf_stagedeg_result_t *r = NULL;
    if (!none)
        goto done;
    for (int v = 0; v < n; v++)
        none[v] = (pf_stagedeg_opcost_t){pd_dropped(g, v) ? 0 : pf_graph_cu_ms(g, v), 0, 0};
    pf_cost_model_t cm;
    memset(&cm, 0, sizeof cm);
    pf_training_t t;
    pf_training_init(&t);
    cm.flat_gbps = bw_bytes / 1e9; /* pf_bytes_ms: bytes / (gbps 1e6) ms = bytes / BW s */
    cm.microbatches = 1;           /* not read: the all-reduce is per micro-batch */
    cm.mem_limit_bytes = INFINITY; /* PipeDream's default: no --use_memory_constraint */
    pf_cost_model_set_training(&cm, &t, 1, 0);
    pf_stagedeg_opts_t o;
    pf_stagedeg_opts_init(&o);
    o.devices = D;
    o.degrees = PF_STAGEDEG_DEGREES_ANY;
    o.exact_devices = 1;
    o.edge_factor = 0;
    o.allreduce_factor = 4;
    o.allreduce_per_microbatch = 1;
    o.none = none;
    o.threads = getenv("PF_STAGEDEG_THREADS") ? atoi(getenv("PF_STAGEDEG_THREADS")) : 1;
    /* the DP is quadratic in downsets: past the cap, the prefixes of one topological order (a
     * heuristic: PipeDream's antichain DAG may reach downsets they miss) */
    ds = pf_downsets_enumerate(g, cap, &capped);
    if (!ds && capped)
        ds = pf_downsets_topo_prefixes(g);
    if (!ds || pf_stagedeg_run(g, ds, &cm, &o, &r, err, sizeof err) != PF_OK) {
        fprintf(stderr, "stagedeg_pd: %s: %s\n", name, ds ? err : "downsets: out of memory");
        goto done;
    }
    double wall_s = pf_now_s() - t0;
    printf("%-13s %2d %9lld%c %8.4f %17.12g %3d  ", name, D, pf_downsets_size(ds), capped ? 'p' : ' ',
           wall_s, r->objective_ms / 1e3, r->stages);
    for (int s = 0; s < r->stages; s++)
        printf("%s%d", s ? "," : "", r->degree[s]);
    if (getenv("PF_STAGEDEG_PD_PLANS"))
        print_pd_plan(getenv("PF_STAGEDEG_PD_PLANS"), name, D, g, &cm, &o);
    printf("\n");
    rc = 0;
done:
    pf_stagedeg_result_destroy(&r);
    pf_downsets_destroy(&ds);
    free(none);
    pf_graph_destroy(&g);
    return rc;
}

int pf_bench_stagedeg_pd(void)
{
    const char *data = getenv("PF_PEER_DATA") ?: "../shared/data";
    const char *list = getenv("PF_PIPEDREAM_PROFILES") ?: "vgg16 resnet50 alexnet gnmt resnext50";
    const char *devs = getenv("PF_STAGEDEG_DEVICES") ?: "4 8";
    double bw = getenv("PF_PIPEDREAM_BW_BYTES") ? atof(getenv("PF_PIPEDREAM_BW_BYTES")) : 1e10;
    long long cap = getenv("PF_STAGEDEG_MAX_DOWNSETS") ? atoll(getenv("PF_STAGEDEG_MAX_DOWNSETS"))
                                                       : 1LL << 16;
    char probe[1024], buf[1024], dbuf[256];
    snprintf(probe, sizeof probe, "%s/pipedream/vgg16.txt", data);
    FILE *f = fopen(probe, "r");
    if (!f) {
        printf("SKIP stagedeg_pd: no PipeDream profiles at %s/pipedream (set PF_PEER_DATA)\n", data);
        return 0;
    }
    fclose(f);
    printf("%-13s %2s %10s %8s %17s %3s  %s\n", "profile", "N", "downsets", "wall s",
           "s per sample", "S", "degrees (PipeDream's model, -b BW; wall: import + downsets + DP;"
           " p: over PF_STAGEDEG_MAX_DOWNSETS, topological prefixes only)");
    snprintf(buf, sizeof buf, "%s", list);
    int failed = 0;
    for (char *s1 = NULL, *p = strtok_r(buf, " ", &s1); p; p = strtok_r(NULL, " ", &s1)) {
        snprintf(dbuf, sizeof dbuf, "%s", devs);
        for (char *s2 = NULL, *d = strtok_r(dbuf, " ", &s2); d; d = strtok_r(NULL, " ", &s2))
            failed |= run_one(data, p, atoi(d), bw, cap) != 0;
    }
    return failed;
}
