#include "broker/lanes.h"

uint64_t pf_lanes_job_id(const request_t *r, uint64_t search_id)
{
    return ((uint64_t)r->seq << 32) | (search_id & 0xffffffffu);
}

int pf_lanes_queue(pf_broker_t *b, request_t *r, uint64_t sid, const pf_job_t *job)
{
    pf_fair_job_t j = {
        .id = pf_lanes_job_id(r, sid),
        .kind = job->kind,
        .timeout_s = pf_job_timeout_s(job, &b->o.limits),
        .owner = r,
        .owner_job = sid,
    };
    return pf_fair_push(b->fair, r->client, r->priority, &j);
}

void pf_lanes_cancel(pf_broker_t *b, uint64_t job_id)
{
    if (!pf_fair_cancel(b->fair, job_id)) /* not waiting in a lane: the dispatch core has it */
        pf_dispatch_cancel(b->dispatch, job_id);
}

void pf_lanes_cancel_owner(pf_broker_t *b, request_t *r)
{
    pf_fair_cancel_owner(b->fair, r);
    pf_dispatch_cancel_owner(b->dispatch, r);
}

void pf_lanes_job_left(pf_broker_t *b, uint64_t job_id)
{
    void *owner;
    uint64_t sid;
    if (!pf_dispatch_job_owner(b->dispatch, job_id, &owner, &sid))
        pf_fair_done(b->fair, job_id);
}
