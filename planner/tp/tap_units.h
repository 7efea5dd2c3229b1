/* tap_units: the units TAP plans (Shi et al., "TAP: Efficient Derivation of Tensor Parallel Plans
 * for Large Neural Networks", Algorithm 1 PRUNEGRAPH, plus a structural hash), described in tap.h
 * step 1. Deterministic, so a TAP_ENUM job can rebuild them from the graph alone. */
#ifndef PF_TAP_UNITS_H
#define PF_TAP_UNITS_H

#include "planner/ir/graph.h"
#include "planner/tp/tap_opts.h"

#include <stdint.h>

typedef struct pf_tap_units pf_tap_units_t;

typedef struct {
    const char *name;    /* "layers.#" for a repeated family, else the first op's name */
    uint64_t hash;       /* structural hash of one instance */
    int ninstances;
    int nops;            /* ops per instance */
    int nweights;        /* N: weighted ops per instance */
    uint64_t nplans;     /* 3^N */
} pf_tap_units_info_t;

pf_tap_units_t *pf_tap_units_new(const pf_graph_t *g, const pf_tap_opts_t *o, char *err,
                                 size_t errlen);
void pf_tap_units_destroy(pf_tap_units_t **u);
int pf_tap_units_count(const pf_tap_units_t *u);
int pf_tap_units_info(const pf_tap_units_t *u, int unit, pf_tap_units_info_t *info);
/* The op indices of one instance, in topological order (position j of every instance plays the
 * same role); NULL when out of range. */
const int *pf_tap_units_instance(const pf_tap_units_t *u, int unit, int instance);
/* The unit of op v. */
int pf_tap_units_of(const pf_tap_units_t *u, int v);

#endif
