/* json: the pieces every file reader and writer shares.
 *
 * Reading goes through jansson; the pf_json_get_* helpers fetch one typed field and, when it is
 * missing or wrong, write "<path>.<key>: <problem>" (the JSON path the design asks errors to
 * name). Writing is a small streaming writer: numbers in the shortest form that reads back to
 * the same double, and containers that can be kept on one line so that a graph file shows one
 * op per line. */
#ifndef PF_JSON_IO_H
#define PF_JSON_IO_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

/* Parse a file ("-" = stdin) or a buffer. On a syntax error the message is
 * "<label>:<line>:<column>: <jansson's text>" and the code PF_EINPUT. */
int pf_json_load_file(const char *path, json_t **out, char *err, size_t errlen);
int pf_json_load_buffer(const char *text, size_t len, const char *label, json_t **out,
                        char *err, size_t errlen);

/* PF_OK, or PF_EINPUT "<label>:<line>:<col>: NUL byte at byte offset N" for the first NUL byte
 * of text[0..len) (every reader refuses one: jansson takes one after a number as the end). */
int pf_json_check_nul(const char *text, size_t len, const char *label, char *err, size_t errlen);

/* Parse a file or buffer and hand the root to `convert`; when convert fails, its message gets the
 * file name (or label) in front: "<file>: ops[3].fwd_ms: negative". */
typedef int (*pf_json_convert_fn)(json_t *root, void *ctx, char *err, size_t errlen);
int pf_json_read_file(const char *path, pf_json_convert_fn convert, void *ctx, char *err,
                      size_t errlen);
int pf_json_read_buffer(const char *text, size_t len, const char *label,
                        pf_json_convert_fn convert, void *ctx, char *err, size_t errlen);
/* `convert` on a root already parsed (which stays the caller's), the label in front of errors. */
int pf_json_convert(json_t *root, const char *label, pf_json_convert_fn convert, void *ctx,
                    char *err, size_t errlen);

/* Field flags for the readers. */
enum {
    PF_JSON_GET_REQUIRED = 1, /* missing key is an error (otherwise *out = dflt) */
    PF_JSON_GET_NONNEG = 2,   /* reject negative values */
    PF_JSON_GET_POSITIVE = 4  /* reject zero and negative values */
};

/* Every reader rejects wrong types and non-finite numbers. `path` names obj ("ops[3]"). */
int pf_json_get_number(json_t *obj, const char *path, const char *key, int flags, double dflt,
                 double *out, char *err, size_t errlen);
int pf_json_get_int(json_t *obj, const char *path, const char *key, int flags, int64_t dflt,
              int64_t *out, char *err, size_t errlen);
/* *out points into obj (valid while obj lives); dflt may be NULL. */
int pf_json_get_string(json_t *obj, const char *path, const char *key, int flags, const char *dflt,
                 const char **out, char *err, size_t errlen);
/* Array of non-negative integers (a shape); *n = 0 when absent. Up to `cap` entries. */
int pf_json_get_int_array(json_t *obj, const char *path, const char *key, int64_t *out, int cap,
                    int *n, char *err, size_t errlen);
/* Required array; *out borrowed. */
int pf_json_get_array(json_t *obj, const char *path, const char *key, int flags, json_t **out,
                char *err, size_t errlen);

/* Streaming writer. Errors are sticky and reported by pf_json_writer_finish. */
typedef struct pf_jw pf_json_writer_t;

pf_json_writer_t *pf_json_writer_new(FILE *f);
/* Flushes, checks the stream; returns PF_OK or PF_ERR. Destroys the writer. */
int pf_json_writer_finish(pf_json_writer_t **w);

void pf_json_writer_obj_begin(pf_json_writer_t *w);
void pf_json_writer_obj_begin_inline(pf_json_writer_t *w); /* everything inside stays on one line */
void pf_json_writer_obj_end(pf_json_writer_t *w);
void pf_json_writer_arr_begin(pf_json_writer_t *w);
void pf_json_writer_arr_begin_inline(pf_json_writer_t *w);
void pf_json_writer_arr_end(pf_json_writer_t *w);
void pf_json_writer_key(pf_json_writer_t *w, const char *key);
void pf_json_writer_str(pf_json_writer_t *w, const char *s);
void pf_json_writer_num(pf_json_writer_t *w, double x); /* shortest round-trip form; non-finite -> null */
/* "key": x when x is finite, nothing otherwise (a reader never meets null for a number it may
 * lack). */
void pf_json_writer_key_num(pf_json_writer_t *w, const char *key, double x);
void pf_json_writer_int(pf_json_writer_t *w, int64_t x);
void pf_json_writer_bool(pf_json_writer_t *w, int b);
void pf_json_writer_null(pf_json_writer_t *w);

/* Shortest "%.{15,16,17}g" text of x that strtod reads back exactly. buf >= 32 bytes. */
void pf_json_fmt_double(char *buf, size_t len, double x);

/* Write a whole file: open PATH ("-" or NULL = stdout), let `emit` write one value, check the
 * stream, close. PF_OK or PF_ERR with "<path>: <problem>". */
typedef void (*pf_json_emit_fn)(pf_json_writer_t *w, const void *ctx);
int pf_json_save(const char *path, pf_json_emit_fn emit, const void *ctx, char *err,
                 size_t errlen);
/* The same onto an open stream (not closed). */
int pf_json_write(FILE *f, pf_json_emit_fn emit, const void *ctx, char *err, size_t errlen);

/* Open PATH for writing ("-" or NULL = stdout). Close with pf_json_close_out. */
FILE *pf_json_open_out(const char *path, char *err, size_t errlen);
int pf_json_close_out(FILE *f, const char *path, char *err, size_t errlen);

#endif
