"""Knowledge-base entries for the GEMM suite: a small measured grid around each shape's default tiling.

    PYTHONPATH=. python benchmarks/kb_gemm.py --kb-out gemm.kb.json [--max-macs N] [MxKxN ...]

Per shape of ``benchmarks/gemm.py`` (one MatMul, A [M, K] float16 input, B [K, N] float16
initializer; Ascend910 ``force_fp16``) the default tiling (``gemm.plan``, no knowledge base) is
compiled and timed with the timing-only simulator, then every tiling of the grid ``m_blocks`` x
``n_blocks`` in {half, the default, double} (at most the SoC's cores) x ``step_k`` in {1, 2, 4}, and
the K splits ``k_blocks`` in {2, 3, 4, 6, 8, 12, 16} (alone, and with every ``m_blocks`` x
``n_blocks`` using 24 to 32 cores in all; each with its ``memset`` launch), the L0C tile chosen by
the plan under those pins; the model's simulated cycles (all its launches) rank them. Then, from
the best, each L0C-tile key (``m``, ``n``, ``k``, ``step_k``, ``a_panel``, ``skew``) is varied alone over a few
values while that improves it (at most 3 rounds). A shape gets
an entry (``op`` MatMul, :func:`cann.passes.tile_search_kb.signature` of its graph op, the best
tiling's ``m_blocks, n_blocks, m, n, k, step_k, a_panel, skew`` and ``k_blocks`` when split) only when its
best beats the default. The file is
rewritten after every shape, so an interrupted run keeps what it measured. ``--max-macs`` skips the
shapes slow to simulate.
"""

from __future__ import annotations

import argparse
import time

import cann
from cann.codegen.offline import build_offline_model
from cann.compiler import lower
from cann.dialects.ascend import kernels
from cann.hw.config import load_soc
from cann.passes.tile_search_kb import compiler_version, dump, signature
from cann.runtime import Model

from gemm import SHAPES, _shape, matmul_model  # benchmarks/gemm.py

SOC, MODE, KERNEL = "Ascend910", "force_fp16", "matmul_0"
FIELDS = ("m_blocks", "n_blocks", "m", "n", "k", "step_k", "a_panel", "skew", "k_blocks")
#: the values tried per L0C-tile key around the best grid
TILE_VALUES = {"m": (16, 32, 48, 64, 80, 96, 128), "n": (16, 32, 48, 64, 96, 128, 192),
               "k": (32, 48, 64, 96, 128, 192, 256), "step_k": (1, 2, 3, 4), "a_panel": (0, 1),
               "skew": (0, 1, 2)}


def measure(model, pins: dict | None) -> tuple[dict, int, int] | None:
    """(the matmul kernel's recorded tiling, the model's simulated cycles (a K split's memset launch
    included), the matmul kernel's own), None when the pins are refused."""
    try:
        module = lower(model, soc_version=SOC, precision_mode=MODE, kb="none",
                       tiling={KERNEL: pins} if pins else None)
    except cann.CannError:
        return None
    (k,) = [k for k in kernels(module) if k.sym_name.data == KERNEL]
    tiling = {f: v.value.data for f, v in k.attributes["tile.tiling"].data.items()}
    tiling.setdefault("k_blocks", 1)
    tiling.setdefault("skew", 0)
    stats = Model(build_offline_model(module)).time()
    return tiling, stats.cycles, next(x.cycles for x in stats.kernels if x.name == KERNEL)


def grid(t0: dict, cores: int) -> list[dict]:
    """The candidate pins around the default tiling ``t0``."""
    out = []
    for mb in sorted({max(1, t0["m_blocks"] // 2), t0["m_blocks"], t0["m_blocks"] * 2}):
        for nb in sorted({max(1, t0["n_blocks"] // 2), t0["n_blocks"], t0["n_blocks"] * 2}):
            if mb * nb > cores:
                continue
            for sk in (1, 2, 4):
                out.append({"m_blocks": mb, "n_blocks": nb, "step_k": sk})
    for kb_ in (2, 3, 4, 6, 8, 12, 16):  # K splits
        out.append({"k_blocks": kb_})
        out += [{"k_blocks": kb_, "m_blocks": mb, "n_blocks": nb} for mb in range(1, cores + 1)
                for nb in range(1, cores + 1) if 24 <= mb * nb * kb_ <= cores]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shapes", nargs="*", type=_shape, default=SHAPES, help="MxKxN (default: the suite)")
    ap.add_argument("--kb-out", required=True, help="the knowledge base to write")
    ap.add_argument("--max-macs", type=float, default=0, help="skip shapes with more MACs (0: run all)")
    args = ap.parse_args()
    cores = load_soc(SOC).ai_core_count
    entries = []
    for m, k, n in args.shapes:
        label = f"{m}x{k}x{n}"
        if args.max_macs and m * k * n > args.max_macs:
            print(f"{label:>18}  skipped: {m * k * n:.3g} MACs > --max-macs", flush=True)
            continue
        t_start = time.perf_counter()
        model = matmul_model(m, k, n)
        t0, default, kernel = measure(model, None)
        best, best_t, tried = default, t0, 1
        seen = {tuple(t0[f] for f in FIELDS)}

        def consider(pins):
            """Measure ``pins`` once per distinct resulting tiling; keep the fastest."""
            nonlocal best, best_t, kernel, tried
            got = measure(model, pins)
            if got is None or tuple(got[0][f] for f in FIELDS) in seen:
                return
            seen.add(tuple(got[0][f] for f in FIELDS))
            tried += 1
            if got[1] < best:
                best, best_t, kernel = got[1], got[0], got[2]

        for pins in grid(t0, cores):
            consider(pins)
        # then the L0C tile of the best grid: one key at a time, the others pinned, while it improves
        for _ in range(3):
            start = best
            for key, values in TILE_VALUES.items():
                for v in values:
                    pins = {f: best_t[f] for f in FIELDS if f != "k_blocks" or best_t[f] > 1} | {key: v}
                    if not pins["a_panel"]:  # a skew needs the A panel
                        pins["skew"] = 0
                    consider(pins)
            if best == start:
                break
        brief = " ".join(f"{f}={best_t[f]}" for f in FIELDS)
        print(f"{label:>18} candidates {tried:3d} default {default:9d} best {best:9d} ({default / best - 1:6.1%})  "
              f"{brief}  [{time.perf_counter() - t_start:.0f} s]", flush=True)
        if best < default:
            (op,) = [o for o in lower(model, soc_version=SOC, precision_mode=MODE, kb="none", until="graph").walk()
                     if o.name == "graph.matmul"]
            entries.append({"op": "MatMul", "signature": signature(op), "soc": SOC, "precision_mode": MODE,
                            "compiler": compiler_version(), "cycles": kernel,
                            "tiling": {f: best_t[f] for f in FIELDS if f != "k_blocks" or best_t[f] > 1}})
            with open(args.kb_out, "w") as f:
                f.write(dump(entries))
    print(f"{args.kb_out}: {len(entries)} entries")


if __name__ == "__main__":
    main()
