/* planfarm: one binary, sub-commands like git. */
#include "cli/cli.h"

#include <czmq.h>

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command_t;

static const command_t commands[] = {
    {"check", cmd_check, "validate a graph or cluster file and print a summary"},
    {"cluster", cmd_cluster, "generate a cluster file (DGX-1, hierarchy, mesh, torus, random)"},
    {"model", cmd_model, "generate a GPT, BERT, Llama, MoE, ViT, ResNet or U-Net graph"},
    {"import", cmd_import, "convert a PipeDream or Piper profile into a graph file"},
    {"partition", cmd_partition, "cut a graph into S pipeline stages (coarsen, DP, refine)"},
    {"map", cmd_map, "map a partition's stage replicas onto devices (Parmesan V)"},
    {"simulate", cmd_simulate, "simulate one training step of a mapped plan (timeline as SVG)"},
    {"draw", cmd_draw, "draw a mapped plan on its cluster as SVG"},
    {"export", cmd_export, "a plan as Megatron-LM flags, a DeepSpeed config, torchrun layout"},
    {"plan", cmd_plan, "the whole search: stages, replicas, devices (embedded or --broker)"},
    {"broker", cmd_broker, "serve plan requests to clients and their jobs to workers"},
    {"worker", cmd_worker, "run partition and mapping jobs for a broker"},
    {"agent", cmd_agent, "profile this host's GPUs (or CPU) and network for a broker"},
    {"submit", cmd_submit, "send a plan request to a broker (prints its id; --wait)"},
    {"batch", cmd_batch, "submit a list of requests, follow them, write every plan"},
    {"status", cmd_status, "state, jobs and best objective of a request"},
    {"result", cmd_result, "write the plan of a finished request"},
    {"cancel", cmd_cancel, "stop a request"},
    {"list", cmd_list, "every request a broker remembers"},
    {"keygen", cmd_keygen, "make a CurveZMQ key pair (NAME, NAME_secret) for broker, workers, clients"},
    {"profile", cmd_profile, "measure this host's GPUs (or CPU) into a cluster file; --graph"},
    {"calibrate", cmd_calibrate, "fit a device model to a GPU's measured sweep"},
    {"devices", cmd_devices, "list the device model presets (v100 .. b200)"},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: planfarm <command> [options]\n\n"
               "Plans how to train a large model on a GPU cluster: pipeline stages, replicas,\n"
               "and the GPU of every stage replica.\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'planfarm <command> --help' describes one command.\n"
               "Exit status: 0 done, 1 run-time failure, 2 bad usage or input, 3 no feasible "
               "plan.\n");
}

int main(int argc, char **argv)
{
    /* CZMQ logs to stdout by default; stdout carries plans and generated files. */
    zsys_set_logstream(stderr);
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("planfarm 0.1\n");
        return CLI_OK;
    }
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name))
            continue;
        /* getopt prefixes its own messages ("unrecognized option") with argv[0] */
        char self[64];
        snprintf(self, sizeof self, "planfarm %s", commands[i].name);
        argv[1] = self;
        return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "planfarm: '%s' is not a command\n\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
