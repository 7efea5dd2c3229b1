#include "broker/dispatch.h"
#include "broker/id_table.h"
#include "planner/core/util.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CREDITS 100000

typedef struct {
    uint64_t id;
    pf_job_kind_t kind;
    void *owner;
    uint64_t owner_job;
    double timeout_s, deadline;
    double sent_at; /* `now` of the latest send */
    int attempts; /* failures counted so far */
    int sends;
    uint64_t *tried; /* serials of the workers an attempt failed on, each once */
    int ntried;
    size_t tried_cap;
    int worker;   /* holder of the live copy; -1 while queued */
    int zombies;  /* cancelled copies that workers still hold */
    void *qhandle; /* zlistx handle while queued */
    char error[192];
} job_t;

typedef struct {
    uint64_t id;
    int live;
} held_t;

typedef struct {
    int in_use;
    uint64_t serial; /* unique for the core's life: slots are reused, serials are not */
    int credits;
    unsigned kinds;
    void *user;
    int silent_ticks; /* ticks since its last message */
    held_t *held; /* `credits` slots */
    int nheld;
} worker_t;

typedef enum { EV_CANCEL, EV_POISONED, EV_DEAD } ev_kind_t;

typedef struct {
    ev_kind_t kind;
    void *user; /* worker user (cancel, dead) or owner (poisoned) */
    uint64_t job_id, owner_job;
    char error[192];
} event_t;

struct pf_dispatch {
    pf_dispatch_opts_t o;
    pf_dispatch_events_t ev;
    zhashx_t *jobs;  /* &job->id -> job_t */
    zlistx_t *queue; /* job_t, FIFO */
    worker_t *w;
    int nw, live_workers;
    size_t wcap;
    int rr;          /* round-robin start for ties */
    uint64_t serials; /* the last worker serial given */
    long long credits, credits_free;
    /* Callbacks run after the operation that caused them has finished, so an owner may call back
     * into the dispatch core (cancel more jobs) from inside one. */
    event_t *events;
    int nev, flushing;
    size_t evcap;
    pf_dispatch_stats_t st;
    long long answered_by_kind[PF_JOB_KIND_COUNT];
};

void pf_dispatch_opts_init(pf_dispatch_opts_t *o)
{
    o->max_attempts = 3;
    o->liveness = 5;
}

pf_dispatch_t *pf_dispatch_new(const pf_dispatch_opts_t *o, const pf_dispatch_events_t *ev)
{
    pf_dispatch_t *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    if (o)
        d->o = *o;
    else
        pf_dispatch_opts_init(&d->o);
    if (d->o.max_attempts < 1)
        d->o.max_attempts = 1;
    if (ev)
        d->ev = *ev;
    d->jobs = pf_id_table_new();
    d->queue = zlistx_new();
    if (!d->jobs || !d->queue) {
        pf_dispatch_destroy(&d);
        return NULL;
    }
    return d;
}

void pf_dispatch_destroy(pf_dispatch_t **dp)
{
    if (!dp || !*dp)
        return;
    pf_dispatch_t *d = *dp;
    if (d->jobs) {
        for (job_t *j = zhashx_first(d->jobs); j; j = zhashx_next(d->jobs)) {
            free(j->tried);
            free(j);
        }
        zhashx_destroy(&d->jobs);
    }
    zlistx_destroy(&d->queue);
    for (int i = 0; i < d->nw; i++)
        free(d->w[i].held);
    free(d->w);
    free(d->events);
    free(d);
    *dp = NULL;
}

/* ---- deferred events ---- */

static void push_event(pf_dispatch_t *d, ev_kind_t kind, void *user, uint64_t job_id,
                       uint64_t owner_job, const char *error)
{
    if (pf_grow((void **)&d->events, &d->evcap, (size_t)d->nev + 1, sizeof *d->events) != 0) {
        zsys_error("dispatch: out of memory; an event is lost");
        return;
    }
    event_t *e = &d->events[d->nev++];
    e->kind = kind;
    e->user = user;
    e->job_id = job_id;
    e->owner_job = owner_job;
    snprintf(e->error, sizeof e->error, "%s", error ? error : "");
}

static void flush(pf_dispatch_t *d)
{
    if (d->flushing)
        return;
    d->flushing = 1;
    for (int i = 0; i < d->nev; i++) { /* callbacks may append */
        event_t e = d->events[i];
        switch (e.kind) {
        case EV_CANCEL:
            if (d->ev.cancel)
                d->ev.cancel(d->ev.ctx, e.user, e.job_id);
            break;
        case EV_POISONED:
            if (d->ev.poisoned)
                d->ev.poisoned(d->ev.ctx, e.user, e.owner_job, e.job_id, e.error);
            break;
        case EV_DEAD:
            if (d->ev.worker_dead)
                d->ev.worker_dead(d->ev.ctx, e.user);
            break;
        }
    }
    d->nev = 0;
    d->flushing = 0;
}

/* ---- helpers ---- */

static job_t *find(pf_dispatch_t *d, uint64_t id)
{
    return zhashx_lookup(d->jobs, &id);
}

static void forget(pf_dispatch_t *d, job_t *j)
{
    if (j->qhandle)
        zlistx_delete(d->queue, j->qhandle);
    zhashx_delete(d->jobs, &j->id);
    free(j->tried);
    free(j);
}

static int held_index(const worker_t *w, uint64_t id, int live)
{
    for (int i = 0; i < w->nheld; i++)
        if (w->held[i].id == id && (live < 0 || w->held[i].live == live))
            return i;
    return -1;
}

static void held_drop(pf_dispatch_t *d, worker_t *w, int i)
{
    w->held[i] = w->held[--w->nheld];
    d->credits_free++;
}

static bool valid_worker(const pf_dispatch_t *d, int w)
{
    return w >= 0 && w < d->nw && d->w[w].in_use;
}

/* The live copy of j at its worker becomes a cancelled one; the worker is told. */
static void cancel_live_copy(pf_dispatch_t *d, job_t *j)
{
    worker_t *w = &d->w[j->worker];
    int i = held_index(w, j->id, 1);
    if (i >= 0) {
        w->held[i].live = 0;
        j->zombies++;
        push_event(d, EV_CANCEL, w->user, j->id, 0, NULL);
    }
    j->worker = -1;
}

static bool tried_on(const job_t *j, uint64_t serial)
{
    for (int i = 0; i < j->ntried; i++)
        if (j->tried[i] == serial)
            return true;
    return false;
}

/* Does a live worker that runs j's kind and has not failed j exist (busy or not)? */
static bool untried_worker(const pf_dispatch_t *d, const job_t *j)
{
    for (int i = 0; i < d->nw; i++) {
        const worker_t *w = &d->w[i];
        if (w->in_use && (w->kinds & (1u << j->kind)) && !tried_on(j, w->serial))
            return true;
    }
    return false;
}

/* One more failure of j on worker wi (-1: none known): back to the front of the queue, or
 * poisoned. A job is poisoned once it failed max_attempts times and either failed on
 * max_attempts distinct workers or no worker that has not failed it is connected: one bad
 * worker cannot poison a job while a healthy one runs its kind (pick_worker sends the retry
 * there). */
static void requeue(pf_dispatch_t *d, job_t *j, int wi, const char *why)
{
    j->attempts++;
    j->worker = -1;
    snprintf(j->error, sizeof j->error, "%s", why ? why : "failed");
    if (valid_worker(d, wi) && !tried_on(j, d->w[wi].serial)) {
        if (pf_grow((void **)&j->tried, &j->tried_cap, (size_t)j->ntried + 1,
                    sizeof *j->tried) == 0)
            j->tried[j->ntried++] = d->w[wi].serial;
        else
            zsys_error("dispatch: out of memory noting the worker job %llu failed on",
                       (unsigned long long)j->id);
    }
    if (j->attempts >= d->o.max_attempts &&
        (j->ntried >= d->o.max_attempts || !untried_worker(d, j))) {
        char msg[sizeof j->error + 128];
        snprintf(msg, sizeof msg, "job %llu (%s) failed %d time%s on %d worker%s; last: %s",
                 (unsigned long long)j->id, pf_job_kind_name(j->kind), j->attempts,
                 j->attempts == 1 ? "" : "s", j->ntried, j->ntried == 1 ? "" : "s", j->error);
        push_event(d, EV_POISONED, j->owner, j->id, j->owner_job, msg);
        d->st.poisoned++;
        forget(d, j);
        return;
    }
    j->qhandle = zlistx_add_start(d->queue, j);
    d->st.requeued++;
}

/* ---- workers ---- */

int pf_dispatch_worker_add(pf_dispatch_t *d, int credits, unsigned kinds, void *user)
{
    if (credits < 1)
        credits = 1;
    if (credits > MAX_CREDITS)
        credits = MAX_CREDITS;
    int slot = -1;
    for (int i = 0; i < d->nw; i++)
        if (!d->w[i].in_use) {
            slot = i;
            break;
        }
    if (slot < 0) {
        if (pf_grow((void **)&d->w, &d->wcap, (size_t)d->nw + 1, sizeof *d->w) != 0)
            return PF_ERR;
        slot = d->nw++;
    }
    worker_t *w = &d->w[slot];
    memset(w, 0, sizeof *w);
    w->held = malloc((size_t)credits * sizeof *w->held);
    if (!w->held)
        return PF_ERR;
    w->in_use = 1;
    w->serial = ++d->serials;
    w->credits = credits;
    w->kinds = kinds;
    w->user = user;
    d->live_workers++;
    d->credits += credits;
    d->credits_free += credits;
    return slot;
}

void pf_dispatch_worker_seen(pf_dispatch_t *d, int w)
{
    if (valid_worker(d, w))
        d->w[w].silent_ticks = 0;
}

static void remove_worker(pf_dispatch_t *d, int wi, const char *why)
{
    worker_t *w = &d->w[wi];
    for (int i = 0; i < w->nheld; i++) {
        job_t *j = find(d, w->held[i].id);
        if (!j)
            continue;
        if (w->held[i].live)
            requeue(d, j, wi, why);
        else
            j->zombies--;
    }
    d->credits -= w->credits;
    d->credits_free -= w->credits - w->nheld;
    d->live_workers--;
    free(w->held);
    memset(w, 0, sizeof *w);
}

void pf_dispatch_worker_remove(pf_dispatch_t *d, int w, const char *why)
{
    if (!valid_worker(d, w))
        return;
    remove_worker(d, w, why ? why : "worker left");
    flush(d);
}

int pf_dispatch_worker_held(const pf_dispatch_t *d, int w)
{
    return valid_worker(d, w) ? d->w[w].nheld : 0;
}

int pf_dispatch_holds(const pf_dispatch_t *d, int w, uint64_t id)
{
    if (!valid_worker(d, w))
        return -1;
    if (held_index(&d->w[w], id, 1) >= 0)
        return 1;
    return held_index(&d->w[w], id, 0) >= 0 ? 0 : -1;
}

int pf_dispatch_worker_jobs(const pf_dispatch_t *d, int w, uint64_t *ids, int max)
{
    int n = 0;
    if (valid_worker(d, w))
        for (int i = 0; i < d->w[w].nheld && n < max; i++)
            ids[n++] = d->w[w].held[i].id;
    return n;
}

int pf_dispatch_workers(const pf_dispatch_t *d)
{
    return d->live_workers;
}

/* ---- jobs ---- */

int pf_dispatch_submit(pf_dispatch_t *d, uint64_t id, pf_job_kind_t kind, double timeout_s,
                       void *owner, uint64_t owner_job)
{
    if (id == 0 || find(d, id))
        return PF_ERR;
    job_t *j = calloc(1, sizeof *j);
    if (!j)
        return PF_ERR;
    j->id = id;
    j->kind = kind;
    j->owner = owner;
    j->owner_job = owner_job;
    j->timeout_s = timeout_s;
    j->worker = -1;
    if (zhashx_insert(d->jobs, &j->id, j) != 0) {
        free(j);
        return PF_ERR;
    }
    j->qhandle = zlistx_add_end(d->queue, j);
    if (!j->qhandle) {
        zhashx_delete(d->jobs, &j->id);
        free(j);
        return PF_ERR;
    }
    return PF_OK;
}

/* Least-loaded worker with a free credit that runs j's kind and holds no copy of j (a worker that
 * still holds a cancelled copy would see the same id twice). A worker j failed on gets it again
 * only when every live worker of its kind has failed it: while one that has not is connected,
 * the job waits for its credit (head of line, like a job waiting for its kind). Ties go
 * round-robin. A linear scan: worker counts are in the hundreds, and the scan stops the search
 * for a free credit only when there is one (credits_free > 0 is checked first). */
static int pick_worker(pf_dispatch_t *d, const job_t *j)
{
    int best = -1, again = -1;
    bool untried = false;
    for (int k = 0; k < d->nw; k++) {
        int i = (d->rr + k) % d->nw;
        const worker_t *w = &d->w[i];
        if (!w->in_use || !(w->kinds & (1u << j->kind)))
            continue;
        bool failed = j->ntried > 0 && tried_on(j, w->serial);
        untried |= !failed;
        if (w->nheld >= w->credits || (j->zombies > 0 && held_index(w, j->id, -1) >= 0))
            continue;
        int *pick = failed ? &again : &best;
        if (*pick < 0 || w->nheld < d->w[*pick].nheld)
            *pick = i;
    }
    if (best < 0 && !untried)
        best = again;
    if (best >= 0)
        d->rr = (best + 1) % d->nw;
    return best;
}

bool pf_dispatch_next(pf_dispatch_t *d, double now, pf_dispatch_assign_t *a)
{
    if (d->credits_free <= 0)
        return false;
    job_t *j = zlistx_head(d->queue);
    if (!j)
        return false;
    int wi = pick_worker(d, j);
    if (wi < 0)
        return false; /* head-of-line: the oldest job waits for a worker that runs its kind */
    worker_t *w = &d->w[wi];
    zlistx_delete(d->queue, j->qhandle);
    j->qhandle = NULL;
    j->worker = wi;
    j->deadline = now + j->timeout_s;
    j->sent_at = now;
    w->held[w->nheld++] = (held_t){j->id, 1};
    d->credits_free--;
    d->st.dispatched++;
    a->job_id = j->id;
    a->kind = j->kind;
    a->attempt = (uint32_t)j->sends++;
    a->worker = wi;
    a->worker_user = w->user;
    a->owner = j->owner;
    a->owner_job = j->owner_job;
    return true;
}

bool pf_dispatch_job_owner(pf_dispatch_t *d, uint64_t id, void **owner, uint64_t *owner_job)
{
    job_t *j = find(d, id);
    if (!j)
        return false;
    *owner = j->owner;
    *owner_job = j->owner_job;
    return true;
}

/* Free w's credit for id (its live copy first); returns whether it held the live copy, -1 when it
 * held none. */
static int release_credit(pf_dispatch_t *d, int w, uint64_t id)
{
    if (!valid_worker(d, w))
        return -1;
    worker_t *wk = &d->w[w];
    int i = held_index(wk, id, 1);
    if (i < 0)
        i = held_index(wk, id, 0);
    if (i < 0)
        return -1;
    int live = wk->held[i].live;
    held_drop(d, wk, i);
    if (!live) {
        job_t *j = find(d, id);
        if (j)
            j->zombies--;
    }
    return live;
}

bool pf_dispatch_result(pf_dispatch_t *d, int w, uint64_t id)
{
    int live = release_credit(d, w, id);
    job_t *j = find(d, id);
    if (!j) {
        d->st.ignored++;
        flush(d);
        return false;
    }
    if (live == 1) {
        j->worker = -1;
    } else {
        d->st.late_accepted++;
        if (j->worker >= 0)
            cancel_live_copy(d, j); /* someone else is running it: no longer needed */
    }
    d->st.answered++;
    if ((unsigned)j->kind < PF_JOB_KIND_COUNT)
        d->answered_by_kind[j->kind]++;
    forget(d, j);
    flush(d);
    return true;
}

bool pf_dispatch_failed(pf_dispatch_t *d, int w, uint64_t id, const char *error)
{
    int live = release_credit(d, w, id);
    job_t *j = live == 1 ? find(d, id) : NULL;
    if (!j) {
        flush(d);
        return false;
    }
    requeue(d, j, w, error);
    flush(d);
    return true;
}

static void cancel_job(pf_dispatch_t *d, job_t *j)
{
    if (j->worker >= 0)
        cancel_live_copy(d, j);
    forget(d, j);
}

void pf_dispatch_cancel(pf_dispatch_t *d, uint64_t id)
{
    job_t *j = find(d, id);
    if (j)
        cancel_job(d, j);
    flush(d);
}

void pf_dispatch_cancel_owner(pf_dispatch_t *d, void *owner)
{
    size_t n = zhashx_size(d->jobs), k = 0;
    uint64_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        zsys_error("dispatch: out of memory cancelling a request's jobs");
        return;
    }
    for (job_t *j = zhashx_first(d->jobs); j; j = zhashx_next(d->jobs))
        if (j->owner == owner)
            ids[k++] = j->id;
    for (size_t i = 0; i < k; i++) {
        job_t *j = find(d, ids[i]);
        if (j)
            cancel_job(d, j);
    }
    free(ids);
    flush(d);
}

void pf_dispatch_tick(pf_dispatch_t *d, double now)
{
    for (int wi = 0; wi < d->nw; wi++) {
        worker_t *w = &d->w[wi];
        if (!w->in_use)
            continue;
        if (w->silent_ticks++ >= d->o.liveness) {
            char why[96];
            snprintf(why, sizeof why, "worker silent for %d heartbeats", d->o.liveness);
            void *user = w->user;
            remove_worker(d, wi, why);
            push_event(d, EV_DEAD, user, 0, 0, NULL);
            continue;
        }
        for (int i = 0; i < w->nheld; i++) {
            if (!w->held[i].live)
                continue;
            job_t *j = find(d, w->held[i].id);
            if (!j || now <= j->deadline)
                continue;
            char why[96];
            snprintf(why, sizeof why, "deadline of %.0f s passed", j->timeout_s);
            zsys_warning("dispatch: job %llu (%s) passed its %.0f s deadline; cancelled at its "
                         "worker and queued again",
                         (unsigned long long)j->id, pf_job_kind_name(j->kind), j->timeout_s);
            cancel_live_copy(d, j);
            requeue(d, j, wi, why);
        }
    }
    flush(d);
}

void pf_dispatch_get_stats(const pf_dispatch_t *d, pf_dispatch_stats_t *st)
{
    *st = d->st;
    st->queued = (long long)zlistx_size(d->queue);
    st->running = 0;
    for (int i = 0; i < d->nw; i++)
        for (int k = 0; k < d->w[i].nheld; k++)
            st->running += d->w[i].held[k].live;
    st->workers = d->live_workers;
    st->credits = (int)d->credits;
    st->credits_free = (int)d->credits_free;
}

void pf_dispatch_owner_counts(pf_dispatch_t *d, const void *owner, long long *queued,
                              long long *running)
{
    *queued = *running = 0;
    for (job_t *j = zhashx_first(d->jobs); j; j = zhashx_next(d->jobs))
        if (j->owner == owner) {
            if (j->worker >= 0)
                (*running)++;
            else
                (*queued)++;
        }
}

void pf_dispatch_kind_counts(pf_dispatch_t *d, pf_dispatch_kind_counts_t *k)
{
    memset(k, 0, sizeof *k);
    memcpy(k->answered, d->answered_by_kind, sizeof k->answered);
    for (job_t *j = zhashx_first(d->jobs); j; j = zhashx_next(d->jobs)) {
        if ((unsigned)j->kind >= PF_JOB_KIND_COUNT)
            continue;
        if (j->worker >= 0)
            k->running[j->kind]++;
        else
            k->queued[j->kind]++;
    }
}

bool pf_dispatch_job_sent(pf_dispatch_t *d, uint64_t id, pf_job_kind_t *kind, double *sent_at,
                         int *worker)
{
    job_t *j = find(d, id);
    if (!j || j->worker < 0)
        return false;
    *kind = j->kind;
    *sent_at = j->sent_at;
    *worker = j->worker;
    return true;
}
