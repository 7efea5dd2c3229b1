#include "planner/sim/replica_groups.h"
#include "planner/sim/linkshare.h"
#include "planner/core/util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Replica r's hop from stage s to s + 1 and back, rank k, as simulate.c prices it (resharding
 * times or the postal model on rank k's share) equals replica 0's, on the same tier (NVLink or
 * NIC: what it shares with the gradient buckets, linkshare.h). */
static int same_hops(const pf_simulate_input_t *in, int s, int r)
{
    const pf_simulate_stage_t *up = &in->stage[s], *dn = &in->stage[s + 1];
    int T = in->tp;
    for (int k = 0; k < T; k++)
        if (pf_linkshare_tier(in->cluster, up->devices[r * T + k], dn->devices[r * T + k]) !=
            pf_linkshare_tier(in->cluster, up->devices[k], dn->devices[k]))
            return 0;
    if (up->xfer_ms)
        return up->xfer_ms[r] == up->xfer_ms[0];
    if (up->send_bytes <= 0)
        return 1;
    double bytes = up->send_bytes / T;
    for (int k = 0; k < T; k++) {
        int a0 = up->devices[k], b0 = dn->devices[k];
        int a = up->devices[r * T + k], b = dn->devices[r * T + k];
        if (pf_cluster_xfer_ms(in->cluster, a, b, bytes) !=
                pf_cluster_xfer_ms(in->cluster, a0, b0, bytes) ||
            pf_cluster_xfer_ms(in->cluster, b, a, bytes) !=
                pf_cluster_xfer_ms(in->cluster, b0, a0, bytes))
            return 0;
    }
    return 1;
}

int pf_replica_groups_apply(const pf_simulate_input_t *in)
{
    if (in->replicas < 2 || in->timeline || in->dp_stage)
        return 0;
    for (int s = 0; s < in->stages; s++) {
        const pf_simulate_stage_t *st = &in->stage[s];
        for (int r = 1; r < in->replicas; r++) {
            if ((st->rep_fwd_ms && st->rep_fwd_ms[r] != st->rep_fwd_ms[0]) ||
                (st->rep_bwd_ms && st->rep_bwd_ms[r] != st->rep_bwd_ms[0]))
                return 0;
            if (s + 1 < in->stages && !same_hops(in, s, r))
                return 0;
        }
    }
    return 1;
}

static void result_free(pf_simulate_result_t *r)
{
    free(r->device);
    free(r->busy_ms);
    free(r->comm_busy_ms);
    free(r->peak_mem_bytes);
    free(r->peak_inflight);
    free(r);
}

/* Rows rank-major (s R + r) T + k, as simulate.c lays them out. */
pf_simulate_result_t *pf_replica_groups_expand(const pf_simulate_input_t *in,
                                               const pf_simulate_result_t *one)
{
    int R = in->replicas, T = in->tp, P = one->ndevices / T;
    size_t rows = (size_t)P * R * T;
    pf_simulate_result_t *res = calloc(1, sizeof *res);
    if (!res)
        return NULL;
    *res = *one;
    res->replicas = R;
    res->ndevices = (int)rows;
    res->nevents = 0;
    res->events = NULL;
    res->device = malloc(rows * sizeof *res->device);
    res->busy_ms = malloc(rows * sizeof *res->busy_ms);
    res->comm_busy_ms = malloc(rows * sizeof *res->comm_busy_ms);
    res->peak_mem_bytes = malloc(rows * sizeof *res->peak_mem_bytes);
    res->peak_inflight = malloc(rows * sizeof *res->peak_inflight);
    if (!res->device || !res->busy_ms || !res->comm_busy_ms || !res->peak_mem_bytes ||
        !res->peak_inflight) {
        result_free(res);
        return NULL;
    }
    double busy = 0;
    for (int s = 0; s < P; s++)
        for (int r = 0; r < R; r++)
            for (int k = 0; k < T; k++) {
                size_t i = ((size_t)s * R + r) * T + k, j = (size_t)s * T + k;
                res->device[i] = in->stage[s].devices[r * T + k];
                res->busy_ms[i] = one->busy_ms[j];
                res->comm_busy_ms[i] = one->comm_busy_ms[j];
                res->peak_mem_bytes[i] = one->peak_mem_bytes[j];
                res->peak_inflight[i] = one->peak_inflight[j];
                busy += res->busy_ms[i];
            }
    res->bubble_fraction = res->step_ms > 0 ? 1.0 - busy / (rows * res->step_ms) : 0.0;
    return res;
}

/* Replica 0 is the first T devices (and the first entries of the per-replica arrays). */
pf_simulate_stage_t *pf_replica_groups_reduce(const pf_simulate_input_t *in,
                                              pf_simulate_input_t *one)
{
    pf_simulate_stage_t *stage = malloc((size_t)in->stages * sizeof *stage);
    if (!stage)
        return NULL;
    memcpy(stage, in->stage, (size_t)in->stages * sizeof *stage);
    *one = *in;
    one->replicas = 1;
    one->stage = stage;
    one->dp_stage = in->stage;
    one->dp_replicas = in->replicas;
    return stage;
}

/* The key of the 2T devices v[] (pf_replica_groups_same_xfers) into key (6 per pair). */
static void xfer_key(const pf_cluster_t *c, const int *v, int n, double *key)
{
    for (int i = 0, k = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            int hi = pf_cluster_device(c, v[i])->host, hj = pf_cluster_device(c, v[j])->host;
            key[k++] = (v[i] > v[j]) - (v[i] < v[j]);
            key[k++] = (hi > hj) - (hi < hj);
            key[k++] = pf_cluster_bw_gbps(c, v[i], v[j]);
            key[k++] = pf_cluster_bw_gbps(c, v[j], v[i]);
            key[k++] = pf_cluster_lat_us(c, v[i], v[j]);
            key[k++] = pf_cluster_lat_us(c, v[j], v[i]);
        }
}

static uint64_t key_hash(const double *key, int n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the keys' bits */
    for (int i = 0; i < n; i++) {
        uint64_t b;
        memcpy(&b, &key[i], sizeof b);
        h = (h ^ b) * 1099511628211ull;
    }
    return h;
}

int pf_replica_groups_same_xfers(const pf_cluster_t *c, const int *src, const int *dst, int R,
                                 int T, int *first)
{
    int nk = 6 * T * (2 * T - 1), cap = 2, rc = PF_ERR;
    while (cap < 2 * R)
        cap *= 2;
    double *keys = malloc((size_t)R * nk * sizeof *keys);
    int *table = malloc((size_t)cap * sizeof *table), *v = malloc(2 * (size_t)T * sizeof *v);
    if (!keys || !table || !v)
        goto done;
    for (int i = 0; i < cap; i++)
        table[i] = -1; /* open addressing: replica indices by key */
    for (int r = 0; r < R; r++) {
        double *key = keys + (size_t)r * nk;
        memcpy(v, src + (size_t)r * T, (size_t)T * sizeof *v);
        memcpy(v + T, dst + (size_t)r * T, (size_t)T * sizeof *v);
        xfer_key(c, v, 2 * T, key);
        size_t i = key_hash(key, nk) & (size_t)(cap - 1);
        while (table[i] >= 0 && memcmp(keys + (size_t)table[i] * nk, key, (size_t)nk * sizeof *key))
            i = (i + 1) & (size_t)(cap - 1);
        if (table[i] < 0)
            table[i] = r;
        first[r] = table[i];
    }
    rc = PF_OK;
done:
    free(keys);
    free(table);
    free(v);
    return rc;
}
