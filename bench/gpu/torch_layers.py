#!/usr/bin/env python3
"""Per-op and whole-layer times of a GPT layer in PyTorch on this GPU, in the form of
tests/data/h100/h100_reference.json (../shared/data/h100), so that a device model fitted from
`planfarm profile --sweep` can be checked against what a framework runs: attention through
scaled_dot_product_attention (a flash kernel), layernorm/gelu/add as PyTorch's kernels.

Also the tensor-parallel slices of each layer (hidden/T columns of qkv and fc1, rows of out_proj
and fc2, heads/T) for T in 1, 2, 4, 8: the shapes a device model must price at large T.

usage: bench/gpu/torch_layers.py OUT.json"""
import json
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F

REPS, WARMUP = 20, 5
SHAPES = [(2048, 16, 2048, 1), (4096, 32, 2048, 1), (4096, 32, 2048, 4), (8192, 64, 2048, 1),
          (12288, 96, 2048, 1), (16384, 128, 2048, 1)]
TPS = [1, 2, 4, 8]


def timed(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for r in range(WARMUP + REPS):
        start.record()
        fn()
        end.record()
        end.synchronize()
        if r >= WARMUP:
            out.append(start.elapsed_time(end))
    return statistics.median(out)


def op_times(fwd, inputs):
    """fwd(*inputs) -> y; the backward of y with a random dy, inputs requiring grad."""
    y = fwd(*inputs)
    dy = torch.randn_like(y)
    f = timed(lambda: fwd(*inputs))
    b = timed(lambda: torch.autograd.grad(fwd(*inputs), [t for t in inputs if t.requires_grad],
                                          dy)) - f
    return f, max(b, 0.0), y.numel() * y.element_size()


def layer(h, heads, s, mb, t):
    dev, dt = "cuda", torch.bfloat16
    hp, ap = h // t, heads // t

    def p(*shape):
        return torch.randn(*shape, device=dev, dtype=dt, requires_grad=True)
    x = p(s * mb, h)
    ln_w, ln_b = p(h), p(h)
    wqkv, wo, w1, w2 = p(3 * hp, h), p(h, hp), p(4 * hp, h), p(h, 4 * hp)
    q = p(mb, ap, s, h // heads)
    k, v = p(*q.shape), p(*q.shape)
    ctx = p(s * mb, hp)
    f1 = p(s * mb, 4 * hp)
    ops = [
        ("layernorm1", lambda a, w, b: F.layer_norm(a, (h,), w, b), [x, ln_w, ln_b]),
        ("qkv", lambda a, w: F.linear(a, w), [x, wqkv]),
        ("attention_core", lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
         [q, k, v]),
        ("out_proj", lambda a, w: F.linear(a, w), [ctx, wo]),
        ("residual_add", lambda a, b: a + b, [x, p(s * mb, h)]),
        ("layernorm2", lambda a, w, b: F.layer_norm(a, (h,), w, b), [x, ln_w, ln_b]),
        ("fc1", lambda a, w: F.linear(a, w), [x, w1]),
        ("gelu", lambda a: F.gelu(a), [f1]),
        ("fc2", lambda a, w: F.linear(a, w), [f1, w2]),
    ]
    rec = []
    for name, fn, ins in ops:
        f, b, nbytes = op_times(fn, ins)
        rec.append({"op": name, "fwd_ms": f, "bwd_ms": b, "out_bytes": nbytes})
    return rec


def gemm_square():
    out = []
    for n in (1024, 2048, 4096, 8192, 16384):
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        ms = timed(lambda: a @ b)
        out.append({"m": n, "n": n, "k": n, "ms": ms, "tflops": 2 * n ** 3 / ms / 1e9})
    return out


def hbm():
    nbytes = 1 << 30
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    ms = timed(lambda: b.copy_(a))
    return {"bytes": nbytes, "ms": ms, "gbps_read_plus_write": 2 * nbytes / ms / 1e6}


def main():
    torch.manual_seed(0)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,"
                          "clocks.max.mem,power.limit", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    prop = torch.cuda.get_device_properties(0)
    res = {"device": prop.name, "torch": torch.__version__, "cuda": torch.version.cuda,
           "sm_count": prop.multi_processor_count, "nvidia_smi": smi,
           "method": "median of CUDA-event timings after warm-up; bf16; bwd = (fwd + grad) - fwd;"
                     " attention_core is scaled_dot_product_attention(is_causal=True)",
           "gemm_bf16_square": gemm_square(), "hbm_copy": hbm(), "gpt_layers": []}
    for h, heads, s, mb in SHAPES:
        for t in TPS:
            if heads % t:
                continue
            res["gpt_layers"].append({"hidden": h, "heads": heads, "seq": s, "microbatch": mb,
                                      "tp": t, "ops": layer(h, heads, s, mb, t)})
            print(f"hidden {h} mb {mb} tp {t} done", file=sys.stderr, flush=True)
            torch.cuda.empty_cache()
    with open(sys.argv[1], "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
