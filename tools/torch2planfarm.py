#!/usr/bin/env python3
"""torch2planfarm: a PyTorch model to a planfarm graph file (DESIGN.md "Graph").

    python3 tools/torch2planfarm.py MODULE:FACTORY --input-shape 8,512 --input-dtype int64 -o g.json

or, from Python:

    import torch2planfarm
    graph = torch2planfarm.export(model, (tokens,), "g.json", dtype="bf16", tflops=989)

The model is traced with torch.fx (symbolic_trace) while every node is evaluated on fake
tensors (shapes and dtypes without storage or arithmetic: torch._subclasses.FakeTensorMode), so
every node knows its tensor shapes at no cost; only a forward that depends on tensor values
(data-dependent shapes, .item(), branches on values) is run for real, once, on the CPU. On the
command line the model is built with its parameters on the meta device (--measure builds it
for real). Each node that computes becomes one op with the cost model of
planner/inputs/model.h, so that a traced model and `planfarm model` price the same layer the
same way, and is written in the shapes `planfarm model` uses, which TAP reads to split weights
for tensor parallelism: a fused QKV linear split by its user becomes q, k, v linear ops, and
attention's head-laid tensors are written [b, s, heads x head_dim] (scores [b, a, s, s]):

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
  work      (graph file version 2, DESIGN.md "Files") what a device model prices:
            fwd_flops  the FLOPs above (left out where none are counted);
            bwd_flops  2 x fwd_flops for linear, matmul, conv and attention (the gradients of
                       both operands) and the norms (statistics again, then scale and shift),
                       1 x for every other op, as planner/inputs/model_build.c;
            bytes_read  the inputs read + the parameters the op uses (each call of a shared
                       module reads them; an embedding reads one row per token);
            bytes_written  its outputs;
            gemm {m, n, k, batch}  for linear (m = rows, k = in, n = out), matmul/bmm/mm
                       (batch = the leading dimensions) and conv (the im2col product, batch =
                       groups): batch products of (m x k) @ (k x n), 2 m n k batch = fwd_flops.
                       Attention is one fused op: flash-attention's FLOPs, no single GEMM.
  param_bytes  the op's parameters in --dtype; a parameter used by several ops (tied weights,
            a module called twice) is counted once, by identity, on the op that computes
            most with it (tied embeddings: the output head).
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
import contextlib
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
    import torch._subclasses
    import torch._subclasses.fake_tensor
except ImportError:  # the CLI says so; importing this module for its docstring still works
    torch = None

DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}
COMPUTE_BOUND = {"linear", "matmul", "conv", "attention"}
# Per output element; the same figures as planner/inputs/models.c for the kinds it generates.
FLOPS_PER_ELEMENT = {"add": 1, "sub": 1, "mul": 1, "div": 1, "relu": 1, "softmax": 5,
                     "layernorm": 8, "batchnorm": 8, "groupnorm": 8, "instancenorm": 8,
                     "gelu": 8, "silu": 4, "sigmoid": 4, "tanh": 4}
# Ops whose backward needs their input (model.h: linear, matmul, conv, embedding, norms, gelu,
# maxpool), plus the products and activations a Llama block adds (mul: d(xy) = y dx + x dy).
# The backward's FLOPs per forward FLOP (the module docstring, "work").
BWD_FLOPS_2X = {"linear", "matmul", "conv", "attention", "layernorm", "batchnorm", "groupnorm",
                "instancenorm"}
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
    """Bad input or a model that cannot be traced; the message says which and why. `status` is
    the exit status the command line gives it: 2 bad usage or input, 1 the model failed."""

    def __init__(self, message, status=2):
        super().__init__(message)
        self.status = status


class _NeedsData(Exception):
    """Shape propagation without data (fake tensors) cannot follow this model: its forward
    depends on tensor values (data-dependent shapes such as x[mask] or torch.where(mask),
    Python branches on tensor values, .item()). The caller traces it again on real tensors."""


def _fn_name(node):
    if node.op == "call_method":
        return node.target
    return getattr(node.target, "__name__", str(node.target))


class _Meta:
    """A traced tensor's shape and dtype (what the cost model needs)."""
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(int(d) for d in shape), dtype


def _meta_of(value):
    """_Meta for every tensor in a (possibly nested) value; None where there is none."""
    if isinstance(value, torch.Tensor):
        return _Meta(value.shape, value.dtype)
    if isinstance(value, (list, tuple)):
        metas = [_meta_of(v) for v in value]
        return metas if any(m is not None for m in metas) else None
    if isinstance(value, dict):
        metas = {k: _meta_of(v) for k, v in value.items()}
        return metas if any(m is not None for m in metas.values()) else None
    return None


def _metas(meta):
    """Every _Meta in a node's (possibly nested) tensor_meta."""
    if meta is None:
        return []
    if isinstance(meta, _Meta):
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


def _repeat_interleave_shape(x, repeats, dim=None, **kw):
    """repeat_interleave with an integer count, without data: fake tensors give up on it (in
    torch 1.13 it becomes aten.repeat_interleave.Tensor, whose output size is data)."""
    if not isinstance(repeats, int):
        raise _NeedsData("repeat_interleave with a tensor of counts")
    if dim is None:
        return x.reshape(-1).unsqueeze(1).expand(-1, repeats).reshape(-1)
    dim = dim % x.dim()
    shape = list(x.shape)
    y = x.unsqueeze(dim + 1).expand(*shape[:dim + 1], repeats, *shape[dim + 1:])
    shape[dim] *= repeats
    return y.reshape(shape)


# Calls whose result is a tensor value rather than a shape: without data they cannot be followed.
_DATA_CALLS = {"item", "tolist", "numpy", "nonzero", "masked_select", "unique", "bincount",
               "argwhere", "unique_consecutive", "__bool__"}


class _ConcreteTracer(torch.fx.Tracer if torch else object):
    """symbolic_trace that also evaluates every node as it records it, so that shapes are plain
    integers (`b, s, h = x.shape` unpacks) and Python control flow takes the branch the example
    takes: the graph is specialised to the example's shapes, which is what a per-micro-batch
    cost graph is anyway. With `fake` (a FakeTensorMode) the evaluation is shape propagation
    only: parameters, buffers and inputs become fake tensors (shapes and dtypes, no storage, no
    arithmetic), so a model of any size traces in seconds and little memory; a forward that
    depends on tensor values raises _NeedsData. Without `fake` it runs on the real tensors.
    It records on every node the path of the module whose forward made it and the shapes of its
    value (node.meta["tensor_meta"]), and treats extra classes (by name) as leaves: by default
    anything named *Norm, so that an RMSNorm is one op rather than pow, mean, rsqrt and mul."""

    def __init__(self, example_inputs, leaf_classes, fake=None):
        super().__init__()
        self.leaf_classes = set(leaf_classes)
        self.scope = []
        self.fake = fake
        self.fakes = {}  # id(real tensor) -> (real tensor, its fake)
        self.pending_inputs = [self._fake(x) for x in example_inputs]
        self.values = {}
        self.evaluating = False

    def _fake(self, x):
        """The fake tensor standing for real (or meta) tensor x, one per tensor; x itself when
        not faking."""
        if self.fake is None or not isinstance(x, torch.Tensor) or \
                isinstance(x, torch._subclasses.FakeTensor):
            return x
        hit = self.fakes.get(id(x))
        if hit is None:
            meta = x.detach().to("meta")
            hit = (x, torch._subclasses.fake_tensor.FakeTensor(self.fake, meta,
                                                                torch.device("cpu")))
            self.fakes[id(x)] = hit
        return hit[1]

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
        return self._fake(x)  # a tensor the forward made outside the trace (a global)

    def create_proxy(self, kind, target, args, kwargs, *rest, **kw):
        proxy = super().create_proxy(kind, target, args, kwargs, *rest, **kw)
        if kind == "output":
            return proxy
        a, k = self._concrete(args), self._concrete(kwargs)
        self.evaluating = True
        try:
            value = self._evaluate(kind, target, a, k)
        except (_NeedsData, ExportError):
            raise
        except Exception as e:
            if self.fake is not None:  # a data-dependent shape, or an op fakes cannot run
                raise _NeedsData("%s %s: %s" % (kind, getattr(target, "__name__", target),
                                                e)) from e
            raise
        finally:
            self.evaluating = False
        self.values[proxy.node] = value
        proxy.node.meta["tensor_meta"] = _meta_of(value)
        return proxy

    def proxy(self, node):
        return _ConcreteProxy(node, self)

    def _evaluate(self, kind, target, a, k):
        if kind == "placeholder":
            if not self.pending_inputs:
                raise ExportError("the model's forward takes more inputs than were given")
            return self.pending_inputs.pop(0)
        if kind == "get_attr":
            value = self.root
            for part in target.split("."):
                value = getattr(value, part)
            return self._fake(value)
        name = target if kind == "call_method" else getattr(target, "__name__", "")
        if self.fake is not None and name in _DATA_CALLS:
            raise _NeedsData("%s needs tensor values" % name)
        with torch.no_grad():
            if self.fake is None:
                return self._call(kind, target, a, k)
            if kind == "call_module":  # its weights are made fake outside the mode
                with self._fake_state(self.root.get_submodule(target)), self.fake:
                    return self._call(kind, target, a, k)
            with self.fake:
                if name == "repeat_interleave":
                    return _repeat_interleave_shape(*a, **k)
                return self._call(kind, target, a, k)

    def _call(self, kind, target, a, k):
        if kind == "call_function":
            return target(*a, **k)
        if kind == "call_method":
            return getattr(a[0], target)(*a[1:], **k)
        return self.root.get_submodule(target)(*a, **k)

    @contextlib.contextmanager
    def _fake_state(self, mod):
        """A leaf module (and its children) with fake parameters and buffers while it runs
        once; the real ones are put back after."""
        saved = []
        try:
            for m in mod.modules():
                for store in (m._parameters, m._buffers):
                    for n, t in list(store.items()):
                        if t is not None:
                            saved.append((store, n, t))
                            store[n] = self._fake(t)
            yield
        finally:
            for store, n, t in saved:
                store[n] = t

    def iter(self, obj):
        value = self._concrete(obj)
        if isinstance(value, (tuple, list)) and \
                not any(isinstance(v, torch.Tensor) for v in value):
            return iter(value)  # a shape: plain integers
        return iter([obj[i] for i in range(len(value))])

    def to_bool(self, obj):
        value = self._concrete(obj)
        if self.fake is not None and isinstance(value, torch.Tensor):
            raise _NeedsData("a Python branch on a tensor's value")
        return bool(value)

    def keys(self, obj):
        return self._concrete(obj).keys()


class _ConcreteProxy(torch.fx.Proxy if torch else object):
    """A proxy whose metadata is its example value's: `x.shape`, `x.size()`, `x.dim()`,
    `x.device`, `x.dtype` are plain values, so they can go into factories (torch.arange(s))
    and arithmetic without becoming nodes. It unpacks (`a, _ = mha(x, x, x)`,
    `rows, cols = torch.where(mask)`) by its value's length: torch.fx's own __iter__ reads the
    caller's bytecode, which Python 3.11 changed ("list index out of range" on torch 1.13)."""
    CONCRETE = ("shape", "size", "dim", "ndim", "device", "dtype", "is_cuda",
                "is_floating_point", "numel")

    def __getattr__(self, k):
        if k in _ConcreteProxy.CONCRETE:
            return getattr(self.tracer.values[self.node], k)
        return super().__getattr__(k)

    def __iter__(self):
        return self.tracer.iter(self)

    def __len__(self):
        return len(self.tracer.values[self.node])


def _trace(model, example_inputs, leaf_classes, fake):
    """The GraphModule of `model` with every node's tensor_meta; fake: shapes only (raises
    _NeedsData where the model needs values)."""
    mode = torch._subclasses.FakeTensorMode() if fake else None
    tracer = _ConcreteTracer(example_inputs, leaf_classes, mode)
    try:
        graph = tracer.trace(model)
    except (ExportError, _NeedsData):
        raise
    except Exception as e:  # torch.fx raises many kinds (TraceError, TypeError, ...)
        if fake:
            raise _NeedsData(str(e)) from e
        raise ExportError("torch.fx cannot trace %s: %s (mark the module that fails as a leaf "
                          "with --leaf CLASS)" % (type(model).__name__, e), 1) from e
    finally:
        tracer.values.clear()
        tracer.fakes.clear()
    gm = torch.fx.GraphModule(tracer.root, graph, type(model).__name__)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise ExportError("the model's forward takes %d inputs, %d example inputs given"
                          % (len(placeholders), len(example_inputs)))
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


def _arg_metas(node, names):
    """The first tensor meta of each of a call's arguments, positional or by keyword, in order
    and with repeats (mha(x, x, x) gives x three times, where all_input_nodes gives it once)."""
    out = []
    for i, key in enumerate(names):
        a = node.args[i] if i < len(node.args) else node.kwargs.get(key)
        m = _metas(a.meta.get("tensor_meta")) if isinstance(a, torch.fx.Node) else []
        out.append(m[0] if m else None)
    return out


def _mha_flops(mod, node):
    """nn.MultiheadAttention: the q, k, v and out projections, the scores and the context."""
    q, k, v = _arg_metas(node, ("query", "key", "value"))
    if q is None or k is None or v is None:
        return None
    e = mod.embed_dim
    if len(q.shape) == 3:
        batch, l_len = (q.shape[0], q.shape[1]) if mod.batch_first else (q.shape[1], q.shape[0])
        s_len = k.shape[1] if mod.batch_first else k.shape[0]
    else:  # unbatched [L, E]
        batch, l_len, s_len = 1, q.shape[0], k.shape[0]
    q_rows, kv_rows = batch * l_len, batch * s_len
    return (2 * q_rows * e * e + 2 * kv_rows * mod.kdim * e + 2 * kv_rows * mod.vdim * e +
            2 * q_rows * e * e + 4 * batch * l_len * s_len * e)


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
    if kind == "attention" and out is not None and mod is not None and \
            hasattr(mod, "embed_dim"):
        return _mha_flops(mod, node)
    if kind == "attention" and out is not None:
        q, k, _ = _arg_metas(node, ("query", "key", "value"))  # (..., L, D), (..., S, D)
        if q is not None and k is not None:
            return 4 * _numel(q.shape) * int(k.shape[-2])
    per = FLOPS_PER_ELEMENT.get(kind, 1)
    if kind == "maxpool" and mod is not None:
        ks = mod.kernel_size
        per = _numel(ks if isinstance(ks, (tuple, list)) else (ks,) * (len(out.shape) - 2))
    if kind == "avgpool" and inp is not None:
        return _numel(inp.shape)
    return per * sum(_numel(m.shape) for m in out_metas)


def _gemm(kind, node, mod, in_metas, out_metas):
    """(m, n, k, batch) of a GEMM-like op, the product _flops counts; None for any other."""
    out = out_metas[0] if out_metas else None
    inp = in_metas[0] if in_metas else None
    if out is None or inp is None or len(out.shape) == 0:
        return None
    if kind == "linear":
        n_in = mod.in_features if mod is not None else int(inp.shape[-1])
        n_out = mod.out_features if mod is not None else int(out.shape[-1])
        return _numel(inp.shape) // max(n_in, 1), n_out, n_in, 1
    if kind == "matmul" and _fn_name(node) in ("matmul", "bmm", "mm", "baddbmm", "addmm"):
        a = in_metas[-2] if _fn_name(node) in ("baddbmm", "addmm") and len(in_metas) >= 3 \
            else inp
        if len(a.shape) < 2 or len(out.shape) < 2:
            return None  # a matrix-vector product: not a GEMM
        return int(out.shape[-2]), int(out.shape[-1]), int(a.shape[-1]), \
            _numel(out.shape[:-2])
    if kind == "conv" and mod is not None:
        g, kk = mod.groups, _numel(mod.kernel_size)
        if mod.transposed:  # per input pixel: Cin/g inputs -> Cout/g x kernel outputs
            return _numel(inp.shape) // mod.in_channels, mod.out_channels // g * kk, \
                mod.in_channels // g, g
        return _numel(out.shape) // mod.out_channels, mod.out_channels // g, \
            mod.in_channels // g * kk, g
    return None


def _is_tensor_node(node):
    return bool(_metas(node.meta.get("tensor_meta")))


def _param_table(gm):
    """Every parameter under each name it is reachable by (a tied weight under several)."""
    params = {}
    for mname, m in gm.named_modules(remove_duplicate=False):
        for pname, p in m._parameters.items():
            if p is not None:
                params[(mname + "." if mname else "") + pname] = p
    return params


def _int_arg(node, pos, key, default):
    v = node.args[pos] if pos < len(node.args) else node.kwargs.get(key, default)
    return v if isinstance(v, int) else None


def _last_dim_split(node):
    """How a linear's output is taken apart along its last dimension by its only user,
    `q, k, v = self.qkv(x).split(h, dim=-1)` (or chunk): [(part meta, [getitem nodes])] in
    order, or None when it is used otherwise."""
    out = _metas(node.meta.get("tensor_meta"))
    users = list(node.users)
    if len(out) != 1 or len(users) != 1:
        return None
    sp = users[0]
    if sp.op not in ("call_method", "call_function") or _fn_name(sp) not in ("split", "chunk") \
            or not sp.args or sp.args[0] is not node:
        return None
    rank = len(out[0].shape)
    dim = _int_arg(sp, 2, "dim", 0)
    parts = _metas(sp.meta.get("tensor_meta"))
    if dim is None or rank == 0 or dim % rank != rank - 1 or len(parts) < 2:
        return None
    takers = [[] for _ in parts]
    for u in sp.users:
        i = u.args[1] if u.op == "call_function" and _fn_name(u) == "getitem" else None
        if not isinstance(i, int) or not -len(parts) <= i < len(parts):
            return None
        takers[i % len(parts)].append(u)
    return [(m, t) for m, t in zip(parts, takers)]


# Attention's head layout. A tensor [b, s, h] viewed as [b, s, a, d] (a heads of d) and
# transposed is labelled by the order of its dimensions, ("b", "a", "s", "d") and so on; an op
# whose output carries such labels is written with the [b, s, a x d] shape that `planfarm
# model` gives the same tensor, so that TAP (which reads an op's inputs as its producers'
# outputs) sees q, k, v, the rotary products and the context as [b, s, h] and the scores as
# [b, a, s, s], and splits them by heads.
HEAD_DIMS = ("b", "s", "a", "d")
TRANSPOSES = {"transpose", "swapaxes", "permute", "movedim"}
RESHAPES = {"view", "reshape", "unflatten"}


def _dims_of(node, n, first):
    """The dims a transpose/permute call names, as non-negative indices of a rank-n tensor."""
    fn = _fn_name(node)
    args = list(node.args[first:])
    if fn == "permute":
        dims = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        dims = dims or node.kwargs.get("dims", ())
        return [d % n for d in dims] if all(isinstance(d, int) for d in dims) else None
    i = args[0] if args else node.kwargs.get("dim0", node.kwargs.get("source"))
    j = args[1] if len(args) > 1 else node.kwargs.get("dim1", node.kwargs.get("destination"))
    if not isinstance(i, int) or not isinstance(j, int):
        return None
    order = list(range(n))
    if fn == "movedim":
        order.insert(j % n, order.pop(i % n))
    else:
        order[i % n], order[j % n] = order[j % n], order[i % n]
    return order


def _view_labels(node, labels, src, out):
    """The head labels of a view's output, from those of its source (None: no labels)."""
    fn = _fn_name(node)
    if labels is None:
        if fn in RESHAPES and len(src) == 3 and len(out) == 4 and tuple(out[:2]) == src[:2] \
                and out[2] * out[3] == src[2]:
            return HEAD_DIMS
        return None
    if len(out) != len(labels):
        return None
    if fn in TRANSPOSES:
        order = _dims_of(node, len(out), 1)
        return tuple(labels[i] for i in order) if order else None
    size = dict(zip(labels, src))
    # anything else keeps them if only the head dimension changed (x[..., :half])
    if all(size[lab] == d for lab, d in zip(labels, out) if lab != "d"):
        return labels
    return None


def _op_labels(kind, node, arg_labels, out):
    """The head labels of a (weightless) op's output, from its inputs': a matmul of the
    probabilities and v gives v's, an elementwise op on a head-laid tensor keeps them; the
    scores (q k^T) have none."""
    if kind == "matmul":
        if len(arg_labels) == 2 and arg_labels[0][0] is None and arg_labels[1][0] is not None:
            lab, shape = arg_labels[1]
            return lab if tuple(out) == tuple(shape) else None
        return None
    for lab, shape in arg_labels:
        if lab is not None and len(shape) == len(out):
            size = dict(zip(lab, shape))
            if all(size[x] == d for x, d in zip(lab, out) if x in ("b", "s")):
                return lab
    return None


def _canonical(labels, shape):
    if labels is None or len(labels) != len(shape):
        return [int(d) for d in shape]
    size = dict(zip(labels, shape))
    return [int(size["b"]), int(size["s"]), int(size["a"] * size["d"])]


class _GraphBuilder:
    """build_graph's state: the ops written so far and what each fx node forwards."""

    def __init__(self, gm, costs):
        self.gm, self.costs = gm, costs
        self.modules = dict(gm.named_modules())
        self.params = _param_table(gm)
        self.live = set()     # nodes that depend on an input or a parameter
        self.source = {}      # node -> the op id its value comes from (None: input, constant)
        self.labels = {}      # node -> head labels of its value (see HEAD_DIMS)
        self.forced = {}      # getitem node of a split linear -> the op of its part
        self.ops, self.counted, self.used_names, self.edges = [], set(), {}, {}

    def op_name(self, base):
        k = self.used_names.get(base, 0)
        self.used_names[base] = k + 1
        return base if k == 0 else "%s_%d" % (base, k)

    def node_bytes(self, node):
        return sum(self.costs.tensor_bytes(m) for m in _metas(node.meta.get("tensor_meta")))

    def count_params(self, mod, inputs):
        """Bytes of the op's parameters not counted before (a tied weight once, by identity),
        and (id, bytes) of every parameter it uses."""
        used = list(mod.parameters()) if mod is not None else []
        used += [self.params[a.target] for a in inputs
                 if a.op == "get_attr" and a.target in self.params]
        elems = 0
        for p in used:
            if id(p) not in self.counted:
                self.counted.add(id(p))
                elems += p.numel()
        return elems * self.costs.float_bytes, \
            [(id(p), p.numel() * self.costs.float_bytes) for p in used]

    def move_shared(self):
        """A parameter several ops use (tied input and output embeddings) is counted on the
        one that computes most with it: the output head, which is what TAP splits (an op
        without param_bytes is not split) and the one Megatron-LM shards."""
        users = {}
        for op in self.ops:
            for pid, nbytes in op.pop("_params", ()):
                users.setdefault(pid, []).append((op["id"], nbytes))
        for uses in users.values():
            ids = list(dict.fromkeys(i for i, _ in uses))
            if len(ids) < 2:
                continue
            best = max(ids, key=lambda i: self.ops[i].get("fwd_flops", 0))  # the first largest
            nbytes = uses[0][1]
            if best != ids[0] and self.ops[ids[0]]["param_bytes"] >= nbytes:
                self.ops[ids[0]]["param_bytes"] -= nbytes
                self.ops[best]["param_bytes"] += nbytes

    def reads(self, tensor_inputs):
        """Per producer op the bytes read from it (capped at its output), and the bytes read
        from the graph's inputs and constants."""
        read_from, graph_in = {}, 0
        for a in dict.fromkeys(tensor_inputs):
            if a.op == "get_attr" and a.target in self.params:
                continue
            b = self.node_bytes(a)
            src = self.source.get(a)
            if src is None:
                graph_in += b
            else:
                read_from[src] = read_from.get(src, 0) + b
        for src in read_from:
            read_from[src] = min(read_from[src], self.ops[src]["_out_bytes"])
        return read_from, graph_in

    def add_op(self, node, name, kind, flops, out_metas, in_metas, read_from, graph_in,
               param_bytes, weight_shape, cls, output_shape, keeps_input=None, in_grad=True,
               weight_read=None, gemm=None):
        costs = self.costs
        out_bytes = sum(costs.tensor_bytes(m) for m in out_metas)
        in_grad_bytes = sum(read_from.values())
        in_bytes = in_grad_bytes + graph_in
        if kind == "embedding":
            moved = 2 * out_bytes + in_bytes  # one row per token
        else:
            moved = in_bytes + out_bytes + param_bytes
        if kind in COMPUTE_BOUND and flops is not None:
            fwd_ms = costs.flops_ms(flops)
        else:
            fwd_ms = max(costs.flops_ms(flops or 0), costs.bytes_ms(moved))
        if keeps_input is None:
            keeps_input = kind in KEEPS_INPUT
        op = {"id": len(self.ops), "name": name, "type": kind,
              "fwd_ms": fwd_ms, "bwd_ms": 2 * fwd_ms,
              "param_bytes": param_bytes,
              "mem_fwd_bytes": out_bytes + (in_bytes if keeps_input else 0),
              "mem_bwd_bytes": out_bytes + (in_grad_bytes if in_grad else 0)}
        if weight_shape:
            op["weight"] = weight_shape
        if in_metas:
            op["input"] = [int(d) for d in in_metas[0].shape]
        if output_shape:
            op["output"] = output_shape
        if flops:
            op["fwd_flops"] = flops
            op["bwd_flops"] = (2 if kind in BWD_FLOPS_2X else 1) * flops
        weights = param_bytes if weight_read is None else weight_read
        op["bytes_read"] = in_bytes + (out_bytes if kind == "embedding" else weights)
        op["bytes_written"] = out_bytes
        if gemm and all(d > 0 for d in gemm):
            op["gemm"] = dict(zip(("m", "n", "k", "batch"), (int(d) for d in gemm)))
        if cls is not None:
            op["module_class"] = cls
        op["_out_bytes"] = out_bytes
        op["_fx_node"] = node.name
        for src, b in read_from.items():
            self.edges[(src, op["id"])] = b
        self.ops.append(op)
        return op["id"]

    def kind_of(self, node, mod):
        if mod is not None:
            cls = type(mod).__name__
            kind = MODULE_TYPES.get(cls)
            if kind is None and cls.endswith("Norm"):
                kind = "layernorm"  # RMSNorm and the like: a per-channel scale over the last dim
            return "folded" if cls in FOLDED_MODULES else (kind or cls.lower())
        fn = _fn_name(node)
        return "folded" if fn in VIEW_FUNCTIONS else FUNCTION_TYPES.get(fn, fn)

    def visit(self, node):
        inputs = node.all_input_nodes
        if node.op == "placeholder":
            self.live.add(node)
            self.source[node] = None
            return
        if node.op == "get_attr":
            if node.target in self.params:
                self.live.add(node)
            self.source[node] = None
            return
        if node.op == "output":
            return
        mod = self.modules.get(node.target) if node.op == "call_module" else None
        if any(a in self.live for a in inputs) or \
                (mod is not None and any(True for _ in mod.parameters())):
            self.live.add(node)  # a module with weights (wpe(arange(s))) computes, even on constants
        kind = self.kind_of(node, mod)
        tensor_inputs = [a for a in inputs if _is_tensor_node(a)]
        out_metas = _metas(node.meta.get("tensor_meta"))
        if node in self.forced:
            self.source[node] = self.forced[node]
            self.labels[node] = None
            return
        if kind == "folded" or node not in self.live or not out_metas:
            # A view forwards the data of its first tensor argument (x.view(...), x.expand_as(y),
            # t[0] of a tuple); constants and non-tensors forward nothing.
            first = tensor_inputs[0] if tensor_inputs else None
            live = node in self.live and first is not None
            self.source[node] = self.source.get(first) if live else None
            src_meta = _metas(first.meta.get("tensor_meta")) if first is not None else []
            self.labels[node] = _view_labels(node, self.labels.get(first), src_meta[0].shape,
                                             out_metas[0].shape) \
                if live and src_meta and len(out_metas) == 1 else None
            return

        # ---- an op ----
        scope = node.meta.get("pf_scope", "")
        base = node.target if mod is not None else \
            ((scope + "." if scope else "") + _fn_name(node))
        in_metas = [m for a in tensor_inputs for m in _metas(a.meta.get("tensor_meta"))]
        param_bytes, uses = self.count_params(mod, inputs)
        weight_shape = _module_weight_shape(mod, kind) if mod is not None else None
        for a in inputs:
            if weight_shape is None and a.op == "get_attr" and a.target in self.params:
                shape = [int(d) for d in self.params[a.target].shape]
                weight_shape = shape[::-1] if kind == "linear" and len(shape) == 2 else shape
        read_from, graph_in = self.reads(tensor_inputs)
        flops = _flops(kind, node, mod, in_metas, out_metas)
        cls = type(mod).__name__ if mod is not None else None
        split = _last_dim_split(node) if kind == "linear" and weight_shape and \
            len(weight_shape) == 2 else None
        if split:
            self.split_linear(node, base, split, flops, in_metas, read_from, graph_in,
                              param_bytes, weight_shape, cls)
            return
        weighted = param_bytes > 0 or weight_shape is not None or \
            kind in ("linear", "embedding", "conv", "attention") and mod is not None
        labels = None
        if not weighted and len(out_metas) == 1:
            arg_labels = [(self.labels.get(a), _metas(a.meta.get("tensor_meta"))[0].shape)
                          for a in tensor_inputs]
            labels = _op_labels(kind, node, arg_labels, out_metas[0].shape)
        self.labels[node] = labels
        output = _canonical(labels, out_metas[0].shape) if out_metas else None
        op_id = self.add_op(node, self.op_name(base), kind, flops, out_metas, in_metas,
                            read_from, graph_in, param_bytes, weight_shape, cls, output,
                            weight_read=sum(n for _, n in uses),
                            gemm=_gemm(kind, node, mod, in_metas, out_metas))
        self.ops[op_id]["_params"] = uses
        node.meta["pf_op"] = op_id
        self.source[node] = op_id

    def split_linear(self, node, base, split, flops, in_metas, read_from, graph_in,
                     param_bytes, weight_shape, cls):
        """A linear whose output is split along its last dimension (a fused QKV projection)
        as one linear op per part, named NAME.q, NAME.k, NAME.v (three parts) or NAME.partI:
        what `planfarm model` writes and TAP splits by heads. FLOPs, parameters and outputs
        are shared out by the parts' widths; the first part keeps the input for the backward
        and computes the input's gradient (the fused op does each once)."""
        total = sum(m.shape[-1] for m, _ in split)
        names = ("q", "k", "v") if len(split) == 3 else \
            tuple("part%d" % i for i in range(len(split)))
        name = self.op_name(base)
        first = None
        rows = _numel(in_metas[0].shape) // max(weight_shape[0], 1) if in_metas else 0
        for i, (meta, takers) in enumerate(split):
            width = meta.shape[-1]
            share = width / total
            op_id = self.add_op(
                node, "%s.%s" % (name, names[i]), "linear",
                None if flops is None else int(round(flops * share)), [meta], in_metas,
                dict(read_from), graph_in,
                int(round(param_bytes * share)) if i < len(split) - 1 else
                param_bytes - sum(int(round(param_bytes * m.shape[-1] / total))
                                  for m, _ in split[:-1]),
                [weight_shape[0], width], cls, [int(d) for d in meta.shape],
                keeps_input=i == 0 and "linear" in KEEPS_INPUT, in_grad=i == 0,
                gemm=(rows, int(width), weight_shape[0], 1))
            if first is None:
                first = op_id
                node.meta["pf_op"] = op_id
            for g in takers:
                self.forced[g] = op_id
        self.source[node] = first
        self.labels[node] = None


def build_graph(gm, costs, name, microbatch):
    """The planfarm graph (a dict) of a traced GraphModule (every node with tensor_meta)."""
    b = _GraphBuilder(gm, costs)
    for node in gm.graph.nodes:
        b.visit(node)
    if not b.ops:
        raise ExportError("the traced model has no op that computes on its inputs")
    b.move_shared()
    for op in b.ops:
        del op["_out_bytes"]  # _fx_node stays for measure(); export() drops it
    return {"version": 2, "name": name, "microbatch": microbatch, "ops": b.ops,
            "edges": [{"src": s, "dst": d, "bytes": n} for (s, d), n in sorted(b.edges.items())],
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
    by_node = {}  # a split linear's parts share their node: timed once, shared by FLOPs
    for op in graph["ops"]:
        by_node.setdefault(op["_fx_node"], []).append(op)
    for fx_name, node_ops in by_node.items():
        node = nodes[fx_name]
        args, kwargs = env[node]

        def forward(a=args, k=kwargs, n=node):
            return getattr(interp, n.op)(n.target, a, k)

        with torch.no_grad():
            fwd = timed(forward)

        def leaf(x):
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                return x.detach().requires_grad_(True)
            return x
        g_args = torch.fx.node.map_aggregate(args, leaf)
        g_kwargs = torch.fx.node.map_aggregate(kwargs, leaf)
        outs = [o for o in _flatten(forward(g_args, g_kwargs))
                if isinstance(o, torch.Tensor) and o.requires_grad]
        bwd = 0.0
        if outs:
            grads = [torch.ones_like(o) for o in outs]

            def backward(a=g_args, k=g_kwargs, g=grads):
                o = [t for t in _flatten(forward(a, k))
                     if isinstance(t, torch.Tensor) and t.requires_grad]
                torch.autograd.backward(o, g)
            # backward alone = (forward + backward) - forward
            bwd = max(timed(backward) - fwd, 0.0)
            gm.zero_grad(set_to_none=True)
        total = sum(op.get("fwd_flops", 0) for op in node_ops)
        for op in node_ops:
            share = op.get("fwd_flops", 0) / total if total else 1.0 / len(node_ops)
            op["fwd_ms"], op["bwd_ms"] = fwd * share, bwd * share
    graph["exporter"]["measured"] = True
    graph["exporter"]["device"] = torch.cuda.get_device_name()
    return True


def _flatten(x):
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in _flatten(e)]
    if isinstance(x, dict):
        return [y for e in x.values() for y in _flatten(e)]
    return [x]


def _has_meta_params(model):
    return any(t.device.type == "meta" for t in list(model.parameters()) + list(model.buffers()))


# Hugging Face model types built of Llama's block: RMSNorm, rotary positions, SwiGLU, no biases.
_LLAMA_LIKE = ("llama", "mistral", "mixtral", "qwen2")


def _config_int(cfg, *names):
    """The first of `names` that cfg has as a positive integer, else None."""
    for n in names:
        v = getattr(cfg, n, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def model_metadata(model, example_inputs):
    """The graph's "model" object (DESIGN.md "Files", model metadata; planner/ir/arch.h), which
    `planfarm export megatron` turns into Megatron-LM's model flags, from the configuration the
    model carries as `model.config`: a Hugging Face one (num_hidden_layers, hidden_size,
    num_attention_heads, num_key_value_heads, intermediate_size, vocab_size, model_type,
    hidden_act, tie_word_embeddings) or nanoGPT's GPTConfig (n_layer, n_embd, n_head,
    vocab_size, bias; nanoGPT ties its head to the embedding). `seq` is the traced sequence,
    the second dimension of an integer first input. None when there is no such configuration
    (export then says which flags to add) or it names no layers, width and heads."""
    cfg = getattr(model, "config", None)
    layers = _config_int(cfg, "num_hidden_layers", "n_layer")
    hidden = _config_int(cfg, "hidden_size", "n_embd")
    heads = _config_int(cfg, "num_attention_heads", "n_head")
    if cfg is None or not (layers and hidden and heads) or hidden % heads:
        return None
    model_type = getattr(cfg, "model_type", None)
    kind = model_type if isinstance(model_type, str) and model_type else type(model).__name__
    meta = {"kind": kind.lower()[:31], "layers": layers, "hidden": hidden, "heads": heads}
    kv = _config_int(cfg, "num_key_value_heads")
    if kv and kv <= heads and heads % kv == 0:
        meta["kv_heads"] = kv
    for key, names in (("ffn_hidden", ("intermediate_size", "n_inner")),
                       ("vocab", ("vocab_size",))):
        v = _config_int(cfg, *names)
        if v:
            meta[key] = v
    first = example_inputs[0] if example_inputs else None
    if isinstance(first, torch.Tensor) and first.dim() == 2 and not first.is_floating_point():
        meta["seq"] = int(first.shape[1])
    if meta["kind"] in _LLAMA_LIKE:
        meta.update(activation="swiglu", norm="rmsnorm", positions="rope", bias=False)
    elif hasattr(cfg, "n_layer") or meta["kind"] == "gpt2":
        meta.update(activation="gelu", norm="layernorm", positions="learned")
        if isinstance(getattr(cfg, "bias", None), bool):
            meta["bias"] = cfg.bias
    tied = getattr(cfg, "tie_word_embeddings", True if hasattr(cfg, "n_layer") else None)
    if isinstance(tied, bool):
        meta["tied_embeddings"] = tied
    return meta


def export(model, example_inputs, path=None, *, name=None, microbatch=None, dtype="fp16",
           tflops=125.0, efficiency=0.5, hbm_gbps=900.0, measure_cuda=False, warmup=3,
           repeat=10, leaf_classes=(), trace="auto"):
    """Traces `model` on `example_inputs` (a tensor or a tuple of them) and returns the planfarm
    graph as a dict; writes it to `path` as well when one is given ("-" = stdout). Device
    defaults are `planfarm model`'s (a V100: 125 TFLOP/s, efficiency 0.5, 900 GB/s).
    trace: "fake" propagates shapes only (fake tensors: no arithmetic, no activation memory;
    the model's parameters may be on the meta device), "real" runs the model once on the
    example inputs on the CPU, "auto" (default) fakes and runs for real only a model whose
    forward depends on tensor values (routing by x[mask], .item(), branches on values).
    Raises ExportError with the reason when the model cannot be traced or the options are bad,
    _NeedsData under "fake" when the model needs real tensors."""
    if torch is None:
        raise ExportError("torch is not importable (Debian: apt-get install python3-torch)")
    if trace not in ("auto", "fake", "real"):
        raise ExportError("trace: %r is not auto, fake or real" % (trace,))
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    costs = _Costs(dtype, tflops, efficiency, hbm_gbps)
    if microbatch is None:
        first = example_inputs[0] if example_inputs else None
        microbatch = int(first.shape[0]) if isinstance(first, torch.Tensor) and first.dim() else 1
    if microbatch < 1:
        raise ExportError("--microbatch: %d is not positive" % microbatch)
    if measure_cuda and _has_meta_params(model):
        raise ExportError("--measure needs the model's real weights, and they are on the meta "
                          "device")
    gm, traced = None, "fake"
    if trace in ("auto", "fake"):
        try:
            gm = _trace(model, example_inputs, leaf_classes, fake=True)
        except _NeedsData:
            if trace == "fake":
                raise
    if gm is None:
        if _has_meta_params(model):
            raise ExportError("%s depends on tensor values (it cannot be traced by shapes "
                              "alone) and its weights are on the meta device"
                              % type(model).__name__, 1)
        with torch.no_grad():
            gm = _trace(model, example_inputs, leaf_classes, fake=False)
        traced = "real"
    graph = build_graph(gm, costs, name or type(model).__name__, microbatch)
    graph["exporter"]["traced"] = traced
    meta = model_metadata(model, example_inputs)
    if meta:
        graph["model"] = meta
    if measure_cuda:
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


# ---- command line ----

@contextlib.contextmanager
def _meta_parameters():
    """Parameters registered inside the block are moved to the meta device as they are made
    (shapes without storage; their initialisation then costs nothing): a model of any size is
    built in seconds, for tracing by shapes. Buffers stay real (masks, rotary tables)."""
    old = torch.nn.Module.register_parameter

    def register(module, name, param):
        old(module, name, param)
        p = module._parameters.get(name)
        if p is not None and p.device.type != "meta":
            module._parameters[name] = type(p)(p.detach().to("meta"),
                                               requires_grad=p.requires_grad)

    torch.nn.Module.register_parameter = register
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = old


def _resolve_factory(spec, kwargs_json):
    """The object MODULE:FACTORY names and the keyword arguments for it."""
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
        raise ExportError("%s: cannot import: %s: %s" % (mod_name, type(e).__name__, e)) from e
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
    return obj, kwargs


def _build(spec, obj, kwargs, meta):
    """(model, example inputs or None) from the factory; meta: its parameters on the meta
    device. A factory that raises is one error line (exit status 1)."""
    if isinstance(obj, torch.nn.Module):
        return obj, None
    if not callable(obj):
        raise ExportError("%s is a %s, not a callable or an nn.Module" % (spec,
                                                                          type(obj).__name__))
    try:
        with _meta_parameters() if meta else contextlib.nullcontext():
            result = obj(**kwargs)
    except Exception as e:
        if meta:  # it may need real weights (it loads a checkpoint, reads values)
            return _build(spec, obj, kwargs, False)
        raise ExportError("%s raised %s: %s" % (spec, type(e).__name__, e), 1) from e
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
INPUT_SEED = 0


def _id_range(model):
    """Token ids are drawn from [0, the smallest embedding table) (2 without one)."""
    sizes = [m.num_embeddings for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    return min(sizes) if sizes else 2


def _make_inputs(shapes, dtypes, model):
    if not shapes:
        raise ExportError("--input-shape: required (the factory returned no example inputs)")
    if len(dtypes) > len(shapes):
        raise ExportError("--input-dtype: given %d times for %d inputs" % (len(dtypes),
                                                                          len(shapes)))
    gen = torch.Generator().manual_seed(INPUT_SEED)
    inputs = []
    for i, text in enumerate(shapes):
        dims = _parse_shape(text)
        dt = dtypes[i] if i < len(dtypes) else "float"
        if dt not in INPUT_DTYPES:
            raise ExportError("--input-dtype: %r is not one of %s" % (dt, ", ".join(INPUT_DTYPES)))
        t = getattr(torch, INPUT_DTYPES[dt])
        # Integer inputs are token ids, random (fixed seed) so that a model routing by them
        # (mixture of experts) spreads its tokens as real text would, not all to one expert.
        inputs.append(torch.randn(dims, generator=gen) if t.is_floating_point else
                      torch.randint(0, _id_range(model), dims, dtype=t, generator=gen))
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
                    help="float (default, randn), int64 or int32 (token ids: random in [0, the "
                         "smallest embedding's rows), seed 0); per input")
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
        obj, kwargs = _resolve_factory(a.factory, a.kwargs)
        model, inputs = _build(a.factory, obj, kwargs, meta=not a.measure)
        if inputs is None or a.input_shape:
            inputs = _make_inputs(a.input_shape, a.input_dtype, model)
        opts = dict(name=a.name, microbatch=a.microbatch, dtype=a.dtype, tflops=a.tflops,
                    efficiency=a.efficiency, hbm_gbps=a.hbm_gbps, measure_cuda=a.measure,
                    warmup=a.warmup, repeat=a.repeat, leaf_classes=a.leaf)
        try:
            graph = export(model, inputs, a.output, trace="fake", **opts)
        except _NeedsData as why:
            print("torch2planfarm: %s depends on tensor values (%s): running it on the CPU"
                  % (type(model).__name__, str(why).splitlines()[0][:200]), file=sys.stderr)
            if _has_meta_params(model):
                model, inputs2 = _build(a.factory, obj, kwargs, meta=False)
                if not a.input_shape and inputs2 is not None:
                    inputs = inputs2
            graph = export(model, inputs, a.output, trace="real", **opts)
    except ExportError as e:
        print("torch2planfarm: %s" % e, file=sys.stderr)
        return e.status
    print("torch2planfarm: wrote %s (%d ops, %d edges%s) to %s"
          % (graph["name"], len(graph["ops"]), len(graph["edges"]),
             ", measured" if graph["exporter"]["measured"] else
             ", run on the CPU" if graph["exporter"]["traced"] == "real" else "",
             "stdout" if a.output == "-" else a.output), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
