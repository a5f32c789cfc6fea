"""Static code size per kernel at two input sizes with the same tilings (issue 12: a kernel's code
size depends on its tiling, not on its tensor sizes).

Compiles a test model (``cann.testing.test_model``) down to ascend instructions at its declared input
size and at twice its height and width, the second time with every kernel's tiling of the first
pinned through ``convert-graph-to-tile{tiling=...}`` (a conv's ``m_blocks``, recorded only when above
1, pinned to 1 where absent, and its ``cols``, recorded only when its tiles split a row, pinned to the
small map's output width: at the large size its tiles are the same rows x cols rectangles, and its
``loops`` pinned to 1: a ragged last tile moved back into the loops; the small size is compiled again
with the same pins); an ``AveragePool`` covering the whole map (the
final pool of ResNet-50) scales its kernel and strides with the map. Prints per kernel ``name
static_small static_large ratio`` (static: instructions of the kernel's code, loops not expanded),
sorted by ratio, and a summary line with the number of kernels whose code grew by more than 5%.

The pools and trans_data are compiled in their loop form (``loops`` = 1) too; ``--no-loops``
measures every kernel's default form instead.

Usage: ``PYTHONPATH=. python benchmarks/codesize.py [model] [--top N] [--dump KERNEL] [--no-loops]``
(``--dump``: print that kernel's instructions at the large size).
"""

from __future__ import annotations

import argparse
import copy

import onnx

from cann.compiler import lower
from cann.dialects.ascend import kernels, op_to_instr
from cann.testing import test_model

#: growth above which a kernel counts as growing with its tensors
LIMIT = 1.05
#: kernels (name prefixes) besides convolutions that have a loop form (tiling ``loops`` = 1)
LOOP_FORMS = ("trans_data", "max_pool", "avg_pool", "global_avg_pool")


def resized(model, shape: list[int], base: list[int]):
    """``model`` with input 0 of ``shape`` (NCHW), whole-map AveragePools scaled along."""
    m = copy.deepcopy(model)
    for d, v in zip(m.graph.input[0].type.tensor_type.shape.dim, shape):
        d.dim_value = v
    del m.graph.value_info[:]
    f = shape[2] // base[2]
    for n in m.graph.node:
        if n.op_type == "AveragePool":
            for a in n.attribute:
                if a.name in ("kernel_shape", "strides"):
                    a.ints[:] = [x * f for x in a.ints]
    return m


def compile_kernels(model, pins: dict | None = None) -> dict:
    """``{kernel: (instructions, tiling, ONNX node name)}`` of ``model`` lowered to ascend, ``pins`` pinned."""
    module = lower(model, until="ascend", tiling=pins)
    out = {}
    for k in kernels(module):
        t = k.attributes.get("tile.tiling")
        tiling = {kk: v.value.data for kk, v in t.data.items()} if t else {}
        node = k.location.desc.data if hasattr(k.location, "desc") else ""
        out[k.sym_name.data] = ([op_to_instr(op) for op in k.instructions], tiling, node)
    return out


def output_widths(model) -> dict[str, int]:
    """``{node name: width of its first output}`` (NCHW outputs; names as the importer gives them)."""
    m = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in (*m.graph.value_info, *m.graph.output)}
    out = {}
    for i, n in enumerate(m.graph.node):
        shape = shapes.get(n.output[0], [])
        if len(shape) == 4:
            out[n.name or f"{n.op_type}_{i}"] = shape[3]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default="resnet50", help="cann.testing.test_model name")
    ap.add_argument("top", nargs="?", type=int, default=None, help="print only the N largest ratios")
    ap.add_argument("--dump", default=None, help="print this kernel's instructions at the large size")
    ap.add_argument("--no-loops", action="store_true", help="the default form, not the loop form (loops = 1)")
    args = ap.parse_args()
    model = test_model(args.model)
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    default = compile_kernels(model)
    if not args.no_loops:  # the loop form of the pools and trans_data (their tilings differ in it)
        default = compile_kernels(model, {k: {"loops": 1} for k in default if k.startswith(LOOP_FORMS)})
    big = list(dims)
    big[2] *= 2
    big[3] *= 2
    pins = {k: dict(t) for k, (_, t, _) in default.items()}
    widths = output_widths(model)
    for k, t in pins.items():  # a conv records its core groups only when it splits its output tiles,
        if "rows" in t and "block_dim" in t:  # its columns only when they split a row
            t.setdefault("m_blocks", 1)
            if "k" in t and default[k][2] in widths:  # a cube kernel (Conv): ragged last tiles in the loops
                t.setdefault("cols", widths[default[k][2]])
                if not args.no_loops:
                    t.setdefault("loops", 1)
    small = compile_kernels(model, pins)
    large = compile_kernels(resized(model, big, dims), pins)
    rows = sorted(((len(large[k][0]) / max(len(small[k][0]), 1), k) for k in small if k in large), reverse=True)
    over = [k for r, k in rows if r > LIMIT]
    print(f"{'kernel':30s} {'static_' + str(dims[2]):>10s} {'static_' + str(big[2]):>10s}  ratio")
    for r, k in rows[:args.top]:
        print(f"{k:30s} {len(small[k][0]):10d} {len(large[k][0]):10d}  {r:.2f}")
    total_s = sum(len(small[k][0]) for _, k in rows)
    total_l = sum(len(large[k][0]) for _, k in rows)
    print(f"kernels {len(rows)}, over {round((LIMIT - 1) * 100)}%: {len(over)}; total static {total_s} -> {total_l}"
          + (f"; over: {' '.join(over)}" if over else ""))
    if args.dump:
        for ins in large[args.dump][0]:
            print("   ", ins.asm())


if __name__ == "__main__":
    main()
