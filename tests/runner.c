/* CUnit runner: one suite per module, registered from tests/test_<module>.c by name.
 * Usage: pf_tests [suite ...]   (no argument: every suite). Exits 1 when any assertion fails. */
#include "tests/testutil.h"

#include <CUnit/Basic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/suites.h"
#undef PF_SUITE
#define PF_SUITE(name) {#name, pf_suite_##name},
static const struct {
    const char *name;
    void (*add)(void);
} suites[] = {
#include "tests/suites.h"
};

static char tmpdir[512];

static void cleanup_tmp(void)
{
    if (tmpdir[0]) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmpdir);
    }
}

const char *pf_test_tmpdir(void)
{
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/pf_tests.XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            exit(1);
        }
        atexit(cleanup_tmp);
    }
    return tmpdir;
}

char *pf_test_write(const char *name, const char *text)
{
    static char paths[16][600];
    static int next;
    char *p = paths[next++ % 16];
    snprintf(p, 600, "%s/%s", pf_test_tmpdir(), name);
    FILE *f = fopen(p, "w");
    if (!f) {
        perror(p);
        return p;
    }
    fputs(text, f);
    fclose(f);
    return p;
}

const char *pf_test_data(const char *rel, char *buf, size_t len)
{
    const char *base = getenv("PF_DATA");
    snprintf(buf, len, "%s/%s", base ? base : "tests/data", rel);
    return buf;
}

const char *pf_test_bin(void)
{
    const char *b = getenv("PF_BIN");
    return b ? b : "./planfarm";
}

int pf_test_run(const char *cmd, char *out, size_t cap)
{
    char full[4096];
    snprintf(full, sizeof full, "(%s) 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p)
        return -1;
    size_t n = 0;
    if (out && cap) {
        size_t got;
        while (n + 1 < cap && (got = fread(out + n, 1, cap - n - 1, p)) > 0)
            n += got;
        out[n] = '\0';
    }
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0)
        ;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

int main(int argc, char **argv)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    size_t n = sizeof suites / sizeof suites[0];
    for (size_t i = 0; i < n; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++)
            want |= strcmp(argv[a], suites[i].name) == 0;
        if (want)
            suites[i].add();
    }
    CU_basic_set_mode(CU_BRM_NORMAL);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    if (run == 0) {
        fprintf(stderr, "no tests ran\n");
        return 1;
    }
    return failures ? 1 : 0;
}
