/* Cluster blobs off the wire (pf_model_codec_decode_cluster). */
#include "planner/core/util.h"
#include "proto/job_codec.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    pf_cluster_t *c = NULL;
    if (pf_model_codec_decode_cluster(data, size, &c, err, sizeof err) == PF_OK) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (pf_model_codec_encode_cluster(c, &buf, &len) != PF_OK)
            abort();
        free(buf);
    }
    pf_cluster_destroy(&c);
    return 0;
}
