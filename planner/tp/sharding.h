/* sharding: DistPar's distributed properties of a tensor over a group of n devices ([DistPar]),
 * the inference rules that say which properties an op can consume and produce, and the atomic
 * conversions between properties with their communication cost.
 *
 * Properties ([DistPar], A.1): S(i) = split on dimension i (each device holds 1/n of it),
 * B = broadcast (every device holds all of it), P = partial sum (every device holds a tensor of
 * the full shape; the logical tensor is their sum).
 *
 * Costs: the seed's A.3 volumes are the naive gather-then-broadcast totals
 * (pf_sharding_conv_seed_volume_bytes); the times planfarm uses are ring algorithms on the group's
 * slowest link (DESIGN.md "sharding"): per device, all-reduce sends 2(n-1)/n |T|, all-gather and reduce-scatter (n-1)/n |T|,
 * all-to-all (n-1)/n^2 |T|; time = bytes / bw + steps x latency (ring steps: 2(n-1) for an
 * all-reduce, n-1 for the others). A.1.2's reduce-scatter analysis is the n-1 / n case.
 *
 * Gradients use the same properties: the gradient of a tensor held as B must reach its producer
 * as B (every device holds the full gradient), of a P tensor as B (d sum / d part = 1), of an S(i)
 * tensor as S(i). */
#ifndef PF_SHARDING_H
#define PF_SHARDING_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"

#include <stddef.h>

typedef enum { PF_SHARDING_B = 0, PF_SHARDING_S = 1, PF_SHARDING_P = 2 } pf_sharding_kind_t;

typedef struct {
    int kind; /* pf_sharding_kind_t */
    int dim;  /* the split dimension when kind == PF_SHARDING_S, else -1 */
} pf_sharding_t;

static inline pf_sharding_t pf_sharding_b(void) { return (pf_sharding_t){PF_SHARDING_B, -1}; }
static inline pf_sharding_t pf_sharding_p(void) { return (pf_sharding_t){PF_SHARDING_P, -1}; }
static inline pf_sharding_t pf_sharding_s(int dim) { return (pf_sharding_t){PF_SHARDING_S, dim}; }
static inline int pf_sharding_equal(pf_sharding_t a, pf_sharding_t b)
{
    return a.kind == b.kind && (a.kind != PF_SHARDING_S || a.dim == b.dim);
}
/* "B", "P", "S(1)"; returns buf. */
const char *pf_sharding_str(pf_sharding_t p, char *buf, size_t len);
/* The property a tensor's gradient must have when it reaches the tensor's producer: B for B and
 * P, S(i) for S(i). */
pf_sharding_t pf_sharding_grad_expected(pf_sharding_t forward);

/* Table 1, immediate inference for Y = X W, X of rank x_rank >= 2 (batch dims, then m, k) and
 * W = [k, n]: (S(i<r-1), B) -> S(i); (B, S(1)) -> S(r-1); (S(r-1), S(0)) -> P; (P, B) -> P;
 * (B, P) -> P; (B, B) -> B. Returns 1 and writes *y when the pair is derivable, else 0 (the
 * consumer needs a conversion first). */
int pf_sharding_infer_matmul(pf_sharding_t x, pf_sharding_t w, int x_rank, pf_sharding_t *y);

/* ---- conversions ---- */

typedef enum {
    PF_CONV_IDENTITY = 0,  /* X -> X: no data moves */
    PF_CONV_ALL2ALL,       /* S(i) -> S(j) */
    PF_CONV_ALLGATHER,     /* S -> B */
    PF_CONV_REDUCESCATTER, /* P -> S */
    PF_CONV_ALLREDUCE,     /* P -> B */
    PF_CONV_I2P,           /* B -> P: one device keeps the tensor, the others hold zeros (local) */
    PF_CONV_SPLIT,         /* B -> S: each device keeps its slice (local; not among the six) */
    PF_CONV_NKINDS
} pf_sharding_conv_kind_t;

const char *pf_sharding_conv_name(pf_sharding_conv_kind_t kind); /* "all-reduce", ... */

/* The slowest link inside the group: every step of a collective is priced on it. */
typedef struct {
    double gbps;       /* > 0 */
    double latency_us; /* >= 0; per step */
    double nvls_busbw_gbps; /* > 0: the group's host has NVLS (collective.h), 0: none */
} pf_sharding_link_t;

/* The link of the group devs[0..n) of c: gbps and latency_us as given (the group's slowest),
 * NVLS as the members' device models say (pf_collective_group_from_cluster). */
pf_sharding_link_t pf_sharding_link_of(const pf_cluster_t *c, const int *devs, int n, double gbps,
                                       double latency_us);

/* The atomic conversion from -> to (A.1.1), or -1 when none is atomic (S -> P). */
int pf_sharding_conv_atomic(pf_sharding_t from, pf_sharding_t to);
/* Bytes one device sends in the ring algorithm for a tensor of tensor_bytes over n devices. */
double pf_sharding_conv_ring_bytes(pf_sharding_conv_kind_t kind, int n, double tensor_bytes);
int pf_sharding_conv_ring_steps(pf_sharding_conv_kind_t kind, int n);
/* The conversion's collective on n devices over the link, by planner/ir/collective.h's cheapest
 * algorithm on one fabric at the link's rate (ring: ring bytes / bw + steps x latency; tree for
 * latency-bound all-reduces; all-to-all: one latency + ring bytes / bw; no NVLS yet), in ms; 0 for n = 1 and for
 * the local kinds. */
double pf_sharding_conv_ms(pf_sharding_conv_kind_t kind, int n, double tensor_bytes,
                           const pf_sharding_link_t *link);
/* The seed's A.3 totals over all devices: All2All |T|; S2B n|T|; P2S n|T|; P2B (p1 - 1 + p2)|T|
 * with p1 = p2 = n; local kinds 0. */
double pf_sharding_conv_seed_volume_bytes(pf_sharding_conv_kind_t kind, int n, double tensor_bytes);

/* A conversion as a chain of at most two atomic ops through an intermediate property (the
 * division expression, eq. 1: I2O = Division(I2M, M2O)). */
typedef struct {
    int nsteps;                /* 0 (identity), 1 or 2 */
    pf_sharding_conv_kind_t step[2];
    pf_sharding_t mid;            /* M when nsteps == 2 */
    double ring_bytes;         /* per device, all steps */
    double ms;
} pf_sharding_conv_t;

/* The cheapest chain from -> to for a tensor of `rank` dims (intermediates B, P, S(0..rank-1));
 * PF_OK, or PF_EINPUT for an S dim outside the rank. */
int pf_sharding_convert(pf_sharding_t from, pf_sharding_t to, int rank, int n, double tensor_bytes,
                     const pf_sharding_link_t *link, pf_sharding_conv_t *out, char *err, size_t errlen);
/* The "or" expression (eq. 2, X2W = I2W | O2W): the cheapest conversion from `from` to any one
 * of the targets (first one wins ties); *chosen is its index. */
int pf_sharding_convert_any(pf_sharding_t from, const pf_sharding_t *targets, int ntargets, int rank,
                         int n, double tensor_bytes, const pf_sharding_link_t *link, int *chosen,
                         pf_sharding_conv_t *out, char *err, size_t errlen);

/* ---- op rules ---- */

typedef enum {
    PF_OPK_REPLICATED = 0,     /* unknown op whose shapes do not allow more: all B */
    PF_OPK_ELEMENTWISE,        /* gelu, relu, mul, ... and unknown ops with input shapes = output */
    PF_OPK_ELEMENTWISE_LINEAR, /* add, sub, dropout, identity: also P in, P out */
    PF_OPK_LINEAR,             /* y = x W (+ bias), W = [in, out] */
    PF_OPK_MATMUL,             /* with a weight: Table 1 (P allowed); with two inputs: batched */
    PF_OPK_EMBEDDING,          /* W = [vocab, hidden], input token ids */
    PF_OPK_CONV,               /* W = [Cout, Cin, k, k], NCHW */
    PF_OPK_LAYERNORM,          /* normalises the last dimension (layernorm, rmsnorm) */
    PF_OPK_BATCHNORM,          /* normalises per channel (dimension 1) */
    PF_OPK_SOFTMAX,            /* over the last dimension */
    PF_OPK_ATTENTION /* fused attention [b, s, h] -> [b, s, h]; heads split the last dim */
} pf_sharding_op_kind_t;

#define PF_SHARDING_MAX_IN 8
#define PF_SHARDING_MAX_SIGS 16

/* What the rules see of one op. in[k] is the shape of the k-th input (the producer's output). */
typedef struct {
    const char *type;
    int has_weight;      /* param_bytes > 0 */
    pf_shape_t weight, output;
    int nin;             /* <= PF_SHARDING_MAX_IN */
    pf_shape_t in[PF_SHARDING_MAX_IN];
} pf_sharding_op_t;

/* One way to run the op on n devices. */
typedef struct {
    pf_sharding_t in[PF_SHARDING_MAX_IN];      /* the property each input must have */
    pf_sharding_t in_grad[PF_SHARDING_MAX_IN]; /* the property of the gradient backward returns for it */
    pf_sharding_t out;
    int split;               /* each device does 1/n of the op's work */
    int weight_grad_partial; /* the weight gradient is a partial sum: all-reduce it in backward */
} pf_sharding_sig_t;

/* From the type (case-insensitive) and the shapes: unknown types are elementwise when every
 * input has the output's shape, else replicated; ops without an output shape are replicated. */
pf_sharding_op_kind_t pf_sharding_classify(const pf_sharding_op_t *op);
/* Every signature of the op on n devices with its weight held as w (the "or" over the op's
 * rules), B first. Returns how many (0: the op cannot run with w; w other than B needs a weight
 * whose dimension divides by n). Splitting an activation on dim d needs every tensor split on
 * it to have that dimension divisible by n. */
int pf_sharding_op_rules(const pf_sharding_op_t *op, pf_sharding_t w, int n, pf_sharding_sig_t *sigs,
                      int max);

#endif
