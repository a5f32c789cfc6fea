"""``loop_step``: per-iteration steps of on-chip fields in hardware loops -- the fields each iteration
sees (after buffer rotation, next to GM offsets, over nested loops), the target skipping inserted
synchronisation, the control checks and their messages, the instruction count, and a stepped loop
computing the right numbers on the simulated core."""

from __future__ import annotations

import numpy as np
import pytest

from cann.errors import CannError
from cann.hw import isa
from cann.hw.loops import Step, step_targets
from cann.sim.spmd import check_control, dynamic_instructions, specialize
from stepped_loops import run_x_plus_1

UB = isa.SPACE_CODES["ub"]
M = isa.make
_BAR = M("pipe_barrier", pipe=int(isa.Pipe.ALL))


def _field(mnemonic: str, name: str) -> int:
    return isa.BY_MNEMONIC[mnemonic].field_names.index(name)


def _copy(dst: int, src: int = 0) -> isa.Instr:
    return M("copy_gm_to_ub", dst=dst, src_arg=0, src=src, nburst=1, burst=32)


def test_fields_per_iteration_skip_sync_and_move_with_gm_offsets():
    # the step applies to the next work instruction: the flags and the barrier between do not count
    prog = [M("loop_begin", count=4), M("loop_offset", arg=0, stride=64),
            M("loop_step", field_no=_field("copy_gm_to_ub", "dst"), step=96),
            M("set_flag", src_pipe=1, dst_pipe=4, event=0), M("wait_flag", src_pipe=1, dst_pipe=4, event=0), _BAR,
            _copy(32, 8), _copy(0), M("loop_end")]
    check_control(prog, 1)
    out = specialize(prog, 0, (0,))[0]
    assert [i.mnemonic for i in out[:3]] == ["loop_offset", "loop_step", "loop_begin"]  # once, before the body
    copies = [(i.dst, i.src) for i in out if i.mnemonic == "copy_gm_to_ub"]
    assert copies == [(32, 8), (0, 0), (128, 72), (0, 64), (224, 136), (0, 128), (320, 200), (0, 192)]


def test_img2col_m_start_and_mmad_dst_step_together():
    prog = [M("loop_begin", count=3),
            M("loop_step", field_no=_field("img2col", "m_start"), step=64),
            M("img2col", dtype=0, dst=0, src=0, fm_c1=1, fm_h=8, fm_w=8, stride_h=1, stride_w=1, kernel_h=1,
              kernel_w=1, dil_h=1, dil_w=1, m_start=16, m_count=64, k_start=0, k_count=16,
              fm_c1_stride=8 * 8 * 16 * 2),
            M("loop_step", field_no=_field("mmad", "dst"), step=4096),
            M("mmad", dtype=0, dst=1024, a=0, b=0, m=64, k=16, n=16, init=1), M("loop_end")]
    out = specialize(prog, 0, ())[0]
    assert [i.m_start for i in out if i.mnemonic == "img2col"] == [16, 80, 144]
    assert [(i.dst, i.a, i.b) for i in out if i.mnemonic == "mmad"] == [(1024, 0, 0), (5120, 0, 0), (9216, 0, 0)]


def test_nested_steps_rotation_and_offsets_compose():
    # a loop_step before an inner loop steps the inner loop's first instruction with the outer loop;
    # the inner loop's own step adds; the rotation remaps the static address first
    f = _field("copy_gm_to_ub", "dst")
    prog = [M("loop_begin", count=2), M("loop_rotate", space=UB, base=0, size=1024, copies=2, step=1),
            M("loop_offset", arg=0, stride=1000), M("loop_step", field_no=f, step=512),
            M("loop_begin", count=3), M("loop_offset", arg=0, stride=10), M("loop_step", field_no=f, step=64),
            _copy(32), M("loop_end"), M("loop_end")]
    check_control(prog, 1)
    out = [(i.dst, i.src) for i in specialize(prog, 0, (0,))[0] if i.mnemonic == "copy_gm_to_ub"]
    # outer i: copy i of the rotated window (+1024 i), + 512 i; inner j: + 64 j; GM 1000 i + 10 j
    assert out == [(32, 0), (96, 10), (160, 20), (1568, 1000), (1632, 1010), (1696, 1020)]
    assert dynamic_instructions(prog, 1) == len(specialize(prog, 0, (0,))[0])


@pytest.mark.parametrize("prog, message", [
    ([("loop_step", dict(field_no=0, step=1)), ("copy_gm_to_ub", {})],
     "instruction 0: loop_step outside a loop_begin .. loop_end"),
    ([("loop_begin", dict(count=2)), ("loop_step", dict(field_no=0, step=1)), ("loop_end", {})],
     "instruction 1: loop_step with no work instruction after it in its loop (loop_end at 2)"),
    ([("loop_begin", dict(count=2)), ("loop_step", dict(field_no=9, step=1)), ("copy_gm_to_ub", {}), ("loop_end", {})],
     "instruction 1: loop_step field 9 of copy_gm_to_ub, which has 7 fields"),
    ([("loop_begin", dict(count=2)), ("loop_step", dict(field_no=3, step=1)), ("copy_gm_to_ub", {}), ("loop_end", {})],
     "instruction 1: loop_step field 3 (nburst) of copy_gm_to_ub is not steppable (steppable: dst)"),
    ([("loop_begin", dict(count=2)), ("loop_step", dict(field_no=2, step=1)), ("copy_gm_to_ub", {}), ("loop_end", {})],
     "instruction 1: loop_step field 2 (src) of copy_gm_to_ub is not steppable (steppable: dst)"),
    ([("loop_begin", dict(count=2)), ("loop_step", dict(field_no=0, step=1)), ("block_if", dict(lo=0, hi=1)),
      ("copy_gm_to_ub", {}), ("block_endif", {}), ("loop_end", {})],
     "instruction 1: loop_step applying across the block_if at 2"),
])
def test_check_control_rejects_bad_steps(prog, message):
    with pytest.raises(ValueError) as e:
        check_control([M(m, **f) for m, f in prog], 1)
    assert str(e.value) == message


def test_a_bad_step_in_a_kernel_is_a_one_line_error_of_the_runner():
    from cann.sim.executor import _decoded

    code = isa.encode([M("loop_begin", count=2), M("loop_step", field_no=3, step=1), _copy(0), M("loop_end")])
    with pytest.raises(CannError, match=r"kernel 'k'.*loop_step field 3 \(nburst\) of copy_gm_to_ub is not steppable"):
        _decoded(code, 1, "k", "Ascend910")


def test_step_targets_name_the_owner_loop():
    f = _field("copy_gm_to_ub", "dst")
    prog = [M("loop_begin", count=2), M("loop_step", field_no=f, step=5), M("loop_begin", count=3), _copy(0),
            M("loop_step", field_no=f, step=7), _copy(0), M("loop_end"), M("loop_end")]
    assert step_targets(prog) == {3: [Step(f, 5, 0)], 5: [Step(f, 7, 2)]}


def test_encode_decode_and_disassembly():
    ins = M("loop_step", field_no=16, step=-64)
    assert isa.decode(isa.encode([ins])) == [ins]
    assert ins.asm() == "loop_step field_no=16, step=-64"


def test_a_stepped_loop_computes_the_right_numbers():
    # y = x + 1 over 8 tiles of 128 fp16: each iteration loads tile i into UB at i * 256 B (stepped),
    # adds 1 in place (stepped), stores it (GM offset); the UB then holds x + 1 laid out in order
    n, tile = 1024, 128
    tb = tile * 2
    vf = _field("vadds", "dst")
    prog = [M("loop_begin", count=n // tile), M("loop_offset", arg=0, stride=tb), M("loop_offset", arg=1, stride=tb),
            M("loop_step", field_no=_field("copy_gm_to_ub", "dst"), step=tb),
            M("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=tb), _BAR,
            M("loop_step", field_no=vf, step=tb), M("loop_step", field_no=vf + 1, step=tb),
            M("vadds", dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1,
              dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0), _BAR,
            M("loop_step", field_no=_field("copy_ub_to_gm", "src"), step=tb),
            M("copy_ub_to_gm", dst_arg=1, dst=0, src=0, nburst=1, burst=tb), _BAR, M("loop_end")]
    core, x = run_x_plus_1(prog, n)
    np.testing.assert_array_equal(core.bufs["ub"][:2 * n].view(np.float16), x + np.float16(1))
