#include "broker/auth.h"
#include "planner/core/util.h"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#define NROLES 4

struct pf_auth {
    zcert_t *own;
    zhashx_t *roles; /* Z85 public key -> roles, as a pointer-sized integer */
    zactor_t *zauth;
    zactor_t *watch;          /* reads the server socket's handshake failures (pf_auth_watch) */
    char watch_ep[64];        /* inproc endpoint of the socket's monitor */
    atomic_llong refused;     /* handshakes refused so far */
};

#define LOGGED_REFUSALS 20 /* one line each; past that, one line per 1000 */

/* zauth binds inproc://zeromq.zap.01 in CZMQ's one context: a second one cannot start. */
static atomic_int zauth_running;

const char *pf_auth_role_name(pf_role_t role)
{
    switch (role) {
    case PF_ROLE_CLIENT: return "client";
    case PF_ROLE_WORKER: return "worker";
    case PF_ROLE_AGENT: return "agent";
    case PF_ROLE_ADMIN: return "admin";
    }
    return "unknown";
}

static const char *const dir_flags[NROLES] = {"--clients", "--workers", "--agents", "--admins"};

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static int load_dir(pf_auth_t *a, int role_bit, const char *dir, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d)
        return pf_fail(err, errlen, PF_EINPUT, "%s %s: %s", dir_flags[role_bit], dir,
                       strerror(errno));
    int rc = PF_OK;
    struct dirent *e;
    while (rc == PF_OK && (e = readdir(d)) != NULL) {
        char path[4096];
        struct stat sb;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (ends_with(e->d_name, "_secret")) {
            rc = pf_fail(err, errlen, PF_EINPUT,
                         "%s %s: %s is a secret cert: an allow-list holds public certs only "
                         "(move it away and keep it private)",
                         dir_flags[role_bit], dir, e->d_name);
            break;
        }
        /* zcert_load(path) would prefer path_secret, which is not there (checked above) */
        zcert_t *c = pf_curve_load_public(path, err, errlen);
        if (!c) {
            rc = PF_EINPUT;
            break;
        }
        const char *key = zcert_public_txt(c);
        uintptr_t roles = (uintptr_t)zhashx_lookup(a->roles, key) | (1u << role_bit);
        if (zhashx_lookup(a->roles, key))
            zhashx_update(a->roles, key, (void *)roles);
        else if (zhashx_insert(a->roles, key, (void *)roles) != 0)
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        zcert_destroy(&c);
    }
    closedir(d);
    return rc;
}

bool pf_auth_wanted(const pf_auth_opts_t *o)
{
    bool any = o->cert != NULL;
    for (int r = 0; r < NROLES; r++)
        any = any || o->dirs[r] != NULL;
    return any;
}

pf_auth_t *pf_auth_new(const pf_auth_opts_t *o, char *err, size_t errlen)
{
    if (!o->cert) {
        for (int r = 0; r < NROLES; r++)
            if (o->dirs[r]) {
                pf_fail(err, errlen, PF_EINPUT, "%s needs --cert (the broker's secret cert)",
                        dir_flags[r]);
                return NULL;
            }
        pf_fail(err, errlen, PF_EINPUT, "no --cert: nothing to authenticate with");
        return NULL;
    }
    pf_auth_t *a = calloc(1, sizeof *a);
    if (!a || !(a->roles = zhashx_new())) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    if (!(a->own = pf_curve_load_secret(o->cert, err, errlen)))
        goto fail;
    for (int r = 0; r < NROLES; r++)
        if (o->dirs[r] && load_dir(a, r, o->dirs[r], err, errlen) != PF_OK)
            goto fail;
    return a;
fail:
    pf_auth_destroy(&a);
    return NULL;
}

void pf_auth_destroy(pf_auth_t **ap)
{
    if (!ap || !*ap)
        return;
    pf_auth_t *a = *ap;
    zactor_destroy(&a->watch);
    if (a->zauth) {
        zactor_destroy(&a->zauth);
        atomic_store(&zauth_running, 0);
    }
    zhashx_destroy(&a->roles);
    zcert_destroy(&a->own);
    free(a);
    *ap = NULL;
}

int pf_auth_start(pf_auth_t *a, char *err, size_t errlen)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&zauth_running, &expected, 1))
        return pf_fail(err, errlen, PF_ERR, "a CURVE broker already runs in this process (one "
                                            "zauth per process)");
    zcertstore_t *store = zcertstore_new(NULL); /* in memory; zauth takes it over */
    if (!store) {
        atomic_store(&zauth_running, 0);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    for (void *it = zhashx_first(a->roles); it; it = zhashx_next(a->roles)) {
        uint8_t pub[32];
        zmq_z85_decode(pub, zhashx_cursor(a->roles));
        zcert_t *c = zcert_new_from(pub, pub); /* the store looks at the public key only */
        if (c)
            zcertstore_insert(store, &c);
    }
    a->zauth = zactor_new(zauth, store);
    if (!a->zauth) {
        zcertstore_destroy(&store);
        atomic_store(&zauth_running, 0);
        return pf_fail(err, errlen, PF_ERR, "cannot start zauth");
    }
    return PF_OK;
}

void pf_auth_apply_server(const pf_auth_t *a, zsock_t *s)
{
    zcert_apply(a->own, s);
    zsock_set_curve_server(s, 1);
    zsock_set_zap_domain(s, "planfarm");
}

/* Why a handshake failed, from its monitor event. */
static const char *refusal(uint16_t event, uint32_t value)
{
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return value == 400 ? "its key is in no allow-list" : "the ZAP handler refused it";
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
        return "not a CURVE handshake with this broker's key (a plain client, or a wrong "
               "--broker-key)";
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        return "the peer hung up during the handshake (a plain client that saw the CURVE "
               "greeting first, or one that gave up)";
    return "the handshake failed"; /* not asked for */
}

/* The monitor's reader: counts and logs every failed handshake on the server socket. */
static void watch_actor(zsock_t *pipe, void *args)
{
    pf_auth_t *a = args;
    zsock_t *mon = zsock_new_pair(NULL);
    if (mon && zsock_connect(mon, "%s", a->watch_ep) != 0)
        zsock_destroy(&mon);
    zsock_signal(pipe, mon ? 0 : 1);
    if (!mon)
        return;
    zpoller_t *poller = zpoller_new(pipe, mon, NULL);
    for (void *which; poller && (which = zpoller_wait(poller, -1)) == mon;) {
        zmsg_t *m = zmsg_recv(mon);
        zframe_t *f = m ? zmsg_first(m) : NULL;
        char *where = m && zmsg_size(m) >= 2 ? zframe_strdup(zmsg_next(m)) : NULL;
        if (f && zframe_size(f) == 6) {
            uint16_t event;
            uint32_t value;
            memcpy(&event, zframe_data(f), 2);
            memcpy(&value, zframe_data(f) + 2, 4);
            long long n = atomic_fetch_add(&a->refused, 1) + 1;
            if (n <= LOGGED_REFUSALS || n % 1000 == 0)
                zsys_warning("broker: refused a CURVE handshake on %s: %s (%lld refused so far%s)",
                             where ? where : "?", refusal(event, value), n,
                             n == LOGGED_REFUSALS ? "; from now on one line per 1000" : "");
        }
        free(where);
        zmsg_destroy(&m);
    }
    zpoller_destroy(&poller);
    zsock_destroy(&mon);
}

int pf_auth_watch(pf_auth_t *a, zsock_t *server, char *err, size_t errlen)
{
    snprintf(a->watch_ep, sizeof a->watch_ep, "inproc://pf-auth-watch-%p", (void *)a);
    if (zmq_socket_monitor(zsock_resolve(server), a->watch_ep,
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               /* a plain client that reads the server's CURVE greeting first
                                * hangs up: the server then sees no protocol error, only the
                                * connection ending mid-handshake (which side parses first is a
                                * race, so both are refusals) */
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0 ||
        !(a->watch = zactor_new(watch_actor, a)))
        return pf_fail(err, errlen, PF_ERR, "cannot watch the CURVE handshakes: %s",
                       zmq_strerror(errno));
    return PF_OK;
}

long long pf_auth_refused(const pf_auth_t *a)
{
    return a ? atomic_load(&((pf_auth_t *)a)->refused) : 0;
}

int pf_auth_http_tokens(const pf_auth_t *a, pf_auth_token_fn *each, void *ctx)
{
    for (void *it = zhashx_first(a->roles); it; it = zhashx_next(a->roles)) {
        unsigned roles = (unsigned)(uintptr_t)it;
        const char *key = zhashx_cursor(a->roles);
        uint8_t pub[32];
        char token[PF_CURVE_TOKEN_TXT];
        if (!(roles & (PF_ROLE_CLIENT | PF_ROLE_ADMIN)))
            continue;
        if (!zmq_z85_decode(pub, key) ||
            pf_curve_http_token(zcert_secret_key(a->own), pub, token) != PF_OK ||
            each(ctx, token, key, (roles & PF_ROLE_ADMIN) != 0) != PF_OK)
            return PF_ERR;
    }
    return PF_OK;
}

unsigned pf_auth_roles(const pf_auth_t *a, const char *key_txt)
{
    return key_txt ? (unsigned)(uintptr_t)zhashx_lookup(a->roles, key_txt) : 0;
}

size_t pf_auth_keys(const pf_auth_t *a)
{
    return zhashx_size(a->roles);
}

const char *pf_auth_public_txt(const pf_auth_t *a)
{
    return zcert_public_txt(a->own);
}

static int fill_random(void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return PF_ERR;
        p += got;
        n -= (size_t)got;
    }
    return PF_OK;
}

int pf_auth_random_hex(const char *prefix, size_t nbytes, char *out, size_t outlen, char *err,
                  size_t errlen)
{
    uint8_t buf[64];
    size_t plen = strlen(prefix);
    if (nbytes > sizeof buf || outlen < plen + 2 * nbytes + 1)
        return pf_fail(err, errlen, PF_ERR, "random id: buffer too short");
    if (fill_random(buf, nbytes) != PF_OK)
        return pf_fail(err, errlen, PF_ERR, "random id: getrandom: %s", strerror(errno));
    memcpy(out, prefix, plen);
    for (size_t i = 0; i < nbytes; i++)
        snprintf(out + plen + 2 * i, 3, "%02x", buf[i]);
    return PF_OK;
}

int pf_auth_random_u32(uint32_t *out)
{
    do {
        if (fill_random(out, sizeof *out) != PF_OK)
            return PF_ERR;
    } while (*out == 0);
    return PF_OK;
}
