"""Lane classes of a lockstep run's on-chip bytes (cann/sim/uniform.py): lanes that load the same GM
bytes share them, img2col / load2d / mmad then work on one lane per class, and the other lanes'
copies are made before anything reads them lane by lane -- results equal each lane run alone, bit for
bit, and a write that makes the lanes differ ends the sharing."""

from __future__ import annotations

import numpy as np
import pytest

from cann.hw import isa
from cann.hw.config import load_soc
from cann.sim import mte
from cann.sim.core import AICore
from cann.sim.uniform import Uniform, classes, layout

SPEC = load_soc("Ascend910")
C1, H, W = 2, 6, 6  # the feature map: NC1HWC0 float16, 3x3 conv, pad 1
M, K, N = 48, C1 * 9 * 16, 16  # 36 output positions padded to 48 rows
MAP = C1 * H * W * 16 * 2  # bytes
WGT = K * N * 2
OUT = M * N * 2
L1_MAP, L1_W, UB = 0, 8192, 0


def _conv_prog(overwrite: bool = False) -> list[isa.Instr]:
    """Map (argument 0) and weights (argument 1) to L1, img2col, load2d, mmad, L0C -> UB -> GM (argument
    2). ``overwrite``: the map's second C1 plane is then replaced from argument 1 (per-lane data)."""
    p = [isa.make("copy_gm_to_l1", dst=L1_MAP, src_arg=0, src=0, nburst=1, burst=MAP, src_stride=0, dst_stride=0)]
    if overwrite:
        p.append(isa.make("copy_gm_to_l1", dst=L1_MAP + MAP // 2, src_arg=1, src=WGT, nburst=1, burst=MAP // 2,
                          src_stride=0, dst_stride=0))
    p += [isa.make("copy_gm_to_l1", dst=L1_W, src_arg=1, src=0, nburst=1, burst=WGT, src_stride=0, dst_stride=0),
          isa.make("img2col", dtype=0, dst=0, src=L1_MAP, fm_c1=C1, fm_h=H, fm_w=W, pad_t=1, pad_b=1, pad_l=1,
                   pad_r=1, stride_h=1, stride_w=1, kernel_h=3, kernel_w=3, dil_h=1, dil_w=1, m_start=0, m_count=M,
                   k_start=0, k_count=K, fm_c1_stride=H * W * 16 * 2),
          isa.make("load2d", dst_space=isa.L0B, dst=0, src=L1_W, repeat=WGT // 512, src_stride=512, dst_stride=512),
          isa.make("mmad", dtype=0, dst=0, a=0, b=0, m=M, k=K, n=N, init=1),
          isa.make("copy_l0c_to_ub", dtype=0, dst=UB, src=0, n1=1, m=M, src_m=M),
          isa.make("copy_ub_to_gm", dst_arg=2, dst=0, src=UB, nburst=1, burst=OUT, src_stride=0, dst_stride=0)]
    return p


def _gm(maps: int, lanes: int) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """GM holding ``maps`` distinct maps, one weight block per lane and one output block per lane; the
    lanes' argument bases (lane j reads map ``j * maps // lanes``)."""
    rng = np.random.default_rng(7)
    wbase = maps * MAP
    obase = wbase + lanes * (WGT + MAP)
    gm = np.zeros(obase + lanes * OUT, np.uint8)
    gm[:obase] = rng.standard_normal(obase // 2).astype(np.float16).view(np.uint8)
    return gm, [(j * maps // lanes * MAP, wbase + j * (WGT + MAP), obase + j * OUT) for j in range(lanes)]


def _lockstep(prog, maps, lanes, monkeypatch=None, track=True):
    if not track:
        monkeypatch.setattr(mte, "classes", lambda keys: None)
    gm, bases = _gm(maps, lanes)
    core = AICore(SPEC, lanes=lanes)
    core.run_lanes(prog, gm, bases, [f"b{j}" for j in range(lanes)], checks="off")
    return core, gm


def _alone(prog, maps, lanes):
    """Each lane's block run on its own core: (GM, that core) per lane."""
    gm, bases = _gm(maps, lanes)
    cores = []
    for args in bases:
        core = AICore(SPEC)
        core.run(prog, gm, args, "k", checks="off")
        cores.append(core)
    return gm, cores


@pytest.mark.parametrize("maps", [1, 2, 4])  # every lane the same map; two classes (block); all different
@pytest.mark.parametrize("overwrite", [False, True])
def test_shared_maps_give_each_lanes_own_result(maps, overwrite, monkeypatch):
    prog = _conv_prog(overwrite)
    core, gm = _lockstep(prog, maps, 4)
    want_gm, cores = _alone(prog, maps, 4)
    assert np.array_equal(gm, want_gm)
    for j, one in enumerate(cores):  # every lane's buffers hold its own bytes after the run (owed copies made)
        for buf in ("l1", "l0a", "l0b", "l0c", "ub"):
            assert np.array_equal(core.mem[buf][j], one.bufs[buf]), (buf, j)
    # and the same bytes as the lockstep run without lane classes
    plain, plain_gm = _lockstep(prog, maps, 4, monkeypatch, track=False)
    assert np.array_equal(gm, plain_gm)
    for buf in core.mem:
        assert np.array_equal(core.mem[buf], plain.mem[buf]), buf


def test_shared_map_is_built_and_converted_once(monkeypatch):
    # 4 lanes, one map: img2col gathers one lane's map, mmad converts one A (and 4 distinct B)
    converted = []
    orig = np.take
    monkeypatch.setattr(mte.np, "take", lambda t, u, **kw: converted.append(u.shape[0]) or orig(t, u, **kw))
    _lockstep(_conv_prog(), 1, 4)
    assert converted == [1, 4]


def test_a_per_lane_write_ends_the_sharing(monkeypatch):
    # the map is shared, then half of it is overwritten with per-lane bytes: img2col must read every lane
    # (a stale class would give every lane lane 0's matrix)
    converted = []
    orig = np.take
    monkeypatch.setattr(mte.np, "take", lambda t, u, **kw: converted.append(u.shape[0]) or orig(t, u, **kw))
    core, gm = _lockstep(_conv_prog(overwrite=True), 1, 4)
    assert converted[0] == 4
    want_gm, _ = _alone(_conv_prog(overwrite=True), 1, 4)
    assert np.array_equal(gm, want_gm)
    outs = [gm[b[2]:b[2] + OUT].tobytes() for b in _gm(1, 4)[1]]
    assert len(set(outs)) == 4


def test_classes_and_layout():
    assert classes((5, 9, 5, 9)) == (0, 1, 0, 1)
    assert classes((1, 2, 3)) is None
    lay = layout((0, 0, 2, 2, 4, 4))
    assert (lay.distinct, lay.step, lay.inv, lay.block, lay.inter) == ((0, 2, 4), 2, (0, 0, 1, 1, 2, 2), 2, 0)
    assert (lay.others, lay.sources) == ((1, 3, 5), (0, 2, 4))
    lay = layout((0, 1, 0, 1))
    assert (lay.distinct, lay.step, lay.block, lay.inter) == ((0, 1), 1, 0, 2)
    lay = layout((0, 1, 1, 0))
    assert (lay.step, lay.block, lay.inter, lay.inv) == (1, 0, 0, (0, 1, 1, 0))
    assert layout((0, 0, 0)).distinct == (0,)


def test_uniform_ranges():
    u = Uniform()
    rep = (0, 0)
    u.mark("l1", 0, 100, rep)
    u.mark("l1", 100, 200, rep)  # adjacent, same classes: one range
    assert u.ranges["l1"] == [(0, 200, rep)]
    assert u.classes("l1", 10, 200) == rep and u.classes("l1", 10, 201) is None
    u.drop("l1", 50, 60)
    assert u.ranges["l1"] == [(0, 50, rep), (60, 200, rep)]
    assert u.classes("l1", 40, 70) is None and u.classes("l1", 60, 70) == rep
    u.mark("ub", 0, 10, rep)  # untracked: ignored
    assert "ub" not in u.ranges and u.classes("ub", 0, 10) is None
    u.owe("l1", 60, 200, rep)
    assert u.take("l1", 100, 120, dense=True) == []  # overwritten: the copies outside stay owed
    assert sorted(u.pending["l1"]) == [(60, 100, rep), (120, 200, rep)]
    assert u.take("l1", 0, 70) == [(60, 100, rep)]  # read lane by lane: the whole range is returned
    assert u.take_all() == [("l1", 120, 200, rep)] and u.take_all() == []
    u.clear()
    assert u.ranges["l1"] == []


def test_vrelu_float16_special_values():
    # the float16 vrelu works on the bits: -0 stays -0, NaNs stay themselves, -inf and negatives become +0
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    core = AICore(SPEC)
    core.bufs["ub"][:1 << 17] = x.view(np.uint8)
    core.run([isa.make("vrelu", dtype=0, dst=0, src0=0, repeat=255, mask=128, dst_blk=1, src0_blk=1, dst_rep=8,
                       src0_rep=8)], np.zeros(64, np.uint8), (0,), "k", checks="off", detect_overflow=False)
    with np.errstate(invalid="ignore"):
        want = np.maximum(x.view(np.float16), np.float16(0)).view(np.uint16)
    n = 255 * 128
    assert np.array_equal(core.bufs["ub"][:2 * n].view(np.uint16), want[:n])
