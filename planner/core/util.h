/* util: status codes, error messages into a caller's buffer, clocks, small string helpers.
 * The one exception to "file name = function prefix": this is the unprefixed base of the planner
 * (pf_fail, pf_grow, pf_strdup, pf_now_s, ...). */
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
/* "1.5 GiB", "512 bytes": sizes in messages people read (binary units, one decimal). Every
 * magnitude keeps its unit: past 1024 YiB the number goes to exponent form ("8.3e+13 YiB");
 * non-finite sizes print as "inf bytes" / "nan bytes". buf >= 32 bytes. */
void pf_fmt_bytes(char *buf, size_t len, double bytes);
int pf_is_finite_nonneg(double x);

/* Upper bounds on what an input may claim. None is a physical limit; they keep sums finite
 * (1e9 ms over 2^26 ops is 6.7e16 ms, far from overflow) and catch unit mix-ups. */
#define PF_MAX_MS 1e9        /* an op's time */
#define PF_MAX_BYTES 1e18    /* parameters, activations, an edge, device memory */
#define PF_MAX_GBPS 1e9      /* a link's bandwidth */
#define PF_MAX_US 1e9        /* a link's latency */
#define PF_MAX_TFLOPS 1e9    /* a device's peak */
#define PF_MAX_FLOPS 1e30    /* an op's work per micro-batch (PF_MAX_MS at PF_MAX_TFLOPS is 1e27) */

/* Byte offset of the first byte of s that does not start a valid UTF-8 sequence (overlong
 * forms, UTF-16 surrogates and code points above U+10FFFF count as invalid), or -1 when s is
 * valid. */
long pf_utf8_invalid_at(const char *s);
/* The longest prefix of s of at most max bytes that does not cut a character in two: what to
 * keep when a name must be shortened. */
size_t pf_utf8_fit(const char *s, size_t max);
/* PF_OK, or PF_EINPUT with "<where>: invalid UTF-8 at byte N". */
int pf_check_utf8(const char *s, const char *where, char *err, size_t errlen);
/* Names and types of graphs, ops, clusters and devices: at most PF_NAME_MAX bytes of valid UTF-8;
 * PF_EINPUT with "<where>: 300 bytes, at most 256" or the message of pf_check_utf8. Names derived
 * from one ("NAME/tp4") cut it with pf_utf8_fit to stay within the limit. */
#define PF_NAME_MAX 256
int pf_check_name(const char *s, const char *where, char *err, size_t errlen);
/* PF_OK when 0 <= x <= max; PF_EINPUT otherwise with "<where>: not finite",
 * "<where>: negative (-2)" or "<where>: 1e+308 is above the limit of 1e+09 <unit>". */
int pf_check_range(double x, double max, const char *unit, const char *where, char *err,
                   size_t errlen);

/* qsort's comparison of doubles, ascending; the median of v[0..n) (n >= 1), sorted in place. */
int pf_cmp_double(const void *a, const void *b);
int pf_cmp_int(const void *a, const void *b);
/* Greatest common divisor of a, b >= 0 (pf_gcd(a, 0) = a). Two stages of d and d' replicas
 * taking micro-batches round robin exchange them over lcm(d, d') = d / pf_gcd(d, d') x d' pairs
 * of replicas. */
int pf_gcd(int a, int b);
double pf_median_sort(double *v, size_t n);

/* Milliseconds to move `bytes` over `gbps` GB/s (1 GB/s = 1e9 bytes/s). */
static inline double pf_bytes_ms(double bytes, double gbps)
{
    return bytes / (gbps * 1e6);
}

/* The larger of two numbers neither of which is NaN: fmax is a call into libm at -O2 (its NaN
 * rule), and the partition DPs' inner loops take it per cell. */
static inline double pf_max_nonan(double a, double b)
{
    return a > b ? a : b;
}

#endif
