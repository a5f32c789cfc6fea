"""``python -m cann.sim.bench``: its conv-like stream is race-free (the checker is on) and its
modeled cycles are the tiles' sum (each tile ends with pipe_barrier(ALL))."""

from __future__ import annotations

import re

from cann.sim import bench


def test_the_bench_stream_runs_race_free_and_prints_its_speed(capsys):
    bench.main(["3"])
    one = capsys.readouterr().out
    bench.main(["3", "--distinct"])
    distinct = capsys.readouterr().out
    n = len(bench.conv_tile_program())
    for out in (one, distinct):
        m = re.fullmatch(r"(\d+) instructions in [\d.]+ s: [\d,]+ instr/s, [\d.]+ us/instr; (\d+) modeled cycles\n", out)
        assert m, out
        assert int(m[1]) == 3 * n
        assert int(m[2]) == 3 * 1770
