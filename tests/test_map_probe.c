/* map_probe: Theorem 3's reduction from Hamiltonian path decided by the DFS probe. */
#include "planner/map/mapping.h"
#include "planner/core/rng.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"
#include "tests/map_fixtures.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- Theorem 3 */

static int has_ham_path_rec(const int adj[8][8], int n, int *used, int last, int count)
{
    if (count == n)
        return 1;
    for (int v = 0; v < n; v++)
        if (!used[v] && (last < 0 || adj[last][v])) {
            used[v] = 1;
            int ok = has_ham_path_rec(adj, n, used, v, count + 1);
            used[v] = 0;
            if (ok)
                return 1;
        }
    return 0;
}

/* Theorem 3 (App. A-E): n devices, bandwidth 1 GB/s between devices joined by an edge of G and
 * 0.5 GB/s elsewhere; a chain of n stages, R = 1, c_u = 0, messages of 5e5 bytes between
 * consecutive stages. One transfer then costs 0.5 ms over an edge of G and 1 ms otherwise. Under
 * m an inner stage pays two transfers: 1 ms when both are over edges of G, >= 1.5 ms otherwise;
 * an end stage pays one, <= 1 ms. So max stage time <= 1 ms <=> consecutive stages sit on
 * adjacent vertices of G <=> the stage order is a Hamiltonian path of G. (With n = 2 the
 * stages are ends only; the graphs below have n = 5.) */
static void check_hamiltonian(const int adj[8][8], int n, const char *what)
{
    char err[256];
    double cu[8] = {0}, P[8] = {0}, M[64] = {0};
    for (int s = 0; s + 1 < n; s++)
        M[s * n + s + 1] = M[(s + 1) * n + s] = 5e5;
    pf_stage_graph_t *sg = pf_stage_graph_new(n, 1, cu, P, M);
    pf_cluster_t *c = new_cluster("ham", n);
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            pf_cluster_set_link(c, a, b, adj[a][b] ? 1.0 : 0.5, 0);
    int used[8] = {0}, dev[8];
    int want = has_ham_path_rec(adj, n, used, -1, 0);
    for (int sym = 0; sym < 2; sym++) {
        pf_probe_result_t res;
        CU_ASSERT_EQUAL_FATAL(pf_mapping_probe(sg, c, PF_MAP_INST_M, 1.0, 0, sym, 1, NULL, dev,
                                               &res, err, sizeof err),
                              PF_OK);
        if (res.found != want)
            fprintf(stderr, "\n  %s: Hamiltonian path %d, probe found %d\n", what, want,
                    res.found);
        CU_ASSERT_EQUAL(res.found, want);
        if (res.found) /* the devices in stage order walk along edges of G */
            for (int s = 0; s + 1 < n; s++)
                CU_ASSERT(adj[dev[s]][dev[s + 1]]);
    }
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&c);
}

static void test_theorem3_reduction(void)
{
    int n = 5, adj[8][8];
    char what[64];
    /* every graph on 5 labelled vertices (10 possible edges: 1024 edge masks) */
    for (int mask = 0; mask < 1024; mask++) {
        int k = 0;
        memset(adj, 0, sizeof adj);
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++, k++)
                if (mask >> k & 1)
                    adj[a][b] = adj[b][a] = 1;
        snprintf(what, sizeof what, "edge mask %d", mask);
        check_hamiltonian(adj, n, what);
    }
    for (uint64_t seed = 1; seed <= 6; seed++) {
        pf_rng_t rng;
        pf_rng_seed(&rng, seed);
        memset(adj, 0, sizeof adj);
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++)
                if (pf_rng_uniform(&rng) < 0.45)
                    adj[a][b] = adj[b][a] = 1;
        snprintf(what, sizeof what, "random graph seed %llu", (unsigned long long)seed);
        check_hamiltonian(adj, n, what);
    }
    memset(adj, 0, sizeof adj); /* a path 3-0-4-1-2: Hamiltonian */
    int path[5] = {3, 0, 4, 1, 2};
    for (int i = 0; i + 1 < n; i++)
        adj[path[i]][path[i + 1]] = adj[path[i + 1]][path[i]] = 1;
    check_hamiltonian(adj, n, "path");
    memset(adj, 0, sizeof adj); /* a star: no Hamiltonian path for n >= 4 */
    for (int v = 1; v < n; v++)
        adj[0][v] = adj[v][0] = 1;
    check_hamiltonian(adj, n, "star");
    memset(adj, 0, sizeof adj); /* a triangle and an edge: disconnected */
    adj[0][1] = adj[1][0] = adj[1][2] = adj[2][1] = adj[0][2] = adj[2][0] = 1;
    adj[3][4] = adj[4][3] = 1;
    check_hamiltonian(adj, n, "disconnected");
}

void pf_suite_map_probe(void)
{
    CU_pSuite s = CU_add_suite("map_probe", NULL, NULL);
    CU_add_test(s, "Theorem 3: feasible <=> Hamiltonian path", test_theorem3_reduction);
}
