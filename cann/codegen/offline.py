"""Build the offline model (:class:`cann.codegen.om.OfflineModel`) from an ascend-level module.

Global memory is planned statically (:mod:`cann.codegen.gm_plan`): the model's inputs first, then
the weights section (every ``tile.constant``, 64-byte aligned), then every ``tile.gm_alloc``, the
buffers whose lifetimes do not intersect sharing bytes unless reuse is off; ``tile.view`` aliases
its source. Each ``tile.launch`` becomes a launch binding the kernel's
arguments to those GM offsets, with the model work the kernel computes (``graph.work``,
:func:`cann.passes.analysis.ideal.kernel_work`).
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp, StringAttr
from xdsl.ir import SSAValue

from cann.codegen.encode import module_kernels
from cann.codegen.gm_plan import ALIGN, align, plan_memory
from cann.codegen.om import IoTensor, Kernel, Launch, LaunchWork, OfflineModel
from cann.codegen.report import fusion_report
from cann.dialects import main_function, tile
from cann.dialects.graph_base import numpy_dtype as np_dtype
from cann.errors import CannError
from cann.passes.analysis.ideal import kernel_work


def _name(attrs, i: int, default: str) -> str:
    if attrs is not None and i < len(attrs.data):
        d = attrs.data[i]
        if isinstance(d, DictionaryAttr) and isinstance(d.data.get("graph.name"), StringAttr):
            return d.data["graph.name"].data
    return default


def plan_gm(main: func.FuncOp, reuse: bool = True) -> tuple[dict[SSAValue, int], int, bytes, int]:
    """The static GM plan of a host program (:func:`cann.codegen.gm_plan.plan_memory`): (byte
    offset of every GM value of ``main`` -- its arguments, ``tile.constant``, ``tile.gm_alloc`` and
    ``tile.view`` results --, the weights section's offset, the weights, the arena's size)."""
    plan = plan_memory(main, reuse)
    return plan.offset, plan.weights_offset, plan.weights, plan.size


def build_offline_model(module: ModuleOp, gm_reuse: bool = True) -> OfflineModel:
    """The offline model of an ascend-level module (kernels encoded, GM planned; ``gm_reuse``:
    activations and workspaces whose lifetimes do not intersect share GM, :mod:`cann.codegen.gm_plan`).

    Raises:
        CannError: the module has no @main, or launches an unknown kernel.
    """
    main = main_function(module, "<module>")
    nodes = {r["kernel"]: tuple(r["nodes"]) for r in fusion_report(module)["kernels"]}
    kernels = [Kernel(*k, nodes=nodes.get(k[0], ())) for k in module_kernels(module)]
    work = kernel_work(module)  # the model work of each kernel (the profile's ideal bound)
    index = {k.name: i for i, k in enumerate(kernels)}
    plan = plan_memory(main, gm_reuse)
    offset = plan.offset
    no_reuse = max(align(plan.arena_offset + plan.unshared), ALIGN)  # the size of plan_memory(main, False)
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
        inputs=tuple(inputs), outputs=tuple(outputs), gm_size=plan.size,
        weights_offset=plan.weights_offset, weights=plan.weights, kernels=tuple(kernels), launches=tuple(launches),
        knowledge_bases=tuple(d.data for d in kbs.data) if kbs is not None else (), gm_reuse=gm_reuse,
        gm_size_no_reuse=no_reuse if no_reuse != plan.size else 0)
