"""Benchmark: the conv tiling cost model against timing-only simulation (issue 13, items 3, 4, 8).

Every distinct convolution of a test model (ResNet-50 by default: input and weight shapes, strides,
pads, dilations) becomes a single-Conv ONNX model, compiled with each tiling of a grid -- channel
groups ``n_blocks`` x output rows per tile ``rows`` x row groups ``m_blocks`` (the fewest and the
most the rows allow), as far as the SoC's buffers take them -- and timed with the timing-only
simulator (``Model.time``: the cycles of a full run). The cost model's estimate of a tiling is
``cann.lowering.cube._conv_cycles``, the figure the lowering minimizes, evaluated at the tiling the
kernel recorded. Per shape it prints the candidates, Kendall's tau (tau-b, scipy) between estimated
and simulated cycles, the regret of the model's pick (simulated cycles of the estimate's argmin over
the best simulated, minus one) and of the default compile; then the median tau and the geometric
mean regrets.

With ``--kb-out PATH`` the best simulated tiling of each shape is written as a knowledge base
(:mod:`cann.passes.tile_search_kb`; ``cann-compile --kb PATH`` applies it).

Usage: ``PYTHONPATH=. python benchmarks/autotune.py [model] [--shapes N] [--rows R ...] [--kb-out PATH]``
(needs scipy: ``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import math
import statistics

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference
from scipy.stats import kendalltau

import cann
from cann.codegen.offline import build_offline_model
from cann.compiler import lower
from cann.dialects.ascend import kernels
from cann.hw.config import load_soc
from cann.lowering.cube import _conv_cycles, _ConvGeom
from cann.passes.tile_search_kb import compiler_version, dump, signature
from cann.runtime import Model
from cann.testing import test_model

SOC = "Ascend910"


def conv_shapes(model: onnx.ModelProto) -> list[dict]:
    """The distinct Conv nodes of ``model``: input shape, weight shape and attributes."""
    m = shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in (*m.graph.input, *m.graph.value_info, *m.graph.output)}
    weights = {t.name: list(t.dims) for t in m.graph.initializer}
    out, seen = [], set()
    for n in m.graph.node:
        if n.op_type != "Conv":
            continue
        a = {x.name: list(x.ints) if x.ints else x.i for x in n.attribute}
        k = weights[n.input[1]]
        key = (tuple(shapes[n.input[0]]), tuple(k), tuple(a.get("strides", [1, 1])), tuple(a.get("pads", [0] * 4)),
               tuple(a.get("dilations", [1, 1])), a.get("group", 1))
        if key not in seen:
            seen.add(key)
            out.append(dict(x=key[0], w=key[1], strides=key[2], pads=key[3], dilations=key[4], group=key[5]))
    return out


def conv_model(s: dict) -> onnx.ModelProto:
    n, c, h, w = s["x"]
    co, _, kh, kw = s["w"]
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = s["strides"], s["pads"], s["dilations"]
    ho, wo = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1, (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    wt = np.random.default_rng(0).standard_normal(s["w"]).astype(np.float32) / math.sqrt(c * kh * kw)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], strides=list(s["strides"]), pads=list(s["pads"]),
                          dilations=list(s["dilations"]), group=s["group"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, co, ho, wo])],
        [numpy_helper.from_array(wt, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def estimate(s: dict, t: dict, soc) -> float:
    """The cost model's cycles for the tiling ``t`` a conv kernel recorded (its defaults filled in)."""
    _, c, h, w = s["x"]
    co, _, kh, kw = s["w"]
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = s["strides"], s["pads"], s["dilations"]
    ho, wo = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1, (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    c1in = math.ceil(c / 16)
    geo = _ConvGeom(c1in, h, w, kh, kw, sh, sw, dh, dw, pt, pl, ho, wo)
    n_tiles = math.ceil(co / 16) * 16 // t["n"]
    n_blocks = t.get("n_blocks", min(soc.ai_core_count, n_tiles))
    m_blocks, i_blocks = t.get("m_blocks", 1), t.get("i_blocks", 1)
    return _conv_cycles(geo, soc, bool(t.get("taps", 0)), t["rows"], t.get("cols", wo), t.get("c1", c1in), 2,
                        t["k"], t["n"], t["m"], math.ceil(n_tiles / n_blocks), m_blocks, m_blocks * n_blocks * i_blocks)


def measure(model: onnx.ModelProto, pins: dict | None) -> tuple[dict, int] | None:
    """(the conv kernel's recorded tiling, its simulated cycles), None when the pins are refused."""
    try:
        module = lower(model, soc_version=SOC, tiling={"conv2d_0": pins} if pins else None)
    except cann.CannError:
        return None
    (k,) = [k for k in kernels(module) if k.sym_name.data == "conv2d_0"]
    tiling = {f: v.value.data for f, v in k.attributes["tile.tiling"].data.items()}
    stats = Model(build_offline_model(module)).time()
    return tiling, next(x.cycles for x in stats.kernels if x.name == "conv2d_0")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default="resnet50", help="cann.testing.test_model name")
    ap.add_argument("--shapes", type=int, default=None, help="only the first N distinct convolutions")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 7, 8, 14, 28],
                    help="output rows per tile to try (those above the map's height are skipped)")
    ap.add_argument("--skip", type=int, default=0, help="leave out the first N distinct convolutions")
    ap.add_argument("--kb-out", default=None, help="write each shape's best tiling, where it beats the default, "
                                                   "as a knowledge base here")
    args = ap.parse_args()
    soc = load_soc(SOC)
    shapes = conv_shapes(test_model(args.model))[args.skip:args.shapes]
    print(f"{'x':>18s} {'w':>16s} {'s':>3s} {'cands':>5s} {'tau':>6s} {'regret':>7s} {'default':>8s} "
          f"{'best':>7s}  best tiling")
    taus, regrets, defaults, entries = [], [], [], []
    for s in shapes:
        model = conv_model(s)
        base = measure(model, None)
        t0, default_cycles = base
        ho = (s["x"][2] + s["pads"][0] + s["pads"][2] - s["dilations"][0] * (s["w"][2] - 1) - 1) // s["strides"][0] + 1
        n_tiles = math.ceil(s["w"][0] / 16) * 16 // t0["n"]
        n_opts = sorted({math.ceil(n_tiles / r) for r in range(1, 17)} & set(range(1, min(soc.ai_core_count, n_tiles) + 1)))
        runs = {}
        for nb in n_opts:
            for rows in sorted({r for r in args.rows if r <= ho} | {t0["rows"]}):
                for mb in sorted({1, max(1, min(soc.ai_core_count // nb, math.ceil(ho / rows)))}):
                    got = measure(model, {"n_blocks": nb, "rows": rows, "m_blocks": mb})
                    if got is not None:
                        t, cycles = got
                        runs[tuple(sorted(t.items()))] = (estimate(s, t, soc), cycles, t)
        est = [v[0] for v in runs.values()]
        sim = [v[1] for v in runs.values()]
        tau = kendalltau(est, sim).statistic if len(runs) > 2 else float("nan")
        best = min(sim)
        pick = sim[est.index(min(est))]
        taus.append(tau)
        regrets.append(pick / best)
        defaults.append(default_cycles / best)
        bt = min(runs.values(), key=lambda v: v[1])[2]
        (conv,) = [o for o in lower(model, soc_version=SOC, until="graph").walk() if o.name == "graph.conv2d"]
        if best < default_cycles:  # an entry only where the search beats the default rule
            entries.append({"op": "Conv", "signature": signature(conv), "soc": SOC, "precision_mode": "force_fp16",
                            "compiler": compiler_version(), "cycles": best,
                            "tiling": {k: bt[k] for k in ("n_blocks", "m_blocks", "rows") if k in bt}})
            if args.kb_out:  # written after every shape: an interrupted run keeps what it measured
                with open(args.kb_out, "w") as f:
                    f.write(dump(entries))
        brief = " ".join(f"{k}={v}" for k, v in sorted(bt.items()) if k in ("n_blocks", "m_blocks", "rows", "c1"))
        print(f"{str(list(s['x'])):>18s} {str(list(s['w'])):>16s} {s['strides'][0]:3d} {len(runs):5d} {tau:6.2f} "
              f"{pick / best - 1:7.1%} {default_cycles / best - 1:8.1%} {best:7d}  {brief}", flush=True)
    valid = [t for t in taus if not math.isnan(t)]
    print(f"shapes {len(shapes)}: median tau {statistics.median(valid):.2f}; geomean regret of the model's pick "
          f"{statistics.geometric_mean(regrets) - 1:.1%}, of the default tiling {statistics.geometric_mean(defaults) - 1:.1%}")
    if args.kb_out:
        with open(args.kb_out, "w") as f:
            f.write(dump(entries))
        print(f"{args.kb_out}: {len(entries)} entries")


if __name__ == "__main__":
    main()
