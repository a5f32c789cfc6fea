"""Every stage's text parses back (DESIGN.md principle 1): the model emitted as graph text, lowered
stage by stage with ``cann-opt`` (weights in sidecar .npz files, or inside the text on stdout),
encodes to the same offline model as the in-process compile, and runs to bit-identical outputs;
``cann-compile`` finishes the pipeline from any stage's text (issue 10, items 14 and 15)."""

import subprocess
import sys

import numpy as np
import onnx
import pytest

import cann
from cann import testing
from cann.codegen.offline import build_offline_model
from cann.compiler import emit, make_context, stage_pipelines
from cann.dialects.weights import parse_module
from cann.passes.tile_search_kb import load as load_kb, shipped_path
from cann.runtime import Model

TILE = "convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 buffers=2},tile-multi-buffer"  # as in the README
ASCEND = "convert-tile-to-ascend,ascend-insert-sync{mode=flags}"
SHIPPED = load_kb(shipped_path("Ascend910")).digest


def _tool(name, *args, stdout=None):
    r = subprocess.run([sys.executable, "-m", f"cann.tools.{name}", *map(str, args)],
                       stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r.stderr
    return r


def _opt(src, dst, pipeline):
    _tool("cann_opt", src, "-p", pipeline, "-o", dst)


def test_stages_through_text_match_in_process_compile(tmp_path, fire_onnx):
    graph_txt = tmp_path / "m.graph.mlir"
    emit(fire_onnx, "graph", graph_txt)
    assert (tmp_path / "m.graph.mlir.npz").is_file()  # large constants are not printed inline
    specs = dict(stage_pipelines("Ascend910", "force_fp16"))  # the emitted graph text ran the "graph" stage
    assert (specs["tile"], specs["ascend"]) == (TILE, ASCEND)
    _opt(graph_txt, tmp_path / "m.tile.mlir", TILE)
    _opt(tmp_path / "m.tile.mlir", tmp_path / "m.ascend.mlir", ASCEND)
    module = parse_module((tmp_path / "m.ascend.mlir").read_text(), make_context(), tmp_path)
    module.verify()
    from_text = Model(build_offline_model(module))
    direct = cann.compile(fire_onnx)
    # locations print as loc("name"), so kernels lowered from text keep their model nodes and work
    assert any(la.work.model_macs for la in from_text.om.launches)
    assert from_text.om == direct.om
    x = testing.random_inputs(onnx.load(fire_onnx))
    a, b = from_text.run(x), direct.run(x)
    for k in b:
        np.testing.assert_array_equal(a[k], b[k])


@pytest.mark.parametrize("redirect", ["stdout", "-o"])
def test_readme_chain_finishes_with_cann_compile(tmp_path, fire_onnx, redirect):
    """The README's chain, each cann-opt step written with `> FILE` or `-o FILE`: every stage's
    file compiles to the same .om as the model, and cann-run gives the same output bytes.
    The stdout text is read back from another directory: it carries its own blobs."""
    graph = tmp_path / "m.graph.mlir"
    _tool("cann_compile", fire_onnx, "--emit", "graph", "-o", graph)
    work = tmp_path / "other"
    work.mkdir()
    tile, ascend = work / "m.tile.mlir", work / "m.ascend.mlir"
    for src, dst, pipeline in ((graph, tile, TILE), (tile, ascend, ASCEND)):
        if redirect == "stdout":
            with open(dst, "w") as f:
                _tool("cann_opt", src, "-p", pipeline, stdout=f)
        else:
            _opt(src, dst, pipeline)
    assert (work / "m.tile.mlir.npz").is_file() == (redirect == "-o")
    direct = tmp_path / "direct.om"
    _tool("cann_compile", fire_onnx, "-o", direct)
    _tool("cann_run", direct, "--output", tmp_path / "direct.npz")
    want = np.load(tmp_path / "direct.npz")
    for stage, src in (("graph", graph), ("tile", tile), ("ascend", ascend)):
        om = tmp_path / f"{stage}.om"
        r = _tool("cann_compile", src, "-o", om)
        # no -O: the stage's IR fixed it; the knowledge base the graph stage read is recorded in its text
        summary, memory = r.stdout.splitlines()  # the summary, then the device memory line
        assert summary.endswith(f"(Ascend910, force_fp16, shipped knowledge base sha256 {SHIPPED[:16]})")
        assert memory.startswith(f"{om}: device memory ") and "(reuse on; " in memory
        assert om.read_bytes() == direct.read_bytes(), stage
        _tool("cann_run", om, "--output", tmp_path / f"{stage}.npz")
        got = np.load(tmp_path / f"{stage}.npz")
        assert sorted(got.files) == sorted(want.files)
        for k in want.files:
            assert got[k].tobytes() == want[k].tobytes(), (stage, k)


def test_node_names_survive_the_text(tmp_path, fire_onnx):
    """tile.fused_nodes (the fusion report) keeps the ONNX node names through cann-opt's text."""
    graph = tmp_path / "g.mlir"
    emit(fire_onnx, "graph", graph)
    _opt(graph, tmp_path / "t.mlir", TILE)
    _opt(tmp_path / "t.mlir", tmp_path / "a.mlir", ASCEND)
    report = cann.compile(tmp_path / "a.mlir").fusion_report
    assert report == cann.compile(fire_onnx).fusion_report
    conv = [k for k in report["kernels"] if k["kernel"] == "conv2d_0"][0]
    assert conv["nodes"] == ["conv1", "conv1_relu"]


def test_text_stage_options_and_errors(tmp_path, fire_onnx):
    tile = tmp_path / "m.tile.mlir"
    emit(fire_onnx, "tile", tile, precision_mode="must_keep_origin_dtype")
    cases = [
        (["--soc_version", "Ascend310"], f"error: --soc_version: {tile} was lowered for tile.soc = 'Ascend910', not 'Ascend310'"),
        (["--precision_mode", "force_fp16"], f"error: --precision_mode: {tile} was lowered for tile.precision_mode = "
                                             "'must_keep_origin_dtype', not 'force_fp16'"),
        (["--input_shape", "data:1,3,16,16"], f"error: --input_shape: does not apply to {tile}: its tile IR is already imported"),
        (["-O0"], f"error: -O: does not apply to {tile}: its tile IR is already imported and optimized"),
        (["--aicore_num", "2"], f"error: --aicore_num: does not apply to {tile}: its tile IR is already lowered"),
        (["--emit", "graph"], f"error: {tile}: holds tile IR, past the requested stage 'graph'"),
    ]
    for flags, line in cases:
        r = subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", str(tile), "-o", str(tmp_path / "o.om"), *flags],
                           capture_output=True, text=True)
        assert r.returncode == 2 and r.stderr.splitlines() == [line], (flags, r.stderr)
    # the recorded options are the ones used; giving the same ones is fine
    m = cann.compile(tile, precision_mode="must_keep_origin_dtype")
    assert m.om.precision_mode == "must_keep_origin_dtype"
    bad = tmp_path / "bad.mlir"
    bad.write_text("builtin.module {\n  %0 = graph.relu %x : tensor<2xf32>\n}\n")
    with pytest.raises(cann.CannError) as e:
        cann.compile(bad)
    assert e.value.lines() == [f"error: {bad}:4:1: values used but not defined: [%x]"]
    empty = tmp_path / "empty.mlir"
    empty.write_text("builtin.module {\n}\n")
    with pytest.raises(cann.CannError) as e:
        cann.compile(empty)
    assert e.value.lines() == ["error: <module>: no graph, tile or ascend operation: not the IR of a cann stage"]


def test_an_edited_ascend_ir_compiles_and_runs(tmp_path):
    """A compiler developer's loop: emit the ascend IR, edit an instruction, compile the text to .om."""
    from onnx import TensorProto as T, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [1, 64])])
    model = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    ascend = tmp_path / "relu.ascend.mlir"
    _tool("cann_compile", model, "--precision_mode", "force_fp32", "--emit", "ascend", "-o", ascend)
    text = ascend.read_text()
    assert text.count("ascend.vrelu ") == 1
    ascend.write_text(text.replace("ascend.vrelu ", "ascend.vabs "))  # |x| instead of max(x, 0)
    om = tmp_path / "abs.om"
    _tool("cann_compile", ascend, "-o", om)
    x = np.random.default_rng(0).standard_normal((1, 64), dtype=np.float32)
    np.testing.assert_array_equal(cann.load(om).run({"x": x})["y"], np.abs(x))
