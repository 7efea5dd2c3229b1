/* blockcpep: context and expert parallelism in the block-level search (blockcpep.h). */
#include "planner/partition/blockcpep.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pf_blockcpep_init(pf_blockcpep_t *x, const pf_cpep_facts_t *f, int b0, int C, int E,
                       const pf_cluster_t *c)
{
    memset(x, 0, sizeof *x);
    x->f = *f;
    x->b0 = b0 > 0 ? b0 : 1;
    x->C = C > 0 ? C : 1;
    x->E = E > 0 ? E : 1;
    x->cluster = c;
}

/* n devices first + i x stride (mod the cluster's) as a collective group; out of memory: n on
 * one host without links (infinite times, so the candidate loses). */
static void group_of(const pf_cluster_t *c, int n, int stride, pf_collective_group_t *g)
{
    int N = pf_cluster_ndevices(c), *devs = malloc(sizeof *devs * (size_t)(n > 0 ? n : 1));
    for (int i = 0; devs && i < n; i++)
        devs[i] = (int)(((long long)i * stride) % N);
    if (!devs || pf_collective_group_from_cluster(c, devs, n, 0, g) != PF_OK)
        *g = (pf_collective_group_t){.n = n, .hosts = 1, .per_host = n};
    free(devs);
}

/* The CP ring (C devices t apart) and the EP group (E devices t C apart) at t, cached. */
static int groups_at(pf_blockcpep_t *x, int t)
{
    for (int i = 0; i < x->ncache; i++)
        if (x->cache[i].t == t)
            return i;
    int i = x->ncache < PF_BLOCKCPEP_CACHE ? x->ncache++ : t % PF_BLOCKCPEP_CACHE;
    x->cache[i].t = t;
    group_of(x->cluster, x->C, t, &x->cache[i].ring);
    group_of(x->cluster, x->E, t * x->C, &x->cache[i].a2a);
    return i;
}

void pf_blockcpep_comm(pf_blockcpep_t *x, int t, int b, int sp, pf_blockcpep_comm_t *out)
{
    memset(out, 0, sizeof *out);
    int i = groups_at(x, t);
    double per_dev = (double)b / x->b0 / x->C; /* graph micro-batches of this device's tokens */
    /* K and V of the device's s / C tokens over its rank's kv heads (split by t) */
    double kv_local = x->f.attn_layers > 0 ? x->f.kv_bytes / x->f.attn_layers * per_dev / t : 0;
    out->ring_fwd_bytes = pf_cpep_ring_fwd_bytes(kv_local, x->C);
    /* a ring all-gather of the C chunks is the C - 1 steps of one chunk each */
    out->ring_fwd_ms = pf_collective_ms(&x->cache[i].ring, PF_COLL_ALLGATHER, x->C * kv_local,
                                        PF_COLL_ALGO_RING, NULL);
    if (x->E > 1 && x->f.moe_layers > 0) {
        out->a2a_bytes = x->f.a2a_bytes / x->f.moe_layers * per_dev / (sp && t > 1 ? t : 1);
        out->a2a_ms = pf_collective_best_ms(&x->cache[i].a2a, PF_COLL_ALLTOALL, out->a2a_bytes);
    }
}

/* The forward times at (t, b), whole sequences, of the part's attention GEMMs (scores and
 * context: weightless, split by heads) and of its core memory-bound ops (softmax, its dropout). */
static void attn_fwd_ms(const pf_blockcost_problem_t *pr, const pf_blocks_part_t *part, int t,
                        int b, double *gemm_ms, double *core_mem_ms)
{
    const pf_blockcost_env_t *env = pr->env;
    double scale = (double)b / pf_blocks_microbatch(pr->blocks);
    *gemm_ms = *core_mem_ms = 0;
    for (int i = 0; i < part->ngemms; i++) {
        const pf_blocks_gemm_t *g = &part->gemms[i];
        if (g->split != PF_BLOCKS_HEADS)
            continue;
        double batch = (double)g->batch * (g->samples_in_batch ? scale : 1) / t;
        double m = (double)g->m * (g->samples_in_batch ? 1 : scale);
        *gemm_ms += env->gemm_ms(env->ctx, (int64_t)fmax(1, m), g->n, g->k,
                                 (int64_t)fmax(1, batch));
    }
    for (int i = 0; i < part->nmem; i++)
        if (part->mem[i].core)
            *core_mem_ms += env->memory_ms(env->ctx, part->mem[i].bytes * scale / t);
}

/* A GEMM's forward and backward at `scale` graph micro-batches of s / C tokens, split by t, as
 * blockcost.c prices it at C = 1 (samples in the batch for attention, else in m); attention's
 * s / C queries are its m (each meets all s keys). */
static void gemm_at(const pf_blockcost_env_t *env, const pf_blocks_gemm_t *gm, double scale,
                    int C, int t, double *fwd, double *bwd)
{
    int64_t m = gm->m, n = gm->n, k = gm->k, batch = gm->batch;
    if (gm->samples_in_batch)
        batch = (int64_t)fmax(1, llround((double)batch * scale)),
        m = (int64_t)fmax(1, llround((double)m / C));
    else
        m = (int64_t)fmax(1, llround((double)m * scale / C));
    if (gm->split == PF_BLOCKS_COLUMN)
        n = n / t > 0 ? n / t : 1;
    else if (gm->split == PF_BLOCKS_ROW)
        k = k / t > 0 ? k / t : 1;
    else if (gm->split == PF_BLOCKS_HEADS)
        batch = batch / t > 0 ? batch / t : 1;
    *fwd = env->gemm_ms(env->ctx, m, n, k, batch);
    *bwd = env->gemm_ms(env->ctx, m, k, n, batch) + env->gemm_ms(env->ctx, k, n, m, batch);
}

/* What the GEMMs of s / C tokens cost beyond 1/C of those of s (a device model's efficiency at
 * the smaller shapes, as the per-device graph is re-priced: cpep.h), forward and backward. */
static void sub_gemms(const pf_blockcost_problem_t *pr, const pf_blocks_part_t *part, int t,
                      int b, int C, double *dfwd, double *dbwd)
{
    double scale = (double)b / pf_blocks_microbatch(pr->blocks);
    *dfwd = *dbwd = 0;
    for (int i = 0; i < part->ngemms; i++) {
        double f1, b1, f2, b2;
        gemm_at(pr->env, &part->gemms[i], scale, 1, t, &f1, &b1);
        gemm_at(pr->env, &part->gemms[i], scale, C, t, &f2, &b2);
        *dfwd += f2 - f1 / C;
        *dbwd += b2 - b1 / C;
    }
}

static void scale_part(pf_blockcost_part_t *out, double r)
{
    out->fwd_ms *= r, out->bwd_ms *= r, out->recompute_ms *= r;
    out->tp_fwd_ms *= r, out->tp_bwd_ms *= r;
    out->tp_gemm_fwd_ms *= r, out->tp_gemm_bwd_ms *= r;
    out->act_bytes *= r, out->reserve_bytes *= r, out->p2p_bytes *= r;
}

/* Ring attention is blockwise ([RingAttn]): no device holds the s/C x s probabilities, so the
 * core's stored bytes go, and the backward recomputes the scores and the softmax of each block
 * (as flash attention does; selective recomputation recomputes the softmax already). */
static void blockwise(const pf_blockcost_problem_t *pr, const pf_blocks_part_t *part, int t,
                      int b, pf_training_recompute_t rc, double gemm_ms, double core_mem_ms,
                      pf_blockcost_part_t *out)
{
    double core_bytes = part->act_core_bytes * b / pf_blocks_microbatch(pr->blocks) / t;
    if (rc == PF_RECOMPUTE_NONE)
        out->act_bytes = fmax(0, out->act_bytes - core_bytes);
    if (rc == PF_RECOMPUTE_FULL)
        out->reserve_bytes = fmax(0, out->reserve_bytes - core_bytes);
    out->recompute_ms += gemm_ms / 2 + (rc != PF_RECOMPUTE_SELECTIVE ? core_mem_ms : 0);
}

void pf_blockcpep_part(const pf_blockcost_problem_t *pr, const pf_blocks_part_t *part, int t,
                       int b, int sp, pf_training_recompute_t rc, pf_blockcost_part_t *out)
{
    pf_blockcpep_t *x = pr->cpep;
    double gemm_ms = 0, core_mem_ms = 0;
    if (x->C > 1) {
        double dfwd, dbwd;
        attn_fwd_ms(pr, part, t, b, &gemm_ms, &core_mem_ms);
        blockwise(pr, part, t, b, rc, gemm_ms, core_mem_ms, out);
        scale_part(out, 1.0 / x->C);
        sub_gemms(pr, part, t, b, x->C, &dfwd, &dbwd);
        out->fwd_ms += dfwd, out->bwd_ms += dbwd;
        if (rc == PF_RECOMPUTE_FULL) /* it recomputes the forward */
            out->recompute_ms += dfwd;
    }
    if (part != pf_blocks_block(pr->blocks))
        return;
    pf_blockcpep_comm_t cm;
    pf_blockcpep_comm(x, t, b, sp, &cm);
    int layers = x->f.attn_layers, moe = x->E > 1 ? x->f.moe_layers : 0;
    /* the ring overlaps the attention GEMMs of its pass; backward computes twice the forward */
    double core = layers > 0 ? gemm_ms / x->C / layers : 0;
    double ring_f = fmax(0, cm.ring_fwd_ms - core), ring_b = fmax(0, 2 * cm.ring_fwd_ms - 2 * core);
    out->tp_fwd_ms += layers * ring_f + moe * 2 * cm.a2a_ms;
    out->tp_bwd_ms += layers * ring_b + moe * 2 * cm.a2a_ms;
    if (rc != PF_RECOMPUTE_NONE)
        out->recompute_ms += layers * ring_f;
    if (rc == PF_RECOMPUTE_FULL)
        out->recompute_ms += moe * 2 * cm.a2a_ms;
    if (x->E > 1)
        out->param_bytes -= x->f.expert_param_bytes / t * (1 - 1.0 / x->E);
}

int pf_blockcpep_check(const pf_blockcpep_t *x, const pf_blockcost_cand_t *c)
{
    if (c->d % x->C || (c->d / x->C) % x->E)
        return PF_EINPUT;
    if (x->E > 1 && c->t > 1 && !c->sp)
        return PF_EINPUT;
    return PF_OK;
}

/* ---- the search over (C, E) ---- */

typedef struct {
    const pf_blockcost_problem_t *pr;
    const pf_cpep_facts_t *f;
    const pf_cluster_t *c;
    const pf_blockenum_fix_t *fix;
    int b0, k, prune;
    pf_blockenum_item_t *out, *tmp;
    int n, found;
    pf_blockenum_stats_t st;
} run_t;

double pf_blockcpep_rank_ms(const pf_blockenum_item_t *it)
{
    return it->eval.step_ms * (it->cand.cp > 1 || it->cand.ep > 1 ? 1 + PF_BLOCKCPEP_MARGIN : 1);
}

/* Merge the best of one (C, E) into the best k by rank, ties to the earlier (C, E). */
static void merge(run_t *r, const pf_blockenum_item_t *it, int C, int E)
{
    pf_blockenum_item_t x = *it;
    x.cand.cp = C, x.cand.ep = E, x.cand.d /= C;
    if (r->n == r->k && pf_blockcpep_rank_ms(&x) >= pf_blockcpep_rank_ms(&r->out[r->k - 1]))
        return;
    int i = r->n < r->k ? r->n++ : r->k - 1;
    while (i > 0 && pf_blockcpep_rank_ms(&r->out[i - 1]) > pf_blockcpep_rank_ms(&x)) {
        r->out[i] = r->out[i - 1];
        i--;
    }
    r->out[i] = x;
}

static int one(run_t *r, int C, int E, char *err, size_t errlen)
{
    pf_blockcpep_t x;
    pf_blockcpep_init(&x, r->f, r->b0, C, E, r->c);
    pf_blockcost_problem_t pr = *r->pr;
    pr.global_batch *= C;
    if (C > 1 || E > 1)
        pr.cpep = &x, pr.cpep_part = pf_blockcpep_part, pr.cpep_check = pf_blockcpep_check;
    /* merge takes only what ranks below the pool's k-th; the cap is loosened by far more than
     * the rounding of the division, so no candidate merge would take is pruned */
    if (r->prune && r->n == r->k)
        pr.step_cap_ms = pf_blockcpep_rank_ms(&r->out[r->k - 1]) /
                         (C > 1 || E > 1 ? 1 + PF_BLOCKCPEP_MARGIN : 1) * (1 + 1e-9);
    pf_blockenum_stats_t st = {0, 0};
    int n = 0, rc = pf_blockenum_run(&pr, r->fix, r->k, r->prune, r->tmp, &n, &st, err, errlen);
    r->st.evaluated += st.evaluated, r->st.skipped += st.skipped;
    for (int i = 0; rc == PF_OK && i < n; i++)
        merge(r, &r->tmp[i], C, E);
    r->found |= rc == PF_OK && n > 0;
    if (rc != PF_OK && (C > 1 || E > 1)) { /* its batch counts sub-sequences: say so */
        char pre[96];
        snprintf(pre, sizeof pre, "context parallelism %d (batch x %d), expert parallelism %d",
                 C, C, E);
        pf_err_prefix(err, errlen, pre);
    }
    return rc;
}

/* The result of every (C, E): found, or the first (C = E = 1) failure's reason, else the last's. */
static int outcome(int found, int first_rc, const char *first_err, int rc, char *err,
                   size_t errlen)
{
    if (found) {
        if (err && errlen) /* a (C, E) that found none under the cap wrote its reason */
            err[0] = '\0';
        return PF_OK;
    }
    if (first_rc != PF_OK && first_err[0])
        return pf_fail(err, errlen, first_rc, "%s", first_err);
    if (rc != PF_OK) /* the last (C, E)'s reason is in err */
        return rc;
    return pf_fail(err, errlen, PF_EINFEASIBLE, "blocks: no configuration fits");
}

int pf_blockcpep_run(const pf_blockcost_problem_t *pr, const pf_cpep_facts_t *f, int b0,
                     const pf_cluster_t *c, const pf_blockenum_fix_t *fix, int fix_cp, int fix_ep,
                     int k, int prune, pf_blockenum_item_t *out, int *nout,
                     pf_blockenum_stats_t *stats, char *err, size_t errlen)
{
    run_t r = {.pr = pr, .f = f, .c = c, .fix = fix, .b0 = b0, .k = k, .prune = prune,
               .out = out};
    int N = pr->ngpus, rc = PF_OK, first_rc = PF_EINPUT;
    char first_err[256] = "";
    *nout = 0;
    if (err && errlen) /* a (C, E) that succeeds writes none: first_err copies it */
        err[0] = '\0';
    if (fix_cp > 1 && !pf_cpep_cp_ok(f->seq, fix_cp))
        return pf_fail(err, errlen, PF_EINPUT, "context parallelism %d: the sequence (%lld "
                       "tokens; 0: no attention found) does not divide by 2 x %d", fix_cp,
                       (long long)f->seq, fix_cp);
    if (fix_ep > 1 && !pf_cpep_ep_ok(f, fix_ep))
        return pf_fail(err, errlen, PF_EINPUT, "expert parallelism %d: the graph's %d experts "
                       "per MoE layer do not divide by %d", fix_ep, f->experts, fix_ep);
    if (k < 1 || !(r.tmp = malloc(sizeof *r.tmp * (size_t)k)))
        return pf_fail(err, errlen, k < 1 ? PF_EINPUT : PF_ERR, k < 1 ? "blocks: k must be "
                       "positive" : "out of memory");
    for (int C = 1; C <= N; C++) {
        if (N % C || !pf_cpep_cp_ok(f->seq, C) || (fix_cp > 0 && C != fix_cp))
            continue;
        for (int E = 1; E <= N / C; E++) {
            if ((N / C) % E || !pf_cpep_ep_ok(f, E) || (fix_ep > 0 && E != fix_ep))
                continue;
            rc = one(&r, C, E, err, errlen);
            if (C == 1 && E == 1)
                first_rc = rc, snprintf(first_err, sizeof first_err, "%s", err ? err : "");
            if (rc == PF_ERR)
                break;
        }
    }
    free(r.tmp);
    if (stats)
        *stats = r.st;
    *nout = r.n;
    return outcome(r.found, first_rc, first_err, rc, err, errlen);
}

void pf_blockcpep_describe(const pf_blockcost_cand_t *c, char *buf, size_t len)
{
    pf_blockenum_describe(c, buf, len);
    size_t n = strlen(buf);
    if (c->cp > 1 && n < len)
        n += (size_t)snprintf(buf + n, len - n, " cp %d", c->cp);
    if (c->ep > 1 && n < len)
        snprintf(buf + n, len - n, " ep %d", c->ep);
}
