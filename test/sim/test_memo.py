"""cann.sim.memo: an img2col repeated on an unwritten map copies its kept bytes, and mmad takes the
float32 A of that content by token; every result must be that of a simulator without the memo."""

from __future__ import annotations

import numpy as np
import pytest

from cann.hw import isa
from cann.hw.config import load_soc
from cann.sim import memo as memo_mod
from cann.sim import mte
from cann.sim.core import AICore

SPEC = load_soc("Ascend910")
C1, H, W = 2, 6, 6  # NC1HWC0 float16 map, 3x3 conv, pad 1
M, K, N = 48, C1 * 9 * 16, 16
MAP, WGT, OUT = C1 * H * W * 16 * 2, K * N * 2, M * N * 4
L1_MAP, L1_W0, L1_W1 = 0, 8192, 16384


def _img2col(m_start: int = 0, m_count: int = M) -> isa.Instr:
    return isa.make("img2col", dtype=0, dst=0, src=L1_MAP, fm_c1=C1, fm_h=H, fm_w=W, pad_t=1, pad_b=1, pad_l=1,
                    pad_r=1, stride_h=1, stride_w=1, kernel_h=3, kernel_w=3, dil_h=1, dil_w=1, m_start=m_start,
                    m_count=m_count, k_start=0, k_count=K, fm_c1_stride=H * W * 16 * 2)


def _prog() -> list[isa.Instr]:
    """Map 0 (argument 0) and two weight blocks (argument 1) to L1; the same img2col before each of
    two weight loads (kept bytes), another img2col over the same L0A bytes and the first again (kept,
    its float32 A reused), then map 1 over map 0 (the kept bytes are stale: built again)."""
    def dma(dst, arg, src, n):
        return isa.make("copy_gm_to_l1", dst=dst, src_arg=arg, src=src, nburst=1, burst=n, src_stride=0,
                        dst_stride=0)

    def load(src):
        return isa.make("load2d", dst_space=isa.L0B, dst=0, src=src, repeat=WGT // 512, src_stride=512,
                        dst_stride=512)

    def mmad(dst, m=M):
        return isa.make("mmad", dtype=0, dst=dst, a=0, b=0, m=m, k=K, n=N, init=1)

    return [dma(L1_MAP, 0, 0, MAP), dma(L1_W0, 1, 0, WGT), dma(L1_W1, 1, WGT, WGT),
            _img2col(), load(L1_W0), mmad(0),
            _img2col(), load(L1_W1), mmad(OUT),
            _img2col(16, 32), mmad(2 * OUT, 32),
            _img2col(), mmad(3 * OUT),
            dma(L1_MAP, 0, MAP, MAP), _img2col(), mmad(4 * OUT)]


def _gm(lanes: int, maps: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Lane j reads maps ``2 * (j * maps // lanes)`` and the next, and its own weights."""
    rng = np.random.default_rng(3)
    nbytes = 2 * maps * MAP + lanes * 2 * WGT
    gm = rng.standard_normal(nbytes // 2).astype(np.float16).view(np.uint8).copy()
    return gm, [(2 * (j * maps // lanes) * MAP, 2 * maps * MAP + j * 2 * WGT) for j in range(lanes)]


class _NoMemo(memo_mod.Memo):
    """Keeps nothing: every img2col builds, every mmad converts by address."""

    def get(self, src, key):
        return None

    def token_at(self, buf, lo, hi):
        return None


def _run(lanes: int, maps: int, keep: bool, monkeypatch) -> tuple[AICore, list[str]]:
    gm, bases = _gm(lanes, maps)
    core = AICore(SPEC, lanes=lanes)
    if not keep:
        core._memo = _NoMemo()
    built = []
    orig = core._img2col_build
    monkeypatch.setattr(core, "_img2col_build", lambda g, lay, sel: built.append(g[3]) or orig(g, lay, sel))
    core.run_lanes(_prog(), gm, bases, [f"b{j}" for j in range(lanes)], checks="off")
    return core, built


@pytest.mark.parametrize("lanes,maps", [(1, 1), (4, 1), (4, 2), (4, 4)])
def test_kept_img2col_and_float32_a_give_the_results_of_building_them(lanes, maps, monkeypatch):
    converted = []
    orig = np.take
    monkeypatch.setattr(mte.np, "take", lambda t, u, **kw: converted.append(u.shape) or orig(t, u, **kw))
    core, built = _run(lanes, maps, True, monkeypatch)
    # built: the first img2col, the other fields, and the first after the map was rewritten
    assert len(built) == 3
    a_converted = [s for s in converted if s[3:] == (K // 16, 16)]  # (lanes, m1, m0, k1, k0); B: (.., 1, 16)
    # float32 A: mmads 1 (built), 4 (other fields), 6 (new map); mmads 2 and 5 take it by token
    assert len(a_converted) == 3
    plain, plain_built = _run(lanes, maps, False, monkeypatch)
    assert len(plain_built) == 5
    for buf in core.mem:
        assert np.array_equal(core.mem[buf], plain.mem[buf]), buf
    l0c = core.mem["l0c"][:, :5 * OUT].view(np.float32).reshape(lanes, 5, M * N)
    assert not np.array_equal(l0c[:, 0], l0c[:, 1])  # two weight blocks
    assert not np.array_equal(l0c[:, 0], l0c[:, 4])  # two maps


def test_memo_is_bounded_and_emptied_by_a_run(monkeypatch):
    monkeypatch.setattr(memo_mod, "MEMO_BYTES", M * K * 2)  # room for one kept matrix
    m = memo_mod.Memo()
    raw = np.zeros((1, M * K * 2), np.uint8)
    t1 = m.put(("l1", 0, 100), "a", raw)
    assert m.get(("l1", 0, 100), "a")[0] == t1
    t2 = m.put(("l1", 0, 100), "b", raw)  # over the bound: the first is dropped
    assert t2 != t1 and m.get(("l1", 0, 100), "a") is None and m.nbytes == raw.nbytes
    m.tag("l0a", 0, 64, t2)
    assert m.token_at("l0a", 16, 32) == (t2, 0) and m.token_at("l0a", 32, 80) is None
    m.written("l1", 99, 120)  # meets the source: dropped
    assert m.get(("l1", 0, 100), "b") is None and m.nbytes == 0
    assert m.token_at("l0a", 0, 64) == (t2, 0)  # the L0A bytes still hold that content
    m.written("l0a", 60, 61)
    assert m.token_at("l0a", 0, 64) is None
    m.tag("l0a", 0, 64, t2)
    m.clear()
    assert m.token_at("l0a", 0, 64) is None and not m.by_src
    # a run starts empty: buffers may be written from outside between runs
    gm, bases = _gm(1, 1)
    core = AICore(SPEC)
    core.run(_prog(), gm, bases[0], "k", checks="off")
    assert core._memo.by_src and core._f32_tok
    core.run([], gm, bases[0], "k", checks="off")
    assert not core._memo.by_src and not core._memo.tags and not core._f32_tok


def test_verified_returns_a_kept_array_only_for_equal_bytes(monkeypatch):
    v = memo_mod.Verified()
    w = np.arange(32, dtype=np.uint64).reshape(2, 16)
    x = np.ones((2, 4), np.float32)
    k = memo_mod.Verified.key(("l0b", 0), w)
    assert v.get(k, w) is None
    v.put(k, w, x)
    w_now = w.copy()
    assert v.get(k, w_now) is x
    w_now[1, 5] += 1  # one word differs (outside the sampled ends): not the kept operand
    assert memo_mod.Verified.key(("l0b", 0), w_now) == k and v.get(k, w_now) is None
    w[0, 0] = 99  # the kept copy is the bytes at put time, not the caller's array
    assert v.get(k, np.arange(32, dtype=np.uint64).reshape(2, 16)) is x


def test_verified_is_bounded_without_thrashing(monkeypatch):
    w = np.zeros((1, 8), np.uint64)
    x = np.zeros((1, 16), np.float32)
    monkeypatch.setattr(memo_mod, "VERIFIED_BYTES", 2 * (w.nbytes + x.nbytes))  # room for two
    v = memo_mod.Verified()
    for i in range(3):
        v.put(("k", i), w, x)
    assert sorted(v.entries) == [("k", 0), ("k", 1)]  # full: the third is not kept (same run)
    v.next_run()
    assert v.get(("k", 0), w) is x  # used in this run
    v.put(("k", 2), w, x)  # makes room by dropping the one this run did not use
    assert sorted(v.entries) == [("k", 0), ("k", 2)] and v.nbytes == 2 * (w.nbytes + x.nbytes)


def test_models_differing_only_in_weights_share_pooled_cores_exactly():
    """Two models of one shape run alternately on the pooled cores (kept float32 weights at the same
    addresses): each gives what fresh cores give, and the second run of each hits the kept weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import cann
    from cann.sim import executor

    def model(seed):  # test_rerun's convolution (several M tiles per core), weights of its own
        rng = np.random.default_rng(seed)
        w = numpy_helper.from_array(rng.uniform(-0.2, 0.2, (64, 32, 3, 3)).astype(np.float32), "w")
        b = numpy_helper.from_array(rng.uniform(-0.2, 0.2, 64).astype(np.float32), "b")
        graph = helper.make_graph(
            [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])],
            "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 32, 56, 56))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 64, 56, 56))], [w, b])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        onnx.checker.check_model(m)
        return cann.compile(m, precision_mode="force_fp16")

    models = [model(1), model(2)]
    x = {"x": np.random.default_rng(5).standard_normal((1, 32, 56, 56)).astype(np.float32)}
    fresh = []
    for mdl in models:
        executor._IDLE.clear()
        fresh.append(mdl.run(x)["y"])
    assert not np.array_equal(fresh[0], fresh[1])
    executor._IDLE.clear()
    for _ in range(2):
        for mdl, want in zip(models, fresh):
            np.testing.assert_array_equal(mdl.run(x)["y"], want)
    core = next(iter(executor._IDLE.values()))
    assert core._verified.entries
