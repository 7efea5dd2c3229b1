/* journal: the broker's requests on disk (DESIGN.md "The wire", journal paragraph; the zguide's
 * Titanic pattern: a request is written down before it is acknowledged, so a broker killed at
 * any moment loses nothing it said yes to).
 *
 * One SQLite file in WAL mode with synchronous=FULL: a commit returns once the WAL is on disk.
 * What is kept, per request (its id, which never changes):
 *   inputs    the packed Graph, Cluster and PlanOptions messages, the label, the priority and
 *             the key (the hash of the three inputs: the same inputs and options are the same
 *             request, see pf_journal_key)
 *   answers   the packed JobResult of every job answer the search used, in the order it used
 *             them, with the search's job id. The search is deterministic and numbers its jobs in
 *             the order it issues them, so a fresh search fed the same answers in the same order
 *             issues the same job ids and reaches the same state (tests/test_journal.c checks).
 *   the end   state, status, error, plan JSON and counters; the inputs and answers are then
 *             dropped, the key stays (a re-submit of a finished request returns its plan).
 *
 * Acknowledged writes (a new request) commit at once. Answers and ends are cheaper to lose (a
 * lost answer is a job run again), so they accumulate in one open transaction that the broker
 * commits once per turn of its loop (pf_journal_commit). */
#ifndef PF_JOURNAL_H
#define PF_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

typedef struct pf_journal pf_journal_t;

#define PF_JOURNAL_KEY_LEN 41 /* SHA-1 in hex and the NUL */

/* Opens (creating it and its directory) the journal at path. NULL and the reason on failure. */
pf_journal_t *pf_journal_open(const char *path, char *err, size_t errlen);
/* Commits what is pending and closes. */
void pf_journal_close(pf_journal_t **j);

/* The key of a request: hex SHA-1 over the three packed inputs, each preceded by its length (so
 * that bytes cannot move from one input to the next and keep the key). */
void pf_journal_key(const uint8_t *graph, size_t graph_len, const uint8_t *cluster,
                    size_t cluster_len, const uint8_t *options, size_t options_len,
                    char key[PF_JOURNAL_KEY_LEN]);

typedef struct {
    const char *id, *key, *label, *client;
    int priority;
    double submitted_s; /* wall clock (epoch seconds): expiry */
    const uint8_t *graph, *cluster, *options;
    size_t graph_len, cluster_len, options_len;
} pf_journal_request_t;

/* Writes a new request and commits (with whatever else is pending): when it returns PF_OK the
 * request survives a crash. */
int pf_journal_add(pf_journal_t *j, const pf_journal_request_t *r, char *err, size_t errlen);

/* One answer the search used (pending until the next commit). */
int pf_journal_answer(pf_journal_t *j, const char *id, uint64_t search_job, const uint8_t *result,
                      size_t len, char *err, size_t errlen);

typedef struct {
    int state;  /* Planfarm__RequestState */
    int status; /* planner status code when failed */
    const char *error;
    const char *plan_json; /* NULL when none */
    size_t plan_len;
    double wall_s, best_objective_ms;
    long long jobs_issued, jobs_answered;
} pf_journal_end_t;

/* The request ended (pending until the next commit): inputs and answers go. */
int pf_journal_end(pf_journal_t *j, const char *id, const pf_journal_end_t *e, char *err,
                   size_t errlen);

int pf_journal_commit(pf_journal_t *j, char *err, size_t errlen);

/* ---- reading back ---- */

typedef struct {
    const char *id, *key, *label, *client;
    int priority;
    double submitted_s;
    int finished;
    /* unfinished: the inputs */
    const uint8_t *graph, *cluster, *options;
    size_t graph_len, cluster_len, options_len;
    /* finished: how it ended */
    pf_journal_end_t end;
} pf_journal_row_t;

/* Calls fn for every request, oldest first: the unfinished ones and the newest max_finished
 * finished ones. The row's pointers live until fn returns. fn returns PF_OK to go on. */
typedef int (*pf_journal_row_fn)(void *ctx, const pf_journal_row_t *row);
int pf_journal_load(pf_journal_t *j, int max_finished, pf_journal_row_fn fn, void *ctx, char *err,
                    size_t errlen);

/* The answers of one request in the order they were used. */
typedef int (*pf_journal_answer_fn)(void *ctx, uint64_t search_job, const uint8_t *result,
                                    size_t len);
int pf_journal_answers(pf_journal_t *j, const char *id, pf_journal_answer_fn fn, void *ctx,
                       char *err, size_t errlen);

/* One request by id or (when id is NULL) the newest one with this key that finished done: PF_OK
 * and fn called once, PF_EINPUT when there is none. */
int pf_journal_find(pf_journal_t *j, const char *id, const char *key, pf_journal_row_fn fn,
                    void *ctx, char *err, size_t errlen);

/* Removes finished requests submitted before before_s (wall clock); *removed counts them. */
int pf_journal_expire(pf_journal_t *j, double before_s, long long *removed, char *err,
                      size_t errlen);
/* Rewrites the file without its free pages (VACUUM) and folds the WAL into it. */
int pf_journal_compact(pf_journal_t *j, char *err, size_t errlen);

/* Requests in the journal: all, and unfinished. */
int pf_journal_count(pf_journal_t *j, long long *all, long long *unfinished, char *err,
                     size_t errlen);

/* The default path: $XDG_STATE_HOME/planfarm/journal.db, else ~/.local/state/planfarm/journal.db.
 * PF_ERR when neither variable is set. */
int pf_journal_default_path(char *out, size_t len, const char *xdg_state_home, const char *home);

#endif
