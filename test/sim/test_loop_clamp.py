"""``loop_clamp``: clamped per-iteration steps in hardware loops -- the border tiles of a loop in its one
body. The fields each iteration sees (alone and added to loop_step / loop_offset moves), the control
checks, the corner iterations the analyses evaluate, a loop whose last tile moves back to end at the
tensor's edge computing the right numbers, and the footprints the flag synchronisation sees."""

from __future__ import annotations

import numpy as np
import pytest

from cann.hw import isa
from cann.hw.config import load_soc
from cann.hw.loops import Step, step_targets, variants
from cann.sim.spmd import check_control, dynamic_instructions, specialize
from stepped_loops import run_x_plus_1

SPEC = load_soc("Ascend910")
M = isa.make
_BAR = M("pipe_barrier", pipe=int(isa.Pipe.ALL))


def _field(mnemonic: str, name: str) -> int:
    return isa.BY_MNEMONIC[mnemonic].field_names.index(name)


def test_clamp_advance_and_corners():
    s = Step(0, 128, 0, (0, 0, 192))
    assert [s.at(i) for i in range(4)] == [0, 128, 192, 192]
    assert s.corners(4) == {0, 1, 2, 3}
    pad = Step(0, -8, 0, (1, 0, 1))  # a pad only the first iteration has
    assert [pad.at(i) for i in range(5)] == [1, 0, 0, 0, 0]
    assert {0, 4} <= pad.corners(5) <= {0, 1, 4}
    assert Step(0, 5, 0).at(3) == 15 and Step(0, 5, 0).corners(9) == {0, 8}


def test_fields_per_iteration_add_to_steps_and_gm_offsets():
    src, dst, burst = (_field("copy_gm_to_ub", f) for f in ("src", "dst", "burst"))
    prog = [M("loop_begin", count=4), M("loop_offset", arg=0, stride=1000),
            M("loop_step", field_no=dst, step=64),
            M("loop_clamp", field_no=src, step=100, offset=-50, lo=0, hi=200),
            M("loop_clamp", field_no=burst, step=-32, offset=96, lo=0, hi=32),
            M("copy_gm_to_ub", dst=0, src_arg=0, src=8, nburst=1, burst=32), M("loop_end")]
    check_control(prog, 1)
    assert step_targets(prog) == {5: [Step(dst, 64, 0), Step(src, 100, 0, (-50, 0, 200)),
                                      Step(burst, -32, 0, (96, 0, 32))]}
    out = [(i.dst, i.src, i.burst) for i in specialize(prog, 0, (0,))[0] if i.mnemonic == "copy_gm_to_ub"]
    # src: 8 + 1000 i (loop_offset) + clamp(-50 + 100 i, 0, 200); burst: 32 + clamp(96 - 32 i, 0, 32)
    assert out == [(0, 8, 64), (64, 1058, 64), (128, 2158, 64), (192, 3208, 32)]
    assert dynamic_instructions(prog, 1) == len(specialize(prog, 0, (0,))[0])


@pytest.mark.parametrize("fields, target, message", [
    (dict(field_no=1, step=1, offset=0, lo=0, hi=4), "copy_gm_to_ub",
     "instruction 1: loop_clamp field 1 (src_arg) of copy_gm_to_ub is not clampable "
     "(clampable: dst, src, nburst, burst, src_stride, dst_stride)"),
    (dict(field_no=0, step=1, offset=0, lo=3, hi=2), "copy_gm_to_ub", "instruction 1: loop_clamp lo 3 > hi 2"),
])
def test_check_control_rejects_bad_clamps(fields, target, message):
    with pytest.raises(ValueError) as e:
        check_control([M("loop_begin", count=2), M("loop_clamp", **fields), M(target), M("loop_end")], 1)
    assert str(e.value) == message


def test_img2col_window_fields_are_clampable():
    names = isa.BY_MNEMONIC["img2col"].field_names
    ok = {names[k] for k in isa.clamp_fields(isa.BY_MNEMONIC["img2col"])}
    # the height and the width window (the conv's column tiles join their loop too, conv_tiles.emit_tiles)
    # and the C1 pitch (a packed map's block is the window's size)
    assert {"fm_h", "fm_w", "pad_t", "pad_b", "pad_l", "pad_r", "fm_c1_stride", "m_start", "k_start", "dst",
            "src"} == ok


def test_variants_cover_every_position():
    # the analyses' hull: the extremes of any linear quantity over all iterations are among the variants
    src = _field("copy_gm_to_ub", "src")
    ins = M("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=32)
    steps = [Step(src, 7, 0, (-3, 0, 40))]
    vs = {v.src for v in variants(ins, steps, {0: 20})}
    every = {min(max(-3 + 7 * i, 0), 40) for i in range(20)}
    assert min(vs) == min(every) and max(vs) == max(every)


def test_a_loop_with_its_last_tile_moved_back_computes_the_right_numbers():
    # y = x + 1 for 320 fp16 elements in tiles of 128: tiles start at 0, 128 and 192 (the last one
    # moved back to end at the edge, recomputing 64 elements of the tile before it)
    n, tile = 320, 128
    tb = tile * 2
    clamp = dict(step=tb, offset=0, lo=0, hi=2 * (n - tile))
    prog = [M("loop_begin", count=3),
            M("loop_clamp", field_no=_field("copy_gm_to_ub", "src"), **clamp),
            M("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=tb), _BAR,
            M("vadds", dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1,
              dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0), _BAR,
            M("loop_clamp", field_no=_field("copy_ub_to_gm", "dst"), **clamp),
            M("copy_ub_to_gm", dst_arg=1, dst=0, src=0, nburst=1, burst=tb), _BAR, M("loop_end")]
    run_x_plus_1(prog, n)


def test_the_sync_pass_sees_the_hull_of_a_clamped_access():
    from cann.dialects.ascend import instr_to_op
    from cann.passes.sync_deps import GM_KEY, Ins, fill_accesses, parse

    dst = _field("copy_ub_to_gm", "dst")
    prog = [M("loop_begin", count=3), M("loop_clamp", field_no=dst, step=256, offset=0, lo=0, hi=384),
            M("copy_ub_to_gm", dst_arg=0, dst=0, src=0, nburst=1, burst=256), M("loop_end")]
    (loop,) = parse([instr_to_op(i) for i in prog], "k")
    fill_accesses([loop], SPEC, 1)
    (ins,) = [it for it in loop.body if isinstance(it, Ins)]
    gm = [(lo, hi) for b, lo, hi, w in ins.accs if b == GM_KEY]
    assert gm == [(0, 640)]  # tiles at 0, 256 and 384 (moved back), 256 bytes each
    assert ins.moves == [{}, {}]
