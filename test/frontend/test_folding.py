"""Constant folding in the ONNX importer (cann/frontend/onnx_fold.py): every fold keeps the shape and
dtype the operator defines (rank-0 operands included), folds have no size limits of the library that
computes them, and a node that cannot be folded runs as a device kernel.

Reference: onnxruntime (CPU) on the same model; where it has no kernel for a case, the ONNX
reference evaluator (noted per case)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import cann
from cann.dialects.graph import ConstantOp, constant_value
from cann.errors import CannError, Diagnostic
from cann.frontend import onnx_fold
from cann.frontend.onnx import import_onnx
from cann.testing import run_onnxruntime

F32, I64 = np.float32, np.int64


def s(v, dt=F32):
    """A rank-0 tensor."""
    return np.array(v, dt)


def _const_model(op, inputs: dict, attrs: dict, opset: int, n_out: int = 1, domain: str = "") -> onnx.ModelProto:
    """One ``op`` node whose inputs are all initializers; its outputs are the graph outputs."""
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, list(inputs), outs, domain=domain, **attrs)
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in inputs.items() if v is not None]
    g = helper.make_graph([node], "fold", [], [helper.make_value_info(o, onnx.TypeProto()) for o in outs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True).graph
    types = {vi.name: vi.type for vi in (*inferred.output, *inferred.value_info)}
    for o in m.graph.output:
        o.type.CopyFrom(types[o.name])
    return m


def _folded(m: onnx.ModelProto) -> list[np.ndarray]:
    """The graph outputs as the importer folded them (each a ``graph.constant`` returned by main)."""
    module = import_onnx(m)
    ret = [op for op in module.walk() if op.name == "func.return"][0]
    vals = []
    for v in ret.operands:
        assert isinstance(v.owner, ConstantOp), f"{v.owner.name} is not folded"
        vals.append(np.asarray(constant_value(v.owner)))
    return vals


def _reference(m: onnx.ModelProto, oracle: str) -> list[np.ndarray]:
    if oracle == "ort":
        out = run_onnxruntime(m, {})
        return [np.asarray(out[o.name]) for o in m.graph.output]
    from onnx.reference import ReferenceEvaluator

    return [np.asarray(r) for r in ReferenceEvaluator(m).run(None, {})]


def _assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    else:
        np.testing.assert_array_equal(got, want)


_U = lambda op, x=0.5, **a: (op, {"x": s(x)}, a, 18)  # noqa: E731  (a float unary op on a scalar)
_B = lambda op, a, b, **at: (op, {"a": a, "b": b}, at, 18)  # noqa: E731

# (op, inputs, attributes, opset[, outputs, oracle]); every input rank 0 or the output rank 0
RANK0_CASES = [
    *(_U(op) for op in ("Abs", "Acos", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Cos", "Cosh", "Erf", "Exp", "Floor",
                        "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN", "Log", "Neg", "Reciprocal", "Relu",
                        "Round", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Tan", "Tanh",
                        "Mish")),
    _U("Acosh", 1.5), _U("Elu", -0.5, alpha=0.7), _U("Selu", -0.5), _U("Celu", -0.5, alpha=2.0),
    _U("LeakyRelu", -0.5, alpha=0.1), _U("ThresholdedRelu", 1.5, alpha=1.0), _U("Shrink", 1.5, lambd=0.5, bias=0.1),
    ("Gelu", {"x": s(0.5)}, {"approximate": "tanh"}, 20),
    ("Abs", {"x": s(-3, I64)}, {}, 18), ("Neg", {"x": s(3, np.int32)}, {}, 18), ("Sign", {"x": s(-3, I64)}, {}, 18),
    ("Not", {"x": s(True, np.bool_)}, {}, 18), ("BitwiseNot", {"x": s(5, np.int32)}, {}, 18),
    ("Dropout", {"x": s(0.5)}, {}, 18),
    *(_B(op, s(7.0), s(2.0)) for op in ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less", "Greater",
                                        "LessOrEqual", "GreaterOrEqual", "PRelu")),
    *(_B(op, s(7, I64), s(2, I64)) for op in ("Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less")),
    _B("Mod", s(-7, I64), s(3, I64)), _B("Mod", s(-7.5), s(2.0), fmod=1),
    _B("Add", s(1, I64), np.array([1, 2, 3], I64)), _B("Mul", np.ones((2, 1), F32), s(3.0)),
    *(_B(op, s(True, np.bool_), s(False, np.bool_)) for op in ("And", "Or", "Xor")),
    *(_B(op, s(12, np.int32), s(10, np.int32)) for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")),
    _B("BitShift", s(3, np.uint32), s(2, np.uint32), direction="LEFT"),
    ("Sum", {"a": s(1.0), "b": s(2.0), "c": s(4.0)}, {}, 18), ("Mean", {"a": s(1.0), "b": s(2.0)}, {}, 18),
    ("Max", {"a": s(1.0)}, {}, 18),
    ("Clip", {"x": s(5.0), "lo": s(0.0), "hi": s(3.0)}, {}, 18),
    ("Where", {"c": s(True, np.bool_), "a": s(1, I64), "b": s(2, I64)}, {}, 18),
    ("Where", {"c": np.array([True, False]), "a": s(1.0), "b": s(2.0)}, {}, 18),
    ("Cast", {"x": s(3, I64)}, {"to": T.FLOAT}, 18), ("Cast", {"x": s(2.7)}, {"to": T.INT32}, 18),
    ("Cast", {"x": s(1.5)}, {"to": T.FLOAT16}, 18),
    ("CastLike", {"x": s(3, I64), "like": np.zeros(2, np.float16)}, {}, 18),
    ("Shape", {"x": s(1.0)}, {}, 18), ("Size", {"x": s(1.0)}, {}, 18), ("Size", {"x": np.zeros((2, 3))}, {}, 18),
    ("Unsqueeze", {"x": s(4, I64), "axes": np.array([0], I64)}, {}, 18),
    ("Unsqueeze", {"x": s(4, I64)}, {"axes": [0, 1]}, 11),
    ("Squeeze", {"x": np.array([4], I64)}, {}, 18), ("Squeeze", {"x": np.array([[4.0]], F32), "axes": np.array([0, 1])}, {}, 18),
    ("Reshape", {"x": s(4.0), "shape": np.array([1, 1], I64)}, {}, 18),
    ("Reshape", {"x": np.array([4.0], F32), "shape": np.zeros(0, I64)}, {}, 18),
    ("Expand", {"x": s(4, I64), "shape": np.array([2, 3], I64)}, {}, 18),
    ("Range", {"a": s(1, I64), "b": s(7, I64), "c": s(2, I64)}, {}, 18),
    ("Range", {"a": s(0.0), "b": s(1.0), "c": s(0.25)}, {}, 18),
    ("Gather", {"x": np.arange(4, dtype=I64), "i": s(2, I64)}, {}, 18),
    ("Gather", {"x": np.arange(8.0, dtype=F32).reshape(2, 4), "i": s(-1, I64)}, {"axis": 1}, 18),
    ("GatherElements", {"x": np.arange(4.0, dtype=F32), "i": np.array([3, 0], I64)}, {}, 18),
    ("ConstantOfShape", {"shape": np.zeros(0, I64)}, {"value": numpy_helper.from_array(np.array([7], I64))}, 18),
    ("ConstantOfShape", {"shape": np.zeros(0, I64)}, {}, 18),
    ("Constant", {}, {"value_float": 2.5}, 18), ("Constant", {}, {"value_int": 3}, 18),
    ("Constant", {}, {"value": numpy_helper.from_array(s(2, I64))}, 18),
    ("Constant", {}, {"value_ints": [3]}, 18),
    *(("Reduce" + k, {"x": np.array([1.0, 2.0, 4.0], F32)}, {"keepdims": 0}, 18)
      for k in ("Sum", "Max", "Min", "Mean", "Prod", "L1", "L2", "LogSumExp", "SumSquare", "LogSum")),
    ("ReduceSum", {"x": np.array([1, 2, 4], I64)}, {"keepdims": 0}, 18),
    ("ReduceMax", {"x": s(3.0)}, {"keepdims": 0}, 18),
    ("ArgMax", {"x": np.array([1.0, 4.0, 2.0], F32)}, {"keepdims": 0}, 18),
    ("ArgMin", {"x": np.array([1.0, 4.0, 2.0], F32)}, {"keepdims": 0}, 18),
    ("MatMul", {"a": np.array([1.0, 2.0], F32), "b": np.array([3.0, 4.0], F32)}, {}, 18),
    ("Einsum", {"a": np.array([1.0, 2.0], F32), "b": np.array([3.0, 4.0], F32)}, {"equation": "i,i->"}, 18),
    ("Einsum", {"a": s(2.0), "b": s(3.0)}, {"equation": ",->"}, 18),
    ("Det", {"x": np.array([[2.0, 1.0], [1.0, 3.0]], F32)}, {}, 18),
    ("CumSum", {"x": np.array([1.0, 2.0, 4.0], F32), "axis": s(0, I64)}, {}, 18),
    ("OneHot", {"i": np.array([2], I64), "d": s(4, I64), "v": np.array([0.0, 1.0], F32)}, {}, 18),
    ("Concat", {"a": np.array([1], I64), "b": np.array([2, 3], I64)}, {"axis": 0}, 18),
    ("Slice", {"x": np.arange(6, dtype=I64), "st": np.array([-1], I64), "en": np.array([6], I64)}, {}, 18),
    ("Tile", {"x": np.array([1.0, 2.0], F32), "r": np.array([2], I64)}, {}, 18),
    ("Split", {"x": np.arange(4, dtype=I64), "sp": np.array([1, 3], I64)}, {}, 18, 2),
    ("TopK", {"x": np.array([1.0, 4.0, 2.0], F32), "k": np.array([1], I64)}, {}, 18, 2),
    # the spec's output is (rank(X), nonzeros) = (0, 1); onnxruntime 1.32 gives (1, 1)
    ("NonZero", {"x": s(3.0)}, {}, 18, 1, "ref"),
    ("Trilu", {"x": np.ones((2, 2), F32), "k": s(1, I64)}, {}, 18),
]


def _case_id(c) -> str:
    return c[0] + "-" + "-".join(f"{np.asarray(v).dtype}{list(np.shape(v))}" for v in c[1].values())


@pytest.mark.parametrize("case", RANK0_CASES, ids=[_case_id(c) for c in RANK0_CASES])
def test_fold_keeps_shape_and_dtype(case):
    op, inputs, attrs, opset, *rest = case
    n_out, oracle = (rest + [1, "ort"][len(rest):])[:2]
    m = _const_model(op, inputs, attrs, opset, n_out)
    want = _reference(m, oracle)
    got = _folded(m)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        _assert_same(a, b)


def test_every_numpy_fold_is_in_the_table():
    assert set(onnx_fold.NUMPY_FOLDS) <= {c[0] for c in RANK0_CASES + LARGE_CASES}


# -- the small graphs of the issue, end to end in both precision modes ---------------------------


def _scalar(name, v, dt=T.INT64):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, dt, [], [v]))


def _model(nodes, inputs, outputs, opset=18, inits=None):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, sh) for n, t, sh in inputs],
                          [helper.make_tensor_value_info(n, t, sh) for n, t, sh in outputs],
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m, full_check=True)
    return m


def _gather_softmax():
    # indices = Add(1, 1) folds to a rank-0 2: Gather(axis=0) gives shape (8,), softmax over the 8 values
    return _model([_scalar("a", 1), _scalar("b", 1), helper.make_node("Add", ["a", "b"], ["i"]),
                   helper.make_node("Gather", ["x", "i"], ["g"], axis=0),
                   helper.make_node("Softmax", ["g"], ["y"], axis=0)],
                  [("x", T.FLOAT, [4, 8])], [("y", T.FLOAT, [8]), ("g", T.FLOAT, [8])])


def _gather_reduce():
    return _model([_scalar("a", 1), _scalar("b", 1), helper.make_node("Add", ["a", "b"], ["i"]),
                   helper.make_node("Gather", ["x", "i"], ["g"], axis=0),
                   helper.make_node("ReduceSum", ["g", "ax"], ["y"], keepdims=0)],
                  [("x", T.FLOAT, [4, 8])], [("y", T.FLOAT, [])], inits={"ax": np.array([0], I64)})


def _pads_from_scalars():
    # pads = Concat([0, 1], Unsqueeze(scalar 1), Unsqueeze(scalar 2)) = [0, 1, 1, 2] on a [3, 5] input
    nodes = [_scalar("p0", 1), _scalar("p1", 2)]
    nodes += [helper.make_node("Unsqueeze", [f"p{i}", "ax"], [f"u{i}"]) for i in range(2)]
    nodes += [helper.make_node("Concat", ["begin", "u0", "u1"], ["pads"], axis=0),
              helper.make_node("Pad", ["x", "pads"], ["y"], mode="constant")]
    return _model(nodes, [("x", T.FLOAT, [3, 5])], [("y", T.FLOAT, [4, 8])],
                  inits={"ax": np.array([0], I64), "begin": np.array([0, 1], I64)})


def _shape_concat():
    # Swin's TorchScript export: Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]) as a Reshape target
    nodes = [helper.make_node("Shape", ["x"], ["sh"]), _scalar("zero", 0),
             helper.make_node("Gather", ["sh", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "m1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    return _model(nodes, [("x", T.FLOAT, [2, 3, 4])], [("y", T.FLOAT, [2, 12])],
                  inits={"ax": np.array([0], I64), "m1": np.array([-1], I64)})


@pytest.mark.parametrize("precision_mode", ["force_fp16", "must_keep_origin_dtype"])
@pytest.mark.parametrize("make", [_gather_softmax, _gather_reduce, _pads_from_scalars, _shape_concat])
def test_scalar_folds_end_to_end(make, precision_mode):
    m = make()
    x = np.random.default_rng(0).standard_normal(tuple(d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim),
                                                 dtype=np.float32)
    want = run_onnxruntime(m, {"x": x})
    got = cann.compile(m, precision_mode=precision_mode).run({"x": x})
    tol = 1e-2 if precision_mode == "force_fp16" else 1e-5
    for k, w in want.items():
        assert got[k].shape == w.shape and got[k].dtype == w.dtype
        assert np.linalg.norm(got[k] - w) <= tol * np.linalg.norm(w), k


# -- no size limits of the library that computes a fold ------------------------------------------

LARGE_CASES = [
    ("GatherElements", {"x": np.zeros((1, n), I64), "i": np.arange(8, dtype=I64).reshape(1, 8)}, {"axis": 1}, 18)
    for n in (63, 64, 1000)
] + [
    ("GatherElements", {"x": np.arange(300.0, dtype=F32).reshape(3, 100),
                        "i": np.random.default_rng(1).integers(-100, 100, (2, 7))}, {"axis": 1}, 18),
    ("GatherElements", {"x": np.arange(300.0, dtype=F32).reshape(100, 3),
                        "i": np.random.default_rng(2).integers(0, 100, (5, 3))}, {"axis": 0}, 18),
    ("GatherND", {"x": np.arange(2 * 100 * 3, dtype=F32).reshape(2, 100, 3),
                  "i": np.random.default_rng(3).integers(0, 100, (2, 50, 1))}, {"batch_dims": 1}, 18),
    ("GatherND", {"x": np.arange(20000, dtype=I64).reshape(200, 100),
                  "i": np.random.default_rng(4).integers(-100, 100, (30, 2))}, {}, 18),
    ("ScatterND", {"x": np.zeros((300, 4), F32), "i": np.arange(0, 300, 3, dtype=I64).reshape(100, 1),
                   "u": np.ones((100, 4), F32)}, {}, 18),
    ("ScatterND", {"x": np.zeros(100, F32), "i": np.array([[3], [3], [-1]], I64),
                   "u": np.array([1.0, 2.0, 5.0], F32)}, {"reduction": "add"}, 18),
    ("ScatterElements", {"x": np.zeros((2, 100), F32), "i": np.array([[99, 0, 5], [1, 1, -1]], I64),
                         "u": np.arange(6.0, dtype=F32).reshape(2, 3)}, {"axis": 1}, 18),
    ("ScatterElements", {"x": np.ones((2, 100), F32), "i": np.array([[9, 9, 5], [1, 1, 1]], I64),
                         "u": np.arange(2.0, 8.0, dtype=F32).reshape(2, 3)}, {"axis": 1, "reduction": "mul"}, 18),
    ("ScatterElements", {"x": np.ones((3, 2), F32), "i": np.array([[2, 0]], I64),
                         "u": np.array([[5.0, 6.0]], F32)}, {"axis": 0, "reduction": "max"}, 18),
    ("Scatter", {"x": np.zeros((2, 100), F32), "i": np.array([[99, 0], [-1, 7]], I64),
                 "u": np.array([[1.0, 2.0], [3.0, 4.0]], F32)}, {"axis": 1}, 10),
    ("GatherND", {"x": np.arange(1000.0, dtype=F32), "i": np.array([[999], [-1], [0]], I64)}, {}, 18),
]


@pytest.mark.parametrize("case", LARGE_CASES, ids=[_case_id(c) for c in LARGE_CASES])
def test_numpy_folds_any_size(case):
    op, inputs, attrs, opset = case
    m = _const_model(op, inputs, attrs, opset)
    (want,) = _reference(m, "ort")
    (got,) = _folded(m)
    _assert_same(got, want)


@pytest.mark.parametrize("n", [63, 64, 4096])
def test_token_type_embedding_path(n):
    # BERT's token-type path: GatherElements over a constant int64 row of n zeros, then a Gather from a table
    m = _model([helper.make_node("GatherElements", ["ids", "pos"], ["tt"], axis=1),
                helper.make_node("Gather", ["table", "tt"], ["e"], axis=0),
                helper.make_node("Add", ["x", "e"], ["y"])],
               [("x", T.FLOAT, [1, 8, 4])], [("y", T.FLOAT, [1, 8, 4])],
               inits={"ids": np.zeros((1, n), I64), "pos": np.arange(8, dtype=I64).reshape(1, 8),
                      "table": np.random.default_rng(0).standard_normal((2, 4)).astype(F32)})
    x = np.random.default_rng(1).standard_normal((1, 8, 4), dtype=np.float32)
    want = run_onnxruntime(m, {"x": x})["y"]
    got = cann.compile(m, precision_mode="must_keep_origin_dtype").run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_unfoldable_node_runs_as_a_device_kernel(monkeypatch):
    # a fold that cannot be computed at compile time (here: the evaluator fails) is a kernel, not an error
    def fail(*a, **k):
        raise RuntimeError("evaluator out of memory")

    monkeypatch.setattr(onnx_fold, "_reference", fail)
    m = _model([helper.make_node("Mul", ["w", "w"], ["w2"]), helper.make_node("Add", ["x", "w2"], ["y"])],
               [("x", T.FLOAT, [2, 3])], [("y", T.FLOAT, [2, 3])], inits={"w": np.arange(6.0, dtype=F32).reshape(2, 3)})
    module = import_onnx(m)
    assert [op.name for op in module.walk()][2:] == ["graph.constant", "graph.mul", "graph.add", "func.return"]
    x = np.random.default_rng(0).standard_normal((2, 3), dtype=np.float32)
    got = cann.compile(m, precision_mode="must_keep_origin_dtype").run({"x": x})["y"]
    np.testing.assert_allclose(got, run_onnxruntime(m, {"x": x})["y"], rtol=1e-6)


def test_unfoldable_node_without_kernel_is_one_error(monkeypatch):
    def fail(*a, **k):
        raise RuntimeError("evaluator out of memory\nsecond line")

    monkeypatch.setattr(onnx_fold, "_reference", fail)
    m = _model([helper.make_node("EyeLike", ["w"], ["e"], name="eye"), helper.make_node("Add", ["x", "e"], ["y"])],
               [("x", T.FLOAT, [3, 3])], [("y", T.FLOAT, [3, 3])], inits={"w": np.ones((3, 3), F32)})
    with pytest.raises(CannError) as e:
        import_onnx(m)
    assert e.value.lines() == ["error: eye: cannot evaluate constant EyeLike (opset 18): evaluator out of memory"]


def test_constant_node_neither_foldable_nor_a_kernel_reports_the_fold_failure():
    # Range(0, 10, 0) has no defined length: no fold, and Range has no kernel (its shape is its value)
    m = _model([helper.make_node("Range", ["a", "b", "c"], ["r"], name="rng"),
                helper.make_node("Cast", ["r"], ["rf"], to=T.FLOAT),
                helper.make_node("ReduceSum", ["rf"], ["s"], keepdims=1), helper.make_node("Add", ["x", "s"], ["y"])],
               [("x", T.FLOAT, [1])], [("y", T.FLOAT, [1])], inits={"a": s(0, I64), "b": s(10, I64), "c": s(0, I64)})
    with pytest.raises(CannError) as e:
        import_onnx(m)
    assert e.value.lines() == ["error: rng: cannot evaluate constant Range (opset 18): division by zero"]


def test_constant_dropout_in_training_mode_is_not_folded_to_its_input():
    # training_mode = True makes Dropout random: no compile-time value (inference mode forwards x)
    m = _model([helper.make_node("Dropout", ["w", "r", "tm"], ["d"], name="drop"), helper.make_node("Add", ["x", "d"], ["y"])],
               [("x", T.FLOAT, [4])], [("y", T.FLOAT, [4])],
               inits={"w": np.ones(4, F32), "r": s(0.5), "tm": s(True, np.bool_)})
    with pytest.raises(CannError) as e:
        import_onnx(m)
    assert e.value.lines() == ["error: drop: cannot evaluate constant Dropout (opset 18): Dropout in training mode is random"]
    m.graph.initializer[2].CopyFrom(numpy_helper.from_array(s(False, np.bool_), "tm"))
    (c,) = [op for op in import_onnx(m).walk() if isinstance(op, ConstantOp)]
    np.testing.assert_array_equal(constant_value(c), np.ones(4, F32))


# -- a constant the compiler needs, computed from model inputs by foldable nodes -----------------


def _window_model():
    # HannWindow(size): its function body computes Range(0, Cast(size)) - the Range needs a constant
    return _model([helper.make_node("HannWindow", ["n"], ["y"], name="win")], [("n", T.INT32, [])], [("y", T.FLOAT, [10])],
                  opset=17)


def test_needed_constant_names_the_model_input_behind_it():
    with pytest.raises(CannError) as e:
        import_onnx(_window_model())
    # the message names the body's tensor, as the node sees it; needs_constant the model input whose
    # value makes it a constant (what cann.backend specializes on)
    assert e.value.diagnostics == [Diagnostic("win/Range_16", "Range with a non-constant input 'win/Periodic_Size_FP' "
                                                              "(data-dependent shape)", ("n",))]


def test_backend_specializes_on_the_model_input_behind_a_needed_constant():
    import cann.backend as backend
    from onnx.reference import ReferenceEvaluator

    m = _window_model()
    (got,) = backend.prepare(m).run([np.array(10, np.int32)])
    (want,) = ReferenceEvaluator(m).run(None, {"n": np.array(10, np.int32)})
    assert got.shape == want.shape == (10,) and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


# -- If with a constant condition: the selected branch is imported in its place ------------------


def _if_model(size_is: int, runtime_cond: bool = False):
    """y = If(Size(x) == size_is) then Relu(x) * w else If(Shape(x)[0] == 3) then -x else x; w an
    initializer of the then branch, x read from the outer scope by both branches."""
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "w"], ["t"])],
                               "then", [], [helper.make_tensor_value_info("t", T.FLOAT, [3, 4])],
                               [numpy_helper.from_array(np.arange(4, dtype=F32), "w")])
    inner_then = helper.make_graph([helper.make_node("Neg", ["x"], ["ng"])], "neg", [],
                                   [helper.make_tensor_value_info("ng", T.FLOAT, [3, 4])])
    inner_else = helper.make_graph([helper.make_node("Identity", ["x"], ["i"])], "id", [],
                                   [helper.make_tensor_value_info("i", T.FLOAT, [3, 4])])
    else_g = helper.make_graph([helper.make_node("Shape", ["x"], ["sh"]),
                                helper.make_node("Gather", ["sh", "zero"], ["d0"], axis=0),
                                helper.make_node("Equal", ["d0", "three"], ["c2"]),
                                helper.make_node("If", ["c2"], ["e"], then_branch=inner_then, else_branch=inner_else)],
                               "else", [], [helper.make_tensor_value_info("e", T.FLOAT, [3, 4])])
    nodes = [helper.make_node("Size", ["x"], ["n"]), helper.make_node("Equal", ["n", "k"], ["c"]),
             helper.make_node("If", ["cr" if runtime_cond else "c"], ["y"], name="if", then_branch=then_g,
                              else_branch=else_g)]
    inputs = [("x", T.FLOAT, [3, 4])] + ([("cr", T.BOOL, [])] if runtime_cond else [])
    return _model(nodes, inputs, [("y", T.FLOAT, [3, 4])],
                  inits={"k": s(size_is, I64), "zero": s(0, I64), "three": s(3, I64)})


@pytest.mark.parametrize("precision_mode", ["force_fp16", "must_keep_origin_dtype"])
@pytest.mark.parametrize("size_is", [12, 5])  # the then branch; the else branch and its nested If
def test_if_with_a_constant_condition_is_its_branch(size_is, precision_mode):
    m = _if_model(size_is)
    ops = {op.name for op in import_onnx(m).walk()}
    assert ("graph.relu" in ops) == (size_is == 12) and ("graph.neg" in ops) == (size_is != 12)
    x = np.random.default_rng(0).standard_normal((3, 4), dtype=np.float32)
    want = run_onnxruntime(m, {"x": x})["y"]
    got = cann.compile(m, precision_mode=precision_mode).run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-3 if precision_mode == "force_fp16" else 1e-6, atol=1e-3)


def test_if_with_a_runtime_condition_is_unsupported():
    with pytest.raises(CannError) as e:
        import_onnx(_if_model(12, runtime_cond=True))
    assert e.value.lines() == ["error: if: unsupported operator If (opset 18)"]
