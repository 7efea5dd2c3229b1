#include "broker/http.h"
#include "planner/core/util.h"

#include <arpa/inet.h>
#include <czmq.h>
#include <dlfcn.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define HTTP_CONNECTIONS 64   /* at once; more wait in the kernel's backlog */
#define HTTP_TIMEOUT_S 10     /* an idle connection is closed after this */
#define PLAN_ID_MAX 64
#define OWNER_MAX 64 /* a CURVE key's Z85 text and its NUL fit */
#define TOKEN_MAX 128

/* libmicrohttpd is opened when a broker first serves HTTP, not linked: its TLS library and the
 * ten below it are most of the 3.3 ms that loading it adds to every planfarm process (`check`,
 * `partition`, `status` included), measured with perf stat on a program linked with and without
 * it. The header still gives the types and constants; these are its only entry points. */
static struct {
    __typeof__(MHD_start_daemon) *start_daemon;
    __typeof__(MHD_stop_daemon) *stop_daemon;
    __typeof__(MHD_get_daemon_info) *get_daemon_info;
    __typeof__(MHD_create_response_from_buffer) *create_response_from_buffer;
    __typeof__(MHD_add_response_header) *add_response_header;
    __typeof__(MHD_queue_response) *queue_response;
    __typeof__(MHD_destroy_response) *destroy_response;
    __typeof__(MHD_lookup_connection_value) *lookup_connection_value;
    char error[256]; /* empty when every entry point was found */
} mhd;
static pthread_once_t mhd_once = PTHREAD_ONCE_INIT;

static void mhd_load(void)
{
    /* the soname the header was written for (the unversioned name is only the -dev package's
     * link to it) */
    void *lib = dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(mhd.error, sizeof mhd.error, "cannot load libmicrohttpd (Debian package "
                 "libmicrohttpd12): %s", dlerror());
        return;
    }
    /* Never closed: the daemon's threads run its code until the process ends. */
#define MHD_SYM(field, name)                                                                     \
    if (!(*(void **)&mhd.field = dlsym(lib, name))) {                                            \
        snprintf(mhd.error, sizeof mhd.error, "libmicrohttpd has no %s", name);                  \
        return;                                                                                  \
    }
    MHD_SYM(start_daemon, "MHD_start_daemon")
    MHD_SYM(stop_daemon, "MHD_stop_daemon")
    MHD_SYM(get_daemon_info, "MHD_get_daemon_info")
    MHD_SYM(create_response_from_buffer, "MHD_create_response_from_buffer")
    MHD_SYM(add_response_header, "MHD_add_response_header")
    MHD_SYM(queue_response, "MHD_queue_response")
    MHD_SYM(destroy_response, "MHD_destroy_response")
    MHD_SYM(lookup_connection_value, "MHD_lookup_connection_value")
#undef MHD_SYM
}

typedef struct {
    char *json, *svg;
    size_t json_len, svg_len;
    char owner[OWNER_MAX];
} plan_t;

typedef struct {
    char owner[OWNER_MAX];
    bool admin;
} principal_t;

struct pf_http {
    struct MHD_Daemon *daemon;
    char url[320];
    pthread_mutex_t lock; /* guards everything below */
    char *metrics_text, *status_json;
    zhashx_t *plans;  /* id -> plan_t */
    bool guarded;     /* pf_http_guard: every path but / needs a token */
    zhashx_t *tokens; /* token -> principal_t */
};

/* The status page: one table, filled by its script from /api/status every two seconds. Names
 * and labels come from clients, so they are set as text, never as markup. */
static const char status_page[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\"><head><meta charset=\"utf-8\"><title>planfarm broker</title>\n"
    "<style>\n"
    "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\n"
    "table{border-collapse:collapse}td,th{padding:.25em .7em;border-bottom:1px solid #ddd;"
    "text-align:left}\n"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    ".done{color:#1a7f37}.failed,.cancelled{color:#b42318}.running{color:#0b5cad}\n"
    "#err{color:#b42318}\n"
    "</style></head><body>\n"
    "<h1>planfarm broker</h1>\n"
    "<p id=\"summary\">loading&hellip;</p><p id=\"err\"></p>\n"
    "<table><thead><tr><th>request</th><th>label</th><th>state</th><th>phase</th>"
    "<th>progress (answered / issued)</th><th>best objective (ms)</th><th>wall (s)</th>"
    "<th>plan</th></tr></thead>\n"
    "<tbody id=\"requests\"></tbody></table>\n"
    "<p><a id=\"metrics\" href=\"/metrics\">/metrics</a></p>\n"
    "<script>\n"
    "'use strict';\n"
    "const token = new URLSearchParams(location.search).get('token');\n"
    "const q = token ? '?token=' + encodeURIComponent(token) : '';\n"
    "if (q) document.getElementById('metrics').href += q;\n"
    "function cell(tr, text, cls) {\n"
    "  const td = document.createElement('td');\n"
    "  td.textContent = text;\n"
    "  if (cls) td.className = cls;\n"
    "  tr.appendChild(td);\n"
    "  return td;\n"
    "}\n"
    "function link(td, href, text) {\n"
    "  const a = document.createElement('a');\n"
    "  a.href = href;\n"
    "  a.textContent = text;\n"
    "  td.appendChild(a);\n"
    "  td.appendChild(document.createTextNode(' '));\n"
    "}\n"
    "function render(s) {\n"
    "  document.getElementById('summary').textContent = s.requests.length + ' request(s), ' +\n"
    "    s.workers + ' worker(s), ' + s.agents + ' agent(s), up ' + s.uptime_s.toFixed(0) + ' s';\n"
    "  const body = document.getElementById('requests');\n"
    "  const rows = [];\n"
    "  for (const r of s.requests) {\n"
    "    const tr = document.createElement('tr');\n"
    "    tr.id = 'req-' + r.id;\n"
    "    cell(tr, r.id);\n"
    "    cell(tr, r.label);\n"
    "    const state = cell(tr, r.state, r.state);\n"
    "    if (r.error) state.title = r.error;\n"
    "    cell(tr, r.phase);\n"
    "    const p = cell(tr, r.jobs_answered + ' / ' + r.jobs_issued + ' ', 'n');\n"
    "    const bar = document.createElement('progress');\n"
    "    bar.max = Math.max(r.jobs_issued, 1);\n"
    "    bar.value = r.jobs_answered;\n"
    "    p.appendChild(bar);\n"
    "    cell(tr, r.best_objective_ms === null ? '' : r.best_objective_ms.toFixed(3), 'n');\n"
    "    cell(tr, r.wall_s.toFixed(2), 'n');\n"
    "    const links = cell(tr, '');\n"
    "    if (r.plan) link(links, r.plan + q, 'plan.json');\n"
    "    if (r.mapping_svg) link(links, r.mapping_svg + q, 'mapping.svg');\n"
    "    rows.push(tr);\n"
    "  }\n"
    "  body.replaceChildren(...rows);\n"
    "}\n"
    "async function refresh() {\n"
    "  try {\n"
    "    const res = await fetch('/api/status' + q, {cache: 'no-store'});\n"
    "    if (!res.ok) throw new Error('HTTP ' + res.status + ': ' + await res.text());\n"
    "    render(await res.json());\n"
    "    document.getElementById('err').textContent = '';\n"
    "  } catch (e) {\n"
    "    document.getElementById('err').textContent = 'cannot read /api/status: ' + e.message;\n"
    "  }\n"
    "}\n"
    "refresh();\n"
    "setInterval(refresh, 2000);\n"
    "</script></body></html>\n";

static void plan_free(void **item)
{
    plan_t *p = *item;
    if (p) {
        free(p->json);
        free(p->svg);
        free(p);
    }
    *item = NULL;
}

static void principal_free(void **item)
{
    free(*item);
    *item = NULL;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const void *body, size_t len)
{
    struct MHD_Response *r =
        mhd.create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    mhd.add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    mhd.add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ok = mhd.queue_response(c, status, r);
    mhd.destroy_response(r);
    return ok;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned status, const char *msg)
{
    return reply(c, status, "text/plain; charset=utf-8", msg, strlen(msg));
}

/* "/api/plan/ID" or "/api/plan/ID/mapping.svg": the id into id[], whether the SVG is asked.
 * false when the path is neither (or the id is empty, too long, or holds a '/'). */
static bool plan_path(const char *url, char id[PLAN_ID_MAX], bool *svg)
{
    static const char prefix[] = "/api/plan/";
    if (strncmp(url, prefix, sizeof prefix - 1) != 0)
        return false;
    const char *s = url + sizeof prefix - 1;
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    if (n == 0 || n >= PLAN_ID_MAX)
        return false;
    *svg = slash != NULL;
    if (slash && strcmp(slash, "/mapping.svg") != 0)
        return false;
    memcpy(id, s, n);
    id[n] = '\0';
    return true;
}

/* Who asks: the principal of the token given as "Authorization: Bearer TOKEN" or "?token=TOKEN";
 * NULL when none or an unknown one. Under h->lock. */
static const principal_t *asker(pf_http_t *h, struct MHD_Connection *c)
{
    const char *auth = mhd.lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *tok = NULL;
    if (auth && !strncasecmp(auth, "Bearer ", 7))
        tok = auth + 7;
    if (!tok)
        tok = mhd.lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
    return tok && strlen(tok) < TOKEN_MAX ? zhashx_lookup(h->tokens, tok) : NULL;
}

/* /api/status as `who` may see it: its own requests (an admin: all), without their owners.
 * who NULL (an open server): everything, owners dropped too. A malloc'd text, NULL when out of
 * memory. */
static char *status_for(const char *published, const principal_t *who)
{
    json_t *root = json_loads(published, 0, NULL), *kept = json_array();
    json_t *list = root ? json_object_get(root, "requests") : NULL;
    char *text = NULL;
    if (!root || !kept || !json_is_array(list))
        goto done;
    size_t i;
    json_t *r;
    json_array_foreach(list, i, r) {
        const char *owner = json_string_value(json_object_get(r, "owner"));
        if (who && !who->admin && (!owner || strcmp(owner, who->owner) != 0))
            continue;
        json_object_del(r, "owner");
        json_array_append(kept, r);
    }
    if (json_object_set(root, "requests", kept) == 0)
        text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
done:
    json_decref(kept);
    json_decref(root);
    return text;
}

static enum MHD_Result serve_status(pf_http_t *h, struct MHD_Connection *c,
                                    const principal_t *who)
{
    if (!h->status_json)
        return text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "not published yet\n");
    char *mine = status_for(h->status_json, who);
    if (!mine)
        return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    enum MHD_Result ok = reply(c, MHD_HTTP_OK, "application/json", mine, strlen(mine));
    free(mine);
    return ok;
}

static enum MHD_Result serve_plan(pf_http_t *h, struct MHD_Connection *c, const char *id,
                                  bool svg, const principal_t *who)
{
    const plan_t *p = zhashx_lookup(h->plans, id);
    /* another's plan is answered as a made-up id is (the wire's rule) */
    if (!p || (who && !who->admin && strcmp(p->owner, who->owner) != 0))
        return text(c, MHD_HTTP_NOT_FOUND, "no finished plan with this id\n");
    if (!svg)
        return reply(c, MHD_HTTP_OK, "application/json", p->json, p->json_len);
    if (p->svg)
        return reply(c, MHD_HTTP_OK, "image/svg+xml", p->svg, p->svg_len);
    return text(c, MHD_HTTP_NOT_FOUND, "this plan has no mapping picture\n");
}

static enum MHD_Result unauthorized(struct MHD_Connection *c)
{
    static const char msg[] =
        "this broker has keys: its status page needs your token (`planfarm list --http-token` "
        "with your --cert and --broker-key prints it) as ?token=TOKEN or an Authorization: "
        "Bearer TOKEN header\n";
    struct MHD_Response *r =
        mhd.create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    mhd.add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"planfarm\"");
    mhd.add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ok = mhd.queue_response(c, MHD_HTTP_UNAUTHORIZED, r);
    mhd.destroy_response(r);
    return ok;
}

static enum MHD_Result serve(void *cls, struct MHD_Connection *c, const char *url,
                             const char *method, const char *version, const char *upload_data,
                             size_t *upload_data_size, void **con_cls)
{
    pf_http_t *h = cls;
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
    if (strcmp(url, "/") == 0) /* the page holds no data: its script asks with the token */
        return reply(c, MHD_HTTP_OK, "text/html; charset=utf-8", status_page,
                     sizeof status_page - 1);

    enum MHD_Result ok;
    char id[PLAN_ID_MAX];
    bool svg = false;
    pthread_mutex_lock(&h->lock);
    const principal_t *who = h->guarded ? asker(h, c) : NULL;
    if (h->guarded && !who) {
        ok = unauthorized(c);
    } else if (strcmp(url, "/metrics") == 0) {
        ok = h->metrics_text ? reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                                     h->metrics_text, strlen(h->metrics_text))
                             : text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "not published yet\n");
    } else if (strcmp(url, "/api/status") == 0) {
        ok = serve_status(h, c, who);
    } else if (plan_path(url, id, &svg)) {
        ok = serve_plan(h, c, id, svg, who);
    } else {
        ok = text(c, MHD_HTTP_NOT_FOUND, "not found\n");
    }
    pthread_mutex_unlock(&h->lock);
    return ok;
}

/* HOST:PORT, [HOST]:PORT or :PORT into host (empty: any) and port. */
static int split_addr(const char *addr, char *host, size_t hostlen, char *port, size_t portlen,
                      char *err, size_t errlen)
{
    const char *colon;
    const char *h = addr;
    size_t n;
    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');
        if (!close || close[1] != ':')
            return pf_fail(err, errlen, PF_EINPUT, "--http %s: expected [IPv6]:PORT", addr);
        h = addr + 1;
        n = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon)
            return pf_fail(err, errlen, PF_EINPUT, "--http %s: expected HOST:PORT or :PORT", addr);
        n = (size_t)(colon - addr);
    }
    if (n >= hostlen || strlen(colon + 1) >= portlen || !colon[1])
        return pf_fail(err, errlen, PF_EINPUT, "--http %s: expected HOST:PORT or :PORT", addr);
    memcpy(host, h, n);
    host[n] = '\0';
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 0 || p > 65535)
        return pf_fail(err, errlen, PF_EINPUT, "--http %s: port must be 0..65535", addr);
    snprintf(port, portlen, "%ld", p);
    return PF_OK;
}

pf_http_t *pf_http_new(const char *addr, char *err, size_t errlen)
{
    pthread_once(&mhd_once, mhd_load);
    if (mhd.error[0]) {
        pf_fail(err, errlen, PF_ERR, "--http: %s", mhd.error);
        return NULL;
    }
    struct addrinfo *ai = NULL;
    pf_http_t *h = calloc(1, sizeof *h);
    if (!h) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&h->lock, NULL);
    h->plans = zhashx_new();
    h->tokens = zhashx_new();
    if (!h->plans || !h->tokens) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    zhashx_set_destructor(h->plans, plan_free);
    zhashx_set_destructor(h->tokens, principal_free);

    char host[256], port[8];
    if (split_addr(addr ? addr : "", host, sizeof host, port, sizeof port, err, errlen) != PF_OK)
        goto fail;
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
    if (gai != 0) {
        pf_fail(err, errlen, PF_EINPUT, "--http %s: %s", addr, gai_strerror(gai));
        goto fail;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->daemon = mhd.start_daemon(flags, 0, NULL, NULL, serve, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTIONS,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S,
                                 MHD_OPTION_END);
    if (!h->daemon) {
        pf_fail(err, errlen, PF_ERR, "--http %s: cannot listen there (in use, or not an address "
                                     "of this machine)", addr);
        goto fail;
    }
    const union MHD_DaemonInfo *info = mhd.get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    unsigned bound = info ? info->port : (unsigned)atoi(port);
    char shown[INET6_ADDRSTRLEN] = "0.0.0.0";
    if (ai->ai_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, shown, sizeof shown);
    else
        inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, shown, sizeof shown);
    snprintf(h->url, sizeof h->url, ai->ai_family == AF_INET6 ? "http://[%s]:%u/" : "http://%s:%u/",
             shown, bound);
    freeaddrinfo(ai);
    return h;
fail:
    if (ai)
        freeaddrinfo(ai);
    pf_http_destroy(&h);
    return NULL;
}

void pf_http_destroy(pf_http_t **hp)
{
    if (!hp || !*hp)
        return;
    pf_http_t *h = *hp;
    if (h->daemon)
        mhd.stop_daemon(h->daemon);
    zhashx_destroy(&h->plans);
    zhashx_destroy(&h->tokens);
    free(h->metrics_text);
    free(h->status_json);
    pthread_mutex_destroy(&h->lock);
    free(h);
    *hp = NULL;
}

const char *pf_http_url(const pf_http_t *h)
{
    return h->url;
}

void pf_http_publish(pf_http_t *h, char *metrics_text, char *status_json)
{
    char *old_metrics = NULL, *old_status = NULL;
    pthread_mutex_lock(&h->lock);
    if (metrics_text) {
        old_metrics = h->metrics_text;
        h->metrics_text = metrics_text;
    }
    if (status_json) {
        old_status = h->status_json;
        h->status_json = status_json;
    }
    pthread_mutex_unlock(&h->lock);
    free(old_metrics);
    free(old_status);
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

void pf_http_guard(pf_http_t *h)
{
    pthread_mutex_lock(&h->lock);
    h->guarded = true;
    pthread_mutex_unlock(&h->lock);
}

int pf_http_allow(pf_http_t *h, const char *token, const char *owner, bool admin)
{
    if (!token || strlen(token) >= TOKEN_MAX || !owner || strlen(owner) >= OWNER_MAX)
        return PF_ERR;
    principal_t *p = calloc(1, sizeof *p);
    if (!p)
        return PF_ERR;
    snprintf(p->owner, sizeof p->owner, "%s", owner);
    p->admin = admin;
    pthread_mutex_lock(&h->lock);
    h->guarded = true;
    zhashx_delete(h->tokens, token);
    int rc = zhashx_insert(h->tokens, token, p);
    pthread_mutex_unlock(&h->lock);
    if (rc != 0) {
        free(p);
        return PF_ERR;
    }
    return PF_OK;
}

int pf_http_add_plan(pf_http_t *h, const char *id, const char *owner, const char *json,
                     size_t json_len, const char *svg, size_t svg_len)
{
    if (!id || strlen(id) >= PLAN_ID_MAX || !json || (owner && strlen(owner) >= OWNER_MAX))
        return PF_ERR;
    plan_t *p = calloc(1, sizeof *p);
    if (!p)
        return PF_ERR;
    snprintf(p->owner, sizeof p->owner, "%s", owner ? owner : "");
    p->json = dup_bytes(json, json_len);
    p->json_len = json_len;
    if (svg) {
        p->svg = dup_bytes(svg, svg_len);
        p->svg_len = svg_len;
    }
    if (!p->json || (svg && !p->svg)) {
        void *item = p;
        plan_free(&item);
        return PF_ERR;
    }
    pthread_mutex_lock(&h->lock);
    zhashx_delete(h->plans, id);
    int rc = zhashx_insert(h->plans, id, p);
    pthread_mutex_unlock(&h->lock);
    if (rc != 0) {
        void *item = p;
        plan_free(&item);
        return PF_ERR;
    }
    return PF_OK;
}

void pf_http_keep_plans(pf_http_t *h, const char *const *ids, size_t n)
{
    zhashx_t *keep = zhashx_new(); /* ids -> anything: a set, so this is linear */
    zlistx_t *drop = zlistx_new();
    if (!keep || !drop)
        goto done;
    zlistx_set_destructor(drop, (zlistx_destructor_fn *)zstr_free);
    zlistx_set_duplicator(drop, (zlistx_duplicator_fn *)strdup);
    for (size_t i = 0; i < n; i++)
        zhashx_insert(keep, ids[i], (void *)ids[i]);
    pthread_mutex_lock(&h->lock);
    for (plan_t *p = zhashx_first(h->plans); p; p = zhashx_next(h->plans)) {
        const char *key = zhashx_cursor(h->plans);
        if (!zhashx_lookup(keep, key))
            zlistx_add_end(drop, (void *)key);
    }
    for (const char *key = zlistx_first(drop); key; key = zlistx_next(drop))
        zhashx_delete(h->plans, key);
    pthread_mutex_unlock(&h->lock);
done:
    zhashx_destroy(&keep);
    zlistx_destroy(&drop);
}
