/* broker_int: what the broker's files share and nothing else sees: the broker, its peers and
 * its requests, and the functions one file offers the others.
 *
 *   peers.c         the peer registry (ROUTER identity -> peer) and sending to one peer
 *   requests.c      requests: their search driven through the dispatch core, their status
 *   intake.c        SUBMIT (keyed, journaled, set up on the helper thread), restart from the
 *                   journal, jobs through the clients' lanes
 *   client_proto.c  what clients send (SUBMIT, STATUS, RESULT_REQ, CANCEL_REQ, LIST)
 *   worker_proto.c  what workers send (READY, HEARTBEAT, RESULT, FAILED, FETCH, BYE), jobs out
 *   agent_proto.c   profiler agents (REGISTER, MEASUREMENT, HEARTBEAT, BYE) and profiling
 *                   rounds (a client's PROFILE_CLUSTER)
 *   access.c        who a peer is (its CURVE key), what its roles let it send and see
 *   broker.c        the loop, heartbeats and the public API */
#ifndef PF_BROKER_INT_H
#define PF_BROKER_INT_H

#include "broker/blobstore.h"
#include "broker/broker.h"
#include "broker/dispatch.h"
#include "broker/http.h"
#include "broker/metrics.h"
#include "broker/fair.h"
#include "broker/journal.h"
#include "broker/prep.h"
#include "planner/search/search.h"
#include "proto/job_codec.h"
#include "proto/peer_io.h"

#include <czmq.h>

#define IDENTITY_MAX 255
#define PEER_IDLE_S 600   /* a client (or a peer that only sent garbage) is forgotten after this */
#define DRAIN_BATCH 4096  /* messages handled before timers and dispatch get a turn */
#define MAX_CREDITS 1000 /* the most --max-credits may allow */
/* Messages queued for (and from) one peer. A worker is sent at most its credits in jobs, as many
 * cancels, a blob or two per job and a heartbeat per interval; a client one reply per request.
 * Past this a send fails (ROUTER_MANDATORY: EAGAIN): a client's reply is dropped, a worker is
 * dropped, and a peer that never reads cannot make the broker hold its replies without bound. */
#define PEER_HWM (10 * MAX_CREDITS)


/* PEER_GONE: a worker declared dead or unreachable. Its late RESULTs are still used (jobs are
 * pure); a peer that never sent READY may not answer jobs at all. Forgotten after PEER_IDLE_S. */
typedef enum { PEER_NEW, PEER_WORKER, PEER_CLIENT, PEER_GONE, PEER_AGENT } peer_kind_t;

typedef struct {
    char key[2 * IDENTITY_MAX + 1]; /* hex of the identity: the peers table's key */
    uint8_t id[IDENTITY_MAX];
    size_t id_len;
    peer_kind_t kind;
    int worker; /* dispatch handle when a worker */
    char user[PF_CURVE_KEY_TXT]; /* its CURVE public key (Z85); "" on a plain socket */
    unsigned roles;              /* pf_role_t bits: of its key, or every role when plain */
    char name[64];
    int warned;
    double last_seen, last_heartbeat_sent;
} peer_t;

typedef struct {
    char id[40];                  /* "r" and 32 hex digits: 128 random bits */
    char owner[PF_CURVE_KEY_TXT]; /* the submitting client's key; "" on a plain socket */
    uint32_t seq; /* high half of its jobs' dispatch ids: random */
    char label[128];
    pf_graph_t *g;
    pf_cluster_t *c;
    pf_blob_ref_t gref, cref;
    pf_search_t *search; /* NULL once finished */
    Planfarm__RequestState state;
    int status;
    char error[512];
    int cancelled;
    double t_start, t_end;
    int workers_max;
    pf_search_status_t last; /* snapshot when it finished */
    char *plan_json;
    size_t plan_len;
    int has_mapping_svg; /* the HTTP face holds its mapping picture (publish.c) */
    char key[PF_JOURNAL_KEY_LEN]; /* hash of its inputs and options (broker/journal.h) */
    int priority;
    char client[2 * IDENTITY_MAX + 1]; /* the submitter's key: its lane (broker/fair.h) */
    int preparing; /* its setup is on the helper thread (search NULL, not finished) */
    int restored;  /* from the journal: its journaled answers are replayed once prepared */
} request_t;

struct pf_broker {
    pf_broker_opts_t o;
    char endpoint[256];
    zsock_t *router;
    pf_dispatch_t *dispatch;
    pf_blobstore_t *blobs;
    zhashx_t *peers;    /* key -> peer_t */
    zhashx_t *requests; /* id -> request_t */
    zlistx_t *order;    /* request_t in submission order */
    zlistx_t *gone;     /* keys (strings) of peers found unreachable while sending */
    pf_auth_t *auth;    /* NULL: plain socket, every peer may be anything */
    uint64_t next_noop;
    double t_start_wall; /* monotonic, for the stats */
    double now;          /* the options' clock, read as each message arrives */
    pf_pack_buf_t pack;
    struct pf_broker_agents *agents; /* agent_proto.c */
    /* bench */
    zsock_t *pipe;
    long long noop_left;
    double noop_t0;
    pf_journal_t *journal; /* NULL: --journal none */
    pf_prep_t *prep;
    pf_fair_t *fair;
    /* stats */
    double max_stall_s, prep_max_s;
    long long restored, replayed_answers, journal_errors;
    double busy_s;
    long long msgs_in, msgs_out, malformed, nrequests, foreign;
    /* the HTTP face (publish.c); NULL without --http */
    pf_http_t *http;
    pf_latency_hist_t latency[PF_JOB_KIND_COUNT]; /* answers timed by kind */
};

/* ---- peers.c ---- */
void pf_broker_peer_free(void **item); /* the peers table's destructor */
/* The peer with this identity, created (PEER_NEW) on first sight; NULL when out of memory. */
peer_t *pf_broker_peer_get(pf_broker_t *b, const uint8_t *id, size_t len);
void pf_broker_peer_drop(pf_broker_t *b, peer_t *p); /* forgets p (and frees it) */
/* A worker taken out of the dispatch core without saying BYE: remembered as PEER_GONE. */
void pf_broker_peer_bury(peer_t *p);
/* A message the broker will not serve: counted always, logged once per peer. */
void pf_broker_malformed(pf_broker_t *b, peer_t *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int pf_broker_send(pf_broker_t *b, peer_t *p, pf_msg_t kind, const ProtobufCMessage *m);
void pf_broker_send_error(pf_broker_t *b, peer_t *p, int status, const char *msg);
void pf_broker_send_bye(pf_broker_t *b, peer_t *p, const char *reason);
/* Workers a send found unreachable leave the dispatch core (their jobs go to others). */
void pf_broker_drop_gone(pf_broker_t *b);

/* ---- access.c ---- */
/* Who sent this message (its first frame after the identity carries the connection's
 * "User-Id", the CURVE key zauth admitted): sets (*pp)->user and ->roles on first sight. A peer
 * whose routing id now comes with another key is a new peer (the old one is forgotten).
 * PF_OK, or PF_ERR: drop the message. */
int pf_broker_peer_admit(pf_broker_t *b, peer_t **pp, zmq_msg_t *frame);
/* May p send a message of this kind (its roles)? Counted and logged once when not. */
int pf_broker_peer_may_send(pf_broker_t *b, peer_t *p, pf_msg_t kind);
/* May p see (and cancel) r: its own, or p is an admin. */
int pf_broker_may_see(const peer_t *p, const request_t *r);
/* An answer for a job p was not sent: dropped, counted (b->foreign), logged once per peer. */
void pf_broker_foreign_answer(pf_broker_t *b, peer_t *p, const char *what, uint64_t job_id);
/* Is this blob an input of a job that worker p holds? */
int pf_broker_worker_may_fetch(pf_broker_t *b, peer_t *p, const uint8_t *hash, size_t len);

/* ---- requests.c ---- */
void pf_broker_request_free(request_t **r);
void pf_broker_request_item_free(void **item); /* the requests table's destructor */
/* Blobs, graph and cluster of a request that no longer runs; safe to call twice. */
void pf_broker_request_release(pf_broker_t *b, request_t *r);
/* Feed the dispatch core with what the search wants now, cancel what it no longer needs, and
 * finish the request when its search is done. */
void pf_broker_request_advance(pf_broker_t *b, request_t *r);
void pf_broker_request_status(pf_broker_t *b, request_t *r, Planfarm__RequestStatus *m);
request_t *pf_broker_request_find(pf_broker_t *b, const char *id);
/* Finished requests beyond max_finished go, oldest first. */
void pf_broker_requests_evict(pf_broker_t *b);
/* A fresh request id (128 random bits) and job-id high half (random, unused by the requests
 * remembered). */
int pf_broker_request_new_id(pf_broker_t *b, char *out, size_t len);
int pf_broker_request_new_seq(pf_broker_t *b, uint32_t *seq);
/* dispatch event: a job of a request failed max_attempts times */
void pf_broker_on_poisoned(void *ctx, void *owner, uint64_t owner_job, uint64_t job_id,
                           const char *error);

/* ---- intake.c ---- */
/* SUBMIT: keyed, journaled, answered "preparing", set up on the helper thread. */
void pf_broker_submit(pf_broker_t *b, peer_t *p, const uint8_t *data, size_t len);
/* Requests whose setup the helper thread finished go on (the loop polls pf_prep_sock). */
void pf_broker_prep_done(pf_broker_t *b);
/* Unfinished requests of the journal prepared again, finished ones listed (pf_broker_new). */
int pf_broker_restore(pf_broker_t *b, char *err, size_t errlen);
/* A finished request no longer in memory, by id (or, id NULL, the newest done one with key),
 * brought back from the journal; NULL when there is none. */
request_t *pf_broker_request_recall(pf_broker_t *b, const char *id, const char *key);
/* The journal's view of a request's end and of an answer its search used. */
void pf_broker_journal_end(pf_broker_t *b, request_t *r);
void pf_broker_journal_answer(pf_broker_t *b, request_t *r, uint64_t sid, const uint8_t *data,
                              size_t len);
/* Requests preparing or running (the max_running cap); of one client when client is not NULL. */
int pf_broker_requests_running(pf_broker_t *b, const char *client);
/* A job of a request into its client's lane; cancelled jobs leave the lane or the dispatch core;
 * a job the dispatch core no longer has frees its lane's quota. */
int pf_broker_queue_job(pf_broker_t *b, request_t *r, uint64_t sid, const pf_job_t *job);
void pf_broker_cancel_job(pf_broker_t *b, uint64_t job_id);
void pf_broker_cancel_jobs(pf_broker_t *b, request_t *r);
void pf_broker_job_left(pf_broker_t *b, uint64_t job_id);

/* ---- client_proto.c ---- */
void pf_broker_on_client(pf_broker_t *b, peer_t *p, pf_msg_t kind, const uint8_t *data,
                         size_t len);

/* ---- worker_proto.c ---- */
void pf_broker_on_worker_msg(pf_broker_t *b, peer_t *p, pf_msg_t kind, const uint8_t *data,
                             size_t len);
void pf_broker_send_job(pf_broker_t *b, const pf_dispatch_assign_t *a);
/* dispatch events */
void pf_broker_on_cancel(void *ctx, void *worker_user, uint64_t job_id);
void pf_broker_on_worker_dead(void *ctx, void *worker_user);

/* ---- agent_proto.c ---- */
int pf_broker_agents_init(pf_broker_t *b); /* PF_OK or PF_ERR (out of memory) */
void pf_broker_agents_free(pf_broker_t *b);
/* Messages of agents (REGISTER, MEASUREMENT; HEARTBEAT and BYE once registered) and a client's
 * PROFILE_CLUSTER; returns 0 when the message is not the agents' (the caller goes on). */
int pf_broker_on_agent_msg(pf_broker_t *b, peer_t *p, pf_msg_t kind, const uint8_t *data,
                           size_t len);
/* Once per heartbeat interval: heartbeats to agents, their liveness, a round's deadlines. */
void pf_broker_agents_tick(pf_broker_t *b);
/* Registered agents. */
int pf_broker_agents_count(const pf_broker_t *b);

/* ---- publish.c ---- */
/* Metrics and the request list to the HTTP face (once per heartbeat; nothing without one). */
void pf_broker_publish(pf_broker_t *b);
/* A request that just finished with a plan: its JSON and mapping picture to the HTTP face. */
void pf_broker_publish_plan(pf_broker_t *b, request_t *r, const pf_plan_t *plan);
/* A RESULT from worker w for job_id, before the dispatch core forgets the job: its latency. */
void pf_broker_time_answer(pf_broker_t *b, int w, uint64_t job_id);

#endif
