/* util: status codes, error messages into a caller's buffer, clocks, small string helpers. */
#ifndef PF_UTIL_H
#define PF_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Status codes. Functions return PF_OK or one of the negative codes and write the reason into
 * the caller's (err, errlen) buffer. The CLI maps them to exit statuses 1, 2 and 3. */
enum {
    PF_OK = 0,
    PF_ERR = -1,        /* run-time failure: out of memory, I/O error */
    PF_EINPUT = -2,     /* bad input: the message names the file and the place */
    PF_EINFEASIBLE = -3 /* no feasible plan: the message names the constraint */
};

/* snprintf into err (when err != NULL); always returns `code` so callers can write
 * `return pf_fail(err, errlen, PF_EINPUT, "...")`. */
int pf_fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Prefix an existing message in err with "prefix: " (used to add a file name). */
void pf_err_prefix(char *err, size_t errlen, const char *prefix);

char *pf_strdup(const char *s);        /* NULL in, NULL out */
/* Make *arr hold at least `need` elements of `elem` bytes, doubling: 0 or -1 (out of memory,
 * *arr untouched). */
int pf_grow(void **arr, size_t *cap, size_t need, size_t elem);
double pf_now_s(void);                 /* monotonic clock, seconds */
/* "1.5 GiB", "512 bytes": sizes in messages people read (binary units, one decimal). */
void pf_fmt_bytes(char *buf, size_t len, double bytes);
int pf_is_finite_nonneg(double x);

/* Milliseconds to move `bytes` over `gbps` GB/s (1 GB/s = 1e9 bytes/s). */
static inline double pf_bytes_ms(double bytes, double gbps)
{
    return bytes / (gbps * 1e6);
}

#endif
