"""The generation analysis multi-buffering renames by (cann.lowering.generations): generation
numbers through loops and block sections, and the reads that make renaming illegal."""

from __future__ import annotations

import numpy as np
import pytest

from cann.hw import isa
from cann.hw.config import load_soc
from cann.lowering.generations import analyse, rename
from cann.sim.core import AICore
from cann.sim.spmd import stream

SPEC = load_soc("Ascend910")
UB, L0C = isa.SPACE_CODES["ub"], isa.SPACE_CODES["l0c"]
M = isa.make


def _load(dst=0, n=512, src=0):
    return M("copy_gm_to_ub", dst=dst, src_arg=0, src=src, nburst=1, burst=n, src_stride=n, dst_stride=n)


def _store(src=0, n=512, dst=0):
    return M("copy_ub_to_gm", dst_arg=1, dst=dst, src=src, nburst=1, burst=n, src_stride=n, dst_stride=n)


def _gens(prog, base=0, size=512, space=UB):
    return analyse(prog, SPEC, space, base, size)


def test_a_refilling_loop_counts_its_iterations():
    prog = [_load(), _store(), M("loop_begin", count=5), _load(), _store(), _store(), M("loop_end"), _store()]
    g = _gens(prog)
    assert g.problem is None
    assert g.gen == {0: 0, 1: 0, 3: 1, 4: 1, 5: 1, 7: 5}  # after the loop: 1 + 5 - 1, the last iteration's
    assert g.loop_gens == {2: 1} and g.total == 6


def test_a_write_after_a_loop_boundary_starts_a_generation():
    # no read in between: the loop boundary alone starts the body's generation
    prog = [_load(), M("loop_begin", count=2), _load(), _store(), M("loop_end")]
    assert _gens(prog).gen == {0: 0, 2: 1, 3: 1}


def test_an_accumulation_loop_stays_in_one_generation():
    # mmad init=1 then a K loop of mmad init=0 (reads its L0C range) and a fixpipe read: L0C has one
    # generation per outer iteration, none started by the K loop
    mm = dict(dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16)
    prog = [M("loop_begin", count=3), M("mmad", init=1, **mm), M("loop_begin", count=4), M("mmad", init=0, **mm),
            M("loop_end"), M("copy_l0c_to_ub", dtype=0, dst=0, src=0, n1=1, m=16, src_m=16), M("loop_end")]
    g = _gens(prog, size=1024, space=L0C)
    assert g.problem is None and g.loop_gens == {2: 0, 0: 1} and g.total == 3


@pytest.mark.parametrize("prog, where", [
    # the body reads what the previous iteration (or the code before the loop) left, then refills
    ([_load(), M("loop_begin", count=2), _store(), _load(), M("loop_end")],
     "instruction 1 `loop_begin count=2` starts a loop whose body reads the buffer before refilling it"),
    # a block section refills; a core that skipped it would read the older copy
    ([_load(), M("block_if", lo=0, hi=1), _store(), _load(), M("block_endif"), _store()],
     "instruction 5 `copy_ub_to_gm dst_arg=1, dst=0, src=0, nburst=1, burst=512, src_stride=512, dst_stride=512` "
     "reads the buffer after a block_if section that refilled it"),
    # a partial refill, then a read of the whole buffer
    ([_load(), _store(), _load(n=256), _store()],
     "instruction 3 `copy_ub_to_gm dst_arg=1, dst=0, src=0, nburst=1, burst=512, src_stride=512, dst_stride=512` "
     "reads bytes [0, 512) not written in its generation"),
    # a copy of 1024 bytes from inside the 512-byte buffer runs past its edge into the next buffer
    ([_load(), _store(), _load(n=1024), _store()],
     "instruction 2 `copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=1024, src_stride=1024, dst_stride=1024` "
     "accesses bytes [0, 1024) across the edge of the buffer [0, 512)"),
])
def test_illegal_renamings(prog, where):
    assert _gens(prog).problem == where
    with pytest.raises(ValueError, match="buffer x cannot have 2 copies"):
        rename(prog, SPEC, [(UB, 0, 512, 2, "x")], "@k")


def test_a_read_after_the_loop_uses_the_last_iterations_copy():
    # 3 iterations over 2 copies, then a store of the last tile outside the loop: copy (1 + 3 - 1) % 2
    n = 256
    bar = M("pipe_barrier", pipe=isa.Pipe.ALL)
    prog = [M("loop_begin", count=3), M("loop_offset", arg=0, stride=n * 2), M("loop_offset", arg=1, stride=n * 2),
            _load(n=2 * n), bar, _store(n=2 * n), bar, M("loop_end"), _store(n=2 * n, dst=6 * n)]
    renamed = rename(prog, SPEC, [(UB, 0, 2 * n, 2, "x")], "@k")
    assert [i.asm() for i in renamed[:4]] == ["loop_begin count=3", "loop_offset arg=0, stride=512",
                                              "loop_offset arg=1, stride=512",
                                              "loop_rotate space=5, base=0, size=512, copies=2, step=1"]
    assert renamed[-1].src == 0  # generation 2, the third iteration's: copy 2 % 2
    x = np.arange(3 * n, dtype=np.float16)
    gm = np.zeros(2 * 8 * n, np.uint8)
    gm[:6 * n] = x.view(np.uint8)
    instrs, args = stream(renamed, 0, (0, 6 * n))
    AICore(SPEC).run(instrs, gm, args, "k")
    out = gm[6 * n:].view(np.float16)
    np.testing.assert_array_equal(out[:3 * n], x)
    np.testing.assert_array_equal(out[3 * n:4 * n], x[2 * n:])


def test_an_access_reaching_into_the_buffer_from_below_is_illegal():
    # buffer [512, 1024): a load of [256, 768) starts below it
    prog = [_load(dst=512), _store(src=512), _load(dst=256), _store(src=512)]
    assert analyse(prog, SPEC, UB, 512, 512).problem == (
        "instruction 2 `copy_gm_to_ub dst=256, src_arg=0, src=0, nburst=1, burst=512, src_stride=512, "
        "dst_stride=512` accesses bytes [256, 768) across the edge of the buffer [512, 1024)")


def _step(mnemonic: str, field: str, step: int) -> isa.Instr:
    return M("loop_step", field_no=isa.BY_MNEMONIC[mnemonic].field_names.index(field), step=step)


def test_a_loop_stepping_through_the_buffer_is_one_generation():
    # tile t: 4 M subtiles written (stepped 512 B apart), read back (stepped), then the next tile; the
    # subtile loops walk parts of one accumulator: one generation per tile, no loop_rotate for them
    mm = M("mmad", dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=1)
    rd = M("copy_l0c_to_ub", dtype=0, dst=0, src=0, n1=1, m=16, src_m=16)
    tile = [M("loop_begin", count=4), _step("mmad", "dst", 1024), mm, M("loop_end"),
            M("loop_begin", count=4), _step("copy_l0c_to_ub", "src", 1024), rd, M("loop_end")]
    prog = [M("loop_begin", count=3), *tile, M("loop_end")]
    g = analyse(prog, SPEC, L0C, 0, 4096)
    assert g.problem is None
    assert g.gen == {3: 0, 7: 0}
    assert g.loop_gens == {1: 0, 5: 0, 0: 1} and g.total == 3
    # renamed over 2 copies: the outer loop rotates, the subtile loops do not
    out = rename(prog, SPEC, [(L0C, 0, 4096, 2, "acc")], "k")
    assert [i.asm() for i in out if i.mnemonic == "loop_rotate"] == [
        "loop_rotate space=4, base=0, size=4096, copies=2, step=1"]


def test_a_stepping_loop_that_refills_the_buffer_is_not_renamed():
    # each iteration writes its part and reads it back before the next writes: the next iteration's
    # write would start a generation of its own, which one loop body cannot rename
    mm = M("mmad", dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=1)
    rd = M("copy_l0c_to_ub", dtype=0, dst=0, src=0, n1=1, m=16, src_m=16)
    prog = [M("loop_begin", count=4), _step("mmad", "dst", 1024), mm, _step("copy_l0c_to_ub", "src", 1024), rd,
            M("loop_end")]
    g = analyse(prog, SPEC, L0C, 0, 4096)
    assert g.problem == ("instruction 0 `loop_begin count=4` starts a loop stepping through the buffer (loop_step) "
                         "whose iterations refill it")


def test_loop_form_counts_a_loop_of_one_as_repeating_and_rotates_every_loop():
    """A loop-form kernel (tiling ``loops`` = 1): ``min_trips`` = 2 makes a loop of one iteration a
    multi-buffering candidate (two generations), and ``every_loop`` gives a loop whose iterations
    start an even number of generations its ``loop_rotate`` of step 0 (its code as with odd)."""
    one = [M("loop_begin", count=1), _load(), _store(), M("loop_end")]
    assert _gens(one).total == 1 and analyse(one, SPEC, UB, 0, 512, min_trips=2).total == 2
    two = [M("loop_begin", count=3), M("loop_begin", count=2), _load(), _store(), M("loop_end"), M("loop_end")]
    plain = rename(two, SPEC, [(UB, 0, 512, 2, "ub")], "@k")
    every = rename(two, SPEC, [(UB, 0, 512, 2, "ub")], "@k", every_loop=True)
    rot = lambda p: [(i, x.values[-1]) for i, x in enumerate(p) if x.defn.mnemonic == "loop_rotate"]
    assert rot(plain) == [(2, 1)]  # the inner loop: one generation per iteration; the outer: two
    assert rot(every) == [(1, 0), (3, 1)]
