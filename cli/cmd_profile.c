/* planfarm profile --local: measure this host's GPUs (or, without any, its CPU and loopback
 * network) and write a cluster file; with --graph, a graph with measured op times.
 * planfarm profile --broker EP: a profiling round over the broker's agents, the cluster it
 * assembles written out. */
#include "cli/cli.h"
#include "client/client.h"
#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/core/util.h"
#include "planner/inputs/assemble.h"
#include "profiler/record.h"
#include "profiler/calibrate.h"
#include "profiler/cuda_loader.h"
#include "profiler/local.h"
#include "profiler/sweep.h"
#include "proto/profile_codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "profile"

static void help(FILE *f)
{
    fprintf(f,
            "usage: planfarm profile --local [flags] [-o CLUSTER]\n"
            "       planfarm profile --local --graph GRAPH [flags] [-o MEASURED_GRAPH]\n"
            "       planfarm profile --local --sweep [--quick] [--soak-ms MS] [--device N]\n"
            "                        [-o SWEEP]\n"
            "       planfarm profile --broker ENDPOINT [--sizes L] [--reps N] [--timeout S]\n"
            "                        [--stream-mb N] [--name NAME] [-o CLUSTER]\n\n"
            "Measures this host and writes a cluster file whose bandwidth and latency matrices\n"
            "are postal-model fits (latency + bytes / bandwidth, Parmesan's p2p look-up table)\n"
            "of copy sweeps, with a \"provenance\" section: who measured what and when, cpu or\n"
            "gpu, each fit's error and the look-up table below the size where the fit holds.\n\n"
            "With the CUDA probes (libpfcuda.so, built by make where nvcc is found) and a GPU:\n"
            "one device per GPU with its measured bf16 GEMM TFLOP/s (8192^3) and HBM copy\n"
            "bandwidth; copy sweeps for every ordered GPU pair (peer access on, and off with\n"
            "--peer-off) and host <-> device; NCCL all-reduce and all-gather bus bandwidth when\n"
            "libnccl loads. Without them (\"no CUDA probes: built without nvcc\", or \"no GPU\n"
            "found\") the host itself is written as one device named \"cpu\" (its RAM, its\n"
            "STREAM copy bandwidth, tflops 0 = unknown) and a loopback TCP ping-pong is measured\n"
            "and shown; such a one-device cluster checks and plans (one stage), and says \"cpu\"\n"
            "in its provenance. Exit status 0 in both cases.\n\n"
            "--graph times every op of GRAPH on GPU --device by its shape class (GEMMs with\n"
            "cuBLAS; layernorm, softmax, elementwise and unfused attention kernels) and writes\n"
            "the graph with measured fwd_ms/bwd_ms; ops with no probe (embedding, conv, missing\n"
            "shapes) keep their analytic cost and are listed. It needs a GPU: without one it\n"
            "says why and exits 1, writing nothing.\n\n"
            "With --broker, the broker runs a round over its agents (planfarm agent, one per\n"
            "host): each measures its own devices, then each pair of hosts measures the\n"
            "network between them (one echoes, the other runs the ping-pong sweep); the broker\n"
            "assembles the cluster from every record and sends it back. What failed is listed\n"
            "on stderr; a cluster with a pair nobody measured is refused, never invented.\n\n"
            "  --local           profile this host\n"
            "  --sweep           the measurements a device model is fitted to, on GPU --device:\n"
            "                    bf16 GEMMs over a grid of (m, n, k) from 256 to 16k, fp16/fp32\n"
            "                    squares, attention's batched GEMMs and unfused operator, HBM\n"
            "                    copies from 1 MiB to 4 GiB, elementwise/layernorm/softmax over\n"
            "                    sizes; JSON records (format planfarm-device-sweep). Needs a GPU\n"
            "  --quick           with --sweep: two sizes per axis (a first look; seconds)\n"
            "  --soak-ms MS      with --sweep: run each op probe untimed at least this long\n"
            "                    first (default %d; 0: not), so that each record is the GPU's\n"
            "                    steady state under that op: its clock falls under the power\n"
            "                    limit as GEMMs run back to back, as in training\n"
            "  --broker EP       profile the broker's agents, e.g. tcp://127.0.0.1:5710\n"
            "  --timeout S       with --broker: seconds to wait for the round (default 600); the\n"
            "                    broker gives each probe task a tenth of it\n"
            "  --stream-mb N     with --broker: STREAM array size on CPU hosts (default 256)\n"
            "  -o, --output FILE the cluster (or, with --graph, the measured graph); default or\n"
            "                    -: stdout. Tables and progress go to stderr\n"
            "  --cluster-out F   with --graph: also write the cluster to F\n"
            "  --graph GRAPH     calibrate this graph's op times\n"
            "  --device N        GPU for --graph (default 0)\n"
            "  --dtype T         bf16 (default), fp16 or fp32 for --graph\n"
            "  --sizes LIST      copy sweep sizes, comma-separated, K/M/G = 2^10/2^20/2^30\n"
            "                    (default 4,16,64,...,256M by x4 for GPU copies, to 16M for\n"
            "                    the ping-pong; 2 .. %d sizes)\n"
            "  --reps N          timed runs per measurement (default 10): the median of GPU\n"
            "                    runs, the fastest network round trip\n"
            "  --peer-off        also sweep every GPU pair with peer access off\n"
            "  --name NAME       cluster name (default: profiled-<host>)\n"
            "  --matrix          with --local: keep the dense matrix (format 1) even when the\n"
            "                    measurements fit a hierarchy (format 2: equal hosts, links\n"
            "                    within 10%% of their medians), which is written otherwise\n"
            "  -q, --quiet       no tables\n",
            PF_SWEEP_SOAK_MS, PF_SWEEP_MAX);
}

/* "4,64K,1M" into sizes; -1 after a usage message. */
static int parse_sizes(const char *arg, pf_local_opts_t *o)
{
    const char *p = arg;
    o->nsizes = 0;
    while (*p) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v >= 1)) {
            cli_usage_error(CMD, "--sizes: '%s': expected positive sizes like 4,64K,1M", arg);
            return -1;
        }
        double mul = *end == 'K' ? 1024.0 : *end == 'M' ? 1048576.0 : *end == 'G' ? 1073741824.0
                                                                                  : 1;
        if (mul > 1)
            end++;
        if ((*end && *end != ',') || o->nsizes == PF_SWEEP_MAX || v * mul > 1073741824.0) {
            cli_usage_error(CMD, "--sizes: '%s': at most %d sizes of at most 1G, comma-separated",
                            arg, PF_SWEEP_MAX);
            return -1;
        }
        o->sizes[o->nsizes++] = v * mul;
        p = *end ? end + 1 : end;
    }
    if (o->nsizes < 2) {
        cli_usage_error(CMD, "--sizes: '%s': at least 2 sizes for a fit", arg);
        return -1;
    }
    return 0;
}

static void progress_bar(void *ctx, int done, int total, const char *what)
{
    (void)ctx;
    int width = 30, fill = total > 0 ? done * width / total : width;
    fprintf(stderr, "\r[%.*s%*s] %3d/%-3d %-48.48s", fill, "##############################",
            width - fill, "", done, total, what);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

static void end_name(char *buf, size_t len, const char *host, int index, int show_host)
{
    if (index == PF_END_HOST)
        snprintf(buf, len, "%s%shost", show_host ? host : "", show_host ? ":" : "");
    else
        snprintf(buf, len, "%s%sgpu%d", show_host ? host : "", show_host ? ":" : "", index);
}

static void print_link(const pf_link_fit_t *l, int show_host)
{
    char a[80], b[80], xo[32];
    end_name(a, sizeof a, l->rec.src_host, l->rec.src_index, show_host);
    end_name(b, sizeof b, l->rec.dst_host, l->rec.dst_index, show_host);
    if (l->fit.crossover_bytes > 0)
        pf_fmt_bytes(xo, sizeof xo, l->fit.crossover_bytes);
    else
        snprintf(xo, sizeof xo, "-");
    fprintf(stderr, "  %-10s %-10s %-18s %10.2f %10.2f %9.1f%% %12s\n", a, b, l->rec.method,
            l->fit.lat_floor_ms * 1e3, l->fit.gbps, 100 * l->fit.fit_rel_rms, xo);
}

static void print_tables(const pf_assemble_t *a, const pf_local_report_t *rep)
{
    char mem[32];
    fprintf(stderr, "devices:\n");
    for (int i = 0; i < pf_assemble_ndevices(a); i++) {
        const pf_record_device_t *d = pf_assemble_device(a, i);
        pf_fmt_bytes(mem, sizeof mem, d->mem_bytes);
        fprintf(stderr, "  %2d  %-28s %s  %10s", i, d->name, pf_record_source_name(d->source), mem);
        if (d->tflops > 0)
            fprintf(stderr, "  %7.1f TFLOP/s", d->tflops);
        if (d->mem_gbps > 0)
            fprintf(stderr, "  %8.1f GB/s copy", d->mem_gbps);
        if (d->sm_count > 0)
            fprintf(stderr, "  %d SMs at %.0f MHz", d->sm_count, d->clock_mhz);
        fputc('\n', stderr);
    }
    int nl = pf_assemble_nlinks(a);
    if (nl > 0 || rep->loopback.rec.nsizes > 0)
        fprintf(stderr, "links (postal fit; latency = smallest message):\n  %-10s %-10s %-18s "
                        "%10s %10s %10s %12s\n", "from", "to", "method", "lat us", "GB/s",
                "fit err", "table below");
    for (int i = 0; i < nl; i++)
        print_link(pf_assemble_link(a, i), 0);
    if (rep->has_loopback)
        print_link(&rep->loopback, 0);
    else if (rep->loopback.rec.nsizes > 0)
        fprintf(stderr, "  host       host       %-18s %s\n", rep->loopback.rec.method,
                rep->loopback_status);
    if (rep->nccl_all_reduce_gbps > 0)
        fprintf(stderr, "NCCL bus bandwidth: all-reduce %.1f GB/s, all-gather %.1f GB/s\n",
                rep->nccl_all_reduce_gbps, rep->nccl_all_gather_gbps);
    else if (rep->nccl_status[0])
        fprintf(stderr, "NCCL: %s\n", rep->nccl_status);
}

static int calibrate(const char *graph_path, const char *out, const pf_cuda_loader_t *cuda, int dev,
                     int dtype, int reps, int quiet)
{
    char err[CLI_ERRLEN];
    pf_graph_t *g = NULL, *m = NULL;
    pf_calibrate_report_t rep = {0};
    int rc, n = 0;
    if ((rc = pf_graph_load(graph_path, &g, err, sizeof err)) != PF_OK)
        return cli_report(CMD, rc, err);
    pf_cuda_loader_api(cuda)->device_count(&n, err, sizeof err);
    if (dev >= n) {
        pf_graph_destroy(&g);
        snprintf(err, sizeof err, "--device %d: this host has %d GPU%s", dev, n, n == 1 ? "" : "s");
        return cli_report(CMD, PF_EINPUT, err);
    }
    pf_local_gpu_t timer = {pf_cuda_loader_api(cuda), dev, reps};
    rc = pf_calibrate_graph(g, dtype, pf_local_op_timer, &timer, &m, &rep, err, sizeof err);
    if (rc == PF_OK)
        rc = pf_graph_save(m, out, err, sizeof err);
    if (rc == PF_OK && !quiet) {
        fprintf(stderr, "graph %s: %d of %d ops timed (%d shape classes), %d kept analytic\n",
                pf_graph_name(g), rep.ntimed, pf_graph_nops(g), rep.nclasses, rep.nskipped);
        for (int i = 0; i < rep.nskipped; i++)
            fprintf(stderr, "  kept ops[%d] %s: %s\n", rep.skipped[i].op,
                    pf_graph_op(g, rep.skipped[i].op)->name, rep.skipped[i].why);
    }
    pf_calibrate_report_clear(&rep);
    pf_graph_destroy(&m);
    pf_graph_destroy(&g);
    return rc == PF_OK ? CLI_OK : cli_report(CMD, rc, err);
}

/* What the flags ask for. */
typedef struct {
    pf_local_opts_t o; /* sizes, reps, peer_off */
    const char *out, *cluster_out, *graph, *name, *broker;
    double timeout_s, soak_ms; /* soak_ms < 0: not given */
    long long stream_mb, device;
    int dtype;
    bool local, quiet, sweep, quick, matrix;
} profile_args_t;

static int parse_sizes_arg(const char *cmd, const char *arg, void *base)
{
    (void)cmd;
    return parse_sizes(arg, &((profile_args_t *)base)->o);
}

static int parse_dtype(const char *cmd, const char *arg, void *base)
{
    int *dtype = &((profile_args_t *)base)->dtype;
    if (!strcmp(arg, "bf16"))
        *dtype = PF_DT_BF16;
    else if (!strcmp(arg, "fp16"))
        *dtype = PF_DT_FP16;
    else if (!strcmp(arg, "fp32"))
        *dtype = PF_DT_FP32;
    else {
        cli_usage_error(cmd, "--dtype: '%s': bf16, fp16 or fp32", arg);
        return -1;
    }
    return 0;
}

#define A(field) offsetof(profile_args_t, field)
static const cli_option_t profile_options[] = {
    {"local", 0, CLI_OPT_FLAG, .offset = A(local)},
    {"output", 'o', CLI_OPT_STRING, .offset = A(out)},
    {"cluster-out", 0, CLI_OPT_STRING, .offset = A(cluster_out)},
    {"graph", 0, CLI_OPT_STRING, .offset = A(graph)},
    {"sweep", 0, CLI_OPT_FLAG, .offset = A(sweep)},
    {"quick", 0, CLI_OPT_FLAG, .offset = A(quick)},
    {"soak-ms", 0, CLI_OPT_DOUBLE, .offset = A(soak_ms), .dlo = 0, .dhi = 60000},
    {"device", 0, CLI_OPT_LLONG, .offset = A(device), .lo = 0, .hi = 1023},
    {"dtype", 0, CLI_OPT_CUSTOM, .parse = parse_dtype},
    {"sizes", 0, CLI_OPT_CUSTOM, .parse = parse_sizes_arg},
    {"reps", 0, CLI_OPT_INT, .offset = A(o.reps), .lo = 1, .hi = 10000},
    {"peer-off", 0, CLI_OPT_SET_INT, .offset = A(o.peer_off), .lo = 1},
    {"name", 0, CLI_OPT_STRING, .offset = A(name)},
    {"quiet", 'q', CLI_OPT_FLAG, .offset = A(quiet)},
    {"matrix", 0, CLI_OPT_FLAG, .offset = A(matrix)},
    {"broker", 0, CLI_OPT_STRING, .offset = A(broker)},
    {"timeout", 0, CLI_OPT_DOUBLE, .offset = A(timeout_s), .dlo = 1, .dhi = 86400},
    {"stream-mb", 0, CLI_OPT_LLONG, .offset = A(stream_mb), .lo = 1, .hi = 16384},
    CLI_OPTION_HELP,
    CLI_OPTION_END,
};
#undef A

/* The broker's answer to a profiling round: its notes, then its verdict. */
static int broker_verdict(const Planfarm__ProfileClusterReply *m, bool quiet, char *err,
                          size_t errlen)
{
    for (size_t i = 0; !quiet && i < m->n_notes; i++)
        fprintf(stderr, "  note: %s\n", m->notes[i]);
    if (m->status == PF_OK)
        return PF_OK;
    int rc = m->status == PF_EINPUT || m->status == PF_EINFEASIBLE ? m->status : PF_ERR;
    return pf_fail(err, errlen, rc, "broker: %s", m->error ? m->error : "profiling failed");
}

/* The reply's cluster, checked (it must load) before it is written as it came. */
static int write_broker_cluster(const Planfarm__ProfileClusterReply *m, const char *out,
                                bool quiet, char *err, size_t errlen)
{
    pf_cluster_t *cl = NULL;
    int rc = PF_OK;
    if (m->cluster_json)
        rc = pf_cluster_load_buffer(m->cluster_json, strlen(m->cluster_json), "broker's cluster",
                                    &cl, err, errlen);
    if (rc == PF_OK) {
        FILE *f = out && strcmp(out, "-") ? fopen(out, "w") : stdout;
        if (!f || fputs(m->cluster_json, f) < 0 || (f != stdout && fclose(f) != 0))
            rc = pf_fail(err, errlen, PF_ERR, "%s: cannot write", out);
        else if (f == stdout)
            fflush(stdout);
    }
    if (rc == PF_OK && !quiet)
        fprintf(stderr, "cluster %s: %d device%s on %u host%s from %u agent%s, %u link record%s "
                "(%llu dropped) written to %s\n", pf_cluster_name(cl), pf_cluster_ndevices(cl),
                pf_cluster_ndevices(cl) == 1 ? "" : "s", m->hosts, m->hosts == 1 ? "" : "s",
                m->agents, m->agents == 1 ? "" : "s", m->links, m->links == 1 ? "" : "s",
                (unsigned long long)m->dropped_records, out && strcmp(out, "-") ? out : "stdout");
    pf_cluster_destroy(&cl);
    return rc;
}

/* The round on the broker; the reply's cluster is checked before it is written. */
static int profile_broker(const profile_args_t *a)
{
    char err[CLI_ERRLEN] = "";
    Planfarm__ProfileClusterRequest req = PLANFARM__PROFILE_CLUSTER_REQUEST__INIT;
    req.cluster_name = (char *)(a->name ? a->name : "profiled");
    req.sizes = (double *)a->o.sizes;
    req.n_sizes = (size_t)a->o.nsizes;
    req.reps = (uint32_t)a->o.reps;
    req.probe_timeout_s = a->timeout_s / 10;
    req.stream_bytes = (uint64_t)a->stream_mb << 20;
    pf_client_t *client = pf_client_new(a->broker, (int)(a->timeout_s * 1000), err, sizeof err);
    if (!client)
        return cli_report(CMD, PF_EINPUT, err);
    const uint8_t *body;
    size_t len;
    Planfarm__ProfileClusterReply *m = NULL;
    int rc = pf_client_call(client, PF_MSG_PROFILE_CLUSTER, &req.base,
                            PF_MSG_PROFILE_CLUSTER_REPLY, &body, &len, err, sizeof err);
    if (rc == PF_OK && !(m = planfarm__profile_cluster_reply__unpack(NULL, len, body)))
        rc = pf_fail(err, sizeof err, PF_ERR, "the broker's reply does not decode");
    if (rc == PF_OK)
        rc = broker_verdict(m, a->quiet, err, sizeof err);
    if (rc == PF_OK)
        rc = write_broker_cluster(m, a->out, a->quiet, err, sizeof err);
    planfarm__profile_cluster_reply__free_unpacked(m, NULL);
    pf_client_destroy(&client);
    return rc == PF_OK ? CLI_OK : cli_report(CMD, rc, err);
}

/* --graph: the GPU must be there, then the graph's op times are measured. */
static int profile_graph(const profile_args_t *a, const pf_cuda_loader_t *cuda,
                         const char *loader_err)
{
    char err[CLI_ERRLEN] = "";
    int n = 0;
    if (cuda)
        pf_cuda_loader_api(cuda)->device_count(&n, err, sizeof err);
    if (!cuda || n == 0) {
        fprintf(stderr, "planfarm profile: %s: cannot time the ops of %s; nothing written\n",
                cuda ? "no GPU found" : loader_err, a->graph);
        return CLI_FAIL;
    }
    return calibrate(a->graph, a->out, cuda, (int)a->device, a->dtype, a->o.reps, a->quiet);
}

/* This host's devices and links into a cluster file at out; without a GPU (no probes, or none
 * found: *cuda is closed then) its CPU and loopback network. */
static int profile_cluster(const profile_args_t *a, pf_cuda_loader_t **cuda, char *loader_err,
                           const char *out)
{
    char err[CLI_ERRLEN] = "", host[PF_REC_NAME], cname[PF_REC_NAME + 16];
    pf_local_report_t rep;
    pf_cluster_t *cl = NULL;
    double when;
    pf_record_stamp(host, &when);
    snprintf(cname, sizeof cname, "profiled-%s", host);
    pf_assemble_t *as = pf_assemble_new(a->name ? a->name : cname, err, sizeof err);
    if (!as)
        return cli_report(CMD, PF_ERR, err);
    int ngpus = 0;
    if (*cuda && pf_cuda_loader_api(*cuda)->device_count(&ngpus, err, sizeof err) == PF_OK &&
        !ngpus) {
        snprintf(loader_err, CLI_ERRLEN, "no GPU found");
        pf_cuda_loader_close(cuda);
    }
    if (!*cuda)
        fprintf(stderr, "planfarm profile: %s: measuring the CPU and the loopback network\n",
                loader_err);
    int rc = pf_local_profile(&a->o, *cuda, loader_err, cli_stderr_tty() ? progress_bar : NULL,
                              NULL, as, &rep, err, sizeof err);
    if (rc == PF_OK)
        rc = pf_assemble_build(as, &cl, err, sizeof err);
    if (rc == PF_OK && !a->matrix)
        pf_assemble_prefer_hierarchy(&cl);
    if (rc == PF_OK)
        rc = pf_assemble_save(as, cl, out, err, sizeof err);
    if (rc == PF_OK && !a->quiet) {
        print_tables(as, &rep);
        fprintf(stderr, "cluster %s: %d device%s (%s) written to %s\n", pf_cluster_name(cl),
                pf_cluster_ndevices(cl), pf_cluster_ndevices(cl) == 1 ? "" : "s",
                rep.ngpus ? "gpu" : "cpu", out && strcmp(out, "-") ? out : "stdout");
    }
    pf_cluster_destroy(&cl);
    pf_assemble_destroy(&as);
    return rc == PF_OK ? CLI_OK : cli_report(CMD, rc, err);
}

/* --sweep: the device-model records of GPU --device, written as JSON. */
static int profile_sweep(const profile_args_t *a, const pf_cuda_loader_t *cuda,
                         const char *loader_err)
{
    char err[CLI_ERRLEN] = "";
    int n = 0;
    if (cuda)
        pf_cuda_loader_api(cuda)->device_count(&n, err, sizeof err);
    if (!cuda || n <= a->device) {
        fprintf(stderr, "planfarm profile: %s: no sweep; nothing written\n",
                !cuda ? loader_err : n ? "no such GPU (--device)" : "no GPU found");
        return CLI_FAIL;
    }
    pf_sweep_opts_t so = {.device = (int)a->device, .reps = a->o.reps, .quick = a->quick,
                          .soak_ms = a->soak_ms >= 0 ? a->soak_ms : PF_SWEEP_SOAK_MS};
    json_t *rec = pf_sweep_run(pf_cuda_loader_api(cuda), &so,
                               cli_stderr_tty() && !a->quiet ? progress_bar : NULL, NULL, err,
                               sizeof err);
    if (!rec)
        return cli_report(CMD, PF_ERR, err);
    int rc = a->out && strcmp(a->out, "-") ? json_dump_file(rec, a->out, JSON_INDENT(1))
                                           : json_dumpf(rec, stdout, JSON_INDENT(1));
    if (!a->quiet && !rc)
        fprintf(stderr, "sweep of GPU %lld (%s): %d probes written to %s\n", a->device,
                json_string_value(json_object_get(json_object_get(rec, "gpu"), "name")),
                pf_sweep_count(&so), a->out && strcmp(a->out, "-") ? a->out : "stdout");
    json_decref(rec);
    if (rc)
        return cli_report(CMD, PF_ERR, "cannot write the sweep");
    return CLI_OK;
}

/* --local: the measured graph (with --graph), the cluster (without, or with --cluster-out). */
static int profile_local(const profile_args_t *a)
{
    if (a->cluster_out && !a->graph)
        return cli_usage_error(CMD, "--cluster-out goes with --graph (else use -o)");
    if (cli_check_output(CMD, a->out) || (a->cluster_out && cli_check_output(CMD, a->cluster_out)))
        return CLI_USAGE;
    if (!a->sweep && (a->quick || a->soak_ms >= 0))
        return cli_usage_error(CMD, "%s goes with --sweep", a->quick ? "--quick" : "--soak-ms");
    char loader_err[CLI_ERRLEN] = "";
    pf_cuda_loader_t *cuda = pf_cuda_loader_open(loader_err, sizeof loader_err);
    if (a->sweep) {
        int rc = a->graph || a->cluster_out
                     ? cli_usage_error(CMD, "--sweep writes no graph or cluster (drop --graph)")
                     : profile_sweep(a, cuda, loader_err);
        pf_cuda_loader_close(&cuda);
        return rc;
    }
    if (a->matrix && a->graph && !a->cluster_out)
        return cli_usage_error(CMD, "--matrix goes with a cluster (-o, or --cluster-out with "
                               "--graph)");
    int rc = a->graph ? profile_graph(a, cuda, loader_err) : CLI_OK;
    if (rc == CLI_OK && (!a->graph || a->cluster_out))
        rc = profile_cluster(a, &cuda, loader_err, a->graph ? a->cluster_out : a->out);
    pf_cuda_loader_close(&cuda);
    return rc;
}

int cmd_profile(int argc, char **argv)
{
    profile_args_t a = {.timeout_s = 600, .soak_ms = -1, .stream_mb = 256, .dtype = PF_DT_BF16};
    pf_local_opts_default(&a.o);
    const cli_options_t spec = {CMD, help, "unknown option (see --help)", NULL,
                                {{profile_options, &a, NULL}, {NULL, NULL, NULL}}};
    int status, first = cli_options_parse(&spec, argc, argv, &status);
    if (first < 0)
        return status;
    if (first != argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[first]);
    if (a.local == !!a.broker)
        return cli_usage_error(CMD, "one of --local and --broker ENDPOINT is required");
    if (!a.broker)
        return profile_local(&a);
    if (a.graph || a.cluster_out || a.o.peer_off || a.sweep || a.quick || a.soak_ms >= 0 ||
        a.matrix)
        return cli_usage_error(CMD, "--graph, --cluster-out, --peer-off, --sweep (--quick, "
                               "--soak-ms) and --matrix go with --local");
    if (cli_check_endpoint(CMD, "--broker", a.broker) || cli_check_output(CMD, a.out))
        return CLI_USAGE;
    if (a.o.nsizes == 1)
        return cli_usage_error(CMD, "--sizes: one size is no sweep");
    return profile_broker(&a);
}
