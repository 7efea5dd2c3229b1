#include "proto/codec.h"
#include "planner/cost.h"
#include "planner/util.h"

#include <math.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on what a decoded message may ask us to allocate; ZMQ_MAXMSGSIZE bounds the bytes,
 * these bound the counts inside them. */
#define MAX_OPS (1 << 24)
#define MAX_DEVICES (1 << 14)
#define MAX_STAGE_REPLICAS (1 << 16)

static const char *const msg_names[] = {
    [PF_MSG_READY] = "READY",           [PF_MSG_HEARTBEAT] = "HEARTBEAT",
    [PF_MSG_RESULT] = "RESULT",         [PF_MSG_FAILED] = "FAILED",
    [PF_MSG_FETCH] = "FETCH",           [PF_MSG_BYE] = "BYE",
    [PF_MSG_JOB] = "JOB",               [PF_MSG_BLOB] = "BLOB",
    [PF_MSG_CANCEL] = "CANCEL",         [PF_MSG_SUBMIT] = "SUBMIT",
    [PF_MSG_STATUS] = "STATUS",         [PF_MSG_RESULT_REQ] = "RESULT_REQ",
    [PF_MSG_CANCEL_REQ] = "CANCEL_REQ", [PF_MSG_LIST] = "LIST",
    [PF_MSG_SUBMIT_REPLY] = "SUBMIT_REPLY", [PF_MSG_STATUS_REPLY] = "STATUS_REPLY",
    [PF_MSG_RESULT_REPLY] = "RESULT_REPLY", [PF_MSG_LIST_REPLY] = "LIST_REPLY",
    [PF_MSG_ERROR] = "ERROR",
};

const char *pf_msg_name(int kind)
{
    if (kind < 0 || kind >= (int)(sizeof msg_names / sizeof msg_names[0]) || !msg_names[kind])
        return "?";
    return msg_names[kind];
}

void pf_wire_header(pf_msg_t kind, uint8_t out[PF_WIRE_HEADER_LEN])
{
    out[0] = 'P';
    out[1] = 'F';
    out[2] = PF_WIRE_VERSION;
    out[3] = (uint8_t)kind;
}

int pf_wire_parse_header(const void *data, size_t size, pf_msg_t *kind, char *err, size_t errlen)
{
    const uint8_t *b = data;
    if (size != PF_WIRE_HEADER_LEN || b[0] != 'P' || b[1] != 'F')
        return pf_fail(err, errlen, PF_EINPUT, "bad protocol tag");
    if (b[2] != PF_WIRE_VERSION)
        return pf_fail(err, errlen, PF_EINPUT, "protocol version %d, expected %d", b[2],
                       PF_WIRE_VERSION);
    if (strcmp(pf_msg_name(b[3]), "?") == 0)
        return pf_fail(err, errlen, PF_EINPUT, "unknown message kind %d", b[3]);
    *kind = (pf_msg_t)b[3];
    return PF_OK;
}

/* ---- arena ---- */

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    alignas(max_align_t) unsigned char data[];
} chunk_t;

struct pf_arena {
    chunk_t *head;
};

pf_arena_t *pf_arena_new(void)
{
    return calloc(1, sizeof(pf_arena_t));
}

void pf_arena_destroy(pf_arena_t **ap)
{
    if (!ap || !*ap)
        return;
    for (chunk_t *c = (*ap)->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(*ap);
    *ap = NULL;
}

void *pf_arena_alloc(pf_arena_t *a, size_t size)
{
    size = (size + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
    if (size == 0)
        size = alignof(max_align_t);
    chunk_t *c = a->head;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > 65536 ? size : 65536;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

#define ANEW(a, type, n) ((type *)pf_arena_alloc((a), sizeof(type) * (size_t)(n)))

int pf_codec_pack(const ProtobufCMessage *m, uint8_t **buf, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    *buf = malloc(n ? n : 1);
    if (!*buf)
        return PF_ERR;
    *len = protobuf_c_message_pack(m, *buf);
    return PF_OK;
}

static char *str(const char *s)
{
    return (char *)(s ? s : "");
}

static int finite_nonneg(double x)
{
    return isfinite(x) && x >= 0;
}

/* ---- graph ---- */

static Planfarm__Shape *shape_to_pb(pf_arena_t *a, const pf_shape_t *s)
{
    if (s->ndim == 0)
        return NULL;
    Planfarm__Shape *m = ANEW(a, Planfarm__Shape, 1);
    int64_t *dim = ANEW(a, int64_t, s->ndim);
    if (!m || !dim)
        return NULL;
    planfarm__shape__init(m);
    memcpy(dim, s->dim, (size_t)s->ndim * sizeof *dim);
    m->dim = dim;
    m->n_dim = (size_t)s->ndim;
    return m;
}

Planfarm__Graph *pf_codec_graph_to_pb(pf_arena_t *a, const pf_graph_t *g)
{
    int n = pf_graph_nops(g), m = pf_graph_nedges(g);
    Planfarm__Graph *pb = ANEW(a, Planfarm__Graph, 1);
    Planfarm__Op *ops = ANEW(a, Planfarm__Op, n);
    Planfarm__Op **opp = ANEW(a, Planfarm__Op *, n);
    Planfarm__Edge *edges = ANEW(a, Planfarm__Edge, m);
    Planfarm__Edge **edp = ANEW(a, Planfarm__Edge *, m);
    if (!pb || !ops || !opp || !edges || !edp)
        return NULL;
    planfarm__graph__init(pb);
    pb->name = str(pf_graph_name(g));
    pb->microbatch = (uint32_t)pf_graph_microbatch(g);
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
        if ((o->weight.ndim && !(x->weight = shape_to_pb(a, &o->weight))) ||
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

int pf_codec_graph_from_pb(const Planfarm__Graph *m, pf_graph_t **out, char *err, size_t errlen)
{
    int rc;
    *out = NULL;
    if (m->n_ops == 0 || m->n_ops > MAX_OPS || m->n_edges > 16 * (size_t)MAX_OPS)
        return pf_fail(err, errlen, PF_EINPUT, "graph: %zu ops, %zu edges out of range", m->n_ops,
                       m->n_edges);
    if (m->microbatch == 0 || m->microbatch > (1u << 30))
        return pf_fail(err, errlen, PF_EINPUT, "graph.microbatch: %u out of range", m->microbatch);
    pf_graph_t *g = pf_graph_new(m->name, (int)m->microbatch);
    if (!g)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (size_t v = 0; v < m->n_ops; v++) {
        const Planfarm__Op *x = m->ops[v];
        pf_op_t op = {.id = x->id, .name = x->name, .type = x->type, .fwd_ms = x->fwd_ms,
                      .bwd_ms = x->bwd_ms, .param_bytes = x->param_bytes,
                      .mem_fwd_bytes = x->mem_fwd_bytes, .mem_bwd_bytes = x->mem_bwd_bytes};
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

Planfarm__Cluster *pf_codec_cluster_to_pb(pf_arena_t *a, const pf_cluster_t *c)
{
    int n = pf_cluster_ndevices(c);
    size_t nn = (size_t)n * (size_t)n;
    Planfarm__Cluster *pb = ANEW(a, Planfarm__Cluster, 1);
    Planfarm__Device *dev = ANEW(a, Planfarm__Device, n);
    Planfarm__Device **devp = ANEW(a, Planfarm__Device *, n);
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

int pf_codec_cluster_from_pb(const Planfarm__Cluster *m, pf_cluster_t **out, char *err,
                             size_t errlen)
{
    int rc;
    size_t n = m->n_devices;
    *out = NULL;
    if (n == 0 || n > MAX_DEVICES)
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

Planfarm__StageGraph *pf_codec_stage_graph_to_pb(pf_arena_t *a, const pf_stage_graph_t *sg)
{
    int S = pf_stage_graph_stages(sg);
    Planfarm__StageGraph *pb = ANEW(a, Planfarm__StageGraph, 1);
    double *cu = ANEW(a, double, S), *par = ANEW(a, double, S);
    double *msg = ANEW(a, double, (size_t)S * S);
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
    return pb;
}

int pf_codec_stage_graph_from_pb(const Planfarm__StageGraph *m, pf_stage_graph_t **out, char *err,
                                 size_t errlen)
{
    size_t S = m->stages, R = m->replicas;
    *out = NULL;
    if (S == 0 || R == 0 || S * R > MAX_STAGE_REPLICAS)
        return pf_fail(err, errlen, PF_EINPUT, "stage_graph: %zu stages x %zu replicas out of range",
                       S, R);
    if (m->n_cu_ms != S || m->n_param_bytes != S || m->n_msg_bytes != S * S)
        return pf_fail(err, errlen, PF_EINPUT, "stage_graph: array sizes do not match %zu stages",
                       S);
    for (size_t s = 0; s < S; s++) {
        if (!finite_nonneg(m->cu_ms[s]) || !finite_nonneg(m->param_bytes[s]))
            return pf_fail(err, errlen, PF_EINPUT, "stage_graph: stage %zu has a bad number", s);
        for (size_t t = 0; t < S; t++) {
            double x = m->msg_bytes[s * S + t];
            if (!finite_nonneg(x) || (s != t && x != m->msg_bytes[t * S + s]))
                return pf_fail(err, errlen, PF_EINPUT,
                               "stage_graph.msg_bytes[%zu][%zu]: negative, not finite or "
                               "asymmetric",
                               s, t);
        }
    }
    *out = pf_stage_graph_new((int)S, (int)R, m->cu_ms, m->param_bytes, m->msg_bytes);
    return *out ? PF_OK : pf_fail(err, errlen, PF_ERR, "out of memory");
}

/* ---- plan ---- */

Planfarm__Plan *pf_codec_plan_to_pb(pf_arena_t *a, const pf_plan_t *p)
{
    Planfarm__Plan *pb = ANEW(a, Planfarm__Plan, 1);
    Planfarm__Stage *st = ANEW(a, Planfarm__Stage, p->stages);
    Planfarm__Stage **stp = ANEW(a, Planfarm__Stage *, p->stages);
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
    pb->schedule = (char *)p->schedule;
    for (int s = 0; s < p->stages; s++) {
        const pf_stage_t *x = &p->stage_list[s];
        Planfarm__Stage *y = &st[s];
        planfarm__stage__init(y);
        uint32_t *ops = ANEW(a, uint32_t, x->nops);
        if (!ops)
            return NULL;
        for (int i = 0; i < x->nops; i++)
            ops[i] = (uint32_t)x->ops[i];
        y->ops = ops;
        y->n_ops = (size_t)x->nops;
        y->compute_ms = x->compute_ms;
        y->time_ms = x->time_ms;
        y->peak_mem_bytes = x->peak_mem_bytes;
        if (x->devices) {
            int32_t *d = ANEW(a, int32_t, p->replicas);
            if (!d)
                return NULL;
            for (int r = 0; r < p->replicas; r++)
                d[r] = x->devices[r];
            y->devices = d;
            y->n_devices = (size_t)p->replicas;
        }
        stp[s] = y;
    }
    pb->stage_list = stp;
    pb->n_stage_list = (size_t)p->stages;
    pb->partition_objective_ms = p->partition_objective_ms;
    pb->objective_ms = p->objective_ms;
    pb->simulated_step_ms = p->simulated_step_ms;
    if (p->mapping.present) {
        Planfarm__MappingInfo *m = ANEW(a, Planfarm__MappingInfo, 1);
        if (!m)
            return NULL;
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
        pb->mapping = m;
    }
    const pf_baseline_t *bl[2] = {&p->cs_map, &p->p2p_map};
    Planfarm__Baseline **dst[2] = {&pb->cs_map, &pb->p2p_map};
    for (int i = 0; i < 2; i++) {
        if (!bl[i]->present)
            continue;
        Planfarm__Baseline *b = ANEW(a, Planfarm__Baseline, 1);
        if (!b)
            return NULL;
        planfarm__baseline__init(b);
        b->objective_ms = bl[i]->objective_ms;
        b->simulated_step_ms = bl[i]->simulated_step_ms;
        *dst[i] = b;
    }
    if (p->partition_search.present) {
        Planfarm__PartitionSearch *m = ANEW(a, Planfarm__PartitionSearch, 1);
        if (!m)
            return NULL;
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
        Planfarm__SearchInfo *m = ANEW(a, Planfarm__SearchInfo, 1);
        if (!m)
            return NULL;
        planfarm__search_info__init(m);
        m->jobs = p->search.jobs;
        m->workers = (uint32_t)p->search.workers;
        m->wall_s = p->search.wall_s;
        pb->search = m;
    }
    return pb;
}

int pf_codec_plan_from_pb(const Planfarm__Plan *m, int nops, int ndevices, pf_plan_t **out,
                          char *err, size_t errlen)
{
    int rc = PF_EINPUT;
    *out = NULL;
    if (m->stages == 0 || m->replicas == 0 || m->stages > (uint32_t)nops ||
        (uint64_t)m->stages * m->replicas > (uint64_t)ndevices)
        return pf_fail(err, errlen, rc, "plan: %u stages x %u replicas do not fit %d ops, %d devices",
                       m->stages, m->replicas, nops, ndevices);
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
    p->tensor_parallel = m->tensor_parallel ? (int)m->tensor_parallel : 1;
    p->microbatches = (int)m->microbatches;
    snprintf(p->schedule, sizeof p->schedule, "%s", m->schedule ? m->schedule : "1f1b");
    for (uint32_t s = 0; s < m->stages; s++) {
        const Planfarm__Stage *x = m->stage_list[s];
        if (x->n_ops > (size_t)nops) {
            pf_fail(err, errlen, rc, "plan.stage_list[%u].ops: more than %d ops", s, nops);
            goto fail;
        }
        for (size_t i = 0; i < x->n_ops; i++) {
            if (x->ops[i] >= (uint32_t)nops) {
                pf_fail(err, errlen, rc, "plan.stage_list[%u].ops[%zu]: index out of range", s, i);
                goto fail;
            }
            ops[i] = (int)x->ops[i];
        }
        if (pf_plan_set_stage_ops(p, (int)s, ops, (int)x->n_ops) != PF_OK) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
        pf_stage_t *y = &p->stage_list[s];
        y->compute_ms = x->compute_ms;
        y->time_ms = x->time_ms;
        y->peak_mem_bytes = x->peak_mem_bytes;
        if (x->n_devices) {
            if (x->n_devices != m->replicas) {
                pf_fail(err, errlen, rc, "plan.stage_list[%u].devices: %zu entries, replicas = %u",
                        s, x->n_devices, m->replicas);
                goto fail;
            }
            int *d = pf_plan_stage_devices(p, (int)s);
            if (!d) {
                rc = pf_fail(err, errlen, PF_ERR, "out of memory");
                goto fail;
            }
            for (uint32_t r = 0; r < m->replicas; r++) {
                if (x->devices[r] < 0 || x->devices[r] >= ndevices) {
                    pf_fail(err, errlen, rc, "plan.stage_list[%u].devices[%u]: out of range", s, r);
                    goto fail;
                }
                d[r] = x->devices[r];
            }
        }
    }
    p->partition_objective_ms = m->partition_objective_ms;
    p->objective_ms = m->objective_ms;
    p->simulated_step_ms = m->simulated_step_ms;
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
    }
    const Planfarm__Baseline *bl[2] = {m->cs_map, m->p2p_map};
    pf_baseline_t *dst[2] = {&p->cs_map, &p->p2p_map};
    for (int i = 0; i < 2; i++)
        if (bl[i])
            *dst[i] = (pf_baseline_t){1, bl[i]->objective_ms, bl[i]->simulated_step_ms};
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
    free(ops);
    *out = p;
    return PF_OK;
fail:
    free(ops);
    pf_plan_destroy(&p);
    return rc;
}

/* ---- blob payloads ---- */

int pf_codec_encode_graph(const pf_graph_t *g, uint8_t **buf, size_t *len)
{
    pf_arena_t *a = pf_arena_new();
    Planfarm__Graph *m = a ? pf_codec_graph_to_pb(a, g) : NULL;
    int rc = m ? pf_codec_pack(&m->base, buf, len) : PF_ERR;
    pf_arena_destroy(&a);
    return rc;
}

int pf_codec_decode_graph(const uint8_t *buf, size_t len, pf_graph_t **out, char *err,
                          size_t errlen)
{
    *out = NULL;
    Planfarm__Graph *m = planfarm__graph__unpack(NULL, len, buf);
    if (!m)
        return pf_fail(err, errlen, PF_EINPUT, "graph: not a valid protobuf message");
    int rc = pf_codec_graph_from_pb(m, out, err, errlen);
    planfarm__graph__free_unpacked(m, NULL);
    return rc;
}

int pf_codec_encode_cluster(const pf_cluster_t *c, uint8_t **buf, size_t *len)
{
    pf_arena_t *a = pf_arena_new();
    Planfarm__Cluster *m = a ? pf_codec_cluster_to_pb(a, c) : NULL;
    int rc = m ? pf_codec_pack(&m->base, buf, len) : PF_ERR;
    pf_arena_destroy(&a);
    return rc;
}

int pf_codec_decode_cluster(const uint8_t *buf, size_t len, pf_cluster_t **out, char *err,
                            size_t errlen)
{
    *out = NULL;
    Planfarm__Cluster *m = planfarm__cluster__unpack(NULL, len, buf);
    if (!m)
        return pf_fail(err, errlen, PF_EINPUT, "cluster: not a valid protobuf message");
    int rc = pf_codec_cluster_from_pb(m, out, err, errlen);
    planfarm__cluster__free_unpacked(m, NULL);
    return rc;
}

/* ---- jobs ---- */

void pf_wire_hex(const uint8_t *bytes, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * len] = '\0';
}

static Planfarm__BlobRef *ref_to_pb(pf_arena_t *a, const pf_blob_ref_t *r, Planfarm__BlobKind k)
{
    if (!r || r->hash_len == 0)
        return NULL;
    Planfarm__BlobRef *m = ANEW(a, Planfarm__BlobRef, 1);
    uint8_t *h = ANEW(a, uint8_t, r->hash_len);
    if (!m || !h)
        return NULL;
    planfarm__blob_ref__init(m);
    memcpy(h, r->hash, r->hash_len);
    m->hash.data = h;
    m->hash.len = r->hash_len;
    m->kind = k;
    m->size = r->size;
    return m;
}

static int ref_from_pb(const Planfarm__BlobRef *m, Planfarm__BlobKind want, pf_blob_ref_t *r,
                       const char *what, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (!m)
        return pf_fail(err, errlen, PF_EINPUT, "job.%s: missing", what);
    if (m->hash.len == 0 || m->hash.len > PF_HASH_MAX || m->kind != want)
        return pf_fail(err, errlen, PF_EINPUT, "job.%s: bad blob reference", what);
    memcpy(r->hash, m->hash.data, m->hash.len);
    r->hash_len = m->hash.len;
    r->size = m->size;
    return PF_OK;
}

Planfarm__Job *pf_codec_job_to_pb(pf_arena_t *a, uint64_t id, uint32_t attempt,
                                  const pf_job_t *job, const pf_blob_ref_t *graph,
                                  const pf_blob_ref_t *cluster)
{
    Planfarm__Job *m = ANEW(a, Planfarm__Job, 1);
    if (!m)
        return NULL;
    planfarm__job__init(m);
    m->id = id;
    m->attempt = attempt;
    m->kind = (Planfarm__JobKind)job->kind;
    m->threads = job->threads > 0 ? (uint32_t)job->threads : 0;
    if (job->kind == PF_JOB_DP_PARTITION) {
        const pf_partition_opts_t *o = &job->partition;
        Planfarm__PartitionParams *pp = ANEW(a, Planfarm__PartitionParams, 1);
        if (!pp || !(m->graph = ref_to_pb(a, graph, PLANFARM__BLOB_KIND__BLOB_GRAPH)) ||
            !(m->cluster = ref_to_pb(a, cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER)))
            return NULL;
        planfarm__partition_params__init(pp);
        pp->stages = (uint32_t)o->stages;
        pp->replicas = (uint32_t)o->replicas;
        pp->microbatches = (uint32_t)o->microbatches;
        pp->flat_gbps = o->flat_gbps;
        pp->coarsen_k = o->coarsen_k;
        pp->alpha = o->alpha;
        pp->refine = o->refine != 0;
        pp->refine_max_moves = (uint32_t)o->refine_max_moves;
        pp->max_downsets = o->max_downsets;
        if (o->group && job->graph) {
            int n = pf_graph_nops(job->graph);
            uint32_t *g = ANEW(a, uint32_t, n);
            if (!g)
                return NULL;
            for (int v = 0; v < n; v++)
                g[v] = (uint32_t)o->group[v];
            pp->group = g;
            pp->n_group = (size_t)n;
            pp->ngroups = (uint32_t)o->ngroups;
        }
        m->partition = pp;
    } else if (job->kind == PF_JOB_MAP_PROBE) {
        Planfarm__ProbeParams *pp = ANEW(a, Planfarm__ProbeParams, 1);
        if (!pp || !(m->cluster = ref_to_pb(a, cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER)))
            return NULL;
        planfarm__probe_params__init(pp);
        if (!(pp->stage_graph = pf_codec_stage_graph_to_pb(a, job->stage_graph)))
            return NULL;
        pp->instantiation = (uint32_t)job->inst;
        pp->target_ms = job->target_ms;
        pp->budget_s = job->budget_s;
        pp->symmetry = job->symmetry != 0;
        m->probe = pp;
    }
    return m;
}

void pf_wire_job_clear(pf_wire_job_t *j)
{
    if (!j)
        return;
    free(j->group);
    pf_stage_graph_destroy(&j->stage_graph);
    memset(j, 0, sizeof *j);
}

int pf_codec_job_from_pb(const Planfarm__Job *m, pf_wire_job_t *out, char *err, size_t errlen)
{
    int rc;
    memset(out, 0, sizeof *out);
    out->id = m->id;
    out->attempt = m->attempt;
    out->threads = m->threads > 4096 ? 0 : (int)m->threads;
    if (m->id == 0)
        return pf_fail(err, errlen, PF_EINPUT, "job.id: zero");
    switch (m->kind) {
    case PLANFARM__JOB_KIND__JOB_NOOP:
        out->kind = PF_JOB_NOOP;
        return PF_OK;
    case PLANFARM__JOB_KIND__JOB_DP_PARTITION: {
        const Planfarm__PartitionParams *pp = m->partition;
        out->kind = PF_JOB_DP_PARTITION;
        if ((rc = ref_from_pb(m->graph, PLANFARM__BLOB_KIND__BLOB_GRAPH, &out->graph, "graph", err,
                              errlen)) ||
            (rc = ref_from_pb(m->cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER, &out->cluster,
                              "cluster", err, errlen)))
            return rc;
        if (!pp)
            return pf_fail(err, errlen, PF_EINPUT, "job.partition: missing");
        if (pp->stages == 0 || pp->stages > MAX_DEVICES || pp->replicas > MAX_DEVICES ||
            pp->microbatches > (1u << 20) || !isfinite(pp->flat_gbps) || !isfinite(pp->alpha) ||
            pp->alpha < 0 || pp->refine_max_moves > (1u << 20))
            return pf_fail(err, errlen, PF_EINPUT, "job.partition: parameter out of range");
        pf_partition_opts_init(&out->partition);
        out->partition.stages = (int)pp->stages;
        out->partition.replicas = (int)pp->replicas;
        out->partition.microbatches = (int)pp->microbatches;
        out->partition.flat_gbps = pp->flat_gbps;
        out->partition.coarsen_k = pp->coarsen_k;
        out->partition.alpha = pp->alpha;
        out->partition.refine = pp->refine;
        out->partition.refine_max_moves = (int)pp->refine_max_moves;
        if (pp->max_downsets > 0)
            out->partition.max_downsets = pp->max_downsets;
        if (pp->n_group) {
            if (pp->n_group > MAX_OPS || pp->ngroups == 0 || pp->ngroups > pp->n_group)
                return pf_fail(err, errlen, PF_EINPUT, "job.partition.group: bad sizes");
            out->group = malloc(pp->n_group * sizeof *out->group);
            if (!out->group)
                return pf_fail(err, errlen, PF_ERR, "out of memory");
            for (size_t v = 0; v < pp->n_group; v++) {
                if (pp->group[v] >= pp->ngroups) {
                    pf_wire_job_clear(out);
                    return pf_fail(err, errlen, PF_EINPUT, "job.partition.group[%zu]: out of range",
                                   v);
                }
                out->group[v] = (int)pp->group[v];
            }
            out->group_len = pp->n_group;
            out->partition.group = out->group;
            out->partition.ngroups = (int)pp->ngroups;
        }
        return PF_OK;
    }
    case PLANFARM__JOB_KIND__JOB_MAP_PROBE: {
        const Planfarm__ProbeParams *pp = m->probe;
        out->kind = PF_JOB_MAP_PROBE;
        if ((rc = ref_from_pb(m->cluster, PLANFARM__BLOB_KIND__BLOB_CLUSTER, &out->cluster,
                              "cluster", err, errlen)))
            return rc;
        if (!pp || !pp->stage_graph)
            return pf_fail(err, errlen, PF_EINPUT, "job.probe: missing");
        if (pp->instantiation > PF_INST_FULL || !finite_nonneg(pp->target_ms) ||
            !isfinite(pp->budget_s))
            return pf_fail(err, errlen, PF_EINPUT, "job.probe: parameter out of range");
        if ((rc = pf_codec_stage_graph_from_pb(pp->stage_graph, &out->stage_graph, err, errlen)))
            return rc;
        out->inst = (pf_inst_t)pp->instantiation;
        out->target_ms = pp->target_ms;
        out->budget_s = pp->budget_s;
        out->symmetry = pp->symmetry;
        return PF_OK;
    }
    default:
        return pf_fail(err, errlen, PF_EINPUT, "job.kind: unknown (%d)", (int)m->kind);
    }
}

int pf_wire_job_check(const pf_wire_job_t *w, const pf_graph_t *graph,
                      const pf_cluster_t *cluster, char *err, size_t errlen)
{
    const pf_job_kind_desc_t *d = pf_job_kind_desc(w->kind);
    if (!d)
        return pf_fail(err, errlen, PF_EINPUT, "job %llu: unknown kind %d",
                       (unsigned long long)w->id, (int)w->kind);
    if (((d->needs & PF_JOB_NEEDS_GRAPH) && !graph) ||
        ((d->needs & PF_JOB_NEEDS_CLUSTER) && !cluster))
        return pf_fail(err, errlen, PF_EINPUT, "job %llu: its blobs are not the %s%s%s a %s job "
                       "needs", (unsigned long long)w->id,
                       d->needs & PF_JOB_NEEDS_GRAPH ? "graph" : "",
                       (d->needs & PF_JOB_NEEDS_GRAPH) && (d->needs & PF_JOB_NEEDS_CLUSTER)
                           ? " and " : "",
                       d->needs & PF_JOB_NEEDS_CLUSTER ? "cluster" : "", d->name);
    /* the partitioner reads group[v] for every op v */
    if (w->group && graph && w->group_len != (size_t)pf_graph_nops(graph))
        return pf_fail(err, errlen, PF_EINPUT,
                       "job.partition.group: %zu entries for a graph of %d ops", w->group_len,
                       pf_graph_nops(graph));
    return PF_OK;
}

void pf_wire_job_bind(const pf_wire_job_t *w, const pf_graph_t *graph,
                      const pf_cluster_t *cluster, pf_job_t *job)
{
    pf_job_init(job, w->kind);
    job->graph = graph;
    job->cluster = cluster;
    job->partition = w->partition;
    job->stage_graph = w->stage_graph;
    job->inst = w->inst;
    job->target_ms = w->target_ms;
    job->budget_s = w->budget_s;
    job->symmetry = w->symmetry;
    job->threads = w->threads;
}

Planfarm__JobResult *pf_codec_result_to_pb(pf_arena_t *a, uint64_t id, const pf_job_result_t *res)
{
    Planfarm__JobResult *m = ANEW(a, Planfarm__JobResult, 1);
    if (!m)
        return NULL;
    planfarm__job_result__init(m);
    m->id = id;
    m->kind = (Planfarm__JobKind)res->kind;
    m->status = res->status;
    m->error = (char *)res->error;
    m->seconds = res->seconds;
    if (res->plan && !(m->plan = pf_codec_plan_to_pb(a, res->plan)))
        return NULL;
    if (res->kind == PF_JOB_MAP_PROBE) {
        Planfarm__ProbeAnswer *pa = ANEW(a, Planfarm__ProbeAnswer, 1);
        if (!pa)
            return NULL;
        planfarm__probe_answer__init(pa);
        pa->found = res->probe.found != 0;
        pa->timed_out = res->probe.timed_out != 0;
        pa->objective_ms = res->probe.objective_ms;
        pa->nodes = res->probe.nodes;
        pa->symmetric_pruned = res->probe.symmetric_pruned;
        if (res->devices && res->ndevices > 0) {
            int32_t *d = ANEW(a, int32_t, res->ndevices);
            if (!d)
                return NULL;
            for (int i = 0; i < res->ndevices; i++)
                d[i] = res->devices[i];
            pa->devices = d;
            pa->n_devices = (size_t)res->ndevices;
        }
        m->probe = pa;
    }
    return m;
}

int pf_codec_result_from_pb(const Planfarm__JobResult *m, int nops, int ndevices,
                            pf_job_result_t *out, char *err, size_t errlen)
{
    int rc;
    memset(out, 0, sizeof *out);
    if (!pf_job_kind_desc((pf_job_kind_t)m->kind))
        return pf_fail(err, errlen, PF_EINPUT, "result.kind: unknown (%d)", (int)m->kind);
    if (m->status != PF_OK && m->status != PF_ERR && m->status != PF_EINPUT &&
        m->status != PF_EINFEASIBLE)
        return pf_fail(err, errlen, PF_EINPUT, "result.status: unknown (%d)", m->status);
    out->kind = (pf_job_kind_t)m->kind;
    out->status = m->status;
    out->seconds = isfinite(m->seconds) ? m->seconds : 0;
    snprintf(out->error, sizeof out->error, "%s", m->error ? m->error : "");
    if (out->kind == PF_JOB_DP_PARTITION && out->status == PF_OK) {
        if (!m->plan)
            return pf_fail(err, errlen, PF_EINPUT, "result.plan: missing");
        if ((rc = pf_codec_plan_from_pb(m->plan, nops, ndevices, &out->plan, err, errlen)))
            return rc;
    }
    if (out->kind == PF_JOB_MAP_PROBE && out->status == PF_OK) {
        const Planfarm__ProbeAnswer *pa = m->probe;
        if (!pa)
            return pf_fail(err, errlen, PF_EINPUT, "result.probe: missing");
        out->probe.found = pa->found;
        out->probe.timed_out = pa->timed_out;
        out->probe.objective_ms = pa->objective_ms;
        out->probe.nodes = pa->nodes;
        out->probe.symmetric_pruned = pa->symmetric_pruned;
        if (pa->found) {
            if (pa->n_devices == 0 || pa->n_devices > (size_t)ndevices ||
                !finite_nonneg(pa->objective_ms))
                return pf_fail(err, errlen, PF_EINPUT, "result.probe: bad mapping");
            out->devices = malloc(pa->n_devices * sizeof *out->devices);
            char *used = calloc((size_t)ndevices, 1);
            if (!out->devices || !used) {
                free(used);
                pf_job_result_clear(out);
                return pf_fail(err, errlen, PF_ERR, "out of memory");
            }
            for (size_t i = 0; i < pa->n_devices; i++) {
                int d = pa->devices[i];
                if (d < 0 || d >= ndevices || used[d]++) {
                    free(used);
                    pf_job_result_clear(out);
                    return pf_fail(err, errlen, PF_EINPUT,
                                   "result.probe.devices[%zu]: out of range or repeated", i);
                }
                out->devices[i] = d;
            }
            free(used);
            out->ndevices = (int)pa->n_devices;
        }
    }
    return PF_OK;
}

/* ---- requests ---- */

Planfarm__PlanOptions *pf_codec_options_to_pb(pf_arena_t *a, const pf_search_opts_t *o)
{
    Planfarm__PlanOptions *m = ANEW(a, Planfarm__PlanOptions, 1);
    if (!m)
        return NULL;
    planfarm__plan_options__init(m);
    m->stages = (uint32_t)o->stages;
    m->replicas = (uint32_t)o->replicas;
    m->microbatches = (uint32_t)o->microbatches;
    m->coarsen_k = o->coarsen_k;
    m->max_downsets = o->max_downsets;
    m->no_refine = !o->refine;
    m->flat_gbps = o->flat_gbps;
    m->candidates = (uint32_t)o->candidates;
    m->probes_in_flight = (uint32_t)o->probes_in_flight;
    m->rel_eps = o->rel_eps;
    m->probe_seconds = o->probe_seconds;
    m->no_symmetry = !o->symmetry;
    m->instantiation = (char *)(o->auto_inst ? "auto" : pf_inst_name(o->inst));
    m->seed = o->seed;
    m->max_stages = (uint32_t)o->max_stages;
    return m;
}

int pf_codec_options_from_pb(const Planfarm__PlanOptions *m, pf_search_opts_t *o, char *err,
                             size_t errlen)
{
    pf_search_opts_init(o);
    if (!m)
        return PF_OK;
    if (m->stages > MAX_DEVICES || m->replicas > MAX_DEVICES || m->microbatches > (1u << 20) ||
        m->candidates > 64 || m->probes_in_flight > 64 || m->max_stages > MAX_DEVICES ||
        !isfinite(m->flat_gbps) || m->flat_gbps < 0 || !isfinite(m->rel_eps) || m->rel_eps < 0 ||
        m->rel_eps >= 1 || !isfinite(m->probe_seconds) || m->probe_seconds < 0)
        return pf_fail(err, errlen, PF_EINPUT, "options: a value is out of range");
    o->stages = (int)m->stages;
    o->replicas = (int)m->replicas;
    o->microbatches = (int)m->microbatches;
    o->coarsen_k = m->coarsen_k;
    o->max_downsets = m->max_downsets > 0 ? m->max_downsets : 0;
    o->refine = !m->no_refine;
    o->flat_gbps = m->flat_gbps;
    if (m->candidates)
        o->candidates = (int)m->candidates;
    if (m->probes_in_flight)
        o->probes_in_flight = (int)m->probes_in_flight;
    if (m->rel_eps > 0)
        o->rel_eps = m->rel_eps;
    if (m->probe_seconds > 0)
        o->probe_seconds = m->probe_seconds;
    o->symmetry = !m->no_symmetry;
    if (m->seed)
        o->seed = m->seed;
    if (m->max_stages)
        o->max_stages = (int)m->max_stages;
    const char *inst = m->instantiation ? m->instantiation : "";
    if (inst[0] == '\0' || strcmp(inst, "auto") == 0) {
        o->auto_inst = 1;
    } else {
        o->auto_inst = 0;
        if (pf_inst_parse(inst, &o->inst) != PF_OK)
            return pf_fail(err, errlen, PF_EINPUT, "options.instantiation: '%s' is not m, ar, full "
                           "or auto", inst);
    }
    return PF_OK;
}
