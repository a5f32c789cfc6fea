"""The fusion report (``cann-compile --fusion-report PATH``): which model nodes each kernel runs.

JSON: ``{"kernels": [{"kernel": "conv2d_3", "fusion": "cube_epilogue", "nodes": ["res2a_branch2c", ...]},
...], "summary": {"kernels": N, "fused_kernels": F, "fused_nodes": M}}``; a kernel that runs one
node has ``"fusion": "none"``.
"""

from __future__ import annotations

import json

from xdsl.dialects.builtin import ModuleOp, StringAttr

from cann.dialects.ascend import kernels
from cann.dialects.tile import fused_nodes


def fusion_report(module: ModuleOp) -> dict:
    """The report of an ascend-level module (kernels carry ``tile.fusion`` / ``tile.fused_nodes``)."""
    rows = []
    for k in kernels(module):
        kind = k.attributes.get("tile.fusion")
        names = fused_nodes(k)
        rows.append({"kernel": k.kernel_name, "fusion": kind.data if isinstance(kind, StringAttr) else "none",
                     "nodes": names})
    fused = [r for r in rows if r["fusion"] != "none"]
    return {"kernels": rows, "summary": {"kernels": len(rows), "fused_kernels": len(fused),
                                         "fused_nodes": sum(len(r["nodes"]) for r in fused)}}


def report_json(module: ModuleOp) -> str:
    return json.dumps(fusion_report(module), indent=1, sort_keys=False) + "\n"
