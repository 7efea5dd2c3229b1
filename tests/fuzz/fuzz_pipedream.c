/* PipeDream profiles (pf_import_pipedream: a text format, not JSON). */
#include "planner/inputs/import.h"
#include "tests/fuzz/fuzz.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512], path[64];
    int fd = pf_fuzz_memfile(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    pf_graph_t *g = NULL;
    pf_import_pipedream(path, 0, &g, err, sizeof err);
    pf_graph_destroy(&g);
    close(fd);
    return 0;
}
