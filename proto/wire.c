#include "proto/wire.h"
#include "planner/core/util.h"

#include <stdlib.h>
#include <string.h>

static const char *const msg_names[] = {
    [PF_MSG_READY] = "READY",           [PF_MSG_HEARTBEAT] = "HEARTBEAT",
    [PF_MSG_RESULT] = "RESULT",         [PF_MSG_FAILED] = "FAILED",
    [PF_MSG_FETCH] = "FETCH",           [PF_MSG_BYE] = "BYE",
    [PF_MSG_JOB] = "JOB",               [PF_MSG_BLOB] = "BLOB",
    [PF_MSG_CANCEL] = "CANCEL",         [PF_MSG_SUBMIT] = "SUBMIT",
    [PF_MSG_STATUS] = "STATUS",         [PF_MSG_RESULT_REQ] = "RESULT_REQ",
    [PF_MSG_CANCEL_REQ] = "CANCEL_REQ", [PF_MSG_LIST] = "LIST",
    [PF_MSG_SUBMIT_REPLY] = "SUBMIT_REPLY", [PF_MSG_STATUS_REPLY] = "STATUS_REPLY",
    [PF_MSG_RESULT_REPLY] = "RESULT_REPLY", [PF_MSG_LIST_REPLY] = "LIST_REPLY",
    [PF_MSG_ERROR] = "ERROR",
    [PF_MSG_REGISTER] = "REGISTER",     [PF_MSG_MEASUREMENT] = "MEASUREMENT",
    [PF_MSG_PROFILE] = "PROFILE",       [PF_MSG_PROFILE_CLUSTER] = "PROFILE_CLUSTER",
    [PF_MSG_PROFILE_CLUSTER_REPLY] = "PROFILE_CLUSTER_REPLY",
};

const char *pf_wire_msg_name(int kind)
{
    if (kind < 0 || kind >= (int)(sizeof msg_names / sizeof msg_names[0]) || !msg_names[kind])
        return "?";
    return msg_names[kind];
}

void pf_wire_header(pf_wire_msg_t kind, uint8_t out[PF_WIRE_HEADER_LEN])
{
    out[0] = 'P';
    out[1] = 'F';
    out[2] = PF_WIRE_VERSION;
    out[3] = (uint8_t)kind;
}

int pf_wire_parse_header(const void *data, size_t size, pf_wire_msg_t *kind, char *err,
                         size_t errlen)
{
    const uint8_t *b = data;
    if (size != PF_WIRE_HEADER_LEN || b[0] != 'P' || b[1] != 'F')
        return pf_fail(err, errlen, PF_EINPUT, "bad protocol tag");
    if (b[2] != PF_WIRE_VERSION)
        return pf_fail(err, errlen, PF_EINPUT, "protocol version %d, expected %d", b[2],
                       PF_WIRE_VERSION);
    if (strcmp(pf_wire_msg_name(b[3]), "?") == 0)
        return pf_fail(err, errlen, PF_EINPUT, "unknown message kind %d", b[3]);
    *kind = (pf_wire_msg_t)b[3];
    return PF_OK;
}

const char *pf_wire_request_state_name(Planfarm__RequestState s)
{
    switch (s) {
    case PLANFARM__REQUEST_STATE__REQ_QUEUED: return "queued";
    case PLANFARM__REQUEST_STATE__REQ_RUNNING: return "running";
    case PLANFARM__REQUEST_STATE__REQ_DONE: return "done";
    case PLANFARM__REQUEST_STATE__REQ_FAILED: return "failed";
    case PLANFARM__REQUEST_STATE__REQ_PREPARING: return "preparing";
    default: return "cancelled";
    }
}

int pf_wire_request_state_ended(Planfarm__RequestState s)
{
    return s == PLANFARM__REQUEST_STATE__REQ_DONE || s == PLANFARM__REQUEST_STATE__REQ_FAILED ||
           s == PLANFARM__REQUEST_STATE__REQ_CANCELLED;
}

int pf_wire_pack(const ProtobufCMessage *m, uint8_t **buf, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    *buf = malloc(n ? n : 1);
    if (!*buf)
        return PF_ERR;
    *len = protobuf_c_message_pack(m, *buf);
    return PF_OK;
}

void pf_wire_hex(const uint8_t *bytes, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * len] = '\0';
}

/* ---- reading a message ---- */

int pf_wire_recv(void *socket, zmq_msg_t *parts, int max)
{
    zmq_msg_t spill;
    int n = 0, more;
    zmq_msg_init(&parts[0]);
    if (zmq_msg_recv(&parts[0], socket, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&parts[0]);
        return 0;
    }
    n = 1;
    more = zmq_msg_more(&parts[0]);
    while (more) {
        /* the rest of a message is already here: blocking reads cannot wait */
        zmq_msg_t *m = n < max ? &parts[n] : &spill;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, socket, 0) < 0) {
            zmq_msg_close(m);
            break;
        }
        more = zmq_msg_more(m);
        if (m == &spill)
            zmq_msg_close(m);
        n++;
    }
    return n;
}

void pf_wire_close(zmq_msg_t *parts, int n, int max)
{
    for (int i = 0; i < (n < max ? n : max); i++)
        zmq_msg_close(&parts[i]);
}
