"""The convolution's tiling plan on its own (cann.lowering.conv_plan): pure functions of the shapes,
the pins and the SoC, checked without compiling a model."""

import pytest

from cann.errors import CannError
from cann.hw.config import load_soc
from cann.lowering.conv_plan import (ConvGeom, conv_cycles, conv_plan, fm_copy, input_window, split_cores,
                                     used_taps)

SOC = load_soc("Ascend910")
# 16 channels (one C1 block), an 8x8 map, 3x3 kernel, stride 1, pad 1: an 8x8 output
GEO = ConvGeom(1, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, 8)
# fp16, L0C room for 4096 positions, 400000 bytes of L1, m / n / k tiles 64 / 16 / 144, one round
ARGS = dict(soc=SOC, m_cap=4096, l1_budget=400000, isz=2, m_t=64, n_t=16, k_t=144, rounds=1, loc=None)


def test_used_taps_drops_taps_reading_only_padding():
    # DeepLabV3's ASPP: a 3x3 at dilation 24 on a 16x16 map padded by 24 reads real input only at the centre
    assert used_taps(3, 24, 1, 24, 16, 16) == (1, 2)
    assert used_taps(3, 1, 1, 1, 8, 8) == (0, 3)


def test_input_window():
    # outputs 0..3 at stride 2, pad 1, a 3-tap kernel: padded rows -1..7 (end exclusive 8), all real in 8
    assert input_window(0, 4, 2, 1, 0, 1, 3, 8) == (-1, 8, 0, 8)


def test_fm_bytes():
    assert GEO.fm_bytes(False, 1, 8, 8, 2) == 8 * 8 * 16 * 2  # the window is clipped to the map
    assert GEO.fm_bytes(False, 1, 2, 8, 2) == 4 * 8 * 16 * 2  # two output rows read four input rows
    assert GEO.fm_bytes(True, 1, 2, 8, 2) == 2 * 8 * 16 * 2  # one tap: two rows


def test_fm_copy_keeps_l1_aligned():
    # a C04 map in fp16: 8-byte pixels, 32-byte L1 alignment
    assert fm_copy(2, 10, 2, 10, 4, 2, 32) == "whole"  # whole rows: one copy
    assert fm_copy(2, 3, 1, 10, 4, 2, 32) == "blocks"  # one C1 block: a copy per block is aligned
    assert fm_copy(2, 3, 2, 10, 4, 2, 32) is None  # 24-byte lines, 48-byte planes: no aligned way


def test_plan_unpinned_is_the_whole_map_at_its_estimate():
    taps, rows, cols, c1, blocks, cycles = conv_plan(GEO, {}, **ARGS)
    assert (taps, rows, cols, c1, blocks) == (False, 8, 8, 1, 1)
    assert cycles == conv_cycles(GEO, SOC, False, 8, 8, 1, 2, 144, 16, 64, 1)


def test_plan_pins():
    assert conv_plan(GEO, {"rows": 2}, **ARGS)[:5] == (False, 2, 8, 1, 1)  # whole rows
    assert conv_plan(GEO, {"rows": 2, "cols": 4}, **ARGS)[:5] == (False, 2, 4, 1, 1)  # a rectangle


def test_plan_spreads_output_tiles_over_core_groups():
    one = conv_plan(GEO, {}, **ARGS)
    four = conv_plan(GEO, {}, **ARGS, m_blocks_cap=4, n_cores=4)
    assert four[4] == 4 and four[5] < one[5]


def test_plan_pinned_rows_wider_than_l0c_is_an_error():
    wide = ConvGeom(1, 2, 5000, 3, 3, 1, 1, 1, 1, 1, 1, 2, 5000)
    with pytest.raises(CannError, match=r"tiling rows = 2 needs whole rows of 5000 positions \(4096 fit L0C\)"):
        conv_plan(wide, {"rows": 2}, **ARGS)


def test_split_cores_uses_every_core_for_a_batch():
    # 4 channel tiles, a batch of 8 on 32 cores: 8 image groups of 4 channel groups
    s = split_cores(GEO, {}, SOC, 32, 32, 4, 8, (1024, 1024), 4096, 400000, 2, 64, 16, 144, None)
    assert (s.i_blocks, s.n_blocks, s.m_blocks) == (8, 4, 1)
    assert (s.taps, s.rows, s.cols, s.c1) == (False, 8, 8, 1)


def test_split_cores_pinned_image_groups_must_divide_the_batch():
    with pytest.raises(CannError, match=r"tiling i_blocks = 3: a divisor of the batch 8 up to 32 cores"):
        split_cores(GEO, {"i_blocks": 3}, SOC, 32, 32, 4, 8, (1024, 1024), 4096, 400000, 2, 64, 16, 144, None)
