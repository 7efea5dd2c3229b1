/* cli: what every sub-command shares. The CLI parses flags, calls the layers below and maps
 * their status codes to exit statuses; it holds no algorithm. */
#ifndef PF_CLI_H
#define PF_CLI_H

#include <getopt.h>
#include <stddef.h>

#define CLI_ERRLEN 1024

/* Exit statuses of DESIGN.md "Command line". */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2, CLI_INFEASIBLE = 3 };

/* PF_OK -> 0, PF_EINPUT -> 2, PF_EINFEASIBLE -> 3, anything else -> 1. */
int cli_exit_code(int rc);
/* "planfarm <cmd>: <message>\n" on stderr; returns cli_exit_code(rc). */
int cli_report(const char *cmd, int rc, const char *msg);
/* "planfarm <cmd>: <formatted>\n" on stderr, then returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Number parsers for flag values: the whole string must parse and lie in [lo, hi]; otherwise
 * they print "planfarm <cmd>: --flag: ..." and return -1. */
int cli_int(const char *cmd, const char *flag, const char *arg, long long lo, long long hi,
            long long *out);
int cli_double(const char *cmd, const char *flag, const char *arg, double lo, double hi,
               double *out);

/* Human-readable sizes for summaries: "1.50 GiB". */
void cli_fmt_bytes(char *buf, size_t len, double bytes);

/* Is stderr a terminal (progress lines go there only then)? */
int cli_stderr_tty(void);

/* Whole file ("-" = stdin) into a NUL-terminated buffer the caller frees. */
int cli_read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen);

/* Sub-commands: argv[0] is the sub-command's name. */
int cmd_check(int argc, char **argv);
int cmd_cluster(int argc, char **argv);
int cmd_model(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_partition(int argc, char **argv);
int cmd_map(int argc, char **argv);

#endif
