"""cann: an MLIR-style compiler for a modeled Ascend AI Core, built on xDSL.

Python API::

    import cann
    model = cann.compile("model.onnx", soc_version="Ascend910", precision_mode="force_fp16")
    outputs = model.run({"data_0": x})      # dict[str, np.ndarray] -> dict[str, np.ndarray]
    model.save("model.om")
    model = cann.load("model.om")
    cann.tune("model.onnx", kb="model.kb.json")   # operator tuning: measured tilings into a knowledge base
    model = cann.compile("model.onnx", kb="model.kb.json")

Mixed programming (docs/mixed-programming.md)::

    y = cann.op("Conv", x, w, strides=[2, 2])    # one ONNX operator on the simulated core -> np.ndarray

    @cann.jit                                    # the whole function as one model, compiled per signature
    def block(x, w):
        return cann.op("Relu", cann.op("Conv", x, w, pads=[1, 1, 1, 1]))
"""

from cann.autotune import tune
from cann.compiler import compile
from cann.errors import CannError, CannWarning, FloatOverflowWarning
from cann.mixed import last_run, op
from cann.mixed_jit import jit
from cann.runtime import Model, load

__all__ = ["compile", "tune", "load", "Model", "op", "jit", "last_run", "CannError", "CannWarning", "FloatOverflowWarning"]
__version__ = "0.1.0"
