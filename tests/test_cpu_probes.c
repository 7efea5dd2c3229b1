/* cpu_probes: the loopback ping-pong and the STREAM copy. Timings are not checked (they depend
 * on load); what is checked: every size is answered with its own bytes, records are filled and
 * say "cpu", timeouts and bad sizes are errors. */
#include "planner/core/util.h"
#include "profiler/cpu_probes.h"
#include "tests/testutil.h"

#include <string.h>
#include <unistd.h>

static void test_pingpong(void)
{
    char err[256];
    pf_cpu_probes_echo_t *e = pf_cpu_probes_echo_new("tcp://127.0.0.1:*", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(strncmp(pf_cpu_probes_echo_endpoint(e), "tcp://127.0.0.1:", 16), 0);
    double sizes[4] = {4, 1024, 65536, 1048576};
    pf_record_link_t r;
    CU_ASSERT_EQUAL_FATAL(pf_cpu_probes_pingpong_rec(pf_cpu_probes_echo_endpoint(e), "a", "b",
                                                     sizes, 4, 3, 10.0, &r, err, sizeof err),
                          PF_OK);
    CU_ASSERT_EQUAL(r.nsizes, 4);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(r.bytes[i], sizes[i]);
        CU_ASSERT(r.ms[i] > 0);
    }
    CU_ASSERT_EQUAL(r.source, PF_SRC_CPU);
    CU_ASSERT_STRING_EQUAL(pf_record_source_name(r.source), "cpu");
    CU_ASSERT_STRING_EQUAL(r.method, "zmq_tcp_pingpong");
    CU_ASSERT_STRING_EQUAL(r.src_host, "a");
    CU_ASSERT_EQUAL(r.src_index, PF_END_HOST);
    CU_ASSERT(r.measured_by[0] != '\0' && r.when_unix_s > 1e9);

    /* nobody answers once the echo is gone */
    char ep[256];
    snprintf(ep, sizeof ep, "%s", pf_cpu_probes_echo_endpoint(e));
    pf_cpu_probes_echo_destroy(&e);
    pf_cpu_probes_echo_destroy(&e);
    double ms[1];
    CU_ASSERT_EQUAL(pf_cpu_probes_pingpong(ep, sizes, 1, 1, 0.2, ms, err, sizeof err), PF_ERR);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no answer"));
    double zero[1] = {0};
    CU_ASSERT_EQUAL(pf_cpu_probes_pingpong(ep, zero, 1, 1, 0.2, ms, err, sizeof err), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_cpu_probes_pingpong(ep, sizes, 0, 1, 0.2, ms, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NULL(pf_cpu_probes_echo_new("tcp://256.0.0.1:1", err, sizeof err));
}

static void test_memory(void)
{
    char err[256];
    double gbps = -1;
    CU_ASSERT_EQUAL(pf_cpu_probes_mem_gbps((size_t)8 << 20, 2, &gbps, err, sizeof err), PF_OK);
    CU_ASSERT(gbps > 0);
    CU_ASSERT_EQUAL(pf_cpu_probes_mem_gbps(0, 2, &gbps, err, sizeof err), PF_EINPUT);
    pf_record_device_t d;
    pf_cpu_probes_device_rec(&d, 12.5);
    CU_ASSERT_STRING_EQUAL(d.name, "cpu");
    CU_ASSERT_EQUAL(d.source, PF_SRC_CPU);
    CU_ASSERT_EQUAL(d.mem_gbps, 12.5);
    CU_ASSERT_EQUAL(d.mem_bytes, (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE));
    CU_ASSERT_STRING_EQUAL(d.host, d.measured_by);
}

void pf_suite_cpu_probes(void)
{
    CU_pSuite s = CU_add_suite("cpu_probes", NULL, NULL);
    CU_add_test(s, "loopback ping-pong: every size answered, record says cpu", test_pingpong);
    CU_add_test(s, "STREAM copy and the cpu device record", test_memory);
}
