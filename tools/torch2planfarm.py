#!/usr/bin/env python3
"""torch2planfarm: a PyTorch model to a planfarm graph file (DESIGN.md "Graph").

    python3 tools/torch2planfarm.py MODULE:FACTORY --input-shape 8,512 --input-dtype int64 -o g.json

or, from Python:

    import torch2planfarm
    graph = torch2planfarm.export(model, (tokens,), "g.json", dtype="bf16", tflops=989)

The model is traced with torch.fx (symbolic_trace), the example inputs run through it once
(torch.fx ShapeProp) so every node knows its tensor shapes, and each node that computes becomes
one op with the cost model of planner/inputs/model.h, so that a traced model and `planfarm model`
price the same layer the same way:

  FLOPs     linear 2 x rows x in x out; matmul 2 x (output elements) x k; conv the im2col
            matmul 2 x (output elements) x Cin/groups x prod(kernel) (transposed: per input
            element); attention (nn.MultiheadAttention) its four projections and two matmuls.
            Bias adds are not counted. Memory-bound ops: FLOPs per output element as
            FLOPS_PER_ELEMENT says (1 for anything not listed).
  fwd_ms    compute-bound ops (linear, matmul, conv, attention): FLOPs / (tflops x 1e12 x
            efficiency); every other op a roofline, max(that, moved bytes / hbm_gbps), moved =
            inputs read + output written + parameters read (an embedding reads one row per
            token, not the table).
  bwd_ms    2 x fwd_ms for every op (the weight and the input gradient of a weighted op each
            cost its forward FLOPs; memory-bound ops read and write about twice the bytes).
  param_bytes  the op's parameters in --dtype; a parameter used by several ops (tied weights,
            a module called twice) is counted once, at its first use.
  mem_fwd_bytes  output bytes + the input bytes the op keeps for its backward (KEEPS_INPUT).
  mem_bwd_bytes  output gradient + gradients of the inputs other ops produced.
  edge bytes  the bytes of the tensors a consumer reads from a producer (after views and
            slices), at most the producer's output bytes.

Floating tensors and parameters are counted in --dtype (default fp16, as `planfarm model`);
integer tensors (token ids) at their traced size. Ops are named by the module that runs them:
a leaf module by its dotted path ("layers.3.mlp.fc1"), a function or method by the path of the
module whose forward called it plus the function's name ("layers.3.attn.softmax"), with "_1",
"_2", ... on later calls within one module, so that repeated blocks get names equal up to their
index, which is how planfarm's TAP finds them.

Folded away (not ops): views and reshapes (view, reshape, transpose, permute, getitem, chunk,
split, contiguous, dtype casts, ...), nodes whose value is not a tensor (size()), and
constants: anything that depends on neither an input nor a parameter (causal masks, rotary
tables computed from buffers). Their consumers read straight from the op behind them.

--measure (CUDA only) replaces fwd_ms and bwd_ms by times measured with CUDA events: each op is
run alone on its recorded inputs in --dtype, forward and then backward, --repeat times after
--warmup runs, and the median is kept. Without CUDA it says so and keeps the analytic costs.

Needs Python 3 and torch >= 1.13 (Debian: python3-torch; /usr/bin/python3 on Debian, where the
packaged torch lives). Exit status: 0 written, 1 tracing or running the model failed, 2 bad
usage or input.
"""

import argparse
import importlib
import importlib.util
import json
import math
import os
import statistics
import sys

try:
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata
except ImportError:  # the CLI says so; importing this module for its docstring still works
    torch = None

DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}
COMPUTE_BOUND = {"linear", "matmul", "conv", "attention"}
# Per output element; the same figures as planner/inputs/model_build.c for the kinds it generates.
FLOPS_PER_ELEMENT = {"add": 1, "sub": 1, "mul": 1, "div": 1, "relu": 1, "softmax": 5,
                     "layernorm": 8, "batchnorm": 8, "groupnorm": 8, "instancenorm": 8,
                     "gelu": 8, "silu": 4, "sigmoid": 4, "tanh": 4}
# Ops whose backward needs their input (models.h: linear, matmul, conv, embedding, norms, gelu,
# maxpool), plus the products and activations a Llama block adds (mul: d(xy) = y dx + x dy).
KEEPS_INPUT = {"linear", "matmul", "conv", "embedding", "layernorm", "batchnorm", "groupnorm",
               "instancenorm", "gelu", "silu", "maxpool", "attention", "mul", "div", "pow"}

# Module classes (torch.nn and look-alikes by class name) -> op type.
MODULE_TYPES = {
    "Linear": "linear", "LazyLinear": "linear", "NonDynamicallyQuantizableLinear": "linear",
    "Embedding": "embedding", "EmbeddingBag": "embedding",
    "Conv1d": "conv", "Conv2d": "conv", "Conv3d": "conv",
    "ConvTranspose1d": "conv", "ConvTranspose2d": "conv", "ConvTranspose3d": "conv",
    "LayerNorm": "layernorm", "GroupNorm": "groupnorm",
    "BatchNorm1d": "batchnorm", "BatchNorm2d": "batchnorm", "BatchNorm3d": "batchnorm",
    "InstanceNorm1d": "instancenorm", "InstanceNorm2d": "instancenorm",
    "MultiheadAttention": "attention",
    "Softmax": "softmax", "LogSoftmax": "softmax",
    "ReLU": "relu", "ReLU6": "relu", "GELU": "gelu", "SiLU": "silu", "Sigmoid": "sigmoid",
    "Tanh": "tanh", "Dropout": "dropout", "Dropout1d": "dropout", "Dropout2d": "dropout",
    "MaxPool1d": "maxpool", "MaxPool2d": "maxpool", "MaxPool3d": "maxpool",
    "AvgPool1d": "avgpool", "AvgPool2d": "avgpool", "AdaptiveAvgPool1d": "avgpool",
    "AdaptiveAvgPool2d": "avgpool", "AdaptiveAvgPool3d": "avgpool",
}
FOLDED_MODULES = {"Identity", "Flatten", "Unflatten"}
# Functions and tensor methods by name -> op type (anything else keeps its own name).
FUNCTION_TYPES = {
    "add": "add", "iadd": "add", "add_": "add", "sub": "sub", "isub": "sub", "rsub": "sub",
    "mul": "mul", "imul": "mul", "mul_": "mul", "truediv": "div", "div": "div",
    "matmul": "matmul", "bmm": "matmul", "mm": "matmul", "baddbmm": "matmul", "addmm": "matmul",
    "einsum": "matmul", "linear": "linear", "embedding": "embedding",
    "conv1d": "conv", "conv2d": "conv", "conv3d": "conv",
    "softmax": "softmax", "log_softmax": "softmax", "layer_norm": "layernorm",
    "batch_norm": "batchnorm", "group_norm": "groupnorm",
    "relu": "relu", "relu_": "relu", "gelu": "gelu", "silu": "silu", "sigmoid": "sigmoid",
    "tanh": "tanh", "dropout": "dropout", "cat": "concat", "concat": "concat", "stack": "concat",
    "max_pool2d": "maxpool", "adaptive_avg_pool2d": "avgpool", "avg_pool2d": "avgpool",
    "scaled_dot_product_attention": "attention",
}
VIEW_FUNCTIONS = {
    "view", "reshape", "transpose", "permute", "t", "unsqueeze", "squeeze", "flatten",
    "unflatten", "expand", "expand_as", "contiguous", "getitem", "chunk", "split", "unbind",
    "narrow", "select", "view_as", "reshape_as", "to", "float", "half", "bfloat16", "type",
    "type_as", "detach", "clone", "size", "dim", "getattr", "movedim", "swapaxes",
}


class ExportError(Exception):
    """Bad input or a model that cannot be traced; the message says which and why."""


def _fn_name(node):
    if node.op == "call_method":
        return node.target
    return getattr(node.target, "__name__", str(node.target))


def _metas(meta):
    """Every TensorMetadata in a node's (possibly nested) tensor_meta."""
    if meta is None:
        return []
    if isinstance(meta, TensorMetadata):
        return [meta]
    if isinstance(meta, (list, tuple)):
        return [m for x in meta for m in _metas(x)]
    if isinstance(meta, dict):
        return [m for x in meta.values() for m in _metas(x)]
    return []


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


class _ConcreteTracer(torch.fx.Tracer if torch else object):
    """symbolic_trace that also runs every node on the example inputs as it records it, so that
    shapes are plain integers (`b, s, h = x.shape` unpacks) and Python control flow takes the
    branch the example takes: the graph is specialised to the example's shapes, which is what a
    per-micro-batch cost graph is anyway. It records on every node the path of the module whose
    forward made it, and treats extra classes (by name) as leaves: by default anything named
    *Norm, so that an RMSNorm is one op rather than pow, mean, rsqrt and mul."""

    def __init__(self, example_inputs, leaf_classes):
        super().__init__()
        self.leaf_classes = set(leaf_classes)
        self.scope = []
        self.pending_inputs = list(example_inputs)
        self.values = {}
        self.evaluating = False

    def is_leaf_module(self, m, qualname):
        cls = type(m).__name__
        if cls in self.leaf_classes or cls.endswith("Norm"):
            return True
        return super().is_leaf_module(m, qualname)

    def call_module(self, m, forward, args, kwargs):
        if self.evaluating:  # running a leaf on concrete values: no nodes inside it
            return forward(*args, **kwargs)
        self.scope.append(self.path_of_module(m))
        try:
            return super().call_module(m, forward, args, kwargs)
        finally:
            self.scope.pop()

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if self.evaluating:  # a leaf reading its own weight while it runs concretely
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        node = super().create_node(kind, target, args, kwargs, name, type_expr)
        node.meta["pf_scope"] = self.scope[-1] if self.scope else ""
        return node

    def _concrete(self, x):
        if isinstance(x, torch.fx.Proxy):
            return self.values[x.node]
        if isinstance(x, (tuple, list)):
            return type(x)(self._concrete(e) for e in x) if not hasattr(x, "_fields") \
                else type(x)(*(self._concrete(e) for e in x))
        if isinstance(x, dict):
            return {k: self._concrete(v) for k, v in x.items()}
        if isinstance(x, slice):
            return slice(self._concrete(x.start), self._concrete(x.stop), self._concrete(x.step))
        return x

    def create_proxy(self, kind, target, args, kwargs, *rest, **kw):
        proxy = super().create_proxy(kind, target, args, kwargs, *rest, **kw)
        if kind == "output":
            return proxy
        a, k = self._concrete(args), self._concrete(kwargs)
        self.evaluating = True
        try:
            value = self._evaluate(kind, target, a, k)
        finally:
            self.evaluating = False
        self.values[proxy.node] = value
        return proxy

    def proxy(self, node):
        return _ConcreteProxy(node, self)

    def _evaluate(self, kind, target, a, k):
        with torch.no_grad():
            if kind == "placeholder":
                if not self.pending_inputs:
                    raise ExportError("the model's forward takes more inputs than were given")
                value = self.pending_inputs.pop(0)
            elif kind == "get_attr":
                value = self.root
                for part in target.split("."):
                    value = getattr(value, part)
            elif kind == "call_function":
                value = target(*a, **k)
            elif kind == "call_method":
                value = getattr(a[0], target)(*a[1:], **k)
            else:
                value = self.root.get_submodule(target)(*a, **k)
        return value

    def iter(self, obj):
        value = self._concrete(obj)
        if isinstance(value, (tuple, list)) and \
                not any(isinstance(v, torch.Tensor) for v in value):
            return iter(value)  # a shape: plain integers
        return iter([obj[i] for i in range(len(value))])

    def to_bool(self, obj):
        return bool(self._concrete(obj))

    def keys(self, obj):
        return self._concrete(obj).keys()


class _ConcreteProxy(torch.fx.Proxy if torch else object):
    """A proxy whose metadata is its example value's: `x.shape`, `x.size()`, `x.dim()`,
    `x.device`, `x.dtype` are plain values, so they can go into factories (torch.arange(s))
    and arithmetic without becoming nodes."""
    CONCRETE = ("shape", "size", "dim", "ndim", "device", "dtype", "is_cuda",
                "is_floating_point", "numel")

    def __getattr__(self, k):
        if k in _ConcreteProxy.CONCRETE:
            return getattr(self.tracer.values[self.node], k)
        return super().__getattr__(k)


def _trace(model, example_inputs, leaf_classes):
    tracer = _ConcreteTracer(example_inputs, leaf_classes)
    try:
        graph = tracer.trace(model)
    except ExportError:
        raise
    except Exception as e:  # torch.fx raises many kinds (TraceError, TypeError, ...)
        raise ExportError("torch.fx cannot trace %s: %s (mark the module that fails as a leaf "
                          "with --leaf CLASS)" % (type(model).__name__, e)) from e
    tracer.values.clear()
    gm = torch.fx.GraphModule(tracer.root, graph, type(model).__name__)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise ExportError("the model's forward takes %d inputs, %d example inputs given"
                          % (len(placeholders), len(example_inputs)))
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(*example_inputs)
    except Exception as e:
        raise ExportError("running the traced model on the example inputs failed: %s" % e) from e
    return gm


class _Costs:
    def __init__(self, dtype, tflops, efficiency, hbm_gbps):
        if dtype not in DTYPE_BYTES:
            raise ExportError("--dtype: %r is not one of %s" % (dtype, ", ".join(DTYPE_BYTES)))
        for flag, v in (("--tflops", tflops), ("--efficiency", efficiency),
                        ("--hbm-gbps", hbm_gbps)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ExportError("%s: %r is not a positive number" % (flag, v))
        if efficiency > 1:
            raise ExportError("--efficiency: %r is above 1" % efficiency)
        self.float_bytes = DTYPE_BYTES[dtype]
        self.tflops, self.efficiency, self.hbm_gbps = tflops, efficiency, hbm_gbps

    def tensor_bytes(self, meta):
        """Bytes of one tensor: floating ones in --dtype, others at their own element size."""
        if meta.dtype.is_floating_point:
            size = self.float_bytes
        else:
            size = torch.empty((), dtype=meta.dtype).element_size()
        return _numel(meta.shape) * size

    def flops_ms(self, flops):
        return flops / (self.tflops * 1e12 * self.efficiency) * 1e3

    def bytes_ms(self, nbytes):
        return nbytes / (self.hbm_gbps * 1e9) * 1e3


def _module_weight_shape(mod, kind):
    """The op's `weight` in planfarm's convention (planner/inputs/model.h): a linear [in, out], a conv
    [Cout, Cin/groups, k...], a norm [number of per-channel tensors, C], else the first
    parameter's shape."""
    params = list(mod.parameters())
    if not params:
        return None
    w = getattr(mod, "weight", None)
    if kind == "linear" and isinstance(w, torch.Tensor) and w.dim() == 2:
        return [int(w.shape[1]), int(w.shape[0])]
    if kind in ("layernorm", "batchnorm", "groupnorm", "instancenorm"):
        return [len(params), int(params[0].numel())]
    if kind == "attention":
        e = getattr(mod, "embed_dim", None)
        return [e, 4 * e] if e else list(params[0].shape)
    return [int(d) for d in (w.shape if isinstance(w, torch.Tensor) else params[0].shape)]


def _einsum_flops(equation, shapes):
    """2 x the product of every index's size, for explicit equations without '...'."""
    eq = equation.replace(" ", "")
    if "..." in eq or "->" not in eq:
        return None
    lhs = eq.split("->")[0].split(",")
    if len(lhs) != len(shapes):
        return None
    size = {}
    for term, shape in zip(lhs, shapes):
        if len(term) != len(shape):
            return None
        for c, d in zip(term, shape):
            size[c] = int(d)
    return 2 * _numel(size.values())


def _flops(kind, node, mod, in_metas, out_metas):
    """Forward FLOPs (the header); None where only memory counts."""
    out = out_metas[0] if out_metas else None
    inp = in_metas[0] if in_metas else None
    if kind == "linear" and out is not None and inp is not None:
        if mod is not None:
            n_in, n_out = mod.in_features, mod.out_features
        else:
            n_in, n_out = int(inp.shape[-1]), int(out.shape[-1])
        return 2 * (_numel(inp.shape) // max(n_in, 1)) * n_in * n_out
    if kind == "matmul" and out is not None:
        name = _fn_name(node)
        if name == "einsum":
            return _einsum_flops(node.args[0], [m.shape for m in in_metas])
        # baddbmm / addmm: the last two tensors are multiplied.
        a = in_metas[-2] if name in ("baddbmm", "addmm") and len(in_metas) >= 3 else inp
        if a is None or len(a.shape) == 0:
            return None
        return 2 * _numel(out.shape) * int(a.shape[-1])
    if kind == "conv" and out is not None and mod is not None:
        k = _numel(mod.kernel_size)
        if mod.transposed:
            return 2 * _numel(inp.shape) * (mod.out_channels // mod.groups) * k
        return 2 * _numel(out.shape) * (mod.in_channels // mod.groups) * k
    if kind == "attention" and out is not None and mod is not None and len(in_metas) >= 3:
        # nn.MultiheadAttention: q, k, v, out projections + scores + context (batch_first or not,
        # the three inputs give L, S and E).
        e = mod.embed_dim
        q_rows = _numel(in_metas[0].shape) // e
        kv_rows = _numel(in_metas[1].shape) // e
        batch = _numel(in_metas[0].shape) // e // max(int(in_metas[0].shape[-2]), 1) \
            if len(in_metas[0].shape) == 3 else 1
        l_len, s_len = q_rows // batch, kv_rows // batch
        return (2 * q_rows * e * e * 2 + 2 * kv_rows * e * e * 2 + 4 * batch * l_len * s_len * e)
    if kind == "attention" and out is not None and len(in_metas) >= 3:
        q, k = in_metas[0].shape, in_metas[1].shape  # (..., L, D), (..., S, D)
        return 4 * _numel(q) * int(k[-2])
    per = FLOPS_PER_ELEMENT.get(kind, 1)
    if kind == "maxpool" and mod is not None:
        ks = mod.kernel_size
        per = _numel(ks if isinstance(ks, (tuple, list)) else (ks,) * (len(out.shape) - 2))
    if kind == "avgpool" and inp is not None:
        return _numel(inp.shape)
    return per * sum(_numel(m.shape) for m in out_metas)


def _is_tensor_node(node):
    return bool(_metas(node.meta.get("tensor_meta")))


def build_graph(gm, costs, name, microbatch):
    """The planfarm graph (a dict) of a traced, shape-propagated GraphModule."""
    modules = dict(gm.named_modules())
    params = {n: p for n, p in gm.named_parameters()}
    live = set()       # nodes that depend on an input or a parameter
    source = {}        # folded node -> the op id it forwards (None: an input or a constant)
    ops, counted_params = [], set()
    used_names = {}
    edges = {}         # (src, dst) -> bytes

    for node in gm.graph.nodes:
        inputs = node.all_input_nodes
        if node.op == "placeholder":
            live.add(node)
            source[node] = None
            continue
        if node.op == "get_attr":
            if node.target in params:
                live.add(node)
            source[node] = None
            continue
        if node.op == "output":
            continue
        mod = modules.get(node.target) if node.op == "call_module" else None
        if any(a in live for a in inputs) or \
                (mod is not None and any(True for _ in mod.parameters())):
            live.add(node)  # a module with weights (wpe(arange(s))) computes, even on constants
        cls = type(mod).__name__ if mod is not None else None
        if mod is not None:
            kind = MODULE_TYPES.get(cls)
            if kind is None and cls.endswith("Norm"):
                kind = "layernorm"  # RMSNorm and the like: a per-channel scale over the last dim
            kind = "folded" if cls in FOLDED_MODULES else (kind or cls.lower())
        else:
            fn = _fn_name(node)
            kind = "folded" if fn in VIEW_FUNCTIONS else FUNCTION_TYPES.get(fn, fn)
        tensor_inputs = [a for a in inputs if _is_tensor_node(a)]
        if kind == "folded" or node not in live or not _is_tensor_node(node):
            # A view forwards the data of its first tensor argument (x.view(...), x.expand_as(y),
            # t[0] of a tuple); constants and non-tensors forward nothing.
            first = tensor_inputs[0] if tensor_inputs else None
            source[node] = source.get(first) if node in live and first is not None else None
            continue

        # ---- an op ----
        scope = node.meta.get("pf_scope", "")
        base = node.target if mod is not None else \
            ((scope + "." if scope else "") + _fn_name(node))
        k = used_names.get(base, 0)
        used_names[base] = k + 1
        op_name = base if k == 0 else "%s_%d" % (base, k)

        out_metas = _metas(node.meta.get("tensor_meta"))
        in_metas = [m for a in tensor_inputs for m in _metas(a.meta.get("tensor_meta"))]
        out_bytes = sum(costs.tensor_bytes(m) for m in out_metas)

        # Parameters: the leaf module's, or those read through get_attr; each counted once.
        weight_shape, param_elems = None, 0
        if mod is not None:
            for pname, p in mod.named_parameters(prefix=node.target):
                if pname not in counted_params:
                    counted_params.add(pname)
                    param_elems += p.numel()
            weight_shape = _module_weight_shape(mod, kind)
        for a in inputs:
            if a.op == "get_attr" and a.target in params:
                p = params[a.target]
                if weight_shape is None:
                    shape = [int(d) for d in p.shape]
                    weight_shape = shape[::-1] if kind == "linear" and len(shape) == 2 else shape
                if a.target not in counted_params:
                    counted_params.add(a.target)
                    param_elems += p.numel()
        param_bytes = param_elems * costs.float_bytes

        # Inputs: per producer op, the bytes read from it (capped at its output).
        read_from = {}
        graph_in_bytes = 0
        for a in dict.fromkeys(tensor_inputs):
            if a.op == "get_attr" and a.target in params:
                continue
            b = sum(costs.tensor_bytes(m) for m in _metas(a.meta.get("tensor_meta")))
            src = source.get(a)
            if src is None:
                graph_in_bytes += b
            else:
                read_from[src] = read_from.get(src, 0) + b
        for src in read_from:
            read_from[src] = min(read_from[src], ops[src]["_out_bytes"])
        in_grad_bytes = sum(read_from.values())
        in_bytes = in_grad_bytes + graph_in_bytes

        flops = _flops(kind, node, mod, in_metas, out_metas)
        if kind == "embedding":
            moved = 2 * out_bytes + graph_in_bytes + in_grad_bytes  # one row per token
        else:
            moved = in_bytes + out_bytes + param_bytes
        if kind in COMPUTE_BOUND and flops is not None:
            fwd_ms = costs.flops_ms(flops)
        else:
            fwd_ms = max(costs.flops_ms(flops or 0), costs.bytes_ms(moved))

        op = {"id": len(ops), "name": op_name, "type": kind,
              "fwd_ms": fwd_ms, "bwd_ms": 2 * fwd_ms,
              "param_bytes": param_bytes,
              "mem_fwd_bytes": out_bytes + (in_bytes if kind in KEEPS_INPUT else 0),
              "mem_bwd_bytes": out_bytes + in_grad_bytes}
        if weight_shape:
            op["weight"] = weight_shape
        if in_metas:
            op["input"] = [int(d) for d in in_metas[0].shape]
        if out_metas:
            op["output"] = [int(d) for d in out_metas[0].shape]
        op["flops"] = flops or 0
        if cls is not None:
            op["module_class"] = cls
        op["_out_bytes"] = out_bytes
        for src, b in read_from.items():
            edges[(src, op["id"])] = b
        node.meta["pf_op"] = op["id"]
        source[node] = op["id"]
        ops.append(op)

    if not ops:
        raise ExportError("the traced model has no op that computes on its inputs")
    for op in ops:
        del op["_out_bytes"]
    return {"name": name, "microbatch": microbatch, "ops": ops,
            "edges": [{"src": s, "dst": d, "bytes": b} for (s, d), b in sorted(edges.items())],
            "exporter": {"tool": "torch2planfarm", "torch": torch.__version__,
                         "dtype_bytes": costs.float_bytes, "tflops": costs.tflops,
                         "efficiency": costs.efficiency, "hbm_gbps": costs.hbm_gbps,
                         "measured": False}}


def _cast_float(x, dtype):
    return x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def measure(gm, graph, example_inputs, dtype, warmup=3, repeat=10):
    """Replaces each op's fwd_ms / bwd_ms by CUDA-event timings (the header). Returns False,
    with nothing changed, when CUDA is not available."""
    if not torch.cuda.is_available():
        return False
    tdtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    dev = torch.device("cuda")
    gm = gm.to(dev)
    for p in gm.parameters():
        p.data = p.data.to(tdtype)
    for b_name, b in gm.named_buffers():
        if b.is_floating_point() and "running" not in b_name:
            b.data = b.data.to(tdtype)
    inputs = [_cast_float(x.to(dev), tdtype) for x in example_inputs]
    env = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            env[n] = (args, kwargs)
            return super().run_node(n)

    with torch.no_grad():
        Recorder(gm).run(*inputs)

    def timed(fn):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(warmup):
            fn()
        samples = []
        for _ in range(repeat):
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end))
        return statistics.median(samples)

    interp = torch.fx.Interpreter(gm)
    nodes = {n.name: n for n in gm.graph.nodes}
    for op in graph["ops"]:
        node = nodes[op["_fx_node"]]
        args, kwargs = env[node]

        def forward(a=args, k=kwargs, n=node):
            return getattr(interp, n.op)(n.target, a, k)

        with torch.no_grad():
            op["fwd_ms"] = timed(forward)

        def leaf(x):
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                return x.detach().requires_grad_(True)
            return x
        g_args = torch.fx.node.map_aggregate(args, leaf)
        g_kwargs = torch.fx.node.map_aggregate(kwargs, leaf)
        outs = [o for o in _flatten(forward(g_args, g_kwargs))
                if isinstance(o, torch.Tensor) and o.requires_grad]
        if not outs:
            op["bwd_ms"] = 0.0
            continue
        grads = [torch.ones_like(o) for o in outs]

        def backward(a=g_args, k=g_kwargs, g=grads):
            o = [t for t in _flatten(forward(a, k))
                 if isinstance(t, torch.Tensor) and t.requires_grad]
            torch.autograd.backward(o, g)
        # backward alone = (forward + backward) - forward
        op["bwd_ms"] = max(timed(backward) - op["fwd_ms"], 0.0)
        gm.zero_grad(set_to_none=True)
    graph["exporter"]["measured"] = True
    graph["exporter"]["device"] = torch.cuda.get_device_name()
    return True


def _flatten(x):
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in _flatten(e)]
    if isinstance(x, dict):
        return [y for e in x.values() for y in _flatten(e)]
    return [x]


def export(model, example_inputs, path=None, *, name=None, microbatch=None, dtype="fp16",
           tflops=125.0, efficiency=0.5, hbm_gbps=900.0, measure_cuda=False, warmup=3,
           repeat=10, leaf_classes=()):
    """Traces `model` on `example_inputs` (a tensor or a tuple of them) and returns the planfarm
    graph as a dict; writes it to `path` as well when one is given ("-" = stdout). Device
    defaults are `planfarm model`'s (a V100: 125 TFLOP/s, efficiency 0.5, 900 GB/s).
    Raises ExportError with the reason when the model cannot be traced or the options are bad."""
    if torch is None:
        raise ExportError("torch is not importable (Debian: apt-get install python3-torch)")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    costs = _Costs(dtype, tflops, efficiency, hbm_gbps)
    gm = _trace(model, example_inputs, leaf_classes)
    if microbatch is None:
        first = example_inputs[0] if example_inputs else None
        microbatch = int(first.shape[0]) if isinstance(first, torch.Tensor) and first.dim() else 1
    if microbatch < 1:
        raise ExportError("--microbatch: %d is not positive" % microbatch)
    graph = build_graph(gm, costs, name or type(model).__name__, microbatch)
    if measure_cuda:
        fx_names = _op_node_names(gm)
        for op, fx_name in zip(graph["ops"], fx_names):
            op["_fx_node"] = fx_name
        if not measure(gm, graph, example_inputs, dtype, warmup, repeat):
            print("torch2planfarm: --measure: CUDA is not available; op times are analytic",
                  file=sys.stderr)
        for op in graph["ops"]:
            op.pop("_fx_node", None)
    if path is not None:
        text = json.dumps(graph, indent=1) + "\n"
        if path == "-":
            sys.stdout.write(text)
        else:
            with open(path, "w") as f:
                f.write(text)
    return graph


def _op_node_names(gm):
    """The fx node behind each op, in op order (build_graph marks them)."""
    marked = [(n.meta["pf_op"], n.name) for n in gm.graph.nodes if "pf_op" in n.meta]
    return [name for _, name in sorted(marked)]


# ---- command line ----

def _load_factory(spec, kwargs_json):
    if ":" not in spec:
        raise ExportError("%s: expected MODULE:FACTORY (e.g. torchvision.models:resnet18 or "
                          "mymodel.py:build)" % spec)
    mod_name, attr = spec.rsplit(":", 1)
    try:
        if mod_name.endswith(".py") or os.sep in mod_name:
            if not os.path.isfile(mod_name):
                raise ExportError("%s: no such file" % mod_name)
            s = importlib.util.spec_from_file_location(
                os.path.splitext(os.path.basename(mod_name))[0], mod_name)
            module = importlib.util.module_from_spec(s)
            s.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
    except ExportError:
        raise
    except Exception as e:
        raise ExportError("%s: cannot import: %s" % (mod_name, e)) from e
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ExportError("%s: has no attribute %r" % (mod_name, attr))
        obj = getattr(obj, part)
    try:
        kwargs = json.loads(kwargs_json) if kwargs_json else {}
    except json.JSONDecodeError as e:
        raise ExportError("--kwargs: not JSON: %s" % e) from e
    if not isinstance(kwargs, dict):
        raise ExportError("--kwargs: not a JSON object")
    if isinstance(obj, torch.nn.Module):
        return obj, None
    result = obj(**kwargs)
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module):
        return result[0], result[1]
    if not isinstance(result, torch.nn.Module):
        raise ExportError("%s returned %s, not an nn.Module (or (module, example_inputs))"
                          % (spec, type(result).__name__))
    return result, None


def _parse_shape(text):
    try:
        dims = [int(x) for x in text.split(",")]
    except ValueError:
        raise ExportError("--input-shape: %r is not a comma-separated list of integers" % text)
    if not dims or any(d < 1 for d in dims):
        raise ExportError("--input-shape: %r has a dimension below 1" % text)
    return dims


INPUT_DTYPES = {"float": "float32", "float32": "float32", "int64": "int64", "long": "int64",
                "int32": "int32"}


def _make_inputs(shapes, dtypes):
    if not shapes:
        raise ExportError("--input-shape: required (the factory returned no example inputs)")
    if len(dtypes) > len(shapes):
        raise ExportError("--input-dtype: given %d times for %d inputs" % (len(dtypes),
                                                                          len(shapes)))
    inputs = []
    for i, text in enumerate(shapes):
        dims = _parse_shape(text)
        dt = dtypes[i] if i < len(dtypes) else "float"
        if dt not in INPUT_DTYPES:
            raise ExportError("--input-dtype: %r is not one of %s" % (dt, ", ".join(INPUT_DTYPES)))
        t = getattr(torch, INPUT_DTYPES[dt])
        # Integer inputs are token ids: zeros index every table.
        inputs.append(torch.randn(dims) if t.is_floating_point else torch.zeros(dims, dtype=t))
    return tuple(inputs)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="torch2planfarm.py",
        description="Trace a PyTorch model with torch.fx and write a planfarm graph file.",
        epilog="Example: /usr/bin/python3 tools/torch2planfarm.py torchvision.models:resnet18 "
               "--input-shape 32,3,224,224 -o resnet18.json")
    ap.add_argument("factory", metavar="MODULE:FACTORY",
                    help="a module name or .py file, and a callable in it returning an "
                         "nn.Module or (nn.Module, example_inputs); or an nn.Module object")
    ap.add_argument("--kwargs", help="JSON object of keyword arguments for FACTORY")
    ap.add_argument("--input-shape", action="append", default=[], metavar="D0,D1,...",
                    help="shape of one example input (repeat for several inputs, in order)")
    ap.add_argument("--input-dtype", action="append", default=[], metavar="DTYPE",
                    help="float (default), int64 (token ids, filled with 0) or int32; per input")
    ap.add_argument("--dtype", default="fp16", choices=sorted(DTYPE_BYTES),
                    help="precision that floating tensors and parameters are counted in "
                         "(default fp16)")
    ap.add_argument("--name", help="graph name (default: the model's class name)")
    ap.add_argument("--microbatch", type=int,
                    help="samples per micro-batch (default: the first input's first dimension)")
    ap.add_argument("--tflops", type=float, default=125.0, help="device peak (default 125)")
    ap.add_argument("--efficiency", type=float, default=0.5,
                    help="fraction of peak a kernel reaches (default 0.5)")
    ap.add_argument("--hbm-gbps", type=float, default=900.0,
                    help="device memory bandwidth for memory-bound ops (default 900)")
    ap.add_argument("--leaf", action="append", default=[], metavar="CLASS",
                    help="treat modules of this class as one op (repeatable)")
    ap.add_argument("--measure", action="store_true",
                    help="time each op on the GPU (CUDA events); analytic without CUDA")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("-o", "--output", default="-", help="graph file (default stdout)")
    a = ap.parse_args(argv)
    if torch is None:
        print("torch2planfarm: torch is not importable by %s (Debian: apt-get install "
              "python3-torch, and run /usr/bin/python3)" % sys.executable, file=sys.stderr)
        return 2
    try:
        if a.warmup < 0 or a.repeat < 1:
            raise ExportError("--warmup must be >= 0 and --repeat >= 1")
        model, inputs = _load_factory(a.factory, a.kwargs)
        if inputs is None or a.input_shape:
            inputs = _make_inputs(a.input_shape, a.input_dtype)
        graph = export(model, inputs, a.output, name=a.name, microbatch=a.microbatch,
                       dtype=a.dtype, tflops=a.tflops, efficiency=a.efficiency,
                       hbm_gbps=a.hbm_gbps, measure_cuda=a.measure, warmup=a.warmup,
                       repeat=a.repeat, leaf_classes=a.leaf)
    except ExportError as e:
        print("torch2planfarm: %s" % e, file=sys.stderr)
        return 2 if "cannot trace" not in str(e) and "failed" not in str(e) else 1
    print("torch2planfarm: wrote %s (%d ops, %d edges%s) to %s"
          % (graph["name"], len(graph["ops"]), len(graph["edges"]),
             ", measured" if graph["exporter"]["measured"] else "",
             "stdout" if a.output == "-" else a.output), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
