/* codec: the wire format. Frame 1 of every message is a 4-byte header ("PF", version, kind);
 * frame 2 is one protobuf message of proto/planfarm.proto. This module turns planner objects
 * into those messages and back; every decode validates sizes, indices, enums and numbers before
 * anything above it sees the data, and reports the offending field (PF_EINPUT). */
#ifndef PF_CODEC_H
#define PF_CODEC_H

#include "planner/cluster.h"
#include "planner/graph.h"
#include "planner/jobs.h"
#include "planner/mapping.h"
#include "planner/plan.h"
#include "planner/search.h"
#include "proto/planfarm.pb-c.h"

#include <stddef.h>
#include <stdint.h>

#define PF_WIRE_VERSION 1
#define PF_WIRE_HEADER_LEN 4

typedef enum {
    /* worker -> broker */
    PF_MSG_READY = 1,
    PF_MSG_HEARTBEAT = 2, /* both ways */
    PF_MSG_RESULT = 3,
    PF_MSG_FAILED = 4,
    PF_MSG_FETCH = 5,
    PF_MSG_BYE = 6, /* both ways */
    /* broker -> worker */
    PF_MSG_JOB = 10,
    PF_MSG_BLOB = 11,
    PF_MSG_CANCEL = 12,
    /* client -> broker */
    PF_MSG_SUBMIT = 20,
    PF_MSG_STATUS = 21,
    PF_MSG_RESULT_REQ = 22,
    PF_MSG_CANCEL_REQ = 23,
    PF_MSG_LIST = 24,
    /* broker -> client */
    PF_MSG_SUBMIT_REPLY = 30, /* RequestStatus */
    PF_MSG_STATUS_REPLY = 31, /* RequestStatus */
    PF_MSG_RESULT_REPLY = 32, /* ResultReply */
    PF_MSG_LIST_REPLY = 34,   /* ListReply */
    PF_MSG_ERROR = 35         /* ErrorReply */
} pf_msg_t;

const char *pf_msg_name(int kind); /* "READY", ...; "?" when unknown */
void pf_wire_header(pf_msg_t kind, uint8_t out[PF_WIRE_HEADER_LEN]);
/* PF_OK and the kind, or PF_EINPUT ("bad protocol tag", "protocol version 7, expected 1",
 * "unknown message kind 99"). */
int pf_wire_parse_header(const void *data, size_t size, pf_msg_t *kind, char *err, size_t errlen);

/* Messages are built in an arena: every nested allocation goes away with it. */
typedef struct pf_arena pf_arena_t;
pf_arena_t *pf_arena_new(void);
void pf_arena_destroy(pf_arena_t **a);
void *pf_arena_alloc(pf_arena_t *a, size_t size); /* zeroed; NULL when out of memory */

/* Serialize any message into a malloc'd buffer. */
int pf_codec_pack(const ProtobufCMessage *m, uint8_t **buf, size_t *len);

/* ---- planner objects <-> messages (to_pb: NULL when out of memory; strings are borrowed from
 * the object, which must outlive the message) ---- */
Planfarm__Graph *pf_codec_graph_to_pb(pf_arena_t *a, const pf_graph_t *g);
int pf_codec_graph_from_pb(const Planfarm__Graph *m, pf_graph_t **out, char *err, size_t errlen);
Planfarm__Cluster *pf_codec_cluster_to_pb(pf_arena_t *a, const pf_cluster_t *c);
int pf_codec_cluster_from_pb(const Planfarm__Cluster *m, pf_cluster_t **out, char *err,
                             size_t errlen);
Planfarm__StageGraph *pf_codec_stage_graph_to_pb(pf_arena_t *a, const pf_stage_graph_t *sg);
int pf_codec_stage_graph_from_pb(const Planfarm__StageGraph *m, pf_stage_graph_t **out, char *err,
                                 size_t errlen);
/* nops / ndevices bound the indices a plan may name. */
Planfarm__Plan *pf_codec_plan_to_pb(pf_arena_t *a, const pf_plan_t *p);
int pf_codec_plan_from_pb(const Planfarm__Plan *m, int nops, int ndevices, pf_plan_t **out,
                          char *err, size_t errlen);

/* Blob payloads: a serialized Graph or Cluster. */
int pf_codec_encode_graph(const pf_graph_t *g, uint8_t **buf, size_t *len);
int pf_codec_decode_graph(const uint8_t *buf, size_t len, pf_graph_t **out, char *err,
                          size_t errlen);
int pf_codec_encode_cluster(const pf_cluster_t *c, uint8_t **buf, size_t *len);
int pf_codec_decode_cluster(const uint8_t *buf, size_t len, pf_cluster_t **out, char *err,
                            size_t errlen);

/* ---- jobs ---- */

#define PF_HASH_MAX 32
typedef struct {
    uint8_t hash[PF_HASH_MAX];
    size_t hash_len; /* 0 = no blob */
    uint64_t size;
} pf_blob_ref_t;

/* A job as a worker receives it: parameters decoded and owned, large inputs still named by
 * their blob refs. pf_wire_job_bind points a pf_job_t at resolved inputs. */
typedef struct {
    uint64_t id;
    uint32_t attempt;
    pf_job_kind_t kind;
    pf_blob_ref_t graph, cluster;
    pf_partition_opts_t partition; /* .group points into `group` below */
    int *group;
    size_t group_len; /* entries in group: the graph's op count, checked once it is known */
    pf_stage_graph_t *stage_graph;
    pf_inst_t inst;
    double target_ms, budget_s;
    int symmetry, threads;
} pf_wire_job_t;

/* Lower-case hex of a hash (or any bytes) into out (2 x len + 1 bytes): blob names in tables and
 * logs. */
void pf_wire_hex(const uint8_t *bytes, size_t len, char *out);

/* Encode job `id` (attempt n); graph/cluster: refs of the blobs the job's inputs are. */
Planfarm__Job *pf_codec_job_to_pb(pf_arena_t *a, uint64_t id, uint32_t attempt,
                                  const pf_job_t *job, const pf_blob_ref_t *graph,
                                  const pf_blob_ref_t *cluster);
int pf_codec_job_from_pb(const Planfarm__Job *m, pf_wire_job_t *out, char *err, size_t errlen);
void pf_wire_job_clear(pf_wire_job_t *j);
/* What the decode could not check: the job against the blobs its refs resolved to (the graph
 * and cluster a DP job needs, a grouping with exactly one entry per op of that graph). PF_OK, or
 * PF_EINPUT and why. A worker calls it before the job goes to a solver. */
int pf_wire_job_check(const pf_wire_job_t *w, const pf_graph_t *graph,
                      const pf_cluster_t *cluster, char *err, size_t errlen);
/* Fill *job from w and the resolved inputs (graph may be NULL for kinds that need none). */
void pf_wire_job_bind(const pf_wire_job_t *w, const pf_graph_t *graph,
                      const pf_cluster_t *cluster, pf_job_t *job);

Planfarm__JobResult *pf_codec_result_to_pb(pf_arena_t *a, uint64_t id,
                                           const pf_job_result_t *res);
/* nops / ndevices bound a partition's op indices and a probe's devices. */
int pf_codec_result_from_pb(const Planfarm__JobResult *m, int nops, int ndevices,
                            pf_job_result_t *out, char *err, size_t errlen);

/* ---- requests ---- */
Planfarm__PlanOptions *pf_codec_options_to_pb(pf_arena_t *a, const pf_search_opts_t *o);
int pf_codec_options_from_pb(const Planfarm__PlanOptions *m, pf_search_opts_t *out, char *err,
                             size_t errlen);

#endif
