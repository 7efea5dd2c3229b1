#!/usr/bin/env python3
"""Why the sweep's large GEMMs look slow: the grid of `planfarm profile --sweep` (bf16, m 256..16384,
n and k 512..16384) timed by PyTorch's matmul three ways, with the SM clock and the board power
read through NVML after each cell:

  back-to-back  the grid in the sweep's order (m slowest, k fastest), no pause: what the sweep does
  rested        the same order, the GPU idle 0.2 s before each cell (its clocks and power recover)
  sustained     the largest cells only, each run for 0.5 s before it is timed (the steady state of
                a GEMM-bound stretch under the power limit)

and the forward / backward GEMMs of GPT-3 13B (h 5120, ffn 20480) and Megatron 22B (h 6144,
ffn 24576) layers at sequence 2048, micro-batch 1, 2 and 4, tensor-parallel 1, 2 and 4 (the
shapes the Calculon rows choose between), each rested.

With --layers-soaked only the layers' GEMMs, each run 0.2 s untimed before it is timed (what
`planfarm profile --sweep` does by default since the first run of this script).

usage: bench/gpu/gemm_clocks.py [--layers-soaked] OUT.json"""
import json
import statistics
import sys
import time

import torch

from torch_layers import REPS, WARMUP, timed  # the reference harness's own timing

GM = [256, 512, 1024, 2048, 4096, 8192, 16384]
GNK = [512, 1024, 2048, 4096, 8192, 16384]
PEAK_TFLOPS = 989.4  # the H100 SXM's dense bf16 peak: the sweep's efficiency denominator

try:
    import pynvml
    pynvml.nvmlInit()
    NVML = pynvml.nvmlDeviceGetHandleByIndex(0)
except Exception:  # the record says where NVML was missing
    NVML = None


def gpu_state():
    if NVML is None:
        return {}
    return {"sm_mhz": pynvml.nvmlDeviceGetClockInfo(NVML, pynvml.NVML_CLOCK_SM),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(NVML) / 1000.0,
            "temp_c": pynvml.nvmlDeviceGetTemperature(NVML, pynvml.NVML_TEMPERATURE_GPU)}


def operands(m, n, k):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    return a, b, torch.empty(m, n, device="cuda", dtype=torch.bfloat16)


def cell(m, n, k, rest_s=0.0, soak_s=0.0):
    a, b, c = operands(m, n, k)
    torch.cuda.synchronize()
    if rest_s:
        time.sleep(rest_s)
    if soak_s:
        t0 = time.time()
        while time.time() - t0 < soak_s:
            for _ in range(8):
                torch.matmul(a, b, out=c)
            torch.cuda.synchronize()
    ms = timed(lambda: torch.matmul(a, b, out=c))
    rec = {"m": m, "n": n, "k": k, "ms": ms, "eff": 2.0 * m * n * k / (ms * 1e-3) / 1e12 / PEAK_TFLOPS}
    rec.update(gpu_state())
    return rec


def grid(rest_s):
    return [cell(m, n, k, rest_s=rest_s) for m in GM for n in GNK for k in GNK]


def layer_gemms(h, ffn):
    """Megatron's four linears of a layer, column-parallel qkv and fc1, row-parallel proj and fc2:
    (name, n, k) of the forward GEMM at tensor-parallel t; m is seq x micro-batch."""
    return lambda t: [("qkv", 3 * h // t, h), ("proj", h, h // t), ("fc1", ffn // t, h),
                      ("fc2", h, ffn // t)]


def layers(rest_s=0.05, soak_s=0.0):
    out = []
    for model, h, ffn in (("gpt3-13B", 5120, 20480), ("megatron-22B", 6144, 24576)):
        for t in (1, 2, 4):
            for mb in (1, 2, 4):
                m = 2048 * mb
                for name, n, k in layer_gemms(h, ffn)(t):
                    fwd = cell(m, n, k, rest_s, soak_s)
                    dx = cell(m, k, n, rest_s, soak_s)   # dX = dY W^T: m x k, inner n
                    dw = cell(k, n, m, rest_s, soak_s)   # dW = X^T dY: k x n, inner m
                    out.append({"model": model, "t": t, "microbatch": mb, "linear": name,
                                "m": m, "n": n, "k": k, "fwd": fwd, "dx": dx, "dw": dw})
    return out


def main():
    soaked = len(sys.argv) == 3 and sys.argv[1] == "--layers-soaked"
    if (len(sys.argv) != 2 or sys.argv[1].startswith("-")) and not soaked:
        sys.exit(__doc__)
    torch.backends.cuda.matmul.allow_tf32 = False
    rec = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "method": "torch.matmul bf16 on torch.randn operands, CUDA events, median of %d after %d "
                     "warm-ups; efficiency = 2mnk / (ms x %.1f TFLOP/s)" % (REPS, WARMUP, PEAK_TFLOPS),
           "idle": gpu_state()}
    t0 = time.time()
    if soaked:
        rec["layers_soaked"] = layers(rest_s=0.0, soak_s=0.2)
        rec["wall_s"] = time.time() - t0
        with open(sys.argv[2], "w") as f:
            json.dump(rec, f, indent=1)
        return
    rec["back_to_back"] = grid(0.0)
    rec["rested"] = grid(0.2)
    big = sorted(rec["rested"], key=lambda r: -r["m"] * r["n"] * r["k"])[:16]
    rec["sustained"] = [cell(r["m"], r["n"], r["k"], soak_s=0.5) for r in big]
    rec["layers"] = layers()
    rec["wall_s"] = time.time() - t0
    with open(sys.argv[1], "w") as f:
        json.dump(rec, f, indent=1)
    for name in ("back_to_back", "rested"):
        effs = [r["eff"] for r in rec[name]]
        print("%-13s mean eff %.4f, cells >= 2^36 flop-cube: %.4f" % (
            name, statistics.mean(effs),
            statistics.mean(r["eff"] for r in rec[name] if r["m"] * r["n"] * r["k"] >= 1 << 36)))
    for r in rec["sustained"]:
        print("sustained %5d %5d %5d eff %.4f sm %s MHz %s W" % (
            r["m"], r["n"], r["k"], r["eff"], r.get("sm_mhz"), r.get("power_w")))
    print("wall %.1f s" % rec["wall_s"])


if __name__ == "__main__":
    main()
