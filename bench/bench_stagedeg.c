/* stagedeg on [Piper]'s inputs under [Piper]'s model, in its `notp` mode (per-stage data-parallel
 * degree and recomputation, planner/partition/stagedeg.h) or, with PF_STAGEDEG_MODE=full, its
 * `full` mode (a tensor-parallel degree per stage too and every node's configurations, its
 * "TMPCs": planner/partition/stagedeg_tp.h), priced as Piper prices (edges twice, its
 * parameter-server all-reduce, d | mbsInBatch, memoryUsageA x y + memoryUsageB, 16 GiB devices or
 * PF_STAGEDEG_MEM_GIB).
 * notp: each op's two modes come from its node's 1-device configurations ("vanilla" and
 * "activation recomp"); full: every configuration of every t, with its syncTimeFw / syncTimeBw
 * per neighbour as the sync bytes of that edge. The graph from planfarm's importer (op index =
 * node position in the file).
 *
 * Writes, per input and device count, $PF_STAGEDEG_OUT/stagedeg-INPUT-D-MODE.stages in
 * bench/piper_eval.cpp's format, so that bench/stagedeg_piper.sh prices the plan with Piper's own
 * getTPSForResult; prints the DP's own objective (which should equal Piper's price) and its
 * wall and CPU seconds (downsets + DP; CPU over every thread: Piper's driver reports clock()).
 * PF_PIPER_INPUTS ("bert32a100:8 resnet:32" ...) and PF_PEER_DATA as bench/peers.sh reads them;
 * without the data the bench says SKIP and passes. */
#include "planner/core/json.h"
#include "planner/core/util.h"
#include "planner/inputs/import.h"
#include "planner/partition/stagedeg_tp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>


/* A node's 1-device configuration named id into c (as none when the file has none). */
static int node_mode(json_t *node, const char *id, pf_stagedeg_opcost_t *c)
{
    json_t *list = json_object_get(json_object_get(node, "TMPCs"), "1"), *x;
    size_t i;
    json_array_foreach(list, i, x)
    {
        if (strcmp(json_string_value(json_object_get(x, "id")) ?: "", id))
            continue;
        c->cu_ms = json_number_value(json_object_get(x, "timePerSample"));
        c->act_bytes = json_number_value(json_object_get(x, "memoryUsageA"));
        c->fixed_bytes = json_number_value(json_object_get(x, "memoryUsageB"));
        return 1;
    }
    return 0;
}

/* Every node's configurations (full mode): the table, the sync bytes it points into, and each
 * configuration's place in its node's list for its t (piper_eval names it so). */
typedef struct {
    pf_stagedeg_tmpc_t *opt;
    int *first, *within;
    double *sync;
} tmpcs_t;

static void tmpcs_free(tmpcs_t *t)
{
    free(t->opt);
    free(t->first);
    free(t->within);
    free(t->sync);
}

/* Configuration x of op v: its numbers, and its sync bytes per edge in then out (syncTimeFw
 * of the edge's tail, syncTimeBw of its head, both keyed by Piper node id). */
static void tmpc_read(const pf_graph_t *g, int v, int t, json_t *x, pf_stagedeg_tmpc_t *c,
                      double *sync)
{
    int nin, nout;
    const int *in = pf_graph_in(g, v, &nin), *out = pf_graph_out(g, v, &nout);
    char key[32];
    *c = (pf_stagedeg_tmpc_t){t, json_number_value(json_object_get(x, "timePerSample")),
                              json_number_value(json_object_get(x, "parameterSize")),
                              json_number_value(json_object_get(x, "memoryUsageA")),
                              json_number_value(json_object_get(x, "memoryUsageB")), sync};
    for (int i = 0; i < nin; i++) {
        snprintf(key, sizeof key, "%lld", (long long)pf_graph_op(g, pf_graph_edge(g, in[i])->src)->id);
        sync[i] = json_number_value(json_object_get(json_object_get(x, "syncTimeFw"), key));
    }
    for (int i = 0; i < nout; i++) {
        snprintf(key, sizeof key, "%lld", (long long)pf_graph_op(g, pf_graph_edge(g, out[i])->dst)->id);
        sync[nin + i] = json_number_value(json_object_get(json_object_get(x, "syncTimeBw"), key));
    }
}

static int tmpcs_load(json_t *nodes, const pf_graph_t *g, tmpcs_t *tb)
{
    int n = pf_graph_nops(g), k = 0, ns = 0, total = 0, slots = 0;
    memset(tb, 0, sizeof *tb);
    for (int v = 0; v < n; v++) {
        int nin, nout;
        const char *key;
        json_t *list;
        pf_graph_in(g, v, &nin);
        pf_graph_out(g, v, &nout);
        json_object_foreach(json_object_get(json_array_get(nodes, (size_t)v), "TMPCs"), key, list)
        {
            total += (int)json_array_size(list);
            slots += (int)json_array_size(list) * (nin + nout);
        }
    }
    tb->opt = malloc((size_t)(total ? total : 1) * sizeof *tb->opt);
    tb->within = malloc((size_t)(total ? total : 1) * sizeof *tb->within);
    tb->first = malloc(((size_t)n + 1) * sizeof *tb->first);
    tb->sync = malloc((size_t)(slots ? slots : 1) * sizeof *tb->sync);
    if (!tb->opt || !tb->within || !tb->first || !tb->sync)
        return -1;
    for (int v = 0; v < n; v++) {
        int nin, nout;
        const char *key;
        json_t *list, *x;
        size_t i;
        pf_graph_in(g, v, &nin);
        pf_graph_out(g, v, &nout);
        tb->first[v] = k;
        json_object_foreach(json_object_get(json_array_get(nodes, (size_t)v), "TMPCs"), key, list)
        {
            json_array_foreach(list, i, x)
            {
                tmpc_read(g, v, atoi(key), x, &tb->opt[k], tb->sync + ns);
                tb->within[k++] = (int)i;
                ns += nin + nout;
            }
        }
    }
    tb->first[n] = k;
    return 0;
}

/* The plan in piper_eval's format: "[recomp] d id id ..." per stage, "idr" for a node
 * recomputed alone; with configurations (tb), "tp t d id#l ...", l the node's configuration in
 * its list for t. */
static int write_stages(const char *path, const pf_graph_t *g, const pf_stagedeg_result_t *r,
                        const tmpcs_t *tb)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    for (int s = 0; s < r->stages; s++) {
        if (tb)
            fprintf(f, "tp %d %d", r->tensor[s], r->degree[s]);
        else
            fprintf(f, "%s%d", r->recompute[s] == 1 ? "recomp " : "", r->degree[s]);
        for (int v = 0; v < r->nops; v++) {
            if (r->op_stage[v] != s)
                continue;
            fprintf(f, " %lld", (long long)pf_graph_op(g, v)->id);
            if (tb)
                fprintf(f, "#%d", tb->within[tb->first[v] + r->op_tmpc[v]]);
            else if (r->recompute[s] == 2 && r->op_recompute[v])
                fputc('r', f);
        }
        fputc('\n', f);
    }
    return fclose(f);
}

typedef struct {
    json_t *root;
    pf_graph_t *g;
    pf_stagedeg_opcost_t *none, *full;
    double gbps;
    int mb;
} input_t;

static void input_free(input_t *in)
{
    json_decref(in->root);
    pf_graph_destroy(&in->g);
    free(in->none);
    free(in->full);
}

static int input_load(const char *path, input_t *in, char *err, size_t errlen)
{
    memset(in, 0, sizeof *in);
    if (pf_json_load_file(path, &in->root, err, errlen) != PF_OK ||
        pf_import_piper(path, 0, &in->g, err, errlen) != PF_OK)
        return -1;
    json_t *nodes = json_object_get(in->root, "nodes");
    int n = pf_graph_nops(in->g);
    in->none = calloc((size_t)n, sizeof *in->none);
    in->full = calloc((size_t)n, sizeof *in->full);
    if (!in->none || !in->full || (int)json_array_size(nodes) != n)
        return pf_fail(err, errlen, PF_ERR, "%s: nodes and ops differ", path);
    for (int v = 0; v < n; v++) {
        json_t *node = json_array_get(nodes, (size_t)v);
        node_mode(node, "vanilla", &in->none[v]);
        if (!node_mode(node, "activation recomp", &in->full[v]))
            in->full[v] = in->none[v];
    }
    /* Piper's times are in its own unit and its bandwidth in bytes per that unit x 1e0 (per
     * second): pf_bytes_ms(b, gbps) = b / (gbps 1e6) is b / bandwidth with gbps = bandwidth / 1e6 */
    in->gbps = json_number_value(json_object_get(in->root, "bandwidth")) / 1e6;
    in->mb = (int)json_integer_value(json_object_get(in->root, "mbsInBatch"));
    return PF_OK;
}

static int run_one(const char *data, const char *outdir, const char *name, int D, int full)
{
    char path[1024], err[512];
    input_t in;
    tmpcs_t tb = {0};
    snprintf(path, sizeof path, "%s/piper/%s.json", data, name);
    if (input_load(path, &in, err, sizeof err) != PF_OK) {
        fprintf(stderr, "stagedeg: %s\n", err);
        input_free(&in);
        return -1;
    }
    if (full && tmpcs_load(json_object_get(in.root, "nodes"), in.g, &tb) != 0) {
        fprintf(stderr, "stagedeg: %s: out of memory\n", name);
        tmpcs_free(&tb);
        input_free(&in);
        return -1;
    }
    pf_stagedeg_tmpcs_t tab = {tb.opt, tb.first};
    pf_cost_model_t cm;
    memset(&cm, 0, sizeof cm);
    pf_training_t t;
    pf_training_init(&t);
    cm.flat_gbps = in.gbps;
    cm.microbatches = in.mb;
    cm.mem_limit_bytes = (getenv("PF_STAGEDEG_MEM_GIB") ? atof(getenv("PF_STAGEDEG_MEM_GIB")) : 16.0) * (1 << 30);
    pf_cost_model_set_training(&cm, &t, 1, 0);
    pf_stagedeg_opts_t o;
    pf_stagedeg_opts_init(&o);
    o.devices = D;
    o.edge_factor = 2;
    o.allreduce_factor = 4;
    o.state_factor = -1; /* Piper's memoryUsageB holds the parameter state */
    o.none = in.none;
    o.full = in.full;
    o.recompute_ops = !getenv("PF_STAGEDEG_PER_STAGE"); /* Piper's per-node choice */
    int capped, rc = -1;
    double t0 = pf_now_s();
    clock_t c0 = clock();
    pf_downsets_t *ds = pf_downsets_enumerate(in.g, 1LL << 22, &capped);
    pf_stagedeg_result_t *r = NULL;
    if (!ds || (full ? pf_stagedeg_tp_run(in.g, ds, &cm, &o, &tab, &r, err, sizeof err)
                     : pf_stagedeg_run(in.g, ds, &cm, &o, &r, err, sizeof err)) != PF_OK) {
        fprintf(stderr, "stagedeg: %s: %s\n", name, ds ? err : "downsets");
        goto done;
    }
    double solve_s = pf_now_s() - t0, cpu_s = (double)(clock() - c0) / CLOCKS_PER_SEC;
    printf("%-11s %4d %9lld %9.4f %9.4f %14.9g %3d  ", name, D, pf_downsets_size(ds), solve_s, cpu_s,
           r->objective_ms, r->stages);
    for (int s = 0; s < r->stages; s++) {
        printf("%s%d", s ? "," : "", r->degree[s]);
        if (r->tensor[s] > 1)
            printf("x%d", r->tensor[s]);
        printf("%s", r->recompute[s] == 1 ? "r" : r->recompute[s] == 2 ? "o" : "");
    }
    printf("\n");
    snprintf(path, sizeof path, "%s/stagedeg-%s-%d-%s.stages", outdir, name, D, full ? "full" : "notp");
    rc = r->stages ? write_stages(path, in.g, r, full ? &tb : NULL) : 0;
done:
    tmpcs_free(&tb);
    pf_stagedeg_result_destroy(&r);
    pf_downsets_destroy(&ds);
    input_free(&in);
    return rc;
}

int pf_bench_stagedeg(void)
{
    const char *data = getenv("PF_PEER_DATA") ?: "../shared/data";
    const char *outdir = getenv("PF_STAGEDEG_OUT") ?: "build/peers";
    const char *list = getenv("PF_PIPER_INPUTS") ?: "bert32a100:8 bert32a100:32";
    const char *mode = getenv("PF_STAGEDEG_MODE") ?: "notp";
    if (strcmp(mode, "notp") && strcmp(mode, "full")) {
        fprintf(stderr, "stagedeg: PF_STAGEDEG_MODE %s: notp or full\n", mode);
        return 1;
    }
    char probe[1024], buf[1024];
    snprintf(probe, sizeof probe, "%s/piper/bert32a100.json", data);
    FILE *f = fopen(probe, "r");
    if (!f) {
        printf("SKIP stagedeg: no Piper inputs at %s/piper (set PF_PEER_DATA)\n", data);
        return 0;
    }
    fclose(f);
    mkdir(outdir, 0777); /* build/peers may not exist yet; an existing one is fine */
    printf("%-11s %4s %9s %9s %9s %14s %3s  %s (%s)\n", "input", "D", "downsets", "solve s", "cpu s",
           "objective",
           "S", "degrees d or dxt (r: recomputed, o: some ops)", mode);
    snprintf(buf, sizeof buf, "%s", list);
    int failed = 0;
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon)
            continue;
        *colon = 0;
        failed |= run_one(data, outdir, tok, atoi(colon + 1), !strcmp(mode, "full")) != 0;
    }
    return failed;
}
