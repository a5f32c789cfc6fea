"""Memoized cube operands of one simulated kernel run (:meth:`cann.sim.core.AICore.run_lanes`).

A tiled convolution rebuilds the same img2col matrix for every tile of output channels: the same
instruction fields reading the same L1 feature map, so the same L0A bytes, which ``mmad`` then
converts to float32 again. :class:`Memo` keeps, per instruction key, the bytes it wrote and a
*token* naming that content, while the instruction's source bytes are unwritten; and it records
which on-chip ranges currently hold which token (*tags*). The handlers (:mod:`cann.sim.mte`) then
copy the kept bytes instead of recomputing them, and ``mmad`` looks its float32 operand up by
token (:meth:`cann.sim.mte.TransferUnit._f32_operand`): a token's content never changes, so an
array converted from it stays exact for as long as some range holds the token.

Invalidation: every write of on-chip bytes reports its range (:meth:`written`, from
:meth:`cann.sim.core.AICore._onchip` and the handlers that skip it): the kept results whose source
meets it are dropped, and so are the tags of the written range. Everything is emptied at the start
of each run (buffers may change from outside between runs, and the run's lanes may differ).
Memory is bounded by :data:`MEMO_BYTES`.
"""

from __future__ import annotations

import numpy as np

#: bytes of kept instruction results (the memo is emptied when a new one would exceed it)
MEMO_BYTES = 64 << 20


class Memo:
    """Kept instruction results by source range and key, and the token tags of on-chip ranges."""

    __slots__ = ("by_src", "tags", "nbytes", "_next")

    def __init__(self) -> None:
        #: source buffer -> (lo, hi) -> {key: (token, bytes written)}
        self.by_src: dict[str, dict[tuple[int, int], dict]] = {}
        #: buffer -> [(lo, hi, token)]: bytes [lo, hi) hold the content named ``token``
        self.tags: dict[str, list[tuple[int, int, int]]] = {}
        self.nbytes = 0
        self._next = 0

    def clear(self) -> None:
        """Forget every kept result and tag (tokens stay unique: they are never reused)."""
        self.by_src.clear()
        self.tags.clear()
        self.nbytes = 0

    def get(self, src: tuple[str, int, int], key) -> tuple[int, np.ndarray | None] | None:
        """``(token, bytes)`` kept for ``key`` reading source range ``src`` (buffer, lo, hi), None
        if none."""
        d = self.by_src.get(src[0])
        d = None if d is None else d.get(src[1:])
        return None if d is None else d.get(key)

    def put(self, src: tuple[str, int, int], key, raw: np.ndarray | None = None) -> int:
        """Keep ``raw`` (the bytes instruction ``key`` wrote, reading source range ``src``; None: a
        copy the handler simply repeats, only its token is kept); returns its new token."""
        size = 0 if raw is None else raw.nbytes
        if self.nbytes + size > MEMO_BYTES:
            self.by_src.clear()
            self.nbytes = 0
        self._next += 1
        self.by_src.setdefault(src[0], {}).setdefault(src[1:], {})[key] = (self._next, raw)
        self.nbytes += size
        return self._next

    def written(self, buf: str, lo: int, hi: int) -> None:
        """Bytes ``[lo, hi)`` of ``buf`` are about to be written: drop the kept results read from
        them and the tags there."""
        d = self.by_src.get(buf)
        if d:
            for r in [r for r in d if r[0] < hi and lo < r[1]]:
                self.nbytes -= sum(x.nbytes for _, x in d.pop(r).values() if x is not None)
        t = self.tags.get(buf)
        if t:
            self.tags[buf] = [x for x in t if not (x[0] < hi and lo < x[1])]

    def tag(self, buf: str, lo: int, hi: int, token: int) -> None:
        """Bytes ``[lo, hi)`` of ``buf`` now hold ``token``'s content (after :meth:`written` of that
        range)."""
        self.tags.setdefault(buf, []).append((lo, hi, token))

    def token_at(self, buf: str, lo: int, hi: int) -> tuple[int, int] | None:
        """``(token, its range's lo)`` of the tag holding all of ``[lo, hi)`` of ``buf``, else None."""
        for a, b, tok in self.tags.get(buf, ()):
            if a <= lo and hi <= b:
                return tok, a
        return None


#: bytes (source copies plus float32 values) :class:`Verified` keeps across runs, at most
VERIFIED_BYTES = 256 << 20


class Verified:
    """float32 operands kept across runs of one core (the weights ``mmad`` reads from L0B are the
    same bytes in every run of a model), each with a copy of the bytes it was converted from: a
    lookup compares the operand's current bytes with that copy (whole, as 8-byte words) and returns
    the kept array only when they are equal, so it is exact whatever ran in between.

    Keys: the operand's place, shape and lanes plus a sample of its bytes (so the operands of
    different kernels at one address coexist). Bounded by :data:`VERIFIED_BYTES`: when full, the
    entries no lookup of the current run used make room; if that is not enough, nothing new is kept
    (a model whose weights do not fit keeps the same ones every run instead of thrashing)."""

    __slots__ = ("entries", "nbytes", "run")

    def __init__(self) -> None:
        self.entries: dict[tuple, list] = {}  # key -> [source words, float32 array, last run]
        self.nbytes = 0
        self.run = 0

    def next_run(self) -> None:
        self.run += 1

    @staticmethod
    def key(place: tuple, words: np.ndarray) -> tuple:
        """The key of an operand at ``place`` whose source bytes are ``words`` (one row per lane
        kept, uint64)."""
        return place + (words[:, :4].tobytes(), words[:, -4:].tobytes())

    def get(self, key: tuple, words: np.ndarray) -> np.ndarray | None:
        e = self.entries.get(key)
        if e is None or not np.array_equal(e[0], words):
            return None
        e[2] = self.run
        return e[1]

    def put(self, key: tuple, words: np.ndarray, x: np.ndarray) -> None:
        """Keep ``x`` converted from ``words`` (copied), room permitting."""
        old = self.entries.pop(key, None)
        if old is not None:
            self.nbytes -= old[0].nbytes + old[1].nbytes
        size = words.nbytes + x.nbytes
        if self.nbytes + size > VERIFIED_BYTES:
            for k in [k for k, e in self.entries.items() if e[2] != self.run]:
                e = self.entries.pop(k)
                self.nbytes -= e[0].nbytes + e[1].nbytes
            if self.nbytes + size > VERIFIED_BYTES:
                return
        self.entries[key] = [words.copy(), x, self.run]
        self.nbytes += size
