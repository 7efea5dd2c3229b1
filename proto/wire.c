#include "proto/wire.h"

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
