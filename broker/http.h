/* http: the broker's read-only HTTP face (libmicrohttpd, on MHD's own thread).
 *
 *   GET /                          the status page (HTML; its script polls /api/status)
 *   GET /metrics                   Prometheus text exposition (broker/metrics.h)
 *   GET /api/status                requests as JSON (a guarded server: the asker's own)
 *   GET /api/plan/ID               a finished request's plan (the JSON `planfarm result` gives)
 *   GET /api/plan/ID/mapping.svg   its devices coloured by stage (planner/sim/draw.h)
 *
 * The server never sees the broker: the broker's loop publishes what it serves (whole texts,
 * rendered by the loop) and the server hands out copies under one mutex. So nothing the loop
 * owns is read from a second thread, and a slow scraper cannot slow the loop beyond the time it
 * takes to swap two pointers. Anything but GET and HEAD is refused (405). */
#ifndef PF_HTTP_H
#define PF_HTTP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct pf_http pf_http_t;

/* Listens on addr, "HOST:PORT" (an IPv4 address or a name, "[IPv6]:PORT", or ":PORT" for every
 * interface; port 0: one the kernel picks). NULL and the reason on failure. Until the first
 * pf_http_publish, /metrics and /api/status answer 503. */
pf_http_t *pf_http_new(const char *addr, char *err, size_t errlen);
/* Stops the server thread (waits for it), then frees everything. */
void pf_http_destroy(pf_http_t **h);
/* "http://HOST:PORT/" with the port actually bound. */
const char *pf_http_url(const pf_http_t *h);

/* Replaces what /metrics and /api/status serve. Takes both malloc'd texts (NUL-terminated),
 * also on failure; a NULL text leaves that one as it was. */
void pf_http_publish(pf_http_t *h, char *metrics_text, char *status_json);

/* Access (a CURVE broker): after pf_http_guard every path but / answers 401 unless the request
 * carries a token given to pf_http_allow, as "Authorization: Bearer TOKEN" or "?token=TOKEN".
 * A token's owner (a client key's Z85 text) sees in /api/status only the requests whose
 * "owner" is its own, and only their plans (another's plan: 404, as an unknown id); an admin's
 * sees all; any token reads /metrics. Without pf_http_guard everything is open (a plain broker,
 * on loopback). The "owner" of each request in the published status is never served. */
void pf_http_guard(pf_http_t *h);
/* Guards h too. PF_OK, or PF_ERR (out of memory, a token or owner too long). */
int pf_http_allow(pf_http_t *h, const char *token, const char *owner, bool admin);

/* A finished request's plan JSON and mapping SVG (svg may be NULL: not drawn) and its owner
 * (NULL: ""). Copies them. PF_OK, or PF_ERR when out of memory (then nothing is kept for id). */
int pf_http_add_plan(pf_http_t *h, const char *id, const char *owner, const char *json,
                     size_t json_len, const char *svg, size_t svg_len);
/* Forgets every plan whose id is not among ids (the broker evicted those requests). */
void pf_http_keep_plans(pf_http_t *h, const char *const *ids, size_t n);

#endif
