/* search_blocks: the block-level pre-phase (search_blocks.h). */
#include "planner/search/search_blocks.h"
#include "planner/core/util.h"
#include "planner/ir/cost.h"
#include "planner/partition/blockcpep.h"
#include "planner/sim/stage_rc.h"
#include "planner/tp/tp_price.h"

#include <stdlib.h>
#include <string.h>

/* The first of the block search's own dimensions the request gives, or NULL. */
static const char *own_dimension(const pf_search_opts_t *o)
{
    return o->sequence_parallel >= 0 ? "sequence_parallel"
         : o->virtual_stages > 0     ? "virtual_stages"
         : o->microbatch_size > 0    ? "microbatch_size"
         : o->context_parallel > 0   ? "context_parallel"
         : o->expert_parallel > 0    ? "expert_parallel"
                                     : NULL;
}

int pf_search_blocks_asked(const pf_search_opts_t *o)
{
    return o->block_search > 0 || own_dimension(o) != NULL;
}

int pf_search_blocks_check(const pf_search_opts_t *o, char *err, size_t errlen)
{
    const char *field = own_dimension(o);
    if (o->block_search != 0 || !field)
        return PF_OK;
    return pf_fail(err, errlen, PF_EINPUT, "%s: a dimension of the block search, which "
                   "--no-block-search (block_search 0) turns off", field);
}

int pf_search_blocks_wanted(const pf_search_opts_t *o)
{
    return pf_search_blocks_asked(o) || (o->block_search < 0 && o->global_batch > 0);
}

/* The prices of the analytic model (search_blocks.h): the device model the graph was priced on
 * (carried, else the preset it names: graph.h) with the collective model, else the roofline. */
typedef struct {
    pf_blockcost_roofline_t roof;
    pf_blockcost_priced_t priced;
} env_state_t;

static void block_env(const pf_graph_t *g, const pf_cluster_t *c, const pf_training_t *t,
                      env_state_t *st, pf_blockcost_env_t *env)
{
    const pf_devmodel_t *dm = pf_tp_price_model(g);
    if (dm)
        pf_blockcost_priced_init(&st->priced, c, dm, t->precision_bytes, env);
    else
        pf_blockcost_roofline_init(&st->roof, c, env);
}

/* The request's fixed dimensions: the micro-batch is --microbatch-size, else the graph's (the
 * block costs scale to it: blockcost.h; the later phases plan the graph re-priced at it). */
static int fixed_dims(const pf_graph_t *g, const pf_search_opts_t *o, pf_blockenum_fix_t *f,
                      char *err, size_t errlen)
{
    int mb = pf_graph_microbatch(g);
    if (o->microbatch_size < 0)
        return pf_fail(err, errlen, PF_EINPUT, "microbatch_size: %d is not >= 1",
                       o->microbatch_size);
    pf_blockenum_fix_init(f);
    f->t = o->tp;
    f->p = o->stages;
    /* searched where the graph can be re-priced at another micro-batch (its device model);
     * a profile's costs hold at its own only */
    f->b = o->microbatch_size > 0 ? o->microbatch_size : pf_tp_price_model(g) ? 0 : mb;
    f->v = o->virtual_stages;
    f->sp = o->sequence_parallel;
    f->zero = o->zero_auto ? -1 : o->train.zero;
    f->recompute = o->recompute_auto ? -1 : (int)o->train.recompute;
    return PF_OK;
}

static int gpus_per_host(const pf_cluster_t *c)
{
    int n = 0;
    for (int i = 0; i < pf_cluster_ndevices(c); i++)
        n += pf_cluster_device(c, i)->host == pf_cluster_device(c, 0)->host;
    return n;
}


/* Do two candidates train alike: recomputation, ZeRO, sequence parallelism and its overlap, the
 * micro-batch, context and expert parallelism? */
static int same_training(const pf_blockcost_cand_t *a, const pf_blockcost_cand_t *b)
{
    return a->recompute == b->recompute && a->zero == b->zero && a->b == b->b &&
           a->sp == b->sp && a->cp == b->cp && a->ep == b->ep && a->tpo == b->tpo;
}

/* The candidate (index in best) whose training degree t takes in the pairs handed on, or -1
 * for a degree not among them yet. */
static int training_of(const pf_search_blocks_t *choice, int t)
{
    for (int j = 0; j < choice->ntrains; j++)
        if (choice->best[choice->train_of[j]].cand.t == t)
            return choice->train_of[j];
    return -1;
}

/* May candidate i join the pairs handed on? Its graph must be the first's (micro-batch, context
 * and expert parallelism: the later phases plan one graph), and it must train as its degree's
 * candidate does (one tensor-parallel setting per degree), or be the first of a new degree
 * while there is room for one. */
static int may_join(const pf_search_blocks_t *choice, int i)
{
    const pf_blockcost_cand_t *c = &choice->best[i].cand, *best = &choice->best[0].cand;
    if (c->b != best->b || c->cp != best->cp || c->ep != best->ep)
        return 0;
    int own = training_of(choice, c->t);
    return own >= 0 ? same_training(c, &choice->best[own].cand)
                    : choice->ntrains < PF_SEARCH_BLOCKS_K;
}

/* T's training for the later phases (search_opts.h's block_trains), from its candidate. */
static void hand_on_training(const pf_search_blocks_t *choice, pf_search_opts_t *o)
{
    o->nblock_trains = 0;
    for (int j = 0; j < choice->ntrains; j++) {
        const pf_blockcost_cand_t *c = &choice->best[choice->train_of[j]].cand;
        o->block_trains[j].tp = c->t;
        o->block_trains[j].recompute = c->recompute;
        o->block_trains[j].zero = c->zero;
        o->block_trains[j].sequence_parallel = c->sp;
        o->nblock_trains++;
    }
}

/* The later phases try the (S, T) of the k best ranked candidates with distinct pairs, and the
 * simulator picks; one pair fixes S, R and T outright. Each tensor-parallel degree trains as
 * its best-ranked candidate does (recomputation, ZeRO, sequence parallelism and its overlap:
 * the analytic model ranks t 1 with selective recomputation and t 2 with sequence parallelism
 * and none within a percent of each other, where the simulator tells them apart); the
 * micro-batch the graph is re-priced at, context and expert parallelism are the first's for
 * the whole search. The pool is PF_SEARCH_BLOCKS_POOL deep: its head often holds one pair
 * under several v or recomputations, which would leave the simulator fewer pairs than asked
 * for. They model sequence parallelism (planner/tp/seqpar.h) and interleaving
 * (planner/sim/chunks.h), so every candidate can be handed on. */
static void apply(pf_search_blocks_t *choice, pf_search_opts_t *o, int k)
{
    const pf_blockcost_cand_t *best = &choice->best[0].cand;
    int n = 0, same_p = 1, same_t = 1;
    choice->ntrains = 0;
    for (int i = 0; i < choice->n && n < k; i++) {
        const pf_blockcost_cand_t *c = &choice->best[i].cand;
        int dup = 0;
        for (int j = 0; j < n && !dup; j++)
            dup = o->block_pairs[j][0] == c->p && o->block_pairs[j][1] == c->t;
        if (dup || !may_join(choice, i))
            continue;
        if (training_of(choice, c->t) < 0)
            choice->train_of[choice->ntrains++] = i;
        choice->pair_of[n] = i;
        o->block_pairs[n][0] = c->p, o->block_pairs[n][1] = c->t, n++;
        same_p &= c->p == best->p, same_t &= c->t == best->t;
        o->max_stages = c->p > o->max_stages ? c->p : o->max_stages;
        o->max_tp = c->t > o->max_tp ? c->t : o->max_tp;
    }
    choice->npairs = n;
    o->nblock_pairs = n > 1 ? n : 0;
    o->stages = same_p ? best->p : 0;
    o->tp = same_t ? best->t : 0;
    /* context parallelism: the later phases plan C sub-sequences per sequence on d x C
     * replicas (blockcpep.h; the graph is cpep.h's) */
    int C = best->cp > 1 ? best->cp : 1;
    o->replicas = n == 1 ? best->d * C : 0;
    o->global_batch *= C;
    o->candidates = n > o->candidates ? n : o->candidates;
    o->train.recompute = best->recompute;
    o->train.zero = best->zero;
    o->train.sequence_parallel = best->sp;
    hand_on_training(choice, o);
    choice->layer_aligned_asked = o->layer_aligned;
    o->layer_aligned = 1;
    o->recompute_auto = o->zero_auto = 0;
}

/* What context and expert parallelism need to know of the blocks: the first block's facts. */
static void block_facts(const pf_graph_t *g, const pf_blocks_t *b, pf_cpep_facts_t *f)
{
    int nops;
    const int *ops = pf_blocks_instance(b, 0, &nops);
    pf_cpep_facts(g, ops, ops ? nops : 0, f);
}

/* The later phases plan one micro-batch, the leader's (apply): a candidate at the graph's own
 * micro-batch ranked within PF_SEARCH_BLOCKS_B_MARGIN of a leader at another leads instead, so a
 * re-pricing that the analytic model finds no real gain in does not shut the graph's own
 * candidates out of the simulator (on the first H100 table, Megatron-LM 76B on 1,024 A100:
 * micro-batch 14 ranked 0.1% ahead of micro-batch 1 and simulated 0.9% behind it; on the soaked
 * one, the 145.6B row on 1,536: micro-batch 3 0.96% ahead, test_search_blocks). */
static bool at_graph_microbatch(const pf_blockcost_cand_t *c, int b0)
{
    return c->b == b0 && c->cp <= 1; /* under context parallelism b counts sub-sequences */
}

static void graph_microbatch_leads(const pf_graph_t *g, pf_search_blocks_t *choice)
{
    const pf_blockenum_item_t *lead = &choice->best[0];
    int b0 = pf_graph_microbatch(g), i = 0;
    if (choice->n == 0 || lead->cand.cp > 1 || lead->cand.ep > 1 ||
        at_graph_microbatch(&lead->cand, b0))
        return; /* a CP or EP leader ranked past its margin already (blockcpep.h) */
    while (i < choice->n && !at_graph_microbatch(&choice->best[i].cand, b0))
        i++;
    if (i == choice->n ||
        choice->best[i].eval.step_ms > lead->eval.step_ms * (1 + PF_SEARCH_BLOCKS_B_MARGIN))
        return;
    pf_blockenum_item_t own = choice->best[i];
    memmove(&choice->best[1], &choice->best[0], (size_t)i * sizeof *choice->best);
    choice->best[0] = own;
}

/* Every (C, E) too (blockcpep.h), on the facts of the first block. */
static int rank(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                const pf_blockcost_problem_t *pr, const pf_blockenum_fix_t *fix, int k,
                pf_search_blocks_t *choice, char *err, size_t errlen)
{
    double t0 = pf_now_s();
    pf_cpep_facts_t f;
    block_facts(g, pr->blocks, &f);
    int rc = pf_blockcpep_run(pr, &f, pf_graph_microbatch(g), c, fix, o->context_parallel,
                              o->expert_parallel, k, 1, choice->best, &choice->n, &choice->stats,
                              err, errlen);
    if (rc == PF_OK && fix->b == 0)
        graph_microbatch_leads(g, choice);
    choice->wall_s += pf_now_s() - t0;
    return rc;
}

/* The candidate without interleaving of (p, t) training as `own`: the pool's, else the one
 * rank_flat ranked alone for that pair; NULL when there is none. */
static const pf_blockenum_item_t *flat_item(const pf_search_blocks_t *choice, int p, int t,
                                            const pf_blockcost_cand_t *own)
{
    for (int i = 0; i < choice->n; i++) {
        const pf_blockcost_cand_t *x = &choice->best[i].cand;
        if (x->v == 1 && x->p == p && x->t == t && same_training(x, own))
            return &choice->best[i];
    }
    for (int i = 0; i < choice->nflat; i++)
        if (choice->flat[i].cand.p == p && choice->flat[i].cand.t == t)
            return &choice->flat[i];
    return NULL;
}

/* Each interleaved pair handed on that the pool holds no v 1 item of gets its best v 1
 * candidate at the same (t, p, micro-batch, training), ranked alone: the later phases simulate
 * that pair without interleaving too (search_state.h), and that plan's record (layer counts,
 * analytic step) must be a v 1 candidate's. A pair with none that fits gets none. */
static void rank_flat(const pf_graph_t *g, const pf_cluster_t *c, const pf_blockcost_problem_t *pr,
                      pf_search_blocks_t *choice)
{
    pf_cpep_facts_t f;
    block_facts(g, pr->blocks, &f);
    choice->nflat = 0;
    for (int j = 0; j < choice->npairs; j++) {
        const pf_blockcost_cand_t *x = &choice->best[choice->pair_of[j]].cand;
        if (x->v <= 1 || flat_item(choice, x->p, x->t, x))
            continue;
        pf_blockenum_fix_t fix;
        pf_blockenum_fix_init(&fix);
        fix.t = x->t, fix.p = x->p, fix.b = x->b, fix.v = 1, fix.sp = x->sp, fix.zero = x->zero;
        fix.recompute = x->rc_auto ? -1 : (int)x->recompute;
        fix.tpo = x->tpo;
        char err[256];
        int n = 0;
        if (pf_blockcpep_run(pr, &f, pf_graph_microbatch(g), c, &fix, x->cp, x->ep, 1, 1,
                             &choice->flat[choice->nflat], &n, NULL, err, sizeof err) == PF_OK &&
            n == 1)
            choice->nflat++;
    }
}

int pf_search_blocks_fix(const pf_graph_t *g, const pf_cluster_t *c, pf_search_opts_t *o,
                         pf_search_blocks_t *choice, char *err, size_t errlen)
{
    memset(choice, 0, sizeof *choice);
    if (o->global_batch <= 0)
        return pf_fail(err, errlen, PF_EINPUT, "block search: needs a global batch "
                       "(--global-batch)");
    pf_blockenum_fix_t fix;
    int rc = fixed_dims(g, o, &fix, err, errlen);
    if (rc != PF_OK)
        return rc;
    pf_blocks_t *b = pf_blocks_new(g, o->train.precision_bytes, err, errlen);
    if (!b)
        return PF_EINPUT;
    env_state_t st;
    pf_blockcost_env_t env;
    block_env(g, c, &o->train, &st, &env);
    pf_blockcost_problem_t pr = {.blocks = b, .env = &env, .training = o->train,
                                 .global_batch = o->global_batch,
                                 .ngpus = pf_cluster_ndevices(c), .gpus_per_host = gpus_per_host(c),
                                 .mem_bytes = pf_cluster_min_mem_bytes(c) * (1 - o->mem_headroom)};
    int k = o->block_candidates < 1                  ? 1
            : o->block_candidates > PF_SEARCH_BLOCKS_K ? PF_SEARCH_BLOCKS_K
                                                       : o->block_candidates;
    rc = rank(g, c, o, &pr, &fix, PF_SEARCH_BLOCKS_POOL, choice, err, errlen);
    if (rc != PF_OK) {
        pf_blocks_destroy(&b);
        return rc;
    }
    choice->present = 1;
    apply(choice, o, k);
    if (o->virtual_stages <= 0) /* v searched: the flat plans' records (rank_flat) */
        rank_flat(g, c, &pr, choice);
    pf_blocks_destroy(&b);
    return PF_OK;
}

/* The candidate whose training plan p's tensor-parallel degree takes. */
static const pf_blockenum_item_t *degree_item(const pf_search_blocks_t *choice, const pf_plan_t *p)
{
    int own_i = training_of(choice, p->tensor_parallel);
    return &choice->best[own_i >= 0 ? own_i : 0];
}

/* The ranked candidate plan p is: when `flat`, its (p, t)'s without interleaving (flat_item);
 * else, or when there is none, the first of its (p, t) training as its degree's candidate; else
 * that degree's candidate. */
static const pf_blockenum_item_t *candidate_of(const pf_search_blocks_t *choice,
                                               const pf_plan_t *p, int flat)
{
    const pf_blockenum_item_t *own = degree_item(choice, p);
    const pf_blockenum_item_t *it =
        flat ? flat_item(choice, p->stages, p->tensor_parallel, &own->cand) : NULL;
    for (int i = 0; !it && i < choice->n; i++) {
        const pf_blockcost_cand_t *c = &choice->best[i].cand;
        if (c->p == p->stages && c->t == p->tensor_parallel && same_training(c, &own->cand))
            it = &choice->best[i];
    }
    return it ? it : own;
}

int pf_search_blocks_has_flat(const pf_search_blocks_t *choice, const pf_plan_t *p)
{
    return choice->present &&
           flat_item(choice, p->stages, p->tensor_parallel, &degree_item(choice, p)->cand);
}

void pf_search_blocks_to_plan(const pf_search_blocks_t *choice, pf_plan_t *p, int flat)
{
    if (!choice->present || !p)
        return;
    const pf_blockenum_item_t *it = candidate_of(choice, p, flat);
    /* a per-stage-degree plan (search_stagedeg.h) was simulated without interleaving and keeps
     * the recomputation its own DP chose */
    int per_stage = p->stagedeg.chosen;
    p->blocks.present = 1;
    p->blocks.microbatch_size = it->cand.b;
    /* the simulator interleaves a plan's stages as Megatron-LM does: m a multiple of p */
    p->blocks.virtual_stages = !per_stage && !flat && it->cand.v > 1 && p->stages > 1 &&
                                       p->microbatches % p->stages == 0
                                   ? it->cand.v
                                   : 1;
    p->blocks.sequence_parallel = p->train.sequence_parallel && p->tensor_parallel > 1;
    p->blocks.context_parallel = it->cand.cp > 1 ? it->cand.cp : 1;
    p->blocks.expert_parallel = it->cand.ep > 1 ? it->cand.ep : 1;
    p->blocks.tp_comm_overlap = p->blocks.sequence_parallel && it->cand.tpo;
    p->blocks.first_layers = it->cand.first_layers;
    p->blocks.mid_layers = it->cand.p > 2 ? it->cand.mid_layers : 0;
    p->blocks.last_layers = it->cand.p > 1 ? it->cand.last_layers : 0;
    p->blocks.analytic_step_ms = it->eval.step_ms;
    /* --recompute auto: each stage at its own level (blockcost.h), where they differ; the
     * heaviest stays the plan's (the later phases planned under it); a plan that has them
     * (pf_search_blocks_fit_recompute moved some) keeps its own */
    int keep = per_stage || (p->stages > 0 && p->stage_list[0].has_recompute);
    for (int s = 0; !keep && it->cand.rc_auto && it->cand.p == p->stages && s < p->stages; s++) {
        p->stage_list[s].has_recompute = 1;
        p->stage_list[s].recompute = pf_blockcost_stage_recompute(&it->cand, s);
    }
    p->blocks.candidates = choice->n;
    p->blocks.wall_s = choice->wall_s;
}

int pf_search_blocks_fit_recompute(const pf_search_t *s, int c, pf_plan_t *p)
{
    if (!pf_plan_recompute_mixed(p))
        return PF_OK;
    const candidate_t *cd = &s->map.cand[c];
    const dp_entry_t *e = &s->part.dp[cd->dp];
    const pf_tp_setting_t *set = s->tap.tp[e->tp].set;
    pf_stage_rc_t x;
    char err[128];
    if (pf_stage_rc_init(&x, s->g, set, p, 1, err, sizeof err) != PF_OK)
        return PF_ERR;
    pf_cost_model_t cm; /* as the plan's memory parts were filled (search_sim.c) */
    pf_cost_model_init(&cm, cd->cluster, p->stages, e->microbatches, s->o.flat_gbps);
    pf_cost_model_set_training(&cm, &p->train, p->replicas,
                               set ? pf_tp_setting_reserve_bytes(set) : 0);
    int rc = pf_stage_rc_fit(&x, p, s->c, &cm, s->o.mem_headroom);
    pf_stage_rc_clear(&x);
    return rc;
}

/* The stage of block i under first / mid / last layers per stage over P stages. */
static int stage_of_block(int i, int P, int first, int mid)
{
    if (i < first || P == 1)
        return 0;
    int s = 1 + (i - first) / (mid > 0 ? mid : 1);
    return s < P - 1 ? s : P - 1;
}

/* Every op of p in pipeline order (stage 0's in its topological order, then stage 1's...),
 * moved to the stage its part belongs to (b: the prologue to stage 0, the epilogue to the
 * last, block i by the layer counts). */
static int recut_ops(const pf_blocks_t *b, pf_plan_t *p, int *all, int *mine)
{
    int P = p->stages, n = 0, L = pf_blocks_count(b);
    for (int s = 0; s < P; s++)
        for (int i = 0; i < p->stage_list[s].nops; i++)
            all[n++] = p->stage_list[s].ops[i];
    for (int s = 0; s < P; s++) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            int part = pf_blocks_of(b, all[i]);
            int at = part < 0 ? 0 : part >= L ? P - 1
                                              : stage_of_block(part, P, p->blocks.first_layers,
                                                               p->blocks.mid_layers);
            if (at == s)
                mine[k++] = all[i];
        }
        if (pf_plan_set_stage_ops(p, s, mine, k) != PF_OK)
            return PF_ERR;
    }
    return PF_OK;
}

int pf_search_blocks_recut(const pf_graph_t *g, int precision_bytes, pf_plan_t *p)
{
    int P = p->stages, nops = 0, rc = PF_OK;
    if (!p->blocks.present || p->blocks.virtual_stages <= 1 || P < 2)
        return PF_OK;
    char err[128];
    pf_blocks_t *b = pf_blocks_new(g, precision_bytes, err, sizeof err);
    if (!b)
        return PF_EINPUT;
    int L = pf_blocks_count(b);
    if (p->blocks.first_layers + p->blocks.last_layers +
            (P > 2 ? (P - 2) * p->blocks.mid_layers : 0) != L) {
        pf_blocks_destroy(&b);
        return PF_EINPUT;
    }
    for (int s = 0; s < P; s++)
        nops += p->stage_list[s].nops;
    int *all = malloc((size_t)(nops ? nops : 1) * sizeof *all);
    int *mine = malloc((size_t)(nops ? nops : 1) * sizeof *mine);
    rc = all && mine ? recut_ops(b, p, all, mine) : PF_ERR;
    free(all);
    free(mine);
    pf_blocks_destroy(&b);
    return rc;
}
