#include "broker/agent_proto.h"
#include "broker/peers.h"
#include "planner/inputs/assemble.h"
#include "planner/core/util.h"
#include "proto/profile_codec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUND_MAX_NOTES 64
#define DEFAULT_TASK_TIMEOUT_S 120.0

typedef struct {
    char key[2 * IDENTITY_MAX + 1]; /* the peer's key in b->peers */
    char host[PF_REC_NAME], name[PF_REC_NAME];
    char cuda_status[256];
    int ngpus;
    int silent_ticks;
    int busy; /* holds a task of the running round */
} agent_t;

typedef enum { ROUND_LOCAL, ROUND_ECHO, ROUND_PINGPONG } round_phase_t;

typedef struct {
    char host[PF_REC_NAME];
    char agent_key[2 * IDENTITY_MAX + 1];
    int local_done;
} round_host_t;

typedef struct {
    uint64_t id;
    char client_key[2 * IDENTITY_MAX + 1];
    char cluster_name[PF_REC_NAME];
    pf_profile_codec_task_t sweep; /* sizes, reps, timeout, stream bytes for every task */
    double task_timeout_s;
    round_host_t *hosts;
    int nhosts, pending_local;
    round_phase_t phase;
    int pair_a, pair_b; /* hosts of the current pair: a echoes, b sends */
    uint32_t task;      /* the task awaited in ECHO / PINGPONG */
    double deadline;
    pf_record_device_t *dev;
    size_t ndev, devcap;
    pf_record_link_t *link;
    size_t nlink, linkcap;
    long long dropped;
    char *notes[ROUND_MAX_NOTES];
    int nnotes;
} round_t;

struct pf_agent_proto {
    zhashx_t *agents; /* peer key -> agent_t */
    round_t *round;   /* NULL when none runs */
    uint64_t next_round;
    uint32_t next_task;
};

static void agent_free(void **item)
{
    free(*item);
    *item = NULL;
}

int pf_agent_proto_init(pf_broker_t *b)
{
    if (!(b->agents = calloc(1, sizeof *b->agents)) || !(b->agents->agents = zhashx_new()))
        return PF_ERR;
    zhashx_set_destructor(b->agents->agents, agent_free);
    b->agents->next_round = 1;
    b->agents->next_task = 1;
    return PF_OK;
}

/* Agents by host, then by name (their registration order is not kept). */
static int cmp_agent(const void *pa, const void *pb)
{
    const agent_t *a = *(agent_t *const *)pa, *b = *(agent_t *const *)pb;
    int c = strcmp(a->host, b->host);
    return c ? c : strcmp(a->name, b->name);
}

static void round_free(round_t **rp)
{
    round_t *r = *rp;
    if (!r)
        return;
    free(r->hosts);
    free(r->dev);
    free(r->link);
    for (int i = 0; i < r->nnotes; i++)
        free(r->notes[i]);
    free(r);
    *rp = NULL;
}

static void round_note(round_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void round_note(round_t *r, const char *fmt, ...)
{
    if (r->nnotes >= ROUND_MAX_NOTES)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if ((r->notes[r->nnotes] = pf_strdup(msg)))
        r->nnotes++;
}

static peer_t *peer_by_key(pf_broker_t *b, const char *key)
{
    return zhashx_lookup(b->peers, key);
}

static int send_to_agent(pf_broker_t *b, const char *key, pf_wire_msg_t kind,
                         const ProtobufCMessage *m)
{
    peer_t *p = peer_by_key(b, key);
    return p ? pf_peers_send(b, p, kind, m) : PF_ERR;
}

void pf_agent_proto_free(pf_broker_t *b)
{
    if (!b->agents)
        return;
    if (b->router && b->agents->agents)
        for (agent_t *a = zhashx_first(b->agents->agents); a; a = zhashx_next(b->agents->agents)) {
            peer_t *p = peer_by_key(b, a->key);
            if (p)
                pf_peers_send_bye(b, p, "broker shutting down");
        }
    round_free(&b->agents->round);
    zhashx_destroy(&b->agents->agents);
    free(b->agents);
    b->agents = NULL;
}

/* ---- the round ---- */

static int send_task(pf_broker_t *b, round_t *r, const char *agent_key,
                     Planfarm__ProfileTaskKind kind, const char *peer_ep, const char *peer_host,
                     uint32_t *task_out)
{
    pf_profile_codec_task_t t = r->sweep;
    t.round = r->id;
    t.task = b->agents->next_task++;
    t.kind = kind;
    pf_record_name(t.peer_host, peer_host);
    snprintf(t.peer_endpoint, sizeof t.peer_endpoint, "%s", peer_ep ? peer_ep : "");
    pf_arena_t *arena = pf_arena_new();
    Planfarm__ProfileTask *m = arena ? pf_profile_codec_task_to_pb(arena, &t) : NULL;
    int rc = m ? send_to_agent(b, agent_key, PF_MSG_PROFILE, &m->base) : PF_ERR;
    pf_arena_destroy(&arena);
    agent_t *a = zhashx_lookup(b->agents->agents, agent_key);
    if (rc == PF_OK && a && kind != PLANFARM__PROFILE_TASK_KIND__PROFILE_ECHO_STOP)
        a->busy = 1;
    if (task_out)
        *task_out = t.task;
    return rc;
}

static void round_finish(pf_broker_t *b);

/* Next step of the pair phase: the next pair's echo, or the end of the round. */
static void next_pair(pf_broker_t *b)
{
    round_t *r = b->agents->round;
    for (;;) {
        if (++r->pair_b >= r->nhosts) {
            r->pair_a++;
            r->pair_b = r->pair_a + 1;
        }
        if (r->pair_b >= r->nhosts) {
            round_finish(b);
            return;
        }
        round_host_t *ha = &r->hosts[r->pair_a], *hb = &r->hosts[r->pair_b];
        if (!ha->local_done || !hb->local_done) {
            round_note(r, "pair %s - %s: not measured (a host's own profile failed)", ha->host,
                       hb->host);
            continue;
        }
        r->phase = ROUND_ECHO;
        r->deadline = b->now + r->task_timeout_s;
        if (send_task(b, r, ha->agent_key, PLANFARM__PROFILE_TASK_KIND__PROFILE_ECHO, NULL, NULL,
                      &r->task) == PF_OK)
            return;
        round_note(r, "pair %s - %s: cannot reach the agent of %s", ha->host, hb->host, ha->host);
    }
}

static void local_finished(pf_broker_t *b)
{
    round_t *r = b->agents->round;
    if (r->pending_local > 0)
        return;
    r->pair_a = 0;
    r->pair_b = 0; /* next_pair starts at (0, 1) */
    next_pair(b);
}

/* The task awaited from this agent failed (error, malformed answer, silence, departure). */
static void task_failed(pf_broker_t *b, const char *agent_key, const char *why)
{
    round_t *r = b->agents->round;
    agent_t *a = zhashx_lookup(b->agents->agents, agent_key);
    if (a)
        a->busy = 0;
    if (!r)
        return;
    if (r->phase == ROUND_LOCAL) {
        for (int i = 0; i < r->nhosts; i++)
            if (!r->hosts[i].local_done && !strcmp(r->hosts[i].agent_key, agent_key)) {
                round_note(r, "host %s: %s", r->hosts[i].host, why);
                r->hosts[i].agent_key[0] = '\0'; /* nothing more is awaited from it */
                r->pending_local--;
            }
        local_finished(b);
        return;
    }
    round_host_t *ha = &r->hosts[r->pair_a], *hb = &r->hosts[r->pair_b];
    const char *awaited = r->phase == ROUND_ECHO ? ha->agent_key : hb->agent_key;
    if (strcmp(awaited, agent_key) != 0)
        return;
    round_note(r, "pair %s - %s: %s", ha->host, hb->host, why);
    if (r->phase == ROUND_PINGPONG)
        send_task(b, r, ha->agent_key, PLANFARM__PROFILE_TASK_KIND__PROFILE_ECHO_STOP, NULL, NULL,
                  NULL);
    next_pair(b);
}

static void round_finish(pf_broker_t *b)
{
    round_t *r = b->agents->round;
    char err[512] = "";
    pf_cluster_t *c = NULL;
    char *json = NULL;
    size_t len = 0;
    uint32_t nlinks = 0;
    int rc;
    pf_assemble_t *as = pf_assemble_new(r->cluster_name, err, sizeof err);
    rc = as ? PF_OK : PF_ERR;
    for (size_t i = 0; rc == PF_OK && i < r->ndev; i++)
        if (pf_assemble_add_device(as, &r->dev[i], err, sizeof err) != PF_OK) {
            round_note(r, "dropped: %s", err);
            r->dropped++;
        }
    for (size_t i = 0; rc == PF_OK && i < r->nlink; i++)
        if (pf_assemble_add_link(as, &r->link[i], err, sizeof err) != PF_OK) {
            round_note(r, "dropped: %s", err);
            r->dropped++;
        }
    if (rc == PF_OK && pf_assemble_ndevices(as) == 0)
        rc = pf_fail(err, sizeof err, PF_EINFEASIBLE, "no device was measured");
    if (rc == PF_OK && (rc = pf_assemble_build(as, &c, err, sizeof err)) == PF_OK) {
        pf_assemble_prefer_hierarchy(&c); /* DESIGN.md "Cluster" */
        rc = pf_assemble_json(as, c, &json, &len, err, sizeof err);
    }
    if (as)
        nlinks = (uint32_t)pf_assemble_nlinks(as);

    Planfarm__ProfileClusterReply m = PLANFARM__PROFILE_CLUSTER_REPLY__INIT;
    m.status = rc;
    m.error = rc == PF_OK ? "" : err;
    m.cluster_json = json ? json : "";
    m.agents = (uint32_t)zhashx_size(b->agents->agents);
    m.hosts = (uint32_t)r->nhosts;
    m.links = nlinks;
    m.dropped_records = (uint64_t)r->dropped;
    m.notes = r->notes;
    m.n_notes = (size_t)r->nnotes;
    peer_t *client = peer_by_key(b, r->client_key);
    if (client)
        pf_peers_send(b, client, PF_MSG_PROFILE_CLUSTER_REPLY, &m.base);
    pf_peer_io_info(
        b->o.quiet, "broker: profiling round %llu done: %d host%s, %u link record%s%s%s",
        (unsigned long long)r->id, r->nhosts, r->nhosts == 1 ? "" : "s", nlinks,
        nlinks == 1 ? "" : "s", rc == PF_OK ? "" : "; failed: ", rc == PF_OK ? "" : err);
    free(json);
    pf_cluster_destroy(&c);
    pf_assemble_destroy(&as);
    for (agent_t *a = zhashx_first(b->agents->agents); a; a = zhashx_next(b->agents->agents))
        a->busy = 0;
    round_free(&b->agents->round);
}

static int keep_records(round_t *r, const pf_profile_codec_measurement_t *m)
{
    if (m->ndev && pf_grow((void **)&r->dev, &r->devcap, r->ndev + (size_t)m->ndev,
                           sizeof *r->dev))
        return PF_ERR;
    if (m->nlink && pf_grow((void **)&r->link, &r->linkcap, r->nlink + (size_t)m->nlink,
                            sizeof *r->link))
        return PF_ERR;
    if (m->ndev) /* none yet: r->dev may still be NULL */
        memcpy(r->dev + r->ndev, m->dev, (size_t)m->ndev * sizeof *m->dev);
    r->ndev += (size_t)m->ndev;
    if (m->nlink)
        memcpy(r->link + r->nlink, m->link, (size_t)m->nlink * sizeof *m->link);
    r->nlink += (size_t)m->nlink;
    return PF_OK;
}

/* Records must be about the hosts the task was about: an agent speaks for its own host (and a
 * ping-pong for the pair), never for another's devices. */
static int records_belong(const round_t *r, const pf_profile_codec_measurement_t *m,
                          const char *host, const char *peer_host, char *err, size_t errlen)
{
    for (int i = 0; i < m->ndev; i++)
        if (strcmp(m->dev[i].host, host) != 0)
            return pf_fail(err, errlen, PF_EINPUT, "devices[%d]: host '%s', the agent's is '%s'",
                           i, m->dev[i].host, host);
    for (int i = 0; i < m->nlink; i++) {
        const pf_record_link_t *l = &m->link[i];
        int ok = peer_host ? !strcmp(l->src_host, host) && !strcmp(l->dst_host, peer_host)
                           : !strcmp(l->src_host, host) && !strcmp(l->dst_host, host);
        if (!ok)
            return pf_fail(err, errlen, PF_EINPUT, "links[%d]: %s -> %s is not this task's", i,
                           l->src_host, l->dst_host);
    }
    (void)r;
    return PF_OK;
}

static void on_measurement(pf_broker_t *b, peer_t *p, agent_t *a, const uint8_t *data, size_t len)
{
    char err[512];
    round_t *r = b->agents->round;
    pf_profile_codec_measurement_t m;
    if (pf_profile_codec_decode_measurement(data, len, &m, err, sizeof err) != PF_OK) {
        pf_peers_malformed(b, p, "%s", err);
        if (r && a->busy) {
            r->dropped++;
            char why[600];
            snprintf(why, sizeof why, "malformed MEASUREMENT dropped: %s", err);
            task_failed(b, a->key, why);
        }
        return;
    }
    if (!r || m.round != r->id || !a->busy) { /* a late answer to an earlier round */
        pf_profile_codec_measurement_clear(&m);
        return;
    }
    if (m.error[0]) {
        task_failed(b, a->key, m.error);
        goto done;
    }
    if (r->phase == ROUND_LOCAL) {
        int h = -1;
        for (int i = 0; i < r->nhosts; i++)
            if (!r->hosts[i].local_done && !strcmp(r->hosts[i].agent_key, a->key))
                h = i;
        if (h < 0)
            goto done;
        if (records_belong(r, &m, a->host, NULL, err, sizeof err) != PF_OK) {
            r->dropped += m.ndev + m.nlink;
            b->malformed++;
            task_failed(b, a->key, err);
            goto done;
        }
        if (keep_records(r, &m) != PF_OK) {
            task_failed(b, a->key, "broker: out of memory");
            goto done;
        }
        a->busy = 0;
        r->hosts[h].local_done = 1;
        r->pending_local--;
        local_finished(b);
        goto done;
    }
    if (m.task != r->task)
        goto done;
    round_host_t *ha = &r->hosts[r->pair_a], *hb = &r->hosts[r->pair_b];
    if (r->phase == ROUND_ECHO) {
        if (!m.echo_endpoint[0]) {
            r->dropped++;
            task_failed(b, a->key, "its answer to PROFILE_ECHO names no endpoint");
            goto done;
        }
        a->busy = 0;
        r->phase = ROUND_PINGPONG;
        r->deadline = b->now + r->task_timeout_s;
        if (send_task(b, r, hb->agent_key, PLANFARM__PROFILE_TASK_KIND__PROFILE_PINGPONG,
                      m.echo_endpoint, ha->host, &r->task) != PF_OK)
            task_failed(b, hb->agent_key, "cannot reach its agent");
        goto done;
    }
    /* PINGPONG: the link record hb -> ha */
    if (m.ndev != 0 || m.nlink != 1 ||
        records_belong(r, &m, hb->host, ha->host, err, sizeof err) != PF_OK) {
        if (m.ndev != 0 || m.nlink != 1)
            snprintf(err, sizeof err, "a ping-pong answers one link record, not %d devices and "
                     "%d links", m.ndev, m.nlink);
        r->dropped += m.ndev + m.nlink;
        b->malformed++;
        task_failed(b, a->key, err);
        goto done;
    }
    if (keep_records(r, &m) != PF_OK) {
        task_failed(b, a->key, "broker: out of memory");
        goto done;
    }
    a->busy = 0;
    send_task(b, r, ha->agent_key, PLANFARM__PROFILE_TASK_KIND__PROFILE_ECHO_STOP, NULL, NULL,
              NULL);
    next_pair(b);
done:
    pf_profile_codec_measurement_clear(&m);
}

static void on_profile_cluster(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len)
{
    char err[256];
    struct pf_agent_proto *ag = b->agents;
    if (ag->round) {
        pf_peers_send_error(b, p, PF_ERR, "a profiling round is running; try again later");
        return;
    }
    Planfarm__ProfileClusterRequest *m = planfarm__profile_cluster_request__unpack(NULL, len, data);
    if (!m) {
        pf_peers_malformed(b, p, "PROFILE_CLUSTER: not a valid ProfileClusterRequest");
        return;
    }
    round_t *r = NULL;
    if (pf_profile_codec_check_sweep(m->sizes, m->n_sizes, m->reps, m->probe_timeout_s, err,
                                     sizeof err) != PF_OK ||
        m->n_sizes == 1) {
        if (m->n_sizes == 1)
            snprintf(err, sizeof err, "one size is no sweep");
        char msg[320];
        snprintf(msg, sizeof msg, "PROFILE_CLUSTER: %s", err);
        pf_peers_send_error(b, p, PF_EINPUT, msg);
        goto done;
    }
    if (zhashx_size(ag->agents) == 0) {
        pf_peers_send_error(b, p, PF_EINFEASIBLE, "no profiler agent is registered");
        goto done;
    }
    if (!(r = calloc(1, sizeof *r)) ||
        !(r->hosts = calloc(zhashx_size(ag->agents), sizeof *r->hosts))) {
        pf_peers_send_error(b, p, PF_ERR, "broker: out of memory");
        goto done;
    }
    r->id = ag->next_round++;
    memcpy(r->client_key, p->key, sizeof r->client_key);
    pf_record_name(r->cluster_name, m->cluster_name && m->cluster_name[0] ? m->cluster_name
                                                                          : "profiled");
    r->sweep.nsizes = (int)m->n_sizes;
    if (m->n_sizes) /* none: the agents' default sweep */
        memcpy(r->sweep.sizes, m->sizes, m->n_sizes * sizeof *m->sizes);
    r->sweep.reps = (int)m->reps;
    r->sweep.timeout_s = m->probe_timeout_s;
    r->sweep.stream_bytes = m->stream_bytes;
    r->task_timeout_s = m->probe_timeout_s > 0 ? m->probe_timeout_s : DEFAULT_TASK_TIMEOUT_S;
    /* one agent per host, the one of lowest name; hosts in name order, so that a round is the
     * same whatever order the agents registered in (the agents table hashes random keys) */
    size_t nag = zhashx_size(ag->agents), k = 0;
    agent_t **sorted = malloc((nag ? nag : 1) * sizeof *sorted);
    if (!sorted) {
        pf_peers_send_error(b, p, PF_ERR, "broker: out of memory");
        goto done;
    }
    for (agent_t *a = zhashx_first(ag->agents); a; a = zhashx_next(ag->agents))
        sorted[k++] = a;
    qsort(sorted, k, sizeof *sorted, cmp_agent);
    for (size_t i = 0; i < k; i++) {
        agent_t *a = sorted[i];
        if (r->nhosts > 0 && !strcmp(r->hosts[r->nhosts - 1].host, a->host)) {
            round_note(r, "agent %s: host %s has another agent; skipped", a->name, a->host);
            continue;
        }
        pf_record_name(r->hosts[r->nhosts].host, a->host);
        memcpy(r->hosts[r->nhosts].agent_key, a->key, sizeof a->key);
        r->nhosts++;
    }
    free(sorted);
    ag->round = r;
    r->phase = ROUND_LOCAL;
    r->deadline = b->now + r->task_timeout_s;
    r->pending_local = r->nhosts;
    pf_peer_io_info(b->o.quiet, "broker: profiling round %llu over %d host%s",
                    (unsigned long long)r->id, r->nhosts, r->nhosts == 1 ? "" : "s");
    for (int i = 0; i < r->nhosts; i++) {
        char key[sizeof r->hosts[i].agent_key];
        memcpy(key, r->hosts[i].agent_key, sizeof key);
        if (send_task(b, r, key, PLANFARM__PROFILE_TASK_KIND__PROFILE_LOCAL, NULL, NULL, NULL) !=
            PF_OK) {
            task_failed(b, key, "cannot reach its agent");
            if (!ag->round)
                break; /* that was the last one: the round has answered */
        }
    }
    r = NULL;
done:
    round_free(&r);
    planfarm__profile_cluster_request__free_unpacked(m, NULL);
}

/* ---- agents ---- */

static void agent_gone(pf_broker_t *b, agent_t *a, const char *why)
{
    char key[sizeof a->key];
    memcpy(key, a->key, sizeof key);
    if (a->busy)
        task_failed(b, key, why);
    zhashx_delete(b->agents->agents, key); /* frees a */
    /* a round still running forgets it too: nothing more is awaited from it */
    round_t *r = b->agents->round;
    if (r)
        for (int i = 0; i < r->nhosts; i++)
            if (!strcmp(r->hosts[i].agent_key, key) && r->phase == ROUND_LOCAL &&
                !r->hosts[i].local_done)
                task_failed(b, key, why);
}

static void on_register(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len)
{
    char err[512];
    pf_profile_codec_agent_info_t info;
    if (p->kind == PEER_WORKER || p->kind == PEER_CLIENT) {
        pf_peers_malformed(b, p, "REGISTER from a peer that is not an agent");
        return;
    }
    if (pf_profile_codec_decode_register(data, len, &info, err, sizeof err) != PF_OK) {
        pf_peers_malformed(b, p, "%s", err);
        pf_peers_send_bye(b, p, err);
        return;
    }
    agent_t *a = zhashx_lookup(b->agents->agents, p->key);
    if (a) /* REGISTER again: it restarted; what it was doing is lost */
        agent_gone(b, a, "the agent registered again");
    if (!(a = calloc(1, sizeof *a)) || zhashx_insert(b->agents->agents, p->key, a) != 0) {
        free(a);
        pf_profile_codec_agent_info_clear(&info);
        pf_peers_send_bye(b, p, "broker: out of memory");
        return;
    }
    memcpy(a->key, p->key, sizeof a->key);
    memcpy(a->host, info.host, sizeof a->host);
    memcpy(a->name, info.name[0] ? info.name : info.host, sizeof a->name);
    memcpy(a->cuda_status, info.cuda_status, sizeof a->cuda_status);
    a->ngpus = info.ndev;
    p->kind = PEER_AGENT;
    p->last_heartbeat_sent = b->now;
    snprintf(p->name, sizeof p->name, "agent %.55s", a->name);
    pf_peer_io_info(b->o.quiet, "broker: agent %s registered: host %s, %d GPU%s%s%s (%zu agent%s)",
                    a->name, a->host, a->ngpus, a->ngpus == 1 ? "" : "s",
                    a->cuda_status[0] ? "; " : "", a->cuda_status, zhashx_size(b->agents->agents),
                    zhashx_size(b->agents->agents) == 1 ? "" : "s");
    pf_profile_codec_agent_info_clear(&info);
}

bool pf_agent_proto_on_msg(pf_broker_t *b, peer_t *p, pf_wire_msg_t kind, const uint8_t *data,
                           size_t len)
{
    if (kind == PF_MSG_PROFILE_CLUSTER) {
        if (p->kind == PEER_WORKER || p->kind == PEER_AGENT) {
            pf_peers_malformed(b, p, "PROFILE_CLUSTER is a client message");
            return true;
        }
        p->kind = PEER_CLIENT;
        on_profile_cluster(b, p, data, len);
        return true;
    }
    if (kind == PF_MSG_REGISTER) {
        on_register(b, p, data, len);
        return true;
    }
    if (kind != PF_MSG_MEASUREMENT && p->kind != PEER_AGENT)
        return false; /* workers' and clients' messages */
    agent_t *a = zhashx_lookup(b->agents->agents, p->key);
    if (!a) {
        /* forgotten (silent) or never registered: told to register again */
        pf_peers_malformed(b, p, "%s from a peer that is not a registered agent",
                           pf_wire_msg_name(kind));
        if (kind != PF_MSG_BYE)
            pf_peers_send_bye(b, p, "unknown agent: send REGISTER");
        return true;
    }
    a->silent_ticks = 0;
    switch (kind) {
    case PF_MSG_HEARTBEAT: break;
    case PF_MSG_MEASUREMENT: on_measurement(b, p, a, data, len); break;
    case PF_MSG_BYE:
        pf_peer_io_info(b->o.quiet, "broker: agent %s left", a->name);
        agent_gone(b, a, "the agent left");
        pf_peers_drop(b, p);
        break;
    default: pf_peers_malformed(b, p, "%s is not an agent message", pf_wire_msg_name(kind)); break;
    }
    return true;
}

int pf_agent_proto_count(const pf_broker_t *b)
{
    return b->agents ? (int)zhashx_size(b->agents->agents) : 0;
}

void pf_agent_proto_tick(pf_broker_t *b)
{
    struct pf_agent_proto *ag = b->agents;
    Planfarm__Heartbeat hb = PLANFARM__HEARTBEAT__INIT;
    zlistx_t *dead = zlistx_new();
    for (agent_t *a = zhashx_first(ag->agents); a; a = zhashx_next(ag->agents)) {
        peer_t *p = peer_by_key(b, a->key);
        if (!p || (!a->busy && ++a->silent_ticks > b->o.liveness)) {
            if (dead)
                zlistx_add_end(dead, a);
            continue;
        }
        if (pf_peers_send(b, p, PF_MSG_HEARTBEAT, &hb.base) == PF_OK)
            p->last_heartbeat_sent = b->now;
    }
    if (dead) {
        for (agent_t *a = zlistx_first(dead); a; a = zlistx_next(dead)) {
            zsys_warning("broker: agent %s is silent for %d heartbeats: forgotten", a->name,
                         b->o.liveness);
            peer_t *p = peer_by_key(b, a->key);
            agent_gone(b, a, "the agent went silent");
            if (p)
                p->kind = PEER_GONE;
        }
        zlistx_destroy(&dead);
    }
    round_t *r = ag->round;
    if (r && b->now > r->deadline) {
        char why[96];
        snprintf(why, sizeof why, "no answer within %.0f s", r->task_timeout_s);
        if (r->phase == ROUND_LOCAL) {
            for (int i = 0; ag->round == r && i < r->nhosts; i++)
                if (!r->hosts[i].local_done && r->hosts[i].agent_key[0]) {
                    char key[sizeof r->hosts[i].agent_key];
                    memcpy(key, r->hosts[i].agent_key, sizeof key);
                    task_failed(b, key, why);
                }
        } else {
            task_failed(b, r->phase == ROUND_ECHO ? r->hosts[r->pair_a].agent_key
                                                  : r->hosts[r->pair_b].agent_key, why);
        }
    }
}
