/* plan: what planfarm writes (DESIGN.md "Plan"). A plain record shared by the partitioner, the
 * mapper, the search and the wire codec; pf_plan_new / pf_plan_destroy own its arrays.
 *
 * Inside the planner ops and devices are indices (into the graph and the cluster); the file uses
 * their ids, so save and load take the graph and the cluster. Optional sections carry a
 * `present` flag; absent numbers are NAN. */
#ifndef PF_PLAN_H
#define PF_PLAN_H

#include "planner/core/json.h"
#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/ir/training.h"

#include <stdio.h>

typedef struct {
    int nops;
    int *ops;              /* op indices, in topological order */
    double compute_ms;     /* sum of c_u over its ops */
    double time_ms;        /* t(H), eq. 3, with the flat bandwidth */
    double peak_mem_bytes; /* m(H, s): parameter state + activations in flight + reserve */
    /* peak_mem_bytes by part, per device (NAN until cost.c fills them): weights, gradients,
     * optimizer state (fp32 master and moments), activations of `inflight` micro-batches */
    double mem_weights_bytes, mem_grads_bytes, mem_optimizer_bytes, mem_activations_bytes;
    double mem_reserve_bytes;
    int inflight;
    /* this stage's recomputation where the stages differ (DESIGN.md "Plan": the block search's
     * `--recompute auto` picks one per stage); has_recompute 0: the plan's train.recompute */
    int has_recompute;
    pf_training_recompute_t recompute;
    /* this stage's data-parallel degree d_s and tensor-parallel degree t_s where the stages
     * differ (issue 24; plan_degrees.c); 0: the plan's replicas and tensor_parallel */
    int replicas, tensor_parallel;
    int *devices; /* d_s x t_s device indices (pf_plan_degrees_*: the plan's R x T unless the
                   * stage has its own), replica r's t_s devices at [r t_s, r t_s + t_s); NULL
                   * until mapped */
} pf_stage_t;

typedef struct {
    int present;
    double objective_ms;      /* "full" objective of this baseline mapping */
    double simulated_step_ms; /* step estimate of this baseline mapping */
    int adopted;              /* the plan's devices are this map's: it simulated faster than
                               * the mapping search's (search_sim.c) */
} pf_baseline_t;

typedef struct {
    char *model, *cluster;
    int devices, stages, replicas, tensor_parallel, microbatches;
    char schedule[16];
    pf_training_t train;           /* how the stages train: memory and recomputation */
    pf_stage_t *stage_list;        /* `stages` entries */
    double partition_objective_ms; /* max t(H) */
    double objective_ms;           /* mapping objective, "full" (eq. 5 with eq. 6 + 7 terms) */
    double simulated_step_ms;

    struct {
        int present;
        char instantiation[8];   /* "m", "ar", "full" or "stages" (map_stages_search.h) */
        double objective_ms;     /* under that instantiation */
        double lower_bound_ms;   /* t_l when the search stopped */
        double initial_lower_bound_ms, initial_upper_bound_ms; /* eq. 10/11; heuristic */
        int probes, probes_timed_out;
        long long symmetric_pruned;
        double seconds;
        double searched_step_ms; /* a baseline adopted: the searched devices' simulated step */
    } mapping;
    pf_baseline_t cs_map, p2p_map;

    struct { /* how the partition was found */
        int present;
        int ops, hyper_ops;
        long long downsets;
        int exact;               /* 0 when the downset cap forced topological prefixes */
        double alpha, flat_gbps;
        double coarsen_s, dp_s, refine_s;
        int refine_moves;
        double objective_before_refine_ms;
    } partition_search;
    /* Tensor parallelism per op of the graph (tp_nops entries; 0 = none recorded): the split of
     * its weight (-2 no weight, -1 replicated, d >= 0 split on dim d), its collectives per
     * micro-batch (forward + backward) and their time per device. */
    int tp_nops;
    signed char *tp_split;
    int *tp_colls;
    double *tp_comm_ms;
    struct { /* one step's communication per device of the slowest stage for each kind */
        int present;
        double tp_ms, pp_ms, dp_ms;
    } comm;
    struct { /* the block-level search's choice (issue 22); written when present */
        int present;
        int microbatch_size, virtual_stages, sequence_parallel;
        /* context parallelism C (replicas = d x C: the CP ranks are replicas of sub-sequences,
         * cpep.h) and expert parallelism E; 0 or 1: none */
        int context_parallel, expert_parallel;
        int tp_comm_overlap; /* Megatron-LM's --tp-comm-overlap (training.h); plan key */
        int first_layers, mid_layers, last_layers; /* blocks per stage: first, middle, last */
        double analytic_step_ms;                   /* blockcost.h's step of the choice */
        int candidates;                            /* ranked by the analytic model */
        double wall_s;
    } blocks;
    struct { /* --stage-degrees (issue 24): the per-stage plan against the best uniform one */
        int present;
        int chosen;                    /* 1: this plan is the per-stage one */
        double uniform_ms_per_sample;  /* simulated step / samples of the best uniform plan */
        double stagedeg_ms_per_sample; /* of the per-stage plan; NAN when it made none */
        char why[160];                 /* why there is none, or why it did not fit */
        char degrees[160];             /* the per-stage plan's d_s x t_s (degrees_describe) */
        double stagedeg_step_ms;       /* its simulated step */
    } stagedeg;
    struct { /* the distributed search */
        int present;
        long long jobs;
        int workers;
        double wall_s;
    } search;
} pf_plan_t;

pf_plan_t *pf_plan_new(int stages, int replicas);
/* ---- recomputation per stage (defined in plan_recompute.c) ---- */
/* Stage s's recomputation: its own where set, else the plan's train.recompute. */
pf_training_recompute_t pf_plan_recompute_stage(const pf_plan_t *p, int s);
/* 1 when the stages' recomputations differ (the plan then writes one per stage). */
int pf_plan_recompute_mixed(const pf_plan_t *p);
/* "full" when every stage recomputes alike, else the runs in stage order:
 * "full x3+selective x1+none x4". */
void pf_plan_recompute_describe(const pf_plan_t *p, char *buf, size_t len);
/* The heaviest recomputation of any stage (none < selective < full). */
pf_training_recompute_t pf_plan_recompute_max(const pf_plan_t *p);
/* stage_list[s].recompute of a plan file, when given ("none", "selective", "full"), into sl;
 * path names the entry in the message. PF_OK, or PF_EINPUT naming a bad value. */
int pf_plan_recompute_read(json_t *st, const char *path, pf_stage_t *sl, char *err,
                           size_t errlen);
/* The plan file's "recompute" key: s < 0 training's (the heaviest stage's), else stage s's,
 * written only where the stages differ. */
void pf_plan_recompute_write(pf_json_writer_t *w, const pf_plan_t *p, int s);

/* ---- data- and tensor-parallel degrees per stage (defined in plan_degrees.c) ----
 * A plan whose stages differ (issue 24, [Piper], [PipeDream]) runs stage s on d_s replicas of
 * t_s devices; the plan's replicas and tensor_parallel are then the largest d_s and t_s, and a
 * step is N = microbatches x replicas micro-batches in all, stage s's replica r taking those
 * with m mod d_s = r (every d_s divides N). */
/* d_s: the stage's own where set, else the plan's replicas. */
int pf_plan_degrees_replicas(const pf_plan_t *p, int s);
/* t_s: the stage's own where set, else the plan's tensor_parallel. */
int pf_plan_degrees_tp(const pf_plan_t *p, int s);
/* d_s x t_s: the entries of stage s's device array. */
int pf_plan_degrees_ndevices(const pf_plan_t *p, int s);
/* The devices the stages use: sum over s of d_s x t_s. */
long long pf_plan_degrees_total_devices(const pf_plan_t *p);
/* 1 when some stage's d_s or t_s differs from another's. */
int pf_plan_degrees_mixed(const pf_plan_t *p);
/* Micro-batches of one step in all: microbatches x replicas. */
long long pf_plan_degrees_step_microbatches(const pf_plan_t *p);
/* Sets every stage's degrees (S entries each, >= 1) for a step of n_micro micro-batches in all
 * (each d_s divides it): the plan's replicas and tensor_parallel become the largest, microbatches
 * n_micro / replicas; every mapping is dropped. PF_EINPUT when a degree is < 1 or does not
 * divide n_micro, PF_OK otherwise. */
int pf_plan_degrees_set(pf_plan_t *p, const int *d, const int *t, int n_micro);
/* "2x4 | 1x8 | 4x2": each stage's d_s x t_s, for summaries. */
void pf_plan_degrees_describe(const pf_plan_t *p, char *buf, size_t len);
/* The most devices a stage may use (d_s x t_s): more than any cluster file holds. */
#define PF_PLAN_DEGREES_MAX_DEVICES (1 << 22)
/* stage_list[i].replicas / .tp of a plan file, when given, into sl (checked >= 1
 * and <= 1 << 20); path names the entry. */
int pf_plan_degrees_read(json_t *st, const char *path, pf_stage_t *sl, char *err, size_t errlen);
/* Stage s's keys, written only where the stages differ. */
void pf_plan_degrees_write(pf_json_writer_t *w, const pf_plan_t *p, int s);
/* The search's "stage_degrees" record (p->stagedeg) inside its "search" object, when present. */
void pf_plan_degrees_write_search(pf_json_writer_t *w, const pf_plan_t *p);
/* The plan's degrees against `devices`: S x R x T <= devices when the stages agree; else every
 * d_s divides the step's micro-batches, the plan's replicas and tensor_parallel are the
 * largest, sum d_s t_s <= devices. */
int pf_plan_degrees_check(const pf_plan_t *p, int devices, char *err, size_t errlen);

/* The block search's context parallelism C (1: none): the plan's replicas are d x C. */
int pf_plan_context_parallel(const pf_plan_t *p);
/* Its expert parallelism E (1: none). */
int pf_plan_expert_parallel(const pf_plan_t *p);
void pf_plan_destroy(pf_plan_t **p);
/* Copies ops (indices). */
int pf_plan_set_stage_ops(pf_plan_t *p, int s, const int *ops, int nops);
/* Allocates stage s's device array (replicas x tensor_parallel entries, all -1) if needed and
 * returns it. */
int *pf_plan_stage_devices(pf_plan_t *p, int s);
/* Sets T (drops any mapping: device arrays change size). PF_EINPUT for T < 1. */
int pf_plan_set_tensor_parallel(pf_plan_t *p, int T);
/* Per-op tensor-parallel arrays for a graph of nops ops (zeroed: no weight, no collective). */
int pf_plan_alloc_tp(pf_plan_t *p, int nops);
int pf_plan_is_mapped(const pf_plan_t *p);
void pf_plan_set_names(pf_plan_t *p, const char *model, const char *cluster);
pf_plan_t *pf_plan_clone(const pf_plan_t *p);

/* op -> stage array of g's size (caller frees); NULL when out of memory. */
int *pf_plan_op_stage(const pf_plan_t *p, int nops);

/* Checks the plan against its graph and cluster: every op in exactly one stage, no edge from a
 * later stage back to an earlier one, replicas x stages <= devices, mapped devices distinct. */
int pf_plan_validate(const pf_plan_t *p, const pf_graph_t *g, const pf_cluster_t *c, char *err,
                     size_t errlen);

/* The plan file's "version" (DESIGN.md "Plan"): pf_plan_save writes it; a file without one is
 * version 1 (plans written before it had a number), a newer one is refused. */
#define PF_PLAN_VERSION 1
int pf_plan_load(const char *path, const pf_graph_t *g, const pf_cluster_t *c, pf_plan_t **out,
                 char *err, size_t errlen);
/* The plan file's JSON onto an open stream. */
int pf_plan_write(const pf_plan_t *p, const pf_graph_t *g, const pf_cluster_t *c, FILE *f,
                  char *err, size_t errlen);
int pf_plan_save(const pf_plan_t *p, const pf_graph_t *g, const pf_cluster_t *c,
                 const char *path, char *err, size_t errlen);

#endif
