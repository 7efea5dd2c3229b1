#include "planner/core/util.h"

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
    static const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB",
                                 "PiB",   "EiB", "ZiB", "YiB"};
    const int top = (int)(sizeof unit / sizeof unit[0]) - 1;
    if (!isfinite(bytes)) {
        snprintf(buf, len, "%s bytes", isnan(bytes) ? "nan" : bytes > 0 ? "inf" : "-inf");
        return;
    }
    int u = 0;
    double mag = fabs(bytes);
    while (mag >= 1024 && u < top) {
        mag /= 1024;
        bytes /= 1024;
        u++;
    }
    if (mag >= 1024) /* past YiB: "%.1f" would need up to 300 digits */
        snprintf(buf, len, "%.1e %s", bytes, unit[u]);
    else
        snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}

long pf_utf8_invalid_at(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (p[i]) {
        unsigned c = p[i];
        size_t n;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            n = 1, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return (long)i;
        }
        for (size_t k = 1; k <= n; k++) {
            if ((p[i + k] & 0xc0) != 0x80) /* also stops at the terminating NUL */
                return (long)i;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return (long)i;
        i += n + 1;
    }
    return -1;
}

size_t pf_utf8_fit(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    if (n < max || s[n] == '\0')
        return n;
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    return n;
}

int pf_check_utf8(const char *s, const char *where, char *err, size_t errlen)
{
    long at = s ? pf_utf8_invalid_at(s) : -1;
    if (at < 0)
        return PF_OK;
    return pf_fail(err, errlen, PF_EINPUT, "%s: invalid UTF-8 at byte %ld", where, at);
}

int pf_check_name(const char *s, const char *where, char *err, size_t errlen)
{
    size_t n = s ? strnlen(s, PF_NAME_MAX + 1) : 0;
    if (n > PF_NAME_MAX)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %zu bytes, at most %d", where, strlen(s),
                       PF_NAME_MAX);
    return pf_check_utf8(s, where, err, errlen);
}

int pf_gcd(int a, int b)
{
    while (b) {
        int r = a % b;
        a = b;
        b = r;
    }
    return a;
}

int pf_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int pf_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double pf_median_sort(double *v, size_t n)
{
    qsort(v, n, sizeof *v, pf_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int pf_check_range(double x, double max, const char *unit, const char *where, char *err,
                   size_t errlen)
{
    if (!isfinite(x))
        return pf_fail(err, errlen, PF_EINPUT, "%s: not finite", where);
    if (x < 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s: negative (%g)", where, x);
    if (x > max)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %g is above the limit of %g %s", where, x,
                       max, unit);
    return PF_OK;
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
