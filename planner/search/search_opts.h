/* search_opts: the types a search request and the search's own state share: the options of a
 * request (with their defaults, pf_search_opts_init) and the phases a search goes through. Kept
 * apart from search.h so that the state of the search (search_state.h) needs nothing of its API. */
#ifndef PF_SEARCH_OPTS_H
#define PF_SEARCH_OPTS_H

#include "planner/search/job.h"

#include <stdint.h>

typedef struct pf_search pf_search_t;

#define PF_SEARCH_MAX_ALPHAS 4

typedef struct {
    int stages;           /* 0 = every S dividing the devices, up to max_stages */
    int replicas;         /* 0 = devices / S */
    int max_stages;       /* default 64 */
    int microbatches;     /* MB per step per replica; 0 = PF_DEFAULT_MICROBATCHES */
    int coarsen_k;        /* 0 = the partitioner's default for each S */
    long long max_downsets; /* 0 = the partitioner's default */
    int refine;
    double flat_gbps;     /* <= 0 = median bandwidth */
    double alphas[PF_SEARCH_MAX_ALPHAS];
    int nalphas;          /* default 3: 0.01, 1, 100 (Parmesan IV-B) */
    int candidates;       /* partitions carried into mapping; default 3 */
    int probes_in_flight; /* W per binary search; default 4 */
    double rel_eps;       /* binary search stops when t_r - t_l <= rel_eps * t_r; default 1e-3 */
    double probe_seconds; /* per-probe budget; default 1 */
    int probe_timeouts;   /* a binary search ends after this many timed-out probes (its lower
                           * bound is unproven from the first); 0 = no limit; default 2 */
    int symmetry;         /* the probes' symmetry rules, PF_MAP_SYM_* (map_symmetry.h); default ALL */
    int auto_inst;        /* default 1: both instantiations, keep the better under "full" */
    pf_map_inst_t inst;       /* when auto_inst = 0 */
    uint64_t seed;
    int tp;               /* tensor-parallel degree T; 0 = every degree that divides each host's
                           * devices, up to max_tp */
    int max_tp;           /* default 8 */
    int tp_across_hosts;  /* T may span hosts (and divide only the device count) */
    pf_training_t train;  /* precision, optimizer, ZeRO, recomputation, schedule */
    long long global_batch; /* samples per step; 0 = free: MB = microbatches */
    int layer_aligned;    /* stage boundaries only between repeated blocks */
    /* 1: after the uniform search, one more DP_PARTITION job whose stages choose their own
     * data-parallel degree (partition_stagedeg.h, issue 24) on the T = 1 graph; its plan is
     * mapped (map_stages.h), simulated under 1F1B, and replaces the uniform plan when it trains
     * faster per sample. Needs global_batch. Default 0. */
    int stage_degrees;
    double mem_headroom;  /* fraction of every device's memory a plan leaves free (CUDA context,
                           * NCCL buffers, allocator fragmentation); default 0.1 */
    /* The block-level pre-phase (search_blocks.h, issue 22): on when block_search is 1 or one
     * of sequence_parallel, virtual_stages, microbatch_size, context_parallel, expert_parallel
     * is given; with -1 (the command line's and the wire's default) whenever global_batch is
     * given and the graph's block candidates fit, else the op-level search plans alone. Under
     * it recomputation and ZeRO are searched by default (recompute_auto, zero_auto); without it
     * they are unused. */
    int block_search;     /* 1 on, 0 off (default here), -1 auto */
    int block_candidates; /* K ranked by the analytic model; default 5 */
    int microbatch_size;  /* samples per micro-batch; 0 = the graph's */
    int sequence_parallel; /* -1 = searched (default), 0 off, 1 on */
    int virtual_stages;   /* interleaved 1F1B's model chunks per device; 0 = searched */
    int context_parallel; /* C, the sequence split C ways (ring attention); 0 = searched */
    int expert_parallel;  /* E, each MoE layer's experts over E devices; 0 = searched */
    int recompute_auto;   /* train.recompute searched; default 1 */
    int zero_auto;        /* train.zero searched; default 1 */
    /* Set by the pre-phase (not a request's option): the (S, T) pairs the later phases try,
     * R = devices / (S T); 0 pairs = every (S, T) the options allow. */
    int nblock_pairs;
    /* Set by the search (not a request's option), with stage_degrees: the tensor-parallel
     * degrees a stage may take, bit t for T = t (the degrees the search tries); 0 when that is
     * T = 1 alone. */
    unsigned long long stage_tp_mask;
    int block_pairs[8][2];
    /* Set by the pre-phase with block_pairs: how each tensor-parallel degree among them trains,
     * as the best-ranked candidate of that degree does (recomputation, ZeRO, sequence
     * parallelism): its setting, partitions and plans train so (pf_search_opts_train). A degree
     * not listed trains as `train` (the best candidate's). */
    int nblock_trains;
    struct {
        int tp;
        pf_training_recompute_t recompute;
        int zero, sequence_parallel;
    } block_trains[8];
    unsigned schedules;   /* phase 4: schedules the plan may run, a mask of 1u << pf_training_schedule_t
                           * (no signal); 0 = 1f1b, gpipe and eager-1f1b */
} pf_search_opts_t;

typedef enum {
    PF_PHASE_PARTITION,
    PF_PHASE_MAP,
    PF_PHASE_SIMULATE,
    PF_PHASE_DONE,
    PF_PHASE_FAILED
} pf_search_phase_t;

void pf_search_opts_init(pf_search_opts_t *o);
/* How tensor-parallel degree T trains: o->train with T's block_trains entry, when it has one. */
pf_training_t pf_search_opts_train(const pf_search_opts_t *o, int T);

#endif
