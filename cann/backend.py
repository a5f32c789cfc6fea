"""ONNX backend (``onnx.backend.base.Backend``) over :func:`cann.compile` and the simulator.

Follows the convention of the ONNX backend API (``onnx.backend.base``)::

    import cann.backend as backend
    rep = backend.prepare(model, device="CPU")          # compile once
    outputs = rep.run([x])                                # list (or dict) of inputs -> outputs

``device``: the modeled AI Core runs on the host (the simulator), so the host device ``"CPU"``
is the one supported device (ONNX's backend test runner asks for "CPU"). ``precision_mode``
defaults to ``must_keep_origin_dtype`` (the conformance suite's tolerances are fp32
tolerances); pass ``precision_mode="force_fp16"`` etc. to ``prepare`` / ``run_model``. Other
keyword arguments of :func:`cann.compile` (``soc_version``, ``input_shape``) pass through.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

import cann

__all__ = ["CannBackend", "CannRep", "prepare", "run_model", "run_node", "supports_device"]

_COMPILE_OPTIONS = ("soc_version", "input_shape", "out_nodes", "opt_level", "fusion_switch_file")


class CannRep(BackendRep):
    """A compiled model; ``run`` simulates one inference."""

    def __init__(self, model: "cann.runtime.Model", onnx_model: onnx.ModelProto):
        self.model = model
        init = {i.name for i in onnx_model.graph.initializer}
        self.input_names = [i.name for i in onnx_model.graph.input if i.name not in init]
        self.output_names = [o.name for o in onnx_model.graph.output]
        self._declared = {t.name: np.dtype(t.dtype) for t in model.inputs}

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``inputs``: a list/tuple in graph-input order, a dict by name, or one array.
        Returns the outputs in graph-output order (a namedtuple when the names allow it)."""
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            feeds = dict(zip(self.input_names, inputs))
        feeds = {k: self._conform(k, np.asarray(v)) for k, v in feeds.items()}
        out = self.model.run(feeds)
        values = [out[n] for n in self.output_names]
        try:
            return namedtuple("Outputs", self.output_names)(*values)  # type: ignore[misc]
        except ValueError:  # names that are not identifiers
            return tuple(values)

    def _conform(self, name: str, a: np.ndarray) -> np.ndarray:
        want = self._declared.get(name)
        if want is not None and a.dtype != want and a.dtype.kind == want.kind == "f":
            return a.astype(want)
        return a


class CannBackend(Backend):
    """The ``cann`` ONNX backend: compiles with :func:`cann.compile`, runs on the simulated AI Core."""

    DEFAULT_PRECISION_MODE = "must_keep_origin_dtype"

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: onnx.ModelProto | str, device: str = "CPU", **kwargs: Any) -> CannRep:
        """Compile ``model`` (a ``ModelProto`` or a path).

        Raises:
            CannError: an unsupported operator, attribute or dtype (naming the node), bad options.
            ValueError: an unsupported device.
        """
        if not cls.supports_device(device):
            raise ValueError(f"device {device!r} is not supported by the cann backend (use 'CPU')")
        if not isinstance(model, onnx.ModelProto):
            model = onnx.load(model)
        precision_mode = kwargs.pop("precision_mode", cls.DEFAULT_PRECISION_MODE)
        options = {k: kwargs[k] for k in _COMPILE_OPTIONS if k in kwargs}
        compiled = cann.compile(model, precision_mode=precision_mode, **options)
        return CannRep(compiled, model)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Any = None, **kwargs: Any) -> tuple[Any, ...]:
        """Run one node on ``inputs`` (a list of arrays in the node's input order)."""
        from onnx import helper

        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        arrays = [np.asarray(a) for a in inputs]
        names = [n for n in node.input if n]
        vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
               for n, a in zip(names, arrays)]
        graph = helper.make_graph([node], "run_node", vis, [helper.make_value_info(o, onnx.TypeProto())
                                                            for o in node.output if o])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        inferred = onnx.shape_inference.infer_shapes(m)
        del m.graph.output[:]
        m.graph.output.extend(inferred.graph.output)
        return cls.run_model(m, dict(zip(names, arrays)), device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """``"CPU"``: the simulated AI Core runs on the host CPU (the only device)."""
        try:
            return Device(device).type == DeviceType.CPU
        except Exception:
            return False


prepare = CannBackend.prepare
run_model = CannBackend.run_model
run_node = CannBackend.run_node
supports_device = CannBackend.supports_device
