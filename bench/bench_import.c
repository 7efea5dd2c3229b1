/* Importing a profile against reading the same graph back from planfarm's own JSON (the baseline,
 * measured in the same run): the importer's validation (ids, duplicates, cycle check, strict
 * number syntax) should cost no more than the graph reader's per byte. Piper's files carry every
 * configuration of every node (bert32a100: 4 device counts x 2), so they are several times the
 * size of the graph they yield; the KB columns show it. Best of 20 runs each. */
#include "planner/ir/graph.h"
#include "planner/inputs/import.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RUNS 20

static double best_import_s(int piper, const char *path)
{
    double best = 1e30;
    char err[512];
    for (int i = 0; i < RUNS; i++) {
        pf_graph_t *g;
        double t0 = pf_now_s();
        int rc = piper ? pf_import_piper(path, 0, &g, err, sizeof err)
                       : pf_import_pipedream(path, 0, &g, err, sizeof err);
        double t = pf_now_s() - t0;
        if (rc != PF_OK) {
            fprintf(stderr, "%s\n", err);
            return -1;
        }
        pf_graph_destroy(&g);
        if (t < best)
            best = t;
    }
    return best;
}

static double best_load_s(const char *path)
{
    double best = 1e30;
    char err[512];
    for (int i = 0; i < RUNS; i++) {
        pf_graph_t *g;
        double t0 = pf_now_s();
        int rc = pf_graph_load(path, &g, err, sizeof err);
        double t = pf_now_s() - t0;
        if (rc != PF_OK) {
            fprintf(stderr, "%s\n", err);
            return -1;
        }
        pf_graph_destroy(&g);
        if (t < best)
            best = t;
    }
    return best;
}

int pf_bench_import(void)
{
    static const char *const files[] = {"pipedream/vgg16.txt",        "pipedream/resnet50.txt",
                                        "pipedream/gnmt_large.txt",   "pipedream/densenet121.txt",
                                        "pipedream/nasnetalarge.txt", "piper/bert32a100.json",
                                        "piper/gnmt.json",            "piper/resnet.json"};
    const char *data = getenv("PF_DATA") ? getenv("PF_DATA") : "tests/data";
    char tmp[] = "/tmp/pf_bench_import.XXXXXX", src[600], json[600], err[512];
    if (!mkdtemp(tmp))
        return 1;
    snprintf(json, sizeof json, "%s/g.json", tmp);
    printf("%-26s %6s %6s %8s %8s %10s %12s %8s\n", "profile", "ops", "edges", "file KB",
           "JSON KB", "import ms", "load JSON ms", "ratio");
    int rc = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0] && rc == 0; i++) {
        int piper = strncmp(files[i], "piper/", 6) == 0;
        pf_graph_t *g;
        snprintf(src, sizeof src, "%s/%s", data, files[i]);
        int r = piper ? pf_import_piper(src, 0, &g, err, sizeof err)
                      : pf_import_pipedream(src, 0, &g, err, sizeof err);
        if (r != PF_OK || pf_graph_save(g, json, err, sizeof err) != PF_OK) {
            fprintf(stderr, "%s\n", err);
            if (r == PF_OK)
                pf_graph_destroy(&g);
            rc = 1;
            break;
        }
        double ti = best_import_s(piper, src), tl = best_load_s(json);
        if (ti < 0 || tl < 0)
            rc = 1;
        else {
            struct stat ss, sj;
            stat(src, &ss);
            stat(json, &sj);
            printf("%-26s %6d %6d %8.1f %8.1f %10.3f %12.3f %7.2fx\n", files[i],
                   pf_graph_nops(g), pf_graph_nedges(g), ss.st_size / 1024.0,
                   sj.st_size / 1024.0, ti * 1e3, tl * 1e3, ti / tl);
        }
        pf_graph_destroy(&g);
    }
    unlink(json);
    rmdir(tmp);
    return rc;
}
