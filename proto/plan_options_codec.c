/* plan_options_codec: a request's PlanOptions message to and from the search's options. */
#include "proto/plan_options_codec.h"
#include "planner/core/util.h"
#include "proto/setting_codec.h"

#include <math.h>
#include <string.h>

Planfarm__PlanOptions *pf_plan_options_codec_to_pb(pf_arena_t *a, const pf_search_opts_t *o)
{
    Planfarm__PlanOptions *m = PF_ANEW(a, Planfarm__PlanOptions, 1);
    if (!m)
        return NULL;
    planfarm__plan_options__init(m);
    m->stages = (uint32_t)o->stages;
    m->replicas = (uint32_t)o->replicas;
    m->microbatches = (uint32_t)o->microbatches;
    m->coarsen_k = o->coarsen_k;
    m->max_downsets = o->max_downsets;
    m->no_refine = !o->refine;
    m->flat_gbps = o->flat_gbps;
    m->candidates = (uint32_t)o->candidates;
    m->probes_in_flight = (uint32_t)o->probes_in_flight;
    m->rel_eps = o->rel_eps;
    m->probe_seconds = o->probe_seconds;
    m->no_symmetry = !o->symmetry;
    m->instantiation = (char *)(o->auto_inst ? "auto" : pf_map_inst_name(o->inst));
    m->seed = o->seed;
    m->max_stages = (uint32_t)o->max_stages;
    m->tp = (uint32_t)o->tp;
    m->max_tp = (uint32_t)o->max_tp;
    m->tp_across_hosts = o->tp_across_hosts != 0;
    m->global_batch = (uint64_t)o->global_batch;
    m->layer_aligned = o->layer_aligned != 0;
    m->stage_degrees = o->stage_degrees != 0;
    m->block_search = o->block_search > 0;
    m->block_search_off = o->block_search == 0;
    m->block_candidates = (uint32_t)o->block_candidates;
    m->microbatch_size = (uint32_t)o->microbatch_size;
    m->sequence_parallel = (uint32_t)(o->sequence_parallel + 1); /* 0 on the wire: searched */
    m->virtual_stages = (uint32_t)o->virtual_stages;
    m->context_parallel = (uint32_t)o->context_parallel;
    m->expert_parallel = (uint32_t)o->expert_parallel;
    m->recompute_auto = o->recompute_auto != 0;
    m->zero_auto = o->zero_auto != 0;
    m->mem_headroom_set = 1;
    m->mem_headroom = o->mem_headroom;
    m->probe_timeouts_set = 1;
    m->probe_timeouts = (uint32_t)o->probe_timeouts;
    m->schedules = o->schedules;
    pf_tp_setting_opts_t so;
    pf_tp_setting_opts_init(&so);
    so.train = o->train;
    Planfarm__Setting *st = pf_setting_codec_to_pb(a, &so);
    if (!st)
        return NULL;
    m->train = st->train;
    return m;
}

/* The search's sizes and the probes' pacing; 0 on the wire keeps a default. */
static int search_from_pb(const Planfarm__PlanOptions *m, pf_search_opts_t *o, char *err,
                          size_t errlen)
{
    if (m->stages > PF_WIRE_MAX_DEVICES || m->replicas > PF_WIRE_MAX_DEVICES ||
        m->microbatches > (1u << 20) ||
        m->candidates > 64 || m->probes_in_flight > 64 || m->max_stages > PF_WIRE_MAX_DEVICES ||
        !isfinite(m->flat_gbps) || m->flat_gbps < 0 || !isfinite(m->rel_eps) || m->rel_eps < 0 ||
        m->rel_eps >= 1 || !isfinite(m->probe_seconds) || m->probe_seconds < 0)
        return pf_fail(err, errlen, PF_EINPUT, "options: a value is out of range");
    o->stages = (int)m->stages;
    o->replicas = (int)m->replicas;
    o->microbatches = (int)m->microbatches;
    o->coarsen_k = m->coarsen_k;
    o->max_downsets = m->max_downsets > 0 ? m->max_downsets : 0;
    o->refine = !m->no_refine;
    o->flat_gbps = m->flat_gbps;
    if (m->candidates)
        o->candidates = (int)m->candidates;
    if (m->probes_in_flight)
        o->probes_in_flight = (int)m->probes_in_flight;
    if (m->rel_eps > 0)
        o->rel_eps = m->rel_eps;
    if (m->probe_seconds > 0)
        o->probe_seconds = m->probe_seconds;
    o->symmetry = !m->no_symmetry;
    if (m->seed)
        o->seed = m->seed;
    if (m->max_stages)
        o->max_stages = (int)m->max_stages;
    return PF_OK;
}

/* Tensor parallelism, the global batch and the layer alignment. */
static int parallelism_from_pb(const Planfarm__PlanOptions *m, pf_search_opts_t *o, char *err,
                               size_t errlen)
{
    if (m->tp > PF_SETTING_CODEC_MAX_TP || m->max_tp > PF_SETTING_CODEC_MAX_TP ||
        m->global_batch > (1ULL << 40))
        return pf_fail(err, errlen, PF_EINPUT, "options: tp, max_tp or global_batch out of range");
    o->tp = (int)m->tp;
    if (m->max_tp)
        o->max_tp = (int)m->max_tp;
    o->tp_across_hosts = m->tp_across_hosts;
    o->global_batch = (long long)m->global_batch;
    o->layer_aligned = m->layer_aligned;
    o->stage_degrees = m->stage_degrees;
    if (m->block_candidates > 64 || m->microbatch_size > (1u << 20) || m->sequence_parallel > 2 ||
        m->virtual_stages > 4096 || m->context_parallel > (1u << 20) ||
        m->expert_parallel > (1u << 20))
        return pf_fail(err, errlen, PF_EINPUT, "options: block search dimensions out of range");
    o->block_search = m->block_search ? 1 : m->block_search_off ? 0 : -1;
    if (m->block_candidates)
        o->block_candidates = (int)m->block_candidates;
    o->microbatch_size = (int)m->microbatch_size;
    o->sequence_parallel = (int)m->sequence_parallel - 1;
    o->virtual_stages = (int)m->virtual_stages;
    o->context_parallel = (int)m->context_parallel;
    o->expert_parallel = (int)m->expert_parallel;
    o->recompute_auto = m->recompute_auto;
    o->zero_auto = m->zero_auto;
    return PF_OK;
}

/* Memory headroom, probe time-outs and the schedules to try. */
static int limits_from_pb(const Planfarm__PlanOptions *m, pf_search_opts_t *o, char *err,
                          size_t errlen)
{
    if (m->mem_headroom_set) {
        if (!(m->mem_headroom >= 0 && m->mem_headroom < 1))
            return pf_fail(err, errlen, PF_EINPUT, "options.mem_headroom: %g is not in [0, 1)",
                           m->mem_headroom);
        o->mem_headroom = m->mem_headroom;
    }
    if (m->probe_timeouts_set) {
        if (m->probe_timeouts > 1000000)
            return pf_fail(err, errlen, PF_EINPUT, "options.probe_timeouts: %u is above 1000000",
                           m->probe_timeouts);
        o->probe_timeouts = (int)m->probe_timeouts;
    }
    if (m->schedules & ~7u) /* 1f1b, gpipe, eager-1f1b */
        return pf_fail(err, errlen, PF_EINPUT, "options.schedules: mask 0x%x out of range",
                       m->schedules);
    o->schedules = m->schedules;
    return PF_OK;
}

/* The training (the Setting message's part), then the instantiation ("" or "auto": auto). */
static int training_from_pb(const Planfarm__PlanOptions *m, pf_search_opts_t *o, char *err,
                            size_t errlen)
{
    if (m->train) {
        Planfarm__Setting st = PLANFARM__SETTING__INIT;
        pf_tp_setting_opts_t so;
        uint64_t *plans = NULL;
        st.train = m->train;
        int rc = pf_setting_codec_from_pb(&st, &so, &plans, err, errlen);
        if (rc != PF_OK)
            return rc;
        o->train = so.train;
    }
    const char *inst = m->instantiation ? m->instantiation : "";
    if (inst[0] == '\0' || strcmp(inst, "auto") == 0) {
        o->auto_inst = 1;
    } else {
        o->auto_inst = 0;
        if (pf_map_inst_parse(inst, &o->inst) != PF_OK)
            return pf_fail(err, errlen, PF_EINPUT, "options.instantiation: '%s' is not m, ar, full "
                           "or auto", inst);
    }
    return PF_OK;
}

int pf_plan_options_codec_from_pb(const Planfarm__PlanOptions *m, pf_search_opts_t *o, char *err,
                                  size_t errlen)
{
    int rc;
    pf_search_opts_init(o);
    if (!m)
        return PF_OK;
    if ((rc = search_from_pb(m, o, err, errlen)) || (rc = parallelism_from_pb(m, o, err, errlen)) ||
        (rc = limits_from_pb(m, o, err, errlen)))
        return rc;
    return training_from_pb(m, o, err, errlen);
}
