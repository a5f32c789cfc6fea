"""Mixed programming (cann.op, @cann.jit): results against onnxruntime, the signature cache in
memory and on disk, errors located at the user's line."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import cann
import cann.compiler
from cann.mixed_cache import CACHE
from cann.testing import run_onnxruntime

TOLERANCE = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}
ROOT = Path(__file__).resolve().parent.parent


def rel_l2(y: np.ndarray, r: np.ndarray) -> float:
    return float(np.linalg.norm((y.astype(np.float64) - r).ravel()) / max(np.linalg.norm(r.ravel()), 1e-30))


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Each test: its own disk cache, an empty memory cache and a compile counter."""
    monkeypatch.setenv("CANN_CACHE_DIR", str(tmp_path / "cache"))
    CACHE.clear()
    yield tmp_path / "cache" / "mixed"
    CACHE.clear()


@pytest.fixture
def compiles(monkeypatch):
    """A list that grows by one per call of cann.compile."""
    calls = []
    real = cann.compiler.compile

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cann.compiler, "compile", counting)
    return calls


def reference(op_type: str, *inputs: np.ndarray, n_out: int = 1, **attrs) -> list[np.ndarray]:
    """onnxruntime's result of a one-node model (built here, independently of cann.mixed)."""
    names = [f"i{k}" for k in range(len(inputs))]
    outs = [f"o{k}" for k in range(n_out)]
    node = helper.make_node(op_type, names, outs, **attrs)
    graph = helper.make_graph([node], "ref", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                                                             a.shape) for n, a in zip(names, inputs)],
                              [helper.make_value_info(o, onnx.TypeProto()) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", onnx.defs.onnx_opset_version())])
    ref = run_onnxruntime(model, dict(zip(names, inputs)))
    return [ref[o] for o in outs]


def line_of(marker: str) -> int:
    """The line number in this file of the line that contains ``marker`` (in a comment)."""
    lines = Path(__file__).read_text().splitlines()
    return next(i + 1 for i, ln in enumerate(lines) if marker in ln and "line_of" not in ln)


RNG = np.random.default_rng(0)
X = RNG.standard_normal((1, 3, 10, 10), dtype=np.float32)
W = (RNG.standard_normal((8, 3, 3, 3)) / np.sqrt(27)).astype(np.float32)
B = RNG.standard_normal(8).astype(np.float32)
A = RNG.standard_normal((2, 24, 40), dtype=np.float32)
M = (RNG.standard_normal((40, 16)) / np.sqrt(40)).astype(np.float32)

CASES = {
    "relu": ("Relu", (X,), {}),
    "add_broadcast": ("Add", (X, RNG.standard_normal((3, 1, 1), dtype=np.float32)), {}),
    "conv_strided": ("Conv", (X, W, B), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "matmul": ("MatMul", (A, M), {}),
    "softmax": ("Softmax", (A,), {"axis": -1}),
}


@pytest.mark.parametrize("precision_mode", list(TOLERANCE))
@pytest.mark.parametrize("case", list(CASES))
def test_op_matches_onnxruntime(case, precision_mode):
    op_type, inputs, attrs = CASES[case]
    y = cann.op(op_type, *inputs, precision_mode=precision_mode, **attrs)
    (r,) = reference(op_type, *inputs, **attrs)
    assert y.shape == r.shape and y.dtype == r.dtype
    assert rel_l2(y, r) <= TOLERANCE[precision_mode], case
    assert cann.last_run().cycles > 0


def test_op_multiple_outputs_are_a_tuple():
    exact = "must_keep_origin_dtype"  # data movement: exact in fp32 (force_fp16 rounds to float16)
    parts = cann.op("Split", X, axis=1, num_outputs=3, precision_mode=exact)
    assert isinstance(parts, tuple) and len(parts) == 3
    for got, want in zip(parts, reference("Split", X, n_out=3, axis=1, num_outputs=3)):
        np.testing.assert_array_equal(got, want)
    a, b = cann.op("Split", X, np.array([1, 2]), axis=1, precision_mode=exact)  # the split input's length: two outputs
    np.testing.assert_array_equal(a, X[:, :1])
    np.testing.assert_array_equal(b, X[:, 1:])


def test_op_python_values_and_constant_operands():
    y = cann.op("Reshape", X, [3, -1], precision_mode="must_keep_origin_dtype")  # list -> int64 constant
    np.testing.assert_array_equal(y, X.reshape(3, -1))
    z = cann.op("LeakyRelu", X, alpha=1, precision_mode="must_keep_origin_dtype")  # int -> the float attribute
    np.testing.assert_array_equal(z, X)


def test_op_second_call_does_not_recompile(compiles):
    cann.op("Relu", X)
    first = len(compiles)
    assert first == 1 and CACHE.info.compiles == 1
    cann.op("Relu", X + 1)  # other values, same signature
    assert len(compiles) == first and CACHE.info.memory_hits == 1
    cann.op("Relu", X[:, :2])  # another shape
    cann.op("Relu", X, precision_mode="must_keep_origin_dtype")  # another precision mode
    assert len(compiles) == first + 2


def test_op_constant_operands_are_part_of_the_signature(compiles):
    attrs = {"pads": [1, 1, 1, 1]}
    y1 = cann.op("Conv", X, W, precision_mode="must_keep_origin_dtype", **attrs)
    n = len(compiles)  # the first compile finds that W must be a constant, the second compiles it in
    assert n == 2
    y2 = cann.op("Conv", X, 2 * W, precision_mode="must_keep_origin_dtype", **attrs)
    assert len(compiles) == n + 1  # a new weight value: compiled again (constants known now: once)
    np.testing.assert_allclose(y2, 2 * y1, rtol=1e-5, atol=1e-5)
    cann.op("Conv", X * 3, W, precision_mode="must_keep_origin_dtype", **attrs)
    assert len(compiles) == n + 1  # X is a runtime input: no compile


def test_disk_cache_after_clearing_memory(compiles, cache_dir):
    y = cann.op("Conv", X, W, B, pads=[1, 1, 1, 1])
    assert sorted(p.suffix for p in cache_dir.iterdir()) == [".json", ".om"]
    n = len(compiles)
    CACHE.clear()
    y2 = cann.op("Conv", X, W, B, pads=[1, 1, 1, 1])
    assert len(compiles) == n and CACHE.info.disk_hits == 1 and CACHE.info.compiles == 0
    np.testing.assert_array_equal(y, y2)


SCRIPT = """
import numpy as np, cann
from cann.mixed_cache import CACHE
x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 12
y = cann.op("Relu", x)
@cann.jit
def f(a):
    return cann.op("Sigmoid", a) * a
z = f(x)
assert (y == np.maximum(x, 0)).all()
print(CACHE.info.compiles, CACHE.info.disk_hits)
"""


def test_disk_cache_in_a_fresh_process(cache_dir):
    def run():
        env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}
        r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
        return r.stdout.split()

    assert run() == ["2", "0"]
    assert run() == ["0", "2"]  # cann.op and @cann.jit from disk: nothing compiled


def test_corrupt_disk_entry_is_recompiled(compiles, cache_dir):
    y = cann.op("Softmax", A, axis=-1)
    (om,) = cache_dir.glob("*.om")
    data = om.read_bytes()
    om.write_bytes(data[: len(data) // 2])  # truncated
    CACHE.clear()
    n = len(compiles)
    y2 = cann.op("Softmax", A, axis=-1)
    assert len(compiles) == n + 1 and CACHE.info.disk_hits == 0
    np.testing.assert_array_equal(y, y2)
    assert om.read_bytes() == data  # rewritten: the same bytes (deterministic compile)
    CACHE.clear()
    cann.op("Softmax", A, axis=-1)
    assert CACHE.info.disk_hits == 1


def test_unwritable_cache_warns_once_and_runs(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("CANN_CACHE_DIR", str(blocker))  # a file: the mixed/ folder cannot be made
    monkeypatch.setattr(CACHE, "_warned", False)
    with pytest.warns(cann.CannWarning, match="cannot write the compile cache") as record:
        y = cann.op("Relu", X)  # cache: warned here
        cann.op("Relu", X[0])
    assert len(record) == 1 and record[0].filename == __file__ and record[0].lineno == line_of("# cache: warned here")
    np.testing.assert_array_equal(y, np.maximum(X.astype(np.float16), 0).astype(np.float32))


def test_disk_cache_off(monkeypatch, cache_dir):
    monkeypatch.setenv("CANN_CACHE_DIR", "")
    cann.op("Relu", X)
    assert not cache_dir.exists()


@pytest.mark.parametrize("call,message", [
    (lambda: cann.op("Cnov", X, W), "Cnov: unknown ONNX operator in domain 'ai.onnx' at opset {opset} "
                                    "(did you mean Conv?)"),
    (lambda: cann.op("Conv", X, W, stride=[2, 2]), "Conv: unknown attribute 'stride' (known: auto_pad, dilations, "
                                                   "group, kernel_shape, pads, strides)"),
    (lambda: cann.op("Conv", X, W, strides=2.5), "Conv: attribute strides=2.5 is not a list of ints"),
    (lambda: cann.op("Relu", X, X), "Relu takes 1 input, got 2"),
    (lambda: cann.op("Conv", X), "Conv takes 2 to 3 inputs, got 1"),
    (lambda: cann.op("Conv", X, W, strides=[2, 2, 2]), "Conv: Attribute strides has incorrect size "
                                                         f"(inputs: {X.shape} float32, {W.shape} float32)"),
    (lambda: cann.op("Split", X, axis=1), "Split: has a variable number of outputs: pass outputs=N"),
    (lambda: cann.op("Relu", "x"), "Relu: input 0 has type str, not an array"),
    (lambda: cann.op("Cast", X), "Cast: missing required attribute 'to'"),
    (lambda: cann.op("TopK", X, np.array([2])), "unsupported operator TopK (opset {opset})"),
    (lambda: cann.op("Relu", X.astype(np.float64)), "Relu: dtype float64 is not supported on the AI Core"),
    # was "Add: Incompatible dimensions" alone: onnx's message does not say of what
    (lambda: cann.op("Add", X, W), f"Add: Incompatible dimensions (inputs: {X.shape} float32, {W.shape} float32)"),
])
def test_op_errors_name_the_op_at_the_callers_line(call, message):
    with pytest.raises(cann.CannError) as e:
        call()
    where = f"{__file__}:{call.__code__.co_firstlineno}"  # the line of the cann.op call
    assert e.value.lines() == [f"error: {where}: {message.format(opset=onnx.defs.onnx_opset_version())}"]


# ---------------------------------------------------------------------------------------------
# @cann.jit


@cann.jit(precision_mode="must_keep_origin_dtype")
def conv_block(x, w, b, scale):
    y = cann.op("Relu", cann.op("Conv", x, w, b, pads=[1, 1, 1, 1]))
    return cann.op("GlobalAveragePool", y) * scale, y


def test_jit_matches_onnxruntime_and_compiles_once(compiles):
    pooled, y = conv_block(X, W, B, 0.5)
    model = conv_block.to_onnx(X, W, B, 0.5)
    assert [n.op_type for n in model.graph.node] == ["Conv", "Relu", "GlobalAveragePool", "Mul"]
    ref = run_onnxruntime(model, {"x": X, "w": W, "b": B})
    for got, out in zip((pooled, y), model.graph.output):
        assert got.shape == ref[out.name].shape
        assert rel_l2(got, ref[out.name]) <= TOLERANCE["must_keep_origin_dtype"]
    assert conv_block.traces == 1 and conv_block.profile is conv_block.last_run
    assert len(conv_block.last_run.kernels) >= 1
    n = len(compiles)
    conv_block(X * 2, W, B, 0.5)
    assert len(compiles) == n and conv_block.traces == 1  # same signature: no trace, no compile
    conv_block(X[:, :, :6], W, B, 0.5)  # another shape: traced and compiled again
    assert conv_block.traces == 2 and len(compiles) > n


def test_jit_fuses_the_whole_function():
    @cann.jit
    def f(x, w):
        return cann.op("Relu", cann.op("Conv", x, w, pads=[1, 1, 1, 1]))

    y = f(X, W)
    assert rel_l2(y, np.maximum(reference("Conv", X, W, pads=[1, 1, 1, 1])[0], 0)) <= TOLERANCE["force_fp16"]
    eager = cann.op("Relu", cann.op("Conv", X, W, pads=[1, 1, 1, 1]))
    assert rel_l2(y, eager) <= TOLERANCE["force_fp16"]
    names = [k.name for k in f.last_run.kernels]
    assert names == ["trans_data_0", "conv2d_0", "trans_data_1"]  # the Relu runs in the Conv kernel (UB fusion)
    unfused = cann.jit(opt_level=0)(f.__wrapped__)
    unfused(X, W)
    assert [k.name for k in unfused.last_run.kernels] == ["trans_data_0", "conv2d_0", "relu_0", "trans_data_1"]
    assert unfused.last_run.cycles > f.last_run.cycles


def test_jit_static_arguments_are_keyed_by_value():
    @cann.jit(precision_mode="must_keep_origin_dtype")
    def f(x, consts, mode):
        return cann.op("Add", x, consts[0]) if mode == "add" else cann.op("Mul", x, consts[0])

    big = np.zeros((24, 40), np.float32)  # repr() summarizes it: the key must not
    other = big.copy()
    other[12, 20] = 1
    np.testing.assert_array_equal(f(A, [big], "add"), A)
    np.testing.assert_array_equal(f(A, [other], "add"), A + other)
    np.testing.assert_array_equal(f(A, [other], "mul"), A * other)
    assert f.traces == 3
    f(A, [other.copy()], "mul")
    assert f.traces == 3


def test_jit_function_called_while_tracing_is_inlined():
    @cann.jit
    def inner(a):
        return cann.op("Relu", a)

    @cann.jit
    def outer(a):
        return inner(a) * 2

    y = outer(A)
    assert [n.op_type for n in outer.to_onnx(A).graph.node] == ["Relu", "Mul"]
    assert inner.traces == 0 and outer.traces == 1
    assert rel_l2(y, 2 * np.maximum(A, 0)) <= TOLERANCE["force_fp16"]


def test_jit_errors_point_at_the_users_line():
    @cann.jit
    def f(x):
        y = cann.op("Relu", x)
        return cann.op("TopK", y, np.array([2]))  # jit: unsupported

    with pytest.raises(cann.CannError) as e:
        f(X)
    assert e.value.lines() == [f"error: {__file__}:{line_of('# jit: unsupported')}: unsupported operator TopK "
                               f"(opset {onnx.defs.onnx_opset_version()})"]

    @cann.jit
    def g(x):
        y = cann.op("Relu", x)
        if y > 0:  # jit: no value
            return y

    with pytest.raises(cann.CannError) as e:
        g(X)
    assert e.value.lines()[0].startswith(f"error: {__file__}:{line_of('# jit: no value')}: traced value 'Greater_0'")

    @cann.jit
    def h(x):
        return x.sum()  # jit: numpy

    with pytest.raises(cann.CannError, match=f"{line_of('# jit: numpy')}: traced value 'x' has no attribute 'sum'"):
        h(X)

    @cann.jit
    def k(x):
        return np.tanh(x)  # jit: ufunc

    with pytest.raises(cann.CannError, match=f"{line_of('# jit: ufunc')}: traced value 'x' .* has no value while"):
        k(X)


@pytest.fixture(scope="module")
def script_module(tmp_path_factory):
    """onnxscript functions need their source in a file: written and imported here."""
    d = tmp_path_factory.mktemp("scripts")
    (d / "scripts_mixed.py").write_text(textwrap.dedent("""\
        from onnxscript import script, opset18 as op

        @script()
        def inner(x):
            return op.Relu(x)

        @script()
        def block(x, y, alpha: float = 0.5):
            z = op.Add(x, inner(y))
            return op.LeakyRelu(z * op.Sigmoid(z), alpha=alpha)

        @script()
        def bad(x):
            a = op.Relu(x)
            return op.MatMul(a, a)  # line 15
        """))
    sys.path.insert(0, str(d))
    import scripts_mixed

    yield scripts_mixed, d / "scripts_mixed.py"
    sys.path.remove(str(d))


def test_jit_onnxscript_function(script_module, compiles):
    mod, _ = script_module
    block = cann.jit(precision_mode="must_keep_origin_dtype")(mod.block)
    x, y = A[0], A[1]
    out = block(x, y, alpha=0.25)
    model = block.to_onnx(x, y, alpha=0.25)
    assert {n.op_type for n in model.graph.node} >= {"Relu", "Add", "Sigmoid", "Mul", "LeakyRelu"}  # inlined
    (ref,) = run_onnxruntime(model, {"x": x, "y": y}).values()
    assert rel_l2(out, ref) <= TOLERANCE["must_keep_origin_dtype"]
    z = x + np.maximum(y, 0)
    s = z / (1 + np.exp(-z))
    assert rel_l2(out, np.where(s > 0, s, 0.25 * s)) <= TOLERANCE["must_keep_origin_dtype"]
    n = len(compiles)
    block(x * 2, y, alpha=0.25)
    assert len(compiles) == n and block.traces == 1
    block(x, y)  # the attribute's default: another signature
    assert block.traces == 2


def test_jit_onnxscript_error_points_at_the_statement(script_module):
    mod, path = script_module
    with pytest.raises(cann.CannError) as e:
        cann.jit(mod.bad)(A[0])
    assert e.value.lines() == [f"error: {path}:15: MatMul: Incompatible dimensions for matrix multiplication"]


def readme_blocks() -> list[str]:
    """The ```python blocks of the README's "Mixed programming" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Mixed programming\n", 1)[1].split("\n## ", 1)[0]
    return [b.split("\n", 1)[1] for b in section.split("```python")[1:] for b in [b.split("```", 1)[0]]]


def test_readme_examples_run_as_pasted_and_match_onnxruntime(tmp_path, compiles):
    import runpy

    blocks = readme_blocks()
    assert len(blocks) == 3
    script = tmp_path / "readme_mixed.py"  # a file: onnxscript reads its functions' source
    script.write_text("\n".join(blocks))
    ns = runpy.run_path(str(script), run_name="readme")
    x, w, b = ns["x"], ns["w"], ns["b"]
    (conv,) = reference("Conv", x, w, b, strides=[2, 2], pads=[1, 1, 1, 1])
    assert rel_l2(ns["y"], conv) <= TOLERANCE["force_fp16"]
    assert [p.shape for p in ns["parts"]] == [(1, 4, 8, 8)] * 2
    head = ns["head"]
    assert head.traces == 1  # the second call, same signature: no trace, no compile
    (ref,) = run_onnxruntime(head.to_onnx(2 * x, w, b), {"x": 2 * x, "w": w, "b": b}).values()
    assert rel_l2(ns["probs"], ref) <= TOLERANCE["must_keep_origin_dtype"]
    swish = ns["swish"]
    (ref,) = run_onnxruntime(swish.to_onnx(x, alpha=1.5), {"x": x}).values()
    assert rel_l2(swish(x, alpha=1.5), ref) <= TOLERANCE["force_fp16"]
    n = len(compiles)
    head(x, w, b), swish(x, alpha=1.5)
    assert len(compiles) == n


def test_bad_options_are_located_at_the_call():
    with pytest.raises(cann.CannError) as e:
        cann.op("Relu", X, precision_mode="fp8")  # options: op
    assert e.value.lines() == [f"error: {__file__}:{line_of('# options: op')}: --precision_mode: unknown precision "
                               "mode 'fp8' (known: force_fp16, allow_fp32_to_fp16, must_keep_origin_dtype, force_fp32, allow_mix_precision)"]
    with pytest.raises(cann.CannError) as e:
        cann.jit(soc_version="Ascend999")  # options: jit
    assert e.value.lines()[0].startswith(f"error: {__file__}:{line_of('# options: jit')}: --soc_version: unknown SoC")


def test_op_opset_and_domain():
    old = cann.op("Split", X, axis=1, split=[1, 2], opset=11, precision_mode="must_keep_origin_dtype")  # attribute
    assert [p.shape for p in old] == [(1, 1, 10, 10), (1, 2, 10, 10)]
    np.testing.assert_array_equal(old[1], X[:, 1:])
    with pytest.raises(cann.CannError, match="Relu: opset='18' is not an opset version"):
        cann.op("Relu", X, opset="18")
    with pytest.raises(cann.CannError, match="Relu: unknown ONNX operator in domain 'com.example' at opset 1"):
        cann.op("Relu", X, domain="com.example")


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_op_resize_by_scales(mode):
    # the scales input decides the output shape: its values are given to shape inference (found by a
    # new user: "shape inference left the shape of tensor 'Y' unknown") and compiled in
    x = RNG.standard_normal((1, 2, 6, 6), dtype=np.float32)
    scales = np.array([1, 1, 2, 2], np.float32)
    y = cann.op("Resize", x, None, scales, mode=mode, precision_mode="must_keep_origin_dtype")
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode=mode)
    graph = helper.make_graph([node], "ref", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
                              [helper.make_value_info("y", onnx.TypeProto())],
                              [onnx.numpy_helper.from_array(scales, "s")])
    ref = run_onnxruntime(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), {"x": x})["y"]
    assert y.shape == ref.shape == (1, 2, 12, 12)
    assert rel_l2(y, ref) <= TOLERANCE["must_keep_origin_dtype"]
