/* wire: reading one ZeroMQ message off a socket as the protocol expects it (DESIGN.md "The
 * wire": [identity,] header, body). Shared by the broker and the worker so both bound what a
 * peer can make them hold in the same way. */
#ifndef PF_WIRE_H
#define PF_WIRE_H

#include <zmq.h>

/* Receive one whole message without blocking. The first `max` frames land in parts[0..max-1]
 * (initialised; close them with pf_wire_close); any further frames are received and dropped.
 * Returns the number of frames the message had (so a caller sees "too many"), or 0 when nothing
 * was waiting. */
int pf_wire_recv(void *socket, zmq_msg_t *parts, int max);
/* Close the frames pf_wire_recv kept for a message of n frames. */
void pf_wire_close(zmq_msg_t *parts, int n, int max);

#endif
