"""Draw one kernel launch's pipe timeline as a PNG (the simulator's schedule, one row per pipe).

    python benchmarks/timeline.py [--model examples/squeezenet.onnx] [--soc Ascend910] [-O 1]
                                  [--kernel conv2d_1] [--core 0] [-o timeline.png]

Compiles the model with ``cann.compile`` at ``-O`` (``-O0``: barrier sync, one copy of each buffer;
``-O1``: task auto-pipelining, docs/pipelining.md), simulates it (seeded standard-normal inputs), picks the
launch of ``--kernel`` (default: the first conv2d launch) and draws every instruction of one core
as a bar on its pipe's row (S, V, M, MTE1, MTE2, MTE3), colored by instruction kind, with the
launch's profile in the title. Needs matplotlib (imported lazily; the ``bench`` extra).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import cann
from cann.hw import isa
from cann.sim.timing import PIPES

ROOT = Path(__file__).resolve().parent.parent
COLORS = {"dma": "#4e79a7", "nd2nz": "#4e79a7", "load2d": "#59a14f", "img2col": "#8cd17d", "mmad": "#e15759",
          "fixpipe": "#f28e2b", "vector": "#edc948", "vconv": "#edc948", "reduce": "#b07aa1",
          "broadcast": "#b07aa1", "sync": "#9c9c9c", "spmd": "#9c9c9c"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "examples" / "squeezenet.onnx"))
    ap.add_argument("--soc", default="Ascend910")
    ap.add_argument("-O", dest="opt_level", type=int, default=1, choices=(0, 1), help="optimization level")
    ap.add_argument("--kernel", help="kernel name (default: the first conv2d launch)")
    ap.add_argument("--core", type=int, default=0, help="block index to draw")
    ap.add_argument("-o", "--output", default="timeline.png", help="PNG to write (default: ./timeline.png)")
    args = ap.parse_args()

    try:
        import matplotlib
    except ImportError:
        raise SystemExit("error: benchmarks/timeline.py needs matplotlib: pip install -e '.[bench]'") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    import onnx

    model = onnx.load(args.model)
    compiled = cann.compile(model, soc_version=args.soc, opt_level=args.opt_level)
    rng = np.random.default_rng(0)
    inputs = {t.name: rng.standard_normal(t.shape, dtype=np.float32).astype(t.dtype) for t in compiled.inputs}
    compiled.run(inputs)
    run = compiled.last_run
    launches = run.kernels
    if args.kernel:
        pick = [k for k in launches if k.name == args.kernel]
    else:
        pick = [k for k in launches if k.name.startswith("conv2d")] or launches
    if not pick:
        raise SystemExit(f"no launch of kernel '{args.kernel}' (kernels: {', '.join(k.name for k in launches)})")
    k = pick[0]
    core = k.cores[min(args.core, len(k.cores) - 1)]
    t, prog = core.timing, core.program
    mhz = k.clock_mhz

    fig, ax = plt.subplots(figsize=(14, 4.2))
    for g in sorted({ins.defn.group for ins in prog}):
        idx = np.array([i for i, ins in enumerate(prog) if ins.defn.group == g])
        for p in np.unique(t.pipe[idx]):
            sel = idx[t.pipe[idx] == p]
            bars = list(zip((t.start[sel] / mhz).tolist(), ((t.end[sel] - t.start[sel]) / mhz).tolist()))
            ax.broken_barh(bars, (p - 0.4, 0.8), facecolors=COLORS.get(g, "#333333"), edgecolor="none")
    ax.set_yticks(range(len(PIPES)), PIPES)
    ax.set_ylim(-0.6, len(PIPES) - 0.4)
    ax.invert_yaxis()
    ax.set_xlim(0, core.cycles / mhz)
    ax.set_xlabel(f"time (us at {mhz} MHz)")
    r = k.profile()
    ax.set_title(f"-O{args.opt_level} {k.name} (launch {k.index}, block {args.core} of {k.block_dim}) on {run.soc}: "
                 f"{k.cycles} cycles, {k.time_us:.1f} us, compiled bound {r['compiled_bound_pct']:.0f}% (bound: {r['bound']}), ideal {r['ideal_pct']:.0f}%; "
                 f"cube {r['aic_cube_ratio']:.2f}, vec {r['aiv_vec_ratio']:.2f}, mte2 {r['aic_mte2_ratio']:.2f}",
                 fontsize=9)
    groups = sorted({ins.defn.group for ins in prog})
    ax.legend(handles=[Patch(color=COLORS.get(g, "#333333"), label=g) for g in groups], loc="upper right",
              fontsize=7, ncol=len(groups))
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"{args.output}: {k.name}, {len(prog)} instructions, {k.cycles} cycles "
          f"({sum(1 for p in isa.Pipe if p is not isa.Pipe.ALL)} pipe rows)")


if __name__ == "__main__":
    main()
