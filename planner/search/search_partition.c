/* search_partition: phases 2 and 3 of the search (search.h "dp" and "partition"): per degree T
 * and stage count S, one coarsening per (alpha, K) (Parmesan IV-B, eq. 4) and one DP_PARTITION
 * job per alpha; when every answer is in, the partitions are ranked by a flat-bandwidth step
 * estimate per sample and the best few, one per (S, T), become the candidates of mapping
 * (search.c starts mapping them). */
#include "planner/search/search_partition.h"
#include "planner/search/search_blocks.h"
#include "planner/search/search_tap.h"
#include "planner/search/search_queue.h"
#include "planner/partition/coarsen.h"
#include "planner/ir/collective.h"
#include "planner/ir/cost.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Layer-aligned plans: every repeated block (training.h) is one group; ops outside blocks join
 * the block before them (the first block for those ahead of every block), so each stage holds
 * whole blocks and the embedding and head ride with the first and last. A block whose ops are
 * not consecutive in topological order would become two groups, which a stage boundary could
 * separate: PF_EINPUT with *bad its op met again. first: scratch
 * of |V| ints (each group's first op). */
static int block_groups(const pf_graph_t *g, int *group, int *ngroups, int *first, int *bad)
{
    int n = pf_graph_nops(g), k = -1, pending = 0;
    const int *topo = pf_graph_topo(g);
    const char *cur = NULL;
    size_t cur_len = 0;
    *bad = -1;
    for (int i = 0; i < n; i++) {
        int v = topo[i];
        const char *name = pf_graph_op(g, v)->name;
        size_t len = pf_training_block_len(name);
        if (len && (!cur || len != cur_len || strncmp(name, cur, len))) {
            k++;
            first[k] = v;
            cur = name;
            cur_len = len;
        }
        if (k < 0) {
            group[v] = -1; /* ahead of every block: the first block's */
            pending++;
        } else {
            group[v] = k;
        }
    }
    if (k < 0)
        return PF_EINPUT; /* no repeated block at all */
    for (int v = 0; pending && v < n; v++)
        if (group[v] < 0)
            group[v] = 0;
    /* a block name heading two groups: sorted by name, they meet */
    qsort_r(first, (size_t)k + 1, sizeof *first, pf_training_cmp_block_name, (void *)g);
    for (int i = 1; i <= k; i++)
        if (!pf_training_cmp_block_name(&first[i - 1], &first[i], (void *)g)) {
            const int *pos = pf_graph_topo_pos(g); /* the later head is the one met again */
            *bad = pos[first[i]] > pos[first[i - 1]] ? first[i] : first[i - 1];
            return PF_EINPUT;
        }
    /* groups must be convex: a block's ops are contiguous in topological order here, and an op
     * outside blocks joins a neighbour in that order, so every group is an interval of it */
    *ngroups = k + 1;
    return PF_OK;
}

int pf_search_partition_init(pf_search_t *s, char *err, size_t errlen)
{
    partition_phase_t *pt = &s->part;
    int n = pf_graph_nops(s->g), bad, rc = PF_OK;
    if (!s->o.layer_aligned)
        return PF_OK;
    int *first = malloc((size_t)n * sizeof *first);
    if (!first || !(pt->block_group = malloc((size_t)n * sizeof *pt->block_group))) {
        free(first);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    if (block_groups(s->g, pt->block_group, &pt->nblock_groups, first, &bad) != PF_OK) {
        const char *name = bad >= 0 ? pf_graph_op(s->g, bad)->name : NULL;
        rc = name ? pf_fail(err, errlen, PF_EINPUT, "layer_aligned: the ops of block %.*s are "
                            "not consecutive in graph order (%s comes after another block's "
                            "ops): the block cannot be kept whole", (int)pf_training_block_len(name),
                            name, name)
                  : pf_fail(err, errlen, PF_EINPUT, "layer_aligned: graph %s has no repeated "
                            "blocks (dotted names with a number, such as layers.7.mlp)",
                            pf_graph_name(s->g));
    }
    free(first);
    return rc;
}

bool pf_search_partition_paired(const pf_search_opts_t *o, int S, int T)
{
    bool paired = o->nblock_pairs == 0;
    for (int j = 0; j < o->nblock_pairs; j++)
        paired |= o->block_pairs[j][0] == S && o->block_pairs[j][1] == T;
    return paired;
}

int pf_search_partition_stage_counts(const pf_search_opts_t *o, int D, int n, int *list)
{
    int nst = 0;
    if (o->stages) {
        list[nst++] = o->stages;
    } else if (o->replicas) {
        list[nst++] = D / o->replicas;
    } else {
        int most = o->coarsen_k > 0 && o->coarsen_k < n ? o->coarsen_k : n; /* stages need ops */
        for (int S = 1; S <= D && S <= most && S <= o->max_stages && nst < 64; S++)
            if (D % S == 0)
                list[nst++] = S;
    }
    return nst;
}

/* The micro-batches per replica for R replicas: the option, or what the global batch leaves
 * (0 when it does not divide). */
static int microbatches_for(const pf_search_t *s, int R)
{
    if (!s->o.global_batch)
        return s->o.microbatches;
    long long per_step = (long long)pf_graph_microbatch(s->g) * R;
    if (per_step <= 0 || s->o.global_batch % per_step)
        return 0;
    long long mb = s->o.global_batch / per_step;
    return mb <= 1 << 20 ? (int)mb : 0;
}

/* A new coarsening of T's graph for (alpha, K): its index, or -1 with *rc. */
static int coarsen(pf_search_t *s, int tpi, const pf_cost_model_t *cm, double alpha, int k,
                   char *err, size_t errlen, int *rc)
{
    partition_phase_t *pt = &s->part;
    const pf_graph_t *g = pf_search_tap_graph(s, tpi);
    int n = pf_graph_nops(g);
    if (pf_grow((void **)&pt->coarse, &pt->coarse_cap, (size_t)pt->ncoarse + 1,
                sizeof *pt->coarse)) {
        *rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        return -1;
    }
    coarse_t *c = &pt->coarse[pt->ncoarse];
    memset(c, 0, sizeof *c);
    c->tp = tpi;
    c->alpha = alpha;
    c->k = k;
    c->group = malloc((size_t)n * sizeof *c->group);
    if (!c->group) {
        *rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        return -1;
    }
    pf_coarsen_opts_t co = {.k = k, .alpha = alpha};
    double t0 = pf_now_s();
    *rc = pf_coarsen_run(g, cm, &co, c->group, &c->ngroups, err, errlen);
    c->seconds = pf_now_s() - t0;
    if (*rc != PF_OK) {
        free(c->group);
        return -1;
    }
    return pt->ncoarse++;
}

/* The grouping of T's graph for (alpha, K), computed on first use. -1 = no coarsening (K >=
 * ops). */
static int coarse_for(pf_search_t *s, int tpi, const pf_cost_model_t *cm, double alpha, int k,
                      char *err, size_t errlen, int *rc)
{
    const partition_phase_t *pt = &s->part;
    *rc = PF_OK;
    if (k >= pf_graph_nops(pf_search_tap_graph(s, tpi)))
        return -1;
    for (int i = 0; i < pt->ncoarse; i++)
        if (pt->coarse[i].tp == tpi && pt->coarse[i].alpha == alpha && pt->coarse[i].k == k)
            return i;
    return coarsen(s, tpi, cm, alpha, k, err, errlen, rc);
}

/* One DP job per alpha for (S, R, MB) of degree tpi (one alpha when K leaves nothing to
 * coarsen: alpha only shapes the coarsening). */
static int add_dp_alphas(pf_search_t *s, int tpi, int S, int R, int MB, char *err, size_t errlen)
{
    partition_phase_t *pt = &s->part;
    const pf_graph_t *g = pf_search_tap_graph(s, tpi);
    int n = pf_graph_nops(g), rc;
    pf_cost_model_t cm;
    pf_cost_model_init(&cm, pf_search_tap_cluster(s, tpi), 1, MB, s->o.flat_gbps);
    pf_cost_model_set_training(&cm, &s->tap.tp[tpi].opts.train, 1,
                               pf_tp_setting_reserve_bytes(s->tap.tp[tpi].set));
    cm.mem_limit_bytes *= 1 - s->o.mem_headroom;
    int k = pt->block_group      ? n
            : s->o.coarsen_k > 0 ? s->o.coarsen_k
            : s->o.coarsen_k < 0 ? n
                                 : pf_partition_default_k(g, S, s->o.max_downsets);
    int nalphas = k < n ? s->o.nalphas : 1;
    for (int a = 0; a < nalphas; a++) {
        if (pf_grow((void **)&pt->dp, &pt->dp_cap, (size_t)pt->ndp + 1, sizeof *pt->dp))
            return pf_fail(err, errlen, PF_ERR, "out of memory");
        dp_entry_t *e = &pt->dp[pt->ndp];
        memset(e, 0, sizeof *e);
        e->stages = S;
        e->replicas = R;
        e->microbatches = MB;
        e->tp = tpi;
        e->alpha = s->o.alphas[a];
        e->coarse = coarse_for(s, tpi, &cm, e->alpha, k, err, errlen, &rc);
        if (rc != PF_OK)
            return rc;
        if (!pf_search_queue_job(s, PF_JOB_DP_PARTITION, (pf_search_owner_t){.dp = pt->ndp}))
            return pf_fail(err, errlen, PF_ERR, "out of memory");
        pt->ndp++;
        pt->dp_left++;
    }
    return PF_OK;
}

/* The DP job whose stages choose their own data-parallel degree (search_stagedeg.h): on T's
 * graph, the layer-aligned groups or a coarsening to K hyper-ops as for one stage, alpha 1,
 * the step's micro-batches in all. */
static int add_stagedeg_entry(pf_search_t *s, int tpi, char *err, size_t errlen)
{
    partition_phase_t *pt = &s->part;
    const pf_graph_t *g = pf_search_tap_graph(s, tpi);
    long long n_micro = s->o.global_batch / pf_graph_microbatch(s->g);
    if (n_micro < 1 || n_micro > 1 << 20)
        return PF_OK; /* pf_search_validate refused it: no entry */
    pf_cost_model_t cm;
    pf_cost_model_init(&cm, pf_search_tap_cluster(s, tpi), 1, (int)n_micro, s->o.flat_gbps);
    int n = pf_graph_nops(g), rc;
    int k = pt->block_group ? n : s->o.coarsen_k ? s->o.coarsen_k
                                               : pf_partition_default_k(g, 1, s->o.max_downsets);
    int coarse = coarse_for(s, tpi, &cm, 1, k < 0 ? n : k, err, errlen, &rc);
    if (rc != PF_OK)
        return rc;
    /* flat, and per host where the hosts share devices and micro-batches evenly */
    int H = pf_cluster_nhosts(s->c), D = pf_cluster_ndevices(s->c);
    for (int j = 0; j < PF_SEARCH_STAGEDEG_PLANS; j++) {
        int M = j == 0 ? 1 : H;
        if (j > 0 && (H < 2 || D % H || n_micro % H))
            break;
        if (pf_grow((void **)&pt->dp, &pt->dp_cap, (size_t)pt->ndp + 1, sizeof *pt->dp))
            return pf_fail(err, errlen, PF_ERR, "out of memory");
        pt->dp[pt->ndp] = (dp_entry_t){.stages = 1, .microbatches = (int)n_micro, .tp = tpi,
                                       .alpha = 1, .coarse = coarse, .stage_degrees = 1,
                                       .stage_hosts = M};
        if (!pf_search_queue_job(s, PF_JOB_DP_PARTITION, (pf_search_owner_t){.dp = pt->ndp}))
            return pf_fail(err, errlen, PF_ERR, "out of memory");
        pt->ndp++;
        pt->dp_left++;
    }
    return PF_OK;
}

/* Phase 2 for one degree: its DP jobs, one per (S, alpha) with S x R = devices / T. */
static int add_dp_entries(pf_search_t *s, int tpi, char *err, size_t errlen)
{
    int D = pf_cluster_ndevices(pf_search_tap_cluster(s, tpi)), stages_list[64];
    int n = pf_graph_nops(pf_search_tap_graph(s, tpi));
    int nst = pf_search_partition_stage_counts(&s->o, D, n, stages_list);
    for (int i = 0; i < nst; i++) {
        int S = stages_list[i], R = s->o.replicas ? s->o.replicas : D / S;
        int MB = microbatches_for(s, R);
        if (S < 1 || R < 1 || (long long)S * R > D || MB < 1)
            continue;
        if (s->part.block_group && S > s->part.nblock_groups && !s->o.stages && !s->o.replicas)
            continue; /* a stage of whole blocks needs one; a fixed S hears why from its DP */
        if (!pf_search_partition_paired(&s->o, S, s->tap.tp[tpi].opts.tp))
            continue; /* the block pre-phase's candidates only */
        int rc = add_dp_alphas(s, tpi, S, R, MB, err, errlen);
        if (rc != PF_OK)
            return rc;
    }
    if (s->o.stage_degrees && tpi == 0) /* the smallest degree: T = 1 unless --tp fixes T */
        return add_stagedeg_entry(s, tpi, err, errlen);
    return PF_OK;
}

int pf_search_partition_open(pf_search_t *s, int tpi, char *err, size_t errlen)
{
    tp_entry_t *t = &s->tap.tp[tpi];
    char why[256];
    t->set = pf_tp_setting_new(s->g, s->c, &t->opts, why, sizeof why);
    if (!t->set) {
        snprintf(t->why, sizeof t->why, "tensor parallelism %d: %.200s", t->opts.tp, why);
        return PF_OK;
    }
    return add_dp_entries(s, tpi, err, errlen);
}

/* The data-parallel all-reduce of `bytes` per device over R replicas before the mapping places
 * them: collective.h's cheapest algorithm on the group cluster's first R devices (Megatron's
 * order: data parallelism next to tensor parallelism, so replicas share a host where they fit),
 * or eq. 7 at B_flat when --flat-gbps asks for a flat network (or out of memory). */
static double dp_allreduce_ms(const pf_search_t *s, const pf_cluster_t *c, int R, double bytes,
                              double flat)
{
    if (R <= 1)
        return 0;
    int *devs = s->o.flat_gbps > 0 || R > pf_cluster_ndevices(c) ? NULL
                                                                 : malloc((size_t)R * sizeof *devs);
    pf_collective_group_t grp;
    double ms = pf_bytes_ms(pf_cost_ring_allreduce_bytes(bytes, R), flat); /* eq. 7 */
    if (devs) {
        for (int r = 0; r < R; r++)
            devs[r] = r;
        if (pf_collective_group_from_cluster(c, devs, R, 0, &grp) == PF_OK)
            ms = pf_collective_best_ms(&grp, PF_COLL_ALLREDUCE, bytes);
    }
    free(devs);
    return ms;
}

/* Flat-bandwidth estimate used to rank partitions before they are mapped: the pipeline of
 * DESIGN.md's step estimate with every transfer at B_flat, divided by the samples of a step; the
 * data-parallel all-reduce by dp_allreduce_ms. */
static double flat_ms_per_sample(const pf_search_t *s, const dp_entry_t *e)
{
    const pf_plan_t *p = e->plan;
    const pf_graph_t *g = pf_search_tap_graph(s, e->tp);
    const pf_cluster_t *c = pf_search_tap_cluster(s, e->tp);
    int S = p->stages, R = p->replicas, MB = p->microbatches;
    double ar = 0;
    for (int st = 0; st < S; st++) {
        double params = 0; /* per device of the stage's group */
        for (int i = 0; i < p->stage_list[st].nops; i++)
            params += pf_graph_op(g, p->stage_list[st].ops[i])->param_bytes;
        double flat = s->o.flat_gbps > 0 ? s->o.flat_gbps : pf_cluster_bw_median(c);
        if (!(flat > 0))
            flat = s->flat_gbps;
        ar = fmax(ar, dp_allreduce_ms(s, c, R, params, flat));
    }
    double step = (MB + S - 1) * p->partition_objective_ms + ar;
    return step / ((double)pf_graph_microbatch(s->g) * MB * R);
}

static int cmp_dp(const void *a, const void *b, void *ctx)
{
    const pf_search_t *s = ctx;
    const dp_entry_t *x = &s->part.dp[*(const int *)a], *y = &s->part.dp[*(const int *)b];
    if (x->flat_ms_per_sample != y->flat_ms_per_sample)
        return x->flat_ms_per_sample < y->flat_ms_per_sample ? -1 : 1;
    if (x->stages != y->stages)
        return x->stages - y->stages;
    if (x->tp != y->tp)
        return x->tp - y->tp;
    return x->alpha < y->alpha ? -1 : x->alpha > y->alpha;
}

bool pf_search_partition_degrees_why(const pf_search_t *s, char *buf, size_t len)
{
    const char *why = "";
    int unexplained = 0;
    for (int t = 0; t < s->tap.ntp; t++) {
        unexplained += !s->tap.tp[t].why[0];
        why = *why ? why : s->tap.tp[t].why;
    }
    if (!*why)
        return false;
    if (s->o.global_batch && unexplained)
        snprintf(buf, len, "%.250s; no other tensor-parallel degree gives %lld samples per step "
                 "(micro-batch %d x micro-batches x replicas)", why, s->o.global_batch,
                 pf_graph_microbatch(s->g));
    else
        snprintf(buf, len, "%s", why);
    return true;
}

/* No partition is feasible: the deepest pipeline spreads memory the most, so its message is
 * the one to show; without any DP job, why the degrees were dropped. Under --layer-aligned the
 * message names that constraint: plans that cut a layer were not looked at. */
/* Who asked for whole layers per stage: the block search (its plans are Megatron-LM's), else
 * the user's --layer-aligned. */
static const char *whole_layers_by(const pf_search_t *s)
{
    return s->blocks.present ? "the block search (whole layers per stage)" : "--layer-aligned";
}

/* The block search ran because it was left to the search: the op-level search may still find a
 * plan that cuts a layer. */
static const char *op_level_hint(const pf_search_t *s)
{
    return s->blocks.present && s->o.block_search < 0 && !pf_search_blocks_asked(&s->o) &&
                   !s->blocks.layer_aligned_asked
               ? "; --no-block-search lets the op-level search cut inside a layer"
               : "";
}

static void none_feasible(pf_search_t *s, int best_infeasible)
{
    char degrees[400];
    const char *why = best_infeasible >= 0 ? s->part.dp[best_infeasible].error : "";
    if (!*why && pf_search_partition_degrees_why(s, degrees, sizeof degrees))
        why = degrees;
    if (!*why)
        why = "no (stages, replicas, tensor-parallel degree) fits the options";
    const char *sd = s->sim.stagedeg_why; /* --stage-degrees: why its plans did not help */
    if (!s->part.block_group || best_infeasible < 0 ||
        (!strstr(why, "of whole groups") && !strstr(why, "cuts block") &&
         s->part.dp[best_infeasible].stages <= s->part.nblock_groups))
        pf_search_queue_fail(s, PF_EINFEASIBLE, "%s%s%s", why, sd[0] ? "; per-stage degrees: " : "",
                             sd); /* e.g. an op that fits no device */
    else if (s->part.dp[best_infeasible].stages > s->part.nblock_groups)
        pf_search_queue_fail(s, PF_EINFEASIBLE, "%s: %d stages need %d whole layers or more, the "
                             "graph has %d%s", whole_layers_by(s),
                             s->part.dp[best_infeasible].stages,
                             s->part.dp[best_infeasible].stages, s->part.nblock_groups,
                             op_level_hint(s));
    else
        pf_search_queue_fail(s, PF_EINFEASIBLE, "%s: no plan with whole layers per stage fits in "
                             "memory; %s%s", whole_layers_by(s), why, op_level_hint(s));
}

/* The feasible entries into order, their estimates computed; -1 when an entry failed (the
 * search then fails with its error). */
static int feasible_entries(pf_search_t *s, int *order, int *best_infeasible)
{
    int n = 0;
    *best_infeasible = -1;
    for (int i = 0; i < s->part.ndp; i++) {
        dp_entry_t *e = &s->part.dp[i];
        if (e->stage_degrees)
            continue; /* tried after the uniform search (search_stagedeg.h) */
        if (e->status == PF_OK && e->plan) {
            e->flat_ms_per_sample = flat_ms_per_sample(s, e);
            order[n++] = i;
        } else if (e->status == PF_EINFEASIBLE) {
            if (*best_infeasible < 0 || e->stages > s->part.dp[*best_infeasible].stages)
                *best_infeasible = i;
        } else {
            pf_search_queue_fail(s, e->status, "%s", e->error);
            return -1;
        }
    }
    return n;
}

bool pf_search_partition_rank(pf_search_t *s)
{
    int *order = malloc((size_t)s->part.ndp * sizeof *order), best_infeasible, n = 0;
    if (!order) {
        pf_search_queue_fail(s, PF_ERR, "out of memory");
        return false;
    }
    int nfeasible = feasible_entries(s, order, &best_infeasible);
    s->part.best_infeasible = best_infeasible;
    if (nfeasible == 0 && !s->o.stage_degrees) /* else the per-stage plans may still fit */
        none_feasible(s, best_infeasible);
    if (nfeasible <= 0) {
        free(order);
        return false;
    }
    qsort_r(order, (size_t)nfeasible, sizeof *order, cmp_dp, s);
    /* one candidate per (S, T): its best alpha */
    for (int k = 0; k < nfeasible && n < s->o.candidates; k++) {
        int dup = 0;
        const dp_entry_t *e = &s->part.dp[order[k]];
        for (int c = 0; c < n; c++)
            dup |= s->part.dp[order[c]].stages == e->stages && s->part.dp[order[c]].tp == e->tp;
        if (!dup)
            order[n++] = order[k];
    }
    s->part.chosen = order;
    s->part.nchosen = n;
    return true;
}

void pf_search_partition_fail_none(pf_search_t *s)
{
    none_feasible(s, s->part.best_infeasible);
}

double pf_search_partition_samples_per_step(const pf_search_t *s, const pf_plan_t *p)
{
    return (double)pf_graph_microbatch(s->g) * p->microbatches * p->replicas;
}

void pf_search_partition_describe(const pf_search_t *s, const pf_search_owner_t *owner,
                                  pf_job_t *job)
{
    const partition_phase_t *pt = &s->part;
    const dp_entry_t *e = &pt->dp[owner->dp];
    job->setting = s->tap.tp[e->tp].opts;
    job->partition.stages = e->stages;
    job->partition.replicas = e->replicas;
    job->partition.microbatches = e->microbatches;
    job->partition.flat_gbps = s->o.flat_gbps;
    job->partition.coarsen_k = s->o.coarsen_k;
    job->partition.alpha = e->alpha;
    job->partition.train = s->tap.tp[e->tp].opts.train;
    job->partition.mem_headroom = s->o.mem_headroom;
    if (e->coarse >= 0) {
        job->partition.group = pt->coarse[e->coarse].group;
        job->partition.ngroups = pt->coarse[e->coarse].ngroups;
    } else if (pt->block_group) {
        job->partition.group = pt->block_group;
        job->partition.ngroups = pt->nblock_groups;
        job->partition.group_whole = 1; /* no retry on single ops (they would cut layers) */
    }
    /* refinement moves single ops across boundaries: it would cut blocks */
    job->partition.refine = s->o.refine && !pt->block_group;
    job->partition.stage_degrees = e->stage_degrees;
    job->partition.stage_tp_mask = e->stage_degrees ? s->o.stage_tp_mask : 0;
    job->partition.stage_hosts = e->stage_hosts;
    job->partition.stage_recompute = e->stage_degrees && s->o.recompute_auto;
    if (s->o.max_downsets > 0)
        job->partition.max_downsets = s->o.max_downsets;
}

/* Layer-aligned: an op of a block that the plan puts in two stages, else -1. */
static int cut_block(const pf_search_t *s, const pf_plan_t *p)
{
    const partition_phase_t *pt = &s->part;
    int n = pf_graph_nops(s->g), cut = -1;
    int *gstage = pt->block_group ? malloc((size_t)pt->nblock_groups * sizeof *gstage) : NULL;
    if (!gstage)
        return pt->block_group ? 0 : -1; /* out of memory: unverified counts as cut */
    for (int k = 0; k < pt->nblock_groups; k++)
        gstage[k] = -1;
    for (int st = 0; st < p->stages && cut < 0; st++)
        for (int i = 0; i < p->stage_list[st].nops && cut < 0; i++) {
            int v = p->stage_list[st].ops[i], *at = v >= 0 && v < n ? &gstage[pt->block_group[v]]
                                                                       : NULL;
            if (!at)
                cut = 0;
            else if (*at >= 0 && *at != st)
                cut = v;
            else
                *at = st;
        }
    free(gstage);
    return cut;
}

/* A DP answer's verdict is kept: an infeasible (S, T) is an answer, not a failure. */
bool pf_search_partition_absorb(pf_search_t *s, uint64_t id, const pf_search_owner_t *owner,
                                const pf_job_result_t *res)
{
    (void)id;
    dp_entry_t *e = &s->part.dp[owner->dp];
    e->status = res->status;
    snprintf(e->error, sizeof e->error, "%s", res->error);
    if (res->status == PF_OK) {
        e->plan = res->plan ? pf_plan_clone(res->plan) : NULL;
        if (!e->plan) {
            pf_search_queue_fail(s, PF_ERR, "%s",
                                 res->plan ? "out of memory" : "partition job sent no plan");
            return false;
        }
        int cut = cut_block(s, e->plan);
        if (cut >= 0) { /* a worker that ignores group_whole: its plan is no layer-aligned one */
            const char *name = pf_graph_op(s->g, cut)->name;
            e->status = PF_EINFEASIBLE;
            snprintf(e->error, sizeof e->error, "the partition into %d stages cuts block %.*s",
                     e->stages, (int)pf_training_block_len(name), name);
            pf_plan_destroy(&e->plan);
        }
    }
    return --s->part.dp_left == 0 && s->tap.tp_left == 0;
}

void pf_search_partition_clear(pf_search_t *s)
{
    partition_phase_t *pt = &s->part;
    for (int i = 0; i < pt->ndp; i++)
        pf_plan_destroy(&pt->dp[i].plan);
    for (int i = 0; i < pt->ncoarse; i++)
        free(pt->coarse[i].group);
    free(pt->block_group);
    free(pt->coarse);
    free(pt->dp);
    free(pt->chosen);
}

const pf_search_kind_t pf_search_partition_kinds[] = {
    {PF_JOB_DP_PARTITION, pf_search_partition_describe, pf_search_partition_absorb, NULL, NULL},
    {PF_JOB_KIND_COUNT, NULL, NULL, NULL, NULL},
};
