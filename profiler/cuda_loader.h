/* cuda_loader: find and open libpfcuda.so at run time, so that planfarm builds, runs and tests
 * on machines with no CUDA at all.
 *
 * Looked for, in order: $PF_CUDA_LIB; libpfcuda.so beside the executable, in build/ beside it,
 * in ../lib beside it; then the dynamic linker's own search (LD_LIBRARY_PATH). */
#ifndef PF_CUDA_LOADER_H
#define PF_CUDA_LOADER_H

#include "profiler/cuda_abi.h"

#include <stddef.h>

typedef struct pf_cuda_loader pf_cuda_loader_t;

/* NULL with the reason: "no CUDA probes: built without nvcc" when no library is found,
 * "no CUDA probes: <path>: <loader error>" when one is found but does not load (no CUDA driver
 * or runtime), or a version mismatch. */
pf_cuda_loader_t *pf_cuda_loader_open(char *err, size_t errlen);
const pf_cuda_api_t *pf_cuda_loader_api(const pf_cuda_loader_t *c);
const char *pf_cuda_loader_path(const pf_cuda_loader_t *c);
void pf_cuda_loader_close(pf_cuda_loader_t **c);

#define PF_CUDA_NOT_BUILT "no CUDA probes: built without nvcc"

#endif
