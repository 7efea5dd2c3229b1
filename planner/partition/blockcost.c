/* blockcost: the analytic model of one Megatron-LM configuration (blockcost.h). */
#include "planner/partition/blockcost.h"
#include "planner/core/util.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the default prices: roofline and ring collectives ---- */

static double roof_gemm_ms(void *ctx, int64_t m, int64_t n, int64_t k, int64_t batch)
{
    const pf_blockcost_roofline_t *r = ctx;
    double flops = 2.0 * (double)m * (double)n * (double)k * (double)batch;
    return flops / (r->tflops * 1e12 * r->efficiency) * 1e3;
}

static double roof_memory_ms(void *ctx, double bytes)
{
    const pf_blockcost_roofline_t *r = ctx;
    return bytes / (r->hbm_gbps * 1e9) * 1e3;
}

/* The collective model's group of devices first + i x stride (mod the cluster's devices), cached
 * per group. */
static const pf_collective_group_t *coll_group(pf_blockcost_groups_t *gs, pf_blockcost_group_t g)
{
    for (int i = 0; i < gs->ncache; i++)
        if (gs->cache[i].key.first == g.first && gs->cache[i].key.size == g.size &&
            gs->cache[i].key.stride == g.stride)
            return &gs->cache[i].g;
    int slot = gs->ncache < PF_BLOCKCOST_CACHE ? gs->ncache++ : gs->next++ % PF_BLOCKCOST_CACHE;
    int n = pf_cluster_ndevices(gs->cluster), *devs = malloc(sizeof *devs * (size_t)g.size);
    for (int i = 0; devs && i < g.size; i++)
        devs[i] = (g.first + i * g.stride) % n;
    gs->cache[slot].key = g;
    /* out of memory: the collective model's one-host group with no links (infinite times) */
    if (!devs ||
        pf_collective_group_from_cluster(gs->cluster, devs, g.size, 0, &gs->cache[slot].g))
        gs->cache[slot].g = (pf_collective_group_t){.n = g.size, .hosts = 1, .per_host = g.size};
    free(devs);
    return &gs->cache[slot].g;
}

static double coll_ms(pf_blockcost_groups_t *gs, pf_blockcost_group_t g, double bytes,
                      pf_collective_op_t op, pf_collective_algo_t algo)
{
    if (g.size <= 1 || bytes <= 0)
        return 0;
    return pf_collective_ms(coll_group(gs, g), op, bytes, algo, NULL);
}

/* The collective and p2p prices of both sets: ctx points to a pf_blockcost_roofline_t or a
 * pf_blockcost_priced_t, whose first member is their groups (C11 6.7.2.1: a pointer to a struct
 * converts to one to its first member); the groups' algo is what tells the two apart. */
static double groups_allreduce_ms(void *ctx, pf_blockcost_group_t g, double bytes)
{
    pf_blockcost_groups_t *gs = ctx;
    return coll_ms(gs, g, bytes, PF_COLL_ALLREDUCE, gs->algo);
}

static double groups_reduce_scatter_ms(void *ctx, pf_blockcost_group_t g, double bytes)
{
    pf_blockcost_groups_t *gs = ctx;
    return coll_ms(gs, g, bytes, PF_COLL_REDUCE_SCATTER, gs->algo);
}

static double groups_all_gather_ms(void *ctx, pf_blockcost_group_t g, double bytes)
{
    pf_blockcost_groups_t *gs = ctx;
    return coll_ms(gs, g, bytes, PF_COLL_ALLGATHER, gs->algo);
}

static double groups_p2p_ms(void *ctx, int src, int dst, double bytes)
{
    const pf_blockcost_groups_t *gs = ctx;
    return pf_cluster_xfer_ms(gs->cluster, src, dst, bytes);
}

void pf_blockcost_roofline_init(pf_blockcost_roofline_t *r, const pf_cluster_t *c,
                                pf_blockcost_env_t *env)
{
    memset(r, 0, sizeof *r);
    r->groups.cluster = c;
    r->groups.algo = PF_COLL_ALGO_RING;
    double tf = pf_cluster_device(c, 0)->tflops;
    r->tflops = tf > 0 ? tf : 125;
    r->efficiency = PF_BLOCKCOST_GEMM_EFFICIENCY;
    r->hbm_gbps = PF_BLOCKCOST_HBM_GBPS;
    *env = (pf_blockcost_env_t){.ctx = r,
                                .gemm_ms = roof_gemm_ms,
                                .memory_ms = roof_memory_ms,
                                .allreduce_ms = groups_allreduce_ms,
                                .reduce_scatter_ms = groups_reduce_scatter_ms,
                                .all_gather_ms = groups_all_gather_ms,
                                .p2p_ms = groups_p2p_ms};
}

/* ---- the measured prices: device model and collective model ---- */

static double dm_gemm_ms(void *ctx, int64_t m, int64_t n, int64_t k, int64_t batch)
{
    const pf_blockcost_priced_t *r = ctx;
    return pf_devmodel_gemm_ms(r->dm, r->prec, (double)m, (double)n, (double)k, (double)batch);
}

static double dm_memory_ms(void *ctx, double bytes)
{
    const pf_blockcost_priced_t *r = ctx;
    return bytes > 0 ? pf_devmodel_memory_ms(r->dm, bytes) : 0;
}

void pf_blockcost_priced_init(pf_blockcost_priced_t *r, const pf_cluster_t *c,
                              const pf_devmodel_t *dm, int precision_bytes,
                              pf_blockcost_env_t *env)
{
    memset(r, 0, sizeof *r);
    r->groups.cluster = c;
    r->groups.algo = PF_COLL_ALGO_BEST;
    r->dm = dm;
    r->prec = precision_bytes == 4 ? PF_PREC_FP32 : PF_PREC_BF16;
    *env = (pf_blockcost_env_t){.ctx = r,
                                .gemm_ms = dm_gemm_ms,
                                .memory_ms = dm_memory_ms,
                                .allreduce_ms = groups_allreduce_ms,
                                .reduce_scatter_ms = groups_reduce_scatter_ms,
                                .all_gather_ms = groups_all_gather_ms,
                                .p2p_ms = groups_p2p_ms};
}

/* ---- one part ---- */

static int64_t scaled(int64_t x, double f)
{
    int64_t y = (int64_t)llround((double)x * f);
    return y > 0 ? y : 1;
}

static int64_t divided(int64_t x, int t) { return x / t > 0 ? x / t : 1; }

static void gemm_cost(const pf_blockcost_env_t *env, const pf_blocks_gemm_t *gm, double scale,
                      int t, double *fwd, double *bwd)
{
    int64_t m = gm->m, n = gm->n, k = gm->k, batch = gm->batch;
    if (gm->samples_in_batch)
        batch = scaled(batch, scale);
    else
        m = scaled(m, scale);
    if (gm->split == PF_BLOCKS_COLUMN)
        n = divided(n, t);
    else if (gm->split == PF_BLOCKS_ROW)
        k = divided(k, t);
    else if (gm->split == PF_BLOCKS_HEADS)
        batch = divided(batch, t);
    *fwd = env->gemm_ms(env->ctx, m, n, k, batch);
    *bwd = env->gemm_ms(env->ctx, m, k, n, batch) + env->gemm_ms(env->ctx, k, n, m, batch);
}

/* The tensor-parallel collectives of `count` tensors of `bytes` in all. */
static double tp_comm_ms(const pf_blockcost_env_t *env, int t, int sp, int count, double bytes)
{
    if (t <= 1 || count <= 0)
        return 0;
    pf_blockcost_group_t g = {0, t, 1};
    double each = bytes / count;
    if (sp)
        return count * (env->reduce_scatter_ms(env->ctx, g, each) +
                        env->all_gather_ms(env->ctx, g, each));
    return count * env->allreduce_ms(env->ctx, g, each);
}

static void compute_cost(const pf_blockcost_problem_t *pr, const pf_blocks_part_t *part,
                         double scale, int t, int sp, pf_blockcost_part_t *out, double *core_ms)
{
    const pf_blockcost_env_t *env = pr->env;
    for (int i = 0; i < part->ngemms; i++) {
        double f, b;
        gemm_cost(env, &part->gemms[i], scale, t, &f, &b);
        out->fwd_ms += f;
        out->bwd_ms += b;
        if (part->gemms[i].core)
            *core_ms += f;
    }
    for (int i = 0; i < part->nmem; i++) {
        const pf_blocks_memop_t *mo = &part->mem[i];
        double f = env->memory_ms(env->ctx, mo->bytes * scale / (mo->split || sp ? t : 1));
        out->fwd_ms += f;
        out->bwd_ms += 2 * f;
        if (mo->core)
            *core_ms += f;
    }
}

/* The forward and backward time of the part's column- and row-parallel GEMMs: the ones an
 * overlapped collective hides behind (training.h, tensor-parallel communication overlap). */
static void overlap_gemms(const pf_blockcost_problem_t *pr, const pf_blocks_part_t *part,
                          double scale, int t, pf_blockcost_part_t *out)
{
    for (int i = 0; i < part->ngemms; i++) {
        const pf_blocks_gemm_t *gm = &part->gemms[i];
        double f, b;
        if (gm->split != PF_BLOCKS_COLUMN && gm->split != PF_BLOCKS_ROW)
            continue;
        gemm_cost(pr->env, gm, scale, t, &f, &b);
        out->tp_gemm_fwd_ms += f;
        out->tp_gemm_bwd_ms += b;
    }
}

void pf_blockcost_part(const pf_blockcost_problem_t *pr, const pf_blocks_part_t *part, int t,
                       int b, int sp, pf_training_recompute_t rc, pf_blockcost_part_t *out)
{
    memset(out, 0, sizeof *out);
    double scale = (double)b / pf_blocks_microbatch(pr->blocks), core_ms = 0;
    int spt = sp && t > 1 ? t : 1;
    compute_cost(pr, part, scale, t, sp, out, &core_ms);
    out->tp_fwd_ms = tp_comm_ms(pr->env, t, sp, part->nar_fwd, part->ar_fwd_bytes * scale);
    out->tp_bwd_ms = tp_comm_ms(pr->env, t, sp, part->nar_bwd, part->ar_bwd_bytes * scale);
    double kept = part->act_whole_bytes / spt + part->act_split_bytes / t;
    double all = kept + part->act_core_bytes / t;
    if (rc == PF_RECOMPUTE_FULL) {
        out->recompute_ms = out->fwd_ms + out->tp_fwd_ms;
        out->act_bytes = part->input_bytes * scale / spt;
        out->reserve_bytes = all * scale;
    } else if (rc == PF_RECOMPUTE_SELECTIVE) {
        out->recompute_ms = core_ms;
        out->act_bytes = kept * scale;
    } else
        out->act_bytes = all * scale;
    out->param_bytes = part->param_bytes - part->param_split_bytes + part->param_split_bytes / t;
    out->p2p_bytes = part->output_bytes * scale / spt;
    if (sp && t > 1)
        overlap_gemms(pr, part, scale, t, out);
    if (pr->cpep_part)
        pr->cpep_part(pr, part, t, b, sp, rc, out);
}

void pf_blockcost_parts(const pf_blockcost_problem_t *pr, int t, int b, int sp,
                        pf_training_recompute_t rc, pf_blockcost_part_t out[3])
{
    pf_blockcost_part(pr, pf_blocks_prologue(pr->blocks), t, b, sp, rc, &out[0]);
    pf_blockcost_part(pr, pf_blocks_block(pr->blocks), t, b, sp, rc, &out[1]);
    pf_blockcost_part(pr, pf_blocks_epilogue(pr->blocks), t, b, sp, rc, &out[2]);
}

/* ---- stages and the step ---- */

int pf_blockcost_interleave_split(int L, int p, int v, int *first, int *mid, int *last)
{
    if (p < 2 || v < 2 || L < 1)
        return -1;
    if (L % (p * v) == 0) {
        *first = *mid = *last = L / p;
        return 0;
    }
    if ((L + 2) % (p * v) != 0)
        return -1;
    /* the embedding and the output head each take one layer's place ([Llama3] 3.3.2) */
    *mid = (L + 2) / p;
    *first = *last = *mid - 1;
    return 1;
}

int pf_blockcost_v_ok(int L, int p, int v, int m)
{
    int x0, x1, x2;
    return v == 1 || (v > 1 && p > 0 && m % p == 0 &&
                      pf_blockcost_interleave_split(L, p, v, &x0, &x1, &x2) >= 0);
}

int pf_blockcost_chunk_layers(int L, int p, int v, int rank, int chunk)
{
    int first, mid, last, kind = pf_blockcost_interleave_split(L, p, v, &first, &mid, &last);
    if (kind < 0 || rank < 0 || rank >= p || chunk < 0 || chunk >= v)
        return -1;
    int each = kind == 0 ? L / (p * v) : (L + 2) / (p * v);
    return each - (kind == 1 && ((rank == 0 && chunk == 0) || (rank == p - 1 && chunk == v - 1)));
}

static double part_ms(const pf_blockcost_part_t *x)
{
    return x->fwd_ms + x->bwd_ms + x->recompute_ms + x->tp_fwd_ms + x->tp_bwd_ms;
}

/* part_ms under c: with tensor-parallel communication overlap its collectives are what the
 * paired GEMMs do not hide (training.h). */
static double cand_part_ms(const pf_blockcost_cand_t *c, const pf_blockcost_part_t *x)
{
    if (!c->tpo || !c->sp || c->t <= 1)
        return part_ms(x);
    return x->fwd_ms + x->bwd_ms + x->recompute_ms +
           pf_training_tp_overlap_exposed_ms(x->tp_fwd_ms, x->tp_gemm_fwd_ms, c->t) +
           pf_training_tp_overlap_exposed_ms(x->tp_bwd_ms, x->tp_gemm_bwd_ms, c->t);
}

/* Model chunks (of L / (p v) layers) stage s holds at its peak, in layer-sets of the stage:
 * 1F1B min(m, p - s); interleaved Megatron-LM's warm-up + 1, / v, where m = p runs every
 * forward first (as sim/interleave.c's pf_interleave_warmup): all m v chunks, m layer-sets. */
static double inflight(const pf_blockcost_cand_t *c, int m, int s)
{
    if (c->v <= 1)
        return fmin(m, c->p - s);
    if (m == c->p)
        return m;
    double chunks = (c->p - s - 1) * 2.0 + (c->v - 1) * (double)c->p + 1;
    return fmin(chunks, (double)m * c->v) / c->v;
}

typedef struct {
    int which; /* 0 first, 1 middle, 2 last */
    int stage; /* its index */
    int layers;
} stage_t;

/* Interleaved, Megatron-LM overlaps each chunk's sends and receives with the next chunk's
 * compute (its overlap_p2p_comm, on by default with virtual stages): of the 2 v hops per
 * micro-batch only what a chunk's forward (backward) does not cover is exposed. */
static double interleaved_hops_ms(const pf_blockcost_cand_t *c, const pf_blockcost_part_t parts[3],
                                  stage_t st, double hop)
{
    double f = st.layers * parts[1].fwd_ms, b = st.layers * (parts[1].bwd_ms + parts[1].recompute_ms);
    if (st.stage == 0)
        f += parts[0].fwd_ms, b += parts[0].bwd_ms + parts[0].recompute_ms;
    if (st.stage == c->p - 1)
        f += parts[2].fwd_ms, b += parts[2].bwd_ms + parts[2].recompute_ms;
    return c->v * (fmax(0, hop - f / c->v) + fmax(0, hop - b / c->v));
}

static double stage_ms(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                       const pf_blockcost_part_t parts[3], stage_t st)
{
    double ms = st.layers * cand_part_ms(c, &parts[1]);
    if (st.stage == 0)
        ms += cand_part_ms(c, &parts[0]);
    if (st.stage == c->p - 1)
        ms += cand_part_ms(c, &parts[2]);
    if (c->p > 1) {
        int n = pr->ngpus, src = st.stage * c->t * c->d, dst = (src + c->t * c->d) % n;
        double hop = pr->env->p2p_ms(pr->env->ctx, src, dst, parts[1].p2p_bytes);
        ms += c->v > 1 ? interleaved_hops_ms(c, parts, st, hop) : 2.0 * hop;
    }
    return ms;
}

static double stage_param_bytes(const pf_blockcost_cand_t *c, const pf_blockcost_part_t parts[3],
                                stage_t st)
{
    double pb = st.layers * parts[1].param_bytes;
    if (st.stage == 0)
        pb += parts[0].param_bytes;
    if (st.stage == c->p - 1)
        pb += parts[2].param_bytes;
    return pb;
}

static double stage_mem(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                        const pf_blockcost_part_t parts[3], stage_t st, int m)
{
    pf_training_t tr = pr->training;
    tr.zero = c->zero;
    double state = stage_param_bytes(c, parts, st) * pf_training_state_factor(&tr, c->d);
    double act = st.layers * parts[1].act_bytes, reserve = parts[1].reserve_bytes;
    if (st.stage == 0) {
        act += parts[0].act_bytes;
        reserve = fmax(reserve, parts[0].reserve_bytes);
    }
    if (st.stage == c->p - 1) {
        act += parts[2].act_bytes;
        reserve = fmax(reserve, parts[2].reserve_bytes);
    }
    return state + inflight(c, m, st.stage) * act + reserve;
}

/* Gradient reduction not hidden by the last micro-batch's backward, ZeRO-3's gathers not hidden
 * by the compute, and the optimizer step, for one stage. */
static void dp_costs(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                     const pf_blockcost_part_t parts[3], stage_t st, int m, double sms,
                     double out[3])
{
    const pf_blockcost_env_t *env = pr->env;
    double pb = stage_param_bytes(c, parts, st);
    double bwd = st.layers * (parts[1].bwd_ms + parts[1].recompute_ms);
    pf_blockcost_group_t g = {0, c->d, c->t};
    double dp = 0, z3 = 0;
    if (c->d > 1 && c->zero == 0)
        dp = env->allreduce_ms(env->ctx, g, pb);
    else if (c->d > 1)
        dp = env->reduce_scatter_ms(env->ctx, g, pb) + env->all_gather_ms(env->ctx, g, pb);
    if (c->d > 1 && c->zero == 3)
        z3 = m * pf_training_zero3_exposed_ms(env->all_gather_ms(env->ctx, g, pb), sms);
    pf_training_state_split_t sp;
    pf_training_state_split(&pr->training, 1, &sp);
    double shard = c->zero >= 1 ? 1.0 / c->d : 1.0;
    out[0] = fmax(0, dp - bwd);
    out[1] = z3;
    out[2] = env->memory_ms(env->ctx, pb * shard * (2 * (sp.master + sp.moments) + 2));
}

static int check_cand(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c, int *m)
{
    int L = pf_blocks_count(pr->blocks);
    if (c->t < 1 || c->p < 1 || c->d < 1 || c->b < 1 || c->v < 1 ||
        (int64_t)c->t * c->p * c->d != pr->ngpus || pr->global_batch % ((int64_t)c->d * c->b) ||
        pr->global_batch / ((int64_t)c->d * c->b) > PF_BLOCKCOST_MAX_MICROBATCHES)
        return PF_EINPUT;
    *m = (int)(pr->global_batch / ((int64_t)c->d * c->b));
    if (!pf_blockcost_v_ok(L, c->p, c->v, *m))
        return PF_EINPUT;
    int sum = c->p == 1 ? c->first_layers
                        : c->first_layers + c->last_layers + (c->p - 2) * c->mid_layers;
    if (pr->cpep_check && pr->cpep_check(pr->cpep, c) != PF_OK)
        return PF_EINPUT;
    return sum == L && c->first_layers >= 0 && c->last_layers >= 0 && c->mid_layers >= 0
               ? PF_OK
               : PF_EINPUT;
}

/* --recompute auto: stage st's recomputation, the lightest whose memory fits (the one of least
 * memory when none does), and that memory. */
static int stage_rc(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                    const pf_blockcost_part_t set[3][3], stage_t st, int m, double *mem)
{
    int best = PF_RECOMPUTE_FULL;
    double least = DBL_MAX;
    for (int r = PF_RECOMPUTE_NONE; r <= PF_RECOMPUTE_FULL; r++) {
        double x = stage_mem(pr, c, set[r], st, m);
        if (x <= pr->mem_bytes) {
            *mem = x;
            return r;
        }
        if (x < least)
            least = x, best = r;
    }
    *mem = least;
    return best;
}

/* pf_blockcost_eval with set[0] for every stage (nset 1), or each stage's level of set (3). */
static int eval_core(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                     const pf_blockcost_part_t set[][3], int nset, pf_blockcost_eval_t *ev)
{
    int m;
    memset(ev, 0, sizeof *ev);
    if (check_cand(pr, c, &m))
        return PF_EINPUT;
    ev->microbatches = m;
    stage_t st[3] = {{0, 0, c->first_layers},
                     {1, c->p > 2 ? 1 : 0, c->p > 2 ? c->mid_layers : c->first_layers},
                     {2, c->p - 1, c->p > 1 ? c->last_layers : c->first_layers}};
    const pf_blockcost_part_t *ps[3];
    double worst_dp = 0;
    for (int i = 0; i < 3; i++) {
        int r = nset == 3 ? stage_rc(pr, c, set, st[i], m, &ev->mem_bytes[i]) : 0;
        ps[i] = set[r];
        ev->recompute[i] = nset == 3 ? (pf_training_recompute_t)r : c->recompute;
        if (nset != 3)
            ev->mem_bytes[i] = stage_mem(pr, c, ps[i], st[i], m);
        ev->stage_ms[i] = stage_ms(pr, c, ps[i], st[i]);
        ev->stage_max_ms = fmax(ev->stage_max_ms, ev->stage_ms[i]);
        ev->mem_max_bytes = fmax(ev->mem_max_bytes, ev->mem_bytes[i]);
    }
    for (int i = 0; i < 3; i++) {
        double d[3];
        dp_costs(pr, c, ps[i], st[i], m, ev->stage_ms[i], d);
        if (d[0] + d[1] + d[2] >= worst_dp) {
            worst_dp = d[0] + d[1] + d[2];
            ev->dp_exposed_ms = d[0];
            ev->zero3_exposed_ms = d[1];
            ev->optimizer_ms = d[2];
        }
    }
    ev->pipeline_ms = (m + (c->p - 1.0) / c->v) * ev->stage_max_ms;
    ev->step_ms = ev->pipeline_ms + worst_dp;
    ev->fits = ev->mem_max_bytes <= pr->mem_bytes;
    return PF_OK;
}

int pf_blockcost_eval(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                      const pf_blockcost_part_t parts[3], pf_blockcost_eval_t *ev)
{
    return eval_core(pr, c, (const pf_blockcost_part_t(*)[3])parts, 1, ev);
}

int pf_blockcost_eval_auto(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                           const pf_blockcost_part_t set[3][3], pf_blockcost_eval_t *ev)
{
    return eval_core(pr, c, set, 3, ev);
}

void pf_blockcost_parts_all(const pf_blockcost_problem_t *pr, int t, int b, int sp,
                            pf_blockcost_part_t set[3][3])
{
    for (int r = PF_RECOMPUTE_NONE; r <= PF_RECOMPUTE_FULL; r++)
        pf_blockcost_parts(pr, t, b, sp, (pf_training_recompute_t)r, set[r]);
}

static int microbatches_of(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c)
{
    int64_t db = (int64_t)c->d * c->b;
    return db > 0 ? (int)(pr->global_batch / db) : 0;
}

double pf_blockcost_stage_mem_bytes(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                                    const pf_blockcost_part_t parts[3], int s, int layers)
{
    return stage_mem(pr, c, parts, (stage_t){1, s, layers}, microbatches_of(pr, c));
}

double pf_blockcost_stage_ms(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                             const pf_blockcost_part_t parts[3], int s, int layers)
{
    return stage_ms(pr, c, parts, (stage_t){1, s, layers});
}

pf_training_recompute_t pf_blockcost_stage_recompute(const pf_blockcost_cand_t *c, int s)
{
    if (!c->rc_auto)
        return c->recompute;
    if (s <= 0)
        return c->rc_first;
    if (s >= c->p - 1)
        return c->rc_last;
    return s <= c->rc_mid_full                          ? PF_RECOMPUTE_FULL
           : s <= c->rc_mid_full + c->rc_mid_selective ? PF_RECOMPUTE_SELECTIVE
                                                       : PF_RECOMPUTE_NONE;
}

/* Is (first, mid, last) better than the best so far: fitting first, then faster, then
 * smaller. */
static int better(const pf_blockcost_eval_t *a, const pf_blockcost_eval_t *best, int have)
{
    if (!have || a->fits != best->fits)
        return !have || a->fits;
    if (a->fits)
        return a->step_ms < best->step_ms * (1 - 1e-12);
    return a->mem_max_bytes < best->mem_max_bytes;
}

typedef struct {
    pf_blockcost_cand_t cand;
    pf_blockcost_eval_t ev;
    int have;
    double fastest_ms; /* the fastest counts, memory ignored */
} split_best_t;

/* Layer counts of the first and last stages for `mid` layers on each middle stage. */
static void try_mid(const pf_blockcost_problem_t *pr, pf_blockcost_cand_t *c,
                    const pf_blockcost_part_t set[][3], int nset, int L, int mid,
                    split_best_t *sb)
{
    int rest = L - (c->p - 2) * mid;
    int lo = c->p > 2 ? (rest - mid > 0 ? rest - mid : 0) : 0;
    int hi = c->p > 2 ? (rest < mid ? rest : mid) : rest;
    for (int x = lo; x <= hi; x++) {
        pf_blockcost_eval_t ev;
        c->first_layers = x;
        c->mid_layers = mid;
        c->last_layers = rest - x;
        if (eval_core(pr, c, set, nset, &ev) != PF_OK)
            continue;
        sb->fastest_ms = fmin(sb->fastest_ms, ev.step_ms);
        if (better(&ev, &sb->ev, sb->have)) {
            sb->ev = ev;
            sb->cand = *c;
            sb->have = 1;
        }
    }
}

static int split_core(const pf_blockcost_problem_t *pr, pf_blockcost_cand_t *c,
                      const pf_blockcost_part_t set[][3], int nset, pf_blockcost_eval_t *ev)
{
    int L = pf_blocks_count(pr->blocks), rc;
    if (c->v > 1 && pf_blockcost_interleave_split(L, c->p, c->v, &c->first_layers,
                                                  &c->mid_layers, &c->last_layers) < 0)
        return PF_EINPUT;
    if (c->p == 1 || c->v > 1) {
        if (c->v <= 1)
            c->first_layers = c->mid_layers = c->last_layers = L / c->p;
        rc = eval_core(pr, c, set, nset, ev);
        ev->unconstrained = 1;
        return rc;
    }
    split_best_t sb = {.cand = *c, .fastest_ms = DBL_MAX};
    /* set[0] is the lightest level: a bound on every stage's time per layer */
    double layer_ms = cand_part_ms(c, &set[0][1]);
    if (c->p == 2)
        try_mid(pr, c, set, nset, L, 0, &sb);
    else
        /* a middle stage of `mid` layers takes mid x layer_ms at least: past the best fitting
         * stage time, more layers in the middle cannot help */
        for (int mid = (L + c->p - 1) / c->p; mid > 0 && (c->p - 2) * mid <= L; mid++) {
            if (sb.have && sb.ev.fits && mid * layer_ms > sb.ev.stage_max_ms)
                break;
            try_mid(pr, c, set, nset, L, mid, &sb);
        }
    *c = sb.cand;
    *ev = sb.ev;
    ev->unconstrained = sb.have && ev->fits && ev->step_ms <= sb.fastest_ms * (1 + 1e-12);
    return sb.have ? PF_OK : PF_EINPUT;
}

int pf_blockcost_split(const pf_blockcost_problem_t *pr, pf_blockcost_cand_t *c,
                       const pf_blockcost_part_t parts[3], pf_blockcost_eval_t *ev)
{
    c->rc_auto = 0;
    return split_core(pr, c, (const pf_blockcost_part_t(*)[3])parts, 1, ev);
}

/* The middle stages' levels under auto: a middle stage holds fewer micro-batches in flight the
 * later it is, so its level never rises with s: count the full ones, then the selective. */
static void mid_levels(const pf_blockcost_problem_t *pr, pf_blockcost_cand_t *c,
                       const pf_blockcost_part_t set[3][3], int m)
{
    c->rc_mid_full = c->rc_mid_selective = 0;
    for (int s = 1; s < c->p - 1; s++) {
        double mem;
        int r = stage_rc(pr, c, set, (stage_t){1, s, c->mid_layers}, m, &mem);
        c->rc_mid_full += r == PF_RECOMPUTE_FULL;
        c->rc_mid_selective += r == PF_RECOMPUTE_SELECTIVE;
    }
}

int pf_blockcost_split_auto(const pf_blockcost_problem_t *pr, pf_blockcost_cand_t *c,
                            const pf_blockcost_part_t set[3][3], pf_blockcost_eval_t *ev)
{
    int rc = split_core(pr, c, set, 3, ev);
    c->rc_auto = 1;
    c->rc_first = ev->recompute[0];
    c->rc_last = ev->recompute[2];
    c->recompute = PF_RECOMPUTE_NONE;
    for (int i = 0; i < 3; i++)
        c->recompute = ev->recompute[i] > c->recompute ? ev->recompute[i] : c->recompute;
    if (rc == PF_OK)
        mid_levels(pr, c, set, ev->microbatches);
    return rc;
}
