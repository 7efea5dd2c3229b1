/* agent_proto: profiler agents, the broker's third kind of peer, and the profiling round.
 *
 * An agent sends REGISTER (its host and GPUs), then heartbeats; the broker heartbeats back and
 * forgets an agent silent through `liveness` of its intervals, as it does workers, except while
 * the agent runs a task of a round: a probe holds the agent's only thread, and the task's own
 * deadline bounds that silence instead.
 *
 * A client's PROFILE_CLUSTER starts a round over one agent per host (the first registered):
 *   1. LOCAL: every agent measures its own devices (GPU pairs, host copies; a CPU host is one
 *      "cpu" device), in parallel: nothing is shared between hosts.
 *   2. PAIRS: for each pair of hosts in turn (one at a time, so two sweeps never share a NIC),
 *      the first host's agent binds an echo and says where (PROFILE_ECHO), the second runs the
 *      ping-pong sweep against it (PROFILE_PINGPONG) and sends the link record, and the echo is
 *      stopped (PROFILE_ECHO_STOP). One direction per pair: the assembly uses the reverse link
 *      when a direction is missing (planner/inputs/assemble.h).
 *   3. The records go into an assembly (planner/inputs/assemble.h); the cluster with its provenance
 *      goes back to the client as JSON. A pair or host that failed is named in the reply; the
 *      assembly refuses a cluster with a missing link, so nothing is invented.
 * A MEASUREMENT that does not decode or whose records fail their checks is dropped and counted
 * (the broker's malformed count and the round's dropped_records); the task it answered fails.
 *
 * Calls broker/peers.h only; called by the loop only. */
#ifndef PF_BROKER_AGENT_PROTO_H
#define PF_BROKER_AGENT_PROTO_H

#include "broker/broker_state.h"

#include <stdbool.h>

int pf_agent_proto_init(pf_broker_t *b); /* PF_OK or PF_ERR (out of memory) */
void pf_agent_proto_free(pf_broker_t *b);
/* Messages of agents (REGISTER, MEASUREMENT; HEARTBEAT and BYE once registered) and a client's
 * PROFILE_CLUSTER; false when the message is not the agents' (the caller goes on). */
bool pf_agent_proto_on_msg(pf_broker_t *b, peer_t *p, pf_wire_msg_t kind, const uint8_t *data,
                           size_t len);
/* Once per heartbeat interval: heartbeats to agents, their liveness, a round's deadlines. */
void pf_agent_proto_tick(pf_broker_t *b);
/* Registered agents. */
int pf_agent_proto_count(const pf_broker_t *b);

#endif
