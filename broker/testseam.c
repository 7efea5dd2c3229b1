#include "broker/testseam.h"
#include "broker/broker_state.h"
#include "planner/core/util.h"

#include <stdlib.h>
#include <string.h>

int pf_testseam_noop(pf_broker_t *b, uint64_t job_id)
{
    return pf_dispatch_submit(b->dispatch, job_id, PF_JOB_NOOP, b->o.limits.noop_s, NULL, 0);
}

bool pf_testseam_command(pf_broker_t *b, zsock_t *pipe, const char *cmd, zmsg_t *msg)
{
    const pf_testseam_t *s = b->o.testseam;
    if (!s || !s->command)
        return false;
    s->command(s->ctx, b, pipe, cmd, msg);
    return true;
}

void pf_testseam_noop_done(pf_broker_t *b, uint64_t job_id, bool answered)
{
    const pf_testseam_t *s = b->o.testseam;
    if (s && s->noop_done)
        s->noop_done(s->ctx, job_id, answered);
}

static void noops_command(void *ctx, pf_broker_t *b, zsock_t *pipe, const char *cmd, zmsg_t *msg)
{
    pf_testseam_noops_t *ns = ctx;
    if (!streq(cmd, "NOOP"))
        return;
    char *arg = zmsg_popstr(msg);
    long long n = arg ? atoll(arg) : 0;
    free(arg);
    ns->pipe = pipe;
    ns->t0 = pf_now_s();
    ns->left += n;
    for (long long i = 0; i < n; i++)
        pf_testseam_noop(b, ++ns->next_id);
    if (n <= 0)
        zstr_sendf(pipe, "DONE %.6f", 0.0);
}

static void noops_done(void *ctx, uint64_t job_id, bool answered)
{
    pf_testseam_noops_t *ns = ctx;
    (void)job_id;
    /* a poisoned one is counted, but only answers finish a round */
    if (ns->left > 0 && --ns->left == 0 && answered && ns->pipe)
        zstr_sendf(ns->pipe, "DONE %.6f", pf_now_s() - ns->t0);
}

void pf_testseam_noops_init(pf_testseam_noops_t *n)
{
    memset(n, 0, sizeof *n);
    n->seam.ctx = n;
    n->seam.command = noops_command;
    n->seam.noop_done = noops_done;
}
