#include "broker/fair.h"
#include "broker/id_table.h"
#include "planner/core/util.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lane lane_t;

typedef struct {
    pf_fair_job_t job;
    int priority;
    uint64_t seq;   /* issue order: FIFO among equal priorities */
    lane_t *lane;
    void *qhandle;  /* in lane->queue while queued; NULL once in flight */
} entry_t;

struct lane {
    char client[256];
    zlistx_t *queue; /* entry_t, highest priority first, then by seq */
    int in_flight;
    void *ring_handle;
};

struct pf_fair {
    int max_in_flight;
    zhashx_t *lanes;  /* client -> lane_t */
    zlistx_t *ring;   /* lane_t, in the order they came */
    lane_t *last;     /* the lane served last: the next turn starts after it */
    zhashx_t *jobs;   /* &id -> entry_t, queued and in flight */
    zhashx_t *owners; /* "%p" of the owner -> count of its queued jobs (a malloc'd long long) */
    uint64_t next_seq;
    long long queued;
};

/* zlistx's sorted insert: "smaller" first, so the higher priority compares lower. */
static int entry_cmp(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void count_free(void **item)
{
    free(*item);
    *item = NULL;
}

static void lane_free(void **item)
{
    lane_t *l = *item;
    if (l) {
        zlistx_destroy(&l->queue);
        free(l);
    }
    *item = NULL;
}

pf_fair_t *pf_fair_new(int max_in_flight)
{
    pf_fair_t *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->max_in_flight = max_in_flight;
    f->lanes = zhashx_new();
    f->ring = zlistx_new();
    f->jobs = pf_id_table_new();
    f->owners = zhashx_new();
    if (!f->lanes || !f->ring || !f->jobs || !f->owners) {
        pf_fair_destroy(&f);
        return NULL;
    }
    zhashx_set_destructor(f->lanes, lane_free);
    zhashx_set_destructor(f->owners, count_free);
    return f;
}

void pf_fair_destroy(pf_fair_t **fp)
{
    if (!fp || !*fp)
        return;
    pf_fair_t *f = *fp;
    if (f->jobs) {
        for (entry_t *e = zhashx_first(f->jobs); e; e = zhashx_next(f->jobs))
            free(e);
        zhashx_destroy(&f->jobs);
    }
    zlistx_destroy(&f->ring);
    zhashx_destroy(&f->lanes);
    zhashx_destroy(&f->owners);
    free(f);
    *fp = NULL;
}

static void owner_key(const void *owner, char key[32])
{
    snprintf(key, 32, "%p", owner);
}

static void owner_add(pf_fair_t *f, const void *owner, long long delta)
{
    char key[32];
    owner_key(owner, key);
    long long *n = zhashx_lookup(f->owners, key);
    if (!n && delta > 0) {
        if (!(n = calloc(1, sizeof *n)) || zhashx_insert(f->owners, key, n) != 0) {
            free(n);
            return;
        }
    }
    if (!n)
        return;
    *n += delta;
    if (*n <= 0)
        zhashx_delete(f->owners, key);
}

/* An idle lane (nothing queued, nothing in flight) is forgotten: clients come and go. */
static void lane_maybe_drop(pf_fair_t *f, lane_t *l)
{
    if (zlistx_size(l->queue) > 0 || l->in_flight > 0)
        return;
    if (f->last == l)
        f->last = NULL;
    zlistx_delete(f->ring, l->ring_handle);
    zhashx_delete(f->lanes, l->client); /* frees l */
}

int pf_fair_push(pf_fair_t *f, const char *client, int priority, const pf_fair_job_t *job)
{
    if (job->id == 0 || zhashx_lookup(f->jobs, &job->id))
        return PF_ERR;
    lane_t *l = zhashx_lookup(f->lanes, client);
    if (!l) {
        if (!(l = calloc(1, sizeof *l)) || !(l->queue = zlistx_new())) {
            free(l);
            return PF_ERR;
        }
        snprintf(l->client, sizeof l->client, "%s", client);
        zlistx_set_comparator(l->queue, entry_cmp);
        if (zhashx_insert(f->lanes, l->client, l) != 0) {
            zlistx_destroy(&l->queue);
            free(l);
            return PF_ERR;
        }
        if (!(l->ring_handle = zlistx_add_end(f->ring, l))) {
            zhashx_delete(f->lanes, l->client);
            return PF_ERR;
        }
    }
    entry_t *e = calloc(1, sizeof *e);
    if (!e)
        return PF_ERR;
    e->job = *job;
    e->priority = priority;
    e->seq = ++f->next_seq;
    e->lane = l;
    if (!(e->qhandle = zlistx_insert(l->queue, e, false))) {
        free(e);
        lane_maybe_drop(f, l);
        return PF_ERR;
    }
    if (zhashx_insert(f->jobs, &e->job.id, e) != 0) {
        zlistx_delete(l->queue, e->qhandle);
        free(e);
        lane_maybe_drop(f, l);
        return PF_ERR;
    }
    f->queued++;
    owner_add(f, job->owner, 1);
    return PF_OK;
}

bool pf_fair_pop(pf_fair_t *f, pf_fair_job_t *job)
{
    size_t n = zlistx_size(f->ring);
    if (n == 0 || f->queued == 0)
        return false;
    /* the lane after the one served last, around the ring once */
    lane_t *l;
    if (!f->last || !zlistx_find(f->ring, f->last)) /* either puts the cursor there */
        zlistx_last(f->ring);
    for (size_t k = 0; k < n; k++) {
        l = zlistx_next(f->ring);
        if (!l)
            l = zlistx_first(f->ring);
        if (zlistx_size(l->queue) == 0 || (f->max_in_flight > 0 && l->in_flight >= f->max_in_flight))
            continue;
        entry_t *e = zlistx_first(l->queue);
        zlistx_delete(l->queue, e->qhandle);
        e->qhandle = NULL;
        l->in_flight++;
        f->queued--;
        owner_add(f, e->job.owner, -1);
        f->last = l;
        *job = e->job;
        return true;
    }
    return false;
}

static void forget(pf_fair_t *f, entry_t *e)
{
    lane_t *l = e->lane;
    if (e->qhandle) {
        zlistx_delete(l->queue, e->qhandle);
        f->queued--;
        owner_add(f, e->job.owner, -1);
    } else {
        l->in_flight--;
    }
    zhashx_delete(f->jobs, &e->job.id);
    free(e);
    lane_maybe_drop(f, l);
}

void pf_fair_done(pf_fair_t *f, uint64_t id)
{
    entry_t *e = zhashx_lookup(f->jobs, &id);
    if (e && !e->qhandle)
        forget(f, e);
}

bool pf_fair_cancel(pf_fair_t *f, uint64_t id)
{
    entry_t *e = zhashx_lookup(f->jobs, &id);
    if (!e)
        return false;
    bool queued = e->qhandle != NULL;
    forget(f, e);
    return queued;
}

void pf_fair_cancel_owner(pf_fair_t *f, const void *owner)
{
    zlistx_t *mine = zlistx_new();
    if (!mine)
        return;
    for (entry_t *e = zhashx_first(f->jobs); e; e = zhashx_next(f->jobs))
        if (e->job.owner == owner)
            zlistx_add_end(mine, e);
    for (entry_t *e = zlistx_first(mine); e; e = zlistx_next(mine))
        forget(f, e);
    zlistx_destroy(&mine);
}

long long pf_fair_queued(const pf_fair_t *f)
{
    return f->queued;
}

long long pf_fair_owner_queued(const pf_fair_t *f, const void *owner)
{
    char key[32];
    owner_key(owner, key);
    long long *n = zhashx_lookup(f->owners, key);
    return n ? *n : 0;
}

int pf_fair_lane_in_flight(const pf_fair_t *f, const char *client)
{
    lane_t *l = zhashx_lookup(f->lanes, client);
    return l ? l->in_flight : 0;
}
