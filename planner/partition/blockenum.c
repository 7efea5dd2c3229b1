/* blockenum: the candidate space with pruning, the best K (blockenum.h). */
#include "planner/partition/blockenum.h"
#include "planner/core/util.h"

#include <float.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define MAX_V 64

typedef struct {
    const pf_blockcost_problem_t *pr;
    const pf_blockenum_fix_t *fix;
    int k, prune, n, L;
    pf_blockenum_item_t *out;
    pf_blockenum_stats_t st;
} run_t;

void pf_blockenum_fix_init(pf_blockenum_fix_t *f)
{
    memset(f, 0, sizeof *f);
    f->sp = f->zero = f->recompute = f->tpo = -1;
}

static double kth_ms(const run_t *r)
{
    double kth = r->n < r->k ? DBL_MAX : r->out[r->k - 1].eval.step_ms, cap = r->pr->step_cap_ms;
    return cap > 0 && cap < kth ? cap : kth;
}

/* Insert into the sorted best k; an equal step keeps the one found first. */
static void keep(run_t *r, const pf_blockcost_cand_t *c, const pf_blockcost_eval_t *ev)
{
    if (ev->step_ms >= kth_ms(r))
        return;
    int i = r->n < r->k ? r->n++ : r->k - 1;
    while (i > 0 && r->out[i - 1].eval.step_ms > ev->step_ms) {
        r->out[i] = r->out[i - 1];
        i--;
    }
    r->out[i].cand = *c;
    r->out[i].eval = *ev;
}

/* The first split dimension of the block t does not divide (Megatron-LM needs heads and widths
 * divisible), into *what ("heads", "width"); 0 when t splits them all. */
static int64_t undivided(const pf_blocks_t *b, int t, const char **what)
{
    const pf_blocks_part_t *blk = pf_blocks_block(b);
    int mb = pf_blocks_microbatch(b);
    for (int i = 0; i < blk->ngemms; i++) {
        const pf_blocks_gemm_t *g = &blk->gemms[i];
        int64_t heads = g->samples_in_batch && g->batch % mb == 0 ? g->batch / mb : g->batch;
        int64_t dim = g->split == PF_BLOCKS_COLUMN ? g->n
                      : g->split == PF_BLOCKS_ROW  ? g->k
                      : g->split == PF_BLOCKS_HEADS ? heads
                                                    : 0;
        *what = g->split == PF_BLOCKS_HEADS ? "attention heads" : "width";
        if (dim > 0 && dim % t)
            return dim;
    }
    return 0;
}

static int valid_t(const pf_blocks_t *b, int t)
{
    const char *what;
    return undivided(b, t, &what) == 0;
}

/* Why the degrees the request fixed leave nothing to search (the user asked for them: say which
 * fails, not that nothing fits); PF_OK when they leave candidates to try. */
static int fixed_dims_fail(const pf_blockcost_problem_t *pr, const pf_blockenum_fix_t *fix,
                           int L, char *err, size_t errlen)
{
    int N = pr->ngpus, host = pr->gpus_per_host > 0 ? pr->gpus_per_host : 1, t = fix->t;
    const char *what;
    int64_t dim;
    if (t > 0 && host % t)
        return pf_fail(err, errlen, PF_EINFEASIBLE, "blocks: --tp %d does not divide the %d GPUs "
                       "of a host (the block search keeps a tensor-parallel group in one host)",
                       t, host);
    if (t > 0 && N % t)
        return pf_fail(err, errlen, PF_EINFEASIBLE, "blocks: --tp %d does not divide the %d GPUs",
                       t, N);
    if (t > 0 && (dim = undivided(pr->blocks, t, &what)) != 0)
        return pf_fail(err, errlen, PF_EINFEASIBLE, "blocks: --tp %d does not divide the block's "
                       "%lld %s (Megatron-LM splits them evenly)", t, (long long)dim, what);
    if (fix->p > 0 && (fix->p > L || (t > 0 && (N / t) % fix->p)))
        return pf_fail(err, errlen, PF_EINFEASIBLE, "blocks: --stages %d: %s", fix->p,
                       fix->p > L ? "more stages than blocks" : "does not divide GPUs / --tp");
    return PF_OK;
}

static int fixed_ok(int fixed, int value, int unset) { return fixed == unset || fixed == value; }

/* The virtual-stage counts of (p, m): those pf_blockcost_v_ok allows. */
static int v_values(const run_t *r, int p, int m, int *vs)
{
    int n = 0;
    for (int v = 1; v <= r->L && n < MAX_V; v++)
        if (pf_blockcost_v_ok(r->L, p, v, m) && fixed_ok(r->fix->v, v, 0))
            vs[n++] = v;
    return n;
}

/* Can any candidate of this b fit: the least memory (each stage at the recomputation of least
 * memory, sequence parallelism when t > 1, v = 1, the highest ZeRO searched). */
static int may_fit(const run_t *r, pf_blockcost_cand_t c, int zmax)
{
    pf_blockcost_part_t parts[3];
    pf_blockcost_eval_t ev;
    pf_blockcost_part_t set[3][3];
    c.sp = c.t > 1 && r->fix->sp != 0;
    c.zero = zmax;
    c.v = 1;
    int rc;
    if (r->fix->recompute < 0) { /* auto: every stage at its least memory */
        pf_blockcost_parts_all(r->pr, c.t, c.b, c.sp, set);
        rc = pf_blockcost_split_auto(r->pr, &c, set, &ev);
    } else {
        c.recompute = (pf_training_recompute_t)r->fix->recompute;
        pf_blockcost_parts(r->pr, c.t, c.b, c.sp, c.recompute, parts);
        rc = pf_blockcost_split(r->pr, &c, parts, &ev);
    }
    return rc != PF_OK || ev.fits ||
           (r->fix->v > 1); /* a fixed v is not bounded by v = 1 */
}

/* A lower bound on the step of every candidate of (t, p, d, b) whose virtual stages are at most
 * v_max: the step is (m + (p - 1) / v) x the slowest stage (blockcost.h), which holds at least
 * the average stage's L / p layers, each no faster than without recomputation. The bubble term
 * is what rules out a micro-batch so large that the pipeline cannot fill. */
static double step_lower_bound(const run_t *r, const pf_blockcost_cand_t *c, int m, int v_max)
{
    pf_blockcost_part_t x;
    pf_blockcost_part(r->pr, pf_blocks_block(r->pr->blocks), c->t, c->b, c->t > 1, PF_RECOMPUTE_NONE,
                      &x);
    return (m + (double)(c->p - 1) / (v_max > 0 ? v_max : 1)) * ((double)r->L / c->p) *
           (x.fwd_ms + x.bwd_ms);
}

/* Every (v, ZeRO) of one (sp, recompute); dom[v][zero] marks the pairs a lighter recomputation
 * already won. */
static void each_rc(run_t *r, pf_blockcost_cand_t c, const int *vs, int nv, const int *zs, int nz,
                    char dom[MAX_V][4])
{
    pf_blockcost_part_t parts[3];
    pf_blockcost_parts(r->pr, c.t, c.b, c.sp, c.recompute, parts);
    for (int i = 0; i < nv; i++)
        for (int j = 0; j < nz; j++) {
            if (r->prune && dom[i][zs[j]]) {
                r->st.skipped++;
                continue;
            }
            pf_blockcost_eval_t ev;
            c.v = vs[i];
            c.zero = zs[j];
            r->st.evaluated++;
            if (pf_blockcost_split(r->pr, &c, parts, &ev) != PF_OK || !ev.fits)
                continue;
            keep(r, &c, &ev);
            if (ev.unconstrained)
                dom[i][zs[j]] = 1;
        }
}

/* --recompute auto: every (v, ZeRO) of (sp, tpo), each stage at the lightest recomputation
 * that fits it (blockcost.h): one candidate per (v, ZeRO) where a fixed level gives three. */
static void each_auto(run_t *r, pf_blockcost_cand_t c, const int *vs, int nv, const int *zs,
                      int nz)
{
    pf_blockcost_part_t set[3][3];
    pf_blockcost_parts_all(r->pr, c.t, c.b, c.sp, set);
    for (int i = 0; i < nv; i++)
        for (int j = 0; j < nz; j++) {
            pf_blockcost_eval_t ev;
            c.v = vs[i];
            c.zero = zs[j];
            r->st.evaluated++;
            if (pf_blockcost_split_auto(r->pr, &c, set, &ev) == PF_OK && ev.fits)
                keep(r, &c, &ev);
        }
}

/* Every recomputation level of (sp, tpo). */
static void each_recompute(run_t *r, pf_blockcost_cand_t c, const int *vs, int nv, const int *zs,
                           int nz)
{
    char dom[MAX_V][4];
    if (r->fix->recompute < 0) {
        each_auto(r, c, vs, nv, zs, nz);
        return;
    }
    memset(dom, 0, sizeof dom);
    for (int rc = PF_RECOMPUTE_NONE; rc <= PF_RECOMPUTE_FULL; rc++) {
        if (!fixed_ok(r->fix->recompute, rc, -1))
            continue;
        c.recompute = (pf_training_recompute_t)rc;
        each_rc(r, c, vs, nv, zs, nz, dom);
    }
}

/* Is c's tensor-parallel overlap one to evaluate: as fixed, and without it (under sequence
 * parallelism, searched) only without pruning: overlap never adds time nor memory. */
static int tpo_ok(run_t *r, const pf_blockcost_cand_t *c, int n)
{
    if (!fixed_ok(r->fix->tpo, c->tpo, -1) && c->sp)
        return 0;
    if (!c->sp && c->tpo)
        return 0;
    if (r->prune && c->sp && !c->tpo && r->fix->tpo < 0) {
        r->st.skipped += 3L * n;
        return 0;
    }
    return 1;
}

/* Every candidate of (t, p, d, b); 0 when no candidate of this b or a larger one can fit. */
static int each_b(run_t *r, pf_blockcost_cand_t c, const int *zs, int nz)
{
    int m = (int)(r->pr->global_batch / ((int64_t)c.d * c.b)), vs[MAX_V];
    int nv = v_values(r, c.p, m, vs);
    if (r->prune && !may_fit(r, c, zs[nz - 1]))
        return 0;
    if (r->prune && step_lower_bound(r, &c, m, nv > 0 ? vs[nv - 1] : 1) >= kth_ms(r)) {
        r->st.skipped += (long)nv * nz;
        return 1;
    }
    for (int sp = 0; sp <= (c.t > 1); sp++) {
        if (!fixed_ok(r->fix->sp, sp, -1))
            continue;
        for (int tpo = sp; tpo >= 0; tpo--) {
            c.sp = sp;
            c.tpo = tpo;
            if (tpo_ok(r, &c, nv * nz))
                each_recompute(r, c, vs, nv, zs, nz);
        }
    }
    return 1;
}

/* The ZeRO stages of (t, p, d) whose parameter state on an average stage fits. */
static int zero_values(const run_t *r, int t, int p, int d, int *zs)
{
    pf_blockcost_part_t parts[3];
    pf_blockcost_parts(r->pr, t, 1, 0, PF_RECOMPUTE_NONE, parts);
    double avg = (r->L * parts[1].param_bytes + parts[0].param_bytes + parts[2].param_bytes) / p;
    int n = 0;
    for (int z = 0; z <= (d == 1 ? 0 : p > 1 ? 1 : 3); z++) {
        if (!fixed_ok(r->fix->zero, z, -1))
            continue;
        pf_training_t tr = r->pr->training;
        tr.zero = z;
        if (r->prune && avg * pf_training_state_factor(&tr, d) > r->pr->mem_bytes)
            continue;
        zs[n++] = z;
    }
    return n;
}

static int64_t isqrt(int64_t n)
{
    int64_t x = (int64_t)sqrt((double)n);
    while (x > 0 && x > n / x)
        x--;
    while (x + 1 <= n / (x + 1))
        x++;
    return x;
}

/* The smallest divisor of n above b, 0 when there is none: the divisors up to sqrt(n) in turn,
 * then n / j for j coming down from sqrt(n), so walking all of them costs O(sqrt(n)) (a replica's
 * share of a 2^40 batch: 2^21 steps), not O(n). */
static int64_t next_divisor(int64_t n, int64_t b)
{
    for (int64_t i = b + 1; i <= n / i; i++)
        if (n % i == 0)
            return i;
    int64_t j = (n - 1) / b, root = isqrt(n);
    for (j = j < root ? j : root; j >= 1; j--)
        if (n % j == 0 && n / j > b)
            return n / j;
    return 0;
}

static void each_p(run_t *r, int t, int p)
{
    int d = r->pr->ngpus / (t * p), zs[4];
    int64_t replica = r->pr->global_batch / d;
    if (r->pr->global_batch % d)
        return;
    int nz = zero_values(r, t, p, d, zs);
    if (!nz)
        return;
    if (r->fix->b > 0) { /* fixed: it divides a replica's share or nothing fits */
        if (replica % r->fix->b == 0 && replica / r->fix->b <= PF_BLOCKCOST_MAX_MICROBATCHES)
            each_b(r, (pf_blockcost_cand_t){.t = t, .p = p, .d = d, .b = r->fix->b, .v = 1}, zs,
                   nz);
        return;
    }
    for (int64_t b = 1; b > 0 && b <= INT_MAX; b = next_divisor(replica, b)) {
        if (replica / b > PF_BLOCKCOST_MAX_MICROBATCHES)
            continue; /* more micro-batches than the later phases plan */
        pf_blockcost_cand_t c = {.t = t, .p = p, .d = d, .b = (int)b, .v = 1};
        if (!each_b(r, c, zs, nz))
            break;
    }
}

int pf_blockenum_run(const pf_blockcost_problem_t *pr, const pf_blockenum_fix_t *fix, int k,
                     int prune, pf_blockenum_item_t *out, int *nout, pf_blockenum_stats_t *stats,
                     char *err, size_t errlen)
{
    run_t r = {.pr = pr, .fix = fix, .k = k, .prune = prune, .out = out,
               .L = pf_blocks_count(pr->blocks)};
    int N = pr->ngpus, host = pr->gpus_per_host > 0 ? pr->gpus_per_host : 1;
    *nout = 0;
    if (k < 1 || N < 1 || pr->global_batch < 1)
        return pf_fail(err, errlen, PF_EINPUT, "blocks: k, GPUs and global batch must be positive");
    if (fixed_dims_fail(pr, fix, r.L, err, errlen) != PF_OK)
        return PF_EINFEASIBLE;
    for (int t = 1; t <= host && t <= N; t++) {
        if (host % t || N % t || !fixed_ok(fix->t, t, 0) || !valid_t(pr->blocks, t))
            continue;
        for (int p = 1; p <= r.L && p <= N / t; p++)
            if ((N / t) % p == 0 && fixed_ok(fix->p, p, 0))
                each_p(&r, t, p);
    }
    if (stats)
        *stats = r.st;
    *nout = r.n;
    if (!r.n)
        return pf_fail(err, errlen, PF_EINFEASIBLE,
                       "blocks: no configuration of the %d blocks on %d GPUs at global batch %lld "
                       "fits %.1f GB per device",
                       r.L, N, (long long)pr->global_batch, pr->mem_bytes / 1e9);
    return PF_OK;
}

static pf_training_recompute_t cand_level(const void *c, int s)
{
    return pf_blockcost_stage_recompute(c, s);
}

void pf_blockenum_recompute_describe(const pf_blockcost_cand_t *c, char *buf, size_t len)
{
    pf_training_recompute_runs(c->p, cand_level, c, buf, len);
}

void pf_blockenum_describe(const pf_blockcost_cand_t *c, char *buf, size_t len)
{
    char rc[96];
    pf_blockenum_recompute_describe(c, rc, sizeof rc);
    snprintf(buf, len, "t %d p %d d %d b %d v %d %s%s%s zero %d layers %d/%d/%d", c->t, c->p,
             c->d, c->b, c->v, rc, c->sp ? " sp" : "",
             c->tpo ? " tpo" : "", c->zero,
             c->first_layers, c->p > 2 ? c->mid_layers : 0, c->p > 1 ? c->last_layers : 0);
}
