/* Helpers shared by the CUnit suites. */
#ifndef PF_TESTUTIL_H
#define PF_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <math.h>
#include <stddef.h>

/* |a - b| <= tol * max(1, |a|, |b|) */
#define PF_ASSERT_CLOSE(a, b, tol)                                                              \
    CU_ASSERT(fabs((double)(a) - (double)(b)) <=                                                \
              (tol) * fmax(1.0, fmax(fabs((double)(a)), fabs((double)(b)))))

/* A fresh directory under $TMPDIR for this process; removed at exit. */
const char *pf_test_tmpdir(void);
/* Write text to <tmpdir>/<name>; returns the path (static buffer per call site not kept). */
char *pf_test_write(const char *name, const char *text);
/* Path of a reference data file: $PF_DATA/<rel> (PF_DATA defaults to tests/data). */
const char *pf_test_data(const char *rel, char *buf, size_t len);
/* Whether err, from the file name `file` on, begins with expect (the path before it varies);
 * when not, both are printed with the case number. */
int pf_test_err_from(const char *err, const char *file, const char *expect, size_t i);
/* The planfarm binary ($PF_BIN, default ./planfarm). */
const char *pf_test_bin(void);
/* Run a shell command; capture stdout+stderr (up to cap bytes) and return the exit status. */
int pf_test_run(const char *cmd, char *out, size_t cap);

/* Bound on a wait for something that must happen (a reply, a state): generous, since it only
 * ends a failing test; a passing one waits only as long as the event takes. */
#define PF_EVENT_WAIT_S 30.0

/* Registry: each tests/test_<name>.c defines `void pf_suite_<name>(void)` that adds its suite. */
#define PF_SUITE(name) void pf_suite_##name(void);



#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include <stdint.h>

/* A random DAG on n ops for brute-force tests: ops in index order, each op i > 0 gets one edge
 * from a random earlier op (so it is connected), plus extra edges i -> j (i < j) with
 * probability p_edge: skips and branches. Costs are random in [0.5, 10) ms, bytes in
 * [1e5, 1e8), params in [0, 1e8). Finalized; NULL on failure. */
pf_graph_t *pf_test_random_dag(uint64_t seed, int n, double p_edge);
/* A chain of n ops named op0.. in a graph named "hand": op i has fwd_ms cu[i], bwd_ms 0,
 * param_bytes param[i], mem_fwd_bytes act[i] (act NULL: 0); edges of 0 bytes. Finalized; NULL on
 * failure. For the hand-worked cases of the partition DPs. */
pf_graph_t *pf_test_chain(int n, const double *cu, const double *param, const double *act);
/* D devices named by index, two per host, 80 GB each, every link gbps and lat_us. */
pf_cluster_t *pf_test_flat_cluster(int D, double gbps, double lat_us);
/* Is the set of ops (bit v = op v, n <= 32) closed under predecessors? For brute force over the
 * downsets of a small graph. */
int pf_test_is_downset(const pf_graph_t *g, uint32_t set);

#include "planner/ir/cost.h"
/* A cost model without a cluster: flat bandwidth gbps, mb micro-batches, one stage, default
 * training, memory limit limit_bytes. */
void pf_test_cost_model(pf_cost_model_t *cm, double gbps, int mb, double limit_bytes);

#include "planner/search/search.h"

/* Calculon's GPT-3 13B (40 layers, hidden 5140 in 20 heads, ffn 20560, seq 2048, vocab 51200,
 * micro-batch 1) priced on a100-80g in fp16, and `machines` DGX A100 at Calculon's effective
 * links (NVLink 195 GB/s, 10 / 20 us) with inter_gbps per GPU between hosts (Calculon's
 * InfiniBand: 22.5): (1, 22.5) is bench/peers.sh's 13B-on-8 row. 0 or -1. */
int pf_test_gpt13b_dgx_a100(int machines, double inter_gbps, pf_graph_t **g, pf_cluster_t **c);

/* What pf_test_search saw besides the plan. */
typedef struct {
    long long jobs[PF_JOB_KIND_COUNT]; /* jobs run, by kind */
    pf_search_status_t status;         /* at the end */
    int graph_is_input;                /* it planned g itself, not a graph of its own (re-priced) */
} pf_test_search_t;

/* Runs search s to its end in process: every job run here as soon as it is issued, its answer
 * fed straight back; asserts each answer passes pf_search_check_answer and is taken once, each
 * job names the search's graph, and the search is done at the end. seen->jobs, when given,
 * counts the jobs by kind. */
void pf_test_search_drive(pf_search_t *s, pf_test_search_t *seen);

/* The whole search in process: every job run here as soon as it is issued, its answer fed
 * straight back; asserts each answer passes pf_search_check_answer and is taken once, each job
 * names the search's graph, and the search is done at the end. The plan, NULL (the reason on
 * stderr) when the search fails; seen, when given, what happened on the way. */
pf_plan_t *pf_test_search(const pf_graph_t *g, const pf_cluster_t *c, const pf_search_opts_t *o,
                          pf_test_search_t *seen);
#endif
