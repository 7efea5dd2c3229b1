/* devmodel: what one GPU kind does with an op's work (DESIGN.md "Cost definitions", device
 * model; docs/DEVICES.md lists the presets and their sources).
 *
 * Per precision a dense peak; one GEMM efficiency table over a (m, n, k) grid, interpolated
 * linearly in (log2 m, log2 n, log2 k) and clamped at the grid's edges (a batch multiplies m);
 * a memory roofline launch_us + bytes / hbm_gbps; the efficiency of fused non-GEMM kernels
 * (flash attention) forward and backward; memory; the NVLink facts a collective model needs.
 * Presets are static and never destroyed; a model made by new/copy/load is the caller's. */
#ifndef PF_DEVMODEL_H
#define PF_DEVMODEL_H

#include "planner/core/json.h"
#include "planner/ir/op.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    PF_PREC_BF16 = 0,
    PF_PREC_FP16,
    PF_PREC_FP32,
    PF_PREC_TF32,
    PF_PREC_FP8,
    PF_PREC_COUNT
} pf_prec_t;

#define PF_DEVMODEL_GRID_MAX 16
#define PF_DEVMODEL_NAME_MAX 64

/* The scalars of a device model. */
typedef struct {
    char name[PF_DEVMODEL_NAME_MAX];
    double peak_tflops[PF_PREC_COUNT]; /* dense; 0 = the GPU has no such unit (bf16 falls back
                                        * to fp16, tf32 and fp8 to bf16) */
    double prec_scale[PF_PREC_COUNT];  /* multiplies the table's efficiency for that precision
                                        * (the table is fitted on bf16: its scale is 1) */
    double hbm_gbps;                   /* achievable copy bandwidth, read + write, GB/s */
    double launch_us;                  /* a kernel's fixed cost (the copy fit's intercept) */
    double mem_bytes;                  /* memory capacity */
    double fused_eff_fwd, fused_eff_bwd; /* fraction of peak a fused kernel (flash attention)
                                          * reaches forward / backward */
    double nvlink_gbps; /* intra-host bandwidth per GPU, one direction; 0 = PCIe only */
    int nvls;           /* NVSwitch with in-switch reduction (NVLink SHARP) */
    int gpus_per_host;
    double nvls_busbw_gbps; /* NVLS all-reduce bus bandwidth inside a host; 0 with nvls: the
                             * line rate nvlink_gbps (unmeasured) */
    double table_peak_tflops; /* the bf16 peak of the GPU the GEMM table was measured on, when
                               * that is another GPU; 0 = this one (pf_devmodel_gemm_ms) */
    double op_overhead_us_fwd, op_overhead_us_bwd; /* a framework's fixed cost per op and
                               * direction (eager dispatch, autograd) added to each priced op; 0 in
                               * the presets, fitted by planfarm calibrate --layers */
} pf_devmodel_spec_t;

typedef struct pf_devmodel pf_devmodel_t;

/* A model with spec's scalars and a GEMM table of nm x nn x nk efficiencies, eff[(im * nn +
 * in) * nk + ik], grids strictly increasing and positive; NULL when out of memory or invalid
 * (the reason in err). */
pf_devmodel_t *pf_devmodel_new(const pf_devmodel_spec_t *spec, int nm, const double *grid_m,
                               int nn, const double *grid_n, int nk, const double *grid_k,
                               const double *eff, char *err, size_t errlen);
pf_devmodel_t *pf_devmodel_copy(const pf_devmodel_t *dm);
/* Idempotent; a preset is left alone. */
void pf_devmodel_destroy(pf_devmodel_t **dm);

/* The preset of that name (v100, a100-40g, a100-80g, h100-sxm, h200, b200), or NULL. */
const pf_devmodel_t *pf_devmodel_preset(const char *name);
int pf_devmodel_count(void);
const pf_devmodel_t *pf_devmodel_at(int i);
/* "v100, a100-40g, ..." into buf (for messages). */
const char *pf_devmodel_names(char *buf, size_t len);
/* A preset's name or a model file's path; PF_OK with *out (a copy, the caller's) or PF_EINPUT
 * "'x' is neither a device preset (v100, ...) nor a readable file" / the file's error. */
int pf_devmodel_resolve(const char *name_or_path, pf_devmodel_t **out, char *err,
                        size_t errlen);

const pf_devmodel_spec_t *pf_devmodel_spec(const pf_devmodel_t *dm);
void pf_devmodel_set_spec(pf_devmodel_t *dm, const pf_devmodel_spec_t *spec);
/* The table: sizes and (borrowed) arrays. */
void pf_devmodel_table(const pf_devmodel_t *dm, int *nm, const double **grid_m, int *nn,
                       const double **grid_n, int *nk, const double **grid_k,
                       const double **eff);

/* The bus bandwidth a collective on one host reaches with NVLS ([NVLS]; collective.h), GB/s:
 * 0 when the GPU's hosts have no NVSwitch SHARP. */
double pf_devmodel_nvls_busbw_gbps(const pf_devmodel_t *dm);

/* "bf16" -> PF_PREC_BF16; -1 when unknown. */
int pf_devmodel_prec_parse(const char *s);
const char *pf_devmodel_prec_name(pf_prec_t p);

/* The peak used for precision p after the fallbacks above, TFLOP/s. */
double pf_devmodel_peak_tflops(const pf_devmodel_t *dm, pf_prec_t p);
/* The table's efficiency at (m, n, k), in (0, 1]. */
double pf_devmodel_gemm_eff(const pf_devmodel_t *dm, double m, double n, double k);
/* batch products of (m x k) @ (k x n): 2 m n k batch / (peak x scale x eff(m batch, n, k)). */
double pf_devmodel_gemm_ms(const pf_devmodel_t *dm, pf_prec_t p, double m, double n, double k,
                           double batch);
/* launch_us / 1000 + bytes / hbm_gbps (bytes moved, read + write). */
double pf_devmodel_memory_ms(const pf_devmodel_t *dm, double bytes);
/* An op's times from its work. A GEMM (gemm_m > 0): forward gemm(m, n, k), backward dX =
 * gemm(m, k, n) + dW = gemm(k, n, m), each with the batch. Otherwise the roofline
 * max(flops / (peak x fused_eff), bytes / hbm) + launch, forward with bytes_read +
 * bytes_written, backward with 2 bytes_read + bytes_written (it reads the inputs again and the
 * output's gradient, and writes the inputs' gradients); a side with neither flops nor bytes is
 * 0. Returns 1 when the op had work to price, 0 when not (times untouched). */
int pf_devmodel_op_ms(const pf_devmodel_t *dm, pf_prec_t p, const pf_op_work_t *w,
                      double *fwd_ms, double *bwd_ms);

/* Files (format "planfarm-device-model", version 1). load: PF_OK, PF_EINPUT "<file>: <json
 * path>: <problem>" or PF_ERR. path "-" or NULL = stdout for save. */
int pf_devmodel_load(const char *path, pf_devmodel_t **out, char *err, size_t errlen);
int pf_devmodel_load_buffer(const char *text, size_t len, const char *label,
                            pf_devmodel_t **out, char *err, size_t errlen);
int pf_devmodel_save(const pf_devmodel_t *dm, const char *path, char *err, size_t errlen);
/* The same as a value inside another file (a graph priced on a model that is no preset carries
 * it: graph.h): written into w; read from obj, errors prefixed with label ("graph.device"). */
void pf_devmodel_write(const pf_devmodel_t *dm, pf_json_writer_t *w);
int pf_devmodel_from_json(json_t *obj, const char *label, pf_devmodel_t **out, char *err,
                          size_t errlen);
/* The model as a file's text (malloc'd; NULL when out of memory). */
char *pf_devmodel_to_text(const pf_devmodel_t *dm);
/* The preset of dm's name with every figure and table cell equal, or NULL: a model that is only
 * a copy of a preset travels by its name. */
const pf_devmodel_t *pf_devmodel_as_preset(const pf_devmodel_t *dm);

#endif
