/* auth and curve without sockets: which endpoints count as local, the plain-TCP rule, reading
 * certs (and refusing bad ones), the role map of allow-list directories, random ids. The
 * broker's use of them over CurveZMQ is tests/integration/security.sh. */
#include "broker/auth.h"
#include "planner/core/util.h"
#include "proto/curve.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void test_local_endpoints(void)
{
    static const struct {
        const char *ep;
        int local;
    } cases[] = {
        {"tcp://127.0.0.1:5710", 1},      {"tcp://127.255.3.4:0", 1},
        {"tcp://127.0.0.1:*", 1},         {"tcp://localhost:5710", 1},
        {"tcp://[::1]:5710", 1},          {"tcp://[::ffff:127.0.0.9]:1", 1},
        {"ipc:///tmp/planfarm.sock", 1},  {"inproc://planfarm", 1},
        {"tcp://128.0.0.1:5710", 0},      {"tcp://126.255.255.255:1", 0},
        {"tcp://0.0.0.0:5710", 0},        {"tcp://*:5710", 0},
        {"tcp://10.1.2.3:5710", 0},       {"tcp://[::]:5710", 0},
        {"tcp://[::ffff:10.0.0.1]:1", 0}, {"tcp://eth0:5710", 0},
        {"tcp://broker.example:5710", 0}, {"tcp://127.0.0.1;10.0.0.1:5710", 0},
        {"tcp://127.0.0.1", 0},           {"udp://127.0.0.1:5710", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = pf_curve_endpoint_is_local(cases[i].ep);
        if (got != cases[i].local)
            fprintf(stderr, "\n  %s: local %d, expected %d\n", cases[i].ep, got, cases[i].local);
        CU_ASSERT_EQUAL(got, cases[i].local);
    }
    CU_ASSERT_EQUAL(pf_curve_endpoint_is_local(NULL), 0);
}

static void test_plain_rule(void)
{
    char err[512] = "";
    CU_ASSERT_EQUAL(pf_curve_check_plain("broker", "tcp://127.0.0.1:1", 0, 0, err, sizeof err),
                    PF_OK);
    CU_ASSERT_EQUAL(pf_curve_check_plain("broker", "tcp://10.0.0.1:1", 1, 0, err, sizeof err),
                    PF_OK); /* CURVE anywhere */
    CU_ASSERT_EQUAL(pf_curve_check_plain("broker", "tcp://10.0.0.1:1", 0, 1, err, sizeof err),
                    PF_OK); /* --insecure: a warning */
    CU_ASSERT_EQUAL(pf_curve_check_plain("worker", "tcp://10.0.0.1:1", 0, 0, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "worker: plain TCP on tcp://10.0.0.1:1 is refused"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--insecure"));
}

/* Writes a key pair as `planfarm keygen` does: dir/name and dir/name_secret. */
static zcert_t *keypair(const char *dir, const char *name)
{
    char path[512], secret[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(secret, sizeof secret, "%s_secret", path);
    zcert_t *c = zcert_new();
    zcert_save_public(c, path);
    zcert_save_secret(c, secret);
    return c;
}

static void test_load_certs(void)
{
    char dir[512], path[600], err[512];
    snprintf(dir, sizeof dir, "%s/certs", pf_test_tmpdir());
    mkdir(dir, 0700);
    zcert_t *a = keypair(dir, "a"), *b = keypair(dir, "b");

    snprintf(path, sizeof path, "%s/a_secret", dir);
    zcert_t *c = pf_curve_load_secret(path, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT(zcert_eq(c, a));
    zcert_destroy(&c);
    snprintf(path, sizeof path, "%s/a", dir); /* zcert_load finds a_secret beside it */
    CU_ASSERT_PTR_NOT_NULL(c = pf_curve_load_secret(path, err, sizeof err));
    zcert_destroy(&c);

    /* a public cert alone: no secret key */
    char lone[600];
    snprintf(lone, sizeof lone, "%s/lone", dir);
    zcert_save_public(a, lone);
    CU_ASSERT_PTR_NULL(pf_curve_load_secret(lone, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "holds no secret key"));
    CU_ASSERT_PTR_NOT_NULL(c = pf_curve_load_public(lone, err, sizeof err));
    CU_ASSERT_STRING_EQUAL(zcert_public_txt(c), zcert_public_txt(a));
    zcert_destroy(&c);

    /* a's public key with b's secret key: not a pair */
    zcert_t *mixed = zcert_new_from(zcert_public_key(a), zcert_secret_key(b));
    snprintf(path, sizeof path, "%s/mixed_secret", dir);
    zcert_save_secret(mixed, path);
    zcert_destroy(&mixed);
    CU_ASSERT_PTR_NULL(pf_curve_load_secret(path, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "is not the one of its secret key"));

    snprintf(path, sizeof path, "%s/missing", dir);
    CU_ASSERT_PTR_NULL(pf_curve_load_secret(path, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot read a certificate"));
    CU_ASSERT_PTR_NULL(pf_curve_load_public(path, err, sizeof err));

    /* the client side: cert and broker key come together */
    pf_curve_client_t k;
    pf_curve_opts_t o = {.cert = lone};
    CU_ASSERT_EQUAL(pf_curve_client_init(&k, &o, "client", "tcp://127.0.0.1:1", err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "go together"));
    snprintf(path, sizeof path, "%s/b_secret", dir);
    o = (pf_curve_opts_t){.cert = path, .broker_key = lone};
    CU_ASSERT_EQUAL(pf_curve_client_init(&k, &o, "client", "tcp://10.0.0.1:1", err, sizeof err),
                    PF_OK); /* keys: any endpoint */
    CU_ASSERT_STRING_EQUAL(k.broker_txt, zcert_public_txt(a));
    CU_ASSERT(zcert_eq(k.own, b));
    pf_curve_client_clear(&k);
    CU_ASSERT_EQUAL(pf_curve_client_init(&k, NULL, "client", "tcp://10.0.0.1:1", err, sizeof err),
                    PF_EINPUT); /* plain, off the machine */
    CU_ASSERT_EQUAL(pf_curve_client_init(&k, NULL, "client", "ipc:///x", err, sizeof err), PF_OK);
    CU_ASSERT_PTR_NULL(k.own);
    zcert_destroy(&a);
    zcert_destroy(&b);
}

/* clients: alice, bob; workers: w; admins: alice (again) and root. Roles are unions: alice is
 * client | admin = 1 | 8 = 9, bob 1, w 2, root 8; a key in no list 0. Five files, four keys. */
static void test_role_map(void)
{
    char base[512], d[4][600], cert[700], err[512];
    snprintf(base, sizeof base, "%s/roles", pf_test_tmpdir());
    mkdir(base, 0700);
    const char *names[] = {"clients", "workers", "broker", "admins"};
    for (int i = 0; i < 4; i++) {
        snprintf(d[i], sizeof d[i], "%s/%s", base, names[i]);
        mkdir(d[i], 0700);
    }
    zcert_t *broker = keypair(d[2], "broker");
    zcert_t *alice = keypair(base, "alice"), *bob = keypair(base, "bob"),
            *w = keypair(base, "w"), *root = keypair(base, "root"), *eve = keypair(base, "eve");
    char path[700];
    snprintf(path, sizeof path, "%s/alice", d[0]);
    zcert_save_public(alice, path);
    snprintf(path, sizeof path, "%s/bob", d[0]);
    zcert_save_public(bob, path);
    snprintf(path, sizeof path, "%s/.hidden", d[0]); /* skipped */
    FILE *f = fopen(path, "w");
    fputs("not a cert", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/w", d[1]);
    zcert_save_public(w, path);
    snprintf(path, sizeof path, "%s/alice", d[3]);
    zcert_save_public(alice, path);
    snprintf(path, sizeof path, "%s/root", d[3]);
    zcert_save_public(root, path);
    snprintf(cert, sizeof cert, "%s/broker_secret", d[2]);

    pf_auth_opts_t o = {.cert = cert, .dirs = {d[0], d[1], NULL, d[3]}};
    pf_auth_t *a = pf_auth_new(&o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(pf_auth_keys(a), 4);
    CU_ASSERT_EQUAL(pf_auth_roles(a, zcert_public_txt(alice)), 9);
    CU_ASSERT_EQUAL(pf_auth_roles(a, zcert_public_txt(bob)), PF_ROLE_CLIENT);
    CU_ASSERT_EQUAL(pf_auth_roles(a, zcert_public_txt(w)), PF_ROLE_WORKER);
    CU_ASSERT_EQUAL(pf_auth_roles(a, zcert_public_txt(root)), PF_ROLE_ADMIN);
    CU_ASSERT_EQUAL(pf_auth_roles(a, zcert_public_txt(eve)), 0);
    CU_ASSERT_EQUAL(pf_auth_roles(a, NULL), 0);
    CU_ASSERT_STRING_EQUAL(pf_auth_public_txt(a), zcert_public_txt(broker));
    pf_auth_destroy(&a);
    pf_auth_destroy(&a); /* idempotent */

    /* zauth once per process: the second start is refused, the first one's end frees it */
    pf_auth_t *a1 = pf_auth_new(&o, err, sizeof err), *a2 = pf_auth_new(&o, err, sizeof err);
    CU_ASSERT_EQUAL(pf_auth_start(a1, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_auth_start(a2, err, sizeof err), PF_ERR);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "already runs in this process"));
    pf_auth_destroy(&a1);
    CU_ASSERT_EQUAL(pf_auth_start(a2, err, sizeof err), PF_OK);
    pf_auth_destroy(&a2);

    /* a secret cert in an allow-list, a file that is no cert, a missing directory, no cert */
    snprintf(path, sizeof path, "%s/eve_secret", d[1]);
    zcert_save_secret(eve, path);
    CU_ASSERT_PTR_NULL(pf_auth_new(&o, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--workers"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "eve_secret is a secret cert"));
    remove(path);
    snprintf(path, sizeof path, "%s/notes.txt", d[3]);
    f = fopen(path, "w");
    fputs("hello\n", f);
    fclose(f);
    CU_ASSERT_PTR_NULL(pf_auth_new(&o, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "notes.txt: cannot read a public certificate"));
    remove(path);
    o.dirs[2] = "/nonexistent/agents";
    CU_ASSERT_PTR_NULL(pf_auth_new(&o, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--agents /nonexistent/agents"));
    o.dirs[2] = NULL;
    o.cert = NULL;
    CU_ASSERT_EQUAL(pf_auth_wanted(&o), 1);
    CU_ASSERT_PTR_NULL(pf_auth_new(&o, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--clients needs --cert"));
    pf_auth_opts_t none = {0};
    CU_ASSERT_EQUAL(pf_auth_wanted(&none), 0);

    zcert_destroy(&broker);
    zcert_destroy(&alice);
    zcert_destroy(&bob);
    zcert_destroy(&w);
    zcert_destroy(&root);
    zcert_destroy(&eve);
}

/* "r" + 16 bytes as 32 lower-case hex digits = 33 characters; 1000 draws are all different (a
 * repeat among 1000 draws of 128 bits has probability below 1000^2 / 2^129 ~ 1.5e-33). */
static void test_random_ids(void)
{
    char err[128], ids[1000][40];
    for (int i = 0; i < 1000; i++) {
        CU_ASSERT_EQUAL_FATAL(pf_auth_random_hex("r", 16, ids[i], sizeof ids[i], err, sizeof err),
                              PF_OK);
        CU_ASSERT_EQUAL(strlen(ids[i]), 33);
        CU_ASSERT_EQUAL(ids[i][0], 'r');
        CU_ASSERT_EQUAL(strspn(ids[i] + 1, "0123456789abcdef"), 32);
    }
    int repeats = 0;
    for (int i = 0; i < 1000; i++)
        for (int j = i + 1; j < 1000; j++)
            repeats += !strcmp(ids[i], ids[j]);
    CU_ASSERT_EQUAL(repeats, 0);
    char small[33]; /* one short of "r" + 32 digits + NUL */
    CU_ASSERT_EQUAL(pf_auth_random_hex("r", 16, small, sizeof small, err, sizeof err), PF_ERR);
    uint32_t u;
    for (int i = 0; i < 100; i++) {
        CU_ASSERT_EQUAL(pf_auth_random_u32(&u), PF_OK);
        CU_ASSERT(u != 0);
    }
}

void pf_suite_auth(void)
{
    CU_pSuite s = CU_add_suite("auth", NULL, NULL);
    CU_add_test(s, "local endpoints", test_local_endpoints);
    CU_add_test(s, "plain TCP only where local, or --insecure", test_plain_rule);
    CU_add_test(s, "certs: pairs, lone public certs, mismatched keys", test_load_certs);
    CU_add_test(s, "allow-lists: role map, bad files, zauth once", test_role_map);
    CU_add_test(s, "random request ids", test_random_ids);
}
