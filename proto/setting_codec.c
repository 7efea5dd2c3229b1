/* setting_codec: the Setting message, the tensor-parallel setting and training every solver job
 * plans on (planner/tp/tp_setting.h); a request's options carry its training part too. */
#include "proto/setting_codec.h"
#include "planner/core/util.h"

#include <stdlib.h>
#include <string.h>

Planfarm__Setting *pf_setting_codec_to_pb(pf_arena_t *a, const pf_tp_setting_opts_t *o)
{
    Planfarm__Setting *m = PF_ANEW(a, Planfarm__Setting, 1);
    Planfarm__Training *t = PF_ANEW(a, Planfarm__Training, 1);
    Planfarm__TapOptions *to = PF_ANEW(a, Planfarm__TapOptions, 1);
    if (!m || !t || !to)
        return NULL;
    planfarm__setting__init(m);
    planfarm__training__init(t);
    planfarm__tap_options__init(to);
    m->tp = o->tp > 0 ? (uint32_t)o->tp : 1;
    m->across_hosts = o->across_hosts != 0;
    if (o->tap_plans && o->ntap_plans > 0) {
        uint64_t *p = PF_ANEW(a, uint64_t, o->ntap_plans);
        if (!p)
            return NULL;
        memcpy(p, o->tap_plans, (size_t)o->ntap_plans * sizeof *p);
        m->tap_plans = p;
        m->n_tap_plans = (size_t)o->ntap_plans;
    }
    t->precision_bytes = (uint32_t)o->train.precision_bytes;
    t->optimizer = (uint32_t)o->train.optimizer;
    t->zero = (uint32_t)o->train.zero;
    t->recompute = (uint32_t)o->train.recompute;
    t->schedule = (uint32_t)o->train.schedule;
    t->sequence_parallel = o->train.sequence_parallel != 0;
    to->min_duplicate = (uint32_t)o->tap.min_duplicate;
    to->max_unit_weights = (uint32_t)o->tap.max_unit_weights;
    to->allow_token_split = o->tap.allow_token_split != 0;
    m->train = t;
    m->tap = to;
    return m;
}

int pf_setting_codec_from_pb(const Planfarm__Setting *m, pf_tp_setting_opts_t *o,
                             uint64_t **tap_plans, char *err, size_t errlen)
{
    pf_tp_setting_opts_init(o);
    if (!m)
        return PF_OK;
    if (m->tp > PF_SETTING_CODEC_MAX_TP)
        return pf_fail(err, errlen, PF_EINPUT, "job.setting.tp: %u out of range", m->tp);
    o->tp = m->tp ? (int)m->tp : 1;
    o->across_hosts = m->across_hosts;
    if (m->n_tap_plans) {
        if (m->n_tap_plans > PF_WIRE_MAX_OPS)
            return pf_fail(err, errlen, PF_EINPUT, "job.setting.tap_plans: %zu entries",
                           m->n_tap_plans);
        if (!(*tap_plans = malloc(m->n_tap_plans * sizeof **tap_plans)))
            return pf_fail(err, errlen, PF_ERR, "out of memory");
        memcpy(*tap_plans, m->tap_plans, m->n_tap_plans * sizeof **tap_plans);
        o->tap_plans = *tap_plans;
        o->ntap_plans = (int)m->n_tap_plans;
    }
    if (m->train) {
        const Planfarm__Training *t = m->train;
        if (t->optimizer > PF_OPTIMIZER_SGD || t->recompute > PF_RECOMPUTE_FULL ||
            t->schedule >= PF_SCHEDULE_COUNT || t->zero > 3 ||
            (t->precision_bytes != 0 && t->precision_bytes != 2 && t->precision_bytes != 4))
            return pf_fail(err, errlen, PF_EINPUT, "job.setting.train: out of range");
        if (t->precision_bytes) /* 0: not given, the default */
            o->train.precision_bytes = (int)t->precision_bytes;
        o->train.optimizer = (pf_training_optimizer_t)t->optimizer;
        o->train.zero = (int)t->zero;
        o->train.recompute = (pf_training_recompute_t)t->recompute;
        o->train.schedule = (pf_training_schedule_t)t->schedule;
        o->train.sequence_parallel = t->sequence_parallel;
    }
    if (m->tap) {
        if (m->tap->min_duplicate > 1u << 20 || m->tap->max_unit_weights > 39)
            return pf_fail(err, errlen, PF_EINPUT, "job.setting.tap: out of range");
        o->tap.min_duplicate = (int)m->tap->min_duplicate;
        o->tap.max_unit_weights = (int)m->tap->max_unit_weights;
        o->tap.allow_token_split = m->tap->allow_token_split;
    }
    return PF_OK;
}
