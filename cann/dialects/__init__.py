"""The project's dialects: graph (tensor level), tile (kernels over buffers), ascend (instructions).

``ALL_DIALECTS`` maps a dialect name to a factory, the form ``xDSLOptMain`` and
``xdsl.context.Context.register_dialect`` take (dialects load only when used).
"""

from collections.abc import Callable

from xdsl.ir import Dialect

from cann.dialects.weights import install_resource_key_fix

# dense_resource<KEY> parses as exactly KEY (weights.py): installed once, before any dialect parses
install_resource_key_fix()


def _graph() -> Dialect:
    from cann.dialects.graph import Graph

    return Graph


def _tile() -> Dialect:
    from cann.dialects.tile import Tile

    return Tile


def _ascend() -> Dialect:
    from cann.dialects.ascend import Ascend

    return Ascend


ALL_DIALECTS: dict[str, Callable[[], Dialect]] = {"graph": _graph, "tile": _tile, "ascend": _ascend}
