"""SPMD control: dynamic_instructions counts, from loop counts and block ranges alone, exactly what
specialize expands per block (so the budget check never expands a loop)."""

import random

import pytest

from cann.hw import isa
from cann.sim.spmd import check_control, dynamic_instructions, specialize


def _random_program(rnd: random.Random, depth: int = 0) -> list[isa.Instr]:
    out = []
    for _ in range(rnd.randint(0, 4)):
        r = rnd.random()
        if r < 0.2 and depth < 3:
            out.append(isa.make("loop_begin", count=rnd.randint(0, 3)))
            if rnd.random() < 0.5:
                out.append(isa.make("loop_offset", arg=0, stride=4))
            out += _random_program(rnd, depth + 1) + [isa.make("loop_end")]
        elif r < 0.4 and depth < 3:
            lo = rnd.randint(0, 4)
            out += [isa.make("block_if", lo=lo, hi=lo + rnd.randint(0, 3)), *_random_program(rnd, depth + 1),
                    isa.make("block_endif")]
        elif r < 0.5:
            out.append(isa.make("loop_offset", arg=0, stride=8))
        else:
            out.append(isa.make("pipe_barrier", pipe=isa.Pipe.ALL))
    return out


def test_dynamic_instructions_equals_the_expanded_length():
    rnd = random.Random(0)
    for _ in range(2000):
        prog, blocks = _random_program(rnd), rnd.randint(1, 6)
        check_control(prog, 1)
        expanded = sum(len(specialize(prog, b, (0,))[0]) for b in range(blocks))
        assert dynamic_instructions(prog, blocks) == expanded, [i.asm() for i in prog]


def test_dynamic_instructions_of_huge_loops_without_expanding():
    prog = [isa.make("loop_begin", count=2**40), isa.make("loop_begin", count=2**30),
            isa.make("pipe_barrier", pipe=isa.Pipe.ALL), isa.make("loop_end"), isa.make("loop_end")]
    assert dynamic_instructions(prog, 3) == 3 * (2 + 2**40 * (2 + 2**30))


@pytest.mark.parametrize("prog, message", [
    ([("loop_begin", dict(count=-5)), ("loop_end", {})], "instruction 0: loop_begin count -5 is negative"),
    ([("loop_end", {})], "instruction 0: loop_end without a matching loop_begin"),
    ([("loop_begin", dict(count=1))], "instruction 0: loop_begin without a matching loop_end"),
    ([("block_if", dict(lo=0, hi=1))], "instruction 0: block_if without a matching block_endif"),
    ([("loop_begin", dict(count=1)), ("block_endif", {})],
     "instruction 1: block_endif without a matching block_if inside the loop_begin of instruction 0"),
    ([("block_offset", dict(arg=2, stride=4))], "instruction 0: block_offset of kernel argument 2, the kernel takes 2"),
    ([("loop_begin", dict(count=1)), ("loop_offset", dict(arg=-1, stride=4)), ("loop_end", {})],
     "instruction 1: loop_offset of kernel argument -1, the kernel takes 2"),
])
def test_check_control_rejects(prog, message):
    with pytest.raises(ValueError) as e:
        check_control([isa.make(m, **f) for m, f in prog], 2)
    assert str(e.value) == message


def test_an_empty_loop_body_is_not_iterated():
    # loop_begin 2^40 / loop_end: 2 instructions however large the count (it used to spin 2^40 times)
    import time

    prog = [isa.make("loop_begin", count=2**40), isa.make("loop_end")]
    t = time.perf_counter()
    assert [i.mnemonic for i in specialize(prog, 0, ())[0]] == ["loop_begin", "loop_end"]
    assert time.perf_counter() - t < 0.5
    assert dynamic_instructions(prog, 1) == 2


def test_block_offset_mod_moves_by_the_block_index_modulo():
    """Two groups of 3 cores: core b's argument 0 moves by (b % 3) * 64 bytes, argument 1 by b * 8."""
    prog = [isa.make("block_offset_mod", arg=0, stride=64, modulo=3), isa.make("block_offset", arg=1, stride=8)]
    check_control(prog, 2)
    assert [specialize(prog, b, (1000, 0))[1] for b in range(6)] == [
        (1000, 0), (1064, 8), (1128, 16), (1000, 24), (1064, 32), (1128, 40)]


@pytest.mark.parametrize("mnemonic,field", [("block_offset_mod", "modulo"), ("block_offset_div", "divisor")])
@pytest.mark.parametrize("size", [0, -2])
def test_two_level_block_offsets_need_a_positive_group_size(mnemonic, field, size):
    with pytest.raises(ValueError, match=rf"^instruction 0: {mnemonic} {field} {size} \(>= 1 expected\)$"):
        check_control([isa.make(mnemonic, arg=0, stride=64, **{field: size})], 1)


def test_cores_taking_the_same_sections_share_one_stream():
    """stream() resolves a program once per pattern of taken block_if sections: cores 0-2 (section
    [0, 3)) share one code object, core 3 gets its own; each core's bases are its own."""
    from cann.sim.spmd import stream

    prog = [isa.make("block_offset_mod", arg=0, stride=64, modulo=3),
            isa.make("block_if", lo=0, hi=3), isa.make("pipe_barrier", pipe=isa.Pipe.ALL), isa.make("block_endif"),
            isa.make("block_if", lo=3, hi=4), isa.make("block_offset", arg=1, stride=8),
            isa.make("pipe_barrier", pipe=isa.Pipe.V), isa.make("block_endif")]
    got = [stream(prog, b, (1000, 0)) for b in range(4)]
    assert got[0][0] is got[1][0] is got[2][0] and got[3][0] is not got[0][0]
    assert [g[1] for g in got] == [(1000, 0), (1064, 0), (1128, 0), (1000, 24)]
    assert [i.mnemonic for i in got[3][0]] == ["block_offset_mod", "block_if", "block_offset", "pipe_barrier",
                                             "block_endif"]


def test_block_offset_div_moves_by_the_block_row():
    """Two rows of 3 cores: core b's argument 0 moves by (b // 3) * 64 bytes, argument 1 by (b % 3) * 8:
    every core runs one code over a 2 x 3 grid."""
    prog = [isa.make("block_offset_div", arg=0, stride=64, divisor=3),
            isa.make("block_offset_mod", arg=1, stride=8, modulo=3)]
    check_control(prog, 2)
    assert [specialize(prog, b, (1000, 0))[1] for b in range(6)] == [
        (1000, 0), (1000, 8), (1000, 16), (1064, 0), (1064, 8), (1064, 16)]
