/* setting_codec: the Setting message (the TP degree, TAP's options and plans, the training) to and
 * from planner/tp/tp_setting.h's options. Decoding validates and names the field (PF_EINPUT). */
#ifndef PF_SETTING_CODEC_H
#define PF_SETTING_CODEC_H

#include "planner/tp/tp_setting.h"
#include "proto/arena.h"
#include "proto/wire.h"

#include <stddef.h>
#include <stdint.h>

#define PF_SETTING_CODEC_MAX_TP 4096

Planfarm__Setting *pf_setting_codec_to_pb(pf_arena_t *a, const pf_tp_setting_opts_t *o);
/* No setting on the wire (m NULL): T = 1 and the default training. The TAP plans, if any, go to
 * a new *tap_plans (the caller frees it) that o->tap_plans points into. */
int pf_setting_codec_from_pb(const Planfarm__Setting *m, pf_tp_setting_opts_t *o,
                             uint64_t **tap_plans, char *err, size_t errlen);

#endif
