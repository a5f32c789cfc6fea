// RUN: cann-opt %s -p 'convert-graph-to-tile' | filecheck %s --check-prefix=ONE
// RUN: cann-opt %s -p 'convert-graph-to-tile{buffers=2}' | filecheck %s --check-prefix=TWO
// RUN: cann-opt %s -p 'convert-graph-to-tile{buffers=3}' | filecheck %s --check-prefix=THREE
// RUN: not cann-opt %s -p 'convert-graph-to-tile{buffers=4}' 2>&1 | filecheck %s --check-prefix=ERR

// Option buffers: the tilings leave room for that many copies of each refilled UB / L0A / L0B tile
// (tile-multi-buffer then multi-buffers them). A Relu of 262144 fp16 elements needs 2 UB bytes per
// element for its input and 2 for its output (+1 of slack): 253952 usable bytes / 5 gives chunks of
// 50688 elements, half of that budget 25344, a third 16896 (multiples of 256 elements); smaller chunks
// spread over more cores.
// ONE:   func.func @relu_0({{.*}}) attributes {tile.kernel, tile.block_dim = 6 : i64, tile.tiling = {block_dim = 6 : i64, chunk = 50688 : i64}}
// ONE-COUNT-2: tile.alloc : memref<50688xf16, #tile<space ub>>
// TWO:   func.func @relu_0({{.*}}) attributes {tile.kernel, tile.block_dim = 11 : i64, tile.tiling = {block_dim = 11 : i64, chunk = 25344 : i64}}
// TWO-COUNT-2: tile.alloc : memref<25344xf16, #tile<space ub>>
// THREE: tile.tiling = {block_dim = 16 : i64, chunk = 16896 : i64}
// ERR:   error: convert-graph-to-tile: buffers = 4: 1, 2 or 3 copies of a tile

builtin.module {
  func.func @main(%0: tensor<1x262144xf16> {graph.name = "x"}) -> (tensor<1x262144xf16> {graph.name = "y"}) {
    %1 = graph.relu %0 : tensor<1x262144xf16> loc("relu")
    func.return %1 : tensor<1x262144xf16> loc("return")
  }
}
