#!/usr/bin/python3
"""Tests of tools/torch2planfarm.py: a small GPT and a Llama-style block written here, and
torchvision's resnet18 (weights=None: nothing is downloaded). Each graph is checked number by
number against hand-worked costs and then given to `planfarm check` and `planfarm plan` on one
DGX-1. Run with the Python that has torch (Debian: /usr/bin/python3 with python3-torch and
python3-torchvision):

    /usr/bin/python3 tests/tools/test_torch2planfarm.py

PF_BIN names the planfarm binary (default ./planfarm at the repository root). Skips, with exit
status 0, when torch is not importable. Ends with "N passed, N failed"; exit status 1 on a failure.
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "torch2planfarm.py")
sys.path.insert(0, os.path.join(ROOT, "tools"))

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    torch = None

if torch is not None:
    import torch2planfarm as t2p

    class GPTBlock(nn.Module):
        def __init__(self, h, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(h)
            self.qkv = nn.Linear(h, 3 * h)
            self.proj = nn.Linear(h, h)
            self.ln2 = nn.LayerNorm(h)
            self.fc1 = nn.Linear(h, 4 * h)
            self.act = nn.GELU()
            self.fc2 = nn.Linear(4 * h, h)

        def forward(self, x):
            b, s, h = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
            q = q.view(b, s, self.heads, h // self.heads).transpose(1, 2)
            k = k.view(b, s, self.heads, h // self.heads).transpose(1, 2)
            v = v.view(b, s, self.heads, h // self.heads).transpose(1, 2)
            att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(h // self.heads)
            mask = torch.ones(s, s, device=x.device).tril()
            att = att.masked_fill(mask == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = torch.matmul(att, v).transpose(1, 2).reshape(b, s, h)
            x = x + self.proj(y)
            return x + self.fc2(self.act(self.fc1(self.ln2(x))))

    class TinyGPT(nn.Module):
        def __init__(self, vocab=100, h=32, heads=4, layers=2, seq=16):
            super().__init__()
            self.wte = nn.Embedding(vocab, h)
            self.wpe = nn.Embedding(seq, h)
            self.blocks = nn.ModuleList([GPTBlock(h, heads) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(h)
            self.head = nn.Linear(h, vocab, bias=False)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln_f(x))

    class RMSNorm(nn.Module):
        def __init__(self, h, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(h))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def rotate(x, cos, sin):
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    class LlamaBlock(nn.Module):
        """Pre-norm block: RMSNorm, grouped-query attention with rotary positions, SwiGLU."""

        def __init__(self, h=64, heads=8, kv_heads=2, ffn=128, seq=16):
            super().__init__()
            self.heads, self.kv_heads, self.hd = heads, kv_heads, h // heads
            self.attn_norm = RMSNorm(h)
            self.wq = nn.Linear(h, h, bias=False)
            self.wk = nn.Linear(h, kv_heads * self.hd, bias=False)
            self.wv = nn.Linear(h, kv_heads * self.hd, bias=False)
            self.wo = nn.Linear(h, h, bias=False)
            self.ffn_norm = RMSNorm(h)
            self.w1 = nn.Linear(h, ffn, bias=False)
            self.w3 = nn.Linear(h, ffn, bias=False)
            self.w2 = nn.Linear(ffn, h, bias=False)
            inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
            ang = torch.outer(torch.arange(seq).float(), inv)
            self.register_buffer("cos", torch.cat((ang, ang), -1).cos())
            self.register_buffer("sin", torch.cat((ang, ang), -1).sin())

        def forward(self, x):
            b, s, h = x.shape
            y = self.attn_norm(x)
            q = self.wq(y).view(b, s, self.heads, self.hd).transpose(1, 2)
            k = self.wk(y).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
            v = self.wv(y).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
            q, k = rotate(q, self.cos, self.sin), rotate(k, self.cos, self.sin)
            rep = self.heads // self.kv_heads
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
            att = F.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.hd), dim=-1)
            o = torch.matmul(att, v).transpose(1, 2).reshape(b, s, h)
            x = x + self.wo(o)
            z = self.ffn_norm(x)
            return x + self.w2(F.silu(self.w1(z)) * self.w3(z))

    class TinyLlama(nn.Module):
        def __init__(self, vocab=128, h=64, layers=2, seq=16, heads=8, kv_heads=2, ffn=128):
            super().__init__()
            self.embed = nn.Embedding(vocab, h)
            self.layers = nn.ModuleList([LlamaBlock(h, heads, kv_heads, ffn, seq)
                                         for _ in range(layers)])
            self.norm = RMSNorm(h)
            self.lm_head = nn.Linear(h, vocab, bias=False)

        def forward(self, idx):
            x = self.embed(idx)
            for layer in self.layers:
                x = layer(x)
            return self.lm_head(self.norm(x))

    def tiny_gpt():
        """Factory for the command-line test: (model, example inputs)."""
        return TinyGPT(), (torch.zeros(2, 16, dtype=torch.long),)

    # ---- nanoGPT-style (Karpathy's model.py layout: fused c_attn, a causal-mask buffer,
    # a LayerNorm class of its own, `@`, tied wte / lm_head) ----

    class LayerNorm(nn.Module):
        def __init__(self, ndim, bias=True):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))
            self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

        def forward(self, x):
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self, n_embd, n_head, block_size):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.attn_dropout = nn.Dropout(0.0)
            self.resid_dropout = nn.Dropout(0.0)
            self.n_head, self.n_embd = n_head, n_embd
            self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                                 .view(1, 1, block_size, block_size))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = self.attn_dropout(F.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class NanoMLP(nn.Module):
        def __init__(self, n_embd):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd)
            self.dropout = nn.Dropout(0.0)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class NanoBlock(nn.Module):
        def __init__(self, n_embd, n_head, block_size):
            super().__init__()
            self.ln_1 = LayerNorm(n_embd)
            self.attn = CausalSelfAttention(n_embd, n_head, block_size)
            self.ln_2 = LayerNorm(n_embd)
            self.mlp = NanoMLP(n_embd)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class NanoGPT(nn.Module):
        def __init__(self, vocab_size=1000, block_size=32, n_layer=2, n_head=4, n_embd=64):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab_size, n_embd),
                wpe=nn.Embedding(block_size, n_embd),
                drop=nn.Dropout(0.0),
                h=nn.ModuleList([NanoBlock(n_embd, n_head, block_size)
                                 for _ in range(n_layer)]),
                ln_f=LayerNorm(n_embd)))
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying

        def forward(self, idx):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            return self.lm_head(self.transformer.ln_f(x))

    def nanogpt():
        return NanoGPT(), (torch.zeros(2, 32, dtype=torch.long),)

    def gpt2_small():
        """GPT-2 small's shape (124M parameters) at sequence 1024, nanoGPT-style."""
        return NanoGPT(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)

    def llama_stack():
        """A Llama-style stack the size of a 1B model: 8 blocks of hidden 2048, 16 heads,
        4 key/value heads, SwiGLU 5632, sequence 2048, vocabulary 32000 (about 0.5B
        parameters: 2 GB in fp32)."""
        return TinyLlama(vocab=32000, h=2048, layers=8, seq=2048, heads=16, kv_heads=4,
                         ffn=5632)

    # ---- a mixture of experts routing by token (data-dependent: x[rows]) ----

    class MoE(nn.Module):
        def __init__(self, vocab=64, h=32, ffn=64, experts=4, top_k=2):
            super().__init__()
            self.top_k = top_k
            self.embed = nn.Embedding(vocab, h)
            self.router = nn.Linear(h, experts, bias=False)
            self.experts = nn.ModuleList([nn.Sequential(nn.Linear(h, ffn), nn.ReLU(),
                                                        nn.Linear(ffn, h))
                                          for _ in range(experts)])

        def forward(self, idx):
            x = self.embed(idx).view(-1, self.embed.embedding_dim)
            weights, chosen = torch.topk(F.softmax(self.router(x), dim=-1), self.top_k, dim=-1)
            out = torch.zeros_like(x)
            for e, expert in enumerate(self.experts):
                rows, slot = torch.where(chosen == e)
                out = out.index_add(0, rows, weights[rows, slot].unsqueeze(-1) * expert(x[rows]))
            return out

    def moe():
        torch.manual_seed(0)
        return MoE()

    class SelfAttention(nn.Module):
        """nn.MultiheadAttention on one input (query = key = value), its output unpacked."""

        def __init__(self, h=64, heads=4):
            super().__init__()
            self.mha = nn.MultiheadAttention(h, heads, batch_first=True)
            self.fc = nn.Linear(h, h)

        def forward(self, x):
            a, _ = self.mha(x, x, x)
            return self.fc(a)

    def broken():
        raise RuntimeError("no checkpoint at /nonexistent/ckpt.pt")

# Cost model defaults of the tool (a V100): 125 TFLOP/s x 0.5 efficiency, 900 GB/s, fp16.
PEAK = 125e12 * 0.5
HBM = 900e9


def planfarm_bin():
    return os.environ.get("PF_BIN", os.path.join(ROOT, "planfarm"))


def run(*args):
    return subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def by_name(self, g):
        return {op["name"]: op for op in g["ops"]}

    def assert_plans(self, path):
        """`planfarm check` accepts the graph and `planfarm plan` plans it on one DGX-1."""
        pf = planfarm_bin()
        self.assertTrue(os.access(pf, os.X_OK), "%s: not built (make -j2)" % pf)
        r = run(pf, "check", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("graph ", r.stdout + r.stderr)
        cluster = os.path.join(self.dir, "c.json")
        r = run(pf, "cluster", "dgx1", "--machines", "1", "-o", cluster)
        self.assertEqual(r.returncode, 0, r.stderr)
        plan = os.path.join(self.dir, "plan.json")
        r = run(pf, "plan", path, cluster, "--probe-seconds", "0.2", "-o", plan)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(plan) as f:
            p = json.load(f)
        with open(path) as f:
            n_ops = len(json.load(f)["ops"])
        placed = sorted(v for s in p["stage_list"] for v in s["ops"])
        self.assertEqual(placed, list(range(n_ops)))  # every op in exactly one stage
        return p


class TestGPT(Base):
    def setUp(self):
        super().setUp()
        torch.manual_seed(0)
        self.model = TinyGPT()
        self.path = os.path.join(self.dir, "gpt.json")
        self.g = t2p.export(self.model, torch.zeros(2, 16, dtype=torch.long), self.path,
                            name="tiny-gpt")

    def test_names_and_types(self):
        ops = self.by_name(self.g)
        expect = {"wte": "embedding", "wpe": "embedding", "add": "add",
                  "blocks.0.ln1": "layernorm", "blocks.0.qkv.q": "linear",
                  "blocks.0.qkv.k": "linear", "blocks.0.qkv.v": "linear",
                  "blocks.0.matmul": "matmul", "blocks.0.softmax": "softmax",
                  "blocks.0.matmul_1": "matmul", "blocks.0.proj": "linear",
                  "blocks.0.add": "add", "blocks.0.act": "gelu", "blocks.1.fc2": "linear",
                  "ln_f": "layernorm", "head": "linear"}
        for name, kind in expect.items():
            self.assertIn(name, ops)
            self.assertEqual(ops[name]["type"], kind, name)
        # The two blocks give the same names up to the index: what TAP's PRUNEGRAPH keys on.
        b0 = [n[len("blocks.0."):] for n in ops if n.startswith("blocks.0.")]
        b1 = [n[len("blocks.1."):] for n in ops if n.startswith("blocks.1.")]
        self.assertEqual(b0, b1)
        # Folded: views, split, the causal mask (a constant) and arange; no such op exists.
        for op in self.g["ops"]:
            self.assertNotIn(op["type"], ("view", "transpose", "split", "tril", "arange",
                                          "ones", "getitem", "reshape"), op["name"])

    def test_linear_numbers(self):
        op = self.by_name(self.g)["blocks.0.fc1"]
        # x [2, 16, 32] -> [2, 16, 128]: 2 x 32 rows x 32 x 128 = 262144 FLOPs,
        # / 62.5e12 FLOP/s = 4.194304e-9 s = 4.194304e-6 ms; backward twice that.
        self.assertAlmostEqual(op["fwd_ms"], 262144 / PEAK * 1e3, places=15)
        self.assertAlmostEqual(op["bwd_ms"], 2 * op["fwd_ms"], places=15)
        # 32 x 128 weights + 128 biases = 4224 parameters x 2 bytes.
        self.assertEqual(op["param_bytes"], 8448)
        self.assertEqual(op["weight"], [32, 128])
        self.assertEqual(op["input"], [2, 16, 32])
        self.assertEqual(op["output"], [2, 16, 128])
        # mem_fwd: output 4096 x 2 + kept input 1024 x 2 = 10240; mem_bwd: 8192 + 2048.
        self.assertEqual(op["mem_fwd_bytes"], 10240)
        self.assertEqual(op["mem_bwd_bytes"], 10240)

    def test_memory_bound_and_edges(self):
        ops = self.by_name(self.g)
        sm = ops["blocks.0.softmax"]
        # scores [2, 4, 16, 16] = 2048 elements: reads the masked scores (4096 B), writes 4096 B;
        # 8192 B / 900 GB/s = 9.1022e-9 s, above 5 x 2048 FLOPs / 62.5e12 = 1.6e-10 s.
        self.assertAlmostEqual(sm["fwd_ms"], 8192 / HBM * 1e3, places=15)
        self.assertEqual(sm["param_bytes"], 0)
        mf = ops["blocks.0.masked_fill"]
        self.assertEqual(mf["type"], "masked_fill")
        # The mask is a constant: masked_fill reads only the scores, 2048 x 2 bytes, from its
        # producer (the score matmul divided by sqrt(d): the div op).
        ids = {op["id"]: op["name"] for op in self.g["ops"]}
        into_mf = [(ids[e["src"]], e["bytes"]) for e in self.g["edges"]
                   if e["dst"] == mf["id"]]
        self.assertEqual(into_mf, [("blocks.0.truediv", 4096)])
        # qkv is split three ways (q, k, v = qkv(x).split(h, dim=2)): written as three linear
        # ops of 32 -> 32 (as `planfarm model` writes q, k, v), each reaching its matmul with
        # the 2 x 16 x 32 x 2 = 2048 bytes of its third. The fused 32 x 96 weight and 96 biases
        # (3168 parameters, 6336 bytes) are shared out: 2112 bytes each.
        out = sorted((ids[e["src"]], ids[e["dst"]], e["bytes"]) for e in self.g["edges"]
                     if ids[e["src"]].startswith("blocks.0.qkv."))
        self.assertEqual(out, [("blocks.0.qkv.k", "blocks.0.matmul", 2048),
                               ("blocks.0.qkv.q", "blocks.0.matmul", 2048),
                               ("blocks.0.qkv.v", "blocks.0.matmul_1", 2048)])
        for part in "qkv":
            op = ops["blocks.0.qkv." + part]
            self.assertEqual((op["weight"], op["param_bytes"], op["fwd_flops"]), ([32, 32], 2112,
                                                                              2 * 32 * 32 * 32))
        # Only q keeps the input (2048 B) and has its gradient, as the fused op would once.
        self.assertEqual([ops["blocks.0.qkv." + p]["mem_fwd_bytes"] for p in "qkv"],
                         [4096, 2048, 2048])
        # Embedding: 2 x 16 tokens x 32 x 2 B = 2048 B out, + 2 x 16 int64 ids = 256 B read,
        # one row read per token (2048 B): (2 x 2048 + 256) / 900e9 s.
        wte = ops["wte"]
        self.assertAlmostEqual(wte["fwd_ms"], (2 * 2048 + 256) / HBM * 1e3, places=15)
        self.assertEqual(wte["param_bytes"], 100 * 32 * 2)

    def test_totals(self):
        params = sum(p.numel() for p in self.model.parameters())
        self.assertEqual(sum(op["param_bytes"] for op in self.g["ops"]), 2 * params)
        self.assertEqual(self.g["microbatch"], 2)
        self.assertEqual(self.g["name"], "tiny-gpt")
        ids = [op["id"] for op in self.g["ops"]]
        self.assertEqual(ids, list(range(len(ids))))
        for e in self.g["edges"]:
            self.assertLess(e["src"], e["dst"])  # ops are written in a topological order

    def test_plans(self):
        self.assert_plans(self.path)

    def test_cli(self):
        out = os.path.join(self.dir, "cli.json")
        r = run(sys.executable, TOOL, os.path.abspath(__file__) + ":tiny_gpt", "--dtype", "fp32",
                "--tflops", "10", "--efficiency", "1", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("wrote TinyGPT", r.stderr)
        with open(out) as f:
            g = json.load(f)
        fc1 = self.by_name(g)["blocks.0.fc1"]
        # fp32, 10 TFLOP/s at efficiency 1: 262144 / 1e13 s; params 4224 x 4 bytes.
        self.assertAlmostEqual(fc1["fwd_ms"], 262144 / 1e13 * 1e3, places=15)
        self.assertEqual(fc1["param_bytes"], 4224 * 4)
        # --measure on a machine without CUDA says so and keeps the analytic times.
        if not torch.cuda.is_available():
            r = run(sys.executable, TOOL, os.path.abspath(__file__) + ":tiny_gpt",
                    "--measure", "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("CUDA is not available", r.stderr)

    def test_cli_errors(self):
        for args, msg in (([], "MODULE:FACTORY"),
                          (["nope.py:f"], "no such file"),
                          ([os.path.abspath(__file__) + ":missing"], "has no attribute"),
                          ([os.path.abspath(__file__) + ":tiny_gpt", "--input-shape", "2,x"],
                           "--input-shape"),
                          ([os.path.abspath(__file__) + ":tiny_gpt", "--tflops", "-1"],
                           "--tflops")):
            r = run(sys.executable, TOOL, *(args or ["torchvision.models"]))
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(msg, r.stderr)


class TestWork(Base):
    """Graph file version 2's work keys (DESIGN.md "Files"), from the traced shapes."""

    def setUp(self):
        super().setUp()
        torch.manual_seed(0)
        self.g = t2p.export(TinyGPT(), torch.zeros(2, 16, dtype=torch.long))

    def test_gemm_ops(self):
        ops = self.by_name(self.g)
        self.assertEqual(self.g["version"], 2)
        want = {
            # fc1: x [2, 16, 32] @ [32, 128]: 32 token rows; reads x (2048 B) and its weights
            # and biases (8448 B), writes [2, 16, 128] (8192 B)
            "blocks.0.fc1": ({"m": 32, "n": 128, "k": 32, "batch": 1}, 262144, 10496, 8192),
            # q of the split qkv: 32 -> 32, its third of the weights (2112 B)
            "blocks.0.qkv.q": ({"m": 32, "n": 32, "k": 32, "batch": 1}, 65536, 4160, 2048),
            # scores q @ k^T per (sample, head), 2 x 4 = 8 of (16 x 8) @ (8 x 16)
            "blocks.0.matmul": ({"m": 16, "n": 16, "k": 8, "batch": 8}, 32768, 4096, 4096),
            # context probs @ v: 8 of (16 x 16) @ (16 x 8); reads probs 4096 B + v 2048 B
            "blocks.0.matmul_1": ({"m": 16, "n": 8, "k": 16, "batch": 8}, 32768, 6144, 2048),
        }
        for name, (gemm, flops, read, written) in want.items():
            op = ops[name]
            self.assertEqual(op["gemm"], gemm, name)
            self.assertEqual((op["fwd_flops"], op["bwd_flops"]), (flops, 2 * flops), name)
            self.assertEqual((op["bytes_read"], op["bytes_written"]), (read, written), name)

    def test_other_ops(self):
        ops = self.by_name(self.g)
        sm = ops["blocks.0.softmax"]  # 5 FLOPs per element, backward one pass
        self.assertEqual((sm["fwd_flops"], sm["bwd_flops"]), (10240, 10240))
        self.assertEqual((sm["bytes_read"], sm["bytes_written"]), (4096, 4096))
        self.assertNotIn("gemm", sm)
        ln = ops["blocks.0.ln1"]  # 8 per element, backward 2x; reads x and scale, shift
        self.assertEqual((ln["fwd_flops"], ln["bwd_flops"]), (8192, 16384))
        self.assertEqual((ln["bytes_read"], ln["bytes_written"]), (2048 + 128, 2048))
        # the embedding reads its 2 x 16 int64 ids and one 64-byte row per token
        wte = ops["wte"]
        self.assertEqual((wte["bytes_read"], wte["bytes_written"]), (256 + 2048, 2048))
        self.assertNotIn("gemm", wte)
        for op in self.g["ops"]:
            self.assertGreater(op["bytes_written"], 0, op["name"])
            if "gemm" in op:
                d = op["gemm"]
                self.assertEqual(2 * d["m"] * d["n"] * d["k"] * d["batch"], op["fwd_flops"],
                                 op["name"])
            self.assertIn(op.get("bwd_flops", 0), (op.get("fwd_flops", 0),
                                                   2 * op.get("fwd_flops", 0)), op["name"])

    def test_conv_and_mha(self):
        import torchvision
        g = t2p.export(torchvision.models.resnet18(weights=None), torch.randn(2, 3, 64, 64))
        ops = self.by_name(g)
        # conv1 7x7/2, 3 -> 64 on 64 x 64: im2col rows 2 x 32 x 32, k = 3 x 49
        self.assertEqual(ops["conv1"]["gemm"], {"m": 2048, "n": 64, "k": 147, "batch": 1})
        self.assertEqual(ops["conv1"]["fwd_flops"], 38535168)
        # reads the image (2 x 3 x 64 x 64 x 2 B) and 64 x 3 x 49 weights, writes 131072 x 2 B
        self.assertEqual(ops["conv1"]["bytes_read"], 49152 + 18816)
        self.assertEqual(ops["fc"]["gemm"], {"m": 2, "n": 1000, "k": 512, "batch": 1})
        # nn.MultiheadAttention is one fused op: its FLOPs, no single GEMM shape
        mha = self.by_name(t2p.export(SelfAttention(), torch.randn(2, 32, 64)))["mha"]
        self.assertEqual((mha["fwd_flops"], mha["bwd_flops"]), (2621440, 2 * 2621440))
        self.assertNotIn("gemm", mha)


class TestResNet18(Base):
    def test_resnet18(self):
        import torchvision
        model = torchvision.models.resnet18(weights=None)
        path = os.path.join(self.dir, "r18.json")
        g = t2p.export(model, torch.randn(2, 3, 64, 64), path)
        # torchvision's resnet18: 11,689,512 parameters, counted in fp16.
        self.assertEqual(sum(op["param_bytes"] for op in g["ops"]), 2 * 11689512)
        ops = self.by_name(g)
        conv1 = ops["conv1"]
        # 7x7/2 conv, 3 -> 64 channels on 64x64: out [2, 64, 32, 32] = 131072 elements,
        # 2 x 131072 x 3 x 49 = 38535168 FLOPs / 62.5e12 = 6.1656e-7 s.
        self.assertAlmostEqual(conv1["fwd_ms"], 38535168 / PEAK * 1e3, places=15)
        self.assertEqual(conv1["weight"], [64, 3, 7, 7])
        # A module called twice (each block's relu) gets a second name.
        self.assertIn("layer1.0.relu_1", ops)
        self.assertEqual(ops["layer1.0.add"]["type"], "add")
        self.assertEqual(ops["fc"]["weight"], [512, 1000])
        # 20 convs + 20 batchnorms (with the 3 downsample pairs), 17 relus, 8 adds, maxpool,
        # avgpool, fc: flatten is a view. 20 + 20 + 17 + 8 + 3 = 68.
        self.assertEqual(len(g["ops"]), 68)
        self.assert_plans(path)


class TestLlama(Base):
    def setUp(self):
        super().setUp()
        torch.manual_seed(0)
        self.model = TinyLlama()
        self.path = os.path.join(self.dir, "llama.json")
        self.g = t2p.export(self.model, torch.zeros(2, 16, dtype=torch.long), self.path)

    def test_structure(self):
        ops = self.by_name(self.g)
        # RMSNorm is one op (a *Norm class is a leaf) of type layernorm with a [1, h] weight.
        norm = ops["layers.0.attn_norm"]
        self.assertEqual(norm["type"], "layernorm")
        self.assertEqual(norm["module_class"], "RMSNorm")
        self.assertEqual(norm["weight"], [1, 64])
        self.assertEqual(norm["param_bytes"], 128)
        # GQA: k and v project 64 -> 2 kv heads x 8 = 16.
        self.assertEqual(ops["layers.0.wk"]["weight"], [64, 16])
        self.assertEqual(ops["layers.0.wk"]["output"], [2, 16, 16])
        # SwiGLU: silu(w1 z) * w3 z, then w2.
        self.assertEqual(ops["layers.0.silu"]["type"], "silu")
        ids = {op["id"]: op["name"] for op in self.g["ops"]}
        into_w2 = [ids[e["src"]] for e in self.g["edges"] if e["dst"] == ops["layers.0.w2"]["id"]]
        self.assertEqual(into_w2, ["layers.0.mul_4"])
        mul = ops["layers.0.mul_4"]
        srcs = sorted(ids[e["src"]] for e in self.g["edges"] if e["dst"] == mul["id"])
        self.assertEqual(srcs, ["layers.0.silu", "layers.0.w3"])
        # Rotary: the cos/sin tables are buffers (constants), so x * cos reads only x; the
        # rotated half is a cat of a neg and a slice of the same projection.
        self.assertEqual(ops["layers.0.cat"]["type"], "concat")
        self.assertEqual(ops["layers.0.neg"]["type"], "neg")
        # The wq output [2, 16, 64] (4096 B in fp16) reaches the rotary's first mul whole, and
        # the cat through its two halves: 2048 (neg of x2) from neg, 2048 (x1) from wq.
        wq = ops["layers.0.wq"]["id"]
        out = sorted((ids[e["dst"]], e["bytes"]) for e in self.g["edges"] if e["src"] == wq)
        self.assertEqual(out, [("layers.0.cat", 2048), ("layers.0.mul", 4096),
                               ("layers.0.neg", 2048)])
        # All parameters once, in fp16.
        params = sum(p.numel() for p in self.model.parameters())
        self.assertEqual(sum(op["param_bytes"] for op in self.g["ops"]), 2 * params)
        b0 = [n[len("layers.0."):] for n in ops if n.startswith("layers.0.")]
        b1 = [n[len("layers.1."):] for n in ops if n.startswith("layers.1.")]
        self.assertEqual(b0, b1)

    def test_swiglu_numbers(self):
        ops = self.by_name(self.g)
        w1 = ops["layers.0.w1"]
        # 2 x 32 rows x 64 x 128 = 524288 FLOPs; no bias: 8192 parameters x 2 B.
        self.assertAlmostEqual(w1["fwd_ms"], 524288 / PEAK * 1e3, places=15)
        self.assertEqual(w1["param_bytes"], 16384)
        silu = ops["layers.0.silu"]
        # [2, 16, 128] = 4096 elements: 8192 B in + 8192 B out over 900 GB/s; it keeps its input:
        # mem_fwd = 8192 + 8192.
        self.assertAlmostEqual(silu["fwd_ms"], 16384 / HBM * 1e3, places=15)
        self.assertEqual(silu["mem_fwd_bytes"], 16384)

    def test_plans(self):
        self.assert_plans(self.path)


def dgx_h100x2(tmpdir):
    """build/examples/dgx-h100x2.json's cluster: two DGX-H100 (8 GPUs each)."""
    path = os.path.join(tmpdir, "dgx-h100x2.json")
    r = run(planfarm_bin(), "cluster", "dgx-h100", "--machines", "2", "-o", path)
    assert r.returncode == 0, r.stderr
    return path


def plan_tp2(test, graph_path):
    """`planfarm plan GRAPH dgx-h100x2 --tp 2`: exit 0 with T = 2; the per-weight splits."""
    plan = os.path.join(test.dir, "plan-tp2.json")
    r = run(planfarm_bin(), "plan", graph_path, dgx_h100x2(test.dir), "--tp", "2", "-o", plan)
    test.assertEqual(r.returncode, 0, r.stderr)
    with open(plan) as f:
        p = json.load(f)
    test.assertEqual(p["tensor_parallel"], 2)
    weights = {}
    for s in p["stage_list"]:
        weights.update(s["tensor_parallel"]["weights"])
    return weights


class TestTensorParallel(Base):
    """Traced transformers plan with tensor parallelism. The exporter writes
    a fused QKV projection as q, k, v linear ops and attention's head-laid tensors in the
    [b, s, h] shape `planfarm model` gives them (scores [b, a, s, s]), which TAP splits."""

    def test_tiny_gpt_cli(self):
        # The reproduction: tiny_gpt from the command line, planned with --tp 2.
        out = os.path.join(self.dir, "t.json")
        r = run(sys.executable, TOOL, os.path.abspath(__file__) + ":tiny_gpt", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        plan_tp2(self, out)
        with open(out) as f:
            ops = self.by_name(json.load(f))
        # What TAP reads: q, k, v [b, s, h] -> scores [b, a, s, s] -> context [b, s, h].
        self.assertEqual(ops["blocks.0.qkv.q"]["output"], [2, 16, 32])
        self.assertEqual(ops["blocks.0.matmul"]["output"], [2, 4, 16, 16])
        self.assertEqual(ops["blocks.0.softmax"]["output"], [2, 4, 16, 16])
        self.assertEqual(ops["blocks.0.matmul_1"]["output"], [2, 16, 32])

    def test_nanogpt(self):
        path = os.path.join(self.dir, "nano.json")
        model, inputs = nanogpt()
        g = t2p.export(model, inputs, path)
        ops = self.by_name(g)
        self.assertEqual(ops["transformer.h.0.attn.c_attn.k"]["weight"], [64, 64])
        plan_tp2(self, path)

    def test_llama(self):
        path = os.path.join(self.dir, "llama.json")
        g = t2p.export(TinyLlama(), torch.zeros(2, 16, dtype=torch.long), path)
        ops = self.by_name(g)
        # The rotary products stay in q's [b, s, h] shape; k and v repeated to 8 heads too.
        self.assertEqual(ops["layers.0.add"]["output"], [2, 16, 64])
        self.assertEqual(ops["layers.0.repeat_interleave"]["output"], [2, 16, 64])
        self.assertEqual(ops["layers.0.matmul"]["output"], [2, 8, 16, 16])
        self.assertEqual(ops["layers.0.matmul_1"]["output"], [2, 16, 64])
        plan_tp2(self, path)


def traced_in_child(factory, shape, out):
    """Runs the command line on factory in a child Python; (exit status, stderr, wall seconds,
    the child's peak resident bytes from getrusage)."""
    code = ("import resource, sys, time\n"
            "sys.path.insert(0, %r)\n"
            "import torch2planfarm\n"
            "t = time.time()\n"
            "rc = torch2planfarm.main(%r)\n"
            "print('PEAK %%d %%f' %% (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,"
            " time.time() - t), file=sys.stderr)\n"
            "sys.exit(rc)\n" % (os.path.join(ROOT, "tools"),
                                [os.path.abspath(__file__) + ":" + factory, "--input-shape",
                                 shape, "--input-dtype", "int64", "--dtype", "bf16",
                                 "--tflops", "989", "--hbm-gbps", "3350", "-o", out]))
    t = time.time()
    r = run(sys.executable, "-c", code)
    wall = time.time() - t
    peak = [int(line.split()[1]) for line in r.stderr.splitlines() if line.startswith("PEAK ")]
    return r.returncode, r.stderr, wall, peak[0] if peak else None


class TestLargeModels(Base):
    """A GPT-2-small-sized model (12 layers, 768 hidden, seq 1024, vocab
    50257) and a Llama-style stack trace in under 60 s and 2 GB (shapes only, no arithmetic),
    and plan with T = 2 splitting attention."""

    def check(self, factory, shape, params, split):
        out = os.path.join(self.dir, factory + ".json")
        rc, err, wall, peak = traced_in_child(factory, shape, out)
        self.assertEqual(rc, 0, err)
        sys.stderr.write("  %s: %.1f s wall (with Python's start), %.0f MB peak resident\n"
                         % (factory, wall, peak / 2**20))
        self.assertLess(wall, 60)
        self.assertLess(peak, 2 * 2**30)
        with open(out) as f:
            g = json.load(f)
        self.assertEqual(g["exporter"]["traced"], "fake")
        self.assertEqual(sum(op["param_bytes"] for op in g["ops"]), 2 * params)  # bf16
        weights = plan_tp2(self, out)
        for name in split:  # attention and the MLP split, not replicated
            self.assertNotEqual(weights[name], "replicated", name)
        return g

    def test_gpt2_small(self):
        # GPT-2 small: 124,439,808 parameters with the tied head counted once.
        g = self.check("gpt2_small", "1,1024", 124439808,
                       ["transformer.h.0.attn.c_attn.q", "transformer.h.0.attn.c_attn.k",
                        "transformer.h.0.attn.c_attn.v", "transformer.h.0.mlp.c_fc",
                        "transformer.h.0.mlp.c_proj"])
        ops = self.by_name(g)
        # Scores: 2 x (1 x 12 heads x 1024 x 1024) x 64 = 1,610,612,736 FLOPs.
        self.assertEqual(ops["transformer.h.0.attn.matmul"]["fwd_flops"], 1610612736)
        self.assertEqual(ops["transformer.h.0.attn.matmul"]["output"], [1, 12, 1024, 1024])

    def test_llama_stack(self):
        # 32000 x 2048 x 2 (embedding, head) + 8 x (2048 x (2048 + 512 + 512 + 2048)
        # + 3 x 2048 x 5632 + 2 x 2048) + 2048 = 131,072,000 + 8 x 45,092,864 + 2048.
        self.check("llama_stack", "1,2048", 131072000 + 8 * 45092864 + 2048,
                   ["layers.0.wq", "layers.0.wk", "layers.0.wv", "layers.0.wo"])


class TestPricing(Base):
    """Patterns the exporter priced wrong or could not trace."""

    def test_self_attention_mha(self):
        # nn.MultiheadAttention(64, 4, batch_first) on x [2, 32, 64] as query, key and value
        # (one node, three arguments), unpacked `a, _ = mha(x, x, x)`: 64 rows through the
        # q, k, v and out projections, 4 x 2 x 64 x 64 x 64 = 2,097,152, plus scores and
        # context 2 x 2 x (2 x 32 x 32 x 64) = 524,288: 2,621,440 FLOPs.
        g = t2p.export(SelfAttention(), torch.randn(2, 32, 64))
        mha = self.by_name(g)["mha"]
        self.assertEqual(mha["type"], "attention")
        self.assertEqual(mha["fwd_flops"], 2621440)
        self.assertAlmostEqual(mha["fwd_ms"], 2621440 / PEAK * 1e3, places=15)
        # 4 x 64 x 64 weights + 3 x 64 + 64 biases = 16,640 parameters, 33,280 bytes.
        self.assertEqual(mha["param_bytes"], 33280)

    def test_tied_embeddings(self):
        # nanoGPT ties wte and lm_head (1000 x 64). Unique parameters: wte 64,000, wpe 2,048,
        # per block 256 (two LayerNorms) + 12,480 (c_attn) + 4,160 + 16,640 + 16,448 = 49,984,
        # ln_f 128: 166,144 = 332,288 bytes (counting the tie twice gave 460,288). The tied
        # matrix is counted on lm_head, the op that computes with it (2 x 64 x 64 x 1000).
        model, inputs = nanogpt()
        g = t2p.export(model, inputs)
        self.assertEqual(sum(op["param_bytes"] for op in g["ops"]), 332288)
        ops = self.by_name(g)
        self.assertEqual(ops["lm_head"]["param_bytes"], 128000)
        self.assertEqual(ops["transformer.wte"]["param_bytes"], 0)
        self.assertEqual(ops["lm_head"]["fwd_flops"], 2 * 64 * 64 * 1000)

    def test_moe_routing(self):
        # The router decides by the tokens: the command line draws token ids at random (seed 0)
        # in [0, 64) rather than zeros, which sent every token to the same two experts. The
        # forward needs values (torch.where, x[rows]): it runs on the CPU, and says so.
        out = os.path.join(self.dir, "moe.json")
        r = run(sys.executable, TOOL, os.path.abspath(__file__) + ":moe", "--input-shape",
                "2,16", "--input-dtype", "int64", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("depends on tensor values", r.stderr)
        with open(out) as f:
            ops = self.by_name(json.load(f))
        rows = [ops["experts.%d.0" % e]["input"][0] for e in range(4)]
        self.assertEqual(sum(rows), 2 * 16 * 2)  # 32 tokens x top-2
        for n in rows:
            self.assertTrue(0 < n < 32, rows)  # every expert used, none by every token
        for e in range(4):  # 2 x rows x 32 x 64 each
            self.assertEqual(ops["experts.%d.0" % e]["fwd_flops"], 2 * rows[e] * 32 * 64)

    def test_tuple_unpacking(self):
        # `rows, cols = torch.where(mask)` unpacks (Python 3.11's bytecode broke torch.fx's
        # own __iter__ on torch 1.13: "list index out of range").
        class Where(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                rows, cols = torch.where(x > 0)
                a, b = self.fc(x).chunk(2, dim=-1)
                return torch.cat((b, a), dim=-1) + rows.sum() + cols.sum()

        g = t2p.export(Where(), torch.randn(4, 8))
        self.assertEqual(g["exporter"]["traced"], "real")
        self.assertIn("fc.part0", self.by_name(g))

    def test_raising_factory(self):
        r = run(sys.executable, TOOL, os.path.abspath(__file__) + ":broken",
                "--input-shape", "2,16")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertEqual(r.stderr.strip().splitlines(),
                         ["torch2planfarm: %s:broken raised RuntimeError: no checkpoint at "
                          "/nonexistent/ckpt.pt" % os.path.abspath(__file__)])


class TestModelMetadata(Base):
    """The graph's "model" object from the configuration a model carries (nanoGPT's GPTConfig,
    a Hugging Face config), read back by planfarm and turned into Megatron-LM's model flags;
    a model without one gets none."""

    def test_nanogpt_config(self):
        import types
        model, inputs = nanogpt()
        model.config = types.SimpleNamespace(n_layer=2, n_head=4, n_embd=64, vocab_size=1000,
                                             block_size=32, bias=True)
        path = os.path.join(self.dir, "nano-meta.json")
        g = t2p.export(model, inputs, path)
        self.assertEqual(g["model"], {"kind": "nanogpt", "layers": 2, "hidden": 64, "heads": 4,
                                      "vocab": 1000, "seq": 32, "activation": "gelu",
                                      "norm": "layernorm", "positions": "learned",
                                      "bias": True, "tied_embeddings": True})
        r = run(planfarm_bin(), "check", path)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_llama_config_to_megatron(self):
        import types
        model = TinyLlama()
        model.config = types.SimpleNamespace(model_type="llama", num_hidden_layers=2,
                                             hidden_size=64, num_attention_heads=8,
                                             num_key_value_heads=2, intermediate_size=128,
                                             vocab_size=128, hidden_act="silu",
                                             tie_word_embeddings=False)
        path = os.path.join(self.dir, "llama-meta.json")
        g = t2p.export(model, torch.zeros(2, 16, dtype=torch.long), path)
        self.assertEqual(g["model"]["kv_heads"], 2)
        self.assertEqual((g["model"]["activation"], g["model"]["norm"], g["model"]["positions"]),
                         ("swiglu", "rmsnorm", "rope"))
        plan = os.path.join(self.dir, "llama-meta-plan.json")
        r = run(planfarm_bin(), "plan", path, dgx_h100x2(self.dir), "--tp", "2",
                "--layer-aligned", "-o", plan)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run(planfarm_bin(), "export", "megatron", path, dgx_h100x2(self.dir), plan)
        self.assertEqual(r.returncode, 0, r.stderr)
        for flag in ("--hidden-size 64", "--num-attention-heads 8", "--group-query-attention",
                     "--num-query-groups 2", "--ffn-hidden-size 128", "--seq-length 16",
                     "--swiglu", "--normalization RMSNorm", "--position-embedding-type rope",
                     "--untie-embeddings-and-output-weights"):
            self.assertIn("    %s\n" % flag, r.stdout)

    def test_no_config(self):
        model, inputs = nanogpt()
        self.assertNotIn("model", t2p.export(model, inputs))


def main():
    if torch is None:
        print("SKIP test_torch2planfarm: torch is not importable by %s (Debian: apt-get install "
              "python3-torch python3-torchvision; run with /usr/bin/python3)" % sys.executable)
        print("0 passed, 0 failed")
        return 0
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors)
    print("%d passed, %d failed" % (result.testsRun - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
