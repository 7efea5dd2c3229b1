/* reshard: cross-mesh resharding after Zhuang et al., "On Optimizing the Communication of Model
 * Parallelism": unit tasks (Sec. 2.2), strategies (Sec. 3.1) and, through reshard_sched, load
 * balance and scheduling (Sec. 3.2). */
#include "planner/sim/reshard.h"

#include "planner/core/util.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXTENT ((int64_t)1 << 40) /* keeps b * extent below 2^63 for any mesh we accept */
#define MAX_MESH_DEVICES (1 << 16)

struct pf_reshard_net {
    const pf_cluster_t *cluster; /* NULL: the two link classes below */
    int ndevices;
    int *host_of;
    double intra_gbps, intra_lat_us, inter_gbps, inter_lat_us;
};

struct pf_reshard {
    int ntasks;
    pf_reshard_task_t *tasks;
    int *src_flat, *dst_flat;
    pf_reshard_sched_result_t sched;
};

static const char *const strategy_names[PF_XFER_NSTRATEGIES] = {
    "send/recv", "local all-gather", "global all-gather", "broadcast"};

const char *pf_reshard_strategy_name(pf_reshard_strategy_t s)
{
    return (unsigned)s < PF_XFER_NSTRATEGIES ? strategy_names[s] : "?";
}

void pf_reshard_opts_default(pf_reshard_opts_t *o)
{
    o->algo = PF_RESHARD_SCHED_BEST;
    o->strategies = PF_XFER_ALL;
    o->max_chunks = 64;
    pf_reshard_sched_opts_default(&o->sched);
}

/* ---- the network ---- */

/* No pf_cluster_validate here: a cluster reaching the planner was validated when it was read
 * (file, wire or generator), and validating a matrix is O(D^2) on every RESHARD job and every
 * simulation input (issue 23: seconds per job on 3,072 devices). */
pf_reshard_net_t *pf_reshard_net_from_cluster(const pf_cluster_t *c, char *err, size_t errlen)
{
    pf_reshard_net_t *n = NULL;
    int nd = pf_cluster_ndevices(c);
    n = calloc(1, sizeof *n);
    if (!n || !(n->host_of = malloc((size_t)nd * sizeof(int))))
        goto fail;
    n->cluster = c;
    n->ndevices = nd;
    for (int i = 0; i < nd; i++)
        n->host_of[i] = pf_cluster_device(c, i)->host;
    return n;
fail:
    pf_reshard_net_destroy(&n);
    pf_fail(err, errlen, PF_ERR, "reshard network: out of memory");
    return NULL;
}

pf_reshard_net_t *pf_reshard_net_from_hosts(int ndevices, const int *host_of, double intra_gbps,
                                            double intra_lat_us, double inter_gbps,
                                            double inter_lat_us, char *err, size_t errlen)
{
    pf_reshard_net_t *n = NULL;
    if (ndevices < 1) {
        pf_fail(err, errlen, PF_EINPUT, "reshard network: %d devices", ndevices);
        return NULL;
    }
    if (!(intra_gbps > 0) || !isfinite(intra_gbps) || !(inter_gbps > 0) || !isfinite(inter_gbps) ||
        !pf_is_finite_nonneg(intra_lat_us) || !pf_is_finite_nonneg(inter_lat_us)) {
        pf_fail(err, errlen, PF_EINPUT, "reshard network: bandwidths must be > 0 and latencies "
                ">= 0, finite (intra %g GB/s %g us, inter %g GB/s %g us)", intra_gbps,
                intra_lat_us, inter_gbps, inter_lat_us);
        return NULL;
    }
    for (int i = 0; i < ndevices; i++)
        if (host_of[i] < 0) {
            pf_fail(err, errlen, PF_EINPUT, "reshard network: device %d on host %d", i,
                    host_of[i]);
            return NULL;
        }
    n = calloc(1, sizeof *n);
    if (!n || !(n->host_of = malloc((size_t)ndevices * sizeof(int)))) {
        pf_reshard_net_destroy(&n);
        pf_fail(err, errlen, PF_ERR, "reshard network: out of memory");
        return NULL;
    }
    memcpy(n->host_of, host_of, (size_t)ndevices * sizeof(int));
    n->ndevices = ndevices;
    n->intra_gbps = intra_gbps;
    n->intra_lat_us = intra_lat_us;
    n->inter_gbps = inter_gbps;
    n->inter_lat_us = inter_lat_us;
    return n;
}

void pf_reshard_net_destroy(pf_reshard_net_t **np)
{
    if (!np || !*np)
        return;
    free((*np)->host_of);
    free(*np);
    *np = NULL;
}

int pf_reshard_net_ndevices(const pf_reshard_net_t *n) { return n->ndevices; }
int pf_reshard_net_host(const pf_reshard_net_t *n, int device) { return n->host_of[device]; }

double pf_reshard_net_xfer_ms(const pf_reshard_net_t *n, int a, int b, double bytes)
{
    if (a == b)
        return 0;
    if (n->cluster)
        return pf_cluster_xfer_ms(n->cluster, a, b, bytes);
    int same = n->host_of[a] == n->host_of[b];
    return (same ? n->intra_lat_us : n->inter_lat_us) / 1e3 +
           pf_bytes_ms(bytes, same ? n->intra_gbps : n->inter_gbps);
}

/* ---- §3.1: one unit task, one sender ---- */

/* (m - 1) steps of a ring all-gather of pieces of `piece` bytes over r[0..m-1]: each step waits
 * for the slowest edge of the ring. */
static double ring_allgather_ms(const pf_reshard_net_t *n, const int *r, int m, double piece)
{
    double slowest = 0;
    for (int i = 0; m > 1 && i < m; i++)
        slowest = fmax(slowest, pf_reshard_net_xfer_ms(n, r[i], r[(i + 1) % m], piece));
    return (m - 1) * slowest;
}

/* Pipelined chain sender -> recv[0] -> ... -> recv[D-1] in k chunks: the first chunk crosses
 * every hop, the other k - 1 follow one slowest hop apart. With free intra-host hops over n
 * hosts this is (k + n - 1) T / k, Fig. 3(d). */
static double chain_ms(const pf_reshard_net_t *n, int sender, int nrecv, const int *recv,
                       double bytes, int k)
{
    double sum = 0, slowest = 0;
    for (int i = 0; i < nrecv; i++) {
        double hop = pf_reshard_net_xfer_ms(n, i ? recv[i - 1] : sender, recv[i], bytes / k);
        sum += hop;
        slowest = fmax(slowest, hop);
    }
    return sum + (k - 1) * slowest;
}

double pf_reshard_strategy_ms(const pf_reshard_net_t *n, pf_reshard_strategy_t s, int sender,
                              int nrecv, const int *recv, double bytes, int max_chunks,
                              int *chunks)
{
    double total = 0;
    if (chunks)
        *chunks = 1;
    switch (s) {
    case PF_XFER_SEND_RECV: /* Fig. 3(a): n m T */
        for (int i = 0; i < nrecv; i++)
            total += pf_reshard_net_xfer_ms(n, sender, recv[i], bytes);
        return total;
    case PF_XFER_LOCAL_ALLGATHER: { /* Fig. 3(b): n T + the last host's all-gather */
        double sent = 0;
        for (int i = 0; i < nrecv;) {
            int m = 1;
            while (i + m < nrecv && n->host_of[recv[i + m]] == n->host_of[recv[i]])
                m++;
            for (int j = 0; j < m; j++)
                sent += pf_reshard_net_xfer_ms(n, sender, recv[i + j], bytes / m);
            total = fmax(total, sent + ring_allgather_ms(n, recv + i, m, bytes / m));
            i += m;
        }
        return total;
    }
    case PF_XFER_GLOBAL_ALLGATHER: /* Fig. 3(c): T to scatter + T for the ring all-gather */
        for (int i = 0; i < nrecv; i++)
            total += pf_reshard_net_xfer_ms(n, sender, recv[i], bytes / nrecv);
        return total + ring_allgather_ms(n, recv, nrecv, bytes / nrecv);
    case PF_XFER_BROADCAST: {
        total = INFINITY;
        for (int k = 1; k <= (max_chunks > 0 ? max_chunks : 1); k++) {
            double t = chain_ms(n, sender, nrecv, recv, bytes, k);
            if (t < total) {
                total = t;
                if (chunks)
                    *chunks = k;
            }
        }
        return total;
    }
    default:
        return NAN;
    }
}

/* ---- §2.2: specs and unit tasks ---- */

int pf_reshard_spec_parse(const char *text, pf_mesh_shard_t *spec, int max_dims, int *ndims,
                          char *err, size_t errlen)
{
    int nd = 0;
    for (const char *p = text; p && *p;) {
        if (*p == ',' || *p == ' ') {
            p++;
            continue;
        }
        pf_mesh_shard_t d;
        if (*p == 'R') {
            d = PF_SHARDING_R;
            p++;
        } else if (p[0] == 'S' && p[1] == '0' && p[2] == '1') {
            d = PF_SHARDING_S01;
            p += 3;
        } else if (p[0] == 'S' && (p[1] == '0' || p[1] == '1')) {
            d = p[1] == '0' ? PF_SHARDING_S0 : PF_SHARDING_S1;
            p += 2;
        } else
            return pf_fail(err, errlen, PF_EINPUT, "sharding spec '%s', position %d: expected "
                           "R, S0, S1 or S01", text, (int)(p - text));
        if (nd == max_dims)
            return pf_fail(err, errlen, PF_EINPUT, "sharding spec '%s': more than %d dimensions",
                           text, max_dims);
        spec[nd++] = d;
    }
    if (nd == 0)
        return pf_fail(err, errlen, PF_EINPUT, "sharding spec '%s': empty", text ? text : "");
    *ndims = nd;
    return PF_OK;
}

static int parts_of(pf_mesh_shard_t s, const pf_mesh_t *m)
{
    return s == PF_SHARDING_S0 ? m->rows : s == PF_SHARDING_S1 ? m->cols
                                      : s == PF_SHARDING_S01 ? m->rows * m->cols : 1;
}

/* Block b of `parts` covers [b * extent / parts, (b + 1) * extent / parts): even up to one
 * element, as the seed pads uneven shapes (§5.1.2 case 6). */
static int64_t cut(int64_t extent, int parts, int b) { return (int64_t)b * extent / parts; }

static int block_of(int64_t x, int64_t extent, int parts)
{
    int b = (int)(x * parts / extent);
    while (b > 0 && cut(extent, parts, b) > x)
        b--;
    while (b + 1 < parts && cut(extent, parts, b + 1) <= x)
        b++;
    return b;
}

/* Does the device at (row, col) hold the cell whose block per dim is blk[] under spec? */
static bool holds(const pf_mesh_shard_t *spec, int ndims, const int *blk, int row, int col, int cols)
{
    for (int d = 0; d < ndims; d++) {
        int want = spec[d] == PF_SHARDING_S0 ? row : spec[d] == PF_SHARDING_S1 ? col
                                                : spec[d] == PF_SHARDING_S01 ? row * cols + col : 0;
        if (blk[d] != want)
            return false;
    }
    return true;
}

static int check_side(const char *side, const pf_mesh_t *m, const pf_mesh_shard_t *spec, int ndims,
                      const pf_reshard_net_t *net, char *err, size_t errlen)
{
    if (m->rows < 1 || m->cols < 1 || (int64_t)m->rows * m->cols > MAX_MESH_DEVICES || !m->devices)
        return pf_fail(err, errlen, PF_EINPUT, "%s mesh: %d x %d devices", side, m->rows, m->cols);
    for (int i = 0; i < m->rows * m->cols; i++) {
        if (m->devices[i] < 0 || m->devices[i] >= net->ndevices)
            return pf_fail(err, errlen, PF_EINPUT, "%s mesh: device[%d] = %d outside [0, %d)", side,
                           i, m->devices[i], net->ndevices);
        for (int j = 0; j < i; j++)
            if (m->devices[j] == m->devices[i])
                return pf_fail(err, errlen, PF_EINPUT, "%s mesh: device %d appears twice", side,
                               m->devices[i]);
    }
    int axis0 = 0, axis1 = 0;
    for (int d = 0; d < ndims; d++) {
        if ((unsigned)spec[d] > PF_SHARDING_S01)
            return pf_fail(err, errlen, PF_EINPUT, "%s spec, dim %d: unknown sharding %d", side, d,
                           (int)spec[d]);
        axis0 += spec[d] == PF_SHARDING_S0 || spec[d] == PF_SHARDING_S01;
        axis1 += spec[d] == PF_SHARDING_S1 || spec[d] == PF_SHARDING_S01;
    }
    if (axis0 > 1 || axis1 > 1)
        return pf_fail(err, errlen, PF_EINPUT, "%s spec: a mesh axis shards more than one "
                       "dimension", side);
    return PF_OK;
}

static int check_problem(const pf_reshard_problem_t *p, const pf_reshard_net_t *net,
                         const pf_reshard_opts_t *o, char *err, size_t errlen)
{
    if (p->ndims < 1 || p->ndims > PF_RESHARD_MAX_DIMS || !p->shape || !p->src_spec || !p->dst_spec)
        return pf_fail(err, errlen, PF_EINPUT, "reshard: %d dimensions (1..%d, with shape and "
                       "both specs)", p->ndims, PF_RESHARD_MAX_DIMS);
    for (int d = 0; d < p->ndims; d++)
        if (p->shape[d] < 1 || p->shape[d] > MAX_EXTENT)
            return pf_fail(err, errlen, PF_EINPUT, "reshard: shape[%d] = %lld outside [1, 2^40]",
                           d, (long long)p->shape[d]);
    if (!(p->dtype_bytes > 0) || !isfinite(p->dtype_bytes))
        return pf_fail(err, errlen, PF_EINPUT, "reshard: dtype_bytes = %g", p->dtype_bytes);
    int rc = check_side("source", &p->src_mesh, p->src_spec, p->ndims, net, err, errlen);
    if (rc == PF_OK)
        rc = check_side("destination", &p->dst_mesh, p->dst_spec, p->ndims, net, err, errlen);
    if (rc != PF_OK)
        return rc;
    for (int i = 0; i < p->src_mesh.rows * p->src_mesh.cols; i++)
        for (int j = 0; j < p->dst_mesh.rows * p->dst_mesh.cols; j++)
            if (p->src_mesh.devices[i] == p->dst_mesh.devices[j])
                return pf_fail(err, errlen, PF_EINPUT, "reshard: device %d is in both meshes "
                               "(they must be disjoint, §2.2)", p->src_mesh.devices[i]);
    if (o->max_chunks < 1 || !(o->strategies & PF_XFER_ALL))
        return pf_fail(err, errlen, PF_EINPUT, "reshard options: max_chunks %d (>= 1), "
                       "strategies mask 0x%x (one of 0x%x at least)", o->max_chunks,
                       o->strategies, PF_XFER_ALL);
    return PF_OK;
}

/* Cut points of one dimension: the union of both specs' block boundaries, sorted. */
static int dim_cuts(int64_t extent, int src_parts, int dst_parts, int64_t *out)
{
    int n = 0;
    for (int side = 0; side < 2; side++) {
        int parts = side ? dst_parts : src_parts;
        for (int b = 0; b <= parts; b++) {
            int64_t x = cut(extent, parts, b), j = n;
            int dup = 0;
            for (int i = 0; i < n && !dup; i++)
                dup = out[i] == x;
            if (dup)
                continue;
            while (j > 0 && out[j - 1] > x) {
                out[j] = out[j - 1];
                j--;
            }
            out[j] = x;
            n++;
        }
    }
    return n;
}

/* What pf_reshard_new builds from: the problem, the grid of cells cut by both specs (per
 * dimension: cuts, ncuts, and each spec's block count), the dense host numbering, scratch for one
 * cell's receiver and candidate hosts, and the growing arrays (src/dst offsets become pointers at
 * the end). */
typedef struct {
    const pf_reshard_problem_t *p;
    const pf_reshard_net_t *net;
    const pf_reshard_opts_t *o;
    pf_reshard_sched_t *sched;
    int64_t *cuts[PF_RESHARD_MAX_DIMS];
    int ncuts[PF_RESHARD_MAX_DIMS], src_parts[PF_RESHARD_MAX_DIMS], dst_parts[PF_RESHARD_MAX_DIMS];
    int *hosts, nhosts, *recv_h, *cand_h;
    double *cand_ms;
    pf_reshard_task_t *tasks;
    int *src, *dst, *src_off, *dst_off;
    int *cand_dev, *cand_off, *cand_strategy, *cand_chunks;
    size_t tasks_cap, src_cap, dst_cap, src_off_cap, dst_off_cap, cand_cap, cand_off_cap,
        strategy_cap, chunks_cap;
    int nsrc, ndst, ncand;
} build_t;

static int dense_host(const int *hosts, int nhosts, int h)
{
    for (int i = 0; i < nhosts; i++)
        if (hosts[i] == h)
            return i;
    return -1;
}

/* Fastest allowed strategy for one sender. Ties, up to rounding (a pipelined chain to one
 * receiver sums k pieces back to T), go to the simpler strategy, the lower enum. */
static double best_strategy(const pf_reshard_net_t *net, const pf_reshard_opts_t *o, int sender,
                            int ndst, const int *dst, double bytes, int *strategy, int *chunks)
{
    double best = INFINITY;
    for (int s = 0; s < PF_XFER_NSTRATEGIES; s++) {
        int k = 1;
        if (!(o->strategies & (1u << s)))
            continue;
        double ms = pf_reshard_strategy_ms(net, (pf_reshard_strategy_t)s, sender, ndst, dst, bytes,
                                           o->max_chunks, &k);
        if (ms < best * (1 - 1e-9)) {
            best = ms;
            *strategy = s;
            *chunks = k;
        }
    }
    return best;
}

/* Holders of one cell on one side, appended to *flat; ascending by device, or by (host, device)
 * when by_host (the ring order of §3.1). */
static int collect(const pf_reshard_net_t *net, const pf_mesh_t *m, const pf_mesh_shard_t *spec,
                   int ndims, const int *blk, int by_host, int **flat, size_t *cap, int *n)
{
    int first = *n;
    for (int r = 0; r < m->rows; r++)
        for (int c = 0; c < m->cols; c++) {
            if (!holds(spec, ndims, blk, r, c, m->cols))
                continue;
            if (pf_grow((void **)flat, cap, (size_t)*n + 1, sizeof(int)))
                return -1;
            int dev = m->devices[r * m->cols + c], j = *n;
            int64_t key = by_host ? (int64_t)net->host_of[dev] * MAX_EXTENT + dev : dev;
            while (j > first) {
                int p = (*flat)[j - 1];
                int64_t pkey = by_host ? (int64_t)net->host_of[p] * MAX_EXTENT + p : p;
                if (pkey <= key)
                    break;
                (*flat)[j] = p;
                j--;
            }
            (*flat)[j] = dev;
            (*n)++;
        }
    return 0;
}

static void build_free(build_t *b)
{
    for (int d = 0; d < b->p->ndims; d++)
        free(b->cuts[d]);
    free(b->tasks);
    free(b->src);
    free(b->dst);
    free(b->src_off);
    free(b->dst_off);
    free(b->cand_dev);
    free(b->cand_off);
    free(b->cand_strategy);
    free(b->cand_chunks);
    free(b->hosts);
    free(b->recv_h);
    free(b->cand_h);
    free(b->cand_ms);
    pf_reshard_sched_destroy(&b->sched);
}

/* The hosts of both meshes numbered densely, the scheduler over them, and the grid's cuts. */
static int build_init(build_t *b, char *err, size_t errlen)
{
    const pf_reshard_problem_t *p = b->p;
    int nsrc_mesh = p->src_mesh.rows * p->src_mesh.cols;
    int ndst_mesh = p->dst_mesh.rows * p->dst_mesh.cols;
    b->hosts = malloc((size_t)(nsrc_mesh + ndst_mesh) * sizeof(int));
    b->recv_h = malloc((size_t)ndst_mesh * sizeof(int));
    b->cand_h = malloc((size_t)nsrc_mesh * sizeof(int));
    b->cand_ms = malloc((size_t)nsrc_mesh * sizeof(double));
    if (!b->hosts || !b->recv_h || !b->cand_h || !b->cand_ms)
        return PF_ERR;
    for (int i = 0; i < nsrc_mesh + ndst_mesh; i++) {
        int dev = i < nsrc_mesh ? p->src_mesh.devices[i] : p->dst_mesh.devices[i - nsrc_mesh];
        if (dense_host(b->hosts, b->nhosts, b->net->host_of[dev]) < 0)
            b->hosts[b->nhosts++] = b->net->host_of[dev];
    }
    if (!(b->sched = pf_reshard_sched_new(b->nhosts, err, errlen)))
        return PF_ERR;
    for (int d = 0; d < p->ndims; d++) {
        b->src_parts[d] = parts_of(p->src_spec[d], &p->src_mesh);
        b->dst_parts[d] = parts_of(p->dst_spec[d], &p->dst_mesh);
        size_t n = (size_t)(b->src_parts[d] + b->dst_parts[d] + 2);
        if (!(b->cuts[d] = malloc(n * sizeof(int64_t))))
            return PF_ERR;
        b->ncuts[d] = dim_cuts(p->shape[d], b->src_parts[d], b->dst_parts[d], b->cuts[d]);
    }
    return PF_OK;
}

/* The unit task's sender candidates: one per source host, in order of their lowest-indexed
 * holder (the naive algorithm's sender is candidate 0, Sec. 3.2), sending from that holder with
 * its best strategy. Holders are src[s0..nsrc), receivers dst[d0..ndst). Returns the count, or
 * -1 when out of memory. */
static int task_candidates(build_t *b, const pf_reshard_task_t *task, int s0, int d0)
{
    int ncand = 0;
    for (int i = s0; i < b->nsrc; i++) {
        int h = dense_host(b->hosts, b->nhosts, b->net->host_of[b->src[i]]);
        if (dense_host(b->cand_h, ncand, h) >= 0)
            continue;
        size_t need = (size_t)b->ncand + 1;
        if (pf_grow((void **)&b->cand_dev, &b->cand_cap, need, sizeof(int)) ||
            pf_grow((void **)&b->cand_strategy, &b->strategy_cap, need, sizeof(int)) ||
            pf_grow((void **)&b->cand_chunks, &b->chunks_cap, need, sizeof(int)))
            return -1;
        b->cand_dev[b->ncand] = b->src[i];
        b->cand_h[ncand] = h;
        b->cand_ms[ncand++] =
            best_strategy(b->net, b->o, b->src[i], task->ndst, b->dst + d0, task->bytes,
                          &b->cand_strategy[b->ncand], &b->cand_chunks[b->ncand]);
        b->ncand++;
    }
    return ncand;
}

/* Sec. 2.2: the cell idx of the grid cut by both specs' block boundaries is one unit task: its
 * holders and its receivers are fixed sets, and neighbouring cells differ in one of them. Adds it
 * to the scheduler and the arrays; PF_OK or PF_ERR. */
static int unit_task(build_t *b, const int *idx, char *err, size_t errlen)
{
    const pf_reshard_problem_t *p = b->p;
    int nd = p->ndims;
    pf_reshard_task_t task = {.chunks = 1};
    int blk_src[PF_RESHARD_MAX_DIMS], blk_dst[PF_RESHARD_MAX_DIMS];
    double elems = 1;
    for (int d = 0; d < nd; d++) {
        task.lo[d] = b->cuts[d][idx[d]];
        task.hi[d] = b->cuts[d][idx[d] + 1];
        elems *= (double)(task.hi[d] - task.lo[d]);
        blk_src[d] = block_of(task.lo[d], p->shape[d], b->src_parts[d]);
        blk_dst[d] = block_of(task.lo[d], p->shape[d], b->dst_parts[d]);
    }
    task.bytes = elems * p->dtype_bytes;
    int s0 = b->nsrc, d0 = b->ndst, c0 = b->ncand, nrecv = 0;
    if (collect(b->net, &p->src_mesh, p->src_spec, nd, blk_src, 0, &b->src, &b->src_cap,
                &b->nsrc) ||
        collect(b->net, &p->dst_mesh, p->dst_spec, nd, blk_dst, 1, &b->dst, &b->dst_cap,
                &b->ndst))
        return PF_ERR;
    task.nsrc = b->nsrc - s0;
    task.ndst = b->ndst - d0;
    for (int i = d0; i < b->ndst; i++) {
        int h = dense_host(b->hosts, b->nhosts, b->net->host_of[b->dst[i]]);
        if (nrecv == 0 || b->recv_h[nrecv - 1] != h) /* grouped by host: adjacent repeats only */
            b->recv_h[nrecv++] = h;
    }
    int ncand = task_candidates(b, &task, s0, d0);
    if (ncand < 0)
        return PF_ERR;
    int t = pf_reshard_sched_add_task(b->sched, nrecv, b->recv_h, ncand, b->cand_h, b->cand_ms,
                                      err, errlen);
    if (t < 0 || pf_grow((void **)&b->tasks, &b->tasks_cap, (size_t)t + 1, sizeof *b->tasks) ||
        pf_grow((void **)&b->src_off, &b->src_off_cap, (size_t)t + 1, sizeof(int)) ||
        pf_grow((void **)&b->dst_off, &b->dst_off_cap, (size_t)t + 1, sizeof(int)) ||
        pf_grow((void **)&b->cand_off, &b->cand_off_cap, (size_t)t + 1, sizeof(int)))
        return PF_ERR;
    b->tasks[t] = task;
    b->src_off[t] = s0;
    b->dst_off[t] = d0;
    b->cand_off[t] = c0;
    return PF_OK;
}

/* Each task as scheduled: its holders and receivers, the chosen sender, strategy and start. */
static void apply_schedule(pf_reshard_t *r, build_t *b)
{
    const pf_reshard_net_t *net = b->net;
    for (int t = 0; t < r->ntasks; t++) {
        pf_reshard_task_t *x = &b->tasks[t];
        int c = b->cand_off[t] + r->sched.cand[t];
        x->src = b->src + b->src_off[t];
        x->dst = b->dst + b->dst_off[t];
        x->sender = b->cand_dev[c];
        x->sender_host = net->host_of[x->sender];
        x->strategy = (pf_reshard_strategy_t)b->cand_strategy[c];
        x->chunks = b->cand_chunks[c];
        x->start_ms = r->sched.start_ms[t];
        x->ms = pf_reshard_strategy_ms(net, x->strategy, x->sender, x->ndst, x->dst, x->bytes,
                                       x->chunks, NULL);
    }
    r->tasks = b->tasks;
    r->src_flat = b->src;
    r->dst_flat = b->dst;
    b->tasks = NULL;
    b->src = b->dst = NULL;
}

pf_reshard_t *pf_reshard_new(const pf_reshard_problem_t *p, const pf_reshard_net_t *net,
                             const pf_reshard_opts_t *o, char *err, size_t errlen)
{
    build_t b = {.p = p, .net = net, .o = o};
    int nd = p->ndims, rc = check_problem(p, net, o, err, errlen);
    if (rc != PF_OK)
        return NULL;
    rc = PF_ERR;
    pf_reshard_t *r = calloc(1, sizeof *r);
    if (!r || build_init(&b, err, errlen) != PF_OK)
        goto fail;
    int idx[PF_RESHARD_MAX_DIMS] = {0};
    for (;;) {
        if (unit_task(&b, idx, err, errlen) != PF_OK)
            goto fail;
        r->ntasks++;
        int d = nd - 1; /* next cell, last dimension fastest */
        while (d >= 0 && ++idx[d] == b.ncuts[d] - 1)
            idx[d--] = 0;
        if (d < 0)
            break;
    }
    if ((rc = pf_reshard_sched_solve(b.sched, o->algo, &o->sched, &r->sched, err, errlen)) !=
        PF_OK)
        goto fail;
    apply_schedule(r, &b);
    rc = PF_OK;
fail:
    if (rc == PF_ERR && err && !err[0])
        pf_fail(err, errlen, PF_ERR, "reshard: out of memory");
    if (rc != PF_OK)
        pf_reshard_destroy(&r);
    build_free(&b);
    return r;
}

void pf_reshard_destroy(pf_reshard_t **rp)
{
    if (!rp || !*rp)
        return;
    pf_reshard_t *r = *rp;
    free(r->tasks);
    free(r->src_flat);
    free(r->dst_flat);
    pf_reshard_sched_result_free(&r->sched);
    free(r);
    *rp = NULL;
}

int pf_reshard_ntasks(const pf_reshard_t *r) { return r->ntasks; }
const pf_reshard_task_t *pf_reshard_task(const pf_reshard_t *r, int i) { return &r->tasks[i]; }
const int *pf_reshard_order(const pf_reshard_t *r) { return r->sched.order; }
double pf_reshard_time_ms(const pf_reshard_t *r) { return r->sched.makespan_ms; }
const pf_reshard_sched_result_t *pf_reshard_schedule(const pf_reshard_t *r) { return &r->sched; }
