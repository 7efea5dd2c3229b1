#include "planner/plan.h"
#include "planner/json_io.h"
#include "planner/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    for (int s = 0; s < stages; s++)
        p->stage_list[s].compute_ms = p->stage_list[s].time_ms =
            p->stage_list[s].peak_mem_bytes = NAN;
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
    if (!st->devices) {
        st->devices = malloc((size_t)p->replicas * sizeof(int));
        if (!st->devices)
            return NULL;
        for (int r = 0; r < p->replicas; r++)
            st->devices[r] = -1;
    }
    return st->devices;
}

int pf_plan_is_mapped(const pf_plan_t *p)
{
    for (int s = 0; s < p->stages; s++) {
        if (!p->stage_list[s].devices)
            return 0;
        for (int r = 0; r < p->replicas; r++)
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
    pf_plan_set_names(p, src->model, src->cluster);
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
            memcpy(d, a->devices, (size_t)src->replicas * sizeof *d);
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
    if ((long long)p->stages * p->replicas > D) {
        pf_fail(err, errlen, rc, "stages x replicas = %d x %d exceeds %d devices", p->stages,
                p->replicas, D);
        goto fail;
    }
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
            for (int r = 0; r < p->replicas; r++) {
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
static int read_partition_search(json_t *root, pf_plan_t *p, char *err, size_t errlen)
{
    json_t *se = json_object_get(root, "search"), *exact;
    int64_t ops, hyper, moves, downsets;
    int rc;
    if (!json_is_object(se) || !json_object_get(se, "downsets"))
        return PF_OK;
    if ((rc = pf_jr_int(se, "search", "ops", PF_JR_NONNEG, 0, &ops, err, errlen)) ||
        (rc = pf_jr_int(se, "search", "hyper_ops", PF_JR_NONNEG, 0, &hyper, err, errlen)) ||
        (rc = pf_jr_int(se, "search", "downsets", PF_JR_NONNEG, 0, &downsets, err, errlen)) ||
        (rc = pf_jr_number(se, "search", "alpha", PF_JR_NONNEG, NAN, &p->partition_search.alpha,
                           err, errlen)) ||
        (rc = pf_jr_number(se, "search", "flat_gbps", PF_JR_NONNEG, NAN,
                           &p->partition_search.flat_gbps, err, errlen)) ||
        (rc = pf_jr_number(se, "search", "coarsen_s", PF_JR_NONNEG, NAN,
                           &p->partition_search.coarsen_s, err, errlen)) ||
        (rc = pf_jr_number(se, "search", "dp_s", PF_JR_NONNEG, NAN, &p->partition_search.dp_s,
                           err, errlen)) ||
        (rc = pf_jr_number(se, "search", "refine_s", PF_JR_NONNEG, NAN,
                           &p->partition_search.refine_s, err, errlen)) ||
        (rc = pf_jr_int(se, "search", "refine_moves", PF_JR_NONNEG, 0, &moves, err, errlen)) ||
        (rc = pf_jr_number(se, "search", "objective_before_refine_ms", PF_JR_NONNEG, NAN,
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

static int from_json(json_t *root, const pf_graph_t *g, const pf_cluster_t *c, pf_plan_t **out,
                     char *err, size_t errlen)
{
    int64_t stages, replicas, mb, tp;
    json_t *list;
    const char *model, *cluster, *schedule;
    char path[64];
    int rc;
    pf_plan_t *p = NULL;
    int *ops = NULL;

    if (!json_is_object(root))
        return pf_fail(err, errlen, PF_EINPUT, "top level: not an object");
    if ((rc = pf_jr_string(root, "plan", "model", 0, "", &model, err, errlen)) ||
        (rc = pf_jr_string(root, "plan", "cluster", 0, "", &cluster, err, errlen)) ||
        (rc = pf_jr_int(root, "plan", "stages", PF_JR_REQUIRED | PF_JR_POSITIVE, 0, &stages, err,
                        errlen)) ||
        (rc = pf_jr_int(root, "plan", "replicas", PF_JR_REQUIRED | PF_JR_POSITIVE, 0, &replicas,
                        err, errlen)) ||
        (rc = pf_jr_int(root, "plan", "microbatches", PF_JR_POSITIVE, 4, &mb, err, errlen)) ||
        (rc = pf_jr_int(root, "plan", "tensor_parallel", PF_JR_POSITIVE, 1, &tp, err, errlen)) ||
        (rc = pf_jr_string(root, "plan", "schedule", 0, "1f1b", &schedule, err, errlen)) ||
        (rc = pf_jr_array(root, "plan", "stage_list", PF_JR_REQUIRED, &list, err, errlen)))
        return rc;
    if (stages > 1 << 20 || replicas > 1 << 20 || mb > 1 << 20)
        return pf_fail(err, errlen, PF_EINPUT, "plan: stages, replicas or microbatches too large");
    if (json_array_size(list) != (size_t)stages)
        return pf_fail(err, errlen, PF_EINPUT, "stage_list: %zu entries, but stages = %lld",
                       json_array_size(list), (long long)stages);
    if (tp != 1)
        return pf_fail(err, errlen, PF_EINPUT,
                       "plan.tensor_parallel: %lld not supported by this reader (only 1)",
                       (long long)tp);
    p = pf_plan_new((int)stages, (int)replicas);
    ops = malloc((size_t)pf_graph_nops(g) * sizeof *ops);
    if (!p || !ops) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    p->microbatches = (int)mb;
    p->devices = pf_cluster_ndevices(c);
    snprintf(p->schedule, sizeof p->schedule, "%s", schedule);
    pf_plan_set_names(p, model, cluster);
    if ((rc = pf_jr_number(root, "plan", "partition_objective_ms", PF_JR_NONNEG, NAN,
                           &p->partition_objective_ms, err, errlen)))
        goto fail;
    for (int s = 0; s < stages; s++) {
        json_t *st = json_array_get(list, (size_t)s), *jops, *jdev;
        snprintf(path, sizeof path, "stage_list[%d]", s);
        if (!json_is_object(st)) {
            rc = pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
            goto fail;
        }
        if ((rc = pf_jr_array(st, path, "ops", PF_JR_REQUIRED, &jops, err, errlen)) ||
            (rc = pf_jr_array(st, path, "devices", 0, &jdev, err, errlen)))
            goto fail;
        size_t k = json_array_size(jops);
        if (k > (size_t)pf_graph_nops(g)) {
            rc = pf_fail(err, errlen, PF_EINPUT, "%s.ops: more ops than the graph has", path);
            goto fail;
        }
        for (size_t i = 0; i < k; i++) {
            json_t *v = json_array_get(jops, i);
            int idx = json_is_integer(v) ? pf_graph_find(g, json_integer_value(v)) : -1;
            if (idx < 0) {
                rc = pf_fail(err, errlen, PF_EINPUT, "%s.ops[%zu]: not an op id of graph %s",
                             path, i, pf_graph_name(g));
                goto fail;
            }
            ops[i] = idx;
        }
        if (pf_plan_set_stage_ops(p, s, ops, (int)k) != PF_OK) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
        pf_stage_t *sl = &p->stage_list[s];
        if ((rc = pf_jr_number(st, path, "compute_ms", PF_JR_NONNEG, NAN, &sl->compute_ms, err,
                               errlen)) ||
            (rc = pf_jr_number(st, path, "time_ms", PF_JR_NONNEG, NAN, &sl->time_ms, err,
                               errlen)) ||
            (rc = pf_jr_number(st, path, "peak_mem_bytes", PF_JR_NONNEG, NAN,
                               &sl->peak_mem_bytes, err, errlen)))
            goto fail;
        if (jdev && json_array_size(jdev) > 0) {
            if (json_array_size(jdev) != (size_t)replicas) {
                rc = pf_fail(err, errlen, PF_EINPUT, "%s.devices: %zu entries, replicas = %lld",
                             path, json_array_size(jdev), (long long)replicas);
                goto fail;
            }
            int *d = pf_plan_stage_devices(p, s);
            if (!d) {
                rc = pf_fail(err, errlen, PF_ERR, "out of memory");
                goto fail;
            }
            for (int r = 0; r < replicas; r++) {
                json_t *v = json_array_get(jdev, (size_t)r);
                d[r] = json_is_integer(v) ? find_device(c, json_integer_value(v)) : -1;
                if (d[r] < 0) {
                    rc = pf_fail(err, errlen, PF_EINPUT,
                                 "%s.devices[%d]: not a device id of cluster %s", path, r,
                                 pf_cluster_name(c));
                    goto fail;
                }
            }
        }
    }
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

static void key_num(pf_jw_t *w, const char *k, double x)
{
    if (isfinite(x)) {
        pf_jw_key(w, k);
        pf_jw_num(w, x);
    }
}

static void write_baseline(pf_jw_t *w, const char *k, const pf_baseline_t *b)
{
    if (!b->present)
        return;
    pf_jw_key(w, k);
    pf_jw_obj_begin_inline(w);
    key_num(w, "objective_ms", b->objective_ms);
    key_num(w, "simulated_step_ms", b->simulated_step_ms);
    pf_jw_obj_end(w);
}

typedef struct {
    const pf_plan_t *p;
    const pf_graph_t *g;
    const pf_cluster_t *c;
} plan_emit_t;

static void emit_plan(pf_jw_t *w, const void *ctx)
{
    const plan_emit_t *e = ctx;
    const pf_plan_t *p = e->p;
    const pf_graph_t *g = e->g;
    const pf_cluster_t *c = e->c;
    pf_jw_obj_begin(w);
    pf_jw_key(w, "model"); pf_jw_str(w, p->model ? p->model : pf_graph_name(g));
    pf_jw_key(w, "cluster"); pf_jw_str(w, p->cluster ? p->cluster : pf_cluster_name(c));
    pf_jw_key(w, "devices"); pf_jw_int(w, pf_cluster_ndevices(c));
    pf_jw_key(w, "stages"); pf_jw_int(w, p->stages);
    pf_jw_key(w, "replicas"); pf_jw_int(w, p->replicas);
    pf_jw_key(w, "tensor_parallel"); pf_jw_int(w, p->tensor_parallel);
    pf_jw_key(w, "microbatches"); pf_jw_int(w, p->microbatches);
    pf_jw_key(w, "schedule"); pf_jw_str(w, p->schedule);
    pf_jw_key(w, "stage_list");
    pf_jw_arr_begin(w);
    for (int s = 0; s < p->stages; s++) {
        const pf_stage_t *st = &p->stage_list[s];
        pf_jw_obj_begin(w);
        pf_jw_key(w, "id"); pf_jw_int(w, s);
        pf_jw_key(w, "ops");
        pf_jw_arr_begin_inline(w);
        for (int i = 0; i < st->nops; i++)
            pf_jw_int(w, pf_graph_op(g, st->ops[i])->id);
        pf_jw_arr_end(w);
        key_num(w, "compute_ms", st->compute_ms);
        key_num(w, "time_ms", st->time_ms);
        key_num(w, "peak_mem_bytes", st->peak_mem_bytes);
        pf_jw_key(w, "devices");
        pf_jw_arr_begin_inline(w);
        for (int r = 0; st->devices && r < p->replicas; r++)
            if (st->devices[r] >= 0)
                pf_jw_int(w, pf_cluster_device(c, st->devices[r])->id);
        pf_jw_arr_end(w);
        pf_jw_obj_end(w);
    }
    pf_jw_arr_end(w);
    key_num(w, "partition_objective_ms", p->partition_objective_ms);
    key_num(w, "objective_ms", p->objective_ms);
    key_num(w, "simulated_step_ms", p->simulated_step_ms);
    if (p->mapping.present) {
        pf_jw_key(w, "mapping");
        pf_jw_obj_begin(w);
        pf_jw_key(w, "instantiation"); pf_jw_str(w, p->mapping.instantiation);
        key_num(w, "objective_ms", p->mapping.objective_ms);
        key_num(w, "lower_bound_ms", p->mapping.lower_bound_ms);
        key_num(w, "initial_lower_bound_ms", p->mapping.initial_lower_bound_ms);
        key_num(w, "initial_upper_bound_ms", p->mapping.initial_upper_bound_ms);
        pf_jw_key(w, "probes"); pf_jw_int(w, p->mapping.probes);
        pf_jw_key(w, "probes_timed_out"); pf_jw_int(w, p->mapping.probes_timed_out);
        pf_jw_key(w, "symmetric_pruned"); pf_jw_int(w, p->mapping.symmetric_pruned);
        key_num(w, "seconds", p->mapping.seconds);
        pf_jw_obj_end(w);
    }
    if (p->cs_map.present || p->p2p_map.present) {
        pf_jw_key(w, "baselines");
        pf_jw_obj_begin(w);
        write_baseline(w, "cs_map", &p->cs_map);
        write_baseline(w, "p2p_map", &p->p2p_map);
        pf_jw_obj_end(w);
    }
    if (p->partition_search.present || p->search.present) {
        pf_jw_key(w, "search");
        pf_jw_obj_begin(w);
        if (p->partition_search.present) {
            pf_jw_key(w, "ops"); pf_jw_int(w, p->partition_search.ops);
            pf_jw_key(w, "hyper_ops"); pf_jw_int(w, p->partition_search.hyper_ops);
            pf_jw_key(w, "downsets"); pf_jw_int(w, p->partition_search.downsets);
            pf_jw_key(w, "exact"); pf_jw_bool(w, p->partition_search.exact);
            key_num(w, "alpha", p->partition_search.alpha);
            key_num(w, "flat_gbps", p->partition_search.flat_gbps);
            key_num(w, "coarsen_s", p->partition_search.coarsen_s);
            key_num(w, "dp_s", p->partition_search.dp_s);
            key_num(w, "refine_s", p->partition_search.refine_s);
            pf_jw_key(w, "refine_moves"); pf_jw_int(w, p->partition_search.refine_moves);
            key_num(w, "objective_before_refine_ms",
                    p->partition_search.objective_before_refine_ms);
        }
        if (p->search.present) {
            pf_jw_key(w, "jobs"); pf_jw_int(w, p->search.jobs);
            key_num(w, "wall_s", p->search.wall_s);
            pf_jw_key(w, "workers"); pf_jw_int(w, p->search.workers);
        }
        pf_jw_obj_end(w);
    }
    pf_jw_obj_end(w);
}

int pf_plan_write(const pf_plan_t *p, const pf_graph_t *g, const pf_cluster_t *c, FILE *f,
                  char *err, size_t errlen)
{
    plan_emit_t e = {p, g, c};
    return pf_json_write(f, emit_plan, &e, err, errlen);
}

int pf_plan_save(const pf_plan_t *p, const pf_graph_t *g, const pf_cluster_t *c,
                 const char *path, char *err, size_t errlen)
{
    plan_emit_t e = {p, g, c};
    return pf_json_save(path, emit_plan, &e, err, errlen);
}
