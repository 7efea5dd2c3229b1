#include "proto/curve.h"
#include "planner/core/util.h"

#include <arpa/inet.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

int pf_curve_endpoint_is_local(const char *endpoint)
{
    if (!endpoint)
        return 0;
    if (!strncmp(endpoint, "ipc://", 6) || !strncmp(endpoint, "inproc://", 9))
        return 1;
    if (strncmp(endpoint, "tcp://", 6))
        return 0;
    const char *host = endpoint + 6, *colon = strrchr(host, ':');
    char addr[64];
    size_t n = colon ? (size_t)(colon - host) : 0;
    /* "src;dst" (a source address) and anything longer than an address are not looked into */
    if (n == 0 || n >= sizeof addr || memchr(host, ';', n))
        return 0;
    memcpy(addr, host, n);
    addr[n] = '\0';
    if (addr[0] == '[' && addr[n - 1] == ']') { /* [::1] */
        memmove(addr, addr + 1, n - 2);
        addr[n - 2] = '\0';
    }
    if (!strcmp(addr, "localhost"))
        return 1;
    struct in_addr v4;
    struct in6_addr v6;
    if (inet_pton(AF_INET, addr, &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127; /* 127.0.0.0/8 */
    if (inet_pton(AF_INET6, addr, &v6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&v6))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127; /* ::ffff:127.x.y.z */
    }
    return 0;
}

int pf_curve_check_plain(const char *who, const char *endpoint, int curve, int insecure,
                         char *err, size_t errlen)
{
    if (curve || pf_curve_endpoint_is_local(endpoint))
        return PF_OK;
    if (!insecure)
        return pf_fail(err, errlen, PF_EINPUT,
                       "%s: plain TCP on %s is refused: anyone on the network could read and "
                       "send requests and jobs. Give CurveZMQ keys (--cert, and --broker-key "
                       "for clients and workers; `planfarm keygen` makes them), use a "
                       "loopback or ipc:// endpoint, or pass --insecure on a network you trust",
                       who, endpoint);
    zsys_warning("%s: --insecure: plain TCP on %s, unauthenticated and unencrypted", who,
                 endpoint);
    return PF_OK;
}

static int all_zero(const byte *k)
{
    for (int i = 0; i < 32; i++)
        if (k[i])
            return 0;
    return 1;
}

zcert_t *pf_curve_load_secret(const char *path, char *err, size_t errlen)
{
    zcert_t *c = zcert_load(path);
    if (!c) {
        pf_fail(err, errlen, PF_EINPUT, "%s: cannot read a certificate (a file `planfarm keygen` "
                                        "wrote)", path);
        return NULL;
    }
    if (all_zero(zcert_secret_key(c))) {
        pf_fail(err, errlen, PF_EINPUT, "%s: holds no secret key (give the NAME_secret file)",
                path);
        goto fail;
    }
    char derived[PF_CURVE_KEY_TXT];
    if (zmq_curve_public(derived, zcert_secret_txt(c)) != 0 ||
        strcmp(derived, zcert_public_txt(c)) != 0) {
        pf_fail(err, errlen, PF_EINPUT, "%s: its public key is not the one of its secret key",
                path);
        goto fail;
    }
    return c;
fail:
    zcert_destroy(&c);
    return NULL;
}

zcert_t *pf_curve_load_public(const char *path, char *err, size_t errlen)
{
    zcert_t *c = zcert_load(path);
    if (!c || all_zero(zcert_public_key(c))) {
        zcert_destroy(&c);
        pf_fail(err, errlen, PF_EINPUT, "%s: cannot read a public certificate (a file `planfarm "
                                        "keygen` wrote)", path);
    }
    return c;
}

int pf_curve_client_init(pf_curve_client_t *k, const pf_curve_opts_t *o, const char *who,
                         const char *endpoint, char *err, size_t errlen)
{
    memset(k, 0, sizeof *k);
    int has_cert = o && o->cert, has_key = o && o->broker_key;
    if (has_cert != has_key)
        return pf_fail(err, errlen, PF_EINPUT, "%s: --cert and --broker-key go together (own "
                                               "secret cert, the broker's public cert)", who);
    if (pf_curve_check_plain(who, endpoint, has_cert, o && o->insecure, err, errlen) != PF_OK)
        return PF_EINPUT;
    if (!has_cert)
        return PF_OK;
    zcert_t *broker = pf_curve_load_public(o->broker_key, err, errlen);
    if (!broker)
        return PF_EINPUT;
    snprintf(k->broker_txt, sizeof k->broker_txt, "%s", zcert_public_txt(broker));
    zcert_destroy(&broker);
    if (!(k->own = pf_curve_load_secret(o->cert, err, errlen)))
        return PF_EINPUT;
    return PF_OK;
}

void pf_curve_client_apply(const pf_curve_client_t *k, zsock_t *s)
{
    if (!k || !k->own)
        return;
    zcert_apply(k->own, s);
    zsock_set_curve_serverkey(s, k->broker_txt);
}

void pf_curve_client_clear(pf_curve_client_t *k)
{
    if (k)
        zcert_destroy(&k->own);
}

int pf_curve_http_token(const uint8_t secret[32], const uint8_t peer_public[32],
                        char out[PF_CURVE_TOKEN_TXT])
{
    static const char label[] = "planfarm status page token v1";
    uint8_t shared[crypto_scalarmult_BYTES], tok[16];
    if (sodium_init() < 0 || crypto_scalarmult(shared, secret, peer_public) != 0)
        return PF_ERR;
    crypto_generichash(tok, sizeof tok, (const uint8_t *)label, sizeof label - 1, shared,
                       sizeof shared);
    sodium_memzero(shared, sizeof shared);
    for (size_t i = 0; i < sizeof tok; i++)
        snprintf(out + 2 * i, 3, "%02x", tok[i]);
    return PF_OK;
}
