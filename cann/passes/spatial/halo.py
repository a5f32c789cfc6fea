"""Halo arithmetic for spatial partitioning: which input rows (or columns) a slice of a layer's output reads.

Everything here works on ONE spatial axis (H or W; the two are independent, a 2-D slice reads the
rectangle of its row range by its column range). Indices are 0-based; ranges are half-open ``(lo, hi)``;
the empty range is ``(0, 0)``.

A layer along one axis is an :class:`AxisOp`:

* ``window``: Conv, MaxPool/AveragePool, explicit Pad (``kernel=1``) — output ``o`` reads inputs
  ``o*stride - pad_begin + j*dilation`` for ``j`` in ``[0, kernel)``, those inside ``[0, n_in)`` (the others
  are padding). Output size ``floor((n_in + pads - dilation*(kernel-1) - 1) / stride) + 1`` (``ceil`` with
  ``ceil_mode``, whose last window must start inside the input or the left padding, as ONNX says).
* ``transpose``: ConvTranspose — input ``i`` adds into outputs ``i*stride - pad_begin + j*dilation``;
  output size ``(n_in-1)*stride - pads + dilation*(kernel-1) + 1 + output_padding``.
* ``crop``: a Slice of the axis — output ``o`` reads ``o + offset``; output size ``size``.
* ``upsample``: nearest-neighbour Resize by an integer ``scale`` — output ``o`` reads ``o // scale``.
* ``pointwise``: elementwise ops, BatchNorm, activations — output ``o`` reads ``o``.

:meth:`AxisOp.read_range` is the exact hull (smallest and largest input index read) in O(kernel);
:func:`split` partitions an axis unevenly as ``numpy.array_split`` does (the first ``n % parts`` slices one
longer); :func:`slice_halo` gives, for each slice of a chain of layers, the input range it reads and the
rows it needs beyond its own input slice (its halo, before and after) — one exchange for the whole chain
(the deeper halo of fused layers) or, with a one-layer chain, one exchange per layer.
Errors are :class:`ValueError` naming the bad field (callers turn them into located ``CannError``\\ s).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

Range = tuple[int, int]
EMPTY: Range = (0, 0)
KINDS = ("window", "transpose", "crop", "upsample", "pointwise")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class AxisOp:
    """One layer along one spatial axis (see the module docstring for each ``kind``'s index map)."""

    kind: str
    kernel: int = 1
    stride: int = 1
    dilation: int = 1
    pad_begin: int = 0
    pad_end: int = 0
    output_padding: int = 0  # transpose only
    ceil_mode: bool = False  # window only
    offset: int = 0  # crop only
    size: int = 0  # crop only: the output length
    scale: int = 1  # upsample only

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind '{self.kind}': one of {', '.join(KINDS)}")
        for f in ("kernel", "stride", "dilation", "scale"):
            if getattr(self, f) < 1:
                raise ValueError(f"{f} {getattr(self, f)}: at least 1")
        for f in ("pad_begin", "pad_end", "output_padding", "offset"):
            if getattr(self, f) < 0:
                raise ValueError(f"{f} {getattr(self, f)}: at least 0")

    @property
    def extent(self) -> int:
        """The receptive extent of one output, ``dilation*(kernel-1) + 1``."""
        return self.dilation * (self.kernel - 1) + 1

    def out_size(self, n_in: int) -> int:
        """The output length for an input of length ``n_in`` (ValueError when there is no output)."""
        if n_in < 1:
            raise ValueError(f"input length {n_in}: at least 1")
        k = self.kind
        if k == "window":
            span = n_in + self.pad_begin + self.pad_end - self.extent
            if span < 0:
                raise ValueError(f"input length {n_in} + pads {self.pad_begin}+{self.pad_end} is shorter than the "
                                 f"kernel's extent {self.extent}")
            n = (_ceil_div(span, self.stride) if self.ceil_mode else span // self.stride) + 1
            if self.ceil_mode and (n - 1) * self.stride >= n_in + self.pad_begin:
                n -= 1  # ONNX: the last window must start inside the input or the left padding
            return n
        if k == "transpose":
            n = (n_in - 1) * self.stride - self.pad_begin - self.pad_end + self.extent + self.output_padding
            if n < 1:
                raise ValueError(f"input length {n_in} gives output length {n}")
            return n
        if k == "crop":
            if self.size < 1 or self.offset + self.size > n_in:
                raise ValueError(f"crop [{self.offset}, {self.offset + self.size}) outside the input length {n_in}")
            return self.size
        if k == "upsample":
            return n_in * self.scale
        return n_in

    def reads(self, o: int, n_in: int) -> Iterator[int]:
        """Brute force: every input index output ``o`` reads (a reference for tests; O(n_in) for transpose)."""
        k = self.kind
        if k == "window":
            for j in range(self.kernel):
                i = o * self.stride - self.pad_begin + j * self.dilation
                if 0 <= i < n_in:
                    yield i
        elif k == "transpose":
            for i in range(n_in):
                for j in range(self.kernel):
                    if i * self.stride - self.pad_begin + j * self.dilation == o:
                        yield i
                        break
        elif k == "crop":
            yield o + self.offset
        elif k == "upsample":
            yield o // self.scale
        else:
            yield o

    def read_range(self, n_in: int, out: Range) -> Range:
        """The hull ``(lo, hi)`` of the input indices that outputs ``out = (lo, hi)`` read (``EMPTY`` when they
        read none, e.g. outputs over padding only). Exact: equals the min and max of :meth:`reads`."""
        lo, hi = out
        if lo >= hi:
            return EMPTY
        k = self.kind
        if k == "crop":
            return lo + self.offset, hi + self.offset
        if k == "upsample":
            return lo // self.scale, (hi - 1) // self.scale + 1
        if k == "pointwise":
            return lo, hi
        s, d, pb = self.stride, self.dilation, self.pad_begin
        first, last = None, None
        for j in range(self.kernel):
            if k == "window":  # outputs o with 0 <= o*s - pb + j*d < n_in
                o0 = max(lo, _ceil_div(pb - j * d, s))
                o1 = min(hi - 1, (n_in - 1 + pb - j * d) // s)
                if o0 > o1:
                    continue
                a, b = o0 * s - pb + j * d, o1 * s - pb + j * d
            else:  # transpose: inputs i in [0, n_in) with lo <= i*s - pb + j*d < hi
                a = max(0, _ceil_div(lo + pb - j * d, s))
                b = min(n_in - 1, (hi - 1 + pb - j * d) // s)
                if a > b:
                    continue
            first = a if first is None else min(first, a)
            last = b if last is None else max(last, b)
        return EMPTY if first is None else (first, last + 1)


def split(n: int, parts: int) -> list[Range]:
    """``n`` indices in ``parts`` contiguous slices, the first ``n % parts`` one longer (numpy.array_split);
    ValueError when a slice would be empty."""
    if parts < 1:
        raise ValueError(f"parts {parts}: at least 1")
    if n < parts:
        raise ValueError(f"length {n} cannot be split into {parts} non-empty slices")
    q, r = divmod(n, parts)
    bounds = [i * q + min(i, r) for i in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def sizes(ops: Sequence[AxisOp], n_in: int) -> list[int]:
    """Lengths of the chain's tensors: ``[n_in, after op 0, after op 1, ...]``."""
    out = [n_in]
    for op in ops:
        out.append(op.out_size(out[-1]))
    return out


def chain_read_ranges(ops: Sequence[AxisOp], n_in: int, out: Range) -> list[Range]:
    """For outputs ``out`` of the last op of the chain: the range each tensor of the chain must hold,
    ``[chain input, after op 0, ..., out]`` (what a slice computes when the chain is fused: one exchange of
    the first range, redundant compute of the intermediate ones)."""
    n = sizes(ops, n_in)
    ranges = [out]
    for op, n_prev in zip(reversed(ops), reversed(n[:-1])):
        ranges.append(op.read_range(n_prev, ranges[-1]))
    return ranges[::-1]


@dataclass(frozen=True)
class SliceHalo:
    """What slice ``index`` of a partitioned chain needs at the chain's input.

    ``own``: its own input slice; ``out``: its own output slice; ``reads``: the input range it reads;
    ``before`` / ``after``: rows it reads beyond its own slice on each side (0 when none; the halo it
    receives); ``sources``: ``(slice index, (lo, hi))`` of every other slice it receives rows from."""

    index: int
    own: Range
    out: Range
    reads: Range
    before: int
    after: int
    sources: tuple[tuple[int, Range], ...]


def slice_halo(ops: Sequence[AxisOp], n_in: int, parts: int) -> list[SliceHalo]:
    """Per slice of ``parts``: the halo at the chain's input when both the chain's input and its output are
    split with :func:`split` (the output split decides who computes what)."""
    n = sizes(ops, n_in)
    owners = split(n_in, parts)
    result = []
    for idx, out in enumerate(split(n[-1], parts)):
        reads = chain_read_ranges(ops, n_in, out)[0]
        own = owners[idx]
        if reads == EMPTY:
            result.append(SliceHalo(idx, own, out, reads, 0, 0, ()))
            continue
        src = []
        for j, (a, b) in enumerate(owners):
            lo, hi = max(a, reads[0]), min(b, reads[1])
            if j != idx and lo < hi:
                src.append((j, (lo, hi)))
        result.append(SliceHalo(idx, own, out, reads, max(0, own[0] - reads[0]), max(0, reads[1] - own[1]),
                                tuple(src)))
    return result


def needs_exchange(ops: Sequence[AxisOp], n_in: int, parts: int) -> bool:
    """Whether any slice of the chain reads rows another slice owns (False e.g. for 1x1 convs and
    pointwise ops, and for windows with ``extent <= stride`` whose splits line up)."""
    return any(h.sources for h in slice_halo(ops, n_in, parts))
