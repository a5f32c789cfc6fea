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


def main_function(module, where: str):
    """The entry function ``func.func @main`` of ``module`` (a ``builtin.module``).

    Raises:
        CannError: the module has none, located at ``where`` (a pass or stage name) and naming the
            functions it does define.
    """
    from xdsl.dialects import func

    from cann.errors import CannError

    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    for f in funcs:
        if f.sym_name.data == "main":
            return f
    found = ", ".join(f"@{f.sym_name.data}" for f in funcs)
    raise CannError(where, "the module has no func.func @main (the entry function must be named @main; "
                           + (f"it defines {found})" if found else "it defines no function)"))
