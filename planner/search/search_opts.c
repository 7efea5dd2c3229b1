/* search_opts: the defaults of a search request (search_opts.h). */
#include "planner/search/search_opts.h"
#include "planner/map/map_symmetry.h"

#include <string.h>

void pf_search_opts_init(pf_search_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->max_stages = 64;
    o->refine = 1;
    o->alphas[0] = 0.01;
    o->alphas[1] = 1;
    o->alphas[2] = 100;
    o->nalphas = 3;
    o->candidates = 3;
    o->probes_in_flight = 4;
    o->rel_eps = 1e-3;
    o->probe_seconds = 1; /* as `planfarm map`: a timed-out probe only costs optimality proof */
    o->probe_timeouts = 2;
    o->symmetry = PF_MAP_SYM_ALL;
    o->auto_inst = 1;
    o->inst = PF_MAP_INST_FULL;
    o->seed = 1;
    o->max_tp = 8;
    o->mem_headroom = 0.1;
    o->block_candidates = 5;
    o->sequence_parallel = -1;
    o->recompute_auto = o->zero_auto = 1;
    pf_training_init(&o->train);
}

pf_training_t pf_search_opts_train(const pf_search_opts_t *o, int T)
{
    pf_training_t t = o->train;
    for (int i = 0; i < o->nblock_trains; i++)
        if (o->block_trains[i].tp == T) {
            t.recompute = o->block_trains[i].recompute;
            t.zero = o->block_trains[i].zero;
            t.sequence_parallel = o->block_trains[i].sequence_parallel;
        }
    return t;
}
