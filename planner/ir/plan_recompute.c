/* plan_recompute: each stage's recomputation (plan_recompute.h). */
#include "planner/ir/plan_recompute.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

#include <stdio.h>

pf_training_recompute_t pf_plan_recompute_stage(const pf_plan_t *p, int s)
{
    const pf_stage_t *st = &p->stage_list[s];
    return st->has_recompute ? st->recompute : p->train.recompute;
}

int pf_plan_recompute_mixed(const pf_plan_t *p)
{
    for (int s = 1; s < p->stages; s++)
        if (pf_plan_recompute_stage(p, s) != pf_plan_recompute_stage(p, 0))
            return 1;
    return 0;
}

pf_training_recompute_t pf_plan_recompute_max(const pf_plan_t *p)
{
    pf_training_recompute_t m = PF_RECOMPUTE_NONE;
    for (int s = 0; s < p->stages; s++)
        m = pf_plan_recompute_stage(p, s) > m ? pf_plan_recompute_stage(p, s) : m;
    return m;
}

static pf_training_recompute_t plan_level(const void *p, int s)
{
    return pf_plan_recompute_stage(p, s);
}

void pf_plan_recompute_describe(const pf_plan_t *p, char *buf, size_t len)
{
    pf_training_recompute_runs(p->stages, plan_level, p, buf, len);
}

int pf_plan_recompute_read(json_t *st, const char *path, pf_stage_t *sl, char *err,
                           size_t errlen)
{
    const char *rec;
    int rc = pf_json_get_string(st, path, "recompute", 0, NULL, &rec, err, errlen);
    if (rc != PF_OK || !rec)
        return rc;
    int r = pf_training_recompute_parse(rec);
    if (r < 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s.recompute: '%s' is not none, selective or "
                       "full", path, rec);
    sl->has_recompute = 1;
    sl->recompute = (pf_training_recompute_t)r;
    return PF_OK;
}

void pf_plan_recompute_write(pf_json_writer_t *w, const pf_plan_t *p, int s)
{
    if (s >= 0 && !pf_plan_recompute_mixed(p))
        return;
    /* training's: the heaviest, so that a reader that knows only it recomputes at least as
     * much as the plan does */
    pf_json_writer_key(w, "recompute");
    pf_json_writer_str(w, pf_training_recompute_name(s < 0 ? pf_plan_recompute_max(p)
                                                           : pf_plan_recompute_stage(p, s)));
}
