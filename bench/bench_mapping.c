/* Device mapping (Parmesan V) against the CS map and the p2p map (VIII), measured in the same run.
 *
 * (a) Parmesan Table III's set-up: a partition (planfarm partition's solver) of a skip-connection-
 *     heavy graph (U-Net, 5 levels: every decoder level reads its encoder level, so stages far
 *     apart talk) for several (S, R), mapped on 2D/3D meshes and tori (Table IX bandwidths),
 *     random_blk_1, random_blk_2 and uniform_dist, 64 and 256 devices. Columns: the mapping
 *     objective (eq. 5, full) of ours (auto: m and ar searches, then full), of the CS map and of
 *     the p2p map; the baselines' objective and step estimate divided by ours (> 1: ours is
 *     better); the wall time of our search. Every probe has a 0.25 s deadline so the table
 *     finishes; "t/o" counts probes that ran out of time (the mapping is valid, only not proven
 *     optimal).
 * (b) Symmetry pruning: the whole search with all rules, without the host-block rule (the rules
 *     before it: interchangeable devices and replica orders) and with none, on Parmesan's
 *     two-level system (4 machines x 4 GPUs) and on 4x DGX-1 (no interchangeable GPUs, 4
 *     interchangeable machines), U-Net and ResNet-50 (PipeDream's profile, $PF_DATA or
 *     tests/data): nodes and seconds, and their ratios.
 * (c) The multi-target enhancement (--batch K) against plain bisection on this machine.
 * PF_MAP_TABLES (e.g. "b") runs only the tables it names. */
#include "planner/inputs/import.h"
#include "planner/map/mapping.h"
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/partition/partition.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_SECONDS 0.25
#define SYM_PROBE_SECONDS 2.0

static pf_graph_t *unet(char *err, size_t errlen)
{
    pf_model_opts_t mo;
    pf_graph_t *g = NULL;
    pf_model_opts_init(&mo, PF_MODEL_UNET);
    mo.levels = 5;
    mo.image = 512;
    if (pf_model_build(&mo, &g, err, errlen) != PF_OK)
        return NULL;
    return g;
}

/* Stage graph of a partition of g into S stages (R replicas) by `planfarm partition`'s solver. */
static pf_stage_graph_t *partition_stage_graph(const pf_graph_t *g, const pf_cluster_t *c, int S,
                                               int R, char *err, size_t errlen)
{
    pf_partition_opts_t po;
    pf_plan_t *p = NULL;
    pf_partition_opts_init(&po);
    po.stages = S;
    po.replicas = R;
    po.threads = 0;
    if (pf_partition_run(g, c, &po, &p, err, errlen) != PF_OK)
        return NULL;
    pf_stage_graph_t *sg = pf_stage_graph_from_plan(g, p);
    pf_plan_destroy(&p);
    return sg;
}

static pf_cluster_t *topo(pf_topology_kind_t kind, int x, int y, int z, int devices, char *err,
                          size_t errlen)
{
    pf_topology_opts_t to;
    pf_cluster_t *c = NULL;
    pf_topology_opts_init(&to, kind);
    to.dims[0] = x;
    to.dims[1] = y;
    to.dims[2] = z;
    to.devices = devices;
    to.seed = 1;
    if (pf_topology_build(&to, &c, err, errlen) != PF_OK)
        return NULL;
    return c;
}

typedef struct {
    const char *label;
    pf_topology_kind_t kind;
    int x, y, z, devices;
} topo_case_t;

static int table3(const pf_graph_t *g)
{
    static const topo_case_t topos64[] = {
        {"2d mesh 8x8", PF_TOPOLOGY_MESH2D, 8, 8, 1, 0},
        {"2d torus 8x8", PF_TOPOLOGY_TORUS2D, 8, 8, 1, 0},
        {"3d mesh 4x4x4", PF_TOPOLOGY_MESH3D, 4, 4, 4, 0},
        {"3d torus 4x4x4", PF_TOPOLOGY_TORUS3D, 4, 4, 4, 0},
        {"random_blk_1", PF_TOPOLOGY_RANDOM_BLK1, 0, 0, 0, 64},
        {"random_blk_2", PF_TOPOLOGY_RANDOM_BLK2, 0, 0, 0, 64},
        {"uniform_dist", PF_TOPOLOGY_UNIFORM, 0, 0, 0, 64},
    };
    static const topo_case_t topos256[] = {
        {"2d mesh 16x16", PF_TOPOLOGY_MESH2D, 16, 16, 1, 0},
        {"uniform_dist", PF_TOPOLOGY_UNIFORM, 0, 0, 0, 256},
    };
    static const int sr64[][2] = {{4, 16}, {8, 8}, {16, 4}};
    static const int sr256[][2] = {{8, 32}, {16, 16}};
    char err[512];
    double geo_cs = 0, geo_p2p = 0;
    int rows = 0;

    printf("(a) %s partitioned by planfarm partition; objective = eq. 5 (full), step = "
           "(MB + S - 1) max(c_u + p2p) + max AR, MB = 4\n",
           pf_graph_name(g));
    printf("%-15s %8s %5s %9s %9s %9s %8s %8s %8s %8s %7s %6s\n", "topology", "(S,R)", "inst",
           "ours ms", "CS ms", "p2p ms", "CS/ours", "p2p/ours", "stepCS", "stepP2P", "sec",
           "t/o");
    for (int big = 0; big < 2; big++) {
        int ntopo = big ? 2 : 7, nsr = big ? 2 : 3;
        for (int t = 0; t < ntopo; t++) {
            const topo_case_t *tc = big ? &topos256[t] : &topos64[t];
            pf_cluster_t *c = topo(tc->kind, tc->x, tc->y, tc->z, tc->devices, err, sizeof err);
            if (!c) {
                fprintf(stderr, "%s: %s\n", tc->label, err);
                return 1;
            }
            for (int i = 0; i < nsr; i++) {
                int S = big ? sr256[i][0] : sr64[i][0], R = big ? sr256[i][1] : sr64[i][1];
                pf_stage_graph_t *sg = partition_stage_graph(g, c, S, R, err, sizeof err);
                if (!sg) {
                    fprintf(stderr, "partition S=%d R=%d: %s\n", S, R, err);
                    pf_cluster_destroy(&c);
                    return 1;
                }
                int N = S * R, *dev = malloc((size_t)N * sizeof *dev);
                int *cs = malloc((size_t)N * sizeof *cs);
                int *p2p = malloc((size_t)N * sizeof *p2p);
                pf_mapping_opts_t o;
                pf_mapping_stats_t st;
                pf_map_inst_t used;
                pf_mapping_opts_init(&o);
                o.probe_seconds = PROBE_SECONDS;
                if (pf_mapping_search_auto(sg, c, &o, dev, &st, &used, err, sizeof err) != PF_OK) {
                    fprintf(stderr, "%s\n", err);
                    return 1;
                }
                double ours = pf_mapping_objective_ms(sg, c, PF_MAP_INST_FULL, dev);
                pf_mapping_cs(sg, cs);
                pf_mapping_p2p(sg, p2p);
                double ocs = pf_mapping_objective_ms(sg, c, PF_MAP_INST_FULL, cs);
                double op2p = pf_mapping_objective_ms(sg, c, PF_MAP_INST_FULL, p2p);
                double step = pf_mapping_step_estimate_ms(sg, c, dev, 4);
                double scs = pf_mapping_step_estimate_ms(sg, c, cs, 4);
                double sp2p = pf_mapping_step_estimate_ms(sg, c, p2p, 4);
                char sr[16];
                snprintf(sr, sizeof sr, "(%d,%d)", S, R);
                printf(
                    "%-15s %8s %5s %9.2f %9.2f %9.2f %7.2fx %7.2fx %7.2fx %7.2fx %7.1f %3d/%-3d\n",
                    tc->label, sr, pf_map_inst_name(used), ours, ocs, op2p, ocs / ours, op2p / ours,
                    scs / step, sp2p / step, st.seconds, st.probes_timed_out, st.probes);
                fflush(stdout);
                geo_cs += log(ocs / ours);
                geo_p2p += log(op2p / ours);
                rows++;
                free(dev);
                free(cs);
                free(p2p);
                pf_stage_graph_destroy(&sg);
            }
            pf_cluster_destroy(&c);
        }
    }
    printf("geometric mean over %d rows: CS/ours %.2fx, p2p/ours %.2fx\n\n", rows,
           exp(geo_cs / rows), exp(geo_p2p / rows));
    return 0;
}

/* (b): the whole search under each set of symmetry rules: all of them, all but the host-block
 * rule (the rules before it), none. */
static int symmetry_row(const char *label, const pf_stage_graph_t *sg, const pf_cluster_t *c,
                        pf_map_inst_t inst)
{
    static const int modes[3] = {PF_MAP_SYM_ALL, PF_MAP_SYM_NO_BLOCKS, PF_MAP_SYM_OFF};
    char err[512];
    int S = pf_stage_graph_stages(sg), R = pf_stage_graph_replicas(sg);
    int *dev = malloc((size_t)S * R * sizeof *dev);
    pf_mapping_stats_t st[3];
    if (!dev)
        return 1;
    for (int i = 0; i < 3; i++) {
        pf_mapping_opts_t o;
        pf_mapping_opts_init(&o);
        o.inst = inst;
        o.symmetry = modes[i];
        o.probe_seconds = SYM_PROBE_SECONDS;
        if (pf_mapping_search(sg, c, &o, dev, &st[i], err, sizeof err) != PF_OK) {
            fprintf(stderr, "%s\n", err);
            free(dev);
            return 1;
        }
    }
    char sr[16], tx[3][32];
    snprintf(sr, sizeof sr, "(%d,%d)", S, R);
    for (int i = 0; i < 3; i++) { /* a time ratio of two sub-10 ms runs is noise */
        snprintf(tx[i], sizeof tx[i], "-");
        if (fmax(st[i].seconds, st[0].seconds) >= 0.01)
            snprintf(tx[i], sizeof tx[i], "%.1fx", st[i].seconds / fmax(st[0].seconds, 1e-4));
    }
    char to[48];
    snprintf(to, sizeof to, "%d/%d/%d", st[0].probes_timed_out, st[1].probes_timed_out,
             st[2].probes_timed_out);
    printf("%-10s %-8s %7s %4s %9.3f %9.3f %10lld %10lld %10lld %7.2f %7.2f %7.2f %8.1fx %8.1fx "
           "%9s %9s %8s %10lld\n",
           label, pf_cluster_name(c), sr, pf_map_inst_name(inst), st[0].objective_ms,
           st[2].objective_ms, st[0].nodes, st[1].nodes, st[2].nodes, st[0].seconds,
           st[1].seconds, st[2].seconds,
           (double)st[1].nodes / (double)(st[0].nodes ? st[0].nodes : 1),
           (double)st[2].nodes / (double)(st[0].nodes ? st[0].nodes : 1), tx[1], tx[2], to,
           st[0].block_pruned);
    fflush(stdout);
    free(dev);
    return 0;
}

static int partition_row(const char *label, const pf_graph_t *g, const pf_cluster_t *c, int S,
                         int R, pf_map_inst_t inst)
{
    char err[512];
    pf_stage_graph_t *sg = partition_stage_graph(g, c, S, R, err, sizeof err);
    if (!sg) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int rc = symmetry_row(label, sg, c, inst);
    pf_stage_graph_destroy(&sg);
    return rc;
}

static int symmetry_table(const pf_graph_t *unet_g)
{
    char err[512], path[1024];
    pf_topology_opts_t to;
    pf_cluster_t *hier = NULL, *dgx = NULL;
    pf_graph_t *resnet = NULL;
    const char *data = getenv("PF_DATA") ? getenv("PF_DATA") : "tests/data";
    snprintf(path, sizeof path, "%s/pipedream/resnet50.txt", data);
    pf_topology_opts_init(&to, PF_TOPOLOGY_HIER);
    if (pf_topology_build(&to, &hier, err, sizeof err) != PF_OK)
        return 1;
    pf_topology_opts_init(&to, PF_TOPOLOGY_DGX1);
    if (pf_topology_build(&to, &dgx, err, sizeof err) != PF_OK ||
        pf_import_pipedream(path, 0, &resnet, err, sizeof err) != PF_OK) {
        fprintf(stderr, "%s\n", err);
        pf_cluster_destroy(&hier);
        pf_cluster_destroy(&dgx);
        return 1;
    }
    int cls[64], blk[64], bcls[64];
    printf("(b) the search (Algorithm 1, probes of at most %g s) with all symmetry rules "
           "(\"all\"), without the\n    host-block rule (\"noblk\": device classes and replica orders) and "
           "with none; %s: %d device\n    classes, %d host blocks; %s: %d device classes "
           "(no two DGX-1 GPUs are interchangeable), %d host blocks\n",
           SYM_PROBE_SECONDS, pf_cluster_name(hier), pf_map_symmetry_device_classes(hier, cls),
           pf_map_symmetry_host_blocks(hier, blk, bcls, NULL), pf_cluster_name(dgx),
           pf_map_symmetry_device_classes(dgx, cls),
           pf_map_symmetry_host_blocks(dgx, blk, bcls, NULL));
    printf("%-10s %-8s %7s %4s %9s %9s %10s %10s %10s %7s %7s %7s %9s %9s %9s %9s %8s %10s\n",
           "graph", "cluster", "(S,R)", "inst", "obj all", "obj none", "nodes all", "noblk",
           "none", "sec all", "noblk", "none", "nodes", "nodes", "time", "time", "t/o",
           "blk");
    printf("%-10s %-8s %7s %4s %9s %9s %10s %10s %10s %7s %7s %7s %9s %9s %9s %9s %8s %10s\n",
           "", "", "", "", "ms", "ms", "", "", "", "", "", "", "noblk/all", "none/all",
           "noblk/all", "none/all", "al/nb/no", "pruned");
    int rc = partition_row("U-Net", unet_g, hier, 4, 4, PF_MAP_INST_FULL) ||
             partition_row("U-Net", unet_g, hier, 8, 2, PF_MAP_INST_FULL) ||
             partition_row("U-Net", unet_g, hier, 16, 1, PF_MAP_INST_M) ||
             partition_row("U-Net", unet_g, dgx, 4, 8, PF_MAP_INST_M) ||
             partition_row("U-Net", unet_g, dgx, 16, 2, PF_MAP_INST_M) ||
             partition_row("U-Net", unet_g, dgx, 8, 4, PF_MAP_INST_AR) ||
             partition_row("U-Net", unet_g, dgx, 8, 4, PF_MAP_INST_FULL) ||
             partition_row("ResNet-50", resnet, dgx, 8, 4, PF_MAP_INST_FULL);
    printf("    t/o: probes past the deadline (all/noblk/none); a search with such probes ran them "
           "to the deadline, so\n    its node counts measure speed, not the size of the tree\n\n");
    pf_graph_destroy(&resnet);
    pf_cluster_destroy(&hier);
    pf_cluster_destroy(&dgx);
    return rc;
}

/* (c): the multi-target enhancement on this machine: K probes per round side by side (one thread
 * each) against plain bisection (one probe on every thread). */
static int batch_table(const pf_graph_t *g)
{
    static const topo_case_t cases[] = {
        {"uniform_dist", PF_TOPOLOGY_UNIFORM, 0, 0, 0, 32},
        {"random_blk_2", PF_TOPOLOGY_RANDOM_BLK2, 0, 0, 0, 32},
        {"3d torus 4x4x2", PF_TOPOLOGY_TORUS3D, 4, 4, 2, 0},
    };
    static const int batches[] = {1, 2, 4};
    char err[512];
    printf("(c) batch K: K targets per round run side by side, one thread each (K = 1: bisection, "
           "the probe on every thread); (S,R) = (8,4), instantiation m, probes of at most %g s\n",
           PROBE_SECONDS);
    printf("%-15s %5s %10s %7s %5s %8s %9s\n", "topology", "K", "obj ms", "probes", "t/o", "sec",
           "time/K=1");
    for (int i = 0; i < 3; i++) {
        const topo_case_t *tc = &cases[i];
        pf_cluster_t *c = topo(tc->kind, tc->x, tc->y, tc->z, tc->devices, err, sizeof err);
        pf_stage_graph_t *sg = c ? partition_stage_graph(g, c, 8, 4, err, sizeof err) : NULL;
        if (!sg) {
            fprintf(stderr, "%s: %s\n", tc->label, err);
            pf_cluster_destroy(&c);
            return 1;
        }
        int dev[32];
        double base = 0;
        for (int b = 0; b < 3; b++) {
            pf_mapping_opts_t o;
            pf_mapping_stats_t st;
            pf_mapping_opts_init(&o);
            o.inst = PF_MAP_INST_M;
            o.batch = batches[b];
            o.probe_seconds = PROBE_SECONDS;
            if (pf_mapping_search(sg, c, &o, dev, &st, err, sizeof err) != PF_OK) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            if (b == 0)
                base = st.seconds;
            printf("%-15s %5d %10.3f %7d %5d %8.3f %8.2fx\n", tc->label, batches[b],
                   st.objective_ms, st.probes, st.probes_timed_out, st.seconds,
                   st.seconds / fmax(base, 1e-6));
            fflush(stdout);
        }
        pf_stage_graph_destroy(&sg);
        pf_cluster_destroy(&c);
    }
    printf("\n");
    return 0;
}

int pf_bench_mapping(void)
{
    char err[512];
    pf_graph_t *g = unet(err, sizeof err);
    if (!g) {
        fprintf(stderr, "unet: %s\n", err);
        return 1;
    }
    const char *only = getenv("PF_MAP_TABLES");
    int rc = ((!only || strchr(only, 'a')) && table3(g)) ||
             ((!only || strchr(only, 'b')) && symmetry_table(g)) ||
             ((!only || strchr(only, 'c')) && batch_table(g));
    pf_graph_destroy(&g);
    return rc;
}
