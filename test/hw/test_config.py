"""SoC descriptions: --soc_version (and an .om's soc_version) is a name from cann/hw/socs/, never a
path; a malformed description is a one-line CannError at the file, never a tomllib traceback."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cann.errors import CannError
from cann.hw import config

KNOWN = "(known: Ascend310, Ascend910, Ascend910B1)"


@pytest.mark.parametrize("name, message", [
    ("../../elsewhere/bad", f"SoC '../../elsewhere/bad' is a path, not a name {KNOWN}"),
    ("socs/Ascend910", f"SoC 'socs/Ascend910' is a path, not a name {KNOWN}"),
    ("..\\Ascend910", f"SoC '..\\Ascend910' is a path, not a name {KNOWN}"),
    ("/etc/passwd", f"SoC '/etc/passwd' is a path, not a name {KNOWN}"),
    ("Ascend910.toml", f"unknown SoC 'Ascend910.toml' {KNOWN}"),
    ("ascend910", f"unknown SoC 'ascend910' {KNOWN}"),
    ("", f"unknown SoC '' {KNOWN}"),
    ("Ascend910\0", f"unknown SoC 'Ascend910\0' {KNOWN}"),
])
def test_soc_version_is_a_name_not_a_path(name, message):
    with pytest.raises(CannError) as e:
        config.load_soc(name)
    assert [(d.location, d.message) for d in e.value.diagnostics] == [("--soc_version", message)]


def test_a_path_to_an_existing_description_elsewhere_is_not_read(tmp_path):
    # a valid-looking description outside cann/hw/socs/, named relative to it: refused, not read
    (tmp_path / "bad.toml").write_text("this is [ not toml")
    rel = os.path.relpath(tmp_path / "bad", config._SOC_DIR)
    with pytest.raises(CannError, match="is a path, not a name"):
        config.load_soc(rel)
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", "examples/squeezenet.onnx", "--soc_version",
                        rel, "-o", str(tmp_path / "x.om")], capture_output=True, text=True,
                       cwd=Path(__file__).parents[2])
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"error: --soc_version: SoC '{rel}' is a path, not a name {KNOWN}"]
    assert not (tmp_path / "x.om").exists()


def test_every_shipped_description_loads_with_its_memory_and_launch_bounds():
    for name, gm in (("Ascend910", 32 << 30), ("Ascend310", 8 << 30), ("Ascend910B1", 64 << 30)):
        spec = config.load_soc(name)
        assert (spec.gm_bytes, spec.max_block_dim) == (gm, 65535)


def test_every_shipped_description_has_its_l2():
    # ascend-core.md §2.1 (910A 32 MB, 910B1 192 MB), §2.4 rates (ini stub l2 128, 910B1 l2_read_rate 110);
    # the 310's 8 MiB is an assumption
    assert {n: config.load_soc(n).l2 for n in config.available_socs()} == {
        "Ascend910": config.L2Spec(32 << 20, 128), "Ascend310": config.L2Spec(8 << 20, 128),
        "Ascend910B1": config.L2Spec(192 << 20, 110)}


GOOD = (config._SOC_DIR / "Ascend910.toml").read_text()


@pytest.mark.parametrize("text, message", [
    ("this is [ not toml", "invalid SoC description: Expected '=' after a key in a key/value pair (at line 1, column 6)"),
    (GOOD.replace("gm_bytes", "gm_bytez"), "invalid SoC description: missing key 'gm_bytes'"),
    (GOOD.replace("max_block_dim = 65535", "max_block_dim = 0"),
     "invalid SoC description: gm_bytes and max_block_dim must be >= 1"),
    (GOOD.replace("size = 65536,", 'size = "64K",', 1),
     "invalid SoC description: buffers.l0a.size must be a non-negative integer, got '64K'"),
    (GOOD.replace("m0 = 16", "m0 = -16"), "invalid SoC description: cube.m0 must be a non-negative integer, got -16"),
    (GOOD.replace("[sync]\n", "sync = 3\n[syncx]\n"), "invalid SoC description: LatencySpec.__init__() got an unexpected keyword argument 'sync'"),
    (GOOD.replace("clock_mhz = 1000", "clock_mhz = [1]"),
     "invalid SoC description: int() argument must be a string, a bytes-like object or a real number, not 'list'"),
    (GOOD.replace("\n[l2]", "\n[l2x]"), "invalid SoC description: missing key 'l2'"),
    (GOOD.replace("size = 33554432", "size = 0"), "invalid SoC description: l2.size and l2.rate must be > 0"),
    (GOOD.replace("rate = 128", 'rate = "fast"'),
     "invalid SoC description: l2.rate must be a non-negative integer, got 'fast'"),
    (GOOD.replace("rate = 128", "rate = -128"), "invalid SoC description: l2.rate must be a non-negative integer, got -128"),
    (GOOD.replace("rate = 128", "rate = 128\nways = 16"),
     "invalid SoC description: L2Spec.__init__() got an unexpected keyword argument 'ways'"),
    (b"\xff\xfe".decode("latin-1"), None),
])
def test_malformed_descriptions_are_one_line_errors(tmp_path, monkeypatch, text, message):
    socs = tmp_path / "socs"
    socs.mkdir()
    (socs / "Broken.toml").write_text(text, encoding="latin-1" if message is None else "utf-8")
    monkeypatch.setattr(config, "_SOC_DIR", socs)
    config._known_socs.cache_clear()
    config._load.cache_clear()
    try:
        with pytest.raises(CannError) as e:
            config.load_soc("Broken")
    finally:
        config._known_socs.cache_clear()
        config._load.cache_clear()
    [d] = e.value.diagnostics
    assert d.location == str(socs / "Broken.toml")
    if message is None:  # not UTF-8
        assert d.message.startswith("invalid SoC description: 'utf-8' codec can't decode byte 0xff")
    else:
        assert d.message == message
