// tile-search-kb records a knowledge base's tiling on the graph ops of its signature (the last
// matching entry wins), and convert-graph-to-tile applies it.
// RUN: cann-opt %s -p 'tile-search-kb{kb="%S/inputs/kb.json" soc=Ascend910 precision_mode=force_fp16}' | filecheck %s
// RUN: cann-opt %s -p 'tile-search-kb{kb="%S/inputs/kb.json" soc=Ascend910 precision_mode=force_fp16},convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' | filecheck %s --check-prefix=TILE
// Must not: another precision mode, or no knowledge base, records nothing.
// RUN: cann-opt %s -p 'tile-search-kb{kb="%S/inputs/kb.json" soc=Ascend910 precision_mode=must_keep_origin_dtype}' | filecheck %s --check-prefix=NONE
// RUN: cann-opt %s -p 'tile-search-kb' | filecheck %s --check-prefix=NONE
// A missing file is a one-line error naming it.
// RUN: not cann-opt %s -p 'tile-search-kb{kb="%S/inputs/missing.json"}' 2>&1 | filecheck %s --check-prefix=ERR

// CHECK:      graph.conv2d {{.*}}tile.tiling = {m_blocks = 2 : i64, rows = 1 : i64}
// TILE:       func.func @conv2d_0({{.*}}tile.tiling = {{{.*}}m_blocks = 2 : i64{{.*}}rows = 1 : i64}}
// NONE-NOT:   tile.tiling
// ERR:        error: {{.*}}missing.json: cannot read the knowledge base: No such file or directory

builtin.module {
  func.func @main(%0: tensor<1x3x4x4xf32> {graph.name = "x"}) -> (tensor<1x4x4x4xf32> {graph.name = "z"}) {
    %1 = graph.constant dense<[[[[0.000000e+00]], [[1.000000e-01]], [[2.000000e-01]]], [[[3.000000e-01]], [[4.000000e-01]], [[5.000000e-01]]], [[[6.000000e-01]], [[7.000000e-01]], [[8.000000e-01]]], [[[9.000000e-01]], [[1.000000e+00]], [[1.100000e+00]]]]> : tensor<4x3x1x1xf32>
    %2 = graph.constant dense<[5.000000e-01, -5.000000e-01, 1.000000e+00, 0.000000e+00]> : tensor<4xf32>
    %3 = graph.conv2d %0, %1, %2 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x3x4x4xf32>, tensor<4x3x1x1xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
    func.return %3 : tensor<1x4x4x4xf32>
  }
}
