"""``vtranspose`` (cann/hw/isa.py): 16x16 matrices transposed in UB, against numpy; its repeat
strides, cost formula, footprint, assembler round trip and its faults."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from cann.hw import isa
from cann.hw.footprint import footprints
from cann.sim.core import AICore, SimError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_core import CODE, F16, F32, SPEC, get, put, rnd, run  # noqa: E402

I16 = np.dtype(np.int16)
CODES = {**CODE, I16: 3}


@pytest.mark.parametrize("dt", [F16, F32, I16])
@pytest.mark.parametrize("src_gap,dst_gap", [(0, 0), (0, 3), (2, 0)])
def test_vtranspose_matches_numpy(dt, src_gap, dst_gap):
    mat = 256 * dt.itemsize // 32  # one matrix, in 32-byte blocks
    sr, dr = mat + src_gap, mat + dst_gap  # repeat strides: a matrix plus a gap of blocks
    reps = 3
    a = (rnd((reps, 16, 16), np.float32, seed=1) * 100).astype(dt)
    core = AICore(SPEC)
    src, dst = 0, 64 * 1024
    for r in range(reps):
        put(core, "ub", src + r * sr * 32, a[r])
    run([isa.make("vtranspose", dtype=CODES[dt], dst=dst, src=src, repeat=reps, dst_rep=dr, src_rep=sr, dst_row=0,
                  src_row=0)], core=core)
    for r in range(reps):
        got = get(core, "ub", dst + r * dr * 32, dt, 256).reshape(16, 16)
        np.testing.assert_array_equal(got, a[r].T)
    gap = dr * 32 - 256 * dt.itemsize  # the bytes between destination matrices stay untouched
    if gap:
        assert not core.bufs["ub"][dst + 256 * dt.itemsize:dst + dr * 32].any()


@pytest.mark.parametrize("dt", [F16, F32])
@pytest.mark.parametrize("src_row,dst_row", [(3, 0), (0, 5), (4, 4)])
def test_vtranspose_row_strides(dt, src_row, dst_row):
    # rows of a matrix src_row / dst_row blocks apart (0: packed), as NCHW rows of different channels
    row_blocks = 16 * dt.itemsize // 32
    sr, dr = src_row or row_blocks, dst_row or row_blocks
    if dt == F32 and (src_row and src_row < 2 or dst_row and dst_row < 2):
        pytest.skip("a float32 row is 2 blocks")
    reps = 2
    a = (rnd((reps, 16, 16), np.float32, seed=2) * 100).astype(dt)
    core = AICore(SPEC)
    src, dst = 0, 96 * 1024
    src_rep, dst_rep = 16 * sr + 1, 16 * dr + 2  # matrices past each other's rows
    for r in range(reps):
        for i in range(16):
            put(core, "ub", src + (r * src_rep + i * sr) * 32, a[r, i])
    run([isa.make("vtranspose", dtype=CODES[dt], dst=dst, src=src, repeat=reps, dst_rep=dst_rep, src_rep=src_rep,
                  dst_row=dst_row, src_row=src_row)], core=core)
    for r in range(reps):
        for j in range(16):
            np.testing.assert_array_equal(get(core, "ub", dst + (r * dst_rep + j * dr) * 32, dt, 16), a[r][:, j])


@pytest.mark.parametrize("dt,repeats", [(F16, 2), (F32, 4)])
def test_vtranspose_cost(dt, repeats):
    ins = isa.make("vtranspose", dtype=CODES[dt], dst=8192, src=0, repeat=5, dst_rep=32, src_rep=32, dst_row=0,
                   src_row=0)
    _, _, st = run([ins])
    assert st.cycles == SPEC.latency.vector_startup + 5 * repeats * SPEC.vector.cycles_per_repeat
    assert st.busy_by_pipe["V"] == st.cycles


def test_vtranspose_footprint_and_asm():
    ins = isa.make("vtranspose", dtype=0, dst=4096, src=0, repeat=2, dst_rep=16, src_rep=32, dst_row=0, src_row=3)
    (src, dst), gm_read, gm_write = footprints(SPEC)["vtranspose"](ins.values, ())
    assert src[1:] == (0, 32 * 32 + 15 * 3 * 32 + 32, False) and dst[1:] == (4096, 4096 + 16 * 32 + 512, True)
    assert (gm_read, gm_write) == (0, 0)
    assert isa.decode(isa.encode([ins])) == [ins]


@pytest.mark.parametrize("ins,msg", [
    (isa.make("vtranspose", dtype=0, dst=256, src=0, repeat=1, dst_rep=16, src_rep=16), "overlaps destination"),
    (isa.make("vtranspose", dtype=0, dst=4096, src=0, repeat=1, dst_rep=16, src_rep=16, src_row=300),
     "overlaps destination"),
    (isa.make("vtranspose", dtype=0, dst=4096, src=0, repeat=0, dst_rep=16, src_rep=16), "repeat 0"),
    (isa.make("vtranspose", dtype=0, dst=4096, src=0, repeat=1, dst_rep=-1, src_rep=16), "strides must be >= 0"),
    (isa.make("vtranspose", dtype=1, dst=4096, src=0, repeat=1, dst_rep=32, src_rep=32, dst_row=1),
     "row strides of 32 B overlap 64-byte rows"),
    (isa.make("vtranspose", dtype=1, dst=SPEC.buffer("ub").usable - 512, src=0, repeat=1, dst_rep=32, src_rep=32),
     "dst: UB bytes"),
])
def test_vtranspose_errors(ins, msg):
    with pytest.raises(SimError) as ei:
        run([ins])
    assert msg in str(ei.value), str(ei.value)
