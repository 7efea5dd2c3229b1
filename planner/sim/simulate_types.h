/* simulate_types: what the simulator (simulate.h) takes and gives: a pipeline's stages, the
 * input of one step, and its result with the optional timeline. Apart so that the modules
 * simulate.c calls (simulate_check, replica_groups) can read them without including simulate.h
 * (no include cycle). */
#ifndef PF_SIMULATE_TYPES_H
#define PF_SIMULATE_TYPES_H

#include "planner/ir/cluster.h"
#include "planner/ir/training.h"

#include <stdatomic.h>

/* One stage, per micro-batch of one replica. Times are per device of a tensor-parallel group
 * (each of the T devices runs them at once); bytes of a whole replica unless said. */
typedef struct {
    double fwd_ms, bwd_ms;
    double recompute_ms;          /* forward recomputation before the backward (0: none) */
    double tp_fwd_ms, tp_bwd_ms;  /* tensor-parallel collectives per micro-batch (0 when T = 1) */
    double optimizer_ms;          /* once per step, after the stage's gradients are reduced */
    double param_bytes;           /* gradients all-reduced over the replicas; T ranks reduce 1/T each */
    double send_bytes;            /* to the next stage per micro-batch (and back as gradients);
                                     rank k sends 1/T of it to rank k of the next stage */
    double *xfer_ms;              /* R entries or NULL: replica r's transfer to the next stage
                                     per micro-batch (and its gradient back) as one cross-mesh
                                     resharding (Zhuang et al.): every rank k's transfer k -> k is
                                     busy for that long. NULL: send_bytes / T per rank by the
                                     postal model. */
    double act_bytes;             /* per device, stored for each micro-batch in flight */
    double static_bytes;          /* per device, held all step (parameter state, workspace) */
    int *devices;                 /* R x T cluster device indices: devices[r * T + k] */
    double *rep_fwd_ms, *rep_bwd_ms; /* R entries or NULL: replica r's fwd_ms / bwd_ms on its
                                        own devices (a mixed cluster, devkinds.h: the slowest
                                        kind of its T devices); NULL: fwd_ms, bwd_ms */
} pf_simulate_stage_t;

typedef struct {
    int stages, replicas, tp, microbatches; /* S, R, T (>= 1), MB */
    int buckets;                /* gradient all-reduce buckets per stage (0 or 1: one) */
    double nvls_busbw_gbps;     /* > 0: hosts have NVSwitch SHARP, all-reduce bus bandwidth (the
                                   cluster file does not say; a device model does) */
    int zero;                   /* ZeRO stage (training.h): 3 gathers a stage's parameters
                                   before each forward and backward (training.h) */
    int virtual_stages;         /* V > 1: interleaved 1F1B (interleave.h): the stages are P = stages
                                   / V ranks' chunks, stage s on the devices of stage s mod P,
                                   run in Megatron-LM's interleaved order whatever `schedule`
                                   says; 0 or 1: none */
    pf_training_schedule_t schedule;
    int timeline;               /* 1: record the events (pictures); 0: figures only */
    pf_simulate_stage_t *stage;      /* S entries */
    const pf_cluster_t *cluster;
    /* One replica standing for dp_replicas identical ones (replica_groups.h): the data-parallel
     * collectives are priced over dp_stage[s].devices (dp_replicas x T), the simulated replicas'
     * devices among them. NULL / 0: over the simulated replicas themselves. */
    const pf_simulate_stage_t *dp_stage;
    int dp_replicas;
    /* Optional: set non-zero (by another thread) to stop the simulation early: pf_simulate then
     * fails ("cancelled"). A SIMULATE job's worker sets it when the search no longer wants the
     * answer (search_sim.c skips candidates that cannot win). NULL: never. */
    const atomic_int *cancel;
} pf_simulate_input_t;

typedef enum {
    PF_EV_FWD, PF_EV_BWD, PF_EV_TP, PF_EV_OPT,          /* compute stream */
    PF_EV_SEND, PF_EV_RECV, PF_EV_ALLREDUCE             /* communication stream */
} pf_simulate_ev_kind_t;
/* PF_STREAM_DP: the gradient buckets' queue of the communication stream (drawn in its row) */
enum { PF_STREAM_COMPUTE = 0, PF_STREAM_COMM = 1, PF_STREAM_DP = 2 };

typedef struct {
    int device;     /* cluster device index */
    int stream;     /* PF_STREAM_COMPUTE, PF_STREAM_COMM or PF_STREAM_DP */
    int kind;       /* pf_simulate_ev_kind_t */
    int stage, replica;
    int microbatch; /* -1 for all-reduce and optimizer */
    double start_ms, end_ms;
} pf_simulate_event_t;

typedef struct {
    pf_training_schedule_t schedule; /* as asked */
    pf_training_schedule_t order;    /* the compute order simulated (for signal: the best one) */
    int stages, replicas, tp, microbatches;
    double step_ms;
    double bubble_fraction;   /* 1 - compute busy / (devices x step) */
    int ndevices;             /* P x R x T rows (P = S / V ranks), rank-major: row (s R + r) T + k */
    int *device;              /* cluster device index of each row */
    double *busy_ms;          /* compute stream busy time */
    double *comm_busy_ms;     /* communication stream busy time */
    double *peak_mem_bytes;   /* the static bytes of the rank's chunks + the most activation bytes
                                 of its micro-batch-chunks in flight */
    int *peak_inflight;       /* the most micro-batch-chunks in flight */
    int nevents;
    pf_simulate_event_t *events;   /* when in->timeline; sorted by device, stream, start */
} pf_simulate_result_t;

#endif
