/* search_queue: the jobs of one search, their queue and ids (search_queue.h). */
#include "planner/search/search_queue.h"
#include "planner/core/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

uint64_t pf_search_queue_job(pf_search_t *s, pf_job_kind_t kind, pf_search_owner_t owner)
{
    if (pf_grow((void **)&s->jobs, &s->jobs_cap, (size_t)s->njobs + 1, sizeof *s->jobs))
        return 0;
    if ((size_t)s->qtail == s->qcap) {
        /* compact, then grow (no memmove on the first call: the queue is still NULL) */
        if (s->qhead > 0)
            memmove(s->queue, s->queue + s->qhead,
                    (size_t)(s->qtail - s->qhead) * sizeof *s->queue);
        s->qtail -= s->qhead;
        s->qhead = 0;
        if (pf_grow((void **)&s->queue, &s->qcap, (size_t)s->qtail + 1, sizeof *s->queue))
            return 0;
    }
    s->jobs[s->njobs] = (job_rec_t){kind, J_QUEUED, owner};
    uint64_t id = (uint64_t)++s->njobs;
    s->queue[s->qtail++] = id;
    return id;
}

job_rec_t *pf_search_queue_record(const pf_search_t *s, uint64_t id)
{
    if (id == 0 || id > (uint64_t)s->njobs)
        return NULL;
    return &s->jobs[id - 1];
}

uint64_t pf_search_queue_next(pf_search_t *s)
{
    while (s->qhead < s->qtail) {
        uint64_t next = s->queue[s->qhead++];
        job_rec_t *j = pf_search_queue_record(s, next);
        if (!j || j->state != J_QUEUED)
            continue; /* cancelled before it went out */
        j->state = J_OUT;
        s->issued++;
        return next;
    }
    return 0;
}

void pf_search_queue_cancel(pf_search_t *s, uint64_t id)
{
    job_rec_t *j = pf_search_queue_record(s, id);
    if (!j || (j->state != J_OUT && j->state != J_QUEUED))
        return;
    int was_out = j->state == J_OUT;
    j->state = J_CANCELLED;
    s->cancelled_total++;
    if (!was_out)
        return;
    if (pf_grow((void **)&s->cancelled, &s->cancelled_cap, (size_t)s->ncancelled + 1,
                sizeof *s->cancelled))
        return; /* the answer will be ignored anyway */
    s->cancelled[s->ncancelled++] = id;
}

bool pf_search_queue_stopped(const pf_search_t *s)
{
    return s->phase == PF_PHASE_DONE || s->phase == PF_PHASE_FAILED;
}

void pf_search_queue_fail(pf_search_t *s, int code, const char *fmt, ...)
{
    if (pf_search_queue_stopped(s))
        return;
    s->phase = PF_PHASE_FAILED;
    s->status = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error, sizeof s->error, fmt, ap);
    va_end(ap);
    for (long long i = 0; i < s->njobs; i++)
        pf_search_queue_cancel(s, (uint64_t)i + 1);
}
