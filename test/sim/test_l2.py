"""The L2 model (docs/core-model.md, "L2"): reads of GM bytes that several blocks of a launch read
are served at the L2 rate and not charged to the shared HBM bandwidth; values asserted."""

from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pytest

from cann.codegen.om import IoTensor, Kernel, Launch, OfflineModel
from cann.hw import isa
from cann.hw.config import L2Spec, load_soc
from cann.sim import l2, lockstep
from cann.sim import profile as prof
from cann.sim.executor import run_model
from cann.sim.spmd import stream

SPEC = load_soc("Ascend910")
L, B = SPEC.latency, SPEC.bandwidth
S = L.scalar
T = 4096  # bytes per block operand: 2048 fp16, 8 vector repeats
cdiv = lambda a, b: -(-a // b)  # noqa: E731


def _panel_model(blocks: int, shared: bool, soc: str = "Ascend910") -> OfflineModel:
    """y[b] = a (+ a panel) + x[b]: each block reads the whole panel ``a`` (shared) or its own
    slice of a per-block ``a`` (not shared), its slice of ``x`` and writes its slice of ``y``."""
    prog = [
        *([isa.make("block_offset", arg=0, stride=T)] if not shared else []),
        isa.make("block_offset", arg=1, stride=T),
        isa.make("block_offset", arg=2, stride=T),
        isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=T),
        isa.make("copy_gm_to_ub", dst=T, src_arg=1, src=0, nburst=1, burst=T),
        isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
        isa.make("vadd", dtype=0, dst=2 * T, src0=0, src1=T, repeat=T // 256, mask=128, dst_blk=1, src0_blk=1,
                 src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8),
        isa.make("pipe_barrier", pipe=isa.Pipe.ALL),
        isa.make("copy_ub_to_gm", dst_arg=2, dst=0, src=2 * T, nburst=1, burst=T),
    ]
    na = 1 if shared else blocks
    ins = (IoTensor("a", (na * T // 2,), "float16", 0), IoTensor("x", (blocks * T // 2,), "float16", na * T))
    outs = (IoTensor("y", (blocks * T // 2,), "float16", (na + blocks) * T),)
    return OfflineModel(soc, "force_fp16", ins, outs, (na + 2 * blocks) * T, (na + 2 * blocks) * T, b"",
                        (Kernel("panel", blocks, 3, isa.encode(prog)),),
                        (Launch(0, (0, na * T, (na + blocks) * T)),))


def _inputs(blocks: int, shared: bool):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1 if shared else blocks) * T // 2).astype(np.float16)
    x = rng.standard_normal(blocks * T // 2).astype(np.float16)
    return {"a": a, "x": x}


def _mte2(hit: int) -> int:
    """One block's MTE2 cycles: the panel copy (``hit`` bytes of it from the L2) and its x copy
    (8 cores: 8 x 64 B/cycle < gm_total, so no HBM sharing)."""
    return L.mte_startup + cdiv(T - hit, B.gm_to_ub) + cdiv(hit, SPEC.l2.rate) + L.mte_startup + cdiv(T, B.gm_to_ub)


def _cycles(hit: int) -> int:
    """One block's cycles: the two copies in, a barrier, the add, a barrier, the copy out."""
    return _mte2(hit) + S + L.vector_startup + T // 256 + S + L.mte_startup + cdiv(T, B.ub_to_gm)


@pytest.mark.parametrize("locked", [True, False])
def test_a_panel_read_by_every_block_is_served_by_the_l2(monkeypatch, locked):
    monkeypatch.setattr(lockstep, "ENABLED", locked)
    inputs = _inputs(8, True)
    out, st = run_model(_panel_model(8, True), inputs)
    np.testing.assert_array_equal(out["y"], np.tile(inputs["a"], 8) + inputs["x"])  # values: unchanged
    k = st.kernels[0]
    hit = T * 7 // 8  # 8 blocks read the panel: each read is 7/8 L2 (896/1024)
    assert [c.l2_read_bytes for c in k.cores] == [hit] * 8
    assert k.l2_read_bytes == 8 * hit and k.gm_read_bytes == 16 * T and k.hbm_read_bytes == 16 * T - 8 * hit
    assert k.cycles == _cycles(hit) == _cycles(0) - 28  # 3584 B at 128 B/cycle instead of 64
    row = k.profile()
    assert (row["l2_read_bytes"], row["hbm_read_bytes"]) == (8 * hit, 16 * T - 8 * hit)
    # the compiled bound's GM term counts HBM bytes only
    assert k.compiled_bound == max(_mte2(hit), cdiv(16 * T - 8 * hit + 8 * T, B.gm_total)) == 164


def test_disjoint_reads_are_unchanged():
    inputs = _inputs(8, False)
    out, st = run_model(_panel_model(8, False), inputs)
    np.testing.assert_array_equal(out["y"], inputs["a"] + inputs["x"])
    k = st.kernels[0]
    assert k.l2_read_bytes == 0 and k.hbm_read_bytes == k.gm_read_bytes == 16 * T
    assert k.cycles == _cycles(0)
    _, one = run_model(_panel_model(1, False), _inputs(1, False))
    assert one.kernels[0].cycles == k.cycles and one.kernels[0].l2_read_bytes == 0


def test_the_profile_reports_l2_and_hbm_bytes(tmp_path):
    _, st = run_model(_panel_model(8, True), _inputs(8, True))
    hit = 8 * (T * 7 // 8)
    assert prof.total_row(st)["l2_read_bytes"] == hit and prof.total_row(st)["hbm_read_bytes"] == 16 * T - hit
    i, j = prof.COLUMNS.index("gm_write_bytes"), prof.COLUMNS.index("l2_read_bytes")
    assert j == i + 1 and prof.COLUMNS[j + 1] == "hbm_read_bytes"
    prof.write_profile_csv(st, tmp_path / "p.csv")
    rows = list(csv.DictReader(open(tmp_path / "p.csv")))
    assert [r["l2_read_bytes"] for r in rows] == [str(hit), str(hit)]  # the launch, then the total
    assert f"l2_read_bytes={hit} hbm_read_bytes={16 * T - hit}" in prof.format_profile(st)


def _dma(arg, src, nburst=1, burst=T, stride=0):
    return isa.make("copy_gm_to_ub", dst=0, src_arg=arg, src=src, nburst=nburst, burst=burst, src_stride=stride)


def _fractions(prog, blocks, args=(0, 1 << 20), spec=SPEC):
    return l2.launch_fractions([stream(prog, b, args) for b in range(blocks)], spec)


def test_fractions_are_per_block_and_argument():
    # arg 0: a panel every block reads; arg 1: rows 0..2 of a block overlap the next block's (halo)
    prog = [isa.make("block_offset", arg=1, stride=2 * T), _dma(0, 0), _dma(1, 0, burst=3 * T)]
    fr = _fractions(prog, 4)
    # arg 0: k = 4 everywhere: 3/4. arg 1: block b reads [2bT, 2bT + 3T): T shared with each neighbour
    # (k = 2, 1/2 of it a hit): end blocks T/2 of 3T (1/6), the middle ones T of 3T (1/3)
    assert fr == [(768, 170), (768, 341), (768, 341), (768, 170)]


def test_interleaved_strided_reads_of_different_bytes_share_nothing():
    # block b reads bursts of 64 B at b*64 + i*256 (4 blocks interleaved): bounding ranges overlap,
    # bytes do not -> no L2 (the column panels of a row-major B matrix)
    prog = [isa.make("block_offset", arg=0, stride=64), _dma(0, 0, nburst=16, burst=64, stride=256)]
    assert _fractions(prog, 4) == [()] * 4
    # the same with a loop walking down the rows: still disjoint; a second pass re-reads them
    looped = [isa.make("block_offset", arg=0, stride=64), isa.make("loop_begin", count=8),
              isa.make("loop_offset", arg=0, stride=16 * 256), _dma(0, 0, nburst=16, burst=64, stride=256),
              isa.make("loop_end")]
    assert _fractions(looped, 4) == [()] * 4
    assert l2.read_intervals(stream(looped, 1, (0,))[0])[0][0].tolist() == list(range(0, 128 * 256, 256))


def test_reads_beyond_the_l2_capacity_scale_the_hits_between_groups():
    # block b reads [bT, bT + 2T): T shared with each neighbour at another point of its stream
    # (another base: another group). Fits: k = 2 -> 1/2 of the shared T: ends 1/4, middle 1/2
    halo = [isa.make("block_offset", arg=0, stride=T), _dma(0, 0, burst=2 * T)]
    assert _fractions(halo, 4) == [(256,), (512,), (512,), (256,)]
    quarter = dataclasses.replace(SPEC, l2=L2Spec(size=5 * T // 4, rate=128))  # 5T read: holds a quarter
    assert _fractions(halo, 4, spec=quarter) == [(64,), (128,), (128,), (64,)]
    # the same bytes at the same base: the 4 blocks read them together, whatever the capacity
    same = [_dma(0, 0, burst=8 * T)]
    tiny = dataclasses.replace(SPEC, l2=L2Spec(size=1, rate=128))
    assert _fractions(same, 4) == _fractions(same, 4, spec=tiny) == [(768,)] * 4
    # ... but not across waves: on 2 cores, 2 groups of 2: 3 of 4 reads hit if it fits, else 2
    assert l2.launch_fractions([stream(same, b, (0,)) for b in range(4)], SPEC, cores=2) == [(768,)] * 4
    assert l2.launch_fractions([stream(same, b, (0,)) for b in range(4)], tiny, cores=2) == [(512,)] * 4


def test_a_lone_block_and_register_addressed_copies_get_no_hits():
    assert _fractions([_dma(0, 0)], 1) == [()]
    reg = isa.make("copy_gm_to_ub_reg", **{f: 0 for f in isa.BY_MNEMONIC["copy_gm_to_ub_reg"].field_names})
    assert l2.read_intervals([reg]) == {}


def test_l2_fractions_change_only_reads_of_their_argument():
    from cann.sim.cost import CostModel
    cm = CostModel(SPEC, 1, (512,))
    assert cm.cost(_dma(0, 0)) == L.mte_startup + cdiv(T // 2, B.gm_to_ub) + cdiv(T // 2, SPEC.l2.rate)
    assert cm.cost(_dma(1, 0)) == CostModel(SPEC).cost(_dma(1, 0)) == L.mte_startup + T // B.gm_to_ub
    out = isa.make("copy_ub_to_gm", dst_arg=0, dst=0, src=0, nburst=1, burst=T)
    assert cm.cost(out) == L.mte_startup + T // B.ub_to_gm  # writes go to HBM


def test_a_read_too_large_to_enumerate_gets_no_hits(monkeypatch):
    # 4 blocks read the same 64 bursts; with room for 16 intervals the argument is not modeled
    prog = [_dma(0, 0, nburst=64, burst=64, stride=128)]
    assert _fractions(prog, 4) == [(768,)] * 4
    monkeypatch.setattr(l2, "MAX_INTERVALS", 16)
    monkeypatch.setattr(l2, "_INTERVALS", {})
    assert l2.read_intervals(prog) == {0: None}
    assert _fractions(prog, 4) == [()] * 4


def test_nd2nz_reads_are_modeled_row_by_row():
    # rows of 32 fp16 (64 B) every 256 B: block b starts 64 B further -> interleaved, disjoint rows
    nz = isa.make("copy_gm_to_l1_nd2nz", dtype=0, dst=0, src_arg=0, src=0, rows=16, cols=32, src_row_stride=256)
    prog = [isa.make("block_offset", arg=0, stride=64), nz]
    assert _fractions(prog, 4) == [()] * 4
    assert _fractions([nz], 2) == [(512,)] * 2


def test_read_past_any_gm_address_gets_no_hits_instead_of_overflowing():
    """A corrupt model's copy of 2^62 bursts (the fuzzer's om edit 260: its extent overflowed int64):
    the L2 analysis gives its argument no hits (the run then reports the address), no OverflowError."""
    prog = [isa.make("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1 << 62, burst=32, src_stride=32,
                     dst_stride=32),
            isa.make("copy_gm_to_ub", dst=0, src_arg=1, src=0, nburst=1, burst=32, src_stride=32, dst_stride=32)]
    got = l2.read_intervals(prog)
    assert got[0] is None
    lo, hi = got[1]
    assert (lo.tolist(), hi.tolist()) == ([0], [32])
