"""Halo arithmetic (issue 15, Done-when point 3): the rows each slice reads, computed in closed form, equal
brute-force index propagation through the layers, over a grid of (kernel, stride, dilation, padding,
grid size) cases including uneven splits; and MindSpore's Conv2DInfo overlap formula where it applies."""

import itertools

import numpy as np
import pytest

from cann.passes.spatial.halo import (EMPTY, AxisOp, chain_read_ranges, needs_exchange, sizes, slice_halo,
                                      split)


def brute_chain(ops, n_in, out):
    """Every tensor's range read, by propagating each output index through the layers. A slice computes a
    contiguous block of each intermediate tensor (the hull of what the next layer reads from it), so every
    index of that block is propagated, holes (strides, dilations) included."""
    n = sizes(ops, n_in)
    need = [out]
    for op, n_prev in zip(reversed(ops), reversed(n[:-1])):
        read = {i for o in range(*need[-1]) for i in op.reads(o, n_prev)}
        need.append((min(read), max(read) + 1) if read else EMPTY)
    return need[::-1]


def brute_halo(ops, n_in, parts):
    owners = split(n_in, parts)
    out = split(sizes(ops, n_in)[-1], parts)
    res = []
    for idx, (own, o) in enumerate(zip(owners, out)):
        lo, hi = brute_chain(ops, n_in, o)[0]
        if (lo, hi) == EMPTY:
            res.append((0, 0))
        else:
            res.append((max(0, own[0] - lo), max(0, hi - own[1])))
    return res


WINDOWS = [AxisOp("window", kernel=k, stride=s, dilation=d, pad_begin=pb, pad_end=pe)
           for k, s, d, pb, pe in itertools.product((1, 2, 3, 5), (1, 2, 3), (1, 2), (0, 1, 2), (0, 1, 3))]
TRANSPOSES = [AxisOp("transpose", kernel=k, stride=s, dilation=d, pad_begin=pb, pad_end=pe, output_padding=op)
              for k, s, d, pb, pe, op in itertools.product((1, 2, 3, 4, 16), (1, 2, 8), (1, 2), (0, 1, 4), (0, 2),
                                                           (0, 1))
              if op < max(s, d)]
OTHERS = [AxisOp("crop", offset=3, size=9), AxisOp("upsample", scale=2), AxisOp("upsample", scale=3),
          AxisOp("pointwise"), AxisOp("window", kernel=2, stride=2, ceil_mode=True),
          AxisOp("window", kernel=3, stride=2, pad_begin=1, pad_end=1, ceil_mode=True)]


def _valid(ops, n_in, parts):
    try:
        n = sizes(ops, n_in)
        split(n_in, parts), split(n[-1], parts)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("op", WINDOWS + TRANSPOSES + OTHERS, ids=repr)
def test_one_layer_equals_brute_force(op):
    checked = 0
    for n_in in (7, 12, 13, 19):
        for parts in (1, 2, 3, 4):
            if not _valid([op], n_in, parts):
                continue
            for out in split(sizes([op], n_in)[-1], parts):
                assert chain_read_ranges([op], n_in, out) == brute_chain([op], n_in, out), (n_in, parts, out)
            got = [(h.before, h.after) for h in slice_halo([op], n_in, parts)]
            assert got == brute_halo([op], n_in, parts), (n_in, parts)
            checked += 1
    assert checked > 0 or op.kind == "crop"


def test_chains_equal_brute_force():
    """Random chains of 2-4 layers (the deeper halo of fused layers), uneven splits, grid sizes 1-5."""
    rng = np.random.default_rng(0)
    pool = WINDOWS + TRANSPOSES + OTHERS[1:]
    checked = 0
    for _ in range(600):
        ops = [pool[i] for i in rng.integers(0, len(pool), rng.integers(2, 5))]
        n_in, parts = int(rng.integers(6, 40)), int(rng.integers(1, 6))
        if not _valid(ops, n_in, parts) or sizes(ops, n_in)[-1] > 400:
            continue
        for out in split(sizes(ops, n_in)[-1], parts):
            assert chain_read_ranges(ops, n_in, out) == brute_chain(ops, n_in, out), (ops, n_in, parts, out)
        assert [(h.before, h.after) for h in slice_halo(ops, n_in, parts)] == brute_halo(ops, n_in, parts)
        checked += 1
    assert checked > 300


def _conv2dinfo_cases():
    """(k, s, d, n_in, parts, pad_top, pad_bottom, Conv2DInfo's [(top, bottom) per rank]) where its
    constraints hold: 'same' padding (pad_top = total // 2, ONNX SAME_UPPER), H_out % N == 0,
    H_in % s == 0, send/recv lengths <= the slice."""
    cases = []
    for k, s, d, n_in, parts in itertools.product((3, 5, 7), (1, 2), (1, 2), (8, 16, 24), (2, 4)):
        ke = d * (k - 1) + 1
        n_out = -(-n_in // s)
        total = max((n_out - 1) * s + ke - n_in, 0)
        top = total // 2
        ms = [(top + (n_in - n_out * s) * r // parts, (r + 1) * (n_out * s - n_in) // parts + ke - s - top)
              for r in range(parts)]
        if n_out % parts or n_in % s or n_in % parts or max(max(t, b) for t, b in ms) > n_in // parts:
            continue
        cases.append((k, s, d, n_in, parts, top, total - top, ms))
    return cases


@pytest.mark.parametrize("k, s, d, n_in, parts, top, bottom, ms", _conv2dinfo_cases())
def test_mindspore_conv2dinfo_formula(k, s, d, n_in, parts, top, bottom, ms):
    """MindSpore's Conv2DInfo overlap (scale-out.md §3.2): the first rank has no top overlap, the last no
    bottom one; a negative overlap is no halo."""
    op = AxisOp("window", kernel=k, stride=s, dilation=d, pad_begin=top, pad_end=bottom)
    for h in slice_halo([op], n_in, parts):
        r = h.index
        assert h.before == (0 if r == 0 else max(0, ms[r][0])), r
        assert h.after == (0 if r == parts - 1 else max(0, ms[r][1])), r


def test_conv2dinfo_cases_cover_the_grid():
    cases = _conv2dinfo_cases()
    assert len(cases) >= 40 and {c[1] for c in cases} == {1, 2} and {c[4] for c in cases} == {2, 4}


def test_known_values():
    same3 = AxisOp("window", kernel=3, pad_begin=1, pad_end=1)
    assert [(h.before, h.after) for h in slice_halo([same3], 8, 2)] == [(0, 1), (1, 0)]
    assert [(h.before, h.after) for h in slice_halo([same3] * 3, 8, 2)] == [(0, 3), (3, 0)]  # fused: 3 rows
    assert [h.sources for h in slice_halo([same3], 9, 3)] == [((1, (3, 4)),), ((0, (2, 3)), (2, (6, 7))),
                                                               ((1, (5, 6)),)]
    assert not needs_exchange([AxisOp("window")], 9, 3)  # 1x1 conv
    assert not needs_exchange([AxisOp("window", kernel=2, stride=2)], 16, 4)  # aligned 2x2/2 pool
    assert needs_exchange([AxisOp("window", kernel=2, stride=2)], 18, 4)  # misaligned uneven split: 5,5,4,4
    up = AxisOp("transpose", kernel=4, stride=2, pad_begin=1, pad_end=1)  # FCN-style 2x upsampling
    assert up.out_size(8) == 16
    assert [(h.before, h.after) for h in slice_halo([up], 8, 2)] == [(0, 1), (1, 0)]


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="conv"), "kind 'conv': one of window, transpose, crop, upsample, pointwise"),
    (dict(kind="window", stride=0), "stride 0: at least 1"),
    (dict(kind="window", pad_begin=-1), "pad_begin -1: at least 0"),
])
def test_bad_ops(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AxisOp(**kwargs)


def test_bad_sizes():
    with pytest.raises(ValueError, match="length 3 cannot be split into 4 non-empty slices"):
        split(3, 4)
    with pytest.raises(ValueError, match="shorter than the kernel's extent 5"):
        AxisOp("window", kernel=5).out_size(4)
    with pytest.raises(ValueError, match=r"crop \[3, 12\) outside the input length 10"):
        AxisOp("crop", offset=3, size=9).out_size(10)
