/* tap: tensor-parallel plans of degree T by TAP (Shi et al., "TAP: Efficient Derivation of Tensor
 * Parallel Plans for Large Neural Networks") with DistPar inference ("DistPar: tensor
 * partitioning for distributed neural network computing").
 *
 * 1. Units. PRUNEGRAPH (TAP, Algorithm 1) on dotted names: an op belongs to the coarsest
 *    repeated block its name shows ("layers.7.attn.q" -> instance "layers.7" of family "layers.#"
 *    when the family has at least min_duplicate instances). Instances of a family are grouped by a
 *    structural hash (op types, weight/input/output shapes, internal edges by relative position,
 *    which ops read or feed the outside, in topological order), confirmed op by op, so only
 *    identical blocks share a plan. Ops outside repeated blocks form one unit per connected
 *    component. A unit with more than max_unit_weights weighted ops is planned op by op.
 * 2. Enumeration. Per unit and T: every weighted op's weight is B, S(0) or S(1), digit j of the
 *    plan index in base 3 for the j-th weighted op (3^N plans). Ops are visited in topological
 *    order; each op takes the cheapest of its DistPar signatures ("or" expression, eq. 2) given
 *    its weight's property and its inputs' properties, paying the conversions its inputs need in
 *    forward and those its input gradients need in backward. A tensor converted to the same
 *    property for two consumers is converted once, and gradients of one property are summed
 *    before one conversion. The unit's inputs are B and its outputs must be B, so units chain.
 *    Plan cost = per-device time (compute / T where the work is split, plus every collective),
 *    then per-device memory (param_state_factor x parameters + activations) to break ties, then
 *    the lower plan index. Activations are split only on features (the last dimension, or dim 1
 *    of a 4-D tensor: heads, channels) unless allow_token_split: batch, sequence and spatial
 *    splits are data or sequence parallelism, which this module does not plan (with them on, a
 *    fast link makes sequence-split residual branches win, and the unit boundary, held B, cannot
 *    express Korthikanti et al.'s sequence parallelism faithfully).
 * 3. Rewrite and validate: the winner's choices (weight properties and signatures) are applied
 *    to every instance and inferred again on its own shapes and numbers; every instance must give
 *    the same properties.
 *
 * Collectives are priced on the slowest link inside a TP group (pf_sharding_link_t). A conversion is
 * charged to the producer of the tensor it converts (forward: after the producer; backward: the
 * gradient reaching the producer), a unit input's conversions to its first reader; a weight
 * gradient that is partial (B weight on split activations) is all-reduced in the op's backward,
 * once per micro-batch (conservative: training with accumulation reduces it once per step).
 * A residual add may take the P output of a row-parallel linear with its other input I2P'd
 * (free): the all-reduce Megatron-LM does after the linear then lands on the add's output, same
 * volume. A graph output's tensor (no out-edges) is sized from its output shape. */
#ifndef PF_TAP_H
#define PF_TAP_H

#include "planner/ir/graph.h"
#include "planner/tp/sharding.h"
#include "planner/tp/tap_opts.h"
#include "planner/tp/tap_units.h"

#include <stdint.h>

/* Fills o with the defaults its fields' comments name (tap_opts.h). */
void pf_tap_opts_init(pf_tap_opts_t *o);


/* ---- enumeration by slices (one TAP_ENUM job = one unit x one T x one slice) ---- */

#define PF_TAP_KEEP 4

typedef struct {
    uint64_t plan;     /* index in [0, 3^N) */
    double time_ms;    /* per device, one instance, forward + backward + collectives */
    double mem_bytes;  /* per device, one instance */
} pf_tap_cand_t;

typedef struct {
    int unit, T;
    uint64_t lo, hi;          /* the plans looked at: [lo, hi) */
    uint64_t feasible;        /* how many of them can run at all */
    int nbest;                /* <= PF_TAP_KEEP, best first; 0 when none is feasible */
    pf_tap_cand_t best[PF_TAP_KEEP];
} pf_tap_slice_t;

/* Evaluates plans [lo, hi) of unit `unit` for degree T (OpenMP over the plans). */
int pf_tap_enum_slice(const pf_graph_t *g, const pf_tap_units_t *u, int unit, int T,
                      const pf_sharding_link_t *link, const pf_tap_opts_t *o, uint64_t lo,
                      uint64_t hi, pf_tap_slice_t *out, char *err, size_t errlen);
/* The best PF_TAP_KEEP over slices of one (unit, T); lo/hi span them, feasible adds up. */
int pf_tap_merge(const pf_tap_slice_t *slices, int n, pf_tap_slice_t *out, char *err,
                 size_t errlen);

/* ---- the result: what the partition DP consumes ---- */

typedef struct {
    pf_sharding_conv_kind_t kind;
    int backward;        /* 0: in the forward pass, 1: in the backward pass */
    int op;              /* op index the collective is charged to */
    int weight_grad;     /* 1: the all-reduce of a partial weight gradient */
    double tensor_bytes; /* |T| of the logical tensor */
    double ms;           /* per device on the given link */
} pf_tap_coll_t;

typedef struct {
    double fwd_ms, bwd_ms;           /* per device: compute (/ T when split) + collectives */
    double fwd_comm_ms, bwd_comm_ms; /* the collectives' part of the above */
    double param_bytes;              /* per device: / T for a split weight */
    double mem_fwd_bytes, mem_bwd_bytes; /* per device */
    pf_sharding_t weight;               /* B, or S(dim) of the weight; B for ops without one */
    pf_sharding_t output;               /* the op's output in forward, before conversions */
    int split;                       /* compute divided by T */
    int unit;
} pf_tap_op_t;

typedef struct {
    const char *name;     /* unit name (owned by the result) */
    int ninstances, nops, nweights;
    uint64_t plan;        /* the chosen index in 3^nweights */
    double time_ms;       /* per device, one instance */
    int ncolls;           /* collectives of one instance (the representative's) */
    pf_tap_coll_t *colls; /* op indices are the representative's */
} pf_tap_unit_plan_t;

typedef struct {
    int T;
    int nops;
    pf_tap_op_t *ops;        /* by op index */
    int nunits;
    pf_tap_unit_plan_t *units;
    double *edge_bytes;      /* by edge index: bytes a device sends if the edge is cut */
} pf_tap_result_t;

/* Writes, for each unit, the chosen plan index into the result: rewrites it onto every
 * instance, validates that every instance gets the identical plan, and fills the per-op numbers.
 * plans[unit] must be < 3^N of that unit. */
int pf_tap_apply(const pf_graph_t *g, const pf_tap_units_t *u, int T,
                 const pf_sharding_link_t *link, const pf_tap_opts_t *o, const uint64_t *plans,
                 pf_tap_result_t *res, char *err, size_t errlen);
/* Everything in-process: units, every unit's whole plan space, apply. PF_EINPUT for T < 1 or a
 * bad link; PF_EINFEASIBLE when a unit has no feasible plan (cannot happen for T = 1). */
int pf_tap_plan(const pf_graph_t *g, int T, const pf_sharding_link_t *link, const pf_tap_opts_t *o,
                pf_tap_result_t *res, char *err, size_t errlen);
void pf_tap_result_free(pf_tap_result_t *res);

/* A new finalized graph with the same ops (ids, names, types, shapes), edges and order, whose
 * fwd_ms, bwd_ms, param_bytes, mem_fwd_bytes, mem_bwd_bytes are res's per-device numbers and whose
 * edge bytes are res->edge_bytes: the partition DP runs on it unchanged. */
int pf_tap_graph(const pf_graph_t *g, const pf_tap_result_t *res, pf_graph_t **out, char *err,
                 size_t errlen);

#endif
