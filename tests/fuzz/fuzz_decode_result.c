/* RESULT messages as the broker receives them (pf_job_codec_result_from_pb), bounded by the fixed
 * graph and cluster sizes of fuzz.h. */
#include "planner/core/util.h"
#include "proto/job_codec.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    Planfarm__JobResult *m = planfarm__job_result__unpack(NULL, size, data);
    if (!m)
        return 0;
    pf_job_result_t r;
    if (pf_job_codec_result_from_pb(m, PF_FUZZ_OPS, PF_FUZZ_DEVICES, &r, err, sizeof err) == PF_OK)
        pf_job_result_clear(&r);
    planfarm__job_result__free_unpacked(m, NULL);
    return 0;
}
