#include "planner/ir/collective.h"
#include "planner/ir/devmodel.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>

static const char *const algo_names[] = {"ring", "tree", "nvls", "hier", "direct", "best"};

const char *pf_collective_algo_name(pf_collective_algo_t a)
{
    return (unsigned)a <= PF_COLL_ALGO_BEST ? algo_names[a] : "unknown";
}

static double us_ms(double us)
{
    return us * 1e-3;
}

/* NICs a host's members use at once: one each unless the group says fewer. */
static int nics(const pf_collective_group_t *g)
{
    return g->nics_per_host > 0 && g->nics_per_host < g->per_host ? g->nics_per_host
                                                                   : g->per_host;
}

/* The bandwidth a ring or tree over the whole group runs at: inside one host the NVLink rate;
 * across hosts one channel per NIC, so the NICs carry the channels at once. */
static double flat_gbps(const pf_collective_group_t *g)
{
    if (g->hosts <= 1)
        return g->intra_gbps;
    if (g->per_host <= 1)
        return g->inter_gbps;
    return fmin(g->intra_gbps, nics(g) * g->inter_gbps);
}

static double flat_lat_us(const pf_collective_group_t *g)
{
    return g->hosts > 1 ? g->inter_lat_us : g->intra_lat_us;
}

/* Ring steps over n members: all-reduce 2 (n-1) (RS then AG), RS and AG n-1. */
static double ring_steps(pf_collective_op_t op, int n)
{
    return op == PF_COLL_ALLREDUCE ? 2.0 * (n - 1) : (double)(n - 1);
}

/* A ring over n members at gbps with per-step latency lat_us: all-reduce 2 (n-1) steps, RS and AG
 * n-1, each moving bytes / n over every link. */
static double ring_ms(pf_collective_op_t op, int n, double bytes, double gbps, double lat_us)
{
    if (n <= 1 || bytes <= 0)
        return 0;
    double steps = ring_steps(op, n);
    return steps * us_ms(lat_us) + steps / n * pf_bytes_ms(bytes, gbps);
}

static int ilog2_ceil(int n)
{
    int k = 0;
    while ((1 << k) < n)
        k++;
    return k;
}

static double tree_ms(const pf_collective_group_t *g, double bytes)
{
    double lat_us = ilog2_ceil(g->per_host) * g->intra_lat_us +
                    (g->hosts > 1 ? ilog2_ceil(g->hosts) * g->inter_lat_us : 0);
    return 2 * us_ms(lat_us) + 2 * pf_bytes_ms(bytes, flat_gbps(g));
}

/* NVLS inside one host: ring's bus-bandwidth formula at the switch's bus bandwidth, 2 latencies
 * (up to the switch, multicast down) for all-reduce and 1 for RS and AG. */
static double nvls_ms(const pf_collective_group_t *g, pf_collective_op_t op, int n, double bytes)
{
    double steps = ring_steps(op, n);
    int lats = op == PF_COLL_ALLREDUCE ? 2 : 1;
    return lats * us_ms(g->intra_lat_us) + steps / n * pf_bytes_ms(bytes, g->nvls_busbw_gbps);
}

/* One intra-host phase (RS or AG of bytes over per_host members): NVLS when the host has it and
 * it is cheaper, else a ring. */
static double intra_phase_ms(const pf_collective_group_t *g, pf_collective_op_t op, double bytes)
{
    int G = g->per_host;
    if (G <= 1)
        return 0;
    double ms = ring_ms(op, G, bytes, g->intra_gbps, g->intra_lat_us);
    if (g->nvls_busbw_gbps > 0)
        ms = fmin(ms, nvls_ms(g, op, G, bytes));
    return ms;
}

static double hier_ms(const pf_collective_group_t *g, pf_collective_op_t op, double bytes)
{
    int G = g->per_host, H = g->hosts;
    double shard = bytes / G;
    /* per_host rings of the shard, nics(g) at a time */
    double inter = ring_ms(op, H, shard, g->inter_gbps * nics(g) / G, g->inter_lat_us);
    if (op == PF_COLL_ALLREDUCE)
        return intra_phase_ms(g, PF_COLL_REDUCE_SCATTER, bytes) + inter +
               intra_phase_ms(g, PF_COLL_ALLGATHER, bytes);
    return intra_phase_ms(g, op, bytes) + inter;
}

static double alltoall_ms(const pf_collective_group_t *g, double bytes)
{
    int n = g->n, G = g->per_host;
    double in_host = G > 1 ? (double)(G - 1) / n * pf_bytes_ms(bytes, g->intra_gbps) : 0;
    double off_host = g->hosts > 1 ? (double)(n - G) / n * pf_bytes_ms(bytes, g->inter_gbps) *
                                         G / nics(g) /* members sharing a NIC */
                                   : 0;
    return us_ms(flat_lat_us(g)) + fmax(in_host, off_host);
}

static double direct_ms(const pf_collective_group_t *g, pf_collective_op_t op, double bytes)
{
    switch (op) {
    case PF_COLL_ALLTOALL:
        return alltoall_ms(g, bytes);
    case PF_COLL_BROADCAST:
        return (g->n - 1) * us_ms(flat_lat_us(g)) + pf_bytes_ms(bytes, flat_gbps(g));
    case PF_COLL_P2P:
        return us_ms(flat_lat_us(g)) + pf_bytes_ms(bytes, g->hosts > 1 ? g->inter_gbps
                                                                      : g->intra_gbps);
    default:
        return INFINITY;
    }
}

static int is_reduction(pf_collective_op_t op)
{
    return op == PF_COLL_ALLREDUCE || op == PF_COLL_REDUCE_SCATTER || op == PF_COLL_ALLGATHER;
}

static double algo_ms(const pf_collective_group_t *g, pf_collective_op_t op, double bytes,
                      pf_collective_algo_t a)
{
    switch (a) {
    case PF_COLL_ALGO_RING:
        return is_reduction(op) ? ring_ms(op, g->n, bytes, flat_gbps(g), flat_lat_us(g))
                                : INFINITY;
    case PF_COLL_ALGO_TREE:
        return op == PF_COLL_ALLREDUCE ? tree_ms(g, bytes) : INFINITY;
    case PF_COLL_ALGO_NVLS:
        return is_reduction(op) && g->hosts == 1 && g->nvls_busbw_gbps > 0
                   ? nvls_ms(g, op, g->n, bytes)
                   : INFINITY;
    case PF_COLL_ALGO_HIER:
        return is_reduction(op) && g->hosts > 1 && g->per_host > 1 ? hier_ms(g, op, bytes)
                                                                   : INFINITY;
    case PF_COLL_ALGO_DIRECT:
        return direct_ms(g, op, bytes);
    default:
        return INFINITY;
    }
}

double pf_collective_ms(const pf_collective_group_t *g, pf_collective_op_t op, double bytes,
                        pf_collective_algo_t algo, pf_collective_algo_t *chosen)
{
    pf_collective_algo_t best = algo == PF_COLL_ALGO_BEST ? PF_COLL_ALGO_RING : algo;
    double best_ms = INFINITY;
    if (g->n <= 1 || bytes <= 0) {
        best_ms = 0;
    } else if (algo != PF_COLL_ALGO_BEST) {
        best_ms = algo_ms(g, op, bytes, algo);
    } else {
        for (int a = 0; a < PF_COLL_NALGOS; a++) {
            double ms = algo_ms(g, op, bytes, (pf_collective_algo_t)a);
            if (ms < best_ms) {
                best_ms = ms;
                best = (pf_collective_algo_t)a;
            }
        }
    }
    if (chosen)
        *chosen = best;
    return best_ms;
}

double pf_collective_best_ms(const pf_collective_group_t *g, pf_collective_op_t op, double bytes)
{
    return pf_collective_ms(g, op, bytes, PF_COLL_ALGO_BEST, NULL);
}

/* ---- from a cluster ---- */

static int host_of(const pf_cluster_t *c, const int *devs, int i)
{
    return pf_cluster_device(c, devs[i])->host;
}

static void link_min(const pf_cluster_t *c, int a, int b, double *gbps, double *lat_us)
{
    double bw = pf_cluster_bw_gbps(c, a, b), lat = pf_cluster_lat_us(c, a, b);
    *gbps = *gbps > 0 ? fmin(*gbps, bw) : bw;
    *lat_us = fmax(*lat_us, lat);
}

/* Each member's host ordinal (hosts numbered by first appearance) and rank on its host; the
 * group's host count and most members on one host. */
static void place(const pf_cluster_t *c, const int *devs, int n, int *ord, int *loc,
                  pf_collective_group_t *g)
{
    g->hosts = 0;
    for (int i = 0; i < n; i++) {
        int h = host_of(c, devs, i);
        ord[i] = -1;
        loc[i] = 0;
        for (int j = 0; j < i; j++)
            if (host_of(c, devs, j) == h) {
                ord[i] = ord[j];
                loc[i]++;
            }
        if (ord[i] < 0)
            ord[i] = g->hosts++;
        if (loc[i] + 1 > g->per_host)
            g->per_host = loc[i] + 1;
    }
}

/* The ring links inside each host (a member to the next on its host, the last to the first) and
 * the rails between consecutive hosts (local rank j to local rank j). */
static void links(const pf_cluster_t *c, const int *devs, int n, const int *ord, const int *loc,
                  pf_collective_group_t *g)
{
    for (int i = 0; i < n; i++) {
        int next = -1, peer = -1;
        for (int j = i + 1; j < n && next < 0; j++)
            if (ord[j] == ord[i])
                next = j;
        for (int j = 0; j < i && next < 0; j++)
            if (ord[j] == ord[i])
                next = j;
        if (next >= 0)
            link_min(c, devs[i], devs[next], &g->intra_gbps, &g->intra_lat_us);
        for (int j = 0; j < n && g->hosts > 1 && peer < 0; j++)
            if (ord[j] == (ord[i] + 1) % g->hosts && loc[j] == loc[i])
                peer = j;
        if (peer >= 0)
            link_min(c, devs[i], devs[peer], &g->inter_gbps, &g->inter_lat_us);
    }
}

/* The slowest member's NVLS bus bandwidth by its device model; 0 when a member names no preset
 * or one without NVLS. */
static double models_nvls_gbps(const pf_cluster_t *c, const int *devs, int n)
{
    double gbps = INFINITY;
    for (int i = 0; i < n && gbps > 0; i++) {
        const char *name = pf_cluster_device(c, devs[i])->device_model;
        const pf_devmodel_t *dm = name ? pf_devmodel_preset(name) : NULL;
        gbps = fmin(gbps, dm ? pf_devmodel_nvls_busbw_gbps(dm) : 0);
    }
    return n > 0 ? gbps : 0;
}

int pf_collective_group_from_cluster(const pf_cluster_t *c, const int *devs, int n,
                                     double nvls_busbw_gbps, pf_collective_group_t *g)
{
    *g = (pf_collective_group_t){.n = n, .hosts = 1, .per_host = 1,
                                 .nvls_busbw_gbps = nvls_busbw_gbps};
    if (n > 1 && !(nvls_busbw_gbps > 0))
        g->nvls_busbw_gbps = models_nvls_gbps(c, devs, n);
    if (n <= 1)
        return PF_OK;
    int *ord = malloc(2 * (size_t)n * sizeof *ord);
    if (!ord)
        return PF_ERR;
    place(c, devs, n, ord, ord + n, g);
    links(c, devs, n, ord, ord + n, g);
    free(ord);
    return PF_OK;
}
