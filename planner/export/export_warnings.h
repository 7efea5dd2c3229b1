/* export_warnings: what a framework cannot run as the plan says (planfarm export prints these
 * lines after the files). Split from export.c, whose writers it follows, to keep that file
 * under 900 lines. */
#ifndef PF_EXPORT_WARNINGS_H
#define PF_EXPORT_WARNINGS_H

#include "planner/export/export.h"

/* One line (no prefix, no newline) per property of the plan that `kind` cannot express as
 * planned: DeepSpeed: selective recomputation, tensor parallelism > 1, sequence parallelism,
 * virtual stages (interleaving), uneven stages, a schedule other than 1F1B; Megatron-LM: ZeRO 2
 * or 3, a schedule other than 1F1B. Writes the first max lines, returns how many there are. */
#define PF_EXPORT_WARN_LEN 320
int pf_export_warnings(const pf_export_t *x, pf_export_kind_t kind,
                       char (*lines)[PF_EXPORT_WARN_LEN], int max);

#endif
