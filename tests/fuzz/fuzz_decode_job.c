/* JOB messages as a worker receives them: unpack, pf_job_codec_from_pb, then the checks against
 * the fixed graph and cluster of fuzz.h a worker runs before a solver sees the job. */
#include "planner/core/util.h"
#include "proto/job_codec.h"
#include "tests/fuzz/fuzz.h"

static pf_graph_t *graph;
static pf_cluster_t *cluster;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    if (!graph) {
        graph = pf_fuzz_graph();
        cluster = pf_fuzz_cluster();
    }
    Planfarm__Job *m = planfarm__job__unpack(NULL, size, data);
    if (!m)
        return 0;
    pf_wire_job_t w;
    if (pf_job_codec_from_pb(m, &w, err, sizeof err) == PF_OK) {
        if (pf_job_codec_check(&w, graph, cluster, err, sizeof err) == PF_OK) {
            pf_job_t job;
            pf_job_codec_bind(&w, graph, cluster, &job);
        }
        pf_job_codec_clear(&w);
    }
    planfarm__job__free_unpacked(m, NULL);
    return 0;
}
