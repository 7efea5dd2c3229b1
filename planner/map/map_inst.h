/* map_inst: the instantiations of the mapping problem (Parmesan V): which terms of c_stage the
 * objective eq. 5 takes (m: eq. 6 with the eq. 8 transfers; ar: eq. 7 with the eq. 9 ring;
 * full: both), and the paper's selection between m and ar (V-B). */
#ifndef PF_MAP_INST_H
#define PF_MAP_INST_H

#include "planner/map/stage_graph.h"

typedef enum { PF_MAP_INST_M = 0, PF_MAP_INST_AR = 1, PF_MAP_INST_FULL = 2 } pf_map_inst_t;

const char *pf_map_inst_name(pf_map_inst_t inst); /* "m", "ar", "full" */
int pf_map_inst_parse(const char *s,
                      pf_map_inst_t *out); /* PF_OK or PF_EINPUT ("auto" is not one) */

/* The paper's selection: AR when all-reduce bytes / inter-stage bytes > 1, else M (both sides as
 * pf_stage_graph_total_allreduce_bytes / _total_p2p_bytes define them; no inter-stage bytes and
 * some all-reduce bytes = AR). */
pf_map_inst_t pf_map_inst_auto(const pf_stage_graph_t *sg);

#endif
