/* devfit: a device model fitted to a GPU's measured sweep (planfarm calibrate; the sweep is what
 * `planfarm profile --local --sweep` writes, format planfarm-device-sweep, profiler/sweep.c).
 *
 * The fit (DESIGN.md "Cost definitions", device model): the GEMM table's grid is the set of
 * (m, n, k) of the sweep's batch-1 GEMMs in the table's precision (bf16), every combination
 * required; each cell's efficiency is 2mnk / (fwd_ms x peak), the mean over repeated records,
 * capped at 1. Each other precision's scale is its largest GEMM's efficiency over the table's
 * at that shape. The copy roofline: hbm_gbps the slope of time over 2 x bytes between the two
 * largest copies, launch_us the median over copies of what each takes beyond bytes / hbm_gbps
 * (at least 0). The rest (peaks, fused
 * efficiency, NVLink) comes from the base model. */
#ifndef PF_DEVFIT_H
#define PF_DEVFIT_H

#include "planner/ir/devmodel.h"

#include <jansson.h>
#include <stddef.h>

#define PF_DEVFIT_FAMILIES 24

/* The fitted model's error on one family of records: predicted / measured - 1. */
typedef struct {
    char name[40]; /* "bf16 fwd", "bf16 batched bwd", "fp32 fwd", "hbm copy" */
    int n;
    double rms, worst; /* worst: the signed error of largest magnitude */
} pf_devfit_family_t;

typedef struct {
    int nfamilies;
    pf_devfit_family_t family[PF_DEVFIT_FAMILIES];
    int ngemm, ncopy; /* records used */
} pf_devfit_report_t;

/* Fit base to the sweep at path (a parsed root with label for the _json form). PF_OK with *out
 * (the caller's) and rep filled; PF_EINPUT "<file>: gemm[3].fwd_ms: ..." on bad records or an
 * incomplete grid. */
int pf_devfit_sweep_file(const char *path, const pf_devmodel_t *base, pf_devmodel_t **out,
                         pf_devfit_report_t *rep, char *err, size_t errlen);
int pf_devfit_sweep_json(json_t *root, const char *label, const pf_devmodel_t *base,
                         pf_devmodel_t **out, pf_devfit_report_t *rep, char *err,
                         size_t errlen);

#endif
