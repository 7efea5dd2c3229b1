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
SAME = ("format", "version", "reps", "soak_ms", "probes")  # what makes two sweeps one method


def key(rec):
    return tuple(rec.get(f) for f in SHAPE)


def check(paths, runs):
    """exit with the first difference that makes the runs not one method's on one GPU"""
    first = runs[0]
    for path, run in zip(paths[1:], runs[1:]):
        for k in SAME:
            if run.get(k) != first.get(k):
                sys.exit("%s: %s is %r where %s has %r" % (path, k, run.get(k), paths[0],
                                                            first.get(k)))
        if run["gpu"]["name"] != first["gpu"]["name"]:
            sys.exit("%s: a sweep of %s, %s of %s" % (path, run["gpu"]["name"], paths[0],
                                                       first["gpu"]["name"]))
        for fam in FAMILIES:
            if sorted(map(key, run[fam])) != sorted(map(key, first[fam])):
                sys.exit("%s: its %s records are not %s's" % (path, fam, paths[0]))
        if sorted(c["bytes"] for c in run["hbm_copy"]) != sorted(c["bytes"] for c in
                                                                 first["hbm_copy"]):
            sys.exit("%s: its hbm_copy sizes are not %s's" % (path, paths[0]))


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    runs = [json.load(open(p)) for p in sys.argv[2:]]
    check(sys.argv[2:], runs)
    out = runs[0]
    for fam in FAMILIES:
        by_shape = [{key(r): r for r in run[fam]} for run in runs]
        for rec in out[fam]:
            same = [b[key(rec)] for b in by_shape]
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
