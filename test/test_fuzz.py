"""Fuzzing: mutated ``.om`` files and mutated small ONNX models end as a result or as one clean
:class:`cann.CannError` (through ``cann-run``: exit 0, or exit 2 with one ``error:`` line) -- never
another exception, never a hang.

Seeded and deterministic (the same cases every run); each case runs under a time budget
(:data:`CASE_SECONDS`, a SIGALRM timer) and simulations under a small instruction budget
(:data:`SIM_BUDGET`). The ``.om`` mutations: byte flips and truncations (caught by the checksum),
re-signed byte edits (the checksum passes, the parser is reached) and field edits (every header,
tensor, kernel, launch and instruction field set to boundary values, instructions dropped,
duplicated, or wrapped in loops), encoded past the writer's validation and re-signed. The ONNX
mutations: attributes, input/output shapes and dtypes, initializers (dims, dtypes, data) and edges
(dangling, self loops, swapped, dropped outputs, changed op types).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import random
import signal
import struct
import traceback
from dataclasses import replace
from unittest import mock

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cann
from cann.codegen import om as omfmt
from cann.errors import CannError
from cann.hw import isa
from cann.sim.executor import run_model

SEED = 10
CASE_SECONDS = 20  # per case: a case over it is a hang
SIM_BUDGET = 20_000  # max_instructions of every simulation
MAX_ARENA = 64 << 20  # simulate only models whose arena is at most this (a legal 30 GiB arena is slow to fill)

# mutated models overflow, divide by zero, ...: the warnings are outcomes, not failures
pytestmark = pytest.mark.filterwarnings("ignore::cann.errors.CannWarning")

INTERESTING = (0, 1, -1, 2, 3, 7, 16, 31, 32, 33, 255, 256, 4096, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1,
               2**32, 2**40, 2**62, 2**63 - 1, -2**63)


class Hang(Exception):
    pass


@contextlib.contextmanager
def time_budget(case: str):
    def alarm(signum, frame):
        raise Hang(f"{case}: still running after {CASE_SECONDS} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class Outcomes:
    """Counts results and clean errors; records anything else (with the case that produced it)."""

    def __init__(self):
        self.counts = {"result": 0, "error": 0}
        self.bad: list[str] = []

    def run(self, case: str, fn) -> None:
        try:
            with time_budget(case):
                fn()
            self.counts["result"] += 1
        except CannError as e:
            lines = e.lines()
            if not lines or any("\n" in ln or not ln.startswith("error: ") for ln in lines):
                self.bad.append(f"{case}: malformed diagnostic {lines!r}")
            self.counts["error"] += 1
        except Exception as e:  # noqa: BLE001 - exactly what the fuzzer looks for
            tb = traceback.extract_tb(e.__traceback__)[-1]
            self.bad.append(f"{case}: {type(e).__name__}: {str(e)[:200]} (at {tb.filename}:{tb.lineno})")

    def check(self) -> None:
        assert not self.bad, f"{len(self.bad)} cases failed:\n" + "\n".join(self.bad[:15])


def _inputs(tensors, rng: np.random.Generator) -> dict[str, np.ndarray] | None:
    """Random inputs of the declared shapes and dtypes; None when they would be large."""
    out = {}
    for t in tensors:
        shape = tuple(t.shape)
        if any(d < 0 for d in shape) or int(np.prod(shape, dtype=object)) > 1 << 20:
            return None
        dt = np.dtype(t.dtype)
        if dt.kind == "f":
            out[t.name] = rng.standard_normal(shape).astype(dt)
        elif dt.kind in "iu":
            out[t.name] = rng.integers(0, 4, size=shape).astype(dt)
        else:
            out[t.name] = rng.random(shape) < 0.5
    return out


def _sign(body: bytes) -> bytes:
    return body + hashlib.sha256(body).digest()


# ---------------------------------------------------------------------------------------------
# .om files


def _base_onnx() -> onnx.ModelProto:
    """Conv (SPMD over cores, hardware loops over a batch of 2) + Relu + MaxPool + Gemm + Softmax."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) / 5).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    g = numpy_helper.from_array((rng.standard_normal((128, 10)) / 11).astype(np.float32), "g")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "g"], ["logits"], name="fc"),
             helper.make_node("Softmax", ["logits"], ["prob"], name="softmax", axis=1)]
    graph = helper.make_graph(nodes, "base", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
                              [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [2, 10])],
                              initializer=[w, b, g])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def base_om() -> tuple[bytes, omfmt.OfflineModel]:
    model = cann.compile(_base_onnx())
    data = omfmt.encode_om(model.om)
    return data, omfmt.decode_om(data)


def _encode_unchecked(m: omfmt.OfflineModel) -> bytes:
    """The bytes of ``m`` as another tool might write them: past the writer's validation."""
    with mock.patch.object(omfmt, "validate", lambda *a, **k: None):
        return omfmt.encode_om(m)


def _mutate_code(rnd: random.Random, code: bytes) -> bytes:
    try:
        prog = isa.decode(code)
        kind = rnd.randrange(6)
    except ValueError:  # already mutated into something undecodable: cut it
        prog, kind = [], 5
    if kind == 0 and prog:  # a field to a boundary value
        i = rnd.randrange(len(prog))
        ins = prog[i]
        if ins.values:
            f = rnd.randrange(len(ins.values))
            v = list(ins.values)
            if ins.defn.fields[f].kind == "f":
                v[f] = rnd.choice([float("nan"), float("inf"), -float("inf"), 1e300, -0.0, 65504.0 * 2])
            else:
                v[f] = rnd.choice([*INTERESTING, v[f] + 1, v[f] - 1, v[f] * 2, -v[f]])
            prog[i] = isa.Instr(ins.defn, tuple(v))
    elif kind == 1 and prog:  # drop an instruction
        del prog[rnd.randrange(len(prog))]
    elif kind == 2 and prog:  # duplicate one
        i = rnd.randrange(len(prog))
        prog.insert(i, prog[i])
    elif kind == 3 and prog:  # wrap a stretch in a hardware loop
        i = rnd.randrange(len(prog))
        j = rnd.randrange(i, len(prog) + 1)
        count = rnd.choice([0, 1, 2, 3, 1000, 2**20, 2**40, -1])
        prog[i:j] = [isa.make("loop_begin", count=count), *prog[i:j], isa.make("loop_end")]
    elif kind == 4:  # random raw bytes appended
        return code + bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 40)))
    else:  # cut
        return code[: rnd.randrange(len(code) + 1)]
    return isa.encode(prog)


def _mutate_model(rnd: random.Random, m: omfmt.OfflineModel) -> omfmt.OfflineModel:
    kind = rnd.randrange(10)
    pick = rnd.choice
    if kind == 0:
        return replace(m, gm_size=pick([0, 1, m.gm_size - 1, m.gm_size + 64, 2**33, 2**35, 2**63, 2**64 - 1]))
    if kind == 1:
        return replace(m, weights_offset=pick([0, 1, m.weights_offset + 1, m.gm_size, 2**64 - 1]))
    if kind == 2 and m.kernels:
        i = rnd.randrange(len(m.kernels))
        k = m.kernels[i]
        k = pick([replace(k, block_dim=pick([0, 1, 2, 33, 1000, 65535, 65536, 2**32 - 1])),
                  replace(k, num_args=pick([0, k.num_args + 1, k.num_args - 1 if k.num_args else 5, 2**32 - 1])),
                  replace(k, name=pick(["", "k" * 300, "ü\0"]))])
        return replace(m, kernels=m.kernels[:i] + (k,) + m.kernels[i + 1:])
    if kind in (3, 4) and m.kernels:
        i = rnd.randrange(len(m.kernels))
        k = replace(m.kernels[i], code=_mutate_code(rnd, m.kernels[i].code))
        return replace(m, kernels=m.kernels[:i] + (k,) + m.kernels[i + 1:])
    if kind == 5 and m.launches:
        i = rnd.randrange(len(m.launches))
        la = m.launches[i]
        if la.args and rnd.random() < 0.7:
            j = rnd.randrange(len(la.args))
            args = list(la.args)
            args[j] = pick([0, 1, args[j] + 1, args[j] + 64, m.gm_size - 1, m.gm_size, 2**64 - 1])
            la = replace(la, args=tuple(args))
        else:
            la = replace(la, kernel=pick([0, len(m.kernels), 2**32 - 1]))
        return replace(m, launches=m.launches[:i] + (la,) + m.launches[i + 1:])
    if kind == 6:  # launches reordered, dropped or repeated
        ls = list(m.launches)
        rnd.shuffle(ls)
        return replace(m, launches=tuple(ls[: rnd.randrange(len(ls) + 1)] * rnd.choice([1, 3])))
    if kind in (7, 8):
        field = "inputs" if kind == 7 else "outputs"
        ts = list(getattr(m, field))
        if not ts:
            return m
        i = rnd.randrange(len(ts))
        t = ts[i]
        change = rnd.randrange(5)
        if change == 0 and t.shape:
            d = rnd.randrange(len(t.shape))
            t = replace(t, shape=t.shape[:d] + (pick([0, -1, 1, 2**31, 2**62]),) + t.shape[d + 1:])
        elif change == 1:
            t = replace(t, dtype=pick(["float16", "float64", "int8", "bool", "bfloat16", "complex64", "U8", "",
                                       "float32 ", "V2", "object"]))
        elif change == 2:
            t = replace(t, gm_offset=pick([0, 1, t.gm_offset + 2, m.gm_size, 2**64 - 1]))
        elif change == 3:
            t = replace(t, shape=t.shape + (1,) * pick([1, 40]))
        else:
            ts.append(t)  # a duplicate name
        ts[i] = t
        return replace(m, **{field: tuple(ts)})
    return replace(m, precision_mode=pick(["force_fp32", "fp8", ""]) if rnd.random() < 0.5 else m.precision_mode,
                   soc_version=pick(["Ascend310", "Ascend910B1", "../socs/Ascend910", "Ascend999", ""]))


def _read_and_run(data: bytes, rng: np.random.Generator) -> None:
    m = omfmt.decode_om(data, "fuzz.om")
    if m.gm_size > MAX_ARENA:
        return
    x = _inputs(m.inputs, rng)
    if x is not None:
        run_model(m, x, max_instructions=SIM_BUDGET)


def test_fuzz_om(base_om):
    data, base = base_om
    rnd, rng = random.Random(SEED), np.random.default_rng(SEED)
    seen = Outcomes()
    body = data[:-omfmt.CHECKSUM_SIZE]
    for case in range(120):  # byte flips and truncations: the checksum (or the magic) refuses them
        b = bytearray(data)
        for _ in range(rnd.randint(1, 32)):
            b[rnd.randrange(len(b))] ^= rnd.randrange(1, 256)
        if rnd.random() < 0.3:
            b = b[: rnd.randrange(len(b))]
        with pytest.raises(CannError):
            omfmt.decode_om(bytes(b), "fuzz.om")
    for case in range(600):  # re-signed byte edits: the parser and the validation are reached
        b = bytearray(body)
        for _ in range(rnd.randint(1, 8)):
            i = rnd.randrange(8, len(b))
            if rnd.random() < 0.5:
                b[i] = rnd.randrange(256)
            else:
                struct.pack_into("<I", b, min(i, len(b) - 4), rnd.choice(INTERESTING) & 0xFFFFFFFF)
        if rnd.random() < 0.2:
            b = b[: rnd.randrange(8, len(b))]
        seen.run(f"om re-signed edit {case}", lambda: _read_and_run(_sign(bytes(b)), rng))
    for case in range(1200):  # field edits, encoded past the writer's checks
        m = base
        for _ in range(rnd.choice([1, 1, 2, 3])):
            m = _mutate_model(rnd, m)
        try:
            mutated = _encode_unchecked(m)
        except (struct.error, OverflowError, UnicodeEncodeError):  # a value the format cannot hold
            continue
        seen.run(f"om field edit {case}", lambda: _read_and_run(mutated, rng))
    seen.check()
    print(seen.counts)
    assert seen.counts["error"] > 100 and seen.counts["result"] > 10, seen.counts


def test_fuzz_cann_run_exit_status(base_om, tmp_path, capsys):
    from cann.tools import cann_run

    data, base = base_om
    rnd = random.Random(SEED + 1)
    path = tmp_path / "m.om"
    statuses = []
    for case in range(40):
        m = base
        for _ in range(rnd.choice([1, 2])):
            m = _mutate_model(rnd, m)
        try:
            path.write_bytes(_encode_unchecked(m))
        except (struct.error, OverflowError, UnicodeEncodeError):
            continue
        with time_budget(f"cann-run case {case}"), pytest.raises(SystemExit) as e:
            cann_run.main([str(path), "--max-instructions", str(SIM_BUDGET)])
        out, err = capsys.readouterr()
        errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
        assert e.value.code in (0, 2), (case, m, err)
        assert "Traceback" not in err and "internal error" not in err, (case, err)
        if e.value.code == 2:
            assert len(errors) == 1 and err.splitlines()[-1] == errors[0], (case, err)
        statuses.append(e.value.code)
    assert statuses.count(2) >= 5 and statuses.count(0) >= 1, statuses

    # input files: a valid .npy / .npz with bytes flipped or cut
    path.write_bytes(data)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "x.npz", x=x)
    statuses = []
    for case in range(30):
        src = tmp_path / rnd.choice(["x.npy", "x.npz"])
        b = bytearray(src.read_bytes())
        for _ in range(rnd.randint(1, 6)):
            b[rnd.randrange(min(len(b), 200))] = rnd.randrange(256)  # the header and the first values
        if rnd.random() < 0.3:
            b = b[: rnd.randrange(len(b))]
        bad = tmp_path / f"bad{src.suffix}"
        bad.write_bytes(bytes(b))
        with time_budget(f"cann-run input case {case}"), pytest.raises(SystemExit) as e:
            cann_run.main([str(path), "--input", str(bad), "--max-instructions", str(SIM_BUDGET)])
        out, err = capsys.readouterr()
        assert e.value.code in (0, 2) and "Traceback" not in err, (case, err)
        if e.value.code == 2:
            assert len(err.splitlines()) == 1 and err.startswith("error: "), (case, err)
        statuses.append(e.value.code)
    assert statuses.count(2) >= 10, statuses


# ---------------------------------------------------------------------------------------------
# ONNX models


def _small_models() -> list[onnx.ModelProto]:
    rng = np.random.default_rng(1)
    f = TensorProto.FLOAT
    w = numpy_helper.from_array((rng.standard_normal((4, 2, 3, 3)) / 4).astype(np.float32), "w")
    conv = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1]),
         helper.make_node("AveragePool", ["c"], ["a"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("ReduceMean", ["a"], ["y"], name="mean", axes=[2, 3], keepdims=1)],
        "conv", [helper.make_tensor_value_info("x", f, [1, 2, 6, 6])],
        [helper.make_tensor_value_info("y", f, [1, 4, 1, 1])], initializer=[w])
    shape = numpy_helper.from_array(np.array([3, 4], np.int64), "shape")
    k2 = numpy_helper.from_array((rng.standard_normal((6, 5)) / 3).astype(np.float32), "k2")
    data = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
         helper.make_node("Transpose", ["r"], ["t"], name="transpose", perm=[1, 0]),
         helper.make_node("Concat", ["t", "t"], ["cat"], name="concat", axis=1),
         helper.make_node("Gemm", ["cat", "k2"], ["g"], name="gemm", transB=0),
         helper.make_node("Add", ["g", "bias"], ["y"], name="add")],
        "data", [helper.make_tensor_value_info("x", f, [2, 6]), helper.make_tensor_value_info("bias", f, [5])],
        [helper.make_tensor_value_info("y", f, [4, 5])],
        initializer=[shape, k2])
    ew = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["m"], name="mul"),
         helper.make_node("Sigmoid", ["m"], ["s"], name="sigmoid"),
         helper.make_node("Slice", ["s", "starts", "ends", "axes"], ["sl"], name="slice"),
         helper.make_node("Softmax", ["sl"], ["y"], name="softmax", axis=-1)],
        "ew", [helper.make_tensor_value_info("x", f, [3, 8])], [helper.make_tensor_value_info("y", f, [3, 4])],
        initializer=[numpy_helper.from_array(np.array([2], np.int64), "starts"),
                     numpy_helper.from_array(np.array([6], np.int64), "ends"),
                     numpy_helper.from_array(np.array([1], np.int64), "axes")])
    return [helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]) for g in (conv, data, ew)]


_OPS = ("Relu", "Add", "Conv", "MatMul", "Reshape", "Concat", "Softmax", "MaxPool", "Gather", "Pad", "Where",
        "Cast", "Resize", "ReduceSum", "Split", "NoSuchOp")
_TYPES = (TensorProto.UNDEFINED, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.INT32,
          TensorProto.BOOL, TensorProto.STRING, TensorProto.UINT8, TensorProto.BFLOAT16, TensorProto.COMPLEX64, 99)


def _mutate_onnx(rnd: random.Random, model: onnx.ModelProto) -> onnx.ModelProto:
    m = copy.deepcopy(model)
    g = m.graph
    kind = rnd.randrange(6)
    if kind == 0:  # an attribute
        nodes = [n for n in g.node if n.attribute]
        if nodes:
            n = rnd.choice(nodes)
            a = rnd.choice(n.attribute)
            r = rnd.random()
            if r < 0.15:
                n.attribute.remove(a)
            elif a.type == onnx.AttributeProto.INT:
                a.i = rnd.choice(INTERESTING[:-3])
            elif a.type == onnx.AttributeProto.INTS:
                vals = list(a.ints)
                choice = rnd.randrange(3)
                if choice == 0 and vals:
                    vals[rnd.randrange(len(vals))] = rnd.choice([0, -1, -5, 2, 100, 2**31 - 1, 2**40])
                elif choice == 1:
                    vals = vals[:-1]
                else:
                    vals = vals + [rnd.choice([0, 1, 3])]
                del a.ints[:]
                a.ints.extend(vals)
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rnd.choice([float("nan"), -1.0, 0.0, 1e30])
        else:
            kind = 1
    if kind == 1:  # a graph input / output shape
        vi = rnd.choice([*g.input, *g.output])
        dims = vi.type.tensor_type.shape.dim
        r = rnd.random()
        if r < 0.2:
            dims.add().dim_value = rnd.choice([1, 2, 3])
        elif r < 0.35 and len(dims):
            del dims[rnd.randrange(len(dims))]
        elif len(dims):
            d = dims[rnd.randrange(len(dims))]
            if rnd.random() < 0.2:
                d.dim_param = "N"
            else:
                d.dim_value = rnd.choice([0, 1, 2, 5, 7, 64, -1, -3])
    elif kind == 2:  # a dtype
        vi = rnd.choice([*g.input, *g.output, *g.initializer])
        t = rnd.choice(_TYPES)
        if isinstance(vi, TensorProto):
            vi.data_type = t
        else:
            vi.type.tensor_type.elem_type = t
    elif kind == 3 and g.initializer:  # an initializer's dims or data
        init = rnd.choice(g.initializer)
        r = rnd.random()
        if r < 0.3 and init.dims:
            init.dims[rnd.randrange(len(init.dims))] = rnd.choice([0, 1, 3, 2**20, -2])
        elif r < 0.5:
            init.raw_data = init.raw_data[: rnd.randrange(len(init.raw_data) + 1)]
        elif r < 0.7:
            try:
                arr = numpy_helper.to_array(init)
            except (ValueError, TypeError):  # already mutated into something onnx cannot read
                arr = np.zeros(3, np.float32)
            bad = rnd.choice([np.nan, np.inf, -7, 0, 1e6])
            with np.errstate(invalid="ignore"):
                init.CopyFrom(numpy_helper.from_array(np.full(arr.shape, bad).astype(arr.dtype), init.name))
        elif r < 0.85:
            del init.dims[:]
        else:
            g.initializer.remove(init)
    elif kind == 4:  # an edge
        n = rnd.choice(g.node)
        names = [x for node in g.node for x in node.output] + [i.name for i in g.input]
        r = rnd.random()
        if r < 0.25 and n.input:
            n.input[rnd.randrange(len(n.input))] = rnd.choice(["dangling", "", *names])
        elif r < 0.4:
            n.input.append(rnd.choice(names))
        elif r < 0.55 and n.input:
            n.input[0] = n.output[0]  # a self loop
        elif r < 0.7 and len(n.input) > 1:
            n.input[0], n.input[1] = n.input[1], n.input[0]
        elif r < 0.8:
            n.output[0] = rnd.choice(names)  # two producers of one tensor
        elif r < 0.9:
            g.node.remove(n)
        else:
            g.node.insert(0, copy.deepcopy(rnd.choice(g.node)))  # out of topological order
    elif kind == 5:  # an op type
        rnd.choice(g.node).op_type = rnd.choice(_OPS)
    return m


def test_fuzz_onnx():
    rnd, rng = random.Random(SEED + 2), np.random.default_rng(SEED + 2)
    seen = Outcomes()
    bases = _small_models()

    def compile_and_run(model):
        compiled = cann.compile(model, precision_mode=rnd.choice(["force_fp16", "must_keep_origin_dtype"]))
        x = _inputs(compiled.inputs, rng)
        if x is not None:
            compiled.run(x, max_instructions=SIM_BUDGET)

    for case in range(800):
        model = rnd.choice(bases)
        for _ in range(rnd.choice([1, 1, 2])):
            model = _mutate_onnx(rnd, model)
        seen.run(f"onnx case {case}", lambda: compile_and_run(model))
    seen.check()
    print(seen.counts)
    assert seen.counts["error"] > 10 and seen.counts["result"] > 3, seen.counts
