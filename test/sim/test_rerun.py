"""Runs of one compiled model reuse the simulator's caches (decoded programs, launch plans, mmad's
float32 operands and the float32 weights kept across runs, img2col results, schedules): every run
must still be that of a fresh simulator."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import cann
from cann.sim import executor


def _conv_model() -> onnx.ModelProto:
    # 56x56: several M tiles per core, so mmad multiplies one loaded B by several A tiles (its float32
    # B cache is hit)
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.uniform(-0.2, 0.2, (64, 32, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.uniform(-0.2, 0.2, 64).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])],
        "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 32, 56, 56))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 64, 56, 56))], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_runs_of_one_model_are_those_of_a_fresh_simulator():
    onnx_model = _conv_model()
    model = cann.compile(onnx_model, precision_mode="force_fp16")
    rng = np.random.default_rng(1)
    x1, x2 = (rng.standard_normal((1, 32, 56, 56)).astype(np.float32) for _ in range(2))
    y1 = model.run({"x": x1})["y"]
    cycles = model.last_run.cycles
    y2 = model.run({"x": x2})["y"]
    assert model.last_run.cycles == cycles  # timing does not depend on values
    y1_again = model.run({"x": x1})["y"]
    assert model.last_run.cycles == cycles
    np.testing.assert_array_equal(y1_again, y1)
    assert not np.array_equal(y1, y2)
    executor._IDLE.clear()  # new cores: nothing kept from the runs above
    np.testing.assert_array_equal(model.run({"x": x2})["y"], y2)
    assert model.last_run.cycles == cycles
    sess = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    for x, y in ((x1, y1), (x2, y2)):
        ref = sess.run(["y"], {"x": x})[0]
        np.testing.assert_allclose(y, ref, rtol=2e-2, atol=2e-2)
