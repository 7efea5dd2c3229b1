/* The search options that `planfarm plan` and `planfarm submit` share (pf_search_opts_t). */
#include "cli/cli.h"
#include "planner/partition/partition.h"
#include "planner/ir/cost.h"
#include "planner/map/mapping.h"
#include "planner/core/util.h"

#include <string.h>

const cli_flag_t cli_planopt_flags[] = {
    {"stages", "--stages"},       {"replicas", "--replicas"},
    {"microbatches", "--microbatches"}, {"coarsen_k", "--coarsen"},
    {"max_downsets", "--max-downsets"}, {"flat_gbps", "--flat-gbps"},
    {"candidates", "--candidates"}, {"probes_in_flight", "--probes-in-flight"},
    {"rel_eps", "--eps"},         {"probe_seconds", "--probe-seconds"},
    {"probe_timeouts", "--probe-timeouts"},
    {"max_stages", "--max-stages"}, {"tp", "--tp"}, {"max_tp", "--max-tp"},
    {"global_batch", "--global-batch"}, {"layer_aligned", "--layer-aligned"},
    {"precision", "--precision"}, {"zero", "--zero"}, {"mem_headroom", "--mem-headroom"},
    {NULL, NULL},
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
    case 15:
        if (cli_int(cmd, "--tp", arg, 1, 4096, &i))
            return -1;
        o->tp = (int)i;
        return 1;
    case 16:
        if (cli_int(cmd, "--max-tp", arg, 1, 4096, &i))
            return -1;
        o->max_tp = (int)i;
        return 1;
    case 17:
        o->tp_across_hosts = 1;
        return 1;
    case 18:
        if ((o->train.precision_bytes = pf_precision_parse(arg)) < 0)
            return cli_bad_name(cmd, "--precision", arg, "bf16, fp16 or fp32");
        return 1;
    case 19:
        if ((int)(o->train.optimizer = pf_optimizer_parse(arg)) < 0)
            return cli_bad_name(cmd, "--optimizer", arg, "adam or sgd");
        return 1;
    case 20:
        if (cli_int(cmd, "--zero", arg, 0, 3, &i))
            return -1;
        o->train.zero = (int)i;
        return 1;
    case 21:
        if ((int)(o->train.recompute = pf_recompute_parse(arg)) < 0)
            return cli_bad_name(cmd, "--recompute", arg, "none, selective or full");
        return 1;
    case 22:
        if ((int)(o->train.schedule = pf_schedule_parse(arg)) < 0 ||
            o->train.schedule == PF_SCHEDULE_SIGNAL)
            return cli_bad_name(cmd, "--schedule", arg, "1f1b, gpipe or eager-1f1b");
        o->schedules = 1u << o->train.schedule; /* the plan runs this one, not the best of all */
        return 1;
    case 23:
        if (cli_int(cmd, "--global-batch", arg, 1, 1LL << 40, &i))
            return -1;
        o->global_batch = i;
        return 1;
    case 24:
        o->layer_aligned = 1;
        return 1;
    case 25:
        if (cli_double(cmd, "--mem-headroom", arg, 0, 0.99, &x))
            return -1;
        o->mem_headroom = x;
        return 1;
    case 26:
        if (cli_int(cmd, "--probe-timeouts", arg, 0, 1000000, &i))
            return -1;
        o->probe_timeouts = (int)i;
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
            "  --probe-timeouts N    a mapping binary search ends after N timed-out probes\n"
            "                        (default %d; 0 = no limit)\n"
            "  --no-symmetry         do not prune interchangeable devices in probes\n"
            "  --instantiation I     m, ar, full or auto (default auto: both, keep the better)\n"
            "  --seed N              seed of the random upper-bound mapping (default %llu)\n"
            "\ntensor parallelism (TAP finds each weight's split; DESIGN.md \"tap, sharding\"):\n"
            "  --tp T                only tensor-parallel degree T (default: every T that divides\n"
            "                        each host's devices, up to --max-tp; 1 for graphs without\n"
            "                        weight shapes)\n"
            "  --max-tp N            largest T tried (default %d)\n"
            "  --tp-across-hosts     a tensor-parallel group may span hosts\n"
            "\ntraining (memory per GPU, DESIGN.md \"Memory per device\"):\n"
            "  --precision P         bf16, fp16 or fp32: bytes per parameter of param_bytes and\n"
            "                        the master copy rule (default bf16: 16 B per parameter with\n"
            "                        Adam)\n"
            "  --optimizer O         adam or sgd (with momentum) (default adam)\n"
            "  --zero Z              ZeRO stage 0-3 over the data-parallel group (default 0)\n"
            "  --recompute R         none, selective or full activation recomputation (default\n"
            "                        none)\n"
            "  --schedule S          1f1b, gpipe or eager-1f1b: the plan runs this schedule\n"
            "                        (default: the best candidates are simulated under all three\n"
            "                        and the fastest that fits memory is chosen)\n"
            "  --global-batch N      samples per step: micro-batch x MB x replicas = N (MB follows\n"
            "                        from R; replaces --microbatches)\n"
            "  --layer-aligned       stage boundaries only between repeated blocks (what Megatron\n"
            "                        and DeepSpeed run; planfarm export needs it)\n"
            "  --mem-headroom F      fraction of every GPU's memory left free for the CUDA\n"
            "                        context, NCCL buffers and fragmentation (default %g)\n",
            d.max_stages, PF_DEFAULT_MICROBATCHES, PF_PARTITION_DEFAULT_MAX_DOWNSETS,
            d.candidates, d.probes_in_flight, d.rel_eps,
            d.probe_seconds, d.probe_timeouts, (unsigned long long)d.seed, d.max_tp, d.mem_headroom);
}
