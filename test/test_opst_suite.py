"""The generated operator suite: every msopst case file under test/opst/ (the operators of the light
models shipped by onnx, onnx/backend/test/data/light: Add, AveragePool, BatchNormalization, Concat,
ConstantOfShape, Conv, Dropout, Gemm, GlobalAveragePool, LRN, MaxPool, Mul, Relu, Reshape, Softmax,
Sum, Transpose, Unsqueeze; plus MatMul, Flatten, Clip) runs on the simulator and passes msopst's
rule against onnx's reference."""

import json
from pathlib import Path

import onnx
import pytest

from cann.opst.cases import expand_file
from cann.opst.run import run_case

SUITE = sorted((Path(__file__).parent / "opst").glob("*.json"))
LIGHT = sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("*.onnx"))


def test_suite_covers_light_model_operators():
    light_ops = {n.op_type for p in LIGHT for n in onnx.load(p, load_external_data=False).graph.node}
    assert len(LIGHT) == 9 and len(light_ops) == 18
    ops = {c["op"] for f in SUITE for c in json.loads(f.read_text())}
    assert light_ops <= ops, sorted(light_ops - ops)


@pytest.mark.parametrize("path", SUITE, ids=[p.stem for p in SUITE])
def test_case_file(path):
    for case in expand_file(path):
        r = run_case(case, seed=0)
        assert r.ok, (r.name, r.stages)
