/* profile_codec: the profiler agent's messages on the wire (REGISTER, PROFILE, MEASUREMENT, and
 * the client's PROFILE_CLUSTER round). Records travel field by field (planner/inputs/record.h); decoding
 * copies every string into its fixed-size field only when it fits with its NUL, bounds every
 * count before anything is allocated, and then checks every field with pf_record_check_*, so
 * that what reaches the broker's assembly or an agent's probes is a record it can trust.
 * Decoders return PF_EINPUT naming the record and field ("links[2]: 41 sizes, ..."). */
#ifndef PF_PROFILE_CODEC_H
#define PF_PROFILE_CODEC_H

#include "planner/inputs/record.h"
#include "proto/arena.h"
#include "proto/wire.h"

#include <stddef.h>
#include <stdint.h>

#define PF_PROFILE_MAX_DEVICES 4096 /* records of one message: 16 hosts x 256 GPUs */
#define PF_PROFILE_MAX_LINKS 65536  /* every ordered pair of 128 GPUs, peer access on and off */
#define PF_PROFILE_ENDPOINT_MAX 256
#define PF_PROFILE_MAX_REPS 1000
#define PF_PROFILE_MAX_TIMEOUT_S 3600.0
#define PF_PROFILE_MAX_BYTES (1024.0 * 1024 * 1024) /* one message of a sweep: 1 GiB */

/* What an agent answered one PROFILE task with; owned arrays. */
typedef struct {
    uint64_t round;
    uint32_t task;
    pf_record_device_t *dev;
    int ndev;
    pf_record_link_t *link;
    int nlink;
    char echo_endpoint[PF_PROFILE_ENDPOINT_MAX]; /* "" unless it answers PROFILE_ECHO */
    char error[256];                             /* "" when the task succeeded */
} pf_profile_codec_measurement_t;

void pf_profile_codec_measurement_clear(
    pf_profile_codec_measurement_t *m); /* frees the arrays; zeroes; idempotent */

/* What an agent registers with. */
typedef struct {
    char host[PF_REC_NAME];
    char name[PF_REC_NAME];
    char cuda_status[256];
    pf_record_device_t *dev;
    int ndev;
} pf_profile_codec_agent_info_t;

void pf_profile_codec_agent_info_clear(pf_profile_codec_agent_info_t *a);

/* A PROFILE task as an agent runs it. */
typedef struct {
    uint64_t round;
    uint32_t task;
    Planfarm__ProfileTaskKind kind;
    char peer_endpoint[PF_PROFILE_ENDPOINT_MAX]; /* PINGPONG: the echo to measure against */
    char peer_host[PF_REC_NAME];                 /* PINGPONG: the host behind it */
    int nsizes;                                  /* 0 = the agent's default sweep */
    double sizes[PF_SWEEP_MAX];
    int reps;                                    /* 0 = default */
    double timeout_s;                            /* 0 = default */
    uint64_t stream_bytes;                       /* 0 = default */
} pf_profile_codec_task_t;

/* ---- records ---- */
Planfarm__DeviceRecord *pf_profile_codec_device_to_pb(pf_arena_t *a, const pf_record_device_t *d);
Planfarm__LinkRecord *pf_profile_codec_link_to_pb(pf_arena_t *a, const pf_record_link_t *l);
int pf_profile_codec_device_from_pb(const Planfarm__DeviceRecord *m, pf_record_device_t *d,
                                    char *err, size_t errlen);
int pf_profile_codec_link_from_pb(const Planfarm__LinkRecord *m, pf_record_link_t *l, char *err,
                                  size_t errlen);

/* ---- messages: to_pb builds in the arena (NULL when out of memory); decode unpacks and
 * validates the whole message (PF_EINPUT, nothing kept, when any field is wrong) ---- */
Planfarm__AgentRegister *pf_profile_codec_register_to_pb(pf_arena_t *a,
                                                         const pf_profile_codec_agent_info_t *info);
int pf_profile_codec_decode_register(const uint8_t *data, size_t len,
                                     pf_profile_codec_agent_info_t *out, char *err, size_t errlen);

Planfarm__Measurement *pf_profile_codec_measurement_to_pb(pf_arena_t *a,
                                                          const pf_profile_codec_measurement_t *m);
int pf_profile_codec_decode_measurement(const uint8_t *data, size_t len,
                                        pf_profile_codec_measurement_t *out, char *err,
                                        size_t errlen);

Planfarm__ProfileTask *pf_profile_codec_task_to_pb(pf_arena_t *a, const pf_profile_codec_task_t *t);
int pf_profile_codec_decode_task(const uint8_t *data, size_t len, pf_profile_codec_task_t *out,
                                 char *err, size_t errlen);

/* The sweep fields shared by ProfileTask and ProfileClusterRequest: 0 .. PF_SWEEP_MAX sizes,
 * each finite in [1, PF_PROFILE_MAX_BYTES] and distinct; reps <= PF_PROFILE_MAX_REPS; timeout
 * finite in [0, PF_PROFILE_MAX_TIMEOUT_S]. */
int pf_profile_codec_check_sweep(const double *sizes, size_t nsizes, uint32_t reps,
                                 double timeout_s, char *err, size_t errlen);

#endif
