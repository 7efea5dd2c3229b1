#include "planner/ir/plan.h"
#include "planner/ir/plan_blocks.h"
#include "planner/ir/plan_rates.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int pf_plan_context_parallel(const pf_plan_t *p)
{
    return p->blocks.present && p->blocks.context_parallel > 1 ? p->blocks.context_parallel : 1;
}

int pf_plan_expert_parallel(const pf_plan_t *p)
{
    return p->blocks.present && p->blocks.expert_parallel > 1 ? p->blocks.expert_parallel : 1;
}

pf_plan_t *pf_plan_new(int stages, int replicas)
{
    if (stages <= 0 || replicas <= 0)
        return NULL;
    pf_plan_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->stage_list = calloc((size_t)stages, sizeof *p->stage_list);
    if (!p->stage_list) {
        free(p);
        return NULL;
    }
    p->stages = stages;
    p->replicas = replicas;
    p->tensor_parallel = 1;
    p->microbatches = 4;
    snprintf(p->schedule, sizeof p->schedule, "1f1b");
    pf_training_init(&p->train);
    p->partition_objective_ms = NAN;
    p->objective_ms = NAN;
    p->simulated_step_ms = NAN;
    p->mapping.objective_ms = p->mapping.lower_bound_ms = NAN;
    p->mapping.initial_lower_bound_ms = p->mapping.initial_upper_bound_ms = NAN;
    for (int s = 0; s < stages; s++) {
        pf_stage_t *st = &p->stage_list[s];
        st->compute_ms = st->time_ms = st->peak_mem_bytes = NAN;
        st->mem_weights_bytes = st->mem_grads_bytes = st->mem_optimizer_bytes = NAN;
        st->mem_activations_bytes = st->mem_reserve_bytes = NAN;
    }
    return p;
}

void pf_plan_destroy(pf_plan_t **pp)
{
    if (!pp || !*pp)
        return;
    pf_plan_t *p = *pp;
    for (int s = 0; s < p->stages; s++) {
        free(p->stage_list[s].ops);
        free(p->stage_list[s].devices);
    }
    free(p->stage_list);
    free(p->tp_split);
    free(p->tp_colls);
    free(p->tp_comm_ms);
    free(p->model);
    free(p->cluster);
    free(p);
    *pp = NULL;
}

int pf_plan_set_stage_ops(pf_plan_t *p, int s, const int *ops, int nops)
{
    int *copy = malloc((size_t)(nops ? nops : 1) * sizeof *copy);
    if (!copy)
        return PF_ERR;
    if (nops)
        memcpy(copy, ops, (size_t)nops * sizeof *copy);
    free(p->stage_list[s].ops);
    p->stage_list[s].ops = copy;
    p->stage_list[s].nops = nops;
    return PF_OK;
}

int *pf_plan_stage_devices(pf_plan_t *p, int s)
{
    pf_stage_t *st = &p->stage_list[s];
    int n = pf_plan_degrees_ndevices(p, s);
    if (!st->devices) {
        st->devices = malloc((size_t)n * sizeof(int));
        if (!st->devices)
            return NULL;
        for (int r = 0; r < n; r++)
            st->devices[r] = -1;
    }
    return st->devices;
}

int pf_plan_set_tensor_parallel(pf_plan_t *p, int T)
{
    if (T < 1)
        return PF_EINPUT;
    for (int s = 0; s < p->stages; s++) {
        free(p->stage_list[s].devices);
        p->stage_list[s].devices = NULL;
    }
    p->tensor_parallel = T;
    return PF_OK;
}

int pf_plan_alloc_tp(pf_plan_t *p, int nops)
{
    free(p->tp_split);
    free(p->tp_colls);
    free(p->tp_comm_ms);
    p->tp_split = calloc((size_t)nops + 1, sizeof *p->tp_split);
    p->tp_colls = calloc((size_t)nops + 1, sizeof *p->tp_colls);
    p->tp_comm_ms = calloc((size_t)nops + 1, sizeof *p->tp_comm_ms);
    if (!p->tp_split || !p->tp_colls || !p->tp_comm_ms) {
        free(p->tp_split);
        free(p->tp_colls);
        free(p->tp_comm_ms);
        p->tp_split = NULL;
        p->tp_colls = NULL;
        p->tp_comm_ms = NULL;
        p->tp_nops = 0;
        return PF_ERR;
    }
    for (int v = 0; v < nops; v++)
        p->tp_split[v] = -2;
    p->tp_nops = nops;
    return PF_OK;
}

int pf_plan_is_mapped(const pf_plan_t *p)
{
    for (int s = 0; s < p->stages; s++) {
        if (!p->stage_list[s].devices)
            return 0;
        for (int r = 0; r < pf_plan_degrees_ndevices(p, s); r++)
            if (p->stage_list[s].devices[r] < 0)
                return 0;
    }
    return 1;
}

void pf_plan_set_names(pf_plan_t *p, const char *model, const char *cluster)
{
    char *m = pf_strdup(model), *c = pf_strdup(cluster);
    free(p->model);
    free(p->cluster);
    p->model = m;
    p->cluster = c;
}

pf_plan_t *pf_plan_clone(const pf_plan_t *src)
{
    pf_plan_t *p = pf_plan_new(src->stages, src->replicas);
    if (!p)
        return NULL;
    pf_stage_t *keep = p->stage_list;
    *p = *src;
    p->stage_list = keep;
    p->model = p->cluster = NULL;
    p->tp_split = NULL;
    p->tp_colls = NULL;
    p->tp_comm_ms = NULL;
    p->tp_nops = 0;
    pf_plan_set_names(p, src->model, src->cluster);
    if (src->tp_nops > 0) {
        if (pf_plan_alloc_tp(p, src->tp_nops) != PF_OK)
            goto fail;
        memcpy(p->tp_split, src->tp_split, (size_t)src->tp_nops * sizeof *p->tp_split);
        memcpy(p->tp_colls, src->tp_colls, (size_t)src->tp_nops * sizeof *p->tp_colls);
        memcpy(p->tp_comm_ms, src->tp_comm_ms, (size_t)src->tp_nops * sizeof *p->tp_comm_ms);
    }
    for (int s = 0; s < src->stages; s++) {
        const pf_stage_t *a = &src->stage_list[s];
        pf_stage_t *b = &p->stage_list[s];
        *b = *a;
        b->ops = NULL;
        b->devices = NULL;
        b->nops = 0;
        if (pf_plan_set_stage_ops(p, s, a->ops, a->nops) != PF_OK)
            goto fail;
        if (a->devices) {
            int *d = pf_plan_stage_devices(p, s);
            if (!d)
                goto fail;
            memcpy(d, a->devices, (size_t)pf_plan_degrees_ndevices(src, s) * sizeof *d);
        }
    }
    if ((src->model && !p->model) || (src->cluster && !p->cluster))
        goto fail;
    return p;
fail:
    pf_plan_destroy(&p);
    return NULL;
}

int *pf_plan_op_stage(const pf_plan_t *p, int nops)
{
    int *st = malloc((size_t)(nops ? nops : 1) * sizeof *st);
    if (!st)
        return NULL;
    for (int v = 0; v < nops; v++)
        st[v] = -1;
    for (int s = 0; s < p->stages; s++)
        for (int i = 0; i < p->stage_list[s].nops; i++) {
            int v = p->stage_list[s].ops[i];
            if (v >= 0 && v < nops)
                st[v] = s;
        }
    return st;
}

int pf_plan_validate(const pf_plan_t *p, const pf_graph_t *g, const pf_cluster_t *c, char *err,
                     size_t errlen)
{
    int n = pf_graph_nops(g), D = pf_cluster_ndevices(c), rc = PF_EINPUT;
    int *owner = malloc((size_t)n * sizeof *owner);
    int *used = calloc((size_t)D, sizeof *used);
    if (!owner || !used) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    if ((rc = pf_plan_degrees_check(p, D, err, errlen)) != PF_OK)
        goto fail;
    rc = PF_EINPUT;
    for (int v = 0; v < n; v++)
        owner[v] = -1;
    for (int s = 0; s < p->stages; s++) {
        const pf_stage_t *st = &p->stage_list[s];
        if (st->nops == 0) {
            pf_fail(err, errlen, rc, "stage_list[%d]: no ops", s);
            goto fail;
        }
        for (int i = 0; i < st->nops; i++) {
            int v = st->ops[i];
            if (v < 0 || v >= n) {
                pf_fail(err, errlen, rc, "stage_list[%d].ops[%d]: not an op of the graph", s, i);
                goto fail;
            }
            if (owner[v] >= 0) {
                pf_fail(err, errlen, rc, "stage_list[%d]: op %lld is also in stage %d", s,
                        (long long)pf_graph_op(g, v)->id, owner[v]);
                goto fail;
            }
            owner[v] = s;
        }
        if (st->devices) {
            for (int r = 0; r < pf_plan_degrees_ndevices(p, s); r++) {
                int d = st->devices[r];
                if (d < 0 || d >= D) {
                    pf_fail(err, errlen, rc, "stage_list[%d].devices[%d]: not a device", s, r);
                    goto fail;
                }
                if (used[d]++) {
                    pf_fail(err, errlen, rc, "stage_list[%d].devices[%d]: device %lld used twice",
                            s, r, (long long)pf_cluster_device(c, d)->id);
                    goto fail;
                }
            }
        }
    }
    for (int v = 0; v < n; v++) {
        if (owner[v] < 0) {
            pf_fail(err, errlen, rc, "stage_list: op %lld (%s) is in no stage",
                    (long long)pf_graph_op(g, v)->id, pf_graph_op(g, v)->name);
            goto fail;
        }
    }
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (owner[ed->src] > owner[ed->dst]) {
            pf_fail(err, errlen, rc,
                    "stage_list[%d]: op %lld feeds op %lld in earlier stage %d (stages must "
                    "follow the graph's order)",
                    owner[ed->src], (long long)pf_graph_op(g, ed->src)->id,
                    (long long)pf_graph_op(g, ed->dst)->id, owner[ed->dst]);
            goto fail;
        }
    }
    rc = PF_OK;
fail:
    free(owner);
    free(used);
    return rc;
}

/* ---- files ---- */

static int find_device(const pf_cluster_t *c, int64_t id)
{
    for (int i = 0; i < pf_cluster_ndevices(c); i++)
        if (pf_cluster_device(c, i)->id == id)
            return i;
    return -1;
}

/* The partitioner's part of "search" travels with the plan from `partition` to `map`. */
/* "training": absent = the default (mixed-precision Adam, no ZeRO, no recomputation, 1F1B). */
static int read_training(json_t *root, pf_training_t *t, char *err, size_t errlen)
{
    const char *prec, *opt, *rec, *sched;
    int64_t zero;
    json_t *jt = json_object_get(root, "training");
    pf_training_init(t);
    if (!jt)
        return PF_OK;
    if (!json_is_object(jt))
        return pf_fail(err, errlen, PF_EINPUT, "plan.training: not an object");
    int rc;
    if ((rc = pf_json_get_string(jt, "plan.training", "precision", 0, "bf16", &prec, err, errlen)) ||
        (rc = pf_json_get_string(jt, "plan.training", "optimizer", 0, "adam", &opt, err, errlen)) ||
        (rc = pf_json_get_string(jt, "plan.training", "recompute", 0, "none", &rec, err, errlen)) ||
        (rc = pf_json_get_int(jt, "plan.training", "zero", PF_JSON_GET_NONNEG, 0, &zero, err, errlen)))
        return rc;
    sched = json_string_value(json_object_get(root, "schedule"));
    int a = pf_training_precision_parse(prec), b = pf_training_optimizer_parse(opt),
        c = pf_training_recompute_parse(rec);
    int d = sched ? pf_training_schedule_parse(sched) : PF_SCHEDULE_1F1B;
    if (a < 0 || b < 0 || c < 0 || zero > 3)
        return pf_fail(err, errlen, PF_EINPUT, "plan.training: precision '%s', optimizer '%s', "
                       "recompute '%s' or zero %lld is not known", prec, opt, rec,
                       (long long)zero);
    t->precision_bytes = a;
    t->optimizer = (pf_training_optimizer_t)b;
    t->recompute = (pf_training_recompute_t)c;
    t->zero = (int)zero;
    t->schedule = d >= 0 ? (pf_training_schedule_t)d : PF_SCHEDULE_1F1B;
    return PF_OK;
}

/* context_parallel and expert_parallel (absent: 1) */
static int read_cpep(json_t *root, pf_plan_t *p, char *err, size_t errlen)
{
    int64_t cp = 1, ep = 1;
    int rc = pf_json_get_int(root, "plan", "context_parallel", PF_JSON_GET_POSITIVE, 1, &cp, err,
                             errlen);
    if (!rc)
        rc = pf_json_get_int(root, "plan", "expert_parallel", PF_JSON_GET_POSITIVE, 1, &ep, err,
                             errlen);
    if (!rc && (cp > 1 << 20 || ep > 1 << 20 || p->replicas % cp))
        rc = pf_fail(err, errlen, PF_EINPUT, "plan: context_parallel %lld does not divide the "
                     "%d replicas, or context_parallel / expert_parallel too large",
                     (long long)cp, p->replicas);
    p->blocks.context_parallel = (int)cp, p->blocks.expert_parallel = (int)ep;
    return rc;
}

/* The block search's keys (write_block_search), so that a plan read back exports and writes them
 * again; absent = no block search. */
static int read_block_search(json_t *root, pf_plan_t *p, char *err, size_t errlen)
{
    int64_t b, v, n[4] = {0};
    static const char *const keys[4] = {"layers_first", "layers_middle", "layers_last",
                                        "candidates"};
    const char *at = "plan.block_search";
    json_t *sp = json_object_get(root, "sequence_parallel");
    json_t *tpo = json_object_get(root, "tp_comm_overlap");
    json_t *bs = json_object_get(root, "block_search");
    if (!json_object_get(root, "microbatch_size"))
        return PF_OK;
    if (sp && !json_is_boolean(sp))
        return pf_fail(err, errlen, PF_EINPUT, "plan.sequence_parallel: not true or false");
    if (tpo && !json_is_boolean(tpo))
        return pf_fail(err, errlen, PF_EINPUT, "plan.tp_comm_overlap: not true or false");
    int rc = pf_json_get_int(root, "plan", "microbatch_size", PF_JSON_GET_POSITIVE, 1, &b, err,
                             errlen);
    if (!rc)
        rc = pf_json_get_int(root, "plan", "virtual_stages", PF_JSON_GET_POSITIVE, 1, &v, err,
                             errlen);
    for (int i = 0; i < 4 && bs && !rc; i++)
        rc = pf_json_get_int(bs, at, keys[i], PF_JSON_GET_NONNEG, 0, &n[i], err, errlen);
    if (bs && !rc)
        rc = pf_json_get_number(bs, at, "analytic_step_ms", PF_JSON_GET_NONNEG, 0,
                                &p->blocks.analytic_step_ms, err, errlen);
    if (bs && !rc)
        rc = pf_json_get_number(bs, at, "wall_s", PF_JSON_GET_NONNEG, 0, &p->blocks.wall_s, err,
                                errlen);
    if (rc)
        return rc;
    if (b > 1 << 20 || v > 1 << 10 || n[0] > 1 << 20 || n[1] > 1 << 20 || n[2] > 1 << 20 ||
        n[3] > 1 << 20)
        return pf_fail(err, errlen, PF_EINPUT, "plan: microbatch_size, virtual_stages or "
                       "block_search too large");
    p->blocks.present = 1;
    p->blocks.microbatch_size = (int)b, p->blocks.virtual_stages = (int)v;
    p->blocks.sequence_parallel = json_is_true(sp);
    if ((rc = read_cpep(root, p, err, errlen)) != PF_OK)
        return rc;
    p->blocks.tp_comm_overlap = json_is_true(tpo);
    p->train.sequence_parallel = p->blocks.sequence_parallel; /* its memory (tp/seqpar.h) */
    p->blocks.first_layers = (int)n[0], p->blocks.mid_layers = (int)n[1];
    p->blocks.last_layers = (int)n[2], p->blocks.candidates = (int)n[3];
    return PF_OK;
}

static int read_partition_search(json_t *root, pf_plan_t *p, char *err, size_t errlen)
{
    json_t *se = json_object_get(root, "search"), *exact;
    int64_t ops, hyper, moves, downsets;
    int rc;
    if (!json_is_object(se) || !json_object_get(se, "downsets"))
        return PF_OK;
    if ((rc = pf_json_get_int(se, "search", "ops", PF_JSON_GET_NONNEG, 0, &ops, err, errlen)) ||
        (rc = pf_json_get_int(se, "search", "hyper_ops", PF_JSON_GET_NONNEG, 0, &hyper, err, errlen)) ||
        (rc = pf_json_get_int(se, "search", "downsets", PF_JSON_GET_NONNEG, 0, &downsets, err, errlen)) ||
        (rc = pf_json_get_number(se, "search", "alpha", PF_JSON_GET_NONNEG, NAN, &p->partition_search.alpha,
                           err, errlen)) ||
        (rc = pf_json_get_number(se, "search", "flat_gbps", PF_JSON_GET_NONNEG, NAN,
                           &p->partition_search.flat_gbps, err, errlen)) ||
        (rc = pf_json_get_number(se, "search", "coarsen_s", PF_JSON_GET_NONNEG, NAN,
                           &p->partition_search.coarsen_s, err, errlen)) ||
        (rc = pf_json_get_number(se, "search", "dp_s", PF_JSON_GET_NONNEG, NAN, &p->partition_search.dp_s,
                           err, errlen)) ||
        (rc = pf_json_get_number(se, "search", "refine_s", PF_JSON_GET_NONNEG, NAN,
                           &p->partition_search.refine_s, err, errlen)) ||
        (rc = pf_json_get_int(se, "search", "refine_moves", PF_JSON_GET_NONNEG, 0, &moves, err, errlen)) ||
        (rc = pf_json_get_number(se, "search", "objective_before_refine_ms", PF_JSON_GET_NONNEG, NAN,
                           &p->partition_search.objective_before_refine_ms, err, errlen)))
        return rc;
    if (ops > 1 << 30 || hyper > 1 << 30 || moves > 1 << 30)
        return pf_fail(err, errlen, PF_EINPUT, "search: counts out of range");
    exact = json_object_get(se, "exact");
    p->partition_search.present = 1;
    p->partition_search.ops = (int)ops;
    p->partition_search.hyper_ops = (int)hyper;
    p->partition_search.refine_moves = (int)moves;
    p->partition_search.downsets = downsets;
    p->partition_search.exact = !exact || json_is_true(exact);
    return PF_OK;
}

/* stage_list[s].ops: op ids of graph g, as indices into ops (room for every op). */
static int stage_ops_from_json(json_t *jops, const char *path, const pf_graph_t *g, int *ops,
                               size_t *k, char *err, size_t errlen)
{
    *k = json_array_size(jops);
    if (*k > (size_t)pf_graph_nops(g))
        return pf_fail(err, errlen, PF_EINPUT, "%s.ops: more ops than the graph has", path);
    for (size_t i = 0; i < *k; i++) {
        json_t *v = json_array_get(jops, i);
        int idx = json_is_integer(v) ? pf_graph_find(g, json_integer_value(v)) : -1;
        if (idx < 0)
            return pf_fail(err, errlen, PF_EINPUT, "%s.ops[%zu]: not an op id of graph %s", path,
                           i, pf_graph_name(g));
        ops[i] = idx;
    }
    return PF_OK;
}

/* stage_list[s].devices, when given: T = 1 one device id per replica; T > 1 a list of T ids per
 * replica. */
static int stage_devices_from_json(json_t *jdev, const char *path, pf_plan_t *p, int s,
                                   const pf_cluster_t *c, int64_t replicas, int64_t tp,
                                   char *err, size_t errlen)
{
    if (json_array_size(jdev) != (size_t)replicas)
        return pf_fail(err, errlen, PF_EINPUT, "%s.devices: %zu entries, replicas = %lld", path,
                       json_array_size(jdev), (long long)replicas);
    int *d = pf_plan_stage_devices(p, s);
    if (!d)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (int r = 0; r < replicas; r++) {
        json_t *v = json_array_get(jdev, (size_t)r);
        if (tp > 1 && (!json_is_array(v) || json_array_size(v) != (size_t)tp))
            return pf_fail(err, errlen, PF_EINPUT, "%s.devices[%d]: not a list of %lld "
                           "device ids (tensor_parallel)", path, r, (long long)tp);
        for (int k = 0; k < tp; k++) {
            json_t *x = tp > 1 ? json_array_get(v, (size_t)k) : v;
            int *dk = &d[r * tp + k];
            *dk = json_is_integer(x) ? find_device(c, json_integer_value(x)) : -1;
            if (*dk >= 0)
                continue;
            if (tp > 1)
                return pf_fail(err, errlen, PF_EINPUT, "%s.devices[%d][%d]: not a device id of "
                               "cluster %s", path, r, k, pf_cluster_name(c));
            return pf_fail(err, errlen, PF_EINPUT, "%s.devices[%d]: not a device id of cluster "
                           "%s", path, r, pf_cluster_name(c));
        }
    }
    return PF_OK;
}

/* stage_list[s]: its ops, its numbers, its devices. */
static int stage_from_json(json_t *st, int s, pf_plan_t *p, const pf_graph_t *g,
                           const pf_cluster_t *c, int *ops, char *err, size_t errlen)
{
    json_t *jops, *jdev;
    char path[64];
    size_t k;
    int rc;
    snprintf(path, sizeof path, "stage_list[%d]", s);
    if (!json_is_object(st))
        return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
    if ((rc = pf_json_get_array(st, path, "ops", PF_JSON_GET_REQUIRED, &jops, err, errlen)) ||
        (rc = pf_json_get_array(st, path, "devices", 0, &jdev, err, errlen)) ||
        (rc = stage_ops_from_json(jops, path, g, ops, &k, err, errlen)))
        return rc;
    if (pf_plan_set_stage_ops(p, s, ops, (int)k) != PF_OK)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    pf_stage_t *sl = &p->stage_list[s];
    if ((rc = pf_json_get_number(st, path, "compute_ms", PF_JSON_GET_NONNEG, NAN,
                                 &sl->compute_ms, err, errlen)) ||
        (rc = pf_json_get_number(st, path, "time_ms", PF_JSON_GET_NONNEG, NAN, &sl->time_ms,
                                 err, errlen)) ||
        (rc = pf_json_get_number(st, path, "peak_mem_bytes", PF_JSON_GET_NONNEG, NAN,
                                 &sl->peak_mem_bytes, err, errlen)) ||
        (rc = pf_plan_recompute_read(st, path, sl, err, errlen)) ||
        (rc = pf_plan_degrees_read(st, path, sl, err, errlen)))
        return rc;
    if (jdev && json_array_size(jdev) > 0)
        return stage_devices_from_json(jdev, path, p, s, c, pf_plan_degrees_replicas(p, s),
                                       pf_plan_degrees_tp(p, s), err, errlen);
    return PF_OK;
}

static int from_json(json_t *root, const pf_graph_t *g, const pf_cluster_t *c, pf_plan_t **out,
                     char *err, size_t errlen)
{
    int64_t stages, replicas, mb, tp;
    json_t *list;
    const char *model, *cluster, *schedule;
    int rc;
    pf_plan_t *p = NULL;
    int *ops = NULL;

    if (!json_is_object(root))
        return pf_fail(err, errlen, PF_EINPUT, "top level: not an object");
    int64_t version;
    if ((rc = pf_json_get_int(root, "plan", "version", PF_JSON_GET_POSITIVE, 1, &version, err,
                              errlen)))
        return rc;
    if (version > PF_PLAN_VERSION)
        return pf_fail(err, errlen, PF_EINPUT, "plan.version: %lld is newer than this planfarm "
                       "reads (1 to %d)", (long long)version, PF_PLAN_VERSION);
    if ((rc = pf_json_get_string(root, "plan", "model", 0, "", &model, err, errlen)) ||
        (rc = pf_json_get_string(root, "plan", "cluster", 0, "", &cluster, err, errlen)) ||
        (rc = pf_json_get_int(root, "plan", "stages", PF_JSON_GET_REQUIRED | PF_JSON_GET_POSITIVE, 0, &stages, err,
                        errlen)) ||
        (rc = pf_json_get_int(root, "plan", "replicas", PF_JSON_GET_REQUIRED | PF_JSON_GET_POSITIVE, 0, &replicas,
                        err, errlen)) ||
        (rc = pf_json_get_int(root, "plan", "microbatches", PF_JSON_GET_POSITIVE, 4, &mb, err, errlen)) ||
        (rc = pf_json_get_int(root, "plan", "tensor_parallel", PF_JSON_GET_POSITIVE, 1, &tp, err, errlen)) ||
        (rc = pf_json_get_string(root, "plan", "schedule", 0, "1f1b", &schedule, err, errlen)) ||
        (rc = pf_json_get_array(root, "plan", "stage_list", PF_JSON_GET_REQUIRED, &list, err, errlen)))
        return rc;
    if (stages > 1 << 20 || replicas > 1 << 20 || mb > 1 << 20)
        return pf_fail(err, errlen, PF_EINPUT, "plan: stages, replicas or microbatches too large");
    if (json_array_size(list) != (size_t)stages)
        return pf_fail(err, errlen, PF_EINPUT, "stage_list: %zu entries, but stages = %lld",
                       json_array_size(list), (long long)stages);
    if (tp > 1 << 16 || replicas * tp > PF_PLAN_DEGREES_MAX_DEVICES)
        return pf_fail(err, errlen, PF_EINPUT, "plan.tensor_parallel: %lld too large",
                       (long long)tp);
    p = pf_plan_new((int)stages, (int)replicas);
    ops = malloc((size_t)pf_graph_nops(g) * sizeof *ops);
    if (!p || !ops) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    p->microbatches = (int)mb;
    p->tensor_parallel = (int)tp;
    p->devices = pf_cluster_ndevices(c);
    if ((rc = read_training(root, &p->train, err, errlen)) != PF_OK ||
        (rc = read_block_search(root, p, err, errlen)) != PF_OK)
        goto fail;
    snprintf(p->schedule, sizeof p->schedule, "%s", schedule);
    pf_plan_set_names(p, model, cluster);
    if ((rc = pf_json_get_number(root, "plan", "partition_objective_ms", PF_JSON_GET_NONNEG, NAN,
                           &p->partition_objective_ms, err, errlen)))
        goto fail;
    for (int s = 0; s < stages; s++)
        if ((rc = stage_from_json(json_array_get(list, (size_t)s), s, p, g, c, ops, err,
                                  errlen)))
            goto fail;
    if ((rc = read_partition_search(root, p, err, errlen)) != PF_OK ||
        (rc = pf_plan_validate(p, g, c, err, errlen)) != PF_OK)
        goto fail;
    free(ops);
    *out = p;
    return PF_OK;
fail:
    free(ops);
    pf_plan_destroy(&p);
    return rc;
}

typedef struct {
    const pf_graph_t *g;
    const pf_cluster_t *c;
    pf_plan_t **out;
} plan_read_t;

static int convert_plan(json_t *root, void *ctx, char *err, size_t errlen)
{
    plan_read_t *r = ctx;
    return from_json(root, r->g, r->c, r->out, err, errlen);
}

int pf_plan_load(const char *path, const pf_graph_t *g, const pf_cluster_t *c, pf_plan_t **out,
                 char *err, size_t errlen)
{
    plan_read_t r = {g, c, out};
    *out = NULL;
    return pf_json_read_file(path, convert_plan, &r, err, errlen);
}

/* Samples per micro-batch: the block search's (the graph re-priced to it), else the graph's. */
static int plan_microbatch(const pf_plan_t *p, const pf_graph_t *g)
{
    return p->blocks.present && p->blocks.microbatch_size > 0 ? p->blocks.microbatch_size
                                                              : pf_graph_microbatch(g);
}

/* simulated_step_ms and what the plan trains per second at it */
static void write_step(pf_json_writer_t *w, const pf_plan_t *p, const pf_graph_t *g,
                       const pf_cluster_t *c)
{
    pf_json_writer_key_num(w, "simulated_step_ms", p->simulated_step_ms);
    pf_plan_rates_t r = pf_plan_rates_at(g, c, p->simulated_step_ms, p->microbatches,
                                         p->replicas, (int)pf_plan_degrees_total_devices(p),
                                         plan_microbatch(p, g));
    /* under context parallelism C the R replicas are d x C that share each sequence: the
     * request's graph (a whole sequence per sample) counts C x the samples and FLOPs */
    int C = pf_plan_context_parallel(p);
    pf_json_writer_key_num(w, "throughput_samples_per_s", r.samples_per_s / C);
    pf_json_writer_key_num(w, "tokens_per_s", r.tokens_per_s / C);
    pf_json_writer_key_num(w, "mfu", r.mfu / C);
}

/* The block-level search's choice (DESIGN.md "Plan"): its own keys, and how it was found. */
static void write_block_search(pf_json_writer_t *w, const pf_plan_t *p)
{
    pf_json_writer_key(w, "microbatch_size"); pf_json_writer_int(w, p->blocks.microbatch_size);
    pf_json_writer_key(w, "virtual_stages"); pf_json_writer_int(w, p->blocks.virtual_stages);
    pf_json_writer_key(w, "sequence_parallel"); pf_json_writer_bool(w, p->blocks.sequence_parallel);
    pf_json_writer_key(w, "context_parallel"); pf_json_writer_int(w, pf_plan_context_parallel(p));
    pf_json_writer_key(w, "expert_parallel");
    pf_json_writer_int(w, pf_plan_expert_parallel(p));
    pf_json_writer_key(w, "tp_comm_overlap"); pf_json_writer_bool(w, p->blocks.tp_comm_overlap);
    pf_json_writer_key(w, "block_search"); pf_json_writer_obj_begin_inline(w);
    pf_json_writer_key(w, "layers_first"); pf_json_writer_int(w, p->blocks.first_layers);
    pf_json_writer_key(w, "layers_middle"); pf_json_writer_int(w, p->blocks.mid_layers);
    pf_json_writer_key(w, "layers_last"); pf_json_writer_int(w, p->blocks.last_layers);
    pf_json_writer_key_num(w, "analytic_step_ms", p->blocks.analytic_step_ms);
    pf_json_writer_key(w, "candidates"); pf_json_writer_int(w, p->blocks.candidates);
    pf_json_writer_key_num(w, "wall_s", p->blocks.wall_s);
    pf_json_writer_obj_end(w);
}

/* How the stages train: the block search's choice when it ran, then "training". */
static void write_training(pf_json_writer_t *w, const pf_plan_t *p)
{
    if (p->blocks.present)
        write_block_search(w, p);
    pf_json_writer_key(w, "training"); pf_json_writer_obj_begin_inline(w);
    pf_json_writer_key(w, "precision");
    pf_json_writer_str(w, pf_training_precision_name(p->train.precision_bytes));
    pf_json_writer_key(w, "optimizer"); pf_json_writer_str(w, pf_training_optimizer_name(p->train.optimizer));
    pf_json_writer_key(w, "zero"); pf_json_writer_int(w, p->train.zero);
    pf_plan_recompute_write(w, p, -1); /* the heaviest stage's where they differ */
    pf_json_writer_obj_end(w);
}

static void write_baseline(pf_json_writer_t *w, const char *k, const pf_baseline_t *b)
{
    if (!b->present)
        return;
    pf_json_writer_key(w, k);
    pf_json_writer_obj_begin_inline(w);
    pf_json_writer_key_num(w, "objective_ms", b->objective_ms);
    pf_json_writer_key_num(w, "simulated_step_ms", b->simulated_step_ms);
    if (b->adopted) {
        pf_json_writer_key(w, "adopted");
        pf_json_writer_bool(w, 1);
    }
    pf_json_writer_obj_end(w);
}

typedef struct {
    const pf_plan_t *p;
    const pf_graph_t *g;
    const pf_cluster_t *c;
    pf_plan_blocks_t *b;
} plan_emit_t;

/* The stage's memory by part (DESIGN.md "Memory per device"), when cost.c filled it. */
static void write_memory(pf_json_writer_t *w, const pf_stage_t *st)
{
    if (!isfinite(st->mem_weights_bytes))
        return;
    pf_json_writer_key(w, "memory");
    pf_json_writer_obj_begin_inline(w);
    pf_json_writer_key_num(w, "weights_bytes", st->mem_weights_bytes);
    pf_json_writer_key_num(w, "gradients_bytes", st->mem_grads_bytes);
    pf_json_writer_key_num(w, "optimizer_bytes", st->mem_optimizer_bytes);
    pf_json_writer_key_num(w, "activations_bytes", st->mem_activations_bytes);
    pf_json_writer_key(w, "microbatches_in_flight"); pf_json_writer_int(w, st->inflight);
    pf_json_writer_key_num(w, "reserve_bytes", st->mem_reserve_bytes);
    pf_json_writer_obj_end(w);
}

/* Per stage under tensor parallelism: how each weight is split and the collectives per
 * micro-batch (TAP's plan, tap.h). */
static void write_stage_tp(pf_json_writer_t *w, const pf_plan_t *p, const pf_graph_t *g,
                           const pf_stage_t *st)
{
    if (p->tp_nops != pf_graph_nops(g) || p->tensor_parallel < 2 || pf_plan_degrees_mixed(p))
        return;
    double ms = 0;
    int colls = 0;
    pf_json_writer_key(w, "tensor_parallel");
    pf_json_writer_obj_begin(w);
    pf_json_writer_key(w, "weights");
    pf_json_writer_obj_begin(w);
    for (int i = 0; i < st->nops; i++) {
        int v = st->ops[i];
        ms += p->tp_comm_ms[v];
        colls += p->tp_colls[v];
        if (p->tp_split[v] == -2)
            continue;
        char split[16];
        if (p->tp_split[v] < 0)
            snprintf(split, sizeof split, "replicated");
        else
            snprintf(split, sizeof split, "S(%d)", p->tp_split[v]);
        pf_json_writer_key(w, pf_graph_op(g, v)->name);
        pf_json_writer_str(w, split);
    }
    pf_json_writer_obj_end(w);
    pf_json_writer_key(w, "collectives_per_microbatch"); pf_json_writer_int(w, colls);
    pf_json_writer_key_num(w, "comm_ms_per_microbatch", ms);
    pf_json_writer_obj_end(w);
}

static void emit_plan(pf_json_writer_t *w, const void *ctx)
{
    const plan_emit_t *e = ctx;
    const pf_plan_t *p = e->p;
    const pf_graph_t *g = e->g;
    const pf_cluster_t *c = e->c;
    pf_json_writer_obj_begin(w);
    pf_json_writer_key(w, "version"); pf_json_writer_int(w, PF_PLAN_VERSION);
    pf_json_writer_key(w, "model"); pf_json_writer_str(w, p->model ? p->model : pf_graph_name(g));
    pf_json_writer_key(w, "cluster"); pf_json_writer_str(w, p->cluster ? p->cluster : pf_cluster_name(c));
    pf_json_writer_key(w, "devices"); pf_json_writer_int(w, pf_cluster_ndevices(c));
    pf_json_writer_key(w, "device_mem_bytes"); pf_json_writer_num(w, pf_cluster_min_mem_bytes(c));
    pf_json_writer_key(w, "stages"); pf_json_writer_int(w, p->stages);
    pf_json_writer_key(w, "replicas"); pf_json_writer_int(w, p->replicas);
    pf_json_writer_key(w, "tensor_parallel"); pf_json_writer_int(w, p->tensor_parallel);
    pf_json_writer_key(w, "microbatches"); pf_json_writer_int(w, p->microbatches);
    pf_json_writer_key(w, "global_batch"); /* sequences: a CP group's replicas share them */
    pf_json_writer_int(w, (long long)plan_microbatch(p, g) * p->microbatches * p->replicas /
                              pf_plan_context_parallel(p));
    pf_json_writer_key(w, "schedule"); pf_json_writer_str(w, p->schedule);
    write_training(w, p);
    pf_json_writer_key(w, "stage_list");
    pf_json_writer_arr_begin(w);
    for (int s = 0; s < p->stages; s++) {
        const pf_stage_t *st = &p->stage_list[s];
        pf_json_writer_obj_begin(w);
        pf_json_writer_key(w, "id"); pf_json_writer_int(w, s);
        pf_json_writer_key(w, "ops");
        pf_json_writer_arr_begin_inline(w);
        for (int i = 0; i < st->nops; i++)
            pf_json_writer_int(w, pf_graph_op(g, st->ops[i])->id);
        pf_json_writer_arr_end(w);
        pf_json_writer_key_num(w, "compute_ms", st->compute_ms);
        pf_json_writer_key_num(w, "time_ms", st->time_ms);
        pf_json_writer_key_num(w, "peak_mem_bytes", st->peak_mem_bytes);
        pf_plan_recompute_write(w, p, s);
        pf_plan_degrees_write(w, p, s);
        write_memory(w, st);
        pf_plan_blocks_write(e->b, w, g, st->ops, st->nops, s);
        write_stage_tp(w, p, g, st);
        pf_json_writer_key(w, "devices");
        pf_json_writer_arr_begin_inline(w);
        int T = pf_plan_degrees_tp(p, s);
        for (int r = 0; st->devices && r < pf_plan_degrees_replicas(p, s); r++) {
            if (st->devices[r * T] < 0)
                continue;
            if (T > 1)
                pf_json_writer_arr_begin_inline(w);
            for (int k = 0; k < T; k++)
                pf_json_writer_int(w, pf_cluster_device(c, st->devices[r * T + k])->id);
            if (T > 1)
                pf_json_writer_arr_end(w);
        }
        pf_json_writer_arr_end(w);
        pf_json_writer_obj_end(w);
    }
    pf_json_writer_arr_end(w);
    pf_json_writer_key_num(w, "partition_objective_ms", p->partition_objective_ms);
    pf_json_writer_key_num(w, "objective_ms", p->objective_ms);
    write_step(w, p, g, c);
    if (p->comm.present) {
        pf_json_writer_key(w, "communication_ms_per_step");
        pf_json_writer_obj_begin_inline(w);
        pf_json_writer_key_num(w, "tp", p->comm.tp_ms);
        pf_json_writer_key_num(w, "pp", p->comm.pp_ms);
        pf_json_writer_key_num(w, "dp", p->comm.dp_ms);
        pf_json_writer_obj_end(w);
    }
    if (p->mapping.present) {
        pf_json_writer_key(w, "mapping");
        pf_json_writer_obj_begin(w);
        pf_json_writer_key(w, "instantiation"); pf_json_writer_str(w, p->mapping.instantiation);
        pf_json_writer_key_num(w, "objective_ms", p->mapping.objective_ms);
        pf_json_writer_key_num(w, "lower_bound_ms", p->mapping.lower_bound_ms);
        pf_json_writer_key_num(w, "initial_lower_bound_ms", p->mapping.initial_lower_bound_ms);
        pf_json_writer_key_num(w, "initial_upper_bound_ms", p->mapping.initial_upper_bound_ms);
        pf_json_writer_key(w, "probes"); pf_json_writer_int(w, p->mapping.probes);
        pf_json_writer_key(w, "probes_timed_out"); pf_json_writer_int(w, p->mapping.probes_timed_out);
        pf_json_writer_key(w, "symmetric_pruned"); pf_json_writer_int(w, p->mapping.symmetric_pruned);
        pf_json_writer_key_num(w, "seconds", p->mapping.seconds);
        if (p->mapping.searched_step_ms > 0)
            pf_json_writer_key_num(w, "simulated_step_ms", p->mapping.searched_step_ms);
        pf_json_writer_obj_end(w);
    }
    if (p->cs_map.present || p->p2p_map.present) {
        pf_json_writer_key(w, "baselines");
        pf_json_writer_obj_begin(w);
        write_baseline(w, "cs_map", &p->cs_map);
        write_baseline(w, "p2p_map", &p->p2p_map);
        pf_json_writer_obj_end(w);
    }
    if (p->partition_search.present || p->search.present) {
        pf_json_writer_key(w, "search");
        pf_json_writer_obj_begin(w);
        if (p->partition_search.present) {
            pf_json_writer_key(w, "ops"); pf_json_writer_int(w, p->partition_search.ops);
            pf_json_writer_key(w, "hyper_ops"); pf_json_writer_int(w, p->partition_search.hyper_ops);
            pf_json_writer_key(w, "downsets"); pf_json_writer_int(w, p->partition_search.downsets);
            pf_json_writer_key(w, "exact"); pf_json_writer_bool(w, p->partition_search.exact);
            pf_json_writer_key_num(w, "alpha", p->partition_search.alpha);
            pf_json_writer_key_num(w, "flat_gbps", p->partition_search.flat_gbps);
            pf_json_writer_key_num(w, "coarsen_s", p->partition_search.coarsen_s);
            pf_json_writer_key_num(w, "dp_s", p->partition_search.dp_s);
            pf_json_writer_key_num(w, "refine_s", p->partition_search.refine_s);
            pf_json_writer_key(w, "refine_moves"); pf_json_writer_int(w, p->partition_search.refine_moves);
            pf_json_writer_key_num(w, "objective_before_refine_ms",
                    p->partition_search.objective_before_refine_ms);
        }
        if (p->search.present) {
            pf_json_writer_key(w, "jobs"); pf_json_writer_int(w, p->search.jobs);
            pf_json_writer_key_num(w, "wall_s", p->search.wall_s);
            pf_json_writer_key(w, "workers"); pf_json_writer_int(w, p->search.workers);
        }
        pf_plan_degrees_write_search(w, p);
        pf_json_writer_obj_end(w);
    }
    pf_json_writer_obj_end(w);
}

/* The plan's blocks against its stages (plan_blocks.h); NULL when out of memory. */
static pf_plan_blocks_t *plan_blocks(const pf_plan_t *p, const pf_graph_t *g)
{
    int S = p->stages > 0 ? p->stages : 1, *nops = malloc(sizeof *nops * (size_t)S);
    const int **ops = malloc(sizeof *ops * (size_t)S);
    pf_plan_blocks_t *b = NULL;
    if (ops && nops) {
        for (int s = 0; s < p->stages; s++)
            ops[s] = p->stage_list[s].ops, nops[s] = p->stage_list[s].nops;
        b = pf_plan_blocks_new(g, p->stages, ops, nops);
    }
    free(ops);
    free(nops);
    return b;
}

int pf_plan_write(const pf_plan_t *p, const pf_graph_t *g, const pf_cluster_t *c, FILE *f,
                  char *err, size_t errlen)
{
    pf_plan_blocks_t *b = plan_blocks(p, g);
    if (!b)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    plan_emit_t e = {p, g, c, b};
    int rc = pf_json_write(f, emit_plan, &e, err, errlen);
    pf_plan_blocks_destroy(&b);
    return rc;
}

int pf_plan_save(const pf_plan_t *p, const pf_graph_t *g, const pf_cluster_t *c,
                 const char *path, char *err, size_t errlen)
{
    pf_plan_blocks_t *b = plan_blocks(p, g);
    if (!b)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    plan_emit_t e = {p, g, c, b};
    int rc = pf_json_save(path, emit_plan, &e, err, errlen);
    pf_plan_blocks_destroy(&b);
    return rc;
}
