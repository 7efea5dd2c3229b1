/* auth: who may talk to the broker and as what (DESIGN.md "The wire", security).
 *
 * With a cert the broker's socket is a CurveZMQ server: every connection is encrypted and its
 * peer proves it holds the secret half of a public key. CZMQ's zauth actor answers the ZAP
 * requests (RFC 27) libzmq makes for each new connection; a key that is in none of the
 * allow-list directories is refused there, during the handshake, so an unknown key gets
 * nothing: no reply, no error, not even the broker's attention.
 *
 * zauth checks one certificate store per process and ignores ZAP domains, so the roles are not
 * told apart there: zauth is handed one in-memory store with the keys of every directory, and
 * the broker keeps a role map (public key -> roles) it consults for each message:
 *
 *   --clients DIR   client: SUBMIT, and STATUS, RESULT, CANCEL and LIST of its own requests
 *   --workers DIR   worker: READY, then answers to the jobs it was sent
 *   --agents DIR    profiler agent: admitted; the broker serves no agent messages yet
 *   --admins DIR    admin: a client that sees and cancels every request
 *
 * A key may sit in several directories and has the union of their roles. The directories are
 * read once, when the broker starts: a key added or removed takes effect at the next start.
 * Only one CURVE broker per process (zauth binds a fixed inproc endpoint). */
#ifndef PF_AUTH_H
#define PF_AUTH_H

#include "proto/curve.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    PF_ROLE_CLIENT = 1u << 0,
    PF_ROLE_WORKER = 1u << 1,
    PF_ROLE_AGENT = 1u << 2,
    PF_ROLE_ADMIN = 1u << 3,
} pf_role_t;

typedef struct {
    const char *cert;        /* the broker's secret cert; NULL: plain (no roles, no owners) */
    const char *dirs[4];     /* allow-lists by role: clients, workers, agents, admins (NULL:
                              * none), in the order of pf_role_t's bits */
    int insecure;            /* plain TCP off loopback allowed (a warning) */
} pf_auth_opts_t;

typedef struct pf_auth pf_auth_t;

/* Does o ask for CURVE (a cert or any allow-list)? Then pf_auth_new must succeed. */
bool pf_auth_wanted(const pf_auth_opts_t *o);
/* Reads the cert and the allow-lists into the role map. Files in an allow-list are public
 * certs; hidden files are skipped; a NAME_secret file or one that is not a cert is an error
 * naming it. Does not start zauth (pf_auth_start). */
pf_auth_t *pf_auth_new(const pf_auth_opts_t *o, char *err, size_t errlen);
void pf_auth_destroy(pf_auth_t **a); /* stops zauth */

/* Starts zauth with every listed key; call before the server socket binds. */
int pf_auth_start(pf_auth_t *a, char *err, size_t errlen);
/* The server's keys on s: CURVE server with the broker's cert. */
void pf_auth_apply_server(const pf_auth_t *a, zsock_t *s);

/* Roles of a Z85 public key; 0 when it is in no list. */
/* Counts and logs every handshake the server socket refuses (a key in no allow-list, a plain
 * client, a wrong broker key): a monitor on it, read on a thread of its own. Call once, after
 * pf_auth_apply_server; it stops with the socket and pf_auth_destroy. */
int pf_auth_watch(pf_auth_t *a, zsock_t *server, char *err, size_t errlen);
long long pf_auth_refused(const pf_auth_t *a); /* handshakes refused so far; 0 for NULL */
/* Every client and admin key's token for the status page (pf_curve_http_token, with the broker's
 * secret key), handed to each (token, the key's Z85 text, admin?). PF_OK, or the first failure. */
typedef int pf_auth_token_fn(void *ctx, const char *token, const char *key, bool admin);
int pf_auth_http_tokens(const pf_auth_t *a, pf_auth_token_fn *each, void *ctx);
unsigned pf_auth_roles(const pf_auth_t *a, const char *key_txt);
size_t pf_auth_keys(const pf_auth_t *a);         /* distinct keys listed */
const char *pf_auth_public_txt(const pf_auth_t *a); /* the broker's own public key */
const char *pf_auth_role_name(pf_role_t role);         /* "client", ..., for messages */

/* `nbytes` bytes from the kernel's CSPRNG (getrandom) as lower-case hex after `prefix`.
 * PF_ERR when the entropy source fails or `out` is too short. */
int pf_auth_random_hex(const char *prefix, size_t nbytes, char *out, size_t outlen, char *err,
                  size_t errlen);
/* A random 32-bit number, never 0. */
int pf_auth_random_u32(uint32_t *out);

#endif
