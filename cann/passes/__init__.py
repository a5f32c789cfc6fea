"""Every pass and conversion of the project, by its pipeline name.

``ALL_PASSES`` maps a pass name (as written in a ``-p`` pipeline) to a factory returning the pass
class; ``cann-opt`` registers all of them next to xDSL's own passes.
"""

from collections.abc import Callable
from importlib import import_module

from xdsl.passes import ModulePass

# pass name -> "module:Class"; imported lazily so that cann-opt starts fast.
_PASSES: dict[str, str] = {
    "convert-graph-to-tile": "cann.lowering.convert_graph_to_tile:ConvertGraphToTilePass",
    "convert-tile-to-ascend": "cann.lowering.convert_tile_to_ascend:ConvertTileToAscendPass",
    "ascend-insert-sync": "cann.passes.ascend_insert_sync:AscendInsertSyncPass",
    "graph-fold-transposes": "cann.passes.graph_fold_transposes:GraphFoldTransposesPass",
    "graph-channel-shuffle": "cann.passes.graph_channel_shuffle:GraphChannelShufflePass",
    "graph-fold-batch-norm": "cann.passes.graph_fold_batch_norm:GraphFoldBatchNormPass",
    "graph-fuse-ub": "cann.passes.graph_fuse_ub:GraphFuseUbPass",
    "graph-recompose": "cann.passes.graph_recompose:GraphRecomposePass",
    "graph-spatial-partition": "cann.passes.graph_spatial_partition:GraphSpatialPartitionPass",
    "tile-multi-buffer": "cann.passes.tile_multi_buffer:TileMultiBufferPass",
    "tile-search-kb": "cann.passes.tile_search_kb:TileSearchKbPass",
    "keep-dtype": "cann.passes.keep_dtype:KeepDtypePass",
    "train-step": "cann.training.train_step:TrainStepPass",
}


def _factory(target: str) -> Callable[[], type[ModulePass]]:
    module, cls = target.split(":")
    return lambda: getattr(import_module(module), cls)


ALL_PASSES: dict[str, Callable[[], type[ModulePass]]] = {name: _factory(t) for name, t in _PASSES.items()}
