#include "profiler/cuda_loader.h"
#include "planner/core/util.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pf_cuda_loader {
    void *dl;
    const pf_cuda_api_t *api;
    char path[PATH_MAX];
};

/* Candidate paths; returns how many were written. */
static int candidates(char out[][PATH_MAX], int cap)
{
    int n = 0;
    const char *env = getenv("PF_CUDA_LIB");
    char exe[PATH_MAX];
    if (env && *env && n < cap)
        snprintf(out[n++], PATH_MAX, "%s", env);
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        const char *dir = dirname(exe);
        static const char *const rel[] = {"libpfcuda.so", "build/libpfcuda.so",
                                          "../lib/libpfcuda.so"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0] && n < cap; i++)
            snprintf(out[n++], PATH_MAX, "%.*s/%s", PATH_MAX - 32, dir, rel[i]);
    }
    return n;
}

pf_cuda_loader_t *pf_cuda_loader_open(char *err, size_t errlen)
{
    char cand[4][PATH_MAX];
    int ncand = candidates(cand, 4);
    pf_cuda_loader_t *c = calloc(1, sizeof *c);
    if (!c) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    for (int i = 0; i < ncand && !c->dl; i++) {
        if (access(cand[i], F_OK) != 0)
            continue;
        snprintf(c->path, sizeof c->path, "%.*s", PATH_MAX - 1, cand[i]);
        if (!(c->dl = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL))) {
            pf_fail(err, errlen, PF_ERR, "no CUDA probes: %s", dlerror());
            goto fail;
        }
    }
    if (!c->dl) {
        snprintf(c->path, sizeof c->path, "libpfcuda.so");
        if (!(c->dl = dlopen("libpfcuda.so", RTLD_NOW | RTLD_LOCAL))) {
            pf_fail(err, errlen, PF_ERR, "%s", PF_CUDA_NOT_BUILT);
            goto fail;
        }
    }
    pf_cuda_api_fn entry;
    *(void **)&entry = dlsym(c->dl, PF_CUDA_ENTRY);
    if (!entry) {
        pf_fail(err, errlen, PF_ERR, "no CUDA probes: %s has no %s", c->path, PF_CUDA_ENTRY);
        goto fail;
    }
    c->api = entry(PF_CUDA_ABI_VERSION);
    if (!c->api || c->api->abi_version < PF_CUDA_ABI_VERSION ||
        c->api->struct_size < sizeof(pf_cuda_api_t)) {
        pf_fail(err, errlen, PF_ERR,
                "no CUDA probes: %s does not serve interface version %u (rebuild it with this "
                "planfarm)", c->path, PF_CUDA_ABI_VERSION);
        goto fail;
    }
    return c;
fail:
    pf_cuda_loader_close(&c);
    return NULL;
}

const pf_cuda_api_t *pf_cuda_loader_api(const pf_cuda_loader_t *c) { return c->api; }
const char *pf_cuda_loader_path(const pf_cuda_loader_t *c) { return c->path; }

void pf_cuda_loader_close(pf_cuda_loader_t **cp)
{
    if (!cp || !*cp)
        return;
    if ((*cp)->dl)
        dlclose((*cp)->dl);
    free(*cp);
    *cp = NULL;
}
