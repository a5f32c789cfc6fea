"""Merge knowledge bases into one file (e.g. the shipped ``cann/kb/Ascend910.json``).

    PYTHONPATH=. python benchmarks/kb_merge.py conv.kb.json gemm.kb.json -o cann/kb/Ascend910.json

Each input is checked (:func:`cann.passes.tile_search_kb.load`); their entries are concatenated in
the order given, a later entry of the same key (op, signature, SoC, precision mode, compiler,
``aicore_num``) replacing an earlier one in place; the output is written deterministically
(:func:`cann.passes.tile_search_kb.dump`).
"""

from __future__ import annotations

import argparse

from cann.fileio import atomic_write_bytes
from cann.passes.tile_search_kb import dump, load


def merge(paths: list[str]) -> list[dict]:
    """The entries of the files ``paths``, one per key, the last of each key winning."""
    out: dict[tuple, dict] = {}
    for p in paths:
        for e in load(p).entries:
            key = (e["op"], e["signature"], e["soc"], e["precision_mode"], e["compiler"], e.get("aicore_num"))
            out[key] = e
    return list(out.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+", help="knowledge-base files, lowest precedence first")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    entries = merge(args.inputs)
    atomic_write_bytes(args.output, dump(entries).encode())
    print(f"{args.output}: {len(entries)} entries")


if __name__ == "__main__":
    main()
