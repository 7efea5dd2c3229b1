#include "broker/access.h"
#include "broker/peers.h"
#include "planner/core/util.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

#define ALL_ROLES (PF_ROLE_CLIENT | PF_ROLE_WORKER | PF_ROLE_AGENT | PF_ROLE_ADMIN)

int pf_access_admit(pf_broker_t *b, peer_t **pp, zmq_msg_t *frame)
{
    peer_t *p = *pp;
    if (!b->auth) { /* plain: one anonymous principal, owner "" */
        p->roles = ALL_ROLES;
        return PF_OK;
    }
    /* libzmq sets User-Id from zauth's ZAP reply: the client's public key in Z85 */
    const char *user = zmq_msg_gets(frame, "User-Id");
    if (!user || strlen(user) != PF_CURVE_KEY_TXT - 1) {
        pf_peers_malformed(b, p, "a message without a CURVE key");
        return PF_ERR;
    }
    if (p->user[0] && strcmp(p->user, user) != 0) {
        /* a peer chose the routing id of one that left (ZMQ_ROUTING_ID): not the same peer */
        uint8_t id[IDENTITY_MAX];
        size_t len = p->id_len;
        memcpy(id, p->id, len);
        zsys_warning("broker: %s's routing id is now used by key %.8s...: forgetting %s",
                     p->name, user, p->name);
        if (p->kind == PEER_WORKER)
            pf_dispatch_worker_remove(b->dispatch, p->worker, "routing id taken by another key");
        pf_peers_drop(b, p);
        if (!(p = *pp = pf_peers_get(b, id, len)))
            return PF_ERR;
        p->last_seen = b->now;
    }
    if (!p->user[0]) {
        snprintf(p->user, sizeof p->user, "%s", user);
        p->roles = pf_auth_roles(b->auth, user);
        snprintf(p->name, sizeof p->name, "key %.8s", user);
    }
    return PF_OK;
}

static unsigned roles_for(pf_wire_msg_t kind)
{
    if (kind == PF_MSG_HEARTBEAT || kind == PF_MSG_BYE) /* workers' and agents' */
        return PF_ROLE_WORKER | PF_ROLE_AGENT;
    if (kind >= PF_MSG_READY && kind <= PF_MSG_BYE)
        return PF_ROLE_WORKER;
    if ((kind >= PF_MSG_SUBMIT && kind <= PF_MSG_LIST) || kind == PF_MSG_PROFILE_CLUSTER)
        return PF_ROLE_CLIENT | PF_ROLE_ADMIN;
    if (kind == PF_MSG_REGISTER || kind == PF_MSG_MEASUREMENT)
        return PF_ROLE_AGENT;
    return 0;
}

static const char *role_flags(unsigned roles)
{
    if (roles == PF_ROLE_AGENT)
        return "--agents";
    if (roles & PF_ROLE_WORKER)
        return roles & PF_ROLE_AGENT ? "--workers or --agents" : "--workers";
    return "--clients or --admins";
}

/* The allow-lists that hold a key ("--workers", "--clients and --admins"), or "no list". */
static void listed_in(unsigned roles, char *out, size_t len)
{
    static const char *const flags[] = {"--clients", "--workers", "--agents", "--admins"};
    size_t used = 0;
    out[0] = '\0';
    for (unsigned r = 0; r < 4; r++)
        if (roles & (1u << r))
            used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%s%s",
                                     used ? " and " : "", flags[r]);
    if (!used)
        snprintf(out, len, "no list");
}

bool pf_access_may_send(pf_broker_t *b, peer_t *p, pf_wire_msg_t kind)
{
    if (p->roles & roles_for(kind))
        return true;
    char where[64], msg[256];
    listed_in(p->roles, where, sizeof where);
    snprintf(msg, sizeof msg, "broker: %s refused: key %.8s... is listed in %s, not in %s (a key "
             "of the wrong role)", pf_wire_msg_name(kind), p->user, where,
             role_flags(roles_for(kind)));
    pf_peers_malformed(b, p, "%s", msg + strlen("broker: "));
    /* the sender learns why instead of waiting for a reply that never comes */
    pf_peers_send_error(b, p, PF_EINPUT, msg);
    return false;
}

bool pf_access_may_see(const peer_t *p, const request_t *r)
{
    return (p->roles & PF_ROLE_ADMIN) || !strcmp(p->user, r->owner);
}

void pf_access_foreign_answer(pf_broker_t *b, peer_t *p, const char *what, uint64_t job_id)
{
    b->foreign++;
    if (job_id)
        pf_peers_malformed(b, p, "%s for job %llu, which this worker does not hold: dropped",
                            what, (unsigned long long)job_id);
    else
        pf_peers_malformed(b, p, "%s from a peer that holds no job: dropped", what);
}

static bool ref_is(const pf_blob_ref_t *ref, const uint8_t *hash, size_t len)
{
    return ref->hash_len == len && len > 0 && !memcmp(ref->hash, hash, len);
}

bool pf_access_may_fetch(pf_broker_t *b, peer_t *p, const uint8_t *hash, size_t len)
{
    uint64_t ids[MAX_CREDITS];
    int n = pf_dispatch_worker_jobs(b->dispatch, p->worker, ids, MAX_CREDITS);
    for (int i = 0; i < n; i++) {
        void *owner;
        uint64_t sid;
        const request_t *r;
        if (pf_dispatch_job_owner(b->dispatch, ids[i], &owner, &sid) && (r = owner) &&
            (ref_is(&r->gref, hash, len) || ref_is(&r->cref, hash, len)))
            return true;
    }
    return false;
}
