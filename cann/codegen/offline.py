"""Build the offline model (:class:`cann.codegen.om.OfflineModel`) from an ascend-level module.

Global memory is planned statically: the model's inputs first, then the weights section (every
``tile.constant``, 64-byte aligned), then every ``tile.gm_alloc`` (no reuse at this level);
``tile.view`` aliases its source. Each ``tile.launch`` becomes a launch binding the kernel's
arguments to those GM offsets, with the model work the kernel computes (``graph.work``,
:func:`cann.passes.analysis.ideal.kernel_work`).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp, StringAttr
from xdsl.ir import SSAValue

from cann.codegen.encode import module_kernels
from cann.codegen.om import IoTensor, Kernel, Launch, LaunchWork, OfflineModel
from cann.codegen.report import fusion_report
from cann.dialects import main_function, tile
from cann.dialects.graph_base import numpy_dtype as np_dtype
from cann.errors import CannError
from cann.passes.analysis.ideal import kernel_work

ALIGN = 64


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _nbytes(v: SSAValue) -> int:
    t = v.type
    return int(np.prod(t.get_shape())) * np_dtype(t.element_type).itemsize


def _name(attrs, i: int, default: str) -> str:
    if attrs is not None and i < len(attrs.data):
        d = attrs.data[i]
        if isinstance(d, DictionaryAttr) and isinstance(d.data.get("graph.name"), StringAttr):
            return d.data["graph.name"].data
    return default


def plan_gm(main: func.FuncOp) -> tuple[dict[SSAValue, int], int, bytes, int]:
    """The static GM plan of a host program: (byte offset of every GM value of ``main`` -- its
    arguments, ``tile.constant``, ``tile.gm_alloc`` and ``tile.view`` results --, the weights
    section's offset, the weights, the end of the last buffer)."""
    offset: dict[SSAValue, int] = {}
    top = 0
    for a in main.body.block.args:
        offset[a] = top
        top = _align(top + _nbytes(a))
    weights_offset = top
    blobs: list[bytes] = []
    wtop = 0
    for op in main.body.block.ops:
        if isinstance(op, tile.ConstantOp):
            offset[op.res] = weights_offset + wtop
            data = op.value.data.data
            blobs.append(data + bytes(_align(len(data)) - len(data)))
            wtop += _align(len(data))
    top = weights_offset + wtop
    for op in main.body.block.ops:
        if isinstance(op, tile.GmAllocOp):
            offset[op.res] = top
            top = _align(top + _nbytes(op.res))
        elif isinstance(op, tile.ViewOp):
            off = op.offset.value.data if op.offset is not None else 0
            offset[op.res] = offset[op.src] + off * np_dtype(op.res.type.element_type).itemsize
    return offset, weights_offset, b"".join(blobs), top


def build_offline_model(module: ModuleOp) -> OfflineModel:
    """The offline model of an ascend-level module (kernels encoded, GM planned).

    Raises:
        CannError: the module has no @main, or launches an unknown kernel.
    """
    main = main_function(module, "<module>")
    nodes = {r["kernel"]: tuple(r["nodes"]) for r in fusion_report(module)["kernels"]}
    kernels = [Kernel(*k, nodes=nodes.get(k[0], ())) for k in module_kernels(module)]
    work = kernel_work(module)  # the model work of each kernel (the profile's ideal bound)
    index = {k.name: i for i, k in enumerate(kernels)}
    offset, weights_offset, weights, top = plan_gm(main)
    inputs = [IoTensor(_name(main.arg_attrs, i, f"input{i}"), tuple(a.type.get_shape()),
                       np_dtype(a.type.element_type).name, offset[a]) for i, a in enumerate(main.body.block.args)]
    launches = []
    outputs = []
    for op in main.body.block.ops:
        if isinstance(op, tile.LaunchOp):
            name = op.kernel.root_reference.data
            if name not in index:
                raise CannError(f"@{name}", "launch of an unknown kernel")
            launches.append(Launch(index[name], tuple(offset[a] for a in op.args), work.get(name, LaunchWork())))
        elif isinstance(op, func.ReturnOp):
            for i, v in enumerate(op.operands):
                outputs.append(IoTensor(_name(main.res_attrs, i, f"output{i}"), tuple(v.type.get_shape()),
                                        np_dtype(v.type.element_type).name, offset[v]))
    soc = module.attributes.get("tile.soc")
    pm = module.attributes.get("tile.precision_mode")
    kbs = module.attributes.get("tile.knowledge_bases")  # cann.passes.tile_search_kb.DIGESTS_ATTR
    return OfflineModel(
        soc_version=soc.data if isinstance(soc, StringAttr) else "Ascend910",
        precision_mode=pm.data if isinstance(pm, StringAttr) else "force_fp16",
        inputs=tuple(inputs), outputs=tuple(outputs), gm_size=max(_align(top), ALIGN),
        weights_offset=weights_offset, weights=weights, kernels=tuple(kernels), launches=tuple(launches),
        knowledge_bases=tuple(d.data for d in kbs.data) if kbs is not None else ())
