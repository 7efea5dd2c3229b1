#include "proto/peer_io.h"
#include "planner/core/util.h"

#include <czmq.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void pf_peer_io_pack_buf_free(pf_peer_io_pack_buf_t *pb)
{
    free(pb->buf);
    pb->buf = NULL;
    pb->cap = 0;
}

int pf_peer_io_send_raw(void *socket, const uint8_t *id, size_t id_len, pf_wire_msg_t kind,
                        const uint8_t *body, size_t len)
{
    uint8_t hdr[PF_WIRE_HEADER_LEN];
    pf_wire_header(kind, hdr);
    if (id && zmq_send(socket, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return PF_ERR;
    if (zmq_send(socket, hdr, sizeof hdr, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 && !id)
        return PF_ERR;
    /* once the first frame is queued the rest of the message goes with it */
    zmq_send(socket, body, len, ZMQ_DONTWAIT);
    return PF_OK;
}

int pf_peer_io_send(void *socket, const uint8_t *id, size_t id_len, pf_wire_msg_t kind,
                    const ProtobufCMessage *m, pf_peer_io_pack_buf_t *pb)
{
    size_t need = protobuf_c_message_get_packed_size(m);
    if (pf_grow((void **)&pb->buf, &pb->cap, need < 4096 ? 4096 : need, 1) != 0) {
        errno = ENOMEM;
        return PF_ERR;
    }
    size_t len = protobuf_c_message_pack(m, pb->buf);
    return pf_peer_io_send_raw(socket, id, id_len, kind, pb->buf, len);
}

void pf_peer_io_dropped(int *warned, const char *self, const char *peer, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pf_peer_io_vdropped(warned, self, peer, fmt, ap);
    va_end(ap);
}

void pf_peer_io_vdropped(int *warned, const char *self, const char *peer, const char *fmt,
                         va_list ap)
{
    if (warned && *warned)
        return;
    char msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    zsys_warning("%s: dropped a message from %s: %s (further ones from it are dropped silently)",
                 self, peer, msg);
    if (warned)
        *warned = 1;
}

void pf_peer_io_info(int quiet, const char *fmt, ...)
{
    if (quiet)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    zsys_info("%s", msg);
}

void pf_peer_io_actor_failed(void *pipe, const char *err)
{
    zstr_sendx(pipe, "ERROR", err, NULL);
    char *cmd;
    while ((cmd = zstr_recv(pipe)) != NULL) {
        int term = streq(cmd, "$TERM");
        free(cmd);
        if (term)
            break;
    }
}
