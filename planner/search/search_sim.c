/* search_sim: phase 4 of the search (search.h "simulate" and "done"): each candidate keeps the
 * better of its mappings under "full" and becomes a plan (a group becomes its T devices); for
 * T > 1 and S > 1 one RESHARD job per stage boundary and replica times the cross-stage transfer
 * (Zhuang et al., "On Optimizing the Communication of Model Parallelism"); then one SIMULATE job
 * per allowed schedule. Among the (candidate, schedule) pairs that fit memory, the least
 * simulated step time per sample makes the plan. */
#include "planner/search/search_sim.h"
#include "planner/search/search_blocks.h"
#include "planner/search/search_map.h"
#include "planner/search/search_partition.h"
#include "planner/search/search_tap.h"
#include "planner/search/search_queue.h"
#include "planner/search/search_stagedeg.h"
#include "planner/sim/chunks.h"
#include "planner/sim/replica_groups.h"
#include "planner/ir/collective.h"
#include "planner/ir/cost.h"
#include "planner/tp/tp_groups.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Stage st's groups become their T devices, replica by replica. */
static int expand_groups(const pf_tp_groups_t *groups, int T, pf_plan_t *p)
{
    int S = p->stages, R = p->replicas;
    int *grp = malloc((size_t)S * R * sizeof *grp);
    if (!grp)
        return PF_ERR;
    for (int st = 0; st < S; st++)
        memcpy(grp + (size_t)st * R, p->stage_list[st].devices, (size_t)R * sizeof *grp);
    pf_plan_set_tensor_parallel(p, T);
    for (int st = 0; st < S; st++) {
        int *d = pf_plan_stage_devices(p, st);
        if (!d) {
            free(grp);
            return PF_ERR;
        }
        for (int r = 0; r < R; r++)
            memcpy(d + (size_t)r * T, pf_tp_groups_members(groups, grp[st * R + r]),
                   (size_t)T * sizeof *d);
    }
    free(grp);
    return PF_OK;
}

/* Collectives are listed on the representative instance of each unit: count them on the op in
 * the same position of every instance. */
static void count_collectives(const pf_search_t *s, const pf_tap_result_t *tap, pf_plan_t *p)
{
    for (int u = 0; u < tap->nunits; u++) {
        const pf_tap_unit_plan_t *up = &tap->units[u];
        const int *rep0 = pf_tap_units_instance(s->tap.units, u, 0);
        for (int k = 0; k < up->ncolls; k++) {
            int pos = -1;
            for (int j = 0; rep0 && j < up->nops && pos < 0; j++)
                if (rep0[j] == up->colls[k].op)
                    pos = j;
            for (int i = 0; pos >= 0 && i < up->ninstances; i++)
                p->tp_colls[pf_tap_units_instance(s->tap.units, u, i)[pos]]++;
        }
    }
}

/* The winner's groups become their T devices (tp_groups.h); its TAP plan goes into the plan
 * per op (weight splits, collectives and their time per micro-batch). */
static int expand_tp(const pf_search_t *s, int tpi, pf_plan_t *p)
{
    const tp_entry_t *t = &s->tap.tp[tpi];
    int T = t->opts.tp, n = pf_graph_nops(s->g);
    p->devices = s->ndev;
    if (T == 1)
        return PF_OK;
    if (expand_groups(pf_tp_setting_groups(t->set), T, p) != PF_OK)
        return PF_ERR;
    const pf_tap_result_t *tap = pf_tp_setting_tap(t->set);
    if (!tap || pf_plan_alloc_tp(p, n) != PF_OK)
        return tap ? PF_ERR : PF_OK;
    for (int v = 0; v < n; v++) {
        const pf_tap_op_t *o = &tap->ops[v];
        if (pf_graph_op(s->g, v)->weight.ndim > 0)
            p->tp_split[v] = (signed char)(o->weight.kind == PF_SHARDING_S ? o->weight.dim : -1);
        p->tp_comm_ms[v] = o->fwd_comm_ms + o->bwd_comm_ms;
    }
    count_collectives(s, tap, p);
    return PF_OK;
}

/* Replica r's pipeline transfers of stage st per micro-batch: across the cut on each side (cut:
 * pf_simulate_cut_bytes, every tensor once), a TP group's by Megatron's scatter/gather
 * (pf_simulate_xfer_scatter_gather_ms; T = 1: the postal model). */
static double pp_ms(const pf_search_t *s, const pf_plan_t *p, const double *cut, int st, int r)
{
    int T = p->tensor_parallel > 0 ? p->tensor_parallel : 1;
    const int *mine = p->stage_list[st].devices + (size_t)r * T;
    double sum = 0;
    if (st + 1 < p->stages)
        sum += pf_simulate_xfer_scatter_gather_ms(
            s->c, mine, p->stage_list[st + 1].devices + (size_t)r * T, T, cut[st], 0);
    if (st > 0)
        sum += pf_simulate_xfer_scatter_gather_ms(
            s->c, mine, p->stage_list[st - 1].devices + (size_t)r * T, T, cut[st - 1], 0);
    return sum;
}

/* The tensors crossing each cut of candidate c's plan p (pf_simulate_cut_bytes on the graph its
 * setting runs, as its SIMULATE jobs price them): S - 1 entries, malloc'ed; NULL out of memory. */
static double *cand_cut_bytes(const pf_search_t *s, int c, const pf_plan_t *p)
{
    double *cut = malloc((size_t)(p->stages > 0 ? p->stages : 1) * sizeof *cut);
    const pf_graph_t *g = pf_search_tap_graph(s, s->part.dp[s->map.cand[c].dp].tp);
    if (cut && pf_simulate_cut_bytes(g, p, cut) != PF_OK) {
        free(cut);
        return NULL;
    }
    return cut;
}

/* Stage st's data-parallel all-reduce: each rank's over its R replicas (collective.h), the
 * slowest rank's. */
static double dp_ms(const pf_search_t *s, const candidate_t *cd, const pf_plan_t *p, int st,
                    int *group)
{
    int T = p->tensor_parallel > 0 ? p->tensor_parallel : 1, R = p->replicas;
    double worst = 0;
    for (int k = 0; k < T && R > 1; k++) {
        for (int r = 0; r < R; r++)
            group[r] = p->stage_list[st].devices[(size_t)r * T + k];
        pf_collective_group_t g;
        if (pf_collective_group_from_cluster(s->c, group, R, 0, &g) != PF_OK)
            return INFINITY;
        worst = fmax(worst, pf_collective_best_ms(&g, PF_COLL_ALLREDUCE,
                                                  pf_stage_graph_param_bytes(cd->sg, st)));
    }
    return worst;
}

/* One step's communication on the slowest stage for each kind, on the plan's devices: tensor
 * parallel (the stage's collectives, MB micro-batches), pipeline (pp_ms, MB micro-batches, each
 * of V interleaved chunks once: the wrap from the last rank to the first priced as a
 * neighbour's) and data parallel (dp_ms, once), as the simulator prices them. */
static int step_comm(const pf_search_t *s, int c, pf_plan_t *p)
{
    const candidate_t *cd = &s->map.cand[c];
    int S = pf_stage_graph_stages(cd->sg), R = pf_stage_graph_replicas(cd->sg);
    int MB = p->microbatches, V = pf_chunks_of_plan(p);
    int *group = malloc((size_t)R * sizeof *group);
    double *cut = cand_cut_bytes(s, c, p);
    if (!group || !cut) {
        free(group), free(cut);
        return PF_ERR;
    }
    p->comm.present = 1;
    p->comm.tp_ms = p->comm.pp_ms = p->comm.dp_ms = 0;
    for (int st = 0; st < S; st++) {
        double tp = 0;
        for (int i = 0; p->tp_nops && i < p->stage_list[st].nops; i++)
            tp += p->tp_comm_ms[p->stage_list[st].ops[i]];
        p->comm.tp_ms = fmax(p->comm.tp_ms, MB * tp);
        for (int r = 0; r < R; r++)
            p->comm.pp_ms = fmax(p->comm.pp_ms, MB * V * pp_ms(s, p, cut, st, r));
        p->comm.dp_ms = fmax(p->comm.dp_ms, dp_ms(s, cd, p, st, group));
    }
    free(group);
    free(cut);
    return PF_OK;
}

/* The partition came over the wire: the request's names, training and schedule, and the memory
 * parts by the schedule's micro-batches in flight (pf_cost_fill_plan). */
static void dress_plan(const pf_search_t *s, const candidate_t *cd, pf_training_schedule_t schedule,
                       pf_plan_t *p)
{
    const dp_entry_t *e = &s->part.dp[cd->dp];
    pf_plan_set_names(p, pf_graph_name(s->g), pf_cluster_name(s->c));
    p->train = s->tap.tp[e->tp].opts.train;
    p->train.schedule = schedule;
    snprintf(p->schedule, sizeof p->schedule, "%s", pf_training_schedule_name(schedule));
    pf_cost_model_t cm;
    pf_cost_model_init(&cm, cd->cluster, p->stages, e->microbatches, s->o.flat_gbps);
    pf_cost_model_set_training(&cm, &p->train, p->replicas,
                               pf_tp_setting_reserve_bytes(s->tap.tp[e->tp].set));
    pf_cost_fill_plan(p, pf_search_tap_graph(s, e->tp), &cm);
}

/* Which devices a plan of a candidate takes: its own mapping (the best under "full"), or a
 * baseline's (the CS or p2p map of its groups). */
typedef enum { MAP_OWN, MAP_CS, MAP_P2P } map_kind_t;

/* Candidate c's plan `variant` (search_state.h) under `schedule` and mapping `map`: its groups
 * expanded to T devices, the block search's choices, memory parts, communication per step.
 * The baselines are built here too, so that they differ from the plan in the mapping alone.
 * NULL when out of memory. */
static pf_plan_t *candidate_plan(const pf_search_t *s, int c, int variant, map_kind_t map,
                                 pf_training_schedule_t schedule)
{
    const candidate_t *cd = &s->map.cand[c];
    const dp_entry_t *e = &s->part.dp[cd->dp];
    double full_ms;
    int best_t = map == MAP_OWN ? pf_search_map_best(s, c, &full_ms) : -1;
    pf_plan_t *p = pf_plan_clone(e->plan);
    int *heur = malloc((size_t)e->plan->stages * e->plan->replicas * sizeof *heur);
    if (!p || !heur)
        goto fail;
    pf_mapping_stats_t st;
    const int *dev = best_t >= 0 ? pf_search_map_stats(s, c, best_t, &st) : NULL;
    pf_map_inst_t used = best_t >= 0 ? s->map.task[best_t].inst : PF_MAP_INST_FULL;
    if (!dev) {
        (map == MAP_P2P ? pf_mapping_p2p : pf_mapping_cs)(cd->sg, heur);
        dev = heur;
    }
    if (pf_mapping_fill_plan(p, cd->sg, cd->cluster, dev, used, best_t >= 0 ? &st : NULL) !=
            PF_OK ||
        expand_tp(s, e->tp, p) != PF_OK)
        goto fail;
    dress_plan(s, cd, schedule, p);
    /* its virtual stages are simulated (chunks.h) */
    pf_search_blocks_to_plan(&s->blocks, p, variant == PF_SEARCH_FLAT);
    if (pf_search_blocks_recut(s->g, s->o.train.precision_bytes, p) == PF_ERR ||
        pf_search_blocks_fit_recompute(s, c, p) != PF_OK || step_comm(s, c, p) != PF_OK)
        goto fail;
    if (e->coarse >= 0)
        p->partition_search.coarsen_s = s->part.coarse[e->coarse].seconds;
    free(heur);
    return p;
fail:
    free(heur);
    pf_plan_destroy(&p);
    return NULL;
}

static int cand_tp(const pf_search_t *s, int c)
{
    return s->tap.tp[s->part.dp[s->map.cand[c].dp].tp].opts.tp;
}

/* Samples per step of candidate c (both its plans run the same). */
static double samples(const pf_search_t *s, int c)
{
    return pf_search_partition_samples_per_step(s, s->sim.cand[c].plan[PF_SEARCH_AS_RANKED]);
}

/* The least simulated step per sample among the (candidate, schedule) pairs done that fit;
 * INFINITY when none is. */
static double best_per_sample(const pf_search_t *s)
{
    double best = INFINITY;
    for (int c = 0; c < s->map.ncand; c++)
        for (int v = 0; v < PF_SEARCH_VARIANTS; v++)
            for (int k = 0; k < PF_SCHEDULE_COUNT; k++) {
                const sim_rec_t *r = &s->sim.cand[c].sim[v][k];
                if (r->done && r->fits)
                    best = fmin(best, r->step_ms / samples(s, c));
            }
    return best;
}

/* Candidate c's plan v under schedule k cannot make the plan: the lower bound of its simulated
 * step (simbound.h, on the input its SIMULATE job builds) is already slower per sample than a
 * pair simulated, so its step is too (ties go to no pruning: an earlier candidate may win
 * them). The bound is computed here, on the search's side, once, when first asked. */
static bool cannot_win(pf_search_t *s, int c, int v, int k)
{
    double best = best_per_sample(s);
    if (!isfinite(best))
        return false;
    sim_rec_t *r = &s->sim.cand[c].sim[v][k];
    if (!r->bounded) {
        pf_job_t job;
        pf_job_init(&job, PF_JOB_SIMULATE);
        job.graph = s->g;
        job.cluster = s->c;
        pf_search_owner_t owner = {
            .sim = {.cand = c, .schedule = (pf_training_schedule_t)k, .variant = v}};
        pf_search_sim_describe(s, &owner, &job);
        r->bound_ms = pf_job_simulate_bound_ms(&job);
        r->bounded = true;
    }
    return r->bound_ms / samples(s, c) > best * (1 + 1e-9); /* the margin: summation order */
}

/* Every (candidate, schedule) still waiting for its simulation that cannot win is dropped: its
 * job cancelled (a queued one is never issued). */
static void prune_waiting(pf_search_t *s)
{
    for (int c = 0; c < s->map.ncand; c++)
        for (int v = 0; v < PF_SEARCH_VARIANTS; v++)
            for (int k = 0; k < PF_SCHEDULE_COUNT; k++) {
                sim_rec_t *r = &s->sim.cand[c].sim[v][k];
                if (r->job && !r->done && !r->pruned && cannot_win(s, c, v, k)) {
                    pf_search_queue_cancel(s, r->job);
                    r->pruned = true;
                    s->sim.sims_left--;
                }
            }
}

/* Candidate c's resharding times are in (or it needs none): one SIMULATE job per plan and
 * schedule, but for one that cannot win already (cannot_win). An interleaved plan runs
 * Megatron-LM's interleaved 1F1B whatever the schedule (interleave.h), so it is simulated once,
 * as 1F1B when that is asked for. */
static int queue_sims(pf_search_t *s, int c)
{
    for (int v = 0; v < PF_SEARCH_VARIANTS; v++) {
        const pf_plan_t *p = s->sim.cand[c].plan[v];
        unsigned schedules = s->sim.schedules, one = 1u << PF_SCHEDULE_1F1B;
        if (p && p->blocks.present && p->blocks.virtual_stages > 1 && (schedules & one))
            schedules = one;
        for (int k = 0; p && k < PF_SCHEDULE_COUNT; k++) {
            sim_rec_t *r = &s->sim.cand[c].sim[v][k];
            if (!(schedules & (1u << k)))
                continue;
            if (cannot_win(s, c, v, k)) {
                r->pruned = true;
                continue;
            }
            pf_search_owner_t owner = {
                .sim = {.cand = c, .schedule = (pf_training_schedule_t)k, .variant = v}};
            if (!(r->job = pf_search_queue_job(s, PF_JOB_SIMULATE, owner)))
                return PF_ERR;
            s->sim.sims_left++;
        }
    }
    return PF_OK;
}

/* Every simulation is in (or pruned) and no candidate still times its transfers. */
static bool sims_over(const pf_search_t *s)
{
    if (s->sim.sims_left != 0)
        return false;
    for (int c = 0; c < s->map.ncand; c++)
        if (s->sim.cand[c].xfer_left > 0)
            return false;
    return true;
}

/* Replica r's transfer at boundary st as a RESHARD job. */
static bool queue_one_reshard(pf_search_t *s, int c, int st, int r, double bytes)
{
    const pf_plan_t *p = s->sim.cand[c].plan[PF_SEARCH_AS_RANKED];
    int T = cand_tp(s, c);
    xfer_rec_t *x = &s->sim.xfer[s->sim.nxfer];
    x->cand = c;
    x->stage = st;
    x->replica = r;
    pf_simulate_xfer_problem(p->stage_list[st].devices + (size_t)r * T,
                             p->stage_list[st + 1].devices + (size_t)r * T, T, bytes, &x->xp);
    if (!pf_search_queue_job(s, PF_JOB_RESHARD, (pf_search_owner_t){.xfer = s->sim.nxfer}))
        return false;
    s->sim.nxfer++;
    s->sim.cand[c].xfer_left++;
    return true;
}

/* Candidate c (T > 1, S > 1): one RESHARD job per stage boundary and distinct transfer
 * (pf_replica_groups_same_xfers: on a DGX cluster 63 jobs for 64 stages of 256 replicas, not
 * 16,128); the other replicas' times wait for its answer, marked -(1 + its replica) in xfer_ms
 * (absorb_reshard fills them). The bytes after each stage are per device, the tensors crossing
 * its cut in the per-device graph, each once (pf_simulate_cut_bytes: a pipeline relays skip
 * connections through the stages between). */
static int queue_reshards(pf_search_t *s, int c)
{
    sim_cand_t *sc = &s->sim.cand[c];
    const pf_plan_t *p = sc->plan[PF_SEARCH_AS_RANKED];
    int T = cand_tp(s, c), S = p->stages, R = p->replicas, rc = PF_OK;
    int *first = malloc((size_t)R * sizeof *first);
    double *cut = cand_cut_bytes(s, c, p);
    if (!first || !cut || !(sc->xfer_ms = calloc((size_t)(S - 1) * R, sizeof *sc->xfer_ms)))
        rc = PF_ERR;
    for (int st = 0; st + 1 < S && rc == PF_OK; st++) {
        double bytes = cut[st];
        rc = pf_replica_groups_same_xfers(s->c, p->stage_list[st].devices,
                                          p->stage_list[st + 1].devices, R, T, first);
        for (int r = 0; r < R && rc == PF_OK; r++)
            if (first[r] != r)
                sc->xfer_ms[(size_t)st * R + r] = -1.0 - first[r];
            else if (!queue_one_reshard(s, c, st, r, bytes))
                rc = PF_ERR;
    }
    free(first);
    free(cut);
    return rc;
}

/* Every candidate's plans from its best mapping (an interleaved one's flat variant too, unless
 * --virtual-stages fixed v); transfers needing RESHARD jobs counted. */
static int candidate_plans(pf_search_t *s, int *need)
{
    *need = 0;
    if (!(s->sim.cand = calloc((size_t)s->map.ncand + 1, sizeof *s->sim.cand)))
        return PF_ERR;
    for (int c = 0; c < s->map.ncand; c++) {
        sim_cand_t *sc = &s->sim.cand[c];
        pf_plan_t *p = candidate_plan(s, c, PF_SEARCH_AS_RANKED, MAP_OWN, s->o.train.schedule);
        if (!(sc->plan[PF_SEARCH_AS_RANKED] = p))
            return PF_ERR;
        if (p->blocks.present && p->blocks.virtual_stages > 1 && s->o.virtual_stages <= 0 &&
            pf_search_blocks_has_flat(&s->blocks, p) &&
            !(sc->plan[PF_SEARCH_FLAT] =
                  candidate_plan(s, c, PF_SEARCH_FLAT, MAP_OWN, s->o.train.schedule)))
            return PF_ERR;
        if (cand_tp(s, c) > 1)
            *need += (p->stages - 1) * p->replicas;
    }
    return PF_OK;
}

/* T > 1 pipelines first time their cross-stage transfers, then each candidate is simulated under
 * every allowed schedule. */
bool pf_search_sim_start(pf_search_t *s)
{
    int need;
    if (candidate_plans(s, &need) != PF_OK) {
        pf_search_queue_fail(s, PF_ERR, "out of memory");
        return false;
    }
    s->phase = PF_PHASE_SIMULATE;
    if (need > 0 && !(s->sim.xfer = calloc((size_t)need, sizeof *s->sim.xfer))) {
        pf_search_queue_fail(s, PF_ERR, "out of memory");
        return false;
    }
    for (int c = 0; c < s->map.ncand; c++) {
        const pf_plan_t *p = s->sim.cand[c].plan[PF_SEARCH_AS_RANKED];
        int rc = cand_tp(s, c) > 1 && p->stages > 1 ? queue_reshards(s, c) : queue_sims(s, c);
        if (rc != PF_OK) {
            pf_search_queue_fail(s, PF_ERR, "out of memory");
            return false;
        }
    }
    return s->sim.nxfer == 0 && s->sim.sims_left == 0;
}

/* Among every (candidate, plan, schedule) whose memory fits under that schedule, the least
 * simulated step time per sample (ties: the earlier candidate, the plan as ranked, then 1f1b,
 * gpipe, eager-1f1b); -1 none. */
static int best_simulated(const pf_search_t *s, int *best_v, int *best_k)
{
    int best_c = -1;
    double best = INFINITY;
    for (int c = 0; c < s->map.ncand; c++)
        for (int v = 0; v < PF_SEARCH_VARIANTS; v++)
            for (int k = 0; k < PF_SCHEDULE_COUNT; k++) {
                const sim_rec_t *r = &s->sim.cand[c].sim[v][k];
                if (!r->done || !r->fits || r->step_ms / samples(s, c) >= best)
                    continue;
                best = r->step_ms / samples(s, c);
                best_c = c;
                *best_v = v;
                *best_k = k;
            }
    return best_c;
}

/* Does every stage replica of b sit on a's devices (two plans of one candidate)? */
static bool same_devices(const pf_plan_t *a, const pf_plan_t *b)
{
    size_t n = (size_t)a->replicas * (a->tensor_parallel > 0 ? a->tensor_parallel : 1);
    for (int st = 0; st < a->stages; st++)
        if (memcmp(a->stage_list[st].devices, b->stage_list[st].devices, n * sizeof(int)) != 0)
            return false;
    return true;
}

/* The winner's two baselines (CS map, p2p map) as SIMULATE jobs under its schedule: workers run
 * them like any job, so the broker's loop never simulates (issue 23: two simulations of a 1T
 * GPT on 3,072 GPUs kept it from heartbeats for seconds). Their answers are re-run like a
 * leading one (pf_search_sim_rerun), by the broker's helper thread. A baseline on the winner's
 * own devices (often so on NVSwitch hosts, where every map of the groups is one) is the
 * winner: its step, no job. PF_ERR when out of memory queueing them. */
static int queue_baselines(pf_search_t *s)
{
    for (int b = 0; b < 2 + PF_SEARCH_STAGEDEG_PLANS; b++) {
        s->sim.base_ms[b] = NAN;
        pf_training_schedule_t k = b < 2 ? (pf_training_schedule_t)s->sim.best_k
                                         : PF_SCHEDULE_1F1B; /* the per-stage plan's order */
        s->sim.base_plan[b] = b < 2 ? candidate_plan(s, s->sim.best_c, s->sim.best_v,
                                                     b == 0 ? MAP_CS : MAP_P2P, k)
                                    : pf_search_stagedeg_plan(s, b - 2, s->sim.stagedeg_why,
                                                              sizeof s->sim.stagedeg_why);
        if (!s->sim.base_plan[b])
            continue;
        if (b < 2 && same_devices(s->sim.pending, s->sim.base_plan[b])) {
            s->sim.base_ms[b] = s->sim.pending->simulated_step_ms;
            s->sim.base_fits[b] = true;
            continue;
        }
        pf_search_owner_t owner = {.sim = {.cand = s->sim.best_c, .schedule = k,
                                            .baseline = b + 1, .variant = s->sim.best_v}};
        if (!pf_search_queue_job(s, PF_JOB_SIMULATE, owner))
            return PF_ERR;
        s->sim.base_left++;
    }
    return PF_OK;
}

/* A baseline that fits and simulates faster than the winner gives the plan its devices: the
 * mapping objective (Parmesan's eq. 5) prices neither the schedule nor interleaving's hops, and
 * its eq. 7 ring over the slowest pair prices the data-parallel reduction otherwise than the
 * simulator's NCCL algorithms (ResNet-50 on 4 DGX-1 in 4 stages: the p2p map 220 ms, the
 * searched devices 417). The plan keeps its mapping search's record, with that step. */
static pf_plan_t *adopt_faster_baseline(pf_search_t *s, pf_plan_t *p)
{
    int b = -1;
    double best = p->simulated_step_ms;
    for (int i = 0; i < 2; i++)
        if (s->sim.base_plan[i] && s->sim.base_fits[i] && s->sim.base_ms[i] < best * (1 - 1e-9))
            best = s->sim.base_ms[i], b = i;
    if (b < 0)
        return p;
    pf_plan_t *q = s->sim.base_plan[b];
    s->sim.base_plan[b] = NULL;
    q->mapping = p->mapping;
    q->mapping.searched_step_ms = p->simulated_step_ms;
    q->simulated_step_ms = best;
    (b == 0 ? &q->cs_map : &q->p2p_map)->adopted = 1;
    pf_plan_destroy(&p);
    return q;
}

/* The plan: the best simulated pair, with the baselines under the same simulator and schedule
 * (so that their ratios mean something), on a baseline's devices where they are faster. Called
 * twice: when the candidates' simulations are in (it queues the baselines) and when the
 * baselines are (it finishes). */
void pf_search_sim_finish(pf_search_t *s)
{
    if (s->sim.stagedeg_alone) {
        pf_search_stagedeg_finish_alone(s);
        return;
    }
    if (!s->sim.pending) {
        int best_v = -1, best_k = -1, best_c = best_simulated(s, &best_v, &best_k);
        if (best_c < 0 && !pf_search_stagedeg_alone(s)) /* per-stage plans may fit yet */
            pf_search_queue_fail(s, PF_EINFEASIBLE, "no candidate's memory fits its devices "
                                 "under any schedule simulated (%d candidates)%s%s",
                                 s->map.ncand, s->sim.stagedeg_why[0] ? "; per-stage degrees: " : "",
                                 s->sim.stagedeg_why);
        if (best_c < 0)
            return;
        if (!(s->sim.pending = candidate_plan(s, best_c, best_v, MAP_OWN,
                                              (pf_training_schedule_t)best_k))) {
            pf_search_queue_fail(s, PF_ERR, "out of memory");
            return;
        }
        s->sim.pending->simulated_step_ms = s->sim.cand[best_c].sim[best_v][best_k].step_ms;
        s->sim.best_c = best_c;
        s->sim.best_v = best_v;
        s->sim.best_k = best_k;
        if (queue_baselines(s) != PF_OK) {
            pf_search_queue_fail(s, PF_ERR, "out of memory");
            return;
        }
        if (s->sim.base_left > 0)
            return;
    }
    pf_plan_t *p = s->sim.pending;
    s->sim.pending = NULL;
    if (isfinite(s->sim.base_ms[0]) && isfinite(s->sim.base_ms[1])) {
        p = adopt_faster_baseline(s, p);
        p->cs_map.simulated_step_ms = s->sim.base_ms[0];
        p->p2p_map.simulated_step_ms = s->sim.base_ms[1];
    }
    pf_search_stagedeg_choose(s, &p, s->sim.stagedeg_why);
    p->search.present = 1;
    p->search.jobs = s->njobs;
    s->result = p;
    s->phase = PF_PHASE_DONE;
    s->status = PF_OK;
}

void pf_search_sim_describe(const pf_search_t *s, const pf_search_owner_t *owner, pf_job_t *job)
{
    if (owner->sim.baseline) { /* a baseline maps the groups otherwise and times no reshard */
        /* a per-stage plan: its entry's setting (there may be no candidate at all) */
        int tpi = owner->sim.baseline >= 3 ? pf_search_stagedeg_tp(s)
                                           : s->part.dp[s->map.cand[owner->sim.cand].dp].tp;
        job->setting = s->tap.tp[tpi].opts;
        job->plan = s->sim.base_plan[owner->sim.baseline - 1];
        job->schedule = owner->sim.schedule;
        job->xfer_ms = NULL;
        job->nxfer = 0;
        return;
    }
    const sim_cand_t *sc = &s->sim.cand[owner->sim.cand];
    job->setting = s->tap.tp[s->part.dp[s->map.cand[owner->sim.cand].dp].tp].opts;
    job->plan = sc->plan[owner->sim.variant];
    job->schedule = owner->sim.schedule;
    job->xfer_ms = sc->xfer_ms;
    job->nxfer = sc->xfer_ms ? (job->plan->stages - 1) * job->plan->replicas : 0;
}

static bool close_to(double a, double b)
{
    return fabs(a - b) <= 1e-6 * fmax(fabs(a), fabs(b)) + 1e-12;
}

/* A SIMULATE answer that fits and would lead (no done pair has a smaller step per sample; ties
 * count, an earlier candidate may win them) can make the plan, so it is run again: the
 * simulator is deterministic and one run is cheap next to the search. An answer that cannot
 * lead (it does not fit, or a done pair beats it) is taken as it is: it can only make the plan
 * worse, by keeping a candidate out. A baseline's step goes into the plan as it is: always
 * re-run (on the broker, off its loop), so that every number of the plan was computed on the
 * trusted side. */
bool pf_search_sim_rerun(const pf_search_t *s, const pf_search_owner_t *owner,
                         const pf_job_result_t *res)
{
    if (owner->sim.baseline)
        return true;
    if (!res->sim.fits)
        return false;
    return res->sim.step_ms / samples(s, owner->sim.cand) <= best_per_sample(s);
}

int pf_search_sim_agree(const pf_job_result_t *res, const pf_job_result_t *own, char *err,
                        size_t errlen)
{
    if (own->sim.fits != res->sim.fits || !close_to(own->sim.step_ms, res->sim.step_ms) ||
        !close_to(own->sim.mem_bytes, res->sim.mem_bytes) ||
        !close_to(own->sim.bubble_fraction, res->sim.bubble_fraction))
        return pf_fail(err, errlen, PF_EINPUT, "simulate answer: step %g ms (fits %d), "
                       "re-simulated here: %g ms (fits %d)", res->sim.step_ms, res->sim.fits,
                       own->sim.step_ms, own->sim.fits);
    return PF_OK;
}

int pf_search_sim_verify(const pf_search_t *s, const pf_search_owner_t *owner, const pf_job_t *job,
                         const pf_job_result_t *res, char *err, size_t errlen)
{
    if (!pf_search_sim_rerun(s, owner, res))
        return PF_OK;
    pf_job_result_t own;
    int rc = pf_job_run(job, &own);
    if (rc != PF_OK)
        rc = pf_fail(err, errlen, PF_EINPUT, "simulate answer: step %g ms could not be "
                     "re-simulated here: %s", res->sim.step_ms, own.error);
    else
        rc = pf_search_sim_agree(res, &own, err, errlen);
    pf_job_result_clear(&own);
    return rc;
}

bool pf_search_sim_absorb(pf_search_t *s, uint64_t id, const pf_search_owner_t *owner,
                          const pf_job_result_t *res)
{
    (void)id;
    if (owner->sim.baseline) { /* the plan waits for both */
        s->sim.base_ms[owner->sim.baseline - 1] = res->sim.step_ms;
        s->sim.base_fits[owner->sim.baseline - 1] = res->sim.fits;
        return --s->sim.base_left == 0;
    }
    sim_rec_t *r = &s->sim.cand[owner->sim.cand].sim[owner->sim.variant][owner->sim.schedule];
    r->done = true;
    r->fits = res->sim.fits;
    r->step_ms = res->sim.step_ms;
    r->bubble_fraction = res->sim.bubble_fraction;
    s->sim.sims_left--;
    if (r->fits)
        prune_waiting(s);
    return sims_over(s);
}

void pf_search_sim_describe_reshard(const pf_search_t *s, const pf_search_owner_t *owner,
                                    pf_job_t *job)
{
    job->graph = NULL; /* the network is the cluster */
    job->reshard = s->sim.xfer[owner->xfer].xp.problem;
    job->reshard_opts.sched.dfs_budget_s = 0; /* the node cap: one answer everywhere */
}

bool pf_search_sim_absorb_reshard(pf_search_t *s, uint64_t id, const pf_search_owner_t *owner,
                                  const pf_job_result_t *res)
{
    (void)id;
    const xfer_rec_t *x = &s->sim.xfer[owner->xfer];
    sim_cand_t *sc = &s->sim.cand[x->cand];
    const pf_reshard_problem_t *xp = &x->xp.problem; /* or Megatron's scatter/gather */
    double sg = pf_simulate_xfer_scatter_gather_ms(s->c, xp->src_mesh.devices, xp->dst_mesh.devices,
                                              xp->src_mesh.cols, (double)x->xp.shape[0], 0);
    const pf_plan_t *p = sc->plan[PF_SEARCH_AS_RANKED];
    int R = p->replicas;
    double *row = sc->xfer_ms + (size_t)x->stage * R;
    row[x->replica] = fmin(res->reshard.time_ms, sg);
    for (int r = x->replica + 1; r < R; r++) /* the transfers this answer serves */
        if (row[r] == -1.0 - x->replica) {
            const int *src = p->stage_list[x->stage].devices + (size_t)r * xp->src_mesh.cols;
            const int *dst = p->stage_list[x->stage + 1].devices +
                             (size_t)r * xp->src_mesh.cols;
            row[r] = fmin(res->reshard.time_ms,
                          pf_simulate_xfer_scatter_gather_ms(s->c, src, dst, xp->src_mesh.cols,
                                                        (double)x->xp.shape[0], 0));
        }
    if (--sc->xfer_left != 0)
        return false;
    if (queue_sims(s, x->cand) != PF_OK) {
        pf_search_queue_fail(s, PF_ERR, "out of memory");
        return false;
    }
    return sims_over(s); /* its simulations may all have been pruned */
}

/* A RESHARD answer sets a candidate's cross-stage transfer times, which its SIMULATE jobs (and
 * their re-runs above) take as given, so every one is solved again: one stage boundary of one
 * replica, T devices to T, under the node cap that makes the answer the same everywhere
 * (describe_reshard), costs little next to the search. */
bool pf_search_sim_rerun_reshard(const pf_search_t *s, const pf_search_owner_t *owner,
                                 const pf_job_result_t *res)
{
    (void)s, (void)owner, (void)res;
    return true;
}

int pf_search_sim_agree_reshard(const pf_job_result_t *res, const pf_job_result_t *own,
                                char *err, size_t errlen)
{
    if (close_to(own->reshard.time_ms, res->reshard.time_ms))
        return PF_OK;
    return pf_fail(err, errlen, PF_EINPUT, "reshard answer: %g ms, re-solved here: %g ms",
                   res->reshard.time_ms, own->reshard.time_ms);
}

void pf_search_sim_clear(pf_search_t *s)
{
    for (int c = 0; s->sim.cand && c < s->map.ncand; c++) {
        pf_plan_destroy(&s->sim.cand[c].plan[PF_SEARCH_AS_RANKED]);
        pf_plan_destroy(&s->sim.cand[c].plan[PF_SEARCH_FLAT]);
        free(s->sim.cand[c].xfer_ms);
    }
    free(s->sim.cand);
    free(s->sim.xfer);
    pf_plan_destroy(&s->sim.pending);
    pf_plan_destroy(&s->sim.base_plan[0]);
    pf_plan_destroy(&s->sim.base_plan[1]);
    for (int b = 2; b < 2 + PF_SEARCH_STAGEDEG_PLANS; b++)
        pf_plan_destroy(&s->sim.base_plan[b]);
}

const pf_search_kind_t pf_search_sim_kinds[] = {
    {PF_JOB_RESHARD, pf_search_sim_describe_reshard, pf_search_sim_absorb_reshard,
         "resharding job", NULL},
    {PF_JOB_SIMULATE, pf_search_sim_describe, pf_search_sim_absorb, "simulation job", NULL},
    {PF_JOB_KIND_COUNT, NULL, NULL, NULL, NULL},
};

const pf_search_rerun_t pf_search_sim_reruns[] = {
    {PF_JOB_SIMULATE, pf_search_sim_rerun, pf_search_sim_agree},
    {PF_JOB_RESHARD, pf_search_sim_rerun_reshard, pf_search_sim_agree_reshard},
    {PF_JOB_KIND_COUNT, NULL, NULL},
};
