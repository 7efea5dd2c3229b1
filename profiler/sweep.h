/* sweep: the measurements a device model is fitted to (planfarm profile --local --sweep).
 *
 * On one GPU, through the CUDA probes: GEMMs over a grid of (m, n, k) per precision, batched
 * GEMMs of attention's shape, HBM copies over sizes, and the memory-bound kernels (elementwise,
 * layernorm, softmax, unfused attention) over sizes. Written as JSON, one record per probe with
 * what was asked and what was measured; fitting is left to the planner (no fit here). */
#ifndef PF_SWEEP_H
#define PF_SWEEP_H

#include "profiler/cuda_abi.h"

#include <jansson.h>
#include <stddef.h>

/* The sweep's default soak: longer than the GPU's power management takes to settle its clock
 * under a GEMM (milliseconds), short enough that the 330 op probes of the full grid soak in
 * about a minute (the whole sweep about 90 s on an H100). */
#define PF_SWEEP_SOAK_MS 200

typedef void (*pf_sweep_progress_fn)(void *ctx, int done, int total, const char *what);

typedef struct {
    int device;
    int reps;
    int quick;      /* a small grid (tests, or a first look): a few shapes per family */
    double soak_ms; /* each op probe first runs untimed this long (0: not), so that its record is
                     * the GPU's steady state under that probe, not what the last one left */
} pf_sweep_opts_t;

/* Runs the sweep on opts->device and returns its records (caller decrefs), or NULL with the
 * first probe that failed in err. */
json_t *pf_sweep_run(const pf_cuda_api_t *api, const pf_sweep_opts_t *opts,
                     pf_sweep_progress_fn progress, void *ctx, char *err, size_t errlen);

/* How many probes pf_sweep_run makes with these options (for progress). */
int pf_sweep_count(const pf_sweep_opts_t *opts);

#endif
