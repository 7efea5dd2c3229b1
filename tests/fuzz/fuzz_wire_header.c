/* Frame 1 of every message (pf_wire_parse_header): tag, version, kind. */
#include "planner/core/util.h"
#include "proto/job_codec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    pf_wire_msg_t kind;
    if (pf_wire_parse_header(data, size, &kind, err, sizeof err) == PF_OK) {
        uint8_t again[PF_WIRE_HEADER_LEN];
        pf_wire_header(kind, again);
        if (size != PF_WIRE_HEADER_LEN || memcmp(again, data, PF_WIRE_HEADER_LEN) != 0)
            abort(); /* a header that parses is exactly the one we would write */
    }
    return 0;
}
