/* One option parser for every sub-command. A sub-command lists its flags in a table (long name,
 * short letter, kind of value, the field it fills, the range it must lie in) and hands the tables
 * to cli_options_parse, which runs getopt_long over them, converts and range-checks every value
 * and stores it. A flag is one row, never a case in a switch: the job-kind table of the search
 * (planner/search/job.c) is the model. */
#include "cli/cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* The most rows all the groups of one sub-command hold. */
#define MAX_ROWS 96

typedef struct {
    const cli_option_t *row[MAX_ROWS];
    void *base[MAX_ROWS];
    bool *given[MAX_ROWS];
    struct option longs[MAX_ROWS + 1];
    char shorts[2 * MAX_ROWS + 1];
    int n;
} rows_t;

static bool takes_value(cli_opt_kind_t kind)
{
    return kind != CLI_OPT_HELP && kind != CLI_OPT_FLAG && kind != CLI_OPT_SET_INT &&
           kind != CLI_OPT_CUSTOM_FLAG;
}

/* Every group's rows in order, with getopt_long's tables: the long options keep the rows' order
 * (getopt lists an ambiguous abbreviation's candidates in it), each returns 256 + its row. */
static void gather(const cli_options_t *s, rows_t *r)
{
    size_t ns = 0;
    r->n = 0;
    for (const cli_options_bind_t *b = s->bind; b < s->bind + CLI_OPTIONS_GROUPS && b->table; b++)
        for (int i = 0; b->table[i].name; i++) {
            const cli_option_t *o = &b->table[i];
            if (r->n == MAX_ROWS)
                abort(); /* a table grew past MAX_ROWS: raise it */
            r->row[r->n] = o;
            r->base[r->n] = b->base;
            r->given[r->n] = b->given ? &b->given[i] : NULL;
            r->longs[r->n] = (struct option){o->name, takes_value(o->kind) ? required_argument
                                                                           : no_argument,
                                             NULL, 256 + r->n};
            if (o->letter) {
                r->shorts[ns++] = o->letter;
                if (takes_value(o->kind))
                    r->shorts[ns++] = ':';
            }
            r->n++;
        }
    r->longs[r->n] = (struct option){0, 0, 0, 0};
    r->shorts[ns] = '\0';
}

/* The row getopt_long's code c stands for, or -1 (an unknown option, a missing value). */
static int row_of(const rows_t *r, int c)
{
    if (c >= 256 && c < 256 + r->n)
        return c - 256;
    for (int i = 0; c != '?' && i < r->n; i++)
        if (r->row[i]->letter == c)
            return i;
    return -1;
}

static void store_int(const cli_option_t *o, void *field, long long v)
{
    switch (o->kind) {
    case CLI_OPT_INT: *(int *)field = (int)v; break;
    case CLI_OPT_LLONG: *(long long *)field = v; break;
    case CLI_OPT_U64: *(uint64_t *)field = (uint64_t)v; break;
    case CLI_OPT_MIB: *(int64_t *)field = (int64_t)v << 20; break;
    case CLI_OPT_MIB_SIZE: *(size_t *)field = (size_t)v << 20; break;
    default: break;
    }
}

int cli_options_set(const char *cmd, const cli_option_t *o, const char *arg, void *base)
{
    char flag[64];
    long long v;
    double x;
    void *field = (char *)base + o->offset;
    if (o->flags & CLI_OPT_INDIRECT)
        field = *(void **)field;
    snprintf(flag, sizeof flag, "--%s", o->name);
    switch (o->kind) {
    case CLI_OPT_HELP: return 0;
    case CLI_OPT_FLAG: *(bool *)field = true; return 0;
    case CLI_OPT_SET_INT: *(int *)field = (int)o->lo; return 0;
    case CLI_OPT_STRING: *(const char **)field = arg; return 0;
    case CLI_OPT_CUSTOM:
    case CLI_OPT_CUSTOM_FLAG: return o->parse(cmd, arg, base);
    case CLI_OPT_DOUBLE:
        if (cli_double(cmd, flag, arg, o->dlo, o->dhi, &x))
            return -1;
        if ((o->flags & CLI_OPT_POSITIVE) && x <= 0) {
            cli_usage_error(cmd, "%s: must be positive", flag);
            return -1;
        }
        *(double *)field = x;
        return 0;
    default:
        if (cli_int(cmd, flag, arg, o->lo, o->hi, &v))
            return -1;
        store_int(o, field, v);
        return 0;
    }
}

/* After getopt_long's own message (unless the options come from a file): the exit status. */
static int unknown_option(const cli_options_t *s, char **argv)
{
    if (!s->where)
        return cli_usage_error(s->cmd, "%s", s->unknown ? s->unknown : "unknown option");
    fprintf(stderr, "planfarm %s: %s: unknown or incomplete option '%s'\n", s->cmd, s->where,
            argv[optind - 1]);
    return CLI_USAGE;
}

int cli_options_parse(const cli_options_t *s, int argc, char **argv, int *status)
{
    rows_t r;
    int c;
    gather(s, &r);
    *status = CLI_OK;
    optind = 0; /* glibc: start over, whatever parsed before */
    opterr = !s->where;
    while (*status == CLI_OK && (c = getopt_long(argc, argv, r.shorts, r.longs, NULL)) != -1) {
        int i = row_of(&r, c);
        if (i < 0) {
            *status = unknown_option(s, argv);
        } else if (r.row[i]->kind == CLI_OPT_HELP) {
            s->help(stdout);
            opterr = 1;
            return -1;
        } else if (cli_options_set(s->cmd, r.row[i], optarg, r.base[i]) != 0) {
            *status = CLI_USAGE;
            if (s->where)
                fprintf(stderr, "planfarm %s: (at %s)\n", s->cmd, s->where);
        } else if (r.given[i]) {
            *r.given[i] = true;
        }
    }
    opterr = 1;
    return *status == CLI_OK ? optind : -1;
}

const cli_option_t cli_options_help[] = {
    CLI_OPTION_HELP,
    CLI_OPTION_END,
};

const cli_option_t cli_options_output[] = {
    {"output", 'o', CLI_OPT_STRING, .offset = 0},
    CLI_OPTION_HELP,
    CLI_OPTION_END,
};
