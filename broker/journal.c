#include "broker/journal.h"
#include "planner/core/util.h"

#include <czmq.h>
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The request's order of arrival is its rowid (INTEGER PRIMARY KEY); its id never changes. An
 * answer's order is its rowid too. */
static const char *SCHEMA =
    "CREATE TABLE IF NOT EXISTS request ("
    "  seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, key TEXT NOT NULL, label TEXT,"
    "  client TEXT, priority INTEGER NOT NULL DEFAULT 0, submitted_s REAL NOT NULL,"
    "  graph BLOB, cluster BLOB, options BLOB, finished INTEGER NOT NULL DEFAULT 0,"
    "  state INTEGER, status INTEGER, error TEXT, plan BLOB, wall_s REAL, best_ms REAL,"
    "  jobs_issued INTEGER, jobs_answered INTEGER);"
    "CREATE INDEX IF NOT EXISTS request_key ON request(key);"
    "CREATE TABLE IF NOT EXISTS answer ("
    "  seq INTEGER PRIMARY KEY, request TEXT NOT NULL, job INTEGER NOT NULL, result BLOB NOT NULL);"
    "CREATE INDEX IF NOT EXISTS answer_request ON answer(request, seq);";

enum { ST_ADD, ST_ANSWER, ST_END, ST_DROP_ANSWERS, ST_ANSWERS, ST_COUNT };

static const char *SQL[ST_COUNT] = {
    "INSERT INTO request (id, key, label, client, priority, submitted_s, graph, cluster, options)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    "INSERT INTO answer (request, job, result) VALUES (?1, ?2, ?3)",
    "UPDATE request SET finished = 1, graph = NULL, cluster = NULL, options = NULL, state = ?2,"
    " status = ?3, error = ?4, plan = ?5, wall_s = ?6, best_ms = ?7, jobs_issued = ?8,"
    " jobs_answered = ?9 WHERE id = ?1",
    "DELETE FROM answer WHERE request = ?1",
    "SELECT job, result FROM answer WHERE request = ?1 ORDER BY seq",
};

#define ROW_COLUMNS                                                                               \
    "id, key, label, client, priority, submitted_s, finished, graph, cluster, options, state,"   \
    " status, error, plan, wall_s, best_ms, jobs_issued, jobs_answered"

struct pf_journal {
    sqlite3 *db;
    sqlite3_stmt *st[ST_COUNT];
    int in_txn;
    char path[1024];
};

static int db_fail(pf_journal_t *j, char *err, size_t errlen, const char *what)
{
    return pf_fail(err, errlen, PF_ERR, "journal %s: %s: %s", j->path, what,
                   sqlite3_errmsg(j->db));
}

static int exec(pf_journal_t *j, const char *sql, char *err, size_t errlen)
{
    char *msg = NULL;
    if (sqlite3_exec(j->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        pf_fail(err, errlen, PF_ERR, "journal %s: %s", j->path, msg ? msg : "error");
        sqlite3_free(msg);
        return PF_ERR;
    }
    return PF_OK;
}

/* mkdir -p of the directory part of path. */
static int make_parent(const char *path, char *err, size_t errlen)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return PF_OK;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return pf_fail(err, errlen, PF_ERR, "journal: cannot create %s: %s", dir,
                           strerror(errno));
        *p = '/';
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return pf_fail(err, errlen, PF_ERR, "journal: cannot create %s: %s", dir, strerror(errno));
    return PF_OK;
}

pf_journal_t *pf_journal_open(const char *path, char *err, size_t errlen)
{
    pf_journal_t *j = calloc(1, sizeof *j);
    if (!j) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    snprintf(j->path, sizeof j->path, "%s", path);
    if (strlen(path) >= sizeof j->path) {
        pf_fail(err, errlen, PF_EINPUT, "journal: path longer than %zu bytes", sizeof j->path - 1);
        goto fail;
    }
    if (make_parent(path, err, errlen) != PF_OK)
        goto fail;
    if (sqlite3_open_v2(path, &j->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        db_fail(j, err, errlen, "cannot open");
        goto fail;
    }
    sqlite3_busy_timeout(j->db, 5000);
    /* WAL: a commit appends to the log, readers never block the writer; FULL: the log is synced
     * at every commit, so an acknowledged SUBMIT survives power loss, not only a kill. */
    if (exec(j, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", err, errlen) != PF_OK ||
        exec(j, SCHEMA, err, errlen) != PF_OK)
        goto fail;
    for (int i = 0; i < ST_COUNT; i++)
        if (sqlite3_prepare_v2(j->db, SQL[i], -1, &j->st[i], NULL) != SQLITE_OK) {
            db_fail(j, err, errlen, "cannot prepare a statement");
            goto fail;
        }
    return j;
fail:
    pf_journal_close(&j);
    return NULL;
}

void pf_journal_close(pf_journal_t **jp)
{
    if (!jp || !*jp)
        return;
    pf_journal_t *j = *jp;
    char err[256];
    if (j->in_txn && pf_journal_commit(j, err, sizeof err) != PF_OK)
        zsys_warning("%s", err);
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(j->st[i]);
    if (j->db)
        sqlite3_close(j->db);
    free(j);
    *jp = NULL;
}

void pf_journal_key(const uint8_t *graph, size_t graph_len, const uint8_t *cluster,
                    size_t cluster_len, const uint8_t *options, size_t options_len,
                    char key[PF_JOURNAL_KEY_LEN])
{
    const uint8_t *part[3] = {graph, cluster, options};
    size_t len[3] = {graph_len, cluster_len, options_len};
    zdigest_t *dg = zdigest_new();
    if (!dg) {
        key[0] = '\0';
        return;
    }
    for (int i = 0; i < 3; i++) {
        uint64_t n = len[i];
        zdigest_update(dg, (const byte *)&n, sizeof n);
        if (n)
            zdigest_update(dg, part[i], len[i]);
    }
    snprintf(key, PF_JOURNAL_KEY_LEN, "%s", zdigest_string(dg));
    for (char *c = key; *c; c++)
        if (*c >= 'A' && *c <= 'F')
            *c = (char)(*c - 'A' + 'a');
    zdigest_destroy(&dg);
}

static int begin(pf_journal_t *j, char *err, size_t errlen)
{
    if (j->in_txn)
        return PF_OK;
    if (exec(j, "BEGIN", err, errlen) != PF_OK)
        return PF_ERR;
    j->in_txn = 1;
    return PF_OK;
}

/* Runs a prepared statement to its end and resets it. */
static int step(pf_journal_t *j, sqlite3_stmt *s, char *err, size_t errlen, const char *what)
{
    int rc = sqlite3_step(s);
    int ok = rc == SQLITE_DONE || rc == SQLITE_ROW;
    if (!ok)
        db_fail(j, err, errlen, what);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return ok ? PF_OK : PF_ERR;
}

static void bind_blob(sqlite3_stmt *s, int i, const uint8_t *p, size_t n)
{
    if (p)
        sqlite3_bind_blob64(s, i, p, n, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

int pf_journal_commit(pf_journal_t *j, char *err, size_t errlen)
{
    if (!j->in_txn)
        return PF_OK;
    j->in_txn = 0;
    if (exec(j, "COMMIT", err, errlen) != PF_OK) {
        exec(j, "ROLLBACK", NULL, 0);
        return PF_ERR;
    }
    return PF_OK;
}

int pf_journal_add(pf_journal_t *j, const pf_journal_request_t *r, char *err, size_t errlen)
{
    if (begin(j, err, errlen) != PF_OK)
        return PF_ERR;
    sqlite3_stmt *s = j->st[ST_ADD];
    sqlite3_bind_text(s, 1, r->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, r->key, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, r->label ? r->label : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, r->client ? r->client : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 5, r->priority);
    sqlite3_bind_double(s, 6, r->submitted_s);
    bind_blob(s, 7, r->graph, r->graph_len);
    bind_blob(s, 8, r->cluster, r->cluster_len);
    bind_blob(s, 9, r->options ? r->options : (const uint8_t *)"", r->options_len);
    if (step(j, s, err, errlen, "cannot add a request") != PF_OK) {
        j->in_txn = 0;
        exec(j, "ROLLBACK", NULL, 0);
        return PF_ERR;
    }
    return pf_journal_commit(j, err, errlen);
}

int pf_journal_answer(pf_journal_t *j, const char *id, uint64_t search_job, const uint8_t *result,
                      size_t len, char *err, size_t errlen)
{
    if (begin(j, err, errlen) != PF_OK)
        return PF_ERR;
    sqlite3_stmt *s = j->st[ST_ANSWER];
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)search_job);
    sqlite3_bind_blob64(s, 3, len ? result : (const uint8_t *)"", len, SQLITE_STATIC);
    return step(j, s, err, errlen, "cannot add an answer");
}

int pf_journal_end(pf_journal_t *j, const char *id, const pf_journal_end_t *e, char *err,
                   size_t errlen)
{
    if (begin(j, err, errlen) != PF_OK)
        return PF_ERR;
    sqlite3_stmt *s = j->st[ST_END];
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, e->state);
    sqlite3_bind_int(s, 3, e->status);
    sqlite3_bind_text(s, 4, e->error ? e->error : "", -1, SQLITE_STATIC);
    bind_blob(s, 5, (const uint8_t *)e->plan_json, e->plan_len);
    sqlite3_bind_double(s, 6, e->wall_s);
    if (e->best_objective_ms == e->best_objective_ms) /* NaN is stored as NULL */
        sqlite3_bind_double(s, 7, e->best_objective_ms);
    sqlite3_bind_int64(s, 8, e->jobs_issued);
    sqlite3_bind_int64(s, 9, e->jobs_answered);
    if (step(j, s, err, errlen, "cannot end a request") != PF_OK)
        return PF_ERR;
    s = j->st[ST_DROP_ANSWERS];
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    return step(j, s, err, errlen, "cannot drop answers");
}

static const uint8_t *col_blob(sqlite3_stmt *s, int i, size_t *len)
{
    *len = (size_t)sqlite3_column_bytes(s, i);
    const uint8_t *p = sqlite3_column_blob(s, i);
    return p ? p : (const uint8_t *)"";
}

static const char *col_text(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? (const char *)t : "";
}

static void read_row(sqlite3_stmt *s, pf_journal_row_t *r)
{
    memset(r, 0, sizeof *r);
    r->id = col_text(s, 0);
    r->key = col_text(s, 1);
    r->label = col_text(s, 2);
    r->client = col_text(s, 3);
    r->priority = sqlite3_column_int(s, 4);
    r->submitted_s = sqlite3_column_double(s, 5);
    r->finished = sqlite3_column_int(s, 6);
    if (!r->finished) {
        r->graph = col_blob(s, 7, &r->graph_len);
        r->cluster = col_blob(s, 8, &r->cluster_len);
        r->options = col_blob(s, 9, &r->options_len);
        return;
    }
    r->end.state = sqlite3_column_int(s, 10);
    r->end.status = sqlite3_column_int(s, 11);
    r->end.error = col_text(s, 12);
    if (sqlite3_column_type(s, 13) != SQLITE_NULL) {
        r->end.plan_json = (const char *)col_blob(s, 13, &r->end.plan_len);
    }
    r->end.wall_s = sqlite3_column_double(s, 14);
    r->end.best_objective_ms =
        sqlite3_column_type(s, 15) == SQLITE_NULL ? NAN : sqlite3_column_double(s, 15);
    r->end.jobs_issued = sqlite3_column_int64(s, 16);
    r->end.jobs_answered = sqlite3_column_int64(s, 17);
}

/* Runs a query of ROW_COLUMNS with up to two text parameters, calling fn per row. */
static int rows(pf_journal_t *j, const char *sql, const char *p1, const char *p2, long long n,
                pf_journal_row_fn fn, void *ctx, int *count, char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc = PF_OK;
    *count = 0;
    if (sqlite3_prepare_v2(j->db, sql, -1, &s, NULL) != SQLITE_OK)
        return db_fail(j, err, errlen, "cannot read");
    if (p1)
        sqlite3_bind_text(s, 1, p1, -1, SQLITE_STATIC);
    if (p2)
        sqlite3_bind_text(s, 2, p2, -1, SQLITE_STATIC);
    if (n >= 0)
        sqlite3_bind_int64(s, 1, n);
    int r;
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        pf_journal_row_t row;
        read_row(s, &row);
        ++*count;
        if ((rc = fn(ctx, &row)) != PF_OK) {
            pf_fail(err, errlen, rc, "journal %s: request %s could not be restored", j->path,
                    row.id);
            break;
        }
    }
    if (rc == PF_OK && r != SQLITE_DONE)
        rc = db_fail(j, err, errlen, "cannot read");
    sqlite3_finalize(s);
    return rc;
}

int pf_journal_load(pf_journal_t *j, int max_finished, pf_journal_row_fn fn, void *ctx, char *err,
                    size_t errlen)
{
    int n;
    if (pf_journal_commit(j, err, errlen) != PF_OK)
        return PF_ERR;
    return rows(j,
                "SELECT " ROW_COLUMNS " FROM request WHERE finished = 0 OR seq IN"
                " (SELECT seq FROM request WHERE finished = 1 ORDER BY seq DESC LIMIT ?1)"
                " ORDER BY seq",
                NULL, NULL, max_finished < 0 ? 0 : max_finished, fn, ctx, &n, err, errlen);
}

int pf_journal_answers(pf_journal_t *j, const char *id, pf_journal_answer_fn fn, void *ctx,
                       char *err, size_t errlen)
{
    sqlite3_stmt *s = j->st[ST_ANSWERS];
    int rc = PF_OK, r;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        size_t len;
        const uint8_t *p = col_blob(s, 1, &len);
        if ((rc = fn(ctx, (uint64_t)sqlite3_column_int64(s, 0), p, len)) != PF_OK)
            break;
    }
    if (rc == PF_OK && r != SQLITE_DONE)
        rc = db_fail(j, err, errlen, "cannot read answers");
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return rc;
}

int pf_journal_find(pf_journal_t *j, const char *id, const char *key, pf_journal_row_fn fn,
                    void *ctx, char *err, size_t errlen)
{
    int n, rc;
    if (id)
        rc = rows(j, "SELECT " ROW_COLUMNS " FROM request WHERE id = ?1", id, NULL, -1, fn, ctx,
                  &n, err, errlen);
    else
        rc = rows(j,
                  "SELECT " ROW_COLUMNS " FROM request WHERE key = ?1 AND finished = 1 AND"
                  " state = 2 ORDER BY seq DESC LIMIT 1",
                  key, NULL, -1, fn, ctx, &n, err, errlen);
    if (rc == PF_OK && n == 0)
        return pf_fail(err, errlen, PF_EINPUT, "journal: no such request");
    return rc;
}

int pf_journal_expire(pf_journal_t *j, double before_s, long long *removed, char *err,
                      size_t errlen)
{
    sqlite3_stmt *s = NULL;
    *removed = 0;
    if (pf_journal_commit(j, err, errlen) != PF_OK)
        return PF_ERR;
    if (sqlite3_prepare_v2(j->db, "DELETE FROM request WHERE finished = 1 AND submitted_s < ?1",
                           -1, &s, NULL) != SQLITE_OK)
        return db_fail(j, err, errlen, "cannot expire");
    sqlite3_bind_double(s, 1, before_s);
    int rc = sqlite3_step(s) == SQLITE_DONE ? PF_OK : db_fail(j, err, errlen, "cannot expire");
    *removed = sqlite3_changes(j->db);
    sqlite3_finalize(s);
    return rc;
}

int pf_journal_compact(pf_journal_t *j, char *err, size_t errlen)
{
    if (pf_journal_commit(j, err, errlen) != PF_OK)
        return PF_ERR;
    return exec(j, "VACUUM; PRAGMA wal_checkpoint(TRUNCATE);", err, errlen);
}

int pf_journal_count(pf_journal_t *j, long long *all, long long *unfinished, char *err,
                     size_t errlen)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(j->db,
                           "SELECT count(*), coalesce(sum(finished = 0), 0) FROM request", -1, &s,
                           NULL) != SQLITE_OK)
        return db_fail(j, err, errlen, "cannot count");
    int rc = PF_ERR;
    if (sqlite3_step(s) == SQLITE_ROW) {
        *all = sqlite3_column_int64(s, 0);
        *unfinished = sqlite3_column_int64(s, 1);
        rc = PF_OK;
    } else {
        db_fail(j, err, errlen, "cannot count");
    }
    sqlite3_finalize(s);
    return rc;
}

int pf_journal_default_path(char *out, size_t len, const char *xdg_state_home, const char *home)
{
    int n;
    if (xdg_state_home && xdg_state_home[0] == '/')
        n = snprintf(out, len, "%s/planfarm/journal.db", xdg_state_home);
    else if (home && home[0])
        n = snprintf(out, len, "%s/.local/state/planfarm/journal.db", home);
    else
        return PF_ERR;
    return n > 0 && (size_t)n < len ? PF_OK : PF_ERR;
}
