"""The GM planner (cann.codegen.gm_plan): lifetimes, reuse without overlap of live buffers,
determinism, and the layout without reuse (inputs, weights, then every buffer in program order)."""

from __future__ import annotations

import itertools

import pytest

from cann.codegen.gm_plan import Buffer, assign, check_plan, lifetimes, live_peak, plan_memory
from cann.compiler import make_context
from cann.dialects import main_function, tile
from cann.dialects.weights import parse_module
from cann.errors import CannError

GM = "#tile<space gm>"


def _t(n: int) -> str:
    return f"memref<{n}xf16, {GM}>"


def _main(body: str, args: str = f"%x: {_t(1024)}", results: str = ""):
    text = f"builtin.module {{\n  func.func @main({args}){(' -> ' + results) if results else ''} {{\n{body}\n  }}\n}}"
    return main_function(parse_module(text, make_context()), "<test>")


def _alloc(name: str, n: int) -> str:
    return f'    %{name} = tile.gm_alloc {{format = "ND", shape = array<i64: {n}>}} : {_t(n)}'


def _launch(*args: tuple[str, int]) -> str:
    return f"    tile.launch @k({', '.join('%' + a for a, _ in args)}) : {', '.join(_t(n) for _, n in args)}"


# x -> a -> b -> c (returned); w a workspace of launch 1; u never used; v a view of a read by launch 3
CHAIN = "\n".join([
    _alloc("a", 1024), _alloc("b", 1024), _alloc("w", 256), _alloc("c", 1024), _alloc("u", 64),
    '    %k = tile.constant {format = "ND", value = dense<1.0> : tensor<32xf16>} : ' + _t(32),
    f'    %v = tile.view %a {{format = "ND", shape = array<i64: 512>, offset = 512 : i64}} : {_t(1024)} -> {_t(512)}',
    _launch(("x", 1024), ("a", 1024), ("k", 32)),  # 0
    _launch(("a", 1024), ("b", 1024), ("w", 256)),  # 1
    _launch(("b", 1024), ("c", 1024)),  # 2
    _launch(("v", 512), ("c", 1024)),  # 3: a lives on through its view
    f"    func.return %c : {_t(1024)}",
])


def _chain():
    return _main(CHAIN, results=_t(1024))


def test_lifetimes_follow_launches_views_and_outputs():
    allocs, buffers = lifetimes(_chain())
    assert [(b.size, b.first, b.last) for b in buffers] == [
        (2048, 0, 3),  # a: written by 0, read by 1, and by 3 through its view
        (2048, 1, 2),  # b
        (512, 1, 1),  # w: a workspace, one launch
        (2048, 2, 4),  # c: a model output, live to the end (4 launches)
        (128, 0, 4),  # u: no launch uses it: live over the whole program
    ]
    assert all(isinstance(v.owner, tile.GmAllocOp) for v in allocs)


def test_without_reuse_the_layout_is_inputs_weights_then_buffers_in_program_order():
    main = _chain()
    plan = plan_memory(main, reuse=False)
    ops = {op.res.name_hint: op.res for op in main.body.block.ops if hasattr(op, "res")}
    x = main.body.block.args[0]
    # inputs at 0 (2048 bytes), the weights (64 bytes: 32 fp16, 64-byte aligned), then a, b, w, c, u
    assert plan.offset[x] == 0 and plan.weights_offset == 2048 and plan.offset[ops["k"]] == 2048
    assert [plan.offset[ops[n]] for n in "abwcu"] == [2112, 2112 + 2048, 2112 + 4096, 2112 + 4608, 2112 + 6656]
    assert plan.offset[ops["v"]] == plan.offset[ops["a"]] + 1024  # 512 elements of 2 bytes in
    assert plan.size == 2112 + 6784 and plan.unshared == 6784 and not plan.reuse


def test_reuse_shares_only_buffers_never_live_together():
    main = _chain()
    plan = plan_memory(main)
    ops = {op.res.name_hint: op.res for op in main.body.block.ops if hasattr(op, "res")}
    off = {n: plan.offset[ops[n]] - plan.arena_offset for n in "abwcu"}
    # b (1..2) can take nothing of a (0..3) or c (2..4); w (1..1) shares with c's bytes (2..4)
    assert off == {"a": 0, "b": 2048, "c": 4096, "w": 4096, "u": 6144}
    assert plan.size == plan.arena_offset + 6272 < plan_memory(main, reuse=False).size
    assert plan.live_peak == 2048 * 3 + 128  # launch 2: a, b, c and u: this plan is optimal
    assert plan.lifetime(ops["v"]) == (0, 3) and plan.lifetime(main.body.block.args[0]) is None


def test_a_buffer_read_by_a_launch_is_not_reused_for_that_launch_s_output():
    # a dies at launch 1, which writes b: a kernel reads its inputs while it writes its outputs
    body = "\n".join([_alloc("a", 1024), _alloc("b", 1024), _alloc("c", 1024),
                      _launch(("x", 1024), ("a", 1024)), _launch(("a", 1024), ("b", 1024)),
                      _launch(("b", 1024), ("c", 1024)), f"    func.return %c : {_t(1024)}"])
    plan = plan_memory(_main(body, results=_t(1024)))
    a, b, c = (plan.arena[i] for i in range(3))
    assert a != b and b != c and a == c  # c (launch 2 on) takes a's bytes (dead after launch 1)


def test_greedy_by_size_takes_the_smallest_gap_that_fits():
    # a [0, 4096) and c [6144, 7168) live at launch 0 only; when e (launch 1 on) is placed, the gaps
    # they leave between the long-lived b [4096, 6144) and d [7168, 8192) are 4096 and 1024 bytes
    bufs = [Buffer(0, 4096, 0, 0), Buffer(1, 2048, 0, 9), Buffer(2, 1024, 0, 0), Buffer(3, 1024, 0, 9),
            Buffer(4, 512, 1, 9)]
    arena = assign(bufs)
    check_plan(bufs, arena)
    assert arena == [0, 4096, 6144, 7168, 6144]  # e in c's bytes (best fit), not a's (first fit)
    assert assign(bufs, reuse=False) == [0, 4096, 6144, 7168, 8192]


def test_check_plan_names_two_live_buffers_that_overlap():
    bufs = [Buffer(0, 128, 0, 2), Buffer(1, 128, 2, 3), Buffer(2, 128, 3, 3)]
    check_plan(bufs, [0, 128, 0])  # 0 and 2 never live together
    with pytest.raises(CannError) as e:
        check_plan(bufs, [0, 64, 0], ["%a", "%b", "%c"])
    assert e.value.lines() == ["error: gm plan: %a [0, 128) live at launches 0..2 overlaps %b [64, 192) live at "
                               "launches 2..3"]


def test_reuse_never_grows_the_arena_and_is_deterministic():
    import random

    rng = random.Random(7)
    for _ in range(200):
        bufs = []
        for i in range(rng.randint(1, 12)):
            first = rng.randint(0, 8)
            bufs.append(Buffer(i, 64 * rng.randint(0, 40), first, first + rng.randint(0, 5)))
        arena = assign(bufs)
        check_plan(bufs, arena)
        for p, q in itertools.combinations(range(len(bufs)), 2):  # brute force, independently of check_plan
            if bufs[p].overlaps_in_time(bufs[q]) and bufs[p].size and bufs[q].size:
                assert arena[p] + bufs[p].size <= arena[q] or arena[q] + bufs[q].size <= arena[p]
        end = max(o + b.size for o, b in zip(arena, bufs))
        assert live_peak(bufs) <= end <= sum(b.size for b in bufs)
        assert assign(list(bufs)) == arena


def test_resnet50_activations_fit_a_quarter_of_the_unshared_arena():
    """Issue 14's bound: ResNet-50's non-weight GM arena at most 25% of 24,857,472 B (no reuse)."""
    from cann.compiler import lower
    from cann.testing import test_model

    main = main_function(lower(test_model("resnet50")), "resnet50")
    off, on = plan_memory(main, reuse=False), plan_memory(main)
    assert off.size - len(off.weights) <= 24_857_472  # the arena before reuse (issue 14; C04 input smaller since)
    assert on.size - len(on.weights) <= 24_857_472 // 4
    # the inputs (602,112 bytes: 1x3x224x224 float32) and the most bytes live at one launch: optimal
    assert on.size - len(on.weights) == on.weights_offset + on.live_peak == 602_112 + 3_612_672
    assert on.weights == off.weights and on.weights_offset == off.weights_offset
    assert plan_memory(main).offset == on.offset  # deterministic
