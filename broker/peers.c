#include "broker/peers.h"
#include "planner/core/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pf_peers_item_free(void **item)
{
    free(*item);
    *item = NULL;
}

peer_t *pf_peers_get(pf_broker_t *b, const uint8_t *id, size_t len)
{
    char key[2 * IDENTITY_MAX + 1];
    pf_wire_hex(id, len, key);
    peer_t *p = zhashx_lookup(b->peers, key);
    if (p)
        return p;
    if (!(p = calloc(1, sizeof *p)))
        return NULL;
    memcpy(p->key, key, sizeof key);
    memcpy(p->id, id, len);
    p->id_len = len;
    p->kind = PEER_NEW;
    p->worker = -1;
    snprintf(p->name, sizeof p->name, "peer %.12s", key);
    if (zhashx_insert(b->peers, key, p) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

void pf_peers_drop(pf_broker_t *b, peer_t *p)
{
    zhashx_delete(b->peers, p->key); /* frees p */
}

void pf_peers_bury(peer_t *p)
{
    p->kind = PEER_GONE;
    p->worker = -1;
}

void pf_peers_malformed(pf_broker_t *b, peer_t *p, const char *fmt, ...)
{
    b->malformed++;
    va_list ap;
    va_start(ap, fmt);
    pf_peer_io_vdropped(p ? &p->warned : NULL, "broker", p ? p->name : "a peer", fmt, ap);
    va_end(ap);
}

/* With ROUTER_MANDATORY a peer that is gone (EHOSTUNREACH) or whose queue is full (EAGAIN past
 * the high-water mark) makes the send fail; such a worker is dropped after the current
 * operation (pf_peers_drop_gone), a client only loses that reply. */
int pf_peers_send(pf_broker_t *b, peer_t *p, pf_wire_msg_t kind, const ProtobufCMessage *m)
{
    if (pf_peer_io_send(zsock_resolve(b->router), p->id, p->id_len, kind, m, &b->pack) != PF_OK) {
        int e = errno;
        if (e == ENOMEM) {
            zsys_error("broker: out of memory packing %s", pf_wire_msg_name(kind));
            return PF_ERR;
        }
        if (b->o.verbose || p->kind == PEER_WORKER)
            zsys_warning("broker: cannot send %s to %s: %s", pf_wire_msg_name(kind), p->name,
                         e == EHOSTUNREACH ? "peer is gone" : zmq_strerror(e));
        if (p->kind == PEER_WORKER)
            zlistx_add_end(b->gone, p->key);
        return PF_ERR;
    }
    b->msgs_out++;
    return PF_OK;
}

void pf_peers_send_error(pf_broker_t *b, peer_t *p, int status, const char *msg)
{
    Planfarm__ErrorReply m = PLANFARM__ERROR_REPLY__INIT;
    m.status = status;
    m.error = (char *)msg;
    pf_peers_send(b, p, PF_MSG_ERROR, &m.base);
}

void pf_peers_send_bye(pf_broker_t *b, peer_t *p, const char *reason)
{
    Planfarm__Bye m = PLANFARM__BYE__INIT;
    m.reason = (char *)reason;
    pf_peers_send(b, p, PF_MSG_BYE, &m.base);
}

void pf_peers_drop_gone(pf_broker_t *b)
{
    char *key;
    while ((key = zlistx_detach(b->gone, NULL)) != NULL) {
        peer_t *p = zhashx_lookup(b->peers, key);
        if (p && p->kind == PEER_WORKER) {
            zsys_warning("broker: worker %s is unreachable: its jobs go to others", p->name);
            b->workers_lost++;
            pf_dispatch_worker_remove(b->dispatch, p->worker, "worker unreachable");
            pf_peers_bury(p);
        }
        free(key);
    }
}
