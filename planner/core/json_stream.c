#include "planner/core/json_stream.h"
#include "planner/core/json.h"
#include "planner/core/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Where the reader is in the top-level object. */
enum { ST_START, ST_KEY, ST_VALUE, ST_ARRAY, ST_AFTER, ST_END, ST_DONE };

struct pf_json_stream {
    const char *text, *label;
    size_t len, pos;
    int state;
    int first;            /* ST_KEY: no member read yet, so '}' may close the object */
    json_t *keys;         /* the keys read so far (jansson refuses a repeated one) */
    char *key;            /* the current member's key, decoded */
    size_t key_at, key_end; /* its bytes in the text, quotes included */
    /* What jansson's parser has seen up to `check`, the byte after the last good piece: "{"
     * and one `"key":0` per member read (their values do not change its state). */
    char *pre;
    size_t pre_len, pre_cap;
    size_t check;
    /* The current member's start: pre's length and check before its key; bare: its value is a
     * number or literal, which jansson's lexer only ends on the byte after it. */
    size_t member_pre, member_check;
    int bare;
    size_t nelem; /* ST_ARRAY: elements read; comma: a comma was read after the last one */
    int comma;
    json_t *tree;
};

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_ws(const char *t, size_t n, size_t p)
{
    while (p < n && is_ws(t[p]))
        p++;
    return p;
}

/* The byte after the string whose quote is at p (escapes skipped), or n when it does not end. */
static size_t scan_string(const char *t, size_t n, size_t p)
{
    for (p++; p < n; p++) {
        if (t[p] == '\\')
            p++;
        else if (t[p] == '"')
            return p + 1;
    }
    return n;
}

/* The byte after the object or array opened at p, or n when it does not close; *deep = its
 * nesting. Brackets are only counted, not paired: jansson finds a mismatch inside the span. */
static size_t scan_container(const char *t, size_t n, size_t p, int *deep)
{
    int d = 0;
    *deep = 0;
    while (p < n) {
        char c = t[p];
        if (c == '"') {
            p = scan_string(t, n, p);
            continue;
        }
        if (c == '{' || c == '[') {
            if (++d > *deep)
                *deep = d;
        } else if ((c == '}' || c == ']') && --d == 0) {
            return p + 1;
        }
        p++;
    }
    return n;
}

static int is_scalar_char(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           c == '-' || c == '+' || c == '.';
}

/* The end of the value starting at p: a container, a string, or a run of number and literal
 * characters (p itself when there is none). */
static size_t scan_value(const char *t, size_t n, size_t p, int *deep)
{
    *deep = 0;
    if (p >= n)
        return p;
    if (t[p] == '{' || t[p] == '[')
        return scan_container(t, n, p, deep);
    if (t[p] == '"')
        return scan_string(t, n, p);
    while (p < n && is_scalar_char(t[p]))
        p++;
    return p;
}

/* Line and column of byte `at` as jansson counts them: a column counts characters (the first
 * byte of each UTF-8 sequence), the first one on a line is 1. */
static void locate(const char *t, size_t at, long *line, long *col)
{
    *line = 1;
    *col = 0;
    for (size_t i = 0; i < at; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == '\n') {
            (*line)++;
            *col = 0;
        } else if (c < 0x80 || (c >= 0xC2 && c <= 0xF4)) {
            (*col)++;
        }
    }
}

static long count_chars(const char *t, size_t n)
{
    long line, col;
    locate(t, n, &line, &col);
    return col;
}

static int report(pf_json_stream_t *s, const json_error_t *je, long line, long col, char *err,
                  size_t errlen)
{
    s->state = ST_DONE;
    if (je->line > 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s:%ld:%ld: %s", s->label, line, col, je->text);
    return pf_fail(err, errlen, PF_EINPUT, "%s: %s", s->label, je->text);
}

/* The whole text as one tree: jansson's error, or PF_JSON_STREAM_TREE with s->tree. */
static int whole(pf_json_stream_t *s, char *err, size_t errlen)
{
    json_error_t je;
    s->tree = json_loadb(s->text, s->len, JSON_REJECT_DUPLICATES, &je);
    if (!s->tree)
        return report(s, &je, je.line, je.column, err, errlen);
    s->state = ST_DONE;
    return PF_JSON_STREAM_TREE;
}

typedef struct {
    const char *a, *b;
    size_t alen, blen, off;
} two_parts_t;

static size_t read_two(void *buffer, size_t buflen, void *data)
{
    two_parts_t *r = data;
    size_t n = 0;
    while (n < buflen && r->off < r->alen + r->blen) {
        int in_a = r->off < r->alen;
        const char *src = in_a ? r->a + r->off : r->b + (r->off - r->alen);
        size_t left = in_a ? r->alen - r->off : r->alen + r->blen - r->off;
        size_t k = left < buflen - n ? left : buflen - n;
        memcpy((char *)buffer + n, src, k);
        n += k;
        r->off += k;
    }
    return n;
}

/* jansson's message for an error after `at`: it reads prefix (one line; its parser's state at
 * `at`) then the text from `at`, and its line and column are moved back onto the text. When
 * that parses (the scanner was wrong), the whole text is parsed instead. */
static int fail_from(pf_json_stream_t *s, const char *prefix, size_t plen, size_t at, char *err,
                     size_t errlen)
{
    json_error_t je;
    two_parts_t r = {prefix, s->text + at, plen, s->len - at, 0};
    json_t *v = json_load_callback(read_two, &r, JSON_REJECT_DUPLICATES, &je);
    if (v) {
        json_decref(v);
        return whole(s, err, errlen);
    }
    long line, col;
    locate(s->text, at, &line, &col);
    if (je.line == 1)
        col += je.column - count_chars(prefix, plen);
    else
        col = je.column;
    return report(s, &je, line + je.line - 1, col, err, errlen);
}

static int pre_add(pf_json_stream_t *s, const char *p, size_t n)
{
    if (pf_grow((void **)&s->pre, &s->pre_cap, s->pre_len + n + 1, 1) != 0)
        return PF_ERR;
    memcpy(s->pre + s->pre_len, p, n);
    s->pre_len += n;
    s->pre[s->pre_len] = '\0';
    return PF_OK;
}

/* The error after s->check, in the top-level object or (in_array) in the current member's
 * array: the prefix is what has been read, the current key and "[", "[0" or "[0,". */
static int fail(pf_json_stream_t *s, int in_array, char *err, size_t errlen)
{
    size_t keep = s->pre_len;
    int rc = PF_OK;
    if (in_array)
        rc = pre_add(s, s->text + s->key_at, s->key_end - s->key_at);
    if (in_array && rc == PF_OK)
        rc = pre_add(s, s->nelem ? (s->comma ? ":[0," : ":[0 ") : ":[", s->nelem ? 4 : 2);
    if (rc != PF_OK) {
        s->state = ST_DONE;
        return pf_fail(err, errlen, PF_ERR, "%s: out of memory", s->label);
    }
    rc = fail_from(s, s->pre, s->pre_len, s->check, err, errlen);
    s->pre_len = keep;
    return rc;
}

/* The error after a member's value: after a number or literal, jansson's lexer reads on into
 * the bad byte as part of it ("near '4'"), so its parse restarts at the member's key. */
static int fail_after(pf_json_stream_t *s, char *err, size_t errlen)
{
    if (!s->bare)
        return fail(s, 0, err, errlen);
    return fail_from(s, s->pre, s->member_pre, s->member_check, err, errlen);
}

int pf_json_stream_open(const char *text, size_t len, const char *label, pf_json_stream_t **out,
                        char *err, size_t errlen)
{
    *out = NULL;
    int rc = pf_json_check_nul(text, len, label, err, errlen);
    if (rc != PF_OK)
        return rc;
    pf_json_stream_t *s = calloc(1, sizeof *s);
    if (!s || !(s->keys = json_object()) || pre_add(s, "{", 1) != PF_OK) {
        pf_json_stream_destroy(&s);
        return pf_fail(err, errlen, PF_ERR, "%s: out of memory", label);
    }
    s->text = text;
    s->len = len;
    s->label = label;
    *out = s;
    return PF_OK;
}

void pf_json_stream_destroy(pf_json_stream_t **sp)
{
    if (!sp || !*sp)
        return;
    pf_json_stream_t *s = *sp;
    json_decref(s->keys);
    json_decref(s->tree);
    free(s->key);
    free(s->pre);
    free(s);
    *sp = NULL;
}

json_t *pf_json_stream_tree(pf_json_stream_t *s)
{
    json_t *t = s->tree;
    s->tree = NULL;
    return t;
}

int pf_json_stream_at_array(const pf_json_stream_t *s)
{
    return s->state == ST_VALUE && s->pos < s->len && s->text[s->pos] == '[';
}

/* The closing brace at p: only white space may follow. */
static int end_object(pf_json_stream_t *s, size_t p, char *err, size_t errlen)
{
    s->check = p + 1;
    s->state = ST_END;
    if (skip_ws(s->text, s->len, s->check) < s->len)
        return fail_from(s, "{}", 2, s->check, err, errlen);
    return 0;
}

/* A key at p (a string) and its colon; s->check is still before it. */
static int read_key(pf_json_stream_t *s, size_t p, const char **key, char *err, size_t errlen)
{
    const char *t = s->text;
    size_t e = scan_string(t, s->len, p);
    json_t *k = json_loadb(t + p, e - p, JSON_DECODE_ANY, NULL);
    size_t colon = skip_ws(t, s->len, e);
    if (!k || !json_is_string(k) || json_object_get(s->keys, json_string_value(k)) ||
        colon >= s->len || t[colon] != ':') {
        json_decref(k);
        return fail(s, 0, err, errlen);
    }
    free(s->key);
    s->key = pf_strdup(json_string_value(k));
    if (!s->key || json_object_set_new(s->keys, s->key, json_null()) != 0) {
        json_decref(k);
        s->state = ST_DONE;
        return pf_fail(err, errlen, PF_ERR, "%s: out of memory", s->label);
    }
    json_decref(k);
    s->key_at = p;
    s->key_end = e;
    s->member_pre = s->pre_len;
    s->member_check = s->check;
    s->pos = skip_ws(t, s->len, colon + 1);
    s->state = ST_VALUE;
    *key = s->key;
    return 1;
}

/* The value just read ends at e: jansson's state now holds `"key":0 ` (the space ends the
 * number, which would otherwise run on into what follows it in the text). */
static int value_done(pf_json_stream_t *s, size_t e, int bare, char *err, size_t errlen)
{
    s->bare = bare;
    if (pre_add(s, s->text + s->key_at, s->key_end - s->key_at) != PF_OK ||
        pre_add(s, ":0 ", 3) != PF_OK) {
        s->state = ST_DONE;
        return pf_fail(err, errlen, PF_ERR, "%s: out of memory", s->label);
    }
    s->pos = s->check = e;
    s->state = ST_AFTER;
    return PF_OK;
}

/* Read and drop the value of the current member, or the rest of its array. */
static int skip_value(pf_json_stream_t *s, char *err, size_t errlen)
{
    json_t *v;
    int rc;
    if (s->state == ST_ARRAY) {
        while ((rc = pf_json_stream_element(s, &v, err, errlen)) == 1)
            json_decref(v);
        return rc;
    }
    rc = pf_json_stream_value(s, &v, err, errlen);
    json_decref(v);
    return rc;
}

int pf_json_stream_next(pf_json_stream_t *s, const char **key, char *err, size_t errlen)
{
    const char *t = s->text;
    int rc;
    *key = NULL;
    if (s->state == ST_START) {
        size_t p = skip_ws(t, s->len, 0);
        if (p >= s->len || t[p] != '{')
            return whole(s, err, errlen);
        s->pos = s->check = p + 1;
        s->state = ST_KEY;
        s->first = 1;
    }
    if ((s->state == ST_VALUE || s->state == ST_ARRAY) && (rc = skip_value(s, err, errlen)) != 0)
        return rc;
    if (s->state == ST_AFTER) {
        size_t p = skip_ws(t, s->len, s->pos);
        if (p < s->len && t[p] == '}')
            return end_object(s, p, err, errlen);
        if (p >= s->len || t[p] != ',' || pre_add(s, ",", 1) != PF_OK)
            return fail_after(s, err, errlen);
        s->pos = s->check = p + 1;
        s->state = ST_KEY;
        s->first = 0;
    }
    if (s->state == ST_KEY) {
        size_t p = skip_ws(t, s->len, s->pos);
        if (s->first && p < s->len && t[p] == '}')
            return end_object(s, p, err, errlen);
        if (p >= s->len || t[p] != '"')
            return fail(s, 0, err, errlen);
        return read_key(s, p, key, err, errlen);
    }
    if (s->state == ST_END)
        return 0;
    return pf_fail(err, errlen, PF_ERR, "%s: read past an error", s->label);
}

/* jansson's value of text[p..e), NULL when it does not parse or nests too deep to be parsed
 * alone (its depth would be counted from the piece, not from the top). */
static json_t *parse_span(const pf_json_stream_t *s, size_t p, size_t e, int deep)
{
    if (e <= p || deep > PF_JSON_STREAM_DEPTH)
        return NULL;
    return json_loadb(s->text + p, e - p, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
}

int pf_json_stream_value(pf_json_stream_t *s, json_t **out, char *err, size_t errlen)
{
    int deep;
    *out = NULL;
    if (s->state != ST_VALUE)
        return pf_fail(err, errlen, PF_ERR, "%s: no value to read here", s->label);
    size_t e = scan_value(s->text, s->len, s->pos, &deep);
    json_t *v = parse_span(s, s->pos, e, deep);
    if (!v)
        return fail(s, 0, err, errlen);
    char c = s->text[s->pos];
    int rc = value_done(s, e, c != '{' && c != '[' && c != '"', err, errlen);
    if (rc == PF_OK)
        *out = v;
    else
        json_decref(v);
    return rc;
}

/* Past the comma or the closing bracket that follows the last element: 1 when an element
 * comes next (s->pos at it), 0 at the end, or an error. */
static int next_element(pf_json_stream_t *s, char *err, size_t errlen)
{
    const char *t = s->text;
    size_t p = skip_ws(t, s->len, s->pos);
    if (!s->comma && p < s->len && t[p] == ']') {
        int rc = value_done(s, p + 1, 0, err, errlen);
        return rc == PF_OK ? 0 : rc;
    }
    if (s->nelem > 0 && !s->comma) {
        if (p >= s->len || t[p] != ',')
            return fail(s, 1, err, errlen);
        s->comma = 1;
        s->check = p + 1;
        p = skip_ws(t, s->len, p + 1);
    }
    s->pos = p;
    return 1;
}

int pf_json_stream_element(pf_json_stream_t *s, json_t **out, char *err, size_t errlen)
{
    int rc, deep;
    *out = NULL;
    if (pf_json_stream_at_array(s)) {
        s->pos = s->check = s->pos + 1;
        s->state = ST_ARRAY;
        s->nelem = 0;
        s->comma = 0;
    }
    if (s->state != ST_ARRAY)
        return pf_fail(err, errlen, PF_ERR, "%s: not in an array", s->label);
    if ((rc = next_element(s, err, errlen)) != 1)
        return rc;
    size_t p = s->pos;
    if (p >= s->len || (s->text[p] != '{' && s->text[p] != '['))
        return fail(s, 1, err, errlen);
    size_t e = scan_container(s->text, s->len, p, &deep);
    json_t *v = parse_span(s, p, e, deep);
    if (!v)
        return fail(s, 1, err, errlen);
    s->nelem++;
    s->comma = 0;
    s->pos = s->check = e;
    *out = v;
    return 1;
}

/* One member of find_keys at p (its key's quote): the byte after its value, or 0. */
static size_t find_member(const char *t, size_t n, size_t p, const char *const *keys, int nk,
                          int *found)
{
    int deep;
    size_t e = scan_string(t, n, p);
    json_t *k = json_loadb(t + p, e - p, JSON_DECODE_ANY, NULL);
    for (int i = 0; k && json_is_string(k) && i < nk; i++)
        if (strcmp(json_string_value(k), keys[i]) == 0)
            found[i] = 1;
    json_decref(k);
    p = skip_ws(t, n, e);
    if (!k || p >= n || t[p] != ':')
        return 0;
    p = skip_ws(t, n, p + 1);
    e = scan_value(t, n, p, &deep);
    return e > p ? e : 0;
}

int pf_json_stream_find_keys(const char *text, size_t len, const char *const *keys, int n,
                             int *found)
{
    for (int i = 0; i < n; i++)
        found[i] = 0;
    size_t p = skip_ws(text, len, 0);
    if (p >= len || text[p] != '{')
        return PF_EINPUT;
    p = skip_ws(text, len, p + 1);
    if (p < len && text[p] == '}')
        return PF_OK;
    for (;;) {
        if (p >= len || text[p] != '"' || !(p = find_member(text, len, p, keys, n, found)))
            return PF_EINPUT;
        p = skip_ws(text, len, p);
        if (p < len && text[p] == '}')
            return PF_OK;
        if (p >= len || text[p] != ',')
            return PF_EINPUT;
        p = skip_ws(text, len, p + 1);
    }
}

int pf_json_stream_read_file(const char *path, char **buf, size_t *len, char *err,
                             size_t errlen)
{
    int in = !path || strcmp(path, "-") == 0;
    const char *label = in ? "<stdin>" : path;
    FILE *f = in ? stdin : fopen(path, "rb");
    size_t cap = 0, n = 0;
    char *b = NULL;
    *buf = NULL;
    *len = 0;
    if (!f)
        return pf_fail(err, errlen, PF_EINPUT, "%s: %s", label, strerror(errno));
    struct stat st;
    int oom = 0;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        oom = pf_grow((void **)&b, &cap, (size_t)st.st_size + (1 << 16), 1) != 0; /* one block */
    for (; !oom;) { /* at least 64 KiB free for each read, and room for the terminating NUL */
        if ((oom = pf_grow((void **)&b, &cap, n + (1 << 16), 1) != 0))
            break;
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    if (!in)
        fclose(f);
    if (bad || oom) {
        free(b);
        return pf_fail(err, errlen, oom ? PF_ERR : PF_EINPUT, "%s: %s", label,
                       oom ? "out of memory" : "read error");
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return PF_OK;
}
