"""Generated operator tests in Huawei msopst's format (``cann-opst``, docs/opst.md).

:mod:`cann.opst.cases` loads and expands msopst case files, :mod:`cann.opst.compare` is msopst's
pass rule, :mod:`cann.opst.run` runs sub-cases on the simulator and writes ``st_report.json``,
:mod:`cann.opst.create` writes a starting case file from an ONNX schema.
"""
