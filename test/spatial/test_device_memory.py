"""Device memory (issue 15 item 1): a model whose peak global memory (the .om's gm_size) exceeds one
device fails cann-compile with one line naming both numbers, exit 2, nothing written; --device-memory
overrides the SoC's capacity."""

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from cann.errors import CannError
from cann.hw.config import load_soc
from cann.tools.cann_compile import check_device_memory


def conv_model(hw: int = 16) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) / np.sqrt(27)).astype(np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    g = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, hw, hw])], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def cann_compile(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_ascend910_has_32_gib():
    assert load_soc("Ascend910").gm_bytes == 32 * 2**30


def test_check_device_memory_message():
    check_device_memory("m.onnx", 32 * 2**30, "Ascend910")  # exactly full: fits
    with pytest.raises(CannError) as e:
        check_device_memory("m.onnx", 32 * 2**30 + 1, "Ascend910")
    assert e.value.lines() == [
        "error: m.onnx: needs 34359738369 bytes of device memory (peak gm_size, 32 GiB), more than one device's "
        "34359738368 bytes (Ascend910's gm_bytes, 32 GiB); split the image over devices (--spatial-split RxC) "
        "or use a smaller input"]
    with pytest.raises(CannError, match=r"more than one device's 1000 bytes \(--device-memory"):
        check_device_memory("m.onnx", 1001, "Ascend910", 1000)


def test_cli_fails_when_the_model_does_not_fit(tmp_path):  # needs the compiler
    onnx.save(conv_model(), tmp_path / "m.onnx")
    ok = cann_compile("m.onnx", "-o", "big.om", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    from cann.codegen.om import read_om

    gm = read_om(tmp_path / "big.om").gm_size
    assert gm > 0
    r = cann_compile("m.onnx", "--device-memory", gm - 1, "-o", "small.om", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [
        f"error: m.onnx: needs {gm} bytes of device memory (peak gm_size, {gm / 2**30:.3g} GiB), more than one "
        f"device's {gm - 1} bytes (--device-memory, {(gm - 1) / 2**30:.3g} GiB); split the image over devices "
        "(--spatial-split RxC) or use a smaller input"]
    assert not (tmp_path / "small.om").exists()
    r = cann_compile("m.onnx", "--device-memory", gm, "-o", "fits.om", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "fits.om").read_bytes() == (tmp_path / "big.om").read_bytes()


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "lots"])
def test_cli_rejects_a_bad_capacity(tmp_path, value):
    onnx.save(conv_model(), tmp_path / "m.onnx")
    r = cann_compile("m.onnx", "--device-memory", value, "-o", "m.om", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"error: --device-memory: '{value}': a whole number of bytes, at least 1"]
    assert not (tmp_path / "m.om").exists()


def test_cli_rejects_capacity_with_emit(tmp_path):
    onnx.save(conv_model(), tmp_path / "m.onnx")
    r = cann_compile("m.onnx", "--device-memory", "100", "--emit", "graph", "-o", "-", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["error: --device-memory: applies to an .om (the model's gm_size), not to --emit"]
