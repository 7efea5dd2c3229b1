/* The search options that `planfarm plan` and `planfarm submit` share (pf_search_opts_t). */
#include "cli/cli.h"
#include "planner/partition/partition.h"
#include "planner/ir/cost.h"
#include "planner/map/mapping.h"
#include "planner/core/util.h"

#include <stdbool.h>
#include <string.h>

const cli_flag_t cli_planopts_flags[] = {
    {"stages", "--stages"},       {"replicas", "--replicas"},
    {"microbatches", "--microbatches"}, {"coarsen_k", "--coarsen"},
    {"max_downsets", "--max-downsets"}, {"flat_gbps", "--flat-gbps"},
    {"candidates", "--candidates"}, {"probes_in_flight", "--probes-in-flight"},
    {"rel_eps", "--eps"},         {"probe_seconds", "--probe-seconds"},
    {"probe_timeouts", "--probe-timeouts"},
    {"max_stages", "--max-stages"}, {"tp", "--tp"}, {"max_tp", "--max-tp"},
    {"global_batch", "--global-batch"}, {"layer_aligned", "--layer-aligned"},
    {"stage_degrees", "--stage-degrees"},
    {"precision", "--precision"}, {"zero", "--zero"}, {"mem_headroom", "--mem-headroom"},
    {"block_search", "--block-search"}, {"microbatch_size", "--microbatch-size"},
    {"sequence_parallel", "--sequence-parallel"}, {"virtual_stages", "--virtual-stages"},
    {"context_parallel", "--cp"}, {"expert_parallel", "--ep"},
    {NULL, NULL},
};

static int parse_instantiation(const char *cmd, const char *arg, void *base)
{
    pf_search_opts_t *o = base;
    if (!strcmp(arg, "auto")) {
        o->auto_inst = 1;
    } else if (pf_map_inst_parse(arg, &o->inst) == PF_OK) {
        o->auto_inst = 0;
    } else {
        fprintf(stderr, "planfarm %s: --instantiation: '%s' is not m, ar, full or auto\n", cmd,
                arg);
        return -1;
    }
    return 0;
}

static int parse_precision(const char *cmd, const char *arg, void *base)
{
    pf_training_t *t = &((pf_search_opts_t *)base)->train;
    if ((t->precision_bytes = pf_training_precision_parse(arg)) < 0)
        return cli_bad_name(cmd, "--precision", arg, "bf16, fp16 or fp32");
    return 0;
}

static int parse_optimizer(const char *cmd, const char *arg, void *base)
{
    pf_training_t *t = &((pf_search_opts_t *)base)->train;
    if ((int)(t->optimizer = pf_training_optimizer_parse(arg)) < 0)
        return cli_bad_name(cmd, "--optimizer", arg, "adam or sgd");
    return 0;
}

/* Who asked for the block search on the command line, one bit each in block_search (which the
 * search reads as on when positive): --block-search, and each option set to auto. A later value
 * of the same option withdraws its ask, and with no ask left the search decides again (-1). */
enum { ASK_FLAG = 1, ASK_RECOMPUTE = 2, ASK_ZERO = 4, ASK_SP = 8 };

static int ask(const char *cmd, pf_search_opts_t *o, int who, bool on, const char *what)
{
    if (!on) {
        if (o->block_search > 0 && !(o->block_search &= ~who))
            o->block_search = -1;
        return 0;
    }
    if (o->block_search == 0)
        return cli_usage_error(cmd, "%s asks for the block search, which --no-block-search "
                               "turns off", what), -1;
    o->block_search = (o->block_search > 0 ? o->block_search : 0) | who;
    return 0;
}

static int parse_block_on(const char *cmd, const char *arg, void *base)
{
    (void)arg;
    return ask(cmd, base, ASK_FLAG, true, "--block-search");
}

static int parse_block_off(const char *cmd, const char *arg, void *base)
{
    pf_search_opts_t *o = base;
    (void)arg;
    if (o->block_search > 0)
        return cli_usage_error(cmd, "--no-block-search: %s asked for the block search",
                               o->block_search & ASK_FLAG        ? "--block-search"
                               : o->block_search & ASK_RECOMPUTE ? "--recompute auto"
                               : o->block_search & ASK_ZERO      ? "--zero auto"
                                                                 : "--sequence-parallel auto"),
               -1;
    o->block_search = 0;
    return 0;
}

static int parse_recompute(const char *cmd, const char *arg, void *base)
{
    pf_search_opts_t *o = base;
    o->recompute_auto = !strcmp(arg, "auto");
    if (ask(cmd, o, ASK_RECOMPUTE, o->recompute_auto, "--recompute auto"))
        return -1;
    if (o->recompute_auto)
        o->train.recompute = PF_RECOMPUTE_NONE;
    else if ((int)(o->train.recompute = pf_training_recompute_parse(arg)) < 0)
        return cli_bad_name(cmd, "--recompute", arg, "none, selective, full or auto");
    return 0;
}

static int parse_zero(const char *cmd, const char *arg, void *base)
{
    pf_search_opts_t *o = base;
    long long z = 0;
    o->zero_auto = !strcmp(arg, "auto");
    if (ask(cmd, o, ASK_ZERO, o->zero_auto, "--zero auto"))
        return -1;
    if (!o->zero_auto && cli_int(cmd, "--zero", arg, 0, 3, &z))
        return -1;
    o->train.zero = (int)z;
    return 0;
}

static int parse_sequence_parallel(const char *cmd, const char *arg, void *base)
{
    pf_search_opts_t *o = base;
    bool is_auto = !strcmp(arg, "auto");
    if (ask(cmd, o, ASK_SP, is_auto, "--sequence-parallel auto"))
        return -1;
    if (is_auto)
        o->sequence_parallel = -1; /* auto asks for the block search */
    else if (!strcmp(arg, "on") || !strcmp(arg, "off"))
        o->sequence_parallel = !strcmp(arg, "on");
    else
        return cli_bad_name(cmd, "--sequence-parallel", arg, "on, off or auto");
    return 0;
}

static int parse_schedule(const char *cmd, const char *arg, void *base)
{
    pf_search_opts_t *o = base;
    if ((int)(o->train.schedule = pf_training_schedule_parse(arg)) < 0 ||
        o->train.schedule == PF_SCHEDULE_SIGNAL)
        return cli_bad_name(cmd, "--schedule", arg, "1f1b, gpipe or eager-1f1b");
    o->schedules = 1u << o->train.schedule; /* the plan runs this one, not the best of all */
    return 0;
}

#define O(field) offsetof(pf_search_opts_t, field)
const cli_option_t cli_planopts_table[] = {
    {"stages", 0, CLI_OPT_INT, .offset = O(stages), .lo = 1, .hi = 4096},
    {"replicas", 0, CLI_OPT_INT, .offset = O(replicas), .lo = 1, .hi = 4096},
    {"microbatches", 0, CLI_OPT_INT, .offset = O(microbatches), .lo = 1, .hi = 1 << 20},
    {"coarsen", 0, CLI_OPT_INT, .offset = O(coarsen_k), .lo = -1, .hi = 1 << 24},
    {"max-downsets", 0, CLI_OPT_LLONG, .offset = O(max_downsets), .lo = 1, .hi = 1LL << 40},
    {"no-refine", 0, CLI_OPT_SET_INT, .offset = O(refine), .lo = 0},
    {"flat-gbps", 0, CLI_OPT_DOUBLE, .offset = O(flat_gbps), .dlo = 1e-9, .dhi = 1e9},
    {"candidates", 0, CLI_OPT_INT, .offset = O(candidates), .lo = 1, .hi = 64},
    {"probes-in-flight", 0, CLI_OPT_INT, .offset = O(probes_in_flight), .lo = 1, .hi = 64},
    {"eps", 0, CLI_OPT_DOUBLE, .offset = O(rel_eps), .dlo = 1e-12, .dhi = 0.5},
    {"probe-seconds", 0, CLI_OPT_DOUBLE, .offset = O(probe_seconds), .dlo = 1e-3, .dhi = 86400},
    {"no-symmetry", 0, CLI_OPT_SET_INT, .offset = O(symmetry), .lo = 0},
    {"instantiation", 0, CLI_OPT_CUSTOM, .parse = parse_instantiation},
    {"seed", 0, CLI_OPT_U64, .offset = O(seed), .lo = 1, .hi = 1LL << 62},
    {"max-stages", 0, CLI_OPT_INT, .offset = O(max_stages), .lo = 1, .hi = 4096},
    {"tp", 0, CLI_OPT_INT, .offset = O(tp), .lo = 1, .hi = 4096},
    {"max-tp", 0, CLI_OPT_INT, .offset = O(max_tp), .lo = 1, .hi = 4096},
    {"tp-across-hosts", 0, CLI_OPT_SET_INT, .offset = O(tp_across_hosts), .lo = 1},
    {"precision", 0, CLI_OPT_CUSTOM, .parse = parse_precision},
    {"optimizer", 0, CLI_OPT_CUSTOM, .parse = parse_optimizer},
    {"zero", 0, CLI_OPT_CUSTOM, .parse = parse_zero},
    {"block-search", 0, CLI_OPT_CUSTOM_FLAG, .parse = parse_block_on},
    {"no-block-search", 0, CLI_OPT_CUSTOM_FLAG, .parse = parse_block_off},
    {"block-candidates", 0, CLI_OPT_INT, .offset = O(block_candidates), .lo = 1, .hi = 8},
    {"microbatch-size", 0, CLI_OPT_INT, .offset = O(microbatch_size), .lo = 1, .hi = 1 << 20},
    {"sequence-parallel", 0, CLI_OPT_CUSTOM, .parse = parse_sequence_parallel},
    {"virtual-stages", 0, CLI_OPT_INT, .offset = O(virtual_stages), .lo = 1, .hi = 4096},
    {"cp", 0, CLI_OPT_INT, .offset = O(context_parallel), .lo = 1, .hi = 1 << 20},
    {"ep", 0, CLI_OPT_INT, .offset = O(expert_parallel), .lo = 1, .hi = 1 << 20},
    {"recompute", 0, CLI_OPT_CUSTOM, .parse = parse_recompute},
    {"schedule", 0, CLI_OPT_CUSTOM, .parse = parse_schedule},
    {"global-batch", 0, CLI_OPT_LLONG, .offset = O(global_batch), .lo = 1, .hi = 1LL << 40},
    {"layer-aligned", 0, CLI_OPT_SET_INT, .offset = O(layer_aligned), .lo = 1},
    {"stage-degrees", 0, CLI_OPT_SET_INT, .offset = O(stage_degrees), .lo = 1},
    {"mem-headroom", 0, CLI_OPT_DOUBLE, .offset = O(mem_headroom), .dlo = 0, .dhi = 0.99},
    {"probe-timeouts", 0, CLI_OPT_INT, .offset = O(probe_timeouts), .lo = 0, .hi = 1000000},
    CLI_OPTION_END,
};
#undef O

void cli_planopts_init(pf_search_opts_t *o)
{
    pf_search_opts_init(o);
    o->block_search = -1;
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
            "  --zero Z              ZeRO stage 0-3 over the data-parallel group, or auto (the\n"
            "                        block search chooses) (default auto with the block search,\n"
            "                        else 0)\n"
            "  --recompute R         none, selective or full activation recomputation, or auto\n"
            "                        (the block search, per stage) (default auto with the block\n"
            "                        search, else none)\n"
            "  --schedule S          1f1b, gpipe or eager-1f1b: the plan runs this schedule\n"
            "                        (default: the best candidates are simulated under all three\n"
            "                        and the fastest that fits memory is chosen)\n"
            "  --global-batch N      samples per step: micro-batch x MB x replicas = N (MB follows\n"
            "                        from R; replaces --microbatches)\n"
            "  --layer-aligned       stage boundaries only between repeated blocks (what Megatron\n"
            "                        and DeepSpeed run; planfarm export needs it)\n"
            "  --stage-degrees       also try a plan whose stages choose their own data-parallel\n"
            "                        degree (PipeDream's and Piper's space; needs --global-batch;\n"
            "                        kept when it trains faster per sample than the best uniform\n"
            "                        plan; Megatron-LM and DeepSpeed cannot run such a plan)\n"
            "  --mem-headroom F      fraction of every GPU's memory left free for the CUDA\n"
            "                        context, NCCL buffers and fragmentation (default %g)\n"
            "\nblock-level search (graphs of repeated blocks; needs --global-batch; on by default\n"
            "under --global-batch on a cluster of one GPU kind, where the op-level search alone\n"
            "plans a graph without repeated blocks or whose block candidates all fail, and a\n"
            "cluster of several GPU kinds): Megatron-LM configurations\n"
            "ranked by an analytic model fix S, T, R, the micro-batch, recomputation and ZeRO for\n"
            "the search (whole layers per stage); recomputation and ZeRO are searched unless\n"
            "--recompute / --zero fix them:\n"
            "  --block-search        require it (an error where it cannot plan), every\n"
            "                        dimension searched\n"
            "  --no-block-search     the op-level search alone (Parmesan's DP over the ops at the\n"
            "                        graph's micro-batch; recomputation and ZeRO as fixed)\n"
            "  --block-candidates K  distinct (S, T) pairs the later phases try (default %d)\n"
            "  --microbatch-size B   samples per micro-batch (default: searched where the graph\n"
            "                        names a device model, which re-prices it, else the graph's)\n"
            "  --sequence-parallel X on, off or auto (default auto)\n"
            "  --virtual-stages V    interleaved 1F1B model chunks per device (default: searched)\n"
            "  --cp C                context parallelism: each sequence split over C GPUs, ring\n"
            "                        attention (default: searched where the sequence divides by 2C)\n"
            "  --ep E                expert parallelism: each MoE layer's experts over E GPUs\n"
            "                        (default: searched on MoE graphs, E dividing the experts)\n",
            d.max_stages, PF_DEFAULT_MICROBATCHES, PF_PARTITION_DEFAULT_MAX_DOWNSETS,
            d.candidates, d.probes_in_flight, d.rel_eps,
            d.probe_seconds, d.probe_timeouts, (unsigned long long)d.seed, d.max_tp, d.mem_headroom,
            d.block_candidates);
}
