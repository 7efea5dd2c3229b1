/* The options of a SUBMIT (pf_plan_options_codec_from_pb). */
#include "planner/core/util.h"
#include "proto/job_codec.h"
#include "proto/plan_options_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    Planfarm__PlanOptions *m = planfarm__plan_options__unpack(NULL, size, data);
    if (!m)
        return 0;
    pf_search_opts_t o;
    pf_plan_options_codec_from_pb(m, &o, err, sizeof err);
    planfarm__plan_options__free_unpacked(m, NULL);
    return 0;
}
