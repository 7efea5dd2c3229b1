/* draw: pictures of plans as SVG, written directly (no plotting dependency).
 *
 * Timeline: one row per device (its compute stream above, its communication stream below),
 * forward, backward, tensor-parallel, optimizer and communication tasks in their own colours,
 * idle time left blank so the pipeline bubbles show, a time axis in ms and a legend.
 * Mapping: every host a box, every device a square coloured by the stage it runs, lines between
 * devices as wide as the bytes they exchange per step. Names are XML-escaped. */
#ifndef PF_DRAW_H
#define PF_DRAW_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/ir/plan.h"
#include "planner/sim/simulate.h"

#include <stdio.h>

/* The result must carry its events (pf_simulate_input_t.timeline = 1). `c` names the devices.
 * `title` may be NULL. PF_OK, or PF_ERR when the stream fails. */
int pf_draw_timeline_svg(const pf_simulate_result_t *r, const pf_cluster_t *c, const char *title,
                         FILE *f, char *err, size_t errlen);

/* A mapped plan on its cluster. With the graph, links are weighted by traffic per step: p2p
 * bytes 2 M(s, s') x micro-batches between the devices of one replica's consecutive stages, and
 * the ring all-reduce's 2 (R - 1) / R x P(s) / T between ring neighbours of one rank (eq. 7);
 * without it every used link is drawn at one width. A plan whose stages differ (stage s on d_s
 * replicas of t_s devices) draws each stage's own groups: replica r of s exchanges N / lcm(d_s,
 * d_s') micro-batches with each replica r' = r mod gcd(d_s, d_s') of s', rank k with rank k of
 * the larger group (map_stages.h), and its ring runs over its d_s replicas. Every device's title
 * names its stage, replica and rank. PF_EINPUT when the plan is not mapped. */
int pf_draw_mapping_svg(const pf_plan_t *p, const pf_cluster_t *c, const pf_graph_t *g,
                        FILE *f, char *err, size_t errlen);

#endif
