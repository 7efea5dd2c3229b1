#include "planner/map/map_inst.h"
#include "planner/core/util.h"

#include <string.h>

const char *pf_map_inst_name(pf_map_inst_t inst)
{
    switch (inst) {
    case PF_MAP_INST_M: return "m";
    case PF_MAP_INST_AR: return "ar";
    case PF_MAP_INST_FULL: return "full";
    }
    return "?";
}

int pf_map_inst_parse(const char *s, pf_map_inst_t *out)
{
    if (!s)
        return PF_EINPUT;
    if (!strcmp(s, "m"))
        *out = PF_MAP_INST_M;
    else if (!strcmp(s, "ar"))
        *out = PF_MAP_INST_AR;
    else if (!strcmp(s, "full"))
        *out = PF_MAP_INST_FULL;
    else
        return PF_EINPUT;
    return PF_OK;
}

pf_map_inst_t pf_map_inst_auto(const pf_stage_graph_t *sg)
{
    double ar = pf_stage_graph_total_allreduce_bytes(sg);
    double p2p = pf_stage_graph_total_p2p_bytes(sg);
    return ar > p2p ? PF_MAP_INST_AR
                    : PF_MAP_INST_M; /* ratio ar / p2p > 1, without dividing by 0 */
}
