/* export_warnings: what a framework cannot run as planned (export_warnings.h). */
#include "planner/export/export_warnings.h"
#include "planner/ir/training.h"

#include <stdarg.h>
#include <stdio.h>

typedef struct {
    char (*lines)[PF_EXPORT_WARN_LEN];
    int n, max;
} warn_t;

static void warn(warn_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(warn_t *w, const char *fmt, ...)
{
    if (w->n < w->max) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->lines[w->n], PF_EXPORT_WARN_LEN, fmt, ap);
        va_end(ap);
    }
    w->n++;
}

static void warn_schedule(const pf_export_t *x, warn_t *w, const char *who)
{
    pf_training_schedule_t sc = pf_export_plan(x)->train.schedule;
    if (pf_export_plan(x)->stages < 2 || sc == PF_SCHEDULE_1F1B)
        return;
    warn(w, "schedule %s: %s runs 1F1B; %s", pf_training_schedule_name(sc), who,
         sc == PF_SCHEDULE_GPIPE ? "it holds fewer micro-batches than the plan counted"
         : sc == PF_SCHEDULE_EAGER_1F1B ? "it holds fewer micro-batches and overlaps less "
                                          "communication than the plan counted"
                                        : "the signal bound is no schedule to run, so the "
                                          "plan's step time is a lower bound");
}

static void warn_uneven(const pf_export_t *x, warn_t *w)
{
    int S = pf_export_plan(x)->stages, even = 1;
    char counts[128] = "";
    for (int s = 0, at = 0; s < S; s++) {
        even &= pf_export_stage_layers(x, s) == pf_export_stage_layers(x, 0);
        if (at < (int)sizeof counts)
            at += snprintf(counts + at, sizeof counts - (size_t)at, "%s%d", s ? "," : "",
                           pf_export_stage_layers(x, s));
    }
    if (!even)
        warn(w, "uneven stages (%s blocks): PipelineModule's partition methods (uniform, "
             "parameters, type:REGEX) balance the layers, so DeepSpeed splits the %d blocks "
             "its own way", counts, pf_export_layers(x));
}

/* DeepSpeed's config has neither: its sequence parallelism (Ulysses) is an all-to-all over
 * attention heads, not ring attention, and its MoE layers take ep_size as a constructor
 * argument. */
static void warn_cpep(const pf_export_t *x, warn_t *w)
{
    int C = pf_export_context_parallel(x), E = pf_export_expert_parallel(x);
    if (C > 1)
        warn(w, "context parallelism %d: DeepSpeed's config has no ring attention; the %d "
             "replicas are %d data-parallel groups of %d that must split each sequence (e.g. "
             "with Megatron-DeepSpeed's model code), else use `planfarm export megatron`",
             C, pf_export_plan(x)->replicas, pf_export_plan(x)->replicas / C, C);
    if (E > 1)
        warn(w, "expert parallelism %d: not a config key; pass ep_size=%d to each "
             "deepspeed.moe.layer.MoE, else the experts stay whole on every GPU", E, E);
}

/* A plan whose stages recompute differently (--recompute auto): neither framework has a flag
 * per stage. */
static void warn_stage_recompute(const pf_export_t *x, warn_t *w, const char *who,
                                 const char *as)
{
    const pf_plan_t *p = pf_export_plan(x);
    char runs[96];
    if (!pf_plan_recompute_mixed(p))
        return;
    pf_plan_recompute_describe(p, runs, sizeof runs);
    warn(w, "recomputation per stage (%s): %s has no per-stage setting; exported as %s, "
         "so the stages planned lighter recompute more than planned (more time, less memory)",
         runs, who, as);
}

static void warn_deepspeed(const pf_export_t *x, warn_t *w)
{
    const pf_plan_t *p = pf_export_plan(x);
    int T = p->tensor_parallel, v = pf_export_virtual_stages(x);
    warn_stage_recompute(x, w, "DeepSpeed", "activation_checkpoint_interval 1 on every stage");
    if (pf_plan_recompute_max(p) == PF_RECOMPUTE_SELECTIVE)
        warn(w, "selective recomputation: DeepSpeed checkpoints whole layers only; exported as "
             "full recomputation (activation_checkpoint_interval 1): less memory, more "
             "recomputed time than the plan counted");
    if (T > 1)
        warn(w, "tensor parallelism %d: DeepSpeed does not split layers itself; "
             "pipeline_module.py's topology has num_mp %d, so the layers must be tensor-"
             "parallel ones (Megatron-DeepSpeed's), else use `planfarm export megatron`", T, T);
    if (T > 1 && p->blocks.present && p->blocks.sequence_parallel)
        warn(w, "sequence parallelism: DeepSpeed's config has no key for it (the tensor-"
             "parallel layers must do it, as Megatron-LM's --sequence-parallel does); without "
             "it activations take more memory than the plan counted");
    if (v > 1)
        warn(w, "%d virtual stages: DeepSpeed's PipelineEngine has no interleaved 1F1B; it runs "
             "one chunk per stage, with a bubble %d x the plan's", v, v);
    warn_uneven(x, w);
    warn_cpep(x, w);
    warn_schedule(x, w, "DeepSpeed's PipelineEngine");
}

static void warn_megatron(const pf_export_t *x, warn_t *w)
{
    int zero = pf_export_plan(x)->train.zero;
    if (zero >= 2)
        warn(w, "ZeRO %d: Megatron-LM's distributed optimizer shards the optimizer state only "
             "(ZeRO 1; --use-distributed-optimizer), and ZeRO 2 and 3 have no Megatron-LM flag; "
             "GPUs hold more than the plan counted", zero);
    warn_stage_recompute(x, w, "Megatron-LM",
                         "one setting for all stages (see the flags' comment)");
    warn_schedule(x, w, "Megatron-LM");
}

int pf_export_warnings(const pf_export_t *x, pf_export_kind_t kind,
                       char (*lines)[PF_EXPORT_WARN_LEN], int max)
{
    warn_t w = {lines, 0, max};
    if (kind == PF_EXPORT_DEEPSPEED)
        warn_deepspeed(x, &w);
    else if (kind == PF_EXPORT_MEGATRON)
        warn_megatron(x, &w);
    return w.n;
}
