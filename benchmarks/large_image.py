"""Very large images on a device grid (issue 15): plans from the cost model, without running.

    python benchmarks/large_image.py                       # FCN8s-style net, 4x30000x30000, grids 1x1 .. 8x8
    python benchmarks/large_image.py --size 4,2048,2048 --grids 1x1,2x2,4x4
    python benchmarks/large_image.py --size 3,64,128 --grids 1x2,2x2 --check   # real partitioned runs too

For each grid it partitions an FCN8s-style network (the layers of test/fixtures/torch/fcn8s.onnx, built here
with onnx.helper at any size: VGG-like encoder, pool3/pool4 score skips, ConvTranspose upsamplings, FCN crops)
with ``graph-spatial-partition`` and prints, per grid, from the partitioned graphs:

* ``act/dev``: the largest device's activation bytes in fp16 (every tensor block it holds, no reuse: what
  the GM planner allocates today) and ``peak1``: its largest single activation block;
* ``halo/step``: halo bytes all devices receive per inference (fp16), ``msgs``: exchanges per step;
* ``compute``: the slowest device's ideal cube time (its MACs over the SoC's fp16 cube rate on all cores: a
  lower bound, not a simulation -- these images are far beyond what the simulator runs here);
* ``exchange``: its halo exchange time from the link model (cann/hw/links.py, Atlas800: HCCS within a group of
  4, PCIe within a server of 8, RoCE between servers), two phases per exchange;
* ``step``: compute plus exchange (no overlap assumed: an upper bound on the planned step), and the strong-
  scaling efficiency T(1) / (p * T(p)) against the 1x1 plan.

``--check`` also compiles and runs the partitioned model on the simulator (emulated, one process) and prints
its simulated step (cann.spatial.run.step_time) and its rel L2 against the unpartitioned model: for small
sizes only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cann.dialects.graph_base import _shape  # noqa: E402
from cann.dialects.graph_dist import HaloExchangeOp  # noqa: E402
from cann.hw.config import load_soc  # noqa: E402
from cann.hw.links import load_cluster  # noqa: E402
from cann.spatial.compile import partition_module  # noqa: E402


def fcn8s(c: int, h: int, w: int, classes: int = 5, seed: int = 0) -> onnx.ModelProto:
    """The FCN8s-style network of the fixture for a c x h x w image (h, w multiples of 32)."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    sizes = {"image": (c, h, w)}

    def weight(shape):
        name = f"w{len(inits)}"
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:])))
                                             .astype(np.float32), name))
        return name

    def add(kind, ins, out_shape, **attrs):
        out = f"{kind.lower()}{len(nodes)}"
        nodes.append(helper.make_node(kind, ins, [out], name=out, **attrs))
        sizes[out] = out_shape
        return out

    def conv(x, cout, k, relu=True):
        cin, hh, ww = sizes[x]
        y = add("Conv", [x, weight((cout, cin, k, k)), weight((cout,))], (cout, hh, ww), kernel_shape=[k, k],
                pads=[k // 2] * 4)
        return add("Relu", [y], sizes[y]) if relu else y

    def pool(x):
        cc, hh, ww = sizes[x]
        return add("MaxPool", [x], (cc, hh // 2, ww // 2), kernel_shape=[2, 2], strides=[2, 2])

    def up(x, k, s):
        cc, hh, ww = sizes[x]
        return add("ConvTranspose", [x, weight((cc, cc, k, k))], (cc, (hh - 1) * s + k, (ww - 1) * s + k),
                   kernel_shape=[k, k], strides=[s, s])

    def crop(x, off, like):
        cc, hh, ww = sizes[like]
        cst = []
        for vals in ([off, off], [off + hh, off + ww], [2, 3]):
            name = f"c{len(inits)}"
            inits.append(numpy_helper.from_array(np.array(vals, np.int64), name))
            cst.append(name)
        return add("Slice", [x, *cst], (sizes[x][0], hh, ww))

    x = "image"
    for cout, n in ((8, 2), (16, 2), (16, 2)):
        for _ in range(n):
            x = conv(x, cout, 3)
        x = pool(x)
    pool3 = x
    pool4 = pool(conv(pool3, 32, 3))
    x = conv(conv(pool(conv(pool4, 32, 3)), 32, 3), 32, 1)
    score = conv(x, classes, 1, relu=False)
    s4, s3 = conv(pool4, classes, 1, relu=False), conv(pool3, classes, 1, relu=False)
    fuse4 = add("Add", [crop(up(score, 4, 2), 1, s4), s4], sizes[s4])
    fuse3 = add("Add", [crop(up(fuse4, 4, 2), 1, s3), s3], sizes[s3])
    sizes["_out"] = (classes, h, w)
    out = crop(up(fuse3, 16, 8), 4, "_out")
    g = helper.make_graph(nodes, "fcn8s", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, c, h, w])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, classes, h, w])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def _macs(op) -> int:
    name = op.name
    if name == "graph.conv2d":
        o = _shape(op.res)
        return int(np.prod(o)) * int(np.prod(_shape(op.w)[1:]))
    if name == "graph.conv_transpose":
        return int(np.prod(_shape(op.x))) * int(np.prod(_shape(op.w)[1:]))
    return 0


def plan(model, grid: str, cluster, soc) -> dict:
    module, _ = partition_module(model, grid)
    R, C = map(int, grid.split("x"))
    funcs = [f for f in module.ops if getattr(f, "sym_name", None) is not None]
    rate = soc.cube.macs_per_cycle(2) * soc.ai_core_count * soc.clock_mhz * 1e6
    per = []
    for rank, f in enumerate(funcs):
        act = peak = macs = 0
        t_ex = 0.0
        halo = 0
        ops = list(f.body.block.ops)
        for op in ops:
            macs += _macs(op)
            for r in op.results:
                s = _shape(r) if hasattr(r.type, "get_shape") else ()
                if len(s) == 4 and op.name != "graph.constant":
                    b = int(np.prod(s)) * 2
                    act += b
                    peak = max(peak, b)
            if isinstance(op, HaloExchangeOp):
                h0, h1, w0, w1 = op.need.get_values()
                a0, a1, b0, b1 = op.own()
                n, ch = _shape(op.x)[:2]
                phases = []
                for dim, (lo, hi, olo, ohi) in enumerate(((h0, h1, a0, a1), (w0, w1, b0, b1))):
                    other = (b1 - b0) if dim == 0 else (h1 - h0)
                    before, after = max(0, olo - lo), max(0, hi - ohi)
                    src = [(rank - C if dim == 0 else rank - 1, before), (rank + C if dim == 0 else rank + 1, after)]
                    times = [cluster.link_between(q, rank).time(k * other * n * ch * 2) for q, k in src if k]
                    halo += sum(k * other * n * ch * 2 for _, k in src if k)
                    phases.append(max(times, default=0.0))
                t_ex += sum(phases)
        per.append({"act": act, "peak": peak, "compute": macs / rate, "exchange": t_ex, "halo": halo,
                    "msgs": sum(isinstance(op, HaloExchangeOp) for op in ops)})
    worst = max(per, key=lambda p: p["compute"] + p["exchange"])
    return {"grid": grid, "ranks": R * C, "act": max(p["act"] for p in per), "peak": max(p["peak"] for p in per),
            "halo": sum(p["halo"] for p in per), "msgs": worst["msgs"], "compute": worst["compute"],
            "exchange": worst["exchange"], "step": worst["compute"] + worst["exchange"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="4,30000,30000", help="C,H,W of the image (default 4,30000,30000)")
    ap.add_argument("--grids", default="1x1,1x2,2x2,2x4,4x4,4x8,8x8")
    ap.add_argument("--cluster", default="Atlas800")
    ap.add_argument("--check", action="store_true", help="also run the partitioned model (small sizes only)")
    args = ap.parse_args()
    c, h, w = map(int, args.size.split(","))
    h, w = h // 32 * 32, w // 32 * 32  # the five 2x2 pools
    model = fcn8s(c, h, w)
    cluster, soc = load_cluster(args.cluster), load_soc("Ascend910")
    print(f"FCN8s-style, image {c}x{h}x{w} (fp16), {soc.name} devices, {cluster.name} links")
    print(f"{'grid':>5} {'act/dev GB':>10} {'peak1 GB':>9} {'halo/step MB':>12} {'msgs':>4} {'compute ms':>10} "
          f"{'exchange ms':>11} {'step ms':>8} {'strong eff':>10}")
    base = None
    for grid in args.grids.split(","):
        t0 = time.time()
        p = plan(model, grid, cluster, soc)
        base = base or p["step"] * p["ranks"]
        print(f"{grid:>5} {p['act'] / 1e9:10.3f} {p['peak'] / 1e9:9.3f} {p['halo'] / 1e6:12.3f} {p['msgs']:4d} "
              f"{p['compute'] * 1e3:10.3f} {p['exchange'] * 1e3:11.3f} {p['step'] * 1e3:8.3f} "
              f"{base / (p['ranks'] * p['step']):10.2f}   ({time.time() - t0:.1f} s to plan)")
        if args.check:
            import cann
            from cann.spatial.compile import compile_spatial
            from cann.spatial.run import format_time, run_emulated, step_time

            x = np.random.default_rng(0).standard_normal((1, c, h, w), dtype=np.float32)
            ref = cann.compile(model).run({"image": x})
            bundle = compile_spatial(model, grid)
            out, stats = run_emulated(bundle, {"image": x})
            (name,) = out
            err = np.linalg.norm(out[name] - ref[name]) / np.linalg.norm(ref[name])
            print(f"      simulated: {format_time(step_time(bundle, stats), bundle.grid)}; rel L2 vs 1 device {err:.2e}")


if __name__ == "__main__":
    main()
