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
