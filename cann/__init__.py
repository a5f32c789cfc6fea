"""cann: an MLIR-style compiler for a modeled Ascend AI Core, built on xDSL.

Python API::

    import cann
    model = cann.compile("model.onnx", soc_version="Ascend910", precision_mode="force_fp16")
    outputs = model.run({"data_0": x})      # dict[str, np.ndarray] -> dict[str, np.ndarray]
    model.save("model.om")
    model = cann.load("model.om")
"""

from cann.compiler import compile
from cann.errors import CannError, CannWarning, FloatOverflowWarning
from cann.runtime import Model, load

__all__ = ["compile", "load", "Model", "CannError", "CannWarning", "FloatOverflowWarning"]
__version__ = "0.1.0"
