#!/usr/bin/env python3
"""One sweep from several `planfarm profile --local --sweep` runs of the same GPU: each record's
fwd_ms and bwd_ms (each HBM copy's ms) the median over the runs, the rest as the first run has
it. A single run's record can be off by 1.5-5x (a clock transition inside its timed reps: four
soaked H100 sweeps of 2026-11-26 disagreed that much on a few cells); the median of four is
moved by no single such record. `planfarm calibrate` fits the result like any sweep.

usage: bench/gpu/median_sweeps.py OUT.json SWEEP.json SWEEP.json [...]"""
import json
import statistics
import sys

FAMILIES = ("gemm", "attention", "elementwise", "layernorm", "softmax")
SHAPE = ("dtype", "m", "n", "k", "batch", "inputs", "causal")


def key(rec):
    return tuple(rec.get(f) for f in SHAPE)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    runs = [json.load(open(p)) for p in sys.argv[2:]]
    out = runs[0]
    names = {r["gpu"]["name"] for r in runs}
    if len(names) != 1:
        sys.exit("sweeps of different GPUs: %s" % sorted(names))
    for fam in FAMILIES:
        by_shape = [{key(r): r for r in run[fam]} for run in runs]
        for rec in out[fam]:
            same = [b[key(rec)] for b in by_shape if key(rec) in b]
            if len(same) != len(runs):
                sys.exit("%s %s: not in every sweep" % (fam, key(rec)))
            for t in ("fwd_ms", "bwd_ms"):
                rec[t] = statistics.median(s[t] for s in same)
    copies = [{c["bytes"]: c for c in run["hbm_copy"]} for run in runs]
    for c in out["hbm_copy"]:
        c["ms"] = statistics.median(b[c["bytes"]]["ms"] for b in copies)
        c["gbps_read_plus_write"] = 2 * c["bytes"] / (c["ms"] * 1e6)
    out["method"] += "; each record the median over %d sweeps (bench/gpu/median_sweeps.py)" % len(
        runs)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
