#include "planner/core/json.h"
#include "planner/core/util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int load_error(const json_error_t *je, const char *label, char *err, size_t errlen)
{
    if (je->line > 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s:%d:%d: %s", label, je->line, je->column,
                       je->text);
    return pf_fail(err, errlen, PF_EINPUT, "%s: %s", label, je->text);
}

/* A NUL byte is never valid JSON text, but jansson takes one after a number as the end of the
 * input; so every reader refuses one first, naming its line, column and byte offset. */
static void locate(const char *text, size_t n, long *line, long *col)
{
    for (const char *p = text, *end = text + n; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            *col += end - p;
            break;
        }
        (*line)++;
        *col = 1;
        p = nl + 1;
    }
}

static int nul_error(const char *label, long line, long col, size_t off, char *err,
                     size_t errlen)
{
    return pf_fail(err, errlen, PF_EINPUT, "%s:%ld:%ld: NUL byte at byte offset %zu", label, line,
                   col, off);
}

typedef struct {
    FILE *f;
    size_t off;
    long line, col;
    int nul;
} file_reader_t;

static size_t read_chunk(void *buffer, size_t buflen, void *data)
{
    file_reader_t *r = data;
    size_t n = fread(buffer, 1, buflen, r->f);
    const char *z = memchr(buffer, 0, n);
    locate(buffer, z ? (size_t)(z - (const char *)buffer) : n, &r->line, &r->col);
    if (z) {
        r->off += (size_t)(z - (const char *)buffer);
        r->nul = 1;
        return (size_t)-1;
    }
    r->off += n;
    return n;
}

static int load_stream(FILE *f, const char *label, json_t **out, char *err, size_t errlen)
{
    json_error_t je;
    file_reader_t r = {f, 0, 1, 1, 0};
    *out = json_load_callback(read_chunk, &r, JSON_REJECT_DUPLICATES, &je);
    if (*out)
        return PF_OK;
    if (r.nul)
        return nul_error(label, r.line, r.col, r.off, err, errlen);
    if (ferror(f))
        return pf_fail(err, errlen, PF_EINPUT, "%s: read error", label);
    return load_error(&je, label, err, errlen);
}

int pf_json_load_file(const char *path, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!path || strcmp(path, "-") == 0)
        return load_stream(stdin, "<stdin>", out, err, errlen);
    FILE *f = fopen(path, "rb");
    if (!f)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %s", path, strerror(errno));
    int rc = load_stream(f, path, out, err, errlen);
    fclose(f);
    return rc;
}

int pf_json_check_nul(const char *text, size_t len, const char *label, char *err, size_t errlen)
{
    const char *z = memchr(text, 0, len);
    if (!z)
        return PF_OK;
    long line = 1, col = 1;
    locate(text, (size_t)(z - text), &line, &col);
    return nul_error(label, line, col, (size_t)(z - text), err, errlen);
}

int pf_json_load_buffer(const char *text, size_t len, const char *label, json_t **out,
                        char *err, size_t errlen)
{
    json_error_t je;
    *out = NULL;
    int rc = pf_json_check_nul(text, len, label, err, errlen);
    if (rc != PF_OK)
        return rc;
    *out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    return *out ? PF_OK : load_error(&je, label, err, errlen);
}

int pf_json_convert(json_t *root, const char *label, pf_json_convert_fn convert, void *ctx,
                    char *err, size_t errlen)
{
    int rc = convert(root, ctx, err, errlen);
    if (rc != PF_OK)
        pf_err_prefix(err, errlen, label);
    return rc;
}

static int convert_root(json_t *root, const char *label, pf_json_convert_fn convert, void *ctx,
                        char *err, size_t errlen)
{
    int rc = pf_json_convert(root, label, convert, ctx, err, errlen);
    json_decref(root);
    return rc;
}

int pf_json_read_file(const char *path, pf_json_convert_fn convert, void *ctx, char *err,
                      size_t errlen)
{
    json_t *root;
    int rc = pf_json_load_file(path, &root, err, errlen);
    if (rc != PF_OK)
        return rc;
    return convert_root(root, path && strcmp(path, "-") ? path : "<stdin>", convert, ctx, err,
                        errlen);
}

int pf_json_read_buffer(const char *text, size_t len, const char *label,
                        pf_json_convert_fn convert, void *ctx, char *err, size_t errlen)
{
    json_t *root;
    int rc = pf_json_load_buffer(text, len, label, &root, err, errlen);
    if (rc != PF_OK)
        return rc;
    return convert_root(root, label, convert, ctx, err, errlen);
}

static int field(json_t *obj, const char *path, const char *key, int flags, json_t **v,
                 char *err, size_t errlen)
{
    *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    if (*v && !json_is_null(*v))
        return 1;
    *v = NULL;
    if (flags & PF_JSON_GET_REQUIRED)
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: missing", path, key);
    return 0;
}

int pf_json_get_number(json_t *obj, const char *path, const char *key, int flags, double dflt,
                 double *out, char *err, size_t errlen)
{
    json_t *v;
    int rc = field(obj, path, key, flags, &v, err, errlen);
    if (rc <= 0) {
        *out = dflt;
        return rc;
    }
    if (!json_is_number(v))
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: not a number", path, key);
    double x = json_number_value(v);
    if (!isfinite(x))
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: not finite", path, key);
    if ((flags & (PF_JSON_GET_NONNEG | PF_JSON_GET_POSITIVE)) && x < 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: negative (%g)", path, key, x);
    if ((flags & PF_JSON_GET_POSITIVE) && x == 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: zero", path, key);
    *out = x;
    return PF_OK;
}

int pf_json_get_int(json_t *obj, const char *path, const char *key, int flags, int64_t dflt,
              int64_t *out, char *err, size_t errlen)
{
    json_t *v;
    int rc = field(obj, path, key, flags, &v, err, errlen);
    if (rc <= 0) {
        *out = dflt;
        return rc;
    }
    if (!json_is_integer(v))
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: not an integer", path, key);
    int64_t x = json_integer_value(v);
    if ((flags & (PF_JSON_GET_NONNEG | PF_JSON_GET_POSITIVE)) && x < 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: negative (%lld)", path, key,
                       (long long)x);
    if ((flags & PF_JSON_GET_POSITIVE) && x == 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: zero", path, key);
    *out = x;
    return PF_OK;
}

int pf_json_get_string(json_t *obj, const char *path, const char *key, int flags, const char *dflt,
                 const char **out, char *err, size_t errlen)
{
    json_t *v;
    int rc = field(obj, path, key, flags, &v, err, errlen);
    if (rc <= 0) {
        *out = dflt;
        return rc;
    }
    if (!json_is_string(v))
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: not a string", path, key);
    *out = json_string_value(v);
    return PF_OK;
}

int pf_json_get_int_array(json_t *obj, const char *path, const char *key, int64_t *out, int cap,
                    int *n, char *err, size_t errlen)
{
    json_t *v;
    *n = 0;
    int rc = field(obj, path, key, 0, &v, err, errlen);
    if (rc <= 0)
        return rc;
    if (!json_is_array(v))
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: not an array", path, key);
    size_t len = json_array_size(v);
    if (len > (size_t)cap)
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: more than %d entries", path, key, cap);
    for (size_t i = 0; i < len; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0)
            return pf_fail(err, errlen, PF_EINPUT, "%s.%s[%zu]: not a non-negative integer",
                           path, key, i);
        out[i] = json_integer_value(e);
    }
    *n = (int)len;
    return PF_OK;
}

int pf_json_get_array(json_t *obj, const char *path, const char *key, int flags, json_t **out,
                char *err, size_t errlen)
{
    json_t *v;
    int rc = field(obj, path, key, flags, &v, err, errlen);
    *out = NULL;
    if (rc <= 0)
        return rc;
    if (!json_is_array(v))
        return pf_fail(err, errlen, PF_EINPUT, "%s.%s: not an array", path, key);
    *out = v;
    return PF_OK;
}

/* ---- writer ----
 *
 * A streaming writer rather than jansson's json_dump of a tree: a graph, cluster or plan file is
 * written straight from planfarm's own structures. `make bench BENCH=json_write` measured it on a
 * 200,000-op chain: this writer 0.65 s and no tree; jansson 1.43 s plus a 359 MB tree
 * (bench/RESULTS.md, 2026-11-26). Reading uses jansson. */

#define PF_JSON_WRITER_DEPTH 32

struct pf_jw {
    FILE *f;
    int depth;
    int count[PF_JSON_WRITER_DEPTH];  /* items written in each open container */
    int inl[PF_JSON_WRITER_DEPTH];    /* container is on one line */
    int after_key;
    int failed;
};

pf_json_writer_t *pf_json_writer_new(FILE *f)
{
    pf_json_writer_t *w = calloc(1, sizeof *w);
    if (w)
        w->f = f;
    return w;
}

int pf_json_writer_finish(pf_json_writer_t **wp)
{
    if (!wp || !*wp)
        return PF_OK;
    pf_json_writer_t *w = *wp;
    int ok = !w->failed && w->depth == 0;
    if (ok)
        fputc('\n', w->f);
    if (fflush(w->f) != 0 || ferror(w->f))
        ok = 0;
    free(w);
    *wp = NULL;
    return ok ? PF_OK : PF_ERR;
}

static int inline_now(const pf_json_writer_t *w)
{
    return w->depth > 0 && w->inl[w->depth - 1];
}

/* Separator and indentation before a value or a key. */
static void lead(pf_json_writer_t *w)
{
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (w->depth == 0)
        return;
    if (w->count[w->depth - 1]++ > 0)
        fputc(',', w->f);
    if (inline_now(w)) {
        if (w->count[w->depth - 1] > 1)
            fputc(' ', w->f);
    } else {
        fputc('\n', w->f);
        for (int i = 0; i < w->depth; i++)
            fputs("  ", w->f);
    }
}

static void open_c(pf_json_writer_t *w, char c, int inl)
{
    lead(w);
    if (w->depth >= PF_JSON_WRITER_DEPTH) {
        w->failed = 1;
        return;
    }
    fputc(c, w->f);
    w->inl[w->depth] = inl || inline_now(w);
    w->count[w->depth] = 0;
    w->depth++;
}

static void close_c(pf_json_writer_t *w, char c)
{
    if (w->depth == 0) {
        w->failed = 1;
        return;
    }
    w->depth--;
    if (!w->inl[w->depth] && w->count[w->depth] > 0) {
        fputc('\n', w->f);
        for (int i = 0; i < w->depth; i++)
            fputs("  ", w->f);
    }
    fputc(c, w->f);
}

void pf_json_writer_obj_begin(pf_json_writer_t *w) { open_c(w, '{', 0); }
void pf_json_writer_obj_begin_inline(pf_json_writer_t *w) { open_c(w, '{', 1); }
void pf_json_writer_obj_end(pf_json_writer_t *w) { close_c(w, '}'); }
void pf_json_writer_arr_begin(pf_json_writer_t *w) { open_c(w, '[', 0); }
void pf_json_writer_arr_begin_inline(pf_json_writer_t *w) { open_c(w, '[', 1); }
void pf_json_writer_arr_end(pf_json_writer_t *w) { close_c(w, ']'); }

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void pf_json_writer_key(pf_json_writer_t *w, const char *key)
{
    lead(w);
    put_string(w->f, key);
    fputs(": ", w->f);
    w->after_key = 1;
}

void pf_json_writer_str(pf_json_writer_t *w, const char *s)
{
    lead(w);
    put_string(w->f, s ? s : "");
}

void pf_json_fmt_double(char *buf, size_t len, double x)
{
    if (x == floor(x) && fabs(x) < 1e15) {
        snprintf(buf, len, "%.0f", x);
        if (strcmp(buf, "-0") == 0)
            snprintf(buf, len, "0");
        return;
    }
    for (int p = 15; p <= 17; p++) {
        snprintf(buf, len, "%.*g", p, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

void pf_json_writer_key_num(pf_json_writer_t *w, const char *key, double x)
{
    if (!isfinite(x))
        return;
    pf_json_writer_key(w, key);
    pf_json_writer_num(w, x);
}

void pf_json_writer_num(pf_json_writer_t *w, double x)
{
    lead(w);
    if (!isfinite(x)) {
        fputs("null", w->f);
        return;
    }
    char buf[40];
    pf_json_fmt_double(buf, sizeof buf, x);
    fputs(buf, w->f);
}

void pf_json_writer_int(pf_json_writer_t *w, int64_t x)
{
    lead(w);
    fprintf(w->f, "%lld", (long long)x);
}

void pf_json_writer_bool(pf_json_writer_t *w, int b)
{
    lead(w);
    fputs(b ? "true" : "false", w->f);
}

void pf_json_writer_null(pf_json_writer_t *w)
{
    lead(w);
    fputs("null", w->f);
}

int pf_json_write(FILE *f, pf_json_emit_fn emit, const void *ctx, char *err, size_t errlen)
{
    pf_json_writer_t *w = pf_json_writer_new(f);
    if (!w)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    emit(w, ctx);
    return pf_json_writer_finish(&w) == PF_OK ? PF_OK : pf_fail(err, errlen, PF_ERR, "write failed");
}

int pf_json_save(const char *path, pf_json_emit_fn emit, const void *ctx, char *err,
                 size_t errlen)
{
    FILE *f = pf_json_open_out(path, err, errlen);
    if (!f)
        return PF_ERR;
    int rc = pf_json_write(f, emit, ctx, err, errlen);
    int rc2 = pf_json_close_out(f, path, rc == PF_OK ? err : NULL, errlen);
    if (rc != PF_OK)
        pf_err_prefix(err, errlen, path && strcmp(path, "-") ? path : "<stdout>");
    return rc != PF_OK ? rc : rc2;
}

FILE *pf_json_open_out(const char *path, char *err, size_t errlen)
{
    if (!path || strcmp(path, "-") == 0)
        return stdout;
    FILE *f = fopen(path, "w");
    if (!f)
        pf_fail(err, errlen, PF_ERR, "%s: %s", path, strerror(errno));
    return f;
}

int pf_json_close_out(FILE *f, const char *path, char *err, size_t errlen)
{
    if (f == stdout)
        return fflush(f) == 0 ? PF_OK : pf_fail(err, errlen, PF_ERR, "<stdout>: write failed");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return pf_fail(err, errlen, PF_ERR, "%s: write failed", path);
    return PF_OK;
}
