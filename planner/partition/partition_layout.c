#include "planner/partition/partition_layout.h"
#include "planner/ir/devkinds.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Host h's slowness: the largest graph ratio (devkinds.h) among its devices. */
typedef struct {
    int host;
    double ratio;
} host_speed_t;

static int cmp_fast_first(const void *a, const void *b)
{
    const host_speed_t *x = a, *y = b;
    if (x->ratio != y->ratio)
        return x->ratio < y->ratio ? -1 : 1;
    return (x->host > y->host) - (x->host < y->host);
}

static int cmp_slow_first(const void *a, const void *b)
{
    const host_speed_t *x = a, *y = b;
    if (x->ratio != y->ratio)
        return x->ratio > y->ratio ? -1 : 1;
    return (x->host > y->host) - (x->host < y->host);
}

/* Stage s's multiplier when the stages are laid over the devices host by host in the order of
 * hs (nh hosts), D / S devices a stage: the largest ratio among its devices (a stage runs at
 * the pace of its slowest replica). */
static void layout_mult(const pf_cluster_t *c, const host_speed_t *hs, int nh, const double *dr,
                        int S, int *seq, double *mult)
{
    int D = pf_cluster_ndevices(c), k = 0;
    for (int i = 0; i < nh; i++)
        for (int d = 0; d < D; d++)
            if (pf_cluster_device(c, d)->host == hs[i].host)
                seq[k++] = d;
    for (int s = 0; s < S; s++) {
        long long lo = (long long)s * D / S, hi = (long long)(s + 1) * D / S;
        mult[s] = 0;
        for (long long i = lo; i < hi || i == lo; i++)
            mult[s] = fmax(mult[s], dr[seq[i < D ? i : D - 1]]);
    }
}

int pf_partition_layout_mult(const pf_graph_t *g, const pf_cluster_t *c, int S, double *mult,
                        int *nl)
{
    int D = pf_cluster_ndevices(c), nh = 0, rc = PF_ERR;
    *nl = 0;
    pf_devkinds_t *dk = pf_devkinds_new(g, c);
    double *dr = malloc((size_t)D * sizeof *dr);
    host_speed_t *hs = malloc((size_t)D * sizeof *hs);
    int *seq = malloc((size_t)D * sizeof *seq);
    if (!dk || !dr || !hs || !seq)
        goto done;
    rc = PF_OK;
    if (pf_devkinds_uniform(dk))
        goto done;
    for (int k = 0; k < pf_devkinds_count(dk); k++) { /* one ratio per kind, then per device */
        double r = pf_devkinds_graph_ratio(dk, g, k);
        for (int d = 0; d < D; d++)
            if (pf_devkinds_of(dk, d) == k)
                dr[d] = r;
    }
    for (int d = 0; d < D; d++) {
        int h = pf_cluster_device(c, d)->host, i = 0;
        while (i < nh && hs[i].host != h)
            i++;
        if (i == nh)
            hs[nh++] = (host_speed_t){h, 0};
        hs[i].ratio = fmax(hs[i].ratio, dr[d]);
    }
    qsort(hs, (size_t)nh, sizeof *hs, cmp_fast_first);
    layout_mult(c, hs, nh, dr, S, seq, mult);
    qsort(hs, (size_t)nh, sizeof *hs, cmp_slow_first);
    layout_mult(c, hs, nh, dr, S, seq, mult + S);
    *nl = memcmp(mult, mult + S, (size_t)S * sizeof *mult) ? 2 : 1;
done:
    pf_devkinds_destroy(&dk);
    free(dr);
    free(hs);
    free(seq);
    return rc;
}
