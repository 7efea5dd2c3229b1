/* import_pipedream: PipeDream's (SOSP'19) profile text -> graph (format and errors: import.h). */
#include "planner/inputs/import.h"
#include "planner/core/util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINE_BYTES (1 << 20)

typedef struct {
    int64_t id;
    long line;
    char cls[PF_IMPORT_MAX_CLASS_CHARS + 1];
    double fwd_ms, bwd_ms, param_bytes;
    double act_sum;
    size_t act_off; /* activation list in the reader's act[] */
    int act_n;      /* 1 for a plain number */
    int getitem;    /* k of a `__getitem__(k)` node, else -1 */
} pd_node_t;

typedef struct {
    int64_t a, b;
    long line;
    int src, dst; /* node indices once resolved */
} pd_edge_t;

typedef struct {
    const char *label;
    char *err;
    size_t errlen;
    pd_node_t *nodes;
    size_t nnodes, nodes_cap;
    pd_edge_t *edges;
    size_t nedges, edges_cap;
    double *act;
    size_t nact, act_cap;
} pd_reader_t;

/* Up to 40 characters of s, non-printable bytes as '?', for quoting bad input back. */
static void excerpt(char *buf, size_t len, const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < len && i < 40; i++)
        buf[k++] = isprint((unsigned char)s[i]) ? s[i] : '?';
    if (n > 40 && k + 4 < len) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
}

static int pd_fail(pd_reader_t *r, long line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int pd_fail(pd_reader_t *r, long line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        return pf_fail(r->err, r->errlen, PF_EINPUT, "%s:%ld: %s", r->label, line, msg);
    return pf_fail(r->err, r->errlen, PF_EINPUT, "%s: %s", r->label, msg);
}

static const char *skip_ws(const char *s, const char *end)
{
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    return s;
}

static const char *trim_end(const char *s, const char *end)
{
    while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    return end;
}

/* A decimal number: [+-]digits[.digits][(e|E)[+-]digits], finite and not negative. No hex,
 * inf or nan (strtod alone would take them). */
static int pd_number(pd_reader_t *r, long line, const char *key, const char *s, const char *end,
                     double *out)
{
    char text[128], ex[64];
    s = skip_ws(s, end);
    end = trim_end(s, end);
    const char *p = s;
    int digits = 0;
    if (p < end && (*p == '+' || *p == '-'))
        p++;
    while (p < end && isdigit((unsigned char)*p))
        p++, digits++;
    if (p < end && *p == '.') {
        p++;
        while (p < end && isdigit((unsigned char)*p))
            p++, digits++;
    }
    if (digits > 0 && p < end && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        int edigits = 0;
        if (q < end && (*q == '+' || *q == '-'))
            q++;
        while (q < end && isdigit((unsigned char)*q))
            q++, edigits++;
        if (edigits > 0)
            p = q;
    }
    if (digits == 0 || p != end) {
        excerpt(ex, sizeof ex, s, (size_t)(end - s));
        return pd_fail(r, line, "%s: '%s' is not a number", key, ex);
    }
    if ((size_t)(end - s) >= sizeof text)
        return pd_fail(r, line, "%s: number longer than %zu characters", key, sizeof text - 1);
    memcpy(text, s, (size_t)(end - s));
    text[end - s] = '\0';
    double x = strtod(text, NULL); /* overflow gives inf; underflow to 0 is harmless */
    if (!isfinite(x))
        return pd_fail(r, line, "%s: %s is out of range", key, text);
    if (x < 0)
        return pd_fail(r, line, "%s: negative (%s)", key, text);
    *out = x == 0 ? 0.0 : x; /* no -0 */
    return PF_OK;
}

/* `[a; b; c]` or a plain number. */
static int pd_activation(pd_reader_t *r, long line, const char *s, const char *end, pd_node_t *n)
{
    s = skip_ws(s, end);
    end = trim_end(s, end);
    n->act_off = r->nact;
    n->act_n = 0;
    n->act_sum = 0;
    if (s < end && *s == '[') {
        if (end[-1] != ']')
            return pd_fail(r, line, "activation_size: list without a closing ']'");
        s++, end--;
        if (skip_ws(s, end) == end)
            return pd_fail(r, line, "activation_size: empty list");
        while (s <= end) {
            const char *semi = memchr(s, ';', (size_t)(end - s));
            const char *stop = semi ? semi : end;
            double x;
            int rc = pd_number(r, line, "activation_size", s, stop, &x);
            if (rc != PF_OK)
                return rc;
            if (pf_grow((void **)&r->act, &r->act_cap, r->nact + 1, sizeof *r->act))
                return pf_fail(r->err, r->errlen, PF_ERR, "out of memory");
            r->act[r->nact++] = x;
            n->act_n++;
            n->act_sum += x;
            if (!semi)
                break;
            s = semi + 1;
        }
        return PF_OK;
    }
    double x;
    int rc = pd_number(r, line, "activation_size", s, end, &x);
    if (rc != PF_OK)
        return rc;
    if (pf_grow((void **)&r->act, &r->act_cap, r->nact + 1, sizeof *r->act))
        return pf_fail(r->err, r->errlen, PF_ERR, "out of memory");
    r->act[r->nact++] = x;
    n->act_n = 1;
    n->act_sum = x;
    return PF_OK;
}

/* "nodeN" at s; returns the end of the reference or NULL. */
static const char *pd_node_ref(const char *s, const char *end, int64_t *id)
{
    if (end - s < 5 || strncmp(s, "node", 4) != 0 || !isdigit((unsigned char)s[4]))
        return NULL;
    const char *p = s + 4;
    int64_t v = 0;
    while (p < end && isdigit((unsigned char)*p)) {
        if (v > (INT64_MAX - 9) / 10)
            return NULL;
        v = v * 10 + (*p - '0');
        p++;
    }
    *id = v;
    return p;
}

static const char *find_last_sep(const char *s, const char *end)
{
    for (const char *p = end - 4; p >= s; p--)
        if (p[0] == ' ' && p[1] == '-' && p[2] == '-' && p[3] == ' ')
            return p;
    return NULL;
}

static int pd_edge_line(pd_reader_t *r, long line, const char *s, const char *end)
{
    int64_t a, b;
    const char *p = pd_node_ref(s, end, &a), *q;
    if (!p || end - p < 4 || strncmp(p, " -- ", 4) != 0 || !(q = pd_node_ref(p + 4, end, &b)) ||
        q != end) {
        char ex[64];
        excerpt(ex, sizeof ex, s, (size_t)(end - s));
        return pd_fail(r, line, "expected an edge '<tab>nodeA -- nodeB', got '%s'", ex);
    }
    if (pf_grow((void **)&r->edges, &r->edges_cap, r->nedges + 1, sizeof *r->edges))
        return pf_fail(r->err, r->errlen, PF_ERR, "out of memory");
    r->edges[r->nedges++] = (pd_edge_t){a, b, line, -1, -1};
    return PF_OK;
}

static const char *const pd_keys[4] = {"forward_compute_time", "backward_compute_time",
                                       "activation_size", "parameter_size"};

/* The class of a description ("Linear(in_features=...)" -> "Linear", dots as '_'), and which
 * output a __getitem__(k) takes. */
static void pd_node_class(pd_node_t *n, const char *desc, const char *dend)
{
    const char *cstart = skip_ws(desc, dend), *cend = cstart;
    while (cend < dend && *cend != '(' && *cend != ' ')
        cend++;
    size_t clen = (size_t)(cend - cstart);
    if (clen > PF_IMPORT_MAX_CLASS_CHARS)
        clen = PF_IMPORT_MAX_CLASS_CHARS;
    for (size_t i = 0; i < clen; i++) {
        char c = cstart[i];
        n->cls[i] = c == '.' ? '_' : isprint((unsigned char)c) ? c : '?';
    }
    n->cls[clen] = '\0';
    if (!strcmp(n->cls, "__getitem__") && cend < dend && *cend == '(') {
        char *stop;
        long k = strtol(cend + 1, &stop, 10);
        if (stop > cend + 1 && stop < dend && *stop == ')' && k >= 0 && k < (1 << 20))
            n->getitem = (int)k;
    }
}

/* The end of the field starting at f: the next ',' outside brackets, or end. */
static const char *pd_field_end(const char *f, const char *end)
{
    const char *t = f;
    int depth = 0;
    while (t < end && (*t != ',' || depth > 0)) {
        if (*t == '[')
            depth++;
        else if (*t == ']' && depth > 0)
            depth--;
        t++;
    }
    return t;
}

/* One key=value field [ks, t) with '=' at eq; keys other than pd_keys are ignored. */
static int pd_field(pd_reader_t *r, long line, pd_node_t *n, int seen[4], const char *ks,
                    const char *eq, const char *t)
{
    const char *kend = trim_end(ks, eq);
    for (int k = 0; k < 4; k++) {
        if ((size_t)(kend - ks) != strlen(pd_keys[k]) ||
            strncmp(ks, pd_keys[k], (size_t)(kend - ks)) != 0)
            continue;
        if (seen[k]++)
            return pd_fail(r, line, "node%lld: %s given twice", (long long)n->id, pd_keys[k]);
        int rc;
        switch (k) {
        case 0: rc = pd_number(r, line, pd_keys[k], eq + 1, t, &n->fwd_ms); break;
        case 1: rc = pd_number(r, line, pd_keys[k], eq + 1, t, &n->bwd_ms); break;
        case 2: rc = pd_activation(r, line, eq + 1, t, n); break;
        default: rc = pd_number(r, line, pd_keys[k], eq + 1, t, &n->param_bytes); break;
        }
        if (rc != PF_OK)
            return rc;
    }
    return PF_OK;
}

/* The fields after the last ' -- ': key=value separated by ',' outside brackets, in any order;
 * unknown keys ignored, the four of pd_keys required. */
static int pd_fields(pd_reader_t *r, long line, pd_node_t *n, const char *f, const char *end)
{
    int seen[4] = {0, 0, 0, 0};
    while (f <= end) {
        const char *t = pd_field_end(f, end);
        const char *ks = skip_ws(f, t), *eq = memchr(ks, '=', (size_t)(t - ks));
        if (ks == t) { /* empty: a trailing comma, or nothing after the last ' -- ' */
            if (t == end)
                break;
            f = t + 1;
            continue;
        }
        if (!eq) {
            char ex[64];
            excerpt(ex, sizeof ex, ks, (size_t)(trim_end(ks, t) - ks));
            return pd_fail(r, line, "node%lld: '%s' is not key=value%s", (long long)n->id, ex,
                           t == end ? " (truncated line?)" : "");
        }
        int rc = pd_field(r, line, n, seen, ks, eq, t);
        if (rc != PF_OK)
            return rc;
        if (t == end)
            break;
        f = t + 1;
    }
    for (int k = 0; k < 4; k++)
        if (!seen[k])
            return pd_fail(r, line, "node%lld: missing field %s", (long long)n->id, pd_keys[k]);
    return PF_OK;
}

static int pd_node_line(pd_reader_t *r, long line, const char *s, const char *end)
{
    pd_node_t n = {.line = line, .getitem = -1};
    const char *p = pd_node_ref(s, end, &n.id);
    if (!p || end - p < 4 || strncmp(p, " -- ", 4) != 0) {
        char ex[64];
        excerpt(ex, sizeof ex, s, (size_t)(end - s));
        return pd_fail(r, line, "expected a node 'nodeN -- description -- fields', got '%s'", ex);
    }
    const char *desc = p + 4, *last = find_last_sep(desc, end);
    if (!last)
        return pd_fail(r, line, "node%lld: no ' -- ' before its fields (truncated line?)",
                       (long long)n.id);
    pd_node_class(&n, desc, last); /* description: [desc, last), may be empty */
    int rc = pd_fields(r, line, &n, last + 4, end);
    if (rc != PF_OK)
        return rc;
    if (pf_grow((void **)&r->nodes, &r->nodes_cap, r->nnodes + 1, sizeof *r->nodes))
        return pf_fail(r->err, r->errlen, PF_ERR, "out of memory");
    r->nodes[r->nnodes++] = n;
    return PF_OK;
}

/* One line into buf (without its '\n'), at most cap bytes: 1 read, 0 end of file, -1 longer
 * than cap. Byte by byte so that memory stays bounded whatever the file holds and NUL bytes are
 * seen (fgets would hide them, getline would read any length). */
static int read_line(FILE *f, char *buf, size_t cap, size_t *len, int *has_nul)
{
    size_t n = 0;
    int c;
    *has_nul = 0;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (n == cap)
            return -1;
        *has_nul |= c == '\0';
        buf[n++] = (char)c;
    }
    *len = n;
    return c == EOF && n == 0 ? 0 : 1;
}

static int pd_read(pd_reader_t *r, FILE *f)
{
    char *buf = malloc(MAX_LINE_BYTES);
    size_t n;
    long line = 0;
    int rc = PF_OK, got, has_nul;
    if (!buf)
        return pf_fail(r->err, r->errlen, PF_ERR, "out of memory");
    while ((got = read_line(f, buf, MAX_LINE_BYTES, &n, &has_nul)) != 0) {
        line++;
        if (got < 0) {
            rc = pd_fail(r, line, "line longer than %d bytes", MAX_LINE_BYTES);
            break;
        }
        if (has_nul) {
            rc = pd_fail(r, line, "NUL byte (binary data, not a PipeDream profile)");
            break;
        }
        if (n > 0 && buf[n - 1] == '\r')
            n--;
        const char *s = buf, *end = trim_end(buf, buf + n);
        if (skip_ws(s, end) == end)
            continue;
        if (*s == ' ' || *s == '\t')
            rc = pd_edge_line(r, line, skip_ws(s, end), end);
        else if (end - s >= 4 && !strncmp(s, "node", 4))
            rc = pd_node_line(r, line, s, end);
        else {
            char ex[64];
            excerpt(ex, sizeof ex, s, (size_t)(end - s));
            rc = pd_fail(r, line,
                         "expected a node 'nodeN -- ...' or an edge '<tab>nodeA -- nodeB', "
                         "got '%s'",
                         ex);
        }
        if (rc != PF_OK)
            break;
    }
    if (rc == PF_OK && ferror(f))
        rc = pf_fail(r->err, r->errlen, PF_ERR, "%s: read error", r->label);
    free(buf);
    return rc;
}

static int cmp_edge(const void *a, const void *b)
{
    const pd_edge_t *x = *(pd_edge_t *const *)a, *y = *(pd_edge_t *const *)b;
    if (x->src != y->src)
        return x->src - y->src;
    if (x->dst != y->dst)
        return x->dst - y->dst;
    return (x->line > y->line) - (x->line < y->line);
}

/* Kahn's algorithm over the resolved edges; on a cycle, name the edge (of the cycle) that comes
 * last in the file and list the nodes on it. */
static int pd_check_acyclic(pd_reader_t *r)
{
    size_t n = r->nnodes, m = r->nedges;
    int rc = PF_ERR;
    int *indeg = calloc(n, sizeof *indeg), *queue = malloc(n * sizeof *queue);
    int *in_start = calloc(n + 1, sizeof *in_start), *in_list = malloc((m + 1) * sizeof(int));
    int *out_start = calloc(n + 1, sizeof *out_start), *out_list = malloc((m + 1) * sizeof(int));
    int *via = malloc(n * sizeof *via), *stamp = calloc(n, sizeof *stamp);
    if (!indeg || !queue || !in_start || !in_list || !out_start || !out_list || !via || !stamp) {
        rc = pf_fail(r->err, r->errlen, PF_ERR, "out of memory");
        goto fail;
    }
    for (size_t e = 0; e < m; e++) {
        in_start[r->edges[e].dst + 1]++;
        out_start[r->edges[e].src + 1]++;
    }
    for (size_t v = 0; v < n; v++) {
        in_start[v + 1] += in_start[v];
        out_start[v + 1] += out_start[v];
    }
    for (size_t e = 0; e < m; e++) {
        in_list[in_start[r->edges[e].dst] + indeg[r->edges[e].dst]++] = (int)e;
        out_list[out_start[r->edges[e].src] + stamp[r->edges[e].src]++] = (int)e;
    }
    memset(stamp, 0, n * sizeof *stamp);
    size_t head = 0, tail = 0;
    for (size_t v = 0; v < n; v++)
        if (indeg[v] == 0)
            queue[tail++] = (int)v;
    while (head < tail) {
        int v = queue[head++];
        for (int k = out_start[v]; k < out_start[v + 1]; k++) {
            int w = r->edges[out_list[k]].dst;
            if (--indeg[w] == 0)
                queue[tail++] = w;
        }
    }
    if (tail == n) {
        rc = PF_OK;
        goto fail;
    }
    /* Every node left has a predecessor that is left: walk back until a node repeats. */
    int v = 0, step = 0;
    while (indeg[v] == 0)
        v++;
    while (!stamp[v]) {
        stamp[v] = ++step;
        for (int k = in_start[v]; k < in_start[v + 1]; k++) {
            int e = in_list[k];
            if (indeg[r->edges[e].src] > 0) {
                via[v] = e;
                v = r->edges[e].src;
                break;
            }
        }
    }
    /* v is on the cycle; via[] leads backwards around it. */
    int last_edge = via[v];
    char path[256];
    size_t len = 0;
    int u = v, shown = 0;
    do {
        int e = via[u];
        if (r->edges[e].line > r->edges[last_edge].line)
            last_edge = e;
        if (shown < 8 && len < sizeof path)
            len += (size_t)snprintf(path + len, sizeof path - len, "%snode%lld",
                                    shown ? " <- " : "", (long long)r->nodes[u].id);
        else if (shown == 8 && len < sizeof path)
            len += (size_t)snprintf(path + len, sizeof path - len, " <- ...");
        shown++;
        u = r->edges[e].src;
    } while (u != v);
    if (len < sizeof path)
        snprintf(path + len, sizeof path - len, " <- node%lld", (long long)r->nodes[v].id);
    rc = pd_fail(r, r->edges[last_edge].line, "edge node%lld -- node%lld closes a cycle (%s)",
                 (long long)r->edges[last_edge].a, (long long)r->edges[last_edge].b, path);
fail:
    free(indeg);
    free(queue);
    free(in_start);
    free(in_list);
    free(out_start);
    free(out_list);
    free(via);
    free(stamp);
    return rc;
}

/* Node ids, duplicate nodes and edges, unknown endpoints, self-loops, cycles. Afterwards nodes[]
 * is sorted by id and edges[].src/dst are indices into it. */
static int pd_resolve(pd_reader_t *r)
{
    size_t n = r->nnodes, m = r->nedges;
    int rc = PF_OK;
    pf_import_key_t *keys = malloc(n * sizeof *keys);
    pd_edge_t **order = malloc((m + 1) * sizeof *order);
    if (!keys || !order) {
        rc = pf_fail(r->err, r->errlen, PF_ERR, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = (pf_import_key_t){r->nodes[i].id, r->nodes[i].line, (int)i};
    qsort(keys, n, sizeof *keys, pf_import_key_cmp);
    for (size_t i = 1; i < n; i++)
        if (keys[i].id == keys[i - 1].id) {
            rc = pd_fail(r, keys[i].order, "node%lld defined again (first on line %ld)",
                         (long long)keys[i].id, keys[i - 1].order);
            goto done;
        }
    /* ops in id order: the file's lines are in no particular order */
    pd_node_t *sorted = malloc(n * sizeof *sorted);
    if (!sorted) {
        rc = pf_fail(r->err, r->errlen, PF_ERR, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        sorted[i] = r->nodes[keys[i].index];
        keys[i].index = (int)i;
    }
    free(r->nodes);
    r->nodes = sorted;
    r->nodes_cap = n;

    for (size_t e = 0; e < m; e++) {
        pd_edge_t *ed = &r->edges[e];
        ed->src = pf_import_key_find(keys, n, ed->a);
        ed->dst = pf_import_key_find(keys, n, ed->b);
        if (ed->src < 0 || ed->dst < 0) {
            rc = pd_fail(r, ed->line, "edge node%lld -- node%lld: node%lld is not defined",
                         (long long)ed->a, (long long)ed->b,
                         (long long)(ed->src < 0 ? ed->a : ed->b));
            goto done;
        }
        if (ed->src == ed->dst) {
            rc = pd_fail(r, ed->line, "edge node%lld -- node%lld is a self-loop",
                         (long long)ed->a, (long long)ed->b);
            goto done;
        }
        order[e] = ed;
    }
    qsort(order, m, sizeof *order, cmp_edge);
    for (size_t e = 1; e < m; e++)
        if (order[e]->src == order[e - 1]->src && order[e]->dst == order[e - 1]->dst) {
            rc = pd_fail(r, order[e]->line,
                         "edge node%lld -- node%lld repeated (first on line %ld)",
                         (long long)order[e]->a, (long long)order[e]->b, order[e - 1]->line);
            goto done;
        }
    rc = pd_check_acyclic(r);
done:
    free(keys);
    free(order);
    return rc;
}

/* Bytes that flow along edge e: the producer's activation, or the one output of a multi-output
 * producer that a `__getitem__(k)` consumer picks. */
static double pd_edge_bytes(const pd_reader_t *r, const pd_edge_t *e)
{
    const pd_node_t *a = &r->nodes[e->src], *b = &r->nodes[e->dst];
    if (a->act_n > 1 && b->getitem >= 0 && b->getitem < a->act_n)
        return r->act[a->act_off + (size_t)b->getitem];
    return a->act_sum;
}

int pf_import_pipedream(const char *path, int microbatch, pf_graph_t **out, char *err,
                        size_t errlen)
{
    pd_reader_t r = {.label = pf_import_label(path), .err = err, .errlen = errlen};
    pf_graph_t *g = NULL;
    FILE *f = NULL;
    char stem[256], name[PF_IMPORT_MAX_CLASS_CHARS + 32], tbuf[PF_IMPORT_MAX_CLASS_CHARS + 1];
    int rc;

    *out = NULL;
    if (microbatch < 0)
        return pf_fail(err, errlen, PF_EINPUT, "microbatch: negative (%d)", microbatch);
    f = path && strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        rc = pf_fail(err, errlen, PF_EINPUT, "%s: %s", r.label, strerror(errno));
        goto fail;
    }
    if ((rc = pd_read(&r, f)) != PF_OK)
        goto fail;
    if (r.nnodes == 0) {
        rc = pd_fail(&r, 0, "no node lines (not a PipeDream profile?)");
        goto fail;
    }
    if (r.nnodes > (1u << 26) || r.nedges > (1u << 28)) {
        rc = pd_fail(&r, 0, "too many nodes or edges");
        goto fail;
    }
    if ((rc = pd_resolve(&r)) != PF_OK)
        goto fail;

    pf_import_file_stem(path, stem, sizeof stem);
    g = pf_graph_new(stem,
                     pf_import_resolve_microbatch("pipedream", stem, (int)r.nnodes, microbatch));
    if (!g) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < r.nnodes; i++) {
        const pd_node_t *n = &r.nodes[i];
        if (n->cls[0])
            snprintf(name, sizeof name, "node%lld.%s", (long long)n->id, n->cls);
        else
            snprintf(name, sizeof name, "node%lld", (long long)n->id);
        pf_op_t op = {.id = n->id,
                      .name = name,
                      .type = pf_import_type_of(n->cls, tbuf, sizeof tbuf),
                      .fwd_ms = n->fwd_ms,
                      .bwd_ms = n->bwd_ms,
                      .param_bytes = n->param_bytes,
                      .mem_fwd_bytes = n->act_sum,
                      .mem_bwd_bytes = n->act_sum,
                      .work = {.bytes_read = n->param_bytes, .bytes_written = n->act_sum}};
        if (pf_graph_add_op(g, &op) < 0) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    }
    for (size_t e = 0; e < r.nedges; e++)
        if (pf_graph_add_edge(g, r.edges[e].src, r.edges[e].dst, pd_edge_bytes(&r, &r.edges[e])) <
            0) {
            rc = pf_fail(err, errlen, PF_ERR, "out of memory");
            goto fail;
        }
    if ((rc = pf_graph_finalize(g, err, errlen)) != PF_OK) {
        pf_err_prefix(err, errlen, r.label);
        goto fail;
    }
    *out = g;
    g = NULL;
fail:
    if (f && f != stdin)
        fclose(f);
    pf_graph_destroy(&g);
    free(r.nodes);
    free(r.edges);
    free(r.act);
    return rc;
}
