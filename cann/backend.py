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
from cann.errors import CannError, constants_needed

__all__ = ["CannBackend", "CannRep", "prepare", "run_model", "run_node", "supports_device"]

_COMPILE_OPTIONS = ("soc_version", "input_shape", "out_nodes", "opt_level", "fusion_switch_file")


class CannRep(BackendRep):
    """A model prepared for the simulated AI Core; ``run`` simulates one inference.

    Most models compile once, in :meth:`CannBackend.prepare`. Two kinds are *specialized*
    instead, compiled on the first ``run`` that needs them and cached per specialization (the way
    shape-specializing runtimes such as XLA or TVM's VM treat them), because ``cann`` compiles
    static offline models (ATC's rule: static shapes, constant weights):

    * inputs with symbolic or missing dimensions take the shapes of the arrays given to ``run``
      (what ``input_shape=`` does at compile time);
    * graph inputs the compiler needs as constants (``Diagnostic.needs_constant``: a Reshape
      ``shape``, reduction ``axes``, Resize ``scales`` / ``sizes``, Pad ``pads``, a Conv / Gemm
      weight) are compiled in with the values given to ``run``. Only those inputs are folded;
      every other input stays a runtime tensor computed on the device.
    """

    #: compiled specializations kept per prepared model (least recently compiled dropped first)
    MAX_SPECIALIZATIONS = 16

    def __init__(self, onnx_model: onnx.ModelProto, compile_options: dict[str, Any],
                 model: "cann.runtime.Model | None" = None, constant_inputs: tuple[str, ...] = ()):
        self.onnx_model = onnx_model
        self.compile_options = dict(compile_options)
        init = {i.name for i in onnx_model.graph.initializer}
        self.input_names = [i.name for i in onnx_model.graph.input if i.name not in init]
        self.output_names = [o.name for o in onnx_model.graph.output]
        fixed = set(self.compile_options.get("input_shape") or {})
        #: inputs whose shapes come from the arrays given to ``run``
        self.dynamic_inputs = tuple(i.name for i in onnx_model.graph.input
                                    if i.name not in init and i.name not in fixed and not _static(i))
        #: graph inputs compiled in as constants (grows when a compile asks for more)
        self.constant_inputs = tuple(constant_inputs)
        self._cache: dict[tuple, "cann.runtime.Model"] = {}
        #: the model compiled by ``prepare`` (None when it is specialized per ``run``)
        self.model = model

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``inputs``: a list/tuple in graph-input order, a dict by name, or one array.
        Returns the outputs in graph-output order (a namedtuple when the names allow it).

        Raises:
            CannError: a missing input, a shape/dtype mismatch, or (for a specialized model) a
                problem compiling it for these inputs.
        """
        if isinstance(inputs, dict):
            feeds = {k: np.asarray(v) for k, v in inputs.items()}
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            feeds = {k: np.asarray(v) for k, v in zip(self.input_names, inputs)}
        model = self.model if self.model is not None else self._specialized(feeds)
        declared = {t.name: np.dtype(t.dtype) for t in model.inputs}
        feeds = {k: _conform(v, declared.get(k)) for k, v in feeds.items() if k not in self.constant_inputs}
        out = model.run(feeds)
        values = [out[n] for n in self.output_names]
        try:
            return namedtuple("Outputs", self.output_names)(*values)  # type: ignore[misc]
        except ValueError:  # names that are not identifiers
            return tuple(values)

    def _specialized(self, feeds: dict[str, np.ndarray]) -> "cann.runtime.Model":
        from cann.errors import CannError

        missing = [n for n in (*self.dynamic_inputs, *self.constant_inputs) if n not in feeds]
        if missing:
            raise CannError(missing[0], "input not given (the model is specialized on its shape or value)")
        while True:
            key = (tuple((n, feeds[n].shape) for n in self.dynamic_inputs),
                   tuple((n, feeds[n].dtype.str, feeds[n].shape, feeds[n].tobytes()) for n in self.constant_inputs))
            if key in self._cache:
                return self._cache[key]
            try:
                model = cann.compile(_specialize(self.onnx_model, feeds, self.dynamic_inputs, self.constant_inputs),
                                     **self.compile_options)
            except CannError as e:
                more = constants_needed(e, self.input_names, self.constant_inputs)
                if not more or any(n not in feeds for n in more):
                    raise
                self.constant_inputs = self.constant_inputs + more
                continue
            if len(self._cache) >= self.MAX_SPECIALIZATIONS:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = model
            return model


def _static(vi: onnx.ValueInfoProto) -> bool:
    """False for a tensor input with a symbolic, unknown or missing shape (sequences, maps and
    optionals count as static: the importer reports them)."""
    t = vi.type
    if not t.HasField("tensor_type"):
        return True
    if not t.tensor_type.HasField("shape"):
        return False
    return all(d.HasField("dim_value") for d in t.tensor_type.shape.dim)


def _conform(a: np.ndarray, want: np.dtype | None) -> np.ndarray:
    """Float feeds of another float width take the declared dtype (ONNX runners pass float64 lists)."""
    if want is not None and a.dtype != want and a.dtype.kind == want.kind == "f":
        return a.astype(want)
    return a


def _specialize(model: onnx.ModelProto, feeds: dict[str, np.ndarray], dynamic: tuple[str, ...],
                constant: tuple[str, ...]) -> onnx.ModelProto:
    """A copy of ``model`` with the ``dynamic`` inputs' shapes and the ``constant`` inputs' values
    taken from ``feeds`` (the latter as initializers; they stay listed as graph inputs, valid at
    every IR version)."""
    from onnx import numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.input:
        if vi.name in dynamic:
            tt = vi.type.tensor_type
            tt.ClearField("shape")
            tt.shape.SetInParent()
            for d in feeds[vi.name].shape:
                tt.shape.dim.add().dim_value = int(d)
    for n in constant:
        # np.array, not np.ascontiguousarray: the latter makes a 0-d array 1-d
        m.graph.initializer.append(numpy_helper.from_array(np.array(feeds[n], order="C"), n))
    return m


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
        options["precision_mode"] = precision_mode
        rep = CannRep(model, options)
        tensors_only = all(i.type.HasField("tensor_type") for i in model.graph.input)
        if rep.dynamic_inputs and tensors_only:  # compiled per input shapes, on the first run
            return rep
        try:
            rep.model = cann.compile(model, **options)
        except CannError as e:
            more = constants_needed(e, rep.input_names, ())
            if not more:
                raise
            rep.constant_inputs = more  # compiled per values of these inputs, on the first run
        return rep

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
