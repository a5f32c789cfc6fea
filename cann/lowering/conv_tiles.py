"""A convolution's output tiles: where their positions lie in the map, and their code as hardware loops.

A Conv's output tiles are nested hardware loops (rows of tiles of a core group, the column tiles of
each row; :func:`emit_tiles`), the border tiles joining them through ``loop_clamp``: the kernel's
code grows with its tiling and core groups, not with its feature map. With tiling ``loops`` = 1 a
core group's tiles are one loop nest (:func:`tile_grid`), the ragged last tile moved back to end
at the map's edge. The tile's own code (loads, img2col, mmad, epilogue) is the caller's
``tile_code`` (:func:`cann.lowering.conv.conv2d`).
"""

from __future__ import annotations

from cann.lowering.common import KernelBuilder


def row_segments(ms0: int, valid: int, cols: int, ho0: int, wo0: int, wo: int) -> list[tuple[int, int, int]]:
    """``[(tile position, map position, count), ...]``: positions ``[ms0, ms0 + valid)`` of an output
    tile ``cols`` wide at (``ho0``, ``wo0``) of a ``wo``-wide map, one run per map row they cover
    (one run when the tile spans whole map rows)."""
    if cols == wo:
        return [(ms0, ho0 * wo + ms0, valid)]
    out, p = [], ms0
    while p < ms0 + valid:
        r, c = divmod(p, cols)
        cnt = min(cols - c, ms0 + valid - p)
        out.append((p, (ho0 + r) * wo + wo0 + c, cnt))
        p += cnt
    return out


def emit_tiles(kb: KernelBuilder, mine: list[tuple[int, int]], n_ct: int, rows: int, cols: int, ho: int, wo: int,
                tile_code, move_back: bool) -> None:
    """Emit the output tiles ``mine`` (``(tile row, tile column)``, row-major and consecutive) of one
    core group as hardware loops whose counts are the only thing the map size changes: a partial
    first and last tile row as loops over their column tiles, the whole tile rows between as a loop
    over rows of a loop over columns (the border tiles' pads and windows through ``loop_clamp``).
    With ``move_back`` a ragged last tile (the map's edge inside it) of a loop of two or more is
    moved back to end at the edge: every tile of the loop is whole (it joins the loop) and the
    overlap is recomputed and rewritten with the same values by the same core; without, it is
    peeled (its own, smaller code)."""
    by_row: dict[int, list[int]] = {}
    for r, c in mine:
        by_row.setdefault(r, []).append(c)
    segs = list(by_row.items())
    full = [i for i, (_, cs) in enumerate(segs) if len(cs) == n_ct]  # consecutive: partial rows only at the ends
    first, last = (full[0], full[-1]) if full else (len(segs), len(segs) - 1)

    def col_of(c: int, cs: list[int]) -> int:
        return wo - cols if move_back and c * cols + cols > wo and len(cs) > 1 else c * cols

    def row_of(r: int, rs: list[int]) -> int:
        return ho - rows if move_back and r * rows + rows > ho and len(rs) > 1 else r * rows

    def one_row(ho0: int, cs: list[int]) -> None:
        kb.roll(len(cs), lambda j: tile_code(ho0, col_of(cs[j], cs)), clamp=True)

    if move_back and tile_grid(kb, segs, n_ct, rows, cols, ho, wo, tile_code):
        return
    for r, cs in segs[:first]:
        one_row(r * rows, cs)
    whole = [segs[i][0] for i in range(first, last + 1)]
    if whole:
        kb.roll(len(whole), lambda i: one_row(row_of(whole[i], whole), segs[first + i][1]), clamp=True)
    for r, cs in segs[last + 1:]:
        one_row(r * rows, cs)


def tile_grid(kb: KernelBuilder, segs: list[tuple[int, list[int]]], n_ct: int, rows: int, cols: int, ho: int,
               wo: int, tile_code) -> bool:
    """The loop form (tiling ``loops`` = 1) of one core group's output tiles ``segs`` (``(tile row,
    [tile columns])``, see :func:`emit_tiles`) when they are a rectangle (one run of columns, or
    whole tile rows): one nest of hardware loops (:meth:`KernelBuilder.tile_loops`), loops of one
    iteration included, the last tile row / column of the map moved back to end at its edge, so the
    code does not depend on the counts (the map size). ``tile_code(ho0, wo0, lo, hi, grid=True)`` emits a tile
    whose windows are clipped at the map's low / high edges where ``lo`` / ``hi`` are true. False
    (nothing emitted) when the tiles are no rectangle, a tile is larger than the map, or the tiles
    are not one body (e.g. a kernel tap reading only padding in a border tile)."""
    cs = segs[0][1]
    if rows > ho or cols > wo or any(c != cs for _, c in segs) or cs != list(range(cs[0], cs[0] + len(cs))):
        return False
    n_rt, r_first = -(-ho // rows), segs[0][0]

    def tile_(idx, lo, hi) -> None:
        r, c = r_first + idx[0], cs[0] + idx[1]
        ho0 = ho - rows if hi[0] and r == n_rt - 1 else r * rows
        wo0 = wo - cols if hi[1] and c == n_ct - 1 else c * cols
        tile_code(ho0, wo0, lo, hi, grid=True)

    try:
        kb.tile_loops((len(segs), len(cs)), tile_)
    except ValueError:
        return False
    return True
