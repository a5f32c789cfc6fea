"""ATC's ``--fusion_switch_file``: which fusion passes to switch off.

Two forms are accepted, as ATC does:

* JSON: ``{"Switch": {"GraphFusion": {"ALL": "off", "ConvBatchnormFusionPass": "on"}, "UBFusion": {...}}}``
  (a per-pass entry overrides ``ALL`` of its group);
* text: one ``PassName:off`` (or ``:on``) per line; ``#`` starts a comment.

ATC pass names map to this compiler's passes (:data:`PASSES`); ``ALL`` names every pass of a group.
"""

from __future__ import annotations

import json
from pathlib import Path

from cann.errors import CannError, Diagnostic

#: ATC pass name -> (group, what it switches in this compiler)
PASSES: dict[str, tuple[str, str]] = {
    "ConvBatchnormFusionPass": ("GraphFusion", "graph-fold-batch-norm"),
    "LayerNormFusionPass": ("GraphFusion", "graph-recompose{layer_norm}"),
    "GeluFusionPass": ("GraphFusion", "graph-recompose{gelu}"),
    "TbeConvElemwiseFusionPass": ("UBFusion", "cube-epilogue"),
    "TbeEltwiseFusionPass": ("UBFusion", "elementwise"),
    "TbeReduceElemwiseFusionPass": ("UBFusion", "reduction"),
}
GROUPS = ("GraphFusion", "UBFusion")


def _state(value, where: str) -> bool:
    if isinstance(value, str) and value.lower() in ("on", "off"):
        return value.lower() == "on"
    raise CannError(where, f"expected \"on\" or \"off\", got {value!r}")


def parse_fusion_switch(path: str | Path) -> dict[str, bool]:
    """``{pass name (see PASSES): enabled}`` for every known pass.

    Raises:
        CannError: unreadable file, malformed JSON or text line, unknown group or pass name,
            a value other than on/off (one line per problem, naming file and line or key).
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise CannError(str(path), f"cannot read fusion switch file: {e.strerror or e}") from None
    enabled = {name: True for name in PASSES}
    problems: list[Diagnostic] = []
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise CannError(f"{path}:{e.lineno}", f"malformed JSON: {e.msg}") from None
        switch = doc.get("Switch") if isinstance(doc, dict) else None
        if not isinstance(switch, dict):
            raise CannError(str(path), 'expected {"Switch": {"GraphFusion": {...}, "UBFusion": {...}}}')
        for group, entries in switch.items():
            if group not in GROUPS or not isinstance(entries, dict):
                problems.append(Diagnostic(str(path), f"unknown fusion group '{group}' (known: {', '.join(GROUPS)})"))
                continue
            if "ALL" in entries:
                try:
                    on = _state(entries["ALL"], f"{path}: Switch.{group}.ALL")
                except CannError as e:
                    problems += e.diagnostics
                else:
                    for name, (g, _) in PASSES.items():
                        if g == group:
                            enabled[name] = on
            for name, value in entries.items():
                if name == "ALL":
                    continue
                if name not in PASSES or PASSES[name][0] != group:
                    problems.append(Diagnostic(f"{path}: Switch.{group}.{name}", "unknown fusion pass"))
                    continue
                try:
                    enabled[name] = _state(value, f"{path}: Switch.{group}.{name}")
                except CannError as e:
                    problems += e.diagnostics
    else:
        for no, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            name, sep, value = line.rpartition(":")
            where = f"{path}:{no}"
            if not sep or not name:
                problems.append(Diagnostic(where, f"expected 'PassName:on|off', got '{line}'"))
            elif name.strip() == "ALL":
                try:
                    on = _state(value.strip(), where)
                except CannError as e:
                    problems += e.diagnostics
                else:
                    enabled = {n: on for n in enabled}
            elif name.strip() not in PASSES:
                problems.append(Diagnostic(where, f"unknown fusion pass '{name.strip()}'"))
            else:
                try:
                    enabled[name.strip()] = _state(value.strip(), where)
                except CannError as e:
                    problems += e.diagnostics
    if problems:
        raise CannError.many(problems)
    return enabled


def graph_pipeline(enabled: dict[str, bool], soc: str = "Ascend910") -> list[str]:
    """The graph-stage fusion passes (pipeline entries) for a switch setting; UB fusion's budget is
    ``soc``'s UB."""
    passes = []
    ln, gelu = enabled["LayerNormFusionPass"], enabled["GeluFusionPass"]
    if ln or gelu:
        passes.append(f"graph-recompose{{layer_norm={str(ln).lower()} gelu={str(gelu).lower()}}}")
    if enabled["ConvBatchnormFusionPass"]:
        passes.append("graph-fold-batch-norm")
    cube, elem = enabled["TbeConvElemwiseFusionPass"], enabled["TbeEltwiseFusionPass"]
    red = enabled["TbeReduceElemwiseFusionPass"]
    if cube or elem or red:
        passes.append(f"graph-fuse-ub{{cube_epilogue={str(cube).lower()} elementwise={str(elem).lower()} "
                      f"reduction={str(red).lower()} soc={soc}}}")
    return passes
