/* plan_options_codec: a planning request's options (pf_search_opts_t) on the wire. Decoding
 * validates every field and names the one out of range (PF_EINPUT); absent fields keep
 * pf_search_opts_init()'s defaults, but for the block search: neither block_search nor
 * block_search_off leaves it to the search (block_search -1), as the command line does. */
#ifndef PF_PLAN_OPTIONS_CODEC_H
#define PF_PLAN_OPTIONS_CODEC_H

#include "planner/search/search.h"
#include "proto/arena.h"
#include "proto/wire.h"

#include <stddef.h>

Planfarm__PlanOptions *pf_plan_options_codec_to_pb(pf_arena_t *a, const pf_search_opts_t *o);
int pf_plan_options_codec_from_pb(const Planfarm__PlanOptions *m, pf_search_opts_t *out,
                                  char *err, size_t errlen);

#endif
