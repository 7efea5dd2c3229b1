/* job_codec: jobs, their answers and a request's options on the wire. The generic fields (id,
 * attempt, kind, status, error) are coded here once; each kind's parameters and answer go through
 * that kind's hooks, one entry per pf_job_kind_t in the table of job_codec.c (a build fails when a
 * kind of planner/search/job.h has none). Adding a kind = its descriptor in planner/search/job.c,
 * its Params/Answer messages in planfarm.proto and one entry in that table. Every decode
 * validates before anything above it sees the data and names the offending field (PF_EINPUT).
 * The Setting every job carries is setting_codec.h's; a request's options are
 * plan_options_codec.h's. */
#ifndef PF_JOB_CODEC_H
#define PF_JOB_CODEC_H

#include "planner/search/job.h"
#include "proto/model_codec.h"
#include "proto/arena.h"
#include "proto/wire.h"

#include <stddef.h>
#include <stdint.h>

#define PF_HASH_MAX 32
typedef struct {
    uint8_t hash[PF_HASH_MAX];
    size_t hash_len; /* 0 = no blob */
    uint64_t size;
} pf_blob_ref_t;

/* A job as a worker receives it: parameters decoded and owned, large inputs still named by
 * their blob refs. pf_job_codec_bind points a pf_job_t at resolved inputs. */
typedef struct {
    uint64_t id;
    uint32_t attempt;
    pf_job_kind_t kind;
    pf_blob_ref_t graph, cluster;
    pf_partition_opts_t partition; /* .group points into `group` below */
    int *group;
    size_t group_len; /* entries in group: the graph's op count, checked once it is known */
    pf_stage_graph_t *stage_graph;
    pf_map_inst_t inst;
    double target_ms, budget_s;
    int symmetry, threads;
    pf_tp_setting_opts_t setting; /* .tap_plans points into tap_plans below */
    uint64_t *tap_plans;
    int tap_unit;
    uint64_t tap_lo, tap_hi;
    pf_plan_t *plan;      /* SIMULATE (owned); its op and device indices checked against the
                           * blobs by pf_job_codec_check */
    pf_training_schedule_t schedule;
    double *xfer_ms;
    int nxfer;
    pf_reshard_problem_t reshard; /* RESHARD: points into the owned arrays below */
    pf_reshard_opts_t reshard_opts;
    int64_t reshard_shape[PF_RESHARD_MAX_DIMS];
    pf_mesh_shard_t reshard_spec[2][PF_RESHARD_MAX_DIMS];
    int *reshard_devices; /* source mesh, then destination mesh */
} pf_wire_job_t;

/* Encode job `id` (attempt n); graph/cluster: refs of the blobs the job's inputs are. */
Planfarm__Job *pf_job_codec_to_pb(pf_arena_t *a, uint64_t id, uint32_t attempt,
                                  const pf_job_t *job, const pf_blob_ref_t *graph,
                                  const pf_blob_ref_t *cluster);
int pf_job_codec_from_pb(const Planfarm__Job *m, pf_wire_job_t *out, char *err, size_t errlen);
void pf_job_codec_clear(pf_wire_job_t *j);
/* What the decode could not check: the job against the blobs its refs resolved to (the graph
 * and cluster a DP job needs, a grouping with exactly one entry per op of that graph). PF_OK, or
 * PF_EINPUT and why. A worker calls it before the job goes to a solver. */
int pf_job_codec_check(const pf_wire_job_t *w, const pf_graph_t *graph,
                      const pf_cluster_t *cluster, char *err, size_t errlen);
/* Fill *job from w and the resolved inputs (graph may be NULL for kinds that need none). */
void pf_job_codec_bind(const pf_wire_job_t *w, const pf_graph_t *graph,
                      const pf_cluster_t *cluster, pf_job_t *job);

Planfarm__JobResult *pf_job_codec_result_to_pb(pf_arena_t *a, uint64_t id,
                                           const pf_job_result_t *res);
/* nops / ndevices bound a partition's op indices and a probe's devices. */
int pf_job_codec_result_from_pb(const Planfarm__JobResult *m, int nops, int ndevices,
                            pf_job_result_t *out, char *err, size_t errlen);

#endif
