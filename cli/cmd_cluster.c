/* planfarm cluster KIND [flags] [-o CLUSTER]: generate a cluster file (planner/inputs/topology.h). */
#include "cli/cli.h"
#include "planner/ir/cluster.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "cluster"
#define GIB 1073741824.0

static void help(FILE *f)
{
    fprintf(f,
            "usage: planfarm cluster KIND [flags] [-o CLUSTER]\n\n"
            "Writes a cluster file (devices, bandwidth_gbps, optional latency_us) for a\n"
            "generated topology. KIND is one of:\n"
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
            "  --latency-us X    latency of every pair (inside a machine where an inter-machine\n"
            "                    latency is set); 0 (default but dgx-*: 2.5) and no inter-machine\n"
            "                    latency write no latency matrix\n"
            "  --inter-latency-us X  machine kinds: latency between machines (dgx-*: 5;\n"
            "                    others 0 = --latency-us)\n"
            "  --name NAME       cluster name (default from the kind, e.g. dgx1x4)\n"
            "  -o, --output FILE write there (default or -: stdout)\n\n"
            "At most %d devices. Hosts: machine (hier, dgx1, nvswitch, dgx-*), node (random-blk1/2),\n"
            "one per device (mesh, torus, uniform). Exit status 2 on bad flags.\n",
            PF_TOPOLOGY_MAX_DEVICES);
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

enum {
    O_MACHINES = 256, O_GPUS, O_INTRA, O_INTER, O_DIMS, O_DEVICES, O_SEED, O_MEM, O_TFLOPS,
    O_LATENCY, O_INTER_LATENCY, O_NAME, O_LAST
};

/* Which kinds a flag applies to; a flag given for another kind is a usage error rather than
 * silently ignored. */
#define K(k) (1u << (k))
#define K_DGX (K(PF_TOPOLOGY_DGX_A100) | K(PF_TOPOLOGY_DGX_H100))
#define K_MACHINES (K(PF_TOPOLOGY_HIER) | K(PF_TOPOLOGY_DGX1) | K(PF_TOPOLOGY_NVSWITCH) | K_DGX)
#define K_GRID (K(PF_TOPOLOGY_MESH2D) | K(PF_TOPOLOGY_TORUS2D) | K(PF_TOPOLOGY_MESH3D) | K(PF_TOPOLOGY_TORUS3D))
#define K_RANDOM (K(PF_TOPOLOGY_RANDOM_BLK1) | K(PF_TOPOLOGY_RANDOM_BLK2) | K(PF_TOPOLOGY_UNIFORM))

static const struct {
    int opt;
    const char *flag;
    unsigned kinds;
    const char *which;
} applies[] = {
    {O_MACHINES, "--machines", K_MACHINES, "hier, dgx1, nvswitch, dgx-a100 and dgx-h100"},
    {O_GPUS, "--gpus", K(PF_TOPOLOGY_HIER) | K(PF_TOPOLOGY_NVSWITCH),
     "hier and nvswitch; a DGX has 8"},
    {O_INTRA, "--intra-gbps", K(PF_TOPOLOGY_HIER) | K(PF_TOPOLOGY_NVSWITCH) | K_DGX,
     "hier, nvswitch, dgx-a100 and dgx-h100"},
    {O_INTER, "--inter-gbps", K_MACHINES, "hier, dgx1, nvswitch, dgx-a100 and dgx-h100"},
    {O_INTER_LATENCY, "--inter-latency-us", K_MACHINES,
     "hier, dgx1, nvswitch, dgx-a100 and dgx-h100"},
    {O_DIMS, "--dims", K_GRID, "mesh2d, torus2d, mesh3d and torus3d"},
    {O_DEVICES, "--devices", K_RANDOM, "random-blk1, random-blk2 and uniform"},
    {O_SEED, "--seed", K_RANDOM, "random-blk1, random-blk2 and uniform"},
};

int cmd_cluster(int argc, char **argv)
{
    static const struct option opts[] = {{"machines", required_argument, 0, O_MACHINES},
                                         {"gpus", required_argument, 0, O_GPUS},
                                         {"intra-gbps", required_argument, 0, O_INTRA},
                                         {"inter-gbps", required_argument, 0, O_INTER},
                                         {"dims", required_argument, 0, O_DIMS},
                                         {"devices", required_argument, 0, O_DEVICES},
                                         {"seed", required_argument, 0, O_SEED},
                                         {"mem-gb", required_argument, 0, O_MEM},
                                         {"tflops", required_argument, 0, O_TFLOPS},
                                         {"latency-us", required_argument, 0, O_LATENCY},
                                         {"inter-latency-us", required_argument, 0,
                                          O_INTER_LATENCY},
                                         {"name", required_argument, 0, O_NAME},
                                         {"output", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    /* Flags are kept as text until the kind is known: its defaults come first. */
    const char *given[O_LAST] = {0};
    const char *out_path = NULL;
    char err[CLI_ERRLEN] = "";
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (c == 'h') {
            help(stdout);
            return CLI_OK;
        } else if (c == 'o') {
            out_path = optarg;
        } else if (c >= O_MACHINES && c < O_LAST) {
            given[c] = optarg;
        } else {
            return cli_usage_error(CMD, "unknown option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(CMD, argc == optind ? "expected a KIND" : "expected one KIND");
    pf_topology_kind_t kind;
    if (pf_topology_parse_kind(argv[optind], &kind) != PF_OK)
        return cli_usage_error(CMD,
                               "unknown kind '%s' (expected hier, dgx1, nvswitch, mesh2d, "
                               "torus2d, mesh3d, torus3d, random-blk1, random-blk2, uniform, "
                               "dgx-a100 or dgx-h100)",
                               argv[optind]);
    const char *kname = pf_topology_kind_name(kind);
    for (size_t i = 0; i < sizeof applies / sizeof applies[0]; i++)
        if (given[applies[i].opt] && !(applies[i].kinds & K(kind)))
            return cli_usage_error(CMD, "%s does not apply to %s (only to %s)", applies[i].flag,
                                   kname, applies[i].which);

    pf_topology_opts_t o;
    pf_topology_opts_init(&o, kind);
    long long v;
    double x;
    int grid3d = kind == PF_TOPOLOGY_MESH3D || kind == PF_TOPOLOGY_TORUS3D;
    if (given[O_MACHINES]) {
        if (cli_int(CMD, "--machines", given[O_MACHINES], 1, PF_TOPOLOGY_MAX_DEVICES, &v))
            return CLI_USAGE;
        o.machines = (int)v;
    }
    if (given[O_GPUS]) {
        if (cli_int(CMD, "--gpus", given[O_GPUS], 1, PF_TOPOLOGY_MAX_DEVICES, &v))
            return CLI_USAGE;
        o.gpus_per_machine = (int)v;
    }
    if (given[O_DEVICES]) {
        if (cli_int(CMD, "--devices", given[O_DEVICES], 1, PF_TOPOLOGY_MAX_DEVICES, &v))
            return CLI_USAGE;
        o.devices = (int)v;
    }
    if (given[O_SEED]) {
        if (cli_int(CMD, "--seed", given[O_SEED], 0, LLONG_MAX, &v))
            return CLI_USAGE;
        o.seed = (uint64_t)v;
    }
    if (given[O_DIMS] && parse_dims(given[O_DIMS], grid3d ? 3 : 2, o.dims, kname))
        return CLI_USAGE;
    static const struct {
        int opt;
        const char *flag;
        int positive;
    } reals[] = {{O_INTRA, "--intra-gbps", 1}, {O_INTER, "--inter-gbps", 1},
                 {O_MEM, "--mem-gb", 1},       {O_TFLOPS, "--tflops", 0},
                 {O_LATENCY, "--latency-us", 0},
                 {O_INTER_LATENCY, "--inter-latency-us", 0}};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        const char *arg = given[reals[i].opt];
        if (!arg)
            continue;
        if (cli_double(CMD, reals[i].flag, arg, 0, 1e9, &x))
            return CLI_USAGE;
        if (reals[i].positive && x <= 0)
            return cli_usage_error(CMD, "%s: must be positive", reals[i].flag);
        switch (reals[i].opt) {
        case O_INTRA: o.intra_gbps = x; break;
        case O_INTER: o.inter_gbps = x; break;
        case O_MEM: o.mem_bytes = x * GIB; break;
        case O_TFLOPS: o.tflops = x; break;
        case O_INTER_LATENCY: o.inter_latency_us = x; break;
        default: o.latency_us = x; break;
        }
    }
    if (given[O_NAME]) {
        if (!*given[O_NAME])
            return cli_usage_error(CMD, "--name: empty");
        o.name = given[O_NAME];
    }

    pf_cluster_t *cl;
    int rc = pf_topology_build(&o, &cl, err, sizeof err);
    if (rc != PF_OK)
        return cli_report(CMD, rc, err);
    rc = pf_cluster_save(cl, out_path, err, sizeof err);
    pf_cluster_destroy(&cl);
    if (rc != PF_OK)
        return cli_report(CMD, rc, err);
    return CLI_OK;
}
