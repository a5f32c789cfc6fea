"""``tile-search-kb``: tilings from a knowledge base, recorded on the graph ops they fit.

A knowledge base is a JSON file of tuned tilings (AutoTune's preset results, docs/autotune.md):

```json
{"format": "cann-knowledge-base", "version": 1,
 "entries": [{"op": "Conv", "signature": "x=1x64x56x56 w=64x64x3x3 strides=1,1 pads=1,1,1,1 dilations=1,1 group=1",
              "soc": "Ascend910", "precision_mode": "force_fp16", "compiler": "0.1.0",
              "tiling": {"n_blocks": 2, "m_blocks": 14, "rows": 4}, "cycles": 3134}]}
```

An entry may name the ``aicore_num`` it was tuned for (absent: all of the SoC's cores); it applies
only to compiles of that core count.

An entry applies to a ``graph.conv2d``, ``graph.gemm`` or ``graph.matmul`` by a constant 2-D
``B`` (also inside a ``graph.fused`` group) of the same signature (:func:`signature`) when the
compile's SoC, precision mode and the compiler version match; the pass records its ``tiling`` on
the op as ``tile.tiling`` (and the file it came from as ``tile.kb``), which
``convert-graph-to-tile`` applies under the pins given by kernel name. ``cycles`` (the simulated
cycles of the tuned kernel alone) is informative. The entries of a file are kept in order; a later
entry for the same key replaces an earlier one (merging two files is concatenating their entries).

The package ships a knowledge base per SoC (``cann/kb/<soc>.json``, :func:`shipped_path`), which
default compiles read (``shipped=true``); a user's file (``kb``) is read on top of it, its entries
winning. An entry of the shipped file that the kernel refuses falls back to the default tiling
(``tile.kb_fallback``); one of a user's file is an error naming the file and the signature. The
sha256 of every file read is recorded on the module as ``tile.knowledge_bases``
(``"shipped:<hex>"``, ``"user:<hex>"``) and from there in the ``.om``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, UnitAttr, i64
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from cann.errors import CannError

FORMAT = "cann-knowledge-base"
VERSION = 1
#: graph op name -> the knowledge base's op name (the ops whose tilings a knowledge base holds)
OPS = {"graph.conv2d": "Conv", "graph.gemm": "Gemm", "graph.matmul": "MatMul"}
#: the module attribute listing the digests of the knowledge bases a compile read
DIGESTS_ATTR = "tile.knowledge_bases"


def shipped_path(soc: str) -> Path:
    """The package's knowledge base for ``soc`` (it may not exist: no shipped entries for that SoC)."""
    return Path(__file__).resolve().parent.parent / "kb" / f"{soc}.json"


@cache
def compiler_version() -> str:
    """The installed cann package's version (an entry applies to the compiler that tuned it)."""
    return version("cann")


def _shape(v) -> str:
    return "x".join(str(d) for d in v.type.get_shape())


def _ints(op: Operation, name: str) -> str:
    return ",".join(str(x) for x in op.properties[name].get_values())


def signature(op: Operation) -> str | None:
    """The knowledge-base signature of graph op ``op`` (None for an op a knowledge base does not tune).

    Conv: ``x=1x64x56x56 w=64x64x3x3 strides=1,1 pads=1,1,1,1 dilations=1,1 group=1``; Gemm:
    ``a=MxK b=KxN transA=0 transB=1 dtype=f16`` (the operands' shapes as the model gives them);
    MatMul by a constant 2-D ``B``: ``a=...xMxK b=KxN dtype=f16`` (a MatMul of two tensors: None).
    """
    if op.name in ("graph.gemm", "graph.matmul"):
        b = op.b
        if op.name == "graph.matmul" and (len(b.type.get_shape()) != 2 or not isinstance(b.owner, Operation)
                                          or b.owner.name != "graph.constant"):
            return None
        dtype = f" dtype={op.a.type.element_type}"
        if op.name == "graph.matmul":
            return f"a={_shape(op.a)} b={_shape(b)}{dtype}"
        ta, tb = (op.properties[k].value.data for k in ("trans_a", "trans_b"))
        return f"a={_shape(op.a)} b={_shape(b)} transA={ta} transB={tb}{dtype}"
    if op.name != "graph.conv2d":
        return None
    group = op.properties["group"].value.data
    return (f"x={_shape(op.x)} w={_shape(op.w)} strides={_ints(op, 'strides')} pads={_ints(op, 'pads')} "
            f"dilations={_ints(op, 'dilations')} group={group}")


@dataclass(frozen=True)
class KnowledgeBase:
    """Tuned tilings by (op, signature, SoC, precision mode, compiler version)."""

    entries: tuple[dict, ...]
    digest: str  # sha256 of the file's bytes

    def lookup(self, op: str, sig: str, soc: str, precision_mode: str, cores: int = 0) -> dict[str, int] | None:
        """The tiling of the last matching entry, None when none matches. ``cores``: the AI cores a
        kernel may use (0: all of the SoC's); an entry's optional ``aicore_num`` (absent: all of the
        SoC's) must equal it -- a tiling tuned for 32 cores says nothing about 4."""
        full = _soc_cores(soc)
        got = None
        for e in self.entries:
            if (e["op"], e["signature"], e["soc"], e["precision_mode"], e["compiler"]) == \
                    (op, sig, soc, precision_mode, compiler_version()) and \
                    (e.get("aicore_num") or full) == (cores or full):
                got = e["tiling"]
        return got


def _soc_cores(soc: str) -> int:
    from cann.hw.config import available_socs, load_soc

    return load_soc(soc).ai_core_count if soc in available_socs() else 0


def _check_entry(e, where: str) -> dict:
    keys = {"op": str, "signature": str, "soc": str, "precision_mode": str, "compiler": str, "tiling": dict}
    if not isinstance(e, dict):
        raise CannError(where, f"an entry is a JSON object, got {type(e).__name__}")
    for k, t in keys.items():
        if not isinstance(e.get(k), t):
            raise CannError(where, f"field '{k}' ({t.__name__}) missing or of another type")
    cores = e.get("aicore_num", 1)
    if not isinstance(cores, int) or isinstance(cores, bool) or cores < 1:
        raise CannError(where, f"field 'aicore_num' is a positive integer, got {cores!r}")
    bad = {k: v for k, v in e["tiling"].items() if not isinstance(v, int) or isinstance(v, bool)}
    if bad:
        raise CannError(where, f"tiling values are integers, got {bad}")
    return e


def load(path: str | Path) -> KnowledgeBase:
    """Read and check a knowledge-base file.

    Raises:
        CannError: ``<path>: ...`` for a missing or unreadable file, invalid JSON, another format or
            version, or a malformed entry (naming its index).
    """
    where = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise CannError(where, f"cannot read the knowledge base: {e.strerror}") from None
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CannError(where, f"not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise CannError(where, f"not a knowledge base (expected \"format\": \"{FORMAT}\", \"version\": {VERSION})")
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise CannError(where, "\"entries\" must be a list")
    return KnowledgeBase(tuple(_check_entry(e, f"{where}: entry {i}") for i, e in enumerate(entries)),
                         hashlib.sha256(raw).hexdigest())


def dump(entries: list[dict]) -> str:
    """The knowledge-base file holding ``entries`` (deterministic: sorted keys, one entry per line)."""
    body = ",\n".join("  " + json.dumps(e, sort_keys=True) for e in entries)
    return f'{{"format": "{FORMAT}", "version": {VERSION}, "entries": [\n{body}\n]}}\n'


#: the ``kb`` value (``cann.compile(kb=...)``, ``cann-compile --kb``) that turns the shipped file off too
NO_KB = "none"


def resolve(kb) -> tuple[str, bool]:
    """``(user file, read the shipped file)`` for a compile's ``kb``: None (the default) reads the
    shipped file only, a path the shipped file and that file on top, ``"none"`` (or False) neither."""
    if kb is None or kb is True:
        return "", True
    if kb is False or str(kb) == NO_KB:
        return "", False
    return str(kb), True


def knowledge_bases(kb: str = "", shipped: bool = False, soc: str = "Ascend910") -> list[tuple[str, str, KnowledgeBase]]:
    """``(role, path, base)`` of the files a compile reads, lowest precedence first: the shipped
    file of ``soc`` (``shipped``, when the package has one), then the user's ``kb`` (non-empty).

    Raises:
        CannError: as :func:`load`.
    """
    out = []
    if shipped and shipped_path(soc).is_file():
        out.append(("shipped", f"cann/kb/{soc}.json", load(shipped_path(soc))))
    if kb:
        out.append(("user", kb, load(kb)))
    return out


@dataclass(frozen=True)
class TileSearchKbPass(ModulePass):
    """Record on each graph op the tiling a knowledge base holds for it (``tile.tiling``, its file as
    ``tile.kb``; an entry of the shipped file also ``tile.kb_fallback``: refused, it gives way to the
    default tiling) and the files' digests on the module (``tile.knowledge_bases``).

    Options: ``kb`` (a user's file; empty: none), ``shipped`` (also the package's file for ``soc``,
    under the user's), ``soc``, ``precision_mode`` and ``aicore_num`` (those of the compile, 0: all
    the SoC's cores; entries of others do not apply)."""

    name = "tile-search-kb"

    kb: str = ""
    shipped: bool = False
    soc: str = "Ascend910"
    precision_mode: str = "force_fp16"
    aicore_num: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        bases = knowledge_bases(self.kb, self.shipped, self.soc)
        if not bases:
            return
        op.attributes[DIGESTS_ATTR] = ArrayAttr([StringAttr(f"{role}:{b.digest}") for role, _, b in bases])
        for o in op.walk():
            if o.name not in OPS:
                continue
            sig = signature(o)
            if sig is None:
                continue
            for role, path, base in reversed(bases):  # the user's file first
                tiling = base.lookup(OPS[o.name], sig, self.soc, self.precision_mode, self.aicore_num)
                if tiling is not None:
                    o.attributes["tile.tiling"] = DictionaryAttr({k: IntegerAttr(v, i64)
                                                                  for k, v in sorted(tiling.items())})
                    o.attributes["tile.kb"] = StringAttr(path)
                    if role == "shipped":
                        o.attributes["tile.kb_fallback"] = UnitAttr()
                    break
