#include "planner/ir/devmodel.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pf_devmodel {
    pf_devmodel_spec_t spec;
    int nm, nn, nk;
    double gm[PF_DEVMODEL_GRID_MAX], gn[PF_DEVMODEL_GRID_MAX], gk[PF_DEVMODEL_GRID_MAX];
    const double *eff; /* nm x nn x nk */
    double *owned;     /* eff when the model is the caller's; NULL in a preset */
};

/* h100-sweep.json: bf16 forward GEMMs, efficiency = 2mnk / (ms x 989.4 TFLOP/s), 5 digits;
 * m = 256 .. 16384 (7), n and k = 512 .. 16384 (6); row (m, n), k across. Each cell measured in
 * its own steady state (soaked 200 ms: under back-to-back GEMMs the clock falls to what the power
 * limit allows, as in a training step), the median of four sweeps (bench/results/
 * gpu-2026-11-26b.md; the unsoaked sweep before it read large GEMMs as slower than smaller ones
 * wherever the grid's order had heated the GPU). */
static const double h100_eff[7 * 6 * 6] = {
    0.0096019, 0.016227, 0.037703, 0.055506, 0.119, 0.18953,
    0.016806, 0.038213, 0.066045, 0.10344, 0.17101, 0.23669,
    0.042794, 0.071435, 0.13254, 0.20247, 0.28955, 0.33962,
    0.072466, 0.1425, 0.21792, 0.27192, 0.39171, 0.49577,
    0.14571, 0.2346, 0.34496, 0.4281, 0.56582, 0.60552,
    0.21731, 0.30945, 0.4166, 0.55054, 0.60892, 0.61539,
    0.020768, 0.041183, 0.066858, 0.11295, 0.19682, 0.30399,
    0.042155, 0.082818, 0.1252, 0.19818, 0.30989, 0.38193,
    0.079939, 0.12957, 0.22469, 0.32386, 0.42701, 0.53309,
    0.13, 0.2471, 0.36247, 0.48373, 0.59719, 0.63726,
    0.24192, 0.36926, 0.49645, 0.59637, 0.65332, 0.65151,
    0.3191, 0.4536, 0.57156, 0.62192, 0.64168, 0.67737,
    0.043313, 0.075364, 0.13418, 0.20053, 0.3227, 0.42861,
    0.082116, 0.14317, 0.24257, 0.31293, 0.47693, 0.54873,
    0.13478, 0.23229, 0.37319, 0.50867, 0.59621, 0.65872,
    0.21915, 0.34213, 0.48503, 0.60191, 0.64497, 0.6432,
    0.33026, 0.43919, 0.57276, 0.6397, 0.64682, 0.67606,
    0.38835, 0.49594, 0.58977, 0.63873, 0.6482, 0.67167,
    0.071511, 0.12457, 0.22148, 0.33249, 0.48244, 0.52586,
    0.13378, 0.2345, 0.36259, 0.51288, 0.6147, 0.64608,
    0.19869, 0.3527, 0.47546, 0.59884, 0.65043, 0.64567,
    0.30071, 0.45966, 0.57451, 0.63544, 0.64347, 0.66909,
    0.3915, 0.48666, 0.59502, 0.62368, 0.65621, 0.67925,
    0.45332, 0.54191, 0.61572, 0.65288, 0.66451, 0.74446,
    0.12514, 0.23329, 0.38996, 0.49217, 0.61149, 0.6201,
    0.22385, 0.33557, 0.49702, 0.59555, 0.62995, 0.64351,
    0.32986, 0.46859, 0.57849, 0.64854, 0.64178, 0.65995,
    0.39449, 0.53645, 0.58833, 0.65129, 0.65443, 0.68357,
    0.44739, 0.54303, 0.60709, 0.6575, 0.6729, 0.71288,
    0.48017, 0.57938, 0.61201, 0.64501, 0.67065, 0.68597,
    0.22694, 0.36713, 0.47829, 0.56745, 0.61851, 0.61897,
    0.31456, 0.44928, 0.55533, 0.64216, 0.64888, 0.6738,
    0.4057, 0.53166, 0.61352, 0.6349, 0.6575, 0.68653,
    0.45772, 0.5634, 0.60567, 0.64981, 0.66967, 0.73791,
    0.4847, 0.57312, 0.61146, 0.64745, 0.68406, 0.69236,
    0.46943, 0.57083, 0.62492, 0.65166, 0.70518, 0.70712,
    0.32366, 0.44008, 0.55811, 0.61974, 0.63116, 0.67623,
    0.39122, 0.51452, 0.59572, 0.63513, 0.66213, 0.68243,
    0.43506, 0.55303, 0.61524, 0.65687, 0.68124, 0.70407,
    0.48459, 0.57839, 0.60931, 0.63364, 0.70173, 0.70975,
    0.46522, 0.55879, 0.61029, 0.65901, 0.68522, 0.67882,
    0.49512, 0.58087, 0.66498, 0.69861, 0.7241, 0.70055,
};
/* h200-sweep.json: bf16 forward GEMMs, efficiency = 2mnk / (ms x 989.4 TFLOP/s), 4 digits;
 * m = 256 .. 16384 (7), n and k = 512 .. 16384 (6); row (m, n), k across. */
static const double h200_eff[7 * 6 * 6] = {
    0.00875, 0.01718, 0.03293, 0.05763, 0.1045, 0.1779,
    0.01638, 0.03475, 0.06327, 0.1037, 0.1718, 0.2813,
    0.03236, 0.06509, 0.114, 0.1945, 0.2879, 0.388,
    0.06405, 0.1286, 0.2632, 0.3319, 0.4346, 0.5333,
    0.1301, 0.2043, 0.3494, 0.4741, 0.5963, 0.6666,
    0.2197, 0.3247, 0.4341, 0.5981, 0.6662, 0.7095,
    0.01859, 0.03577, 0.05908, 0.1122, 0.1817, 0.306,
    0.03662, 0.06534, 0.1264, 0.2051, 0.311, 0.4148,
    0.06722, 0.1238, 0.2211, 0.3358, 0.4731, 0.5563,
    0.1255, 0.216, 0.3492, 0.4917, 0.6161, 0.708,
    0.2552, 0.3846, 0.5338, 0.6597, 0.7318, 0.7885,
    0.3603, 0.476, 0.6352, 0.7269, 0.7848, 0.8035,
    0.04331, 0.08084, 0.1454, 0.2274, 0.3166, 0.4308,
    0.08232, 0.1448, 0.2462, 0.3755, 0.4985, 0.5387,
    0.1446, 0.2438, 0.3652, 0.496, 0.6021, 0.6797,
    0.2317, 0.3594, 0.5253, 0.651, 0.7308, 0.7933,
    0.3591, 0.509, 0.6332, 0.7334, 0.7874, 0.8159,
    0.4111, 0.5496, 0.6463, 0.7136, 0.7787, 0.7671,
    0.07787, 0.1502, 0.2355, 0.351, 0.4708, 0.519,
    0.1442, 0.2501, 0.3613, 0.5043, 0.6168, 0.6919,
    0.2303, 0.3701, 0.5136, 0.6431, 0.7165, 0.7856,
    0.3639, 0.5006, 0.6293, 0.7253, 0.7809, 0.8207,
    0.445, 0.583, 0.6926, 0.7596, 0.7349, 0.7781,
    0.4918, 0.5778, 0.6499, 0.7121, 0.7423, 0.7524,
    0.1396, 0.2372, 0.357, 0.4694, 0.5623, 0.6319,
    0.2325, 0.3542, 0.4735, 0.5937, 0.6728, 0.7707,
    0.343, 0.486, 0.6156, 0.7194, 0.7836, 0.8216,
    0.4276, 0.5632, 0.6751, 0.7264, 0.7751, 0.7822,
    0.4666, 0.5734, 0.622, 0.6768, 0.7307, 0.7469,
    0.4972, 0.5694, 0.661, 0.7017, 0.69, 0.6935,
    0.2095, 0.3162, 0.4231, 0.5517, 0.6123, 0.6477,
    0.3368, 0.4696, 0.5839, 0.666, 0.72, 0.794,
    0.4258, 0.5617, 0.6683, 0.6756, 0.7438, 0.7174,
    0.4611, 0.5633, 0.6345, 0.6877, 0.7301, 0.7307,
    0.5013, 0.5779, 0.6285, 0.6988, 0.696, 0.6664,
    0.4873, 0.5786, 0.6697, 0.6985, 0.6888, 0.6985,
    0.297, 0.4169, 0.5148, 0.5796, 0.6235, 0.7454,
    0.4155, 0.5496, 0.6492, 0.74, 0.7861, 0.7765,
    0.4736, 0.5831, 0.6574, 0.6736, 0.7262, 0.7305,
    0.4829, 0.5578, 0.6288, 0.6727, 0.705, 0.6859,
    0.4886, 0.5735, 0.6684, 0.7045, 0.6936, 0.6769,
    0.493, 0.6039, 0.6399, 0.6892, 0.6827, 0.7106,
};

/* The measured grid of both sweeps (profiler/sweep.c). */
#define SWEEP_GRID                                                                               \
    .nm = 7, .nn = 6, .nk = 6, .gm = {256, 512, 1024, 2048, 4096, 8192, 16384},                  \
    .gn = {512, 1024, 2048, 4096, 8192, 16384}, .gk = {512, 1024, 2048, 4096, 8192, 16384}
#define GIB 1073741824.0
/* Achievable copy bandwidth of the GPUs we did not measure: the vendor's HBM peak times the
 * fraction the H100 reached (3032.3 of 3350 GB/s: planfarm calibrate on h100-sweep.json). */
#define HBM_FRACTION (3032.3 / 3350.0)
#define H100_LAUNCH_US 7.72
#define H100_BF16_TFLOPS 989.4

/* NCCL's peak all-reduce bus bandwidth with NVLS on 8 H100 (NVLink 4, NVSwitch gen 3), as
 * NCCL's maintainers give it ([NVLS]): ~480 GB/s, where the ring reaches ~370 (the dgx-h100
 * cluster's host links). The H200 has the same NVLink and NVSwitch. */
#define H100_NVLS_BUSBW_GBPS 480.0

/* Vendor dense peaks (TFLOP/s: bf16, fp16, fp32, tf32, fp8), HBM, memory and NVLink: the
 * datasheets docs/DEVICES.md cites. The GEMM table of the GPUs without a sweep is the H100's
 * (efficiency is a fraction of each GPU's own peak; DEVICES.md says what that assumes). */
static const pf_devmodel_t presets[] = {
    {.spec = {"v100", {0, 125, 15.7, 0, 0}, {1, 1, 1, 1, 1}, 900 * HBM_FRACTION, H100_LAUNCH_US,
              32 * GIB, 0.5, 0.38, 150, 0, 8, 0, H100_BF16_TFLOPS, 0, 0},
     SWEEP_GRID, .eff = h100_eff},
    {.spec = {"a100-40g", {312, 312, 19.5, 156, 0}, {1, 1, 1, 1, 1}, 1555 * HBM_FRACTION,
              H100_LAUNCH_US, 40 * GIB, 0.5, 0.38, 300, 0, 8, 0, H100_BF16_TFLOPS, 0, 0},
     SWEEP_GRID, .eff = h100_eff},
    {.spec = {"a100-80g", {312, 312, 19.5, 156, 0}, {1, 1, 1, 1, 1}, 2039 * HBM_FRACTION,
              H100_LAUNCH_US, 80 * GIB, 0.5, 0.38, 300, 0, 8, 0, H100_BF16_TFLOPS, 0, 0},
     SWEEP_GRID, .eff = h100_eff},
    {.spec = {"h100-sxm", {989.4, 989.4, 66.9, 494.7, 1978.9}, {1, 0.9582, 1.124, 1, 1}, 3032.3,
              H100_LAUNCH_US, 85017493504.0, 0.5, 0.38, 450, 1, 8, H100_NVLS_BUSBW_GBPS, 0, 0, 0},
     SWEEP_GRID, .eff = h100_eff},
    {.spec = {"h200", {989.4, 989.4, 66.9, 494.7, 1978.9}, {1, 1.097, 1.092, 1, 1}, 4302.6,
              7.46, 150109880320.0, 0.5, 0.38, 450, 1, 8, H100_NVLS_BUSBW_GBPS, 0, 0, 0},
     SWEEP_GRID, .eff = h200_eff},
    {.spec = {"b200", {2250, 2250, 75, 1125, 4500}, {1, 1, 1, 1, 1}, 8000 * HBM_FRACTION,
              H100_LAUNCH_US, 180e9, 0.5, 0.38, 900, 1, 8, 0, H100_BF16_TFLOPS, 0, 0},
     SWEEP_GRID, .eff = h100_eff},
};
#define NPRESETS ((int)(sizeof presets / sizeof presets[0]))

double pf_devmodel_nvls_busbw_gbps(const pf_devmodel_t *dm)
{
    const pf_devmodel_spec_t *s = &dm->spec;
    if (!s->nvls)
        return 0;
    return s->nvls_busbw_gbps > 0 ? s->nvls_busbw_gbps : s->nvlink_gbps;
}

const pf_devmodel_t *pf_devmodel_preset(const char *name)
{
    for (int i = 0; name && i < NPRESETS; i++)
        if (!strcmp(presets[i].spec.name, name))
            return &presets[i];
    return NULL;
}

int pf_devmodel_count(void)
{
    return NPRESETS;
}

const pf_devmodel_t *pf_devmodel_at(int i)
{
    return i >= 0 && i < NPRESETS ? &presets[i] : NULL;
}

const char *pf_devmodel_names(char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < NPRESETS && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", presets[i].spec.name);
    return buf;
}

static int is_preset(const pf_devmodel_t *dm)
{
    return dm >= presets && dm < presets + NPRESETS;
}

/* ---- making and owning ---- */

/* The file's keys and the CLI's words for pf_prec_t, in its order. */
static const char *const prec_names[PF_PREC_COUNT] = {"bf16", "fp16", "fp32", "tf32", "fp8"};

static int check_grid(const char *what, int n, const double *g, char *err, size_t errlen)
{
    if (n < 1 || n > PF_DEVMODEL_GRID_MAX)
        return pf_fail(err, errlen, PF_EINPUT, "gemm.%s: %d points, expected 1 .. %d", what, n,
                       PF_DEVMODEL_GRID_MAX);
    for (int i = 0; i < n; i++) {
        if (!(g[i] >= 1 && g[i] <= 1e9))
            return pf_fail(err, errlen, PF_EINPUT, "gemm.%s[%d]: %g is not in 1 .. 1e9", what, i,
                           g[i]);
        if (i && !(g[i] > g[i - 1]))
            return pf_fail(err, errlen, PF_EINPUT, "gemm.%s[%d]: %g is not above %g", what, i,
                           g[i], g[i - 1]);
    }
    return PF_OK;
}

static int check_spec(const pf_devmodel_spec_t *s, char *err, size_t errlen)
{
    int rc;
    for (int p = 0; p < PF_PREC_COUNT; p++) {
        char where[64];
        snprintf(where, sizeof where, "peak_tflops.%s", prec_names[p]);
        if ((rc = pf_check_range(s->peak_tflops[p], PF_MAX_TFLOPS, "TFLOP/s", where, err,
                                 errlen)))
            return rc;
        snprintf(where, sizeof where, "precision_scale.%s", prec_names[p]);
        if (!(s->prec_scale[p] > 0 && s->prec_scale[p] <= 10))
            return pf_fail(err, errlen, PF_EINPUT, "%s: %g is not in (0, 10]", where,
                           s->prec_scale[p]);
    }
    if (!(s->peak_tflops[PF_PREC_BF16] > 0 || s->peak_tflops[PF_PREC_FP16] > 0))
        return pf_fail(err, errlen, PF_EINPUT, "peak_tflops: neither bf16 nor fp16 is above 0");
    if (!(s->hbm_gbps > 0 && s->hbm_gbps <= PF_MAX_GBPS))
        return pf_fail(err, errlen, PF_EINPUT, "hbm_gbps: %g is not in (0, %g]", s->hbm_gbps,
                       PF_MAX_GBPS);
    if (!(s->mem_bytes > 0 && s->mem_bytes <= PF_MAX_BYTES))
        return pf_fail(err, errlen, PF_EINPUT, "memory_bytes: %g is not in (0, %g]",
                       s->mem_bytes, PF_MAX_BYTES);
    if (!(s->fused_eff_fwd > 0 && s->fused_eff_fwd <= 1 && s->fused_eff_bwd > 0 &&
          s->fused_eff_bwd <= 1))
        return pf_fail(err, errlen, PF_EINPUT, "fused_efficiency: %g, %g: each must be in (0, 1]",
                       s->fused_eff_fwd, s->fused_eff_bwd);
    if ((rc = pf_check_range(s->launch_us, PF_MAX_US, "us", "launch_us", err, errlen)) ||
        (rc = pf_check_range(s->nvlink_gbps, PF_MAX_GBPS, "GB/s", "nvlink_gbps", err, errlen)) ||
        (rc = pf_check_range(s->nvls_busbw_gbps, PF_MAX_GBPS, "GB/s", "nvls_busbw_gbps", err,
                             errlen)) ||
        (rc = pf_check_range(s->table_peak_tflops, 1e6, "TFLOP/s", "gemm.peak_tflops", err,
                             errlen)) ||
        (rc = pf_check_range(s->op_overhead_us_fwd, PF_MAX_US, "us", "op_overhead_us.fwd", err,
                             errlen)) ||
        (rc = pf_check_range(s->op_overhead_us_bwd, PF_MAX_US, "us", "op_overhead_us.bwd", err,
                             errlen)))
        return rc;
    if (s->gpus_per_host < 1 || s->gpus_per_host > 1 << 16)
        return pf_fail(err, errlen, PF_EINPUT, "gpus_per_host: %d is not in 1 .. 65536",
                       s->gpus_per_host);
    return PF_OK;
}

pf_devmodel_t *pf_devmodel_new(const pf_devmodel_spec_t *spec, int nm, const double *grid_m,
                               int nn, const double *grid_n, int nk, const double *grid_k,
                               const double *eff, char *err, size_t errlen)
{
    if (check_spec(spec, err, errlen) || check_grid("m", nm, grid_m, err, errlen) ||
        check_grid("n", nn, grid_n, err, errlen) || check_grid("k", nk, grid_k, err, errlen))
        return NULL;
    size_t cells = (size_t)nm * nn * nk;
    for (size_t i = 0; i < cells; i++)
        if (!(eff[i] > 0 && eff[i] <= 1)) {
            pf_fail(err, errlen, PF_EINPUT, "gemm.efficiency[%zu]: %g is not in (0, 1]", i,
                    eff[i]);
            return NULL;
        }
    pf_devmodel_t *dm = calloc(1, sizeof *dm);
    double *own = malloc(cells * sizeof *own);
    if (!dm || !own) {
        free(dm);
        free(own);
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    dm->spec = *spec;
    dm->nm = nm, dm->nn = nn, dm->nk = nk;
    memcpy(dm->gm, grid_m, (size_t)nm * sizeof *grid_m);
    memcpy(dm->gn, grid_n, (size_t)nn * sizeof *grid_n);
    memcpy(dm->gk, grid_k, (size_t)nk * sizeof *grid_k);
    memcpy(own, eff, cells * sizeof *own);
    dm->eff = dm->owned = own;
    return dm;
}

pf_devmodel_t *pf_devmodel_copy(const pf_devmodel_t *dm)
{
    return pf_devmodel_new(&dm->spec, dm->nm, dm->gm, dm->nn, dm->gn, dm->nk, dm->gk, dm->eff,
                           NULL, 0);
}

void pf_devmodel_destroy(pf_devmodel_t **dm)
{
    if (!dm || !*dm)
        return;
    if (!is_preset(*dm)) {
        free((*dm)->owned);
        free(*dm);
    }
    *dm = NULL;
}

const pf_devmodel_spec_t *pf_devmodel_spec(const pf_devmodel_t *dm)
{
    return &dm->spec;
}

void pf_devmodel_set_spec(pf_devmodel_t *dm, const pf_devmodel_spec_t *spec)
{
    if (!is_preset(dm))
        dm->spec = *spec;
}

void pf_devmodel_table(const pf_devmodel_t *dm, int *nm, const double **grid_m, int *nn,
                       const double **grid_n, int *nk, const double **grid_k,
                       const double **eff)
{
    *nm = dm->nm, *nn = dm->nn, *nk = dm->nk;
    *grid_m = dm->gm, *grid_n = dm->gn, *grid_k = dm->gk;
    *eff = dm->eff;
}

/* ---- pricing ---- */

int pf_devmodel_prec_parse(const char *s)
{
    for (int p = 0; s && p < PF_PREC_COUNT; p++)
        if (!strcmp(s, prec_names[p]))
            return p;
    return -1;
}

const char *pf_devmodel_prec_name(pf_prec_t p)
{
    return p >= 0 && p < PF_PREC_COUNT ? prec_names[p] : "?";
}

/* Which precision's unit runs p: itself, else bf16 <-> fp16, tf32 and fp8 -> bf16. */
static pf_prec_t unit(const pf_devmodel_t *dm, pf_prec_t p)
{
    if (dm->spec.peak_tflops[p] > 0)
        return p;
    if (p == PF_PREC_BF16)
        return PF_PREC_FP16;
    if (p == PF_PREC_FP16 || p == PF_PREC_TF32 || p == PF_PREC_FP8)
        return dm->spec.peak_tflops[PF_PREC_BF16] > 0 ? PF_PREC_BF16 : PF_PREC_FP16;
    return p;
}

double pf_devmodel_peak_tflops(const pf_devmodel_t *dm, pf_prec_t p)
{
    return dm->spec.peak_tflops[unit(dm, p)];
}

/* Where x falls on grid g (log2 space): lower index *i and weight *w of the upper point;
 * clamped at both ends. */
static void locate(const double *g, int n, double x, int *i, double *w)
{
    *i = 0, *w = 0;
    if (n == 1 || !(x > g[0]))
        return;
    if (x >= g[n - 1]) {
        *i = n - 2, *w = 1;
        return;
    }
    int j = 0;
    while (x >= g[j + 1])
        j++;
    *i = j;
    *w = (log2(x) - log2(g[j])) / (log2(g[j + 1]) - log2(g[j]));
}

double pf_devmodel_gemm_eff(const pf_devmodel_t *dm, double m, double n, double k)
{
    int i[3];
    double w[3], e = 0;
    locate(dm->gm, dm->nm, m, &i[0], &w[0]);
    locate(dm->gn, dm->nn, n, &i[1], &w[1]);
    locate(dm->gk, dm->nk, k, &i[2], &w[2]);
    for (int c = 0; c < 8; c++) {
        int a = i[0] + (c & 1), b = i[1] + (c >> 1 & 1), d = i[2] + (c >> 2 & 1);
        double wc = (c & 1 ? w[0] : 1 - w[0]) * (c >> 1 & 1 ? w[1] : 1 - w[1]) *
                    (c >> 2 & 1 ? w[2] : 1 - w[2]);
        if (wc > 0)
            e += wc * dm->eff[((size_t)a * dm->nn + b) * dm->nk + d];
    }
    return e;
}

/* A table measured on another GPU (table_peak_tflops): a GEMM's time there is a fixed cost
 * (launch_us) and a part that runs at the tensor cores' rate. Only the second scales with the
 * peak, so a slower GPU loses a smaller share of a small GEMM to the fixed cost and a faster one a
 * larger share. ms is the table's efficiency applied to this GPU's peak. */
static double borrowed_ms(const pf_devmodel_t *dm, double ms)
{
    const pf_devmodel_spec_t *s = &dm->spec;
    double own = s->peak_tflops[unit(dm, PF_PREC_FP16)];
    if (!(s->table_peak_tflops > 0) || s->table_peak_tflops == own)
        return ms;
    double ratio = s->table_peak_tflops / own, fixed_ms = s->launch_us / 1000;
    double there_ms = ms / ratio;
    return fixed_ms + fmax(there_ms - fixed_ms, 0) * ratio;
}

double pf_devmodel_gemm_ms(const pf_devmodel_t *dm, pf_prec_t p, double m, double n, double k,
                           double batch)
{
    if (!(m > 0 && n > 0 && k > 0))
        return 0;
    if (!(batch >= 1))
        batch = 1;
    pf_prec_t u = unit(dm, p);
    double eff = pf_devmodel_gemm_eff(dm, m * batch, n, k) * dm->spec.prec_scale[u];
    double ms = 2 * m * n * k * batch / (dm->spec.peak_tflops[u] * 1e12 * fmin(eff, 1)) * 1e3;
    return borrowed_ms(dm, ms);
}

double pf_devmodel_memory_ms(const pf_devmodel_t *dm, double bytes)
{
    return dm->spec.launch_us / 1000 + pf_bytes_ms(bytes, dm->spec.hbm_gbps);
}

/* The roofline of a fused or memory-bound kernel; 0 when it does nothing. */
static double roofline_ms(const pf_devmodel_t *dm, pf_prec_t p, double flops, double eff,
                          double bytes)
{
    if (!(flops > 0) && !(bytes > 0))
        return 0;
    double c = flops > 0 ? flops / (pf_devmodel_peak_tflops(dm, p) * 1e12 * eff) * 1e3 : 0;
    return fmax(c, pf_bytes_ms(bytes, dm->spec.hbm_gbps)) + dm->spec.launch_us / 1000;
}

int pf_devmodel_op_ms(const pf_devmodel_t *dm, pf_prec_t p, const pf_op_work_t *w,
                      double *fwd_ms, double *bwd_ms)
{
    if (w->gemm_m > 0 && w->gemm_n > 0 && w->gemm_k > 0) {
        double m = (double)w->gemm_m, n = (double)w->gemm_n, k = (double)w->gemm_k;
        double b = w->gemm_batch > 0 ? (double)w->gemm_batch : 1;
        *fwd_ms = pf_devmodel_gemm_ms(dm, p, m, n, k, b) + dm->spec.op_overhead_us_fwd / 1000;
        *bwd_ms = pf_devmodel_gemm_ms(dm, p, m, k, n, b) + pf_devmodel_gemm_ms(dm, p, k, n, m, b) +
                  dm->spec.op_overhead_us_bwd / 1000;
        return 1;
    }
    double rd = fmax(w->bytes_read, 0), wr = fmax(w->bytes_written, 0);
    if (!(w->fwd_flops > 0) && !(w->bwd_flops > 0) && !(rd + wr > 0))
        return 0;
    *fwd_ms = roofline_ms(dm, p, w->fwd_flops, dm->spec.fused_eff_fwd, rd + wr) +
              dm->spec.op_overhead_us_fwd / 1000;
    *bwd_ms = roofline_ms(dm, p, w->bwd_flops, dm->spec.fused_eff_bwd, 2 * rd + wr) +
              dm->spec.op_overhead_us_bwd / 1000;
    return 1;
}

/* ---- files ---- */

#define FORMAT "planfarm-device-model"

/* An object of per-precision numbers ("peak_tflops": {"bf16": 989.4, ...}); absent keys dflt. */
static int read_precs(json_t *root, const char *key, double dflt, double *out, char *err,
                      size_t errlen)
{
    json_t *o = json_object_get(root, key);
    char path[64];
    snprintf(path, sizeof path, "device.%s", key);
    if (o && !json_is_object(o))
        return pf_fail(err, errlen, PF_EINPUT, "%s: not an object", path);
    for (int p = 0; p < PF_PREC_COUNT; p++) {
        int rc = pf_json_get_number(o, path, prec_names[p], PF_JSON_GET_NONNEG, dflt, &out[p],
                                    err, errlen);
        if (rc)
            return rc;
    }
    return PF_OK;
}

/* gemm.<key>: an array of at most cap numbers into out, its length into *n. */
static int read_numbers(json_t *gemm, const char *key, int cap, double *out, int *n, char *err,
                        size_t errlen)
{
    json_t *a;
    int rc = pf_json_get_array(gemm, "device.gemm", key, PF_JSON_GET_REQUIRED, &a, err, errlen);
    if (rc)
        return rc;
    if ((int)json_array_size(a) > cap || json_array_size(a) == 0)
        return pf_fail(err, errlen, PF_EINPUT, "device.gemm.%s: %zu values, expected 1 .. %d",
                       key, json_array_size(a), cap);
    *n = (int)json_array_size(a);
    for (int i = 0; i < *n; i++) {
        json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_number(v) || !isfinite(json_number_value(v)))
            return pf_fail(err, errlen, PF_EINPUT, "device.gemm.%s[%d]: not a finite number", key,
                           i);
        out[i] = json_number_value(v);
    }
    return PF_OK;
}

static int read_spec(json_t *root, pf_devmodel_spec_t *s, char *err, size_t errlen)
{
    const char *fmt, *name;
    int64_t ver, gph;
    json_t *fe = json_object_get(root, "fused_efficiency"), *nvls = json_object_get(root, "nvls");
    int rc;
    if ((rc = pf_json_get_string(root, "device", "format", PF_JSON_GET_REQUIRED, NULL, &fmt, err,
                                 errlen)))
        return rc;
    if (strcmp(fmt, FORMAT))
        return pf_fail(err, errlen, PF_EINPUT, "device.format: '%s' is not " FORMAT, fmt);
    if ((rc = pf_json_get_int(root, "device", "version", PF_JSON_GET_REQUIRED, 1, &ver, err,
                              errlen)))
        return rc;
    if (ver != 1)
        return pf_fail(err, errlen, PF_EINPUT, "device.version: %lld, this planfarm reads 1",
                       (long long)ver);
    if ((rc = pf_json_get_string(root, "device", "name", PF_JSON_GET_REQUIRED, NULL, &name, err,
                                 errlen)) ||
        (rc = pf_check_name(name, "device.name", err, errlen)))
        return rc;
    if (strlen(name) >= sizeof s->name)
        return pf_fail(err, errlen, PF_EINPUT, "device.name: longer than %zu bytes",
                       sizeof s->name - 1);
    snprintf(s->name, sizeof s->name, "%s", name);
    if ((rc = read_precs(root, "peak_tflops", 0, s->peak_tflops, err, errlen)) ||
        (rc = read_precs(root, "precision_scale", 1, s->prec_scale, err, errlen)) ||
        (rc = pf_json_get_number(root, "device", "hbm_gbps", PF_JSON_GET_REQUIRED, 0,
                                 &s->hbm_gbps, err, errlen)) ||
        (rc = pf_json_get_number(root, "device", "launch_us", 0, 0, &s->launch_us, err,
                                 errlen)) ||
        (rc = pf_json_get_number(root, "device", "memory_bytes", PF_JSON_GET_REQUIRED, 0,
                                 &s->mem_bytes, err, errlen)) ||
        (rc = pf_json_get_number(root, "device", "nvlink_gbps", 0, 0, &s->nvlink_gbps, err,
                                 errlen)) ||
        (rc = pf_json_get_int(root, "device", "gpus_per_host", 0, 8, &gph, err, errlen)) ||
        (rc = pf_json_get_number(fe, "device.fused_efficiency", "fwd", PF_JSON_GET_REQUIRED, 0,
                                 &s->fused_eff_fwd, err, errlen)) ||
        (rc = pf_json_get_number(fe, "device.fused_efficiency", "bwd", PF_JSON_GET_REQUIRED, 0,
                                 &s->fused_eff_bwd, err, errlen)))
        return rc;
    if (nvls && !json_is_boolean(nvls))
        return pf_fail(err, errlen, PF_EINPUT, "device.nvls: not true or false");
    s->nvls = json_is_true(nvls);
    json_t *oo = json_object_get(root, "op_overhead_us");
    if (oo && !json_is_object(oo))
        return pf_fail(err, errlen, PF_EINPUT, "device.op_overhead_us: not an object");
    if ((rc = pf_json_get_number(oo, "device.op_overhead_us", "fwd", 0, 0,
                                 &s->op_overhead_us_fwd, err, errlen)) ||
        (rc = pf_json_get_number(oo, "device.op_overhead_us", "bwd", 0, 0,
                                 &s->op_overhead_us_bwd, err, errlen)))
        return rc;
    if ((rc = pf_json_get_number(root, "device", "nvls_busbw_gbps", 0, 0, &s->nvls_busbw_gbps,
                                 err, errlen)))
        return rc;
    s->gpus_per_host = gph < 1 || gph > 1 << 16 ? 0 : (int)gph;
    return PF_OK;
}

static int convert_model(json_t *root, void *ctx, char *err, size_t errlen)
{
    pf_devmodel_spec_t s;
    memset(&s, 0, sizeof s);
    double gm[PF_DEVMODEL_GRID_MAX], gn[PF_DEVMODEL_GRID_MAX], gk[PF_DEVMODEL_GRID_MAX];
    double *eff = NULL;
    int nm, nn, nk, ne, rc;
    json_t *gemm = json_object_get(root, "gemm");
    if ((rc = read_spec(root, &s, err, errlen)))
        return rc;
    if (!json_is_object(gemm))
        return pf_fail(err, errlen, PF_EINPUT, "device.gemm: %s",
                       gemm ? "not an object" : "missing");
    if ((rc = read_numbers(gemm, "m", PF_DEVMODEL_GRID_MAX, gm, &nm, err, errlen)) ||
        (rc = read_numbers(gemm, "n", PF_DEVMODEL_GRID_MAX, gn, &nn, err, errlen)) ||
        (rc = read_numbers(gemm, "k", PF_DEVMODEL_GRID_MAX, gk, &nk, err, errlen)) ||
        (rc = pf_json_get_number(gemm, "device.gemm", "peak_tflops", 0, 0, &s.table_peak_tflops,
                                 err, errlen)))
        return rc;
    int cells = nm * nn * nk;
    if (!(eff = malloc((size_t)cells * sizeof *eff)))
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    if ((rc = read_numbers(gemm, "efficiency", cells, eff, &ne, err, errlen)))
        goto fail;
    if (ne != cells) {
        rc = pf_fail(err, errlen, PF_EINPUT,
                     "device.gemm.efficiency: %d values, expected %d (m %d x n %d x k %d)", ne,
                     cells, nm, nn, nk);
        goto fail;
    }
    char why[512];
    pf_devmodel_t *dm = pf_devmodel_new(&s, nm, gm, nn, gn, nk, gk, eff, why, sizeof why);
    if (!dm) {
        rc = pf_fail(err, errlen, PF_EINPUT, "device.%s", why);
        goto fail;
    }
    *(pf_devmodel_t **)ctx = dm;
fail:
    free(eff);
    return rc;
}

int pf_devmodel_load(const char *path, pf_devmodel_t **out, char *err, size_t errlen)
{
    *out = NULL;
    return pf_json_read_file(path, convert_model, out, err, errlen);
}

int pf_devmodel_load_buffer(const char *text, size_t len, const char *label,
                            pf_devmodel_t **out, char *err, size_t errlen)
{
    *out = NULL;
    return pf_json_read_buffer(text, len, label, convert_model, out, err, errlen);
}

int pf_devmodel_resolve(const char *name_or_path, pf_devmodel_t **out, char *err,
                        size_t errlen)
{
    char names[256];
    const pf_devmodel_t *p = pf_devmodel_preset(name_or_path);
    *out = NULL;
    if (p) {
        *out = pf_devmodel_copy(p);
        return *out ? PF_OK : pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    FILE *f = fopen(name_or_path, "r");
    if (!f)
        return pf_fail(err, errlen, PF_EINPUT,
                       "'%s' is neither a device preset (%s) nor a readable file", name_or_path,
                       pf_devmodel_names(names, sizeof names));
    fclose(f);
    return pf_devmodel_load(name_or_path, out, err, errlen);
}

static void emit_precs(pf_json_writer_t *w, const char *key, const double *v)
{
    pf_json_writer_key(w, key);
    pf_json_writer_obj_begin_inline(w);
    for (int p = 0; p < PF_PREC_COUNT; p++) {
        pf_json_writer_key(w, prec_names[p]);
        pf_json_writer_num(w, v[p]);
    }
    pf_json_writer_obj_end(w);
}

static void emit_numbers(pf_json_writer_t *w, const char *key, const double *v, int n)
{
    pf_json_writer_key(w, key);
    pf_json_writer_arr_begin_inline(w);
    for (int i = 0; i < n; i++)
        pf_json_writer_num(w, v[i]);
    pf_json_writer_arr_end(w);
}

/* "key": {"fwd": fwd, "bwd": bwd} */
static void emit_fwd_bwd(pf_json_writer_t *w, const char *key, double fwd, double bwd)
{
    pf_json_writer_key(w, key);
    pf_json_writer_obj_begin_inline(w);
    pf_json_writer_key(w, "fwd");
    pf_json_writer_num(w, fwd);
    pf_json_writer_key(w, "bwd");
    pf_json_writer_num(w, bwd);
    pf_json_writer_obj_end(w);
}

static void emit_model(pf_json_writer_t *w, const void *ctx)
{
    const pf_devmodel_t *dm = ctx;
    const pf_devmodel_spec_t *s = &dm->spec;
    pf_json_writer_obj_begin(w);
    pf_json_writer_key(w, "format");
    pf_json_writer_str(w, FORMAT);
    pf_json_writer_key(w, "version");
    pf_json_writer_int(w, 1);
    pf_json_writer_key(w, "name");
    pf_json_writer_str(w, s->name);
    emit_precs(w, "peak_tflops", s->peak_tflops);
    emit_precs(w, "precision_scale", s->prec_scale);
    const char *keys[] = {"hbm_gbps", "launch_us", "memory_bytes", "nvlink_gbps"};
    const double vals[] = {s->hbm_gbps, s->launch_us, s->mem_bytes, s->nvlink_gbps};
    for (int i = 0; i < 4; i++) {
        pf_json_writer_key(w, keys[i]);
        pf_json_writer_num(w, vals[i]);
    }
    pf_json_writer_key(w, "nvls");
    pf_json_writer_bool(w, s->nvls);
    if (s->nvls && s->nvls_busbw_gbps > 0) {
        pf_json_writer_key(w, "nvls_busbw_gbps");
        pf_json_writer_num(w, s->nvls_busbw_gbps);
    }
    pf_json_writer_key(w, "gpus_per_host");
    pf_json_writer_int(w, s->gpus_per_host);
    emit_fwd_bwd(w, "fused_efficiency", s->fused_eff_fwd, s->fused_eff_bwd);
    if (s->op_overhead_us_fwd > 0 || s->op_overhead_us_bwd > 0)
        emit_fwd_bwd(w, "op_overhead_us", s->op_overhead_us_fwd, s->op_overhead_us_bwd);
    pf_json_writer_key(w, "gemm");
    pf_json_writer_obj_begin(w);
    emit_numbers(w, "m", dm->gm, dm->nm);
    emit_numbers(w, "n", dm->gn, dm->nn);
    emit_numbers(w, "k", dm->gk, dm->nk);
    emit_numbers(w, "efficiency", dm->eff, dm->nm * dm->nn * dm->nk);
    if (s->table_peak_tflops > 0) {
        pf_json_writer_key(w, "peak_tflops");
        pf_json_writer_num(w, s->table_peak_tflops);
    }
    pf_json_writer_obj_end(w);
    pf_json_writer_obj_end(w);
}

int pf_devmodel_save(const pf_devmodel_t *dm, const char *path, char *err, size_t errlen)
{
    return pf_json_save(path, emit_model, dm, err, errlen);
}

void pf_devmodel_write(const pf_devmodel_t *dm, pf_json_writer_t *w) { emit_model(w, dm); }

int pf_devmodel_from_json(json_t *obj, const char *label, pf_devmodel_t **out, char *err,
                          size_t errlen)
{
    *out = NULL;
    return pf_json_convert(obj, label, convert_model, out, err, errlen);
}

char *pf_devmodel_to_text(const pf_devmodel_t *dm)
{
    char *text = NULL;
    size_t len = 0;
    char err[64];
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    int rc = pf_json_write(f, emit_model, dm, err, sizeof err);
    if (fclose(f) != 0 || rc != PF_OK) {
        free(text);
        return NULL;
    }
    return text;
}

/* Equal figures are equal texts: the writer prints every number to the digits that read back
 * the same double. */
const pf_devmodel_t *pf_devmodel_as_preset(const pf_devmodel_t *dm)
{
    const pf_devmodel_t *p = pf_devmodel_preset(dm->spec.name);
    if (!p || p == dm)
        return p;
    char *a = pf_devmodel_to_text(dm), *b = pf_devmodel_to_text(p);
    bool same = a && b && !strcmp(a, b);
    free(a);
    free(b);
    return same ? p : NULL;
}
