#include "proto/model_codec.h"
#include "planner/core/util.h"
#include "planner/ir/devmodel.h"
#include "proto/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *str(const char *s)
{
    return (char *)(s ? s : "");
}

/* ---- graph ---- */

static Planfarm__Shape *shape_to_pb(pf_arena_t *a, const pf_shape_t *s)
{
    if (s->ndim == 0)
        return NULL;
    Planfarm__Shape *m = PF_ANEW(a, Planfarm__Shape, 1);
    int64_t *dim = PF_ANEW(a, int64_t, s->ndim);
    if (!m || !dim)
        return NULL;
    planfarm__shape__init(m);
    memcpy(dim, s->dim, (size_t)s->ndim * sizeof *dim);
    m->dim = dim;
    m->n_dim = (size_t)s->ndim;
    return m;
}

static int work_to_pb(pf_arena_t *a, const pf_op_work_t *w, Planfarm__Op *x)
{
    x->fwd_flops = w->fwd_flops;
    x->bwd_flops = w->bwd_flops;
    x->bytes_read = w->bytes_read;
    x->bytes_written = w->bytes_written;
    if (w->gemm_m == 0)
        return PF_OK;
    Planfarm__Gemm *gm = PF_ANEW(a, Planfarm__Gemm, 1);
    if (!gm)
        return PF_ERR;
    planfarm__gemm__init(gm);
    gm->m = w->gemm_m;
    gm->n = w->gemm_n;
    gm->k = w->gemm_k;
    gm->batch = w->gemm_batch;
    x->gemm = gm;
    return PF_OK;
}

/* The ranges are pf_graph_finalize's (a gemm with a zero dimension is refused there). */
static pf_op_work_t work_from_pb(const Planfarm__Op *x)
{
    pf_op_work_t w = {.fwd_flops = x->fwd_flops, .bwd_flops = x->bwd_flops,
                      .bytes_read = x->bytes_read, .bytes_written = x->bytes_written};
    if (x->gemm) {
        w.gemm_m = x->gemm->m;
        w.gemm_n = x->gemm->n;
        w.gemm_k = x->gemm->k;
        w.gemm_batch = x->gemm->batch;
    }
    return w;
}

/* A carried model (graph.h) as its file's text, in the arena. */
static int device_to_pb(pf_arena_t *a, const pf_graph_t *g, Planfarm__Graph *pb)
{
    const pf_devmodel_t *dm = pf_graph_device(g);
    const char *name = pf_graph_device_model(g);
    if (!dm || dm == pf_devmodel_preset(name)) /* a preset travels by its name */
        return PF_OK;
    char *text = pf_devmodel_to_text(dm);
    size_t len = text ? strlen(text) : 0;
    char *copy = text ? PF_ANEW(a, char, len + 1) : NULL;
    if (copy)
        memcpy(copy, text, len + 1);
    free(text);
    pb->device_json = copy;
    return copy ? PF_OK : PF_ERR;
}

/* The carried model of a graph off the wire: it must bear the graph's device_model name. */
static int device_from_pb(const Planfarm__Graph *m, pf_graph_t *g, char *err, size_t errlen)
{
    pf_devmodel_t *dm = NULL;
    if (!m->device_json || !*m->device_json)
        return PF_OK;
    if (strlen(m->device_json) > PF_WIRE_MAX_DEVICE_JSON)
        return pf_fail(err, errlen, PF_EINPUT, "graph.device_json: longer than %d bytes",
                       PF_WIRE_MAX_DEVICE_JSON);
    int rc = pf_devmodel_load_buffer(m->device_json, strlen(m->device_json), "graph.device_json",
                                     &dm, err, errlen);
    if (rc == PF_OK && (!m->device_model || strcmp(m->device_model, pf_devmodel_spec(dm)->name)))
        rc = pf_fail(err, errlen, PF_EINPUT, "graph.device_json: its name '%s' is not the "
                     "graph's device_model", pf_devmodel_spec(dm)->name);
    if (rc == PF_OK && pf_graph_set_device(g, dm) != PF_OK)
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
    pf_devmodel_destroy(&dm);
    return rc;
}

Planfarm__Graph *pf_model_codec_graph_to_pb(pf_arena_t *a, const pf_graph_t *g)
{
    int n = pf_graph_nops(g), m = pf_graph_nedges(g);
    Planfarm__Graph *pb = PF_ANEW(a, Planfarm__Graph, 1);
    Planfarm__Op *ops = PF_ANEW(a, Planfarm__Op, n);
    Planfarm__Op **opp = PF_ANEW(a, Planfarm__Op *, n);
    Planfarm__Edge *edges = PF_ANEW(a, Planfarm__Edge, m);
    Planfarm__Edge **edp = PF_ANEW(a, Planfarm__Edge *, m);
    if (!pb || !ops || !opp || !edges || !edp)
        return NULL;
    planfarm__graph__init(pb);
    pb->name = str(pf_graph_name(g));
    pb->microbatch = (uint32_t)pf_graph_microbatch(g);
    pb->device_model = str(pf_graph_device_model(g));
    if (device_to_pb(a, g, pb) != PF_OK)
        return NULL;
    for (int v = 0; v < n; v++) {
        const pf_op_t *o = pf_graph_op(g, v);
        Planfarm__Op *x = &ops[v];
        planfarm__op__init(x);
        x->id = o->id;
        x->name = str(o->name);
        x->type = str(o->type);
        x->fwd_ms = o->fwd_ms;
        x->bwd_ms = o->bwd_ms;
        x->param_bytes = o->param_bytes;
        x->mem_fwd_bytes = o->mem_fwd_bytes;
        x->mem_bwd_bytes = o->mem_bwd_bytes;
        if (work_to_pb(a, &o->work, x) != PF_OK ||
            (o->weight.ndim && !(x->weight = shape_to_pb(a, &o->weight))) ||
            (o->input.ndim && !(x->input = shape_to_pb(a, &o->input))) ||
            (o->output.ndim && !(x->output = shape_to_pb(a, &o->output))))
            return NULL;
        opp[v] = x;
    }
    for (int e = 0; e < m; e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        planfarm__edge__init(&edges[e]);
        edges[e].src = (uint32_t)ed->src;
        edges[e].dst = (uint32_t)ed->dst;
        edges[e].bytes = ed->bytes;
        edp[e] = &edges[e];
    }
    pb->ops = opp;
    pb->n_ops = (size_t)n;
    pb->edges = edp;
    pb->n_edges = (size_t)m;
    return pb;
}

static int shape_from_pb(const Planfarm__Shape *m, pf_shape_t *s, int v, const char *what,
                         char *err, size_t errlen)
{
    s->ndim = 0;
    if (!m)
        return PF_OK;
    if (m->n_dim > PF_SHAPE_MAX)
        return pf_fail(err, errlen, PF_EINPUT, "graph.ops[%d].%s: more than %d dimensions", v,
                       what, PF_SHAPE_MAX);
    for (size_t i = 0; i < m->n_dim; i++) {
        if (m->dim[i] < 0)
            return pf_fail(err, errlen, PF_EINPUT, "graph.ops[%d].%s[%zu]: negative", v, what, i);
        s->dim[i] = m->dim[i];
    }
    s->ndim = (int)m->n_dim;
    return PF_OK;
}

int pf_model_codec_graph_from_pb(const Planfarm__Graph *m, pf_graph_t **out, char *err,
                                 size_t errlen)
{
    int rc;
    *out = NULL;
    if (m->n_ops == 0 || m->n_ops > PF_WIRE_MAX_OPS || m->n_edges > 16 * (size_t)PF_WIRE_MAX_OPS)
        return pf_fail(err, errlen, PF_EINPUT, "graph: %zu ops, %zu edges out of range", m->n_ops,
                       m->n_edges);
    if (m->microbatch == 0 || m->microbatch > (1u << 30))
        return pf_fail(err, errlen, PF_EINPUT, "graph.microbatch: %u out of range", m->microbatch);
    if (m->device_model && strlen(m->device_model) > PF_GRAPH_DEVICE_MODEL_MAX)
        return pf_fail(err, errlen, PF_EINPUT, "graph.device_model: longer than %d bytes",
                       PF_GRAPH_DEVICE_MODEL_MAX);
    pf_graph_t *g = pf_graph_new(m->name, (int)m->microbatch);
    if (!g || pf_graph_set_device_model(g, m->device_model && *m->device_model ? m->device_model
                                                                               : NULL) != PF_OK) {
        pf_graph_destroy(&g);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    if ((rc = device_from_pb(m, g, err, errlen)) != PF_OK) {
        pf_graph_destroy(&g);
        return rc;
    }
    for (size_t v = 0; v < m->n_ops; v++) {
        const Planfarm__Op *x = m->ops[v];
        pf_op_t op = {.id = x->id, .name = x->name, .type = x->type, .fwd_ms = x->fwd_ms,
                      .bwd_ms = x->bwd_ms, .param_bytes = x->param_bytes,
                      .mem_fwd_bytes = x->mem_fwd_bytes, .mem_bwd_bytes = x->mem_bwd_bytes,
                      .work = work_from_pb(x)};
        if ((rc = shape_from_pb(x->weight, &op.weight, (int)v, "weight", err, errlen)) ||
            (rc = shape_from_pb(x->input, &op.input, (int)v, "input", err, errlen)) ||
            (rc = shape_from_pb(x->output, &op.output, (int)v, "output", err, errlen)))
            goto fail;
        if (pf_graph_add_op(g, &op) < 0) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    for (size_t e = 0; e < m->n_edges; e++) {
        const Planfarm__Edge *x = m->edges[e];
        if (x->src >= m->n_ops || x->dst >= m->n_ops) {
            rc = pf_fail(err, errlen, PF_EINPUT, "graph.edges[%zu]: op index out of range", e);
            goto fail;
        }
        if (pf_graph_add_edge(g, (int)x->src, (int)x->dst, x->bytes) < 0) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    if ((rc = pf_graph_finalize(g, err, errlen)) != PF_OK) {
        pf_err_prefix(err, errlen, "graph");
        goto fail;
    }
    *out = g;
    return PF_OK;
fail:
    pf_graph_destroy(&g);
    return rc;
}

/* ---- cluster ---- */

/* A hierarchy travels as its file's JSON text (a few hundred bytes at any size). */
static Planfarm__Cluster *hierarchy_to_pb(pf_arena_t *a, const pf_cluster_t *c)
{
    char *text = NULL, err[256];
    size_t len = 0;
    Planfarm__Cluster *pb = PF_ANEW(a, Planfarm__Cluster, 1);
    FILE *f = open_memstream(&text, &len);
    if (!pb || !f)
        goto fail;
    int rc = pf_cluster_write_extra(c, f, NULL, NULL, err, sizeof err);
    if (fclose(f) != 0 || rc != PF_OK)
        goto fail;
    planfarm__cluster__init(pb);
    pb->name = str(pf_cluster_name(c));
    if (!(pb->hierarchy_json = PF_ANEW(a, char, len + 1)))
        goto fail;
    memcpy(pb->hierarchy_json, text, len + 1);
    free(text);
    return pb;
fail:
    free(text);
    return NULL;
}

Planfarm__Cluster *pf_model_codec_cluster_to_pb(pf_arena_t *a, const pf_cluster_t *c)
{
    if (pf_cluster_hierarchy(c))
        return hierarchy_to_pb(a, c);
    int n = pf_cluster_ndevices(c);
    size_t nn = (size_t)n * (size_t)n;
    Planfarm__Cluster *pb = PF_ANEW(a, Planfarm__Cluster, 1);
    Planfarm__Device *dev = PF_ANEW(a, Planfarm__Device, n);
    Planfarm__Device **devp = PF_ANEW(a, Planfarm__Device *, n);
    if (!pb || !dev || !devp)
        return NULL;
    planfarm__cluster__init(pb);
    pb->name = str(pf_cluster_name(c));
    for (int i = 0; i < n; i++) {
        const pf_device_t *d = pf_cluster_device(c, i);
        planfarm__device__init(&dev[i]);
        dev[i].id = d->id;
        dev[i].host = (uint32_t)d->host;
        dev[i].name = str(d->name);
        dev[i].mem_bytes = d->mem_bytes;
        dev[i].tflops = d->tflops;
        devp[i] = &dev[i];
    }
    pb->devices = devp;
    pb->n_devices = (size_t)n;
    pb->bandwidth_gbps = (double *)pf_cluster_bw_matrix(c);
    pb->n_bandwidth_gbps = nn;
    if (pf_cluster_has_latency(c)) {
        pb->latency_us = (double *)pf_cluster_lat_matrix(c);
        pb->n_latency_us = nn;
    }
    return pb;
}

int pf_model_codec_cluster_from_pb(const Planfarm__Cluster *m, pf_cluster_t **out, char *err,
                                   size_t errlen)
{
    int rc;
    size_t n = m->n_devices;
    *out = NULL;
    if (m->hierarchy_json && *m->hierarchy_json) {
        if (n || m->n_bandwidth_gbps || m->n_latency_us)
            return pf_fail(err, errlen, PF_EINPUT, "cluster: a hierarchy with devices or "
                           "matrices besides");
        rc = pf_cluster_load_buffer(m->hierarchy_json, strlen(m->hierarchy_json), "cluster",
                                    out, err, errlen);
        if (rc == PF_OK && pf_cluster_ndevices(*out) > PF_WIRE_MAX_DEVICES) {
            pf_cluster_destroy(out);
            rc = pf_fail(err, errlen, PF_EINPUT, "cluster: more than %d devices",
                         PF_WIRE_MAX_DEVICES);
        }
        return rc;
    }
    if (n == 0 || n > (1 << 15)) /* the matrices: pf_cluster_new's cap */
        return pf_fail(err, errlen, PF_EINPUT, "cluster: %zu devices out of range", n);
    if (m->n_bandwidth_gbps != n * n)
        return pf_fail(err, errlen, PF_EINPUT, "cluster.bandwidth_gbps: %zu entries, expected %zu",
                       m->n_bandwidth_gbps, n * n);
    if (m->n_latency_us != 0 && m->n_latency_us != n * n)
        return pf_fail(err, errlen, PF_EINPUT, "cluster.latency_us: %zu entries, expected %zu",
                       m->n_latency_us, n * n);
    pf_cluster_t *c = pf_cluster_new(m->name, (int)n);
    if (!c)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const Planfarm__Device *x = m->devices[i];
        if (x->host > (1u << 30)) {
            rc = pf_fail(err, errlen, PF_EINPUT, "cluster.devices[%zu].host: out of range", i);
            goto fail;
        }
        pf_device_t d = {.id = x->id, .host = (int)x->host, .name = x->name,
                         .mem_bytes = x->mem_bytes, .tflops = x->tflops};
        if (pf_cluster_set_device(c, (int)i, &d) != PF_OK) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            pf_cluster_set_bw(c, (int)a, (int)b, m->bandwidth_gbps[a * n + b]);
            if (m->n_latency_us)
                pf_cluster_set_lat(c, (int)a, (int)b, m->latency_us[a * n + b]);
        }
    if ((rc = pf_cluster_validate(c, err, errlen)) != PF_OK) {
        pf_err_prefix(err, errlen, "cluster");
        goto fail;
    }
    *out = c;
    return PF_OK;
fail:
    pf_cluster_destroy(&c);
    return rc;
}

/* ---- stage graph ---- */

Planfarm__StageGraph *pf_model_codec_stage_graph_to_pb(pf_arena_t *a, const pf_stage_graph_t *sg)
{
    int S = pf_stage_graph_stages(sg);
    Planfarm__StageGraph *pb = PF_ANEW(a, Planfarm__StageGraph, 1);
    double *cu = PF_ANEW(a, double, S), *par = PF_ANEW(a, double, S);
    double *msg = PF_ANEW(a, double, (size_t)S * S);
    if (!pb || !cu || !par || !msg)
        return NULL;
    planfarm__stage_graph__init(pb);
    pb->stages = (uint32_t)S;
    pb->replicas = (uint32_t)pf_stage_graph_replicas(sg);
    for (int s = 0; s < S; s++) {
        cu[s] = pf_stage_graph_cu_ms(sg, s);
        par[s] = pf_stage_graph_param_bytes(sg, s);
        for (int t = 0; t < S; t++)
            msg[(size_t)s * S + t] = s == t ? 0 : pf_stage_graph_msg_bytes(sg, s, t);
    }
    pb->cu_ms = cu;
    pb->n_cu_ms = (size_t)S;
    pb->param_bytes = par;
    pb->n_param_bytes = (size_t)S;
    pb->msg_bytes = msg;
    pb->n_msg_bytes = (size_t)S * S;
    int K = pf_stage_graph_nkinds(sg);
    if (K > 0) {
        double *ck = PF_ANEW(a, double, (size_t)S * K);
        if (!ck)
            return NULL;
        for (int s = 0; s < S; s++)
            for (int k = 0; k < K; k++)
                ck[(size_t)s * K + k] = pf_stage_graph_cu_kind_ms(sg, s, k);
        pb->cu_kind_ms = ck;
        pb->n_cu_kind_ms = (size_t)S * K;
    }
    return pb;
}

int pf_model_codec_stage_graph_from_pb(const Planfarm__StageGraph *m, pf_stage_graph_t **out,
                                       char *err, size_t errlen)
{
    size_t S = m->stages, R = m->replicas;
    *out = NULL;
    if (S == 0 || R == 0 || S * R > PF_WIRE_MAX_STAGE_REPLICAS)
        return pf_fail(err, errlen, PF_EINPUT, "stage_graph: %zu stages x %zu replicas out of range",
                       S, R);
    if (m->n_cu_ms != S || m->n_param_bytes != S || m->n_msg_bytes != S * S)
        return pf_fail(err, errlen, PF_EINPUT, "stage_graph: array sizes do not match %zu stages",
                       S);
    for (size_t s = 0; s < S; s++) {
        if (!pf_is_finite_nonneg(m->cu_ms[s]) || !pf_is_finite_nonneg(m->param_bytes[s]))
            return pf_fail(err, errlen, PF_EINPUT, "stage_graph: stage %zu has a bad number", s);
        for (size_t t = 0; t < S; t++) {
            double x = m->msg_bytes[s * S + t];
            if (!pf_is_finite_nonneg(x) || (s != t && x != m->msg_bytes[t * S + s]))
                return pf_fail(err, errlen, PF_EINPUT,
                               "stage_graph.msg_bytes[%zu][%zu]: negative, not finite or "
                               "asymmetric",
                               s, t);
        }
    }
    if (m->n_cu_kind_ms % S != 0 || m->n_cu_kind_ms / S > PF_WIRE_MAX_STAGE_REPLICAS)
        return pf_fail(err, errlen, PF_EINPUT, "stage_graph.cu_kind_ms: %zu entries for %zu "
                       "stages", m->n_cu_kind_ms, S);
    *out = pf_stage_graph_new((int)S, (int)R, m->cu_ms, m->param_bytes, m->msg_bytes);
    if (!*out)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    int rc = pf_stage_graph_set_kind_cu(*out, (int)(m->n_cu_kind_ms / S), m->cu_kind_ms);
    if (rc != PF_OK) {
        pf_stage_graph_destroy(out);
        return pf_fail(err, errlen, rc, rc == PF_ERR ? "out of memory"
                                                     : "stage_graph.cu_kind_ms: a bad number");
    }
    return PF_OK;
}

/* ---- plan ---- */

/* What the search reports beside the plan (reports_from_pb's inverse). PF_ERR out of memory. */
static int reports_to_pb(pf_arena_t *a, const pf_plan_t *p, Planfarm__Plan *pb)
{
    if (p->mapping.present) {
        Planfarm__MappingInfo *m = PF_ANEW(a, Planfarm__MappingInfo, 1);
        if (!m)
            return PF_ERR;
        planfarm__mapping_info__init(m);
        m->instantiation = (char *)p->mapping.instantiation;
        m->objective_ms = p->mapping.objective_ms;
        m->lower_bound_ms = p->mapping.lower_bound_ms;
        m->initial_lower_bound_ms = p->mapping.initial_lower_bound_ms;
        m->initial_upper_bound_ms = p->mapping.initial_upper_bound_ms;
        m->probes = (uint32_t)p->mapping.probes;
        m->probes_timed_out = (uint32_t)p->mapping.probes_timed_out;
        m->symmetric_pruned = p->mapping.symmetric_pruned;
        m->seconds = p->mapping.seconds;
        m->simulated_step_ms = p->mapping.searched_step_ms;
        pb->mapping = m;
    }
    const pf_baseline_t *bl[2] = {&p->cs_map, &p->p2p_map};
    Planfarm__Baseline **dst[2] = {&pb->cs_map, &pb->p2p_map};
    for (int i = 0; i < 2; i++) {
        if (!bl[i]->present)
            continue;
        Planfarm__Baseline *b = PF_ANEW(a, Planfarm__Baseline, 1);
        if (!b)
            return PF_ERR;
        planfarm__baseline__init(b);
        b->objective_ms = bl[i]->objective_ms;
        b->simulated_step_ms = bl[i]->simulated_step_ms;
        b->adopted = bl[i]->adopted != 0;
        *dst[i] = b;
    }
    if (p->partition_search.present) {
        Planfarm__PartitionSearch *m = PF_ANEW(a, Planfarm__PartitionSearch, 1);
        if (!m)
            return PF_ERR;
        planfarm__partition_search__init(m);
        m->ops = (uint32_t)p->partition_search.ops;
        m->hyper_ops = (uint32_t)p->partition_search.hyper_ops;
        m->downsets = p->partition_search.downsets;
        m->exact = p->partition_search.exact;
        m->alpha = p->partition_search.alpha;
        m->flat_gbps = p->partition_search.flat_gbps;
        m->coarsen_s = p->partition_search.coarsen_s;
        m->dp_s = p->partition_search.dp_s;
        m->refine_s = p->partition_search.refine_s;
        m->refine_moves = (uint32_t)p->partition_search.refine_moves;
        m->objective_before_refine_ms = p->partition_search.objective_before_refine_ms;
        pb->partition_search = m;
    }
    if (p->search.present) {
        Planfarm__SearchInfo *m = PF_ANEW(a, Planfarm__SearchInfo, 1);
        if (!m)
            return PF_ERR;
        planfarm__search_info__init(m);
        m->jobs = p->search.jobs;
        m->workers = (uint32_t)p->search.workers;
        m->wall_s = p->search.wall_s;
        pb->search = m;
    }
    return PF_OK;
}

Planfarm__Plan *pf_model_codec_plan_to_pb(pf_arena_t *a, const pf_plan_t *p)
{
    Planfarm__Plan *pb = PF_ANEW(a, Planfarm__Plan, 1);
    Planfarm__Stage *st = PF_ANEW(a, Planfarm__Stage, p->stages);
    Planfarm__Stage **stp = PF_ANEW(a, Planfarm__Stage *, p->stages);
    if (!pb || !st || !stp)
        return NULL;
    planfarm__plan__init(pb);
    pb->model = str(p->model);
    pb->cluster = str(p->cluster);
    pb->devices = (uint32_t)p->devices;
    pb->stages = (uint32_t)p->stages;
    pb->replicas = (uint32_t)p->replicas;
    pb->tensor_parallel = (uint32_t)p->tensor_parallel;
    pb->microbatches = (uint32_t)p->microbatches;
    pb->virtual_stages = p->blocks.present ? (uint32_t)p->blocks.virtual_stages : 0;
    pb->context_parallel = p->blocks.present ? (uint32_t)p->blocks.context_parallel : 0;
    pb->expert_parallel = p->blocks.present ? (uint32_t)p->blocks.expert_parallel : 0;
    pb->tp_comm_overlap = p->blocks.present && p->blocks.tp_comm_overlap;
    pb->schedule = (char *)p->schedule;
    if (pf_plan_recompute_mixed(p)) {
        if (!(pb->stage_recompute = PF_ANEW(a, uint32_t, p->stages)))
            return NULL;
        pb->n_stage_recompute = (size_t)p->stages;
        for (int s = 0; s < p->stages; s++)
            pb->stage_recompute[s] = (uint32_t)pf_plan_recompute_stage(p, s);
    }
    for (int s = 0; s < p->stages; s++) {
        const pf_stage_t *x = &p->stage_list[s];
        Planfarm__Stage *y = &st[s];
        planfarm__stage__init(y);
        uint32_t *ops = PF_ANEW(a, uint32_t, x->nops);
        if (!ops)
            return NULL;
        for (int i = 0; i < x->nops; i++)
            ops[i] = (uint32_t)x->ops[i];
        y->ops = ops;
        y->n_ops = (size_t)x->nops;
        y->compute_ms = x->compute_ms;
        y->time_ms = x->time_ms;
        y->peak_mem_bytes = x->peak_mem_bytes;
        y->replicas = pf_plan_degrees_mixed(p) ? (uint32_t)pf_plan_degrees_replicas(p, s) : 0;
        y->tp = y->replicas ? (uint32_t)pf_plan_degrees_tp(p, s) : 0;
        if (x->devices) { /* replica r's t_s devices at [r t_s, r t_s + t_s) */
            int n = pf_plan_degrees_ndevices(p, s);
            int32_t *d = PF_ANEW(a, int32_t, n);
            if (!d)
                return NULL;
            for (int i = 0; i < n; i++)
                d[i] = x->devices[i];
            y->devices = d;
            y->n_devices = (size_t)n;
        }
        stp[s] = y;
    }
    pb->stage_list = stp;
    pb->n_stage_list = (size_t)p->stages;
    pb->partition_objective_ms = p->partition_objective_ms;
    pb->objective_ms = p->objective_ms;
    pb->simulated_step_ms = p->simulated_step_ms;
    return reports_to_pb(a, p, pb) == PF_OK ? pb : NULL;
}

/* stage_list[s]: op and device indices in range, d_s x t_s devices when given (the stage's
 * degrees are read before: stage_degrees_from_pb). */
static int stage_from_pb(const Planfarm__Stage *x, uint32_t s, pf_plan_t *p, int nops,
                         int ndevices, int *ops, char *err, size_t errlen)
{
    if (x->n_ops > (size_t)nops)
        return pf_fail(err, errlen, PF_EINPUT, "plan.stage_list[%u].ops: more than %d ops", s,
                       nops);
    for (size_t i = 0; i < x->n_ops; i++) {
        if (x->ops[i] >= (uint32_t)nops)
            return pf_fail(err, errlen, PF_EINPUT,
                           "plan.stage_list[%u].ops[%zu]: index out of range", s, i);
        ops[i] = (int)x->ops[i];
    }
    if (pf_plan_set_stage_ops(p, (int)s, ops, (int)x->n_ops) != PF_OK)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    pf_stage_t *y = &p->stage_list[s];
    y->compute_ms = x->compute_ms;
    y->time_ms = x->time_ms;
    y->peak_mem_bytes = x->peak_mem_bytes;
    if (!x->n_devices)
        return PF_OK;
    int replicas = pf_plan_degrees_replicas(p, (int)s), T = pf_plan_degrees_tp(p, (int)s);
    if (x->n_devices != (size_t)replicas * T)
        return pf_fail(err, errlen, PF_EINPUT, "plan.stage_list[%u].devices: %zu entries, "
                       "replicas x tensor_parallel = %d x %d", s, x->n_devices, replicas, T);
    int *d = pf_plan_stage_devices(p, (int)s);
    if (!d)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (size_t r = 0; r < x->n_devices; r++) {
        if (x->devices[r] < 0 || x->devices[r] >= ndevices)
            return pf_fail(err, errlen, PF_EINPUT, "plan.stage_list[%u].devices[%zu]: out of "
                           "range", s, r);
        d[r] = x->devices[r];
    }
    return PF_OK;
}

/* Every stage's own degrees, when the stages differ (all of them given, or none), checked as a
 * plan file's are (pf_plan_degrees_check). */
static int stage_degrees_from_pb(const Planfarm__Plan *m, pf_plan_t *p, int ndevices, char *err,
                                 size_t errlen)
{
    int given = 0;
    for (uint32_t s = 0; s < m->stages; s++) {
        const Planfarm__Stage *x = m->stage_list[s];
        if (!x->replicas != !x->tp || x->replicas > (1u << 20) || x->tp > (1u << 16))
            return pf_fail(err, errlen, PF_EINPUT, "plan.stage_list[%u]: replicas %u, tp %u "
                           "out of range", s, x->replicas, x->tp);
        given += x->replicas > 0;
        p->stage_list[s].replicas = (int)x->replicas;
        p->stage_list[s].tensor_parallel = (int)x->tp;
    }
    if (given && given != (int)m->stages)
        return pf_fail(err, errlen, PF_EINPUT, "plan.stage_list: %d of %u stages give their "
                       "degrees (all or none)", given, m->stages);
    return given ? pf_plan_degrees_check(p, ndevices, err, errlen) : PF_OK;
}

/* What the search reports beside the plan: mapping, baselines, partition search, jobs. */
static void reports_from_pb(const Planfarm__Plan *m, pf_plan_t *p)
{
    if (m->mapping) {
        p->mapping.present = 1;
        snprintf(p->mapping.instantiation, sizeof p->mapping.instantiation, "%s",
                 m->mapping->instantiation ? m->mapping->instantiation : "");
        p->mapping.objective_ms = m->mapping->objective_ms;
        p->mapping.lower_bound_ms = m->mapping->lower_bound_ms;
        p->mapping.initial_lower_bound_ms = m->mapping->initial_lower_bound_ms;
        p->mapping.initial_upper_bound_ms = m->mapping->initial_upper_bound_ms;
        p->mapping.probes = (int)m->mapping->probes;
        p->mapping.probes_timed_out = (int)m->mapping->probes_timed_out;
        p->mapping.symmetric_pruned = m->mapping->symmetric_pruned;
        p->mapping.seconds = m->mapping->seconds;
        p->mapping.searched_step_ms = m->mapping->simulated_step_ms;
    }
    const Planfarm__Baseline *bl[2] = {m->cs_map, m->p2p_map};
    pf_baseline_t *dst[2] = {&p->cs_map, &p->p2p_map};
    for (int i = 0; i < 2; i++)
        if (bl[i])
            *dst[i] = (pf_baseline_t){1, bl[i]->objective_ms, bl[i]->simulated_step_ms,
                                      bl[i]->adopted};
    if (m->partition_search) {
        const Planfarm__PartitionSearch *x = m->partition_search;
        p->partition_search.present = 1;
        p->partition_search.ops = (int)x->ops;
        p->partition_search.hyper_ops = (int)x->hyper_ops;
        p->partition_search.downsets = x->downsets;
        p->partition_search.exact = x->exact;
        p->partition_search.alpha = x->alpha;
        p->partition_search.flat_gbps = x->flat_gbps;
        p->partition_search.coarsen_s = x->coarsen_s;
        p->partition_search.dp_s = x->dp_s;
        p->partition_search.refine_s = x->refine_s;
        p->partition_search.refine_moves = (int)x->refine_moves;
        p->partition_search.objective_before_refine_ms = x->objective_before_refine_ms;
    }
    if (m->search) {
        p->search.present = 1;
        p->search.jobs = m->search->jobs;
        p->search.workers = (int)m->search->workers;
        p->search.wall_s = m->search->wall_s;
    }
}

/* Counts in range before anything is allocated by them: S x R x T devices at most, unless the
 * stages give their own degrees (checked once read). */
static bool plan_counts_fit(const Planfarm__Plan *m, int nops, int ndevices, uint32_t T)
{
    bool own = m->n_stage_list && m->stage_list[0]->replicas;
    return m->stages > 0 && m->replicas > 0 && m->stages <= (uint32_t)nops &&
           m->replicas <= (uint32_t)ndevices && T <= (uint32_t)ndevices &&
           (own || (uint64_t)m->stages * m->replicas * T <= (uint64_t)ndevices);
}

int pf_model_codec_plan_from_pb(const Planfarm__Plan *m, int nops, int ndevices, pf_plan_t **out,
                                char *err, size_t errlen)
{
    int rc = PF_EINPUT;
    *out = NULL;
    uint32_t T = m->tensor_parallel ? m->tensor_parallel : 1;
    if (!plan_counts_fit(m, nops, ndevices, T))
        return pf_fail(err, errlen, rc, "plan: %u stages x %u replicas x %u tensor-parallel do "
                       "not fit %d ops, %d devices", m->stages, m->replicas, T, nops, ndevices);
    if (m->n_stage_list != m->stages)
        return pf_fail(err, errlen, rc, "plan.stage_list: %zu entries, stages = %u",
                       m->n_stage_list, m->stages);
    if (m->microbatches == 0 || m->microbatches > (1u << 20))
        return pf_fail(err, errlen, rc, "plan.microbatches: %u out of range", m->microbatches);
    pf_plan_t *p = pf_plan_new((int)m->stages, (int)m->replicas);
    int *ops = malloc((size_t)nops * sizeof *ops);
    if (!p || !ops) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    pf_plan_set_names(p, m->model, m->cluster);
    p->devices = ndevices;
    if (pf_plan_set_tensor_parallel(p, (int)T) != PF_OK) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    p->microbatches = (int)m->microbatches;
    if (m->virtual_stages > 1 && m->virtual_stages <= 1u << 10) /* the rest of the block keys
                                                                    stay with the requester */
        p->blocks.present = 1, p->blocks.virtual_stages = (int)m->virtual_stages;
    if (m->context_parallel > 1 && m->context_parallel <= 1u << 20 &&
        m->replicas % m->context_parallel == 0) /* simcpep.h prices its ring */
        p->blocks.present = 1, p->blocks.context_parallel = (int)m->context_parallel;
    if (m->expert_parallel > 1 && m->expert_parallel <= 1u << 20)
        p->blocks.present = 1, p->blocks.expert_parallel = (int)m->expert_parallel;
    if (m->tp_comm_overlap) /* simulated; sequence parallelism comes with the job's training */
        p->blocks.present = 1, p->blocks.tp_comm_overlap = 1,
        p->blocks.virtual_stages = p->blocks.virtual_stages > 1 ? p->blocks.virtual_stages : 1;
    snprintf(p->schedule, sizeof p->schedule, "%s", m->schedule ? m->schedule : "1f1b");
    if (m->n_stage_recompute && m->n_stage_recompute != m->stages) {
        rc = pf_fail(err, errlen, PF_EINPUT, "plan.stage_recompute: %zu entries, stages = %u",
                     m->n_stage_recompute, m->stages);
        goto fail;
    }
    for (size_t s = 0; s < m->n_stage_recompute; s++) {
        if (m->stage_recompute[s] > PF_RECOMPUTE_FULL) {
            rc = pf_fail(err, errlen, PF_EINPUT, "plan.stage_recompute[%zu]: %u is not 0, 1 "
                         "or 2", s, m->stage_recompute[s]);
            goto fail;
        }
        p->stage_list[s].has_recompute = 1;
        p->stage_list[s].recompute = (pf_training_recompute_t)m->stage_recompute[s];
    }
    if ((rc = stage_degrees_from_pb(m, p, ndevices, err, errlen)) != PF_OK)
        goto fail;
    for (uint32_t s = 0; s < m->stages; s++)
        if ((rc = stage_from_pb(m->stage_list[s], s, p, nops, ndevices, ops, err, errlen)))
            goto fail;
    p->partition_objective_ms = m->partition_objective_ms;
    p->objective_ms = m->objective_ms;
    p->simulated_step_ms = m->simulated_step_ms;
    reports_from_pb(m, p);
    free(ops);
    *out = p;
    return PF_OK;
fail:
    free(ops);
    pf_plan_destroy(&p);
    return rc;
}

/* ---- blob payloads ---- */

int pf_model_codec_encode_graph(const pf_graph_t *g, uint8_t **buf, size_t *len)
{
    pf_arena_t *a = pf_arena_new();
    Planfarm__Graph *m = a ? pf_model_codec_graph_to_pb(a, g) : NULL;
    int rc = m ? pf_wire_pack(&m->base, buf, len) : PF_ERR;
    pf_arena_destroy(&a);
    return rc;
}

int pf_model_codec_decode_graph(const uint8_t *buf, size_t len, pf_graph_t **out, char *err,
                                size_t errlen)
{
    *out = NULL;
    Planfarm__Graph *m = planfarm__graph__unpack(NULL, len, buf);
    if (!m)
        return pf_fail(err, errlen, PF_EINPUT, "graph: not a valid protobuf message");
    int rc = pf_model_codec_graph_from_pb(m, out, err, errlen);
    planfarm__graph__free_unpacked(m, NULL);
    return rc;
}

int pf_model_codec_encode_cluster(const pf_cluster_t *c, uint8_t **buf, size_t *len)
{
    pf_arena_t *a = pf_arena_new();
    Planfarm__Cluster *m = a ? pf_model_codec_cluster_to_pb(a, c) : NULL;
    int rc = m ? pf_wire_pack(&m->base, buf, len) : PF_ERR;
    pf_arena_destroy(&a);
    return rc;
}

int pf_model_codec_decode_cluster(const uint8_t *buf, size_t len, pf_cluster_t **out, char *err,
                                  size_t errlen)
{
    *out = NULL;
    Planfarm__Cluster *m = planfarm__cluster__unpack(NULL, len, buf);
    if (!m)
        return pf_fail(err, errlen, PF_EINPUT, "cluster: not a valid protobuf message");
    int rc = pf_model_codec_cluster_from_pb(m, out, err, errlen);
    planfarm__cluster__free_unpacked(m, NULL);
    return rc;
}
