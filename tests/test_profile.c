/* profile: the planfarm binary (PF_BIN) with no CUDA library says so, measures the CPU, exits
 * 0, and writes a cluster that check and plan accept. */
#include "tests/testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define FAST "--sizes 4,64,1K,16K --reps 2"

/* A copy of the binary in a folder of its own: no libpfcuda.so beside it or in build/. */
static const char *lonely_bin(void)
{
    static char path[1024];
    char cmd[2048], out[512];
    snprintf(path, sizeof path, "%s/lonely/planfarm", pf_test_tmpdir());
    if (access(path, X_OK) != 0) {
        snprintf(cmd, sizeof cmd, "mkdir -p '%s/lonely' && cp '%s' '%s'", pf_test_tmpdir(),
                 pf_test_bin(), path);
        CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    }
    return path;
}

static void test_without_cuda(void)
{
    char cmd[4096], out[8192], cl[1024], g[1024];
    snprintf(cl, sizeof cl, "%s/cpu.json", pf_test_tmpdir());
    snprintf(cmd, sizeof cmd, "PF_CUDA_LIB= LD_LIBRARY_PATH= '%s' profile --local " FAST " -o '%s'",
             lonely_bin(), cl);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no CUDA probes: built without nvcc"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "zmq_tcp_pingpong"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "1 device (cpu) written"));

    snprintf(cmd, sizeof cmd, "'%s' check '%s'", pf_test_bin(), cl);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "1 device on 1 host"));

    json_error_t je;
    json_t *root = json_load_file(cl, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    json_t *d0 = json_array_get(json_object_get(json_object_get(root, "provenance"), "devices"), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d0, "source")), "cpu");
    CU_ASSERT(json_number_value(json_object_get(d0, "mem_gbps")) > 0);
    CU_ASSERT_STRING_EQUAL(
        json_string_value(json_object_get(json_array_get(json_object_get(root, "devices"), 0),
                                          "name")),
        "cpu");
    json_decref(root);

    snprintf(g, sizeof g, "%s/gpt.json", pf_test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "'%s' model gpt --layers 2 --hidden 256 --heads 4 --seq 64 --vocab 512 -o '%s' && "
             "'%s' plan '%s' '%s' -o '%s/plan.json'",
             pf_test_bin(), g, pf_test_bin(), g, cl, pf_test_tmpdir());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);

    /* --graph needs a GPU: it says why, writes nothing, exits 1 */
    snprintf(cmd, sizeof cmd,
             "PF_CUDA_LIB= '%s' profile --local --graph '%s' -o '%s/measured.json'; r=$?; "
             "test -e '%s/measured.json' && exit 9; exit $r", lonely_bin(), g, pf_test_tmpdir(), pf_test_tmpdir());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no CUDA probes: built without nvcc: cannot time"));
}

/* A file that is not a library where PF_CUDA_LIB points: the loader's reason, CPU mode, 0. */
static void test_broken_library(void)
{
    char cmd[4096], out[8192];
    const char *bogus = pf_test_write("libpfcuda.so", "not an ELF file\n");
    snprintf(cmd, sizeof cmd, "PF_CUDA_LIB='%s' '%s' profile --local " FAST " -q -o /dev/null",
             bogus, lonely_bin());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no CUDA probes: "));
    CU_ASSERT_PTR_NULL(strstr(out, "built without nvcc"));
}

static void test_usage(void)
{
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd, "'%s' profile --help", pf_test_bin());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: planfarm profile --local"));
    snprintf(cmd, sizeof cmd, "'%s' profile -o /dev/null", pf_test_bin());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "one of --local and --broker ENDPOINT is required"));
    snprintf(cmd, sizeof cmd, "'%s' profile --local --sizes 4", pf_test_bin());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "'%s' profile --local --sizes 4,2X", pf_test_bin());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "'%s' profile --local --reps 0", pf_test_bin());
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
}

void pf_suite_profile(void)
{
    CU_pSuite s = CU_add_suite("profile", NULL, NULL);
    CU_add_test(s, "no libpfcuda.so: message, exit 0, cluster checks and plans",
                test_without_cuda);
    CU_add_test(s, "a broken libpfcuda.so: the loader's reason, CPU mode", test_broken_library);
    CU_add_test(s, "--help and bad flags", test_usage);
}
