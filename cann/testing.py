"""Test models: the nine light ONNX models and the one weight recipe used by tests and benchmarks.

The light models shipped with the ``onnx`` package (``onnx/backend/test/data/light``) carry real
architectures but constant weights (``ConstantOfShape`` of 0.02), which make outputs degenerate.
:func:`generate_weights` replaces every float weight tensor by seeded random data:

* rank >= 2: normal with std ``1/sqrt(fan_in)``, ``fan_in = prod(shape[1:])``;
* BatchNormalization scale and variance (its inputs 1 and 4): uniform in [0.5, 1.5];
* every other 1-D float tensor: standard normal;
* integer (shape) tensors and float scalars are kept.

Tensors are drawn in a fixed order (initializers in file order, then ``ConstantOfShape`` nodes in
graph order) from ``numpy.random.default_rng(seed)``, so the result is deterministic.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

LIGHT_MODELS = [
    "resnet50",
    "inception_v1",
    "inception_v2",
    "densenet121",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "bvlc_alexnet",
    "zfnet512",
]


def light_model_path(name: str) -> Path:
    """Path of ``light_<name>.onnx`` inside the installed onnx package."""
    if name not in LIGHT_MODELS:
        raise ValueError(f"unknown light model {name!r} (known: {', '.join(LIGHT_MODELS)})")
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"


def _random_weight(rng: np.random.Generator, shape: tuple[int, ...], bn_positive: bool) -> np.ndarray:
    if len(shape) >= 2:
        fan_in = math.prod(shape[1:])
        arr = rng.standard_normal(shape, dtype=np.float32)
        arr *= np.float32(1.0 / math.sqrt(max(fan_in, 1)))
        return arr
    if bn_positive:
        arr = rng.random(shape, dtype=np.float32)
        arr += np.float32(0.5)
        return arr
    return rng.standard_normal(shape, dtype=np.float32)


def generate_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A copy of ``model`` whose float weights are replaced by the documented seeded recipe."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    rng = np.random.default_rng(seed)
    float_types = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE}

    bn_positive: set[str] = set()
    for node in graph.node:
        if node.op_type == "BatchNormalization" and node.domain in ("", "ai.onnx"):
            for i in (1, 4):
                if len(node.input) > i and node.input[i]:
                    bn_positive.add(node.input[i])

    consts = {init.name: init for init in graph.initializer}

    # initializers, in file order
    for init in graph.initializer:
        if init.data_type not in float_types or len(init.dims) == 0:
            continue
        arr = _random_weight(rng, tuple(init.dims), init.name in bn_positive)
        dtype = helper.tensor_dtype_to_np_dtype(init.data_type)
        init.CopyFrom(numpy_helper.from_array(arr.astype(dtype, copy=False), init.name))

    # ConstantOfShape nodes with a constant shape and a float value, in graph order
    keep = []
    new_inits = []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.domain in ("", "ai.onnx") and node.input[0] in consts:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            dt = value.data_type if value is not None else onnx.TensorProto.FLOAT
            if dt in float_types:
                shape = tuple(int(d) for d in numpy_helper.to_array(consts[node.input[0]]).reshape(-1))
                if len(shape) >= 1:
                    arr = _random_weight(rng, shape, node.output[0] in bn_positive)
                    dtype = helper.tensor_dtype_to_np_dtype(dt)
                    new_inits.append(numpy_helper.from_array(arr.astype(dtype, copy=False), node.output[0]))
                    continue
        keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)
    graph.initializer.extend(new_inits)
    if out.ir_version < 4:  # IR < 4: every initializer must also be a graph input
        for t in new_inits:
            graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    # value_info entries of tensors that are now initializers are harmless; keep them
    return out


_PASS_THROUGH = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"}


def softmax_input(model: onnx.ModelProto) -> str | None:
    """The input tensor of the Softmax producing the first graph output (through Reshape & co.)."""
    producers = {o: n for n in model.graph.node for o in n.output if o}
    name = model.graph.output[0].name if model.graph.output else None
    while name in producers:
        node = producers[name]
        if node.op_type == "Softmax":
            return node.input[0]
        if node.op_type not in _PASS_THROUGH:
            return None
        name = node.input[0]
    return None


def _without_large_initializers(model: onnx.ModelProto, limit: int = 4096) -> onnx.ModelProto:
    """A copy for shape inference: large initializers become typed graph inputs (no data copied)."""
    stub = onnx.ModelProto()
    stub.CopyFrom(helper.make_model(helper.make_graph([], "stub", [], []), opset_imports=model.opset_import))
    stub.ir_version = max(model.ir_version, 4)
    g = stub.graph
    g.CopyFrom(helper.make_graph(list(model.graph.node), model.graph.name, [], list(model.graph.output),
                                 value_info=list(model.graph.value_info)))
    declared = set()
    for vi in model.graph.input:
        g.input.append(vi)
        declared.add(vi.name)
    for init in model.graph.initializer:
        if math.prod(init.dims) <= limit:
            g.initializer.append(init)
        elif init.name not in declared:
            g.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    return stub


def expose_logits(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` with the final Softmax's input added as an extra graph output (logits).

    The new output is named as the tensor and typed by ONNX shape inference. Models without a
    final Softmax are returned unchanged (as a copy).
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    logits = softmax_input(out)
    if logits is None or any(o.name == logits for o in out.graph.output):
        return out
    inferred = onnx.shape_inference.infer_shapes(_without_large_initializers(out), data_prop=True)
    vi = next((v for v in (*inferred.graph.value_info, *inferred.graph.input) if v.name == logits), None)
    if vi is None:
        vi = helper.make_tensor_value_info(logits, onnx.TensorProto.FLOAT, None)
    out.graph.output.append(vi)
    return out


def test_model(name: str, seed: int = 0, *, logits: bool = True) -> onnx.ModelProto:
    """``light_<name>`` with generated weights (and the logits exposed as an output)."""
    m = generate_weights(onnx.load(light_model_path(name)), seed)
    return expose_logits(m) if logits else m


test_model.__test__ = False  # type: ignore[attr-defined]  (not a pytest test)


def with_batch(model: onnx.ModelProto, batch: int) -> onnx.ModelProto:
    """A copy of a batch-1 ``model`` at batch ``batch``: dimension 0 of its inputs and outputs, and the
    leading 1 of the shape constants its Reshapes take (the flatten before a classifier), set to
    ``batch``; intermediate shapes are left to shape inference."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in (*m.graph.input, *m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if dims and vi.name not in {i.name for i in m.graph.initializer}:
            dims[0].dim_value = batch
    del m.graph.value_info[:]
    shapes = {n.input[1] for n in m.graph.node if n.op_type == "Reshape" and len(n.input) > 1}
    for t in m.graph.initializer:
        if t.name in shapes:
            a = numpy_helper.to_array(t).copy()
            if a.size and a[0] == 1:
                a[0] = batch
                t.CopyFrom(numpy_helper.from_array(a, t.name))
    return m


def random_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded standard-normal inputs for the model's (non-initializer) inputs."""
    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        feeds[vi.name] = rng.standard_normal(shape, dtype=np.float32).astype(dtype)
    return feeds


def run_onnxruntime(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``model`` on onnxruntime's CPU provider; outputs by name."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, inputs)))


# --- multi-rank runs (issue 15): one MPI rank per simulated device -------------------------------------

MPI_TIMEOUT = 120.0
"""Seconds a multi-rank run may take before it counts as a deadlock (the test fails, CI is not consumed)."""


def mpiexec_path() -> Path:
    """The ``mpiexec`` of the running interpreter's environment (the ``mpich`` wheel puts it in the venv's
    ``bin/``, beside ``python``); a clear error when the environment has none (``pip install -e .``)."""
    import sys

    exe = Path(sys.executable).parent / "mpiexec"
    if not exe.exists():
        raise FileNotFoundError(f"{exe}: no mpiexec beside this python; install the project's dependencies "
                                "(pip install -e .: mpi4py and the mpich wheel)")
    return exe


def run_mpi(ranks: int, args: list[str], *, timeout: float = MPI_TIMEOUT, cwd: str | Path | None = None,
            env: dict[str, str] | None = None):
    """Run ``mpiexec -n ranks ARGS...`` (ARGS: the per-rank command line, e.g. ``[sys.executable, "-c",
    code]``) and return the ``subprocess.CompletedProcess`` (text stdout/stderr).

    MPICH's Hydra oversubscribes by default and runs as root, so ``ranks`` may exceed the cores. The whole
    process group is killed after ``timeout`` seconds and :class:`TimeoutError` is raised (a deadlocked
    exchange fails the test instead of hanging it); a non-zero exit raises :class:`RuntimeError` carrying
    the ranks' stderr."""
    import os
    import signal
    import subprocess

    if ranks < 1:
        raise ValueError(f"ranks: {ranks}, at least 1")
    cmd = [str(mpiexec_path()), "-n", str(ranks), *map(str, args)]
    run_env = dict(os.environ if env is None else env)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            env=run_env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise TimeoutError(f"mpiexec -n {ranks} {' '.join(map(str, args))}: no end after {timeout:g} s "
                           f"(deadlock?); stderr:\n{err[-4000:]}") from None
    if proc.returncode != 0:
        raise RuntimeError(f"mpiexec -n {ranks} {' '.join(map(str, args))}: exit {proc.returncode}; "
                           f"stderr:\n{err[-4000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
