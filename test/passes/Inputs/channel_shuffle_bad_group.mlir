// A channel shuffle whose group does not divide the channels (graph_channel_shuffle.mlir's ERR).
func.func @bad_group(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32> {
  %s = graph.channel_shuffle %x {group = 3 : i64} : tensor<1x8x4x4xf32> -> tensor<1x8x4x4xf32>
  func.return %s : tensor<1x8x4x4xf32>
}
