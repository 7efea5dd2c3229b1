#include "worker/solver.h"
#include "planner/core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct pf_solver {
    pf_solver_opts_t o;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    pf_wjob_t *in_head, *in_tail, *out_head, *out_tail;
    pf_wjob_t *running;
    int quit, exited;
    atomic_int stopping;
    int wake[2]; /* pipe: the solver writes a byte when an answer is ready */
    int hung;    /* the test hang happened (the solver thread's own) */
};

static void wake_socket_thread(pf_solver_t *s)
{
    char one = 1;
    while (write(s->wake[1], &one, 1) < 0 && errno == EINTR)
        ;
}

static void run_job(pf_solver_t *s, pf_wjob_t *j)
{
    struct timespec ten_ms = {0, 10000000};
    for (int t = 0; t < s->o.test_delay_ms && !atomic_load(&j->cancel); t += 10)
        nanosleep(&ten_ms, NULL);
    if (s->o.test_hang_kind == (int)j->wire.kind && !s->hung) {
        s->hung = 1;
        while (!atomic_load(&j->cancel) && !atomic_load(&s->stopping))
            nanosleep(&ten_ms, NULL);
        j->failed = 1;
        snprintf(j->error, sizeof j->error, "cancelled (the test hang hook hung it)");
        return;
    }
    pf_job_t job;
    pf_job_result_t res;
    pf_job_codec_bind(&j->wire, pf_cache_entry_graph(j->graph), pf_cache_entry_cluster(j->cluster),
                      &job);
    job.threads = s->o.threads;
    job.cancel = &j->cancel;
    int rc = pf_job_run(&job, &res);
    j->seconds = res.seconds;
    /* A run-time failure (out of memory) may not happen elsewhere: FAILED lets the broker try
     * another worker. Infeasible partitions, not-found probes and bad parameters are answers. */
    if (rc == PF_ERR || (rc != PF_OK && atomic_load(&j->cancel))) {
        j->failed = 1;
        snprintf(j->error, sizeof j->error, "%s",
                 atomic_load(&j->cancel) ? "cancelled" : res.error);
    } else {
        pf_arena_t *a = pf_arena_new();
        Planfarm__JobResult *m = a ? pf_job_codec_result_to_pb(a, j->id, &res) : NULL;
        if (!m || pf_wire_pack(&m->base, &j->result, &j->result_len) != PF_OK) {
            j->failed = 1;
            snprintf(j->error, sizeof j->error, "worker: out of memory encoding the result");
        }
        pf_arena_destroy(&a);
    }
    pf_job_result_clear(&res);
}

static void *solver_main(void *arg)
{
    pf_solver_t *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->quit && !s->in_head)
            pthread_cond_wait(&s->work, &s->mu);
        if (s->quit)
            break;
        pf_wjob_t *j = s->in_head;
        s->in_head = j->next;
        if (!s->in_head)
            s->in_tail = NULL;
        j->next = NULL;
        j->state = PF_WJOB_RUNNING;
        s->running = j;
        pthread_mutex_unlock(&s->mu);

        run_job(s, j);

        pthread_mutex_lock(&s->mu);
        s->running = NULL;
        j->state = PF_WJOB_FINISHED;
        if (s->out_tail)
            s->out_tail->next = j;
        else
            s->out_head = j;
        s->out_tail = j;
        pthread_cond_broadcast(&s->idle);
        wake_socket_thread(s);
    }
    s->exited = 1;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void solver_free(pf_solver_t *s)
{
    if (s->wake[0] >= 0) {
        close(s->wake[0]);
        close(s->wake[1]);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->idle);
    free(s);
}

pf_solver_t *pf_solver_new(const pf_solver_opts_t *o, char *err, size_t errlen)
{
    pf_solver_t *s = calloc(1, sizeof *s);
    if (!s) {
        pf_fail(err, errlen, PF_ERR, "out of memory");
        return NULL;
    }
    s->o = *o;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->idle, NULL);
    if (pipe(s->wake) != 0) {
        pf_fail(err, errlen, PF_ERR, "pipe: %s", strerror(errno));
        s->wake[0] = s->wake[1] = -1;
        goto fail;
    }
    for (int i = 0; i < 2; i++) {
        fcntl(s->wake[i], F_SETFL, fcntl(s->wake[i], F_GETFL) | O_NONBLOCK);
        fcntl(s->wake[i], F_SETFD, FD_CLOEXEC);
    }
    if (pthread_create(&s->thread, NULL, solver_main, s) != 0) {
        pf_fail(err, errlen, PF_ERR, "cannot start the solver thread");
        goto fail;
    }
    return s;
fail:
    solver_free(s);
    return NULL;
}

int pf_solver_stop(pf_solver_t **sp, double grace_s)
{
    if (!sp || !*sp)
        return 1;
    pf_solver_t *s = *sp;
    pthread_mutex_lock(&s->mu);
    s->quit = 1;
    atomic_store(&s->stopping, 1);
    if (s->running)
        atomic_store(&s->running->cancel, 1);
    pthread_cond_broadcast(&s->work);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)grace_s;
    while (!s->exited)
        if (pthread_cond_timedwait(&s->idle, &s->mu, &until) == ETIMEDOUT)
            break;
    int gone = s->exited;
    pthread_mutex_unlock(&s->mu);
    if (!gone) {
        /* A solve that ignores its cancel flag keeps its job, the blobs it reads and the mailbox
         * until the process exits. */
        pthread_detach(s->thread);
        *sp = NULL;
        return 0;
    }
    pthread_join(s->thread, NULL);
    solver_free(s);
    *sp = NULL;
    return 1;
}

int pf_solver_wake_fd(const pf_solver_t *s)
{
    return s->wake[0];
}

void pf_solver_queue(pf_solver_t *s, pf_wjob_t *j)
{
    pthread_mutex_lock(&s->mu);
    j->state = PF_WJOB_QUEUED;
    if (s->in_tail)
        s->in_tail->next = j;
    else
        s->in_head = j;
    s->in_tail = j;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
}

int pf_solver_unqueue(pf_solver_t *s, pf_wjob_t *j)
{
    int found = 0;
    pthread_mutex_lock(&s->mu);
    if (j->state == PF_WJOB_QUEUED) {
        pf_wjob_t **pp = &s->in_head, *prev = NULL;
        while (*pp && *pp != j) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        if (*pp) {
            *pp = j->next;
            if (s->in_tail == j)
                s->in_tail = prev;
            j->next = NULL;
            found = 1;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return found;
}

pf_wjob_t *pf_solver_take_answers(pf_solver_t *s)
{
    char sink[256];
    while (read(s->wake[0], sink, sizeof sink) > 0)
        ;
    pthread_mutex_lock(&s->mu);
    pf_wjob_t *j = s->out_head;
    s->out_head = s->out_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    return j;
}
