/* broker_state: the data the broker's files share and nothing outside broker/ sees: the broker
 * itself, its peers and its requests. It includes only the leaves and the options
 * (broker/broker_opts.h), never the loop's header (broker/broker.h), so that the loop can include
 * every file of the broker and none of them includes it back. The functions each file offers the others are in that
 * file's own header (broker/README.md lists them in the order a request passes through them,
 * and who calls whom). */
#ifndef PF_BROKER_STATE_H
#define PF_BROKER_STATE_H

#include "broker/blobstore.h"
#include "broker/broker_opts.h"
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
#include <stdbool.h>

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
    bool cancelled;
    double t_start, t_end;
    int workers_max;
    pf_search_status_t last; /* snapshot when it finished */
    char *plan_json;
    size_t plan_len;
    bool has_mapping_svg; /* the HTTP face holds its mapping picture (publish.c) */
    char key[PF_JOURNAL_KEY_LEN]; /* hash of its inputs and options (broker/journal.h) */
    int priority;
    char client[2 * IDENTITY_MAX + 1]; /* the submitter's key: its lane (broker/fair.h) */
    bool preparing; /* its setup is on the helper thread (search NULL, not finished) */
    bool restored;  /* from the journal: its journaled answers are replayed once prepared */
    int reruns;     /* answers being re-run on the helper thread: they borrow the search, graph
                     * and cluster, so it finishes (and frees them) only at 0 */
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
    double t_start_wall; /* monotonic, for the stats */
    double now;          /* the options' clock, read as each message arrives */
    pf_peer_io_pack_buf_t pack;
    struct pf_agent_proto *agents; /* agent_proto.c */
    pf_journal_t *journal; /* NULL: --journal none */
    pf_prep_t *prep;
    pf_fair_t *fair;
    /* stats */
    double max_stall_s, prep_max_s, rerun_max_s;
    long long reruns, workers_lost;
    long long restored, replayed_answers, journal_errors;
    double busy_s;
    long long msgs_in, msgs_out, malformed, nrequests, foreign;
    /* the HTTP face (publish.c); NULL without --http */
    pf_http_t *http;
    pf_metrics_latency_t latency[PF_JOB_KIND_COUNT]; /* answers timed by kind */
};

#endif
