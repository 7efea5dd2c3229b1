/* simcpep: context and expert parallelism's traffic in a simulated step (simcpep.h). */
#include "planner/sim/simcpep.h"
#include "planner/core/util.h"
#include "planner/inputs/cpep.h"
#include "planner/ir/collective.h"

#include <math.h>
#include <stdlib.h>

/* The slowest group of stage st's rank-0 devices: n replicas first + i x step, for every first
 * of the groups (C = step 1, groups of n; E = step C, n per block of C E). */
static int slowest_ms(const pf_cluster_t *c, const pf_simulate_stage_t *st, int R, int T, int n,
                      int step, pf_collective_op_t op, pf_collective_algo_t algo, double bytes,
                      double *ms)
{
    int *devs = malloc(sizeof *devs * (size_t)n);
    if (!devs)
        return PF_ERR;
    *ms = 0;
    for (int block = 0; block < R; block += n * step)
        for (int j = 0; j < step; j++) {
            pf_collective_group_t g;
            for (int i = 0; i < n; i++)
                devs[i] = st->devices[(size_t)(block + j + i * step) * T];
            if (pf_collective_group_from_cluster(c, devs, n, 0, &g) != PF_OK) {
                free(devs);
                return PF_ERR;
            }
            *ms = fmax(*ms, pf_collective_ms(&g, op, bytes, algo, NULL));
        }
    free(devs);
    return PF_OK;
}

/* Stage s: its ring and all-to-all terms. */
static int one_stage(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p,
                     pf_simulate_input_t *in, int s, int C, int E)
{
    pf_simulate_stage_t *st = &in->stage[s];
    int T = in->tp > 0 ? in->tp : 1, R = in->replicas, rc = PF_OK;
    pf_cpep_facts_t f;
    pf_cpep_facts(g, p->stage_list[s].ops, p->stage_list[s].nops, &f);
    double ring = 0, a2a = 0, ring_f = 0, ring_b = 0;
    int L = f.attn_layers, M = E > 1 ? f.moe_layers : 0;
    if (C > 1 && L > 0) {
        double kv_local = f.kv_bytes / L / T;
        rc = slowest_ms(c, st, R, T, C, 1, PF_COLL_ALLGATHER, PF_COLL_ALGO_RING, C * kv_local,
                        &ring);
        ring_f = fmax(0, ring - f.core_fwd_ms / L / T);
        ring_b = fmax(0, 2 * ring - f.core_bwd_ms / L / T);
    }
    if (rc == PF_OK && M > 0) {
        int spt = p->train.sequence_parallel && T > 1 ? T : 1;
        rc = slowest_ms(c, st, R, T, E, C, PF_COLL_ALLTOALL, PF_COLL_ALGO_BEST,
                        f.a2a_bytes / M / spt, &a2a);
    }
    st->tp_fwd_ms += L * ring_f + 2.0 * M * a2a;
    st->tp_bwd_ms += L * ring_b + 2.0 * M * a2a;
    if (st->recompute_ms > 0)
        st->recompute_ms += L * ring_f;
    if (st->recompute_ms > 0 && pf_plan_recompute_stage(p, s) == PF_RECOMPUTE_FULL)
        st->recompute_ms += 2.0 * M * a2a;
    return rc;
}

int pf_simcpep_add(const pf_graph_t *g, const pf_cluster_t *c, const pf_plan_t *p,
                   pf_simulate_input_t *in, char *err, size_t errlen)
{
    int C = pf_plan_context_parallel(p);
    int E = pf_plan_expert_parallel(p);
    if (C == 1 && E == 1)
        return PF_OK;
    if (in->replicas % (C * E) || in->stages != p->stages)
        return pf_fail(err, errlen, PF_EINPUT, "context parallelism %d x expert parallelism %d: "
                       "does not divide the %d replicas (or the input is split already)", C, E,
                       in->replicas);
    for (int s = 0; s < in->stages; s++)
        if (one_stage(g, c, p, in, s, C, E) != PF_OK)
            return pf_fail(err, errlen, PF_ERR, "out of memory");
    return PF_OK;
}
