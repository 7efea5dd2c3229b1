#include "planner/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int pf_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

void pf_err_prefix(char *err, size_t errlen, const char *prefix)
{
    if (!err || !errlen || !prefix)
        return;
    size_t plen = strlen(prefix);
    size_t elen = strnlen(err, errlen - 1);
    if (plen + 2 >= errlen)
        return;
    size_t keep = elen;
    if (plen + 2 + keep >= errlen)
        keep = errlen - plen - 3;
    memmove(err + plen + 2, err, keep);
    memcpy(err, prefix, plen);
    err[plen] = ':';
    err[plen + 1] = ' ';
    err[plen + 2 + keep] = '\0';
}

char *pf_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int pf_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    if (elem && nc > SIZE_MAX / elem)
        return -1;
    void *p = realloc(*arr, nc * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

void pf_fmt_bytes(char *buf, size_t len, double bytes)
{
    static const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (bytes >= 1024 && u < 5) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}

double pf_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int pf_is_finite_nonneg(double x)
{
    return isfinite(x) && x >= 0.0;
}
