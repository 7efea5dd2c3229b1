#include "broker/prep.h"
#include "planner/core/util.h"
#include "proto/job_codec.h"
#include "proto/plan_options_codec.h"
#include "proto/model_codec.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

struct pf_prep {
    pthread_t thread;
    int started, stop, delay_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pf_prep_task_t *in_head, *in_tail, *out_head, *out_tail;
    int pending;
    zsock_t *loop_end;  /* polled by the loop */
    zsock_t *thread_end; /* the thread's notices */
    char endpoint[64];
};

static uint8_t *copy(const uint8_t *p, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    if (c && n)
        memcpy(c, p, n);
    return c;
}

pf_prep_task_t *pf_prep_task_new(const char *id, const uint8_t *graph, size_t graph_len,
                                 const uint8_t *cluster, size_t cluster_len,
                                 const uint8_t *options, size_t options_len)
{
    pf_prep_task_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    snprintf(t->id, sizeof t->id, "%s", id);
    t->graph = copy(graph, graph_len);
    t->cluster = copy(cluster, cluster_len);
    t->options = copy(options, options_len);
    t->graph_len = graph_len;
    t->cluster_len = cluster_len;
    t->options_len = options_len;
    if (!t->graph || !t->cluster || !t->options)
        pf_prep_task_free(&t);
    return t;
}

pf_prep_task_t *pf_prep_rerun_new(const char *id, uint64_t sid, uint64_t job_id, const char *peer,
                                  const pf_job_t *job, pf_job_result_t *res,
                                  const uint8_t *result, size_t result_len)
{
    pf_prep_task_t *t = calloc(1, sizeof *t);
    if (!t || !(t->result = copy(result, result_len))) {
        free(t);
        return NULL;
    }
    t->kind = PF_PREP_RERUN;
    snprintf(t->id, sizeof t->id, "%s", id);
    snprintf(t->peer, sizeof t->peer, "%s", peer);
    t->sid = sid;
    t->job_id = job_id;
    t->job = *job;
    t->res = *res;
    memset(res, 0, sizeof *res);
    t->result_len = result_len;
    return t;
}

void pf_prep_task_free(pf_prep_task_t **tp)
{
    pf_prep_task_t *t = tp ? *tp : NULL;
    if (!t)
        return;
    if (t->kind == PF_PREP_RERUN) {
        pf_job_result_clear(&t->res);
        pf_job_result_clear(&t->own);
        free(t->result);
    }
    pf_search_destroy(&t->search);
    pf_graph_destroy(&t->g);
    pf_cluster_destroy(&t->c);
    free(t->graph);
    free(t->cluster);
    free(t->options);
    free(t);
    *tp = NULL;
}

/* The search re-priced the graph (another micro-batch: pf_search_graph): workers must plan that
 * graph, so it replaces the submitted one as the request's graph blob. */
static int reencode_graph(pf_prep_task_t *t)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (pf_model_codec_encode_graph(pf_search_graph(t->search), &buf, &len) != PF_OK)
        return pf_fail(t->err, sizeof t->err, PF_ERR, "out of memory");
    free(t->graph);
    t->graph = buf;
    t->graph_len = len;
    return PF_OK;
}

/* What on_submit used to do on the loop: decode, validate, build the search (phase 0). */
static void run_task(pf_prep_task_t *t)
{
    double t0 = pf_now_s();
    Planfarm__Graph *gm = planfarm__graph__unpack(NULL, t->graph_len, t->graph);
    Planfarm__Cluster *cm = planfarm__cluster__unpack(NULL, t->cluster_len, t->cluster);
    Planfarm__PlanOptions *om =
        t->options_len ? planfarm__plan_options__unpack(NULL, t->options_len, t->options) : NULL;
    if (!gm || !cm || (t->options_len && !om)) {
        t->rc = pf_fail(t->err, sizeof t->err, PF_EINPUT, "SUBMIT: undecodable %s",
                        !gm ? "graph" : !cm ? "cluster" : "options");
    } else if ((t->rc = pf_model_codec_graph_from_pb(gm, &t->g, t->err, sizeof t->err)) == PF_OK &&
               (t->rc = pf_model_codec_cluster_from_pb(cm, &t->c, t->err, sizeof t->err)) ==
                   PF_OK &&
               (t->rc = pf_plan_options_codec_from_pb(om, &t->opts, t->err, sizeof t->err)) ==
                   PF_OK &&
               (t->rc = pf_search_validate(t->g, t->c, &t->opts, t->err, sizeof t->err)) == PF_OK &&
               !(t->search = pf_search_new(t->g, t->c, &t->opts, t->err, sizeof t->err))) {
        t->rc = PF_ERR;
    }
    if (t->rc == PF_OK && pf_search_graph(t->search) != t->g)
        t->rc = reencode_graph(t);
    if (gm)
        planfarm__graph__free_unpacked(gm, NULL);
    if (cm)
        planfarm__cluster__free_unpacked(cm, NULL);
    if (om)
        planfarm__plan_options__free_unpacked(om, NULL);
    t->prep_s = pf_now_s() - t0;
}

static void *thread_main(void *arg)
{
    pf_prep_t *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->stop && !p->in_head)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        pf_prep_task_t *t = p->in_head;
        p->in_head = t->next;
        if (!p->in_head)
            p->in_tail = NULL;
        pthread_mutex_unlock(&p->mu);
        t->next = NULL;
        double t0 = pf_now_s(); /* a re-run's time counts the test hook's wait */
        if (p->delay_ms > 0)
            zclock_sleep(p->delay_ms);
        if (t->kind == PF_PREP_RERUN) {
            pf_job_run(&t->job, &t->own);
            t->prep_s = pf_now_s() - t0;
        } else {
            run_task(t);
        }
        pthread_mutex_lock(&p->mu);
        if (p->out_tail)
            p->out_tail->next = t;
        else
            p->out_head = t;
        p->out_tail = t;
        pthread_mutex_unlock(&p->mu);
        zmq_send(zsock_resolve(p->thread_end), "", 0, ZMQ_DONTWAIT);
    }
    return NULL;
}

pf_prep_t *pf_prep_new(int delay_ms, char *err, size_t errlen)
{
    pf_prep_t *p = calloc(1, sizeof *p);
    if (!p) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    p->delay_ms = delay_ms;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    /* a fresh name each time: an inproc name is freed asynchronously after its socket closes */
    static unsigned long long made;
    snprintf(p->endpoint, sizeof p->endpoint, "inproc://pf-prep-%llu",
             __atomic_add_fetch(&made, 1, __ATOMIC_RELAXED));
    p->loop_end = zsock_new(ZMQ_PAIR);
    p->thread_end = zsock_new(ZMQ_PAIR);
    if (!p->loop_end || !p->thread_end || zsock_bind(p->loop_end, "%s", p->endpoint) != 0 ||
        zsock_connect(p->thread_end, "%s", p->endpoint) != 0) {
        pf_fail(err, errlen, PF_ERR, "prep: cannot make the notice socket pair");
        goto fail;
    }
    zsock_set_sndhwm(p->thread_end, 1);
    if (pthread_create(&p->thread, NULL, thread_main, p) != 0) {
        pf_fail(err, errlen, PF_ERR, "prep: cannot start the helper thread");
        goto fail;
    }
    p->started = 1;
    return p;
fail:
    pf_prep_destroy(&p);
    return NULL;
}

static void free_list(pf_prep_task_t *t)
{
    while (t) {
        pf_prep_task_t *next = t->next;
        pf_prep_task_free(&t);
        t = next;
    }
}

void pf_prep_destroy(pf_prep_t **pp)
{
    if (!pp || !*pp)
        return;
    pf_prep_t *p = *pp;
    if (p->started) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->thread, NULL);
    }
    free_list(p->in_head);
    free_list(p->out_head);
    zsock_destroy(&p->thread_end);
    zsock_destroy(&p->loop_end);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
    *pp = NULL;
}

zsock_t *pf_prep_sock(pf_prep_t *p)
{
    return p->loop_end;
}

void pf_prep_push(pf_prep_t *p, pf_prep_task_t *t)
{
    t->next = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->in_tail)
        p->in_tail->next = t;
    else
        p->in_head = t;
    p->in_tail = t;
    p->pending++;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

pf_prep_task_t *pf_prep_take(pf_prep_t *p)
{
    char buf[1];
    while (zmq_recv(zsock_resolve(p->loop_end), buf, sizeof buf, ZMQ_DONTWAIT) >= 0)
        ; /* notices: the list below is what counts */
    pthread_mutex_lock(&p->mu);
    pf_prep_task_t *t = p->out_head;
    if (t) {
        p->out_head = t->next;
        if (!p->out_head)
            p->out_tail = NULL;
        t->next = NULL;
        p->pending--;
    }
    pthread_mutex_unlock(&p->mu);
    return t;
}

int pf_prep_pending(pf_prep_t *p)
{
    pthread_mutex_lock(&p->mu);
    int n = p->pending;
    pthread_mutex_unlock(&p->mu);
    return n;
}
