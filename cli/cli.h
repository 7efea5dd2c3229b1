/* cli: what every sub-command shares. The CLI parses flags, calls the layers below and maps
 * their status codes to exit statuses; it holds no algorithm. */
#ifndef PF_CLI_H
#define PF_CLI_H

#include "planner/search/search.h"
#include "proto/curve.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_ERRLEN 1024

/* Exit statuses of DESIGN.md "Command line". */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2, CLI_INFEASIBLE = 3 };

/* PF_OK -> 0, PF_EINPUT -> 2, PF_EINFEASIBLE -> 3, anything else -> 1. */
int cli_exit_code(int rc);
/* "planfarm <cmd>: <message>\n" on stderr; returns cli_exit_code(rc). */
int cli_report(const char *cmd, int rc, const char *msg);
/* The planner names its inputs (option fields), the CLI its flags: in the subject of a message
 * (the text before its first ": ") each field that map names (a { NULL } entry ends it) becomes
 * its flag, e.g. "coarsen_k: K = 2 ..." -> "--coarsen: K = 2 ...". */
typedef struct {
    const char *field, *flag;
} cli_flag_t;
void cli_flag_names(char *msg, size_t len, const cli_flag_t *map);

/* "planfarm <cmd>: <formatted>\n" on stderr, then returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Number parsers for flag values: the whole string must parse and lie in [lo, hi]; otherwise
 * they print "planfarm <cmd>: --flag: ..." and return -1. */
int cli_int(const char *cmd, const char *flag, const char *arg, long long lo, long long hi,
            long long *out);
int cli_double(const char *cmd, const char *flag, const char *arg, double lo, double hi,
               double *out);
/* A name flag whose value is none of `known`: prints "planfarm <cmd>: --flag: 'x' is not
 * <known>" and returns -1. */
int cli_bad_name(const char *cmd, const char *flag, const char *arg, const char *known);

/* Is stderr a terminal (progress lines go there only then)? */
/* A duration for people: "%.4g ms" below 10 s, else seconds with one decimal ("142.2 s", not
 * "1.422e+05 ms"); "-" when not finite. Returns buf. */
const char *cli_fmt_ms(char *buf, size_t len, double ms);
bool cli_stderr_tty(void);

/* A ZeroMQ endpoint this program can use: tcp://HOST:PORT (PORT may be * or 0 to bind),
 * ipc://PATH or inproc://NAME. Prints "planfarm <cmd>: <flag>: ..." and returns -1 if not. */
int cli_check_endpoint(const char *cmd, const char *flag, const char *endpoint);
/* -o PATH can be written (its directory exists and is writable, it is not a directory): checked
 * before a long search rather than after. "-" and NULL are stdout. Prints and returns -1. */
int cli_check_output(const char *cmd, const char *path);

/* Whole file ("-" = stdin) into a NUL-terminated buffer the caller frees. */
int cli_read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen);

/* ---- the option tables every sub-command's flags are declared in (cli/options.c) ---- */

typedef enum {
    CLI_OPT_HELP,     /* -h, --help: the sub-command prints its help on stdout and exits 0 */
    CLI_OPT_FLAG,     /* no value: the bool field becomes true */
    CLI_OPT_SET_INT,  /* no value: the int field becomes lo (--quiet: 1, --no-refine: 0) */
    CLI_OPT_INT,      /* an integer in [lo, hi] into an int */
    CLI_OPT_LLONG,    /* ... into a long long */
    CLI_OPT_U64,      /* ... into a uint64_t */
    CLI_OPT_MIB,      /* an integer in [lo, hi] MiB into an int64_t count of bytes */
    CLI_OPT_MIB_SIZE, /* ... into a size_t */
    CLI_OPT_DOUBLE,   /* a number in [dlo, dhi] into a double */
    CLI_OPT_STRING,   /* the text as given into a const char * */
    CLI_OPT_CUSTOM,   /* parse converts and stores it */
    CLI_OPT_CUSTOM_FLAG, /* no value: parse (arg NULL) stores what the flag means */
} cli_opt_kind_t;

enum {
    CLI_OPT_INDIRECT = 1u << 0, /* the field holds a pointer to where the value goes */
    CLI_OPT_POSITIVE = 1u << 1, /* CLI_OPT_DOUBLE: 0 is "must be positive" */
};

/* One flag. Messages name it --name whichever way it was given. */
typedef struct cli_option {
    const char *name;   /* long name without "--"; NULL ends a table */
    char letter;        /* short option, or 0 */
    cli_opt_kind_t kind;
    size_t offset;      /* of its field in the struct the table is bound to */
    long long lo, hi;   /* integer kinds: the range; CLI_OPT_SET_INT: the value */
    double dlo, dhi;    /* CLI_OPT_DOUBLE: the range */
    unsigned flags;     /* CLI_OPT_INDIRECT, CLI_OPT_POSITIVE */
    /* CLI_OPT_CUSTOM: convert arg and store it in *base; 0, or -1 after printing why */
    int (*parse)(const char *cmd, const char *arg, void *base);
} cli_option_t;

#define CLI_OPTION_HELP {"help", 'h', CLI_OPT_HELP, .offset = 0}
#define CLI_OPTION_END {NULL, 0, CLI_OPT_HELP, .offset = 0}

/* A table and the struct its offsets point into; given (optional) has a slot per row, set to true
 * when the row's flag was on the command line. */
typedef struct {
    const cli_option_t *table;
    void *base;
    bool *given;
} cli_options_bind_t;

#define CLI_OPTIONS_GROUPS 8

/* What one sub-command accepts: its tables in getopt's order (an ambiguous abbreviation's
 * candidates are listed in it), a { NULL } bind (or the end of bind) ending them. */
typedef struct {
    const char *cmd;         /* messages begin "planfarm <cmd>: " */
    void (*help)(FILE *f);   /* what --help prints */
    const char *unknown;     /* said after getopt's own message; NULL: "unknown option" */
    const char *where;       /* options read from a file (a batch list line): getopt stays quiet
                              * and messages name this place; NULL: the command line */
    cli_options_bind_t bind[CLI_OPTIONS_GROUPS];
} cli_options_t;

/* Parses argv's options (options and operands may mix; argv is permuted so that the operands
 * come last) and stores every value. Returns the index of the first operand, or -1 with *status
 * the exit status: CLI_OK after --help (printed), CLI_USAGE after a bad flag or value (its
 * message printed). */
int cli_options_parse(const cli_options_t *s, int argc, char **argv, int *status);
/* Convert and store one value of row o (the command line's flags are stored by the parse; a
 * sub-command whose flags depend on an operand converts them with this once it is known). 0, or
 * -1 after printing why. */
int cli_options_set(const char *cmd, const cli_option_t *o, const char *arg, void *base);
/* --help alone (bound to nothing). */
extern const cli_option_t cli_options_help[];
/* -o, --output FILE (bound to a const char *) and --help: all that draw and export take. */
extern const cli_option_t cli_options_output[];

/* ---- the search options of `plan`, `submit` and batch lists (cli/planopts.c) ---- */

/* Bound to a pf_search_opts_t. */
extern const cli_option_t cli_planopts_table[];
/* The fields of pf_search_opts_t that plan options set, with their flags. */
extern const cli_flag_t cli_planopts_flags[];
void cli_planopts_help(FILE *f);
/* The search's defaults as the command line gives them: pf_search_opts_init's, with the block
 * search left to the search (on for graphs of repeated blocks under --global-batch). */
void cli_planopts_init(pf_search_opts_t *o);

/* ---- the flags the broker and the worker share (cli/netopts.c) ---- */

/* Where those flags go: fields of a pf_broker_opts_t or a pf_worker_opts_t. */
typedef struct {
    int *heartbeat_ms, *liveness, *verbose;
    int64_t *max_msg_bytes;
} cli_netopts_t;

/* Bound to a cli_netopts_t: the values go where its pointers point. */
extern const cli_option_t cli_netopts_table[];
/* Their help lines, with the defaults that *defaults points at. */
void cli_netopts_help(FILE *f, const cli_netopts_t *defaults);
/* After the options (argv[first] the first operand): no operand is left and the endpoint (if
 * any) is well formed. Returns CLI_OK or the usage exit status (message printed). */
int cli_netopts_args_done(const char *cmd, int argc, char **argv, int first,
                          const char *endpoint_flag, const char *endpoint);

/* ---- key options of clients and workers (cli/keyopts.c) ---- */

/* --cert, --broker-key, --insecure; bound to a pf_curve_opts_t. */
extern const cli_option_t cli_keyopts_table[];
void cli_keyopts_help(FILE *f);

/* ---- talking to a broker (cli/remote.c) ---- */
#define CLI_DEFAULT_TIMEOUT_S 5.0

/* The flags of the sub-commands that talk to a broker. */
typedef struct {
    const char *broker, *out;
    double timeout_s;
    bool quiet;
} cli_remote_args_t;
/* --broker ENDPOINT, --timeout S; bound to a cli_remote_args_t. */
extern const cli_option_t cli_remote_broker_options[];
/* --quiet, -o/--output PATH; bound to a cli_remote_args_t. */
extern const cli_option_t cli_remote_output_options[];

typedef struct pf_client pf_client_t;
/* A client of the broker at endpoint with these keys; prints the reason and returns NULL when
 * it cannot be made (keys unreadable, plain TCP off the machine without --insecure). */
pf_client_t *cli_remote_client_new(const char *cmd, const char *endpoint, double timeout_s,
                                   const pf_curve_opts_t *k);
/* Load a graph and a cluster file; prints errors itself and returns an exit status. */
int cli_remote_load_inputs(const char *cmd, const char *graph_path, const char *cluster_path,
                           pf_graph_t **g, pf_cluster_t **c);
/* Submit them (label: the two file names); prints errors itself. Returns an exit status; *id
 * (caller frees) on success. */
int cli_remote_submit(const char *cmd, pf_client_t *client, const pf_graph_t *g,
                      const pf_cluster_t *c, const char *graph_path, const char *cluster_path,
                      const pf_search_opts_t *o, char **id);
/* Poll the request until it ends (progress on stderr when it is a terminal and `progress`),
 * then write its plan to out_path ("-" or NULL = stdout) and a summary on stderr unless quiet.
 * Polls start 1 ms apart and grow by half up to max_poll_ms. Returns the exit status: 0 done,
 * 3 infeasible, 2 bad input, 1 otherwise. */
int cli_remote_wait_and_fetch(const char *cmd, pf_client_t *c, const char *id,
                              const char *out_path, bool progress, bool quiet, int max_poll_ms);
/* Write a finished request's plan and summary; the exit status as above (1 while running). */
int cli_remote_fetch_plan(const char *cmd, pf_client_t *c, const char *id, const char *out_path,
                          bool quiet);

/* Sub-commands: argv[0] is the sub-command's name. */
int cmd_check(int argc, char **argv);
int cmd_cluster(int argc, char **argv);
int cmd_model(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_partition(int argc, char **argv);
int cmd_map(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_draw(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_broker(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_submit(int argc, char **argv);
int cmd_batch(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_result(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_devices(int argc, char **argv);

#endif
