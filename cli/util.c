#include "cli/cli.h"
#include "planner/core/util.h"

#include <errno.h>
#include <math.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_exit_code(int rc)
{
    switch (rc) {
    case PF_OK: return CLI_OK;
    case PF_EINPUT: return CLI_USAGE;
    case PF_EINFEASIBLE: return CLI_INFEASIBLE;
    default: return CLI_FAIL;
    }
}

int cli_report(const char *cmd, int rc, const char *msg)
{
    fprintf(stderr, "planfarm %s: %s\n", cmd, msg && *msg ? msg : "failed");
    return cli_exit_code(rc);
}

void cli_flag_names(char *msg, size_t len, const cli_flag_t *map)
{
    const char *colon = strstr(msg, ": ");
    if (!colon)
        return;
    char out[CLI_ERRLEN];
    size_t n = 0, subject = (size_t)(colon - msg);
    for (size_t i = 0; msg[i] && n + 1 < sizeof out;) {
        size_t w = 0;
        if (i < subject)
            while (i + w < subject && (islower((unsigned char)msg[i + w]) || msg[i + w] == '_'))
                w++;
        const char *flag = NULL;
        for (const cli_flag_t *m = map; w && m->field; m++)
            if (strlen(m->field) == w && !strncmp(msg + i, m->field, w))
                flag = m->flag;
        if (flag) {
            n += (size_t)snprintf(out + n, sizeof out - n, "%s", flag);
            n = n < sizeof out ? n : sizeof out - 1;
            i += w;
        } else {
            for (size_t k = 0; k < (w ? w : 1) && n + 1 < sizeof out; k++)
                out[n++] = msg[i++];
        }
    }
    out[n] = '\0';
    snprintf(msg, len, "%s", out);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "planfarm %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'planfarm %s --help')\n", cmd);
    return CLI_USAGE;
}

int cli_int(const char *cmd, const char *flag, const char *arg, long long lo, long long hi,
            long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (errno || end == arg || *end) {
        fprintf(stderr, "planfarm %s: %s: '%s' is not an integer\n", cmd, flag, arg);
        return -1;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "planfarm %s: %s: %lld is outside [%lld, %lld]\n", cmd, flag, v, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_bad_name(const char *cmd, const char *flag, const char *arg, const char *known)
{
    fprintf(stderr, "planfarm %s: %s: '%s' is not %s\n", cmd, flag, arg, known);
    return -1;
}

int cli_double(const char *cmd, const char *flag, const char *arg, double lo, double hi,
               double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !isfinite(v)) {
        fprintf(stderr, "planfarm %s: %s: '%s' is not a number\n", cmd, flag, arg);
        return -1;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "planfarm %s: %s: %g is outside [%g, %g]\n", cmd, flag, v, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

const char *cli_fmt_ms(char *buf, size_t len, double ms)
{
    if (!isfinite(ms))
        snprintf(buf, len, "-");
    else if (fabs(ms) < 1e4)
        snprintf(buf, len, "%.4g ms", ms);
    else
        snprintf(buf, len, "%.1f s", ms / 1e3);
    return buf;
}

bool cli_stderr_tty(void)
{
    return isatty(STDERR_FILENO);
}

int cli_check_endpoint(const char *cmd, const char *flag, const char *endpoint)
{
    const char *rest = NULL;
    if (!strncmp(endpoint, "tcp://", 6)) {
        rest = endpoint + 6;
        const char *colon = strrchr(rest, ':');
        char *end;
        if (!colon || colon == rest || !colon[1])
            rest = NULL;
        else if (strcmp(colon + 1, "*") && (strtol(colon + 1, &end, 10) < 0 || *end))
            rest = NULL;
    } else if (!strncmp(endpoint, "ipc://", 6) || !strncmp(endpoint, "inproc://", 9)) {
        rest = strstr(endpoint, "://") + 3;
        if (!*rest)
            rest = NULL;
    }
    if (rest)
        return 0;
    fprintf(stderr,
            "planfarm %s: %s: '%s' is not an endpoint (tcp://HOST:PORT, ipc://PATH or "
            "inproc://NAME)\n",
            cmd, flag, endpoint);
    return -1;
}

int cli_check_output(const char *cmd, const char *path)
{
    if (!path || !strcmp(path, "-"))
        return 0;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "planfarm %s: -o %s: is a directory\n", cmd, path);
        return -1;
    }
    char *copy = pf_strdup(path);
    if (!copy)
        return -1;
    const char *dir = dirname(copy);
    int ok = access(dir, W_OK) == 0;
    if (!ok)
        fprintf(stderr, "planfarm %s: -o %s: cannot write in %s: %s\n", cmd, path, dir,
                strerror(errno));
    free(copy);
    return ok ? 0 : -1;
}

int cli_read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    size_t cap = 0, n = 0;
    char *b = NULL;
    *buf = NULL;
    if (!f)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %s", path, strerror(errno));
    for (;;) {
        /* at least 64 KiB free for each read, and room for the terminating NUL */
        if (pf_grow((void **)&b, &cap, n + (1 << 16), 1) != 0) {
            free(b);
            if (f != stdin)
                fclose(f);
            return pf_fail(err, errlen, PF_ERR, "%s: out of memory", path);
        }
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (bad) {
        free(b);
        return pf_fail(err, errlen, PF_EINPUT, "%s: read error", path);
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return PF_OK;
}
