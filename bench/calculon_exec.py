#!/usr/bin/env python3
"""bench/calculon_exec.py: writes the configuration of a planfarm plan (planfarm plan -o PLAN) as a
Calculon execution JSON (the file Calculon's `llm` command prices; calculon/examples/*.json in
../shared/peers), so that bench/peers.sh can price planfarm's choice with Calculon's own model
[Calculon].

    python3 bench/calculon_exec.py PLAN [-o EXEC] [--datatype float16] [--gpus-per-host 8]

The fields and where they come from (docs/DESIGN.md "Plan" for the plan's keys):
  num_procs              devices
  tensor_par             tensor_parallel
  pipeline_par           stages
  data_par               replicas
  batch_size             global_batch (else microbatch_size x microbatches x replicas)
  microbatch_size        microbatch_size (the block search writes it; else 1)
  pipeline_interleaving  virtual_stages (1 without); over uneven first/last stages (the
                         embedding and the head counted as layers), which Calculon cannot split,
                         the largest v' <= v that divides the layers per stage (noted)
  activation_recompute   training.recompute: none -> none, selective -> attn_only, full -> full
  optimizer_sharding     training.zero >= 1 and replicas > 1 (Calculon's sharding divides the
                         optimizer state and the stored gradients over the data-parallel group,
                         its layers.py get_weight_grad: ZeRO-2's memory. planfarm's ZeRO 2 is
                         this; ZeRO 1 is priced with sharded gradients; ZeRO 3, which also
                         shards the weights, has no counterpart: see `notes`)
  tensor_par_comm_type   sequence_parallel true -> rs_ag (reduce-scatter + all-gather), else ar
  tensor_par_overlap     tp_comm_overlap true (Megatron-LM's --tp-comm-overlap) and t > 1 -> ring,
                         else Calculon's default none
  data_par_overlap       true when replicas > 1: planfarm's step hides the data-parallel reduction
                         behind the backward of the last micro-batch (DESIGN.md "Block-level
                         analytic model")
  *_net                  0 (Calculon's first network, NVLink inside a host) for a dimension whose
                         every group planfarm placed inside one host (stage_list devices, host =
                         device // gpus-per-host), else 1; moved to 1, outermost first (p, d),
                         while the product on network 0 does not divide gpus-per-host, which
                         Calculon requires
Knobs planfarm has no notion of, set to what Calculon's own example execution has: fused_activation
true, attention_type multihead, seq_par_ag_redo false, weight_offload,
activations_offload and optimizer_offload false, training true.

With -o the notes (what did not map exactly) go to stderr; without, the execution goes to stdout.
Uses the json module only (bench glue; no third-party package)."""
import argparse
import json
import sys

RECOMPUTE = {"none": "none", "selective": "attn_only", "full": "full"}

# what bench/peers.sh prints as "Calculon's defaults" (the knobs planfarm does not model)
FIXED = {
    "fused_activation": True,
    "attention_type": "multihead",
    "tensor_par_overlap": "none",
    "seq_par_ag_redo": False,
    "weight_offload": False,
    "activations_offload": False,
    "optimizer_offload": False,
    "training": True,
}


class PlanError(Exception):
    pass


def need(plan, key):
    if key not in plan:
        raise PlanError("plan has no '%s'" % key)
    return plan[key]


def replica_devices(entry):
    """the devices of one stage replica: an int, or a list of T ints under tensor parallelism"""
    return entry if isinstance(entry, list) else [entry]


def groups(plan):
    """(tensor, data, pipeline) groups of devices, from stage_list[i].devices[r]"""
    stages = plan.get("stage_list", [])
    tp, dp, pp = [], [], []
    for st in stages:
        reps = [replica_devices(e) for e in st.get("devices", [])]
        tp.extend(reps)
        for k in range(len(reps[0]) if reps else 0):
            dp.append([r[k] for r in reps if k < len(r)])
    nrep = min((len(st.get("devices", [])) for st in stages), default=0)
    for r in range(nrep):
        reps = [replica_devices(st["devices"][r]) for st in stages]
        for k in range(len(reps[0])):
            pp.append([x[k] for x in reps if k < len(x)])
    return tp, dp, pp


def in_one_host(group_list, per_host):
    return all(len({d // per_host for d in g}) <= 1 for g in group_list)


def networks(plan, t, p, d, per_host, notes):
    """Calculon network (0 inside a host, 1 between) of tensor, pipeline and data parallelism"""
    tp, dp, pp = groups(plan)
    if not tp:
        notes.append("no stage_list devices: every dimension above 1 on network 1")
    net = {
        "t": 0 if tp and in_one_host(tp, per_host) else 1,
        "d": 0 if dp and in_one_host(dp, per_host) else 1,
        "p": 0 if pp and in_one_host(pp, per_host) else 1,
    }
    size = {"t": t, "d": d, "p": p}
    for dim in ("p", "d", "t"):  # Calculon: the product on network 0 divides its size
        prod = 1
        for k in net:
            if net[k] == 0 and size[k] > 1:
                prod *= size[k]
        if per_host % prod == 0:
            break
        if net[dim] == 0 and size[dim] > 1:
            net[dim] = 1
            notes.append("%s moved to network 1: network 0 must be filled evenly" % dim)
    return net


def interleaving(plan, p, notes):
    """Calculon's pipeline_interleaving: the plan's virtual_stages, where Calculon can run it.
    Calculon splits the L blocks evenly, L / p per processor, in chunks of L / (p v): a plan whose
    first and last stages hold one layer fewer (the embedding and the head counted as layers,
    DESIGN.md "Block-level analytic model") has no counterpart, and is written with the largest
    v' <= v that divides L / p (noted)."""
    v = int(plan.get("virtual_stages", 1))
    bs = plan.get("block_search", {})
    if v <= 1 or p <= 1 or "layers_first" not in bs:
        return v
    first, last = int(bs["layers_first"]), int(bs["layers_last"])
    L = first + last + int(bs.get("layers_middle", 0)) * (p - 2)
    if L % p:
        raise PlanError("%d layers on %d stages: Calculon splits the layers evenly" % (L, p))
    per = L // p
    if per % v == 0 and first == per and last == per:
        return v
    w = max(x for x in range(1, min(v, per) + 1) if per % x == 0)
    notes.append("interleaving %d over uneven first/last stages (%d, %d of %d layers) written as "
                 "%d: Calculon splits %d layers per stage evenly" % (v, first, last, L, w, per))
    return w


def convert(plan, datatype="float16", per_host=8):
    """(execution dict, notes list) for a planfarm plan dict"""
    notes = []
    t = int(plan.get("tensor_parallel", 1))
    p = int(need(plan, "stages"))
    d = int(need(plan, "replicas"))
    procs = int(plan.get("devices", t * p * d))
    if procs != t * p * d:
        notes.append("plan uses %d of %d devices" % (t * p * d, procs))
        procs = t * p * d
    mbs = int(plan.get("microbatch_size", 1))
    if "global_batch" in plan:
        batch = int(plan["global_batch"])
    else:
        batch = mbs * int(need(plan, "microbatches")) * d
    train = plan.get("training", {})
    rec = train.get("recompute", "none")
    if rec not in RECOMPUTE:
        raise PlanError("recompute '%s' has no Calculon counterpart" % rec)
    zero = int(train.get("zero", 0))
    if zero == 1:
        notes.append("ZeRO 1 written as optimizer_sharding, which Calculon prices with the "
                     "gradients sharded too (ZeRO-2's memory)")
    elif zero >= 3:
        notes.append("ZeRO 3 written as optimizer_sharding (Calculon shards the optimizer and "
                     "the gradients, not the weights: ZeRO 2)")
    net = networks(plan, t, p, d, per_host, notes)
    exe = {
        "num_procs": procs,
        "tensor_par": t,
        "pipeline_par": p,
        "data_par": d,
        "tensor_par_net": net["t"] if t > 1 else 0,
        "pipeline_par_net": net["p"] if p > 1 else 0,
        "data_par_net": net["d"] if d > 1 else 0,
        "batch_size": batch,
        "microbatch_size": mbs,
        "datatype": datatype,
        "activation_recompute": RECOMPUTE[rec],
        "pipeline_interleaving": interleaving(plan, p, notes),
        "optimizer_sharding": zero >= 1 and d > 1,
        "tensor_par_comm_type": "rs_ag" if plan.get("sequence_parallel") and t > 1 else "ar",
        "data_par_overlap": d > 1,
    }
    exe.update(FIXED)
    if plan.get("tp_comm_overlap") and t > 1:  # Megatron-LM's --tp-comm-overlap
        exe["tensor_par_overlap"] = "ring"
    if int(plan.get("context_parallel", 1)) > 1 or int(plan.get("expert_parallel", 1)) > 1:
        notes.append("context or expert parallelism: Calculon has neither (replicas = d x C)")
    return exe, notes


def main(argv):
    ap = argparse.ArgumentParser(description="planfarm plan -> Calculon execution JSON")
    ap.add_argument("plan")
    ap.add_argument("-o", "--output", default="-")
    ap.add_argument("--datatype", default="float16")
    ap.add_argument("--gpus-per-host", type=int, default=8)
    args = ap.parse_args(argv)
    try:
        with open(args.plan) as f:
            plan = json.load(f)
        exe, notes = convert(plan, args.datatype, args.gpus_per_host)
    except (OSError, ValueError, PlanError) as e:
        print("calculon_exec: %s: %s" % (args.plan, e), file=sys.stderr)
        return 1
    text = json.dumps(exe, indent=2) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
    for n in notes:
        print("calculon_exec: note: %s" % n, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
