/* http: the server on a loopback port the kernel picks, spoken to with a plain socket (HTTP/1.0,
 * one request per connection): what is served before and after a publish, plans and their
 * eviction, refused methods and paths, and addresses that are refused with a reason. */
#include "broker/http.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* One request; the whole response (status line, headers, body) into out. Returns the status
 * code, or -1 when the exchange failed. */
static int get_as(const pf_http_t *h, const char *method, const char *path, const char *auth,
                  char *out, size_t cap)
{
    unsigned port = 0;
    if (sscanf(pf_http_url(h), "http://127.0.0.1:%u/", &port) != 1)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char req[512];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: x\r\n%s%s%s\r\n", method, path,
                     auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "");
    size_t got = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    ssize_t r;
    while (got + 1 < cap && (r = read(fd, out + got, cap - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = '\0';
    close(fd);
    int status;
    return sscanf(out, "HTTP/1.%*d %d", &status) == 1 ? status : -1;
}

static int get(const pf_http_t *h, const char *method, const char *path, char *out, size_t cap)
{
    return get_as(h, method, path, NULL, out, cap);
}

static const char *body(const char *response)
{
    const char *b = strstr(response, "\r\n\r\n");
    return b ? b + 4 : "";
}

static char *copy_text(const char *s)
{
    char *d = malloc(strlen(s) + 1);
    if (d)
        strcpy(d, s);
    return d;
}

static void test_serve(void)
{
    char err[256] = "", out[8192];
    pf_http_t *h = pf_http_new("127.0.0.1:0", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT(strncmp(pf_http_url(h), "http://127.0.0.1:", 17) == 0);
    CU_ASSERT_STRING_NOT_EQUAL(pf_http_url(h), "http://127.0.0.1:0/");

    /* nothing published yet */
    CU_ASSERT_EQUAL(get(h, "GET", "/metrics", out, sizeof out), 503);
    CU_ASSERT_EQUAL(get(h, "GET", "/api/status", out, sizeof out), 503);
    /* the page needs nothing */
    CU_ASSERT_EQUAL(get(h, "GET", "/", out, sizeof out), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Content-Type: text/html"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "fetch('/api/status'"));

    pf_http_publish(h, copy_text("m 1\n"), copy_text("{\"requests\":[]}"));
    CU_ASSERT_EQUAL(get(h, "GET", "/metrics", out, sizeof out), 200);
    CU_ASSERT_STRING_EQUAL(body(out), "m 1\n");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Content-Type: text/plain; version=0.0.4"));
    /* a NULL text keeps the last one */
    pf_http_publish(h, copy_text("m 2\n"), NULL);
    CU_ASSERT_EQUAL(get(h, "GET", "/metrics", out, sizeof out), 200);
    CU_ASSERT_STRING_EQUAL(body(out), "m 2\n");
    CU_ASSERT_EQUAL(get(h, "GET", "/api/status", out, sizeof out), 200);
    CU_ASSERT_STRING_EQUAL(body(out), "{\"requests\":[]}");

    /* plans: r1 with a picture, r2 without */
    CU_ASSERT_EQUAL(pf_http_add_plan(h, "r1", NULL, "{\"a\":1}", 7, "<svg/>", 6), PF_OK);
    CU_ASSERT_EQUAL(pf_http_add_plan(h, "r2", NULL, "{\"b\":2}", 7, NULL, 0), PF_OK);
    CU_ASSERT_EQUAL(get(h, "GET", "/api/plan/r1", out, sizeof out), 200);
    CU_ASSERT_STRING_EQUAL(body(out), "{\"a\":1}");
    CU_ASSERT_EQUAL(get(h, "GET", "/api/plan/r1/mapping.svg", out, sizeof out), 200);
    CU_ASSERT_STRING_EQUAL(body(out), "<svg/>");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Content-Type: image/svg+xml"));
    CU_ASSERT_EQUAL(get(h, "GET", "/api/plan/r2/mapping.svg", out, sizeof out), 404);
    CU_ASSERT_EQUAL(get(h, "GET", "/api/plan/r1/other", out, sizeof out), 404);
    CU_ASSERT_EQUAL(get(h, "GET", "/api/plan/", out, sizeof out), 404);
    CU_ASSERT_EQUAL(get(h, "GET", "/nothing", out, sizeof out), 404);
    /* the broker evicted r1 */
    const char *keep[] = {"r2"};
    pf_http_keep_plans(h, keep, 1);
    CU_ASSERT_EQUAL(get(h, "GET", "/api/plan/r1", out, sizeof out), 404);
    CU_ASSERT_EQUAL(get(h, "GET", "/api/plan/r2", out, sizeof out), 200);
    CU_ASSERT_STRING_EQUAL(body(out), "{\"b\":2}");

    /* read-only */
    CU_ASSERT_EQUAL(get(h, "POST", "/metrics", out, sizeof out), 405);
    CU_ASSERT_EQUAL(get(h, "DELETE", "/api/plan/r2", out, sizeof out), 405);
    CU_ASSERT_EQUAL(get(h, "HEAD", "/metrics", out, sizeof out), 200);
    CU_ASSERT_STRING_EQUAL(body(out), "");

    pf_http_destroy(&h);
    CU_ASSERT_PTR_NULL(h);
    pf_http_destroy(&h); /* idempotent */
}

static void test_bad_addresses(void)
{
    char err[256];
    const struct {
        const char *addr, *why;
    } bad[] = {
        {"9710", "--http 9710: expected HOST:PORT or :PORT"},
        {"127.0.0.1:", "--http 127.0.0.1:: expected HOST:PORT or :PORT"},
        {"127.0.0.1:70000", "--http 127.0.0.1:70000: port must be 0..65535"},
        {"127.0.0.1:9x", "--http 127.0.0.1:9x: port must be 0..65535"},
        {"[::1:80", "--http [::1:80: expected [IPv6]:PORT"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        pf_http_t *h = pf_http_new(bad[i].addr, err, sizeof err);
        CU_ASSERT_PTR_NULL(h);
        CU_ASSERT_STRING_EQUAL(err, bad[i].why);
        pf_http_destroy(&h);
    }
    /* a port that is taken */
    pf_http_t *first = pf_http_new("127.0.0.1:0", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(first);
    char addr[64];
    unsigned port = 0;
    sscanf(pf_http_url(first), "http://127.0.0.1:%u/", &port);
    snprintf(addr, sizeof addr, "127.0.0.1:%u", port);
    pf_http_t *second = pf_http_new(addr, err, sizeof err);
    CU_ASSERT_PTR_NULL(second);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot listen there"));
    pf_http_destroy(&first);
}

/* A guarded server (a CURVE broker): no token, 401 (the page itself stays open: it holds no
 * data); a client's token shows its own requests and plans only, an admin's all; the owners
 * are never served. */
static void test_guard(void)
{
    char err[256] = "", out[8192];
    pf_http_t *h = pf_http_new("127.0.0.1:0", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(pf_http_allow(h, "tokA", "keyA", false), PF_OK);
    CU_ASSERT_EQUAL(pf_http_allow(h, "tokB", "keyB", false), PF_OK);
    CU_ASSERT_EQUAL(pf_http_allow(h, "tokAdm", "keyAdm", true), PF_OK);
    pf_http_publish(h, copy_text("m 1\n"),
                    copy_text("{\"workers\":1,\"requests\":[{\"id\":\"r1\",\"owner\":\"keyA\","
                              "\"label\":\"a\"},{\"id\":\"r2\",\"owner\":\"keyB\",\"label\":\"b\"}]}"));
    CU_ASSERT_EQUAL(pf_http_add_plan(h, "r1", "keyA", "{\"a\":1}", 7, NULL, 0), PF_OK);
    CU_ASSERT_EQUAL(pf_http_add_plan(h, "r2", "keyB", "{\"b\":2}", 7, NULL, 0), PF_OK);

    CU_ASSERT_EQUAL(get(h, "GET", "/", out, sizeof out), 200);
    const char *closed[] = {"/metrics", "/api/status", "/api/plan/r1", "/api/status?token=nope",
                            "/api/status?token="};
    for (size_t i = 0; i < sizeof closed / sizeof closed[0]; i++) {
        CU_ASSERT_EQUAL(get(h, "GET", closed[i], out, sizeof out), 401);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "WWW-Authenticate: Bearer"));
        CU_ASSERT_PTR_NOT_NULL(strstr(body(out), "planfarm list --http-token"));
    }
    CU_ASSERT_EQUAL(get_as(h, "GET", "/api/status", "Bearer nope", out, sizeof out), 401);

    CU_ASSERT_EQUAL(get(h, "GET", "/api/status?token=tokA", out, sizeof out), 200);
    CU_ASSERT_STRING_EQUAL(body(out), "{\"workers\":1,\"requests\":[{\"id\":\"r1\",\"label\":\"a\"}]}");
    CU_ASSERT_EQUAL(get_as(h, "GET", "/api/status", "Bearer tokB", out, sizeof out), 200);
    CU_ASSERT_STRING_EQUAL(body(out), "{\"workers\":1,\"requests\":[{\"id\":\"r2\",\"label\":\"b\"}]}");
    CU_ASSERT_EQUAL(get(h, "GET", "/api/status?token=tokAdm", out, sizeof out), 200);
    CU_ASSERT_STRING_EQUAL(body(out), "{\"workers\":1,\"requests\":[{\"id\":\"r1\",\"label\":"
                                      "\"a\"},{\"id\":\"r2\",\"label\":\"b\"}]}");

    CU_ASSERT_EQUAL(get(h, "GET", "/api/plan/r1?token=tokA", out, sizeof out), 200);
    CU_ASSERT_STRING_EQUAL(body(out), "{\"a\":1}");
    CU_ASSERT_EQUAL(get(h, "GET", "/api/plan/r2?token=tokA", out, sizeof out), 404);
    CU_ASSERT_STRING_EQUAL(body(out), "no finished plan with this id\n");
    CU_ASSERT_EQUAL(get_as(h, "GET", "/api/plan/r2", "Bearer tokAdm", out, sizeof out), 200);
    CU_ASSERT_EQUAL(get(h, "GET", "/metrics?token=tokB", out, sizeof out), 200);
    CU_ASSERT_STRING_EQUAL(body(out), "m 1\n");
    pf_http_destroy(&h);

    /* unguarded (a plain broker): everything open, the owners still not served */
    h = pf_http_new("127.0.0.1:0", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    pf_http_publish(h, NULL, copy_text("{\"requests\":[{\"id\":\"r1\",\"owner\":\"\"}]}"));
    CU_ASSERT_EQUAL(get(h, "GET", "/api/status", out, sizeof out), 200);
    CU_ASSERT_STRING_EQUAL(body(out), "{\"requests\":[{\"id\":\"r1\"}]}");
    pf_http_destroy(&h);
}

void pf_suite_http(void)
{
    CU_pSuite s = CU_add_suite("http", NULL, NULL);
    CU_add_test(s, "publish, plans, eviction, methods", test_serve);
    CU_add_test(s, "addresses refused with a reason", test_bad_addresses);
    CU_add_test(s, "tokens: own requests and plans only, admins all", test_guard);
}
