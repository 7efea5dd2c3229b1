/* curve: CurveZMQ on the peers' side of the wire (DESIGN.md "The wire", security; RFC 26
 * CurveZMQ) and the rule for plain TCP.
 *
 * Keys are CZMQ zcert files, as `planfarm keygen NAME` writes them: NAME holds the public key,
 * NAME_secret both. A client or worker that is given its own secret cert and the broker's
 * public cert talks CURVE: its traffic is encrypted, and the broker knows it by its public key.
 * Without keys it talks plain TCP, which is allowed only where nothing leaves the machine
 * (loopback, ipc://, inproc://) unless the caller says it is insecure on purpose. */
#ifndef PF_CURVE_H
#define PF_CURVE_H

#include <czmq.h>
#include <stddef.h>

/* Z85 text of a 32-byte key, and its NUL. */
#define PF_CURVE_KEY_TXT 41

typedef struct {
    const char *cert;       /* own secret cert (NAME_secret, or NAME when NAME_secret is
                             * beside it); NULL: no CURVE */
    const char *broker_key; /* the broker's public cert (clients and workers only) */
    int insecure;           /* plain TCP off this machine allowed, with a warning */
} pf_curve_opts_t;

/* 1 when traffic on this endpoint never leaves the machine: ipc://, inproc://, or tcp:// on
 * 127.0.0.0/8, ::1 or "localhost" (names are not resolved: anything else counts as remote). */
int pf_curve_endpoint_is_local(const char *endpoint);

/* May `endpoint` carry traffic this way? CURVE (curve != 0) anywhere; plain TCP only when
 * pf_curve_endpoint_is_local or insecure (then a warning on the log naming `who`). PF_OK, or
 * PF_EINPUT and a message that says what to do. */
int pf_curve_check_plain(const char *who, const char *endpoint, int curve, int insecure,
                         char *err, size_t errlen);

/* A secret cert from a file, checked: it has a secret key and that key's public half is the
 * public key it names. NULL and the reason otherwise. */
zcert_t *pf_curve_load_secret(const char *path, char *err, size_t errlen);
/* A public cert from a file (the secret half, if any, is not used). */
zcert_t *pf_curve_load_public(const char *path, char *err, size_t errlen);

/* A client's or a worker's keys: its own cert and the broker's public key. */
typedef struct {
    zcert_t *own; /* NULL: plain */
    char broker_txt[PF_CURVE_KEY_TXT];
} pf_curve_client_t;

/* Loads o's files and checks the endpoint (pf_curve_check_plain): cert and broker_key come
 * together or not at all. o NULL: plain, local endpoints only. */
int pf_curve_client_init(pf_curve_client_t *k, const pf_curve_opts_t *o, const char *who,
                         const char *endpoint, char *err, size_t errlen);
/* Before connect: the socket's CURVE keys (nothing when plain). */
void pf_curve_client_apply(const pf_curve_client_t *k, zsock_t *s);
void pf_curve_client_clear(pf_curve_client_t *k);

/* The status page's token of one key (broker/http.h): 32 hex digits, a BLAKE2b hash of the
 * CURVE shared secret of that key and the broker's, so the key's owner derives it from its
 * secret key and the broker's public key, and the broker from its secret key and the key's
 * public key; nobody else can. PF_OK, or PF_ERR (a key that gives no shared secret). */
#define PF_CURVE_TOKEN_TXT 33
int pf_curve_http_token(const uint8_t secret[32], const uint8_t peer_public[32],
                        char out[PF_CURVE_TOKEN_TXT]);

#endif
