/* wire: the framing every message shares (DESIGN.md "The wire"). Frame 1 of every message is a
 * 4-byte header ("PF", version, kind); frame 2 is one protobuf message of proto/planfarm.proto,
 * built in an arena (proto/arena.h) and packed here; a broker's ROUTER adds the peer identity in
 * front. Reading one such message off a socket is shared by the broker and the worker so both
 * bound what a peer can make them hold in the same way. The bodies are model_codec.h's and
 * job_codec.h's. */
#ifndef PF_WIRE_H
#define PF_WIRE_H

#include "proto/planfarm.pb-c.h"

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>


#define PF_WIRE_VERSION 1
#define PF_WIRE_HEADER_LEN 4

typedef enum {
    /* worker -> broker */
    PF_MSG_READY = 1,
    PF_MSG_HEARTBEAT = 2, /* both ways */
    PF_MSG_RESULT = 3,
    PF_MSG_FAILED = 4,
    PF_MSG_FETCH = 5,
    PF_MSG_BYE = 6, /* both ways */
    /* broker -> worker */
    PF_MSG_JOB = 10,
    PF_MSG_BLOB = 11,
    PF_MSG_CANCEL = 12,
    /* client -> broker */
    PF_MSG_SUBMIT = 20,
    PF_MSG_STATUS = 21,
    PF_MSG_RESULT_REQ = 22,
    PF_MSG_CANCEL_REQ = 23,
    PF_MSG_LIST = 24,
    /* broker -> client */
    PF_MSG_SUBMIT_REPLY = 30, /* RequestStatus */
    PF_MSG_STATUS_REPLY = 31, /* RequestStatus */
    PF_MSG_RESULT_REPLY = 32, /* ResultReply */
    PF_MSG_LIST_REPLY = 34,   /* ListReply */
    PF_MSG_ERROR = 35,        /* ErrorReply */
    /* profiler agent -> broker (HEARTBEAT and BYE as workers send them) */
    PF_MSG_REGISTER = 40,    /* AgentRegister */
    PF_MSG_MEASUREMENT = 41, /* Measurement */
    /* broker -> agent */
    PF_MSG_PROFILE = 42, /* ProfileTask */
    /* client -> broker, and the answer */
    PF_MSG_PROFILE_CLUSTER = 43,      /* ProfileClusterRequest */
    PF_MSG_PROFILE_CLUSTER_REPLY = 44 /* ProfileClusterReply */
} pf_wire_msg_t;

const char *pf_wire_msg_name(int kind); /* "READY", ...; "?" when unknown */
void pf_wire_header(pf_wire_msg_t kind, uint8_t out[PF_WIRE_HEADER_LEN]);
/* PF_OK and the kind, or PF_EINPUT ("bad protocol tag", "protocol version 7, expected 1",
 * "unknown message kind 99"). */
int pf_wire_parse_header(const void *data, size_t size, pf_wire_msg_t *kind, char *err,
                         size_t errlen);

/* A request's state as people read it: "queued", "preparing", "running", "done", "failed",
 * "cancelled". */
const char *pf_wire_request_state_name(Planfarm__RequestState s);
/* 1 when the request will not change state again (done, failed or cancelled): a client polls
 * until then, whatever the states before it are. */
int pf_wire_request_state_ended(Planfarm__RequestState s);

/* Serialize any message into a malloc'd buffer. */
int pf_wire_pack(const ProtobufCMessage *m, uint8_t **buf, size_t *len);

/* Bounds on what a decoded message may ask us to allocate; ZMQ_MAXMSGSIZE bounds the bytes,
 * these bound the counts inside them. */
#define PF_WIRE_MAX_OPS (1 << 24)
/* A carried device model's text: a model file holds at most 16^3 table cells (DEVICES.md). */
#define PF_WIRE_MAX_DEVICE_JSON (1 << 20)
#define PF_WIRE_MAX_DEVICES (1 << 17) /* a hierarchy's 131,072 GPUs (issue 23) */
#define PF_WIRE_MAX_STAGE_REPLICAS (1 << 16)

/* Lower-case hex of a hash (or any bytes) into out (2 x len + 1 bytes): blob names in tables and
 * logs. */
void pf_wire_hex(const uint8_t *bytes, size_t len, char *out);

/* Receive one whole message without blocking. The first `max` frames land in parts[0..max-1]
 * (initialised; close them with pf_wire_close); any further frames are received and dropped.
 * Returns the number of frames the message had (so a caller sees "too many"), or 0 when nothing
 * was waiting. */
int pf_wire_recv(void *socket, zmq_msg_t *parts, int max);
/* Close the frames pf_wire_recv kept for a message of n frames. */
void pf_wire_close(zmq_msg_t *parts, int n, int max);

#endif
