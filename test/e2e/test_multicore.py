"""SPMD kernels on several AI cores: ResNet-50 light (generated weights) on Ascend910 and Ascend310
with block_dim > 1 still matches onnxruntime, and simulated cycles fall as cores are added."""

import numpy as np
import pytest

import cann
from cann import testing


@pytest.fixture(scope="module")
def resnet():
    m = testing.test_model("resnet50")
    x = testing.random_inputs(m)
    return m, x, testing.run_onnxruntime(m, x)


def _check(model, x, ref):
    out = model.run(x)
    for k, r in ref.items():
        err = np.linalg.norm((out[k] - r).ravel()) / np.linalg.norm(r.ravel())
        assert err <= 1e-2, f"{k}: rel_l2 {err:.3g}"
        assert out[k].argmax() == r.argmax()
    return model.last_run.cycles


@pytest.mark.slow
@pytest.mark.parametrize("soc,cores", [("Ascend910", 32), ("Ascend310", 2)])
def test_resnet50_multicore_matches_onnxruntime(resnet, soc, cores):
    m, x, ref = resnet
    model = cann.compile(m, soc_version=soc)
    assert max(k.block_dim for k in model.om.kernels) == cores
    _check(model, x, ref)


@pytest.mark.slow
def test_cycles_fall_as_cores_are_added(resnet):
    m, x, ref = resnet
    cycles = [_check(cann.compile(m, aicore_num=n), x, ref) for n in (1, 4, 32)]
    assert cycles[0] > cycles[1] > cycles[2], cycles


def test_aicore_num_beyond_the_soc_is_an_error():
    with pytest.raises(cann.CannError, match="3 cores requested; Ascend310 has 2"):
        cann.compile(testing.light_model_path("squeezenet"), soc_version="Ascend310", aicore_num=3)


@pytest.mark.slow
def test_resnet50_trace_is_valid_chrome_trace_json(resnet, tmp_path):
    import json

    from cann.sim.profile import write_trace

    m, x, ref = resnet
    model = cann.compile(m, aicore_num=4)
    _check(model, x, ref)
    path = tmp_path / "resnet50.json"
    write_trace(model.last_run, path)
    events = json.loads(path.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert spans and all(e["dur"] > 0 and e["ts"] >= 0 for e in spans)
    tracks = {(e["pid"], e["args"]["name"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert tracks == {(core, pipe) for core in range(4) for pipe in ("S", "V", "M", "MTE1", "MTE2", "MTE3")}
    # the spans end when the model's simulated time does
    assert max(e["ts"] + e["dur"] for e in spans) == pytest.approx(model.last_run.cycles / 1000.0)
