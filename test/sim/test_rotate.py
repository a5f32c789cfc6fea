"""Buffer and event rotation in hardware loops (``loop_rotate`` / ``loop_rotate_event``): the
addresses and event ids each iteration sees, composition over nested loops, the control checks, the
instruction count, and a double-buffered loop computing the right numbers on the simulated core."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cann.hw import isa
from cann.hw.config import load_soc
from cann.sim.core import AICore, SimError
from cann.sim.spmd import check_control, dynamic_instructions, specialize, stream

SPEC = load_soc("Ascend910")
UB = isa.SPACE_CODES["ub"]
M = isa.make


def _copies(instrs) -> list[int]:
    return [i.dst for i in instrs if i.mnemonic == "copy_gm_to_ub"]


def test_rotation_addresses_per_iteration():
    # 3 copies of 256 B at UB 512, step 1: iteration i sees copy (c + i) % 3; an address outside the
    # window (UB 0) and GM operands stay; an address in copy 1 moves with it, keeping its offset
    prog = [M("loop_begin", count=5), M("loop_rotate", space=UB, base=512, size=256, copies=3, step=1),
            M("copy_gm_to_ub", dst=512, src_arg=0, src=0, nburst=1, burst=32),
            M("copy_gm_to_ub", dst=512 + 256 + 64, src_arg=0, src=0, nburst=1, burst=32),
            M("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=32), M("loop_end")]
    out = specialize(prog, 0, (0,))[0]
    assert [i.mnemonic for i in out[:2]] == ["loop_rotate", "loop_begin"]  # run once, before the body
    assert _copies(out) == [512, 832, 0, 768, 1088, 0, 1024, 576, 0, 512, 832, 0, 768, 1088, 0]
    assert all(i.src == 0 for i in out if i.mnemonic == "copy_gm_to_ub")


def test_rotation_step_two_and_every_address_field():
    # step 2 over 3 copies: copies 0, 2, 1, 0; an mmad's L0C dst rotates, its L0A / L0B operands do not
    l0c = isa.SPACE_CODES["l0c"]
    prog = [M("loop_begin", count=4), M("loop_rotate", space=l0c, base=0, size=1024, copies=3, step=2),
            M("mmad", dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=1), M("loop_end")]
    mm = [i for i in specialize(prog, 0, ())[0] if i.mnemonic == "mmad"]
    assert [(i.dst, i.a, i.b) for i in mm] == [(0, 0, 0), (2048, 0, 0), (1024, 0, 0), (0, 0, 0)]


def test_nested_rotations_compose_additively():
    # outer step 1 and inner step 1 on the same 2-copy window: copy (i_outer + i_inner) % 2
    prog = [M("loop_begin", count=2), M("loop_rotate", space=UB, base=0, size=128, copies=2, step=1),
            M("loop_begin", count=3), M("loop_rotate", space=UB, base=0, size=128, copies=2, step=1),
            M("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=32), M("loop_end"), M("loop_end")]
    assert _copies(specialize(prog, 0, (0,))[0]) == [0, 128, 0, 128, 0, 128]
    # a rotation and a GM offset in the same loop both apply
    prog = [M("loop_begin", count=3), M("loop_offset", arg=0, stride=64),
            M("loop_rotate", space=UB, base=0, size=128, copies=2, step=1),
            M("copy_gm_to_ub", dst=32, src_arg=0, src=8, nburst=1, burst=32), M("loop_end")]
    out = [i for i in specialize(prog, 0, (0,))[0] if i.mnemonic == "copy_gm_to_ub"]
    assert [(i.dst, i.src) for i in out] == [(32, 8), (160, 72), (32, 136)]


def test_event_rotation():
    # events 2..3 of MTE2 -> V rotate with step 1; event 0 and other pipe pairs stay
    prog = [M("loop_begin", count=3), M("loop_rotate_event", src_pipe=4, dst_pipe=1, base=2, copies=2, step=1),
            M("set_flag", src_pipe=4, dst_pipe=1, event=3), M("wait_flag", src_pipe=4, dst_pipe=1, event=3),
            M("set_flag", src_pipe=4, dst_pipe=1, event=0), M("set_flag", src_pipe=1, dst_pipe=4, event=3),
            M("loop_end")]
    out = [(i.mnemonic, i.src_pipe, i.event) for i in specialize(prog, 0, ())[0] if i.mnemonic.endswith("_flag")]
    assert out == [("set_flag", 4, 3), ("wait_flag", 4, 3), ("set_flag", 4, 0), ("set_flag", 1, 3),
                   ("set_flag", 4, 2), ("wait_flag", 4, 2), ("set_flag", 4, 0), ("set_flag", 1, 3),
                   ("set_flag", 4, 3), ("wait_flag", 4, 3), ("set_flag", 4, 0), ("set_flag", 1, 3)]


def test_a_rotated_stream_reuses_its_instructions():
    # 1000 iterations over 2 copies: two distinct rotated forms of the copy, built once each
    prog = [M("loop_begin", count=1000), M("loop_rotate", space=UB, base=0, size=64, copies=2, step=1),
            M("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=32), M("loop_end")]
    s, _ = stream(prog, 0, (0,))
    copies = [i for i in s if i.mnemonic == "copy_gm_to_ub"]
    assert len(copies) == 1000 and len({id(i) for i in copies}) == 2
    assert {i.dst for i in copies} == {0, 64}


@pytest.mark.parametrize("prog, message", [
    ([("loop_rotate", dict(space=UB, size=64, copies=2, step=1))],
     "instruction 0: loop_rotate outside a loop_begin .. loop_end"),
    ([("loop_begin", dict(count=2)), ("loop_rotate", dict(space=UB, size=64, copies=0, step=1)), ("loop_end", {})],
     "instruction 1: loop_rotate copies 0 (at least 1)"),
    ([("loop_begin", dict(count=2)), ("loop_rotate", dict(space=UB, size=64, copies=2, step=-1)), ("loop_end", {})],
     "instruction 1: loop_rotate step -1 is negative"),
    ([("loop_begin", dict(count=2)), ("loop_rotate", dict(space=7, size=64, copies=2, step=1)), ("loop_end", {})],
     "instruction 1: loop_rotate space 7 is not an on-chip buffer code [1, 2, 3, 4, 5]"),
    ([("loop_begin", dict(count=2)), ("loop_rotate", dict(space=UB, size=0, copies=2, step=1)), ("loop_end", {})],
     "instruction 1: loop_rotate size 0 (at least 1)"),
    ([("loop_begin", dict(count=2)), ("loop_rotate_event", dict(src_pipe=4, dst_pipe=4, copies=2, step=1)),
      ("loop_end", {})], "instruction 1: loop_rotate_event pipes 4 -> 4 (two different single pipes expected)"),
])
def test_check_control_rejects_bad_rotations(prog, message):
    with pytest.raises(ValueError) as e:
        check_control([M(m, **f) for m, f in prog], 1)
    assert str(e.value) == message


def test_dynamic_instructions_count_rotations_once_per_loop_entry():
    rnd = random.Random(1)

    def program(depth: int) -> list[isa.Instr]:
        out = []
        for _ in range(rnd.randint(0, 3)):
            if rnd.random() < 0.4 and depth < 3:
                out.append(M("loop_begin", count=rnd.randint(0, 3)))
                if rnd.random() < 0.6:
                    out.append(M("loop_rotate", space=UB, base=0, size=32, copies=rnd.randint(1, 3), step=1))
                if rnd.random() < 0.3:
                    out.append(M("loop_rotate_event", src_pipe=4, dst_pipe=1, base=0, copies=2, step=1))
                out += program(depth + 1) + [M("loop_end")]
            else:
                out.append(M("copy_gm_to_ub", dst=rnd.choice((0, 32, 64)), src_arg=0, src=0, nburst=1, burst=32))
        return out

    for _ in range(500):
        prog = program(0)
        check_control(prog, 1)
        assert dynamic_instructions(prog, 2) == 2 * len(specialize(prog, 0, (0,))[0])


def _double_buffered(n: int, tile: int, rotate: bool) -> list[isa.Instr]:
    """y = x + 1 over ``n`` fp16 elements in ``n // tile`` tiles: GM -> UB copy (c), vadds into
    copy (c) of the output window, UB -> GM; the two windows (x at 0, y after it) rotate over 2
    copies when ``rotate``. Synchronized by PIPE_ALL barriers between the stages."""
    tb = tile * 2
    bar = M("pipe_barrier", pipe=isa.Pipe.ALL)
    body = [M("copy_gm_to_ub", dst=0, src_arg=0, src=0, nburst=1, burst=tb, src_stride=tb, dst_stride=tb), bar,
            M("vadds", dtype=0, dst=2 * tb, src0=0, src1=0, repeat=tile // 128, mask=128, dst_blk=1, src0_blk=1,
              src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0), bar,
            M("copy_ub_to_gm", dst_arg=1, dst=0, src=2 * tb, nburst=1, burst=tb, src_stride=tb, dst_stride=tb), bar]
    rot = [M("loop_rotate", space=UB, base=0, size=tb, copies=2, step=1),
           M("loop_rotate", space=UB, base=2 * tb, size=tb, copies=2, step=1)] if rotate else []
    return [M("loop_begin", count=n // tile), M("loop_offset", arg=0, stride=tb), M("loop_offset", arg=1, stride=tb),
            *rot, *body, M("loop_end")]


@pytest.mark.parametrize("rotate", [False, True])
def test_a_rotated_double_buffered_loop_computes_the_right_numbers(rotate):
    n, tile = 4096, 512
    x = np.random.default_rng(0).standard_normal(n).astype(np.float16)
    gm = np.zeros(4 * n, np.uint8)
    gm[:2 * n] = x.view(np.uint8)
    core = AICore(SPEC)
    prog = _double_buffered(n, tile, rotate)
    check_control(prog, 2)
    instrs, args = stream(prog, 0, (0, 2 * n))
    stats = core.run(instrs, gm, args, "k")
    np.testing.assert_array_equal(gm[2 * n:].view(np.float16), x + np.float16(1))
    assert stats.instructions == dynamic_instructions(prog, 1)
    # the last tile (iteration 7) used copy 1 of each window: x at 1024 B, y at 3 * 1024 B
    ub = core.bufs["ub"]
    last = x[-tile:] + np.float16(1)
    seen = ub[3 * 2 * tile:4 * 2 * tile].view(np.float16) if rotate else ub[2 * 2 * tile:3 * 2 * tile].view(np.float16)
    np.testing.assert_array_equal(seen, last)


def test_a_rotated_window_past_the_buffer_is_a_bounds_error():
    usable = SPEC.buffer("ub").usable
    prog = [M("loop_begin", count=2), M("loop_rotate", space=UB, base=usable - 64, size=64, copies=2, step=1),
            M("copy_gm_to_ub", dst=usable - 64, src_arg=0, src=0, nburst=1, burst=64), M("loop_end")]
    check_control(prog, 1)
    instrs, args = stream(prog, 0, (0,))
    with pytest.raises(SimError, match=r"instruction 3 .*UB bytes \[253952, 254016\) outside the buffer"):
        AICore(SPEC).run(instrs, np.zeros(1024, np.uint8), args, "k")
