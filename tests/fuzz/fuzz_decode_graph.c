/* Graph blobs off the wire (pf_model_codec_decode_graph); a graph that decodes must encode
 * again. */
#include "planner/core/util.h"
#include "proto/job_codec.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    pf_graph_t *g = NULL;
    if (pf_model_codec_decode_graph(data, size, &g, err, sizeof err) == PF_OK) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (pf_model_codec_encode_graph(g, &buf, &len) != PF_OK)
            abort();
        free(buf);
    }
    pf_graph_destroy(&g);
    return 0;
}
