// RUN: cann-opt %s -p graph-channel-shuffle | filecheck %s
// The op's verifier: a group that does not divide the channels.
// RUN: not cann-opt %S/Inputs/channel_shuffle_bad_group.mlir -p graph-channel-shuffle 2>&1 | filecheck %s --check-prefix=ERR
// ERR: 'graph.channel_shuffle' group 3 does not divide the 8 channels
// Idempotence: a second run changes nothing (last: lit's built-in diff loses PYTHONPATH for the RUN lines after it).
// RUN: cann-opt %s -p graph-channel-shuffle -o %t.1.mlir
// RUN: cann-opt %t.1.mlir -p graph-channel-shuffle -o %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir

// ShuffleNet's shuffle (Reshape [N, g, C/g, H, W] -> Transpose [0, 2, 1, 3, 4] -> Reshape [N, C, H, W])
// of 136 channels in 4 groups is one graph.channel_shuffle; the reshapes and the transpose are gone.
// CHECK-LABEL: func.func @shufflenet
// CHECK-NEXT:    %[[R:.*]] = graph.relu %x
// CHECK-NEXT:    %[[S:.*]] = graph.channel_shuffle %[[R]] {group = 4 : i64} : tensor<1x136x28x28xf32> -> tensor<1x136x28x28xf32>
// CHECK-NEXT:    func.return %[[S]]
func.func @shufflenet(%x: tensor<1x136x28x28xf32>) -> tensor<1x136x28x28xf32> {
  %r = graph.relu %x : tensor<1x136x28x28xf32>
  %a = graph.reshape %r : tensor<1x136x28x28xf32> -> tensor<1x4x34x28x28xf32>
  %b = graph.transpose %a {perm = array<i64: 0, 2, 1, 3, 4>} : tensor<1x4x34x28x28xf32> -> tensor<1x34x4x28x28xf32>
  %c = graph.reshape %b : tensor<1x34x4x28x28xf32> -> tensor<1x136x28x28xf32>
  func.return %c : tensor<1x136x28x28xf32>
}

// Batch 2, 3 groups, rank 3 (no W axis): still a channel shuffle.
// CHECK-LABEL: func.func @batch2_rank3
// CHECK-NEXT:    %[[S:.*]] = graph.channel_shuffle %x {group = 3 : i64} : tensor<2x24x5xf32> -> tensor<2x24x5xf32>
// CHECK-NEXT:    func.return %[[S]]
func.func @batch2_rank3(%x: tensor<2x24x5xf32>) -> tensor<2x24x5xf32> {
  %a = graph.reshape %x : tensor<2x24x5xf32> -> tensor<2x3x8x5xf32>
  %b = graph.transpose %a {perm = array<i64: 0, 2, 1, 3>} : tensor<2x3x8x5xf32> -> tensor<2x8x3x5xf32>
  %c = graph.reshape %b : tensor<2x8x3x5xf32> -> tensor<2x24x5xf32>
  func.return %c : tensor<2x24x5xf32>
}

// The transpose has another user: the shuffle is formed, the transpose (and its reshape) stay for it.
// CHECK-LABEL: func.func @shared_transpose
// CHECK:         %[[B:.*]] = graph.transpose
// CHECK-NEXT:    %[[S:.*]] = graph.channel_shuffle %x {group = 2 : i64}
// CHECK-NEXT:    func.return %[[S]], %[[B]]
func.func @shared_transpose(%x: tensor<1x8x4x4xf32>) -> (tensor<1x8x4x4xf32>, tensor<1x4x2x4x4xf32>) {
  %a = graph.reshape %x : tensor<1x8x4x4xf32> -> tensor<1x2x4x4x4xf32>
  %b = graph.transpose %a {perm = array<i64: 0, 2, 1, 3, 4>} : tensor<1x2x4x4x4xf32> -> tensor<1x4x2x4x4xf32>
  %c = graph.reshape %b : tensor<1x4x2x4x4xf32> -> tensor<1x8x4x4xf32>
  func.return %c, %b : tensor<1x8x4x4xf32>, tensor<1x4x2x4x4xf32>
}

// Must-not: a transpose of two spatial axes between the reshapes is not a channel shuffle.
// CHECK-LABEL: func.func @spatial_transpose
// CHECK-NOT:     graph.channel_shuffle
// CHECK:         graph.transpose %{{.*}} {perm = array<i64: 0, 1, 2, 4, 3>}
func.func @spatial_transpose(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32> {
  %a = graph.reshape %x : tensor<1x8x4x4xf32> -> tensor<1x2x4x4x4xf32>
  %b = graph.transpose %a {perm = array<i64: 0, 1, 2, 4, 3>} : tensor<1x2x4x4x4xf32> -> tensor<1x2x4x4x4xf32>
  %c = graph.reshape %b : tensor<1x2x4x4x4xf32> -> tensor<1x8x4x4xf32>
  func.return %c : tensor<1x8x4x4xf32>
}

// Must-not: the first reshape splits H, not the channels (the swap moves rows, not channels).
// CHECK-LABEL: func.func @split_rows
// CHECK-NOT:     graph.channel_shuffle
// CHECK:         graph.transpose
func.func @split_rows(%x: tensor<1x4x8x4xf32>) -> tensor<1x4x8x4xf32> {
  %a = graph.reshape %x : tensor<1x4x8x4xf32> -> tensor<1x4x2x4x4xf32>
  %b = graph.transpose %a {perm = array<i64: 0, 2, 1, 3, 4>} : tensor<1x4x2x4x4xf32> -> tensor<1x2x4x4x4xf32>
  %c = graph.reshape %b : tensor<1x2x4x4x4xf32> -> tensor<1x4x8x4xf32>
  func.return %c : tensor<1x4x8x4xf32>
}

// Must-not: the last reshape does not restore the input's shape.
// CHECK-LABEL: func.func @other_shape
// CHECK-NOT:     graph.channel_shuffle
func.func @other_shape(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x16xf32> {
  %a = graph.reshape %x : tensor<1x8x4x4xf32> -> tensor<1x2x4x4x4xf32>
  %b = graph.transpose %a {perm = array<i64: 0, 2, 1, 3, 4>} : tensor<1x2x4x4x4xf32> -> tensor<1x4x2x4x4xf32>
  %c = graph.reshape %b : tensor<1x4x2x4x4xf32> -> tensor<1x8x16xf32>
  func.return %c : tensor<1x8x16xf32>
}

