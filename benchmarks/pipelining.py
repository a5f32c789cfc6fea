"""Benchmark: task auto-pipelining, an ablation -- barrier sync / flag sync / + multi-buffering /
+ segmented first loads -- on ResNet-50, Inception v2, the GPT block and a few GEMM shapes.

    python benchmarks/pipelining.py [--modes barrier flags mb seg] [model ...]

Models: ``resnet50`` and ``inception_v2`` (light zoo, generated weights, batch 1), ``gpt_block`` (the
PyTorch fixture), ``gemm:MxKxN`` (one float16 MatMul, ``benchmarks/gemm.py``), ``add:N`` (one float16
Add of two [N] inputs). Everything is compiled
at ``-O1`` (fusion on), fp16 (``force_fp16``), Ascend910; only the pipelining passes differ:

* ``barrier``: ``ascend-insert-sync{mode=barrier}`` (the -O0 sync), one copy of every buffer;
* ``flags``: ``ascend-insert-sync{mode=flags}``, still one copy of every buffer;
* ``mb``: ``convert-graph-to-tile{buffers=2}`` + ``tile-multi-buffer{first_segment_bytes=-1}``
  (double buffers, no segmented first load) + flags;
* ``seg``: as ``mb`` with the default segmented first load (the -O1 pipeline).

One row per model and mode: simulated cycles, ``ideal_pct`` (docs/core-model.md), the pipe-overlap
factor (Σ per-pipe busy cycles ÷ cycles, summed over the launches, block 0 of each; 1.0 = pipes
strictly one after another), the median overlap of the Conv / Gemm launches, static instructions
(the code size: every kernel's instructions, loops not expanded), dynamic instructions, and the
relative L2 error of the first output against onnxruntime. Then, for the last mode, the kernels that
do not pipeline (overlap below 1.1, among the 8 longest) with their busiest pipe.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper
from xdsl.passes import PassPipeline

from cann import testing
from cann.codegen.offline import build_offline_model
from cann.compiler import import_model, make_context, stage_pipelines
from cann.dialects.ascend import kernels
from cann.passes import ALL_PASSES
from cann.passes.analysis.ideal import annotate_work
from cann.runtime import Model

ROOT = Path(__file__).resolve().parent.parent
#: mode -> (planned buffer copies, tile-multi-buffer options or None, sync mode)
MODES = {
    "barrier": (1, None, "barrier"),
    "flags": (1, None, "flags"),
    "mb": (2, "first_segment_bytes=-1", "flags"),
    "seg": (2, "", "flags"),
}
DEFAULT_MODELS = ["resnet50", "inception_v2", "gpt_block", "gemm:128x768x768", "gemm:512x768x3072",
                  "gemm:1024x1024x1024", "add:1048576"]


def load(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The model and its inputs (seeded)."""
    if name.startswith("gemm:"):
        import sys

        sys.path.insert(0, str(ROOT / "benchmarks"))
        from gemm import matmul_model

        m, k, n = (int(x) for x in name[5:].split("x"))
        return matmul_model(m, k, n), {"A": np.random.default_rng(1).standard_normal((m, k)).astype(np.float16)}
    if name.startswith("add:"):
        n = int(name[4:])
        io = [helper.make_tensor_value_info(x, TensorProto.FLOAT16, [n]) for x in "abc"]
        model = helper.make_model(helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "add", io[:2],
                                                    io[2:]), opset_imports=[helper.make_opsetid("", 17)])
        rng = np.random.default_rng(1)
        return model, {x: rng.standard_normal(n).astype(np.float16) for x in "ab"}
    path = ROOT / "test" / "fixtures" / "torch" / f"{name}.onnx"
    model = onnx.load(path) if path.exists() else testing.test_model(name)
    if path.exists():
        return model, {k: v for k, v in np.load(path.with_suffix(".npz")).items()
                       if k in {i.name for i in model.graph.input}}
    return model, testing.random_inputs(model)


def pipelines(mode: str) -> list[str]:
    """The graph, tile and ascend pipelines of ``mode`` (the -O1 graph passes)."""
    buffers, mb, sync = MODES[mode]
    (_, graph), _, _ = stage_pipelines("Ascend910", "force_fp16", 1)
    (_, tile), _ = stage_pipelines("Ascend910", "force_fp16", 0)[1:]  # convert-graph-to-tile{...} alone
    tile = tile[:-1] + f" buffers={buffers}}}" + (f",tile-multi-buffer{{{mb}}}" if mb is not None else "")
    return [graph, tile, f"convert-tile-to-ascend,ascend-insert-sync{{mode={sync}}}"]


def compile_mode(model: onnx.ModelProto, mode: str) -> tuple[Model, int]:
    """The compiled model and its static instruction count."""
    module = import_model(model)
    ctx = make_context()
    graph, tile, ascend = pipelines(mode)
    PassPipeline.parse_spec(ALL_PASSES, graph).apply(ctx, module)
    annotate_work(module, "force_fp16")  # the model work of each node: the profile's ideal bound
    for spec in (tile, ascend):
        PassPipeline.parse_spec(ALL_PASSES, spec).apply(ctx, module)
    static = sum(len(k.instructions) for k in kernels(module))
    return Model(build_offline_model(module)), static


def overlap(kernel) -> float:
    core = kernel.cores[0]
    return sum(core.busy_by_pipe.values()) / max(core.cycles, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    args = ap.parse_args()
    print(f"{'model':<22} {'mode':<8} {'cycles':>10} {'ideal_pct':>9} {'overlap':>7} {'conv_ov':>7} "
          f"{'static':>8} {'dynamic':>9} {'rel_l2':>9} {'compile_s':>9} {'sim_s':>6}")
    for name in args.models:
        model, inputs = load(name)
        ref = testing.run_onnxruntime(model, inputs)
        first = model.graph.output[0].name
        run = None
        for mode in args.modes:
            t0 = time.perf_counter()
            compiled, static = compile_mode(model, mode)
            t1 = time.perf_counter()
            out = compiled.run(inputs)
            t2 = time.perf_counter()
            run = compiled.last_run
            busy = sum(sum(k.cores[0].busy_by_pipe.values()) for k in run.kernels)
            cyc = sum(k.cores[0].cycles for k in run.kernels)
            cube = [overlap(k) for k in run.kernels if k.work.model_macs]
            y, r = out[first].astype(np.float64).ravel(), ref[first].astype(np.float64).ravel()
            err = float(np.linalg.norm(y - r) / max(np.linalg.norm(r), 1e-30))
            print(f"{name:<22} {mode:<8} {run.cycles:>10} {run.ideal_pct:>9.2f} {busy / max(cyc, 1):>7.2f} "
                  f"{statistics.median(cube) if cube else float('nan'):>7.2f} {static:>8} {run.instructions:>9} "
                  f"{err:>9.2e} {t1 - t0:>9.1f} {t2 - t1:>6.1f}", flush=True)
        if run is not None:
            slow = [k for k in sorted(run.kernels, key=lambda k: -k.cycles)[:8] if overlap(k) < 1.1]
            for k in slow:
                pipe, b = max(k.cores[0].busy_by_pipe.items(), key=lambda kv: kv[1])
                print(f"    not pipelined: {k.name} ({k.cycles} cycles, overlap {overlap(k):.2f}, "
                      f"{pipe} busy {100 * b / max(k.cores[0].cycles, 1):.0f}%)")


if __name__ == "__main__":
    main()
