/* planfarm cluster KIND [flags] [-o CLUSTER]: generate a cluster file (planner/inputs/topology.h). */
#include "cli/cli.h"
#include "planner/ir/cluster.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "cluster"
#define GIB 1073741824.0

static void help(FILE *f)
{
    fprintf(f,
            "usage: planfarm cluster KIND [flags] [-o CLUSTER]\n\n"
            "Writes a cluster file for a generated topology: nvswitch, dgx-a100 and\n"
            "dgx-h100 as a hierarchy (format 2: host -> leaf -> spine -> core, a few\n"
            "hundred bytes at any size; --matrix for the dense form), the other kinds as\n"
            "devices with a bandwidth_gbps (and optional latency_us) matrix. KIND is one of:\n"
            "  hier         Parmesan's two-level system: machines x GPUs, Titan V (12 GB,\n"
            "               110 TFLOPs), PCIe 11 GB/s inside a machine, Ethernet 1.1 GB/s between\n"
            "  dgx1         machines of 8 V100 (16 GB, 125 TFLOPs) with the DGX-1 NVLink\n"
            "               matrix: double link 43.2, single 21.4, PCIe 10.1 GB/s;\n"
            "               1.4 GB/s between machines\n"
            "  nvswitch     machines x 8 H100 (80 GB, 989 TFLOPs dense bf16): 370 GB/s through\n"
            "               NVSwitch, 50 GB/s (400 Gb/s NDR) per GPU pair between machines\n"
            "  dgx-a100     machines x 8 A100 80GB (312 TFLOPs dense bf16): 250 GB/s peer copy\n"
            "               through NVSwitch, 25 GB/s (8x HDR 200 Gb/s) per GPU between machines;\n"
            "               latency 2.5 us inside a machine, 5 us between\n"
            "  dgx-h100     machines x 8 H100 80GB (989 TFLOPs dense bf16): 370 GB/s peer copy\n"
            "               (measured 371-377), 50 GB/s (8x NDR 400 Gb/s) per GPU between\n"
            "               machines; latency 2.5 us inside a machine, 5 us between\n"
            "  mesh2d, torus2d, mesh3d, torus3d\n"
            "               one device per grid point, bandwidth by hop count (Parmesan Table IX)\n"
            "  random-blk1  random nodes of 2-8 devices, one U[1e-4, 1e-2] MB/us bandwidth per\n"
            "               node, 1e-4 MB/us between nodes (Parmesan App. D-B)\n"
            "  random-blk2  random nodes, every intra-node pair U[1e-5, 1e-2] MB/us; nodes i, j:\n"
            "               (mean intra-node bandwidth / 10) / |i - j|\n"
            "  uniform      every pair U[1e-5, 1e-2] MB/us\n"
            "Random bandwidths are drawn in MB/us and written in GB/s with the paper's\n"
            "1 GB/s = 1024/10^6 MB/us (GB/s = MB/us x 976.5625).\n\n"
            "  --machines N      hier, dgx1, nvswitch, dgx-*: machines (default 4)\n"
            "  --gpus N          hier, nvswitch: GPUs per machine (default 4 and 8)\n"
            "  --intra-gbps X    hier, nvswitch, dgx-*: bandwidth inside a machine\n"
            "                    (default 11, 370, dgx-a100 250, dgx-h100 370)\n"
            "  --inter-gbps X    hier, dgx1, nvswitch, dgx-*: between machines\n"
            "                    (default 1.1, 1.4, 50, dgx-a100 25, dgx-h100 50)\n"
            "  --dims XxY[xZ]    mesh/torus: grid size (default 4x4, 4x4x4)\n"
            "  --devices D       random kinds: devices (default 64)\n"
            "  --seed S          random kinds: same seed, byte-identical file (default 1)\n"
            "  --mem-gb X        memory per device, X x 2^30 bytes (default: the kind's GPU;\n"
            "                    16 for mesh, torus and random kinds)\n"
            "  --tflops X        peak TFLOPs per device (default: the kind's GPU; 125 otherwise);\n"
            "                    recorded only: op times come from the graph file\n"
            "                    (dgx1, nvswitch, dgx-*: either flag drops the device model)\n"
            "  --models M1,M2..  nvswitch, dgx-*: device presets (planfarm devices) of\n"
            "                    consecutive blocks of machines, e.g. a100-80g,h100-sxm: the\n"
            "                    first half A100, the second H100, each with its preset's\n"
            "                    memory and peak; ops are priced on each device's model\n"
            "  --latency-us X    latency of every pair (inside a machine where an inter-machine\n"
            "                    latency is set); 0 (default but dgx-*: 2.5) and no inter-machine\n"
            "                    latency write no latency matrix\n"
            "  --inter-latency-us X  machine kinds: latency between machines (dgx-*: 5;\n"
            "                    others 0 = --latency-us)\n"
            "  --matrix          nvswitch, dgx-*: the dense D x D matrix (format 1), at most\n"
            "                    %d devices, instead of the hierarchy\n"
            "  --hosts-per-leaf N  nvswitch, dgx-*: machines under one leaf (a scalable unit;\n"
            "                    default dgx-a100 20, others 32)\n"
            "  --leaves-per-spine N  nvswitch, dgx-*: leaves under one spine (default 16)\n"
            "  --oversubscription X  nvswitch, dgx-*: the leaf's uplink oversubscription; the\n"
            "                    bandwidth between leaves is divided by it (default 1)\n"
            "  --name NAME       cluster name (default from the kind, e.g. dgx1x4)\n"
            "  -o, --output FILE write there (default or -: stdout)\n\n"
            "At most %d devices as a matrix; a hierarchy up to %d machines. Hosts: machine\n"
            "(hier, dgx1, nvswitch, dgx-*), node (random-blk1/2), one per device (mesh,\n"
            "torus, uniform). Exit status 2 on bad flags.\n",
            PF_TOPOLOGY_MAX_DEVICES, PF_TOPOLOGY_MAX_DEVICES, PF_TOPOLOGY_MAX_MACHINES);
}

/* "4x4" or "4x4x4" into dims (the rest 1); PF_OK, or PF_EINPUT after a usage message. */
static int parse_dims(const char *arg, int want, int dims[3], const char *kind)
{
    const char *form = want == 2 ? "XxY" : "XxYxZ";
    const char *p = arg;
    int n = 0;
    dims[0] = dims[1] = dims[2] = 1;
    for (;;) {
        char *end;
        long v = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
        if (v < 0 || (*end && *end != 'x')) {
            cli_usage_error(CMD, "--dims: '%s' is not of the form %s", arg, form);
            return PF_EINPUT;
        }
        if (v < 1 || v > PF_TOPOLOGY_MAX_DEVICES) {
            cli_usage_error(CMD, "--dims: '%s': dimension %d is %.*s, must be in [1, %d]", arg,
                            n + 1, (int)(end - p), p, PF_TOPOLOGY_MAX_DEVICES);
            return PF_EINPUT;
        }
        if (n < 3)
            dims[n] = (int)v;
        n++;
        if (!*end)
            break;
        p = end + 1;
    }
    if (n != want) {
        cli_usage_error(CMD, "--dims: '%s' has %d dimension%s, %s needs %d (%s)", arg, n,
                        n == 1 ? "" : "s", kind, want, form);
        return PF_EINPUT;
    }
    return PF_OK;
}

/* The flags as given: they are converted once the kind is known, whose defaults come first. */
typedef struct {
    const char *machines, *gpus, *intra, *inter, *dims, *devices, *seed, *mem, *tflops, *latency,
        *inter_latency, *name, *out, *per_leaf, *per_spine, *oversub, *models;
    bool matrix;
} cluster_args_t;

#define G(field) offsetof(cluster_args_t, field)
static const cli_option_t cluster_options[] = {
    {"machines", 0, CLI_OPT_STRING, .offset = G(machines)},
    {"gpus", 0, CLI_OPT_STRING, .offset = G(gpus)},
    {"intra-gbps", 0, CLI_OPT_STRING, .offset = G(intra)},
    {"inter-gbps", 0, CLI_OPT_STRING, .offset = G(inter)},
    {"dims", 0, CLI_OPT_STRING, .offset = G(dims)},
    {"devices", 0, CLI_OPT_STRING, .offset = G(devices)},
    {"seed", 0, CLI_OPT_STRING, .offset = G(seed)},
    {"mem-gb", 0, CLI_OPT_STRING, .offset = G(mem)},
    {"tflops", 0, CLI_OPT_STRING, .offset = G(tflops)},
    {"latency-us", 0, CLI_OPT_STRING, .offset = G(latency)},
    {"inter-latency-us", 0, CLI_OPT_STRING, .offset = G(inter_latency)},
    {"name", 0, CLI_OPT_STRING, .offset = G(name)},
    {"output", 'o', CLI_OPT_STRING, .offset = G(out)},
    {"hosts-per-leaf", 0, CLI_OPT_STRING, .offset = G(per_leaf)},
    {"leaves-per-spine", 0, CLI_OPT_STRING, .offset = G(per_spine)},
    {"oversubscription", 0, CLI_OPT_STRING, .offset = G(oversub)},
    {"models", 0, CLI_OPT_STRING, .offset = G(models)},
    {"matrix", 0, CLI_OPT_FLAG, .offset = G(matrix)},
    CLI_OPTION_HELP,
    CLI_OPTION_END,
};

/* Which kinds a flag applies to; a flag given for another kind is a usage error rather than
 * silently ignored. */
#define K(k) (1u << (k))
#define K_DGX (K(PF_TOPOLOGY_DGX_A100) | K(PF_TOPOLOGY_DGX_H100))
#define K_MACHINES (K(PF_TOPOLOGY_HIER) | K(PF_TOPOLOGY_DGX1) | K(PF_TOPOLOGY_NVSWITCH) | K_DGX)
#define K_GRID (K(PF_TOPOLOGY_MESH2D) | K(PF_TOPOLOGY_TORUS2D) | K(PF_TOPOLOGY_MESH3D) | K(PF_TOPOLOGY_TORUS3D))
#define K_RANDOM (K(PF_TOPOLOGY_RANDOM_BLK1) | K(PF_TOPOLOGY_RANDOM_BLK2) | K(PF_TOPOLOGY_UNIFORM))
#define K_HIERARCHY (K(PF_TOPOLOGY_NVSWITCH) | K_DGX)

static const struct {
    size_t given;
    const char *flag;
    unsigned kinds;
    const char *which;
} applies[] = {
    {G(machines), "--machines", K_MACHINES, "hier, dgx1, nvswitch, dgx-a100 and dgx-h100"},
    {G(gpus), "--gpus", K(PF_TOPOLOGY_HIER) | K(PF_TOPOLOGY_NVSWITCH),
     "hier and nvswitch; a DGX has 8"},
    {G(intra), "--intra-gbps", K(PF_TOPOLOGY_HIER) | K(PF_TOPOLOGY_NVSWITCH) | K_DGX,
     "hier, nvswitch, dgx-a100 and dgx-h100"},
    {G(inter), "--inter-gbps", K_MACHINES, "hier, dgx1, nvswitch, dgx-a100 and dgx-h100"},
    {G(inter_latency), "--inter-latency-us", K_MACHINES,
     "hier, dgx1, nvswitch, dgx-a100 and dgx-h100"},
    {G(dims), "--dims", K_GRID, "mesh2d, torus2d, mesh3d and torus3d"},
    {G(devices), "--devices", K_RANDOM, "random-blk1, random-blk2 and uniform"},
    {G(seed), "--seed", K_RANDOM, "random-blk1, random-blk2 and uniform"},
    {G(per_leaf), "--hosts-per-leaf", K_HIERARCHY, "nvswitch, dgx-a100 and dgx-h100"},
    {G(per_spine), "--leaves-per-spine", K_HIERARCHY, "nvswitch, dgx-a100 and dgx-h100"},
    {G(oversub), "--oversubscription", K_HIERARCHY, "nvswitch, dgx-a100 and dgx-h100"},
    {G(models), "--models", K_HIERARCHY, "nvswitch, dgx-a100 and dgx-h100"},
};

static const char *given_text(const cluster_args_t *a, size_t offset)
{
    return *(const char *const *)((const char *)a + offset);
}

static int set_dims(const char *cmd, const char *arg, void *base)
{
    pf_topology_opts_t *o = base;
    int grid3d = o->kind == PF_TOPOLOGY_MESH3D || o->kind == PF_TOPOLOGY_TORUS3D;
    (void)cmd;
    return parse_dims(arg, grid3d ? 3 : 2, o->dims, pf_topology_kind_name(o->kind)) ? -1 : 0;
}

static int set_mem_gb(const char *cmd, const char *arg, void *base)
{
    double x;
    if (cli_double(cmd, "--mem-gb", arg, 0, 1e9, &x))
        return -1;
    if (x <= 0) {
        cli_usage_error(cmd, "--mem-gb: must be positive");
        return -1;
    }
    ((pf_topology_opts_t *)base)->mem_bytes = x * GIB;
    return 0;
}

static int set_name(const char *cmd, const char *arg, void *base)
{
    if (!*arg) {
        cli_usage_error(cmd, "--name: empty");
        return -1;
    }
    ((pf_topology_opts_t *)base)->name = arg;
    return 0;
}

static int set_models(const char *cmd, const char *arg, void *base)
{
    if (!*arg) {
        cli_usage_error(cmd, "--models: empty");
        return -1;
    }
    ((pf_topology_opts_t *)base)->models = arg; /* checked by pf_topology_build */
    return 0;
}

/* How each given flag sets the topology's options, in the order they are checked. */
#define T(field) offsetof(pf_topology_opts_t, field)
static const struct {
    size_t given;
    cli_option_t set;
} values[] = {
    {G(machines), {"machines", 0, CLI_OPT_INT, .offset = T(machines), .lo = 1,
                   .hi = PF_TOPOLOGY_MAX_MACHINES}},
    {G(per_leaf), {"hosts-per-leaf", 0, CLI_OPT_INT, .offset = T(hosts_per_leaf), .lo = 1,
                   .hi = PF_TOPOLOGY_MAX_MACHINES}},
    {G(per_spine), {"leaves-per-spine", 0, CLI_OPT_INT, .offset = T(leaves_per_spine), .lo = 1,
                    .hi = PF_TOPOLOGY_MAX_MACHINES}},
    {G(oversub), {"oversubscription", 0, CLI_OPT_DOUBLE, .offset = T(oversub), .dlo = 1,
                  .dhi = 1e6}},
    {G(gpus), {"gpus", 0, CLI_OPT_INT, .offset = T(gpus_per_machine), .lo = 1,
               .hi = PF_TOPOLOGY_MAX_DEVICES}},
    {G(devices), {"devices", 0, CLI_OPT_INT, .offset = T(devices), .lo = 1,
                  .hi = PF_TOPOLOGY_MAX_DEVICES}},
    {G(seed), {"seed", 0, CLI_OPT_U64, .offset = T(seed), .lo = 0, .hi = LLONG_MAX}},
    {G(dims), {"dims", 0, CLI_OPT_CUSTOM, .parse = set_dims}},
    {G(intra), {"intra-gbps", 0, CLI_OPT_DOUBLE, .offset = T(intra_gbps), .dlo = 0, .dhi = 1e9,
                .flags = CLI_OPT_POSITIVE}},
    {G(inter), {"inter-gbps", 0, CLI_OPT_DOUBLE, .offset = T(inter_gbps), .dlo = 0, .dhi = 1e9,
                .flags = CLI_OPT_POSITIVE}},
    {G(mem), {"mem-gb", 0, CLI_OPT_CUSTOM, .parse = set_mem_gb}},
    {G(tflops), {"tflops", 0, CLI_OPT_DOUBLE, .offset = T(tflops), .dlo = 0, .dhi = 1e9}},
    {G(latency), {"latency-us", 0, CLI_OPT_DOUBLE, .offset = T(latency_us), .dlo = 0,
                  .dhi = 1e9}},
    {G(inter_latency), {"inter-latency-us", 0, CLI_OPT_DOUBLE, .offset = T(inter_latency_us),
                        .dlo = 0, .dhi = 1e9}},
    {G(name), {"name", 0, CLI_OPT_CUSTOM, .parse = set_name}},
    {G(models), {"models", 0, CLI_OPT_CUSTOM, .parse = set_models}},
};
#undef T

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* The kind's defaults, then every given flag that applies to it; CLI_OK or the usage status. */
static int topology_opts(const cluster_args_t *a, pf_topology_kind_t kind, pf_topology_opts_t *o)
{
    const char *kname = pf_topology_kind_name(kind);
    for (size_t i = 0; i < NELEMS(applies); i++)
        if (given_text(a, applies[i].given) && !(applies[i].kinds & K(kind)))
            return cli_usage_error(CMD, "%s does not apply to %s (only to %s)", applies[i].flag,
                                   kname, applies[i].which);
    if (a->matrix && !(K_HIERARCHY & K(kind)))
        return cli_usage_error(CMD, "--matrix does not apply to %s (only to nvswitch, dgx-a100 "
                               "and dgx-h100: the others are always a matrix)", kname);
    pf_topology_opts_init(o, kind);
    o->matrix = a->matrix;
    for (size_t i = 0; i < NELEMS(values); i++) {
        const char *text = given_text(a, values[i].given);
        if (text && cli_options_set(CMD, &values[i].set, text, o) != 0)
            return CLI_USAGE;
    }
    return CLI_OK;
}

int cmd_cluster(int argc, char **argv)
{
    cluster_args_t a = {0};
    const cli_options_t spec = {CMD, help, NULL, NULL,
                                {{cluster_options, &a, NULL}, {NULL, NULL, NULL}}};
    int status, first = cli_options_parse(&spec, argc, argv, &status);
    if (first < 0)
        return status;
    if (argc - first != 1)
        return cli_usage_error(CMD, argc == first ? "expected a KIND" : "expected one KIND");
    pf_topology_kind_t kind;
    if (pf_topology_parse_kind(argv[first], &kind) != PF_OK)
        return cli_usage_error(CMD,
                               "unknown kind '%s' (expected hier, dgx1, nvswitch, mesh2d, "
                               "torus2d, mesh3d, torus3d, random-blk1, random-blk2, uniform, "
                               "dgx-a100 or dgx-h100)",
                               argv[first]);
    pf_topology_opts_t o;
    int rc = topology_opts(&a, kind, &o);
    if (rc != CLI_OK)
        return rc;
    char err[CLI_ERRLEN] = "";
    pf_cluster_t *cl;
    if ((rc = pf_topology_build(&o, &cl, err, sizeof err)) != PF_OK)
        return cli_report(CMD, rc, err);
    rc = pf_cluster_save(cl, a.out, err, sizeof err);
    pf_cluster_destroy(&cl);
    return rc == PF_OK ? CLI_OK : cli_report(CMD, rc, err);
}
