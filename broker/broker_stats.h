/* broker_stats: the broker's counters as one record, read by its owner (pf_broker_get_stats in
 * broker/broker.h) and turned into the metrics and the status page by broker/publish.h. Below
 * both, so that the page's file does not include the loop's header. */
#ifndef PF_BROKER_STATS_H
#define PF_BROKER_STATS_H

typedef struct {
    double wall_s, busy_s; /* monotonic seconds since pf_broker_new, and those spent handling
                            * messages and timers (not the options' clock: a measurement) */
    long long msgs_in, msgs_out, malformed;
    long long dispatched, answered, requeued, poisoned;
    long long foreign_answers; /* RESULTs and FAILEDs for jobs the sender did not hold: dropped */
    int workers;
    long long requests;
    double max_stall_s;  /* longest turn of the loop (monotonic): how long STATUS could wait */
    double prep_max_s;   /* longest request setup on the helper thread */
    int preparing;       /* requests whose setup is queued or running */
    long long restored, replayed_answers, journal_errors;
    long long reruns;    /* answers re-run on the helper thread (a leading SIMULATE answer) */
    double rerun_max_s;  /* the longest of them */
    long long workers_lost; /* workers declared silent or unreachable */
} pf_broker_stats_t;

#endif
