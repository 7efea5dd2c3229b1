/* sharding: [DistPar] properties, inference rules and conversions (see sharding.h). */
#include "planner/tp/sharding.h"
#include "planner/ir/collective.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *pf_sharding_str(pf_sharding_t p, char *buf, size_t len)
{
    if (p.kind == PF_SHARDING_S)
        snprintf(buf, len, "S(%d)", p.dim);
    else
        snprintf(buf, len, "%s", p.kind == PF_SHARDING_P ? "P" : "B");
    return buf;
}

pf_sharding_t pf_sharding_grad_expected(pf_sharding_t forward)
{
    return forward.kind == PF_SHARDING_S ? forward : pf_sharding_b();
}

/* Table 1, with X's row dimensions generalised to any batch dimension. */
int pf_sharding_infer_matmul(pf_sharding_t x, pf_sharding_t w, int x_rank, pf_sharding_t *y)
{
    int k = x_rank - 1; /* X's contracted dimension */
    if (x_rank < 2)
        return 0;
    if (x.kind == PF_SHARDING_S && x.dim >= 0 && x.dim < k && w.kind == PF_SHARDING_B)
        *y = x; /* S(0) B -> S(0): data parallelism */
    else if (x.kind == PF_SHARDING_B && w.kind == PF_SHARDING_S && w.dim == 1)
        *y = pf_sharding_s(k); /* B S(1) -> S(1): model parallelism */
    else if (x.kind == PF_SHARDING_S && x.dim == k && w.kind == PF_SHARDING_S && w.dim == 0)
        *y = pf_sharding_p(); /* S(1) S(0) -> P */
    else if ((x.kind == PF_SHARDING_P && w.kind == PF_SHARDING_B) ||
             (x.kind == PF_SHARDING_B && w.kind == PF_SHARDING_P))
        *y = pf_sharding_p();
    else if (x.kind == PF_SHARDING_B && w.kind == PF_SHARDING_B)
        *y = pf_sharding_b();
    else
        return 0;
    return 1;
}

/* ---- conversions ---- */

const char *pf_sharding_conv_name(pf_sharding_conv_kind_t kind)
{
    static const char *names[PF_CONV_NKINDS] = {"identity",       "all-to-all", "all-gather",
                                                "reduce-scatter", "all-reduce", "i2p",
                                                "split"};
    return (unsigned)kind < PF_CONV_NKINDS ? names[kind] : "?";
}

int pf_sharding_conv_atomic(pf_sharding_t from, pf_sharding_t to)
{
    if (pf_sharding_equal(from, to))
        return PF_CONV_IDENTITY;
    switch (from.kind) {
    case PF_SHARDING_S:
        return to.kind == PF_SHARDING_S ? PF_CONV_ALL2ALL : to.kind == PF_SHARDING_B ? PF_CONV_ALLGATHER
                                                                              : -1;
    case PF_SHARDING_P: return to.kind == PF_SHARDING_S ? PF_CONV_REDUCESCATTER : PF_CONV_ALLREDUCE;
    default: return to.kind == PF_SHARDING_S ? PF_CONV_SPLIT : PF_CONV_I2P;
    }
}

double pf_sharding_conv_ring_bytes(pf_sharding_conv_kind_t kind, int n, double tensor_bytes)
{
    double dn = n;
    switch (kind) {
    case PF_CONV_ALLREDUCE: return 2 * (dn - 1) / dn * tensor_bytes;
    case PF_CONV_ALLGATHER:
    case PF_CONV_REDUCESCATTER: return (dn - 1) / dn * tensor_bytes;
    case PF_CONV_ALL2ALL: return (dn - 1) / (dn * dn) * tensor_bytes;
    default: return 0;
    }
}

int pf_sharding_conv_ring_steps(pf_sharding_conv_kind_t kind, int n)
{
    switch (kind) {
    case PF_CONV_ALLREDUCE: return 2 * (n - 1);
    case PF_CONV_ALLGATHER:
    case PF_CONV_REDUCESCATTER:
    case PF_CONV_ALL2ALL: return n - 1;
    default: return 0;
    }
}

pf_sharding_link_t pf_sharding_link_of(const pf_cluster_t *c, const int *devs, int n, double gbps,
                                       double latency_us)
{
    pf_sharding_link_t link = {gbps, latency_us, 0};
    pf_collective_group_t g;
    if (pf_collective_group_from_cluster(c, devs, n, 0, &g) == PF_OK)
        link.nvls_busbw_gbps = g.nvls_busbw_gbps;
    return link;
}

double pf_sharding_conv_ms(pf_sharding_conv_kind_t kind, int n, double tensor_bytes,
                           const pf_sharding_link_t *link)
{
    if (n <= 1 || pf_sharding_conv_ring_steps(kind, n) == 0)
        return 0;
    /* the group as collective.h sees it: n devices on one fabric at the link's rate */
    pf_collective_group_t g = {.n = n, .hosts = 1, .per_host = n, .intra_gbps = link->gbps,
                               .intra_lat_us = link->latency_us,
                               .nvls_busbw_gbps = link->nvls_busbw_gbps};
    switch (kind) {
    case PF_CONV_ALLREDUCE: return pf_collective_best_ms(&g, PF_COLL_ALLREDUCE, tensor_bytes);
    case PF_CONV_ALLGATHER: return pf_collective_best_ms(&g, PF_COLL_ALLGATHER, tensor_bytes);
    case PF_CONV_REDUCESCATTER:
        return pf_collective_best_ms(&g, PF_COLL_REDUCE_SCATTER, tensor_bytes);
    default: /* all-to-all of S(i) -> S(j): each device holds tensor / n */
        return pf_collective_best_ms(&g, PF_COLL_ALLTOALL, tensor_bytes / n);
    }
}

/* A.3: S_i2S_j |T|; S2B n|T|; P2S n|T|; P2B (p1 - 1 + p2)|T|. */
double pf_sharding_conv_seed_volume_bytes(pf_sharding_conv_kind_t kind, int n, double tensor_bytes)
{
    switch (kind) {
    case PF_CONV_ALL2ALL: return tensor_bytes;
    case PF_CONV_ALLGATHER:
    case PF_CONV_REDUCESCATTER: return n * tensor_bytes;
    case PF_CONV_ALLREDUCE: return (double)(n - 1 + n) * tensor_bytes;
    default: return 0;
    }
}

static void one_step(pf_sharding_conv_kind_t kind, int n, double bytes,
                     const pf_sharding_link_t *link, pf_sharding_conv_t *c)
{
    c->step[c->nsteps++] = kind;
    c->ring_bytes += pf_sharding_conv_ring_bytes(kind, n, bytes);
    c->ms += pf_sharding_conv_ms(kind, n, bytes, link);
}

static int check_prop(pf_sharding_t p, int rank, const char *what, char *err, size_t errlen)
{
    if (p.kind < PF_SHARDING_B || p.kind > PF_SHARDING_P ||
        (p.kind == PF_SHARDING_S && (p.dim < 0 || p.dim >= rank)))
        return pf_fail(err, errlen, PF_EINPUT, "%s: property (%d, %d) is not B, P or S(0..%d)",
                       what, p.kind, p.dim, rank - 1);
    return PF_OK;
}

/* Equation 1: a direct atomic op when there is one, else the cheapest I2M + M2O; ties keep the
 * direct op, then the first M in the order B, P, S(0), S(1), ... */
int pf_sharding_convert(pf_sharding_t from, pf_sharding_t to, int rank, int n, double tensor_bytes,
                     const pf_sharding_link_t *link, pf_sharding_conv_t *out, char *err, size_t errlen)
{
    int rc;
    if ((rc = check_prop(from, rank, "from", err, errlen)) ||
        (rc = check_prop(to, rank, "to", err, errlen)))
        return rc;
    memset(out, 0, sizeof *out);
    out->mid = pf_sharding_b();
    int direct = pf_sharding_conv_atomic(from, to);
    if (direct == PF_CONV_IDENTITY)
        return PF_OK;
    if (direct > 0)
        one_step((pf_sharding_conv_kind_t)direct, n, tensor_bytes, link, out);
    for (int m = -2; m < rank; m++) {
        pf_sharding_t mid = m == -2 ? pf_sharding_b() : m == -1 ? pf_sharding_p() : pf_sharding_s(m);
        int a = pf_sharding_conv_atomic(from, mid), b = pf_sharding_conv_atomic(mid, to);
        if (a <= 0 || b <= 0) /* not atomic, or an identity half (that is the direct op) */
            continue;
        pf_sharding_conv_t c = {.mid = mid};
        one_step((pf_sharding_conv_kind_t)a, n, tensor_bytes, link, &c);
        one_step((pf_sharding_conv_kind_t)b, n, tensor_bytes, link, &c);
        if (out->nsteps == 0 || c.ms < out->ms)
            *out = c;
    }
    return PF_OK;
}

int pf_sharding_convert_any(pf_sharding_t from, const pf_sharding_t *targets, int ntargets, int rank,
                         int n, double tensor_bytes, const pf_sharding_link_t *link, int *chosen,
                         pf_sharding_conv_t *out, char *err, size_t errlen)
{
    if (ntargets < 1)
        return pf_fail(err, errlen, PF_EINPUT, "\"or\" expression without a target");
    *chosen = -1;
    for (int t = 0; t < ntargets; t++) {
        pf_sharding_conv_t c;
        int rc = pf_sharding_convert(from, targets[t], rank, n, tensor_bytes, link, &c, err, errlen);
        if (rc)
            return rc;
        if (*chosen < 0 || c.ms < out->ms) {
            *out = c;
            *chosen = t;
        }
    }
    return PF_OK;
}

/* ---- op rules ---- */

static const struct {
    const char *type;
    pf_sharding_op_kind_t kind;
} known_types[] = {
    {"linear", PF_OPK_LINEAR},       {"dense", PF_OPK_LINEAR},
    {"fc", PF_OPK_LINEAR},           {"matmul", PF_OPK_MATMUL},
    {"bmm", PF_OPK_MATMUL},          {"gemm", PF_OPK_MATMUL},
    {"embedding", PF_OPK_EMBEDDING}, {"conv", PF_OPK_CONV},
    {"conv2d", PF_OPK_CONV},         {"layernorm", PF_OPK_LAYERNORM},
    {"rmsnorm", PF_OPK_LAYERNORM},   {"batchnorm", PF_OPK_BATCHNORM},
    {"softmax", PF_OPK_SOFTMAX},     {"attention", PF_OPK_ATTENTION},
    {"add", PF_OPK_ELEMENTWISE_LINEAR}, {"sub", PF_OPK_ELEMENTWISE_LINEAR},
    {"dropout", PF_OPK_ELEMENTWISE_LINEAR}, {"identity", PF_OPK_ELEMENTWISE_LINEAR},
    {"residual", PF_OPK_ELEMENTWISE_LINEAR}, {"mul", PF_OPK_ELEMENTWISE},
    {"div", PF_OPK_ELEMENTWISE},     {"gelu", PF_OPK_ELEMENTWISE},
    {"relu", PF_OPK_ELEMENTWISE},    {"silu", PF_OPK_ELEMENTWISE},
    {"tanh", PF_OPK_ELEMENTWISE},    {"sigmoid", PF_OPK_ELEMENTWISE},
    {"elementwise", PF_OPK_ELEMENTWISE},
};

static int same_shape(const pf_shape_t *a, const pf_shape_t *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->dim[i] != b->dim[i])
            return 0;
    return 1;
}

static int all_inputs_like_output(const pf_sharding_op_t *op)
{
    for (int k = 0; k < op->nin; k++)
        if (!same_shape(&op->in[k], &op->output))
            return 0;
    return 1;
}

pf_sharding_op_kind_t pf_sharding_classify(const pf_sharding_op_t *op)
{
    if (op->output.ndim == 0 || op->nin > PF_SHARDING_MAX_IN)
        return PF_OPK_REPLICATED;
    pf_sharding_op_kind_t kind = PF_OPK_REPLICATED;
    int known = 0;
    for (size_t i = 0; op->type && i < sizeof known_types / sizeof *known_types; i++)
        if (!strcasecmp(op->type, known_types[i].type)) {
            kind = known_types[i].kind;
            known = 1;
        }
    if (!known)
        return all_inputs_like_output(op) ? PF_OPK_ELEMENTWISE : PF_OPK_REPLICATED;
    if ((kind == PF_OPK_ELEMENTWISE || kind == PF_OPK_ELEMENTWISE_LINEAR) &&
        !all_inputs_like_output(op))
        return PF_OPK_REPLICATED; /* broadcasting inputs: keep it whole */
    return kind;
}

static int divides(const pf_shape_t *s, int dim, int n)
{
    return dim >= 0 && dim < s->ndim && s->dim[dim] > 0 && s->dim[dim] % n == 0;
}

/* Builds signatures one at a time: begin, set each input, end (which keeps it). */
typedef struct {
    pf_sharding_sig_t *sigs;
    int max, count;
    pf_sharding_sig_t cur;
} sig_list_t;

static void sig_begin(sig_list_t *l, pf_sharding_t out, int split, int wgp)
{
    memset(&l->cur, 0, sizeof l->cur);
    l->cur.out = out;
    l->cur.split = split;
    l->cur.weight_grad_partial = wgp;
}

static void sig_in(sig_list_t *l, int k, pf_sharding_t need, pf_sharding_t grad)
{
    l->cur.in[k] = need;
    l->cur.in_grad[k] = grad;
}

static void sig_end(sig_list_t *l)
{
    if (l->count < l->max)
        l->sigs[l->count++] = l->cur;
}

/* Every input in the same property; the gradient of a B input consumed by split work is P (each
 * device's backward sees only its part of the op), of a P input B, of an S input the same S. */
static void sig_uniform(sig_list_t *l, const pf_sharding_op_t *op, pf_sharding_t in, pf_sharding_t out,
                        int split, int wgp)
{
    pf_sharding_t grad = in.kind == PF_SHARDING_S ? in
                      : in.kind == PF_SHARDING_P ? pf_sharding_b()
                      : split                 ? pf_sharding_p()
                                              : pf_sharding_b();
    sig_begin(l, out, split, wgp);
    for (int k = 0; k < op->nin; k++)
        sig_in(l, k, in, grad);
    sig_end(l);
}

static int all_divide(const pf_sharding_op_t *op, int dim, int n)
{
    if (!divides(&op->output, dim, n))
        return 0;
    for (int k = 0; k < op->nin; k++)
        if (!divides(&op->in[k], dim, n))
            return 0;
    return 1;
}

/* Split on every dimension below `limit` that divides everywhere: S(i) in, S(i) out. */
static void sig_split_dims(sig_list_t *l, const pf_sharding_op_t *op, int limit, int n, int wgp)
{
    for (int d = 0; d < limit; d++)
        if (all_divide(op, d, n))
            sig_uniform(l, op, pf_sharding_s(d), pf_sharding_s(d), 1, wgp);
}

/* Linear / matmul with a weight W = [k, out] (Table 1): column-parallel (B x S(1) -> S(r-1)),
 * row-parallel (S(r-1) x S(0) -> P), and data-parallel rows (S(i) x B -> S(i)). A bias makes
 * P x B wrong for a linear, so only the plain matmul keeps (P, B) -> P. */
static void rules_linear(sig_list_t *l, const pf_sharding_op_t *op, pf_sharding_t w, int n, int plain)
{
    const pf_shape_t *x = &op->in[0];
    int r = x->ndim, last = r - 1;
    if (op->nin != 1 || op->weight.ndim != 2 || r < 1 || op->output.ndim != r)
        return;
    if (w.kind == PF_SHARDING_B) {
        sig_uniform(l, op, pf_sharding_b(), pf_sharding_b(), 0, 0);
        sig_split_dims(l, op, last, n, 1);
        if (plain) {
            sig_begin(l, pf_sharding_p(), 0, 1);
            sig_in(l, 0, pf_sharding_p(), pf_sharding_b());
            sig_end(l);
        }
    } else if (w.dim == 1 && divides(&op->output, last, n)) {
        sig_uniform(l, op, pf_sharding_b(), pf_sharding_s(last), 1, 0);
    } else if (w.dim == 0 && divides(x, last, n)) {
        sig_uniform(l, op, pf_sharding_s(last), pf_sharding_p(), 1, 0);
    }
}

/* Two activations. Same ranks: Table 1 on the last two dimensions plus shared batch splits.
 * Ranks differ (attention scores [b,s,h] x [b,s,h] -> [b,a,s,s], context [b,a,s,s] x [b,s,h] ->
 * [b,s,h]): heads split, dimension 1 of a rank-4 tensor and the last of a rank-3 one. */
static void rules_matmul2(sig_list_t *l, const pf_sharding_op_t *op, int n)
{
    const pf_shape_t *a = &op->in[0], *b = &op->in[1], *y = &op->output;
    int r = y->ndim;
    sig_uniform(l, op, pf_sharding_b(), pf_sharding_b(), 0, 0);
    if (a->ndim == r && b->ndim == r && r >= 2) {
        sig_split_dims(l, op, r - 2, n, 0);
        pf_sharding_t sa[3] = {pf_sharding_s(r - 2), pf_sharding_b(), pf_sharding_s(r - 1)};
        pf_sharding_t sb[3] = {pf_sharding_b(), pf_sharding_s(r - 1), pf_sharding_s(r - 2)};
        pf_sharding_t sy[3] = {pf_sharding_s(r - 2), pf_sharding_s(r - 1), pf_sharding_p()};
        for (int c = 0; c < 3; c++) {
            if ((sa[c].kind == PF_SHARDING_S && !divides(a, sa[c].dim, n)) ||
                (sb[c].kind == PF_SHARDING_S && !divides(b, sb[c].dim, n)))
                continue;
            sig_begin(l, sy[c], 1, 0);
            sig_in(l, 0, sa[c], sa[c].kind == PF_SHARDING_S ? sa[c] : pf_sharding_p());
            sig_in(l, 1, sb[c], sb[c].kind == PF_SHARDING_S ? sb[c] : pf_sharding_p());
            sig_end(l);
        }
        /* (P, B) -> P and (B, P) -> P: full-size work; the B side's gradient is partial. */
        for (int c = 0; c < 2; c++) {
            sig_begin(l, pf_sharding_p(), 0, 0);
            sig_in(l, c, pf_sharding_p(), pf_sharding_b());
            sig_in(l, 1 - c, pf_sharding_b(), pf_sharding_p());
            sig_end(l);
        }
        return;
    }
    const pf_shape_t *t4 = y->ndim == 4 ? y : a->ndim == 4 ? a : b->ndim == 4 ? b : NULL;
    if (!t4)
        return;
    int64_t heads = t4->dim[1];
    if (heads <= 0 || heads % n)
        return;
    const pf_shape_t *all[3] = {a, b, y};
    pf_sharding_t head[3];
    for (int k = 0; k < 3; k++) {
        if (all[k]->ndim == 4)
            head[k] = pf_sharding_s(1);
        else if (all[k]->ndim == 3 && all[k]->dim[2] % heads == 0)
            head[k] = pf_sharding_s(2);
        else
            return;
    }
    if (all_divide(op, 0, n))
        sig_uniform(l, op, pf_sharding_s(0), pf_sharding_s(0), 1, 0);
    sig_begin(l, head[2], 1, 0);
    sig_in(l, 0, head[0], head[0]);
    sig_in(l, 1, head[1], head[1]);
    sig_end(l);
}

/* ids [b, s] -> [b, s, h]; W = [vocab, h] */
static void rules_embedding(sig_list_t *l, const pf_sharding_op_t *op, pf_sharding_t w, int n)
{
    int last = op->output.ndim - 1;
    if (op->nin > 1 || op->weight.ndim != 2)
        return;
    if (w.kind == PF_SHARDING_B) {
        sig_uniform(l, op, pf_sharding_b(), pf_sharding_b(), 0, 0);
        sig_split_dims(l, op, last, n, op->has_weight);
    } else if (w.dim == 0) { /* vocabulary-parallel: each device looks up its rows */
        sig_uniform(l, op, pf_sharding_b(), pf_sharding_p(), 1, 0);
    } else if (divides(&op->output, last, n)) {
        sig_uniform(l, op, pf_sharding_b(), pf_sharding_s(last), 1, 0);
    }
}

/* [b, Cin, H, W] -> [b, Cout, Ho, Wo]; W = [Cout, Cin, k, k] */
static void rules_conv(sig_list_t *l, const pf_sharding_op_t *op, pf_sharding_t w, int n)
{
    if (op->nin != 1 || op->output.ndim != 4 || op->in[0].ndim != 4)
        return;
    if (w.kind == PF_SHARDING_B) {
        sig_uniform(l, op, pf_sharding_b(), pf_sharding_b(), 0, 0);
        sig_split_dims(l, op, 1, n, op->has_weight);
    } else if (w.dim == 0 && divides(&op->output, 1, n)) {
        sig_uniform(l, op, pf_sharding_b(), pf_sharding_s(1), 1, 0);
    } else if (w.dim == 1 && divides(&op->in[0], 1, n)) {
        sig_uniform(l, op, pf_sharding_s(1), pf_sharding_p(), 1, 0);
    }
}

/* Heads split the hidden (last) dim. */
static void rules_attention(sig_list_t *l, const pf_sharding_op_t *op, pf_sharding_t w, int n)
{
    int r = op->output.ndim;
    if (w.kind == PF_SHARDING_B) {
        sig_uniform(l, op, pf_sharding_b(), pf_sharding_b(), 0, 0);
        sig_split_dims(l, op, op->has_weight ? r - 1 : r, n, op->has_weight);
    } else if (w.dim == op->weight.ndim - 1) { /* Megatron: QKV by column, out by row */
        sig_uniform(l, op, pf_sharding_b(), pf_sharding_p(), 1, 0);
    }
}

int pf_sharding_op_rules(const pf_sharding_op_t *op, pf_sharding_t w, int n, pf_sharding_sig_t *sigs,
                      int max)
{
    sig_list_t l = {.sigs = sigs, .max = max};
    int r = op->output.ndim, last = r - 1;
    pf_sharding_op_kind_t kind = pf_sharding_classify(op);
    if (n < 1 || w.kind == PF_SHARDING_P || op->nin < 0 || op->nin > PF_SHARDING_MAX_IN)
        return 0;
    if (w.kind == PF_SHARDING_S && (!op->has_weight || !divides(&op->weight, w.dim, n)))
        return 0;
    int wb = w.kind == PF_SHARDING_B, wgp = op->has_weight; /* B weight, split activations */
    switch (kind) {
    case PF_OPK_REPLICATED:
        if (wb)
            sig_uniform(&l, op, pf_sharding_b(), pf_sharding_b(), 0, 0);
        break;
    case PF_OPK_ELEMENTWISE:
    case PF_OPK_ELEMENTWISE_LINEAR:
        if (!wb)
            break;
        sig_uniform(&l, op, pf_sharding_b(), pf_sharding_b(), 0, 0);
        sig_split_dims(&l, op, r, n, wgp);
        if (kind == PF_OPK_ELEMENTWISE_LINEAR && !op->has_weight)
            sig_uniform(&l, op, pf_sharding_p(), pf_sharding_p(), 0, 0);
        break;
    case PF_OPK_LINEAR:
    case PF_OPK_MATMUL:
        if (op->nin == 2 && !op->has_weight)
            rules_matmul2(&l, op, n);
        else if (op->nin == 1 && op->has_weight)
            rules_linear(&l, op, w, n, kind == PF_OPK_MATMUL);
        else if (wb)
            sig_uniform(&l, op, pf_sharding_b(), pf_sharding_b(), 0, 0);
        break;
    case PF_OPK_EMBEDDING:
        rules_embedding(&l, op, w, n);
        break;
    case PF_OPK_CONV:
        rules_conv(&l, op, w, n);
        break;
    case PF_OPK_LAYERNORM: /* statistics over the last dim: never split it, never P */
    case PF_OPK_SOFTMAX:
        if (!wb)
            break;
        sig_uniform(&l, op, pf_sharding_b(), pf_sharding_b(), 0, 0);
        sig_split_dims(&l, op, last, n, wgp);
        break;
    case PF_OPK_BATCHNORM: /* per channel: statistics over every other dim */
        if (wb)
            sig_uniform(&l, op, pf_sharding_b(), pf_sharding_b(), 0, 0);
        else if (w.dim == op->weight.ndim - 1 && r >= 2 && all_divide(op, 1, n))
            sig_uniform(&l, op, pf_sharding_s(1), pf_sharding_s(1), 1, 0);
        break;
    case PF_OPK_ATTENTION:
        rules_attention(&l, op, w, n);
        break;
    }
    return l.count;
}
