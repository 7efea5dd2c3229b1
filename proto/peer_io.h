/* peer_io: what the broker and the worker both do with the peer at the other end of a socket:
 * pack a message into a reused buffer and send it without blocking, drop a message they will
 * not serve (logged once per peer), and log routine events unless told to be quiet. */
#ifndef PF_PEER_IO_H
#define PF_PEER_IO_H

#include "proto/wire.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* A packing buffer that grows to the largest message sent through it. */
typedef struct {
    uint8_t *buf;
    size_t cap;
} pf_peer_io_pack_buf_t;

void pf_peer_io_pack_buf_free(pf_peer_io_pack_buf_t *pb);

/* Frames [id,] header, body, each ZMQ_DONTWAIT: a peer that does not read is found by its
 * silence, never by a send that blocks. id NULL: no identity frame (a DEALER's own sends).
 * PF_OK, or PF_ERR with zmq's errno when the first frame could not be queued. */
int pf_peer_io_send_raw(void *socket, const uint8_t *id, size_t id_len, pf_wire_msg_t kind,
                        const uint8_t *body, size_t len);
/* Packs m into pb, then as pf_peer_io_send_raw; PF_ERR and errno ENOMEM when packing failed. */
int pf_peer_io_send(void *socket, const uint8_t *id, size_t id_len, pf_wire_msg_t kind,
                    const ProtobufCMessage *m, pf_peer_io_pack_buf_t *pb);

/* A message `self` drops from `peer`: a warning the first time (*warned set), silence after. */
void pf_peer_io_dropped(int *warned, const char *self, const char *peer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with the message's arguments as a va_list (a caller's own printf-like wrapper). */
void pf_peer_io_vdropped(int *warned, const char *self, const char *peer, const char *fmt,
                         va_list ap) __attribute__((format(printf, 4, 0)));

/* A routine event (requests, workers joining and leaving); warnings are never quiet. */
void pf_peer_io_info(int quiet, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A CZMQ actor (broker, worker, agent) that could not start: "ERROR" <err> on its pipe, then it
 * waits for the caller's $TERM (zactor_destroy sends it) before returning. `pipe` is the
 * actor's zsock_t. */
void pf_peer_io_actor_failed(void *pipe, const char *err);

#endif
