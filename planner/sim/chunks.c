/* chunks: P stages as P x V interleaved chunks (chunks.h). */
#include "planner/sim/chunks.h"
#include "planner/sim/simcpep.h"
#include "planner/core/util.h"
#include "planner/tp/tp_price.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int pf_chunks_of_plan(const pf_plan_t *p)
{
    return p->blocks.present && p->blocks.virtual_stages > 1 ? p->blocks.virtual_stages : 1;
}

/* A copy of n entries of src over V into *dst (NULL stays NULL). */
static int copy_over(const double *src, int n, int V, double **dst)
{
    *dst = NULL;
    if (!src)
        return PF_OK;
    if (!(*dst = malloc((size_t)n * sizeof **dst)))
        return PF_ERR;
    for (int i = 0; i < n; i++)
        (*dst)[i] = src[i] / V;
    return PF_OK;
}

/* Chunk j = c P + i of stage i (src), H the boundary activation (stash of it kept per device),
 * wrap_ms the last rank's transfer to rank 0 per replica (T > 1) or NULL. Allocates out's devices, xfer_ms and the
 * replicas' own times (a mixed cluster: 1/V of stage i's). */
static int chunk_of(const pf_simulate_input_t *in, int j, int V, double H, double stash,
                    const double *wrap_ms, pf_simulate_stage_t *out)
{
    int P = in->stages, i = j % P, n = in->replicas * in->tp;
    const pf_simulate_stage_t *src = &in->stage[i];
    double stashed = i > 0 ? in->stage[i - 1].send_bytes : 0;
    *out = *src;
    out->fwd_ms /= V, out->bwd_ms /= V, out->recompute_ms /= V;
    out->tp_fwd_ms /= V, out->tp_bwd_ms /= V, out->optimizer_ms /= V;
    out->param_bytes /= V, out->static_bytes /= V;
    out->act_bytes = fmax(0, src->act_bytes - stashed) / V + (j > 0 ? stash : 0);
    out->send_bytes = j + 1 == P * V ? 0 : i + 1 < P ? src->send_bytes : H;
    const double *xf = j + 1 == P * V ? NULL : i + 1 < P ? src->xfer_ms : wrap_ms;
    out->xfer_ms = out->rep_fwd_ms = out->rep_bwd_ms = NULL;
    out->devices = NULL; /* nothing of src's is owned by the chunk */
    if (copy_over(src->rep_fwd_ms, in->replicas, V, &out->rep_fwd_ms) != PF_OK ||
        copy_over(src->rep_bwd_ms, in->replicas, V, &out->rep_bwd_ms) != PF_OK)
        return PF_ERR;
    out->devices = malloc((size_t)n * sizeof *out->devices);
    if (xf)
        out->xfer_ms = malloc((size_t)in->replicas * sizeof *out->xfer_ms);
    if (!out->devices || (xf && !out->xfer_ms))
        return PF_ERR;
    memcpy(out->devices, src->devices, (size_t)n * sizeof *out->devices);
    if (xf)
        memcpy(out->xfer_ms, xf, (size_t)in->replicas * sizeof *out->xfer_ms);
    return PF_OK;
}

/* The last rank's transfer of H to rank 0, per replica, as pf_simulate_input_from_setting
 * prices the other boundaries of a T > 1 pipeline. */
static int wrap_xfers(const pf_simulate_input_t *in, double H, double *ms, char *err,
                      size_t errlen)
{
    int P = in->stages, T = in->tp;
    for (int r = 0; r < in->replicas; r++) {
        pf_simulate_xfer_problem_t xp;
        pf_simulate_xfer_problem(in->stage[P - 1].devices + (size_t)r * T,
                                 in->stage[0].devices + (size_t)r * T, T, H, &xp);
        int rc = pf_simulate_xfer_ms(in->cluster, &xp, &ms[r], err, errlen);
        if (rc != PF_OK)
            return rc;
    }
    return PF_OK;
}

/* n stages and what each owns: pf_simulate_input_clear's, so that the list of owned fields
 * stays in one place. */
static void free_stages(pf_simulate_stage_t *st, int n)
{
    pf_simulate_input_t in = {.stage = st, .stages = n};
    pf_simulate_input_clear(&in);
}

int pf_chunks_split(pf_simulate_input_t *in, int V, char *err, size_t errlen)
{
    return pf_chunks_split_sp(in, V, 0, err, errlen);
}

int pf_chunks_split_sp(pf_simulate_input_t *in, int V, int sp, char *err, size_t errlen)
{
    if (V <= 1)
        return PF_OK;
    int P = in->stages, rc = PF_OK;
    if (P < 2 || in->virtual_stages > 1 || in->microbatches % P != 0)
        return pf_fail(err, errlen, PF_EINPUT, "interleaving %d chunks: needs 2 or more stages "
                       "(%d), not chunks already, and micro-batches (%d) a multiple of the "
                       "stages", V, P, in->microbatches);
    double H = 0;
    for (int i = 0; i + 1 < P; i++)
        H = fmax(H, in->stage[i].send_bytes);
    pf_simulate_stage_t *st = calloc((size_t)P * V, sizeof *st);
    double *wrap = in->tp > 1 ? calloc((size_t)in->replicas, sizeof *wrap) : NULL;
    if (!st || (in->tp > 1 && !wrap)) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto done;
    }
    if (wrap && (rc = wrap_xfers(in, H, wrap, err, errlen)) != PF_OK)
        goto done;
    for (int j = 0; j < P * V && rc == PF_OK; j++)
        if (chunk_of(in, j, V, H, sp && in->tp > 1 ? H / in->tp : H, wrap, &st[j]) != PF_OK)
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
    if (rc != PF_OK)
        goto done;
    free_stages(in->stage, P);
    in->stage = st;
    st = NULL;
    in->stages = P * V;
    in->virtual_stages = V;
    in->buckets = in->buckets > 1 ? (in->buckets + V - 1) / V : in->buckets;
done:
    free_stages(st, P * V);
    free(wrap);
    return rc;
}

double pf_chunks_extra_bytes(const pf_simulate_input_t *in, const pf_simulate_result_t *r, int i)
{
    if (in->virtual_stages <= 1)
        return 0;
    int P = in->stages / in->virtual_stages, k = in->microbatches < P - i ? in->microbatches : P - i;
    double act = 0, stat = 0;
    for (int s = i; s < in->stages; s += P) {
        act += in->stage[s].act_bytes;
        stat += in->stage[s].static_bytes;
    }
    return r->peak_mem_bytes[(size_t)i * in->replicas * in->tp] - stat - k * act;
}

/* The forward and backward time of stage s's weighted GEMMs split T ways (tp_price.h): the
 * column- and row-parallel linears whose collectives tensor-parallel overlap hides. */
static void stage_gemms(const pf_graph_t *g, const pf_stage_t *st, int T, double *fwd_ms,
                        double *bwd_ms)
{
    const pf_devmodel_t *dm = pf_tp_price_model(g);
    *fwd_ms = *bwd_ms = 0;
    for (int i = 0; i < st->nops; i++) {
        const pf_op_t *op = pf_graph_op(g, st->ops[i]);
        double f, b;
        if (op->param_bytes <= 0 || op->work.gemm_m <= 0)
            continue;
        pf_tp_price_split(dm, op, PF_TP_SPLIT_N, T, &f, &b);
        *fwd_ms += f;
        *bwd_ms += b;
    }
}

void pf_chunks_tp_overlap(pf_simulate_input_t *in, const pf_graph_t *g, const pf_plan_t *p)
{
    int sp = p->train.sequence_parallel || p->blocks.sequence_parallel;
    if (in->tp <= 1 || !p->blocks.present || !p->blocks.tp_comm_overlap || !sp ||
        in->virtual_stages > 1 || in->stages != p->stages)
        return;
    for (int s = 0; s < in->stages; s++) {
        pf_simulate_stage_t *st = &in->stage[s];
        double gf, gb;
        stage_gemms(g, &p->stage_list[s], in->tp, &gf, &gb);
        st->tp_fwd_ms = pf_training_tp_overlap_exposed_ms(st->tp_fwd_ms, gf, in->tp);
        st->tp_bwd_ms = pf_training_tp_overlap_exposed_ms(st->tp_bwd_ms, gb, in->tp);
    }
}

int pf_chunks_input_from_setting(const pf_graph_t *g, const pf_cluster_t *c,
                                 const pf_tp_setting_t *set, const pf_plan_t *p,
                                 const double *xfer_ms, pf_simulate_input_t *in, char *err,
                                 size_t errlen)
{
    int rc = pf_simulate_input_from_setting(g, c, set, p, xfer_ms, in, err, errlen);
    int sp = p->train.sequence_parallel || (p->blocks.present && p->blocks.sequence_parallel);
    /* the K/V ring and the all-to-alls join the stage's collectives before the TP overlap hides
     * them behind the GEMMs, as the block search's analytic part does (blockcost.c) */
    if (rc == PF_OK && (rc = pf_simcpep_add(g, c, p, in, err, errlen)) == PF_OK)
        pf_chunks_tp_overlap(in, g, p);
    if (rc == PF_OK &&
        (rc = pf_chunks_split_sp(in, pf_chunks_of_plan(p), sp, err, errlen)) != PF_OK)
        pf_simulate_input_clear(in);
    return rc;
}
