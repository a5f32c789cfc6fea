# lit configuration for the cann test suite: lit collects the .mlir files, pytest the test_*.py.
# Run: lit -v test   (tools are taken from the running python's bin directory: cann-opt, filecheck)
import os
import sys

import lit.formats

config.name = "cann"
config.suffixes = [".mlir"]
config.test_format = lit.formats.ShTest()
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["Inputs"]

_bin = os.path.dirname(sys.executable)
config.environment["PATH"] = _bin + os.pathsep + os.environ.get("PATH", "")
for _var in ("HOME", "TMPDIR", "PYTHONPATH"):  # PYTHONPATH: a worktree tests its own cann
    if _var in os.environ:
        config.environment[_var] = os.environ[_var]
