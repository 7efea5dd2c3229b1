/* import: real profiles -> graph files (issue "foundation", item 4). */
#ifndef PF_IMPORT_H
#define PF_IMPORT_H

#include "planner/graph.h"

/* PipeDream's profile text (node and edge lines). microbatch: the profiled batch size recorded in
 * the graph (0 = the known value for the shipped models, else 1). PF_EINPUT names file:line. */
int pf_import_pipedream(const char *path, int microbatch, pf_graph_t **out, char *err,
                        size_t errlen);
/* Piper's JSON input, single-device "vanilla" configuration. */
int pf_import_piper(const char *path, int microbatch, pf_graph_t **out, char *err, size_t errlen);

#endif
