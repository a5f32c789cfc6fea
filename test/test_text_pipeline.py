"""Every stage's text parses back (DESIGN.md principle 1): the model emitted as graph text, lowered
stage by stage with ``cann-opt`` (weights in sidecar .npz files), encodes to the same offline model
as the in-process compile, and runs to bit-identical outputs."""

import subprocess
import sys
from dataclasses import replace

import numpy as np

import cann
from cann import testing
from cann.codegen.offline import build_offline_model
from cann.codegen.om import LaunchWork
from cann.compiler import emit, make_context, stage_pipelines
from cann.dialects.weights import parse_module
from cann.runtime import Model


def _opt(src, dst, pipeline):
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_opt", str(src), "-p", pipeline, "-o", str(dst)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_stages_through_text_match_in_process_compile(tmp_path, fire_onnx):
    graph_txt = tmp_path / "m.graph.mlir"
    emit(fire_onnx, "graph", graph_txt)
    assert (tmp_path / "m.graph.mlir.npz").is_file()  # large constants are not printed inline
    specs = dict(stage_pipelines("Ascend910", "force_fp16"))  # the emitted graph text ran the "graph" stage
    tile_spec, ascend_spec = specs["tile"], specs["ascend"]
    _opt(graph_txt, tmp_path / "m.tile.mlir", tile_spec)
    _opt(tmp_path / "m.tile.mlir", tmp_path / "m.ascend.mlir", ascend_spec)
    module = parse_module((tmp_path / "m.ascend.mlir").read_text(), make_context(), tmp_path)
    module.verify()
    from_text = Model(build_offline_model(module))
    direct = cann.compile(fire_onnx)
    # text IR prints no locations, so the kernels lowered from text do not know their model nodes:
    # their launches carry no model work (the profile's ideal bound); everything else is identical
    assert all(la.work == LaunchWork() for la in from_text.om.launches)
    assert any(la.work.model_macs for la in direct.om.launches)
    assert from_text.om == replace(direct.om, launches=tuple(replace(la, work=LaunchWork())
                                                             for la in direct.om.launches))
    x = testing.random_inputs(__import__("onnx").load(fire_onnx))
    a, b = from_text.run(x), direct.run(x)
    for k in b:
        np.testing.assert_array_equal(a[k], b[k])
