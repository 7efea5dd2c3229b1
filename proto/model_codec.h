/* model_codec: the planner's models on the wire (graph, cluster, stage graph, plan <-> the
 * protobuf messages of proto/planfarm.proto, and the blob payloads a worker fetches). Every decode
 * validates sizes, indices and numbers before anything above it sees the data, and reports the
 * offending field (PF_EINPUT). */
#ifndef PF_MODEL_CODEC_H
#define PF_MODEL_CODEC_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/map/mapping.h"
#include "planner/ir/plan.h"
#include "proto/arena.h"
#include "proto/wire.h"

#include <stddef.h>
#include <stdint.h>

/* to_pb: NULL when out of memory; strings are borrowed from the object, which must outlive the
 * message. */
Planfarm__Graph *pf_model_codec_graph_to_pb(pf_arena_t *a, const pf_graph_t *g);
int pf_model_codec_graph_from_pb(const Planfarm__Graph *m, pf_graph_t **out, char *err,
                                 size_t errlen);
Planfarm__Cluster *pf_model_codec_cluster_to_pb(pf_arena_t *a, const pf_cluster_t *c);
int pf_model_codec_cluster_from_pb(const Planfarm__Cluster *m, pf_cluster_t **out, char *err,
                                   size_t errlen);
Planfarm__StageGraph *pf_model_codec_stage_graph_to_pb(pf_arena_t *a, const pf_stage_graph_t *sg);
int pf_model_codec_stage_graph_from_pb(const Planfarm__StageGraph *m, pf_stage_graph_t **out,
                                       char *err, size_t errlen);
/* nops / ndevices bound the indices a plan may name. */
Planfarm__Plan *pf_model_codec_plan_to_pb(pf_arena_t *a, const pf_plan_t *p);
int pf_model_codec_plan_from_pb(const Planfarm__Plan *m, int nops, int ndevices, pf_plan_t **out,
                                char *err, size_t errlen);

/* Blob payloads: a serialized Graph or Cluster. */
int pf_model_codec_encode_graph(const pf_graph_t *g, uint8_t **buf, size_t *len);
int pf_model_codec_decode_graph(const uint8_t *buf, size_t len, pf_graph_t **out, char *err,
                                size_t errlen);
int pf_model_codec_encode_cluster(const pf_cluster_t *c, uint8_t **buf, size_t *len);
int pf_model_codec_decode_cluster(const uint8_t *buf, size_t len, pf_cluster_t **out, char *err,
                                  size_t errlen);

/* ---- jobs ---- */


#endif
