/* tap_opts: the options of a TAP search (tap.h), in a header of their own so that tap_units,
 * which reads the first two, does not include tap.h, which builds on tap_units. */
#ifndef PF_TAP_OPTS_H
#define PF_TAP_OPTS_H

typedef struct pf_tap_opts {
    int min_duplicate;         /* PRUNEGRAPH's minDuplicate (default 2) */
    int max_unit_weights;      /* larger units are planned op by op (default 12, 3^12 plans) */
    int allow_token_split;     /* let activations split on batch, sequence or space (default 0) */
    double param_state_factor; /* memory per parameter byte, for the memory tie-break (default 1) */
    double mem_limit_bytes;    /* a plan whose instance needs more per device is infeasible
                                  (param_state_factor x parameters + mem_fwd); 0 = no limit */
    int whole_instances;       /* units only describe structure (blocks.h): every family instance
                                  is one unit whatever its weights, never split into parts or
                                  ops, and never enumerated (nplans saturates) */
} pf_tap_opts_t;

#endif
