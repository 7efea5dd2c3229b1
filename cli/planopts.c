/* The search options that `planfarm plan` and `planfarm submit` share (pf_search_opts_t). */
#include "cli/cli.h"
#include "planner/partition.h"
#include "planner/cost.h"
#include "planner/mapping.h"
#include "planner/util.h"

#include <string.h>

const cli_flag_t cli_planopt_flags[] = {
    {"stages", "--stages"},       {"replicas", "--replicas"},
    {"microbatches", "--microbatches"}, {"coarsen_k", "--coarsen"},
    {"max_downsets", "--max-downsets"}, {"flat_gbps", "--flat-gbps"},
    {"candidates", "--candidates"}, {"probes_in_flight", "--probes-in-flight"},
    {"rel_eps", "--eps"},         {"probe_seconds", "--probe-seconds"},
    {"max_stages", "--max-stages"}, {NULL, NULL},
};

int cli_planopt(const char *cmd, int code, const char *arg, pf_search_opts_t *o)
{
    long long i;
    double x;
    switch (code - CLI_PLANOPT_BASE) {
    case 0:
        if (cli_int(cmd, "--stages", arg, 1, 4096, &i))
            return -1;
        o->stages = (int)i;
        return 1;
    case 1:
        if (cli_int(cmd, "--replicas", arg, 1, 4096, &i))
            return -1;
        o->replicas = (int)i;
        return 1;
    case 2:
        if (cli_int(cmd, "--microbatches", arg, 1, 1 << 20, &i))
            return -1;
        o->microbatches = (int)i;
        return 1;
    case 3:
        if (cli_int(cmd, "--coarsen", arg, -1, 1 << 24, &i))
            return -1;
        o->coarsen_k = (int)i;
        return 1;
    case 4:
        if (cli_int(cmd, "--max-downsets", arg, 1, 1LL << 40, &i))
            return -1;
        o->max_downsets = i;
        return 1;
    case 5:
        o->refine = 0;
        return 1;
    case 6:
        if (cli_double(cmd, "--flat-gbps", arg, 1e-9, 1e9, &x))
            return -1;
        o->flat_gbps = x;
        return 1;
    case 7:
        if (cli_int(cmd, "--candidates", arg, 1, 64, &i))
            return -1;
        o->candidates = (int)i;
        return 1;
    case 8:
        if (cli_int(cmd, "--probes-in-flight", arg, 1, 64, &i))
            return -1;
        o->probes_in_flight = (int)i;
        return 1;
    case 9:
        if (cli_double(cmd, "--eps", arg, 1e-12, 0.5, &x))
            return -1;
        o->rel_eps = x;
        return 1;
    case 10:
        if (cli_double(cmd, "--probe-seconds", arg, 1e-3, 86400, &x))
            return -1;
        o->probe_seconds = x;
        return 1;
    case 11:
        o->symmetry = 0;
        return 1;
    case 12:
        if (!strcmp(arg, "auto")) {
            o->auto_inst = 1;
        } else if (pf_inst_parse(arg, &o->inst) == PF_OK) {
            o->auto_inst = 0;
        } else {
            fprintf(stderr, "planfarm %s: --instantiation: '%s' is not m, ar, full or auto\n", cmd,
                    arg);
            return -1;
        }
        return 1;
    case 13:
        if (cli_int(cmd, "--seed", arg, 1, (1LL << 62), &i))
            return -1;
        o->seed = (uint64_t)i;
        return 1;
    case 14:
        if (cli_int(cmd, "--max-stages", arg, 1, 4096, &i))
            return -1;
        o->max_stages = (int)i;
        return 1;
    default:
        return 0;
    }
}

void cli_planopts_help(FILE *f)
{
    pf_search_opts_t d;
    pf_search_opts_init(&d);
    fprintf(f,
            "search options (DESIGN.md \"The search\"):\n"
            "  --stages S            only S pipeline stages (default: every S dividing the "
            "devices)\n"
            "  --replicas R          replicas per stage (default devices / S)\n"
            "  --max-stages N        largest S tried when --stages is absent (default %d)\n"
            "  --microbatches MB     micro-batches per step (default %d)\n"
            "  --coarsen K           hyper-ops kept by operator clustering (default: none when\n"
            "                        the ops' downsets fit --max-downsets, else clamp(8 S, 48,\n"
            "                        ops); -1 = none)\n"
            "  --max-downsets N      past N downsets, DP over topological prefixes (default "
            "%lld)\n"
            "  --no-refine           skip the boundary refinement (Parmesan IV-C)\n"
            "  --flat-gbps X         bandwidth for partitioning (default: median of the "
            "cluster)\n"
            "  --candidates N        partitions carried into mapping (default %d)\n"
            "  --probes-in-flight W  mapping probes in flight per binary search (default %d)\n"
            "  --eps X               binary search stops at t_r - t_l <= X t_r (default %g)\n"
            "  --probe-seconds X     budget of one mapping probe, > 0: distributed probes need a\n"
            "                        deadline (default %g)\n"
            "  --no-symmetry         do not prune interchangeable devices in probes\n"
            "  --instantiation I     m, ar, full or auto (default auto: both, keep the better)\n"
            "  --seed N              seed of the random upper-bound mapping (default %llu)\n",
            d.max_stages, PF_DEFAULT_MICROBATCHES, PF_PARTITION_DEFAULT_MAX_DOWNSETS,
            d.candidates, d.probes_in_flight, d.rel_eps,
            d.probe_seconds, (unsigned long long)d.seed);
}
