"""Test helpers: hand-built TensorFlow GraphDefs (tensorboard's protobuf classes, no TensorFlow) and a
numpy evaluator of the imported graph dialect, used as an oracle for the importer alone."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
from tensorboard.compat.proto import attr_value_pb2, function_pb2, graph_pb2, tensor_pb2, tensor_shape_pb2

from cann.dialects import graph as g

FILECHECK = str(Path(sys.executable).parent / "filecheck")
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "tf"

DT = {np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.int32): 3, np.dtype(np.int64): 9,
      np.dtype(np.bool_): 10, np.dtype(np.float16): 19}


class Type(int):
    """An attribute value of kind ``type`` (a DataType enum)."""


class Placeholder(str):
    """An attribute value of kind ``placeholder``: a function body's reference to a function attribute."""


class Func:
    """An attribute value of kind ``func``: a function name and its attribute bindings."""

    def __init__(self, name: str, **attrs):
        self.name, self.attrs = name, attrs


def tensor_proto(arr) -> tensor_pb2.TensorProto:
    arr = np.asarray(arr)
    t = tensor_pb2.TensorProto(dtype=DT[arr.dtype])
    for d in arr.shape:
        t.tensor_shape.dim.add().size = d
    t.tensor_content = np.ascontiguousarray(arr).tobytes()
    return t


def attr(v) -> attr_value_pb2.AttrValue:
    a = attr_value_pb2.AttrValue()
    if isinstance(v, Type):
        a.type = int(v)
    elif isinstance(v, Placeholder):
        a.placeholder = str(v)
    elif isinstance(v, Func):
        a.func.name = v.name
        for k, x in v.attrs.items():
            a.func.attr[k].CopyFrom(attr(x))
    elif isinstance(v, bool):
        a.b = v
    elif isinstance(v, int):
        a.i = v
    elif isinstance(v, float):
        a.f = v
    elif isinstance(v, str):
        a.s = v.encode()
    elif isinstance(v, np.ndarray):
        a.tensor.CopyFrom(tensor_proto(v))
    elif isinstance(v, tensor_shape_pb2.TensorShapeProto):
        a.shape.CopyFrom(v)
    elif isinstance(v, (list, tuple)):
        if all(isinstance(x, int) for x in v):
            a.list.i.extend(v)
        elif all(isinstance(x, float) for x in v):
            a.list.f.extend(v)
        else:
            raise TypeError(v)
    else:
        raise TypeError(v)
    return a


class G:
    """A GraphDef under construction: ``g.node(name, op, inputs, **attrs)``; ``g.const``; ``g.ph``."""

    def __init__(self):
        self.gd = graph_pb2.GraphDef()

    def node(self, name, op, inputs=(), **attrs):
        n = self.gd.node.add(name=name, op=op)
        n.input.extend(inputs)
        for k, v in attrs.items():
            n.attr[k].CopyFrom(attr(v))
        return name

    def const(self, name, value, dtype=None):
        arr = np.asarray(value, dtype=dtype)
        if arr.dtype == np.float64 and dtype is None:
            arr = arr.astype(np.float32)
        return self.node(name, "Const", value=arr, dtype=Type(DT[arr.dtype]))

    def ph(self, name, shape, dtype=np.float32):
        s = tensor_shape_pb2.TensorShapeProto()
        if shape is None:
            s.unknown_rank = True
        else:
            for d in shape:
                s.dim.add().size = d
        return self.node(name, "Placeholder", dtype=Type(DT[np.dtype(dtype)]), shape=s)

    def function(self, name, inputs, outputs, ret, attrs=()) -> "G":
        """Add a function to the library and return a ``G`` whose nodes are its body.

        ``inputs`` / ``outputs`` are argument names, or ``(name, {"number_attr": "N", ...})``
        pairs for ``OpDef.ArgDef`` fields; ``ret`` maps output names to body tensors
        (``node:out_arg:index``); ``attrs`` lists ``(name, type)`` or ``(name, type, default)``."""
        f = self.gd.library.function.add()
        f.signature.name = name
        for args, field in ((inputs, f.signature.input_arg), (outputs, f.signature.output_arg)):
            for a in args:
                n, extra = (a, {}) if isinstance(a, str) else (a[0], dict(a[1]))
                field.add(name=n, type=extra.pop("type", 1), **extra)
        for a in attrs:
            d = f.signature.attr.add(name=a[0], type=a[1])
            if len(a) > 2:
                d.default_value.CopyFrom(attr(a[2]))
        for k, v in ret.items():
            f.ret[k] = v
        body = G()
        body.gd = _FunctionBody(f)
        return body

    def bytes(self) -> bytes:
        return self.gd.SerializeToString()


class _FunctionBody:
    """A ``FunctionDef`` seen as a graph for :meth:`G.node`: nodes go to ``node_def``."""

    def __init__(self, f: function_pb2.FunctionDef):
        self.f = f

    @property
    def node(self):
        return self.f.node_def


def filecheck(text: str, checks: str, tmp_path: Path) -> None:
    f = tmp_path / "checks.txt"
    f.write_text(checks)
    r = subprocess.run([FILECHECK, str(f)], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + "\n--- input ---\n" + text


# ---------------------------------------------------------------------------------------------
# numpy evaluation of a graph-dialect module (the importer's oracle; not the compiler's)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _window(x, k, s, p, pad_value):
    n, c, h, w = x.shape
    xp = np.full((n, c, h + p[0] + p[2], w + p[1] + p[3]), pad_value, x.dtype)
    xp[:, :, p[0]:p[0] + h, p[1]:p[1] + w] = x
    ho = (xp.shape[2] - k[0]) // s[0] + 1
    wo = (xp.shape[3] - k[1]) // s[1] + 1
    out = np.empty((n, c, ho, wo, k[0] * k[1]), x.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            out[..., i * k[1] + j] = xp[:, :, i:i + s[0] * ho:s[0], j:j + s[1] * wo:s[1]]
    return out


def _conv(x, w, b, s, p, d, group):
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    ho = (xp.shape[2] - (kh - 1) * d[0] - 1) // s[0] + 1
    wo = (xp.shape[3] - (kw - 1) * d[1] - 1) // s[1] + 1
    y = np.zeros((n, o, ho, wo), np.float64)
    og = o // group
    for gi in range(group):
        xs = xp[:, gi * ci:(gi + 1) * ci]
        ws = w[gi * og:(gi + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * d[0]:i * d[0] + s[0] * ho:s[0], j * d[1]:j * d[1] + s[1] * wo:s[1]]
                y[:, gi * og:(gi + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    return y


def evaluate(module, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``func.func @main`` of a graph-dialect module with numpy (float64)."""
    fn = next(op for op in module.ops if getattr(op, "sym_name", None) and op.sym_name.data == "main")
    block = fn.body.block
    env = {}
    names = [a.data["graph.name"].data for a in fn.arg_attrs.data]
    for arg, n in zip(block.args, names):
        env[arg] = np.asarray(inputs[n], np.float64)
    ints = g._ints
    un = {"graph.relu": lambda x: np.maximum(x, 0), "graph.sigmoid": lambda x: 1 / (1 + np.exp(-x)),
          "graph.tanh": np.tanh, "graph.exp": np.exp, "graph.log": np.log, "graph.sqrt": np.sqrt,
          "graph.reciprocal": lambda x: 1 / x, "graph.abs": np.abs, "graph.neg": np.negative, "graph.erf": _erf,
          "graph.softplus": lambda x: np.logaddexp(0, x), "graph.cast": lambda x: x}
    bi = {"graph.add": np.add, "graph.sub": np.subtract, "graph.mul": np.multiply, "graph.div": np.divide,
          "graph.max": np.maximum, "graph.min": np.minimum, "graph.pow": np.power}
    red = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}
    outs = None
    for op in block.ops:
        a = [env[v] for v in op.operands]
        nm = op.name
        P = op.properties
        f = lambda k: float(P[k].value.data)  # noqa: E731
        if nm == "graph.constant":
            r = np.asarray(g.constant_value(op), np.float64)
        elif nm in un:
            r = un[nm](a[0])
        elif nm == "graph.clip":
            r = np.clip(a[0], f("min"), f("max"))
        elif nm == "graph.elu":
            r = np.where(a[0] > 0, a[0], f("alpha") * (np.exp(a[0]) - 1))
        elif nm == "graph.selu":
            r = f("gamma") * np.where(a[0] > 0, a[0], f("alpha") * (np.exp(a[0]) - 1))
        elif nm == "graph.leaky_relu":
            r = np.where(a[0] > 0, a[0], f("alpha") * a[0])
        elif nm in bi:
            r = bi[nm](a[0], a[1])
        elif nm == "graph.matmul":
            r = np.matmul(a[0], a[1])
        elif nm == "graph.reshape":
            r = a[0].reshape(g._shape(op.results[0]))
        elif nm == "graph.transpose":
            r = np.transpose(a[0], ints(op.perm))
        elif nm == "graph.concat":
            r = np.concatenate(a, axis=op.axis.value.data)
        elif nm == "graph.softmax":
            ax = op.axis.value.data
            e = np.exp(a[0] - a[0].max(axis=ax, keepdims=True))
            r = e / e.sum(axis=ax, keepdims=True)
        elif nm == "graph.reduce":
            r = red[op.kind.data](a[0], axis=ints(op.axes), keepdims=bool(op.keepdims.value.data))
        elif nm == "graph.slice":
            idx = tuple(slice(s, None if (e == -1 and st < 0) else e, st)
                        for s, e, st in zip(ints(op.starts), ints(op.ends), ints(op.steps)))
            r = a[0][idx]
        elif nm == "graph.pad":
            pads = ints(op.pads)
            rk = a[0].ndim
            pw = [(pads[i], pads[i + rk]) for i in range(rk)]
            mode = op.mode.data
            r = np.pad(a[0], pw, constant_values=f("value")) if mode == "constant" else np.pad(a[0], pw, mode=mode)
        elif nm == "graph.batch_norm":
            x, s, b, m, v = a
            sh = (1, -1) + (1,) * (x.ndim - 2)
            r = (x - m.reshape(sh)) / np.sqrt(v.reshape(sh) + f("epsilon")) * s.reshape(sh) + b.reshape(sh)
        elif nm == "graph.conv2d":
            r = _conv(a[0], a[1], a[2] if len(a) > 2 else None, ints(op.strides), ints(op.pads), ints(op.dilations),
                      op.group.value.data)
        elif nm in ("graph.max_pool", "graph.avg_pool"):
            k, s, p = ints(op.kernel_shape), ints(op.strides), ints(op.pads)
            if nm == "graph.max_pool":
                r = _window(a[0], k, s, p, -np.inf).max(-1)
            else:
                win = _window(a[0], k, s, p, np.nan)
                r = np.nanmean(win, -1) if not op.count_include_pad.value.data else np.nan_to_num(win).mean(-1)
        elif nm == "graph.global_avg_pool":
            r = a[0].mean(axis=tuple(range(2, a[0].ndim)), keepdims=True)
        elif nm == "graph.layer_norm":
            ax = op.axis.value.data
            axes = tuple(range(ax, a[0].ndim))
            mu = a[0].mean(axes, keepdims=True)
            var = ((a[0] - mu) ** 2).mean(axes, keepdims=True)
            r = (a[0] - mu) / np.sqrt(var + f("epsilon")) * a[1] + (a[2] if len(a) > 2 else 0)
        elif nm == "func.return":
            outs = a
            break
        else:
            raise NotImplementedError(nm)
        r = np.asarray(r, np.float64)
        assert r.shape == g._shape(op.results[0]), (nm, r.shape, g._shape(op.results[0]))
        env[op.results[0]] = r
    out_names = [a.data["graph.name"].data for a in fn.res_attrs.data]
    return dict(zip(out_names, outs))


def rel_l2(y, r) -> float:
    y, r = np.asarray(y, np.float64).ravel(), np.asarray(r, np.float64).ravel()
    return float(np.linalg.norm(y - r) / max(np.linalg.norm(r), 1e-30))
